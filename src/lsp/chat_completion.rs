//! Completion in chat documents: `/` at the start of a line offers the agent's slash commands
//! (as it advertised them in its session, or last time when no session is open yet), `@`
//! offers the workspace's files, to mention them.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tower_lsp_server::ls_types::{
    CompletionItem, CompletionItemKind, CompletionResponse, CompletionTextEdit, Position, Range,
    TextEdit,
};

use super::convert;
use super::server::Backend;
use crate::editor::chat::ChatToken;

/// The most files offered for one `@`.
const MAX_FILES: usize = 200;
/// The most entries looked at while listing the workspace.
const MAX_WALK: usize = 20_000;

/// What to offer at `position` of the document `path`; `None` when it is not a chat or the
/// word there is not a command or a mention.
pub async fn complete(
    backend: &Backend,
    path: PathBuf,
    position: Position,
) -> Option<CompletionResponse> {
    let at = convert::position(position);
    let token = backend.feed.chat_token(&path, at).await?;
    let range = Range {
        start: convert::lsp_position(token.start),
        end: position,
    };
    let items = if token.word.starts_with('/') && token.starts_line {
        let session = backend.agents.current_session(&token.agent);
        let advertised = match &session["commands"] {
            Value::Array(_) => session["commands"].clone(),
            // No session yet (a fresh chat): what the agent advertised last time.
            _ => {
                let agent = token.agent.clone();
                let recalled =
                    tokio::task::spawn_blocking(move || crate::acp::command_memory::recall(&agent));
                recalled.await.ok().flatten().unwrap_or(Value::Null)
            }
        };
        commands(&advertised, &token, range)
    } else if let Some(typed) = token.word.strip_prefix('@') {
        let folders = backend.editor.workspace_folders().await;
        let typed = typed.to_owned();
        tokio::task::spawn_blocking(move || files(&folders, &typed, range))
            .await
            .ok()?
    } else {
        return None;
    };
    Some(CompletionResponse::Array(items))
}

/// The agent's slash commands (as it advertised them) that start with what was typed.
fn commands(advertised: &Value, token: &ChatToken, range: Range) -> Vec<CompletionItem> {
    let typed = &token.word[1..];
    let commands = advertised.as_array();
    commands
        .into_iter()
        .flatten()
        .filter_map(|command| {
            let name = command["name"].as_str()?;
            name.starts_with(typed).then(|| CompletionItem {
                label: format!("/{name}"),
                kind: Some(CompletionItemKind::FUNCTION),
                detail: command["description"].as_str().map(str::to_owned),
                text_edit: Some(CompletionTextEdit::Edit(TextEdit {
                    range,
                    new_text: format!("/{name} "),
                })),
                ..Default::default()
            })
        })
        .collect()
}

/// Workspace files whose path (relative to its folder) contains what was typed.
fn files(folders: &[PathBuf], typed: &str, range: Range) -> Vec<CompletionItem> {
    let mut found = Vec::new();
    for folder in folders {
        let walked = crate::editor::disk::tree::walk(folder).flatten();
        for entry in walked.take(MAX_WALK) {
            if found.len() >= MAX_FILES {
                return found;
            }
            if entry.file_type().is_some_and(|t| t.is_file())
                && let Some(item) = file_item(folder, entry.path(), typed, range)
            {
                found.push(item);
            }
        }
    }
    found
}

fn file_item(folder: &Path, path: &Path, typed: &str, range: Range) -> Option<CompletionItem> {
    let relative = path.strip_prefix(folder).ok()?.to_str()?;
    relative.contains(typed).then(|| CompletionItem {
        label: format!("@{relative}"),
        kind: Some(CompletionItemKind::FILE),
        text_edit: Some(CompletionTextEdit::Edit(TextEdit {
            range,
            new_text: format!("@{relative} "),
        })),
        ..Default::default()
    })
}
