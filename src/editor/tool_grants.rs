//! The editor's tools granted to agent sessions: agentls offers its MCP server to every ACP
//! session it opens, each with a token of its own. This registry is where the two adapters meet
//! without importing each other: the ACP side takes a [`Grant`] per session and drops it when
//! the session ends (the token dies with it); the MCP side, whose listener the port starts on
//! the first grant, asks whose a presented token is and records each call. What was offered and
//! used is kept for `agentls.status`, the turn's summary and (in a state file per process)
//! `agentls doctor`. It holds no wire types: URLs and tokens are plain data here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::origin::Origin;
use super::token::AuthToken;
use crate::private_files::{PrivateDir, PrivateError};

/// The registry; clone freely.
#[derive(Clone, Default)]
pub struct ToolGrants(Arc<Inner>);

#[derive(Default)]
struct Inner {
    state: Mutex<Registry>,
    record: OnceLock<PathBuf>,
}

impl std::fmt::Debug for ToolGrants {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolGrants").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Registry {
    next: u64,
    live: Vec<Live>,
    agents: BTreeMap<String, AgentUse>,
}

/// A grant in force.
struct Live {
    token: AuthToken,
    holder: Holder,
    /// Calls since the last [`ToolGrants::take_uses`], by tool.
    uses: BTreeMap<String, u64>,
    /// The agent presented the token at least once.
    connected: bool,
}

/// Whose a token is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Identifies the grant while it lives.
    pub id: u64,
    /// The agent's name in the config.
    pub agent: String,
    /// The session it was granted to: what it opens is attributed to it.
    pub origin: Origin,
}

/// How an agent reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Streamable HTTP, with the token in `Authorization: Bearer`.
    Http,
    /// A child process (`agentls mcp-bridge`) that carries stdio to the HTTP server.
    Stdio,
}

impl Transport {
    /// `http` or `stdio`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Stdio => "stdio",
        }
    }
}

/// What one agent was offered and what it used, in this process.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentUse {
    /// The transport of the latest offer.
    pub transport: String,
    /// Sessions it was offered the tools in.
    pub sessions: u64,
    /// Calls by tool.
    pub calls: BTreeMap<String, u64>,
}

impl AgentUse {
    /// "offered over http in 2 sessions; used getDiagnostics ×3" (or "…; not used").
    pub fn describe(&self) -> String {
        let sessions = match self.sessions {
            1 => "1 session".to_owned(),
            n => format!("{n} sessions"),
        };
        let used = if self.calls.is_empty() {
            "not used".to_owned()
        } else {
            format!("used {}", tally(&self.calls))
        };
        format!("offered over {} in {sessions}; {used}", self.transport)
    }
}

/// "getDiagnostics ×2, openFile ×1".
pub fn tally(calls: &BTreeMap<String, u64>) -> String {
    calls
        .iter()
        .map(|(tool, n)| format!("{tool} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A session's right to the tools; dropping it revokes the token.
pub struct Grant {
    grants: ToolGrants,
    id: u64,
    token: AuthToken,
    port: u16,
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grant")
            .field("id", &self.id)
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

/// The environment variable that carries the token to `agentls mcp-bridge` (never an argument:
/// those are visible to every user of the machine).
pub const BRIDGE_TOKEN_VAR: &str = "AGENTLS_MCP_TOKEN";

/// The subcommand that carries an agent's stdio to the HTTP server.
pub const BRIDGE_SUBCOMMAND: &str = "mcp-bridge";

impl Grant {
    /// The arguments of `agentls` that bridge stdio to this grant's server (the token goes in
    /// [`BRIDGE_TOKEN_VAR`]).
    pub fn bridge_args(&self) -> Vec<String> {
        vec![BRIDGE_SUBCOMMAND.to_owned(), self.url()]
    }

    /// Where the MCP server answers.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// The token the agent must present.
    pub fn token(&self) -> &AuthToken {
        &self.token
    }

    /// The session is known now (its id came with the answer to `session/new`).
    pub fn bind(&self, origin: Origin) {
        let mut state = self.grants.lock();
        if let Some(live) = state.live.iter_mut().find(|l| l.holder.id == self.id) {
            live.holder.origin = origin;
        }
    }
}

impl Drop for Grant {
    fn drop(&mut self) {
        self.grants.lock().live.retain(|l| l.holder.id != self.id);
    }
}

impl ToolGrants {
    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.0.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps what was offered and used in `path` (for `agentls doctor`), rewritten on change.
    pub fn keep_record_at(&self, path: PathBuf) {
        let _ = self.0.record.set(path);
    }

    /// A grant of the tools to `agent`'s session `origin`, reached over `transport` at the
    /// listener on `port`.
    pub fn grant(
        &self,
        port: u16,
        agent: &str,
        origin: Origin,
        transport: Transport,
    ) -> Result<Grant, String> {
        let token = AuthToken::generate().map_err(|e| format!("no random token: {e}"))?;
        let id = {
            let mut state = self.lock();
            state.next += 1;
            let id = state.next;
            state.live.push(Live {
                token: token.clone(),
                holder: Holder {
                    id,
                    agent: agent.to_owned(),
                    origin,
                },
                uses: BTreeMap::new(),
                connected: false,
            });
            let used = state.agents.entry(agent.to_owned()).or_default();
            used.transport = transport.as_str().to_owned();
            used.sessions += 1;
            id
        };
        self.write_record();
        Ok(Grant {
            grants: self.clone(),
            id,
            token,
            port,
        })
    }

    /// Whose `offered` is, if it is a live token (each compared in constant time).
    pub fn holder(&self, offered: &str) -> Option<Holder> {
        let state = self.lock();
        let mut found = None;
        for live in &state.live {
            if live.token.matches(offered) {
                found = Some(live.holder.clone());
            }
        }
        found
    }

    /// `holder`'s agent presented its token: it reached the editor tools.
    pub fn connected(&self, holder: &Holder) {
        let mut state = self.lock();
        if let Some(live) = state.live.iter_mut().find(|l| l.holder.id == holder.id) {
            live.connected = true;
        }
    }

    /// Whether session `origin_key` was offered the tools and its agent never reached them.
    pub fn never_connected(&self, origin_key: &str) -> bool {
        let state = self.lock();
        let mut offered = state
            .live
            .iter()
            .filter(|l| l.holder.origin.key == origin_key)
            .peekable();
        offered.peek().is_some() && offered.all(|l| !l.connected)
    }

    /// Whether grant `id` still lives.
    pub fn is_live(&self, id: u64) -> bool {
        self.lock().live.iter().any(|l| l.holder.id == id)
    }

    /// `holder` called `tool`.
    pub fn used(&self, holder: &Holder, tool: &str) {
        {
            let mut state = self.lock();
            if let Some(live) = state.live.iter_mut().find(|l| l.holder.id == holder.id) {
                *live.uses.entry(tool.to_owned()).or_default() += 1;
            }
            let agent = state.agents.entry(holder.agent.clone()).or_default();
            *agent.calls.entry(tool.to_owned()).or_default() += 1;
        }
        self.write_record();
    }

    /// The calls session `origin_key` made since the last time this was asked, by tool.
    pub fn take_uses(&self, origin_key: &str) -> BTreeMap<String, u64> {
        let mut state = self.lock();
        let mut taken = BTreeMap::new();
        for live in state
            .live
            .iter_mut()
            .filter(|l| l.holder.origin.key == origin_key)
        {
            for (tool, n) in std::mem::take(&mut live.uses) {
                *taken.entry(tool).or_default() += n;
            }
        }
        taken
    }

    /// What `agent` was offered and used in this process.
    pub fn agent_use(&self, agent: &str) -> Option<AgentUse> {
        self.lock().agents.get(agent).cloned()
    }

    /// The record, as `agentls doctor` reads it.
    fn record(&self) -> Value {
        json!({"pid": std::process::id(), "agents": self.lock().agents})
    }

    fn write_record(&self) {
        let Some(path) = self.0.record.get().cloned() else {
            return;
        };
        let contents = self.record().to_string();
        let write = move || {
            if let Err(e) = write_atomically(&path, &contents) {
                tracing::debug!(path = %path.display(), "editor-tools record not written: {e}");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(write)),
            Err(_) => write(),
        }
    }
}

fn write_atomically(path: &Path, contents: &str) -> Result<(), PrivateError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    PrivateDir::open(dir)?.replace(&name, contents.as_bytes(), false)
}

/// Where the records live: `editor-tools` in agentls's state folder
/// ([`crate::private_files::state_home`]).
pub fn record_dir() -> Option<PathBuf> {
    Some(crate::private_files::state_home()?.join("editor-tools"))
}

/// One agentls process's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The process.
    pub pid: u32,
    /// Whether it still runs.
    pub alive: bool,
    /// When the record was last written.
    pub modified: std::time::SystemTime,
    /// Per agent.
    pub agents: BTreeMap<String, AgentUse>,
}

/// Every record in `dir`, newest first.
pub fn read_records(dir: &Path) -> Vec<Record> {
    #[derive(Deserialize)]
    struct OnDisk {
        pid: u32,
        agents: BTreeMap<String, AgentUse>,
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut records: Vec<Record> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .filter_map(|e| {
            let modified = e.metadata().ok()?.modified().ok()?;
            let on_disk: OnDisk = serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok()?;
            Some(Record {
                pid: on_disk.pid,
                alive: process_alive(on_disk.pid),
                modified,
                agents: on_disk.agents,
            })
        })
        .collect();
    records.sort_by_key(|r| std::cmp::Reverse(r.modified));
    records
}

/// Removes the records of processes that ended, except the newest of them (what the last run
/// did stays for `agentls doctor`).
pub fn prune_records(dir: &Path) {
    let ended = read_records(dir).into_iter().filter(|r| !r.alive).skip(1);
    for record in ended {
        let _ = std::fs::remove_file(dir.join(format!("{}.json", record.pid)));
    }
}

fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists.
    let result = unsafe { libc::kill(pid, 0) };
    result == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_names_its_session_until_the_grant_is_dropped() {
        let grants = ToolGrants::default();
        let a = grants
            .grant(
                4242,
                "demo",
                Origin::new("acp:demo:pending", "demo"),
                Transport::Http,
            )
            .unwrap();
        let b = grants
            .grant(
                4242,
                "demo",
                Origin::new("acp:demo:s2", "demo"),
                Transport::Stdio,
            )
            .unwrap();
        assert_eq!(a.url(), "http://127.0.0.1:4242/mcp");
        assert_ne!(a.token().as_str(), b.token().as_str());
        a.bind(Origin::new("acp:demo:s1", "demo"));
        let holder = grants.holder(a.token().as_str()).unwrap();
        assert_eq!(holder.origin.key, "acp:demo:s1");
        assert!(grants.holder("0123").is_none());
        grants.used(&holder, "getDiagnostics");
        grants.used(&holder, "getDiagnostics");
        assert_eq!(
            grants.take_uses("acp:demo:s1"),
            BTreeMap::from([("getDiagnostics".to_owned(), 2)])
        );
        assert!(grants.take_uses("acp:demo:s1").is_empty());
        let token = a.token().as_str().to_owned();
        drop(a);
        assert!(grants.holder(&token).is_none());
        assert!(!grants.is_live(holder.id));
        assert!(grants.holder(b.token().as_str()).is_some());
        let used = grants.agent_use("demo").unwrap();
        assert_eq!(
            used.describe(),
            "offered over stdio in 2 sessions; used getDiagnostics ×2"
        );
    }

    #[test]
    fn records_of_ended_runs_are_pruned_but_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        let write = |pid: u32| {
            let text = json!({"pid": pid, "agents": {"demo": {"transport": "http",
                "sessions": 1, "calls": {}}}});
            std::fs::write(dir.path().join(format!("{pid}.json")), text.to_string()).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        // Far beyond any pid the kernel hands out: ended.
        write(i32::MAX as u32 - 2);
        write(i32::MAX as u32 - 1);
        write(std::process::id());
        prune_records(dir.path());
        let left: Vec<(u32, bool)> = read_records(dir.path())
            .iter()
            .map(|r| (r.pid, r.alive))
            .collect();
        assert_eq!(
            left,
            vec![(std::process::id(), true), (i32::MAX as u32 - 1, false)]
        );
    }
}
