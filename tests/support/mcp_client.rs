//! A terminal agent for tests: finds agentls's lockfile, connects over WebSocket with the token
//! and the `mcp` subprotocol, and speaks MCP through rmcp's own client. Notifications the server
//! pushes (`selection_changed`, `at_mentioned`) are recorded for `take_notification`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::{SinkExt as _, StreamExt as _};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, CustomNotification, Implementation,
    ProtocolVersion,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt as _};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

use super::WAIT;

/// What the server's lockfile says.
#[derive(Debug, Clone)]
pub struct Lock {
    /// Where it is.
    pub path: PathBuf,
    /// The port in its name.
    pub port: u16,
    /// Its JSON.
    pub json: Value,
}

impl Lock {
    /// The token.
    pub fn token(&self) -> String {
        self.json["authToken"].as_str().unwrap().to_owned()
    }
}

/// Waits for exactly one lockfile in `dir` and reads it.
pub async fn lockfile(dir: &Path) -> Lock {
    let found = super::eventually(|| read_locks(dir).len() == 1).await;
    let locks = read_locks(dir);
    assert!(
        found.is_some(),
        "expected one lockfile in {}, found {locks:?}",
        dir.display()
    );
    locks.into_iter().next().unwrap()
}

impl super::TestClient {
    /// This server's lockfile, once it is there: the one lockfile in its lock folder, or, for
    /// a server in this process (whose folder every such server shares), the one naming its
    /// workspace.
    pub async fn lockfile(&self) -> Lock {
        let dir = self.lock_dir();
        let workspace = json!(self.workspace.display().to_string());
        let ours = |lock: &Lock| {
            !self.in_this_process()
                || lock.json["workspaceFolders"]
                    .as_array()
                    .is_some_and(|folders| folders.contains(&workspace))
        };
        let found =
            super::eventually(|| read_locks(&dir).iter().filter(|l| ours(l)).count() == 1).await;
        let locks: Vec<Lock> = read_locks(&dir).into_iter().filter(ours).collect();
        assert!(
            found.is_some() && locks.len() == 1,
            "expected one lockfile for {} in {}, found {locks:?}",
            self.workspace.display(),
            dir.display()
        );
        locks.into_iter().next().unwrap()
    }
}

/// Every parseable lockfile in `dir`.
pub fn read_locks(dir: &Path) -> Vec<Lock> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "lock"))
        .filter_map(|path| {
            let json: Value = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
            let port = path.file_stem()?.to_str()?.parse().ok()?;
            Some(Lock { path, port, json })
        })
        .collect()
}

#[derive(Clone, Default)]
struct Recorder {
    name: String,
    notes: Arc<Mutex<Vec<(String, Value)>>>,
    arrived: Arc<Notify>,
}

impl ClientHandler for Recorder {
    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _: NotificationContext<RoleClient>,
    ) {
        let params = notification.params.unwrap_or(Value::Null);
        self.notes
            .lock()
            .unwrap()
            .push((notification.method, params));
        self.arrived.notify_waiters();
    }

    fn get_info(&self) -> ClientConfig {
        let mut config = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new(self.name.clone(), "1.0.0"),
        );
        config.protocol_version = ProtocolVersion::V_2025_11_25;
        config
    }
}

/// A connected MCP client.
pub struct McpClient {
    service: RunningService<RoleClient, Recorder>,
    recorder: Recorder,
}

/// Opens a WebSocket to `port` with the IDE protocol's headers.
pub async fn websocket(
    port: u16,
    token: &str,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    let mut request = format!("ws://127.0.0.1:{port}/")
        .into_client_request()
        .unwrap();
    let headers = request.headers_mut();
    headers.insert("x-claude-code-ide-authorization", token.parse().unwrap());
    headers.insert("sec-websocket-protocol", "mcp".parse().unwrap());
    let (socket, response) = tokio_tungstenite::connect_async(request)
        .await
        .expect("WebSocket upgrade");
    assert_eq!(
        response.headers()["sec-websocket-protocol"],
        "mcp",
        "the server must answer the mcp subprotocol"
    );
    socket
}

impl McpClient {
    /// Connects to `lock`'s server as a client named `name` and initializes.
    pub async fn connect(lock: &Lock, name: &str) -> Self {
        let socket = websocket(lock.port, &lock.token()).await;
        let (sink, stream) = socket.split();
        let sink = sink.with(
            |message: rmcp::service::TxJsonRpcMessage<RoleClient>| async move {
                Ok::<_, tokio_tungstenite::tungstenite::Error>(Message::Text(
                    serde_json::to_string(&message).unwrap().into(),
                ))
            },
        );
        let stream = stream.filter_map(|frame| async move {
            match frame {
                Ok(Message::Text(text)) => serde_json::from_str(text.as_str()).ok(),
                _ => None,
            }
        });
        let recorder = Recorder {
            name: name.to_owned(),
            ..Recorder::default()
        };
        let service = tokio::time::timeout(
            WAIT,
            recorder.clone().serve((Box::pin(sink), Box::pin(stream))),
        )
        .await
        .expect("initialize in time")
        .expect("initialize");
        Self { service, recorder }
    }

    /// The server's `initialize` result.
    pub fn server_info(&self) -> Value {
        serde_json::to_value(self.service.peer_info().unwrap().as_ref()).unwrap()
    }

    /// Calls `tool` with `args`; the whole result as JSON.
    pub async fn call(&self, tool: &str, args: Value) -> Result<Value, String> {
        let mut params = CallToolRequestParams::new(tool.to_owned());
        if let Value::Object(map) = args {
            params = params.with_arguments(map);
        }
        let result = self.service.call_tool(params).await;
        result
            .map(|r| serde_json::to_value(r).unwrap())
            .map_err(|e| e.to_string())
    }

    /// Calls `tool` in a task of its own: the call stays pending until it is answered or the
    /// connection closes (dropping a [`McpClient::call`] future cancels the call instead).
    pub fn call_in_background(
        &self,
        tool: &str,
        args: Value,
    ) -> tokio::task::JoinHandle<Result<Value, String>> {
        let mut params = CallToolRequestParams::new(tool.to_owned());
        if let Value::Object(map) = args {
            params = params.with_arguments(map);
        }
        let peer = self.service.peer().clone();
        tokio::spawn(async move {
            let result = peer.call_tool(params).await;
            result
                .map(|r| serde_json::to_value(r).unwrap())
                .map_err(|e| e.to_string())
        })
    }

    /// Calls `tool`; its text blocks.
    pub async fn texts(&self, tool: &str, args: Value) -> Vec<String> {
        let result = tokio::time::timeout(WAIT, self.call(tool, args))
            .await
            .unwrap_or_else(|_| panic!("{tool} did not answer within {WAIT:?}"))
            .unwrap_or_else(|e| panic!("{tool} failed: {e}"));
        result["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["text"].as_str().unwrap().to_owned())
            .collect()
    }

    /// Calls `tool`; its one text block parsed as JSON.
    pub async fn json(&self, tool: &str, args: Value) -> Value {
        let texts = self.texts(tool, args).await;
        assert_eq!(texts.len(), 1, "{tool}: {texts:?}");
        serde_json::from_str(&texts[0]).unwrap()
    }

    /// The tools the server lists.
    pub async fn tool_names(&self) -> Vec<String> {
        let tools = self.service.list_all_tools().await.unwrap();
        tools.into_iter().map(|t| t.name.to_string()).collect()
    }

    /// Waits for the first notification `method` matching `pred` and removes it.
    pub async fn take_notification(&self, method: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let found = tokio::time::timeout(WAIT, async {
            loop {
                let arrived = self.recorder.arrived.notified();
                {
                    let mut notes = self.recorder.notes.lock().unwrap();
                    if let Some(i) = notes.iter().position(|(m, p)| m == method && pred(p)) {
                        return notes.remove(i).1;
                    }
                }
                arrived.await;
            }
        })
        .await;
        found.unwrap_or_else(|_| {
            let seen = self.recorder.notes.lock().unwrap().clone();
            panic!("no {method} within {WAIT:?}; got {seen:?}")
        })
    }

    /// Every notification `method` so far (not removed).
    pub fn notifications(&self, method: &str) -> Vec<Value> {
        let notes = self.recorder.notes.lock().unwrap();
        notes
            .iter()
            .filter(|(m, _)| m == method)
            .map(|(_, p)| p.clone())
            .collect()
    }

    /// Closes the connection.
    pub async fn close(self) {
        let _ = self.service.cancel().await;
    }
}
