//! A code action the port offers the user, and the command behind it; the host turns each into
//! an LSP code action and runs the command when it is chosen. Which ones a place offers is the
//! state task's business (`state/menu.rs`).

use super::documents::position::Range;
use super::review::ReviewId;
use super::review::checkpoints::TurnNumber;
use super::review::decision::Decision;

/// What running an action does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionCommand {
    /// Answer a question with one of its choices.
    Answer {
        /// The question.
        question: u64,
        /// The chosen answer's id.
        choice: String,
    },
    /// Accept or reject a review's hunk (or all its open hunks).
    Decide(Decision),
    /// Send what the user wrote in a chat document to its agent.
    SendChat {
        /// The chat document.
        path: std::path::PathBuf,
    },
    /// Stop the agent's running turn.
    Stop {
        /// The agent.
        agent: String,
    },
    /// Show a review's file at its first open change.
    ShowReview {
        /// The review.
        review: ReviewId,
    },
    /// Send the comment prompt on a line of a file to the agent.
    SendComment {
        /// The agent.
        agent: String,
        /// The file.
        path: std::path::PathBuf,
        /// The comment's line (0-based).
        line: usize,
    },
    /// Open the agent's latest chat.
    OpenChat {
        /// The agent.
        agent: String,
    },
    /// Quote lines of a file in the agent's chat, for a question about them.
    AskAbout {
        /// The agent.
        agent: String,
        /// The file.
        path: std::path::PathBuf,
        /// The range the user selected.
        range: Range,
    },
    /// Undo a turn's file changes (as a review), or redo them.
    UndoTurn {
        /// The turn.
        turn: TurnNumber,
        /// Put back what its undo took away.
        redo: bool,
    },
}

/// One action to offer, with its title.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserAction {
    /// What the user sees.
    pub title: String,
    /// What it does.
    pub command: ActionCommand,
}
