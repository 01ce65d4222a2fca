//! The Streamable HTTP listener of the companion protocol: MCP at `http://127.0.0.1:<port>/mcp`
//! (rmcp's server in legacy session mode), every request first through `guard::check` (Host, no
//! Origin, `Authorization: Bearer <token>`; a connection with a request that passed is no longer
//! timed, see `connections`). Each MCP session is a [`Session`] in the notified
//! diff style with its own origin, torn down when rmcp drops the session.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::connections::Connection;
use super::event_streams::{self, EventStreams};
use super::frames::MAX_MESSAGE_BYTES;
use super::guard::{self, TokenHeader};
use super::session::Session;
use super::token::AuthToken;
use super::tools::DiffStyle;
use crate::editor::EditorAccess;

/// How long an MCP session may go without a message before rmcp closes it (rejecting its
/// pending diffs). rmcp's default of 5 minutes would end a session — and withdraw its diff —
/// while the user is still reading a long proposal. A killed agent's session ends sooner, when
/// its event stream is gone ([`event_streams`]); this only bounds one that never opened one.
const SESSION_IDLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

struct Gate {
    port: u16,
    token: AuthToken,
}

/// The routes: `/mcp` serves MCP, anything else is 404; all of it behind the guard.
pub fn router(port: u16, token: AuthToken, editor: EditorAccess) -> Router {
    let next_id = Arc::new(AtomicU64::new(1));
    let factory = move || {
        let id = next_id.fetch_add(1, Ordering::Relaxed);
        Ok(Session::new(
            editor.clone(),
            DiffStyle::Notified,
            format!("mcp-http:{id}"),
        ))
    };
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(true)
        .with_max_request_body_bytes(MAX_MESSAGE_BYTES);
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(SESSION_IDLE_LIMIT);
    let sessions = Arc::new(sessions);
    let streams = EventStreams::new(Arc::clone(&sessions), event_streams::GRACE);
    let service = StreamableHttpService::new(factory, sessions, config);
    let gate = Arc::new(Gate { port, token });
    // Layers run last-added first: the guard, then the stream watch.
    Router::new()
        .nest_service("/mcp", service)
        .fallback(|| async { (axum::http::StatusCode::NOT_FOUND, "not found") })
        .layer(middleware::from_fn_with_state(
            streams,
            event_streams::watch,
        ))
        .layer(middleware::from_fn_with_state(gate, check))
}

async fn check(State(gate): State<Arc<Gate>>, request: Request, next: Next) -> Response {
    let admitted = guard::check(
        request.headers(),
        gate.port,
        &gate.token,
        TokenHeader::Bearer,
    )
    .and_then(|()| admit(&request));
    match admitted {
        Ok(()) => next.run(request).await,
        Err(refusal) => refusal.answer(gate.port),
    }
}

/// Admits the connection of `request`, which passed the guard (see [`Connection::admit`]).
pub(super) fn admit(request: &Request) -> Result<(), guard::Refusal> {
    match request.extensions().get::<ConnectInfo<Connection>>() {
        Some(ConnectInfo(connection)) => connection.admit(),
        None => Ok(()),
    }
}
