//! A soak through the real binary: many demo turns (300, `AGENTLS_SOAK_TURNS` for the long run),
//! each proposing a small change that the user accepts, with agentls's resident memory, open
//! file descriptors and threads sampled from `/proc/<pid>/` as it goes. Descriptors and threads
//! must not grow after the warm-up, nor memory by 10 % from the middle of the run to its end.
//! The samples are printed (with the turns' latency) for the record.

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::agents::capabilities_without_dialogs;
use support::processes::{Usage, usage};
use support::{TestClient, range};

const NOTES: &str = "keep\n// TODO fix this\n";
const ACCEPTED: &str = "keep\n// TODO FIX THIS\n";

/// One sample: after how many turns, what agentls used, and how long the turns since the last
/// sample took on average and at most.
#[derive(Debug, Clone, Copy)]
struct Sample {
    turns: usize,
    usage: Usage,
    mean_turn: Duration,
    slowest_turn: Duration,
}

#[tokio::test]
async fn many_accepted_turns_leave_no_growth() {
    let turns: usize = std::env::var("AGENTLS_SOAK_TURNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300)
        .max(20);
    let every = (turns / 20).max(1);
    let client = TestClient::started(capabilities_without_dialogs()).await;
    let server = client.pid();
    let uri = client.open("notes.txt", "text", NOTES).await;
    let started = Instant::now();
    let mut samples = vec![Sample {
        turns: 0,
        usage: usage(server).expect("agentls runs"),
        mean_turn: Duration::ZERO,
        slowest_turn: Duration::ZERO,
    }];
    let mut window = Vec::new();
    for turn in 1..=turns {
        let began = Instant::now();
        client.prompt("uppercase notes.txt").await;
        client.run_code_action(&uri, "Accept all changes").await;
        // The turn's progress ends once its summary is told.
        client
            .take("$/progress", |p| {
                p["value"]["kind"] == "end" && p["value"]["message"] == "end_turn"
            })
            .await;
        assert_eq!(client.document(&uri).text, ACCEPTED, "turn {turn}");
        window.push(began.elapsed());
        // The user puts it back by hand for the next turn.
        client.edit(&uri, range(0, 0, 2, 0), NOTES).await;
        client.forget_received();
        if turn % every == 0 {
            samples.push(Sample {
                turns: turn,
                usage: usage(server).expect("agentls runs"),
                mean_turn: window.iter().sum::<Duration>() / window.len() as u32,
                slowest_turn: window.iter().copied().max().unwrap_or_default(),
            });
            window.clear();
        }
    }
    let elapsed = started.elapsed();
    eprintln!("soak: {turns} accepted turns in {elapsed:.1?}");
    eprintln!("turns    RSS KiB  fds  threads  mean turn  slowest turn");
    for s in &samples {
        eprintln!(
            "{:>5}  {:>9}  {:>3}  {:>7}  {:>9.1?}  {:>12.1?}",
            s.turns, s.usage.rss_kib, s.usage.fds, s.usage.threads, s.mean_turn, s.slowest_turn
        );
    }
    let status = client.agent_status().await;
    assert_eq!(status["agents"][0]["starts"], json!(1), "{status}");
    // After the warm-up (a tenth of the run), descriptors and threads stay put; tokio's blocking
    // threads (file writes) come and go, hence a little room for threads.
    let warm = samples
        .iter()
        .find(|s| s.turns >= turns / 10)
        .expect("a sample after the warm-up");
    for s in samples.iter().filter(|s| s.turns >= warm.turns) {
        assert!(
            s.usage.fds <= warm.usage.fds + 2,
            "descriptors grew: {samples:#?}"
        );
        assert!(
            s.usage.threads <= warm.usage.threads + 4,
            "threads grew: {samples:#?}"
        );
    }
    // What stays resident, not a passing peak (a sample may fall before the heap's trim after
    // a turn): the lowest RSS around the middle against the lowest in the last tenth.
    let floor = |from: usize, to: usize| {
        samples
            .iter()
            .filter(|s| (from..=to).contains(&s.turns))
            .map(|s| s.usage.rss_kib)
            .min()
            .expect("samples in the range")
    };
    let (middle, end) = (
        floor(turns * 9 / 20, turns * 11 / 20),
        floor(turns * 9 / 10, turns),
    );
    assert!(
        end * 10 < middle * 11,
        "memory grew by 10 % or more from the middle ({middle} KiB) to the end ({end} KiB): \
         {samples:#?}"
    );
    assert!(client.shutdown().await.success());
}
