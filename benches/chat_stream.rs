//! A 1 MB reply (10,000 chunks of 100 bytes from the demo agent, `@flood N @chunk B`) streamed
//! into a chat document, against the same agent's stream read by a bare parser, in the same
//! run. Three ways into the chat: open in the editor with the user idle, open with the user
//! typing a line every 5 ms at its top (an editor that refuses edits made for an older
//! version, as Helix and Neovim do), and not open (appended to the file). Prints each one's
//! time from send to the end-of-turn line, its ratio to the floor, and the edits it took.
//!
//! Run: `cargo bench --bench chat_stream`

#[path = "common/agent_alone.rs"]
mod agent_alone;
#[path = "../tests/support/mod.rs"]
mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::TestClient;
use support::agents::capabilities_without_dialogs;

const CHUNKS: usize = 10_000;
const CHUNK_BYTES: usize = 100;
const RUNS: usize = 3;
/// How often the client looks at its copy of the chat.
const POLL: Duration = Duration::from_millis(2);
/// The line that ends a turn in the chat.
const ENDED: &str = "_demo: end_turn";

fn prompt_text() -> String {
    format!("@flood {CHUNKS} @chunk {CHUNK_BYTES}")
}

/// One way into the chat: how long each run took, and the applyEdits it took.
struct Way {
    times: Vec<Duration>,
    edits: usize,
}

#[tokio::main]
async fn main() {
    support::measure_the_named_binary();
    let floor: Vec<Duration> = (0..RUNS)
        .map(|_| agent_alone::run(&prompt_text(), &mut std::io::sink()).0)
        .collect();
    let mut idle = Way::new();
    let mut typing = Way::new();
    let mut closed = Way::new();
    for _ in 0..RUNS {
        idle.add(into_open_chat(false).await);
        typing.add(into_open_chat(true).await);
        closed.add(into_closed_chat().await);
    }
    let mb = (CHUNKS * CHUNK_BYTES) as f64 / 1e6;
    let floor = median(&floor);
    println!("chat_stream: {CHUNKS} chunks of {CHUNK_BYTES} B ({mb:.1} MB), median of {RUNS}");
    println!(
        "  demo agent → parse each line          {:>8.3} s   the floor",
        floor.as_secs_f64()
    );
    for (name, way) in [
        ("open chat, user idle", &idle),
        ("open chat, user typing every 5 ms", &typing),
        ("chat not open (its file)", &closed),
    ] {
        let time = median(&way.times);
        println!(
            "  {name:<37} {:>8.3} s   {:.1}× the floor, {:.1} applyEdits/s",
            time.as_secs_f64(),
            time.as_secs_f64() / floor.as_secs_f64(),
            way.edits as f64 / way.times.iter().sum::<Duration>().as_secs_f64(),
        );
    }
}

impl Way {
    fn new() -> Self {
        Self {
            times: Vec::new(),
            edits: 0,
        }
    }

    fn add(&mut self, (time, edits): (Duration, usize)) {
        self.times.push(time);
        self.edits += edits;
    }
}

/// Sends the flood from an open chat (typing a line at its top every 5 ms meanwhile when
/// `typing`); returns the time to the end-of-turn line in the client's copy, and the edits.
async fn into_open_chat(typing: bool) -> (Duration, usize) {
    let client = TestClient::started(capabilities_without_dialogs()).await;
    let opened = client
        .execute("agentls.openChat", Value::Null)
        .await
        .unwrap();
    let path = PathBuf::from(opened["path"].as_str().unwrap());
    let text = std::fs::read_to_string(&path).unwrap();
    let uri = client.open_unsaved(&path, "markdown", &text).await;
    let end = text.matches('\n').count() as u32;
    client
        .edit(&uri, support::range(end, 0, end, 0), &prompt_text())
        .await;
    let before = client.count(Some("workspace/applyEdit"));
    let started = Instant::now();
    client.execute("agentls.send", Value::Null).await.unwrap();
    let mut typed = 0;
    while !client.document(&uri).text.contains(ENDED) {
        if typing {
            let line = format!("typed {typed}\n");
            client.edit(&uri, support::range(1, 0, 1, 0), &line).await;
            typed += 1;
            tokio::time::sleep(Duration::from_millis(5)).await;
        } else {
            tokio::time::sleep(POLL).await;
        }
    }
    let elapsed = started.elapsed();
    let edits = client.count(Some("workspace/applyEdit")) - before;
    let chunks = client.document(&uri).text.matches("\nchunk ").count();
    assert_eq!(chunks, CHUNKS, "chunks lost");
    assert!(client.shutdown().await.success());
    (elapsed, edits)
}

/// Sends the flood with `agentls.prompt` and no chat open: agentls makes one and appends to its
/// file. Returns the time to the end-of-turn line in the file.
async fn into_closed_chat() -> (Duration, usize) {
    let client = TestClient::started(capabilities_without_dialogs()).await;
    let started = Instant::now();
    client.prompt(&prompt_text()).await;
    let told = client.take_message("answers in").await;
    let path = PathBuf::from(told.rsplit("answers in ").next().unwrap().trim());
    loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if text.contains(ENDED) {
            assert_eq!(text.matches("\nchunk ").count(), CHUNKS, "chunks lost");
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    let elapsed = started.elapsed();
    assert!(client.shutdown().await.success());
    (elapsed, 0)
}

fn median(samples: &[Duration]) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}
