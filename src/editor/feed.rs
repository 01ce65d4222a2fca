//! The host's side of the port: [`EditorFeed`], what the editor did (opened, changed, selected,
//! answered), queued in arrival order to the state task.

use std::path::PathBuf;

use super::access_policy::AccessPolicy;
use super::chat;
use super::disk::files;
use super::documents::TextChange;
use super::documents::effects;
use super::documents::effects::{EffectSender, PluginEvents};
use super::documents::position::{PositionEncoding, Range};
use super::documents::selection::Selection;
use super::state::events::EditorEvent;
use super::state::{State, StateGone, StateHandle};

/// The host's side: what the editor did. Every method queues synchronously, so calling them in
/// the order messages arrived keeps that order.
#[derive(Debug, Clone)]
pub struct EditorFeed {
    pub(super) state: StateHandle,
    pub(super) effects: EffectSender,
    pub(super) policy: std::sync::Arc<std::sync::RwLock<AccessPolicy>>,
    pub(super) chat_inbox: chat::inbox::ChatInbox,
}

impl EditorFeed {
    /// Sets the negotiated position encoding (once, at `initialize`).
    pub fn set_encoding(&self, encoding: PositionEncoding) {
        self.state.send(EditorEvent::Encoding(encoding));
    }

    /// Sets the plugin events the client asked for (once, at `initialize`).
    pub fn set_plugin_events(&self, events: PluginEvents) {
        self.effects.set_plugin_events(events);
    }

    /// Comment prompts are lines with `marker` after a comment start (`chat.commentMarker`).
    pub fn set_comment_marker(&self, marker: String) {
        self.state.send(EditorEvent::CommentMarker(marker));
    }

    /// The workspace watcher leaves out what `patterns` name (`watch.ignore`).
    pub fn set_watch_ignore(&self, patterns: Vec<String>) {
        self.state.send(EditorEvent::WatchIgnore(patterns));
    }

    /// Sets the rules for agents' requests.
    pub fn set_policy(&self, policy: AccessPolicy) {
        let (preview_lines, keep_turns) = (policy.max_preview_lines, policy.keep_turns);
        *self.policy.write().unwrap_or_else(|e| e.into_inner()) = policy;
        self.state.send(EditorEvent::PreviewLines(preview_lines));
        self.state.send(EditorEvent::KeepTurns(keep_turns));
    }

    /// The editor opened a document. What the disk says is read too (off the state task): a
    /// buffer may open with unsaved text, and merging an agent's disk write needs the disk's.
    pub fn opened(&self, path: PathBuf, text: String, version: i32, language: String) {
        let owned = path.clone();
        self.state.send(EditorEvent::Opened {
            path,
            text,
            version,
            language,
        });
        let state = self.state.clone();
        tokio::spawn(async move {
            if let Ok(disk) = files::read(&owned).await {
                state.send(EditorEvent::DiskAtOpen { path: owned, disk });
            }
        });
    }

    /// The editor changed a document.
    pub fn changed(&self, path: PathBuf, version: i32, changes: Vec<TextChange>) {
        self.state.send(EditorEvent::Changed {
            path,
            version,
            changes,
        });
    }

    /// `path` is a chat document with `agent`.
    pub fn chat_opened(&self, path: PathBuf, agent: String) {
        let item = chat::inbox::ChatItem::Opened(agent);
        self.state.send_to_chat(&self.chat_inbox, &path, item);
    }

    /// `path`, a chat document with `agent` (maybe from an earlier run), was opened.
    pub fn chat_reopened(&self, path: PathBuf, agent: String) {
        let item = chat::inbox::ChatItem::Reopened(agent);
        self.state.send_to_chat(&self.chat_inbox, &path, item);
    }

    /// The user saved a document: the disk says what its buffer says.
    pub fn saved(&self, path: PathBuf) {
        self.state.send(EditorEvent::Saved(path));
    }

    /// The editor closed a document.
    pub fn closed(&self, path: PathBuf) {
        self.state.send(EditorEvent::Closed(path));
    }

    /// The user selected something.
    pub fn selected(&self, path: PathBuf, range: Range, text: Option<String>) {
        self.state.send(EditorEvent::Selected { path, range, text });
    }

    /// The editor forwarded diagnostics for `path` (replacing earlier ones).
    pub fn diagnostics_forwarded(&self, path: PathBuf, diagnostics: Vec<effects::Diagnostic>) {
        self.state
            .send(EditorEvent::Diagnostics { path, diagnostics });
    }

    /// The user pointed agents at the current selection (or at `selection`).
    pub fn mentioned(&self, selection: Option<Selection>) {
        self.state.send(EditorEvent::Mentioned(selection));
    }

    /// Workspace folders changed.
    pub fn folders_changed(&self, added: Vec<PathBuf>, removed: Vec<PathBuf>) {
        self.state
            .send(EditorEvent::FoldersChanged { added, removed });
    }

    /// A question for the state, answered in order with everything fed before it. For tests:
    /// the host asks by name (`host_queries.rs`; `tests/tidy.rs` checks it).
    pub async fn query<R: Send + 'static>(
        &self,
        question: impl FnOnce(&mut State) -> R + Send + 'static,
    ) -> Result<R, StateGone> {
        self.state.query(question).await
    }
}
