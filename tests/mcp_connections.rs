//! Nobody on the machine can starve the terminal-agent ports: on the WebSocket and the Streamable
//! HTTP ports alike, a socket that does not present the token in time is closed; one account has
//! only its own share of the places such sockets wait in (so another account's reconnect loop
//! keeps none of the user's clients out, and its refusals are logged a line per kind per minute);
//! at most a fixed number of admitted connections is open at once (one more client with the
//! token is told so); and a client that presented the token stays as long as it likes, between
//! its requests: one that stops in the middle of a request (its head, or a body shorter than it
//! announced) is closed after the stall limit, on both HTTP ports (the companion protocol's and
//! the editor tools' of ACP sessions). The limits are shortened for most tests through
//! `AGENTLS_TEST_MCP_LIMITS`; the one with a second account and the slow client's run with the
//! real ones.

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::intruder::{self, Intruder};
use support::mcp_client::McpClient;
use support::{Options, TestClient, WAIT};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// Admitted connections a port takes at once, in this test.
const CAP: usize = 8;
/// Connections of one account that may wait to present the token, in this test.
const SHARE: usize = 4;
/// How long a socket without the token lives, in this test.
const HANDSHAKE: Duration = Duration::from_millis(300);
const LIMITS: &str = "connections=8,waiting_per_account=4,handshake_ms=300";

async fn started() -> TestClient {
    TestClient::start_initialized(Options {
        env: vec![("AGENTLS_TEST_MCP_LIMITS".into(), LIMITS.into())],
        ..Options::default()
    })
    .await
}

/// A raw connection to the port, and when it was opened: taken before connecting, so that
/// the server's accept (where its timers start) is never before it, however late this task
/// runs again after the connect.
async fn open(port: u16) -> (TcpStream, Instant) {
    let opened = Instant::now();
    let socket = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    (socket, opened)
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
/// answer contains `answered`); `works` shows that a real client is served.
async fn the_port_cannot_be_starved(
    client: &TestClient,
    port: u16,
    hello: &str,
    answered: &str,
    mut works: impl AsyncFnMut(),
) {
    // Silent sockets, no token, no bytes: a real client still gets in and is served…
    let mut silent = Vec::new();
    for _ in 1..SHARE {
        silent.push(open(port).await);
    }
    works().await;
    // …and they are closed at the handshake deadline (never sooner).
    for (socket, opened) in &mut silent {
        closed_by_server(socket, "a silent socket").await;
        assert!(opened.elapsed() >= HANDSHAKE, "closed before the deadline");
    }
    // The client that presented the token outlived the deadline.
    works().await;

    // One account has SHARE places to wait in: one more of its sockets is closed at once.
    let mut waiting = Vec::new();
    for _ in 0..SHARE {
        waiting.push(open(port).await);
    }
    let (mut extra, _) = open(port).await;
    closed_by_server(&mut extra, "a socket over its account's share").await;
    let share_taken = "refused a connection (its account's share is taken)";
    assert!(client.stderr().contains(share_taken), "{}", client.stderr());
    for (socket, _) in &mut waiting {
        closed_by_server(socket, "a waiting socket").await;
    }

    // With every slot held by clients with the token, one more is told so.
    let mut held = Vec::new();
    for _ in 1..CAP {
        held.push(greeted(port, hello, answered).await);
    }
    let (mut one_more, _) = open(port).await;
    let refused = answer(&mut one_more, hello, "open already").await;
    assert!(refused.contains(" 503 "), "{refused}");
    let full = format!("refused a connection (every slot is taken): {CAP} connections");
    assert!(client.stderr().contains(&full), "{}", client.stderr());
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

    // A socket that trickles a request it never finishes is closed too (the deadline).
    let (mut trickling, _) = open(port).await;
    trickling.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
    let ended = tokio::time::timeout(WAIT, async {
        loop {
            if trickling.write_all(b"X-Slow: 1\r\n").await.is_err() {
                return;
            }
            let mut byte = [0u8; 1];
            let read = tokio::time::timeout(HANDSHAKE / 3, trickling.read(&mut byte)).await;
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
    let lock = client.lockfile().await;
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
    let (port, token) = client.companion_port().await;
    let token = token.as_str();
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

/// A client whose first request comes a while after it connected is served with the real
/// limits: an agent starting up on a busy machine connects, then does not run again for a
/// while (CI saw the Gemini CLI's connection cut at 500 ms; it then asked in its terminal
/// instead of the editor).
#[tokio::test]
async fn a_client_slow_to_send_its_first_request_is_served() {
    let client = TestClient::start_initialized(Options::default()).await;
    let (port, token) = client.companion_port().await;
    let (mut socket, _) = open(port).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    ask(&mut socket, &kept_alive(port, &token), "not found").await;
    assert!(client.shutdown().await.success());
}

/// How long a client may stop in the middle of a request, in the stalled-request test.
const STALL: Duration = Duration::from_millis(1000);

/// A request with the token on a kept-alive connection, answered 404 (the guard comes first).
fn kept_alive(port: u16, token: &str) -> String {
    format!(
        "GET /other HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
}

/// The head of an MCP POST with the token, announcing a body `framing` describes.
fn post_head(port: u16, token: &str, framing: &str) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         {framing}\r\n\r\n"
    )
}

/// Clients with the token that stop in the middle of a request on one HTTP port: a body of
/// 1,000 bytes of which 10 arrive, a chunk of 100 of which 10 arrive, and, on a connection
/// kept alive after a first answer, half the head of a second request. Another client is
/// served all the while; the stalled ones are closed after the stall limit, not before; a
/// client idle between its requests for longer than that keeps its connection.
async fn stalled_requests_are_closed(port: u16, token: &str) {
    let hello = kept_alive(port, token);
    let mut in_body = open(port).await.0;
    let mut request = post_head(port, token, "Content-Length: 1000");
    request.push_str("{\"jsonrpc\"");
    in_body.write_all(request.as_bytes()).await.unwrap();
    let mut in_chunk = open(port).await.0;
    let mut request = post_head(port, token, "Transfer-Encoding: chunked");
    request.push_str("64\r\n{\"jsonrpc\"");
    in_chunk.write_all(request.as_bytes()).await.unwrap();
    let mut in_head = greeted(port, &hello, "not found").await;
    let half = format!("GET /other HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n");
    in_head.write_all(half.as_bytes()).await.unwrap();
    let stalled_at = Instant::now();
    let mut idle = greeted(port, &hello, "not found").await;
    // Served while they stall.
    let mut good = greeted(port, &hello, "not found").await;
    let mut slowest = Duration::ZERO;
    while stalled_at.elapsed() < STALL {
        let asked = Instant::now();
        ask(&mut good, &hello, "not found").await;
        slowest = slowest.max(asked.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        slowest < Duration::from_secs(2),
        "served slowly: {slowest:?}"
    );
    for (socket, what) in [
        (&mut in_body, "a body"),
        (&mut in_chunk, "a chunk"),
        (&mut in_head, "a request's head"),
    ] {
        closed_by_server(socket, &format!("a client stalled in {what}")).await;
        let after = stalled_at.elapsed();
        assert!(after >= STALL, "closed after {after:?}, before the limit");
    }
    // Idle between requests for longer than the limit: still served.
    tokio::time::sleep(STALL.saturating_sub(stalled_at.elapsed())).await;
    ask(&mut idle, &hello, "not found").await;
}

/// The editor tools' port and the token of the demo agent's first session, which is given them
/// (the client runs with `AGENTLS_DEMO_RECORD_MCP=../mcp.jsonl`).
async fn editor_tools_port(client: &TestClient) -> (u16, String) {
    client.prompt("hello").await;
    client.take_message("demo: end_turn").await;
    let record = client.home.path().join("mcp.jsonl");
    let given = std::fs::read_to_string(&record).unwrap();
    let first: serde_json::Value = serde_json::from_str(given.lines().next().unwrap()).unwrap();
    let server = &first["mcpServers"][0];
    let url = server["url"].as_str().unwrap();
    let port: u16 = url
        .strip_prefix("http://127.0.0.1:")
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{server}"));
    let bearer = server["headers"][0]["value"].as_str().unwrap();
    (port, bearer.strip_prefix("Bearer ").unwrap().to_owned())
}

#[tokio::test]
async fn the_http_ports_close_clients_stalled_in_the_middle_of_a_request() {
    let client = TestClient::start_initialized(Options {
        env: vec![
            (
                "AGENTLS_TEST_MCP_LIMITS".into(),
                format!("stall_ms={}", STALL.as_millis()),
            ),
            // Relative to the demo agent's working directory, the workspace.
            ("AGENTLS_DEMO_RECORD_MCP".into(), "../mcp.jsonl".into()),
        ],
        ..Options::default()
    })
    .await;
    // The companion protocol's port.
    let (port, token) = client.companion_port().await;
    let token = token.as_str();
    stalled_requests_are_closed(port, token).await;
    let (port, token) = editor_tools_port(&client).await;
    stalled_requests_are_closed(port, &token).await;
    let logged = client.stderr();
    assert!(
        logged.contains("in the middle of a request"),
        "no log line says why"
    );
    assert!(client.shutdown().await.success());
}

/// How long a whole request may take, in the trickle test.
const MESSAGE: Duration = Duration::from_millis(2000);

/// A client with the token that trickles a request, a byte every 200 ms (never stalling for
/// the stall limit), is closed once the request has taken longer than the whole-message limit,
/// not before; one that finishes its request in time is answered.
#[tokio::test]
async fn a_client_trickling_a_request_is_closed_after_the_message_limit() {
    let client = TestClient::start_initialized(Options {
        env: vec![(
            "AGENTLS_TEST_MCP_LIMITS".into(),
            format!(
                "stall_ms={},message_ms={}",
                STALL.as_millis(),
                MESSAGE.as_millis()
            ),
        )],
        ..Options::default()
    })
    .await;
    let (port, token) = client.companion_port().await;
    let mut trickle = open(port).await.0;
    let head = post_head(port, &token, "Content-Length: 1000");
    trickle.write_all(head.as_bytes()).await.unwrap();
    let began = Instant::now();
    let closed = loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if trickle.write_all(b" ").await.is_err() {
            break began.elapsed();
        }
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_millis(1), trickle.read(&mut byte)).await;
        if let Ok(Ok(0) | Err(_)) = read {
            break began.elapsed();
        }
        assert!(began.elapsed() < WAIT, "a trickling client is never closed");
    };
    assert!(
        closed >= MESSAGE,
        "closed after {closed:?}, before the limit"
    );
    let logged = client.stderr();
    assert!(
        logged.contains("a request still incomplete"),
        "no log line says why: {logged}"
    );
    // A request that comes whole in time is answered on the same port.
    let hello = kept_alive(port, &token);
    greeted(port, &hello, "not found").await;
    assert!(client.shutdown().await.success());
}

/// The longest the intruder hammers the ports; it stops when the user's clients are done.
const HAMMERED: u32 = 30;

/// Another local account that holds every connection it can get on all three ports, and
/// reconnects the moment one is closed, with the real limits: the user's clients with the token
/// get in every time (20 of 20 on each port), and what was refused is logged a line per kind,
/// not a line per attempt.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs root to run a second account (CI runs it with --features real-peers)"
)]
#[tokio::test]
async fn another_account_cannot_lock_the_users_clients_out() {
    assert!(
        intruder::can_run(),
        "this test runs as root (to start a second account)"
    );
    let client = TestClient::start_initialized(Options {
        env: vec![("AGENTLS_DEMO_RECORD_MCP".into(), "../mcp.jsonl".into())],
        ..Options::default()
    })
    .await;
    let lock = client.lockfile().await;
    let (companion, companion_token) = client.companion_port().await;
    let (tools, tools_token) = editor_tools_port(&client).await;
    let mut intruder = Intruder::hammer(&[lock.port, companion, tools], HAMMERED);
    // It holds all it can get (a connection of it was refused) before the user's clients come.
    let filled = support::eventually(|| client.stderr().contains("refused a connection"));
    assert!(filled.await.is_some(), "the intruder was never refused");
    let started = Instant::now();
    for _ in 0..20 {
        let agent = McpClient::connect(&lock, "the user's agent").await;
        let folders = agent.json("getWorkspaceFolders", json!({})).await;
        assert_eq!(folders["success"], true, "{folders}");
        drop(agent);
        let hello = kept_alive(companion, companion_token.as_str());
        greeted(companion, &hello, "not found").await;
        let hello = kept_alive(tools, &tools_token);
        greeted(tools, &hello, "not found").await;
    }
    assert!(
        !intruder.has_ended(),
        "the 60 handshakes outlasted the attack ({:?}): they did not all run under it",
        started.elapsed()
    );
    let opened = intruder.stop().await;
    assert!(
        opened > 1000,
        "the intruder opened only {opened} connections"
    );
    let refusals = client
        .stderr()
        .lines()
        .filter(|l| l.contains(" WARN ") && (l.contains("refused a") || l.contains("closed a")))
        .count();
    // A kind per port at most, and at most two lines of a kind in the attack's few seconds.
    assert!(
        refusals <= 3 * 5,
        "{refusals} log lines for {opened} refused connections:\n{}",
        client.stderr()
    );
    assert!(client.shutdown().await.success());
}
