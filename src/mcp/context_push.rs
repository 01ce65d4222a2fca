//! Context pushed to a connected agent as it happens. The WebSocket IDE protocol gets
//! `selection_changed` (debounced: a burst of selection moves sends only the last) and
//! `at_mentioned` (at once); the Streamable HTTP companion protocol gets `ide/contextUpdate`
//! with the open files, the focused one carrying cursor and selected text (debounced too).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rmcp::model::{CustomNotification, ServerNotification};
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;

use super::shapes;
use super::tools::DiffStyle;
use crate::editor::documents::context::ContextEvent;
use crate::editor::{EditorAccess, Selection};

/// Quiet time before a selection (or context) update goes out.
pub const DEBOUNCE: Duration = Duration::from_millis(100);

/// Selected text longer than this is cut in context updates.
const MAX_SELECTED_TEXT: usize = 16 * 1024;

/// Forwards context `events` to `peer` until it goes away.
pub async fn run(
    editor: EditorAccess,
    mut events: broadcast::Receiver<ContextEvent>,
    peer: Peer<RoleServer>,
    style: DiffStyle,
) {
    // The companion protocol's agent learns what is open right away, not at the first move.
    let mut due = (style == DiffStyle::Notified).then(|| tokio::time::Instant::now() + DEBOUNCE);
    let mut latest_selection = None;
    loop {
        let event = match due {
            Some(at) => tokio::select! {
                event = events.recv() => Some(event),
                () = tokio::time::sleep_until(at) => None,
            },
            None => Some(events.recv().await),
        };
        let sent = match event {
            None => {
                due = None;
                let folders = editor.workspace_folders().await;
                let update = match style {
                    DiffStyle::Blocking => latest_selection
                        .take()
                        .filter(|s: &Selection| editor.agents_may_see(&s.path, &folders))
                        .map(|s| ("selection_changed", shapes::selection(&s))),
                    DiffStyle::Notified => {
                        Some(("ide/contextUpdate", context_update(&editor).await))
                    }
                };
                match update {
                    Some((method, params)) => send(&peer, method, params).await,
                    None => true,
                }
            }
            Some(Ok(ContextEvent::SelectionChanged(selection))) => {
                latest_selection = Some(selection);
                due = Some(tokio::time::Instant::now() + DEBOUNCE);
                true
            }
            Some(Ok(ContextEvent::DocumentsChanged)) if style == DiffStyle::Notified => {
                due = Some(tokio::time::Instant::now() + DEBOUNCE);
                true
            }
            Some(Ok(ContextEvent::Mentioned(selection))) if style == DiffStyle::Blocking => {
                send(&peer, "at_mentioned", shapes::mention(&selection)).await
            }
            Some(Ok(_)) => true,
            Some(Err(RecvError::Lagged(skipped))) => {
                tracing::debug!(skipped, "context events skipped; sending the latest");
                latest_selection = editor.current_selection().await;
                due = Some(tokio::time::Instant::now());
                true
            }
            Some(Err(RecvError::Closed)) => return,
        };
        if !sent {
            return;
        }
    }
}

/// Sends a notification; `false` when the agent is gone.
async fn send(peer: &Peer<RoleServer>, method: &'static str, params: Value) -> bool {
    let note = CustomNotification::new(method, Some(params));
    match peer
        .send_notification(ServerNotification::CustomNotification(note))
        .await
    {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!("{method} not delivered, stopping context updates: {e}");
            false
        }
    }
}

/// `ide/contextUpdate`: open files (focused first), the focused one with its cursor (1-based)
/// and selected text.
async fn context_update(editor: &EditorAccess) -> Value {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let folders = editor.workspace_folders().await;
    let selection = editor.current_selection().await;
    let mut documents = editor.open_documents().await;
    documents.retain(|d| editor.agents_may_see(&d.path, &folders));
    documents.sort_by_key(|d| !d.focused);
    let files: Vec<Value> = documents
        .iter()
        .map(|doc| {
            let mut file = json!({"path": doc.path, "timestamp": now, "isActive": doc.focused});
            if let Some(s) = selection
                .as_ref()
                .filter(|s| doc.focused && s.path == doc.path)
            {
                let (line, character) = (s.range.end.line, s.range.end.character);
                file["cursor"] = json!({"line": u64::from(line) + 1,
                                        "character": u64::from(character) + 1});
                let mut text = s.text.clone();
                if text.len() > MAX_SELECTED_TEXT {
                    let mut cut = MAX_SELECTED_TEXT;
                    while !text.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    text.truncate(cut);
                    text.push_str("... [TRUNCATED]");
                }
                file["selectedText"] = json!(text);
            }
            file
        })
        .collect();
    json!({"workspaceState": {"openFiles": files, "isTrusted": true}})
}
