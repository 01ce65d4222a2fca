//! Watches the workspace folders for files changed on disk (inotify, through `notify`), so that
//! an agent writing a file straight to disk without asking is seen at once. Changes are batched
//! for a moment (an editor's or agent's save is several events) and handed to the state task as
//! paths; it decides what they mean (`state/unasked.rs`).
//!
//! Only folders that can be reviewed are watched (`tree.rs`: no build output,
//! dependencies or ignored folders), each with a watch of its own, so a workspace costs a watch
//! per reviewable folder, not per folder. A folder that appears is watched when its batch is
//! due, and walked: the files written into it before its watch are reported with the rest.
//! When the system refuses a watch (its limit is reached), the user is told what is not
//! watched and how to raise the limit, and at the end of each agent's turn the files directly
//! in those folders that changed during the turn are reported as if watched.
//!
//! The watcher's own thread only forwards paths; setting watches up (which walks the folders)
//! runs on a blocking thread, never on the state task.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};

use super::tree;

/// How long events are gathered before they are reported.
const SETTLE: Duration = Duration::from_millis(30);

/// What to watch: the workspace folders, less the user's own patterns (`watch.ignore`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Watched {
    folders: Vec<PathBuf>,
    ignore: Vec<String>,
}

/// The host's handle: which folders to watch.
#[derive(Debug, Clone)]
pub struct DiskWatch {
    watched: watch::Sender<Watched>,
    checks: mpsc::UnboundedSender<SystemTime>,
}

/// What the watcher has to tell.
#[derive(Debug)]
pub enum DiskNews {
    /// The system refused to watch some folders.
    WatchesRefused(WatchesRefused),
    /// These files changed (or appeared, or went).
    FilesChanged(Vec<PathBuf>),
}

/// Where the watcher's news goes (from its own task and from blocking threads).
type Tell = Arc<dyn Fn(DiskNews) + Send + Sync>;

impl DiskWatch {
    /// Starts watching (no folders yet); what changed goes to `tell`.
    pub fn start(tell: impl Fn(DiskNews) + Send + Sync + 'static) -> Self {
        let (watched, watched_rx) = watch::channel(Watched::default());
        let (checks, checks_rx) = mpsc::unbounded_channel();
        tokio::spawn(run(watched_rx, checks_rx, Arc::new(tell)));
        Self { watched, checks }
    }

    /// Reports the files directly in the folders the system refused to watch that changed
    /// since `since` (an agent's turn began), as the watcher would have.
    pub fn check_unwatched(&self, since: SystemTime) {
        let _ = self.checks.send(since);
    }

    /// Watches exactly `folders` from now on.
    pub fn set_folders(&self, folders: &[PathBuf]) {
        self.watched
            .send_if_modified(|w| std::mem::replace(&mut w.folders, folders.to_vec()) != folders);
    }

    /// Leaves out what `patterns` (gitignore syntax, `watch.ignore`) name from now on.
    pub fn set_ignore(&self, patterns: &[String]) {
        self.watched
            .send_if_modified(|w| std::mem::replace(&mut w.ignore, patterns.to_vec()) != patterns);
    }
}

/// Folders the system refused to watch, for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchesRefused {
    /// How many.
    pub count: usize,
    /// The first of them.
    pub first: PathBuf,
    /// What the system said.
    pub why: String,
}

async fn run(
    mut watched: watch::Receiver<Watched>,
    mut checks: mpsc::UnboundedReceiver<SystemTime>,
    tell: Tell,
) {
    let (events, mut changed) = mpsc::unbounded_channel::<PathBuf>();
    let mut watching: Option<Arc<Mutex<Watching>>> = None;
    loop {
        tokio::select! {
            update = watched.changed() => {
                if update.is_err() {
                    return;
                }
                let wanted = watched.borrow_and_update().clone();
                drop(watching.take());
                let events = events.clone();
                let started = tokio::task::spawn_blocking(move || Watching::start(&wanted, events));
                if let Ok(Some((started, refused))) = started.await {
                    if let Some(refused) = refused {
                        tell(DiskNews::WatchesRefused(refused));
                    }
                    watching = Some(Arc::new(Mutex::new(started)));
                }
                // The walk's memory and code need not stay resident.
                crate::memory::give_back_soon();
            }
            Some(since) = checks.recv() => {
                let Some(watching) = watching.clone() else { continue };
                let unwatched = watching.lock().unwrap_or_else(|e| e.into_inner()).unwatched.clone();
                if unwatched.is_empty() {
                    continue;
                }
                let tell = Arc::clone(&tell);
                tokio::task::spawn_blocking(move || {
                    let paths = changed_since(&unwatched, since);
                    if !paths.is_empty() {
                        tell(DiskNews::FilesChanged(paths));
                    }
                });
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
                let watching = watching.clone();
                let expanded = tokio::task::spawn_blocking(move || {
                    with_new_folders_watched(batch, watching.as_deref())
                });
                let Ok((paths, refused)) = expanded.await else { continue };
                if let Some(refused) = refused {
                    tell(DiskNews::WatchesRefused(refused));
                }
                if !paths.is_empty() {
                    tell(DiskNews::FilesChanged(paths));
                }
            }
        }
    }
}

/// A watcher, the user's patterns it leaves out, and the folders the system refused to watch.
struct Watching {
    watcher: notify::RecommendedWatcher,
    user: Arc<tree::UserIgnores>,
    unwatched: Vec<PathBuf>,
}

impl Watching {
    /// A watcher over the reviewable folders of `folders` that sends every changed path to
    /// `events`, and what it could not watch; `None` (logged) when there is no watcher at all.
    fn start(
        wanted: &Watched,
        events: mpsc::UnboundedSender<PathBuf>,
    ) -> Option<(Self, Option<WatchesRefused>)> {
        let folders = &wanted.folders;
        if folders.is_empty() {
            return None;
        }
        let handler = move |event: notify::Result<notify::Event>| {
            let Ok(event) = event else { return };
            // A removal too: a file an agent removed is kept by its turn's checkpoint.
            if !matches!(
                event.kind,
                EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_)
            ) {
                return;
            }
            for path in event.paths {
                if !tree::is_scratch(&path) {
                    let _ = events.send(path);
                }
            }
        };
        let watcher = match notify::recommended_watcher(handler) {
            Ok(watcher) => watcher,
            Err(e) => {
                tracing::warn!("cannot watch the workspace for agents' disk writes: {e}");
                return None;
            }
        };
        let user = tree::UserIgnores::new(folders, &wanted.ignore);
        let mut watching = Self {
            watcher,
            user: Arc::new(user),
            unwatched: Vec::new(),
        };
        let mut refused = Refusals::default();
        for folder in folders {
            watching.watch_tree(folder, &mut refused, false);
        }
        Some((watching, refused.into_report()))
    }

    /// Watches every reviewable folder under `root` (itself included); returns the files
    /// there when `list_files`.
    fn watch_tree(
        &mut self,
        root: &Path,
        refused: &mut Refusals,
        list_files: bool,
    ) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for entry in tree::walk_with(root, Arc::clone(&self.user)).flatten() {
            if entry.file_type().is_some_and(|t| t.is_dir()) {
                if let Err(e) = self
                    .watcher
                    .watch(entry.path(), RecursiveMode::NonRecursive)
                {
                    refused.add(entry.path(), &e);
                    self.unwatched.push(entry.into_path());
                }
            } else if list_files && !tree::is_scratch(entry.path()) {
                files.push(entry.into_path());
            }
        }
        files
    }
}

/// Watches the system refused while setting up or following new folders.
#[derive(Debug, Default)]
struct Refusals(Option<WatchesRefused>);

impl Refusals {
    fn add(&mut self, folder: &Path, error: &notify::Error) {
        match &mut self.0 {
            Some(refused) => refused.count += 1,
            None => {
                self.0 = Some(WatchesRefused {
                    count: 1,
                    first: folder.to_owned(),
                    why: error.to_string(),
                });
            }
        }
    }

    fn into_report(self) -> Option<WatchesRefused> {
        self.0
    }
}

/// `batch` with each folder in it replaced by the files under it (not following links, not
/// entering ignored folders), its reviewable folders watched from now on: a folder reported as
/// new may hold files written before it was watched, which no event will name.
fn with_new_folders_watched(
    batch: BTreeSet<PathBuf>,
    watching: Option<&Mutex<Watching>>,
) -> (Vec<PathBuf>, Option<WatchesRefused>) {
    let mut files = Vec::with_capacity(batch.len());
    let mut refused = Refusals::default();
    for path in batch {
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => {
                let Some(watching) = watching else { continue };
                let mut watching = watching.lock().unwrap_or_else(|e| e.into_inner());
                if !tree::is_reviewable_folder(&path, &watching.user) {
                    continue;
                }
                files.extend(watching.watch_tree(&path, &mut refused, true));
            }
            _ => files.push(path),
        }
    }
    files.sort();
    files.dedup();
    (files, refused.into_report())
}

/// The files directly in `folders` modified at `since` or later (not following links). Blocking.
fn changed_since(folders: &[PathBuf], since: SystemTime) -> Vec<PathBuf> {
    let mut changed = Vec::new();
    for folder in folders {
        let Ok(entries) = std::fs::read_dir(folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            let fresh = meta.modified().is_ok_and(|modified| modified >= since);
            let path = entry.path();
            if meta.is_file() && fresh && !tree::is_scratch(&path) {
                changed.push(path);
            }
        }
    }
    changed.sort();
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwatched_folders_are_checked_for_files_changed_since_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(a.join("sub")).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(a.join("old.txt"), "old").unwrap();
        let an_hour_ago = SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::options()
            .write(true)
            .open(a.join("old.txt"))
            .unwrap()
            .set_modified(an_hour_ago)
            .unwrap();
        let since = SystemTime::now() - Duration::from_secs(60);
        std::fs::write(a.join("new.txt"), "new").unwrap();
        std::fs::write(a.join("sub/deeper.txt"), "not this folder's").unwrap();
        std::fs::write(b.join("other.txt"), "new").unwrap();
        let missing = dir.path().join("gone");
        assert_eq!(
            changed_since(&[a.clone(), b.clone(), missing], since),
            vec![a.join("new.txt"), b.join("other.txt")]
        );
    }

    #[test]
    fn a_new_folder_is_reported_as_the_files_under_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("new/deeper")).unwrap();
        std::fs::create_dir_all(root.join("new/node_modules")).unwrap();
        std::fs::create_dir_all(root.join("target")).unwrap();
        std::fs::write(root.join("new/a.txt"), "a").unwrap();
        std::fs::write(root.join("new/deeper/b.txt"), "b").unwrap();
        std::fs::write(root.join("new/node_modules/c.js"), "c").unwrap();
        std::fs::write(root.join("target/d.o"), "d").unwrap();
        std::fs::write(root.join("old.txt"), "o").unwrap();
        let batch = BTreeSet::from([root.join("new"), root.join("old.txt"), root.join("target")]);
        let (files, refused) = with_new_folders_watched(batch, None);
        assert_eq!(
            files,
            vec![root.join("old.txt")],
            "nothing walked without a watcher"
        );
        assert_eq!(refused, None);

        let (events, _rx) = mpsc::unbounded_channel();
        let wanted = Watched {
            folders: vec![root.to_owned()],
            ignore: Vec::new(),
        };
        let (watching, refused) = Watching::start(&wanted, events).unwrap();
        assert_eq!(refused, None);
        let watching = Mutex::new(watching);
        let batch = BTreeSet::from([root.join("new"), root.join("old.txt"), root.join("target")]);
        let (files, _) = with_new_folders_watched(batch, Some(&watching));
        assert_eq!(
            files,
            vec![
                root.join("new/a.txt"),
                root.join("new/deeper/b.txt"),
                root.join("old.txt")
            ]
        );
    }
}
