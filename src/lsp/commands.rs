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
use crate::editor::actions::{ActionCommand, UserAction};
use crate::editor::reviews::Decision;
use crate::editor::{Level, Origin, Selection, Terms, Withdrawal};

/// Dump everything the server believes about the editor (documents with their text, selections,
/// folders). For tests and for debugging a client; not advertised.
pub const DEBUG_STATE: &str = "agentls.debug.state";
/// Write a file through the editor exactly as an agent would; not advertised.
pub const DEBUG_WRITE: &str = "agentls.debug.write";

/// Propose `text` for a file as a review from a test origin, exactly as an agent would; the
/// verdict is logged as `agentls.debug.review verdict: <json>`. Not advertised.
pub const DEBUG_REVIEW: &str = "agentls.debug.review";
/// Make a test origin go away (its reviews and questions are withdrawn). Not advertised.
pub const DEBUG_CLOSE_ORIGIN: &str = "agentls.debug.closeOrigin";

/// Point connected agents at the current selection (`[{"uri"?, "range"?}]` for another one).
pub const MENTION: &str = "agentls.mention";

/// Answer a question an agent asked: `[{"question": id, "choice": id}]`.
pub const ANSWER: &str = "agentls.answer";

/// Accept review changes: `[{"review": id, "hunk"?: index}]` (no hunk: all open ones).
pub const ACCEPT: &str = "agentls.accept";
/// Reject review changes: `[{"review": id, "hunk"?: index, "rerequest"?: bool}]`.
pub const REJECT: &str = "agentls.reject";

/// Show a review's file at its first open change: `[{"review": id}]`.
pub const SHOW_REVIEW: &str = "agentls.showReview";

/// Commands listed in `executeCommandProvider` (clients may offer them to the user).
pub const ADVERTISED: &[&str] = &[
    ACCEPT,
    REJECT,
    SHOW_REVIEW,
    ANSWER,
    MENTION,
    agent_commands::PROMPT,
    agent_commands::PROMPT_COMMENT,
    super::chat_commands::OPEN_CHAT,
    super::chat_commands::SEND,
    super::chat_commands::ASK_ABOUT,
    agent_commands::CANCEL,
    agent_commands::NEW_SESSION,
    agent_commands::SET_MODE,
    agent_commands::SET_OPTION,
    agent_commands::STATUS,
    super::mcp_commands::TERMINAL_ENV,
];

/// A code action running the command behind a port action.
pub fn code_action(action: UserAction) -> CodeActionOrCommand {
    let (command, argument) = match &action.command {
        ActionCommand::Answer { question, choice } => {
            (ANSWER, json!({"question": question, "choice": choice}))
        }
        ActionCommand::Decide {
            review,
            hunk,
            accept,
            rerequest,
        } => {
            let mut argument = json!({"review": review});
            if let Some(hunk) = hunk {
                argument["hunk"] = json!(hunk);
            }
            if *rerequest {
                argument["rerequest"] = json!(true);
            }
            (if *accept { ACCEPT } else { REJECT }, argument)
        }
        ActionCommand::SendChat { path } => (
            super::chat_commands::SEND,
            json!({"uri": crate::file_uri::from_path(path)}),
        ),
        ActionCommand::Stop { agent } => (agent_commands::CANCEL, json!({"agent": agent})),
        ActionCommand::ShowReview { review } => (SHOW_REVIEW, json!({"review": review})),
        ActionCommand::SendComment { agent, path, line } => (
            agent_commands::PROMPT_COMMENT,
            json!({"agent": agent, "uri": crate::file_uri::from_path(path), "line": line}),
        ),
        ActionCommand::AskAbout { agent, path, range } => (
            super::chat_commands::ASK_ABOUT,
            json!({"agent": agent, "uri": crate::file_uri::from_path(path),
                   "range": super::convert::lsp_range(*range)}),
        ),
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
                if let Err(e) = editor
                    .write_text_file(&debug_origin("debug"), &path, &args.text, None)
                    .await
                {
                    editor.tell_user(Level::Error, format!("agentls: write failed: {e}"));
                }
            });
            Ok(None)
        }
        DEBUG_REVIEW => {
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
        DEBUG_CLOSE_ORIGIN => {
            let args: OriginArgs = first_argument(arguments)?;
            backend
                .editor
                .close_origin(&debug_origin(&args.origin), Withdrawal::Announced);
            Ok(None)
        }
        MENTION => {
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
        ACCEPT | REJECT => {
            let args: DecideArgs = first_argument(arguments)?;
            let decision = match (command == ACCEPT, args.rerequest) {
                (true, _) => Decision::Accept,
                (false, true) => Decision::Rerequest,
                (false, false) => Decision::Reject,
            };
            let outcome = backend
                .feed
                .query(move |s| s.decide(args.review, args.hunk, decision))
                .await
                .map_err(internal)?;
            if let Err(e) = outcome {
                return Err(Error::invalid_params(format!("agentls: {e}")));
            }
            Ok(None)
        }
        SHOW_REVIEW => {
            let args: ReviewIdArgs = first_argument(arguments)?;
            backend
                .feed
                .query(move |s| s.show_review(args.review))
                .await
                .map_err(internal)?
                .map_err(|e| Error::invalid_params(format!("agentls: {e}")))?;
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
        other if super::chat_commands::COMMANDS.contains(&other) => {
            super::chat_commands::execute(backend, other, arguments)
                .await
                .unwrap_or_else(|| Err(Error::invalid_params("unknown chat command")))
        }
        other => match agent_commands::execute(backend, other, arguments).await {
            Some(result) => result,
            None => match super::mcp_commands::execute(backend, other).await {
                Some(result) => result,
                None => Err(Error::invalid_params(format!("unknown command `{other}`"))),
            },
        },
    }
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

#[derive(Debug, Deserialize)]
struct DecideArgs {
    review: u64,
    hunk: Option<usize>,
    #[serde(default)]
    rerequest: bool,
}

#[derive(Debug, Deserialize)]
struct ReviewIdArgs {
    review: u64,
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
