//! One turn: the prompt goes to the agent's current session, the turn's progress runs in the
//! editor, and when it ends the user gets one summary (stop reason, tool calls, files, failures,
//! the start of the agent's last message) — or the class of failure when it did not finish.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use agent_client_protocol::v1::schema::{PromptRequest, SessionId, StopReason};

use super::agent::{Claimed, RunningAgent};
use super::context::{self, PromptContext};
use super::error::AgentFailure;
use super::session::Turn;
use crate::editor::chat;
use crate::editor::documents::effects::ProgressPhase;
use crate::editor::{Level, PluginEvent};

/// How long a turn may go on after `session/cancel` before agentls ends it as cancelled.
const CANCEL_GRACE: Duration = Duration::from_secs(10);

/// How a turn ended, before it is told.
#[derive(Debug)]
pub enum TurnEnd {
    /// The agent answered with a stop reason.
    Stopped(String),
    /// The session already had a turn running.
    Busy,
    /// It did not finish.
    Failed(AgentFailure),
}

/// Runs a turn on `agent`'s current session and returns how it ended with its tally.
/// `progress_id` names the turn's progress, which the caller began and ends; `cancel` is the
/// prompt's (it may have been cancelled before the turn could start).
pub async fn run(
    agent: &RunningAgent,
    asked: Asked<'_>,
    progress_id: &str,
    cancel: CancellationToken,
    sent: oneshot::Sender<()>,
) -> (TurnEnd, Option<Turn>) {
    let cancelled_early = || (TurnEnd::Stopped("cancelled".into()), None);
    if cancel.is_cancelled() {
        return cancelled_early();
    }
    let (session, note) = match session_of(agent, &asked).await {
        Ok(chosen) => chosen,
        Err(failure) => return (TurnEnd::Failed(failure), None),
    };
    let started = agent.link.with_session(&session, |s| {
        if cancel.is_cancelled() {
            return None;
        }
        if s.turn.is_some() {
            return Some(false);
        }
        let mut turn = Turn::new(progress_id.to_owned());
        turn.cancel = cancel.clone();
        turn.chat = asked.chat.map(Path::to_path_buf);
        s.turn = Some(turn);
        s.cancelled_unanswered = false;
        s.turns += 1;
        Some(true)
    });
    match started.flatten() {
        None => return cancelled_early(),
        Some(false) => return (TurnEnd::Busy, None),
        Some(true) => {}
    }
    let origin = agent.link.origin(&session);
    // What it called before this turn is not this turn's.
    let tools = agent.link.editor.tool_grants();
    tools.take_uses(&origin.key);
    let own_files = agent.own_files(&agent.link.cwd);
    let undone = agent
        .link
        .editor
        .turn_started(&origin, own_files, asked.chat)
        .await;
    let mut notes = agent
        .link
        .with_session(&session, |s| std::mem::take(&mut s.notes))
        .unwrap_or_default();
    notes.extend(undone);
    notes.extend(note.map(str::to_owned));
    let mut blocks = context::blocks(asked.text, asked.context, agent.info.embedded_context);
    if !notes.is_empty() {
        let note = format!("(From agentls) {}", notes.join("\n"));
        blocks.insert(
            0,
            agent_client_protocol::v1::schema::ContentBlock::from(note),
        );
    }
    let request = PromptRequest::new(SessionId::new(session.clone()), blocks);
    let answer = agent.request(request, "session/prompt", None);
    // Sent: the agent's next command may go now.
    let _ = sent.send(());
    // An agent that ignores `session/cancel` must not keep the session busy forever.
    let answer = tokio::select! {
        answer = answer => answer,
        () = async { cancel.cancelled().await; tokio::time::sleep(CANCEL_GRACE).await } => {
            agent.link.editor.log(
                Level::Warning,
                format!(
                    "{}: no answer {}s after the cancel; the turn is over for agentls\n",
                    agent.name(),
                    CANCEL_GRACE.as_secs()
                ),
            );
            Err(AgentFailure::Timeout { what: "session/prompt after session/cancel", secs: CANCEL_GRACE.as_secs() })
        }
    };
    // Plugins get the turn's last text before anything that reports its end.
    agent.link.plugin_updates.flush();
    // Accepted changes the agent did not write itself by now are carried out by agentls.
    agent.link.editor.settle_origin(&origin);
    let unasked = agent.link.editor.turn_ended(&origin).await;
    // What a long reply allocated goes back to the system, not only to the heap.
    crate::memory::give_back_soon();
    // Given up on after the cancel: what the agent still asks for this turn is not asked.
    let unanswered = matches!(answer, Err(AgentFailure::Timeout { .. })) && cancel.is_cancelled();
    let mut turn = agent
        .link
        .with_session(&session, |s| {
            s.cancelled_unanswered = unanswered;
            s.turn.take()
        })
        .flatten();
    agent.release_if_unreachable(&session);
    if let Some(turn) = turn.as_mut() {
        turn.unasked.extend(unasked);
        turn.editor_tools = tools.take_uses(&origin.key);
    }
    if tools.never_connected(&origin.key)
        && let Some(hint) = agent.tools_hint_once()
    {
        agent.link.editor.tell_user(
            Level::Warning,
            format!(
                "agentls: {} has not connected to agentls's editor tools (diagnostics, open \
                 files, selection): {hint}",
                agent.name()
            ),
        );
    }
    let cancelled = cancel.is_cancelled();
    let end =
        match answer {
            Ok(response) => TurnEnd::Stopped(stop_reason(&response.stop_reason)),
            // An agent may answer a cancel with an error instead of `cancelled`.
            // One that does not answer within the grace has had its chance.
            Err(
                AgentFailure::Agent(_) | AgentFailure::Protocol(_) | AgentFailure::Timeout { .. },
            ) if cancelled => TurnEnd::Stopped("cancelled".into()),
            Err(failure) => TurnEnd::Failed(failure),
        };
    (end, turn)
}

/// The session `asked` goes to (a chat's own), and what agentls tells the agent along with it:
/// a resumed chat's transcript is not told to the session that remembers the conversation.
async fn session_of<'a>(
    agent: &RunningAgent,
    asked: &Asked<'a>,
) -> Result<(String, Option<&'a str>), AgentFailure> {
    let Some(chat) = asked.chat else {
        return Ok((agent.session().await?, asked.note));
    };
    let earlier = chat::sessions::remembered(chat, agent.name()).await;
    let chosen = agent.session_for(chat, earlier.as_deref()).await?;
    if chosen.how == Claimed::Given
        && let Err(e) = chat::sessions::remember(chat, agent.name(), &chosen.id).await
    {
        tracing::warn!(chat = %chat.display(), "its session is not kept for a restart: {e}");
    }
    let note = asked.note.filter(|_| chosen.how != Claimed::Loaded);
    Ok((chosen.id, note))
}

/// What the user asked for a turn.
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    /// The prompt.
    pub text: &'a str,
    /// A file or selection sent along.
    pub context: &'a [PromptContext],
    /// The chat document the reply streams into, when the prompt came from one.
    pub chat: Option<&'a Path>,
    /// What agentls tells the agent along with it.
    pub note: Option<&'a str>,
    /// The comment prompt it answers: it goes once the turn changed its file.
    pub comment: Option<&'a super::AnsweredComment>,
}

/// Tells plugins that `agent` is `prompting` (its first turn began) or no longer (its last
/// one ended).
fn tell_plugins(agent: &RunningAgent, prompting: bool) {
    agent.link.editor.notify_plugins(
        PluginEvent::TurnChanged,
        || json!({"agent": agent.name(), "prompting": prompting}),
    );
}

/// Runs a turn with its progress and tells the user how it went, once.
pub async fn run_and_report(
    agent: &RunningAgent,
    asked: Asked<'_>,
    progress_id: &str,
    cancel: CancellationToken,
    sent: oneshot::Sender<()>,
) -> Option<AgentFailure> {
    if agent.begin_turn() {
        tell_plugins(agent, true);
    }
    let (chat, comment) = (asked.chat, asked.comment);
    let (end, turn) = run(agent, asked, progress_id, cancel, sent).await;
    if let (Some(comment), Some(turn)) = (comment, &turn)
        && turn.files.contains(&comment.path)
    {
        agent
            .link
            .editor
            .remove_comment(&comment.path, comment.line.clone());
    }
    if matches!(end, TurnEnd::Failed(AgentFailure::ProcessDied { .. })) {
        // Before the count drops: the death watcher then knows it need not tell.
        agent.report_death();
        // Withdraw what it left open before telling the user, so what they then see is true.
        agent.tear_down();
    }
    tell(agent, &end, turn.as_ref(), progress_id);
    if let Some(chat) = chat {
        let (_, line) = summary(agent.name(), &end, turn.as_ref());
        close_chat_reply(&agent.link.editor, chat, &line);
    }
    if agent.end_turn() {
        tell_plugins(agent, false);
    }
    match end {
        TurnEnd::Failed(failure) => Some(failure),
        _ => None,
    }
}

/// Tells the user how a turn ended and ends its progress.
pub fn tell(agent: &RunningAgent, end: &TurnEnd, turn: Option<&Turn>, progress_id: &str) {
    let (level, text) = summary(agent.name(), end, turn);
    let editor = &agent.link.editor;
    if turn.is_some_and(|t| t.log_mid_line) {
        editor.log(Level::Info, "\n");
    }
    // Every file of a list the summary cuts short, in agentls's log (stderr: the editor's log
    // of its language servers).
    let lists = turn.map(|t| [("files", &t.files), ("changed without asking", &t.unasked)]);
    for (what, paths) in lists.into_iter().flatten() {
        if paths.len() > crate::editor::NAMED_IN_A_MESSAGE {
            let list: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
            let (who, count) = (agent.name(), paths.len());
            tracing::info!("{who}: {what} ({count}):\n{}\n", list.join("\n"));
        }
    }
    // tell_user also logs it: the log keeps every message.
    editor.tell_user(level, text);
    let short = match end {
        TurnEnd::Stopped(reason) => reason.clone(),
        TurnEnd::Busy => "busy".into(),
        TurnEnd::Failed(failure) => format!("failed: {}", failure.class()),
    };
    editor.progress(
        progress_id,
        ProgressPhase::End {
            message: Some(short),
        },
    );
}

/// The summary of a turn and how loud it is.
pub fn summary(agent: &str, end: &TurnEnd, turn: Option<&Turn>) -> (Level, String) {
    let tally = turn.map(Turn::tally);
    let quote = turn
        .and_then(Turn::quote)
        .map(|q| format!(" — “{q}”"))
        .unwrap_or_default();
    match end {
        TurnEnd::Stopped(reason) => {
            let level = match reason.as_str() {
                "end_turn" | "cancelled" => Level::Info,
                _ => Level::Warning,
            };
            let tally = tally.map(|t| format!(" · {t}")).unwrap_or_default();
            (level, format!("{agent}: {reason}{tally}{quote}"))
        }
        TurnEnd::Busy => (Level::Warning, busy_message(agent)),
        TurnEnd::Failed(failure) => {
            let tally = tally.map(|t| format!(" ({t})")).unwrap_or_default();
            (
                Level::Error,
                format!("{agent}: turn failed: {failure}{tally}"),
            )
        }
    }
}

/// What the user hears of a prompt to `agent` while its previous one still runs.
pub fn busy_message(agent: &str) -> String {
    format!("{agent} is still working on the previous prompt; cancel it first (agentls.cancel)")
}

fn stop_reason(reason: &StopReason) -> String {
    serde_json::to_value(reason)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{reason:?}"))
}

/// The turn's outcome `line` closes the reply in the chat at `chat`; the user writes the next
/// message below it.
pub fn close_chat_reply(editor: &crate::editor::EditorAccess, chat: &Path, line: &str) {
    let you = crate::editor::chat::record::YOU;
    editor.append_paragraph_to_chat(chat, format!("_{line}_\n\n{you}\n\n"));
    editor.chat_turn(chat, false);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_name_the_stop_reason_or_the_class_of_failure() {
        let mut turn = Turn::new("p".into());
        turn.said("Done: uppercased 2 lines.");
        turn.tool_calls.insert("1".into(), "Read a.txt".into());
        let (level, text) = summary("demo", &TurnEnd::Stopped("end_turn".into()), Some(&turn));
        assert_eq!(level, Level::Info);
        assert_eq!(
            text,
            "demo: end_turn · 1 tool call — “Done: uppercased 2 lines.”"
        );
        let died = AgentFailure::ProcessDied {
            status: "killed by signal 9 (SIGKILL)".into(),
            stderr: vec![],
        };
        let (level, text) = summary("demo", &TurnEnd::Failed(died), None);
        assert_eq!(level, Level::Error);
        assert_eq!(
            text,
            "demo: turn failed: process died (killed by signal 9 (SIGKILL))"
        );
        assert_eq!(stop_reason(&StopReason::MaxTokens), "max_tokens");
    }
}
