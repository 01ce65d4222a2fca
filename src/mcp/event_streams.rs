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

/// How long a session may be without an event stream before it is closed (the client
/// reconnects within a second or two).
pub const GRACE: Duration = Duration::from_secs(10);

/// The open event streams of each session.
#[derive(Debug)]
pub struct EventStreams {
    sessions: Arc<LocalSessionManager>,
    grace: Duration,
    /// Per session: how many streams are open, and a generation bumped by every open and close
    /// (a timer closes the session only if nothing happened since it started).
    open: Mutex<HashMap<String, (usize, u64)>>,
}

impl EventStreams {
    /// Watches the streams of `sessions`, closing one `grace` after its last stream ended.
    pub fn new(sessions: Arc<LocalSessionManager>, grace: Duration) -> Arc<Self> {
        Arc::new(Self {
            sessions,
            grace,
            open: Mutex::default(),
        })
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<String, (usize, u64)>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn opened(&self, session: &str) {
        let mut counts = self.counts();
        let (open, generation) = counts.entry(session.to_owned()).or_default();
        *open += 1;
        *generation += 1;
    }

    /// A stream of `session` ended: if no other opens (or closes) within [`GRACE`], the
    /// session ends.
    fn closed(self: &Arc<Self>, session: String) {
        let (last, seen) = {
            let mut counts = self.counts();
            let (open, generation) = counts.entry(session.clone()).or_default();
            *open = open.saturating_sub(1);
            *generation += 1;
            (*open == 0, *generation)
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // shutting down: every session goes anyway
        };
        if !last {
            return;
        }
        let me = Arc::clone(self);
        runtime.spawn(async move {
            tokio::time::sleep(me.grace).await;
            {
                let mut counts = me.counts();
                if counts
                    .get(&session)
                    .is_some_and(|(_, generation)| *generation != seen)
                {
                    return; // it reconnected (a later close starts its own wait)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_session_ends_only_a_grace_after_its_last_stream_ended() {
        let sessions = Arc::new(LocalSessionManager::default());
        let (id, _transport) = sessions.create_session().await.unwrap();
        let grace = Duration::from_millis(300);
        let streams = EventStreams::new(Arc::clone(&sessions), grace);
        let exists = || async { sessions.has_session(&id).await.unwrap() };
        // A stream drops, another opens and drops again a little later: the first drop's wait
        // must not end the session while the second one's runs.
        streams.opened(&id);
        streams.closed(id.to_string());
        tokio::time::sleep(grace / 3).await;
        streams.opened(&id);
        tokio::time::sleep(grace / 3).await;
        streams.closed(id.to_string());
        tokio::time::sleep(grace / 3 * 2).await;
        assert!(exists().await, "closed before the grace of the last drop");
        tokio::time::sleep(grace).await;
        assert!(
            !exists().await,
            "still open a grace after its last stream ended"
        );
    }
}
