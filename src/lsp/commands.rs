//! `workspace/executeCommand`: the commands agentls offers, by name. A command that involves the
//! client or an agent spawns that work and returns at once (Emacs runs commands synchronously,
//! and no handler may wait on a human).

use std::path::PathBuf;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tower_lsp_server::jsonrpc::{Error, ErrorCode, Result};
use tower_lsp_server::ls_types::{
    CodeAction, CodeActionKind, CodeActionOrCommand, Command, LSPAny, Uri,
};

use super::agent_commands;
use super::convert;
use super::server::Backend;
use crate::editor::Level;
use crate::editor::actions::{ActionCommand, UserAction};

/// Dump everything the server believes about the editor (documents with their text, selections,
/// folders). For tests and for debugging a client; not advertised.
pub const DEBUG_STATE: &str = "agentls.debug.state";
/// Write a file through the editor exactly as an agent would; not advertised.
pub const DEBUG_WRITE: &str = "agentls.debug.write";

/// Answer a question an agent asked: `[{"question": id, "choice": id}]`.
pub const ANSWER: &str = "agentls.answer";

/// Commands listed in `executeCommandProvider` (clients may offer them to the user).
pub const ADVERTISED: &[&str] = &[
    ANSWER,
    agent_commands::PROMPT,
    agent_commands::CANCEL,
    agent_commands::NEW_SESSION,
    agent_commands::SET_MODE,
    agent_commands::STATUS,
];

/// A code action running the command behind a port action.
pub fn code_action(action: UserAction) -> CodeActionOrCommand {
    let (command, argument) = match &action.command {
        ActionCommand::Answer { question, choice } => {
            (ANSWER, json!({"question": question, "choice": choice}))
        }
    };
    CodeActionOrCommand::CodeAction(CodeAction {
        title: action.title.clone(),
        kind: Some(CodeActionKind::QUICKFIX),
        command: Some(Command {
            title: action.title,
            command: command.to_owned(),
            arguments: Some(vec![argument]),
        }),
        ..Default::default()
    })
}

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
                .map_err(internal)?;
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
        ANSWER => {
            let args: AnswerArgs = first_argument(arguments)?;
            backend
                .feed
                .query(move |s| s.questions.answer(args.question, &args.choice))
                .await
                .map_err(internal)?
                .map_err(|e| Error::invalid_params(e.to_string()))?;
            Ok(None)
        }
        other => match agent_commands::execute(backend, other, arguments).await {
            Some(result) => result,
            None => Err(Error::invalid_params(format!("unknown command `{other}`"))),
        },
    }
}

#[derive(Debug, Deserialize)]
struct AnswerArgs {
    question: u64,
    choice: String,
}

#[derive(Debug, Deserialize)]
struct WriteArgs {
    uri: Uri,
    text: String,
}

fn internal(e: impl std::fmt::Display) -> Error {
    Error {
        code: ErrorCode::InternalError,
        message: e.to_string().into(),
        data: None,
    }
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
