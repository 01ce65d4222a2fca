//! How a command names a file: a `uri`, or a `path` as an editor's command line expands one
//! (Helix's `%{buffer_name}`: absolute, `~/…`, or relative to the working directory, which is
//! a workspace folder), and how it names lines: an LSP `range`, or `lines` as 1-based
//! `[first, last]` (Helix's `%{selection_line_start}`, `%{selection_line_end}`).

use std::path::{Path, PathBuf};

use tower_lsp_server::ls_types::Uri;

use super::convert;
use crate::editor::{Position, Range};

/// The file a command's `uri` or `path` names; `Ok(None)` when it names none.
pub fn file(
    uri: Option<&Uri>,
    path: Option<&str>,
    folders: &[PathBuf],
) -> Result<Option<PathBuf>, String> {
    if let Some(uri) = uri {
        return convert::path_of(uri)
            .map(Some)
            .ok_or_else(|| format!("not a file URI: {}", uri.as_str()));
    }
    let Some(path) = path.filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    if let Some(rest) = path.strip_prefix("~/") {
        let home = std::env::var_os("HOME").ok_or("`~/` in a path, and HOME is not set")?;
        return Ok(Some(Path::new(&home).join(rest)));
    }
    let given = Path::new(path);
    if given.is_absolute() {
        return Ok(Some(given.to_owned()));
    }
    let in_folder = folders
        .iter()
        .map(|folder| folder.join(given))
        .find(|candidate| candidate.exists());
    in_folder
        .or_else(|| folders.first().map(|folder| folder.join(given)))
        .map(Some)
        .ok_or_else(|| format!("{path}: a relative path, and there is no workspace folder"))
}

/// The range of the 1-based lines `first..=last`, in either order.
pub fn lines(first: u32, last: u32) -> Range {
    let (first, last) = (first.min(last).max(1), first.max(last).max(1));
    Range::new(Position::new(first - 1, 0), Position::new(last, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_absolute_home_relative_or_in_a_workspace_folder() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(b.join("src")).unwrap();
        std::fs::create_dir_all(&a).unwrap();
        std::fs::write(b.join("src/x.rs"), "").unwrap();
        let folders = [a.clone(), b.clone()];
        // The folder that has the file, else the first.
        assert_eq!(
            file(None, Some("src/x.rs"), &folders),
            Ok(Some(b.join("src/x.rs")))
        );
        assert_eq!(
            file(None, Some("new.rs"), &folders),
            Ok(Some(a.join("new.rs")))
        );
        assert_eq!(
            file(None, Some("/etc/hosts"), &folders),
            Ok(Some("/etc/hosts".into()))
        );
        let home = PathBuf::from(std::env::var_os("HOME").unwrap());
        assert_eq!(
            file(None, Some("~/c.md"), &folders),
            Ok(Some(home.join("c.md")))
        );
        assert_eq!(file(None, None, &folders), Ok(None));
        assert!(file(None, Some("x"), &[]).is_err());
        let uri = convert::uri_of(&b.join("src/x.rs")).unwrap();
        assert_eq!(
            file(Some(&uri), Some("ignored"), &folders),
            Ok(Some(b.join("src/x.rs")))
        );
    }

    #[test]
    fn lines_are_one_based_and_inclusive() {
        let range = lines(3, 2);
        assert_eq!(range, Range::new(Position::new(1, 0), Position::new(3, 0)));
        assert_eq!(
            lines(0, 0),
            Range::new(Position::new(0, 0), Position::new(1, 0))
        );
    }
}
