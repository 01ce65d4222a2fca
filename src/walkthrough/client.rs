//! A minimal LSP client for the walkthrough: starts `agentls serve` as a child, frames JSON-RPC
//! over its stdio, answers the server's requests the way a capable editor would (it applies
//! `workspace/applyEdit` to its copy of the document and reports the change), and hands every
//! notification to the caller.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::{Mutex, mpsc, oneshot};

/// How long any answer from the server may take.
const PATIENCE: Duration = Duration::from_secs(30);

type Pending = Arc<std::sync::Mutex<HashMap<i64, oneshot::Sender<Value>>>>;

/// The one document the walkthrough edits, as the "editor" holds it.
#[derive(Debug, Clone)]
struct Buffer {
    uri: String,
    text: String,
    version: i32,
}

/// A running `agentls serve` and our end of it.
pub struct Client {
    child: Child,
    stdin: Arc<Mutex<ChildStdin>>,
    pending: Pending,
    next_id: i64,
    /// Notifications from the server, in order.
    pub notifications: mpsc::UnboundedReceiver<Value>,
    buffer: Arc<std::sync::Mutex<Option<Buffer>>>,
}

impl Client {
    /// Starts `agentls serve` (this same executable) in `dir`; with `state`, it and the agents
    /// it starts keep their state (chats, sessions) there instead of the user's state folder.
    pub fn start(dir: &Path, state: Option<&Path>) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("cannot find the agentls executable")?;
        let mut command = Command::new(exe);
        if let Some(state) = state {
            command.env("XDG_STATE_HOME", state);
        }
        let mut child = command
            .arg("serve")
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("cannot start `agentls serve`")?;
        let stdin = Arc::new(Mutex::new(child.stdin.take().expect("piped")));
        let stdout = child.stdout.take().expect("piped");
        let pending: Pending = Arc::default();
        let buffer = Arc::default();
        let (tx, notifications) = mpsc::unbounded_channel();
        let reader = Reader {
            stdin: Arc::clone(&stdin),
            pending: Arc::clone(&pending),
            buffer: Arc::clone(&buffer),
            notifications: tx,
        };
        tokio::spawn(reader.run(BufReader::new(stdout)));
        Ok(Self {
            child,
            stdin,
            pending,
            next_id: 1,
            notifications,
            buffer,
        })
    }

    /// Sends a request and waits for its result.
    pub async fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let (tx, rx) = oneshot::channel();
        self.pending.lock().expect("pending").insert(id, tx);
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        write(&self.stdin, &message).await?;
        let response = tokio::time::timeout(PATIENCE, rx)
            .await
            .map_err(|_| anyhow!("agentls did not answer {method} within {PATIENCE:?}"))?
            .map_err(|_| anyhow!("agentls stopped while answering {method}"))?;
        match response.get("error") {
            Some(error) => bail!("{method} failed: {}", error["message"]),
            None => Ok(response["result"].clone()),
        }
    }

    /// Sends a notification.
    pub async fn notify(&self, method: &str, params: Value) -> anyhow::Result<()> {
        write(
            &self.stdin,
            &json!({"jsonrpc": "2.0", "method": method, "params": params}),
        )
        .await
    }

    /// Opens `path` (UTF-8 text) as the one buffer this client edits.
    pub async fn open(&self, path: &Path, text: &str) -> anyhow::Result<String> {
        let uri = tower_lsp_server::ls_types::Uri::from_file_path(path)
            .context("the file has no URI")?
            .to_string();
        *self.buffer.lock().expect("buffer") = Some(Buffer {
            uri: uri.clone(),
            text: text.to_owned(),
            version: 0,
        });
        let document = json!({"uri": uri, "languageId": "text", "version": 0, "text": text});
        self.notify("textDocument/didOpen", json!({"textDocument": document}))
            .await?;
        Ok(uri)
    }

    /// Saves the buffer to `path` as an editor does: the file, then `didSave`.
    pub async fn save(&self, path: &Path) -> anyhow::Result<()> {
        let buffer = self.buffer.lock().expect("buffer").clone();
        let buffer = buffer.context("no document is open")?;
        std::fs::write(path, &buffer.text)
            .with_context(|| format!("cannot write {}", path.display()))?;
        self.notify(
            "textDocument/didSave",
            json!({"textDocument": {"uri": buffer.uri}}),
        )
        .await
    }

    /// `shutdown`, `exit`, and waits for the server to leave.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.request("shutdown", Value::Null).await?;
        self.notify("exit", Value::Null).await?;
        tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .context("agentls did not exit")??;
        Ok(())
    }
}

/// The reading side: responses to their waiters, requests answered, notifications passed on.
struct Reader {
    stdin: Arc<Mutex<ChildStdin>>,
    pending: Pending,
    buffer: Arc<std::sync::Mutex<Option<Buffer>>>,
    notifications: mpsc::UnboundedSender<Value>,
}

impl Reader {
    async fn run(self, mut stdout: BufReader<ChildStdout>) {
        while let Some(message) = read_frame(&mut stdout).await {
            match (message.get("id").cloned(), message.get("method")) {
                (Some(id), None) => {
                    let waiter = id
                        .as_i64()
                        .and_then(|id| self.pending.lock().ok()?.remove(&id));
                    if let Some(waiter) = waiter {
                        let _ = waiter.send(message);
                    }
                }
                (Some(id), Some(_)) => self.answer(id, &message).await,
                (None, _) => {
                    let _ = self.notifications.send(message);
                }
            }
        }
    }

    /// Answers a server request like a capable editor.
    async fn answer(&self, id: Value, request: &Value) {
        let result = match request["method"].as_str().unwrap_or_default() {
            "workspace/applyEdit" => {
                let applied = self.apply(&request["params"]["edit"]).await;
                let _ = self.notifications.send(request.clone());
                json!({"applied": applied})
            }
            "window/showDocument" => json!({"success": true}),
            _ => Value::Null,
        };
        let _ = write(
            &self.stdin,
            &json!({"jsonrpc": "2.0", "id": id, "result": result}),
        )
        .await;
    }

    /// Applies a workspace edit to the buffer and tells the server, as an editor does.
    async fn apply(&self, edit: &Value) -> bool {
        let Some(change) = edit["documentChanges"].get(0) else {
            return false;
        };
        let changed = {
            let mut buffer = self.buffer.lock().expect("buffer");
            let Some(buffer) = buffer.as_mut() else {
                return false;
            };
            if change["textDocument"]["uri"] != buffer.uri.as_str() {
                return false;
            }
            let mut edits: Vec<&Value> = change["edits"].as_array().into_iter().flatten().collect();
            // Last first, so earlier ranges stay valid.
            edits.sort_by_key(|e| {
                let start = &e["range"]["start"];
                std::cmp::Reverse((start["line"].as_u64(), start["character"].as_u64()))
            });
            for edit in &edits {
                let from = offset(&buffer.text, &edit["range"]["start"]);
                let to = offset(&buffer.text, &edit["range"]["end"]);
                let new_text = edit["newText"].as_str().unwrap_or_default();
                buffer.text.replace_range(from..to, new_text);
            }
            buffer.version += 1;
            let changes: Vec<Value> = edits
                .iter()
                .map(|e| json!({"range": e["range"], "text": e["newText"]}))
                .collect();
            json!({"textDocument": {"uri": buffer.uri, "version": buffer.version},
                   "contentChanges": changes})
        };
        let did_change =
            json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": changed});
        write(&self.stdin, &did_change).await.is_ok()
    }
}

/// The byte offset of an LSP position counted in UTF-8 (the walkthrough offers only UTF-8).
fn offset(text: &str, position: &Value) -> usize {
    let line = position["line"].as_u64().unwrap_or(0) as usize;
    let character = position["character"].as_u64().unwrap_or(0) as usize;
    let start = if line == 0 {
        0
    } else {
        text.match_indices('\n')
            .nth(line - 1)
            .map_or(text.len(), |(i, _)| i + 1)
    };
    let end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let mut at = (start + character).min(end);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

async fn write(stdin: &Mutex<ChildStdin>, message: &Value) -> anyhow::Result<()> {
    let body = serde_json::to_vec(message)?;
    let mut stdin = stdin.lock().await;
    stdin
        .write_all(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes())
        .await?;
    stdin.write_all(&body).await?;
    stdin.flush().await?;
    Ok(())
}

async fn read_frame(stdout: &mut BufReader<ChildStdout>) -> Option<Value> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if stdout.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(value) = line.strip_prefix("Content-Length:") {
            length = value.trim().parse::<usize>().ok();
        }
    }
    let mut body = vec![0; length?];
    stdout.read_exact(&mut body).await.ok()?;
    serde_json::from_slice(&body).ok()
}
