//! Finding chats again: `agentls.openChat` reopens the agent's latest chat of the workspace
//! (a new one only on request), and `workspace/symbol` lists the workspace's chats by their
//! first message, so every editor can pick one with standard LSP (Helix `space S`, Neovim's
//! workspace symbols, eglot's `xref-find-apropos`, VS Code's `#`). What a chat is comes from
//! agentls's records (`editor::chat_record`), never from a document's text.

use std::path::PathBuf;

use tower_lsp_server::ls_types::{
    Location, OneOf, Position, Range, SymbolKind, WorkspaceSymbol, WorkspaceSymbolResponse,
};

use super::convert;
use super::server::Backend;
use crate::editor::chat::record::{self, ListedChat};

/// The most characters of a first message a chat's symbol shows.
const NAME_CHARS: usize = 80;

/// The chats agentls made for this workspace, most recently active first (none when there is
/// no chats folder).
async fn listed(backend: &Backend) -> Vec<ListedChat> {
    let Ok(folder) = super::chat_commands::workspace_chats(backend).await else {
        return Vec::new();
    };
    tokio::task::spawn_blocking(move || record::list(&folder))
        .await
        .unwrap_or_default()
}

/// `agent`'s latest chat in this workspace: the one it last used since the server started,
/// else the most recently active one agentls made for this workspace before.
pub async fn latest(backend: &Backend, agent: &str) -> Option<PathBuf> {
    let in_use = backend.feed.latest_chat(agent).await;
    if in_use.is_some() {
        return in_use;
    }
    let chats = listed(backend).await;
    chats.into_iter().find(|c| c.agent == agent).map(|c| c.path)
}

/// `workspace/symbol`: the workspace's chats whose first message or agent contains `query`
/// (ignoring case), each named by its first message.
pub async fn symbols(backend: &Backend, query: &str) -> WorkspaceSymbolResponse {
    let query = query.to_lowercase();
    let symbols = listed(backend)
        .await
        .into_iter()
        .filter_map(|chat| {
            let symbol = symbol(chat)?;
            let found = symbol.name.to_lowercase().contains(&query)
                || symbol
                    .container_name
                    .as_deref()
                    .is_some_and(|c| c.to_lowercase().contains(&query));
            found.then_some(symbol)
        })
        .collect();
    WorkspaceSymbolResponse::Nested(symbols)
}

/// The symbol of one chat: its first message's first line (cut), in "Chat with <agent>".
fn symbol(chat: ListedChat) -> Option<WorkspaceSymbol> {
    let first_line = chat.first_message.as_deref().and_then(|m| m.lines().next());
    let mut name: String = first_line
        .unwrap_or("(no message yet)")
        .chars()
        .take(NAME_CHARS)
        .collect();
    if first_line.is_some_and(|l| l.chars().count() > NAME_CHARS) {
        name.push('…');
    }
    let start = Position::new(0, 0);
    Some(WorkspaceSymbol {
        name,
        kind: SymbolKind::FILE,
        tags: None,
        container_name: Some(format!("Chat with {}", chat.agent)),
        location: OneOf::Left(Location::new(
            convert::uri_of(&chat.path)?,
            Range::new(start, start),
        )),
        data: None,
    })
}
