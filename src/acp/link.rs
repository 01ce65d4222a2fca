//! What the request and notification handlers of one agent connection share: the agent's name,
//! the port, the workspace root, its sessions and its terminals. Locks guard plain data and are
//! never held across an `.await`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::SessionNotification;
use serde_json::Value;

use super::plugin_updates::PluginUpdates;
use super::session::SessionState;
use super::terminal::Terminals;
use super::transport::Dispatched;
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
    /// How far the SDK has dispatched the agent's messages (session updates bypass it).
    pub dispatched: Arc<Dispatched>,
    sessions: Mutex<HashMap<String, SessionSlot>>,
    next_id: AtomicU64,
}

/// One session id's place: a session agentls opened, or updates the agent sent for it before
/// agentls had its `session/new` answer in hand (agents announce their slash commands at once).
#[derive(Debug)]
enum SessionSlot {
    Open(Box<SessionState>),
    Announced(Vec<SessionNotification>),
}

/// The most updates kept for a session id not known yet, and the most such ids.
const MAX_EARLY_UPDATES: usize = 64;
const MAX_EARLY_SESSIONS: usize = 8;

impl AgentLink {
    /// A link for `agent` working in `cwd`.
    pub fn new(agent: &str, editor: EditorAccess, cwd: PathBuf) -> Self {
        Self {
            agent: agent.to_owned(),
            plugin_updates: PluginUpdates::new(agent, editor.clone()),
            editor,
            cwd,
            terminals: Terminals::default(),
            dispatched: Arc::default(),
            sessions: Mutex::default(),
            next_id: AtomicU64::new(1),
        }
    }

    /// A number unique within this link (permission ids, terminal ids).
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Remembers a new session; returns the updates the agent sent for it before, to apply now.
    pub fn add_session(&self, session: SessionState) -> Vec<SessionNotification> {
        match self
            .lock()
            .insert(session.id.clone(), SessionSlot::Open(Box::new(session)))
        {
            Some(SessionSlot::Announced(early)) => early,
            _ => Vec::new(),
        }
    }

    /// Forgets session `id` (its `session/load` failed).
    pub fn remove_session(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Forgets session `id` unless a turn of it runs or a permission of it waits.
    pub fn forget_if_idle(&self, id: &str) {
        let mut sessions = self.lock();
        if let Some(SessionSlot::Open(session)) = sessions.get(id)
            && session.turn.is_none()
            && session.permissions.is_empty()
        {
            sessions.remove(id);
        }
    }

    /// Keeps `note`, an update for a session id not known yet, until its session is added
    /// (bounded: beyond that, it is dropped with a warning). Returns `false` when the session
    /// is known after all (apply the update).
    pub fn keep_early(&self, note: SessionNotification) -> bool {
        let mut sessions = self.lock();
        let id = note.session_id.to_string();
        let waiting = sessions
            .values()
            .filter(|s| matches!(s, SessionSlot::Announced(_)))
            .count();
        match sessions.get_mut(&id) {
            Some(SessionSlot::Open(_)) => false,
            Some(SessionSlot::Announced(early)) if early.len() < MAX_EARLY_UPDATES => {
                early.push(note);
                true
            }
            None if waiting < MAX_EARLY_SESSIONS => {
                sessions.insert(id, SessionSlot::Announced(vec![note]));
                true
            }
            _ => {
                tracing::warn!(agent = %self.agent, session = %id, "update for an unknown session dropped");
                true
            }
        }
    }

    /// Runs `f` on session `id`; `None` if there is no such session.
    pub fn with_session<R>(&self, id: &str, f: impl FnOnce(&mut SessionState) -> R) -> Option<R> {
        match self.lock().get_mut(id) {
            Some(SessionSlot::Open(session)) => Some(f(session)),
            _ => None,
        }
    }

    /// Runs `f` on every session.
    pub fn each_session(&self, mut f: impl FnMut(&mut SessionState)) {
        for slot in self.lock().values_mut() {
            if let SessionSlot::Open(session) = slot {
                f(session);
            }
        }
    }

    /// The origin of session `id` (a fresh one if the session is unknown).
    pub fn origin(&self, id: &str) -> Origin {
        self.with_session(id, |s| s.origin.clone())
            .unwrap_or_else(|| SessionState::new(&self.agent, id.to_owned()).origin)
    }

    /// Every session as `agentls.status` shows it, `current` marked.
    pub fn describe_sessions(&self, current: Option<&str>) -> Vec<Value> {
        let sessions = self.lock();
        let mut open: Vec<(&String, &SessionState)> = sessions
            .iter()
            .filter_map(|(id, slot)| match slot {
                SessionSlot::Open(session) => Some((id, &**session)),
                SessionSlot::Announced(_) => None,
            })
            .collect();
        open.sort_by_key(|(id, _)| *id);
        open.into_iter()
            .map(|(id, session)| session.describe(Some(id.as_str()) == current))
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, SessionSlot>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use agent_client_protocol::v1::schema::{
        AvailableCommand, AvailableCommandsUpdate, SessionNotification, SessionUpdate,
    };

    use super::*;

    fn commands_for(session: &str) -> SessionNotification {
        let commands = vec![AvailableCommand::new("help", "Help")];
        SessionNotification::new(
            session.to_owned(),
            SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands)),
        )
    }

    /// An update that comes before agentls has the `session/new` answer (the agent announced
    /// its commands at once) is kept and handed back when the session is added, not lost.
    #[tokio::test]
    async fn updates_before_the_session_is_known_wait_for_it() {
        let (editor, _feed, _effects) = crate::editor::start();
        let link = AgentLink::new("demo", editor, PathBuf::from("/ws"));
        assert!(link.keep_early(commands_for("s1")));
        assert!(link.with_session("s1", |_| ()).is_none());
        assert!(link.describe_sessions(None).is_empty());
        let early = link.add_session(SessionState::new("demo", "s1".into()));
        assert_eq!(early, vec![commands_for("s1")]);
        // Known now: the next one is applied at once.
        assert!(!link.keep_early(commands_for("s1")));
        assert!(
            link.add_session(SessionState::new("demo", "s2".into()))
                .is_empty()
        );
    }
}
