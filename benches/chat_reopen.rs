//! A long conversation against a short one, in the same run: a chat of 10 MB (thousands of
//! turns, as agentls writes them, with its record) and one of 1 KB, each reopened by a new
//! agentls. For each: the time from `didOpen` until the chat is known as one (its code actions
//! offer *Send to demo*), a completion at its end, and from sending the next message to the
//! agent's first words in the document, and the bytes of agentls's record the turn wrote (and
//! synced at its end). Prints each, and the long chat's ratio to the short; of the first, also
//! the part until the client has written its `didOpen` (agentls reading it meanwhile: the pipe
//! holds 64 KB).
//!
//! Run: `cargo bench --bench chat_reopen`

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::agents::capabilities_without_dialogs;
use support::{Options, TestClient};

/// How many times each chat is reopened.
const RUNS: usize = 5;
/// How often the client looks at its copy of the chat.
const POLL: Duration = Duration::from_millis(1);
/// When a wait is a failure.
const GIVE_UP: Duration = Duration::from_secs(30);

/// The times of one reopening.
#[derive(Debug, Clone, Copy)]
struct Times {
    /// From the start of the client's `didOpen` until it is written (agentls reading it).
    sent: Duration,
    known: Duration,
    completion: Duration,
    next_completion: Duration,
    reply: Duration,
    /// Bytes of the record written (and synced at its end) by the turn.
    synced: u64,
}

#[tokio::main]
async fn main() {
    support::measure_the_named_binary();
    let short = measure(1_000).await;
    let long = measure(10_000_000).await;
    println!("chat_reopen: a chat reopened by a new agentls, median of {RUNS}");
    for (what, pick) in [
        (
            "open → known as a chat",
            (|t: &Times| t.known) as fn(&Times) -> Duration,
        ),
        ("  of which writing the didOpen", |t: &Times| t.sent),
        ("first completion at its end", |t: &Times| t.completion),
        ("the next completion there", |t: &Times| t.next_completion),
        ("send → first words of the reply", |t: &Times| t.reply),
    ] {
        let (s, l) = (median(&short, pick), median(&long, pick));
        println!(
            "  {what:<34} 1 KB {:>8.1} ms   10 MB {:>8.1} ms   {:.2}× (+{:.1} ms)",
            ms(s),
            ms(l),
            l.as_secs_f64() / s.as_secs_f64(),
            ms(l.saturating_sub(s)),
        );
    }
    let synced = |times: &[Times]| {
        let mut bytes: Vec<u64> = times.iter().map(|t| t.synced).collect();
        bytes.sort();
        bytes[bytes.len() / 2]
    };
    println!(
        "  bytes synced by the turn           1 KB {:>8}      10 MB {:>8}",
        synced(&short),
        synced(&long)
    );
}

/// Reopens a chat of about `bytes` [`RUNS`] times.
async fn measure(bytes: usize) -> Vec<Times> {
    let state = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let options = || Options {
        workspace: Some(workspace.path().to_owned()),
        env: vec![(
            "XDG_STATE_HOME".to_owned(),
            state.path().display().to_string(),
        )],
        ..Options::default()
    };
    let path = a_chat(options()).await;
    let (text, record) = grow(&path, bytes);
    let mut times = Vec::new();
    for _ in 0..RUNS {
        // Each run starts from the same conversation (the last one's reply is not kept, nor
        // the demo agent's memory of its session).
        std::fs::write(&path, &text).unwrap();
        std::fs::write(record_of(&path), &record).unwrap();
        let _ = std::fs::remove_dir_all(state.path().join("agentls/demo-agent"));
        times.push(reopen(options(), &path, &text).await);
    }
    times
}

/// A new chat made by agentls (its document and record); returns its path.
async fn a_chat(options: Options) -> PathBuf {
    let client = TestClient::start(options).await;
    client
        .initialize(capabilities_without_dialogs(), None)
        .await;
    let opened = client
        .execute("agentls.openChat", json!({"new": true}))
        .await
        .unwrap();
    assert!(client.shutdown().await.success());
    PathBuf::from(opened["path"].as_str().unwrap())
}

/// agentls's record of the chat at `path`.
fn record_of(path: &Path) -> PathBuf {
    let name = path.file_name().unwrap().to_str().unwrap();
    path.with_file_name(format!(".{name}.chat"))
}

/// A conversation of about `bytes` for the chat at `path`, in its document and in agentls's
/// record of it, as agentls writes them: the document's text and the record.
fn grow(path: &Path, bytes: usize) -> (String, String) {
    let mut text = std::fs::read_to_string(path).unwrap();
    let mut record = std::fs::read_to_string(record_of(path)).unwrap();
    let reply = "Here is what I found in the file, line by line, with a note on each.\n".repeat(12);
    let mut turn = 0;
    while text.len() < bytes {
        let message = format!("question {turn}: what does this part do?");
        let out = format!(
            "\n\n## demo\n\n{reply}\n\n_demo: end_turn · 0 tool calls — “Here is…”_\n\n## You\n\n"
        );
        text.push_str(&message);
        text.push_str(&out);
        for entry in [
            json!({"sent": message}),
            json!({"out": out}),
            json!("ended"),
        ] {
            record.push_str(&entry.to_string());
            record.push('\n');
        }
        turn += 1;
    }
    (text, record)
}

/// One reopening of the chat at `path` (holding `text`) by a new agentls.
async fn reopen(options: Options, path: &Path, text: &str) -> Times {
    let client = TestClient::start(options).await;
    client
        .initialize(capabilities_without_dialogs(), None)
        .await;
    let started = Instant::now();
    let uri = client.open_unsaved(path, "markdown", text).await;
    let sent = started.elapsed();
    loop {
        let actions = client.code_actions(&uri).await;
        if actions.iter().any(|a| a["title"] == "Send to demo") {
            break;
        }
        assert!(
            started.elapsed() < GIVE_UP,
            "never known as a chat: {actions:?}"
        );
        tokio::time::sleep(POLL).await;
    }
    let known = started.elapsed();
    let line = text.matches('\n').count() as u32;
    client
        .edit(&uri, support::range(line, 0, line, 0), "/")
        .await;
    let complete = || async {
        let started = Instant::now();
        client
            .request(
                "textDocument/completion",
                json!({"textDocument": {"uri": uri}, "position": {"line": line, "character": 1}}),
            )
            .await
            .unwrap();
        started.elapsed()
    };
    let completion = complete().await;
    let next_completion = complete().await;
    client
        .edit(&uri, support::range(line, 0, line, 1), "one more question")
        .await;
    let record = record_of(path);
    let before = std::fs::metadata(&record).unwrap().len();
    let started = Instant::now();
    client.execute("agentls.send", Value::Null).await.unwrap();
    let answered = |doc: &str| {
        doc.rsplit_once("\none more question")
            .is_some_and(|(_, after)| after.contains("Hello from the demo agent"))
    };
    while !answered(&client.document(&uri).text) {
        assert!(
            started.elapsed() < GIVE_UP,
            "no reply: {}\n---\n{}",
            client.shown_text(),
            client.document(&uri).text
        );
        tokio::time::sleep(POLL).await;
    }
    let reply = started.elapsed();
    // The turn's entries are synced once, at its end: what was appended since the send.
    let ended = || {
        let text = std::fs::read_to_string(&record).unwrap();
        text.len() as u64 > before && text.ends_with("\"ended\"\n")
    };
    while !ended() {
        assert!(
            started.elapsed() < GIVE_UP,
            "the turn never ended in the record"
        );
        tokio::time::sleep(POLL).await;
    }
    let synced = std::fs::metadata(&record).unwrap().len() - before;
    assert!(client.shutdown().await.success());
    Times {
        sent,
        known,
        completion,
        next_completion,
        reply,
        synced,
    }
}

fn median(times: &[Times], pick: fn(&Times) -> Duration) -> Duration {
    let mut picked: Vec<Duration> = times.iter().map(pick).collect();
    picked.sort();
    picked[picked.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
