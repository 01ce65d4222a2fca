//! Changes nobody asked about, reviewed after the fact: an agent that writes a file without a
//! permission (an auto mode, a tool that never asks) gets its change shown like a proposal, with
//! **Keep** and **Undo** per hunk. Such a review's hunks propose going back to the text before
//! the change, so the review engine (rebase on typing, minimal edits, closed files) serves it as
//! is: Undo accepts a hunk (the old text returns, the user's edits stay), Keep rejects it.

use std::path::{Path, PathBuf};

use ropey::Rope;

use super::State;
use crate::editor::documents::effects::Level;
use crate::editor::file_names::file_name;
use crate::editor::origin::Origin;
use crate::editor::review::{Applier, Phase, Review, ReviewKind, ReviewText};

/// A change that landed in an open buffer whose `didChange` has not arrived yet.
#[derive(Debug)]
pub struct Landing {
    origin: Origin,
    path: PathBuf,
    before: String,
    after: String,
}

impl Landing {
    /// The file it changed.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl State {
    /// `origin` changed `path` from `before` to `after` without asking: show it for Keep/Undo
    /// once the buffer (when open) holds `after`.
    pub fn change_landed(&mut self, origin: Origin, path: PathBuf, before: String, after: String) {
        if before == after {
            return;
        }
        let landing = Landing {
            origin,
            path,
            before,
            after,
        };
        match self.documents.get(&landing.path) {
            Some(doc) if doc.text() != landing.after => self.landings.push(landing),
            _ => self.open_landed(landing),
        }
    }

    /// The buffer at `path` changed: changes waiting for it to hold their text are shown now.
    pub(in crate::editor) fn landings_follow_change(&mut self, path: &Path) {
        let Some(text) = self.documents.get(path).map(|d| d.text()) else {
            return;
        };
        let (ready, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.landings)
            .into_iter()
            .partition(|l| l.path == path && l.after == text);
        self.landings = waiting;
        for landing in ready {
            self.open_landed(landing);
        }
    }

    fn open_landed(&mut self, landing: Landing) {
        let hunks = Review::hunks_between(&landing.after, &landing.before);
        if hunks.is_empty() {
            return;
        }
        let id = self.reviews.next_id();
        let (count, file) = (hunks.len(), file_name(&landing.path));
        let version = self.documents.get(&landing.path).map(|d| d.version());
        let label = landing.origin.label.clone();
        let text = match version {
            Some(version) => ReviewText::Open {
                version,
                echo_after: None,
            },
            None => ReviewText::Closed(Rope::from_str(&landing.after)),
        };
        let path = landing.path.clone();
        self.reviews.add(Review {
            id,
            kind: ReviewKind::Landed,
            applied_by: Applier::Editor,
            phase: Phase::Deciding,
            origin: landing.origin,
            path: landing.path,
            title: format!("{label} changed {file} without asking"),
            base: landing.after,
            proposal: landing.before,
            file_existed: true,
            hunks,
            text,
            verdict: None,
        });
        self.effects.message(
            Level::Warning,
            format!(
                "{label} changed {file} without asking ({count} change{}): Keep or Undo each with \
                 code actions",
                if count == 1 { "" } else { "s" }
            ),
        );
        self.present(&path);
    }
}
