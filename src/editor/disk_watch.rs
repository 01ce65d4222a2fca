//! Watches the workspace folders for files changed on disk (inotify, through `notify`), so that
//! an agent writing a file straight to disk without asking is seen at once. Changes are batched
//! for a moment (an editor's or agent's save is several events) and handed to the state task as
//! paths; it decides what they mean (`unasked.rs`). Build output and VCS folders are ignored.
//!
//! The watcher's own thread only forwards paths; setting it up (which walks the folders) runs on
//! a blocking thread, never on the state task. A folder that appears is walked once its batch is
//! due: the files written into it before its watch was set up are reported with the rest.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};

use super::state::StateHandle;

/// How long events are gathered before they are reported.
const SETTLE: Duration = Duration::from_millis(30);
/// Folder names whose contents are never an agent's edit worth reviewing.
const IGNORED: &[&str] = &[
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

/// The host's handle: which folders to watch.
#[derive(Debug, Clone)]
pub struct DiskWatch {
    folders: watch::Sender<Vec<PathBuf>>,
}

impl DiskWatch {
    /// Starts watching (no folders yet); changed paths go to `state`.
    pub fn start(state: StateHandle) -> Self {
        let (folders, folders_rx) = watch::channel(Vec::new());
        tokio::spawn(run(folders_rx, state));
        Self { folders }
    }

    /// Watches exactly `folders` from now on.
    pub fn set_folders(&self, folders: &[PathBuf]) {
        self.folders.send_replace(folders.to_vec());
    }
}

async fn run(mut folders: watch::Receiver<Vec<PathBuf>>, state: StateHandle) {
    let (events, mut changed) = mpsc::unbounded_channel::<PathBuf>();
    let mut watcher: Option<notify::RecommendedWatcher> = None;
    loop {
        tokio::select! {
            update = folders.changed() => {
                if update.is_err() {
                    return;
                }
                let wanted = folders.borrow_and_update().clone();
                drop(watcher.take());
                let events = events.clone();
                watcher = tokio::task::spawn_blocking(move || watch_folders(&wanted, events))
                    .await
                    .ok()
                    .flatten();
            }
            first = changed.recv() => {
                let Some(first) = first else { return };
                let mut batch = BTreeSet::from([first]);
                let deadline = tokio::time::sleep(SETTLE);
                tokio::pin!(deadline);
                loop {
                    tokio::select! {
                        () = &mut deadline => break,
                        more = changed.recv() => match more {
                            Some(path) => { batch.insert(path); }
                            None => break,
                        },
                    }
                }
                let paths = tokio::task::spawn_blocking(move || with_new_folders_walked(batch))
                    .await
                    .unwrap_or_default();
                if !paths.is_empty() {
                    state.report(super::reports::Report::FilesChangedOnDisk(paths));
                }
            }
        }
    }
}

/// A watcher over `folders` that sends every changed file's path to `events`; `None` (logged)
/// when the system refuses (no inotify, too many watches).
fn watch_folders(
    folders: &[PathBuf],
    events: mpsc::UnboundedSender<PathBuf>,
) -> Option<notify::RecommendedWatcher> {
    if folders.is_empty() {
        return None;
    }
    let handler = move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if !matches!(event.kind, EventKind::Create(_) | EventKind::Modify(_)) {
            return;
        }
        for path in event.paths {
            if !is_ignored(&path) {
                let _ = events.send(path);
            }
        }
    };
    let mut watcher = match notify::recommended_watcher(handler) {
        Ok(watcher) => watcher,
        Err(e) => {
            tracing::warn!("cannot watch the workspace for agents' disk writes: {e}");
            return None;
        }
    };
    for folder in folders {
        if let Err(e) = watcher.watch(folder, RecursiveMode::Recursive) {
            tracing::warn!(folder = %folder.display(), "cannot watch for agents' disk writes: {e}");
        }
    }
    Some(watcher)
}

/// `batch` with each folder in it replaced by the files under it (not following links, not
/// entering ignored folders): a folder reported as new may hold files written before the
/// watcher watched it, which no event will name.
fn with_new_folders_walked(batch: BTreeSet<PathBuf>) -> Vec<PathBuf> {
    let mut files = Vec::with_capacity(batch.len());
    let mut folders = Vec::new();
    for path in batch {
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => folders.push(path),
            _ => files.push(path),
        }
    }
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if is_ignored(&path) {
                continue;
            }
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => folders.push(path),
                Ok(_) => files.push(path),
                Err(_) => {}
            }
        }
    }
    files.sort();
    files.dedup();
    files
}

/// Whether `path` lies in a folder whose changes are not reviewed, or is an editor's backup,
/// auto-save or swap file.
pub fn is_ignored(path: &Path) -> bool {
    let scratch = path.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
        n.ends_with('~')
            || (n.starts_with('#') && n.ends_with('#'))
            || n.starts_with(".#")
            || n.ends_with(".swp")
            || n.ends_with(".swx")
    });
    scratch
        || path.components().any(|c| {
            c.as_os_str()
                .to_str()
                .is_some_and(|name| IGNORED.contains(&name))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_output_and_vcs_folders_are_ignored() {
        assert!(is_ignored(Path::new("/ws/target/debug/x")));
        assert!(is_ignored(Path::new("/ws/.git/index")));
        assert!(!is_ignored(Path::new("/ws/src/lib.rs")));
        assert!(!is_ignored(Path::new("/ws/targets.rs")));
        assert!(is_ignored(Path::new("/ws/src/#lib.rs#")));
        assert!(is_ignored(Path::new("/ws/src/lib.rs~")));
        assert!(is_ignored(Path::new("/ws/src/.lib.rs.swp")));
    }

    #[test]
    fn a_new_folder_is_reported_as_the_files_under_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("new/deeper")).unwrap();
        std::fs::create_dir_all(root.join("new/node_modules")).unwrap();
        std::fs::write(root.join("new/a.txt"), "a").unwrap();
        std::fs::write(root.join("new/deeper/b.txt"), "b").unwrap();
        std::fs::write(root.join("new/node_modules/c.js"), "c").unwrap();
        std::fs::write(root.join("old.txt"), "o").unwrap();
        let batch = BTreeSet::from([root.join("new"), root.join("old.txt")]);
        assert_eq!(
            with_new_folders_walked(batch),
            vec![
                root.join("new/a.txt"),
                root.join("new/deeper/b.txt"),
                root.join("old.txt")
            ]
        );
    }
}
