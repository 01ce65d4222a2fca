//! Where an agent's proposed edit meets the user: [`review_proposed_edit`] is the one function
//! the permission handler calls for a diff. It hands the proposal to the port's review engine,
//! which diffs it against the buffer or disk (never the agent's `oldText`), previews it, and
//! applies exactly the hunks the user accepts.

use std::path::Path;

use crate::editor::review::Verdict;
use crate::editor::{EditorAccess, FileError, Origin};

/// Asks the user, through a review, whether `origin` may change `path` to `new_text`.
pub async fn review_proposed_edit(
    editor: &EditorAccess,
    origin: &Origin,
    path: &Path,
    new_text: &str,
    title: &str,
) -> Result<Verdict, FileError> {
    editor.review_diff(origin, path, new_text, title).await
}
