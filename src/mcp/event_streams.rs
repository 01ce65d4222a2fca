//! A companion session lives as long as its agent holds an event stream (`GET /mcp`) open. An
//! agent that is killed sends no `DELETE`, and rmcp would keep its session (and its pending
//! diffs) until the idle limit; so when a session's last stream has been gone for [`GRACE`]
//! (time enough to reconnect), the session is closed, which withdraws its diffs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt as _;
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

/// How long a session may be without an event stream before it is closed.
pub const GRACE: Duration = Duration::from_secs(10);

/// The open event streams of each session.
#[derive(Debug)]
pub struct EventStreams {
    sessions: Arc<LocalSessionManager>,
    open: Mutex<HashMap<String, usize>>,
}

impl EventStreams {
    /// Watches the streams of `sessions`.
    pub fn new(sessions: Arc<LocalSessionManager>) -> Arc<Self> {
        Arc::new(Self {
            sessions,
            open: Mutex::default(),
        })
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn opened(&self, session: &str) {
        *self.counts().entry(session.to_owned()).or_default() += 1;
    }

    /// A stream of `session` ended: if no other opens within [`GRACE`], the session ends.
    fn closed(self: &Arc<Self>, session: String) {
        let last = {
            let mut counts = self.counts();
            let count = counts.entry(session.clone()).or_default();
            *count = count.saturating_sub(1);
            *count == 0
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // shutting down: every session goes anyway
        };
        if !last {
            return;
        }
        let me = Arc::clone(self);
        runtime.spawn(async move {
            tokio::time::sleep(GRACE).await;
            {
                let mut counts = me.counts();
                if counts.get(&session).is_some_and(|n| *n > 0) {
                    return; // it reconnected
                }
                counts.remove(&session);
            }
            tracing::info!(%session, "the agent's event stream is gone; closing its session");
            if let Err(e) = me.sessions.close_session(&session.as_str().into()).await {
                tracing::debug!(%session, "session already gone: {e}");
            }
        });
    }
}

/// Middleware: counts the event streams of each session while they are open.
pub async fn watch(
    State(streams): State<Arc<EventStreams>>,
    request: Request,
    next: Next,
) -> Response {
    let session = (request.method() == axum::http::Method::GET)
        .then(|| request.headers().get("mcp-session-id")?.to_str().ok())
        .flatten()
        .map(str::to_owned);
    let response = next.run(request).await;
    let Some(session) = session.filter(|_| response.status().is_success()) else {
        return response;
    };
    streams.opened(&session);
    let guard = StreamGuard { streams, session };
    let (parts, body) = response.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        let _held = &guard;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}

/// Tells [`EventStreams`] when the response body carrying a stream is dropped.
struct StreamGuard {
    streams: Arc<EventStreams>,
    session: String,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.streams.closed(std::mem::take(&mut self.session));
    }
}
