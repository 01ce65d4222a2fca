//! One connected terminal agent: an MCP server session and the origin its reviews belong to.
//! `initialize` names the origin after the client; `tools/call` runs the tools; unknown
//! notifications (`ide_connected`, …) are logged and otherwise ignored. The session's origin
//! is torn down when the connection ends ([`Session::close`]) or the session is dropped.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientRequest, CustomNotification, Implementation,
    InitializeRequestParams, InitializeResult, JsonRpcMessage, JsonRpcRequest, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, ServerResult,
};
use rmcp::service::{NotificationContext, RequestContext, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

use super::diff_tabs::DiffTabs;
use super::outcome::{ToolError, ToolOutcome, into_mcp};
use super::tools::{self, Call, DiffStyle};
use crate::editor::context::ContextEvent;
use crate::editor::{EditorAccess, Origin, Withdrawal};

/// The newest MCP version with an `initialize` handshake; what agents send today.
const PROTOCOL: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// A connected agent; cheap to clone (rmcp clones it per request).
#[derive(Clone)]
pub struct Session(Arc<Inner>);

struct Inner {
    editor: EditorAccess,
    style: DiffStyle,
    origin: Mutex<Origin>,
    tabs: Arc<DiffTabs>,
    context: Mutex<Option<tokio::task::AbortHandle>>,
    /// Context events from the moment `initialize` was answered, until `initialized` starts
    /// forwarding them (so nothing between the two is lost).
    events: Mutex<Option<tokio::sync::broadcast::Receiver<ContextEvent>>>,
}

impl Session {
    /// A session whose origin key is `key` (unique among live connections).
    pub fn new(editor: EditorAccess, style: DiffStyle, key: String) -> Self {
        Self(Arc::new(Inner {
            editor,
            style,
            origin: Mutex::new(Origin::new(key, "terminal agent")),
            tabs: Arc::default(),
            context: Mutex::new(None),
            events: Mutex::new(None),
        }))
    }

    /// Who this is, as reviews and messages name it.
    pub fn origin(&self) -> Origin {
        self.0
            .origin
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The connection ended: pending reviews are withdrawn, previews cleared, context stops.
    pub fn close(&self) {
        self.0.close();
    }

    /// The answer to `message` when it is a `tools/call` that can be answered without waiting
    /// (see [`tools::ToolSpec::answer_now`]) and carries nothing rmcp would look at first (no
    /// `_meta`, no input responses): the message rmcp would send for it. `None` otherwise: the
    /// message is rmcp's. Only for a session that answered `initialize`.
    pub fn answer_now(
        &self,
        message: &RxJsonRpcMessage<RoleServer>,
    ) -> Option<TxJsonRpcMessage<RoleServer>> {
        let JsonRpcMessage::Request(JsonRpcRequest {
            id,
            request: ClientRequest::CallToolRequest(call),
            ..
        }) = message
        else {
            return None;
        };
        let params = &call.params;
        if params.meta.is_some()
            || params.input_responses.is_some()
            || params.request_state.is_some()
        {
            return None;
        }
        let outcome = tools::find(self.0.style, &params.name)?.answer_now(&self.0.editor)?;
        tracing::debug!(tool = %params.name, "tool call, answered at once");
        if let Err(e) = &outcome {
            tracing::info!(tool = %params.name, "tool call failed: {e}");
        }
        Some(match into_mcp(outcome) {
            Ok(result) => JsonRpcMessage::response(
                ServerResult::from(CallToolResponse::from(result)),
                id.clone(),
            ),
            Err(error) => JsonRpcMessage::error(error, Some(id.clone())),
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
    fn close(&self) {
        if let Some(task) = self
            .context
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            task.abort();
        }
        let origin = self
            .origin
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
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
            self.0
                .origin
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .label = name.to_owned();
        }
        tracing::info!(
            client = %request.client_info.name,
            version = %request.client_info.version,
            protocol = %request.protocol_version,
            "terminal agent connected"
        );
        let events = self.0.editor.watch_context().await;
        *self.0.events.lock().unwrap_or_else(|e| e.into_inner()) = events;
        self.negotiate_initialize(&request)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let events = self
            .0
            .events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let Some(events) = events else { return };
        let task = tokio::spawn(super::context_push::run(
            self.0.editor.clone(),
            events,
            context.peer,
            self.0.style,
        ));
        let old = self
            .0
            .context
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(task.abort_handle());
        if let Some(old) = old {
            old.abort();
        }
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
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
