//! `workspace/executeCommand`: the commands agentls offers, by name. A command that involves the
//! client or an agent spawns that work and returns at once (Emacs runs commands synchronously,
//! and no handler may wait on a human).

use std::path::PathBuf;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tower_lsp_server::jsonrpc::{Error, ErrorCode, Result};
use tower_lsp_server::ls_types::{LSPAny, Uri};

use super::convert;
use super::server::Backend;
use crate::editor::Level;

/// Dump everything the server believes about the editor (documents with their text, selections,
/// folders). For tests and for debugging a client; not advertised.
pub const DEBUG_STATE: &str = "agentls.debug.state";
/// Write a file through the editor exactly as an agent would; not advertised.
pub const DEBUG_WRITE: &str = "agentls.debug.write";

/// Commands listed in `executeCommandProvider` (clients may offer them to the user).
pub const ADVERTISED: &[&str] = &[];

/// Runs `command` with `arguments`.
pub async fn execute(
    backend: &Backend,
    command: &str,
    arguments: Vec<Value>,
) -> Result<Option<LSPAny>> {
    match command {
        DEBUG_STATE => {
            let state = backend
                .feed
                .query(|s| s.describe())
                .await
                .map_err(|e| Error {
                    code: ErrorCode::InternalError,
                    message: e.to_string().into(),
                    data: None,
                })?;
            Ok(Some(state))
        }
        DEBUG_WRITE => {
            let args: WriteArgs = first_argument(arguments)?;
            let path = path_argument(&args.uri)?;
            let editor = backend.editor.clone();
            tokio::spawn(async move {
                if let Err(e) = editor.write_text_file(&path, &args.text).await {
                    editor.tell_user(Level::Error, format!("agentls: write failed: {e}"));
                }
            });
            Ok(None)
        }
        other => Err(Error::invalid_params(format!("unknown command `{other}`"))),
    }
}

#[derive(Debug, Deserialize)]
struct WriteArgs {
    uri: Uri,
    text: String,
}

/// The first argument of a command, parsed; a clear error names what is missing.
fn first_argument<T: DeserializeOwned>(arguments: Vec<Value>) -> Result<T> {
    let first = arguments.into_iter().next().unwrap_or(Value::Null);
    serde_json::from_value(first).map_err(|e| Error::invalid_params(format!("bad arguments: {e}")))
}

fn path_argument(uri: &Uri) -> Result<PathBuf> {
    convert::path_of(uri)
        .ok_or_else(|| Error::invalid_params(format!("not a file URI: {}", uri.as_str())))
}
