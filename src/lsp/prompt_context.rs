//! How much of the editor's files goes along with one prompt (the files a chat message
//! mentions, the selection or file a prompt is about), within the user's `context.*` limits:
//! a file past its limit goes as its start with a note to the agent that it was cut, and the
//! user is told what was left out.

use std::path::Path;

use crate::config::ContextConfig;
use crate::editor::disk::files::Bounded;
use crate::editor::{EditorAccess, Level, file_name};

/// What is left of one prompt's limits.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    per_file: usize,
    left: usize,
}

impl Budget {
    /// The limits of a new prompt.
    pub fn new(limits: &ContextConfig) -> Self {
        let bytes = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        Self {
            per_file: bytes(limits.max_file_bytes),
            left: bytes(limits.max_message_bytes),
        }
    }

    /// The most the next file may take.
    pub fn next(&self) -> usize {
        self.per_file.min(self.left)
    }

    /// `read` of `path` (at most [`Self::next`] bytes) goes along: its text, with a note for the
    /// agent when it was cut, and the user told so through `editor`.
    pub fn take(&mut self, editor: &EditorAccess, path: &Path, read: Bounded) -> String {
        let limit = if self.per_file <= self.left {
            "context.maxFileBytes"
        } else {
            "context.maxMessageBytes"
        };
        self.left = self.left.saturating_sub(read.text.len());
        if !read.cut {
            return read.text;
        }
        let kept = read.text.len();
        editor.tell_user(
            Level::Warning,
            format!(
                "agentls: only the first {} of {} went to the agent ({limit} in your config \
                 file)",
                size(kept),
                file_name(path)
            ),
        );
        let mut text = read.text;
        text.push_str(&format!(
            "\n\n[agentls: the rest of this file was left out; only its first {kept} bytes are \
             above]\n"
        ));
        text
    }

    /// Tells the user `path` went without its text: the prompt's limit was used up.
    pub fn none_left(&self, editor: &EditorAccess, path: &Path) {
        editor.tell_user(
            Level::Warning,
            format!(
                "agentls: {} did not go to the agent: the message's files reached \
                 context.maxMessageBytes",
                file_name(path)
            ),
        );
    }
}

/// `bytes` in words: `512 bytes`, `64 KB`, `2.0 MB`.
fn size(bytes: usize) -> String {
    match bytes {
        0..1024 => format!("{bytes} bytes"),
        1024..1_048_576 => format!("{} KB", bytes / 1024),
        _ => format!("{:.1} MB", bytes as f64 / 1_048_576.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_words() {
        assert_eq!(size(512), "512 bytes");
        assert_eq!(size(64 * 1024), "64 KB");
        assert_eq!(size(2 * 1024 * 1024), "2.0 MB");
    }
}
