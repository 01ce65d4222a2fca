//! `agentls doctor`: what agentls would run with, in words a user can check — the config file it
//! read and from where, the problems in it, whether each agent's command can be found, and the
//! discovery files terminal agents would find (ours and other IDEs', with whether their process
//! is alive), and what each agent does when started (`agent_probe`). It exits non-zero when
//! something would stop agentls from working as configured.
//! `agentls agents` lists the agents agentls knows by name.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use std::collections::BTreeMap;
use std::time::Duration;

use crate::agent_probe::{Probe, probe};
use crate::config::{self, AgentSpec, Layers};

/// What the doctor found.
#[derive(Debug, Clone)]
pub struct Report {
    /// The report, as text for a terminal.
    pub text: String,
    /// How many things are wrong: config problems, and the default agent not found or not
    /// working when started.
    pub troubles: usize,
}

/// `agentls agents`: the agents agentls knows by name, which the config uses (under which
/// name), whether the program that starts each is on this machine, and how to get the rest.
pub fn known_agents_report() -> String {
    let config = Layers::user().load().config;
    let mut out = String::from(
        "Agents agentls knows; `[agents.<name>] use = \"<id>\"` in the config file takes one.\n",
    );
    for (id, agent) in crate::known_agents::all() {
        let configured: Vec<&str> = config
            .agents
            .iter()
            .filter(|(_, spec)| spec.command == agent.command && spec.args == agent.args)
            .map(|(name, _)| name.as_str())
            .collect();
        let configured = match configured.as_slice() {
            [] => String::from("not configured"),
            names => format!("configured as {}", names.join(", ")),
        };
        let found = match find_command(&agent.command) {
            Some(_) => format!("{} found", agent.command),
            None => format!("{} NOT FOUND; needs {}", agent.command, agent.install),
        };
        let _ = writeln!(out, "{id}: {} — {configured}; {found}", agent.name);
        let _ = writeln!(out, "  runs: {} {}", agent.command, agent.args.join(" "));
        let asks = agent.mode.as_deref().unwrap_or("the one it starts in");
        let _ = writeln!(out, "  mode that asks before editing: {asks}");
        if let Some(hint) = &agent.tools_hint {
            let _ = writeln!(out, "  editor tools: {hint}");
        }
    }
    out
}

/// Looks at the config, the agents' commands and the discovery files.
pub fn report() -> Report {
    let path = config::file_path();
    let layers = Layers::user();
    let loaded = layers.load();
    let mut troubles = loaded.problems.len();
    let mut out = String::new();
    let _ = writeln!(out, "agentls {}", env!("CARGO_PKG_VERSION"));
    match (&path, layers.file()) {
        (_, Some(read)) => {
            let _ = writeln!(out, "config file: {} (read)", read.display());
        }
        (Some(path), None) => {
            let _ = writeln!(
                out,
                "config file: {} (not found; using defaults)",
                path.display()
            );
        }
        (None, None) => {
            let _ = writeln!(out, "config file: none (no HOME or XDG_CONFIG_HOME)");
        }
    }
    for problem in &loaded.problems {
        let _ = writeln!(out, "problem: {problem}");
    }
    let config = &loaded.config;
    let default_agent = config.effective_default_agent();
    let _ = writeln!(out, "default agent: {default_agent}");
    let _ = writeln!(
        out,
        "fs.allowOutsideWorkspace: {}",
        config.fs.allow_outside_workspace
    );
    let agents = config.effective_agents();
    let probes = probe_all(&agents);
    for (name, spec) in agents {
        let found = match find_command(&spec.command) {
            Some(path) => format!("found at {}", path.display()),
            None if name == default_agent => {
                troubles += 1;
                "NOT FOUND on PATH: commands that name no agent will fail".to_owned()
            }
            None => "NOT FOUND on PATH".to_owned(),
        };
        let builtin = if config.agents.contains_key(&name) {
            ""
        } else {
            " (built in)"
        };
        let _ = writeln!(
            out,
            "agent {name}{builtin}: {} {:?} ({found})",
            spec.command, spec.args
        );
        for (key, value) in spec.redacted_env() {
            let _ = writeln!(out, "  env {key}={value}");
        }
        let tools = if spec.offers_editor_tools() {
            "on (agentls's MCP server is offered to each of its sessions)"
        } else {
            "off (editorTools = false)"
        };
        let _ = writeln!(out, "  editor tools: {tools}");
        if let Some(probe) = probes.get(&name) {
            let (line, trouble) = describe_probe(probe, &spec);
            let _ = writeln!(out, "  started: {line}");
            troubles += usize::from(trouble && name == default_agent);
        }
    }
    if let Some(dir) = crate::editor::tool_grants::record_dir() {
        write_tool_records(&mut out, &crate::editor::tool_grants::read_records(&dir));
    }
    let _ = writeln!(out, "mcp.enabled: {}", config.mcp.enabled);
    write_discovery_files(&mut out, &crate::mcp::discovery_files());
    match troubles {
        0 => out.push_str("no problems found\n"),
        1 => out.push_str("1 problem found\n"),
        n => {
            let _ = writeln!(out, "{n} problems found");
        }
    }
    Report {
        text: out,
        troubles,
    }
}

/// How long the doctor waits for each of an agent's answers (npx may fetch it first).
const PROBE_LIMIT: Duration = Duration::from_secs(30);

/// Each agent whose command is found, started and asked (all at once, each on a thread).
fn probe_all(agents: &BTreeMap<String, AgentSpec>) -> BTreeMap<String, Probe> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    std::thread::scope(|scope| {
        let started: Vec<_> = agents
            .iter()
            .filter(|(_, spec)| find_command(&spec.command).is_some())
            .map(|(name, spec)| {
                let cwd = &cwd;
                (name, scope.spawn(move || probe(spec, cwd, PROBE_LIMIT)))
            })
            .collect();
        started
            .into_iter()
            .filter_map(|(name, probing)| Some((name.clone(), probing.join().ok()?)))
            .collect()
    })
}

/// What a probe found, in a line, and whether it is a trouble (the agent would not work).
fn describe_probe(probe: &Probe, spec: &AgentSpec) -> (String, bool) {
    let login = known_entry(spec)
        .map(|known| format!(" ({})", known.install))
        .unwrap_or_default();
    match probe {
        Probe::NotStarted(why) => (format!("NOT STARTED: {why}"), true),
        Probe::NoAnswer(why) => (
            format!(
                "started, but NO ANSWER to initialize: {why}; is it an ACP agent (its ACP flag)?"
            ),
            true,
        ),
        Probe::NoSession { agent, why } => (
            format!("{agent} answers, but opened NO SESSION: {why}{login}"),
            true,
        ),
        Probe::Session {
            agent,
            modes,
            current,
        } => {
            let modes_said = match (modes.is_empty(), current) {
                (true, _) => "no modes".to_owned(),
                (false, Some(current)) => {
                    format!("modes {} (starts in {current})", modes.join(", "))
                }
                (false, None) => format!("modes {}", modes.join(", ")),
            };
            match &spec.mode {
                Some(mode) if !modes.contains(mode) => (
                    format!(
                        "{agent} opens a session with {modes_said}: the configured mode {mode:?} is NOT one of them"
                    ),
                    true,
                ),
                Some(mode) => (
                    format!("{agent} opens a session with {modes_said}; mode {mode:?} is set"),
                    false,
                ),
                None => (format!("{agent} opens a session with {modes_said}"), false),
            }
        }
    }
}

/// The known agent `spec` runs, when it is one.
fn known_entry(spec: &AgentSpec) -> Option<&'static crate::known_agents::KnownAgent> {
    crate::known_agents::all()
        .values()
        .find(|known| known.command == spec.command && known.args == spec.args)
}

/// Which agents each agentls process offered its editor tools to, and which used them.
fn write_tool_records(out: &mut String, records: &[crate::editor::tool_grants::Record]) {
    if records.iter().all(|r| r.agents.is_empty()) {
        let _ = writeln!(out, "editor tools: not offered to any agent yet");
    }
    for record in records.iter().filter(|r| !r.agents.is_empty()) {
        let state = if record.alive { "running" } else { "ended" };
        for (agent, used) in &record.agents {
            let _ = writeln!(
                out,
                "editor tools (agentls pid {}, {state}): {agent}: {}",
                record.pid,
                used.describe()
            );
        }
    }
}

/// One line per discovery file: where, whose, for which folders, and whether it is live.
fn write_discovery_files(out: &mut String, found: &[crate::mcp::Found]) {
    if found.is_empty() {
        let _ = writeln!(out, "terminal-agent lockfiles: none");
    }
    for file in found {
        let name = ide_name(&file.contents).unwrap_or("?");
        let folders = workspace_folders(&file.contents).join(", ");
        let pid = file.pid.map_or("?".to_owned(), |p| p.to_string());
        let state = match (file.alive, file.ours) {
            (true, _) => "alive",
            (false, true) => "DEAD (stale; removed when agentls next starts)",
            (false, false) => "DEAD (stale)",
        };
        let _ = writeln!(
            out,
            "lockfile {}: {name}, pid {pid} {state}, folders [{folders}]",
            file.path.display()
        );
    }
}

/// Who wrote a discovery file: `ideName` (lockfiles) or `ideInfo` (the other kind, whose
/// `displayName` is the readable one).
fn ide_name(contents: &serde_json::Value) -> Option<&str> {
    let info = &contents["ideInfo"];
    contents["ideName"]
        .as_str()
        .or_else(|| info["displayName"].as_str())
        .or_else(|| info["name"].as_str())
}

/// The folders a discovery file serves: a `workspaceFolders` list (lockfiles) or a
/// `workspacePath` joined with the path separator (the other kind).
fn workspace_folders(contents: &serde_json::Value) -> Vec<&str> {
    if let Some(list) = contents["workspaceFolders"].as_array() {
        return list.iter().filter_map(|v| v.as_str()).collect();
    }
    contents["workspacePath"]
        .as_str()
        .map(|joined| joined.split(':').filter(|f| !f.is_empty()).collect())
        .unwrap_or_default()
}

/// Where `command` would be found: itself if it contains a slash, else the first match on PATH.
pub fn find_command(command: &str) -> Option<PathBuf> {
    if command.contains('/') {
        let path = Path::new(command);
        return is_executable(path).then(|| path.to_owned());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(command))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_kinds_of_discovery_file_say_who_and_which_folders() {
        let lockfile = serde_json::json!({"ideName": "agentls", "workspaceFolders": ["/a", "/b"]});
        assert_eq!(ide_name(&lockfile), Some("agentls"));
        assert_eq!(workspace_folders(&lockfile), ["/a", "/b"]);
        let other = serde_json::json!({
            "port": 1, "workspacePath": "/a:/b", "authToken": "t",
            "ideInfo": {"name": "agentls", "displayName": "agentls (LSP)"},
        });
        assert_eq!(ide_name(&other), Some("agentls (LSP)"));
        assert_eq!(workspace_folders(&other), ["/a", "/b"]);
        assert_eq!(ide_name(&serde_json::json!({})), None);
    }

    #[test]
    fn finds_sh_on_path_and_not_nonsense() {
        assert!(find_command("sh").is_some());
        assert!(find_command("agentls-no-such-command").is_none());
        assert!(find_command("/bin/sh").is_some());
    }
}
