//! The host's side of the editor tools offered to ACP sessions: it tells the port how to start
//! their MCP listener (on the first session offered them), keeps the record `agentls doctor`
//! reads (one file per process; records of ended runs but the last are removed at start), and
//! stops the listener when the server ends.

use tokio::sync::watch;

use crate::editor::EditorAccess;
use crate::editor::tool_grants;

/// Stops the listener when dropped.
#[derive(Debug)]
pub struct SessionTools {
    stop: watch::Sender<bool>,
}

impl SessionTools {
    /// Lets `editor` grant its tools to agent sessions from now on.
    pub fn install(editor: &EditorAccess) -> Self {
        let (stop, stopped) = watch::channel(false);
        editor.serve_tools_with(Box::new(move |editor: EditorAccess| {
            let stopped = stopped.clone();
            Box::pin(async move {
                let port = crate::mcp::granted::start(editor, stopped)
                    .await
                    .map_err(|e| e.to_string())?;
                tracing::info!(port, "serving the editor tools to agent sessions");
                Ok(port)
            })
        }));
        if let Some(dir) = tool_grants::record_dir() {
            tool_grants::prune_records(&dir);
            let record = dir.join(format!("{}.json", std::process::id()));
            editor.tool_grants().keep_record_at(record);
        }
        Self { stop }
    }
}

impl Drop for SessionTools {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}
