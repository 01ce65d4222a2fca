//! The effect runner: takes what the port asks of the editor and does it in LSP, gated on the
//! client's capabilities. Requests to the client run in their own tasks with a timeout, so an
//! editor that never answers stalls nothing but the one effect that waits for it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, mpsc, watch};
use tower_lsp_server::Client;
use tower_lsp_server::jsonrpc::{Id, Request};
use tower_lsp_server::ls_types::{
    ApplyWorkspaceEditParams, CancelParams, MessageActionItem, MessageType, NumberOrString, OneOf,
    OptionalVersionedTextDocumentIdentifier, ShowDocumentParams, ShowMessageRequestParams,
    TextDocumentEdit, WorkspaceEdit, notification, request,
};
use tower_service::Service as _;

use super::capabilities::ClientFeatures;
use super::convert;
use super::output::{self, OutputEvent};
use crate::editor::documents::effects::{DocumentEdit, Reply};
use crate::editor::{Choice, Effect, EffectError, EffectReceiver};

/// How long a request to the editor may go unanswered.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
/// The environment variable tests set to shorten [`CLIENT_TIMEOUT`] (in milliseconds), so that
/// an editor that never answers is tested without waiting out half a minute; read once. It can
/// only shorten it.
const CLIENT_TIMEOUT_VAR: &str = "AGENTLS_TEST_CLIENT_TIMEOUT_MS";

/// [`CLIENT_TIMEOUT`], or less when `AGENTLS_TEST_CLIENT_TIMEOUT_MS` says so.
fn client_timeout() -> Duration {
    static TIMEOUT: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *TIMEOUT.get_or_init(|| {
        std::env::var(CLIENT_TIMEOUT_VAR)
            .ok()
            .and_then(|ms| ms.trim().parse().ok())
            .map_or(CLIENT_TIMEOUT, |ms| {
                Duration::from_millis(ms).min(CLIENT_TIMEOUT)
            })
    })
}

/// Runs effects until the port shuts down. Waits for `initialized` first: until then the
/// client may not be sent requests, and its capabilities are unknown.
pub async fn run(
    client: Client,
    mut ready: watch::Receiver<Option<ClientFeatures>>,
    mut effects: EffectReceiver,
) {
    let Ok(features) = ready
        .wait_for(Option::is_some)
        .await
        .map(|f| f.unwrap_or_default())
    else {
        return;
    };
    let output = output::spawn(client.clone(), features);
    let hints_changed = Arc::new(Notify::new());
    if features.inlay_hint_refresh {
        tokio::spawn(refresh_inlay_hints(
            client.clone(),
            Arc::clone(&hints_changed),
        ));
    }
    while let Some(effect) = effects.recv().await {
        match effect {
            Effect::Diagnostics {
                path,
                version,
                diagnostics,
            } => {
                if let Some(uri) = convert::uri_of(&path) {
                    let diagnostics = diagnostics.into_iter().map(convert::diagnostic).collect();
                    client.publish_diagnostics(uri, diagnostics, version).await;
                }
            }
            Effect::RefreshInlayHints => hints_changed.notify_one(),
            Effect::Message { level, text } => send(&output, OutputEvent::Message(level, text)),
            Effect::Log { level, text } => send(&output, OutputEvent::Log(level, text)),
            Effect::Progress { id, phase } => send(&output, OutputEvent::Progress(id, phase)),
            Effect::ApplyEdit { edit, reply } => {
                tokio::spawn(apply_edit(client.clone(), features, edit, reply));
            }
            Effect::Plugin { event, payload } => {
                let notification = Request::build(format!("agentls/{}", event.name()))
                    .params(payload)
                    .finish();
                // Inline, not spawned: plugin events (streamed agent text) must keep their order.
                if client.clone().call(notification).await.is_err() {
                    tracing::debug!("plugin notification dropped: the client is gone");
                }
            }
            Effect::AskUser {
                text,
                choices,
                reply,
            } => {
                tokio::spawn(ask_user(client.clone(), features, text, choices, reply));
            }
            Effect::ShowDocument {
                path,
                selection,
                reply,
            } => {
                let params = convert::uri_of(&path).map(|uri| ShowDocumentParams {
                    uri,
                    external: None,
                    take_focus: Some(true),
                    selection: selection.map(convert::lsp_range),
                });
                tokio::spawn(show_document(client.clone(), features, params, reply));
            }
        }
    }
}

fn send(output: &mpsc::UnboundedSender<OutputEvent>, event: OutputEvent) {
    let _ = output.send(event);
}

async fn apply_edit(
    client: Client,
    features: ClientFeatures,
    edit: DocumentEdit,
    reply: Reply<()>,
) {
    let outcome = async {
        if !features.apply_edit {
            return Err(EffectError::Unsupported("workspace/applyEdit"));
        }
        let uri = convert::uri_of(&edit.path)
            .ok_or_else(|| EffectError::Refused(format!("{} has no URI", edit.path.display())))?;
        let edits: Vec<_> = edit.edits.into_iter().map(convert::text_edit).collect();
        let workspace_edit = if features.document_changes {
            WorkspaceEdit {
                document_changes: Some(tower_lsp_server::ls_types::DocumentChanges::Edits(vec![
                    TextDocumentEdit {
                        text_document: OptionalVersionedTextDocumentIdentifier {
                            uri,
                            version: edit.version,
                        },
                        edits: edits.into_iter().map(OneOf::Left).collect(),
                    },
                ])),
                ..Default::default()
            }
        } else {
            WorkspaceEdit {
                changes: Some(HashMap::from([(uri, edits)])),
                ..Default::default()
            }
        };
        let params = ApplyWorkspaceEditParams {
            label: Some(edit.label),
            edit: workspace_edit,
        };
        let response = ask::<request::ApplyWorkspaceEdit>(&client, params).await?;
        if response.applied {
            Ok(())
        } else {
            let reason = response
                .failure_reason
                .unwrap_or_else(|| "no reason given".into());
            Err(EffectError::Refused(reason))
        }
    }
    .await;
    let _ = reply.send(outcome);
}

async fn show_document(
    client: Client,
    features: ClientFeatures,
    params: Option<ShowDocumentParams>,
    reply: Reply<()>,
) {
    let outcome = async {
        if !features.show_document {
            return Err(EffectError::Unsupported("window/showDocument"));
        }
        let params = params.ok_or_else(|| EffectError::Refused("the path has no URI".into()))?;
        let result = ask::<request::ShowDocument>(&client, params).await?;
        if result.success {
            Ok(())
        } else {
            Err(EffectError::Refused(
                "the editor could not show the document".into(),
            ))
        }
    }
    .await;
    let _ = reply.send(outcome);
}

/// Asks the editor to re-request inlay hints, at most ten times a second however often they
/// change (a review follows every keystroke in its file).
async fn refresh_inlay_hints(client: Client, changed: Arc<Notify>) {
    loop {
        changed.notified().await;
        if let Err(e) = ask::<request::InlayHintRefreshRequest>(&client, ()).await {
            tracing::debug!("inlay hint refresh failed: {e}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Shows a dialog. No timeout: a human answers it, however long that takes. A question withdrawn
/// meanwhile (its turn was cancelled, its agent died) is taken back from the editor with
/// `$/cancelRequest`, and agentls stops waiting for its answer.
async fn ask_user(
    client: Client,
    features: ClientFeatures,
    text: String,
    choices: Vec<Choice>,
    mut reply: Reply<Option<String>>,
) {
    if !features.show_message_request {
        let _ = reply.send(Err(EffectError::Unsupported("window/showMessageRequest")));
        return;
    }
    let actions = choices
        .iter()
        .map(|c| MessageActionItem {
            title: c.label.clone(),
            properties: HashMap::new(),
        })
        .collect();
    let params = ShowMessageRequestParams {
        typ: MessageType::WARNING,
        message: text,
        actions: Some(actions),
    };
    let withdrawn = async {
        reply.closed().await;
        EffectError::Refused("the question was withdrawn".into())
    };
    let answer = request_until::<request::ShowMessageRequest>(&client, params, withdrawn).await;
    let outcome = answer.map(|item| {
        item.and_then(|item| {
            choices
                .into_iter()
                .find(|c| c.label == item.title)
                .map(|c| c.id)
        })
    });
    let _ = reply.send(outcome);
}

/// Sends a request to the client and waits at most [`CLIENT_TIMEOUT`] for the answer.
async fn ask<R: request::Request>(
    client: &Client,
    params: R::Params,
) -> Result<R::Result, EffectError> {
    let limit = client_timeout();
    let timed_out = async {
        tokio::time::sleep(limit).await;
        EffectError::Timeout(limit.as_millis() as u64)
    };
    request_until::<R>(client, params, timed_out).await
}

/// Sends request `R` to the client and waits for its answer until `give_up` resolves (to why).
/// Then the editor hears with `$/cancelRequest` that agentls no longer waits: one that honours
/// it closes its dialog and answers, which also frees what tower-lsp keeps for the request.
async fn request_until<R: request::Request>(
    client: &Client,
    params: R::Params,
    give_up: impl std::future::Future<Output = EffectError>,
) -> Result<R::Result, EffectError> {
    let id = client.next_request_id();
    let mut request = Request::build(R::METHOD).id(id.clone());
    match serde_json::to_value(params) {
        Ok(serde_json::Value::Null) => {}
        Ok(params) => request = request.params(params),
        Err(e) => {
            return Err(EffectError::Transport(format!(
                "cannot encode {}: {e}",
                R::METHOD
            )));
        }
    }
    let call = client.clone().call(request.finish());
    tokio::select! {
        response = call => {
            let Ok(Some(response)) = response else {
                return Err(EffectError::Transport("the editor connection closed".into()));
            };
            let (_, result) = response.into_parts();
            let value = result.map_err(|e| EffectError::Transport(e.message.into_owned()))?;
            serde_json::from_value(value)
                .map_err(|e| EffectError::Transport(format!("{} answered {e}", R::METHOD)))
        }
        why = give_up => {
            if let Id::Number(n) = id
                && let Ok(n) = i32::try_from(n)
            {
                let cancel = CancelParams { id: NumberOrString::Number(n) };
                client.send_notification::<notification::Cancel>(cancel).await;
            }
            Err(why)
        }
    }
}
