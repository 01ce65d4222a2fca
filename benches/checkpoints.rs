//! What keeping a turn for undoing costs, and what undoing it takes: the demo agent changes ten
//! closed files of 1 KB, 100 KB and 1 MB in one turn, without asking (about one line in ten).
//! For each size: the bytes the turn's checkpoint keeps against the bytes of the files it
//! changed, and the time from `agentls.undoTurn` until its reviews are open against the time
//! `git diff` takes to compute the same turn's changes in the same run (the files committed
//! before the turn).
//!
//! Run: `cargo bench --bench checkpoints`

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::TestClient;
use support::agents::capabilities_without_dialogs;

/// How many files the turn changes.
const FILES: usize = 10;
/// How many times each size is measured (the median is printed).
const RUNS: usize = 5;

/// One run's figures.
struct Figures {
    kept: u64,
    changed: u64,
    undo: Duration,
    git_diff: Duration,
}

#[tokio::main]
async fn main() {
    support::measure_the_named_binary();
    println!("checkpoints: one turn changing {FILES} closed files, median of {RUNS}");
    for size in [1_000, 100_000, 1_000_000] {
        let mut runs = Vec::new();
        for _ in 0..RUNS {
            runs.push(measure(size).await);
        }
        let median = |pick: fn(&Figures) -> f64| {
            let mut values: Vec<f64> = runs.iter().map(pick).collect();
            values.sort_by(f64::total_cmp);
            values[values.len() / 2]
        };
        let kept = median(|f| f.kept as f64);
        let changed = median(|f| f.changed as f64);
        let undo = median(|f| f.undo.as_secs_f64() * 1000.0);
        let git = median(|f| f.git_diff.as_secs_f64() * 1000.0);
        println!(
            "  files of {:>7} B: kept {:>9.0} B for {:>9.0} B changed ({:.2}×); undoTurn {:>7.1} ms, \
             git diff {:>6.1} ms ({:.2}×)",
            size,
            kept,
            changed,
            kept / changed,
            undo,
            git,
            undo / git
        );
    }
}

/// A text of about `size` bytes, one line in ten a TODO the demo agent uppercases.
fn file_text(size: usize, seed: usize) -> String {
    let mut text = String::with_capacity(size + 64);
    let mut line = 0;
    while text.len() < size {
        if line % 10 == 0 {
            text.push_str(&format!("// TODO item {seed}-{line}\n"));
        } else {
            text.push_str(&format!("let value_{line} = compute({line}, {seed});\n"));
        }
        line += 1;
    }
    text
}

async fn measure(size: usize) -> Figures {
    let client = TestClient::started(capabilities_without_dialogs()).await;
    let names: Vec<String> = (0..FILES).map(|i| format!("f{i}.txt")).collect();
    let mut changed = 0;
    for (i, name) in names.iter().enumerate() {
        let text = file_text(size, i);
        changed += text.len() as u64;
        std::fs::write(client.workspace.join(name), text).unwrap();
    }
    git(&client.workspace, &["init", "-q"]);
    git(&client.workspace, &["add", "."]);
    git(
        &client.workspace,
        &[
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b",
            "commit",
            "-qm",
            "before",
        ],
    );
    let also: Vec<String> = names[1..].iter().map(|n| format!("@also {n}")).collect();
    client
        .prompt(&format!(
            "uppercase {} {} @unasked",
            names[0],
            also.join(" ")
        ))
        .await;
    client
        .take("$/progress", |p| {
            p["value"]["kind"] == "end" && p["value"]["message"] == "end_turn"
        })
        .await;
    let kept = loop {
        let state = client.server_state().await;
        let turn = &state["checkpoints"][0];
        if turn["files"].as_array().map(Vec::len) == Some(FILES) {
            break turn["bytes"].as_u64().unwrap();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let began = Instant::now();
    let told = client
        .execute("agentls.undoTurn", Value::Null)
        .await
        .expect("agentls.undoTurn");
    let undo = began.elapsed();
    assert!(
        told.as_str()
            .unwrap()
            .contains(&format!("{FILES} files to review")),
        "{told}"
    );
    let began = Instant::now();
    let diff = git(&client.workspace, &["diff"]);
    let git_diff = began.elapsed();
    assert!(diff.contains("+// TODO ITEM"), "git saw no change");
    assert!(client.shutdown().await.success());
    Figures {
        kept,
        changed,
        undo,
        git_diff,
    }
}

/// Runs git in `dir`; its standard output.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}
