//! How messages name files: a file's name, or the first few of a long list.

use std::path::{Path, PathBuf};

/// The file name of `path` for messages, or the whole path when it has none.
pub fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// The most file names a message gives of one list; the whole list goes to the log.
pub const NAMED_IN_A_MESSAGE: usize = 5;

/// The names of the first [`NAMED_IN_A_MESSAGE`] of `paths`, and how many more there are: a
/// message about thousands of files is still one line.
pub fn some_file_names(paths: &std::collections::BTreeSet<PathBuf>) -> String {
    let mut names: Vec<_> = paths
        .iter()
        .take(NAMED_IN_A_MESSAGE)
        .map(|p| file_name(p))
        .collect();
    if paths.len() > NAMED_IN_A_MESSAGE {
        names.push(format!(
            "and {} more (all in agentls's log)",
            paths.len() - NAMED_IN_A_MESSAGE
        ));
    }
    names.join(", ")
}
