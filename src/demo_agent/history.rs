//! The demo agent's memory: what was said in each of its sessions, kept on disk
//! (`$XDG_STATE_HOME/agentls/demo-agent/<session>.json`), so that `session/load` in a later
//! run replays the conversation and the agent goes on with it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// The most of one message kept.
const MAX_KEPT: usize = 2_000;

/// One message from the user and the demo agent's answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Exchange {
    /// What the user asked.
    pub user: String,
    /// What the agent said.
    pub agent: String,
}

/// The sessions on disk.
#[derive(Debug)]
pub struct History {
    dir: PathBuf,
    next: AtomicU64,
}

impl History {
    /// The sessions under `$XDG_STATE_HOME` (else `~/.local/state`).
    pub fn from_env() -> Self {
        let state = std::env::var_os("XDG_STATE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
            .unwrap_or_else(std::env::temp_dir);
        Self {
            dir: state.join("agentls").join("demo-agent"),
            next: AtomicU64::new(1),
        }
    }

    /// A new session: `demo-<n>`, the first `n` no session of any run has, with an empty
    /// history on disk (an id only, when the disk cannot keep it).
    pub fn new_session(&self) -> String {
        let _ = std::fs::create_dir_all(&self.dir);
        loop {
            let id = format!("demo-{}", self.next.fetch_add(1, Ordering::Relaxed));
            let created = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(self.file(&id));
            match created {
                Ok(mut file) => {
                    let _ = std::io::Write::write_all(&mut file, b"[]");
                    return id;
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    tracing::warn!("demo agent: session {id} is not kept: {e}");
                    return id;
                }
            }
        }
    }

    /// What was said in session `id`, or `None` when it is not kept.
    pub fn load(&self, id: &str) -> Option<Vec<Exchange>> {
        if id.contains(['/', '\\']) || id.starts_with('.') {
            return None;
        }
        let text = std::fs::read_to_string(self.file(id)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Adds one exchange to session `id`.
    pub fn append(&self, id: &str, user: &str, agent: &str) {
        let mut exchanges = self.load(id).unwrap_or_default();
        exchanges.push(Exchange {
            user: kept(user),
            agent: kept(agent),
        });
        let text = serde_json::to_string(&exchanges).unwrap_or_default();
        if let Err(e) = std::fs::write(self.file(id), text) {
            tracing::warn!("demo agent: session {id} is not kept: {e}");
        }
    }

    fn file(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }
}

/// The start of `text`, at most [`MAX_KEPT`] bytes, cut at a character.
fn kept(text: &str) -> String {
    let mut end = text.len().min(MAX_KEPT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_new_across_runs_and_keep_what_was_said() {
        let dir = tempfile::tempdir().unwrap();
        let at = |next| History {
            dir: dir.path().to_path_buf(),
            next: AtomicU64::new(next),
        };
        let first = at(1);
        let a = first.new_session();
        first.append(&a, "my name is Ada\n", "Hello.");
        // A later run counts from 1 again and skips the ids taken.
        let second = at(1);
        let b = second.new_session();
        assert_ne!(a, b);
        assert_eq!(
            second.load(&a).unwrap(),
            vec![Exchange {
                user: "my name is Ada".into(),
                agent: "Hello.".into()
            }]
        );
        assert_eq!(second.load(&b).unwrap(), Vec::new());
        assert_eq!(second.load("demo-99"), None);
        assert_eq!(second.load("../x"), None);
    }
}
