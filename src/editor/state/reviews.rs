//! The review engine on the state task: opening reviews, following the user's edits, applying
//! the user's decisions through the editor, and resolving verdicts. The model is `review/mod.rs`;
//! how reviews look in the editor is `review_view.rs`. No I/O here: disk reads and writes run
//! in spawned tasks that report back as jobs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ropey::Rope;
use tokio::sync::oneshot;

use super::State;
use super::disk_sync::Expectation;
use super::reports::Report;
use crate::editor::diff;
use crate::editor::disk::files;
use crate::editor::documents::effects::Level;
use crate::editor::documents::effects::{DocumentEdit, Effect, EffectError, TextEdit};
use crate::editor::documents::{Splice, splices_between};
use crate::editor::file_names::file_name;
use crate::editor::origin::Origin;
use crate::editor::review::decision::{Choice, Decision, DecisionError};
use crate::editor::review::request::{MAX_OPEN_PER_ORIGIN, ReviewRequest, WithdrawnProposal};
use crate::editor::review::{
    Applier, Hunk, HunkState, Phase, Review, ReviewId, ReviewKind, ReviewText, Verdict,
};

/// How long a verdict waits for the editor to report the document version that contains the
/// accepted edit before it settles for the text it has.
const SYNC_GRACE: Duration = Duration::from_secs(3);

impl State {
    /// Opens a review; its verdict goes to `reply`. A newer proposal from the same origin for
    /// the same file supersedes the older one.
    pub fn open_review(&mut self, request: ReviewRequest, reply: oneshot::Sender<Verdict>) {
        let superseded: Vec<ReviewId> = self
            .reviews
            .iter()
            .filter(|r| r.origin == request.origin && r.path == request.path)
            .map(|r| r.id)
            .collect();
        // A revision of a proposal the user was already shown (it replaces one still open, or
        // one its proposer withdrew a moment ago): shown again once per burst, with no new
        // announcement and no move of the editor, however many come.
        let withdrawn = (request.origin.key.clone(), request.path.clone());
        let mut revision = self.withdrawn_proposals.remove(&withdrawn).is_some();
        for id in superseded {
            if self.reviews.get(id).is_some_and(|r| r.is_settling()) {
                // Accepted already: what the user accepted is carried out, not dropped.
                self.settle_origin(&request.origin);
                continue;
            }
            let reason = Some("superseded by a newer proposal for the same file".to_owned());
            self.finish(id, Verdict::Rejected { reason });
            revision = true;
        }
        if request.hunks.is_empty() {
            let _ = reply.send(Verdict::Accepted {
                text: request.base,
                rejected: Vec::new(),
            });
            return;
        }
        if self.refuse_beyond_cap(&request.origin) {
            let reason = format!(
                "{} has {MAX_OPEN_PER_ORIGIN} proposals waiting for the user; propose more once \
                 they are decided",
                request.origin.label
            );
            let _ = reply.send(Verdict::Rejected {
                reason: Some(reason),
            });
            return;
        }
        let id = self.reviews.next_id();
        let mut review = Review {
            id,
            kind: ReviewKind::Proposal,
            applied_by: request.terms.applied_by,
            phase: Phase::Deciding,
            origin: request.origin,
            path: request.path.clone(),
            title: request.title,
            base: request.base.clone(),
            proposal: request.proposal,
            file_existed: request.file_existed,
            hunks: request.hunks,
            text: ReviewText::Closed(Rope::new()),
            verdict: Some(reply),
        };
        review.text = match self.documents.get(&request.path) {
            Some(doc) => {
                if request.base_version != Some(doc.version()) {
                    // The buffer moved on between reading it and getting here.
                    for splice in splices_between(&request.base, &doc.text()) {
                        review.rebase(splice.removed, splice.inserted);
                    }
                }
                ReviewText::Open {
                    version: doc.version(),
                    echo_after: None,
                }
            }
            None => ReviewText::Closed(Rope::from_str(&request.base)),
        };
        let count = review.hunks.len();
        let label = review.origin.label.clone();
        let first = review.hunks[0].span.start;
        self.reviews.add(review);
        let (me, caller_gone) = (self.me.clone(), request.caller_gone);
        let announce = request.terms.abandoned == crate::editor::origin::Withdrawal::Announced;
        let (file, who) = (file_name(&request.path), label.clone());
        tokio::spawn(async move {
            if caller_gone.await.is_err() {
                me.report(Report::ProposerGone {
                    id,
                    announce,
                    who,
                    file,
                });
            }
        });
        if request.auto_accept {
            let _ = self.decide(Decision::all(id, Choice::Accept));
            return;
        }
        if revision {
            self.present_soon(&request.path);
            return;
        }
        self.effects.message(
            Level::Info,
            format!(
                "{label} proposes {count} change{} to {}: use code actions to review (Accept / Reject)",
                if count == 1 { "" } else { "s" },
                file_name(&request.path)
            ),
        );
        self.show_review_start(id, first);
        self.present(&request.path);
    }

    /// Whether `origin` already has [`MAX_OPEN_PER_ORIGIN`] proposals open. The user is told
    /// once while it stays there, not once per refused proposal.
    fn refuse_beyond_cap(&mut self, origin: &Origin) -> bool {
        let open = self
            .reviews
            .iter()
            .filter(|r| r.origin == *origin && r.kind == ReviewKind::Proposal)
            .count();
        if open < MAX_OPEN_PER_ORIGIN {
            self.review_caps_told.remove(&origin.key);
            return false;
        }
        if self.review_caps_told.insert(origin.key.clone()) {
            self.effects.message(
                Level::Warning,
                format!(
                    "{} has {MAX_OPEN_PER_ORIGIN} proposals waiting for you; its further \
                     proposals are refused until you decide some",
                    origin.label
                ),
            );
        }
        true
    }

    /// Applies the user's decision on one hunk or on all open hunks.
    pub fn decide(&mut self, decision: Decision) -> Result<(), DecisionError> {
        let Decision {
            review: id,
            hunk,
            choice,
        } = decision;
        let review = self.review_mut(id)?;
        let indices: Vec<usize> = match hunk {
            Some(i) if i >= review.hunks.len() => return Err(DecisionError::NoHunk(id, i)),
            Some(i) => vec![i],
            None => (0..review.hunks.len()).collect(),
        };
        let path = review.path.clone();
        match choice {
            Choice::Reject | Choice::Rerequest => {
                for &i in &indices {
                    let hunk = &mut review.hunks[i];
                    if matches!(hunk.state, HunkState::Pending | HunkState::Conflict) {
                        hunk.state = HunkState::Rejected;
                    }
                }
                if choice == Choice::Rerequest {
                    let reason = "the user edited the same lines; propose the change again \
                                  against the file as it is now";
                    self.resolve(
                        id,
                        Verdict::Rejected {
                            reason: Some(reason.to_owned()),
                        },
                    );
                    self.present(&path);
                    return Ok(());
                }
            }
            Choice::Accept => {
                if let Some(i) = hunk
                    && review.hunks[i].state == HunkState::Conflict
                {
                    return Err(DecisionError::Conflict(id, i));
                }
                let accepting: Vec<usize> = indices
                    .into_iter()
                    .filter(|&i| review.hunks[i].state == HunkState::Pending)
                    .collect();
                let conflicts = review.hunks.iter().any(|h| h.state == HunkState::Conflict);
                if accepting.is_empty() && conflicts {
                    return Err(DecisionError::OnlyConflicts(id));
                }
                if review.applied_by == Applier::Proposer {
                    // Nothing changes until the proposer heard the verdict (settlement.rs).
                    for &i in &accepting {
                        review.hunks[i].state = HunkState::Approved;
                    }
                } else {
                    self.accept(id, &accepting);
                }
            }
        }
        self.finish_if_decided(id);
        self.present(&path);
        Ok(())
    }

    /// Accepts hunks: through the editor when the file is open, in our copy otherwise.
    pub(in crate::editor) fn accept(&mut self, id: ReviewId, indices: &[usize]) {
        if indices.is_empty() {
            return;
        }
        let Ok(review) = self.review_mut(id) else {
            return;
        };
        let path = review.path.clone();
        let Some(doc) = self.documents.get(&path) else {
            let review = self.review_mut(id).expect("checked above");
            for &i in indices {
                review.hunks[i].state = HunkState::Accepted;
            }
            return;
        };
        let (version, rope) = (doc.version(), doc.rope().clone());
        let mapper = crate::editor::documents::position::PositionMapper::new(&rope, self.encoding);
        let review = self.reviews.get_mut(id).expect("checked above");
        let mut edits = Vec::new();
        for &i in indices {
            let hunk = &mut review.hunks[i];
            hunk.state = HunkState::Applying;
            edits.extend(hunk_edits(hunk, &rope).into_iter().map(|(span, text)| {
                let (range, new_text) = mapper.replacement(span, text);
                TextEdit { range, new_text }
            }));
        }
        if let ReviewText::Open { echo_after, .. } = &mut review.text {
            *echo_after = (*echo_after).max(Some(version));
        }
        let (verb, by) = match review.kind {
            ReviewKind::Proposal => ("Accept", "from"),
            ReviewKind::Landed | ReviewKind::TurnUndo => ("Undo", "by"),
        };
        let label = format!(
            "{verb} {} change{} {by} {} to {}",
            indices.len(),
            if indices.len() == 1 { "" } else { "s" },
            review.origin.label,
            file_name(&path)
        );
        // A change its proposer carries out, or an undo of one that landed, is on the disk
        // only once the editor saves it; a terminal agent writes its file itself.
        let buffer_only = (review.applied_by == Applier::Proposer || review.kind.goes_back())
            .then(|| review.origin.label.clone());
        let edit = DocumentEdit {
            label,
            path: path.clone(),
            version: Some(version),
            edits,
        };
        if let Some(label) = buffer_only {
            self.changed_in_buffer_only(&path, &label);
        }
        let (reply, answer) = oneshot::channel();
        self.effects.send(Effect::ApplyEdit { edit, reply });
        let me = self.me.clone();
        let indices = indices.to_vec();
        tokio::spawn(async move {
            let result = answer
                .await
                .unwrap_or_else(|_| Err(EffectError::Transport("the editor host stopped".into())));
            me.report(Report::ReviewEditApplied {
                id,
                indices,
                result,
            });
        });
    }

    /// The editor answered an accept's `applyEdit`.
    pub(in crate::editor) fn edit_applied(
        &mut self,
        id: ReviewId,
        indices: &[usize],
        result: Result<(), EffectError>,
    ) {
        let Ok(review) = self.review_mut(id) else {
            return;
        };
        let path = review.path.clone();
        let failed = result.is_err();
        // A failed accept goes back to pending only where the text is still what was proposed
        // against: typing that reached the hunk meanwhile makes it a conflict, or accepting it
        // again would replace that typing.
        let current = self.documents.get(&path).map(|doc| doc.rope().clone());
        let Ok(review) = self.review_mut(id) else {
            return;
        };
        if let (Err(e), Some(settling)) = (&result, review.settling_mut()) {
            settling.fail_writers(e);
        }
        let settling = review.is_settling();
        for &i in indices {
            let hunk = &mut review.hunks[i];
            if hunk.state != HunkState::Applying {
                continue;
            }
            hunk.state = if !failed {
                HunkState::Accepted
            } else if settling {
                // The verdict went out already: what could not be applied is not applied.
                HunkState::Rejected
            } else if current
                .as_ref()
                .is_none_or(|rope| rope.slice(hunk.span.clone()) == hunk.old_text.as_str())
            {
                HunkState::Pending
            } else {
                HunkState::Conflict
            };
        }
        if let Err(e) = result {
            self.effects.message(
                Level::Error,
                format!(
                    "agentls: could not apply the accepted change to {}: {e}",
                    file_name(&path)
                ),
            );
        } else {
            let me = self.me.clone();
            tokio::spawn(async move {
                tokio::time::sleep(SYNC_GRACE).await;
                me.report(Report::SyncGraceEnded(id));
            });
        }
        self.finish_if_decided(id);
        self.present(&path);
    }

    /// The editor never reported a version after our edit: settle with the text we have.
    pub(in crate::editor) fn finish_without_sync(&mut self, id: ReviewId) {
        if let Ok(review) = self.review_mut(id)
            && let ReviewText::Open { echo_after, .. } = &mut review.text
            && echo_after.is_some()
        {
            tracing::warn!(
                %id,
                "no didChange after an accepted edit; finishing with the buffer as known"
            );
            *echo_after = None;
            self.finish_if_decided(id);
        }
    }

    /// Resolves the review if every hunk is decided (and, when open, the editor has shown us the
    /// resulting text).
    pub(in crate::editor) fn finish_if_decided(&mut self, id: ReviewId) {
        let Ok(review) = self.review_mut(id) else {
            return;
        };
        if !review.is_decided() {
            return;
        }
        if review.waits_for_proposer() {
            if !review.is_settling() {
                self.begin_settling(id);
            }
            return;
        }
        let any_accepted = review.hunks.iter().any(|h| h.state == HunkState::Accepted);
        if !any_accepted {
            self.reject_restoring(id);
            return;
        }
        let (path, echo_after) = (review.path.clone(), review.echo_after());
        if let Some(doc) = self.documents.get(&path) {
            if echo_after.is_some_and(|v| doc.version() <= v) {
                return; // wait for the didChange carrying our edit
            }
            let rope = doc.rope().clone();
            let Ok(review) = self.review_mut(id) else {
                return;
            };
            let rejected = review.rejected_descriptions(|c| rope.char_to_line(c));
            let text = rope.to_string();
            self.resolve(id, Verdict::Accepted { text, rejected });
            return;
        }
        // Not open: check the disk still says what we reviewed, then write the result.
        let me = self.me.clone();
        tokio::spawn(async move {
            let disk = match files::read(&path).await {
                Ok(text) => Some(text),
                Err(e) if e.is_not_found() => Some(String::new()),
                Err(_) => None,
            };
            me.report(Report::ClosedFileRead { id, disk });
        });
    }

    /// Rejects review `id`. A proposal its agent already wrote to disk before the verdict (the
    /// disk holds exactly the proposal) is taken back when the file is not open: what was there
    /// goes back (the file goes, when it was new). An open file's buffer still holds what was
    /// there, and agentls never writes an open file: its next save puts it back. Either way the
    /// user is told. The review stays open until then, so no watcher takes the write for an
    /// agent's.
    fn reject_restoring(&mut self, id: ReviewId) {
        let Ok(review) = self.review_mut(id) else {
            return;
        };
        if review.kind != ReviewKind::Proposal {
            self.resolve(id, Verdict::Rejected { reason: None });
            return;
        }
        let (path, proposal, agent) = (
            review.path.clone(),
            review.proposal.clone(),
            review.origin.label.clone(),
        );
        let base_if_closed = review.file_existed.then(|| review.base.clone());
        let (was_there, open) = match self.documents.get(&path) {
            Some(doc) => (Some(doc.saved_text()), true),
            None => (base_if_closed, false),
        };
        let me = self.me.clone();
        tokio::spawn(async move {
            let disk = files::read(&path).await.ok();
            let written_early = disk.as_deref() == Some(proposal.as_str()) && disk != was_there;
            let file = file_name(&path);
            let told = match (written_early, open, &was_there) {
                (false, _, _) => None,
                (true, true, _) => Some(Ok(format!(
                    "agentls: {agent} wrote its proposal to {file} before you decided; the \
                     buffer keeps what was there: save it to put it back on disk"
                ))),
                (true, false, Some(text)) => Some(me.write_file(&path, text).await.map_err(|e| e.to_string()).map(|()| {
                    format!(
                        "agentls: {agent} wrote its proposal to {file} before you decided; your \
                         Reject put back what was there"
                    )
                })),
                (true, false, None) => Some(
                    tokio::fs::remove_file(&path)
                        .await
                        .map_err(|e| e.to_string())
                        .map(|()| {
                            format!(
                                "agentls: {agent} wrote its proposal to {file} before you \
                                 decided; your Reject removed the file it made"
                            )
                        }),
                ),
            };
            me.report(Report::RejectionRestored {
                id,
                agent,
                file,
                told,
            });
        });
    }

    /// Rejected review `id` is done: the user hears what putting back `agent`'s early write to
    /// `file` came to (`told`), and the agent hears the verdict.
    pub(in crate::editor) fn rejection_restored(
        &mut self,
        id: ReviewId,
        agent: &str,
        file: &str,
        told: Option<Result<String, String>>,
    ) {
        match told {
            None => {}
            Some(Ok(message)) => self.effects.message(Level::Warning, message),
            Some(Err(e)) => self.effects.message(
                Level::Error,
                format!(
                    "agentls: {agent} wrote its proposal to {file} before you decided, and \
                     putting back what was there failed: {e}"
                ),
            ),
        }
        self.resolve(id, Verdict::Rejected { reason: None });
    }

    /// Finishes a review of a file that is not open, given what the disk says now.
    pub(in crate::editor) fn finish_closed(&mut self, id: ReviewId, disk: Option<String>) {
        let Ok(review) = self.review_mut(id) else {
            return;
        };
        let Some(base) = review.closed_text().cloned() else {
            // The file was opened meanwhile: the open path finishes it.
            self.finish_if_decided(id);
            return;
        };
        let path = review.path.clone();
        if disk.as_deref() != Some(&base.to_string()) {
            let reason = format!(
                "{} changed on disk while the review was open; nothing was written",
                file_name(&path)
            );
            self.effects
                .message(Level::Warning, format!("agentls: {reason}"));
            self.resolve(
                id,
                Verdict::Rejected {
                    reason: Some(reason),
                },
            );
            return;
        }
        let text = review.accepted_text(&base);
        let rejected = review.rejected_descriptions(|c| base.char_to_line(c));
        let removes = self.checkpoints.take_removal(id) && text.is_empty();
        let me = self.me.clone();
        tokio::spawn(async move {
            let written = if removes {
                files::remove(&path).await
            } else {
                me.write_file(&path, &text).await
            };
            me.report(Report::AcceptedWritten {
                id,
                text,
                rejected,
                written,
            });
        });
    }

    /// The accepted `text` of review `id` was written to its closed file, or that failed.
    pub(in crate::editor) fn accepted_written(
        &mut self,
        id: ReviewId,
        text: String,
        rejected: Vec<String>,
        written: Result<(), crate::editor::disk::files::FileError>,
    ) {
        match written {
            Ok(()) => self.resolve(id, Verdict::Accepted { text, rejected }),
            Err(e) => {
                let reason = format!("could not write the accepted change: {e}");
                self.effects
                    .message(Level::Error, format!("agentls: {reason}"));
                self.resolve(
                    id,
                    Verdict::Rejected {
                        reason: Some(reason),
                    },
                );
            }
        }
    }

    /// The proposer of review `id` went away (its call was dropped): the review is withdrawn.
    /// The user hears of it at a presentation once [`super::review_view::PRESENT_EVERY`] has
    /// passed, unless a new proposal of the same origin for the same file came meanwhile: that
    /// one is a revision (a client that replaces its diff under the same tab name).
    pub(in crate::editor) fn proposer_gone(
        &mut self,
        id: ReviewId,
        announce: bool,
        who: &str,
        file: &str,
    ) {
        let open = self.reviews.get(id).filter(|r| !r.is_settling());
        let Some(key) = open.map(|r| (r.origin.key.clone(), r.path.clone())) else {
            self.cancel_reviews(|r| r.id == id);
            return;
        };
        self.finish(id, Verdict::Cancelled);
        self.present_soon(&key.1);
        let withdrawal = WithdrawnProposal {
            at: tokio::time::Instant::now(),
            announce,
            who: who.to_owned(),
            file: file.to_owned(),
        };
        self.withdrawn_proposals.insert(key, withdrawal);
    }

    /// Tells the user of the proposals withdrawn at least [`super::review_view::PRESENT_EVERY`]
    /// ago that no new proposal replaced; younger ones wait for the next presentation.
    pub(in crate::editor) fn announce_withdrawals(&mut self) {
        let window = super::review_view::PRESENT_EVERY;
        let (due, young): (Vec<_>, Vec<_>) = std::mem::take(&mut self.withdrawn_proposals)
            .into_iter()
            .partition(|(_, w)| w.at.elapsed() >= window);
        for ((origin, path), withdrawn) in young {
            self.present_soon(&path);
            self.withdrawn_proposals.insert((origin, path), withdrawn);
        }
        for (_, withdrawn) in due {
            if withdrawn.announce {
                self.effects.message(
                    Level::Warning,
                    format!(
                        "{} withdrew its proposed change to {}: 1 pending review withdrawn",
                        withdrawn.who, withdrawn.file
                    ),
                );
            }
        }
    }

    /// Follows an edit of an open document: reviews on it rebase; conflicts are announced.
    pub(in crate::editor) fn rebase_reviews(
        &mut self,
        path: &Path,
        splices: &[Splice],
        version: i32,
    ) {
        let mut conflicts = Vec::new();
        for review in self.reviews.on_mut(path) {
            let mut conflicted = false;
            for splice in splices {
                conflicted |= review.rebase(splice.removed.clone(), splice.inserted);
            }
            if let ReviewText::Open { version: now, .. } = &mut review.text {
                *now = version;
            }
            if conflicted && !review.is_settling() {
                conflicts.push(review.origin.label.clone());
            }
        }
        self.drop_conflicted_settling_hunks(path);
        for label in conflicts {
            self.effects.message(
                Level::Warning,
                format!(
                    "Your edit overlaps a change {label} proposed to {}: that change can no longer be \
                     accepted as is — reject it, or ask {label} to propose it again (code actions)",
                    file_name(path)
                ),
            );
        }
        let waiting: Vec<ReviewId> = self
            .reviews
            .iter()
            .filter(|r| {
                r.path == path
                    && (r.echo_after().is_some_and(|v| version > v)
                        || (r.is_settling() && !r.waits_for_proposer()))
            })
            .map(|r| r.id)
            .collect();
        for id in waiting {
            self.finish_if_decided(id);
        }
        if self.reviews.iter().any(|r| r.path == path) {
            self.present_soon(path);
        }
    }

    /// A document opened: reviews of it switch from the disk copy to the buffer.
    pub(in crate::editor) fn reviews_follow_open(&mut self, path: &Path) {
        let Some(doc) = self.documents.get(path) else {
            return;
        };
        let (text, rope, version) = (doc.text(), doc.rope().clone(), doc.version());
        let mut to_apply = Vec::new();
        for review in self.reviews.on_mut(path) {
            if let Some(base) = review.closed_text().cloned() {
                for splice in splices_between(&base.to_string(), &text) {
                    review.rebase(splice.removed, splice.inserted);
                }
                review.text = ReviewText::Open {
                    version,
                    echo_after: None,
                };
                // Hunks accepted while the file was closed are only marked in our copy: the
                // buffer still has their old text. They go to the editor now, like any accept.
                let unapplied: Vec<usize> = review
                    .hunks
                    .iter()
                    .enumerate()
                    .filter(|(_, h)| {
                        h.state == HunkState::Accepted
                            && rope.slice(h.span.clone()) == h.old_text.as_str()
                    })
                    .map(|(i, _)| i)
                    .collect();
                if !unapplied.is_empty() {
                    to_apply.push((review.id, unapplied));
                }
            }
        }
        for (id, indices) in to_apply {
            self.accept(id, &indices);
        }
    }

    /// A document closed: reviews of it keep the last buffer text as their copy.
    pub(in crate::editor) fn reviews_follow_close(&mut self, path: &Path, last_text: &Rope) {
        for review in self.reviews.on_mut(path) {
            review.text = ReviewText::Closed(last_text.clone());
        }
    }

    /// Withdraws every review `origin` opened; returns how many.
    pub(in crate::editor) fn cancel_origin_reviews(&mut self, origin: &Origin) -> usize {
        self.cancel_reviews(|r| r.origin == *origin)
    }

    /// Withdraws the reviews `which` selects: their askers see `Cancelled`. One whose verdict
    /// went out already is carried out instead: the user accepted it.
    fn cancel_reviews(&mut self, which: impl Fn(&Review) -> bool) -> usize {
        let settling: Vec<Origin> = self
            .reviews
            .iter()
            .filter(|r| which(r) && r.is_settling())
            .map(|r| r.origin.clone())
            .collect();
        for origin in &settling {
            self.settle_origin(origin);
        }
        let ids: Vec<(ReviewId, PathBuf)> = self
            .reviews
            .iter()
            .filter(|r| which(r) && !r.is_settling())
            .map(|r| (r.id, r.path.clone()))
            .collect();
        for (id, _) in &ids {
            self.finish(*id, Verdict::Cancelled);
        }
        let paths: std::collections::BTreeSet<&PathBuf> = ids.iter().map(|(_, p)| p).collect();
        for path in paths {
            self.present(path);
        }
        ids.len()
    }

    /// Sends the verdict and forgets the review; what its file shows is shown again.
    pub(in crate::editor) fn resolve(&mut self, id: ReviewId, verdict: Verdict) {
        if let Some(path) = self.finish(id, verdict) {
            self.present(&path);
        }
    }

    /// Sends the verdict and forgets the review; its file (returned) is left to the caller to
    /// show again.
    fn finish(&mut self, id: ReviewId, verdict: Verdict) -> Option<PathBuf> {
        let mut review = self.reviews.remove(id)?;
        self.checkpoints.take_removal(id);
        let accepted = matches!(verdict, Verdict::Accepted { .. });
        if accepted && review.kind != ReviewKind::Landed {
            // A turn's accepted change (or an undo's), kept for undoing it.
            let before = review.file_existed.then(|| review.base.clone());
            let after = review.accepted_over_base();
            self.checkpoints
                .changed(&review.origin, &review.path, before, after);
            if review.kind == ReviewKind::TurnUndo {
                self.turn_undone(&review.origin, &review.path);
            }
        }
        if accepted && review.kind == ReviewKind::Proposal {
            let expectation = Expectation {
                origin: review.origin.key.clone(),
                label: review.origin.label.clone(),
                accepted: review.accepted_over_base(),
                settled_disk: review
                    .settling()
                    .and_then(|s| s.settled_disk().map(str::to_owned)),
                base: std::mem::take(&mut review.base),
                proposal: std::mem::take(&mut review.proposal),
            };
            self.expect_write(review.path.clone(), expectation);
        }
        if let Some(reply) = review.verdict.take() {
            let _ = reply.send(verdict);
        }
        self.release_settled_writers(&mut review);
        Some(review.path)
    }

    fn review_mut(&mut self, id: ReviewId) -> Result<&mut Review, DecisionError> {
        self.reviews.get_mut(id).ok_or(DecisionError::NoReview(id))
    }

    /// Opens the file at the review's first change where the editor can — unless the same
    /// origin already has a review open, which the user is looking at: a burst of proposals
    /// (one agent's request over many files, or a flood) moves the editor once, and the rest
    /// are announced and reachable through their code actions.
    fn show_review_start(&mut self, id: ReviewId, first: usize) {
        let Some(review) = self.reviews.get(id) else {
            return;
        };
        let busy = self
            .reviews
            .iter()
            .any(|r| r.id != id && r.origin == review.origin && r.kind == ReviewKind::Proposal);
        if busy {
            return;
        }
        self.show_review_at(id, first);
    }

    /// Shows review `id`'s file at its first open change (the user asked, from a chat).
    pub fn show_review(&mut self, id: ReviewId) -> Result<(), DecisionError> {
        let review = self.review_mut(id)?;
        let first = review
            .hunks
            .iter()
            .find(|h| h.state.is_open())
            .or(review.hunks.first())
            .map_or(0, |h| h.span.start);
        self.show_review_at(id, first);
        Ok(())
    }

    /// Shows review `id`'s file with the cursor at char `first`.
    fn show_review_at(&mut self, id: ReviewId, first: usize) {
        let Some(review) = self.reviews.get(id) else {
            return;
        };
        let selection = self.review_rope(review).map(|rope| {
            let mapper =
                crate::editor::documents::position::PositionMapper::new(&rope, self.encoding);
            let at = mapper.position(first);
            crate::editor::documents::position::Range::new(at, at)
        });
        let (reply, _answer) = oneshot::channel();
        self.effects.send(Effect::ShowDocument {
            path: review.path.clone(),
            selection,
            reply,
        });
    }

    /// The text a review's spans index: the open buffer, else its own copy.
    pub(in crate::editor) fn review_rope(&self, review: &Review) -> Option<Rope> {
        match self.documents.get(&review.path) {
            Some(doc) => Some(doc.rope().clone()),
            None => review.closed_text().cloned(),
        }
    }
}

/// The char edits applying `hunk` to `rope` (where its span holds its old text): minimal edits
/// inside the hunk, so the editor's cursor and marks survive.
fn hunk_edits(hunk: &Hunk, rope: &Rope) -> Vec<(std::ops::Range<usize>, String)> {
    let current: String = rope.slice(hunk.span.clone()).to_string();
    let base = hunk.span.start;
    diff::minimal_edits(&current, &hunk.new_text)
        .into_iter()
        .map(|edit| {
            let start = base + current[..edit.range.start].chars().count();
            let end = base + current[..edit.range.end].chars().count();
            (start..end, edit.text)
        })
        .collect()
}
