//! After a review is settled, an agent may still write its whole proposal once more (OpenCode
//! writes through `fs/write_text_file` and to disk; a slow agent writes after agentls applied the
//! change itself). This module makes such a late write land as the user decided: the whole
//! proposal after a partial accept is turned into exactly the accepted hunks. It never edits the
//! buffer: a disk change it cannot account for is left to the workspace watcher.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{State, StateHandle};
use crate::editor::disk::files;
use crate::editor::documents::effects::EffectSender;
use crate::editor::documents::effects::Level;
use crate::editor::file_names::file_name;
use crate::editor::review::reconcile::Reviewed;

/// How long after a verdict agentls watches the disk for the agent's own write.
const WATCH_FOR: Duration = Duration::from_secs(30);
/// How long after a verdict a write of the whole proposal through `fs/write_text_file` is still
/// taken for the agent carrying out the reviewed change (agents write within seconds; much later,
/// the same text is a new decision).
const CORRECT_FOR: Duration = Duration::from_secs(10 * 60);
/// How often it looks when the workspace watcher has not told it of a change (it tells at once;
/// this covers a file it cannot watch).
const LOOK_ANYWAY_EVERY: Duration = Duration::from_secs(1);

/// What an accepted review leads agentls to expect on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expectation {
    /// Who proposed: the origin's key (its next turn ends the expectation).
    pub origin: String,
    /// Who proposed (for messages).
    pub label: String,
    /// The text the proposal was diffed against.
    pub base: String,
    /// `base` with only the accepted hunks.
    pub accepted: String,
    /// The whole proposal.
    pub proposal: String,
    /// What agentls made the disk say when the agent's write came during the settlement
    /// (`None`: no write came, or the disk was left as it was). A later write of the proposal
    /// is made this again: the disk since holds the accepted hunks, and merging them into it
    /// once more would apply them twice where lines repeat.
    pub settled_disk: Option<String>,
}

/// Expectations by path, with when they were made.
#[derive(Debug, Default)]
pub struct Expectations {
    targets: HashMap<PathBuf, Target>,
}

/// One expected write.
#[derive(Debug)]
struct Target {
    expectation: Expectation,
    made: tokio::time::Instant,
    /// Wakes its watcher: the workspace watcher saw the file change.
    disk_changed: Arc<Notify>,
    /// Stops its watcher: the origin moved on (a correction taken leaves the watcher on: an
    /// agent may write the proposal both through agentls and to disk).
    over: CancellationToken,
}

impl Expectations {
    /// `origin` began a new turn: what it writes from now on is a new decision, not the late
    /// write of a change reviewed before (the same text may well be proposed again).
    pub fn forget_origin(&mut self, origin: &str) {
        self.targets.retain(|_, t| {
            let keep = t.expectation.origin != origin;
            if !keep {
                t.over.cancel();
            }
            keep
        });
    }

    /// Whether `disk` at `path` is a settled review's late write that this module takes care
    /// of (its whole proposal, or the accepted text).
    pub fn accounts_for(&self, path: &Path, disk: &str) -> bool {
        self.targets.get(path).is_some_and(|t| {
            let e = &t.expectation;
            t.made.elapsed() <= WATCH_FOR && (disk == e.proposal || disk == e.accepted)
        })
    }

    /// The agent writes the proposal the user reviewed: what the disk (which now holds `disk`)
    /// should get instead — the accepted hunks only, on top of whatever reached the disk since
    /// (the user may have saved). `None` when it is not such a write. The buffer already holds
    /// the verdict, plus whatever the user typed since, so such a write must not touch it.
    /// Consumed: a later write is a new write.
    pub fn take_correction(
        &mut self,
        path: &Path,
        content: &str,
        disk: Option<&str>,
    ) -> Option<String> {
        let target = self.targets.get(path)?;
        if content != target.expectation.proposal || target.made.elapsed() > CORRECT_FOR {
            return None;
        }
        let expectation = self.targets.remove(path)?.expectation;
        let disk = disk.unwrap_or_default();
        Some(
            expectation
                .reviewed()
                .late_write(disk, expectation.settled_disk.as_deref()),
        )
    }
}

impl Expectation {
    /// The change the user reviewed, for [`crate::editor::review::reconcile`].
    fn reviewed(&self) -> Reviewed<'_> {
        Reviewed {
            base: &self.base,
            proposal: &self.proposal,
            accepted: &self.accepted,
        }
    }
}

impl State {
    /// Starts watching `path` after an accepted review, and remembers the verdict for the
    /// agent's own write of the proposal.
    pub fn expect_write(&mut self, path: PathBuf, expectation: Expectation) {
        let made = tokio::time::Instant::now();
        let targets = &mut self.expectations.targets;
        // Verdicts whose write never came are forgotten once they can no longer correct one.
        targets.retain(|_, t| t.made.elapsed() <= CORRECT_FOR);
        let disk_changed = Arc::new(Notify::new());
        let over = CancellationToken::new();
        let target = Target {
            expectation: expectation.clone(),
            made,
            disk_changed: Arc::clone(&disk_changed),
            over: over.clone(),
        };
        targets.insert(path.clone(), target);
        let me = self.me.clone();
        let effects = self.effects.clone();
        // An open file as the user last saved it, now: a correction agentls is about to write
        // must not be taken for it.
        let saved = self.documents.get(&path).map(|d| d.saved_text());
        let watcher = watch(path, expectation, saved, me, effects, disk_changed);
        tokio::spawn(async move {
            tokio::select! {
                () = watcher => {}
                () = over.cancelled() => {}
            }
        });
    }

    /// The workspace watcher saw `path` change: its expected write's watcher looks.
    pub(in crate::editor) fn expected_file_changed(&self, path: &Path) {
        if let Some(target) = self.expectations.targets.get(path) {
            target.disk_changed.notify_one();
        }
    }
}

/// Watches the disk for the agent's write and makes it what the user accepted.
async fn watch(
    path: PathBuf,
    expectation: Expectation,
    saved: Option<String>,
    me: StateHandle,
    effects: EffectSender,
    disk_changed: Arc<Notify>,
) {
    let before = files::read(&path).await.unwrap_or_default();
    // The disk the agent's write lands on: an open file as the user last saved it, else the
    // disk as it is now — unless that already is the agent's write (it may come first).
    let under = saved.unwrap_or_else(|| {
        if before == expectation.proposal {
            expectation.base.clone()
        } else {
            before
        }
    });
    let target = expectation
        .reviewed()
        .late_target(&under, expectation.settled_disk.as_deref());
    let deadline = tokio::time::Instant::now() + WATCH_FOR;
    // Nothing seen yet: the first look is at once.
    let mut seen: (Option<(u64, SystemTime)>, String) = (None, String::new());
    let mut first = true;
    while tokio::time::Instant::now() < deadline {
        let told = first
            || tokio::select! {
                () = disk_changed.notified() => true,
                () = tokio::time::sleep(LOOK_ANYWAY_EVERY) => false,
                () = tokio::time::sleep_until(deadline) => break,
            };
        first = false;
        let now = stamp(&path);
        if !told && now == seen.0 {
            continue;
        }
        let Ok(disk) = files::read(&path).await else {
            continue;
        };
        let before = std::mem::replace(&mut seen, (now, disk.clone()));
        if disk == target {
            if before.1 != target {
                // The agent wrote what the user accepted; the buffer has it already.
                effects.disk_in_buffer(&path, &disk);
            }
            continue;
        }
        if disk == expectation.proposal {
            if saved_by_user(&path, &disk, &me).await {
                continue; // the user made the rest of the proposal theirs
            }
            if me.write_file(&path, &target).await.is_ok() {
                seen = (stamp(&path), target.clone());
                effects.disk_in_buffer(&path, &target);
                effects.message(
                    Level::Info,
                    format!(
                        "{} wrote its whole proposal to {}; agentls kept only the changes you accepted",
                        expectation.label,
                        file_name(&path)
                    ),
                );
            }
        }
        // Any other change is not this verdict's business: an agent's unasked write is seen by
        // the workspace watcher (`unasked.rs`), which knows what the disk said before it.
    }
}

/// Whether the open buffer holds exactly `disk`: the user saved it (and wrote it themselves).
async fn saved_by_user(path: &Path, disk: &str, me: &StateHandle) -> bool {
    let owned = path.to_owned();
    let buffer = me.query(move |s| s.buffer(&owned)).await;
    matches!(buffer, Ok(Some((text, _))) if text == disk)
}

/// Size and modification time: a cheap way to notice a change without reading the file.
fn stamp(path: &Path) -> Option<(u64, SystemTime)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expecting(path: &Path) -> Expectations {
        let expectation = Expectation {
            origin: "test:agent".into(),
            label: "agent".into(),
            base: "a\nb\nc\n".into(),
            accepted: "A\nb\nc\n".into(),
            proposal: "A\nb\nC\n".into(),
            settled_disk: None,
        };
        let mut expectations = Expectations::default();
        let target = Target {
            expectation,
            made: tokio::time::Instant::now(),
            disk_changed: Arc::default(),
            over: CancellationToken::new(),
        };
        expectations.targets.insert(path.to_owned(), target);
        expectations
    }

    #[tokio::test]
    async fn the_agents_write_of_its_proposal_becomes_the_accepted_text() {
        let path = Path::new("/ws/f");
        // The disk still says the base, or already the proposal (the agent wrote it itself).
        for disk in ["a\nb\nc\n", "A\nb\nC\n"] {
            let mut expectations = expecting(path);
            let corrected = expectations.take_correction(path, "A\nb\nC\n", Some(disk));
            assert_eq!(corrected.as_deref(), Some("A\nb\nc\n"), "disk {disk:?}");
            // Consumed: a second write is a new decision.
            assert_eq!(
                expectations.take_correction(path, "A\nb\nC\n", Some(disk)),
                None
            );
        }
        // The user saved a change of their own since: it is kept.
        let mut expectations = expecting(path);
        let corrected = expectations.take_correction(path, "A\nb\nC\n", Some("a\nb\nc\nd\n"));
        assert_eq!(corrected.as_deref(), Some("A\nb\nc\nd\n"));
        // The origin's next turn: the same text is a new decision.
        let mut expectations = expecting(path);
        expectations.forget_origin("test:agent");
        assert_eq!(
            expectations.take_correction(path, "A\nb\nC\n", Some("a\nb\nc\n")),
            None
        );
        // Another text is not the reviewed proposal.
        let mut expectations = expecting(path);
        assert_eq!(
            expectations.take_correction(path, "x\n", Some("a\nb\nc\n")),
            None
        );
    }
}
