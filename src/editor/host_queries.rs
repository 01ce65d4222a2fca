//! The host's questions to the state, by name. Each runs on the state task, in order with
//! everything fed before it, and answers owned values; no closure of the host's crosses into
//! the state task (`EditorFeed::query` is for tests).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::actions::UserAction;
use super::chat::ChatToken;
use super::chat::comment_prompt::CommentPrompt;
use super::disk::files;
use super::documents::effects::Hint;
use super::documents::position::{Position, Range};
use super::feed::EditorFeed;
use super::review::ReviewId;
use super::review::checkpoints::TurnNumber;
use super::review::decision::{Decision, DecisionError};
use super::state::StateGone;

/// What sending from a chat needs to know of it (see [`EditorFeed::chat_to_send`]).
#[derive(Debug, Default)]
pub struct ChatToSend {
    /// Its agent (`None`: the document is no chat).
    pub agent: Option<String>,
    /// Its text (`None`: not open).
    pub text: Option<String>,
    /// Reopened from an earlier run and sending now: the message takes the transcript along.
    pub resumed: bool,
    /// Reopened and still not whole after [`RESTORE_WAIT`]: its text is not what the user
    /// sees once it is, and nothing is sent from it.
    pub restoring: bool,
    /// A turn answering in it is running: nothing is sent from it until that ends.
    pub running: bool,
}

/// How long sending from a reopened chat waits for agentls to put back what its document
/// lacks of its record.
pub const RESTORE_WAIT: Duration = Duration::from_secs(3);

impl EditorFeed {
    /// agentls is about to stop: what each chat's document has not got yet goes into its
    /// record, on disk when this returns.
    pub async fn keep_chats(&self) {
        if let Ok(records) = self.state.query(|s| s.keep_chats()).await {
            records.done().await;
        }
    }

    /// What the server believes, as JSON (`agentls.debug.state`).
    pub async fn describe(&self) -> Result<Value, StateGone> {
        self.state.query(|s| s.describe()).await
    }

    /// Carries out the user's decision on a review.
    pub async fn decide(&self, decision: Decision) -> Result<Result<(), DecisionError>, StateGone> {
        self.state.query(move |s| s.decide(decision)).await
    }

    /// Shows review `id`'s file at its first open change.
    pub async fn show_review(&self, id: ReviewId) -> Result<Result<(), DecisionError>, StateGone> {
        self.state.query(move |s| s.show_review(id)).await
    }

    /// Answers question `id` with `choice`.
    pub async fn answer_question(
        &self,
        id: u64,
        choice: String,
    ) -> Result<Result<(), super::questions::AnswerError>, StateGone> {
        self.state
            .query(move |s| s.answer_question(id, &choice))
            .await
    }

    /// The document in focus.
    pub async fn focused(&self) -> Option<PathBuf> {
        let focused = self.state.query(|s| s.focused().map(Path::to_path_buf));
        focused.await.ok().flatten()
    }

    /// `agent`'s latest chat since the server started.
    pub async fn latest_chat(&self, agent: &str) -> Option<PathBuf> {
        let agent = agent.to_owned();
        let latest = self
            .state
            .query(move |s| s.latest_chat(&agent).map(Path::to_path_buf));
        latest.await.ok().flatten()
    }

    /// `agent`'s latest chat and how its text ends (for a prompt from elsewhere).
    pub async fn latest_chat_end(
        &self,
        agent: &str,
    ) -> Result<Option<(PathBuf, Option<String>)>, StateGone> {
        let agent = agent.to_owned();
        self.state
            .query(move |s| {
                let chat = s.latest_chat(&agent)?.to_path_buf();
                let end = s.chat_end(&chat);
                Some((chat, end))
            })
            .await
    }

    /// Lines `range` of `path` quoted for a chat, and `agent`'s latest chat.
    pub async fn quote_for_chat(
        &self,
        path: &Path,
        range: Range,
        agent: &str,
    ) -> Result<(Option<String>, Option<PathBuf>), StateGone> {
        let (path, agent) = (path.to_owned(), agent.to_owned());
        self.state
            .query(move |s| {
                let quoted = s.quote_lines(&path, range);
                (quoted, s.latest_chat(&agent).map(Path::to_path_buf))
            })
            .await
    }

    /// Whether a turn answering in the chat at `path` is running.
    pub async fn chat_turn_running(&self, path: &Path) -> Result<bool, StateGone> {
        let path = path.to_owned();
        self.state.query(move |s| s.chats.turn_running(&path)).await
    }

    /// What sending from the chat at `path` needs; a chat reopened from an earlier run is
    /// marked as having sent its transcript when its message goes now.
    /// A chat being made whole again is waited for first (at most [`RESTORE_WAIT`]).
    pub async fn chat_to_send(&self, path: &Path) -> Result<ChatToSend, StateGone> {
        let path = path.to_owned();
        let restoring = self.state.query({
            let path = path.clone();
            move |s| s.chat_restoring(&path)
        });
        if let Some(restored) = restoring.await?
            && tokio::time::timeout(RESTORE_WAIT, restored).await.is_err()
        {
            return Ok(ChatToSend {
                restoring: true,
                ..ChatToSend::default()
            });
        }
        self.state
            .query(move |s| {
                let agent = s.chat_agent(&path).map(str::to_owned);
                let text = s.buffer(&path).map(|(text, _)| text);
                // Only a message that goes out takes the transcript along.
                let sends = text.as_deref().and_then(super::chat::message_to_send);
                let running = s.chats.turn_running(&path);
                let resumed = sends.is_some() && !running && s.take_resumed(&path);
                ChatToSend {
                    agent,
                    text,
                    resumed,
                    restoring: false,
                    running,
                }
            })
            .await
    }

    /// The code actions for `range` of `path` (with `agent`'s comment prompt and *Ask about
    /// this*), and the agent of the chat `path` is, if it is one.
    pub async fn code_actions(
        &self,
        path: &Path,
        range: Range,
        agent: Option<String>,
    ) -> Result<(Vec<UserAction>, Option<String>), StateGone> {
        let path = path.to_owned();
        self.state
            .query(move |s| {
                let mut actions = s.actions(&path, range);
                actions.extend(s.open_chat_actions(&path));
                if let Some(agent) = &agent {
                    actions.extend(s.comment_action(&path, range, agent));
                    actions.extend(s.ask_action(&path, range, agent));
                }
                (actions, s.chat_agent(&path).map(str::to_owned))
            })
            .await
    }

    /// What is being typed at `at` in the chat at `path`, for completion.
    pub async fn chat_token(&self, path: &Path, at: Position) -> Option<ChatToken> {
        let path = path.to_owned();
        let token = self.state.query(move |s| s.chat_token(&path, at));
        token.await.ok().flatten()
    }

    /// The file and line a chat's link at `at` points to.
    pub async fn chat_link(&self, path: &Path, at: Position) -> Option<(PathBuf, u32)> {
        let path = path.to_owned();
        let link = self.state.query(move |s| s.chat_link(&path, at));
        link.await.ok().flatten()
    }

    /// The inlay hints of reviews in `range` of `path`.
    pub async fn review_hints(&self, path: &Path, range: Range) -> Vec<Hint> {
        let path = path.to_owned();
        let hints = self.state.query(move |s| s.review_hints(&path, range));
        hints.await.unwrap_or_default()
    }

    /// The comment prompt on `line` of `path`.
    pub async fn comment_prompt(
        &self,
        path: &Path,
        line: usize,
    ) -> Result<Option<CommentPrompt>, StateGone> {
        let path = path.to_owned();
        self.state
            .query(move |s| s.comment_prompt(&path, line))
            .await
    }

    /// The open buffer's text of `path` (lines `range` of it), if open.
    pub async fn text_of(&self, path: &Path, range: Option<Range>) -> Option<String> {
        let path = path.to_owned();
        let text = self.state.query(move |s| s.text_of(&path, range));
        text.await.ok().flatten()
    }
}

impl EditorFeed {
    /// Undoes turn `number` (the newest that changed a file when `None`), or redoes it
    /// (`redo`): opens its reviews and answers what the user is told, or why it cannot.
    pub async fn undo_turn(
        &self,
        number: Option<TurnNumber>,
        redo: bool,
    ) -> Result<Result<String, String>, StateGone> {
        let (plan, closed) = match self
            .state
            .query(move |s| s.turn_undo_plan(number, redo))
            .await?
        {
            Ok(planned) => planned,
            Err(why) => return Ok(Err(why)),
        };
        let mut disks = BTreeMap::new();
        for path in closed {
            let disk = files::read(&path).await.ok();
            disks.insert(path, disk);
        }
        self.state
            .query(move |s| s.open_turn_undo(plan, disks))
            .await
            .map(Ok)
    }
}
