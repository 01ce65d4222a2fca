//! agentls's own timers on tokio's paused clock: `serve()` runs in this process over an
//! in-memory pipe ([`TestClient::in_process`]), so a grace period or a timeout of many seconds
//! passes at once, and in order, while the test checks what happens at its end and that it did
//! not come early. No test here waits out a real grace.
//!
//! The clock is paused only while nothing waits on a real process: a paused runtime with no
//! work moves its clock to the next timer, so a wait for an agent's reply would turn into a
//! timeout. A test with the demo agent pauses once the agent is silent and resumes before it
//! needs it again.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::agents::capabilities_without_dialogs;
use support::{Answer, TestClient};
use tokio::time::Instant;

const NOTES: &str = "one\ntwo\n";

async fn in_process(capabilities: Value) -> TestClient {
    let client = TestClient::in_process().await;
    client.initialize(capabilities, None).await;
    client
}

/// An agent that ignores `session/cancel` does not keep the session busy: ten seconds after
/// the cancel (not sooner) the turn ends as cancelled, and the next prompt runs.
#[tokio::test]
async fn a_turn_the_agent_never_ends_is_over_ten_seconds_after_cancel() {
    let client = in_process(capabilities_without_dialogs()).await;
    client.prompt("@deaf").await;
    client.shown_until("Waiting until you cancel").await;
    // The agent now waits for nothing but the cancel, which it ignores.
    tokio::time::pause();
    let cancelled_at = Instant::now();
    client.cancel_ends_the_turn("demo").await;
    let log = client.shown_until("after the cancel").await;
    let waited = cancelled_at.elapsed();
    tokio::time::resume();
    assert!(log.contains("no answer 10s after the cancel"), "{log}");
    assert!(
        (Duration::from_secs(10)..Duration::from_secs(11)).contains(&waited),
        "the turn ended {waited:?} after the cancel"
    );
    client.takes_the_next_prompt("demo").await;
    assert!(client.shutdown().await.success());
}

/// The agent goes on after the cancel so long that agentls ended the turn (after its ten
/// seconds of grace); what it asks then still belongs to the cancelled turn and is answered
/// `cancelled`, not put to the user. The grace passes on the paused clock; the agent asks half
/// a second (real) after the cancel, once the clock runs again.
#[tokio::test]
async fn a_question_asked_after_the_cancel_grace_is_answered_cancelled() {
    let client = in_process(capabilities_without_dialogs()).await;
    let uri = client.open("notes.txt", "text", "x\n").await;
    client.prompt("@askaftercancel 500").await;
    client.shown_until("Waiting until you cancel").await;
    tokio::time::pause();
    client.cancel_ends_the_turn("demo").await;
    client.shown_until("no answer 10s after the cancel").await;
    tokio::time::resume();
    let log = client
        .shown_until("After the cancel my question was answered")
        .await;
    assert!(log.contains("answered Cancelled"), "{log}");
    assert!(client.decision_actions(&uri).await.is_empty());
    assert!(client.shutdown().await.success());
}

/// An editor that never answers the `workspace/applyEdit` of an accepted change: agentls gives
/// up after its 30 s (not sooner), takes the request back, tells the user the change was not
/// applied, and keeps the proposal pending (nothing lost): accepted again once the editor
/// answers, it applies. The editor's own requests are answered meanwhile.
#[tokio::test(start_paused = true)]
async fn an_accept_the_editor_never_applies_is_given_up_after_thirty_seconds() {
    let client = in_process(TestClient::rich_capabilities(false)).await;
    client.answer("workspace/applyEdit", Answer::Never);
    let uri = client.open("notes.txt", "text", NOTES).await;
    support::reviews::propose(&client, &uri, "ONE\ntwo\n", "maker").await;
    client.wait_for_review(&uri).await;
    let accepted_at = Instant::now();
    client.run_code_action(&uri, "Accept all changes").await;
    let edit = client.take("workspace/applyEdit", |_| true).await;
    let state = client.server_state().await;
    assert_eq!(
        state["reviews"].as_array().map(Vec::len),
        Some(1),
        "{state}"
    );
    let told = client
        .take_message("could not apply the accepted change to notes.txt")
        .await;
    let waited = accepted_at.elapsed();
    assert!(
        told.ends_with("the editor did not answer within 30 s"),
        "{told}"
    );
    assert!(
        (Duration::from_secs(30)..Duration::from_secs(31)).contains(&waited),
        "gave up {waited:?} after the accept"
    );
    client
        .take("$/cancelRequest", |p| p["id"] == edit["id"])
        .await;
    assert_eq!(client.document(&uri).text, NOTES, "the buffer changed");
    assert_eq!(pending_hunks(&client).await, 1, "the proposal was dropped");
    client.answer("workspace/applyEdit", Answer::Normally);
    client.run_code_action(&uri, "Accept all changes").await;
    let verdict = support::reviews::verdict(&client).await;
    assert_eq!(client.document(&uri).text, "ONE\ntwo\n", "{verdict}");
    assert_eq!(client.server_state().await["reviews"], json!([]));
    assert!(client.shutdown().await.success());
}

/// How many hunks of the server's reviews are pending.
async fn pending_hunks(client: &TestClient) -> usize {
    let state = client.server_state().await;
    state["reviews"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["hunks"].as_array().unwrap())
        .filter(|h| h["state"] == "pending")
        .count()
}

/// A burst of typing in a file with a review shows it again once, 100 ms after the burst
/// began, as it is after the last keystroke: one `publishDiagnostics` for the last version and
/// one `agentls/reviewChanged`, whatever the number of keystrokes. A new line above a hunk in a
/// burst of its own: once more, with the range the hunk has now.
#[tokio::test(start_paused = true)]
async fn a_burst_of_typing_shows_the_review_once() {
    let client = in_process(TestClient::rich_capabilities(false)).await;
    let uri = client.open("notes.txt", "text", "one\ntwo\nthree\n").await;
    support::reviews::propose(&client, &uri, "ONE\ntwo\nTHREE\n", "maker").await;
    client.wait_for_review(&uri).await;
    let shown = || {
        (
            client.count(Some("textDocument/publishDiagnostics")),
            client.count(Some("agentls/reviewChanged")),
        )
    };
    let before = shown();
    for column in 1..=5 {
        client
            .edit(&uri, support::range(1, column, 1, column), "x")
            .await;
    }
    // The clock moves on only once everything that can run has: the burst's showing too.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(shown(), (before.0 + 1, before.1 + 1));
    published_for_the_last_version(&client, &uri).await;

    client.edit(&uri, support::range(1, 0, 1, 0), "\n").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(shown(), (before.0 + 2, before.1 + 2));
    let published = published_for_the_last_version(&client, &uri).await;
    let ranges = |list: &Value| -> Vec<Value> {
        list.as_array()
            .unwrap()
            .iter()
            .map(|d| d["range"].clone())
            .collect()
    };
    let now = [support::range(0, 0, 1, 0), support::range(3, 0, 4, 0)];
    assert_eq!(ranges(&published["params"]["diagnostics"]), now);
    let told = client.received("agentls/reviewChanged");
    let hunks = &told.last().unwrap()["params"]["reviews"][0]["hunks"];
    assert_eq!(ranges(hunks), now);
    assert!(client.shutdown().await.success());
}

/// The diagnostics published for `uri` at its last version.
async fn published_for_the_last_version(client: &TestClient, uri: &str) -> Value {
    let version = client.document(uri).version;
    client
        .take("textDocument/publishDiagnostics", |p| {
            p["uri"] == uri && p["version"] == version
        })
        .await
}
