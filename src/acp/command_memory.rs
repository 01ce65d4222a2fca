//! The slash commands each agent advertised last, kept on disk (`$XDG_STATE_HOME/agentls/
//! commands/<agent>.json`, private), so that a fresh chat offers them before its session has
//! started: the agent says which commands it has only once a session is open.

use std::path::PathBuf;

use serde_json::Value;

use crate::private_files::{PrivateDir, state_home};

/// The most of a remembered list read back.
const MOST: u64 = 1024 * 1024;

/// Where the lists live.
fn folder() -> Option<PathBuf> {
    Some(state_home()?.join("commands"))
}

/// The file name for `agent`'s list: its name where it is plain, else its bytes in hex.
fn file_name(agent: &str) -> String {
    let plain = !agent.is_empty()
        && agent
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if plain {
        format!("{agent}.json")
    } else {
        let hex: String = agent.bytes().map(|b| format!("{b:02x}")).collect();
        format!("x{hex}.json")
    }
}

/// Remembers `commands` (as the agent advertised them) for `agent`, off the calling task.
pub fn remember(agent: &str, commands: &Value) {
    let (Some(folder), Ok(bytes)) = (folder(), serde_json::to_vec(commands)) else {
        return;
    };
    let name = file_name(agent);
    tokio::task::spawn_blocking(move || {
        let written = PrivateDir::open(&folder).and_then(|dir| dir.replace(&name, &bytes, false));
        if let Err(e) = written {
            tracing::debug!("the agent's commands are not remembered: {e}");
        }
    });
}

/// The commands `agent` advertised last, when remembered. Blocking.
pub fn recall(agent: &str) -> Option<Value> {
    let dir = PrivateDir::open(&folder()?).ok()?;
    let bytes = dir.read(&file_name(agent), MOST).ok()??;
    serde_json::from_slice(&bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_names_become_plain_file_names() {
        assert_eq!(file_name("claude"), "claude.json");
        assert_eq!(file_name("my-agent_2"), "my-agent_2.json");
        assert_eq!(file_name("../x"), "x2e2e2f78.json");
        assert_eq!(file_name(""), "x.json");
    }
}
