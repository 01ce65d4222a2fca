//! Five agents streaming at once into one agentls: five demo agents, each prompted to flood
//! 20,000 chunks of 200 bytes (4 MB of text) into its own chat, all at the same time, to a
//! client that asks for what the editor packages ask (no stream). Checked: every turn ends, and
//! each chat holds its own agent's chunks, each once and in order (nothing interleaved wrongly).
//! Measured: the time until all five ended, against the same five agents run outside agentls at
//! once (their output parsed line by line in this process); agentls's resident memory idle, at
//! its peak and after; and a keystroke's round trip (`didChange` → `agentls.debug.state`) idle,
//! idle beside the same five streams outside agentls (the machine's own share on its cores),
//! and while the five stream through agentls. The ratio that matters: p95 streaming / p95 beside.
//!
//! Run: `cargo bench --bench many_agents`.

#[path = "common/agent_alone.rs"]
mod agent_alone;
#[path = "common/stats.rs"]
mod stats;
#[path = "../tests/support/mod.rs"]
mod support;

use std::cell::Cell;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use stats::{describe, memory, ms, quantile};
use support::{Options, TestClient};

const AGENTS: usize = 5;
const CHUNKS: usize = 20_000;
const CHUNK_BYTES: usize = 200;
/// Round trips measured in each state (at least).
const SAMPLES: usize = 200;
/// The pause between two round trips, so that measuring does not become the load.
const SPACING: Duration = Duration::from_millis(2);
/// At most this many rounds of five floods to collect the round trips while streaming.
const MAX_ROUNDS: usize = 10;

fn flood() -> String {
    format!("@flood {CHUNKS} @chunk {CHUNK_BYTES}")
}

fn agent(i: usize) -> String {
    format!("agent{i}")
}

#[tokio::main]
async fn main() {
    support::measure_the_named_binary();
    let binary = support::agentls_binary();
    let config: String = (0..AGENTS)
        .map(|i| {
            format!(
                "[agents.{}]\ncommand = {:?}\nargs = [\"demo-agent\"]\n",
                agent(i),
                binary.display().to_string()
            )
        })
        .collect();
    let client = TestClient::start(Options {
        config_toml: Some(config),
        env: vec![("AGENTLS_LOG".into(), "info".into())],
        ..Options::default()
    })
    .await;
    let options = json!({"pluginEvents": ["reviewChanged", "turnChanged"]});
    client
        .initialize(TestClient::rich_capabilities(false), Some(options))
        .await;
    let uri = client.open("typing.txt", "text", "\n").await;
    for i in 0..AGENTS {
        client
            .execute("agentls.newSession", json!({"agent": agent(i)}))
            .await
            .unwrap();
        client.take("window/showMessage", |_| true).await;
    }
    let pid = client.pid();
    let idle_rss = memory(pid, "VmRSS:");
    let version = Cell::new(0);
    let idle = round_trips(&client, &uri, &version, SAMPLES, || false).await;

    // The same five streams outside agentls, again and again while the round trips are taken;
    // the first round of five, timed.
    let outside_once = || {
        let started = Instant::now();
        let threads: Vec<_> = (0..AGENTS)
            .map(|_| std::thread::spawn(|| agent_alone::run(&flood(), &mut std::io::sink())))
            .collect();
        threads.into_iter().for_each(|t| drop(t.join().unwrap()));
        started.elapsed()
    };
    let outside = outside_once();
    let beside = {
        let stop = Arc::new(AtomicBool::new(false));
        let load = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    outside_once();
                }
            })
        };
        let sampled = round_trips(&client, &uri, &version, SAMPLES, || false).await;
        stop.store(true, Ordering::Relaxed);
        load.join().unwrap();
        sampled
    };

    let mut streaming = Vec::new();
    let mut all_ended = Vec::new();
    let mut rounds = 0;
    while rounds < MAX_ROUNDS && (rounds == 0 || streaming.len() < SAMPLES) {
        rounds += 1;
        let started = Instant::now();
        let done = Cell::new(false);
        for i in 0..AGENTS {
            client
                .execute(
                    "agentls.prompt",
                    json!({"agent": agent(i), "text": flood()}),
                )
                .await
                .unwrap();
        }
        // Each agent's turn ends (its summaries may share one popup: `agentls/turnChanged`).
        let ended = async {
            for i in 0..AGENTS {
                client
                    .take("agentls/turnChanged", |p| {
                        p["agent"] == agent(i) && p["prompting"] == false
                    })
                    .await;
            }
            done.set(true);
        };
        let sampling = round_trips(&client, &uri, &version, usize::MAX, || done.get());
        let ((), sampled) = tokio::join!(ended, sampling);
        all_ended.push(started.elapsed());
        streaming.extend(sampled);
    }
    let peak_rss = memory(pid, "VmHWM:");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after_rss = memory(pid, "VmRSS:");
    let chats = chats_in_order(client.home.path(), rounds).await;
    assert!(client.shutdown().await.success());

    let mb = |bytes: u64| bytes as f64 / 1e6;
    let ended = quantile(&all_ended, 0.5);
    println!(
        "many_agents: {AGENTS} demo agents at once, each {CHUNKS} chunks of {CHUNK_BYTES} B \
         ({:.1} MB of text each), {rounds} rounds",
        (CHUNKS * CHUNK_BYTES) as f64 / 1e6
    );
    println!(
        "  all five ended, through agentls (median of rounds): {:.3} s; the five alone at once: \
         {:.3} s ({:.2}× their time)",
        ended.as_secs_f64(),
        outside.as_secs_f64(),
        ended.as_secs_f64() / outside.as_secs_f64()
    );
    println!("  chats: {chats}");
    println!(
        "  RSS: idle {:.1} MB, peak {:.1} MB, 1 s after {:.1} MB",
        mb(idle_rss),
        mb(peak_rss),
        mb(after_rss)
    );
    println!(
        "  didChange → response, idle:                  {}",
        describe(&idle)
    );
    println!(
        "  didChange → response, beside five outside:   {}",
        describe(&beside)
    );
    println!(
        "  didChange → response, five streaming:        {}",
        describe(&streaming)
    );
    let p95 = |s: &[Duration]| ms(quantile(s, 0.95));
    println!(
        "  p95 streaming / p95 beside the five outside agentls: {:.2}× (goal ≤ 2×); / p95 idle: {:.1}×",
        p95(&streaming) / p95(&beside),
        p95(&streaming) / p95(&idle)
    );
}

/// Round trips: a one-character `didChange`, then `agentls.debug.state`, which must show the new
/// version. Measures `n` of them, or until `stop` says so.
async fn round_trips(
    client: &TestClient,
    uri: &str,
    version: &Cell<i32>,
    n: usize,
    stop: impl Fn() -> bool,
) -> Vec<Duration> {
    let mut samples = Vec::new();
    while samples.len() < n && !stop() {
        let started = Instant::now();
        client.edit(uri, support::range(0, 0, 0, 0), "x").await;
        version.set(version.get() + 1);
        let state = client.server_state().await;
        samples.push(started.elapsed());
        // The only open document (the chats are not open in this client).
        assert_eq!(
            state["documents"][0]["version"],
            json!(version.get()),
            "{state}"
        );
        tokio::time::sleep(SPACING).await;
    }
    samples
}

/// Each agent's chat, once every chunk of the last round is in: its chunks must be `0..CHUNKS`,
/// in order, once per round, and nothing else's. Returns a line saying so.
async fn chats_in_order(home: &Path, rounds: usize) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let checked: Result<Vec<usize>, String> =
            (0..AGENTS).map(|i| chunks_of(home, i, rounds)).collect();
        match checked {
            Ok(counts) => {
                return format!(
                    "each of the {AGENTS} holds its own {} chunks, in order, nothing else's",
                    counts[0]
                );
            }
            Err(why) if Instant::now() > deadline => panic!("{why}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// The chunk lines of agent `i`'s chat, checked: `0..CHUNKS` once per round, in order.
fn chunks_of(home: &Path, i: usize, rounds: usize) -> Result<usize, String> {
    let chats = home.join(".local/state/agentls/chats");
    let prefix = format!("{}-", agent(i));
    let files: Vec<_> = std::fs::read_dir(&chats)
        .map_err(|e| e.to_string())?
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).into_iter().flatten())
        .map(|f| f.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with(&prefix) && name.ends_with(".md")
        })
        .collect();
    let [file] = files.as_slice() else {
        return Err(format!("{}: chats {files:?}", agent(i)));
    };
    let text = std::fs::read_to_string(file).map_err(|e| e.to_string())?;
    let numbers: Vec<usize> = text
        .lines()
        .filter_map(|l| l.strip_prefix("chunk "))
        .map(|rest| rest.trim_end_matches('.').parse().unwrap())
        .collect();
    let expected: Vec<usize> = (0..rounds).flat_map(|_| 0..CHUNKS).collect();
    if numbers == expected {
        Ok(numbers.len())
    } else {
        Err(format!(
            "{}: {} chunk lines, not {} in order",
            agent(i),
            numbers.len(),
            expected.len()
        ))
    }
}
