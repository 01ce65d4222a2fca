//! What may not reach the terminal-agent socket, and the lockfile's life: requests without the
//! token, with a wrong one, from a web page (Origin), through another Host name, plain HTTP,
//! oversized frames and malformed JSON are all refused, and the server keeps serving; the
//! discovery files go away on SIGTERM, SIGINT and SIGHUP (and the agents stop), and stale ones
//! of dead servers are cleaned at start; a discovery directory others could tamper with gets no
//! file (the server serves on).

mod support;

use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use support::mcp_client::{McpClient, read_locks, websocket};
use support::processes::runs;
use support::{Options, TestClient};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_tungstenite::tungstenite::Message;

const UPGRADE: &str = "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
                       Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: mcp\r\n";

/// Sends a raw HTTP request to 127.0.0.1:`port`; the status code of the answer (0 if none).
async fn status(port: u16, request: String) -> u16 {
    let mut socket = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut answer = vec![0; 4096];
    let n = tokio::time::timeout(support::WAIT, socket.read(&mut answer))
        .await
        .expect("an answer")
        .unwrap_or(0);
    let head = String::from_utf8_lossy(&answer[..n]);
    head.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn request(host: &str, extra: &str) -> String {
    format!("GET / HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n")
}

#[tokio::test]
async fn only_the_token_holder_from_loopback_may_connect() {
    let client = TestClient::start_initialized(Options::default()).await;
    let lock = client.lockfile().await;
    let (port, token) = (lock.port, lock.token());
    let host = format!("127.0.0.1:{port}");
    let auth = format!("x-claude-code-ide-authorization: {token}\r\n");

    // The well-formed upgrade is accepted (101), as a control.
    assert_eq!(
        status(port, request(&host, &format!("{UPGRADE}{auth}"))).await,
        101
    );
    // No token, a wrong token, a token with an Origin, another Host name: 4xx, no socket.
    assert_eq!(status(port, request(&host, UPGRADE)).await, 401);
    let wrong = "x-claude-code-ide-authorization: 00000000000000000000000000000000\r\n";
    assert_eq!(
        status(port, request(&host, &format!("{UPGRADE}{wrong}"))).await,
        401
    );
    let origin = format!("{UPGRADE}{auth}Origin: https://evil.example\r\n");
    assert_eq!(status(port, request(&host, &origin)).await, 403);
    let rebound = format!("evil.example:{port}");
    assert_eq!(
        status(port, request(&rebound, &format!("{UPGRADE}{auth}"))).await,
        403
    );
    let other_port = format!("127.0.0.1:{}", port.wrapping_add(1));
    assert_eq!(
        status(port, request(&other_port, &format!("{UPGRADE}{auth}"))).await,
        403
    );
    // Plain HTTP, even with the token: not a socket.
    let plain = status(port, request(&host, &auth)).await;
    assert!((400..500).contains(&plain), "plain GET got {plain}");
    let post = format!("POST / HTTP/1.1\r\nHost: {host}\r\n{auth}Content-Length: 2\r\n\r\n{{}}");
    let posted = status(port, post).await;
    assert!((400..500).contains(&posted), "POST got {posted}");

    let stderr = client.stderr();
    assert!(
        stderr.contains("refused a request (wrong token): wrong authorization token"),
        "{stderr}"
    );
    assert!(stderr.contains("Origin"), "{stderr}");

    // Still serving.
    let mcp = McpClient::connect(&lock, "after").await;
    assert_eq!(
        mcp.json("getWorkspaceFolders", json!({})).await["success"],
        true
    );
    assert!(!stderr.contains(&token), "the token never reaches the log");
}

#[tokio::test]
async fn the_http_endpoint_wants_the_bearer_token_and_our_host() {
    let client = TestClient::start_initialized(Options::default()).await;
    let (port, token) = client.companion_port().await;
    let token = token.as_str();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string();
    let post = |host: String, extra: String| {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\n{extra}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let host = format!("127.0.0.1:{port}");
    let bearer = format!("Authorization: Bearer {token}\r\n");
    assert_eq!(status(port, post(host.clone(), bearer.clone())).await, 200);
    assert_eq!(status(port, post(host.clone(), String::new())).await, 401);
    let wrong = "Authorization: Bearer 0000\r\n".to_owned();
    assert_eq!(status(port, post(host.clone(), wrong)).await, 401);
    let origin = format!("{bearer}Origin: http://evil.example\r\n");
    assert_eq!(status(port, post(host.clone(), origin)).await, 403);
    assert_eq!(
        status(port, post(format!("evil.example:{port}"), bearer.clone())).await,
        403
    );
    let other = format!("GET /other HTTP/1.1\r\nHost: {host}\r\n{bearer}\r\n");
    assert_eq!(status(port, other).await, 404);
    client.server_state().await;
}

#[tokio::test]
async fn malformed_frames_get_errors_and_oversized_ones_close_only_that_socket() {
    let client = TestClient::start_initialized(Options::default()).await;
    let lock = client.lockfile().await;

    let mut socket = websocket(lock.port, &lock.token()).await;
    socket.send(Message::Text("{nope".into())).await.unwrap();
    let answer = next_json(&mut socket).await;
    assert_eq!(answer["error"]["code"], -32700);
    socket
        .send(Message::Text(r#"{"hello": 1}"#.into()))
        .await
        .unwrap();
    assert_eq!(next_json(&mut socket).await["error"]["code"], -32600);
    // The same socket still speaks MCP.
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    socket
        .send(Message::Text(initialize.to_string().into()))
        .await
        .unwrap();
    let answer = next_json(&mut socket).await;
    assert_eq!(answer["id"], 1);
    assert_eq!(answer["result"]["protocolVersion"], "2025-11-25");

    // A frame over the limit (16 MiB) ends that socket.
    let huge = "x".repeat(17 << 20);
    let _ = socket.send(Message::Text(huge.into())).await;
    let closed = tokio::time::timeout(support::WAIT, async {
        loop {
            match socket.next().await {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "oversized frame did not close the socket");

    // Others are served as before, and so is the editor.
    let mcp = McpClient::connect(&lock, "after").await;
    assert_eq!(
        mcp.json("getWorkspaceFolders", json!({})).await["success"],
        true
    );
    client.server_state().await;
    assert!(client.stderr().contains("refused a frame: not JSON"));
}

/// Calls sent without waiting, before and after `initialize` is answered: `initialize` is
/// answered first; the calls agentls answers in the socket's own task (no `_meta`) say what
/// rmcp's way says for the same call (with `_meta`), and a bad frame between them changes
/// nothing.
#[tokio::test]
async fn calls_answered_at_once_match_rmcps_answers_and_follow_initialize() {
    let client = TestClient::start_initialized(Options::default()).await;
    let lock = client.lockfile().await;
    let mut socket = websocket(lock.port, &lock.token()).await;
    let call = |id: u64, tool: &str, meta: bool| {
        let mut params = json!({"name": tool, "arguments": {}});
        if meta {
            params["_meta"] = json!({});
        }
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let frames = [
        initialize,
        call(2, "getWorkspaceFolders", false),
        initialized,
        call(3, "getWorkspaceFolders", true),
    ];
    send_all(&mut socket, frames).await;
    assert_eq!(next_json(&mut socket).await["id"], 1, "initialize first");
    let frames = [
        call(4, "getWorkspaceFolders", false),
        call(5, "getCurrentSelection", false),
        call(6, "getCurrentSelection", true),
        call(7, "getLatestSelection", false),
        call(8, "getLatestSelection", true),
    ];
    send_all(&mut socket, frames).await;
    socket.send(Message::Text("{nope".into())).await.unwrap();
    let mut answers = std::collections::BTreeMap::new();
    let mut refused = 0;
    while answers.len() < 7 || refused < 1 {
        let answer = next_json(&mut socket).await;
        match answer["id"].as_u64() {
            Some(id) => assert!(answers.insert(id, answer["result"].clone()).is_none()),
            None => {
                assert_eq!(answer["error"]["code"], -32700, "{answer}");
                refused += 1;
            }
        }
    }
    let folders = &answers[&2];
    assert_eq!(folders["isError"], false, "{folders}");
    let text = folders["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap()["success"],
        true
    );
    for (id, same) in [(3, 2), (4, 2), (6, 5), (8, 7)] {
        assert_eq!(answers[&id], answers[&same], "answers {id} and {same}");
    }
    client.server_state().await;
}

/// Sends each of `frames` as a text frame, in order, without waiting for answers.
async fn send_all<S>(socket: &mut S, frames: impl IntoIterator<Item = Value>)
where
    S: futures::Sink<Message> + Unpin,
    S::Error: std::fmt::Debug,
{
    for frame in frames {
        socket
            .send(Message::Text(frame.to_string().into()))
            .await
            .unwrap();
    }
}

async fn next_json<S>(socket: &mut S) -> Value
where
    S: futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    loop {
        let frame = tokio::time::timeout(support::WAIT, socket.next())
            .await
            .expect("a frame in time")
            .expect("socket open")
            .expect("a frame");
        if let Message::Text(text) = frame {
            return serde_json::from_str(text.as_str()).unwrap();
        }
    }
}

/// The companion protocol's discovery file, once the server has written it.
async fn companion_file(client: &TestClient) -> std::path::PathBuf {
    let dir = client.home.path().join("tmp/gemini/ide");
    let find = || {
        std::fs::read_dir(&dir)
            .ok()?
            .map(|e| e.ok().map(|e| e.path()))
            .find(|p| {
                p.as_ref()
                    .is_some_and(|p| p.extension().is_some_and(|e| e == "json"))
            })
            .flatten()
    };
    support::eventually(|| find().is_some())
        .await
        .unwrap_or_else(|| panic!("no companion discovery file in {}", dir.display()));
    find().unwrap()
}

/// `signal` ends the server: it exits, its agent with it, and neither discovery file is left.
async fn terminated_by(signal: &str) {
    let mut client = TestClient::start_initialized(Options::default()).await;
    let lock = client.lockfile().await;
    let companion = companion_file(&client).await;
    // An agent in the middle of a turn.
    client.prompt("@hang").await;
    client.shown_until("Waiting until you cancel").await;
    let agent = client
        .agent_pid("demo")
        .await
        .expect("a running demo agent");
    let killed = std::process::Command::new("kill")
        .args([signal, &client.pid().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = client.wait_exit().await;
    assert!(!status.success(), "a signalled server exits non-zero");
    assert!(!lock.path.exists(), "lockfile left behind after {signal}");
    assert!(
        !companion.exists(),
        "companion file left behind after {signal}"
    );
    support::eventually(|| !runs(agent))
        .await
        .unwrap_or_else(|| panic!("agent {agent} outlived the server after {signal}"));
}

#[tokio::test]
async fn sigterm_removes_the_lockfile() {
    terminated_by("-TERM").await;
}

#[tokio::test]
async fn sigint_removes_the_lockfile() {
    terminated_by("-INT").await;
}

/// Emacs ends its language server with SIGHUP (to its process group), and so does a closed
/// terminal: the same clean stop as SIGTERM.
#[tokio::test]
async fn sighup_removes_the_lockfile() {
    terminated_by("-HUP").await;
}

#[tokio::test]
async fn stale_lockfiles_of_ours_are_cleaned_at_start_and_others_kept() {
    let config = tempfile::tempdir().unwrap();
    let dir = config.path().join("ide");
    std::fs::create_dir_all(&dir).unwrap();
    // pids above any pid_max never run.
    let dead = json!({"pid": 2_000_000_000u32, "workspaceFolders": [], "ideName": "agentls",
                      "transport": "ws", "runningInWindows": false, "authToken": "x"});
    std::fs::write(dir.join("1.lock"), dead.to_string()).unwrap();
    let mut foreign = dead.clone();
    foreign["ideName"] = json!("Some Other IDE");
    std::fs::write(dir.join("2.lock"), foreign.to_string()).unwrap();
    let options = Options {
        env: vec![(
            "CLAUDE_CONFIG_DIR".into(),
            config.path().display().to_string(),
        )],
        ..Options::default()
    };
    let client = TestClient::start_initialized(options).await;
    support::eventually(|| read_locks(&dir).len() == 2 && !dir.join("1.lock").exists())
        .await
        .expect("the stale lockfile of ours is removed, ours written");
    assert!(
        dir.join("2.lock").exists(),
        "another IDE's file is not ours to clean"
    );
    let ours = read_locks(&dir)
        .into_iter()
        .find(|l| l.json["pid"] == client.pid())
        .expect("our lockfile in CLAUDE_CONFIG_DIR/ide");
    assert!(!client.lock_dir().exists(), "nothing written under HOME");

    // doctor shows both, alive and dead.
    let doctor = std::process::Command::new(env!("CARGO_BIN_EXE_agentls"))
        .arg("doctor")
        .env("HOME", client.home.path())
        .env("CLAUDE_CONFIG_DIR", config.path())
        .output()
        .unwrap();
    let report = String::from_utf8(doctor.stdout).unwrap();
    let ours_line = format!(
        "lockfile {}: agentls, pid {} alive",
        ours.path.display(),
        client.pid()
    );
    assert!(report.contains(&ours_line), "{report}");
    assert!(
        report.contains("Some Other IDE, pid 2000000000 DEAD (stale)"),
        "{report}"
    );
    assert!(client.shutdown().await.success());
    assert!(!ours.path.exists());
}

#[tokio::test]
async fn a_shared_discovery_directory_others_may_swap_gets_no_file() {
    use std::os::unix::fs::PermissionsExt as _;
    // `$TMPDIR/gemini` made by someone else, writable by everyone and not sticky: whoever can
    // write there can replace `ide` after we check it. No token goes there.
    let tmp = tempfile::tempdir().unwrap();
    let gemini = tmp.path().join("gemini");
    std::fs::create_dir(&gemini).unwrap();
    std::fs::set_permissions(&gemini, std::fs::Permissions::from_mode(0o777)).unwrap();
    let client = TestClient::start_initialized(Options {
        env: vec![("TMPDIR".into(), tmp.path().display().to_string())],
        ..Options::default()
    })
    .await;
    // The lockfile (in a directory of ours) is written, and agents connect.
    let lock = client.lockfile().await;
    McpClient::connect(&lock, "agent").await.close().await;
    let ide = gemini.join("ide");
    let files: Vec<_> = std::fs::read_dir(&ide)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    assert!(files.is_empty(), "a token in a shared directory: {files:?}");
    let stderr = client.stderr();
    assert!(
        stderr.contains("no companion discovery file: refusing")
            && stderr.contains("every user may write"),
        "{stderr}"
    );
    // Agents started in our terminals still get everything from their environment.
    let env = client.terminal_env().await.unwrap();
    assert!(env["GEMINI_CLI_IDE_AUTH_TOKEN"].is_string(), "{env}");
    assert!(client.shutdown().await.success());
}

#[tokio::test]
async fn mcp_can_be_turned_off() {
    let client = TestClient::start_initialized(Options {
        config_toml: Some("[mcp]\nenabled = false\n".into()),
        ..Options::default()
    })
    .await;
    // The server says it serves no terminal agents; it wrote no discovery file to say so.
    let env = client.terminal_env().await.unwrap_err();
    assert!(
        env["message"].as_str().unwrap().contains("mcp.enabled"),
        "{env}"
    );
    assert!(read_locks(&client.lock_dir()).is_empty());
}
