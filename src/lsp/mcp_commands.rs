//! The host's side of the MCP adapter: starting it after `initialize` (when `mcp.enabled`),
//! stopping it on `shutdown`, exit or a termination signal (SIGTERM, SIGINT or SIGHUP: each
//! removes its discovery files), and the `agentls.terminalEnv` command that tells a terminal how
//! to find it.

use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;
use tower_lsp_server::jsonrpc::{Error, Result};

use super::server::Backend;
use crate::editor::{EditorAccess, Level};
use crate::mcp::McpServer;

/// How long `agentls.terminalEnv` waits for a server that is still starting.
const START_WAIT: Duration = Duration::from_secs(5);

/// Where the MCP side stands.
#[derive(Debug)]
enum Phase {
    /// Not started (before `initialize`, or `mcp.enabled = false`).
    Off,
    /// Binding and writing discovery files.
    Starting,
    /// Serving.
    Running(McpServer),
    /// Could not start; the message says why.
    Failed(String),
    /// Stopped for good.
    Stopped,
}

/// The MCP side of one language server.
#[derive(Debug)]
pub struct McpSlot {
    phase: Mutex<Phase>,
    changed: watch::Sender<()>,
}

impl Default for McpSlot {
    fn default() -> Self {
        Self {
            phase: Mutex::new(Phase::Off),
            changed: watch::channel(()).0,
        }
    }
}

impl McpSlot {
    /// Starts serving terminal agents in the background (once).
    pub fn start(self: &std::sync::Arc<Self>, editor: EditorAccess) {
        {
            let mut phase = self.phase.lock().unwrap_or_else(|e| e.into_inner());
            if !matches!(*phase, Phase::Off) {
                return;
            }
            *phase = Phase::Starting;
        }
        let me = std::sync::Arc::clone(self);
        tokio::spawn(async move {
            let started = McpServer::start(editor.clone()).await;
            let mut phase = me.phase.lock().unwrap_or_else(|e| e.into_inner());
            match (started, &*phase) {
                (Ok(server), Phase::Starting) => *phase = Phase::Running(server),
                (Ok(server), _) => server.stop(),
                (Err(e), _) => {
                    let message = format!("agentls: terminal agents cannot connect: {e}");
                    editor.tell_user(Level::Warning, message.clone());
                    *phase = Phase::Failed(message);
                }
            }
            drop(phase);
            me.changed.send_replace(());
        });
    }

    /// Stops serving and removes the discovery files (idempotent).
    pub fn stop(&self) {
        let old = std::mem::replace(
            &mut *self.phase.lock().unwrap_or_else(|e| e.into_inner()),
            Phase::Stopped,
        );
        if let Phase::Running(server) = old {
            server.stop();
        }
        self.changed.send_replace(());
    }

    /// The terminal env, waiting briefly for a server that is still starting.
    async fn terminal_env(&self, editor: &EditorAccess) -> std::result::Result<Value, String> {
        let folders = editor.workspace_folders().await;
        let mut changed = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + START_WAIT;
        loop {
            {
                let phase = self.phase.lock().unwrap_or_else(|e| e.into_inner());
                match &*phase {
                    Phase::Running(server) => return Ok(json!(server.terminal_env(&folders))),
                    Phase::Failed(message) => return Err(message.clone()),
                    Phase::Off => return Err("serving terminal agents is off (mcp.enabled)".into()),
                    Phase::Stopped => return Err("agentls is shutting down".into()),
                    Phase::Starting => {}
                }
            }
            if tokio::time::timeout_at(deadline, changed.changed())
                .await
                .is_err()
            {
                return Err("the MCP server is still starting".into());
            }
        }
    }
}

/// `agentls.terminalEnv`: the env a terminal needs for agents started in it to find this
/// server, `{NAME: value}`.
pub async fn terminal_env(backend: &Backend) -> Result<Option<Value>> {
    backend
        .mcp
        .terminal_env(&backend.editor)
        .await
        .map(Some)
        .map_err(invalid_request)
}

fn invalid_request(message: String) -> Error {
    Error {
        code: tower_lsp_server::jsonrpc::ErrorCode::InvalidRequest,
        message: message.into(),
        data: None,
    }
}

/// Resolves when the process is asked to terminate: SIGTERM, SIGINT, or SIGHUP (how Emacs ends
/// its language servers, and what a closed terminal sends), all handled alike so the discovery
/// files never outlive the server.
pub async fn termination_requested() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: stopping"),
        _ = int.recv() => tracing::info!("SIGINT: stopping"),
        _ = hup.recv() => tracing::info!("SIGHUP: stopping"),
    }
}
