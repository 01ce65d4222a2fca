//! 1,000 sequential `getCurrentSelection` tool calls over the terminal-agent WebSocket (MCP,
//! answered from the context the editor state publishes, in the task that reads the socket when
//! that context is current), against 1,000 plain WebSocket echo round trips of the tool's answer
//! frame on the same machine, in the same run. The client does the same work for both: its
//! frames are built before the clock starts, and every answer is parsed. Prints totals, per-call
//! times, the ratio, and the context switches per call of this process's threads (client and
//! server alike, from /proc) for each.
//!
//! Run: `cargo bench --bench mcp_selection`

#[path = "common/ide_socket.rs"]
mod ide_socket;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use agentls::editor::{Position, Range};
use futures::{SinkExt as _, StreamExt as _};
use ide_socket::{connect, initialize, round_trip};
use serde_json::json;

const CALLS: usize = 1_000;
const RUNS: usize = 5;

fn main() {
    let config = tempfile::tempdir().expect("temp dir");
    // SAFETY: set before the runtime starts any thread.
    unsafe { std::env::set_var("CLAUDE_CONFIG_DIR", config.path()) };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(run());
}

async fn run() {
    let (editor, feed, _effects) = agentls::editor::start();
    let path = PathBuf::from("/bench/src/main.rs");
    let text = "fn main() {\n    println!(\"hello\");\n}\n".repeat(20);
    feed.opened(path.clone(), text, 1, "rust".into());
    let range = Range::new(Position::new(1, 4), Position::new(1, 21));
    feed.selected(path, range, None);
    let server = agentls::mcp::McpServer::start(editor)
        .await
        .expect("MCP server");
    let mut mcp = connect(server.port(), server.token().as_str()).await;
    initialize(&mut mcp).await;
    let call = |id: usize| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "getCurrentSelection", "arguments": {}}})
        .to_string()
    };
    let answer = round_trip(&mut mcp, call(1)).await;
    assert!(answer.contains("println"), "{answer}");
    let frame_len = answer.len();

    let echo_port = echo_server().await;
    let mut echo = connect(echo_port, "").await;
    // The client does the same work on both sides: frames built before the clock starts, each
    // answer parsed as JSON (the echo sends back an answer of the tool's, byte for byte).
    let mut calls = (2..2 + RUNS * CALLS).map(call);
    let payload = answer;

    let mut ours = Vec::new();
    let mut baseline = Vec::new();
    let (mut switches_ours, mut switches_baseline) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let frames: Vec<String> = calls.by_ref().take(CALLS).collect();
        let (started, switched) = (Instant::now(), context_switches());
        for frame in frames {
            let answer = round_trip(&mut mcp, frame).await;
            debug_assert!(answer.contains("\"success\":true"));
        }
        ours.push(started.elapsed());
        switches_ours.push(context_switches() - switched);
        let frames = vec![payload.clone(); CALLS];
        let (started, switched) = (Instant::now(), context_switches());
        for frame in frames {
            round_trip(&mut echo, frame).await;
        }
        baseline.push(started.elapsed());
        switches_baseline.push(context_switches() - switched);
    }
    let (ours, baseline) = (median(ours), median(baseline));
    let per_call = |mut switches: Vec<u64>| {
        switches.sort_unstable();
        switches[switches.len() / 2] as f64 / CALLS as f64
    };
    let (switches_ours, switches_baseline) = (per_call(switches_ours), per_call(switches_baseline));
    println!("mcp_selection: {CALLS} calls, median of {RUNS} runs, answer frame {frame_len} bytes");
    println!(
        "  getCurrentSelection over MCP/WebSocket: {:>8.1} ms total, {:>6.1} µs per call",
        ms(ours),
        micros(ours) / CALLS as f64
    );
    println!(
        "  WebSocket echo of the answer frame:     {:>8.1} ms total, {:>6.1} µs per round trip",
        ms(baseline),
        micros(baseline) / CALLS as f64
    );
    println!(
        "  ratio: {:.2}x the bare round trip",
        ours.as_secs_f64() / baseline.as_secs_f64()
    );
    println!(
        "  context switches per call (this process, client and server): {switches_ours:.2}, \
         echo {switches_baseline:.2}"
    );
    server.stop();
}

/// A WebSocket server that echoes every frame, on a free loopback port.
async fn echo_server() -> u16 {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                while let Some(Ok(message)) = ws.next().await {
                    if message.is_text() && ws.send(message).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// Context switches of every thread of this process so far (voluntary and not), from /proc.
fn context_switches() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .flat_map(|status| {
            status
                .lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
