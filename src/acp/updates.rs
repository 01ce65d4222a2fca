//! `session/update` → the editor: agent text and thoughts to the log (the host coalesces them),
//! tool call titles to the turn's progress, the update to plugins as `agentls/sessionUpdate`
//! (streamed text merged, see `plugin_updates`), and plans, modes, commands and usage into the
//! session's state.

use super::link::AgentLink;
use super::session::Turn;
use crate::editor::Level;
use crate::editor::chat::{CallMark, PlanStep, Stage, ToolCallLine};
use crate::editor::documents::effects::ProgressPhase;
use agent_client_protocol::v1::schema::{
    ContentBlock, Diff, PlanEntry, PlanEntryStatus, SessionNotification, SessionUpdate, ToolCall,
    ToolCallContent, ToolCallStatus, ToolCallUpdateFields, ToolKind,
};

/// Takes one `session/update` in. Cheap: it only queues effects and updates state.
pub fn apply(link: &AgentLink, note: SessionNotification) {
    let session = note.session_id.to_string();
    if link.with_session(&session, |_| ()).is_none() && link.keep_early(note.clone()) {
        return; // applied once its session is added
    }
    let editor = &link.editor;
    let mut said = Vec::new();
    let mut progress = None;
    let mut chat = None;
    let mut replaying = false;
    link.with_session(&session, |s| {
        chat = s.turn.as_ref().and_then(|t| t.chat.clone());
        replaying = s.replaying;
        update_session(s, &note.update, link, &mut said, &mut progress)
    });
    if replaying {
        return; // the history of a loaded session: its chat shows it already
    }
    link.plugin_updates.push(&session, note.update);
    for said in said {
        // The agent's words, thoughts and tool calls go to its chat (and only there: the
        // editor's log is not a second transcript).
        match (said, chat.as_deref()) {
            (Said::Text(_, text), Some(chat)) => {
                tracing::debug!(%session, "to the chat: {text}");
                editor.append_to_chat(chat, text);
            }
            (Said::Text(level, text), None) => editor.log(level, text),
            (Said::Thought(text), Some(chat)) => editor.append_thought_to_chat(chat, text),
            (Said::Thought(text), None) => editor.log(Level::Log, text),
            (Said::Call(call), Some(chat)) => editor.chat_tool_call(chat, call),
            (Said::Plan(steps), Some(chat)) => editor.chat_plan(chat, steps),
            (Said::Plan(_), None) => {} // agentls.status shows it
            (Said::Call(call), None) => {
                if let Some((level, line)) = call.log_line() {
                    editor.log(level, line);
                }
            }
        }
    }
    if let Some((id, message)) = progress.filter(|(id, _)| !id.is_empty()) {
        editor.progress(id, ProgressPhase::Report { message });
    }
}

/// What an update has agentls tell the user.
enum Said {
    /// Text for the chat (or the log, at this level).
    Text(Level, String),
    /// The agent's thought: quoted in the chat (or the log's lowest level).
    Thought(String),
    /// Where a tool call stands.
    Call(ToolCallLine),
    /// The agent's plan, whole.
    Plan(Vec<PlanStep>),
}

/// What one update changes in the session, and what it says in the chat, log and progress.
fn update_session(
    s: &mut super::session::SessionState,
    update: &SessionUpdate,
    link: &AgentLink,
    said: &mut Vec<Said>,
    progress: &mut Option<(String, String)>,
) {
    match update {
        SessionUpdate::AgentMessageChunk(chunk) => {
            if let Some(text) = text_of(&chunk.content) {
                if let Some(turn) = s.turn.as_mut() {
                    turn.said(text);
                    turn.log_mid_line = !text.ends_with('\n');
                }
                said.push(Said::Text(Level::Info, text.to_owned()));
            }
        }
        SessionUpdate::AgentThoughtChunk(chunk) => {
            if let Some(text) = text_of(&chunk.content) {
                if let Some(turn) = s.turn.as_mut() {
                    turn.log_mid_line = !text.ends_with('\n');
                }
                said.push(Said::Thought(text.to_owned()));
            }
        }
        SessionUpdate::ToolCall(call) => {
            // A tool call after its turn ended (or before one began) is still logged and
            // forwarded, but tallies nothing: a turn made up here would never end, and every
            // later prompt would be refused as busy.
            let lead = match s.turn.as_mut() {
                Some(turn) => {
                    tally_tool_call(turn, call);
                    *progress = Some((turn.progress_id.clone(), call.title.clone()));
                    let lead = if turn.log_mid_line { "\n" } else { "" };
                    turn.log_mid_line = false;
                    lead
                }
                None => "",
            };
            said.push(Said::Call(ToolCallLine {
                id: call.tool_call_id.to_string(),
                title: call.title.clone(),
                mark: mark_of(call.status),
                lead,
                new: true,
            }));
        }
        SessionUpdate::ToolCallUpdate(update) => {
            let id = update.tool_call_id.to_string();
            let fields = &update.fields;
            let failed = fields.status == Some(ToolCallStatus::Failed);
            let Some(turn) = s.turn.as_mut() else {
                if failed {
                    let title = fields.title.clone().unwrap_or(id);
                    said.push(Said::Text(Level::Warning, format!("✗ {title} failed\n")));
                }
                return;
            };
            tally_tool_call_update(turn, &id, fields);
            let title = turn
                .tool_calls
                .get(&id)
                .cloned()
                .unwrap_or_else(|| id.clone());
            if fields.status.is_some() || fields.title.is_some() {
                let lead = if turn.log_mid_line { "\n" } else { "" };
                turn.log_mid_line = false;
                said.push(Said::Call(ToolCallLine {
                    id,
                    title: title.clone(),
                    mark: mark_of(fields.status.unwrap_or(ToolCallStatus::InProgress)),
                    lead,
                    new: false,
                }));
            }
            if fields.title.is_some() {
                *progress = Some((turn.progress_id.clone(), title));
            }
        }
        SessionUpdate::Plan(plan) => {
            s.plan = Some(value(plan));
            said.push(Said::Plan(plan.entries.iter().map(plan_step).collect()));
        }
        SessionUpdate::AvailableCommandsUpdate(u) => {
            let commands = value(&u.available_commands);
            if s.commands.as_ref() != Some(&commands) {
                super::command_memory::remember(&link.agent, &commands);
            }
            s.commands = Some(commands);
        }
        SessionUpdate::CurrentModeUpdate(u) => s.current_mode = Some(u.current_mode_id.to_string()),
        SessionUpdate::ConfigOptionUpdate(u) => s.config_options = Some(value(&u.config_options)),
        SessionUpdate::UsageUpdate(u) => s.usage = Some(value(u)),
        SessionUpdate::Notice(notice) => {
            let detail = notice.description.as_deref().unwrap_or_default();
            said.push(Said::Text(
                Level::Warning,
                format!("\n{}: {} {detail}\n", link.agent, notice.title),
            ));
        }
        _ => {}
    }
}

/// A plan entry as the chat shows it.
fn plan_step(entry: &PlanEntry) -> PlanStep {
    let stage = match entry.status {
        PlanEntryStatus::Completed => Stage::Done,
        PlanEntryStatus::InProgress => Stage::Doing,
        _ => Stage::Waiting,
    };
    PlanStep {
        text: entry.content.clone(),
        stage,
    }
}

/// How a tool call's status shows.
fn mark_of(status: ToolCallStatus) -> CallMark {
    match status {
        ToolCallStatus::Completed => CallMark::Done,
        ToolCallStatus::Failed => CallMark::Failed,
        _ => CallMark::Running,
    }
}

/// Counts a new tool call in the running turn: its title, the files it edits, its failure.
fn tally_tool_call(turn: &mut Turn, call: &ToolCall) {
    turn.message_done = true;
    let id = call.tool_call_id.to_string();
    turn.tool_calls.insert(id.clone(), call.title.clone());
    let diffs: Vec<Diff> = diffs_in(&call.content).cloned().collect();
    if !diffs.is_empty() {
        turn.diffs.insert(id.clone(), diffs);
    }
    let mut paths: Vec<_> = diff_paths(&call.content).collect();
    if matches!(
        call.kind,
        ToolKind::Edit | ToolKind::Delete | ToolKind::Move
    ) {
        paths.extend(call.locations.iter().map(|l| l.path.clone()));
    }
    if call.status == ToolCallStatus::Completed {
        turn.files.extend(paths);
    } else if !paths.is_empty() {
        turn.editing.entry(id.clone()).or_default().extend(paths);
    }
    if call.status == ToolCallStatus::Failed {
        turn.tool_call_failed(&id);
    }
}

/// Counts an update of tool call `id` in the running turn: a new title, the files it edits,
/// and (when it completed) those files as changed. A failure is counted by title.
fn tally_tool_call_update(turn: &mut Turn, id: &str, fields: &ToolCallUpdateFields) {
    if let Some(title) = &fields.title {
        turn.tool_calls.insert(id.to_owned(), title.clone());
    }
    if let Some(content) = &fields.content {
        let diffs: Vec<Diff> = diffs_in(content).cloned().collect();
        if !diffs.is_empty() {
            turn.diffs.insert(id.to_owned(), diffs);
        }
        let paths = diff_paths(content);
        turn.editing.entry(id.to_owned()).or_default().extend(paths);
    }
    match fields.status {
        Some(ToolCallStatus::Completed) => {
            let paths = turn.editing.remove(id).unwrap_or_default();
            turn.files.extend(paths);
        }
        Some(ToolCallStatus::Failed) => {
            turn.editing.remove(id);
            turn.tool_call_failed(id);
        }
        _ => {}
    }
}

/// The text of a text block.
fn text_of(block: &ContentBlock) -> Option<&str> {
    match block {
        ContentBlock::Text(text) => Some(&text.text),
        _ => None,
    }
}

/// The paths of diffs in tool call content.
fn diff_paths(content: &[ToolCallContent]) -> impl Iterator<Item = std::path::PathBuf> + '_ {
    diffs_in(content).map(|diff| diff.path.clone())
}

/// The diffs among a tool call's content.
pub fn diffs_in(content: &[ToolCallContent]) -> impl Iterator<Item = &Diff> {
    content.iter().filter_map(|c| match c {
        ToolCallContent::Diff(diff) => Some(diff),
        _ => None,
    })
}

/// A schema value as JSON, kept for `agentls.status`.
fn value<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or_default()
}
