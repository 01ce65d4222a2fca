//! Diff + hunk construction for a review of a 100,000-line file with 1% of its lines changed,
//! against `git diff --no-index` on the same two files, in the same run. Prints medians and the
//! ratio.
//!
//! Run: `cargo bench --bench review_diff`

use std::hint::black_box;
use std::process::Command;
use std::time::{Duration, Instant};

use agentls::editor::review::Review;

const LINES: usize = 100_000;
const RUNS: usize = 7;

fn main() {
    let (old, new) = texts();
    let dir = tempfile::tempdir().expect("temp dir");
    let (a, b) = (dir.path().join("old.rs"), dir.path().join("new.rs"));
    std::fs::write(&a, &old).unwrap();
    std::fs::write(&b, &new).unwrap();

    let ours = median(|| {
        let hunks = Review::hunks_between(&old, &new);
        black_box(hunks.len());
    });
    let hunks = Review::hunks_between(&old, &new).len();
    let git = median(|| {
        let out = Command::new("git")
            .args(["diff", "--no-index", "--no-color", "--stat=0"])
            .arg(&a)
            .arg(&b)
            .output()
            .expect("git on PATH");
        black_box(out.stdout.len());
    });
    let git_full = median(|| {
        let out = Command::new("git")
            .args(["diff", "--no-index", "--no-color"])
            .arg(&a)
            .arg(&b)
            .output()
            .expect("git on PATH");
        black_box(out.stdout.len());
    });
    println!(
        "file: {LINES} lines, {:.1} MB, {} lines changed -> {hunks} hunks",
        old.len() as f64 / 1e6,
        LINES / 100
    );
    println!(
        "agentls diff + hunks: {:.1} ms (median of {RUNS})",
        ms(ours)
    );
    println!(
        "git diff --no-index (full patch, incl. process start): {:.1} ms",
        ms(git_full)
    );
    println!(
        "git diff --no-index --stat (incl. process start): {:.1} ms",
        ms(git)
    );
    println!(
        "ratio: agentls takes {:.2}x the time of git diff (full patch)",
        ours.as_secs_f64() / git_full.as_secs_f64()
    );
    // The worst case: every line rewritten. The line diff has a time budget, so this stays
    // bounded instead of growing with lines × changes.
    let rewritten: String = old.lines().map(|l| format!("{l} // edited\n")).collect();
    let start = Instant::now();
    let hunks = Review::hunks_between(&old, &rewritten).len();
    println!(
        "every line rewritten: {:.1} ms -> {hunks} hunk(s)",
        ms(start.elapsed())
    );
}

/// A 100,000-line source file and a copy with every 100th line changed.
fn texts() -> (String, String) {
    let mut old = String::new();
    let mut new = String::new();
    for i in 0..LINES {
        let line = format!("    let value_{i} = compute({i}, \"漢字\", {});\n", i % 7);
        old.push_str(&line);
        if i % 100 == 50 {
            new.push_str(&format!("    let value_{i} = compute_changed({i});\n"));
        } else {
            new.push_str(&line);
        }
    }
    (old, new)
}

fn median(mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[RUNS / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
