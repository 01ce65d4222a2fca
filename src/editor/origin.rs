//! Who asks the editor for something: one agent session or one connected terminal agent, and
//! how its business is withdrawn when it goes away.

use serde::Serialize;

/// Who is asking: one agent session or one connected terminal agent. Everything an origin
/// opened (reviews, questions) is torn down together when it goes away.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Origin {
    /// Unique among live origins, e.g. `acp:<agent>:<session>`.
    pub key: String,
    /// What the user calls it, e.g. the agent's name.
    pub label: String,
}

impl Origin {
    /// An origin from its key and label.
    pub fn new(key: impl Into<String>, label: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            label: label.into(),
        }
    }
}

/// Whether withdrawing an origin's business is announced to the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Withdrawal {
    /// Quietly: the caller tells the user why (a cancelled turn, a failure summary).
    Silent,
    /// With a message saying what was withdrawn.
    Announced,
}
