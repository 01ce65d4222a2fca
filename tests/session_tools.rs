//! The editor's tools offered to ACP sessions (issue 12), through the real binary and the
//! built-in demo agent: every `session/new` carries agentls's MCP server in the transport the
//! agent advertises (HTTP, else stdio through `agentls mcp-bridge`); the demo agent (`@tools`)
//! calls each tool and says what it got, the diagnostics the editor forwarded among it; the
//! turn's summary, `agentls.status` and `agentls doctor` say the tools were offered and used;
//! `editorTools = false` turns them off. And who is refused: a request without the token or
//! with a wrong one, a token of another agentls, a token of a session that ended, a request
//! with an `Origin` or a foreign `Host`, and a peer that is not on the loopback interface.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::agents::path_of;
use support::{Options, TestClient, range};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const DIAGNOSTIC: &str = "unused variable `answer`";

/// agentls with the demo agent (its env `env`, its table's extra lines `more`), the MCP
/// servers it is given recorded in `<home>/mcp.jsonl`; initialized, `notes.txt` open with a
/// diagnostic forwarded from another language server.
async fn started(env: &[(&str, &str)], more: &str) -> (TestClient, String) {
    let mut all_env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    // Relative to the agent's working directory, the workspace: `<home>/mcp.jsonl`.
    all_env.push(("AGENTLS_DEMO_RECORD_MCP".into(), "../mcp.jsonl".into()));
    let toml = format!(
        "[agents.demo]\ncommand = {:?}\nargs = [\"demo-agent\"]\n{more}",
        env!("CARGO_BIN_EXE_agentls")
    );
    let client = TestClient::start(Options {
        config_toml: Some(toml),
        env: all_env,
        ..Options::default()
    })
    .await;
    client
        .initialize(TestClient::rich_capabilities(false), None)
        .await;
    let uri = client.open("notes.txt", "text", "let answer = 42;\n").await;
    let diagnostic = json!({"range": range(0, 4, 0, 10), "severity": 2, "message": DIAGNOSTIC,
                            "source": "mock-analyzer"});
    client
        .notify(
            "agentls/didChangeDiagnostics",
            json!({"uri": uri, "diagnostics": [diagnostic]}),
        )
        .await;
    (client, uri)
}

/// The MCP servers each session was given, in order: (session id, servers).
fn given(client: &TestClient) -> Vec<(String, Value)> {
    let path = client.home.path().join("mcp.jsonl");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| {
            (
                v["session"].as_str().unwrap().to_owned(),
                v["mcpServers"].clone(),
            )
        })
        .collect()
}

/// Waits until `n` sessions were given servers.
async fn sessions_given(client: &TestClient, n: usize) -> Vec<(String, Value)> {
    support::eventually(|| given(client).len() >= n)
        .await
        .unwrap_or_else(|| panic!("{} sessions given servers, not {n}", given(client).len()));
    given(client)
}

/// The demo agent uses every tool and reports it; returns the turn's log.
async fn uses_every_tool(client: &TestClient) -> (String, String) {
    let notes = client.workspace.join("notes.txt");
    client.prompt(&format!("@tools {}", notes.display())).await;
    let summary = client.take_message("demo: end_turn").await;
    let log = client.shown_until("_demo: end_turn").await;
    (summary, log)
}

fn line_of<'a>(log: &'a str, start: &str) -> &'a str {
    log.lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line {start:?} in:\n{log}"))
}

#[tokio::test]
async fn an_agent_that_takes_http_uses_every_tool_and_the_user_is_told() {
    let (client, uri) = started(&[], "").await;
    let (summary, log) = uses_every_tool(&client).await;
    assert!(
        log.contains(
            "I was offered 7 editor tools over http: getDiagnostics, openFile, \
             getCurrentSelection, getLatestSelection, getOpenEditors, getWorkspaceFolders, \
             checkDocumentDirty."
        ),
        "{log}"
    );
    let diagnostics = line_of(&log, "editor tool getDiagnostics: ");
    assert!(diagnostics.contains(DIAGNOSTIC), "{diagnostics}");
    assert!(diagnostics.contains("mock-analyzer"), "{diagnostics}");
    let notes = path_of(&uri).display().to_string();
    let editors = line_of(&log, "editor tool getOpenEditors: ");
    assert!(editors.contains(&notes), "{editors}");
    let folders = line_of(&log, "editor tool getWorkspaceFolders: ");
    assert!(
        folders.contains(&client.workspace.display().to_string()),
        "{folders}"
    );
    let dirty = line_of(&log, "editor tool checkDocumentDirty: ");
    assert!(dirty.contains("\"isDirty\":false"), "{dirty}");
    let opened = line_of(&log, "editor tool openFile: ");
    assert!(opened.contains("Opened file"), "{opened}");
    client
        .take("window/showDocument", |p| p["uri"] == uri.as_str())
        .await;
    // What it opened is attributed to it (in the log, which may come after the chat's end).
    client
        .shown_until(&format!("demo: editor tool openFile {notes}"))
        .await;
    assert!(
        summary.contains(
            "editor tools: checkDocumentDirty ×1, getCurrentSelection ×1, getDiagnostics ×1, \
             getLatestSelection ×1, getOpenEditors ×1, getWorkspaceFolders ×1, openFile ×1"
        ),
        "{summary}"
    );
    // The server offered is the session's own: HTTP with a bearer token, on loopback.
    let sessions = sessions_given(&client, 1).await;
    let server = &sessions[0].1[0];
    assert_eq!(server["type"], "http");
    assert_eq!(server["name"], "agentls");
    assert!(
        server["url"]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:"),
        "{server}"
    );
    assert_eq!(server["headers"][0]["name"], "Authorization");

    let status = client.agent_status().await;
    let demo = status["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "demo")
        .unwrap()
        .clone();
    assert_eq!(demo["editorTools"]["enabled"], true);
    assert_eq!(
        demo["editorTools"]["offered"],
        json!({"transport": "http", "sessions": 1})
    );
    assert_eq!(demo["editorTools"]["used"]["getDiagnostics"], 1);

    let doctor = doctor(&client);
    assert!(
        doctor.contains(&format!(
            "editor tools (agentls pid {}, running): demo: offered over http in 1 session; \
             used checkDocumentDirty ×1",
            client.pid()
        )),
        "{doctor}"
    );
    assert!(
        doctor.contains("  editor tools: on (agentls's MCP server is offered"),
        "{doctor}"
    );
    assert!(client.shutdown().await.success());
}

/// An agent offered the editor tools that ends a turn without having reached them is told
/// about once, with its `toolsHint` (a known agent's comes from agentls's table); one that
/// reached them hears nothing.
#[tokio::test]
async fn an_agent_that_never_reaches_the_tools_is_told_why_once() {
    let hint = "toolsHint = \"it trusts no folder\"\n";
    let told = |client: &TestClient| {
        client
            .received("window/showMessage")
            .iter()
            .map(|m| {
                m["params"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (client, _) = started(&[], hint).await;
    for _ in 0..2 {
        client.prompt("hello").await;
        client.take_message("demo: end_turn").await;
    }
    let shown = told(&client);
    assert_eq!(shown.matches("it trusts no folder").count(), 1, "{shown}");
    assert!(
        shown.contains("agentls: demo has not connected to agentls's editor tools"),
        "{shown}"
    );
    assert!(client.shutdown().await.success());

    let (client, _) = started(&[], hint).await;
    uses_every_tool(&client).await;
    client.prompt("hello").await;
    client.take_message("demo: end_turn").await;
    let shown = told(&client);
    assert!(!shown.contains("it trusts no folder"), "{shown}");
    assert!(client.shutdown().await.success());
}

#[tokio::test]
async fn an_agent_that_takes_only_stdio_gets_the_bridge() {
    let (client, _uri) = started(&[("AGENTLS_DEMO_MCP", "stdio")], "").await;
    let (summary, log) = uses_every_tool(&client).await;
    assert!(
        log.contains("I was offered 7 editor tools over stdio"),
        "{log}"
    );
    let diagnostics = line_of(&log, "editor tool getDiagnostics: ");
    assert!(diagnostics.contains(DIAGNOSTIC), "{diagnostics}");
    assert!(summary.contains("getDiagnostics ×1"), "{summary}");
    let sessions = sessions_given(&client, 1).await;
    let server = &sessions[0].1[0];
    assert_eq!(server["command"], env!("CARGO_BIN_EXE_agentls"));
    assert_eq!(server["args"][0], "mcp-bridge");
    // The token travels in the environment, never on a command line.
    assert_eq!(server["env"][0]["name"], "AGENTLS_MCP_TOKEN");
    let token = server["env"][0]["value"].as_str().unwrap();
    assert!(!server["args"].to_string().contains(token));
    assert!(client.shutdown().await.success());
}

#[tokio::test]
async fn editor_tools_false_offers_nothing() {
    let (client, _uri) = started(&[], "editorTools = false\n").await;
    let (summary, log) = uses_every_tool(&client).await;
    assert!(log.contains("I was offered no editor tools."), "{log}");
    assert!(!summary.contains("editor tools:"), "{summary}");
    assert_eq!(sessions_given(&client, 1).await[0].1, json!([]));
    let status = client.agent_status().await;
    assert_eq!(status["agents"][0]["editorTools"]["enabled"], false);
    assert_eq!(status["agents"][0]["editorTools"]["offered"], Value::Null);
    let doctor = doctor(&client);
    assert!(
        doctor.contains("  editor tools: off (editorTools = false)"),
        "{doctor}"
    );
    assert!(
        doctor.contains("editor tools: not offered to any agent yet"),
        "{doctor}"
    );
    assert!(client.shutdown().await.success());
}

/// `agentls doctor` with the client's HOME and config.
fn doctor(client: &TestClient) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentls"))
        .arg("doctor")
        .env("HOME", client.home.path())
        .env("XDG_CONFIG_HOME", client.home.path().join("config"))
        .env_remove("XDG_STATE_HOME")
        .env_remove("AGENTLS_CONFIG")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

// ---- Who is refused ----

/// One raw HTTP exchange with the session server: the status and the body.
async fn post(url: &str, headers: &[(&str, &str)], body: &Value) -> (u16, String) {
    let authority = url
        .strip_prefix("http://")
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    support::http::post_to(&authority, &authority, headers, body).await
}

fn call_diagnostics() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
           "params": {"name": "getDiagnostics", "arguments": {}}})
}

/// The URL and token a session was given over HTTP.
fn http_grant(servers: &Value) -> (String, String) {
    let server = &servers[0];
    let token = server["headers"][0]["value"]
        .as_str()
        .unwrap()
        .strip_prefix("Bearer ")
        .unwrap()
        .to_owned();
    (server["url"].as_str().unwrap().to_owned(), token)
}

async fn status_with(url: &str, token: Option<&str>) -> (u16, String) {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = bearer
        .iter()
        .map(|b| ("Authorization", b.as_str()))
        .collect();
    post(url, &headers, &call_diagnostics()).await
}

/// A local address of this machine that is not loopback (where the default route leaves).
fn non_loopback_address() -> Option<std::net::IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("198.51.100.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[tokio::test]
async fn only_a_live_session_token_from_loopback_gets_in() {
    let (client, _uri) = started(&[], "").await;
    let other = started(&[], "").await.0;
    // A session here, one in another agentls.
    client.prompt("hello").await;
    client.take_message("demo: end_turn").await;
    other.prompt("hello").await;
    other.take_message("demo: end_turn").await;
    let (first_url, first) = http_grant(&sessions_given(&client, 1).await[0].1);
    let (_, elsewhere) = http_grant(&sessions_given(&other, 1).await[0].1);
    let url = first_url.as_str();

    let (status, body) = status_with(url, Some(&first)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(DIAGNOSTIC), "{body}");
    // Also as structured content, an object (clients refuse an array there).
    let answer: Value = serde_json::from_str(&body).unwrap();
    let structured = &answer["result"]["structuredContent"]["result"][0]["diagnostics"][0];
    assert_eq!(structured["message"], DIAGNOSTIC, "{body}");

    // Another process on the machine: no token, a wrong one, another agentls's session's.
    assert_eq!(status_with(url, None).await.0, 401);
    assert_eq!(status_with(url, Some("0123456789abcdef")).await.0, 401);
    let (status, body) = status_with(url, Some(&elsewhere)).await;
    assert_eq!((status, body.as_str()), (401, "wrong authorization token"));
    assert!(!body.contains(DIAGNOSTIC));
    // A web page (it has an Origin), DNS rebinding (a foreign Host).
    let bearer = format!("Bearer {first}");
    let with_origin = [
        ("Authorization", bearer.as_str()),
        ("Origin", "https://evil.example"),
    ];
    assert_eq!(post(url, &with_origin, &call_diagnostics()).await.0, 403);
    let authority = url
        .strip_prefix("http://")
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    let port = authority.rsplit_once(':').unwrap().1;
    let rebound = support::http::post_to(
        authority,
        &format!("evil.example:{port}"),
        &[("Authorization", bearer.as_str())],
        &call_diagnostics(),
    )
    .await;
    assert_eq!(rebound.0, 403);
    // A peer that is not on loopback cannot even connect: the server listens on 127.0.0.1.
    let outside = non_loopback_address().expect("this machine has no non-loopback address");
    let refused = tokio::net::TcpStream::connect((outside, port.parse::<u16>().unwrap())).await;
    assert!(refused.is_err(), "connected from {outside}");

    // A second session has a token of its own; the first one's still works (a chat holds it).
    client
        .execute("agentls.newSession", json!({"agent": "demo"}))
        .await
        .unwrap();
    client.take_message("demo: new session").await;
    let (_, second) = http_grant(&sessions_given(&client, 2).await[1].1);
    assert_ne!(second, first);
    assert_eq!(status_with(url, Some(&second)).await.0, 200);
    assert_eq!(status_with(url, Some(&first)).await.0, 200);
    // The agent dies: its sessions end, and their tokens with them.
    client.prompt("@crash").await;
    client.take_message("demo: turn failed").await;
    for token in [&first, &second] {
        let (status, body) = status_with(url, Some(token)).await;
        assert_eq!((status, body.as_str()), (401, "wrong authorization token"));
    }
    assert!(other.shutdown().await.success());
    assert!(client.shutdown().await.success());
}

#[tokio::test]
async fn the_bridge_answers_a_refused_request_with_an_error() {
    let (client, _uri) = started(&[], "").await;
    client.prompt("hello").await;
    client.take_message("demo: end_turn").await;
    let (url, _) = http_grant(&sessions_given(&client, 1).await[0].1);
    let mut bridge = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentls"))
        .args(["mcp-bridge", &url])
        .env("AGENTLS_MCP_TOKEN", "0123456789abcdef0123456789abcdef")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = bridge.stdin.take().unwrap();
    stdin
        .write_all(format!("{}\n", call_diagnostics()).as_bytes())
        .await
        .unwrap();
    drop(stdin);
    let mut out = String::new();
    let mut stdout = bridge.stdout.take().unwrap();
    tokio::time::timeout(support::WAIT, stdout.read_to_string(&mut out))
        .await
        .unwrap()
        .unwrap();
    let answer: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(answer["id"], 1);
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("401"), "{message}");
    assert!(!out.contains(DIAGNOSTIC));
    let exited = tokio::time::timeout(Duration::from_secs(5), bridge.wait()).await;
    assert!(exited.unwrap().unwrap().success());
    assert!(client.shutdown().await.success());
}

/// A session `agentls.newSession` made and another replaced as current before any prompt
/// took it up is freed once nothing keeps it (no chat, no turn, no question), while a chat's
/// session with its turn running stays: the replaced one's editor-tools token is refused from
/// then on, and the sessions do not pile up however often this is done.
#[tokio::test]
async fn sessions_nothing_can_reach_are_freed_with_their_tokens() {
    const ROUNDS: usize = 30;
    let (client, _uri) = started(&[], "").await;
    // A turn long enough to be running while the new sessions replace one another.
    client.prompt("@flood 200 hello").await;
    for _ in 0..ROUNDS {
        client
            .execute("agentls.newSession", json!({}))
            .await
            .unwrap();
    }
    let given = sessions_given(&client, ROUNDS + 1).await;
    // Two are left: the one the prompt's chat talks to (the first) and the current one (the
    // last).
    let kept = support::agents::eventually_async(|| async {
        let status = client.agent_status().await;
        status["agents"][0]["sessions"].as_array().unwrap().len() == 2
    })
    .await;
    let status = client.agent_status().await;
    assert!(kept.is_some(), "kept after {ROUNDS} rounds: {status:#}");
    let (url, chats) = http_grant(&given[0].1);
    let (_, replaced) = http_grant(&given[1].1);
    let (refused, body) = status_with(&url, Some(&replaced)).await;
    assert_eq!((refused, body.as_str()), (401, "wrong authorization token"));
    let (_, current) = http_grant(&given[ROUNDS].1);
    for live in [chats, current] {
        assert_eq!(status_with(&url, Some(&live)).await.0, 200);
    }
    assert!(client.shutdown().await.success());
}
