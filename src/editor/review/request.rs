//! What opening a review takes, and a withdrawn proposal remembered until the next
//! presentation (a new one from the same origin for the same file makes it a revision).

use std::path::PathBuf;

use tokio::sync::oneshot;

use super::{Hunk, Terms};
use crate::editor::origin::Origin;

/// How many proposals one origin may have open at once; more are refused until the user has
/// decided some (a flood of proposals must not flood the editor).
pub const MAX_OPEN_PER_ORIGIN: usize = 50;

/// Everything needed to open a review; built by `EditorAccess::review_diff` off the state task.
#[derive(Debug)]
pub struct ReviewRequest {
    /// Who proposes.
    pub origin: Origin,
    /// The file.
    pub path: PathBuf,
    /// A short title.
    pub title: String,
    /// The text the hunks were computed against.
    pub base: String,
    /// The buffer version `base` came from (`None`: the disk).
    pub base_version: Option<i32>,
    /// Whether the file existed.
    pub file_existed: bool,
    /// The whole proposal.
    pub proposal: String,
    /// The proposal as hunks over `base`.
    pub hunks: Vec<Hunk>,
    /// Accept everything without asking (config).
    pub auto_accept: bool,
    /// Who carries out what the user accepts, and whether giving up is announced.
    pub terms: Terms,
    /// Closes when the caller stops waiting for the verdict (its future was dropped: an agent
    /// withdrew the request); the review is then withdrawn too.
    pub caller_gone: oneshot::Receiver<()>,
}

/// A proposal its proposer withdrew, not announced yet: a new one of the same origin for the
/// same file before the next presentation makes it a revision instead.
#[derive(Debug)]
pub struct WithdrawnProposal {
    pub(in crate::editor) at: tokio::time::Instant,
    pub(in crate::editor) announce: bool,
    pub(in crate::editor) who: String,
    pub(in crate::editor) file: String,
}
