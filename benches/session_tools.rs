//! One `getDiagnostics` tool call's round trip through the editor tools ACP sessions are
//! offered (stateless MCP over HTTP with a session token), against the same call over the
//! terminal-agent WebSocket, in the same run: 1,000 sequential calls each, median of 5 runs.
//! The HTTP side is measured twice: on one kept-alive connection (what agents' HTTP clients do)
//! and with a new connection per call (what `agentls mcp-bridge` does for stdio agents).
//! Prints totals, per-call times and the ratios.
//!
//! Run: `cargo bench --bench session_tools`

#[path = "common/ide_socket.rs"]
mod ide_socket;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use agentls::editor::documents::effects::{Diagnostic, Level};
use agentls::editor::tool_grants::Transport;
use agentls::editor::{Origin, Position, Range};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use ide_socket::{connect, initialize, round_trip};
use serde_json::json;

const CALLS: usize = 1_000;
const RUNS: usize = 5;

fn main() {
    let config = tempfile::tempdir().expect("temp dir");
    // SAFETY: set before the runtime starts any thread.
    unsafe {
        std::env::set_var("CLAUDE_CONFIG_DIR", config.path());
        std::env::set_var("TMPDIR", config.path());
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(run());
}

fn call(id: usize) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "getDiagnostics", "arguments": {}}})
    .to_string()
}

async fn run() {
    let (editor, feed, _effects) = agentls::editor::start();
    let path = PathBuf::from("/bench/src/main.rs");
    feed.opened(path.clone(), "fn main() {}\n".repeat(20), 1, "rust".into());
    let diagnostics = (0..5)
        .map(|i| Diagnostic {
            range: Range::new(Position::new(i, 3), Position::new(i, 7)),
            level: Level::Warning,
            message: format!("function `main` is defined {i} times"),
            code: Some("E0428".into()),
            source: Some("rust-analyzer".into()),
        })
        .collect();
    feed.diagnostics_forwarded(path, diagnostics);

    let server = agentls::mcp::McpServer::start(editor.clone())
        .await
        .expect("MCP server");
    let mut socket = connect(server.port(), server.token().as_str()).await;
    initialize(&mut socket).await;

    let (_stop, stopped) = tokio::sync::watch::channel(false);
    editor.serve_tools_with(Box::new(move |editor| {
        let stopped = stopped.clone();
        Box::pin(async move {
            agentls::mcp::granted::start(editor, stopped)
                .await
                .map_err(|e| e.to_string())
        })
    }));
    let origin = Origin::new("acp:bench:s1", "bench");
    let grant = editor
        .grant_tools("bench", origin, Transport::Http)
        .await
        .expect("grant");
    let mut http = KeptAlive::connect(&grant.url(), grant.token().as_str()).await;
    let poster = agentls::mcp::bridge::Poster::new(&grant.url(), grant.token().as_str()).unwrap();

    // The same answer on both sides (the HTTP one also carries it as structuredContent).
    let over_socket = round_trip(&mut socket, call(1)).await;
    let over_http = http.post(call(1)).await;
    assert!(over_socket.contains("defined 4 times"), "{over_socket}");
    assert!(over_http.contains("defined 4 times"), "{over_http}");

    let (mut on_socket, mut kept, mut fresh) = (Vec::new(), Vec::new(), Vec::new());
    let mut id = 2;
    for _ in 0..RUNS {
        let started = Instant::now();
        for _ in 0..CALLS {
            round_trip(&mut socket, call(id)).await;
            id += 1;
        }
        on_socket.push(started.elapsed());
        let started = Instant::now();
        for _ in 0..CALLS {
            http.post(call(id)).await;
            id += 1;
        }
        kept.push(started.elapsed());
        let started = Instant::now();
        for _ in 0..CALLS {
            poster.post(&call(id)).await.unwrap();
            id += 1;
        }
        fresh.push(started.elapsed());
    }
    let (on_socket, kept, fresh) = (median(on_socket), median(kept), median(fresh));
    println!(
        "session_tools: {CALLS} getDiagnostics calls, median of {RUNS} runs, answer {} bytes",
        over_http.len()
    );
    let per_call = |d: Duration| d.as_secs_f64() * 1e6 / CALLS as f64;
    println!(
        "  terminal-agent WebSocket (one socket):        {:>7.1} ms total, {:>6.1} µs per call",
        ms(on_socket),
        per_call(on_socket)
    );
    println!(
        "  session tools, HTTP, one kept-alive connection: {:>5.1} ms total, {:>6.1} µs per call",
        ms(kept),
        per_call(kept)
    );
    println!(
        "  session tools, HTTP, a connection per call:   {:>7.1} ms total, {:>6.1} µs per call",
        ms(fresh),
        per_call(fresh)
    );
    println!(
        "  ratio: {:.2}x the WebSocket call (kept-alive HTTP), {:.2}x (a connection per call)",
        kept.as_secs_f64() / on_socket.as_secs_f64(),
        fresh.as_secs_f64() / on_socket.as_secs_f64()
    );
    server.stop();
}

/// One HTTP/1.1 connection to the session tools, kept alive between calls.
struct KeptAlive {
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    authority: String,
    bearer: String,
}

impl KeptAlive {
    async fn connect(url: &str, token: &str) -> Self {
        let authority = url
            .strip_prefix("http://")
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .to_owned();
        let stream = tokio::net::TcpStream::connect(&authority).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let io = hyper_util::rt::TokioIo::new(stream);
        let (sender, connection) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(connection);
        Self {
            sender,
            authority,
            bearer: format!("Bearer {token}"),
        }
    }

    async fn post(&mut self, body: String) -> String {
        let request = hyper::Request::post("/mcp")
            .header("host", &self.authority)
            .header("authorization", &self.bearer)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .body(Full::new(Bytes::from(body)))
            .unwrap();
        self.sender
            .ready()
            .await
            .expect("the connection stays open");
        let response = self.sender.send_request(request).await.unwrap();
        assert!(response.status().is_success(), "{}", response.status());
        let body = response.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(body.to_vec()).unwrap()
    }
}

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
