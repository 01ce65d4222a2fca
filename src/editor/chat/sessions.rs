//! Which agent session each chat document continues, kept on disk beside it
//! (`.<file>.session`, `{"agent", "session"}`), so that a chat opened again after a restart
//! goes on in the session that remembers it (`session/load`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::private_files::{PrivateDir, PrivateError};

#[derive(Debug, Serialize, Deserialize)]
struct Remembered {
    agent: String,
    session: String,
}

/// The file in each workspace's chat folder that names the workspace folder (one line), so
/// that an editor can attach a chat opened later to that workspace's server: the folder's
/// name is only a hash of it.
pub const WORKSPACE_RECORD: &str = ".workspace";

/// Where the session of the chat at `chat` is kept.
fn record_of(chat: &Path) -> Option<PathBuf> {
    let name = chat.file_name()?.to_str()?;
    Some(chat.with_file_name(format!(".{name}.session")))
}

/// The chat whose session `record` keeps (or whose session record is being written there),
/// when it is such a record.
pub fn chat_of(record: &Path) -> Option<PathBuf> {
    let name = record.file_name()?.to_str()?;
    let name = crate::private_files::being_written(name).unwrap_or(name);
    let chat = name.strip_prefix('.')?.strip_suffix(".session")?;
    Some(record.with_file_name(chat))
}

/// The session of `agent` the chat at `chat` talked to last, when one is kept.
pub async fn remembered(chat: &Path, agent: &str) -> Option<String> {
    let record = record_of(chat)?;
    let text = tokio::task::spawn_blocking(move || {
        let (folder, name) = (record.parent()?, record.file_name()?.to_str()?);
        PrivateDir::open(folder).ok()?.read(name, 64 * 1024).ok()?
    })
    .await
    .ok()??;
    let kept: Remembered = serde_json::from_slice(&text).ok()?;
    (kept.agent == agent).then_some(kept.session)
}

/// The chat at `chat` talks to `agent`'s session `session` from now on (its folder must be
/// private, see [`PrivateDir`]).
pub async fn remember(chat: &Path, agent: &str, session: &str) -> Result<(), PrivateError> {
    let Some(record) = record_of(chat) else {
        return Ok(());
    };
    let kept = Remembered {
        agent: agent.to_owned(),
        session: session.to_owned(),
    };
    let json = serde_json::to_string(&kept).unwrap_or_default();
    tokio::task::spawn_blocking(move || {
        let folder = record.parent().unwrap_or(Path::new("/"));
        let name = record.file_name().unwrap_or_default().to_string_lossy();
        PrivateDir::open(folder)?.replace(&name, json.as_bytes(), false)
    })
    .await
    .unwrap_or_else(|e| {
        Err(PrivateError::Io {
            path: PathBuf::new(),
            source: std::io::Error::other(e),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_session_is_kept_per_chat_and_agent() {
        let dir = tempfile::tempdir().unwrap();
        let chat = dir.path().join("chat-1.md");
        assert_eq!(remembered(&chat, "demo").await, None);
        remember(&chat, "demo", "s1").await.unwrap();
        let record = dir.path().join(".chat-1.md.session");
        assert!(record.exists());
        assert_eq!(chat_of(&record), Some(chat.clone()));
        assert_eq!(chat_of(&chat), None);
        assert_eq!(remembered(&chat, "demo").await.as_deref(), Some("s1"));
        assert_eq!(remembered(&chat, "other").await, None);
        assert_eq!(
            remembered(&dir.path().join("chat-2.md"), "demo").await,
            None
        );
    }
}
