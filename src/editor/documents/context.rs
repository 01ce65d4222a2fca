//! Context that flows from the editor to agents: the diagnostics plugins forward, and events
//! (the selection moved, documents opened or closed, folders changed, the user mentioned a range) that adapters
//! subscribe to and pass on in their own protocol.

use std::collections::HashMap;
use std::path::PathBuf;

use serde::Serialize;
use tokio::sync::broadcast;

use super::effects::Diagnostic;
use super::selection::Selection;

/// How many events a slow subscriber may fall behind before it skips to the latest.
const BACKLOG: usize = 256;

/// Something agents may want to know about, as it happens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContextEvent {
    /// The user's selection changed.
    SelectionChanged(Selection),
    /// A document was opened or closed.
    DocumentsChanged,
    /// The user pointed an agent at this selection.
    Mentioned(Selection),
    /// Workspace folders were added or removed.
    FoldersChanged,
}

/// What agents read of the editor's context, as one job of the state task left it: the state
/// task publishes it after each job that changed it, so tools answer from it without a round
/// trip ([`crate::editor::state::StateHandle::context_now`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContextSnapshot {
    /// The selection in the document the user is in.
    pub current_selection: Option<Selection>,
    /// The latest non-empty selection, in any document.
    pub latest_selection: Option<Selection>,
    /// The open document the user is in.
    pub focused_document: Option<PathBuf>,
    /// The workspace folders, in the editor's order.
    pub folders: Vec<PathBuf>,
}

/// Diagnostics of one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileDiagnostics {
    /// The file.
    pub path: PathBuf,
    /// Its diagnostics.
    pub diagnostics: Vec<Diagnostic>,
}

/// Diagnostics the editor forwarded, and the event stream.
#[derive(Debug)]
pub struct Context {
    forwarded: HashMap<PathBuf, Vec<Diagnostic>>,
    events: broadcast::Sender<ContextEvent>,
}

impl Default for Context {
    fn default() -> Self {
        Self {
            forwarded: HashMap::new(),
            events: broadcast::channel(BACKLOG).0,
        }
    }
}

impl Context {
    /// A receiver of every event from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<ContextEvent> {
        self.events.subscribe()
    }

    /// Tells subscribers (there may be none).
    pub fn publish(&self, event: ContextEvent) {
        let _ = self.events.send(event);
    }

    /// The diagnostics the editor forwarded, by file.
    pub fn forwarded(&self) -> &HashMap<PathBuf, Vec<Diagnostic>> {
        &self.forwarded
    }

    /// Replaces what the editor says about `path`.
    pub fn set_forwarded(&mut self, path: PathBuf, diagnostics: Vec<Diagnostic>) {
        if diagnostics.is_empty() {
            self.forwarded.remove(&path);
        } else {
            self.forwarded.insert(path, diagnostics);
        }
    }
}
