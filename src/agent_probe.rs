//! `agentls doctor`'s check of one configured agent: started as agentls starts it, does it
//! answer `initialize`, does it open a session (`session/new` in the current folder), and is
//! the mode the config asks for among the session's modes. Plain JSON-RPC lines over the
//! agent's stdio, no editor; the agent (and whatever it started) is killed afterwards.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::config::AgentSpec;

/// What the agent did when started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// It could not be started.
    NotStarted(String),
    /// It did not answer `initialize` (why: it exited, it took too long, it answered an error).
    NoAnswer(String),
    /// It answered `initialize` (as `agent`) but opened no session (why).
    NoSession {
        /// How it named itself.
        agent: String,
        /// What `session/new` got.
        why: String,
    },
    /// It opened a session.
    Session {
        /// How it named itself.
        agent: String,
        /// The session's modes (ids), none when it offers none.
        modes: Vec<String>,
        /// The mode it starts in.
        current: Option<String>,
    },
}

/// Starts `spec` in `cwd` and asks it `initialize` and `session/new`, each within `limit`.
pub fn probe(spec: &AgentSpec, cwd: &Path, limit: Duration) -> Probe {
    let mut command = Command::new(&spec.command);
    command
        .args(&spec.args)
        .envs(&spec.env)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => return Probe::NotStarted(format!("{}: {e}", spec.command)),
    };
    let outcome = converse(&mut child, cwd, limit);
    // The agent and whatever it started (npx runs it as a child) go.
    if let Ok(group) = i32::try_from(child.id()) {
        // SAFETY: kill(2) with a negative pid signals the process group we made it lead.
        unsafe { libc::kill(-group, libc::SIGKILL) };
    }
    let _ = child.wait();
    outcome
}

/// `initialize`, then `session/new`, on the started `child`.
fn converse(child: &mut Child, cwd: &Path, limit: Duration) -> Probe {
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Probe::NoAnswer("its stdio could not be piped".into());
    };
    let (lines, messages) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Ok(message) = serde_json::from_str::<Value>(&line)
                && lines.send(message).is_err()
            {
                break;
            }
        }
    });
    let initialize = json!({
        "protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false},
        "clientInfo": {"name": "agentls doctor", "version": env!("CARGO_PKG_VERSION")},
    });
    let answer = match ask(&mut stdin, &messages, 1, "initialize", initialize, limit) {
        Ok(answer) => answer,
        Err(why) => return Probe::NoAnswer(why),
    };
    let info = &answer["agentInfo"];
    let agent = match (info["title"].as_str(), info["name"].as_str()) {
        (Some(title), _) | (None, Some(title)) => {
            let version = info["version"].as_str().unwrap_or_default();
            format!("{title} {version}").trim().to_owned()
        }
        (None, None) => "an agent that gives no name".to_owned(),
    };
    let new_session = json!({"cwd": cwd, "mcpServers": []});
    match ask(&mut stdin, &messages, 2, "session/new", new_session, limit) {
        Ok(session) => {
            let modes = &session["modes"];
            Probe::Session {
                agent,
                modes: modes["availableModes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|m| m["id"].as_str().map(str::to_owned))
                    .collect(),
                current: modes["currentModeId"].as_str().map(str::to_owned),
            }
        }
        Err(why) => Probe::NoSession { agent, why },
    }
}

/// Sends request `id` and waits at most `limit` for its result; requests the agent makes
/// meanwhile are refused (the doctor serves nothing).
fn ask(
    stdin: &mut ChildStdin,
    messages: &mpsc::Receiver<Value>,
    id: u64,
    method: &str,
    params: Value,
    limit: Duration,
) -> Result<Value, String> {
    let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    writeln!(stdin, "{request}")
        .and_then(|()| stdin.flush())
        .map_err(|e| format!("it stopped reading its input ({e})"))?;
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = match messages.recv_timeout(left) {
            Ok(message) => message,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                return Err(format!("no answer to {method} within {}s", limit.as_secs()));
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(format!("it exited before answering {method}"));
            }
        };
        if message["id"] == json!(id) && message.get("method").is_none() {
            return match message.get("error") {
                Some(error) => Err(error["message"]
                    .as_str()
                    .map_or_else(|| error.to_string(), str::to_owned)),
                None => Ok(message["result"].clone()),
            };
        }
        if let (Some(asked), Some(_)) = (message.get("id"), message.get("method")) {
            let refusal = json!({"jsonrpc": "2.0", "id": asked,
                                 "error": {"code": -32601, "message": "agentls doctor serves nothing"}});
            let _ = writeln!(stdin, "{refusal}").and_then(|()| stdin.flush());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_that_is_no_agent_is_told_apart_from_one_that_cannot_start() {
        let missing = AgentSpec {
            command: "/nonexistent/agent".into(),
            ..AgentSpec::default()
        };
        let limit = Duration::from_secs(5);
        assert!(matches!(
            probe(&missing, Path::new("/"), limit),
            Probe::NotStarted(_)
        ));
        let silent = AgentSpec {
            command: "true".into(),
            ..AgentSpec::default()
        };
        // It ends at once: its input closed, or its output with no answer.
        assert!(matches!(
            probe(&silent, Path::new("/"), limit),
            Probe::NoAnswer(_)
        ));
    }
}
