//! An agent streaming 100,000 `agent_message_chunk`s (100 bytes of text each, 10 MB) through
//! agentls to an LSP client, against the same NDJSON piped through `cat` to a reader that parses
//! each line, in the same run. Prints the throughput ratio, how many LSP messages the client got,
//! and the latency of a `didChange` → request round trip (the request must see the change) while
//! the stream runs and while idle.
//!
//! The stream is recorded from the built-in demo agent (`@flood N @chunk B`). agentls then gets
//! it twice: replayed by `cat` inside a tiny shell agent (the same bytes the baseline reads), and
//! live from the demo agent. The client is the test client of `tests/support`, which parses
//! every message like an editor would: once as a plugin that asks for every `agentls/*`
//! notification, the stream's `agentls/sessionUpdate` included, and once as an editor that asks
//! for no stream (as the Neovim, Emacs and VS Code packages do; Helix asks for nothing).
//!
//! The peer: the ACP TypeScript SDK's client (`ClientSideConnection`, from npm, under node) reads
//! the same replay (`common/sdk_client.mjs`; found where `scripts/test-tools.sh` installs it).
//!
//! Also printed, each against a baseline of the same run: agentls's CPU time for the replayed
//! stream against the `cat | parse` reader's (from `/proc` and `getrusage`), its resident memory
//! idle, at its peak during the streams and a second after them (`VmRSS`, `VmHWM`; with the part
//! that is its own, `RssAnon`), and the p95 of the round trip while streaming against idle, and
//! against idle while the same stream runs outside agentls (the machine's own share): the replay
//! `cat` to a parsing reader for the replayed runs, the demo agent to one for the live runs.
//!
//! Run: `cargo bench --bench acp_stream`. With `ACP_STREAM_PROFILE=1` it only streams the replay
//! through agentls once, with no round trips (for a profiler wrapped around agentls).

#[path = "common/agent_alone.rs"]
mod agent_alone;
#[path = "common/stats.rs"]
mod stats;
#[path = "../tests/support/mod.rs"]
mod support;

use std::cell::Cell;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stats::{describe, memory, ms, quantile};
use support::{Options, TestClient};

const CHUNKS: usize = 100_000;
const CHUNK_BYTES: usize = 100;
/// Round trips measured in each state (at least).
const SAMPLES: usize = 200;
/// The pause between two round trips, so that measuring does not become the load.
const SPACING: Duration = Duration::from_millis(2);
/// At most this many streams to collect the round trips measured while streaming.
const MAX_STREAMS: usize = 10;

fn prompt_text() -> String {
    format!("@flood {CHUNKS} @chunk {CHUNK_BYTES}")
}

/// What one configuration of agentls did with the stream.
struct Run {
    /// Prompt to summary, first stream.
    elapsed: Duration,
    /// agentls's CPU time (user + system) over the first stream.
    cpu: Duration,
    /// Resident memory: idle (agent started), at its peak, and a second after the streams.
    rss: Memory,
    /// (logMessage, sessionUpdate, all) messages the client got for the first stream.
    counts: (usize, usize, usize),
    idle: Vec<Duration>,
    /// Idle, while the same stream is read outside agentls (`cat | parse` in this process): the
    /// machine's own share of the delay when two cores are busy with a stream.
    beside: Vec<Duration>,
    streaming: Vec<Duration>,
    /// How many of the round trips slower than the idle p95, while streaming, had stream
    /// updates arrive before their reply, and how many updates that was in all.
    slow_behind_updates: (usize, usize, usize),
}

#[tokio::main]
async fn main() {
    support::measure_the_named_binary();
    let dir = tempfile::tempdir().expect("temp dir");
    let ndjson = dir.path().join("stream.ndjson");

    let mut file = std::io::BufWriter::new(std::fs::File::create(&ndjson).unwrap());
    let (agent_alone, lines, session) = agent_alone::run(&prompt_text(), &mut file);
    file.flush().unwrap();
    drop(file);
    let bytes = std::fs::metadata(&ndjson).unwrap().len();
    if std::env::var_os("ACP_STREAM_PROFILE").is_some() {
        let config = replay_config(dir.path(), &ndjson, &session);
        let replayed = Outside::Replay(ndjson.clone());
        let run = through_agentls(Some(config), "replay", EVERY, 0, &replayed).await;
        println!("replay through agentls: {:.3} s", secs(run.elapsed));
        return;
    }
    let (cat, cat_cpu) = (0..3).map(|_| cat_and_parse(&ndjson)).min().unwrap();
    let config = || Some(replay_config(dir.path(), &ndjson, &session));
    let replayed = Outside::Replay(ndjson.clone());
    let replay = through_agentls(config(), "replay", EVERY, SAMPLES, &replayed).await;
    let no_stream = through_agentls(config(), "replay", NO_STREAM, SAMPLES, &replayed).await;
    let demo = through_agentls(None, "demo", EVERY, SAMPLES, &Outside::DemoAgent).await;
    let demo_no_stream =
        through_agentls(None, "demo", NO_STREAM, SAMPLES, &Outside::DemoAgent).await;
    let runs = [
        ("replay", &replay),
        ("replay, no stream", &no_stream),
        ("demo", &demo),
        ("demo, no stream", &demo_no_stream),
    ];
    let sdk = (0..3)
        .filter_map(|_| sdk_client(dir.path(), &ndjson, &session))
        .min_by_key(|run| run.elapsed);

    let mb = bytes as f64 / 1e6;
    let text_mb = (CHUNKS * CHUNK_BYTES) as f64 / 1e6;
    let rate = |d: Duration| format!("{:>8.3} s {:>7.1} MB/s", secs(d), mb / secs(d));
    println!(
        "acp_stream: {CHUNKS} agent_message_chunks of {CHUNK_BYTES} B ({text_mb:.1} MB of text), \
         {lines} NDJSON lines, {mb:.1} MB on the wire"
    );
    println!(
        "  cat | parse each line               {}   baseline",
        rate(cat)
    );
    println!(
        "  `cat` as agent → agentls → LSP      {}   the same NDJSON replayed",
        rate(replay.elapsed)
    );
    match &sdk {
        Some(sdk) => println!(
            "  `cat` as agent → ACP TS SDK client  {}   the same NDJSON, the SDK's ClientSideConnection (node)",
            rate(sdk.elapsed)
        ),
        None => {
            println!("  ACP TS SDK client: not installed (eval \"$(scripts/test-tools.sh)\" first)")
        }
    }
    println!(
        "  `cat` as agent → agentls → LSP      {}   the same, to a client that asks for no stream (as every package)",
        rate(no_stream.elapsed)
    );
    println!(
        "  demo agent → parse each line        {}   the agent alone",
        rate(agent_alone)
    );
    println!(
        "  demo agent → agentls → LSP          {}   prompt to summary",
        rate(demo.elapsed)
    );
    println!(
        "  throughput ratio, agentls vs cat | parse (same NDJSON): {:.3} ({:.2}× its time)",
        secs(cat) / secs(replay.elapsed),
        secs(replay.elapsed) / secs(cat),
    );
    if let Some(sdk) = &sdk {
        println!(
            "  agentls vs the TS SDK client: {:.2}× its time, CPU {:.0} ms vs {:.0} ms, peak RSS {:.1} MB vs {:.1} MB",
            secs(replay.elapsed) / secs(sdk.elapsed),
            ms(replay.cpu),
            ms(sdk.cpu),
            replay.rss.peak as f64 / 1e6,
            sdk.peak_rss as f64 / 1e6,
        );
    }
    println!(
        "  throughput ratio, demo agent through agentls vs alone:  {:.3}",
        secs(agent_alone) / secs(demo.elapsed),
    );
    println!(
        "  throughput ratio, to a client that asks for no stream vs cat | parse: {:.3} ({:.2}× its time)",
        secs(cat) / secs(no_stream.elapsed),
        secs(no_stream.elapsed) / secs(cat),
    );
    for (name, run) in [
        ("", &replay),
        (", to a client that asks for no stream", &no_stream),
    ] {
        println!(
            "  CPU: agentls {:.0} ms for the replayed stream{name} ({:.2} µs per line), cat | parse {:.0} ms: {:.1}×",
            ms(run.cpu),
            run.cpu.as_secs_f64() * 1e6 / lines as f64,
            ms(cat_cpu),
            secs(run.cpu) / secs(cat_cpu),
        );
    }
    for (name, run) in runs {
        let Memory {
            idle,
            peak,
            peak_anon,
            after,
        } = run.rss;
        let mb = |bytes: u64| bytes as f64 / 1e6;
        println!(
            "  {name:<17} RSS: idle {:.1} MB (own {:.1}), peak {:.1} MB (own {:.1}), 1 s after the streams {:.1} MB (own {:.1})",
            mb(idle.all),
            mb(idle.anon),
            mb(peak),
            mb(peak_anon),
            mb(after.all),
            mb(after.anon),
        );
    }
    for (name, run) in runs {
        let (logs, updates, total) = run.counts;
        println!(
            "  {name:<17} LSP messages for the stream: {total} in all, {updates} agentls/sessionUpdate, \
             {logs} window/logMessage (the agent sent {lines})"
        );
        println!(
            "  {name:<17} didChange → response, idle:      {}",
            describe(&run.idle)
        );
        println!(
            "  {name:<17} didChange → response, idle beside the same stream outside agentls: {}",
            describe(&run.beside)
        );
        println!(
            "  {name:<17} didChange → response, streaming: {}",
            describe(&run.streaming)
        );
        let (slow, behind, updates) = run.slow_behind_updates;
        if updates > 0 {
            println!(
                "  {name:<17} of the {slow} round trips slower than the idle p95, {behind} read stream updates before their reply ({updates} updates)"
            );
        }
        println!(
            "  {name:<17} p95 streaming / p95 idle beside the stream outside agentls: {:.1}×",
            secs(quantile(&run.streaming, 0.95)) / secs(quantile(&run.beside, 0.95)),
        );
        println!(
            "  {name:<17} p95 streaming / p95 idle: {:.1}×",
            secs(quantile(&run.streaming, 0.95)) / secs(quantile(&run.idle, 0.95)),
        );
    }
}

/// A plugin that asks for every `agentls/*` notification, the stream's included.
const EVERY: &[&str] = &["sessionUpdate", "reviewChanged", "turnChanged"];
/// What the shipped packages ask for at most: no stream (Helix asks for nothing).
const NO_STREAM: &[&str] = &["reviewChanged", "turnChanged"];

/// agentls (with `config`, else the built-in demo agent) streaming to the test client, which
/// asks for the `plugin_events`, with round trips measured idle, idle while `outside` streams
/// the same without agentls, and during the stream.
async fn through_agentls(
    config: Option<String>,
    agent: &str,
    plugin_events: &[&str],
    samples: usize,
    outside: &Outside,
) -> Run {
    let client = TestClient::start(Options {
        config_toml: config,
        // The default log level, as users run it (the test client asks for `debug`).
        env: vec![("AGENTLS_LOG".into(), "info".into())],
        ..Options::default()
    })
    .await;
    let options = json!({"pluginEvents": plugin_events});
    client
        .initialize(TestClient::rich_capabilities(false), Some(options))
        .await;
    let uri = client.open("typing.txt", "text", "\n").await;
    // The agent is started (spawn, initialize, session) before anything is measured.
    client
        .execute("agentls.newSession", json!({"agent": agent}))
        .await
        .unwrap();
    client.take("window/showMessage", |_| true).await;
    let pid = client.pid();
    let idle_rss = Resident::of(pid);
    // `/proc` keeps the peak of all resident memory only: the anonymous part is sampled.
    let anon_peak = Repeating::start(0, move |most: &mut u64| {
        *most = (*most).max(memory(pid, "RssAnon:"));
        std::thread::sleep(Duration::from_millis(1));
    });
    let version = Cell::new(0);
    let idle = durations(round_trips(&client, &uri, &version, samples, || false).await);
    let beside = {
        let load = Repeating::start(outside.clone(), |outside| outside.stream_once());
        let sampled = durations(round_trips(&client, &uri, &version, samples, || false).await);
        load.stop();
        sampled
    };
    let summary = format!("{agent}: end_turn");
    let mut streaming = Vec::new();
    let mut first = None;
    for _ in 0..MAX_STREAMS {
        let before = counts(&client);
        let cpu_before = cpu_time(pid);
        let started = Instant::now();
        let done = Cell::new(false);
        client.prompt(&prompt_text()).await;
        let summary = async {
            if samples == 0 {
                // Under a profiler: longer than the client's own deadline.
                let ended = || {
                    client.received("window/showMessage").iter().any(|m| {
                        let text = m["params"]["message"].as_str();
                        text.is_some_and(|m| m.contains(&summary))
                    })
                };
                while !ended() {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            } else {
                client
                    .take("window/showMessage", |p| {
                        p["message"].as_str().is_some_and(|m| m.contains(&summary))
                    })
                    .await;
            }
            done.set(true);
        };
        let sampling = async {
            if samples == 0 {
                return Vec::new();
            }
            round_trips(&client, &uri, &version, usize::MAX, || done.get()).await
        };
        let ((), sampled) = tokio::join!(summary, sampling);
        let elapsed = started.elapsed();
        let cpu = cpu_time(pid) - cpu_before;
        // Let the last batched log text arrive before counting.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let after = counts(&client);
        streaming.extend(sampled);
        first.get_or_insert((elapsed, cpu, diff(after, before)));
        if streaming.len() >= samples {
            break;
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss = Memory {
        idle: idle_rss,
        peak: memory(pid, "VmHWM:"),
        peak_anon: anon_peak.stop(),
        after: Resident::of(pid),
    };
    assert!(client.shutdown().await.success());
    let (elapsed, cpu, counts) = first.unwrap();
    let idle_p95 = quantile(&idle, 0.95);
    let slow: Vec<&RoundTrip> = streaming.iter().filter(|r| r.elapsed > idle_p95).collect();
    let slow_behind_updates = (
        slow.len(),
        slow.iter().filter(|r| r.updates > 0).count(),
        slow.iter().map(|r| r.updates).sum(),
    );
    Run {
        elapsed,
        cpu,
        rss,
        counts,
        idle,
        beside,
        streaming: durations(streaming),
        slow_behind_updates,
    }
}

/// The same stream as a run's, produced and parsed outside agentls: what the machine's two
/// cores do without agentls while round trips are measured beside it.
#[derive(Clone)]
enum Outside {
    /// The recorded NDJSON, `cat` to a reader that parses each line.
    Replay(std::path::PathBuf),
    /// The demo agent itself, its stdout parsed line by line.
    DemoAgent,
}

impl Outside {
    fn stream_once(&self) {
        match self {
            Self::Replay(stream) => {
                cat_and_parse(stream);
            }
            Self::DemoAgent => {
                agent_alone::run(&prompt_text(), &mut std::io::sink());
            }
        }
    }
}

/// A config whose agent `replay` is a shell script answering `initialize` and `session/new`, and
/// answering each prompt with `cat` of the recorded stream (then the prompt's response).
fn replay_config(dir: &Path, stream: &Path, session: &str) -> String {
    let script = dir.join("replay.sh");
    let body = r#"#!/bin/sh
# Replays a recorded ACP stream: the JSON-RPC id of each request is cut out with sed.
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\("[^"]*"\|[0-9][0-9]*\).*/\1/p')
  case "$line" in
    *'"method":"initialize"'*)
      printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{}}}\n' "$id" ;;
    *'"method":"session/new"'*)
      printf '{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"%s"}}\n' "$id" "$SESSION" ;;
    *'"method":"session/prompt"'*)
      cat "$STREAM"
      printf '{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}\n' "$id" ;;
  esac
done
"#;
    std::fs::write(&script, body).unwrap();
    let quote = |p: &Path| serde_json::to_string(&p.display().to_string()).unwrap();
    format!(
        "[agents.replay]\ncommand = \"/bin/sh\"\nargs = [{}]\n[agents.replay.env]\nSTREAM = {}\nSESSION = {:?}\n",
        quote(&script),
        quote(stream),
        session
    )
}

/// What the ACP TypeScript SDK's client did with the replayed stream.
struct SdkRun {
    elapsed: Duration,
    cpu: Duration,
    peak_rss: u64,
}

/// The replayed stream read by the ACP TypeScript SDK's `ClientSideConnection` under node
/// (`common/sdk_client.mjs`), the SDK found where `scripts/test-tools.sh` installs it; `None`
/// when it is not installed.
fn sdk_client(dir: &Path, stream: &Path, session: &str) -> Option<SdkRun> {
    let example = std::env::var_os("AGENTLS_TEST_ACP_EXAMPLE")?;
    let sdk = Path::new(&example).parent()?.parent()?.join("acp.js");
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/common/sdk_client.mjs");
    let output = Command::new("node")
        .arg(client)
        .args([
            sdk.as_os_str(),
            dir.join("replay.sh").as_os_str(),
            stream.as_os_str(),
        ])
        .arg(session)
        .current_dir(dir)
        .stderr(Stdio::inherit())
        .output()
        .ok()?;
    let run: Value = serde_json::from_slice(&output.stdout).expect("the SDK client's report");
    // The flood, and the few lines the demo agent says around it.
    let chunks = run["chunks"].as_u64().unwrap_or_default();
    assert!(chunks >= CHUNKS as u64, "chunks the SDK client saw: {run}");
    assert_eq!(run["stopReason"], "end_turn", "{run}");
    Some(SdkRun {
        elapsed: Duration::from_secs_f64(run["ms"].as_f64()? / 1e3),
        cpu: Duration::from_secs_f64(run["cpuMs"].as_f64()? / 1e3),
        peak_rss: run["peakRss"].as_u64()?,
    })
}

/// `cat file | reader` where the reader parses every line as JSON; returns how long it took and
/// the reader's CPU time.
fn cat_and_parse(file: &Path) -> (Duration, Duration) {
    let cpu_before = thread_cpu_time();
    let started = Instant::now();
    let mut cat = Command::new("cat")
        .arg(file)
        .stdout(Stdio::piped())
        .spawn()
        .expect("cat");
    let mut reader = BufReader::new(cat.stdout.take().unwrap());
    let mut line = String::new();
    let mut chunks = 0;
    while reader.read_line(&mut line).unwrap() > 0 {
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            chunks += 1;
        }
        line.clear();
    }
    cat.wait().unwrap();
    assert!(chunks >= CHUNKS);
    (started.elapsed(), thread_cpu_time() - cpu_before)
}

/// The CPU time (user + system) of this thread so far.
fn thread_cpu_time() -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_THREAD, &mut usage);
        usage
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// The CPU time (user + system, all threads) of process `pid` so far, from `/proc`.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name (which is in parentheses and may hold spaces).
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let (utime, stime): (f64, f64) = (fields[11].parse().unwrap(), fields[12].parse().unwrap());
    Duration::from_secs_f64((utime + stime) / ticks)
}

/// agentls's resident memory: idle, its high-water mark and the most of it that was its own,
/// and a second after the streams.
struct Memory {
    idle: Resident,
    /// `VmHWM`: all of it.
    peak: u64,
    /// The most anonymous memory sampled while the streams ran.
    peak_anon: u64,
    after: Resident,
}

/// Resident memory at one moment, in bytes: all of it, and the anonymous part (heap, stacks:
/// the process's own). The rest is the binary and its libraries mapped from the page cache,
/// shared with it and given back whenever the kernel needs the room.
#[derive(Clone, Copy)]
struct Resident {
    all: u64,
    anon: u64,
}

impl Resident {
    fn of(pid: u32) -> Self {
        Self {
            all: memory(pid, "VmRSS:"),
            anon: memory(pid, "RssAnon:"),
        }
    }
}

/// A thread running one step over its state again and again until stopped (a load, a sampler).
struct Repeating<T> {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<T>,
}

impl<T: Send + 'static> Repeating<T> {
    fn start(mut state: T, mut step: impl FnMut(&mut T) + Send + 'static) -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = std::sync::Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                step(&mut state);
            }
            state
        });
        Self { stop, thread }
    }

    /// Stops it after its step under way; its state then.
    fn stop(self) -> T {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// One measured round trip.
struct RoundTrip {
    elapsed: Duration,
    /// Stream updates the client read while it waited (the reply came after them).
    updates: usize,
}

/// Round trips: a one-character `didChange`, then `agentls.debug.state`, which must show the new
/// version. Measures `n` of them, or until `stop` says so.
async fn round_trips(
    client: &TestClient,
    uri: &str,
    version: &Cell<i32>,
    n: usize,
    stop: impl Fn() -> bool,
) -> Vec<RoundTrip> {
    let mut samples = Vec::new();
    while samples.len() < n && !stop() {
        let updates_before = client.count(Some("agentls/sessionUpdate"));
        let started = Instant::now();
        client.edit(uri, support::range(0, 0, 0, 0), "x").await;
        version.set(version.get() + 1);
        let state = client.server_state().await;
        let elapsed = started.elapsed();
        // The only open document.
        let seen = &state["documents"][0]["version"];
        assert_eq!(*seen, json!(version.get()), "{state}");
        samples.push(RoundTrip {
            elapsed,
            updates: client.count(Some("agentls/sessionUpdate")) - updates_before,
        });
        tokio::time::sleep(SPACING).await;
    }
    samples
}

fn durations(round_trips: Vec<RoundTrip>) -> Vec<Duration> {
    round_trips.into_iter().map(|r| r.elapsed).collect()
}

/// (logMessage, sessionUpdate, all) messages received so far.
fn counts(client: &TestClient) -> (usize, usize, usize) {
    (
        client.count(Some("window/logMessage")),
        client.count(Some("agentls/sessionUpdate")),
        client.count(None),
    )
}

fn diff(after: (usize, usize, usize), before: (usize, usize, usize)) -> (usize, usize, usize) {
    (after.0 - before.0, after.1 - before.1, after.2 - before.2)
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}
