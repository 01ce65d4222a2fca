//! The permission round trip of an agent's edit, agent → review → accept → agent, through the
//! real binary: the built-in demo agent proposes an edit of an open file (`uppercase notes.txt
//! @timed`), agentls opens a review and tells the editor (`agentls/reviewChanged`), the editor
//! (this bench's LSP client, the test client of `tests/support`) accepts it at once with the
//! `agentls.accept` command a plugin sends, answering agentls's requests (`workspace/applyEdit`)
//! at once as it goes, and the agent gets its answer.
//!
//! Timed: by the demo agent, from sending `session/request_permission` to reading its answer
//! (`@timed` makes it say how long). The editor's part of that, measured in the same run: the
//! client's own round trip of a request agentls refuses at once (an unknown method: two pipe
//! crossings, the client's writing and parsing, tower-lsp's refusal), which stands for the
//! notification out and the command back, plus the client's reaction (from reading the
//! review to having written the accept). agentls's own time is the rest. Rounds before the
//! first ones measured are warm-up; between rounds the client waits for the turn's end in the
//! log and puts the line back.
//!
//! Run: `cargo bench --bench permission`

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::{Options, TestClient};

/// Round trips measured.
const ROUNDS: usize = 100;
/// Rounds before those, not measured.
const WARM_UP: usize = 5;
/// What the demo agent says when `@timed`.
const SAID: &str = "The permission was answered in ";
/// What the log says when a turn of the demo agent ends.
const ENDED: &str = "demo: end_turn";

#[tokio::main]
async fn main() {
    support::measure_the_named_binary();
    let client = TestClient::start(Options {
        // The default log level, as users run it (the test client asks for `debug`).
        env: vec![("AGENTLS_LOG".into(), "info".into())],
        ..Options::default()
    })
    .await;
    client
        .initialize(TestClient::rich_capabilities(false), None)
        .await;
    let original = "keep\n// TODO a\n";
    let uri = client.open("notes.txt", "text", original).await;
    client
        .execute("agentls.newSession", json!({"agent": "demo"}))
        .await
        .unwrap();
    client.take("window/showMessage", |_| true).await;

    let (mut agent, mut editor, mut reaction, mut pings) = (vec![], vec![], vec![], vec![]);
    for round in 0..WARM_UP + ROUNDS {
        client.forget_received();
        // The editor's own round trip, just before: a request agentls refuses at once.
        let started = Instant::now();
        let refused = client.request("agentls/benchPing", json!({})).await;
        let ping = started.elapsed();
        assert!(refused.is_err(), "{refused:?}");

        let said_before = client.shown_text().matches(SAID).count();
        let ended_before = client.log_text().matches(ENDED).count();
        client.prompt("uppercase notes.txt @timed").await;
        let review = client
            .take("agentls/reviewChanged", |p| {
                p["uri"] == uri.as_str() && p["reviews"].as_array().is_some_and(|r| !r.is_empty())
            })
            .await;
        let seen = Instant::now();
        let id = review["params"]["reviews"][0]["id"].clone();
        let (_, accepted) = client
            .send_request(
                "workspace/executeCommand",
                json!({"command": "agentls.accept", "arguments": [{"review": id}]}),
            )
            .await;
        let reacted = seen.elapsed();
        accepted.await.expect("agentls.accept answered");
        // The turn's end, from the log: its popup is paced (a burst of 3, then one per 2 s).
        support::eventually(|| client.log_text().matches(ENDED).count() > ended_before)
            .await
            .expect("the turn ended");
        support::eventually(|| client.shown_text().matches(SAID).count() > said_before)
            .await
            .expect("the agent said how long the permission took");
        let said = client.shown_text();
        let micros: u64 = said
            .rsplit(SAID)
            .next()
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no timing in {said}"));
        support::eventually(|| client.document(&uri).text == "keep\n// TODO A\n")
            .await
            .expect("the accepted change in the buffer");
        // Back to the start for the next round (not timed).
        client
            .edit(&uri, support::range(1, 0, 2, 0), "// TODO a\n")
            .await;
        if round >= WARM_UP {
            let answered = Duration::from_micros(micros);
            agent.push(answered);
            editor.push(ping + reacted);
            reaction.push(reacted);
            pings.push(ping);
        }
    }
    let own: Vec<Duration> = agent
        .iter()
        .zip(&editor)
        .map(|(a, e)| a.saturating_sub(*e))
        .collect();
    println!(
        "permission: {ROUNDS} round trips (after {WARM_UP} unmeasured), agent → review → accept → agent"
    );
    let row = |name: &str, mut samples: Vec<Duration>| {
        samples.sort();
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
        println!(
            "  {name:<44} median {:>7.3} ms   p95 {:>7.3} ms",
            ms(at(0.5)),
            ms(at(0.95))
        );
        at(0.5)
    };
    let total = row("as the agent times it", agent.clone());
    let editors = row("the editor's part (round trip + reaction)", editor);
    row("  of which the client's reaction", reaction);
    row("  of which its refused-request round trip", pings);
    row("agentls's own (each round's difference)", own);
    println!(
        "  the editor's share of the median: {:.0}%",
        100.0 * editors.as_secs_f64() / total.as_secs_f64()
    );
    let mut client = client;
    client.stop().await;
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
