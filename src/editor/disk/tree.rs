//! What of the workspace folders can be reviewed: every folder and file but those nobody
//! reviews (build output, dependencies, VCS folders: a built-in list of folder names) and those
//! the repository ignores (`.gitignore`, `.ignore`, git's `info/exclude`, each folder's rules
//! as git reads them, also outside a git repository), and those the user's config file names
//! (`watch.ignore`). The workspace watcher watches only these
//! folders, and `@` completion offers only these files. Names are matched below a workspace
//! folder only: a workspace inside a folder called `build` is watched like any other.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ignore::WalkBuilder;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

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

/// The user's own patterns (gitignore syntax, `watch.ignore`), anchored at each workspace
/// folder.
#[derive(Debug, Default)]
pub struct UserIgnores {
    by_folder: Vec<(PathBuf, Gitignore)>,
}

impl UserIgnores {
    /// `patterns` for each of `folders`; a pattern that does not parse is logged and left out.
    pub fn new(folders: &[PathBuf], patterns: &[String]) -> Self {
        if patterns.is_empty() {
            return Self::default();
        }
        let by_folder = folders
            .iter()
            .filter_map(|folder| {
                let mut builder = GitignoreBuilder::new(folder);
                for pattern in patterns {
                    if let Err(e) = builder.add_line(None, pattern) {
                        tracing::warn!("watch.ignore: {pattern:?} is no pattern: {e}");
                    }
                }
                Some((folder.clone(), builder.build().ok()?))
            })
            .collect();
        Self { by_folder }
    }

    /// Whether the user's patterns leave out `path` (a folder when `folder`).
    fn leave_out(&self, path: &Path, folder: bool) -> bool {
        self.by_folder.iter().any(|(root, patterns)| {
            path.starts_with(root)
                && patterns
                    .matched_path_or_any_parents(path, folder)
                    .is_ignore()
        })
    }
}

/// A walk of `root` (a workspace folder, or a folder inside one) over what can be reviewed,
/// `root` first. The ignore files of `root`'s parents apply too. Links are not followed.
pub fn walk(root: &Path) -> ignore::Walk {
    walk_with(root, Arc::default())
}

/// [`walk`], leaving out what `user` names too.
pub fn walk_with(root: &Path, user: Arc<UserIgnores>) -> ignore::Walk {
    builder(root)
        .filter_entry(move |entry| {
            entry.depth() == 0 || !(built_in(entry) || user_left_out(&user, entry))
        })
        .build()
}

/// Whether the user's patterns leave out `entry`.
fn user_left_out(user: &UserIgnores, entry: &ignore::DirEntry) -> bool {
    let folder = entry.file_type().is_some_and(|t| t.is_dir());
    user.leave_out(entry.path(), folder)
}

/// Whether the folder at `path` (below a workspace folder) can be reviewed: its name is not on
/// the built-in list and no ignore file of its parents leaves it out. Blocking: lists its
/// parent.
pub fn is_reviewable_folder(path: &Path, user: &UserIgnores) -> bool {
    if user.leave_out(path, true) {
        return false;
    }
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
        let mut found: Vec<PathBuf> = walk(&root)
            .flatten()
            .filter(|e| e.file_type().is_some_and(|t| t.is_dir()))
            .map(ignore::DirEntry::into_path)
            .collect();
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
        let none = UserIgnores::default();
        assert!(is_reviewable_folder(&root.join("src/deep"), &none));
        assert!(!is_reviewable_folder(&root.join("logs"), &none));
        assert!(!is_reviewable_folder(&root.join("node_modules"), &none));
        // The user's own patterns, from their config file.
        let user = UserIgnores::new(std::slice::from_ref(&root), &["deep/".to_owned()]);
        assert!(!is_reviewable_folder(&root.join("src/deep"), &user));
        let mut found: Vec<PathBuf> = walk_with(&root, Arc::new(user))
            .flatten()
            .filter(|e| e.file_type().is_some_and(|t| t.is_dir()))
            .map(ignore::DirEntry::into_path)
            .collect();
        found.sort();
        assert_eq!(
            found,
            [root.clone(), root.join(".github"), root.join("src")]
        );
        assert!(is_scratch(Path::new("/ws/src/#lib.rs#")));
        assert!(is_scratch(Path::new("/ws/src/lib.rs~")));
        assert!(is_scratch(Path::new("/ws/src/.lib.rs.swp")));
        assert!(!is_scratch(Path::new("/ws/src/lib.rs")));
    }
}
