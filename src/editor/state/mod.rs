//! The one owner of editor state. A single task holds [`State`]; everyone else sends it jobs
//! through a [`StateHandle`], run in arrival order: what the editor told us as a named
//! [`EditorEvent`], what slow work came to as a named [`Report`], changes and questions from
//! agents as closures.
//! Sending is synchronous, so a handler that sends before its first `.await` keeps the order
//! its messages arrived in.
//! No I/O happens on this task: callers read and write the disk themselves.
//!
//! [`State`]'s methods are spread over the modules below, one concern each: what the editor
//! said (`events`) and what slow work came to (`reports`); reviews opened and decided
//! (`reviews`), shown (`review_view`), offered in the menu (`menu`), carried out once the agent
//! writes (`settlement`, `disk_sync`); writes nobody asked about (`unasked`, `landed`,
//! `buffer_only`); a turn undone (`turn_undo`); chats (`chat_writing`) and comment prompts
//! (`comment_actions`). The parts they work on (`review`, `chat`, `disk`, `documents`) know
//! nothing of this task.

pub mod buffer_only;
pub mod chat_writing;
pub mod comment_actions;
pub mod disk_sync;
pub mod events;
pub mod landed;
pub mod menu;
pub mod reports;
pub mod review_view;
pub mod reviews;
pub mod settlement;
pub mod turn_undo;
pub mod unasked;

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use super::diff;
use super::documents::context::{ContextEvent, ContextSnapshot};
use super::documents::effects::{DocumentEdit, EffectSender, TextEdit};
use super::documents::position::{PositionEncoding, Range};
use super::documents::selection::{Selection, Selections};
use super::documents::{Document, Documents, TextChange};
use super::questions::Questions;
use super::review::reconcile;
use events::EditorEvent;
use reports::Report;

/// Everything the editor has told us, owned by one task.
#[derive(Debug)]
pub struct State {
    /// Open documents.
    pub(super) documents: Documents,
    /// The user's selections.
    pub(super) selections: Selections,
    /// Workspace folders, in the order the editor gave them.
    pub(super) folders: Vec<PathBuf>,
    /// How positions count characters, as negotiated at `initialize`.
    pub(super) encoding: PositionEncoding,
    /// Questions waiting for an answer through code actions.
    pub(super) questions: Questions,
    /// Open reviews, oldest first.
    pub(super) reviews: super::review::Reviews,
    /// `review.maxPreviewLines`.
    pub(super) review_preview_lines: usize,
    /// What makes a line comment a comment prompt (`chat.commentMarker`).
    pub(super) comment_marker: String,
    /// The comment prompts found in open documents.
    pub(super) comment_hints: super::chat::comment_prompt::CommentHints,
    /// Forwarded diagnostics and context events for agents.
    pub(super) context: super::documents::context::Context,
    /// What accepted reviews lead us to expect agents to write.
    pub(super) expectations: disk_sync::Expectations,
    /// Changes made without asking, waiting for the buffer to show them before their review.
    pub(super) landings: Vec<landed::Landing>,
    /// What each agent turn changed, for undoing it.
    pub(super) checkpoints: super::review::checkpoints::Checkpoints,
    /// What tells agents' unasked disk writes from everything else.
    pub(super) unasked: unasked::UnaskedWrites,
    /// Chat documents.
    pub(super) chats: super::chat::Chats,
    /// Writes agentls's own record of each chat.
    pub(super) chat_records: super::chat::record::Recorder,
    /// Open buffers holding agents' changes their files lack.
    pub(super) buffer_only: buffer_only::BufferOnlyChanges,
    /// Files whose reviews are shown again soon (the user typed in them).
    pub(super) present_due: std::collections::BTreeSet<PathBuf>,
    /// Proposals withdrawn since the last presentation, by origin key and file (see
    /// `reviews::proposer_gone`).
    pub(super) withdrawn_proposals:
        std::collections::HashMap<(String, PathBuf), super::review::request::WithdrawnProposal>,
    /// Origins told that their proposals are refused for being too many (see `reviews`).
    pub(super) review_caps_told: std::collections::HashSet<String>,
    /// How many files each origin may still show the user now.
    pub(super) show_limits: super::review::show_limits::ShowLimits,
    /// The workspace watcher (once the state task runs).
    pub(super) disk_watch: Option<super::disk::watch::DiskWatch>,
    /// Where effects for the editor go.
    pub(super) effects: EffectSender,
    /// This task's own handle, for work that reports back later (an editor's answer, a write).
    pub(super) me: StateHandle,
    /// The context last published through `me` (see [`StateHandle::context_now`]).
    published: Arc<ContextSnapshot>,
}

impl State {
    /// Empty state that sends its effects to `effects` and reaches itself through `me`.
    pub fn new(effects: EffectSender, me: StateHandle) -> Self {
        Self {
            documents: Documents::default(),
            selections: Selections::default(),
            folders: Vec::new(),
            encoding: PositionEncoding::default(),
            questions: Questions::default(),
            reviews: Default::default(),
            review_preview_lines: review_view::DEFAULT_PREVIEW_LINES,
            comment_marker: super::chat::comment_prompt::DEFAULT_MARKER.to_owned(),
            comment_hints: Default::default(),
            expectations: Default::default(),
            landings: Vec::new(),
            checkpoints: Default::default(),
            unasked: Default::default(),
            disk_watch: None,
            chats: Default::default(),
            chat_records: Default::default(),
            buffer_only: Default::default(),
            present_due: Default::default(),
            withdrawn_proposals: Default::default(),
            review_caps_told: Default::default(),
            show_limits: Default::default(),
            context: Default::default(),
            effects,
            me,
            published: Arc::default(),
        }
    }

    /// Publishes the context agents read without a round trip (selections, focus, folders)
    /// when a job changed it. Runs after every job, so no change can skip it.
    fn publish_context(&mut self) {
        let focused = self
            .selections
            .focused()
            .filter(|p| self.documents.get(p).is_some());
        let p = &*self.published;
        if p.current_selection.as_ref() == self.selections.current()
            && p.latest_selection.as_ref() == self.selections.latest()
            && p.focused_document.as_deref() == focused
            && p.folders == self.folders
        {
            return;
        }
        let snapshot = Arc::new(ContextSnapshot {
            current_selection: self.selections.current().cloned(),
            latest_selection: self.selections.latest().cloned(),
            focused_document: focused.map(Path::to_path_buf),
            folders: self.folders.clone(),
        });
        self.published = Arc::clone(&snapshot);
        *self
            .me
            .shared
            .context
            .write()
            .unwrap_or_else(|e| e.into_inner()) = snapshot;
    }

    /// The editor opened a document; it now has the focus.
    pub(super) fn did_open(&mut self, path: PathBuf, text: &str, version: i32, language: &str) {
        self.selections.focus(&path);
        self.documents
            .open(path.clone(), Document::new(text, version, language));
        self.chat_document_opened(&path);
        self.reviews_follow_open(&path);
        self.comment_hints_due(&path);
        self.context.publish(ContextEvent::DocumentsChanged);
    }

    /// The editor changed a document. A change to a document we never saw opened is logged and
    /// dropped: there is no text to apply it to.
    pub(super) fn did_change(&mut self, path: &Path, version: i32, changes: &[TextChange]) {
        let track = self.reviews.iter().any(|r| r.path == path);
        match self.documents.get_mut(path) {
            Some(document) => {
                let splices = document.apply(version, changes, self.encoding, track);
                if track {
                    self.rebase_reviews(path, &splices, version);
                }
                if self.landings.iter().any(|l| l.path() == path) {
                    self.landings_follow_change(path);
                }
                self.comment_hints_due(path);
                self.chat_whole_yet(path);
            }
            None => self.effects.log(
                super::documents::effects::Level::Warning,
                format!(
                    "didChange for {} which is not open; ignored\n",
                    path.display()
                ),
            ),
        }
    }

    /// The editor closed a document.
    pub(super) fn did_close(&mut self, path: &Path) {
        let closed = self.documents.close(path);
        if let Some(doc) = &closed {
            self.reviews_follow_close(path, doc.rope());
        }
        let text = closed.map(|doc| doc.text());
        self.chat_closed(path, text.clone());
        self.buffer_closed(path, text);
        self.comment_hints.forget(path);
        self.selections.forget(path);
        self.context.publish(ContextEvent::DocumentsChanged);
    }

    /// The user selected `range` in `path`; `text` is what the editor says it covers, else we
    /// read it from the buffer.
    pub(super) fn did_change_selection(
        &mut self,
        path: PathBuf,
        range: Range,
        text: Option<String>,
    ) {
        let text = text.unwrap_or_else(|| {
            self.documents
                .get(&path)
                .map(|doc| doc.slice(range, self.encoding))
                .unwrap_or_default()
        });
        let selection = Selection { path, range, text };
        self.selections.update(selection.clone());
        self.context
            .publish(ContextEvent::SelectionChanged(selection));
    }

    /// Workspace folders were added or removed.
    pub(super) fn change_folders(&mut self, added: Vec<PathBuf>, removed: &[PathBuf]) {
        let before = self.folders.clone();
        self.folders.retain(|f| !removed.contains(f));
        for folder in added {
            if !self.folders.contains(&folder) {
                self.folders.push(folder);
            }
        }
        if self.folders != before {
            self.context.publish(ContextEvent::FoldersChanged);
            if let Some(watch) = &self.disk_watch {
                watch.set_folders(&self.folders);
            }
        }
    }

    /// The buffer's text and version when `path` is open.
    pub fn buffer(&self, path: &Path) -> Option<(String, i32)> {
        self.documents
            .get(path)
            .map(|doc| (doc.text(), doc.version()))
    }

    /// The text of the open buffer at `path`, or of `range` in it.
    pub fn text_of(&self, path: &Path, range: Option<Range>) -> Option<String> {
        let doc = self.documents.get(path)?;
        Some(match range {
            Some(range) => doc.slice(range, self.encoding),
            None => doc.text(),
        })
    }

    /// Whether the editor has `path` open.
    pub fn is_open(&self, path: &Path) -> bool {
        self.documents.get(path).is_some()
    }

    /// The document the user is in.
    pub fn focused(&self) -> Option<&Path> {
        self.selections.focused()
    }

    /// The agent the chat document at `path` talks to.
    pub fn chat_agent(&self, path: &Path) -> Option<&str> {
        self.chats.agent_of(path)
    }

    /// `agent`'s latest chat document.
    pub fn latest_chat(&self, agent: &str) -> Option<&Path> {
        self.chats.latest_of(agent)
    }

    /// Open reviews, oldest first.
    pub fn reviews(&self) -> &super::review::Reviews {
        &self.reviews
    }

    /// Answers question `id` with `choice` (a code action's or a command's).
    pub fn answer_question(
        &mut self,
        id: u64,
        choice: &str,
    ) -> Result<(), super::questions::AnswerError> {
        self.questions.answer(id, choice)
    }

    /// The edits that turn the open buffer at `path` into `content`, or `None` when the file is
    /// not open (or already says exactly that).
    pub fn plan_write(&self, path: &Path, content: &str, label: &str) -> Option<DocumentEdit> {
        let document = self.documents.get(path)?;
        let old = document.text();
        let edits = self.text_edits(document, &old, content);
        (!edits.is_empty()).then(|| DocumentEdit {
            label: label.to_owned(),
            path: path.to_owned(),
            version: Some(document.version()),
            edits,
        })
    }

    /// How to carry out an agent's write of `content` to `path` (see
    /// [`super::access::EditorAccess::write_text_file`]); `None` when it conflicts with the user's edits
    /// since `base`. Decided in one job, so no keystroke can slip between the check and the edits.
    pub fn plan_agent_write(
        &mut self,
        origin: &super::origin::Origin,
        path: &Path,
        content: String,
        base: Option<String>,
        disk: Option<String>,
        label: &str,
    ) -> Option<WritePlan> {
        if let Some(settled) =
            self.settle_by_write(origin, path, &content, base.as_deref(), disk.as_deref())
        {
            return Some(WritePlan::Settled(settled));
        }
        if let Some(accepted) = self
            .expectations
            .take_correction(path, &content, disk.as_deref())
        {
            // An open buffer already holds the verdict; its file follows the editor's save.
            return Some(match self.buffer(path) {
                Some((view, _)) => WritePlan::DiskOnly { disk: None, view },
                None => WritePlan::DiskOnly {
                    disk: Some(accepted.clone()),
                    view: accepted,
                },
            });
        }
        let current = match self.documents.get(path) {
            Some(doc) => doc.text(),
            None => disk.clone().unwrap_or_default(),
        };
        let existed = self.documents.get(path).is_some() || disk.is_some();
        let base = base.or(disk).unwrap_or_default();
        let text = reconcile::onto(&base, &current, &content)?;
        let edit = self.plan_write(path, &text, label);
        let open = self.documents.get(path).is_some();
        let before = existed.then(|| current.clone());
        self.checkpoints.changed(origin, path, before, text.clone());
        if open {
            self.changed_in_buffer_only(path, &origin.label);
        }
        Some(WritePlan::Write {
            disk: (!open).then(|| text.clone()),
            text,
            edit,
            before: current,
        })
    }

    /// Minimal edits from `old` (the document's text) to `new`, as positions.
    fn text_edits(&self, document: &Document, old: &str, new: &str) -> Vec<TextEdit> {
        let rope = document.rope();
        let mapper = document.mapper(self.encoding);
        diff::minimal_edits(old, new)
            .into_iter()
            .map(|edit| {
                let span = rope.byte_to_char(edit.range.start)..rope.byte_to_char(edit.range.end);
                let (range, new_text) = mapper.replacement(span, edit.text);
                TextEdit { range, new_text }
            })
            .collect()
    }

    /// What the server believes, as JSON: for tests and `agentls.debug.state`.
    pub fn describe(&self) -> serde_json::Value {
        let mut documents: Vec<_> = self
            .documents
            .iter()
            .map(|(path, doc)| {
                json!({
                    "path": path,
                    "version": doc.version(),
                    "languageId": doc.language(),
                    "text": doc.text(),
                })
            })
            .collect();
        documents.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
        json!({
            "encoding": self.encoding,
            "folders": self.folders,
            "documents": documents,
            "focused": self.selections.focused(),
            "currentSelection": self.selections.current(),
            "latestSelection": self.selections.latest(),
            "diagnostics": self.all_diagnostics(None),
            "reviews": self.reviews_summary(None),
            "changedWithoutAsking": self.unasked.changed_counts(),
            "checkpoints": self.checkpoints.summary(),
        })
    }
}

/// How an agent's write is carried out.
#[derive(Debug)]
pub enum WritePlan {
    /// The writer carries out a proposal the user accepted (or writes something else meanwhile).
    Settled(settlement::SettledWrite),
    /// The write was a reviewed proposal: the buffer stays, a closed file's disk gets the
    /// accepted text.
    DiskOnly {
        /// What the disk gets (`None`: nothing, the file is open).
        disk: Option<String>,
        /// What the writer should believe the file holds (the buffer, when open).
        view: String,
    },
    /// Write `text`: through `edit` to the open buffer, else to the disk.
    Write {
        /// The text, with the user's edits since the writer's read merged in.
        text: String,
        /// The buffer edit, when the file is open and differs.
        edit: Option<DocumentEdit>,
        /// What the disk gets: `text` when the file is not open (an open one's file follows
        /// the editor's save).
        disk: Option<String>,
        /// What the file said before (the buffer, else the disk).
        before: String,
    },
}

/// One piece of work for the state task.
enum Job {
    /// Something the editor told us.
    Event(EditorEvent),
    /// Slow work, done.
    Report(Report),
    /// A change or a question from elsewhere in agentls.
    Run(Box<dyn FnOnce(&mut State) + Send>),
}

impl Job {
    /// What the job is, for logs.
    fn name(&self) -> &'static str {
        match self {
            Self::Event(event) => event.name(),
            Self::Report(report) => report.name(),
            Self::Run(_) => "job",
        }
    }

    fn run(self, state: &mut State) {
        match self {
            Self::Event(event) => state.handle(event),
            Self::Report(report) => state.take_report(report),
            Self::Run(job) => job(state),
        }
    }
}

/// A cheap, clone-able way to reach the state task.
#[derive(Debug, Clone)]
pub struct StateHandle {
    jobs: mpsc::UnboundedSender<Job>,
    shared: Arc<Shared>,
}

/// What the state task publishes for readers that must not wait for it.
#[derive(Debug, Default)]
struct Shared {
    /// Jobs sent, counted before each is queued.
    queued: AtomicU64,
    /// Jobs finished (with the context they changed published), counted after each.
    done: AtomicU64,
    /// The context as of the last finished job.
    context: RwLock<Arc<ContextSnapshot>>,
}

/// The state task is gone: only while the server shuts down.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the editor state has shut down")]
pub struct StateGone;

impl StateHandle {
    /// Starts the state task owning the state `make` builds (it gets the task's own handle).
    pub fn spawn(make: impl FnOnce(StateHandle) -> State) -> Self {
        let (jobs, mut queue) = mpsc::unbounded_channel::<Job>();
        let handle = Self {
            jobs,
            shared: Arc::default(),
        };
        let mut state = make(handle.clone());
        let shared = Arc::clone(&handle.shared);
        tokio::spawn(async move {
            while let Some(job) = queue.recv().await {
                // One buggy job must not take every editor feature down with it.
                let name = job.name();
                if std::panic::catch_unwind(AssertUnwindSafe(|| job.run(&mut state))).is_err() {
                    tracing::error!(
                        "the state task panicked on `{name}`; state kept as it was left"
                    );
                }
                state.publish_context();
                shared.done.fetch_add(1, Ordering::SeqCst);
            }
        });
        handle
    }

    /// Queues what the editor told us; it is handled after everything queued before it.
    pub fn send(&self, event: EditorEvent) {
        self.queue(Job::Event(event));
    }

    /// Queues what slow work came to; it is taken after everything queued before it.
    pub fn report(&self, report: Report) {
        self.queue(Job::Report(report));
    }

    /// Queues a change to the state; it runs after everything queued before it.
    pub fn update(&self, job: impl FnOnce(&mut State) + Send + 'static) {
        self.queue(Job::Run(Box::new(job)));
    }

    fn queue(&self, job: Job) {
        self.shared.queued.fetch_add(1, Ordering::SeqCst);
        let _ = self.jobs.send(job);
    }

    /// The context (selections, focus, folders) as of everything queued before this call, when
    /// the state task has finished all of it: then it is what a [`Self::query`] would answer,
    /// without the round trip. `None` while jobs are waiting.
    pub fn context_now(&self) -> Option<Arc<ContextSnapshot>> {
        // Jobs counted here were all sent before this call; once as many are done, each
        // published what it changed before it was counted.
        let queued = self.shared.queued.load(Ordering::SeqCst);
        if self.shared.done.load(Ordering::SeqCst) < queued {
            return None;
        }
        let context = self
            .shared
            .context
            .read()
            .unwrap_or_else(|e| e.into_inner());
        Some(Arc::clone(&context))
    }

    /// The context as of everything queued before this call: at once when the state task is
    /// idle, else in order behind what is queued (empty when the state has shut down).
    pub async fn context(&self) -> Arc<ContextSnapshot> {
        if let Some(context) = self.context_now() {
            return context;
        }
        // Every job before this one published what it changed when it finished.
        self.query(|s| Arc::clone(&s.published))
            .await
            .unwrap_or_default()
    }

    /// Queues a question about the state and waits for its answer.
    pub async fn query<R: Send + 'static>(
        &self,
        question: impl FnOnce(&mut State) -> R + Send + 'static,
    ) -> Result<R, StateGone> {
        let (tx, rx) = oneshot::channel();
        self.update(move |state| {
            let _ = tx.send(question(state));
        });
        rx.await.map_err(|_| StateGone)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::documents::position::Position;
    use super::*;

    /// A state for tests, with a handle that goes nowhere.
    pub(crate) fn test_state() -> (State, super::super::documents::effects::EffectReceiver) {
        let (effects, rx) = EffectSender::channel();
        let (jobs, _queue) = mpsc::unbounded_channel();
        let me = StateHandle {
            jobs,
            shared: Arc::default(),
        };
        (State::new(effects, me), rx)
    }

    #[tokio::test]
    async fn plan_write_gives_small_edits_against_the_buffer_version() {
        let (mut state, _rx) = test_state();
        let path = PathBuf::from("/ws/a.txt");
        state.did_open(path.clone(), "one\ntwo 😀\nthree\n", 7, "text");
        let edit = state
            .plan_write(&path, "one\ntwo 😀!\nthree\n", "agent write")
            .unwrap();
        assert_eq!(edit.version, Some(7));
        assert_eq!(
            edit.edits,
            vec![TextEdit {
                range: Range::new(Position::new(1, 6), Position::new(1, 6)),
                new_text: "!".into()
            }]
        );
        assert!(
            state
                .plan_write(&path, "one\ntwo 😀\nthree\n", "x")
                .is_none()
        );
        assert!(
            state
                .plan_write(Path::new("/ws/closed"), "x", "x")
                .is_none()
        );
    }

    /// Readers see the context at once only when the state task has done everything queued
    /// before them; otherwise they wait behind it and still see it.
    #[tokio::test]
    async fn the_published_context_is_never_behind_what_was_fed() {
        let (effects, _rx) = EffectSender::channel();
        let handle = StateHandle::spawn(|me| State::new(effects, me));
        assert_eq!(handle.context().await.current_selection, None);
        let path = PathBuf::from("/ws/a.txt");
        let range = Range::new(Position::new(0, 0), Position::new(0, 5));
        let p = path.clone();
        handle.update(move |s| {
            s.did_open(p.clone(), "hello world", 1, "text");
            s.did_change_selection(p, range, None);
        });
        // The state task has not run yet (one thread, no yield since): no answer without it.
        assert!(handle.context_now().is_none());
        let context = handle.context().await;
        assert_eq!(context.current_selection.as_ref().unwrap().text, "hello");
        assert_eq!(context.focused_document.as_deref(), Some(path.as_path()));
        assert_eq!(handle.context_now().unwrap(), context);
        let p = path.clone();
        handle.update(move |s| {
            s.did_close(&p);
            s.change_folders(vec![PathBuf::from("/ws")], &[]);
        });
        let context = handle.context().await;
        assert_eq!(context.current_selection, None);
        assert_eq!(context.latest_selection.as_ref().unwrap().text, "hello");
        assert_eq!(context.focused_document, None);
        assert_eq!(context.folders, [PathBuf::from("/ws")]);
    }

    #[tokio::test]
    async fn selection_text_comes_from_the_buffer_when_not_given() {
        let (mut state, _rx) = test_state();
        let path = PathBuf::from("/ws/a.txt");
        state.did_open(path.clone(), "hello 漢字 world", 1, "text");
        let range = Range::new(Position::new(0, 6), Position::new(0, 8));
        state.did_change_selection(path, range, None);
        assert_eq!(state.selections.current().unwrap().text, "漢字");
    }
}
