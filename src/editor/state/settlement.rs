//! The verdict first, then the change, once. A proposer that carries out its own change
//! ([`Applier::Proposer`]: an ACP agent's edit tool) hears "accepted" before anything is applied,
//! so whatever it reads between the verdict and its write is the text it proposed against, and
//! its tool finds its old text. Its write, through `fs/write_text_file` or straight to disk, is
//! then turned into exactly the accepted hunks plus every edit the user made; a write that is not
//! the accepted proposal is refused, never taken whole. When the write does not come (by the end
//! of the turn, or within [`SETTLE_WAIT`]), agentls applies the accepted hunks itself.
//!
//! No I/O on the state task: a watcher task reads the disk when the workspace watcher
//! (`disk/watch.rs`) says the file changed, and reports what it saw.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::{Notify, oneshot};

use super::{State, StateHandle};
use crate::editor::disk::files;
use crate::editor::documents::effects::EffectError;
use crate::editor::documents::effects::Level;
use crate::editor::file_names::file_name;
use crate::editor::origin::Origin;
use crate::editor::review::reconcile::Reviewed;
use crate::editor::review::{Applier, HunkState, Phase, ReviewId, Settling, Verdict};

/// How long agentls waits for a proposer's own write before applying the accepted change itself
/// (the end of its turn usually comes first). Counted from the file's verdict: long enough for
/// the user to decide the other files of the same request.
pub const SETTLE_WAIT: Duration = Duration::from_secs(60);
/// How often the watcher looks at the disk when the workspace watcher has not told it of a
/// change (it tells at once; this covers a file it cannot watch).
const LOOK_ANYWAY_EVERY: Duration = Duration::from_secs(1);

/// How an agent's write of a file whose accepted proposal waits for it is carried out.
#[derive(Debug)]
pub enum SettledWrite {
    /// It is the accepted proposal: an open file's buffer gets the accepted hunks (`applied`
    /// resolves to its text once it has them) and its disk waits for the editor's save; a closed
    /// file's disk gets `disk` (`None`: leave the disk as it is).
    Accepted {
        /// The buffer's text with the accepted hunks, once applied, or why the editor did not
        /// apply them (open files only).
        applied: Option<oneshot::Receiver<Result<String, EffectError>>>,
        /// What the disk of a closed file gets.
        disk: Option<String>,
        /// What the writer should believe the file holds when the file is not open.
        view: String,
    },
    /// It is something else than what the user accepted: nothing of it is written.
    Refused(String),
}

impl State {
    /// The user decided every hunk of a review its proposer carries out: the verdict goes out
    /// now, and the accepted hunks wait for the proposer's write.
    pub(in crate::editor) fn begin_settling(&mut self, id: ReviewId) {
        let Some(review) = self.reviews.get_mut(id) else {
            return;
        };
        let (force, forced) = oneshot::channel();
        let disk_changed = Arc::new(Notify::new());
        review.phase = Phase::Settling(Settling {
            force: Some(force),
            waiters: Vec::new(),
            disk_changed: Arc::clone(&disk_changed),
            disk: None,
        });
        let path = review.path.clone();
        // The disk the proposer's write lands on is known before the verdict goes out, so that
        // a proposer that writes at once is not mistaken for the disk as it was: an open file's
        // as the user last saved it (the verdict goes now), a closed file's as the watcher reads
        // it first (the verdict goes then).
        let saved = self.documents.get(&path).map(|d| d.saved_text());
        let known = saved.is_some();
        let watcher = Watcher {
            id,
            path,
            before: saved,
            me: self.me.clone(),
            disk_changed,
        };
        tokio::spawn(watcher.run(forced));
        if known {
            self.send_settling_verdict(id);
        }
    }

    /// The workspace watcher saw `path` change: the watchers of reviews settling on it look.
    pub(in crate::editor) fn settling_file_changed(&self, path: &Path) {
        for review in self.reviews.on(path) {
            if let Some(settling) = review.settling() {
                settling.disk_changed.notify_one();
            }
        }
    }

    /// The watcher of review `id` has seen the disk: the verdict goes to the proposer.
    pub(in crate::editor) fn send_settling_verdict(&mut self, id: ReviewId) {
        let rope = self.reviews.get(id).and_then(|r| self.review_rope(r));
        let Some(review) = self.reviews.get_mut(id) else {
            return;
        };
        let Some(rope) = rope else {
            return;
        };
        let text = review.accepted_text(&rope);
        let rejected = review.rejected_descriptions(|c| rope.char_to_line(c));
        if let Some(reply) = review.verdict.take() {
            let _ = reply.send(Verdict::Accepted { text, rejected });
        }
        let path = review.path.clone();
        self.present(&path);
    }

    /// Settles every review of `origin` that waits for its write: its turn is over, or it went
    /// away, so the write will not come.
    pub fn settle_origin(&mut self, origin: &Origin) {
        for review in self.reviews.iter_mut().filter(|r| r.origin == *origin) {
            if let Some(settling) = review.settling_mut()
                && let Some(force) = settling.force.take()
            {
                let _ = force.send(());
            }
        }
    }

    /// Whether review `id` waits for its proposer's write.
    fn is_settling(&self, id: ReviewId) -> bool {
        self.reviews
            .get(id)
            .is_some_and(|r| r.is_settling() && r.waits_for_proposer())
    }

    /// The watcher of review `id` saw the disk say `now` (`None`: missing) after `before` at the
    /// verdict; `forced`: settle now whatever it says. Returns whether the review is settled (or
    /// no longer waits).
    pub(in crate::editor) fn settle_from_disk(
        &mut self,
        id: ReviewId,
        before: Option<&str>,
        now: Option<String>,
        forced: bool,
    ) -> bool {
        if !self.is_settling(id) {
            return true;
        }
        let review = self.reviews.get(id).expect("checked");
        let (path, label) = (review.path.clone(), review.origin.label.clone());
        // The disk the proposer's write lands on: as the user last saved an open file (a save
        // during the wait counts; a half-written file the watcher read does not), else as it
        // was at the verdict.
        let saved = self.documents.get(&path).map(|d| d.saved_text());
        let before_text = saved.as_deref().or(before).unwrap_or_default();
        let before = saved.as_deref().or(before);
        let accepted = review.accepted_over_base();
        let reviewed = Reviewed {
            base: &review.base,
            proposal: &review.proposal,
            accepted: &accepted,
        };
        let now_text = now.clone().unwrap_or_default();
        let disk_changed = now.as_deref() != before;
        // The proposer's whole change, as it lands on the disk as it was at the verdict.
        let written_by_proposer =
            disk_changed && reviewed.carried_out_by(&now_text, &[before_text]);
        if !written_by_proposer && !forced {
            return false;
        }
        // What the disk must say: the accepted hunks only, on the disk as the proposer found it
        // (when it wrote) or as it is now (when agentls carries the change out itself).
        let under = if written_by_proposer {
            before_text
        } else {
            &now_text
        };
        let open = self.documents.get(&path).is_some();
        if forced && !written_by_proposer && now.is_none() && !open && review.file_existed {
            // The file went (its folder too, perhaps) while the change waited: what was accepted
            // is not a reason to bring it back holding only that change.
            self.effects.message(
                Level::Warning,
                format!(
                    "agentls: {} is no longer on disk (removed while the change waited); the \
                     change you accepted from {label} was not written",
                    file_name(&path)
                ),
            );
            self.record_settled_disk(id, None);
            self.apply_approved(id);
            return true;
        }
        let target = reviewed.accepted_onto(under);
        let disk = match (&target, open) {
            (Some(target), _) if written_by_proposer => Some(target.clone()),
            (Some(target), false) => Some(target.clone()),
            (None, true) if written_by_proposer => Some(before_text.to_owned()),
            _ => None,
        };
        match (&target, open) {
            (Some(target), _) if written_by_proposer && *target != now_text => {
                write_disk(&self.me, &self.effects, &path, target.clone(), &label, true);
            }
            (Some(target), false) if !written_by_proposer && *target != now_text => {
                write_disk(
                    &self.me,
                    &self.effects,
                    &path,
                    target.clone(),
                    &label,
                    false,
                );
            }
            // The proposer wrote over lines the user saved meanwhile: the file gets back what
            // the user saved; the accepted change is in the buffer, for the editor's save.
            (None, true) if written_by_proposer && now_text != before_text => {
                let saved = before_text.to_owned();
                write_disk(&self.me, &self.effects, &path, saved, &label, false);
                self.effects.message(
                    Level::Warning,
                    format!(
                        "agentls: {label} wrote {} over lines you saved meanwhile; the file keeps \
                         what you saved, and the change you accepted is in your buffer",
                        file_name(&path)
                    ),
                );
            }
            (None, false) => {
                self.effects.message(
                    Level::Warning,
                    format!(
                        "agentls: {} changed on disk in the same lines as the change you accepted \
                         from {label}; the disk was left as it is",
                        file_name(&path)
                    ),
                );
            }
            _ => {}
        }
        self.record_settled_disk(id, disk);
        self.apply_approved(id);
        true
    }

    /// `origin` writes `content` to `path` having read `read` of it (`None`: never read it):
    /// when an accepted proposal of `origin` waits for that write, how it is carried out; `None`
    /// when none waits. `disk` is what the disk says now.
    pub(in crate::editor) fn settle_by_write(
        &mut self,
        origin: &Origin,
        path: &Path,
        content: &str,
        read: Option<&str>,
        disk: Option<&str>,
    ) -> Option<SettledWrite> {
        let review = self.reviews.iter().find(|r| {
            r.origin == *origin && r.path == path && r.is_settling() && r.waits_for_proposer()
        })?;
        let id = review.id;
        let current = self
            .buffer(path)
            .map(|(text, _)| text)
            .or_else(|| disk.map(str::to_owned))
            .unwrap_or_default();
        // What the writer saw of the file: what it read through agentls; one that never did
        // saw the buffer, or the disk (a tool that reads the file itself).
        let seen = match read {
            Some(read) => vec![read],
            None => [Some(current.as_str()), disk]
                .into_iter()
                .flatten()
                .collect(),
        };
        let accepted = review.accepted_over_base();
        let reviewed = Reviewed {
            base: &review.base,
            proposal: &review.proposal,
            accepted: &accepted,
        };
        if !reviewed.carried_out_by(content, &seen) {
            let label = review.origin.label.clone();
            // A closed file has no buffer to take the accepted hunks: the disk gets them here,
            // since the refused writer writes nothing (an open file's disk follows its buffer).
            if self.documents.get(path).is_none() {
                let disk_text = disk.unwrap_or_default();
                match reviewed.accepted_onto(disk_text) {
                    Some(target) => {
                        if disk != Some(target.as_str()) {
                            write_disk(
                                &self.me,
                                &self.effects,
                                path,
                                target.clone(),
                                &label,
                                false,
                            );
                        }
                        self.record_settled_disk(id, Some(target));
                    }
                    None => self.effects.message(
                        Level::Warning,
                        format!(
                            "agentls: {} changed on disk in the same lines as the change you \
                             accepted from {label}; the disk was left as it is",
                            file_name(path)
                        ),
                    ),
                }
            }
            self.effects.message(
                Level::Warning,
                format!(
                    "{label} wrote something other than the change you accepted to {}; that \
                     write was refused and the accepted change applied as you decided",
                    file_name(path)
                ),
            );
            self.apply_approved(id);
            return Some(SettledWrite::Refused(format!(
                "{}: this write is not the change the user accepted, so nothing of it was \
                 written; the accepted change is applied by the editor — read the file again",
                path.display()
            )));
        }
        if self.documents.get(path).is_some() {
            // The buffer gets the accepted hunks; the file follows when the editor saves it.
            let (tell, applied) = oneshot::channel();
            if let Some(settling) = self.review_settling(id) {
                settling.waiters.push(tell);
            }
            self.apply_approved(id);
            return Some(SettledWrite::Accepted {
                applied: Some(applied),
                disk: None,
                view: current,
            });
        }
        let disk_text = disk.unwrap_or_default();
        let target = reviewed.accepted_onto_as_written(disk_text, content);
        self.record_settled_disk(id, target.clone());
        let disk = target.filter(|t| disk != Some(t.as_str()));
        let view = disk.clone().unwrap_or_else(|| disk_text.to_owned());
        self.apply_approved(id);
        Some(SettledWrite::Accepted {
            applied: None,
            disk,
            view,
        })
    }

    /// Carries out the approved hunks of review `id`: through the editor when the file is open,
    /// in the review's own copy otherwise (the caller wrote the disk).
    fn apply_approved(&mut self, id: ReviewId) {
        let Some(review) = self.reviews.get_mut(id) else {
            return;
        };
        if let Some(settling) = review.settling_mut() {
            settling.force = None;
        }
        let approved = review.approved();
        if self.documents.get(&review.path).is_some() {
            self.accept(id, &approved);
            self.finish_if_decided(id);
            return;
        }
        for i in approved {
            review.hunks[i].state = HunkState::Accepted;
        }
        let text = review
            .closed_text()
            .map(|rope| review.accepted_text(rope))
            .unwrap_or_default();
        self.resolve(
            id,
            Verdict::Accepted {
                text,
                rejected: Vec::new(),
            },
        );
    }

    /// Remembers what agentls made review `id`'s file say on disk as it settled.
    fn record_settled_disk(&mut self, id: ReviewId, disk: Option<String>) {
        if let Some(settling) = self.review_settling(id) {
            settling.disk = disk;
        }
    }

    fn review_settling(&mut self, id: ReviewId) -> Option<&mut Settling> {
        self.reviews.get_mut(id).and_then(|r| r.settling_mut())
    }

    /// A settling review's user typed inside one of its accepted hunks: that hunk is dropped
    /// (their text wins) and they are told.
    pub(in crate::editor) fn drop_conflicted_settling_hunks(&mut self, path: &Path) {
        let mut dropped = Vec::new();
        for review in self
            .reviews
            .iter_mut()
            .filter(|r| r.path == path && r.is_settling())
        {
            let count = review.hunks.len();
            for (i, hunk) in review.hunks.iter_mut().enumerate() {
                if hunk.state == HunkState::Conflict {
                    hunk.state = HunkState::Rejected;
                    dropped.push((review.origin.label.clone(), i + 1, count));
                }
            }
        }
        for (label, i, count) in dropped {
            self.effects.message(
                Level::Warning,
                format!(
                    "Your edit overlaps change {i}/{count} you accepted from {label} in {}; your \
                     text is kept and that change is not applied",
                    file_name(path)
                ),
            );
        }
    }

    /// Hands the buffer's text to writers waiting for review `id`'s accepted hunks.
    pub(in crate::editor) fn release_settled_writers(
        &mut self,
        review: &mut crate::editor::review::Review,
    ) {
        let Phase::Settling(settling) = std::mem::replace(&mut review.phase, Phase::Deciding)
        else {
            return;
        };
        let text = self
            .buffer(&review.path)
            .map(|(t, _)| t)
            .unwrap_or_default();
        for waiter in settling.waiters {
            let _ = waiter.send(Ok(text.clone()));
        }
    }
}

impl crate::editor::review::Review {
    /// Whether its proposer carries out the accepted hunks and they are not applied yet.
    pub fn waits_for_proposer(&self) -> bool {
        self.applied_by == Applier::Proposer
            && self.hunks.iter().any(|h| h.state == HunkState::Approved)
    }
}

/// Writes `text` to the disk from a task; `corrected`: the proposer wrote more than was accepted.
fn write_disk(
    me: &StateHandle,
    effects: &crate::editor::documents::effects::EffectSender,
    path: &Path,
    text: String,
    label: &str,
    corrected: bool,
) {
    let (me, effects) = (me.clone(), effects.clone());
    let (path, label) = (path.to_owned(), label.to_owned());
    tokio::spawn(async move {
        match me.write_file(&path, &text).await {
            Ok(()) if corrected => effects.message(
                Level::Info,
                format!(
                    "{label} wrote its whole proposal to {}; agentls kept only the changes you \
                     accepted",
                    file_name(&path)
                ),
            ),
            Ok(()) => {}
            Err(e) => effects.message(
                Level::Error,
                format!("agentls: could not write the accepted change: {e}"),
            ),
        }
    });
}

/// Watches the disk of review `id`'s file until it settles: looks whenever the workspace
/// watcher says the file changed, and settles it when told to (`forced`) or after
/// [`SETTLE_WAIT`].
struct Watcher {
    id: ReviewId,
    path: PathBuf,
    /// The disk before the verdict, when known (an open file's last save); else it is read,
    /// then the verdict goes.
    before: Option<String>,
    me: StateHandle,
    disk_changed: Arc<Notify>,
}

impl Watcher {
    async fn run(self, mut forced: oneshot::Receiver<()>) {
        let Self {
            id,
            path,
            before,
            me,
            disk_changed,
        } = self;
        let before = match before {
            Some(saved) => Some(saved),
            None => {
                let disk = read(&path).await;
                me.report(super::reports::Report::SettlingVerdictDue(id));
                disk
            }
        };
        let deadline = tokio::time::Instant::now() + SETTLE_WAIT;
        // Nothing seen yet: the first look reads the file whatever its stamp says, since the
        // proposer may have written it before the stamp could be taken.
        let mut seen = None;
        let mut heard = false;
        loop {
            let mut force = false;
            let mut look = false;
            tokio::select! {
                biased;
                // Told to settle now; or the sender went because the review settled another
                // way, which the query below finds out.
                told = &mut forced, if !heard => {
                    heard = true;
                    force = told.is_ok();
                    look = true;
                }
                () = disk_changed.notified() => look = true,
                () = tokio::time::sleep_until(deadline) => force = true,
                () = tokio::time::sleep(LOOK_ANYWAY_EVERY) => {}
            }
            let now_stamp = Some(stamp(&path));
            if !force && !look && now_stamp == seen {
                continue;
            }
            seen = now_stamp;
            let now = read(&path).await;
            let was = before.clone();
            let done = me
                .query(move |s| s.settle_from_disk(id, was.as_deref(), now, force))
                .await
                .unwrap_or(true);
            if done {
                return;
            }
            // Not the proposer's write, or not all of it yet: look again at the next change.
        }
    }
}

/// The file's text, `None` when it cannot be read (missing).
async fn read(path: &Path) -> Option<String> {
    files::read(path).await.ok()
}

/// Size and modification time: a cheap way to notice a change without reading the file.
fn stamp(path: &Path) -> Option<(u64, SystemTime)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()?))
}
