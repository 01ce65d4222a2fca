//! `workspace/executeCommand`: runs the commands of [`CommandId`] by name. A command that
//! involves the client or an agent spawns that work and returns at once (Emacs runs commands
//! synchronously, and no handler may wait on a human).

use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tower_lsp_server::jsonrpc::{Error, ErrorCode, Result};
use tower_lsp_server::ls_types::{CodeActionOrCommand, LSPAny, Uri};

use super::command_table::CommandId;
use super::convert;
use super::server::Backend;
use super::{agent_commands, chat_commands};
use crate::editor::actions::{ActionCommand, UserAction};
use crate::editor::review::ReviewId;
use crate::editor::review::decision::{Choice, Decision};
use crate::editor::{Level, Origin, Selection, Terms, Withdrawal};

/// A code action running the command behind a port action.
pub fn code_action(action: UserAction) -> CodeActionOrCommand {
    let (command, argument) = match &action.command {
        ActionCommand::Answer { question, choice } => (
            CommandId::Answer,
            json!({"question": question, "choice": choice}),
        ),
        ActionCommand::Decide(decision) => DecisionArgument::of(*decision),
        ActionCommand::SendChat { path } => (
            CommandId::Send,
            json!({"uri": crate::file_uri::from_path(path)}),
        ),
        ActionCommand::Stop { agent } => (CommandId::Cancel, json!({"agent": agent})),
        ActionCommand::ShowReview { review } => (CommandId::ShowReview, json!({"review": review})),
        ActionCommand::SendComment { agent, path, line } => (
            CommandId::PromptComment,
            json!({"agent": agent, "uri": crate::file_uri::from_path(path), "line": line}),
        ),
        ActionCommand::OpenChat { agent } => (CommandId::OpenChat, json!({"agent": agent})),
        ActionCommand::AskAbout { agent, path, range } => (
            CommandId::AskAbout,
            json!({"agent": agent, "uri": crate::file_uri::from_path(path),
                   "range": super::convert::lsp_range(*range)}),
        ),
        ActionCommand::UndoTurn { turn, redo: false } => {
            (CommandId::UndoTurn, json!({"turn": turn}))
        }
        ActionCommand::UndoTurn { turn, redo: true } => {
            (CommandId::RedoTurn, json!({"turn": turn}))
        }
    };
    command.action(action.title, argument)
}

/// Runs `command` with `arguments`.
pub async fn execute(
    backend: &Backend,
    command: &str,
    arguments: Vec<Value>,
) -> Result<Option<LSPAny>> {
    let Some(id) = CommandId::parse(command) else {
        return Err(Error::invalid_params(format!(
            "unknown command `{command}`"
        )));
    };
    match id {
        CommandId::DebugState => {
            let state = backend.feed.describe().await.map_err(internal)?;
            Ok(Some(state))
        }
        CommandId::DebugWrite => {
            let args: WriteArgs = first_argument(arguments)?;
            let path = path_argument(&args.uri)?;
            let editor = backend.editor.clone();
            tokio::spawn(async move {
                if let Err(e) = editor
                    .write_text_file(&debug_origin("debug"), &path, &args.text, None)
                    .await
                {
                    editor.tell_user(Level::Error, format!("agentls: write failed: {e}"));
                }
            });
            Ok(None)
        }
        CommandId::DebugReview => {
            let args: ReviewArgs = first_argument(arguments)?;
            let path = path_argument(&args.uri)?;
            let editor = backend.editor.clone();
            let origin = debug_origin(&args.origin);
            tokio::spawn(async move {
                let title = format!("Edit {}", path.display());
                let verdict = editor
                    .review_diff(&origin, &path, &args.text, &title, Terms::APPLIED_BY_EDITOR)
                    .await;
                let json = match verdict {
                    Ok(v) => serde_json::to_string(&v).unwrap_or_default(),
                    Err(e) => json!({"error": e.to_string()}).to_string(),
                };
                editor.log(
                    Level::Info,
                    format!("agentls.debug.review verdict: {json}\n"),
                );
            });
            Ok(None)
        }
        CommandId::DebugCloseOrigin => {
            let args: OriginArgs = first_argument(arguments)?;
            backend
                .editor
                .close_origin(&debug_origin(&args.origin), Withdrawal::Announced);
            Ok(None)
        }
        CommandId::Mention => {
            let args: Option<MentionArgs> = first_argument(arguments).ok();
            let selection = match args {
                Some(MentionArgs {
                    uri,
                    range: Some(range),
                }) => {
                    let path = path_argument(&uri)?;
                    let range = convert::range(range);
                    let text = backend
                        .editor
                        .read_text_file(&path, None, None)
                        .await
                        .ok()
                        .map(|t| slice_lines(&t, range))
                        .unwrap_or_default();
                    Some(Selection { path, range, text })
                }
                _ => None,
            };
            backend.feed.mentioned(selection);
            Ok(None)
        }
        CommandId::Accept | CommandId::Reject => {
            let argument: DecisionArgument = first_argument(arguments)?;
            let decision = argument.decision(id == CommandId::Accept);
            let outcome = backend.feed.decide(decision).await.map_err(internal)?;
            if let Err(e) = outcome {
                return Err(Error::invalid_params(format!("agentls: {e}")));
            }
            Ok(None)
        }
        CommandId::ShowReview => {
            let args: ReviewIdArgs = first_argument(arguments)?;
            backend
                .feed
                .show_review(args.review)
                .await
                .map_err(internal)?
                .map_err(|e| Error::invalid_params(format!("agentls: {e}")))?;
            Ok(None)
        }
        CommandId::Answer => {
            let args: AnswerArgs = first_argument(arguments)?;
            backend
                .feed
                .answer_question(args.question, args.choice)
                .await
                .map_err(internal)?
                .map_err(|e| Error::invalid_params(e.to_string()))?;
            Ok(None)
        }
        CommandId::Prompt => agent_commands::prompt(backend, arguments).await,
        CommandId::PromptComment => agent_commands::prompt_comment(backend, arguments).await,
        CommandId::Cancel => agent_commands::cancel(backend, arguments),
        CommandId::NewSession => agent_commands::new_session(backend, arguments),
        CommandId::SetMode => agent_commands::set_mode(backend, arguments),
        CommandId::SetOption => agent_commands::set_option(backend, arguments),
        // Built off the LSP task: with many sessions it is a big answer.
        CommandId::Status => {
            let agents = backend.agents.clone();
            let status = tokio::task::spawn_blocking(move || agents.status()).await;
            status.map(Some).map_err(internal)
        }
        CommandId::OpenChat => chat_commands::open_command(backend, arguments).await,
        CommandId::Send => chat_commands::send_command(backend, arguments).await,
        CommandId::AskAbout => chat_commands::ask_about_command(backend, arguments).await,
        CommandId::TerminalEnv => super::mcp_commands::terminal_env(backend).await,
        CommandId::UndoTurn | CommandId::RedoTurn => {
            let args: TurnArgs = first_argument(arguments).unwrap_or_default();
            let redo = id == CommandId::RedoTurn;
            match backend.feed.undo_turn(args.turn, redo).await {
                Ok(Ok(told)) => Ok(Some(Value::String(told))),
                Ok(Err(why)) => Err(Error::invalid_params(format!("agentls: {why}"))),
                Err(gone) => Err(internal(gone)),
            }
        }
    }
}

/// Which turn `agentls.undoTurn` / `agentls.redoTurn` are about (none: the newest).
#[derive(Debug, Default, Deserialize)]
struct TurnArgs {
    turn: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct MentionArgs {
    uri: Uri,
    range: Option<tower_lsp_server::ls_types::Range>,
}

/// The whole lines `range` covers (a mention names lines, not columns).
fn slice_lines(text: &str, range: crate::editor::Range) -> String {
    let (from, to) = (range.start.line as usize, range.end.line as usize);
    text.split_inclusive('\n')
        .skip(from)
        .take(to.saturating_sub(from) + 1)
        .collect()
}

#[derive(Debug, Deserialize)]
struct ReviewArgs {
    uri: Uri,
    text: String,
    #[serde(default = "default_debug_origin")]
    origin: String,
}

#[derive(Debug, Deserialize)]
struct OriginArgs {
    #[serde(default = "default_debug_origin")]
    origin: String,
}

fn default_debug_origin() -> String {
    "test-agent".to_owned()
}

fn debug_origin(name: &str) -> Origin {
    Origin::new(format!("debug:{name}"), name)
}

/// The argument of `agentls.accept` / `agentls.reject`: a [`Decision`] but for which of the
/// two commands carries it.
#[derive(Debug, Serialize, Deserialize)]
struct DecisionArgument {
    review: ReviewId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hunk: Option<usize>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    rerequest: bool,
}

impl DecisionArgument {
    /// The command carrying `decision`, and its argument.
    fn of(decision: Decision) -> (CommandId, Value) {
        let Decision {
            review,
            hunk,
            choice,
        } = decision;
        let rerequest = choice == Choice::Rerequest;
        let command = match choice {
            Choice::Accept => CommandId::Accept,
            Choice::Reject | Choice::Rerequest => CommandId::Reject,
        };
        let argument = Self {
            review,
            hunk,
            rerequest,
        };
        let argument = serde_json::to_value(argument).unwrap_or(Value::Null);
        (command, argument)
    }

    /// The decision this argument of `agentls.accept` (`accept`) or `agentls.reject` says.
    fn decision(self, accept: bool) -> Decision {
        let choice = match (accept, self.rerequest) {
            (true, _) => Choice::Accept,
            (false, true) => Choice::Rerequest,
            (false, false) => Choice::Reject,
        };
        Decision {
            review: self.review,
            hunk: self.hunk,
            choice,
        }
    }
}

#[derive(Debug, Deserialize)]
struct ReviewIdArgs {
    review: ReviewId,
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

/// A failure inside agentls, as a JSON-RPC error.
pub fn internal(e: impl std::fmt::Display) -> Error {
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
