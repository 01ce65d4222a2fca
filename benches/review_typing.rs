//! The user typing in a file with a 100-hunk review: what agentls sends the editor while the
//! review follows the typing, against what showing the review once sends, in the same run; and
//! a keystroke's round trip in that file against the same file with no review.
//!
//! A review is shown with `agentls/reviewChanged` (to a plugin that asks for it), a
//! `textDocument/publishDiagnostics` of its hunks and a `workspace/inlayHint/refresh` (to an
//! editor that supports it). Typing shows the review again at most once per burst
//! (`PRESENT_EVERY`, 100 ms), never once per keystroke. Two bursts of 200 keystrokes 5 ms apart in the middle of the file, each keystroke
//! followed by a `codeAction` request (as an editor asks for actions where the cursor is):
//! letters on a line between two hunks, then new lines (moving the 50 hunks below). Printed:
//! the messages and bytes per keystroke, as a share of one showing, and the round trips.
//!
//! Run: `cargo bench --bench review_typing`.

#[path = "common/stats.rs"]
mod stats;
#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use stats::{ms, quantile};
use support::reviews::propose;
use support::{Options, TestClient, range};

const LINES: usize = 1000;
/// Every tenth line changed: 100 hunks.
const EVERY: usize = 10;
const KEYSTROKES: usize = 200;
const SPACING: Duration = Duration::from_millis(5);
/// agentls's `review_view::PRESENT_EVERY`.
const PRESENT_EVERY: Duration = Duration::from_millis(100);
/// Where the user types: between two hunks in the middle of the file.
const TYPING_LINE: u32 = 505;
/// What shows a review.
const SHOWING: [&str; 3] = [
    "agentls/reviewChanged",
    "textDocument/publishDiagnostics",
    "workspace/inlayHint/refresh",
];

#[tokio::main]
async fn main() {
    support::measure_the_named_binary();
    let base: String = (0..LINES).map(|i| format!("line {i}\n")).collect();
    let proposal: String = (0..LINES)
        .map(|i| match i % EVERY {
            0 => format!("line {i}, as the agent would have it\n"),
            _ => format!("line {i}\n"),
        })
        .collect();
    let client = TestClient::start(Options::default()).await;
    client
        .initialize(
            TestClient::rich_capabilities(false),
            Some(json!({"pluginEvents": ["reviewChanged", "turnChanged"]})),
        )
        .await;
    let reviewed = client.open("reviewed.txt", "text", &base).await;
    let plain = client.open("plain.txt", "text", &base).await;

    client.forget_received();
    let counts = showing_counts(&client);
    propose(&client, &reviewed, &proposal, "bench").await;
    let hunks = LINES / EVERY;
    // Shown once: both messages waited for (taken from the record, so their bytes are added).
    let published = client
        .take("textDocument/publishDiagnostics", |p| {
            p["uri"] == reviewed.as_str() && p["diagnostics"].as_array().unwrap().len() == hunks
        })
        .await;
    let told = client
        .take("agentls/reviewChanged", |p| {
            p["uri"] == reviewed.as_str() && p["reviews"][0]["hunks"].as_array().is_some()
        })
        .await;
    let one_showing = (
        difference(showing_counts(&client), counts),
        showing_bytes(&client) + published.to_string().len() + told.to_string().len(),
    );
    let bursts = [
        ("typing between hunks", "x"),
        ("new lines above hunks", "\n"),
    ];
    println!(
        "review_typing: {KEYSTROKES} keystrokes {} ms apart in a {LINES}-line file with a {hunks}-hunk review",
        SPACING.as_millis(),
    );
    let [changed, published, refreshed] = one_showing.0;
    println!(
        "  showing the review once: {changed} reviewChanged, {published} publishDiagnostics, \
         {refreshed} inlayHint/refresh, {} bytes",
        one_showing.1
    );
    for (name, text) in bursts {
        let burst = type_burst(&client, &reviewed, &plain, text).await;
        let [changed, published, refreshed] = burst.shown;
        let per_keystroke = burst.bytes as f64 / KEYSTROKES as f64;
        println!(
            "  {name} ({:.2} s): {changed} reviewChanged, {published} publishDiagnostics, \
             {refreshed} inlayHint/refresh, {} bytes ({per_keystroke:.0} per keystroke)",
            burst.typed.as_secs_f64(),
            burst.bytes,
        );
        println!(
            "    showings per 100 ms of typing: {:.2} (at most 1); per keystroke: {:.3} of a showing's bytes (1.0: every keystroke shows it again)",
            changed.max(published) as f64 / ((burst.typed + PRESENT_EVERY).as_secs_f64() / 0.1),
            per_keystroke / one_showing.1 as f64,
        );
        for (file, samples) in [
            ("with the review", &burst.in_review),
            ("no review", &burst.in_plain),
        ] {
            println!(
                "    didChange → codeAction, {file:<15}: median {:.2} ms, p95 {:.2} ms, max {:.2} ms",
                ms(quantile(samples, 0.5)),
                ms(quantile(samples, 0.95)),
                ms(quantile(samples, 1.0)),
            );
        }
        println!(
            "    p95 with the review / p95 with none: {:.2}×",
            ms(quantile(&burst.in_review, 0.95)) / ms(quantile(&burst.in_plain, 0.95))
        );
    }
    assert!(client.shutdown().await.success());
}

/// What a burst of typing made agentls send, and each keystroke's round trip.
struct Burst {
    typed: Duration,
    shown: [usize; 3],
    bytes: usize,
    in_review: Vec<Duration>,
    in_plain: Vec<Duration>,
}

/// Types `text` [`KEYSTROKES`] times in `reviewed` and in `plain` alike, then waits until the
/// burst's showing is surely due (three times [`PRESENT_EVERY`]) and sums up what was shown.
async fn type_burst(client: &TestClient, reviewed: &str, plain: &str, text: &str) -> Burst {
    client.forget_received();
    let counts = showing_counts(client);
    let began = Instant::now();
    let mut in_review = Vec::with_capacity(KEYSTROKES);
    let mut in_plain = Vec::with_capacity(KEYSTROKES);
    for _ in 0..KEYSTROKES {
        in_review.push(keystroke(client, reviewed, text).await);
        in_plain.push(keystroke(client, plain, text).await);
        tokio::time::sleep(SPACING).await;
    }
    let typed = began.elapsed();
    tokio::time::sleep(3 * PRESENT_EVERY).await;
    let shown = difference(showing_counts(client), counts);
    if shown[1] > 0 {
        let version = client.document(reviewed).version;
        let last = client.received("textDocument/publishDiagnostics");
        assert!(
            last.iter().any(|p| p["params"]["version"] == version),
            "the review was shown, but not as it is after the last keystroke"
        );
    }
    Burst {
        typed,
        shown,
        bytes: showing_bytes(client),
        in_review,
        in_plain,
    }
}

/// One keystroke (`text`) in `uri` between two hunks, then the code actions where it landed: the
/// round trip.
async fn keystroke(client: &TestClient, uri: &str, text: &str) -> Duration {
    let at = range(TYPING_LINE, 0, TYPING_LINE, 0);
    let started = Instant::now();
    client.edit(uri, at.clone(), text).await;
    client
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": uri}, "range": at, "context": {"diagnostics": []}}),
        )
        .await
        .expect("codeAction");
    started.elapsed()
}

/// How many of each message in [`SHOWING`] the server has sent so far.
fn showing_counts(client: &TestClient) -> [usize; 3] {
    SHOWING.map(|method| client.count(Some(method)))
}

fn difference(after: [usize; 3], before: [usize; 3]) -> [usize; 3] {
    [0, 1, 2].map(|i| after[i] - before[i])
}

/// The JSON bytes of the [`SHOWING`] messages received and not taken.
fn showing_bytes(client: &TestClient) -> usize {
    SHOWING
        .iter()
        .flat_map(|method| client.received(method))
        .map(|message| message.to_string().len())
        .sum()
}
