//! The real `claude` CLI (npm `@anthropic-ai/claude-code`, pinned in scripts/test-tools.sh) as a
//! terminal agent beside agentls: offline against the mock Anthropic API, interactive in a
//! pseudo-terminal (it connects to an IDE only then). It must find agentls's lockfile, connect,
//! send its Write through `openDiff`, which the user accepts with agentls's code action, write
//! the accepted text, and ask agentls for diagnostics.
//!
//! The CLI comes from `AGENTLS_TEST_CLAUDE`. The tests are ignored without the feature
//! `real-peers` (scripts/test.sh turns it on); with it, a missing CLI fails them.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::intruder::{self, Intruder};
use support::mcp_client::lockfile;
use support::mock_llm::{Anthropic, MockLlm};
use support::peers;
use support::terminal_agent::{self, Session};
use support::{Options, TestClient, file_uri, range};

const API_KEY: &str = "sk-ant-api03-agentls-test-key-0123456789abcdefghij";

/// A config dir the CLI accepts without questions: onboarding done, the key approved, the
/// workspace trusted.
fn seed_config(config: &std::path::Path, workspace: &std::path::Path) {
    std::fs::create_dir_all(config).unwrap();
    let last20 = &API_KEY[API_KEY.len() - 20..];
    let mut projects = serde_json::Map::new();
    projects.insert(
        workspace.display().to_string(),
        json!({"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true,
               "allowedTools": []}),
    );
    let settings = json!({
        "hasCompletedOnboarding": true,
        "theme": "dark",
        "customApiKeyResponses": {"approved": [last20], "rejected": []},
        "projects": projects,
        "autoConnectIde": true,
    });
    std::fs::write(config.join(".claude.json"), settings.to_string()).unwrap();
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_writes_through_an_accepted_review_and_reads_diagnostics() {
    writes_through_an_accepted_review(None).await;
}

/// The same while another local account holds every connection to the port it can get (and
/// reconnects the moment one is closed): the CLI still finds agentls and its Write is reviewed.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs root to run a second account (CI runs it with --features real-peers)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_gets_in_while_another_account_hammers_the_port() {
    assert!(
        intruder::can_run(),
        "this test runs as root (to start a second account)"
    );
    writes_through_an_accepted_review(Some(HAMMERED)).await;
}

/// How long the intruder hammers the port, in seconds: longer than the CLI takes to connect.
const HAMMERED: u32 = 40;

/// The CLI connects, its Write is accepted in the editor and lands, and it reads diagnostics;
/// with `hammered`, an intruder holds connections to the port from before the CLI starts until
/// that many seconds later.
async fn writes_through_an_accepted_review(hammered: Option<u32>) {
    let claude = peers::binary("AGENTLS_TEST_CLAUDE", "claude");
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("claude-config");
    let client = TestClient::start_initialized(Options {
        env: vec![("CLAUDE_CONFIG_DIR".into(), config.display().to_string())],
        ..Options::default()
    })
    .await;
    let lock = lockfile(&config.join("ide")).await;
    seed_config(&config, &client.workspace);

    // The editor knows a diagnostic the agent should be able to read.
    let existing = client.open("main.rs", "rust", "fn main() {}\n").await;
    let diagnostic = json!({"range": range(0, 3, 0, 7), "severity": 1, "message": "mock error",
                            "source": "mock-analyzer"});
    client
        .notify(
            "agentls/didChangeDiagnostics",
            json!({"uri": existing, "diagnostics": [diagnostic]}),
        )
        .await;

    let target = client.workspace.join("hello.txt");
    let uri = file_uri(&target);
    let mock = MockLlm::start(Anthropic::write_file(&target, "hello from claude\n")).await;
    let env = client.terminal_env().await.unwrap();
    assert_eq!(env["CLAUDE_CODE_SSE_PORT"], lock.port.to_string());

    let mut command = terminal_agent::command(&claude, &client, home.path());
    // Ask before writing (auto mode would write without a review).
    command
        .args(["--permission-mode", "default"])
        .env("CLAUDE_CONFIG_DIR", &config)
        .env("ANTHROPIC_BASE_URL", mock.url())
        .env("ANTHROPIC_API_KEY", API_KEY)
        .env("ENABLE_TOOL_SEARCH", "false")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("IS_SANDBOX", "1");
    let intruder = hammered.map(|seconds| Intruder::hammer(&[lock.port], seconds));
    if intruder.is_some() {
        let refused = support::eventually(|| client.stderr().contains("refused a connection"));
        assert!(refused.await.is_some(), "the intruder was never refused");
    }
    let mut session = Session::connect("claude", &client, &mock, command, &env).await;
    // The CLI routes its writes to `openDiff` only once it holds its IDE connection as
    // connected, and only then shows the editor's file in its footer: a prompt it took before
    // (a loaded machine lets it read the keys before the tool list) wrote without a review. A
    // selection it gets before it listens is lost, so the cursor moves until the footer shows.
    let mut column = 0u32;
    loop {
        client
            .select(&existing, range(0, column % 2, 0, column % 2))
            .await;
        if session.shows("main.rs", Duration::from_secs(1)).await {
            break;
        }
        column += 1;
        assert!(
            column < 60,
            "{}",
            session.report("the CLI never showed main.rs")
        );
    }
    session.type_prompt("main.rs", "write hello.txt").await;

    // The Write arrives as a review; the user accepts it in the editor.
    session.accept_review(&uri, "Write").await;

    // The CLI takes FILE_SAVED, the model sees the tool result, and the turn ends.
    let result = session
        .sent_to_model("tool_result", || {
            mock.requests_to("/v1/messages").iter().find_map(|r| {
                let body: Value = r.json();
                let last = body["messages"].as_array()?.last()?.clone();
                let content = last["content"].as_array()?;
                content.iter().find(|b| b["type"] == "tool_result").cloned()
            })
        })
        .await;
    assert_ne!(
        result["is_error"],
        true,
        "{}",
        session.report(&format!("the Write failed: {result}"))
    );
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "hello from claude\n"
    );
    // Each call is logged as it arrives; the CLI need not make them before its next request.
    for tool in ["openDiff", "close_tab", "getDiagnostics"] {
        let called =
            support::eventually(|| client.stderr().contains(&format!("tool={tool}"))).await;
        assert!(
            called.is_some(),
            "{}",
            session.report(&format!("no {tool} call"))
        );
    }
    if let Some(mut intruder) = intruder {
        assert!(
            !intruder.has_ended(),
            "the intruder stopped before the CLI was done"
        );
    }
    drop(session);
}
