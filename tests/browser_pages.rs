//! A real web page against agentls's loopback ports: headless Chromium loads a hostile page
//! (`tests/browser/hostile.html`) from another port of 127.0.0.1, and its script tries the IDE
//! WebSocket port (the lockfile's), the companion protocol's HTTP port and the editor-tools port
//! of an ACP session every way a page can: WebSockets with no token, a guessed one and the real
//! one (as if it leaked) in the query and the subprotocol; `fetch` POSTs of an MCP `initialize`
//! and a `tools/call` (`openFile`, `openDiff`) as text/plain and application/json, cors and
//! no-cors, with guessed and real bearer tokens; GETs that carry no `Origin`; a form; an image;
//! requests from a sandboxed frame (`Origin: null`); on 127.0.0.1, localhost, [::1] and a
//! foreign name Chromium resolves to 127.0.0.1 (what DNS rebinding gives a page). Before each
//! attempt the page marks its place with a request to its own server, so every line agentls
//! logs is matched to the attempt that caused it. Every attempt is refused (agentls says why,
//! attempt by attempt; [::1] finds nobody), no tool runs (the editor is asked to show nothing,
//! the agent's editor-tool counts stay empty), and real clients with the tokens are served
//! afterwards. The table of attempts is printed.
//!
//! Chromium comes from `AGENTLS_TEST_CHROMIUM` (`eval "$(scripts/test-tools.sh)"`). The test is
//! ignored without the feature `real-peers` (scripts/test.sh turns it on); with it, a missing
//! Chromium fails it.

mod support;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::mcp_client::McpClient;
use support::peers::{self, Sandbox};
use support::{Options, TestClient};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// A foreign name Chromium is told resolves to 127.0.0.1.
const REBOUND: &str = "rebound.example";

/// How long Chromium may take to start, load the page and go through every attempt.
const PAGE_TIMEOUT: Duration = Duration::from_secs(120);

/// What the page's own server keeps: the page, where agentls's log stood at each mark, and the
/// page's report.
struct PageServer {
    html: String,
    agentls_log: PathBuf,
    marks: Mutex<Vec<(usize, u64)>>,
    report: Mutex<Option<Value>>,
    reported: Notify,
}

/// Serves the page on `listener` until the test ends.
async fn serve(listener: TcpListener, page: Arc<PageServer>) {
    loop {
        let Ok((socket, _)) = listener.accept().await else {
            return;
        };
        tokio::spawn(answer(socket, Arc::clone(&page)));
    }
}

/// Answers one request (and closes the connection): `/` is the page, `/mark?i=N` notes where
/// agentls's log stands, `POST /report` is what the page saw.
async fn answer(mut socket: TcpStream, page: Arc<PageServer>) {
    let mut request = Vec::new();
    let mut buffer = [0u8; 8192];
    let head_end = loop {
        if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        match socket.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buffer[..n]),
        }
    };
    let head = String::from_utf8_lossy(&request[..head_end]).into_owned();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    while request.len() < head_end + length {
        match socket.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buffer[..n]),
        }
    }
    let body = &request[head_end..head_end + length];
    let target = head.split(' ').nth(1).unwrap_or("/");
    let (status, content_type, content) = if target == "/" {
        (200, "text/html", page.html.clone())
    } else if let Some(i) = target.strip_prefix("/mark?i=") {
        let logged = std::fs::metadata(&page.agentls_log).map_or(0, |m| m.len());
        page.marks
            .lock()
            .unwrap()
            .push((i.parse().unwrap_or(usize::MAX), logged));
        (200, "text/plain", "marked".to_owned())
    } else if target == "/report" {
        let report = serde_json::from_slice(body)
            .unwrap_or_else(|e| json!({"error": format!("unreadable report: {e}")}));
        *page.report.lock().unwrap() = Some(report);
        page.reported.notify_one();
        (200, "text/plain", "thanks".to_owned())
    } else {
        (404, "text/plain", "not found".to_owned())
    };
    let response = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nConnection: close\r\n\r\n{content}",
        content.len()
    );
    let _ = socket.write_all(response.as_bytes()).await;
    let _ = socket.shutdown().await;
}

/// The editor-tools URL's port and the bearer token the demo agent's first session was given.
fn editor_tools_grant(home: &Path) -> (u16, String) {
    let given = std::fs::read_to_string(home.join("mcp.jsonl")).unwrap();
    let first: Value = serde_json::from_str(given.lines().next().unwrap()).unwrap();
    let server = &first["mcpServers"][0];
    let port = server["url"]
        .as_str()
        .and_then(|url| url.strip_prefix("http://127.0.0.1:"))
        .and_then(|rest| rest.split('/').next())
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("no loopback URL in {server}"));
    let token = server["headers"][0]["value"]
        .as_str()
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_else(|| panic!("no bearer token in {server}"));
    (port, token.to_owned())
}

/// Why agentls refused, in a word, from one of its log lines.
fn refusal_reason(line: &str) -> &'static str {
    [
        ("carries an Origin header", "Origin"),
        ("no authorization token", "no token"),
        ("wrong authorization token", "wrong token"),
        ("loopback address", "Host"),
        ("not a WebSocket upgrade", "not an upgrade"),
    ]
    .into_iter()
    .find(|(needle, _)| line.contains(needle))
    .map_or("other", |(_, reason)| reason)
}

/// What agentls logs when a client got somewhere (a session began, a tool ran or failed).
const GOT_IN: [&str; 4] = [
    "terminal agent connected",
    "tool call",
    "editor tool failed",
    "MCP session",
];

/// Whether a line of agentls's log says a client got somewhere.
fn got_in(line: &str) -> bool {
    GOT_IN.iter().any(|m| line.contains(m))
}

/// One attempt as the page and agentls saw it.
struct Attempt {
    target: String,
    host: String,
    what: String,
    page: String,
    refusals: Vec<&'static str>,
    got_in: Vec<String>,
    /// agentls's log lines between this attempt's mark and the next.
    log: String,
}

impl Attempt {
    fn agentls(&self) -> String {
        if self.refusals.is_empty() {
            return "never reached it".to_owned();
        }
        let mut reasons = self.refusals.clone();
        reasons.dedup();
        let times = if self.refusals.len() > 1 {
            format!(" ×{}", self.refusals.len())
        } else {
            String::new()
        };
        format!("refused{times} ({})", reasons.join(", "))
    }
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[tokio::test]
async fn a_web_page_on_localhost_gets_nothing_from_either_port() {
    let chromium = peers::binary("AGENTLS_TEST_CHROMIUM", "Chromium");
    let started = Instant::now();
    let client = TestClient::start_initialized(Options {
        // Relative to the demo agent's working directory, the workspace: `<home>/mcp.jsonl`.
        env: vec![("AGENTLS_DEMO_RECORD_MCP".into(), "../mcp.jsonl".into())],
        ..Options::default()
    })
    .await;
    let uri = client
        .open("notes.txt", "text", "nothing to see here\n")
        .await;
    let notes = client.workspace.join("notes.txt").display().to_string();
    // The three ports and their tokens: the lockfile's, the companion file's (as a terminal's
    // environment names it), and a session's editor tools (given to the demo agent).
    let lock = client.lockfile().await;
    let (companion_port, companion_token) = client.companion_port().await;
    client.prompt("hello").await;
    client.take_message("demo: end_turn").await;
    let (tools_port, tools_token) = editor_tools_grant(client.home.path());

    // The page, and its own server on another port.
    let config = json!({
        "rebound": REBOUND,
        "targets": [
            {"name": "IDE WebSocket", "kind": "ws", "port": lock.port, "path": "/",
             "token": lock.token(), "tool": "openDiff",
             "arguments": {"old_file_path": notes, "new_file_path": notes,
                           "new_file_contents": "pwned\n", "tab_name": "evil"}},
            {"name": "companion HTTP", "kind": "http", "port": companion_port, "path": "/mcp",
             "token": companion_token, "tool": "openDiff",
             "arguments": {"filePath": notes, "newContent": "pwned\n"}},
            {"name": "editor tools HTTP", "kind": "http", "port": tools_port, "path": "/mcp",
             "token": tools_token, "tool": "openFile", "arguments": {"filePath": notes}},
        ],
    });
    let template = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/hostile.html"),
    )
    .unwrap();
    let agentls_log = client.home.path().join("agentls.stderr");
    let page = Arc::new(PageServer {
        html: template.replace("/*CONFIG*/null", &config.to_string()),
        agentls_log: agentls_log.clone(),
        marks: Mutex::default(),
        report: Mutex::default(),
        reported: Notify::new(),
    });
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let page_port = listener.local_addr().unwrap().port();
    tokio::spawn(serve(listener, Arc::clone(&page)));
    let before_page = std::fs::metadata(&agentls_log).unwrap().len() as usize;

    // Chromium loads it, headless, in a sandbox of its own.
    let sandbox = Sandbox::create();
    let chromium_log = sandbox.root.join("chromium.stderr");
    let mut command = tokio::process::Command::new(&chromium);
    sandbox.isolate(command.as_std_mut());
    command
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
        ])
        .arg(format!("--host-resolver-rules=MAP {REBOUND} 127.0.0.1"))
        .arg(format!(
            "--user-data-dir={}",
            sandbox.root.join("chromium").display()
        ))
        .arg(format!("http://127.0.0.1:{page_port}/"))
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(sandbox.root.join("chromium.stdout")).unwrap())
        .stderr(std::fs::File::create(&chromium_log).unwrap())
        .kill_on_drop(true);
    let mut browser = command.spawn().expect("spawn Chromium");
    let loaded = Instant::now();
    let reported = tokio::time::timeout(PAGE_TIMEOUT, page.reported.notified()).await;
    let page_took = loaded.elapsed();
    let _ = browser.kill().await;
    let report = page.report.lock().unwrap().take();
    let Some(Value::Array(seen)) = report.filter(|_| reported.is_ok()) else {
        panic!(
            "the page reported {:?} within {PAGE_TIMEOUT:?} (marks {:?})\n--- Chromium ---\n{}",
            page.report.lock().unwrap(),
            page.marks.lock().unwrap(),
            std::fs::read_to_string(&chromium_log).unwrap_or_default()
        );
    };

    // Each attempt, with agentls's log lines between its mark and the next.
    let log = std::fs::read(&agentls_log).unwrap();
    let marks: std::collections::BTreeMap<usize, usize> = page
        .marks
        .lock()
        .unwrap()
        .iter()
        .map(|&(i, at)| (i, at as usize))
        .collect();
    let attempts: Vec<Attempt> = seen
        .iter()
        .map(|a| {
            let i = a["i"].as_u64().unwrap() as usize;
            let (from, to) = (marks[&i], marks[&(i + 1)]);
            let lines = String::from_utf8_lossy(&log[from..to]).into_owned();
            Attempt {
                target: a["target"].as_str().unwrap().to_owned(),
                host: a["host"].as_str().unwrap().to_owned(),
                what: a["attempt"].as_str().unwrap().to_owned(),
                page: a["page"].as_str().unwrap().to_owned(),
                refusals: lines
                    .lines()
                    .filter(|l| l.contains("refused"))
                    .map(refusal_reason)
                    .collect(),
                got_in: lines
                    .lines()
                    .filter(|l| got_in(l))
                    .map(str::to_owned)
                    .collect(),
                log: lines,
            }
        })
        .collect();
    let mut table = format!(
        "{:<18} {:<16} {:<58} {:<34} agentls\n",
        "port", "host", "attempt", "page saw"
    );
    for a in &attempts {
        table.push_str(&format!(
            "{:<18} {:<16} {:<58} {:<34} {}\n",
            a.target,
            a.host,
            a.what,
            a.page,
            a.agentls()
        ));
    }
    println!(
        "{} attempts by a page on 127.0.0.1:{page_port}, {page_took:.1?} in Chromium:\n{table}",
        attempts.len()
    );
    let whole_log = String::from_utf8_lossy(&log[before_page..]).into_owned();
    let context = format!("{table}\n--- agentls's log while the page ran ---\n{whole_log}");

    // Every attempt failed in the page; agentls refused each one that reached it, and only
    // [::1] (where nothing listens) did not. A page never got past the Origin rule, or for a
    // request without one, the Host rule or the token.
    assert!(
        attempts.len() >= 60,
        "only {} attempts\n{context}",
        attempts.len()
    );
    for a in &attempts {
        let row = format!("{} {} {}", a.target, a.host, a.what);
        let failed = ["OPEN", "LOADED", "STATUS 2"]
            .iter()
            .all(|success| !a.page.starts_with(success));
        assert!(failed, "{row}: the page saw {}\n{context}", a.page);
        assert!(a.got_in.is_empty(), "{row}: {:?}\n{context}", a.got_in);
        if a.host == "[::1]" {
            assert!(a.refusals.is_empty(), "{row} reached agentls\n{context}");
            assert!(
                a.page.contains("failed") || a.page.contains("error"),
                "{row}"
            );
        } else {
            assert!(!a.refusals.is_empty(), "{row}: not refused\n{context}");
            assert!(!a.refusals.contains(&"other"), "{row}\n{context}");
            if a.what.contains("sandboxed") {
                assert!(a.log.contains("Origin header (null)"), "{row}\n{context}");
            }
            if a.host == REBOUND {
                let expected = if a.what.contains("no Origin") {
                    "Host"
                } else {
                    "Origin"
                };
                assert!(a.refusals.contains(&expected), "{row}\n{context}");
            }
        }
    }
    let entered: Vec<&str> = whole_log.lines().filter(|l| got_in(l)).collect();
    assert!(entered.is_empty(), "{entered:#?}\n{context}");
    // No tool ran: the editor was asked for nothing, the agent's tool counts are empty.
    for method in ["window/showDocument", "workspace/applyEdit"] {
        assert_eq!(client.received(method), Vec::<Value>::new(), "{context}");
    }
    let status = client.agent_status().await;
    let demo = &status["agents"][0];
    assert_eq!(demo["name"], "demo", "{status}");
    assert_eq!(demo["editorTools"]["offered"]["sessions"], 1, "{status}");
    let used = &demo["editorTools"]["used"];
    assert!(
        used.is_null() || used == &json!({}),
        "tools used: {used}\n{context}"
    );

    // Real clients with the tokens are served afterwards, and a tool that ran would have shown.
    let agent = McpClient::connect(&lock, "real agent").await;
    let folders = agent.json("getWorkspaceFolders", json!({})).await;
    assert_eq!(folders["success"], true, "{folders}");
    agent.close().await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "real agent", "version": "1"}}});
    let (status, body) =
        support::http::post_with_token(companion_port, &companion_token, &initialize).await;
    assert_eq!(status, 200, "{body}");
    let open = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "openFile", "arguments": {"filePath": notes}}});
    let (status, body) = support::http::post_with_token(tools_port, &tools_token, &open).await;
    assert_eq!(status, 200, "{body}");
    client
        .take("window/showDocument", |p| p["uri"] == uri.as_str())
        .await;
    println!("the whole test: {:.1?}", started.elapsed());
    assert!(client.shutdown().await.success());
}
