//! The rules the port applies to agents' requests, from the user's config.

/// Rules the port applies to agents' requests, from the config.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccessPolicy {
    /// Let agents touch files outside the workspace folders.
    pub allow_outside_workspace: bool,
    /// Accept every review without asking (`review.autoAccept`).
    pub auto_accept: bool,
    /// Per-origin overrides of `auto_accept`, by origin label (`review.agents.<name>.autoAccept`).
    pub auto_accept_for: std::collections::BTreeMap<String, bool>,
    /// How many lines of each side a review preview shows (`review.maxPreviewLines`).
    pub max_preview_lines: usize,
    /// How many of the newest turns' changes are kept for undoing (`review.keepTurns`).
    pub keep_turns: usize,
}

impl AccessPolicy {
    /// Whether reviews from the origin labelled `label` are accepted without asking.
    pub fn auto_accepts(&self, label: &str) -> bool {
        self.auto_accept_for
            .get(label)
            .copied()
            .unwrap_or(self.auto_accept)
    }
}
