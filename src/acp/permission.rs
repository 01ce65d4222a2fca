//! `session/request_permission`. With diff content it is an edit proposal and goes to
//! [`review_proposed_edit`]; otherwise (run a command, fetch a URL, …) the agent's own options
//! are put to the user as a question. Answers map back to the agent's options by kind, never by
//! position. Nothing is allowed without the user. Requests are answered from a spawned task so
//! the connection keeps flowing while a human thinks; a cancel or the session's death withdraws
//! them (`cancelled`).

use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome, ToolCallContent,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Error};

use super::link::AgentLink;
use super::review::review_proposed_edit;
use crate::editor::review::Verdict;
use crate::editor::{Choice, ChoiceKind, Level, file_name};

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
    let Some(withdrawn) = link.with_session(&session, |s| {
        s.permissions.insert(id, title.clone());
        // Some agents (Gemini CLI) announce a tool call first in the permission request itself,
        // and send nothing more for it when it is rejected: count it here for the summary.
        if let Some(turn) = s.turn.as_mut() {
            turn.tool_calls.entry(call).or_insert_with(|| title.clone());
        }
        s.withdraw.clone()
    }) else {
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
    let diff = request
        .tool_call
        .fields
        .content
        .iter()
        .flatten()
        .find_map(|c| match c {
            ToolCallContent::Diff(diff) => Some(diff),
            _ => None,
        });
    if let Some(diff) = diff {
        let verdict =
            review_proposed_edit(&link.editor, &origin, &diff.path, &diff.new_text, title).await;
        let file = file_name(&diff.path);
        return match verdict {
            Ok(Verdict::Accepted { text, rejected }) => {
                link.with_session(session, |s| {
                    s.accepted
                        .insert(diff.path.clone(), (diff.new_text.clone(), text));
                    if !rejected.is_empty() {
                        s.notes.push(format!(
                            "The user rejected part of your change to {}; it was not applied:\n{}",
                            diff.path.display(),
                            rejected.join("\n")
                        ));
                    }
                });
                pick(
                    options,
                    &[
                        PermissionOptionKind::AllowOnce,
                        PermissionOptionKind::AllowAlways,
                    ],
                )
            }
            Ok(Verdict::Rejected { reason }) => {
                if let Some(reason) = reason {
                    link.with_session(session, |s| {
                        s.notes
                            .push(format!("The user rejected your change to {file}: {reason}"));
                    });
                }
                pick(
                    options,
                    &[
                        PermissionOptionKind::RejectOnce,
                        PermissionOptionKind::RejectAlways,
                    ],
                )
            }
            Ok(Verdict::Cancelled) => RequestPermissionOutcome::Cancelled,
            Err(e) => {
                link.editor.log(
                    Level::Warning,
                    format!("{}: refused its proposed change: {e}\n", link.agent),
                );
                pick(
                    options,
                    &[
                        PermissionOptionKind::RejectOnce,
                        PermissionOptionKind::RejectAlways,
                    ],
                )
            }
        };
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
    match link.editor.ask_user(&origin, title, choices).await {
        Some(id) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id)),
        None => pick(
            options,
            &[
                PermissionOptionKind::RejectOnce,
                PermissionOptionKind::RejectAlways,
            ],
        ),
    }
}

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
