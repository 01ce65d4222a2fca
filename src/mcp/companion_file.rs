//! The Streamable HTTP companion protocol's discovery file:
//! `$TMPDIR/gemini/ide/gemini-ide-server-<pid>-<port>.json` holding
//! `{port, workspacePath (":"-joined), authToken, ideInfo: {name, displayName}}`. Agents pick
//! the file whose workspace contains their working directory (the port in their environment
//! breaks ties) and accept only files owned by their own user.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::discovery::{self, DiscoveryError, DiscoveryFile, Found, IDE_NAME};
use super::token::AuthToken;

const PREFIX: &str = "gemini-ide-server-";

/// `$TMPDIR/gemini/ide`.
pub fn dir() -> PathBuf {
    std::env::temp_dir().join("gemini").join("ide")
}

/// The file's JSON.
pub fn contents(port: u16, folders: &[PathBuf], token: &AuthToken) -> Value {
    let workspace: Vec<String> = folders.iter().map(|f| f.display().to_string()).collect();
    json!({
        "port": port,
        "workspacePath": workspace.join(":"),
        "authToken": token.as_str(),
        "ideInfo": {"name": IDE_NAME, "displayName": "agentls"},
    })
}

/// Cleans stale files of ours in `dir`, then writes ours for `port` (blocking).
pub fn create(
    dir: &Path,
    port: u16,
    folders: &[PathBuf],
    token: &AuthToken,
) -> Result<DiscoveryFile, DiscoveryError> {
    let name = format!("{PREFIX}{}-{port}.json", std::process::id());
    discovery::create_replacing_stale(
        &scan(dir),
        "discovery file",
        dir.join(name),
        &contents(port, folders, token),
    )
}

/// The companion discovery files in `dir`, any IDE's (blocking).
pub fn scan(dir: &Path) -> Vec<Found> {
    discovery::scan(
        dir,
        PREFIX,
        ".json",
        |path, _| {
            let name = path.file_name()?.to_str()?;
            let rest = name.strip_prefix(PREFIX)?.strip_suffix(".json")?;
            rest.split('-').next()?.parse().ok()
        },
        |v| v["ideInfo"]["name"].as_str(),
    )
}
