//! Reviews opened the way an agent would, through the test-only `agentls.debug.review`, and
//! their verdicts as the server logs them.

use serde_json::{Value, json};

use super::TestClient;

/// Proposes `text` for `uri` as a review from `origin` (`agentls.debug.review`).
pub async fn propose(client: &TestClient, uri: &str, text: &str, origin: &str) {
    let args = json!([{"uri": uri, "text": text, "origin": origin}]);
    client
        .request(
            "workspace/executeCommand",
            json!({"command": "agentls.debug.review", "arguments": args}),
        )
        .await
        .expect("agentls.debug.review");
}

/// The verdict of the next review opened with [`propose`] to be decided.
pub async fn verdict(client: &TestClient) -> Value {
    let log = client
        .take("window/logMessage", |p| {
            p["message"]
                .as_str()
                .unwrap()
                .contains("agentls.debug.review verdict: ")
        })
        .await;
    let message = log["params"]["message"].as_str().unwrap();
    let json = message
        .split("agentls.debug.review verdict: ")
        .nth(1)
        .unwrap()
        .lines()
        .next()
        .unwrap();
    serde_json::from_str(json).unwrap()
}
