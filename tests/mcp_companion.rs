//! The Streamable HTTP companion protocol with the real Gemini CLI (npm `@google/gemini-cli`,
//! pinned in scripts/test-tools.sh), interactive in a pseudo-terminal, offline against the mock
//! Gemini API: it must find agentls's discovery file, connect with the bearer token, send its
//! write as `openDiff`, and take the verdict from `ide/diffAccepted` after the user accepts the
//! review with agentls's code action.
//!
//! Node and the CLI come from `AGENTLS_TEST_NODE` / `AGENTLS_TEST_GEMINI`. The test is ignored
//! without the feature `real-peers` (scripts/test.sh turns it on); with it, a missing peer fails
//! it.

mod support;

use serde_json::{Value, json};
use support::mock_llm::{Gemini, MockLlm};
use support::peers;
use support::terminal_agent::{self, Session};
use support::{Options, TestClient, file_uri};

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_writes_through_an_accepted_review() {
    let node = peers::binary("AGENTLS_TEST_NODE", "Node");
    let gemini = peers::binary("AGENTLS_TEST_GEMINI", "Gemini CLI");
    let client = TestClient::start_initialized(Options::default()).await;
    let env = client.terminal_env().await.unwrap();
    let target = client.workspace.join("hello.txt");
    let uri = file_uri(&target);
    let mock = MockLlm::start(Gemini::write_file(&target, "hello from gemini\n")).await;
    let home = client.home.path().join("gemini-home");
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    let settings = json!({
        "privacy": {"usageStatisticsEnabled": false},
        "ide": {"enabled": true, "hasSeenNudge": true},
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": false}},
        "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
    });
    std::fs::write(home.join(".gemini/settings.json"), settings.to_string()).unwrap();

    let mut command = terminal_agent::command(&node, &client, &home);
    command
        .arg(&gemini)
        .args(["-m", "gemini-2.5-flash"])
        .env("TMPDIR", client.home.path().join("tmp"))
        .env("GEMINI_API_KEY", "dummy")
        .env("GOOGLE_GEMINI_BASE_URL", mock.url())
        .env("GEMINI_CLI_NO_RELAUNCH", "true")
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
        // Inside a container the CLI looks for its IDE at host.docker.internal unless it
        // believes it runs over SSH; the test machine may well be a container.
        .env("SSH_CONNECTION", "127.0.0.1 50000 127.0.0.1 22");
    let mut session = Session::connect("gemini", &client, &mock, command, &env).await;
    session
        .type_prompt("Type your message", "write hello.txt")
        .await;

    session.accept_review(&uri, "write").await;
    let response = session
        .sent_to_model("functionResponse", || {
            mock.requests().iter().find_map(|r| {
                let body: Value = r.json();
                let last = body["contents"].as_array()?.last()?.clone();
                let parts = last["parts"].as_array()?.clone();
                parts
                    .into_iter()
                    .find_map(|p| p.get("functionResponse").cloned())
            })
        })
        .await;
    assert!(
        response["response"].get("error").is_none(),
        "{}",
        session.report(&format!("the write failed: {response}"))
    );
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "hello from gemini\n"
    );
    let stderr = client.stderr();
    assert!(
        stderr.contains("tool call tool=openDiff"),
        "{}",
        session.report("no openDiff")
    );
}
