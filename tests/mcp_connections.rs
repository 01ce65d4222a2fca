//! Nobody on the machine can starve the terminal-agent ports: on the WebSocket and the Streamable
//! HTTP port alike, sockets that never present the token are closed once idle (or when they take
//! too long to get a request through), at most a fixed number of connections is open at once
//! (more are closed at once, with a log line), and a client that presented the token stays as
//! long as it likes. The limits are shortened for the test through `AGENTLS_TEST_MCP_LIMITS`.

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::mcp_client::{McpClient, lockfile};
use support::{Options, TestClient, WAIT};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// Connections a port takes at once, in this test.
const CAP: usize = 8;
/// How long a silent socket without the token lives, in this test.
const IDLE: Duration = Duration::from_millis(300);
const LIMITS: &str = "connections=8,handshake_ms=2000,idle_ms=300";

async fn started() -> TestClient {
    TestClient::start_initialized(Options {
        env: vec![("AGENTLS_TEST_MCP_LIMITS".into(), LIMITS.into())],
        ..Options::default()
    })
    .await
}

/// A raw connection to the port, and when it was opened.
async fn open(port: u16) -> (TcpStream, Instant) {
    let socket = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    (socket, Instant::now())
}

/// Waits until the server closes `socket` (end of stream or reset), reading what it sends
/// meanwhile; panics if it is still open after [`WAIT`].
async fn closed_by_server(socket: &mut TcpStream, what: &str) {
    let closed = tokio::time::timeout(WAIT, async {
        let mut buffer = [0u8; 1024];
        while let Ok(1..) = socket.read(&mut buffer).await {}
    })
    .await;
    assert!(closed.is_ok(), "{what} still open after {WAIT:?}");
}

/// Opens a connection, sends `hello` (a request with the token) and reads until the answer
/// contains `answered`; the connection stays open.
async fn greeted(port: u16, hello: &str, answered: &str) -> TcpStream {
    let (mut socket, _) = open(port).await;
    ask(&mut socket, hello, answered).await;
    socket
}

/// Sends `request` on `socket` and reads until the answer contains `answered`.
async fn ask(socket: &mut TcpStream, request: &str, answered: &str) {
    let seen = answer(socket, request, answered).await;
    assert!(seen.contains(answered), "no {answered:?} in {seen:?}");
}

/// What came back for `request` on `socket`, up to the first `answered` or the end of stream.
async fn answer(socket: &mut TcpStream, request: &str, answered: &str) -> String {
    let _ = socket.write_all(request.as_bytes()).await;
    let mut seen = Vec::new();
    let found = tokio::time::timeout(WAIT, async {
        let mut buffer = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains(answered) {
            match socket.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buffer[..n]),
            }
        }
    })
    .await;
    assert!(found.is_ok(), "no answer within {WAIT:?}");
    String::from_utf8_lossy(&seen).into_owned()
}

/// The limits of one port. `hello` is a request with the token whose connection stays open (the
/// answer contains `answered`); `works` shows that a real client, connected in the one slot the
/// silent sockets leave, is served.
async fn the_port_cannot_be_starved(
    client: &TestClient,
    port: u16,
    hello: &str,
    answered: &str,
    mut works: impl AsyncFnMut(),
) {
    // Silent sockets, no token, no bytes: a real client still gets in and is served…
    let mut silent = Vec::new();
    for _ in 1..CAP {
        silent.push(open(port).await);
    }
    works().await;
    // …and they are closed once idle (never sooner).
    for (socket, opened) in &mut silent {
        closed_by_server(socket, "a silent socket").await;
        assert!(opened.elapsed() >= IDLE, "closed before the idle timeout");
    }
    // The client that presented the token outlived the idle timeout.
    works().await;

    // With every slot held by clients with the token, one more connection is closed at once.
    let mut held = Vec::new();
    for _ in 1..CAP {
        held.push(greeted(port, hello, answered).await);
    }
    let (mut one_more, _) = open(port).await;
    closed_by_server(&mut one_more, "a connection over the cap").await;
    let refusal = format!("refused a connection: {CAP} are open already");
    assert!(client.stderr().contains(&refusal), "{}", client.stderr());
    // Slots given back take new clients (once the server has seen the sockets go).
    held.clear();
    let admitted = support::agents::eventually_async(|| async {
        let (mut socket, _) = open(port).await;
        answer(&mut socket, hello, answered)
            .await
            .contains(answered)
    })
    .await;
    assert!(admitted.is_some(), "no slot came free");

    // A socket that trickles a request it never finishes is closed too (the handshake timeout).
    let (mut trickling, _) = open(port).await;
    trickling.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
    let ended = tokio::time::timeout(WAIT, async {
        loop {
            if trickling.write_all(b"X-Slow: 1\r\n").await.is_err() {
                return;
            }
            let mut byte = [0u8; 1];
            let read = tokio::time::timeout(IDLE / 3, trickling.read(&mut byte)).await;
            if matches!(read, Ok(Ok(0) | Err(_))) {
                return;
            }
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "a trickling socket still open after {WAIT:?}"
    );
    works().await;
}

#[tokio::test]
async fn the_websocket_port_closes_silent_sockets_and_caps_connections() {
    let client = started().await;
    let lock = lockfile(&client.lock_dir()).await;
    let upgrade = format!(
        "GET / HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Protocol: mcp\r\nx-claude-code-ide-authorization: {}\r\n\r\n",
        lock.port,
        lock.token()
    );
    let mut agent = None;
    let works = async || {
        let agent = match &mut agent {
            Some(agent) => agent,
            None => agent.insert(McpClient::connect(&lock, "real agent").await),
        };
        let folders = agent.json("getWorkspaceFolders", json!({})).await;
        assert_eq!(folders["success"], true, "{folders}");
    };
    the_port_cannot_be_starved(
        &client,
        lock.port,
        &upgrade,
        "101 Switching Protocols",
        works,
    )
    .await;
    assert!(client.shutdown().await.success());
}

#[tokio::test]
async fn the_http_port_closes_silent_sockets_and_caps_connections() {
    let client = started().await;
    let env = client.terminal_env().await.unwrap();
    let port: u16 = env["GEMINI_CLI_IDE_SERVER_PORT"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let token = env["GEMINI_CLI_IDE_AUTH_TOKEN"].as_str().unwrap();
    // A request with the token on a connection kept alive (any path: the guard comes first).
    let hello = format!(
        "GET /other HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\r\n"
    );
    let mut agent: Option<TcpStream> = None;
    let works = async || match &mut agent {
        Some(socket) => ask(socket, &hello, "not found").await,
        None => agent = Some(greeted(port, &hello, "not found").await),
    };
    the_port_cannot_be_starved(&client, port, &hello, "not found", works).await;
    assert!(client.shutdown().await.success());
}
