//! The Streamable HTTP companion protocol with the real Gemini CLI (npm `@google/gemini-cli`,
//! pinned in scripts/test-tools.sh), interactive in a pseudo-terminal, offline against the mock
//! Gemini API: it must find agentls's discovery file, connect with the bearer token, send its
//! write as `openDiff`, and take the verdict from `ide/diffAccepted` after the user accepts the
//! review with agentls's code action.
//!
//! Node and the CLI come from `AGENTLS_TEST_NODE` / `AGENTLS_TEST_GEMINI`; without them the test
//! skips with a message, except under CI, where a missing peer is a failure.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use support::mock_llm::{Gemini, MockLlm};
use support::pty::Pty;
use support::{Options, TestClient, file_uri, range};

fn peer() -> Option<(PathBuf, PathBuf)> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
    };
    match (var("AGENTLS_TEST_NODE"), var("AGENTLS_TEST_GEMINI")) {
        (Some(node), Some(gemini)) => Some((node, gemini)),
        _ if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("Gemini CLI missing under CI: set AGENTLS_TEST_GEMINI (scripts/test-tools.sh)")
        }
        _ => {
            eprintln!(
                "SKIPPED mcp_companion: AGENTLS_TEST_GEMINI is not set; run scripts/test-tools.sh"
            );
            None
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_writes_through_an_accepted_review() {
    let Some((node, gemini)) = peer() else { return };
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

    let mut command = std::process::Command::new(&node);
    command
        .arg(&gemini)
        .args(["-m", "gemini-2.5-flash"])
        .current_dir(&client.workspace)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("TMPDIR", client.home.path().join("tmp"))
        .env("TERM", "xterm-256color")
        .env("GEMINI_API_KEY", "dummy")
        .env("GOOGLE_GEMINI_BASE_URL", mock.url())
        .env("GEMINI_CLI_NO_RELAUNCH", "true")
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
        // Inside a container the CLI looks for its IDE at host.docker.internal unless it
        // believes it runs over SSH; the test machine may well be a container.
        .env("SSH_CONNECTION", "127.0.0.1 50000 127.0.0.1 22");
    for (name, value) in env.as_object().unwrap() {
        command.env(name, value.as_str().unwrap());
    }
    let mut pty = Pty::spawn(&mut command);
    let report = |pty: &Pty, what: &str| -> String {
        format!(
            "{what}\n---- screen ----\n{}\n---- mock ----\n{}\n---- agentls ----\n{}",
            pty.screen(),
            mock.summary(),
            client.stderr()
        )
    };
    let connected =
        support::eventually(|| client.stderr().contains("terminal agent connected")).await;
    assert!(
        connected.is_some(),
        "{}",
        report(&pty, "gemini never connected")
    );
    tokio::time::sleep(Duration::from_millis(2000)).await;
    pty.type_text("write hello.txt");
    tokio::time::sleep(Duration::from_millis(300)).await;
    pty.type_text("\r");

    let previewed = support::eventually(|| {
        client
            .received("textDocument/publishDiagnostics")
            .iter()
            .any(|m| {
                m["params"]["uri"] == uri
                    && m["params"]["diagnostics"].as_array().unwrap().len() == 1
            })
    })
    .await;
    assert!(
        previewed.is_some(),
        "{}",
        report(&pty, "no review for the write")
    );
    let params = json!({"textDocument": {"uri": uri}, "range": range(0, 0, 0, 0),
                        "context": {"diagnostics": []}});
    let actions = client
        .request("textDocument/codeAction", params)
        .await
        .unwrap();
    let accept = actions
        .as_array()
        .unwrap()
        .iter()
        .find(|a| {
            a["title"]
                .as_str()
                .unwrap()
                .starts_with("Accept all changes")
        })
        .unwrap_or_else(|| panic!("no accept action in {actions:#}"))
        .clone();
    client
        .request("workspace/executeCommand", accept["command"].clone())
        .await
        .unwrap();
    let response = || {
        mock.requests().iter().find_map(|r| {
            let body: Value = r.json();
            let last = body["contents"].as_array()?.last()?.clone();
            let parts = last["parts"].as_array()?.clone();
            parts
                .into_iter()
                .find_map(|p| p.get("functionResponse").cloned())
        })
    };
    let finished = support::eventually(|| response().is_some()).await;
    assert!(
        finished.is_some(),
        "{}",
        report(&pty, "no functionResponse reached the model")
    );
    let response = response().unwrap();
    assert!(
        response["response"].get("error").is_none(),
        "{}",
        report(&pty, &format!("the write failed: {response}"))
    );
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "hello from gemini\n"
    );
    let stderr = client.stderr();
    assert!(
        stderr.contains("tool call tool=openDiff"),
        "{}",
        report(&pty, "no openDiff")
    );
}
