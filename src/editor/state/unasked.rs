//! Disk writes nobody asked the user about. While an agent's turn runs, a workspace file that
//! changes on disk with no review waiting for it (an agent in an auto mode, a tool that writes
//! straight to disk) is brought into the open buffer, merged with the user's unsaved edits, and
//! shown after the fact for Keep/Undo (`landed.rs`); a file that is not open is named in the
//! turn's summary. agentls's own writes are recognised and never taken for an agent's.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::reports::Report;
use super::{State, StateHandle};
use crate::editor::disk::changes::{DiskChange, read_changed};
use crate::editor::disk::files;
use crate::editor::disk::files::FileError;
use crate::editor::documents::effects::Level;
use crate::editor::file_names::file_name;
use crate::editor::file_names::some_file_names;
use crate::editor::origin::Origin;
use crate::editor::review::reconcile;

/// How long after its turn ended a disk change is still put down to an agent: the watcher reports
/// a change some milliseconds after the write, and an agent often ends its turn right after it.
const AFTER_TURN: Duration = Duration::from_secs(2);

/// What the state knows to tell agents' disk writes from everything else.
#[derive(Debug)]
pub struct UnaskedWrites {
    /// Turns running (or ended less than [`AFTER_TURN`] ago), oldest first.
    turns: Vec<Turn>,
    /// A digest of what agentls itself last wrote to each path.
    own: HashMap<PathBuf, u64>,
    /// Files changed without asking, by the origin they are put down to, until its turn ends.
    changed: HashMap<String, BTreeSet<PathBuf>>,
    /// The folders where each origin keeps its own state, by origin key.
    own_files: HashMap<String, Vec<PathBuf>>,
    /// Lets one batch of changed files be read at a time.
    readers: std::sync::Arc<tokio::sync::Semaphore>,
}

impl Default for UnaskedWrites {
    fn default() -> Self {
        Self {
            turns: Vec::new(),
            own: HashMap::new(),
            changed: HashMap::new(),
            own_files: HashMap::new(),
            readers: std::sync::Arc::new(tokio::sync::Semaphore::new(1)),
        }
    }
}

/// An agent's turn, as far as disk changes go.
#[derive(Debug)]
struct Turn {
    origin: Origin,
    /// When it began, on the clock the kernel stamps files with: a file last modified before
    /// is not the turn's, however late the watcher reports it (a save just before the prompt).
    began: SystemTime,
    ended: Option<Instant>,
}

impl UnaskedWrites {
    /// How many files each running turn changed without asking so far, by origin key.
    pub fn changed_counts(&self) -> BTreeMap<&str, usize> {
        self.changed
            .iter()
            .map(|(key, paths)| (key.as_str(), paths.len()))
            .collect()
    }
}

impl StateHandle {
    /// Writes `text` to `path` atomically (see [`files::write_atomic`]), remembered as agentls's
    /// own write so the disk watcher does not take it for an agent's.
    pub async fn write_file(&self, path: &Path, text: &str) -> Result<(), FileError> {
        self.report(Report::OwnWrite {
            path: path.to_owned(),
            text: text.to_owned(),
            digest: digest(text),
        });
        files::write_atomic(path, text).await
    }
}

impl State {
    /// agentls is about to write `text` (hashed to `digest`) to `path`: the watcher is not to
    /// take it for an agent's, and an open buffer's file now says `text`.
    pub(in crate::editor) fn own_write(&mut self, path: PathBuf, text: &str, digest: u64) {
        if let Some(doc) = self.documents.get_mut(&path) {
            doc.set_saved(text);
        }
        self.unasked.own.insert(path, digest);
    }

    /// `origin`'s turn began: disk changes from now on may be its own, except in `own_files`,
    /// the folders where it keeps its own state; `chat`: the chat it answers in. Returns what
    /// it is to be told of its earlier turns undone or redone since
    /// ([`crate::editor::review::checkpoints::Checkpoints::take_told`]).
    pub fn turn_started(
        &mut self,
        origin: Origin,
        own_files: Vec<PathBuf>,
        chat: Option<PathBuf>,
    ) -> Vec<String> {
        self.expectations.forget_origin(&origin.key);
        self.checkpoints.turn_started(&origin, chat);
        self.unasked.turns.retain(|t| t.origin != origin);
        self.unasked.own_files.insert(origin.key.clone(), own_files);
        let told = self.checkpoints.take_told(&origin.key);
        self.unasked.turns.push(Turn {
            origin,
            began: file_clock_now(),
            ended: None,
        });
        told
    }

    /// `origin`'s turn ended: the files it changed on disk without asking, as seen so far (what
    /// is seen later is told on its own, such as what the watcher checks now in the folders
    /// the system refused to watch).
    pub fn turn_ended(&mut self, origin: &Origin) -> BTreeSet<PathBuf> {
        let now = Instant::now();
        for turn in &mut self.unasked.turns {
            if turn.origin == *origin {
                turn.ended = Some(now);
                if let Some(watch) = &self.disk_watch {
                    watch.check_unwatched(turn.began);
                }
            }
        }
        self.unasked.changed.remove(&origin.key).unwrap_or_default()
    }

    /// The turn a disk change now is put down to: the newest running one, else one that just
    /// ended. Also forgets turns that ended long enough ago.
    fn working_turn(&mut self) -> Option<&Turn> {
        self.unasked
            .turns
            .retain(|t| t.ended.is_none_or(|at| at.elapsed() < AFTER_TURN));
        let turns = &self.unasked.turns;
        self.unasked
            .own_files
            .retain(|key, _| turns.iter().any(|t| t.origin.key == *key));
        turns
            .iter()
            .rev()
            .find(|t| t.ended.is_none())
            .or_else(|| turns.last())
    }

    /// The system refused to watch some folders of the workspace: the user hears which and how
    /// to raise the limit (what an agent changes there without asking is seen only when its
    /// turn ends, by a look at the files' times).
    pub(in crate::editor) fn watches_refused(
        &mut self,
        refused: &crate::editor::disk::watch::WatchesRefused,
    ) {
        let more = match refused.count {
            1 => String::new(),
            n => format!(" and {} more", n - 1),
        };
        self.effects.message(
            Level::Warning,
            format!(
                "agentls cannot watch {}{more} for changes agents make without asking ({}): the \
                 system's limit of inotify watches is reached, so it looks there only when a \
                 turn ends. Raise it, e.g. `sudo sysctl fs.inotify.max_user_watches=524288`, \
                 and restart agentls",
                refused.first.display(),
                refused.why
            ),
        );
    }

    /// The disk watcher saw `paths` change.
    pub fn files_changed_on_disk(&mut self, paths: Vec<PathBuf>) {
        for path in &paths {
            self.settling_file_changed(path);
            self.expected_file_changed(path);
        }
        if self.working_turn().is_none() {
            return; // no agent at work: the user's own saves, builds, checkouts
        }
        let mut to_read = Vec::new();
        for path in paths {
            // A proposal of it is open or being carried out: that review sees to the write. (A
            // change shown after the fact does not: a second unasked write is a new one.)
            let reviewed = self
                .reviews
                .iter()
                .any(|r| r.path == path && r.kind == crate::editor::review::ReviewKind::Proposal);
            // A chat document, agentls's records of it and of its session, and its folder's
            // workspace record are agentls's own, written while a reply streams.
            let chat_path = crate::editor::chat::sessions::chat_of(&path)
                .or_else(|| crate::editor::chat::record::chat_of(&path))
                .unwrap_or_else(|| path.clone());
            let chat =
                self.chats.agent_of(&chat_path).is_some() || self.chats.is_folder_record(&path);
            if reviewed || chat || !self.within_folders(&path) {
                continue;
            }
            to_read.push(path);
        }
        if to_read.is_empty() {
            return;
        }
        // One task reads the whole batch, one batch at a time: a turn that writes thousands of
        // files costs one blocking thread, not one per file.
        let (me, readers) = (self.me.clone(), self.unasked.readers.clone());
        tokio::spawn(async move {
            let Ok(_turn) = readers.acquire_owned().await else {
                return;
            };
            let reported = me.clone();
            let _ = tokio::task::spawn_blocking(move || {
                let (mut changes, mut bytes) = (Vec::new(), 0);
                for path in to_read {
                    let Some(change) = read_changed(path) else {
                        continue;
                    };
                    bytes += change.text_bytes();
                    changes.push(change);
                    if changes.len() >= REPORT_FILES || bytes >= REPORT_BYTES {
                        reported.report(Report::DiskChangedUnasked(std::mem::take(&mut changes)));
                        bytes = 0;
                    }
                }
                if !changes.is_empty() {
                    reported.report(Report::DiskChangedUnasked(changes));
                }
            })
            .await;
        });
    }

    /// These files changed on disk, and no review accounts for them. Closed files seen after
    /// their turn ended are told in one message per agent.
    pub(in crate::editor) fn disk_changed_unasked(&mut self, changes: Vec<DiskChange>) {
        let mut late: BTreeMap<String, BTreeSet<PathBuf>> = BTreeMap::new();
        for change in changes {
            let seen = match change {
                DiskChange::Text {
                    path,
                    disk,
                    modified,
                } => self.text_changed_unasked(path, disk, modified),
                DiskChange::Link { path, modified } => self.link_appeared(path, modified),
                DiskChange::Removed { path } => self.file_removed_unasked(path),
            };
            if let Some((who, path)) = seen {
                late.entry(who).or_default().insert(path);
            }
        }
        for (who, paths) in late {
            let list: Vec<_> = paths.iter().map(|p| p.display().to_string()).collect();
            tracing::info!(
                "{who} changed on disk without asking, after its turn:\n{}",
                list.join("\n")
            );
            self.effects.message(
                Level::Warning,
                format!(
                    "{who} changed {} on disk without asking",
                    some_file_names(&paths)
                ),
            );
        }
    }

    /// `path` says `disk` now (last modified at `modified`). Returns who changed it when it is a
    /// closed file changed after its agent's turn ended (told by the caller).
    fn text_changed_unasked(
        &mut self,
        path: PathBuf,
        disk: String,
        modified: Option<SystemTime>,
    ) -> Option<(String, PathBuf)> {
        let own = self.unasked.own.get(&path) == Some(&digest(&disk));
        if own || self.expectations.accounts_for(&path, &disk) {
            return None;
        }
        let (origin, running) = self.turn_to_blame(&path, modified)?;
        let Some(doc) = self.documents.get(&path) else {
            // What the agent read of it is what it looked like before (nothing else is known
            // of a closed file): its turn's checkpoint keeps the change.
            if let Some(before) = self.checkpoints.known_text(&origin, &path) {
                self.checkpoints.changed(&origin, &path, before, disk);
            }
            return self.closed_file_changed(origin, running, path);
        };
        let (buffer, saved) = (doc.text(), doc.saved_text());
        if disk == buffer || disk == saved {
            return None; // the user saved, or nothing changed
        }
        // The disk's change since the last save, onto the buffer's unsaved edits.
        let Some(merged) = reconcile::onto(&saved, &buffer, &disk) else {
            self.effects.message(
                Level::Warning,
                format!(
                    "{} changed {} on disk in the same lines as your unsaved edits; the buffer was \
                     left as it is",
                    origin.label,
                    file_name(&path)
                ),
            );
            return None;
        };
        let saved_before = saved.clone();
        if let Some(doc) = self.documents.get_mut(&path) {
            doc.set_saved(&disk);
        }
        self.unasked
            .changed
            .entry(origin.key.clone())
            .or_default()
            .insert(path.clone());
        let label = format!("{} changed {}", origin.label, file_name(&path));
        if let Some(edit) = self.plan_write(&path, &merged, &label) {
            let (reply, applied) = tokio::sync::oneshot::channel();
            self.effects
                .send(crate::editor::documents::effects::Effect::ApplyEdit { edit, reply });
            let (me, owned, who) = (self.me.clone(), path.clone(), origin.label.clone());
            let effects = self.effects.clone();
            tokio::spawn(async move {
                if matches!(applied.await, Ok(Ok(()))) {
                    effects.disk_in_buffer(&owned, &disk);
                    return;
                }
                me.report(Report::LandingRefused {
                    path: owned,
                    saved_before,
                    who,
                });
            });
        }
        self.checkpoints
            .changed(&origin, &path, Some(buffer.clone()), merged.clone());
        self.change_landed(origin, path, buffer, merged);
        None
    }

    /// `path` is gone from disk: when an agent at work knew the closed file (it read or changed
    /// it), its turn's checkpoint keeps the removal and it is named like any change. Anything
    /// else that goes (a tool's scratch file, an open file's disk: its buffer stays) is not an
    /// agent's change to tell.
    fn file_removed_unasked(&mut self, path: PathBuf) -> Option<(String, PathBuf)> {
        if self.documents.get(&path).is_some() {
            return None;
        }
        let (origin, running) = self.turn_to_blame(&path, None)?;
        let Some(Some(before)) = self.checkpoints.known_text(&origin, &path) else {
            return None;
        };
        self.checkpoints
            .changed(&origin, &path, Some(before), String::new());
        self.closed_file_changed(origin, running, path)
    }

    /// `path` is now a symbolic link (made at `modified`), which agentls never follows: a file
    /// an agent swapped for a link is named like any change, and an open one's buffer is kept.
    fn link_appeared(
        &mut self,
        path: PathBuf,
        modified: Option<SystemTime>,
    ) -> Option<(String, PathBuf)> {
        let (origin, running) = self.turn_to_blame(&path, modified)?;
        if self.documents.get(&path).is_none() {
            return self.closed_file_changed(origin, running, path);
        }
        self.effects.message(
            Level::Warning,
            format!(
                "{} replaced {} with a symbolic link, which agentls does not follow; the buffer \
                 was left as it is",
                origin.label,
                file_name(&path)
            ),
        );
        None
    }

    /// `origin` changed the closed file `path`: named in its turn's summary while the turn
    /// runs; after it, returned to be told.
    fn closed_file_changed(
        &mut self,
        origin: Origin,
        running: bool,
        path: PathBuf,
    ) -> Option<(String, PathBuf)> {
        if !running {
            return Some((origin.label, path));
        }
        self.unasked
            .changed
            .entry(origin.key)
            .or_default()
            .insert(path);
        None
    }

    /// The agent (and whether its turn still runs) a change of `path` made at `modified` is put
    /// down to; `None` when no turn is at work, the change came before it began, or the file is
    /// one the agent keeps for itself.
    fn turn_to_blame(
        &mut self,
        path: &Path,
        modified: Option<SystemTime>,
    ) -> Option<(Origin, bool)> {
        let turn = self.working_turn()?;
        if modified.is_some_and(|m| m < turn.began) {
            tracing::debug!(path = %path.display(), "changed before the turn began: not the agent's");
            return None;
        }
        let (origin, running) = (turn.origin.clone(), turn.ended.is_none());
        let own_state = self.unasked.own_files.get(&origin.key);
        if own_state.is_some_and(|dirs| dirs.iter().any(|d| path.starts_with(d))) {
            return None; // the agent's own sessions and history
        }
        Some((origin, running))
    }

    /// The editor did not take `who`'s change of `path` on disk into the buffer: the disk is not
    /// what the buffer was made from (it was saved as `saved_before`), and the user is told.
    pub(in crate::editor) fn landing_refused(
        &mut self,
        path: &Path,
        saved_before: &str,
        who: &str,
    ) {
        if let Some(doc) = self.documents.get_mut(path) {
            doc.set_saved(saved_before);
        }
        self.landings.retain(|l| l.path() != path);
        self.effects.message(
            Level::Warning,
            format!(
                "{who} changed {} on disk, and the editor did not take the change into the \
                 buffer; reload it to see it (your unsaved edits are in the buffer)",
                file_name(path)
            ),
        );
    }

    fn within_folders(&self, path: &Path) -> bool {
        self.folders.iter().any(|f| path.starts_with(f))
    }
}

/// The most files one report of changed files carries.
const REPORT_FILES: usize = 256;
/// The most text one report of changed files carries (a file past it goes alone).
const REPORT_BYTES: usize = 4 << 20;

/// Now, on the coarse clock the kernel stamps file times with (a write just after this reads
/// as no earlier than it; the precise clock can be a tick ahead). Read through libc, which
/// finds the vDSO the way valgrind expects (rustix's own vDSO lookup crashes under callgrind).
fn file_clock_now() -> SystemTime {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid `timespec` to write; the clock id is a constant the kernel knows.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &raw mut now) } != 0 {
        return SystemTime::now();
    }
    let since_epoch = u64::try_from(now.tv_sec)
        .map(|secs| Duration::new(secs, u32::try_from(now.tv_nsec).unwrap_or(0)))
        .unwrap_or_default();
    SystemTime::UNIX_EPOCH + since_epoch
}

fn digest(text: &str) -> u64 {
    let mut hasher = rustc_hash::FxHasher::default();
    text.hash(&mut hasher);
    hasher.finish()
}
