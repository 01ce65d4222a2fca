//! `session/update` → the editor: agent text and thoughts to the log (the host coalesces them),
//! tool call titles to the turn's progress, the update to plugins as `agentls/sessionUpdate`
//! (streamed text merged, see `plugin_updates`), and plans, modes, commands and usage into the
//! session's state.

use super::link::AgentLink;
use super::session::Turn;
use crate::editor::Level;
use crate::editor::effects::ProgressPhase;
use agent_client_protocol::v1::schema::{
    ContentBlock, SessionNotification, SessionUpdate, ToolCallContent, ToolCallStatus, ToolKind,
};

/// Takes one `session/update` in. Cheap: it only queues effects and updates state.
pub fn apply(link: &AgentLink, note: SessionNotification) {
    let session = note.session_id.to_string();
    let editor = &link.editor;
    let mut log = Vec::new();
    let mut progress = None;
    link.with_session(&session, |s| match &note.update {
        SessionUpdate::AgentMessageChunk(chunk) => {
            if let Some(text) = text_of(&chunk.content) {
                if let Some(turn) = s.turn.as_mut() {
                    turn.said(text);
                    turn.log_mid_line = !text.ends_with('\n');
                }
                log.push((Level::Info, text.to_owned()));
            }
        }
        SessionUpdate::AgentThoughtChunk(chunk) => {
            if let Some(text) = text_of(&chunk.content) {
                if let Some(turn) = s.turn.as_mut() {
                    turn.log_mid_line = !text.ends_with('\n');
                }
                log.push((Level::Log, text.to_owned()));
            }
        }
        SessionUpdate::ToolCall(call) => {
            let turn = s.turn.get_or_insert_with(Turn::default);
            turn.message_done = true;
            turn.tool_calls
                .insert(call.tool_call_id.to_string(), call.title.clone());
            let id = call.tool_call_id.to_string();
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
                turn.editing.entry(id).or_default().extend(paths);
            }
            if call.status == ToolCallStatus::Failed {
                turn.failed.insert(call.title.clone());
            }
            let lead = if turn.log_mid_line { "\n" } else { "" };
            turn.log_mid_line = false;
            log.push((Level::Info, format!("{lead}▸ {}\n", call.title)));
            progress = Some((turn.progress_id.clone(), call.title.clone()));
        }
        SessionUpdate::ToolCallUpdate(update) => {
            let turn = s.turn.get_or_insert_with(Turn::default);
            let id = update.tool_call_id.to_string();
            let fields = &update.fields;
            if let Some(title) = &fields.title {
                turn.tool_calls.insert(id.clone(), title.clone());
            }
            if let Some(content) = &fields.content {
                let paths = diff_paths(content);
                turn.editing.entry(id.clone()).or_default().extend(paths);
            }
            match fields.status {
                Some(ToolCallStatus::Completed) => {
                    let paths = turn.editing.remove(&id).unwrap_or_default();
                    turn.files.extend(paths);
                }
                Some(ToolCallStatus::Failed) => {
                    turn.editing.remove(&id);
                }
                _ => {}
            }
            let title = turn.tool_calls.get(&id).cloned().unwrap_or(id);
            if fields.status == Some(ToolCallStatus::Failed) {
                turn.failed.insert(title.clone());
                let lead = if turn.log_mid_line { "\n" } else { "" };
                turn.log_mid_line = false;
                log.push((Level::Warning, format!("{lead}✗ {title} failed\n")));
            }
            if fields.title.is_some() {
                progress = Some((turn.progress_id.clone(), title));
            }
        }
        SessionUpdate::Plan(plan) => s.plan = Some(value(plan)),
        SessionUpdate::AvailableCommandsUpdate(u) => {
            s.commands = Some(value(&u.available_commands))
        }
        SessionUpdate::CurrentModeUpdate(u) => s.current_mode = Some(u.current_mode_id.to_string()),
        SessionUpdate::ConfigOptionUpdate(u) => s.config_options = Some(value(&u.config_options)),
        SessionUpdate::UsageUpdate(u) => s.usage = Some(value(u)),
        SessionUpdate::Notice(notice) => {
            let detail = notice.description.as_deref().unwrap_or_default();
            log.push((
                Level::Warning,
                format!("\n{}: {} {detail}\n", link.agent, notice.title),
            ));
        }
        _ => {}
    });
    link.plugin_updates.push(&session, note.update);
    for (level, text) in log {
        editor.log(level, text);
    }
    if let Some((id, message)) = progress.filter(|(id, _)| !id.is_empty()) {
        editor.progress(id, ProgressPhase::Report { message });
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
    content.iter().filter_map(|c| match c {
        ToolCallContent::Diff(diff) => Some(diff.path.clone()),
        _ => None,
    })
}

/// A schema value as JSON, kept for `agentls.status`.
fn value<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or_default()
}
