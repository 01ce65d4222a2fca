//! Where an agent's proposed edit meets the user: [`review_proposed_edit`] is the ONE function
//! the permission handler calls for a diff. Until the port's review engine
//! (`EditorAccess::review_diff`) lands it asks a whole-file question; it then becomes a call to
//! that engine, which diffs the proposal against the buffer or disk (never the agent's `oldText`).

use std::path::Path;

use crate::editor::{Choice, ChoiceKind, EditorAccess, Origin, diff, file_name};

/// The user's decision on a proposed edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditVerdict {
    /// Go ahead.
    Accepted,
    /// Do not.
    Rejected,
}

/// Asks the user whether `origin` may change `path` to `new_text`.
pub async fn review_proposed_edit(
    editor: &EditorAccess,
    origin: &Origin,
    path: &Path,
    new_text: &str,
    title: &str,
) -> EditVerdict {
    let file = file_name(path);
    let current = editor
        .read_text_file(path, None, None)
        .await
        .unwrap_or_default();
    let (added, removed) = line_counts(&current, new_text);
    let question = format!("{title}: {file} (+{added} −{removed} lines)");
    let choices = vec![
        Choice {
            id: "accept".into(),
            label: format!("Accept the change to {file}"),
            kind: ChoiceKind::Allow,
        },
        Choice {
            id: "reject".into(),
            label: "Reject".into(),
            kind: ChoiceKind::Reject,
        },
    ];
    match editor.ask_user(origin, &question, choices).await.as_deref() {
        Some("accept") => EditVerdict::Accepted,
        _ => EditVerdict::Rejected,
    }
}

/// Lines added and removed from `old` to `new`.
fn line_counts(old: &str, new: &str) -> (usize, usize) {
    diff::line_hunks(old, new)
        .iter()
        .fold((0, 0), |(added, removed), hunk| {
            let lines = |s: &str| s.split_inclusive('\n').count();
            (
                added + lines(&new[hunk.new.clone()]),
                removed + lines(&old[hunk.old.clone()]),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_changed_lines() {
        assert_eq!(line_counts("a\nb\nc\n", "a\nB\nc\nd\n"), (2, 1));
        assert_eq!(line_counts("", "x\n"), (1, 0));
    }
}
