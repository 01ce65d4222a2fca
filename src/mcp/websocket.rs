//! The WebSocket listener of the IDE protocol: 127.0.0.1 on a free port; every request passes
//! `guard::check` (Host, no Origin, the token in `x-claude-code-ide-authorization`) and must be
//! a WebSocket upgrade (its connection is then no longer timed, see `connections`); the `mcp`
//! subprotocol is answered (agents drop the socket without it).
//! Each socket becomes one MCP [`Session`] with its own origin, torn down when the socket closes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use rmcp::ServiceExt as _;
use tokio::sync::watch;

use super::connections::Connection;
use super::frames::{self, Incoming, MAX_MESSAGE_BYTES};
use super::guard::{self, TokenHeader, WS_TOKEN_HEADER};
use super::session::Session;
use super::token::AuthToken;
use super::tools::DiffStyle;
use crate::editor::EditorAccess;

/// How long a connected socket may take to send `initialize`.
const INITIALIZE_WITHIN: Duration = Duration::from_secs(30);

/// What every connection needs.
pub struct Listener {
    /// The port agents reach.
    pub port: u16,
    /// The token they must present.
    pub token: AuthToken,
    /// The editor they act on.
    pub editor: EditorAccess,
    /// Flips to `true` when the server stops: sessions end.
    pub stopped: watch::Receiver<bool>,
    next_id: AtomicU64,
}

impl Listener {
    /// State for a listener on `port`.
    pub fn new(
        port: u16,
        token: AuthToken,
        editor: EditorAccess,
        stopped: watch::Receiver<bool>,
    ) -> Self {
        Self {
            port,
            token,
            editor,
            stopped,
            next_id: AtomicU64::new(1),
        }
    }
}

/// The routes: every path and method reaches [`upgrade`], which refuses what it must.
pub fn router(listener: Arc<Listener>) -> Router {
    Router::new().fallback(upgrade).with_state(listener)
}

async fn upgrade(
    State(listener): State<Arc<Listener>>,
    ConnectInfo(connection): ConnectInfo<Connection>,
    headers: HeaderMap,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let carrier = TokenHeader::Plain(WS_TOKEN_HEADER);
    let admitted = guard::check(&headers, listener.port, &listener.token, carrier)
        .and_then(|()| connection.admit());
    if let Err(refusal) = admitted {
        return refusal.answer(listener.port);
    }
    let ws = match ws {
        Ok(ws) => ws,
        Err(rejection) => {
            tracing::warn!("refused a request that is not a WebSocket upgrade: {rejection}");
            return rejection.into_response();
        }
    };
    ws.protocols(["mcp"])
        .max_message_size(MAX_MESSAGE_BYTES)
        .max_frame_size(MAX_MESSAGE_BYTES)
        .on_failed_upgrade(|e| tracing::warn!("WebSocket upgrade failed: {e}"))
        .on_upgrade(move |socket| serve(listener, socket))
}

/// Serves one socket until it closes or the server stops. This task reads the socket: a tool
/// call it can answer without waiting (see [`Session::answer_frame`]) it answers and writes
/// itself, once `initialize` has been answered; everything else goes to rmcp, which runs the
/// session and writes its replies to the same socket.
async fn serve(listener: Arc<Listener>, socket: WebSocket) {
    let id = listener.next_id.fetch_add(1, Ordering::Relaxed);
    let key = format!("mcp-ws:{id}");
    let session = Session::new(listener.editor.clone(), DiffStyle::Blocking, key.clone());
    let (mut reader, writer, transport, to_rmcp) = frames::split(socket, key.clone());
    let initialized = AtomicBool::new(false);
    let mut stopped = listener.stopped.clone();
    let rmcp_side = async {
        let started =
            tokio::time::timeout(INITIALIZE_WITHIN, session.clone().serve(transport)).await;
        match started {
            Ok(Ok(running)) => {
                // rmcp has written its answer to `initialize` (it returns after that).
                initialized.store(true, Ordering::Relaxed);
                let cancel = running.cancellation_token();
                tokio::select! {
                    quit = running.waiting() => {
                        tracing::info!(connection = %key, ?quit, "terminal agent disconnected");
                    }
                    _ = stopped.wait_for(|s| *s) => cancel.cancel(),
                }
            }
            Ok(Err(e)) => tracing::warn!(connection = %key, "MCP session did not start: {e}"),
            Err(_) => {
                tracing::warn!(connection = %key, "no initialize within {INITIALIZE_WITHIN:?}; closed")
            }
        }
    };
    let socket_side = async {
        // A tool call is answered here once `initialize` has been (see `Session::answer_frame`).
        let answer = |text: &str| {
            if initialized.load(Ordering::Relaxed) {
                session.answer_frame(text)
            } else {
                None
            }
        };
        loop {
            // rmcp drops its end when the session is over, whatever ended it.
            let incoming = tokio::select! {
                incoming = reader.next(answer) => incoming,
                () = to_rmcp.closed() => break,
            };
            // The socket closed: dropping `to_rmcp` ends rmcp's session.
            match incoming {
                None => break,
                Some(Incoming::Answered(answer)) => {
                    if let Err(e) = writer.send(&answer).await {
                        tracing::info!(connection = %key, "answer not delivered: {e}");
                    }
                }
                Some(Incoming::Message(message)) => {
                    if to_rmcp.send(message).await.is_err() {
                        break;
                    }
                }
            }
        }
        drop(to_rmcp);
    };
    tokio::join!(rmcp_side, socket_side);
    session.close();
}
