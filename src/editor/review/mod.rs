//! A review: an agent's proposed text for one file, as hunks over the current text, each
//! accepted or rejected by the user. This module is the model only (no effects): splitting a
//! proposal into hunks, following the user's edits (rebase), and the text that results.
//!
//! Hunk spans are char offsets of the *current* text: the open buffer's, or for a file that is
//! not open, the review's own copy of the disk text.

pub mod checkpoints;
pub mod decision;
pub mod reconcile;
pub mod request;
pub mod show_limits;

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ropey::Rope;
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, oneshot};

use super::diff;
use super::documents::effects::EffectError;
use super::origin::Origin;

/// Identifies a review in commands, diagnostics and plugins' messages: a number from 1, never
/// reused while the server runs.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(transparent)]
pub struct ReviewId(pub u64);

impl std::fmt::Display for ReviewId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The open reviews, by id (so oldest first), and the next id to give.
#[derive(Debug, Default)]
pub struct Reviews {
    by_id: BTreeMap<ReviewId, Review>,
    last_id: ReviewId,
}

impl Reviews {
    /// A new id for a review about to be added.
    pub fn next_id(&mut self) -> ReviewId {
        self.last_id.0 += 1;
        self.last_id
    }

    /// Adds `review` (its id from [`Reviews::next_id`]).
    pub fn add(&mut self, review: Review) {
        self.by_id.insert(review.id, review);
    }

    /// Review `id`, if open.
    pub fn get(&self, id: ReviewId) -> Option<&Review> {
        self.by_id.get(&id)
    }

    /// Review `id`, if open.
    pub fn get_mut(&mut self, id: ReviewId) -> Option<&mut Review> {
        self.by_id.get_mut(&id)
    }

    /// Forgets review `id`, returning it.
    pub fn remove(&mut self, id: ReviewId) -> Option<Review> {
        self.by_id.remove(&id)
    }

    /// Every open review, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Review> {
        self.by_id.values()
    }

    /// Every open review, oldest first.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Review> {
        self.by_id.values_mut()
    }

    /// The open reviews of `path`, oldest first.
    pub fn on<'a>(&'a self, path: &'a Path) -> impl Iterator<Item = &'a Review> {
        self.iter().filter(move |r| r.path == path)
    }

    /// The open reviews of `path`, oldest first.
    pub fn on_mut<'a>(&'a mut self, path: &'a Path) -> impl Iterator<Item = &'a mut Review> {
        self.iter_mut().filter(move |r| r.path == path)
    }

    /// How many reviews are open.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether no review is open.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

/// Where a hunk stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum HunkState {
    /// Waiting for the user.
    Pending,
    /// Accepted by the user, not applied yet: its author carries it out once told (see
    /// [`Applier::Proposer`]); its span still holds its old text.
    Approved,
    /// Accepted; the edit is on its way to the editor.
    Applying,
    /// Accepted and applied.
    Accepted,
    /// Rejected: the text keeps what it had.
    Rejected,
    /// The user edited the same text since the proposal: it cannot be applied as proposed.
    Conflict,
}

impl HunkState {
    /// Whether the user still has to decide (or the decision is still being applied).
    pub fn is_open(self) -> bool {
        matches!(self, Self::Pending | Self::Applying | Self::Conflict)
    }

    /// Whether the user accepted it (applied or not yet).
    pub fn is_accepted(self) -> bool {
        matches!(self, Self::Approved | Self::Applying | Self::Accepted)
    }
}

/// One contiguous change of a proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// The chars of the current text this hunk replaces.
    pub span: Range<usize>,
    /// The chars of the review's base text it replaces (never moves).
    pub base_span: Range<usize>,
    /// The text it replaces, as it was when proposed.
    pub old_text: String,
    /// The text it puts there.
    pub new_text: String,
    /// Where it stands.
    pub state: HunkState,
}

/// What a review is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ReviewKind {
    /// A change proposed before it happens: accept applies it.
    Proposal,
    /// A change an agent made without asking, reviewed after the fact: its hunks propose going
    /// back to the text before it, so "Undo" accepts a hunk and "Keep" rejects it.
    Landed,
    /// A turn's changes offered for undoing (`agentls.undoTurn`): like [`ReviewKind::Landed`],
    /// its hunks go back to the text before the turn.
    TurnUndo,
}

impl ReviewKind {
    /// Whether its hunks go back to an earlier text (Undo accepts, Keep rejects).
    pub fn goes_back(self) -> bool {
        self != Self::Proposal
    }
}

/// Who carries out the hunks the user accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applier {
    /// agentls applies them as soon as the user decides; the proposer gets the resulting text
    /// (a terminal agent's `openDiff` writes what it is answered).
    Editor,
    /// The proposer hears the verdict first and writes the file itself (an ACP agent's edit tool
    /// re-reads the file and looks for its old text, so nothing may change before it does);
    /// agentls makes that write exactly the accepted hunks, and applies them itself when the
    /// write does not come.
    Proposer,
}

/// How a proposal is put to the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Terms {
    /// Who carries out what the user accepts.
    pub applied_by: Applier,
    /// Whether the user is told when the proposer stops waiting for the verdict.
    pub abandoned: super::origin::Withdrawal,
}

impl Terms {
    /// A terminal agent's diff: agentls applies it; a client that gives up is announced.
    pub const APPLIED_BY_EDITOR: Self = Self {
        applied_by: Applier::Editor,
        abandoned: super::origin::Withdrawal::Announced,
    };
    /// An ACP agent's permission: it writes the change itself once allowed; its adapter reports
    /// withdrawals in the turn's summary.
    pub const APPLIED_BY_PROPOSER: Self = Self {
        applied_by: Applier::Proposer,
        abandoned: super::origin::Withdrawal::Silent,
    };
}

/// How a review ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "camelCase")]
pub enum Verdict {
    /// Some or all hunks were accepted; `text` is what the file now says (the buffer when the
    /// file is open, with the user's own unsaved edits). `rejected` describes the hunks the user
    /// turned down, for telling the agent.
    Accepted {
        /// The resulting text of the file.
        text: String,
        /// One line per rejected hunk.
        rejected: Vec<String>,
    },
    /// Nothing was accepted.
    Rejected {
        /// Why, when there is more to say than "the user said no".
        reason: Option<String>,
    },
    /// The review was withdrawn: its origin went away or shut down.
    Cancelled,
}

/// The text a review's hunk spans index.
#[derive(Debug)]
pub enum ReviewText {
    /// The open buffer, at `version`.
    Open {
        /// The document version the hunks are relative to.
        version: i32,
        /// The highest version an accepted edit was computed against: the verdict waits until
        /// the editor reports a later one, so that its text includes the edit.
        echo_after: Option<i32>,
    },
    /// The file is not open: the review's own copy of the disk text.
    Closed(Rope),
}

/// Where a review stands, beyond its hunks.
#[derive(Debug)]
pub enum Phase {
    /// The user is deciding, or agentls is carrying out what they decided.
    Deciding,
    /// Every hunk is decided and the proposer carries out its change itself: the verdict goes
    /// to it (once the disk it writes on is known), and agentls waits for its write
    /// (`state/settlement.rs`).
    Settling(Settling),
}

/// A pending review.
#[derive(Debug)]
pub struct Review {
    /// Identifies the review in commands and diagnostics.
    pub id: ReviewId,
    /// A proposal, or a change that already landed.
    pub kind: ReviewKind,
    /// Who carries out what the user accepts.
    pub applied_by: Applier,
    /// Where it stands.
    pub phase: Phase,
    /// Who proposed it.
    pub origin: Origin,
    /// The file.
    pub path: PathBuf,
    /// A short human title ("Edit src/main.rs").
    pub title: String,
    /// The text the proposal was diffed against.
    pub base: String,
    /// The whole proposal.
    pub proposal: String,
    /// Whether the file existed when the proposal came.
    pub file_existed: bool,
    /// The hunks, in text order.
    pub hunks: Vec<Hunk>,
    /// What the hunks' spans index.
    pub text: ReviewText,
    /// Where the verdict goes (taken when it is sent).
    pub verdict: Option<oneshot::Sender<Verdict>>,
}

impl Review {
    /// The settlement this review waits in, if its verdict went to a proposer that writes.
    pub fn settling(&self) -> Option<&Settling> {
        match &self.phase {
            Phase::Settling(settling) => Some(settling),
            Phase::Deciding => None,
        }
    }

    /// The settlement this review waits in, if any.
    pub fn settling_mut(&mut self) -> Option<&mut Settling> {
        match &mut self.phase {
            Phase::Settling(settling) => Some(settling),
            Phase::Deciding => None,
        }
    }

    /// Whether the verdict went (or goes) to a proposer that writes the change itself.
    pub fn is_settling(&self) -> bool {
        matches!(self.phase, Phase::Settling(_))
    }

    /// The document version the hunks are relative to (`None`: the file is not open).
    pub fn version(&self) -> Option<i32> {
        match self.text {
            ReviewText::Open { version, .. } => Some(version),
            ReviewText::Closed(_) => None,
        }
    }

    /// The version whose echo an accepted edit waits for, when one does.
    pub fn echo_after(&self) -> Option<i32> {
        match self.text {
            ReviewText::Open { echo_after, .. } => echo_after,
            ReviewText::Closed(_) => None,
        }
    }

    /// The review's own copy of a closed file's text.
    pub fn closed_text(&self) -> Option<&Rope> {
        match &self.text {
            ReviewText::Closed(rope) => Some(rope),
            ReviewText::Open { .. } => None,
        }
    }

    /// Hunks turning `base` into `proposal`, as char spans of `base`.
    pub fn hunks_between(base: &str, proposal: &str) -> Vec<Hunk> {
        let rope = Rope::from_str(base);
        diff::line_hunks(base, proposal)
            .into_iter()
            .map(|h| Hunk {
                span: rope.byte_to_char(h.old.start)..rope.byte_to_char(h.old.end),
                base_span: rope.byte_to_char(h.old.start)..rope.byte_to_char(h.old.end),
                old_text: base[h.old].to_owned(),
                new_text: proposal[h.new].to_owned(),
                state: HunkState::Pending,
            })
            .collect()
    }

    /// Follows one change of the current text: chars `removed` replaced by `inserted` chars.
    /// Hunks after it move; a pending hunk the change touches inside becomes a conflict; a hunk
    /// being applied grows or shrinks with a change within it.
    /// Returns whether any hunk newly became a conflict.
    pub fn rebase(&mut self, removed: Range<usize>, inserted: usize) -> bool {
        let delta = inserted as isize - removed.len() as isize;
        let shift = |at: usize| (at as isize + delta) as usize;
        let mut conflicted = false;
        for hunk in &mut self.hunks {
            let span = hunk.span.clone();
            let own_edit = hunk.state == HunkState::Applying
                && removed.start >= span.start
                && removed.end <= span.end;
            if own_edit {
                // The accept's edit, even one that inserts at either end: the hunk covers it
                // (else an accepted hunk would sit beside its own new text).
                hunk.span = span.start..shift(span.end);
            } else if removed.end <= span.start {
                // Wholly before (touching counts: the hunk's own text is intact).
                hunk.span = shift(span.start)..shift(span.end);
            } else if removed.start >= span.end {
                // Wholly after: nothing moves.
            } else {
                // The change rewrites text the hunk replaces.
                if matches!(hunk.state, HunkState::Pending | HunkState::Approved) {
                    hunk.state = HunkState::Conflict;
                    conflicted = true;
                }
                let start = span.start.min(removed.start);
                hunk.span = start..shift(span.end.max(removed.end)).max(start);
            }
        }
        conflicted
    }

    /// The text that results from applying the accepted hunks to `current`, for a file that is
    /// not open (the hunks' spans index `current`).
    pub fn accepted_text(&self, current: &Rope) -> String {
        let mut text = current.clone();
        for hunk in self.hunks.iter().rev() {
            if hunk.state.is_accepted() {
                text.remove(hunk.span.clone());
                text.insert(hunk.span.start, &hunk.new_text);
            }
        }
        text.to_string()
    }

    /// The base text with only the accepted hunks (what "exactly the accepted changes" means
    /// on a disk that still says the base).
    pub fn accepted_over_base(&self) -> String {
        let mut text = Rope::from_str(&self.base);
        for hunk in self.hunks.iter().rev() {
            if hunk.state.is_accepted() {
                text.remove(hunk.base_span.clone());
                text.insert(hunk.base_span.start, &hunk.new_text);
            }
        }
        text.to_string()
    }

    /// One line per rejected hunk, for telling the agent what the user turned down.
    pub fn rejected_descriptions(&self, line_of: impl Fn(usize) -> usize) -> Vec<String> {
        self.hunks
            .iter()
            .filter(|h| h.state == HunkState::Rejected)
            .map(|h| {
                format!(
                    "line {}: kept {:?} instead of {:?}",
                    line_of(h.span.start) + 1,
                    shorten(&h.old_text),
                    shorten(&h.new_text)
                )
            })
            .collect()
    }

    /// Whether every hunk is decided and applied.
    pub fn is_decided(&self) -> bool {
        !self.hunks.iter().any(|h| h.state.is_open())
    }

    /// The hunks accepted but not applied yet.
    pub fn approved(&self) -> Vec<usize> {
        (0..self.hunks.len())
            .filter(|&i| self.hunks[i].state == HunkState::Approved)
            .collect()
    }

    /// How many hunks the user can still accept (those in conflict with their own edits
    /// cannot be).
    pub fn acceptable_count(&self) -> usize {
        self.hunks
            .iter()
            .filter(|h| h.state == HunkState::Pending)
            .count()
    }

    /// How many hunks still wait for the user.
    pub fn open_count(&self) -> usize {
        self.hunks
            .iter()
            .filter(|h| matches!(h.state, HunkState::Pending | HunkState::Conflict))
            .count()
    }
}

/// The first line of `text`, cut to 60 chars.
fn shorten(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    let mut short: String = line.chars().take(60).collect();
    if short.len() < text.trim_end_matches('\n').len() {
        short.push('…');
    }
    short
}

/// A review whose verdict went out while its accepted hunks wait for the proposer's write.
#[derive(Debug, Default)]
pub struct Settling {
    /// Tells the watcher to settle now (the turn ended, the origin went away); dropped once the
    /// review settled another way.
    pub(super) force: Option<oneshot::Sender<()>>,
    /// Writers waiting for the accepted hunks to reach the buffer: they get its text, or why
    /// the editor did not apply them.
    pub(super) waiters: Vec<oneshot::Sender<Result<String, EffectError>>>,
    /// Wakes the watcher: the workspace watcher saw the file change.
    pub(super) disk_changed: Arc<Notify>,
    /// What agentls made the disk say when the proposer's write came (`None`: it left the disk
    /// alone): a later write of the same proposal is made this again, never merged anew.
    pub(super) disk: Option<String>,
}

impl Settling {
    /// What agentls made the disk say when it settled, if it did.
    pub fn settled_disk(&self) -> Option<&str> {
        self.disk.as_deref()
    }

    /// The editor did not apply the accepted hunks: the writers waiting for them hear why
    /// (their write did not happen), instead of the unchanged buffer as if it had.
    pub fn fail_writers(&mut self, error: &EffectError) {
        for waiter in self.waiters.drain(..) {
            let _ = waiter.send(Err(error.clone()));
        }
    }
}
