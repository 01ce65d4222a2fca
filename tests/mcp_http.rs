//! The Streamable HTTP companion protocol spoken by hand (raw HTTP/1.1 and SSE), to assert what
//! no real client shows: the `ide/contextUpdate` shape after a selection, `openDiff` answered at
//! once, and a deleted session — or one whose event stream is gone — withdrawing its pending
//! review.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{Options, TestClient, range};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

struct Http {
    port: u16,
    token: String,
    session: Option<String>,
}

impl Http {
    fn request(&self, method: &str, accept: &str, body: &str) -> String {
        let mut head = format!(
            "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\n\
             Accept: {accept}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            self.port,
            self.token,
            body.len()
        );
        if let Some(id) = &self.session {
            head.push_str(&format!(
                "mcp-session-id: {id}\r\nmcp-protocol-version: 2025-06-18\r\n"
            ));
        }
        format!("{head}\r\n{body}")
    }

    /// Sends one request on a new connection; reads until `until` appears in what came back.
    async fn send(&self, method: &str, body: &str, until: &str) -> (TcpStream, String) {
        let accept = "application/json, text/event-stream";
        let mut socket = TcpStream::connect(("127.0.0.1", self.port)).await.unwrap();
        socket
            .write_all(self.request(method, accept, body).as_bytes())
            .await
            .unwrap();
        let text = read_until(&mut socket, until).await;
        (socket, text)
    }
}

async fn read_until(socket: &mut TcpStream, needle: &str) -> String {
    let mut seen = Vec::new();
    let found = tokio::time::timeout(support::WAIT, async {
        let mut buffer = [0u8; 4096];
        loop {
            if String::from_utf8_lossy(&seen).contains(needle) {
                return;
            }
            let n = socket.read(&mut buffer).await.unwrap_or(0);
            if n == 0 {
                return;
            }
            seen.extend_from_slice(&buffer[..n]);
        }
    })
    .await;
    let text = String::from_utf8_lossy(&seen).into_owned();
    assert!(
        found.is_ok() && text.contains(needle),
        "no {needle:?} in {text:?}"
    );
    text
}

/// The JSON of the SSE `data:` line that contains `needle`.
fn event_with(text: &str, needle: &str) -> Value {
    let line = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no data line with {needle:?} in {text:?}"));
    serde_json::from_str(line).unwrap()
}

/// Starts a companion session with `client`'s server: initialize, initialized, and the
/// standalone event stream (returned open).
async fn connect(client: &TestClient) -> (Http, TcpStream) {
    let (port, token) = client.companion_port().await;
    let mut http = Http {
        port,
        token,
        session: None,
    };
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "http-agent", "version": "1"}}});
    let (_, answer) = http.send("POST", &init.to_string(), "\"id\":1").await;
    let session = answer
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("mcp-session-id: ")
                .map(str::to_owned)
        })
        .expect("a session id");
    http.session = Some(session.trim().to_owned());
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    http.send("POST", &initialized.to_string(), "HTTP/1.1 202")
        .await;

    // The standalone SSE stream carries notifications.
    let mut events = TcpStream::connect(("127.0.0.1", http.port)).await.unwrap();
    events
        .write_all(http.request("GET", "text/event-stream", "").as_bytes())
        .await
        .unwrap();
    read_until(&mut events, "200 OK").await;
    (http, events)
}

#[tokio::test]
async fn context_updates_diffs_and_session_teardown_over_http() {
    let client = TestClient::start_initialized(Options::default()).await;
    let open_before = client.open("before.txt", "text", "x\n").await;
    let (http, mut events) = connect(&client).await;
    // What is open reaches the agent without waiting for the user to move.
    let text = read_until(&mut events, "openFiles").await;
    let first = event_with(&text, "openFiles");
    let path_before = support::file_uri_to_path(&open_before);
    assert_eq!(
        first["params"]["workspaceState"]["openFiles"][0]["path"],
        path_before
    );

    let uri = client.open("a.txt", "text", "alpha beta\n").await;
    let path = support::file_uri_to_path(&uri);
    client.select(&uri, range(0, 6, 0, 10)).await;
    let text = read_until(&mut events, "selectedText").await;
    let update = event_with(&text, "selectedText");
    assert_eq!(update["method"], "ide/contextUpdate");
    let files = &update["params"]["workspaceState"]["openFiles"];
    assert_eq!(update["params"]["workspaceState"]["isTrusted"], true);
    assert_eq!(files[0]["path"], path);
    assert_eq!(files[0]["isActive"], true);
    assert_eq!(files[0]["selectedText"], "beta");
    assert_eq!(files[0]["cursor"], json!({"line": 1, "character": 11}));
    assert!(files[0]["timestamp"].as_u64().unwrap() > 0);

    // openDiff answers at once with no content; the review waits in the editor.
    let open = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "openDiff", "arguments": {"filePath": path, "newContent": "alpha gamma\n"}}});
    let (_, answer) = http.send("POST", &open.to_string(), "\"id\":2").await;
    let result = event_with(&answer, "\"id\":2");
    assert_eq!(result["result"]["content"], json!([]));
    client
        .take("textDocument/publishDiagnostics", |p| {
            p["uri"] == uri && p["diagnostics"].as_array().unwrap().len() == 1
        })
        .await;

    // Ending the session withdraws the review and clears its preview.
    http.send("DELETE", "", "HTTP/1.1 ").await;
    let cleared = tokio::time::timeout(
        Duration::from_secs(10),
        client.take("textDocument/publishDiagnostics", |p| {
            p["uri"] == uri && p["diagnostics"].as_array().unwrap().is_empty()
        }),
    )
    .await;
    assert!(cleared.is_ok(), "the review outlived its session");
    assert_eq!(client.server_state().await["reviews"], json!([]));
}

/// A companion agent that is killed sends no `DELETE`: once its event stream has been gone for
/// ten seconds (not sooner: time to reconnect), its session ends and its pending review is
/// withdrawn. The server runs in this process, and the ten seconds on tokio's paused clock
/// once the stream is dropped (nothing then waits on the network).
#[tokio::test]
async fn an_agent_whose_event_stream_is_gone_loses_its_session() {
    let client = TestClient::in_process().await;
    client
        .initialize(TestClient::rich_capabilities(false), None)
        .await;
    let uri = client.open("a.txt", "text", "alpha\n").await;
    let path = support::file_uri_to_path(&uri);
    let (http, events) = connect(&client).await;
    let open = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "openDiff", "arguments": {"filePath": path, "newContent": "gamma\n"}}});
    http.send("POST", &open.to_string(), "\"id\":2").await;
    client
        .take("textDocument/publishDiagnostics", |p| {
            p["uri"] == uri && p["diagnostics"].as_array().unwrap().len() == 1
        })
        .await;
    tokio::time::pause();
    let dropped_at = tokio::time::Instant::now();
    drop(events);
    client
        .take("textDocument/publishDiagnostics", |p| {
            p["uri"] == uri && p["diagnostics"].as_array().unwrap().is_empty()
        })
        .await;
    let waited = dropped_at.elapsed();
    assert!(
        (Duration::from_secs(10)..Duration::from_secs(11)).contains(&waited),
        "withdrawn {waited:?} after the stream was dropped"
    );
    assert_eq!(client.server_state().await["reviews"], json!([]));
    tokio::time::resume();
    assert!(client.shutdown().await.success());
}
