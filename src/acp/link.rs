//! What the request and notification handlers of one agent connection share: the agent's name,
//! the port, the workspace root, its sessions and its terminals. Locks guard plain data and are
//! never held across an `.await`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use super::plugin_updates::PluginUpdates;
use super::session::SessionState;
use super::terminal::Terminals;
use crate::editor::{EditorAccess, Origin};

/// State shared by one agent connection's handlers.
#[derive(Debug)]
pub struct AgentLink {
    /// The agent's name in the config.
    pub agent: String,
    /// The port.
    pub editor: EditorAccess,
    /// The workspace root the agent runs in.
    pub cwd: PathBuf,
    /// Terminals the agent started.
    pub terminals: Terminals,
    /// Session updates on their way to editor plugins.
    pub plugin_updates: PluginUpdates,
    sessions: Mutex<HashMap<String, SessionState>>,
    next_id: AtomicU64,
}

impl AgentLink {
    /// A link for `agent` working in `cwd`.
    pub fn new(agent: &str, editor: EditorAccess, cwd: PathBuf) -> Self {
        Self {
            agent: agent.to_owned(),
            plugin_updates: PluginUpdates::new(agent, editor.clone()),
            editor,
            cwd,
            terminals: Terminals::default(),
            sessions: Mutex::default(),
            next_id: AtomicU64::new(1),
        }
    }

    /// A number unique within this link (permission ids, terminal ids).
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Remembers a new session.
    pub fn add_session(&self, session: SessionState) {
        self.lock().insert(session.id.clone(), session);
    }

    /// Runs `f` on session `id`; `None` if there is no such session.
    pub fn with_session<R>(&self, id: &str, f: impl FnOnce(&mut SessionState) -> R) -> Option<R> {
        self.lock().get_mut(id).map(f)
    }

    /// Runs `f` on every session.
    pub fn each_session(&self, mut f: impl FnMut(&mut SessionState)) {
        self.lock().values_mut().for_each(&mut f);
    }

    /// The origin of session `id` (a fresh one if the session is unknown).
    pub fn origin(&self, id: &str) -> Origin {
        self.with_session(id, |s| s.origin.clone())
            .unwrap_or_else(|| SessionState::new(&self.agent, id.to_owned()).origin)
    }

    /// Every session as `agentls.status` shows it, `current` marked.
    pub fn describe_sessions(&self, current: Option<&str>) -> Vec<Value> {
        let sessions = self.lock();
        let mut ids: Vec<_> = sessions.keys().collect();
        ids.sort();
        ids.into_iter()
            .map(|id| sessions[id].describe(Some(id.as_str()) == current))
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, SessionState>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }
}
