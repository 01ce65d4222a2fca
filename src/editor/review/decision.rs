//! What the user decides about a review: accept, reject or ask again, for one change or all of
//! them, and why a decision could not be taken. A code action carries a [`Decision`] to the
//! server and back.

use super::ReviewId;

/// Why a decision was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecisionError {
    /// No such review (decided already, or withdrawn).
    #[error("review {0} is no longer open")]
    NoReview(ReviewId),
    /// No such hunk.
    #[error("review {0} has no change {1}")]
    NoHunk(ReviewId, usize),
    /// The user edited the same text: accepting would drop their edit.
    #[error(
        "change {1} of review {0} overlaps your own edit; reject it, or ask the agent to propose it again"
    )]
    Conflict(ReviewId, usize),
    /// Every open hunk overlaps the user's own edits: none can be accepted.
    #[error(
        "every open change of review {0} overlaps your own edits; reject them, or ask the agent to propose them again"
    )]
    OnlyConflicts(ReviewId),
}

/// What the user chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Apply the change(s).
    Accept,
    /// Keep the text as it is.
    Reject,
    /// Reject everything and ask the agent to propose again against the current text.
    Rerequest,
}

/// What the user decided about a review: its one hunk `hunk`, or all its open hunks. A code
/// action carries it to `agentls.accept` / `agentls.reject` and back (`lsp::commands`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// The review.
    pub review: ReviewId,
    /// One hunk, or (`None`) all open ones.
    pub hunk: Option<usize>,
    /// What the user chose.
    pub choice: Choice,
}

impl Decision {
    /// All open hunks of `review`.
    pub fn all(review: ReviewId, choice: Choice) -> Self {
        Self {
            review,
            hunk: None,
            choice,
        }
    }
}
