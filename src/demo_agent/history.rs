//! The demo agent's memory: what was said in each of its sessions, kept on disk
//! (`$XDG_STATE_HOME/agentls/demo-agent/<session>.json`, a private folder), so that `session/load` in a later
//! run replays the conversation and the agent goes on with it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::private_files::{PrivateDir, PrivateError};

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
    /// Where they are kept; `None` when there is no home to keep them in.
    dir: Option<PathBuf>,
    next: AtomicU64,
}

impl History {
    /// The sessions in agentls's state folder ([`crate::private_files::state_home`]).
    pub fn from_env() -> Self {
        Self {
            dir: crate::private_files::state_home().map(|state| state.join("demo-agent")),
            next: AtomicU64::new(1),
        }
    }

    /// The folder, opened (private; see [`PrivateDir`]).
    fn folder(&self) -> Result<PrivateDir, String> {
        let dir = self
            .dir
            .as_deref()
            .ok_or(crate::private_files::NO_STATE_HOME)?;
        PrivateDir::open(dir).map_err(|e| e.to_string())
    }

    /// A new session: `demo-<n>`, the first `n` no session of any run has, with an empty
    /// history on disk (an id only, when the disk cannot keep it).
    pub fn new_session(&self) -> String {
        let folder = self.folder();
        loop {
            let id = format!("demo-{}", self.next.fetch_add(1, Ordering::Relaxed));
            let created = match &folder {
                Ok(folder) => folder.create_new(&file(&id), b"[]"),
                Err(e) => {
                    tracing::warn!("demo agent: sessions are not kept: {e}");
                    return id;
                }
            };
            match created {
                Ok(()) => return id,
                Err(PrivateError::Exists { .. }) => continue,
                Err(e) => {
                    tracing::warn!("demo agent: session {id} is not kept: {e}");
                    return id;
                }
            }
        }
    }

    /// What was said in session `id`, or `None` when it is not kept.
    pub fn load(&self, id: &str) -> Option<Vec<Exchange>> {
        let text = self
            .folder()
            .ok()?
            .read(&file(id), 16 * 1024 * 1024)
            .ok()??;
        serde_json::from_slice(&text).ok()
    }

    /// Adds one exchange to session `id`.
    pub fn append(&self, id: &str, user: &str, agent: &str) {
        let mut exchanges = self.load(id).unwrap_or_default();
        exchanges.push(Exchange {
            user: kept(user),
            agent: kept(agent),
        });
        let text = serde_json::to_string(&exchanges).unwrap_or_default();
        let written = self.folder().and_then(|f| {
            f.replace(&file(id), text.as_bytes(), false)
                .map_err(|e| e.to_string())
        });
        if let Err(e) = written {
            tracing::warn!("demo agent: session {id} is not kept: {e}");
        }
    }
}

/// The file of session `id` (an id that is not one plain name is refused when it is opened).
fn file(id: &str) -> String {
    format!("{id}.json")
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
            dir: Some(dir.path().to_path_buf()),
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
