//! What of the workspace folders can be reviewed: every folder and file but those nobody
//! reviews (build output, dependencies, VCS folders: a built-in list of folder names) and those
//! the repository ignores (`.gitignore`, `.ignore`, git's `info/exclude`, each folder's rules
//! as git reads them, also outside a git repository). The workspace watcher watches only these
//! folders, and `@` completion offers only these files. Names are matched below a workspace
//! folder only: a workspace inside a folder called `build` is watched like any other.

use std::path::{Path, PathBuf};

use ignore::WalkBuilder;

/// Folder names whose contents are never an agent's edit worth reviewing.
const IGNORED_FOLDERS: &[&str] = &[
    ".git",
    ".hg",
    ".jj",
    ".svn",
    "target",
    "node_modules",
    ".venv",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    "dist",
    "build",
];

/// A walk of `root` (a workspace folder, or a folder inside one) over what can be reviewed,
/// `root` first. The ignore files of `root`'s parents apply too. Links are not followed.
pub fn walk(root: &Path) -> ignore::Walk {
    builder(root)
        .filter_entry(|entry| entry.depth() == 0 || !built_in(entry))
        .build()
}

/// The folders under `root` (itself included) that can be reviewed. Blocking.
pub fn folders(root: &Path) -> Vec<PathBuf> {
    walk(root)
        .flatten()
        .filter(|e| e.file_type().is_some_and(|t| t.is_dir()))
        .map(ignore::DirEntry::into_path)
        .collect()
}

/// Whether the folder at `path` (below a workspace folder) can be reviewed: its name is not on
/// the built-in list and no ignore file of its parents leaves it out. Blocking: lists its
/// parent.
pub fn is_reviewable_folder(path: &Path) -> bool {
    let Some(parent) = path.parent() else {
        return true;
    };
    let wanted = path.to_owned();
    walk_within(parent, 1, move |entry| entry.path() == wanted)
        .flatten()
        .any(|e| e.path() == path)
}

/// [`walk`] down to `depth` levels, into the entries `keep` keeps.
fn walk_within(
    root: &Path,
    depth: usize,
    keep: impl Fn(&ignore::DirEntry) -> bool + Send + Sync + 'static,
) -> ignore::Walk {
    builder(root)
        .max_depth(Some(depth))
        .filter_entry(move |entry| entry.depth() == 0 || (!built_in(entry) && keep(entry)))
        .build()
}

/// Whether `entry` is a folder the built-in list leaves out.
fn built_in(entry: &ignore::DirEntry) -> bool {
    let folder = entry.file_type().is_some_and(|t| t.is_dir());
    let name = entry.file_name().to_str().unwrap_or_default();
    folder && IGNORED_FOLDERS.contains(&name)
}

/// How every walk reads the ignore files.
fn builder(root: &Path) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    builder
        .hidden(false)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .ignore(true)
        .parents(true)
        .require_git(false)
        .follow_links(false);
    builder
}

/// Whether `path` names an editor's backup, auto-save or swap file.
pub fn is_scratch(path: &Path) -> bool {
    path.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
        n.ends_with('~')
            || (n.starts_with('#') && n.ends_with('#'))
            || n.starts_with(".#")
            || n.ends_with(".swp")
            || n.ends_with(".swx")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignored_folders_and_ignore_files_are_left_out_below_the_root_only() {
        let dir = tempfile::tempdir().unwrap();
        // A workspace inside a folder named like a build folder is walked all the same.
        let root = dir.path().join("build/ws");
        for sub in [
            "src/deep",
            "node_modules/pkg",
            "target/debug",
            "logs",
            ".github",
        ] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join(".gitignore"), "logs/\n*.tmp\n").unwrap();
        std::fs::write(root.join("src/a.rs"), "").unwrap();
        std::fs::write(root.join("src/b.tmp"), "").unwrap();
        let mut found = folders(&root);
        found.sort();
        let expected: Vec<PathBuf> = ["", ".github", "src", "src/deep"]
            .iter()
            .map(|sub| {
                if sub.is_empty() {
                    root.clone()
                } else {
                    root.join(sub)
                }
            })
            .collect();
        assert_eq!(found, expected);
        let files: Vec<PathBuf> = walk(&root.join("src"))
            .flatten()
            .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
            .map(ignore::DirEntry::into_path)
            .collect();
        assert_eq!(
            files,
            [root.join("src/a.rs")],
            "the parent's .gitignore applies"
        );
        assert!(is_reviewable_folder(&root.join("src/deep")));
        assert!(!is_reviewable_folder(&root.join("logs")));
        assert!(!is_reviewable_folder(&root.join("node_modules")));
        assert!(is_scratch(Path::new("/ws/src/#lib.rs#")));
        assert!(is_scratch(Path::new("/ws/src/lib.rs~")));
        assert!(is_scratch(Path::new("/ws/src/.lib.rs.swp")));
        assert!(!is_scratch(Path::new("/ws/src/lib.rs")));
    }
}
