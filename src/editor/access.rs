//! The agents' side of the port: [`EditorAccess`], everything an agent may ask of the editor
//! (read a buffer, write a file, show a review, ask a question), and [`start`], which makes it
//! and the host's [`EditorFeed`] around one state task.

use std::path::{Path, PathBuf};

use futures::future::BoxFuture;
use serde::Serialize;
use thiserror::Error;

use super::access_policy::AccessPolicy;
use super::chat;
use super::disk;
use super::disk::files;
use super::disk::files::FileError;
use super::disk::path_locks;
use super::documents::context;
use super::documents::effects;
use super::documents::effects::{
    Effect, EffectError, EffectReceiver, EffectSender, Level, PluginEvent,
};
use super::documents::position::Range;
use super::documents::selection::Selection;
use super::feed::EditorFeed;
use super::file_names::file_name;
use super::origin::{Origin, Withdrawal};
use super::questions;
use super::questions::Choice;
use super::review;
use super::review::Terms;
use super::review::show_limits;
use super::state::reports::Report;
use super::state::settlement;
use super::state::{State, StateGone, StateHandle, WritePlan};
use super::tool_grants;

/// Why a write through the editor failed.
#[derive(Debug, Error)]
pub enum WriteError {
    /// The path is not one an agent may write.
    #[error(transparent)]
    File(#[from] FileError),
    /// The editor did not apply the edit to its buffer.
    #[error("{path}: {source}")]
    Editor {
        /// The document.
        path: PathBuf,
        /// What went wrong in the editor.
        #[source]
        source: EffectError,
    },
    /// The user changed the same lines since the writer read the file; nothing was written.
    #[error("{0}: the user edited the same lines since this file was read; nothing was written")]
    Conflict(PathBuf),
    /// The write is not the change the user accepted from this writer; nothing was written.
    #[error("{0}")]
    NotAccepted(String),
    /// agentls is shutting down.
    #[error(transparent)]
    Gone(#[from] StateGone),
}

/// Why a file was not shown to the user ([`EditorAccess::open_file`]).
#[derive(Debug, thiserror::Error)]
pub enum ShowError {
    /// The path is not one an agent may open.
    #[error(transparent)]
    File(#[from] FileError),
    /// The editor did not show it.
    #[error("the editor did not open the file: {0}")]
    Editor(#[source] EffectError),
    /// The origin showed too many files in a short time; this one was not shown.
    #[error(
        "not shown: too many files opened in a short time ({} at once, then {} a second); \
         try again in {:.1} s",
        show_limits::BURST, show_limits::PER_SECOND, .0.as_secs_f64()
    )]
    TooFast(std::time::Duration),
    /// agentls is shutting down.
    #[error(transparent)]
    Gone(#[from] StateGone),
}

/// What a write through the editor did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// What the writer should now believe the file holds.
    pub text: String,
    /// When the write carried out no reviewed proposal (nobody asked the user): what the file
    /// said before it, for [`EditorAccess::show_landed`].
    pub unasked_over: Option<String>,
}

impl Written {
    /// A write that carried out what the user reviewed.
    fn reviewed(text: String) -> Self {
        Self {
            text,
            unasked_over: None,
        }
    }
}

/// A document the editor has open, as agents see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenDocument {
    /// Absolute path.
    pub path: PathBuf,
    /// The editor's language id.
    pub language: String,
    /// The editor's version number.
    pub version: i32,
    /// Whether it is the document the user is in.
    pub focused: bool,
}

/// The whole surface an agent may use; clone it freely.
#[derive(Debug, Clone)]
pub struct EditorAccess {
    pub(super) state: StateHandle,
    pub(super) effects: EffectSender,
    pub(super) policy: std::sync::Arc<std::sync::RwLock<AccessPolicy>>,
    pub(super) writing: path_locks::PathLocks,
    pub(super) chat_inbox: chat::inbox::ChatInbox,
    pub(super) chat_records: chat::record::Recorder,
    pub(super) tool_grants: tool_grants::ToolGrants,
    pub(super) tool_listener: std::sync::Arc<ToolListener>,
}

/// How the host starts the listener that serves the editor's tools to agent sessions: resolves
/// to its loopback port, or why it could not. It gets the editor as an argument: a listener
/// holding one would keep it alive.
pub type ToolStarter =
    Box<dyn Fn(EditorAccess) -> BoxFuture<'static, Result<u16, String>> + Send + Sync>;

/// The editor tools' listener: started once, on the first grant.
#[derive(Default)]
pub struct ToolListener {
    starter: std::sync::OnceLock<ToolStarter>,
    listening: tokio::sync::OnceCell<Result<u16, String>>,
}

impl std::fmt::Debug for ToolListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolListener")
            .field("listening", &self.listening.get())
            .finish_non_exhaustive()
    }
}

/// A question admitted for an origin; it leaves the count when dropped (answered, or the
/// asker gave up).
struct Waiting {
    state: StateHandle,
    origin: String,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let origin = std::mem::take(&mut self.origin);
        self.state.update(move |s| s.questions.leave(&origin));
    }
}

/// Starts the state task; effects for the editor arrive on the returned receiver.
pub fn start() -> (EditorAccess, EditorFeed, EffectReceiver) {
    let (effects, receiver) = EffectSender::channel();
    let chat_records = chat::record::Recorder::default();
    let records = chat_records.clone();
    let state = StateHandle::spawn(|me| {
        let mut state = State::new(effects.clone(), me);
        state.chat_records = records;
        state
    });
    let me = state.clone();
    let watch = disk::watch::DiskWatch::start(move |news| me.report(Report::from(news)));
    state.update(move |s| s.disk_watch = Some(watch));
    let policy = std::sync::Arc::default();
    let chat_inbox = chat::inbox::ChatInbox::default();
    let access = EditorAccess {
        state: state.clone(),
        effects: effects.clone(),
        policy: std::sync::Arc::clone(&policy),
        writing: path_locks::PathLocks::default(),
        chat_inbox: chat_inbox.clone(),
        chat_records,
        tool_grants: tool_grants::ToolGrants::default(),
        tool_listener: std::sync::Arc::default(),
    };
    let feed = EditorFeed {
        state,
        effects,
        policy,
        chat_inbox,
    };
    (access, feed, receiver)
}

impl EditorAccess {
    /// The editor's tools granted to agent sessions (agentls's MCP server, offered per session).
    pub fn tool_grants(&self) -> &tool_grants::ToolGrants {
        &self.tool_grants
    }

    /// How to start the editor tools' listener (the host's business); until set, nothing is
    /// granted.
    pub fn serve_tools_with(&self, starter: ToolStarter) {
        let _ = self.tool_listener.starter.set(starter);
    }

    /// A grant of the editor tools to `agent`'s session `origin`, reached over `transport`;
    /// starts the listener on the first call. `Err` says why there is none.
    pub async fn grant_tools(
        &self,
        agent: &str,
        origin: Origin,
        transport: tool_grants::Transport,
    ) -> Result<tool_grants::Grant, String> {
        let listener = &self.tool_listener;
        let Some(starter) = listener.starter.get() else {
            return Err("no MCP listener in this process".into());
        };
        let port = listener
            .listening
            .get_or_init(|| starter(self.clone()))
            .await
            .clone()?;
        self.tool_grants.grant(port, agent, origin, transport)
    }

    /// The selection in the document the user is in.
    pub async fn current_selection(&self) -> Option<Selection> {
        self.context().await.current_selection.clone()
    }

    /// The latest non-empty selection, even if the user has moved on to another document.
    pub async fn latest_selection(&self) -> Option<Selection> {
        self.context().await.latest_selection.clone()
    }

    /// Selections, focus and folders as of everything the editor fed before this call: at once
    /// when the state task has caught up, else in order behind what is queued.
    pub async fn context(&self) -> std::sync::Arc<context::ContextSnapshot> {
        self.state.context().await
    }

    /// The same as [`Self::context`] without waiting, when the state task has caught up with
    /// everything fed before this call; `None` while it has not.
    pub fn context_now(&self) -> Option<std::sync::Arc<context::ContextSnapshot>> {
        self.state.context_now()
    }

    /// The documents the editor has open, sorted by path.
    pub async fn open_documents(&self) -> Vec<OpenDocument> {
        let mut docs = self
            .state
            .query(|s| {
                let focused = s.selections.focused().map(Path::to_path_buf);
                s.documents
                    .iter()
                    .map(|(path, doc)| OpenDocument {
                        path: path.clone(),
                        language: doc.language().to_owned(),
                        version: doc.version(),
                        focused: focused.as_ref() == Some(path),
                    })
                    .collect::<Vec<_>>()
            })
            .await
            .unwrap_or_default();
        docs.sort_by(|a, b| a.path.cmp(&b.path));
        docs
    }

    /// The workspace folders.
    pub async fn workspace_folders(&self) -> Vec<PathBuf> {
        self.context().await.folders.clone()
    }

    /// Whether the open buffer at `path` differs from the file on disk (`false` when not open).
    pub async fn document_dirty(&self, path: &Path) -> Result<bool, FileError> {
        let Some((buffer, _)) = self.buffer(path).await else {
            return Ok(false);
        };
        match files::read(path).await {
            Ok(disk) => Ok(disk != buffer),
            Err(e) if e.is_not_found() => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// The text of `path` as the user sees it: the open buffer's unsaved text, else the disk.
    /// `line` (1-based) and `limit` select whole lines.
    pub async fn read_text_file(
        &self,
        path: &Path,
        line: Option<u32>,
        limit: Option<u32>,
    ) -> Result<String, FileError> {
        self.check_path(path).await?;
        let text = match self.buffer(path).await {
            Some((text, _)) => text,
            None => files::read(path).await?,
        };
        Ok(select_lines(&text, line, limit))
    }

    /// [`Self::read_text_file`], at most `most` bytes of it (its start, cut at a character): a
    /// closed file is read no further than that, however big.
    pub async fn read_text_bounded(
        &self,
        path: &Path,
        line: Option<u32>,
        limit: Option<u32>,
        most: usize,
    ) -> Result<files::Bounded, FileError> {
        self.check_path(path).await?;
        match self.buffer(path).await {
            Some((text, _)) => Ok(files::Bounded::of(select_lines(&text, line, limit), most)),
            None => files::read_bounded(path, line, limit, most).await,
        }
    }

    /// Opens one of agentls's own files (a chat document), which may lie outside the workspace.
    pub async fn show_own_file(&self, path: &Path) -> Result<(), EffectError> {
        let path = path.to_owned();
        self.effects
            .request(|reply| Effect::ShowDocument {
                path,
                selection: None,
                reply,
            })
            .await
    }

    /// Opens `path` in the editor for `origin`, selecting `selection` when given, within the
    /// origin's allowance of files shown ([`show_limits`]).
    pub async fn open_file(
        &self,
        origin: &Origin,
        path: &Path,
        selection: Option<Range>,
    ) -> Result<(), ShowError> {
        self.check_path(path).await?;
        let (key, label) = (origin.key.clone(), origin.label.clone());
        let refused = self
            .state
            .query(move |s| {
                let now = tokio::time::Instant::now();
                match s.show_limits.take(&key, now) {
                    show_limits::Allowance::Granted => None,
                    show_limits::Allowance::Refused { tell } => {
                        if tell {
                            s.effects.message(
                                Level::Warning,
                                format!(
                                    "{label} opens files faster than anyone can read them; the \
                                     files it opens beyond {} a second are not shown",
                                    show_limits::PER_SECOND
                                ),
                            );
                        }
                        Some(s.show_limits.wait(&key))
                    }
                }
            })
            .await?;
        if let Some(wait) = refused {
            return Err(ShowError::TooFast(wait));
        }
        let path = path.to_owned();
        self.effects
            .request(|reply| Effect::ShowDocument {
                path,
                selection,
                reply,
            })
            .await
            .map_err(ShowError::Editor)
    }

    /// Makes `path` say `content`, written by someone who last read `base` of it (`None`: never
    /// read it; then the disk is what they worked from). An open buffer gets minimal edits
    /// through the editor (one undo step) and its file waits for the editor's save (see
    /// `state/buffer_only.rs`); a closed file's disk gets the text. Edits the user made since
    /// `base` are merged in; when they touch the same lines the write is refused
    /// ([`WriteError::Conflict`]) — a user's unsaved edit is never overwritten silently. The
    /// writer's own write of a proposal the user accepted carries out exactly the accepted hunks
    /// (see `state/settlement.rs`); any other write of that file by `origin` meanwhile is refused. A
    /// read-only file is refused before anything changes ([`FileError::ReadOnly`]).
    pub async fn write_text_file(
        &self,
        origin: &Origin,
        path: &Path,
        content: &str,
        base: Option<&str>,
    ) -> Result<Written, WriteError> {
        self.check_path(path).await?;
        let _only_writer = self.writing.lock(path).await;
        let disk = match files::read(path).await {
            Ok(text) => Some(text),
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(e.into()),
        };
        // Before any of it reaches the buffer: a write the disk will refuse changes nothing.
        let owned = path.to_owned();
        tokio::task::spawn_blocking(move || files::check_replaceable(&owned))
            .await
            .map_err(|e| FileError::Io {
                path: path.to_owned(),
                source: std::io::Error::other(e),
            })??;
        let (o, p, c, b) = (
            origin.clone(),
            path.to_owned(),
            content.to_owned(),
            base.map(str::to_owned),
        );
        let label = format!("{} edit: {}", origin.label, file_name(path));
        let plan = self
            .state
            .query(move |s| s.plan_agent_write(&o, &p, c, b, disk, &label))
            .await?
            .ok_or_else(|| WriteError::Conflict(path.to_owned()))?;
        match plan {
            WritePlan::Settled(settlement::SettledWrite::Refused(why)) => {
                Err(WriteError::NotAccepted(why))
            }
            WritePlan::Settled(settlement::SettledWrite::Accepted {
                applied,
                disk,
                view,
            }) => {
                let view = match applied {
                    Some(applied) => applied
                        .await
                        .unwrap_or_else(|_| {
                            Err(EffectError::Transport(
                                "the editor did not apply the accepted change".into(),
                            ))
                        })
                        .map_err(|source| WriteError::Editor {
                            path: path.to_owned(),
                            source,
                        })?,
                    None => view,
                };
                if let Some(disk) = disk
                    && let Err(e) = self.state.write_file(path, &disk).await
                {
                    // The user accepted this change: they hear it did not land, whatever the
                    // agent makes of its failed write.
                    self.tell_user(
                        Level::Error,
                        format!(
                            "agentls: the change you accepted from {} to {} was not written \
                             ({e}); the file keeps its old text",
                            origin.label,
                            file_name(path)
                        ),
                    );
                    return Err(e.into());
                }
                Ok(Written::reviewed(view))
            }
            WritePlan::DiskOnly { disk, view } => {
                if let Some(disk) = disk {
                    self.state.write_file(path, &disk).await?;
                }
                Ok(Written::reviewed(view))
            }
            WritePlan::Write {
                text,
                edit,
                disk,
                before,
            } => {
                if let Some(edit) = edit {
                    self.effects
                        .request(|reply| Effect::ApplyEdit { edit, reply })
                        .await
                        .map_err(|source| WriteError::Editor {
                            path: path.to_owned(),
                            source,
                        })?;
                }
                if let Some(disk) = disk {
                    self.state.write_file(path, &disk).await?;
                }
                Ok(Written {
                    text,
                    unasked_over: Some(before),
                })
            }
        }
    }

    /// `origin` read `text` of `path` (`None`: missing): for a closed file, what it looked like
    /// before the turn, should the agent then change it on disk.
    pub fn agent_read(&self, origin: &Origin, path: &Path, text: Option<&str>) {
        let (origin, path) = (origin.clone(), path.to_owned());
        let text = text.map(str::to_owned);
        self.state
            .update(move |s| s.agent_read(&origin, &path, text.as_deref()));
    }

    /// `origin` changed `path` from `before` to `after` without asking the user: the change is
    /// shown for Keep/Undo per hunk (unless the user's config accepts that origin's changes).
    pub fn show_landed(&self, origin: &Origin, path: &Path, before: String, after: String) {
        if self.policy().auto_accepts(&origin.label) {
            return;
        }
        let (origin, path) = (origin.clone(), path.to_owned());
        self.state
            .update(move |s| s.change_landed(origin, path, before, after));
    }

    /// Saves the open buffer at `path` to disk (a no-op when it is not open).
    pub async fn save_document(&self, path: &Path) -> Result<(), WriteError> {
        self.check_path(path).await?;
        if let Some((text, _)) = self.buffer(path).await {
            self.state.write_file(path, &text).await?;
        }
        Ok(())
    }

    /// Asks the user a question that is not a diff; resolves to the chosen choice's id, or
    /// `None` when the user dismissed it or the question was withdrawn. Where the editor can
    /// show a dialog it does; otherwise the question is offered as code actions until answered.
    pub async fn ask_user(
        &self,
        origin: &Origin,
        question: &str,
        choices: Vec<Choice>,
    ) -> Option<String> {
        let key = origin.key.clone();
        let admission = self.state.query(move |s| s.questions.admit(&key)).await;
        match admission {
            Ok(questions::Admission::Admitted) => {}
            Ok(questions::Admission::Refused { tell }) => {
                if tell {
                    self.tell_user(
                        Level::Warning,
                        format!(
                            "{} has {} questions waiting for you; its further questions are \
                             answered no until you answer some",
                            origin.label,
                            questions::MAX_WAITING_PER_ORIGIN
                        ),
                    );
                }
                return None;
            }
            Err(_) => return None,
        }
        let _waiting = Waiting {
            state: self.state.clone(),
            origin: origin.key.clone(),
        };
        let text = format!("{}: {question}", origin.label);
        let dialog = self
            .effects
            .request(|reply| Effect::AskUser {
                text: text.clone(),
                choices: choices.clone(),
                reply,
            })
            .await;
        match dialog {
            Ok(answer) => answer,
            // No dialog (an editor that has none, or one that advertises it and then answers
            // "method not found", as Helix does): the question waits for a code action. It is
            // never decided without the user.
            Err(e) => {
                if !matches!(e, EffectError::Unsupported(_)) {
                    self.log(
                        Level::Warning,
                        format!("no dialog ({e}); the question waits for a code action\n"),
                    );
                }
                let (reply, answer) = tokio::sync::oneshot::channel();
                let (origin, question) = (origin.clone(), question.to_owned());
                self.state.update(move |s| {
                    s.questions.ask(origin, question, choices, reply);
                });
                self.tell_user(
                    Level::Warning,
                    format!("{text} — answer with a code action (Allow… / Reject…)"),
                );
                answer.await.ok().flatten()
            }
        }
    }

    /// Withdraws everything `origin` has open (reviews and questions): their askers see
    /// "cancelled", previews disappear. [`Withdrawal::Announced`] also tells the user how much
    /// was withdrawn (once); adapters that report the cause themselves withdraw silently.
    pub fn close_origin(&self, origin: &Origin, how: Withdrawal) {
        let origin = origin.clone();
        self.state.update(move |s| {
            let questions = s.questions.cancel_origin(&origin);
            let reviews = s.cancel_origin_reviews(&origin);
            s.show_limits.forget(&origin.key);
            if how == Withdrawal::Announced && questions + reviews > 0 {
                s.effects.message(
                    Level::Warning,
                    format!(
                        "{} went away: {reviews} pending review(s) and {questions} question(s) withdrawn",
                        origin.label
                    ),
                );
            }
        });
    }

    /// Shows `origin`'s proposal for `path` as a review and waits for the user's verdict. The
    /// proposal is diffed against what the user sees (the open buffer, else the disk; a missing
    /// file is empty), never against what the agent believes the file says. `terms` say who
    /// carries out what the user accepts.
    pub async fn review_diff(
        &self,
        origin: &Origin,
        path: &Path,
        new_text: &str,
        title: &str,
        terms: Terms,
    ) -> Result<review::Verdict, FileError> {
        let pending = self.open_review(origin, path, new_text, title, terms).await;
        Ok(pending?.verdict().await)
    }

    /// Shows `origin`'s proposal for `path` as a review, as [`Self::review_diff`] does; its
    /// verdict is to come. Once this returns, the review is among the state's (its code actions
    /// are offered).
    pub async fn open_review(
        &self,
        origin: &Origin,
        path: &Path,
        new_text: &str,
        title: &str,
        terms: Terms,
    ) -> Result<PendingVerdict, FileError> {
        self.check_path(path).await?;
        let (base, base_version, file_existed) = match self.buffer(path).await {
            Some((text, version)) => (text, Some(version), true),
            None => match files::read(path).await {
                Ok(text) => (text, None, true),
                Err(e) if e.is_not_found() => (String::new(), None, false),
                Err(e) => return Err(e),
            },
        };
        let auto_accept = self.policy().auto_accepts(&origin.label);
        let (waiting, caller_gone) = tokio::sync::oneshot::channel();
        let proposal = new_text.to_owned();
        let (base, hunks) = tokio::task::spawn_blocking(move || {
            let hunks = review::Review::hunks_between(&base, &proposal);
            (base, hunks)
        })
        .await
        .map_err(|e| FileError::Io {
            path: path.to_owned(),
            source: std::io::Error::other(e),
        })?;
        let request = review::request::ReviewRequest {
            origin: origin.clone(),
            path: path.to_owned(),
            title: title.to_owned(),
            proposal: new_text.to_owned(),
            base,
            base_version,
            file_existed,
            hunks,
            auto_accept,
            terms,
            caller_gone,
        };
        let (reply, verdict) = tokio::sync::oneshot::channel();
        self.state.update(move |s| s.open_review(request, reply));
        Ok(PendingVerdict { verdict, waiting })
    }

    /// Appends `text` to the chat document at `path` (coalesced; never touching the user's text).
    pub fn append_to_chat(&self, path: &Path, text: impl Into<String>) {
        self.to_chat(path, chat::inbox::ChatItem::Text(text.into()));
    }

    /// Appends `text` to the chat document at `path` after a blank line.
    pub fn append_paragraph_to_chat(&self, path: &Path, text: impl Into<String>) {
        self.to_chat(path, chat::inbox::ChatItem::Paragraph(text.into()));
    }

    /// Appends the agent's thought `text` to the chat document at `path`, quoted.
    pub fn append_thought_to_chat(&self, path: &Path, text: String) {
        self.to_chat(path, chat::inbox::ChatItem::Thought(text));
    }

    /// The agent's plan in the chat at `path` is now `steps` ([`State::chat_plan`]).
    pub fn chat_plan(&self, path: &Path, steps: Vec<chat::PlanStep>) {
        self.to_chat(path, chat::inbox::ChatItem::Plan(steps));
    }

    /// A tool call in the chat at `path` stands where `call` says ([`State::chat_tool_call`]).
    pub fn chat_tool_call(&self, path: &Path, call: chat::ToolCallLine) {
        self.to_chat(path, chat::inbox::ChatItem::Call(call));
    }

    /// The user sent `message` from the chat at `path` ([`State::chat_sent`]).
    pub fn chat_sent(&self, path: &Path, message: String) {
        self.to_chat(path, chat::inbox::ChatItem::Sent(message));
    }

    /// Puts `message`, the user's prompt sent from elsewhere, at the end of the chat at `path`,
    /// recorded as sent ([`State::chat_said`]).
    pub fn chat_said(&self, path: &Path, message: String) {
        self.to_chat(path, chat::inbox::ChatItem::Said(message));
    }

    /// The transcript of the chat at `path` from agentls's own record of it, for an agent
    /// that did not see the conversation; `None` when there is none.
    pub async fn chat_transcript(&self, path: &Path) -> Option<String> {
        self.chat_records.transcript(path).await
    }

    /// A message from the chat at `path` went to its agent (`running`), or its answer ended.
    pub fn chat_turn(&self, path: &Path, running: bool) {
        self.to_chat(path, chat::inbox::ChatItem::Turn(running));
    }

    /// `item` goes to the chat at `path` ([`chat::inbox::ChatInbox::send`]).
    fn to_chat(&self, path: &Path, item: chat::inbox::ChatItem) {
        self.state.send_to_chat(&self.chat_inbox, path, item);
    }

    /// The comment prompt `comment` in `path` was answered with a change there: it goes
    /// ([`State::remove_comment`]).
    pub fn remove_comment(&self, path: &Path, comment: String) {
        let path = path.to_owned();
        self.state
            .update(move |s| s.remove_comment(&path, &comment, true));
    }

    /// `origin`'s turn began: files changed on disk meanwhile with no review are its doing,
    /// except in `own_files`, the folders where it keeps its own state; `chat`: the chat it
    /// answers in. Answers what the agent is to be told first: its earlier turns' changes the
    /// user undid or redid since.
    pub async fn turn_started(
        &self,
        origin: &Origin,
        own_files: Vec<PathBuf>,
        chat: Option<&Path>,
    ) -> Vec<String> {
        let (origin, chat) = (origin.clone(), chat.map(Path::to_path_buf));
        self.state
            .query(move |s| s.turn_started(origin, own_files, chat))
            .await
            .unwrap_or_default()
    }

    /// `origin`'s turn ended: the files it changed on disk without asking (open ones were
    /// shown for Keep/Undo).
    pub async fn turn_ended(&self, origin: &Origin) -> std::collections::BTreeSet<PathBuf> {
        let origin = origin.clone();
        self.state
            .query(move |s| s.turn_ended(&origin))
            .await
            .unwrap_or_default()
    }

    /// `origin`'s turn is over (or it went away): accepted changes still waiting for its own
    /// write are carried out by agentls now.
    pub fn settle_origin(&self, origin: &Origin) {
        let origin = origin.clone();
        self.state.update(move |s| s.settle_origin(&origin));
    }

    /// Diagnostics for `path` (or every file): what the editor forwarded from its other
    /// language servers, plus agentls's own.
    pub async fn diagnostics(&self, path: Option<&Path>) -> Vec<context::FileDiagnostics> {
        let path = path.map(Path::to_path_buf);
        self.state
            .query(move |s| s.all_diagnostics(path.as_deref()))
            .await
            .unwrap_or_default()
    }

    /// Every context event from now on (selection changes, documents opened or closed, folders
    /// changed, mentions). A subscriber that falls far behind gets `Lagged` and should take the latest.
    pub async fn watch_context(
        &self,
    ) -> Option<tokio::sync::broadcast::Receiver<context::ContextEvent>> {
        self.state.query(|s| s.context.subscribe()).await.ok()
    }

    /// Whether the client asked for plugin `event`s.
    pub fn plugins_want(&self, event: PluginEvent) -> bool {
        self.effects.plugins_want(event)
    }

    /// Tells editor plugins about `event` (sent as `agentls/<event>`) with the payload `payload`
    /// makes, if the client asked for it.
    pub fn notify_plugins(&self, event: PluginEvent, payload: impl FnOnce() -> serde_json::Value) {
        self.effects.notify_plugins(event, payload);
    }

    /// Tells the user something.
    pub fn tell_user(&self, level: Level, text: impl Into<String>) {
        self.effects.message(level, text);
    }

    /// Writes to the editor's log.
    pub fn log(&self, level: Level, text: impl Into<String>) {
        self.effects.log(level, text);
    }

    /// Reports progress of work `id`.
    pub fn progress(&self, id: impl Into<String>, phase: effects::ProgressPhase) {
        self.effects.send(Effect::Progress {
            id: id.into(),
            phase,
        });
    }

    async fn buffer(&self, path: &Path) -> Option<(String, i32)> {
        let path = path.to_owned();
        self.state
            .query(move |s| s.buffer(&path))
            .await
            .ok()
            .flatten()
    }

    fn policy(&self) -> AccessPolicy {
        self.policy
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The workspace boundary, for files and for the directories agents' commands run in:
    /// `path` must be absolute, without `..`, and inside a workspace folder once symlinks are
    /// resolved (only its shape counts under `fs.allowOutsideWorkspace`). An editor that sent no
    /// workspace folder (Neovim without a root marker) gets the server's working directory as
    /// the boundary, never none.
    pub async fn check_path(&self, path: &Path) -> Result<(), FileError> {
        if self.policy().allow_outside_workspace {
            return files::check_shape(path);
        }
        let folders = self.workspace_folders().await;
        files::check_inside(path, &boundary(folders))
    }

    /// Whether agents may see `path` through the editor's tools (a selection in it, its
    /// diagnostics, that it is open): inside the workspace `folders` as [`Self::check_path`]
    /// judges, or anywhere under `fs.allowOutsideWorkspace`.
    pub fn agents_may_see(&self, path: &Path, folders: &[PathBuf]) -> bool {
        self.policy().allow_outside_workspace
            || files::check_inside(path, &boundary(folders.to_vec())).is_ok()
    }

    /// `context` as agents may see it ([`Self::agents_may_see`]): a selection or focused
    /// document outside the workspace is left out.
    pub fn context_for_agents(
        &self,
        context: std::sync::Arc<context::ContextSnapshot>,
    ) -> std::sync::Arc<context::ContextSnapshot> {
        let folders = &context.folders;
        let hidden = |path: Option<&Path>| path.is_some_and(|p| !self.agents_may_see(p, folders));
        let current = hidden(context.current_selection.as_ref().map(|s| s.path.as_path()));
        let latest = hidden(context.latest_selection.as_ref().map(|s| s.path.as_path()));
        let focused = hidden(context.focused_document.as_deref());
        if !(current || latest || focused) {
            return context;
        }
        let mut seen = (*context).clone();
        if current {
            seen.current_selection = None;
        }
        if latest {
            seen.latest_selection = None;
        }
        if focused {
            seen.focused_document = None;
        }
        std::sync::Arc::new(seen)
    }
}

impl EditorAccess {
    /// Writes every open buffer that holds an agent's change its file lacks, so that what an
    /// agent runs next (its terminal command, its own tool) sees the text the agent and the user
    /// see. Returns the files written.
    pub async fn write_buffer_only_changes(&self, for_whom: &str) -> Vec<PathBuf> {
        let Ok(buffers) = self.state.query(State::take_buffer_only).await else {
            return Vec::new();
        };
        let mut written = Vec::new();
        for (path, text) in buffers {
            if files::read(&path).await.ok().as_deref() == Some(text.as_str()) {
                continue;
            }
            match self.state.write_file(&path, &text).await {
                Ok(()) => written.push(path),
                Err(e) => self.effects.message(
                    Level::Error,
                    format!(
                        "agentls: could not write {} before {for_whom}'s command: {e}",
                        file_name(&path)
                    ),
                ),
            }
        }
        if !written.is_empty() {
            let names: Vec<String> = written.iter().map(|p| file_name(p)).collect();
            self.effects.log(
                Level::Info,
                format!(
                    "wrote {} (unsaved in the editor) before {for_whom}'s command\n",
                    names.join(", ")
                ),
            );
        }
        written
    }
}

/// The folders agents stay inside: the workspace folders, else (an editor that sent none, as
/// Neovim without a root marker) the server's working directory, never none.
fn boundary(mut folders: Vec<PathBuf>) -> Vec<PathBuf> {
    if folders.is_empty() {
        folders.extend(std::env::current_dir().ok());
    }
    folders
}

/// Lines `line..line+limit` (1-based) of `text`, line breaks kept.
pub fn select_lines(text: &str, line: Option<u32>, limit: Option<u32>) -> String {
    if line.is_none() && limit.is_none() {
        return text.to_owned();
    }
    let skip = line.map_or(0, |l| l.saturating_sub(1) as usize);
    let take = limit.map_or(usize::MAX, |l| l as usize);
    text.split_inclusive('\n').skip(skip).take(take).collect()
}

/// A review [`EditorAccess::open_review`] opened, its verdict still to come. Dropped before
/// then, the review is withdrawn.
pub struct PendingVerdict {
    verdict: tokio::sync::oneshot::Receiver<review::Verdict>,
    waiting: tokio::sync::oneshot::Sender<()>,
}

impl PendingVerdict {
    /// Waits for the user's verdict (`Cancelled` when the review went away unanswered).
    pub async fn verdict(self) -> review::Verdict {
        let verdict = self.verdict.await.unwrap_or(review::Verdict::Cancelled);
        let _ = self.waiting.send(());
        verdict
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::editor::review::Verdict;

    #[tokio::test]
    async fn tools_are_granted_once_a_listener_runs() {
        let (editor, _feed, _effects) = start();
        let origin = || Origin::new("acp:demo:s1", "demo");
        let refused = editor.grant_tools("demo", origin(), tool_grants::Transport::Http);
        assert_eq!(
            refused.await.unwrap_err(),
            "no MCP listener in this process"
        );
        editor.serve_tools_with(Box::new(|_| Box::pin(async { Ok(4242) })));
        let grant = editor
            .grant_tools("demo", origin(), tool_grants::Transport::Http)
            .await
            .unwrap();
        assert_eq!(grant.url(), "http://127.0.0.1:4242/mcp");
        let (failing, _feed, _effects) = start();
        failing.serve_tools_with(Box::new(|_| Box::pin(async { Err("no port".to_owned()) })));
        let refused = failing.grant_tools("demo", origin(), tool_grants::Transport::Http);
        assert_eq!(refused.await.unwrap_err(), "no port");
    }

    /// Two agents write the same closed file at once, each having read the same text: both
    /// changes land (the second merges with the first), none is lost.
    #[tokio::test]
    async fn concurrent_writes_of_one_file_both_land() {
        let (editor, feed, _effects) = start();
        let dir = tempfile::tempdir().unwrap();
        feed.folders_changed(vec![dir.path().to_path_buf()], Vec::new());
        let path = dir.path().join("a.txt");
        let base = "one\ntwo\nthree\nfour\nfive\n";
        std::fs::write(&path, base).unwrap();
        let (one, two) = (Origin::new("t:1", "one"), Origin::new("t:2", "two"));
        let first =
            editor.write_text_file(&one, &path, "ONE\ntwo\nthree\nfour\nfive\n", Some(base));
        let second =
            editor.write_text_file(&two, &path, "one\ntwo\nthree\nfour\nFIVE\n", Some(base));
        let (first, second) = tokio::join!(first, second);
        first.unwrap();
        second.unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "ONE\ntwo\nthree\nfour\nFIVE\n"
        );
    }

    /// The proposer of a closed (here: new) file, once its proposal is accepted, writes something
    /// else: that write is refused, and the change the user accepted still reaches the disk, as
    /// the user is told.
    #[tokio::test]
    async fn a_refused_write_of_a_closed_file_still_lands_the_accepted_change() {
        let (editor, feed, _effects) = start();
        let dir = tempfile::tempdir().unwrap();
        feed.folders_changed(vec![dir.path().to_path_buf()], Vec::new());
        let path = dir.path().join("new.txt");
        let origin = Origin::new("t:1", "agent");
        let review = {
            let (editor, origin, path) = (editor.clone(), origin.clone(), path.clone());
            tokio::spawn(async move {
                let terms = Terms::APPLIED_BY_PROPOSER;
                editor
                    .review_diff(&origin, &path, "created\nsecond", "Write new.txt", terms)
                    .await
            })
        };
        let id = loop {
            let first = feed.query(|s| s.reviews.iter().next().map(|r| r.id)).await;
            if let Some(id) = first.unwrap() {
                break id;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        };
        feed.query(move |s| {
            s.decide(review::decision::Decision::all(
                id,
                review::decision::Choice::Accept,
            ))
        })
        .await
        .unwrap()
        .unwrap();
        let verdict = review.await.unwrap().unwrap();
        assert!(matches!(verdict, Verdict::Accepted { .. }), "{verdict:?}");
        // A line more than the user saw: not what they accepted.
        let refused = editor
            .write_text_file(&origin, &path, "created\nsecond\nthird\n", None)
            .await;
        assert!(
            matches!(refused, Err(WriteError::NotAccepted(_))),
            "{refused:?}"
        );
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::fs::read_to_string(&path).ok().as_deref() != Some("created\nsecond") {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the accepted change never reached the disk: {:?}",
                std::fs::read_to_string(&path)
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn a_bounded_read_holds_no_more_than_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.txt");
        std::fs::write(&path, "αβγ\n".repeat(1000)).unwrap();
        let read = |line, limit, most| files::read_bounded(&path, line, limit, most);
        let whole = read(None, None, usize::MAX).await.unwrap();
        assert_eq!((whole.text.len(), whole.cut), (7000, false));
        // Cut in the middle of a character: the whole ones before it.
        let start = read(None, None, 4).await.unwrap();
        assert_eq!((start.text.as_str(), start.cut), ("αβ", true));
        let lines = read(Some(999), Some(5), 100).await.unwrap();
        assert_eq!((lines.text.as_str(), lines.cut), ("αβγ\nαβγ\n", false));
        let exact = read(Some(2), Some(2), 14).await.unwrap();
        assert_eq!((exact.text.len(), exact.cut), (14, false));
        assert_eq!(files::Bounded::of("abc".into(), 2).text, "ab");
    }

    #[test]
    fn select_lines_is_one_based_and_keeps_breaks() {
        let text = "a\nb\nc\nd";
        assert_eq!(select_lines(text, None, None), text);
        assert_eq!(select_lines(text, Some(2), Some(2)), "b\nc\n");
        assert_eq!(select_lines(text, Some(4), None), "d");
        assert_eq!(select_lines(text, Some(9), Some(1)), "");
        assert_eq!(select_lines(text, None, Some(1)), "a\n");
    }
}
