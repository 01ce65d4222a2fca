//! What the editor tells the state task, as named events: the host turns each LSP
//! notification into one [`EditorEvent`], and [`State::handle`] is the one place that says what
//! each does. Events run in the order they were sent, between the other jobs of the state task.

use std::path::{Path, PathBuf};

use super::State;
use crate::editor::documents::TextChange;
use crate::editor::documents::context::{ContextEvent, FileDiagnostics};
use crate::editor::documents::effects::Diagnostic;
use crate::editor::documents::position::{PositionEncoding, Range};
use crate::editor::documents::selection::Selection;

/// One thing the editor (or its settings) told agentls.
#[derive(Debug)]
pub enum EditorEvent {
    /// The position encoding negotiated at `initialize`.
    Encoding(PositionEncoding),
    /// What makes a line comment a comment prompt (`chat.commentMarker`).
    CommentMarker(String),
    /// What the workspace watcher leaves out (`watch.ignore`, gitignore syntax).
    WatchIgnore(Vec<String>),
    /// How many lines of a hunk a review shows (`review.maxPreviewLines`).
    PreviewLines(usize),
    /// How many turns' changes are kept for undoing (`review.keepTurns`).
    KeepTurns(usize),
    /// The editor opened a document.
    Opened {
        path: PathBuf,
        text: String,
        version: i32,
        language: String,
    },
    /// What the disk said when a document was opened (read off the state task).
    DiskAtOpen { path: PathBuf, disk: String },
    /// The editor changed a document.
    Changed {
        path: PathBuf,
        version: i32,
        changes: Vec<TextChange>,
    },
    /// The user saved a document: the disk says what its buffer says.
    Saved(PathBuf),
    /// The editor closed a document.
    Closed(PathBuf),
    /// The user selected `range` in `path` (`text`: what the editor says it covers).
    Selected {
        path: PathBuf,
        range: Range,
        text: Option<String>,
    },
    /// The editor forwarded the diagnostics of `path`, replacing earlier ones.
    Diagnostics {
        path: PathBuf,
        diagnostics: Vec<Diagnostic>,
    },
    /// The user pointed agents at `selection` (`None`: the current one).
    Mentioned(Option<Selection>),
    /// Workspace folders were added or removed.
    FoldersChanged {
        added: Vec<PathBuf>,
        removed: Vec<PathBuf>,
    },
}

impl EditorEvent {
    /// The event's name, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Encoding(_) => "encoding",
            Self::CommentMarker(_) => "comment marker",
            Self::WatchIgnore(_) => "watch ignore",
            Self::PreviewLines(_) => "preview lines",
            Self::KeepTurns(_) => "kept turns",
            Self::Opened { .. } => "opened",
            Self::DiskAtOpen { .. } => "disk at open",
            Self::Changed { .. } => "changed",
            Self::Saved(_) => "saved",
            Self::Closed(_) => "closed",
            Self::Selected { .. } => "selected",
            Self::Diagnostics { .. } => "diagnostics",
            Self::Mentioned(_) => "mentioned",
            Self::FoldersChanged { .. } => "folders changed",
        }
    }
}

impl State {
    /// Does what `event` says.
    pub fn handle(&mut self, event: EditorEvent) {
        match event {
            EditorEvent::Encoding(encoding) => self.encoding = encoding,
            EditorEvent::CommentMarker(marker) => self.comment_marker = marker,
            EditorEvent::WatchIgnore(patterns) => {
                if let Some(watch) = &self.disk_watch {
                    watch.set_ignore(&patterns);
                }
            }
            EditorEvent::PreviewLines(lines) => self.review_preview_lines = lines.max(1),
            EditorEvent::KeepTurns(turns) => self.checkpoints.keep(turns),
            EditorEvent::Opened {
                path,
                text,
                version,
                language,
            } => self.did_open(path, &text, version, &language),
            EditorEvent::DiskAtOpen { path, disk } => self.disk_at_open(&path, &disk),
            EditorEvent::Changed {
                path,
                version,
                changes,
            } => self.did_change(&path, version, &changes),
            EditorEvent::Saved(path) => self.did_save(&path),
            EditorEvent::Closed(path) => self.did_close(&path),
            EditorEvent::Selected { path, range, text } => {
                self.did_change_selection(path, range, text)
            }
            EditorEvent::Diagnostics { path, diagnostics } => {
                self.context.set_forwarded(path, diagnostics)
            }
            EditorEvent::Mentioned(selection) => {
                let selection = selection.or_else(|| self.selections.current().cloned());
                if let Some(selection) = selection {
                    self.context.publish(ContextEvent::Mentioned(selection));
                }
            }
            EditorEvent::FoldersChanged { added, removed } => self.change_folders(added, &removed),
        }
    }

    /// The disk's text of `path` as it was opened, unless a verdict already went out: then
    /// the proposer may have written the file, and the read may be that write.
    fn disk_at_open(&mut self, path: &std::path::Path, disk: &str) {
        let settling = self
            .reviews
            .iter()
            .any(|r| r.path == path && r.is_settling());
        if let Some(doc) = self.documents.get_mut(path)
            && !settling
        {
            doc.read_at_open(disk);
        }
    }

    /// The user saved `path`: the disk says what its buffer says.
    fn did_save(&mut self, path: &std::path::Path) {
        if let Some(doc) = self.documents.get_mut(path) {
            doc.mark_saved();
        }
        self.buffer_saved(path);
    }
}

impl State {
    /// Diagnostics for `path` (or every file): those the editor forwarded plus agentls's own,
    /// sorted by path.
    pub fn all_diagnostics(&self, path: Option<&Path>) -> Vec<FileDiagnostics> {
        let mut paths: Vec<PathBuf> = self.context.forwarded().keys().cloned().collect();
        paths.extend(self.reviews.iter().map(|r| r.path.clone()));
        paths.sort();
        paths.dedup();
        paths
            .into_iter()
            .filter(|p| path.is_none_or(|wanted| wanted == p))
            .map(|p| {
                let mut diagnostics = self
                    .context
                    .forwarded()
                    .get(&p)
                    .cloned()
                    .unwrap_or_default();
                diagnostics.extend(self.diagnostics(&p));
                FileDiagnostics {
                    path: p,
                    diagnostics,
                }
            })
            .filter(|f| !f.diagnostics.is_empty())
            .collect()
    }
}
