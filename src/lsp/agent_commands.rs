//! `workspace/executeCommand` commands that drive agents: prompt, cancel, new session, set mode
//! or option, status. Each returns at once; the work (starting an agent, a turn) runs in the background and
//! reports through messages, the log and progress.

use std::path::PathBuf;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tower_lsp_server::jsonrpc::{Error, Result};
use tower_lsp_server::ls_types::{LSPAny, Range as LspRange, Uri};

use super::convert;
use super::prompt_context::Budget;
use super::server::Backend;
use crate::acp::{AgentFailure, AnsweredComment, Prompt, PromptContext};
use crate::editor::disk::files::Bounded;

#[derive(Debug, Deserialize)]
struct PromptArgs {
    agent: Option<String>,
    text: String,
    uri: Option<Uri>,
    range: Option<LspRange>,
}

#[derive(Debug, Deserialize)]
struct CommentArgs {
    agent: Option<String>,
    uri: Uri,
    line: usize,
}

#[derive(Debug, Default, Deserialize)]
struct AgentArgs {
    agent: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ModeArgs {
    agent: Option<String>,
    mode: String,
}

#[derive(Debug, Deserialize)]
struct OptionArgs {
    agent: Option<String>,
    option: String,
    value: String,
}

/// `agentls.cancel`: cancels the agent's running turn.
pub fn cancel(backend: &Backend, arguments: Vec<Value>) -> Result<Option<LSPAny>> {
    let args: AgentArgs = optional_argument(arguments)?;
    let cancelled = backend
        .agents
        .cancel(args.agent.as_deref())
        .map_err(refused)?;
    Ok(Some(json!({"cancelled": cancelled})))
}

/// `agentls.newSession`: opens a new session with the agent.
pub fn new_session(backend: &Backend, arguments: Vec<Value>) -> Result<Option<LSPAny>> {
    let args: AgentArgs = optional_argument(arguments)?;
    let agent = backend
        .agents
        .new_session(args.agent.as_deref())
        .map_err(refused)?;
    backend.start_new_conversation(&agent);
    Ok(Some(json!({"agent": agent})))
}

/// `agentls.setMode`: sets the session mode.
pub fn set_mode(backend: &Backend, arguments: Vec<Value>) -> Result<Option<LSPAny>> {
    let args: ModeArgs = argument(arguments)?;
    let agent = backend
        .agents
        .set_mode(args.agent.as_deref(), args.mode)
        .map_err(refused)?;
    Ok(Some(json!({"agent": agent})))
}

/// `agentls.setOption`: sets a session config option.
pub fn set_option(backend: &Backend, arguments: Vec<Value>) -> Result<Option<LSPAny>> {
    let args: OptionArgs = argument(arguments)?;
    let agent = backend
        .agents
        .set_option(args.agent.as_deref(), args.option, args.value)
        .map_err(refused)?;
    Ok(Some(json!({"agent": agent})))
}

/// `agentls.prompt`: starts a turn about the given range, else the editor's selection.
pub async fn prompt(backend: &Backend, arguments: Vec<Value>) -> Result<Option<LSPAny>> {
    let args: PromptArgs = argument(arguments)?;
    let context = match &args.uri {
        Some(uri) => {
            let path = convert::path_of(uri).ok_or_else(|| {
                Error::invalid_params(format!("not a file URI: {}", uri.as_str()))
            })?;
            let range = args.range.map(|r| convert::range(r).ordered());
            Some(context(backend, path, range).await?)
        }
        // The editor's current selection, as a prompt from a keymap means it.
        None => selection_context(backend).await,
    };
    start(backend, args.agent.as_deref(), args.text, context, None).await
}

/// `agentls.promptComment`: the comment prompt on `line` of `uri`, sent with the code under
/// it; its line goes once the agent's change to the file is in.
pub async fn prompt_comment(backend: &Backend, arguments: Vec<Value>) -> Result<Option<LSPAny>> {
    let args: CommentArgs = argument(arguments)?;
    let path = convert::path_of(&args.uri)
        .ok_or_else(|| Error::invalid_params(format!("not a file URI: {}", args.uri.as_str())))?;
    let line = args.line;
    let found = backend
        .feed
        .comment_prompt(&path, line)
        .await
        .map_err(super::commands::internal)?;
    let file = crate::editor::file_name(&path);
    let Some(found) = found else {
        let why = format!(
            "agentls: line {} of {file} is no comment prompt (any more)",
            line + 1
        );
        return Err(Error::invalid_params(why));
    };
    let code = crate::editor::Range::new(
        crate::editor::Position::new(found.line as u32, 0),
        crate::editor::Position::new(found.code_end as u32 + 1, 0),
    );
    let context = context(backend, path.clone(), Some(code)).await?;
    let text = format!(
        "{}\n\n(Asked in a comment on line {} of {file}: `{}`. Take that comment out when \
         you make the change.)",
        found.instruction,
        found.line + 1,
        found.comment.trim()
    );
    let comment = AnsweredComment {
        path,
        line: found.comment,
    };
    start(
        backend,
        args.agent.as_deref(),
        text,
        Some(context),
        Some(comment),
    )
    .await
}

/// Starts a turn of `agent` (the default one when `None`) on `text` with `context`; the reply
/// shows in the agent's chat, with the prompt as the user's message.
async fn start(
    backend: &Backend,
    agent: Option<&str>,
    text: String,
    context: Option<PromptContext>,
    comment: Option<AnsweredComment>,
) -> Result<Option<LSPAny>> {
    let agent = backend.agents.name_of(agent).map_err(refused)?;
    let folders = backend.editor.workspace_folders().await;
    let said = super::chat_commands::describe_prompt(&text, context.as_ref(), &folders);
    let context = context.into_iter().collect();
    let chat = super::chat_commands::chat_for_prompt(backend, &agent, &said).await?;
    backend.editor.chat_turn(&chat, true);
    let sent = backend.agents.prompt(Prompt {
        agent: Some(agent),
        text,
        context,
        chat: Some(chat.clone()),
        note: None,
        comment,
    });
    match sent {
        Ok(agent) => Ok(Some(json!({"agent": agent, "chat": chat}))),
        Err(failure) => {
            backend.editor.chat_turn(&chat, false);
            Err(refused(failure))
        }
    }
}

/// The user's current selection as context, when there is a non-empty one.
async fn selection_context(backend: &Backend) -> Option<PromptContext> {
    let selection = backend.editor.current_selection().await?;
    if selection.text.is_empty() {
        return None;
    }
    let mut budget = Budget::new(&backend.agent_config.borrow().context);
    let read = Bounded::of(selection.text, budget.next());
    let text = budget.take(&backend.editor, &selection.path, read);
    Some(PromptContext {
        path: selection.path,
        range: Some(selection.range),
        text,
    })
}

/// The text of `range` in `path` (the whole file without a range): the buffer's, else the disk's.
async fn context(
    backend: &Backend,
    path: PathBuf,
    range: Option<crate::editor::Range>,
) -> Result<PromptContext> {
    let from_buffer = backend.feed.text_of(&path, range).await;
    let mut budget = Budget::new(&backend.agent_config.borrow().context);
    let read = match from_buffer {
        Some(text) => Bounded::of(text, budget.next()),
        None => {
            // The client's numbers (ordered above) may reach u32::MAX.
            let (line, limit) = match range {
                Some(r) => (
                    Some(r.start.line.saturating_add(1)),
                    Some((r.end.line - r.start.line).saturating_add(1)),
                ),
                None => (None, None),
            };
            backend
                .editor
                .read_text_bounded(&path, line, limit, budget.next())
                .await
                .map_err(|e| Error::invalid_params(e.to_string()))?
        }
    };
    let text = budget.take(&backend.editor, &path, read);
    Ok(PromptContext { path, range, text })
}

fn refused(failure: AgentFailure) -> Error {
    Error::invalid_params(failure.to_string())
}

/// The first argument, parsed.
fn argument<T: DeserializeOwned>(arguments: Vec<Value>) -> Result<T> {
    let first = arguments.into_iter().next().unwrap_or(Value::Null);
    if first.is_null() {
        return Err(Error::invalid_params(
            "it needs arguments and was run with none (README → Commands lists them)",
        ));
    }
    serde_json::from_value(first).map_err(|e| Error::invalid_params(format!("bad arguments: {e}")))
}

/// The first argument, parsed; a missing one is the default.
fn optional_argument<T: DeserializeOwned + Default>(arguments: Vec<Value>) -> Result<T> {
    match arguments.first() {
        None | Some(Value::Null) => Ok(T::default()),
        Some(_) => argument(arguments),
    }
}
