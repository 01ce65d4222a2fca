//! One connected terminal agent: an MCP server session and the origin its reviews belong to.
//! `initialize` names the origin after the client; `tools/call` runs the tools; unknown
//! notifications (`ide_connected`, …) are logged and otherwise ignored. The session's origin
//! is torn down when the connection ends ([`Session::close`]) or the session is dropped.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CustomNotification, Implementation,
    InitializeRequestParams, InitializeResult, JsonRpcMessage, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, ServerResult,
};
use rmcp::service::{NotificationContext, RequestContext, TxJsonRpcMessage};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

use super::diff_tabs::DiffTabs;
use super::outcome::{ToolError, ToolOutcome, into_mcp};
use super::tools::{self, Call, DiffStyle};
use crate::editor::documents::context::ContextEvent;
use crate::editor::{EditorAccess, Origin, Withdrawal};

/// The newest MCP version with an `initialize` handshake; what agents send today.
const PROTOCOL: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// Frames longer than this are not looked at for a [`PlainCall`] (a call of a tool that takes no
/// arguments is about a hundred bytes).
const PLAIN_CALL_BYTES: usize = 1024;

/// A `tools/call` request with nothing but the fields every call has, read without copying: a
/// frame that is one (and names a tool that answers at once) is answered without rmcp's parse,
/// which costs twenty times as much. Anything else fails to read and goes to rmcp.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PlainCall<'a> {
    jsonrpc: &'a str,
    id: rmcp::model::RequestId,
    method: &'a str,
    #[serde(borrow)]
    params: PlainParams<'a>,
}

/// The params of a [`PlainCall`]: a tool's name and maybe arguments (which the tools answered
/// at once do not take).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PlainParams<'a> {
    name: &'a str,
    #[serde(borrow)]
    arguments: Option<&'a serde_json::value::RawValue>,
}

/// A connected agent; cheap to clone (rmcp clones it per request).
#[derive(Clone)]
pub struct Session(Arc<Inner>);

struct Inner {
    editor: EditorAccess,
    style: DiffStyle,
    tabs: Arc<DiffTabs>,
    state: Mutex<SessionState>,
}

/// Who the agent is and where its context feed stands, behind one lock.
struct SessionState {
    origin: Origin,
    context: ContextFeed,
}

/// The editor's context events (selections, documents) pushed to the agent.
enum ContextFeed {
    /// Not yet (before `initialize`), or no longer (the connection closed).
    Off,
    /// Subscribed when `initialize` was answered, until `initialized` starts forwarding them
    /// (so nothing between the two is lost).
    Subscribed(tokio::sync::broadcast::Receiver<ContextEvent>),
    /// A task forwards them.
    Forwarding(tokio::task::AbortHandle),
}

impl ContextFeed {
    /// The events subscribed to, leaving the feed off; `None` (and the feed as it was) when it
    /// is not subscribed.
    fn take_subscribed(&mut self) -> Option<tokio::sync::broadcast::Receiver<ContextEvent>> {
        match std::mem::replace(self, Self::Off) {
            Self::Subscribed(events) => Some(events),
            other => {
                *self = other;
                None
            }
        }
    }

    /// Stops forwarding, if a task does.
    fn stop(self) {
        if let Self::Forwarding(task) = self {
            task.abort();
        }
    }
}

impl Session {
    /// A session whose origin key is `key` (unique among live connections).
    pub fn new(editor: EditorAccess, style: DiffStyle, key: String) -> Self {
        Self(Arc::new(Inner {
            editor,
            style,
            tabs: Arc::default(),
            state: Mutex::new(SessionState {
                origin: Origin::new(key, "terminal agent"),
                context: ContextFeed::Off,
            }),
        }))
    }

    /// Who this is, as reviews and messages name it.
    pub fn origin(&self) -> Origin {
        self.0.lock().origin.clone()
    }

    /// The connection ended: pending reviews are withdrawn, previews cleared, context stops.
    pub fn close(&self) {
        self.0.close();
    }

    /// The answer to the frame `text` when it is a `tools/call` that can be answered without
    /// waiting (see [`tools::ToolSpec::answer_now`]): the message rmcp would send for it. `None`
    /// otherwise, and for any call with more than the plain fields of one (`_meta`, input
    /// responses, a stray key: rmcp has a say in those); then the frame is rmcp's. Only for a
    /// session that answered `initialize`.
    pub fn answer_frame(&self, text: &str) -> Option<TxJsonRpcMessage<RoleServer>> {
        // What rmcp does to a result depends on the protocol version from 2026-07-28 on; before
        // it (all this server speaks), the same for every session (see below).
        if text.len() > PLAIN_CALL_BYTES
            || PROTOCOL.as_str() >= ProtocolVersion::V_2026_07_28.as_str()
        {
            return None;
        }
        let call: PlainCall<'_> = serde_json::from_str(text).ok()?;
        let plain = call.jsonrpc == "2.0"
            && call.method == "tools/call"
            && call
                .params
                .arguments
                .is_none_or(|a| a.get().starts_with('{'));
        if !plain {
            return None;
        }
        let name = call.params.name;
        let outcome = tools::find(self.0.style, name)?.answer_now(&self.0.editor)?;
        tracing::debug!(tool = %name, "tool call, answered at once");
        if let Err(e) = &outcome {
            tracing::info!(tool = %name, "tool call failed: {e}");
        }
        Some(match into_mcp(outcome) {
            Ok(result) => {
                let mut result = ServerResult::from(CallToolResponse::from(result));
                // As rmcp's handler does for sessions on a protocol before 2026-07-28.
                result.strip_result_type_for_legacy_peer();
                result.strip_non_object_output_for_legacy_peer();
                JsonRpcMessage::response(result, call.id)
            }
            Err(error) => JsonRpcMessage::error(error, Some(call.id)),
        })
    }

    async fn run_tool(
        &self,
        name: &str,
        args: Value,
        peer: &rmcp::Peer<RoleServer>,
    ) -> ToolOutcome {
        let Some(tool) = tools::find(self.0.style, name) else {
            return Err(ToolError::UnknownTool(name.to_owned()));
        };
        let origin = self.origin();
        tool.run(Call {
            editor: &self.0.editor,
            origin: &origin,
            tabs: &self.0.tabs,
            peer,
            args,
        })
        .await
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, SessionState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn close(&self) {
        let (feed, origin) = {
            let mut state = self.lock();
            let feed = std::mem::replace(&mut state.context, ContextFeed::Off);
            (feed, state.origin.clone())
        };
        feed.stop();
        self.editor.close_origin(&origin, Withdrawal::Announced);
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.close();
    }
}

impl ServerHandler for Session {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("agentls", env!("CARGO_PKG_VERSION")))
            .with_protocol_version(PROTOCOL)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&PROTOCOL))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        let name = request.client_info.name.trim();
        if !name.is_empty() {
            self.0.lock().origin.label = name.to_owned();
        }
        tracing::info!(
            client = %request.client_info.name,
            version = %request.client_info.version,
            protocol = %request.protocol_version,
            "terminal agent connected"
        );
        if let Some(events) = self.0.editor.watch_context().await {
            let feed = ContextFeed::Subscribed(events);
            std::mem::replace(&mut self.0.lock().context, feed).stop();
        }
        self.negotiate_initialize(&request)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let mut state = self.0.lock();
        // Not subscribed: no `initialize`, or already forwarding (which goes on).
        let Some(events) = state.context.take_subscribed() else {
            return;
        };
        let task = tokio::spawn(super::context_push::run(
            self.0.editor.clone(),
            events,
            context.peer,
            self.0.style,
        ));
        state.context = ContextFeed::Forwarding(task.abort_handle());
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        tracing::debug!("terminal agent listed the editor tools");
        Ok(ListToolsResult::with_all_items(tools::list(self.0.style)))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        tracing::debug!(tool = %request.name, "tool call");
        // A client that cancels the call (`notifications/cancelled`) stops the wait: for an
        // `openDiff` that withdraws its review, which must not apply after the agent gave up.
        let outcome = tokio::select! {
            biased;
            outcome = self.run_tool(&request.name, args, &context.peer) => outcome,
            () = context.ct.cancelled() => Err(ToolError::Failed("cancelled by the client".into())),
        };
        if let Err(e) = &outcome {
            tracing::info!(tool = %request.name, "tool call failed: {e}");
        }
        into_mcp(outcome).map(CallToolResponse::from)
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _: NotificationContext<RoleServer>,
    ) {
        tracing::info!(
            method = %notification.method,
            params = ?notification.params,
            "notification from terminal agent (no action)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `initialized` starts forwarding only what `initialize` subscribed to: a feed already
    /// forwarding keeps its task (and `close` can still stop it).
    #[tokio::test]
    async fn only_a_subscribed_feed_is_taken_to_forward() {
        let (_events, subscribed) = tokio::sync::broadcast::channel::<ContextEvent>(1);
        let mut feed = ContextFeed::Subscribed(subscribed);
        assert!(feed.take_subscribed().is_some());
        assert!(matches!(feed, ContextFeed::Off));
        assert!(feed.take_subscribed().is_none());
        let task = tokio::spawn(std::future::pending::<()>());
        let mut feed = ContextFeed::Forwarding(task.abort_handle());
        assert!(feed.take_subscribed().is_none());
        assert!(matches!(feed, ContextFeed::Forwarding(_)));
        feed.stop();
        assert!(task.await.unwrap_err().is_cancelled());
    }

    /// Only a plain call of a tool that answers from the context is answered by the reader;
    /// anything rmcp would look at more closely is left to it.
    #[tokio::test]
    async fn only_plain_calls_of_context_tools_are_answered_at_once() {
        let (editor, _feed, _effects) = crate::editor::start();
        let session = Session::new(editor.clone(), DiffStyle::Blocking, "mcp-ws:1".into());
        // Once the state task has done what starting it queued, the context is current.
        editor.context().await;
        let call = |params: &str| {
            format!(r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{params}}}"#)
        };
        let answered = session
            .answer_frame(&call(r#"{"name":"getWorkspaceFolders","arguments":{}}"#))
            .expect("a plain call is answered");
        let answer = serde_json::to_value(&answered).unwrap();
        assert_eq!(answer["id"], 7);
        assert_eq!(answer["result"]["isError"], false, "{answer}");
        // As rmcp answers sessions on this protocol: no `resultType`.
        assert_eq!(answer["result"].get("resultType"), None, "{answer}");
        assert!(
            session
                .answer_frame(&call(r#"{"name":"getCurrentSelection"}"#))
                .is_some()
        );
        for refused in [
            call(r#"{"name":"getWorkspaceFolders","_meta":{}}"#),
            call(r#"{"name":"getWorkspaceFolders","arguments":"x"}"#),
            call(r#"{"name":"getWorkspace\u0046olders"}"#),
            call(r#"{"name":"openDiff","arguments":{}}"#),
            call(r#"{"name":"executeCode"}"#),
            r#"{"jsonrpc":"1.0","id":7,"method":"tools/call","params":{"name":"getWorkspaceFolders"}}"#.into(),
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"getWorkspaceFolders"},"result":{}}"#.into(),
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"getWorkspaceFolders"}}"#.into(),
        ] {
            assert!(session.answer_frame(&refused).is_none(), "{refused}");
        }
    }
}
