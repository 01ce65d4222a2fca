//! The WebSocket IDE protocol's discovery file: `<CLAUDE_CONFIG_DIR or ~/.claude>/ide/<port>.lock`
//! holding `{pid, workspaceFolders, ideName, transport: "ws", runningInWindows, authToken}`.
//! Agents read every lockfile in that directory and pick one whose port is in their environment
//! or whose workspace folder contains their working directory.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::discovery::{self, DiscoveryError, DiscoveryFile, Found, IDE_NAME};
use super::token::AuthToken;

/// The lockfile directory agents scan first: `$CLAUDE_CONFIG_DIR/ide`, else `~/.claude/ide`.
pub fn dir() -> Option<PathBuf> {
    match std::env::var_os("CLAUDE_CONFIG_DIR").filter(|v| !v.is_empty()) {
        Some(config) => Some(PathBuf::from(config).join("ide")),
        None => home_dir(),
    }
}

fn home_dir() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").filter(|v| !v.is_empty())?;
    Some(PathBuf::from(home).join(".claude").join("ide"))
}

/// Every directory agents scan (both when `CLAUDE_CONFIG_DIR` is set).
pub fn dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = dir().into_iter().chain(home_dir()).collect();
    dirs.dedup();
    dirs
}

/// The lockfile's JSON.
pub fn contents(folders: &[PathBuf], token: &AuthToken) -> Value {
    json!({
        "pid": std::process::id(),
        "workspaceFolders": folders,
        "ideName": IDE_NAME,
        "transport": "ws",
        "runningInWindows": false,
        "authToken": token.as_str(),
    })
}

/// Cleans stale lockfiles of ours in `dir`, then writes ours for `port` (blocking).
pub fn create(
    dir: &Path,
    port: u16,
    folders: &[PathBuf],
    token: &AuthToken,
) -> Result<DiscoveryFile, DiscoveryError> {
    discovery::create_replacing_stale(
        &scan(dir),
        "lockfile",
        dir.join(format!("{port}.lock")),
        &contents(folders, token),
    )
}

/// The lockfiles in `dir`, any IDE's (blocking).
pub fn scan(dir: &Path) -> Vec<Found> {
    discovery::scan(
        dir,
        "",
        ".lock",
        |_, v| v["pid"].as_u64().and_then(|p| u32::try_from(p).ok()),
        |v| v["ideName"].as_str(),
    )
}
