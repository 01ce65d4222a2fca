//! The editor's tools for the ACP sessions agentls drives: MCP over Streamable HTTP at
//! `http://127.0.0.1:<port>/mcp`, stateless (every POST stands alone and is answered with JSON),
//! every request carrying one session's token (`Authorization: Bearer`) that the port's
//! [`ToolGrants`](crate::editor::tool_grants::ToolGrants) knows. A token that is not live (a
//! guess, another process's, one of a session that ended) is refused with 401 before MCP sees
//! the request, as is a request with an `Origin` or with a `Host` other than our loopback
//! address. The tools are the table's `Surface::Session` ones; each call is attributed to the
//! session's agent: counted for its summary and status, and logged.

use std::borrow::Cow;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use tokio::sync::watch;

use super::connections::{Limits, Protocol};
use super::frames::MAX_MESSAGE_BYTES;
use super::guard::{self, TokenHeader};
use super::outcome::{ToolError, into_mcp};
use super::tools::{self, Call, Surface};
use super::{StartError, listen};
use crate::editor::tool_grants::Holder;
use crate::editor::{EditorAccess, Level};

/// The MCP version agentls answers with when the client offers it or a later one.
const PROTOCOL: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// Listens on a free loopback port until `stopped`; returns the port.
pub async fn start(
    editor: EditorAccess,
    stopped: watch::Receiver<bool>,
) -> Result<u16, StartError> {
    listen(
        move |port| router(port, editor),
        (Limits::configured(), Protocol::Http),
        stopped,
    )
    .await
}

struct Gate {
    port: u16,
    editor: EditorAccess,
}

fn router(port: u16, editor: EditorAccess) -> Router {
    let handler = SessionTools {
        editor: editor.clone(),
    };
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(MAX_MESSAGE_BYTES);
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    Router::new()
        .nest_service("/mcp", service)
        .fallback(|| async { (axum::http::StatusCode::NOT_FOUND, "not found") })
        .layer(middleware::from_fn_with_state(
            Arc::new(Gate { port, editor }),
            check,
        ))
}

async fn check(State(gate): State<Arc<Gate>>, mut request: Request, next: Next) -> Response {
    let grants = gate.editor.tool_grants();
    let checked = guard::check_with(request.headers(), gate.port, TokenHeader::Bearer, |t| {
        grants.holder(t)
    });
    match checked.and_then(|holder| super::http::admit(&request).map(|()| holder)) {
        Ok(holder) => {
            grants.connected(&holder);
            request.extensions_mut().insert(holder);
            next.run(request).await
        }
        Err(refusal) => refusal.answer(gate.port),
    }
}

/// The MCP server of the sessions' tools; one per request (stateless).
#[derive(Clone)]
struct SessionTools {
    editor: EditorAccess,
}

/// Whose request this is, as the guard found it.
fn holder_of(context: &RequestContext<RoleServer>) -> Option<Holder> {
    context
        .extensions
        .get::<axum::http::request::Parts>()?
        .extensions
        .get::<Holder>()
        .cloned()
}

impl ServerHandler for SessionTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("agentls", env!("CARGO_PKG_VERSION")))
            .with_protocol_version(PROTOCOL)
            .with_instructions(
                "The editor the user works in: its diagnostics, open files, selection and \
                 workspace folders, and a way to show the user a file. Propose edits with \
                 your own edit tools, not here.",
            )
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&PROTOCOL))
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::list(
            Surface::Session,
        )))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let grants = self.editor.tool_grants();
        // The guard let it in with a live token; the session may have ended since.
        let Some(holder) = holder_of(&context).filter(|h| grants.is_live(h.id)) else {
            return Err(ErrorData::invalid_request("the session has ended", None));
        };
        let name = request.name.to_string();
        let Some(tool) = tools::find(Surface::Session, &name) else {
            return into_mcp(Err(ToolError::UnknownTool(name))).map(CallToolResponse::from);
        };
        grants.used(&holder, &name);
        let args = Value::Object(request.arguments.unwrap_or_default());
        let about = args
            .get("filePath")
            .or_else(|| args.get("uri"))
            .and_then(Value::as_str)
            .map(|p| format!(" {p}"))
            .unwrap_or_default();
        self.editor.log(
            Level::Info,
            format!("{}: editor tool {name}{about}\n", holder.agent),
        );
        // No diffs here: the table offers sessions no tool that opens one.
        let tabs = Arc::default();
        let outcome = tokio::select! {
            biased;
            outcome = tool.run(Call {
                editor: &self.editor,
                origin: &holder.origin,
                tabs: &tabs,
                peer: &context.peer,
                args,
            }) => outcome,
            () = context.ct.cancelled() => Err(ToolError::Failed("cancelled by the client".into())),
        };
        if let Err(e) = &outcome {
            tracing::info!(agent = %holder.agent, tool = %name, "editor tool failed: {e}");
        }
        let structured = outcome.as_ref().ok().and_then(|texts| structured(texts));
        let mut result = into_mcp(outcome)?;
        result.structured_content = structured;
        Ok(CallToolResponse::from(result))
    }
}

/// The answer as `structuredContent`, always an object, when it is one JSON text: some
/// clients (Gemini CLI) otherwise parse the text themselves and refuse what is not an object
/// (the diagnostics are an array), failing the call.
fn structured(texts: &[String]) -> Option<Value> {
    let [text] = texts else { return None };
    match serde_json::from_str::<Value>(text).ok()? {
        object @ Value::Object(_) => Some(object),
        other => Some(serde_json::json!({"result": other})),
    }
}
