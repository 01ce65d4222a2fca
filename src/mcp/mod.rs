//! The MCP adapter: agentls as the "IDE" a terminal agent connects to. It listens on loopback
//! sockets, writes the discovery files agents look for, and serves their IDE tools over MCP on
//! top of the port (`EditorAccess`): `openDiff` becomes a review, selections and mentions are
//! pushed as notifications. It never imports the host (`lsp`) or the ACP adapter.
//!
//! Security: loopback only, a fresh 128-bit token per process checked in constant time on every
//! request, no request with an `Origin`, `Host` must name our own address, discovery files 0600
//! in 0700 directories, removed when the server stops.

mod context_push;
mod context_tools;
mod diff_tabs;
pub mod discovery;
mod frames;
mod guard;
pub mod lockfile;
mod outcome;
mod session;
mod shapes;
mod token;
mod tools;
mod websocket;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

pub use discovery::Found;
pub use token::AuthToken;

use crate::editor::EditorAccess;
use crate::editor::context::ContextEvent;
use discovery::DiscoveryFile;

/// Why the MCP side could not start (the language server goes on without it).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// No random token could be made.
    #[error("cannot generate an authentication token: {0}")]
    Token(#[source] std::io::Error),
    /// No loopback port.
    #[error("cannot listen on 127.0.0.1: {0}")]
    Bind(#[source] std::io::Error),
    /// Neither `CLAUDE_CONFIG_DIR` nor `HOME` is set: nowhere to put the lockfile.
    #[error("no CLAUDE_CONFIG_DIR or HOME: nowhere to write the lockfile")]
    NoConfigDir,
    /// The discovery file could not be written.
    #[error("cannot write {path}: {source}")]
    DiscoveryFile {
        /// Where.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The running MCP side; stopping it (or dropping it) removes its discovery files and ends
/// every session.
pub struct McpServer {
    port: u16,
    token: AuthToken,
    lockfile: Arc<Mutex<Option<DiscoveryFile>>>,
    stop: watch::Sender<bool>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// Listens, writes the lockfile for the current workspace folders, and keeps it current.
    pub async fn start(editor: EditorAccess) -> Result<Self, StartError> {
        let token = AuthToken::generate().map_err(StartError::Token)?;
        let (stop, stopped) = watch::channel(false);
        let socket = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(StartError::Bind)?;
        let port = socket.local_addr().map_err(StartError::Bind)?.port();
        let listener =
            websocket::Listener::new(port, token.clone(), editor.clone(), stopped.clone());
        let router = websocket::router(Arc::new(listener));
        let mut until_stopped = stopped.clone();
        tokio::spawn(async move {
            let shutdown = async move {
                let _ = until_stopped.wait_for(|s| *s).await;
            };
            if let Err(e) = axum::serve(socket, router)
                .with_graceful_shutdown(shutdown)
                .await
            {
                tracing::error!("MCP listener stopped: {e}");
            }
        });
        let dir = lockfile::dir().ok_or(StartError::NoConfigDir)?;
        let folders = editor.workspace_folders().await;
        let file = lockfile::create(&dir, port, &folders, &token).map_err(|source| {
            StartError::DiscoveryFile {
                path: dir.join(format!("{port}.lock")),
                source,
            }
        })?;
        tracing::info!(port, lockfile = %file.path().display(), "serving terminal agents");
        let lockfile = Arc::new(Mutex::new(Some(file)));
        tokio::spawn(keep_folders_current(
            editor,
            Arc::clone(&lockfile),
            token.clone(),
            stopped,
        ));
        Ok(Self {
            port,
            token,
            lockfile,
            stop,
        })
    }

    /// The WebSocket port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The token agents must present.
    pub fn token(&self) -> &AuthToken {
        &self.token
    }

    /// The environment a terminal needs for agents started in it to find this server.
    pub fn terminal_env(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("CLAUDE_CODE_SSE_PORT".to_owned(), self.port.to_string())])
    }

    /// Removes the discovery files and ends every session (idempotent).
    pub fn stop(&self) {
        if let Some(mut file) = self
            .lockfile
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            file.remove();
        }
        self.stop.send_replace(true);
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Rewrites the lockfile whenever the workspace folders change.
async fn keep_folders_current(
    editor: EditorAccess,
    lockfile: Arc<Mutex<Option<DiscoveryFile>>>,
    token: AuthToken,
    mut stopped: watch::Receiver<bool>,
) {
    let Some(mut events) = editor.watch_context().await else {
        return;
    };
    loop {
        let event = tokio::select! {
            event = events.recv() => event,
            _ = stopped.wait_for(|s| *s) => return,
        };
        match event {
            Ok(ContextEvent::FoldersChanged)
            | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                let folders = editor.workspace_folders().await;
                let guard = lockfile.lock().unwrap_or_else(|e| e.into_inner());
                let Some(file) = guard.as_ref() else { return };
                if let Err(e) = file.rewrite(&lockfile::contents(&folders, &token)) {
                    tracing::warn!(path = %file.path().display(), "cannot update lockfile: {e}");
                }
            }
            Ok(_) => {}
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// Every discovery file on this machine the user's agents would look at, ours and others', for
/// `agentls doctor`.
pub fn discovery_files() -> Vec<Found> {
    lockfile::dirs()
        .iter()
        .flat_map(|d| lockfile::scan(d))
        .collect()
}
