//! The MCP adapter: agentls as the "IDE" a terminal agent connects to. It listens on loopback
//! sockets, writes the discovery files agents look for, and serves their IDE tools over MCP on
//! top of the port (`EditorAccess`): `openDiff` becomes a review, selections and mentions are
//! pushed as notifications. It never imports the host (`lsp`) or the ACP adapter.
//!
//! Security: loopback only, a fresh 128-bit token per process checked in constant time on every
//! request, no request with an `Origin`, `Host` must name our own address, a cap on open
//! connections and deadlines for those without the token, discovery files 0600 in 0700
//! directories, removed when the server stops.

pub mod bridge;
mod companion_file;
mod connections;
mod context_push;
mod context_tools;
mod diff_tabs;
pub mod discovery;
mod event_streams;
mod frames;
pub mod granted;
mod guard;
mod http;
pub mod lockfile;
mod outcome;
mod refusals;
mod session;
mod shapes;
mod tools;
mod websocket;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

pub use crate::editor::token::AuthToken;
pub use discovery::Found;

use crate::editor::EditorAccess;
use crate::editor::documents::context::ContextEvent;
use crate::editor::token;
use discovery::{DiscoveryError, DiscoveryFile};

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
    ws_port: u16,
    http_port: u16,
    ws_token: AuthToken,
    http_token: AuthToken,
    files: Arc<Mutex<Vec<Published>>>,
    stop: watch::Sender<bool>,
}

/// A discovery file and how to rewrite it when the folders change.
struct Published {
    file: DiscoveryFile,
    contents: fn(u16, &[PathBuf], &AuthToken) -> serde_json::Value,
    port: u16,
    token: AuthToken,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("ws_port", &self.ws_port)
            .field("http_port", &self.http_port)
            .finish_non_exhaustive()
    }
}

/// Binds 127.0.0.1 on a free port and serves `router` there until `stopped`, within `limits`
/// (handlers see each request's [`connections::Connection`]).
async fn listen(
    router: impl FnOnce(u16) -> axum::Router,
    (limits, protocol): (connections::Limits, connections::Protocol),
    stopped: watch::Receiver<bool>,
) -> Result<u16, StartError> {
    let socket = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(StartError::Bind)?;
    let port = socket.local_addr().map_err(StartError::Bind)?.port();
    let service = router(port).into_make_service_with_connect_info::<connections::Connection>();
    let socket = connections::LimitedListener::new(socket, port, limits, protocol);
    let mut until_stopped = stopped;
    tokio::spawn(async move {
        let shutdown = async move {
            let _ = until_stopped.wait_for(|s| *s).await;
        };
        if let Err(e) = axum::serve(socket, service)
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::error!(port, "MCP listener stopped: {e}");
        }
    });
    Ok(port)
}

impl McpServer {
    /// Listens (WebSocket and Streamable HTTP), writes the discovery files for the current
    /// workspace folders, and keeps them current.
    pub async fn start(editor: EditorAccess) -> Result<Self, StartError> {
        let ws_token = AuthToken::generate().map_err(StartError::Token)?;
        let http_token = AuthToken::generate().map_err(StartError::Token)?;
        let (stop, stopped) = watch::channel(false);
        let limits = connections::Limits::configured();
        let ws_port = {
            let (token, editor, stopped2) = (ws_token.clone(), editor.clone(), stopped.clone());
            listen(
                move |port| {
                    let listener = websocket::Listener::new(port, token, editor, stopped2);
                    websocket::router(Arc::new(listener))
                },
                (limits, connections::Protocol::WebSocket),
                stopped.clone(),
            )
            .await?
        };
        let http_port = {
            let (token, editor) = (http_token.clone(), editor.clone());
            listen(
                move |port| http::router(port, token, editor),
                (limits, connections::Protocol::Http),
                stopped.clone(),
            )
            .await?
        };
        let lock_dir = lockfile::dir().ok_or(StartError::NoConfigDir)?;
        let companion_dir = companion_file::dir();
        // Subscribe before reading the folders, so that no change falls between the two.
        let events = editor.watch_context().await;
        let folders = editor.workspace_folders().await;
        // Scanning and writing the directories is blocking file work (and the directories are
        // not all ours): off the async workers.
        let (lock, companion) = {
            let (ws_token, http_token) = (ws_token.clone(), http_token.clone());
            let (lock_in, companion_in) = (lock_dir.clone(), companion_dir.clone());
            tokio::task::spawn_blocking(move || {
                (
                    lockfile::create(&lock_in, ws_port, &folders, &ws_token),
                    companion_file::create(&companion_in, http_port, &folders, &http_token),
                )
            })
            .await
            .map_err(|e| StartError::DiscoveryFile {
                path: lock_dir.clone(),
                source: std::io::Error::other(e),
            })?
        };
        let mut files = Vec::new();
        let lock = published(lock, "lockfile", lock_dir.join(format!("{ws_port}.lock")))?;
        if let Some(file) = lock {
            files.push(Published {
                file,
                contents: lockfile_contents,
                port: ws_port,
                token: ws_token.clone(),
            });
        }
        let companion = published(companion, "companion discovery file", companion_dir)?;
        if let Some(file) = companion {
            files.push(Published {
                file,
                contents: companion_file::contents,
                port: http_port,
                token: http_token.clone(),
            });
        }
        let paths: Vec<String> = files
            .iter()
            .map(|p| p.file.path().display().to_string())
            .collect();
        tracing::info!(
            ws_port,
            http_port,
            discovery_files = ?paths,
            "serving terminal agents"
        );
        let files = Arc::new(Mutex::new(files));
        if let Some(events) = events {
            tokio::spawn(keep_folders_current(
                editor,
                events,
                Arc::clone(&files),
                stopped,
            ));
        }
        Ok(Self {
            ws_port,
            http_port,
            ws_token,
            http_token,
            files,
            stop,
        })
    }

    /// The WebSocket port.
    pub fn port(&self) -> u16 {
        self.ws_port
    }

    /// The token WebSocket clients must present.
    pub fn token(&self) -> &AuthToken {
        &self.ws_token
    }

    /// The Streamable HTTP port (MCP at `/mcp`).
    pub fn http_port(&self) -> u16 {
        self.http_port
    }

    /// The environment a terminal needs for agents started in it to find this server.
    /// `folders` are the workspace folders (the companion protocol wants them too).
    pub fn terminal_env(&self, folders: &[PathBuf]) -> BTreeMap<String, String> {
        let folders: Vec<String> = folders.iter().map(|f| f.display().to_string()).collect();
        BTreeMap::from([
            ("CLAUDE_CODE_SSE_PORT".to_owned(), self.ws_port.to_string()),
            (
                "GEMINI_CLI_IDE_SERVER_PORT".to_owned(),
                self.http_port.to_string(),
            ),
            (
                "GEMINI_CLI_IDE_WORKSPACE_PATH".to_owned(),
                folders.join(":"),
            ),
            (
                "GEMINI_CLI_IDE_AUTH_TOKEN".to_owned(),
                self.http_token.as_str().to_owned(),
            ),
        ])
    }

    /// Removes the discovery files and ends every session (idempotent).
    pub fn stop(&self) {
        for mut published in self
            .files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            published.file.remove();
        }
        self.stop.send_replace(true);
    }
}

/// A discovery file written, or refused for its directory (logged; agents started in our
/// terminals still find us through their environment), or a failure that stops the start.
fn published(
    result: Result<DiscoveryFile, DiscoveryError>,
    kind: &str,
    path: PathBuf,
) -> Result<Option<DiscoveryFile>, StartError> {
    match result {
        Ok(file) => Ok(Some(file)),
        Err(e @ DiscoveryError::UnsafeDir { .. }) => {
            tracing::warn!(
                "no {kind}: {e}; only agents started in agentls's terminals will find this server"
            );
            Ok(None)
        }
        Err(DiscoveryError::Io(source)) => Err(StartError::DiscoveryFile { path, source }),
    }
}

fn lockfile_contents(_port: u16, folders: &[PathBuf], token: &AuthToken) -> serde_json::Value {
    lockfile::contents(folders, token)
}

impl Drop for McpServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Rewrites the discovery files whenever the workspace folders change.
async fn keep_folders_current(
    editor: EditorAccess,
    mut events: tokio::sync::broadcast::Receiver<ContextEvent>,
    files: Arc<Mutex<Vec<Published>>>,
    mut stopped: watch::Receiver<bool>,
) {
    loop {
        let event = tokio::select! {
            event = events.recv() => event,
            _ = stopped.wait_for(|s| *s) => return,
        };
        match event {
            Ok(ContextEvent::FoldersChanged)
            | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                let folders = editor.workspace_folders().await;
                let files = Arc::clone(&files);
                let rewritten = tokio::task::spawn_blocking(move || {
                    let files = files.lock().unwrap_or_else(|e| e.into_inner());
                    for p in files.iter() {
                        let contents = (p.contents)(p.port, &folders, &p.token);
                        if let Err(e) = p.file.rewrite(&contents) {
                            tracing::warn!(path = %p.file.path().display(), "cannot update: {e}");
                        }
                    }
                })
                .await;
                if let Err(e) = rewritten {
                    tracing::error!("updating the discovery files failed: {e}");
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
    let mut found: Vec<Found> = lockfile::dirs()
        .iter()
        .flat_map(|d| lockfile::scan(d))
        .collect();
    found.extend(companion_file::scan(&companion_file::dir()));
    found
}
