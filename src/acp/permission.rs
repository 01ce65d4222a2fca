//! `session/request_permission`. With diff content it is an edit proposal: each diff goes to
//! [`review_proposed_edit`] (several at once), and it is allowed only if every one was accepted;
//! otherwise (run a command, fetch a URL, …) the agent's own options
//! are put to the user as a question. Answers map back to the agent's options by kind, never by
//! position. Nothing is allowed without the user. Requests are answered from a spawned task so
//! the connection keeps flowing while a human thinks; a cancel or the session's death withdraws
//! them (`cancelled`).

use std::path::Path;
use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    Diff, PermissionOption, PermissionOptionKind, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, SelectedPermissionOutcome, ToolKind,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Error};

use super::link::AgentLink;
use super::review::{Proposal, open_proposed_edit, proposals};
use super::updates::diffs_in;
use crate::editor::chat::links::hunk_links;
use crate::editor::review::Verdict;
use crate::editor::{Choice, ChoiceKind, FileError, Level, Origin, file_name};

/// Starts answering `request`; returns at once.
pub fn handle(
    link: &Arc<AgentLink>,
    request: RequestPermissionRequest,
    responder: Responder<RequestPermissionResponse>,
    cx: &ConnectionTo<Agent>,
) -> Result<(), Error> {
    let session = request.session_id.to_string();
    // What the agent said before asking reaches plugins before the question does.
    link.plugin_updates.flush();
    let id = link.next_id();
    let title = request
        .tool_call
        .fields
        .title
        .clone()
        .unwrap_or_else(|| format!("{} asks for permission", link.agent));
    let call = request.tool_call.tool_call_id.to_string();
    let Some(withdrawn) = link
        .with_session(&session, |s| {
            // The user cancelled this turn: nothing more is asked of them for it.
            let cancelled = match &s.turn {
                Some(turn) => turn.cancel.is_cancelled(),
                None => s.cancelled_unanswered,
            };
            if cancelled {
                return None;
            }
            s.permissions.insert(id, title.clone());
            // Some agents (Gemini CLI) announce a tool call first in the permission request itself,
            // and send nothing more for it when it is rejected: count it here for the summary.
            if let Some(turn) = s.turn.as_mut() {
                turn.tool_calls.entry(call).or_insert_with(|| title.clone());
            }
            Some(s.withdraw.clone())
        })
        .flatten()
    else {
        return responder.respond(RequestPermissionResponse::new(
            RequestPermissionOutcome::Cancelled,
        ));
    };
    let cancelled_by_agent = responder.cancellation();
    let link = Arc::clone(link);
    cx.spawn(async move {
        let outcome = tokio::select! {
            biased;
            _ = withdrawn.cancelled() => RequestPermissionOutcome::Cancelled,
            _ = cancelled_by_agent.cancelled() => RequestPermissionOutcome::Cancelled,
            outcome = decide(&link, &session, &title, &request) => outcome,
        };
        link.with_session(&session, |s| s.permissions.remove(&id));
        tracing::info!(agent = %link.agent, %session, ?outcome, "permission answered");
        if let Err(e) = responder.respond(RequestPermissionResponse::new(outcome)) {
            tracing::debug!("permission answer not delivered: {e}");
        }
        Ok(())
    })
}

async fn decide(
    link: &AgentLink,
    session: &str,
    title: &str,
    request: &RequestPermissionRequest,
) -> RequestPermissionOutcome {
    let origin = link.origin(session);
    let options = &request.options;
    let mut diffs: Vec<Diff> = request
        .tool_call
        .fields
        .content
        .iter()
        .flat_map(|content| diffs_in(content).cloned())
        .collect();
    if diffs.is_empty() {
        // The request may only name its tool call, whose diffs came in an earlier update.
        let call = request.tool_call.tool_call_id.to_string();
        diffs = link
            .with_session(session, |s| {
                s.turn.as_ref().and_then(|t| t.diffs.get(&call).cloned())
            })
            .flatten()
            .unwrap_or_default();
    }
    let diffs: Vec<&Diff> = diffs.iter().collect();
    if !diffs.is_empty() {
        let last_read = |path: &Path| {
            link.with_session(session, |s| s.reads.get(path).cloned())
                .flatten()
        };
        let proposals = proposals(&link.editor, &diffs, last_read).await;
        let outcome = decide_edits(link, session, &origin, title, options, &proposals).await;
        if outcome.declined {
            declined(link, session, request);
        }
        return outcome.outcome;
    }
    let choices = options
        .iter()
        .map(|o| Choice {
            id: o.option_id.to_string(),
            label: o.name.clone(),
            kind: if is_allow(o.kind) {
                ChoiceKind::Allow
            } else {
                ChoiceKind::Reject
            },
        })
        .collect();
    let chat = turn_chat(link, session);
    if let Some(chat) = &chat {
        // Where the user reads the conversation, the question and how to answer it.
        let names: Vec<&str> = options.iter().map(|o| o.name.as_str()).collect();
        link.editor.append_paragraph_to_chat(
            chat,
            format!(
                "> **{} asks:** {title}\n> Answer with a code action: {}.\n\n",
                link.agent,
                names.join(" / ")
            ),
        );
    }
    let answer = link.editor.ask_user(&origin, title, choices).await;
    if let Some(chat) = &chat {
        let chosen = answer
            .as_deref()
            .and_then(|id| options.iter().find(|o| o.option_id.to_string() == id))
            .map_or("no answer", |o| o.name.as_str());
        link.editor
            .append_to_chat(chat, format!("> → {chosen}\n\n"));
    }
    let allowed = answer.as_ref().is_some_and(|id| {
        options
            .iter()
            .any(|o| o.option_id.to_string() == *id && is_allow(o.kind))
    });
    if !allowed {
        declined(link, session, request);
    }
    match answer {
        Some(id) => {
            if allowed && request.tool_call.fields.kind == Some(ToolKind::Execute) {
                // The command the agent runs itself sees the text the editor shows.
                link.editor.write_buffer_only_changes(&link.agent).await;
            }
            RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id))
        }
        None => pick(options, REJECT),
    }
}

/// Counts the request's tool call as declined by the user (not as a failure) in the turn.
fn declined(link: &AgentLink, session: &str, request: &RequestPermissionRequest) {
    let call = request.tool_call.tool_call_id.to_string();
    link.with_session(session, |s| {
        if let Some(turn) = s.turn.as_mut() {
            turn.tool_call_declined(&call);
        }
    });
}

/// How a request to edit was decided.
struct EditDecision {
    /// The answer for the agent.
    outcome: RequestPermissionOutcome,
    /// Whether the user said no (to at least one file), rather than agentls being unable to
    /// review it or the review being withdrawn.
    declined: bool,
}

/// The chat document the turn running in `session` answers in, if any.
fn turn_chat(link: &AgentLink, session: &str) -> Option<std::path::PathBuf> {
    link.with_session(session, |s| s.turn.as_ref().and_then(|t| t.chat.clone()))
        .flatten()
}

/// Proposed edits (one review per file, all open at once). The request is allowed only if the
/// user accepted (some of) every one; otherwise it is rejected, and the agent's next prompt says
/// which files the user rejected — and, when there were several, which accepted changes the
/// review engine already applied.
async fn decide_edits(
    link: &AgentLink,
    session: &str,
    origin: &Origin,
    title: &str,
    options: &[PermissionOption],
    proposals: &[Proposal],
) -> EditDecision {
    let opened = proposals.iter().map(|p| async move {
        let text = p.text.as_ref().map_err(|why| {
            link.editor.tell_user(
                Level::Warning,
                format!(
                    "{}: refused its change to {}: {why}",
                    link.agent,
                    file_name(&p.path)
                ),
            );
            why.clone()
        })?;
        open_proposed_edit(&link.editor, origin, &p.path, text, title)
            .await
            .map_err(|e| {
                refused(link, &e);
                format!("agentls refused it: {e}")
            })
    });
    // The reviews are open before the chat says so: its code actions are there with the words.
    let opened = futures::future::join_all(opened).await;
    let chat = turn_chat(link, session);
    if let Some(chat) = &chat {
        // Where the user reads the conversation: what is proposed, and how to decide it.
        let files: Vec<String> = proposals
            .iter()
            .map(|p| format!("`{}`", file_name(&p.path)))
            .collect();
        // Each hunk a link to where it is (goto-definition on its line opens it there).
        let links: Vec<String> = proposals
            .iter()
            .filter_map(|p| p.text.as_ref().ok().map(|text| (p, text)))
            .flat_map(|(p, text)| hunk_links(&p.path, &p.before, text))
            .map(|line| format!("> {line}\n"))
            .collect();
        link.editor.append_paragraph_to_chat(
            chat,
            format!(
                "> **{} proposes** changes to {}: review them in the file, or from here with \
                 the code actions *Show…*, *Accept all…*, *Reject all…*; go to a change \
                 (goto-definition on its line):\n>\n{}\n",
                link.agent,
                files.join(", "),
                links.concat()
            ),
        );
    }
    let verdicts = opened.into_iter().map(|pending| async move {
        match pending {
            Ok(pending) => Ok(pending.verdict().await),
            Err(why) => Err(why),
        }
    });
    let verdicts = futures::future::join_all(verdicts).await;
    let mut applied = Vec::new();
    // What the chat says of each file: accepted, partly, rejected.
    let mut decided = Vec::new();
    let mut rejected = Vec::new();
    let mut declined = false;
    let mut cancelled = false;
    for (proposal, verdict) in proposals.iter().zip(verdicts) {
        let file = file_name(&proposal.path);
        match verdict {
            Ok(Verdict::Accepted {
                rejected: hunks, ..
            }) => {
                note_rejected_hunks(link, session, &proposal.path, &hunks);
                decided.push(match hunks.len() {
                    0 => format!("{file} accepted"),
                    n => format!("{file} partly accepted ({n} rejected)"),
                });
                applied.push(file);
            }
            Ok(Verdict::Rejected { reason: None }) => {
                declined = true;
                rejected.push((file, None));
            }
            Ok(Verdict::Rejected { reason: Some(why) }) | Err(why) => {
                rejected.push((file, Some(why)));
            }
            Ok(Verdict::Cancelled) => cancelled = true,
        }
    }
    if let Some(chat) = &chat {
        decided.extend(rejected.iter().map(|(f, _)| format!("{f} rejected")));
        if cancelled {
            decided.push("withdrawn".to_owned());
        }
        link.editor
            .append_to_chat(chat, format!("> → {}\n\n", decided.join(", ")));
    }
    let outcome = if cancelled {
        RequestPermissionOutcome::Cancelled
    } else if rejected.is_empty() {
        return EditDecision {
            outcome: pick(options, ALLOW),
            declined,
        };
    } else {
        pick(options, REJECT)
    };
    // The agent is not allowed, so it writes nothing: what the user accepted of the other files
    // is carried out by agentls.
    link.editor.settle_origin(origin);
    let mut note = Vec::new();
    match (proposals.len(), rejected.as_slice()) {
        (_, []) | (1, [(_, None)]) => {}
        // Not the user's no: agentls could not review or write it (the reason says which).
        (1, [(file, Some(why))]) => {
            note.push(format!("Your change to {file} was not applied: {why}"))
        }
        (count, _) => {
            let files: Vec<String> = rejected
                .iter()
                .map(|(file, why)| match why {
                    Some(why) => format!("{file} ({why})"),
                    None => format!("{file} (rejected by the user)"),
                })
                .collect();
            note.push(format!(
                "Your changes to {} were not applied, so your request to change {count} files \
                 was rejected as a whole.",
                files.join(", ")
            ));
        }
    }
    if proposals.len() > 1 && !applied.is_empty() {
        note.push(format!(
            "Your changes to {} were accepted and the editor applied them (to the open buffer, \
             or to the file when it was not open); do not write them again.",
            applied.join(", ")
        ));
    }
    if !note.is_empty() {
        link.with_session(session, |s| s.notes.push(note.join(" ")));
    }
    EditDecision { outcome, declined }
}

/// Remembers the hunks of the change to `path` the user turned down, to tell the agent in its next prompt.
/// (What the user accepted needs no memory here: the port corrects the agent's own write of the
/// whole proposal to the accepted text.)
fn note_rejected_hunks(link: &AgentLink, session: &str, path: &Path, rejected: &[String]) {
    if rejected.is_empty() {
        return;
    }
    link.with_session(session, |s| {
        s.notes.push(format!(
            "The user rejected part of your change to {}; it was not applied:\n{}",
            path.display(),
            rejected.join("\n")
        ));
    });
}

/// Logs that the port refused to review a proposed change.
fn refused(link: &AgentLink, error: &FileError) {
    link.editor.log(
        Level::Warning,
        format!("{}: refused its proposed change: {error}\n", link.agent),
    );
}

/// The options that allow, most cautious first.
const ALLOW: &[PermissionOptionKind] = &[
    PermissionOptionKind::AllowOnce,
    PermissionOptionKind::AllowAlways,
];
/// The options that reject, most lenient first.
const REJECT: &[PermissionOptionKind] = &[
    PermissionOptionKind::RejectOnce,
    PermissionOptionKind::RejectAlways,
];

fn is_allow(kind: PermissionOptionKind) -> bool {
    matches!(
        kind,
        PermissionOptionKind::AllowOnce | PermissionOptionKind::AllowAlways
    )
}

/// The first option of the first kind in `preference` that the agent offered; `cancelled` when
/// it offered none of them.
fn pick(
    options: &[PermissionOption],
    preference: &[PermissionOptionKind],
) -> RequestPermissionOutcome {
    preference
        .iter()
        .find_map(|kind| options.iter().find(|o| o.kind == *kind))
        .map(|o| {
            RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(o.option_id.clone()))
        })
        .unwrap_or(RequestPermissionOutcome::Cancelled)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> Vec<PermissionOption> {
        vec![
            PermissionOption::new("always", "Always", PermissionOptionKind::AllowAlways),
            PermissionOption::new("once", "Once", PermissionOptionKind::AllowOnce),
            PermissionOption::new("no", "No", PermissionOptionKind::RejectOnce),
        ]
    }

    fn selected(outcome: RequestPermissionOutcome) -> Option<String> {
        match outcome {
            RequestPermissionOutcome::Selected(s) => Some(s.option_id.to_string()),
            _ => None,
        }
    }

    #[test]
    fn options_are_picked_by_kind_allow_once_first() {
        let allow = [
            PermissionOptionKind::AllowOnce,
            PermissionOptionKind::AllowAlways,
        ];
        assert_eq!(selected(pick(&options(), &allow)).as_deref(), Some("once"));
        let reject = [
            PermissionOptionKind::RejectOnce,
            PermissionOptionKind::RejectAlways,
        ];
        assert_eq!(selected(pick(&options(), &reject)).as_deref(), Some("no"));
        assert_eq!(selected(pick(&options()[..2], &reject)), None);
    }
}
