//! A real editor end to end: batch Emacs with eglot loads the shipped `editors/emacs` config,
//! starts the real `agentls` binary (found on PATH, as the config expects), edits non-ASCII
//! text, then reviews an agent's proposal the way a user does: diagnostics in flymake, the code
//! action menu at a change, "Accept change 1/2" with eglot's y/n confirmation answered, "Reject
//! change 2/2". The Lisp side is `tests/emacs/`.
//!
//! Emacs 28's jsonrpc stops parsing a read at the reply of a synchronous request, so this also
//! proves that what agentls sends after a command's reply (the applyEdit, the diagnostics)
//! reaches eglot: without the server's output pacing (`src/lsp/transport.rs`) it stalls.
//!
//! Emacs comes from `AGENTLS_TEST_EMACS` (`eval "$(scripts/test-tools.sh)"` installs it). Without
//! it the test is skipped with a message, except under CI, where a missing editor is a failure.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::peers::{self, Sandbox, Session};

/// The whole Emacs session, startup to exit, must fit in this.
const TIMEOUT: Duration = Duration::from_secs(60);

const SAMPLE: &str = "ascii crab line\nemoji 😀 and 🦀 here\n漢字 and かな mixed\nlast line\n";
/// `SAMPLE` after the script's edits, as the buffer holds it.
const EDITED: &str =
    "Ascii crab line emoji 😀🎉 and 🦀 here + 子漢 and かな\n mixed\nlast line ✓ 末尾\n새 줄 🦀\n";
/// What the agent proposes: two changes, one on the first line after astral characters, one
/// on the last line.
const PROPOSAL: &str =
    "Ascii crab line emoji 😀🎉 and 🐙 here + 子漢 and かな\n mixed\nlast line ✓ 末尾\n새 줄 🐙\n";
/// The first change accepted, the second rejected.
const ACCEPTED: &str =
    "Ascii crab line emoji 😀🎉 and 🐙 here + 子漢 and かな\n mixed\nlast line ✓ 末尾\n새 줄 🦀\n";

/// Emacs's stderr, eglot's wire log and the server's stderr (tails).
fn context(session: &Session) -> String {
    session.context("emacs", &["eglot-events.log", "agentls.stderr"], 8000)
}

/// Runs `tests/emacs/review_and_edits.el` in a fresh, isolated batch Emacs against agentls.
fn run_session(emacs: &Path) -> (Session, PathBuf, PathBuf) {
    let sandbox = Sandbox::create();
    let (root, workspace) = (sandbox.root.clone(), sandbox.workspace.clone());
    let sample = workspace.join("sample.txt");
    std::fs::write(&sample, SAMPLE).unwrap();
    let proposal = root.join("proposal.txt");
    std::fs::write(&proposal, PROPOSAL).unwrap();

    // The shipped config runs `agentls` from PATH: put the binary under test first.
    let server = Path::new(env!("CARGO_BIN_EXE_agentls"));
    let mut path = vec![server.parent().unwrap().to_path_buf()];
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    // `-q --no-site-file` rather than `-Q`: keep the system site-lisp directory, where
    // distribution packages (Debian's elpa-eglot) live, but load no init or site-start file.
    let mut command = Command::new(emacs);
    command
        .args(["--batch", "-q", "--no-site-file", "-l"])
        .arg(manifest.join("tests/emacs/review_and_edits.el"))
        .arg(manifest.join("editors/emacs/agentls.el"))
        .arg(&sample)
        .arg(&proposal)
        .arg(&root);
    // Emacs and the server it starts (which inherits this environment) see only the temp dir:
    // no user config, packages or state, no agentls config file.
    sandbox
        .isolate(&mut command)
        .env("PATH", std::env::join_paths(path).unwrap())
        .env("AGENTLS_LOG", "debug")
        .env_remove("AGENTLS_CONFIG")
        .env_remove("EMACSLOADPATH")
        .env_remove("EMACSDATA")
        .env_remove("EMACSPATH")
        .env_remove("EMACSDOC");
    let session = sandbox.run(&mut command, "emacs", TIMEOUT);
    (session, workspace, sample)
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// Edits and a review through the shipped eglot config, as a user runs them.
#[test]
fn emacs_eglot_edits_and_a_review_accepted_from_code_actions() {
    let Some(emacs) = peers::binary("AGENTLS_TEST_EMACS", "Emacs") else {
        return;
    };
    let started = Instant::now();
    let (session, workspace, sample) = run_session(&emacs);
    let ctx = context(&session);
    let out = &session.result;
    assert!(out.is_object(), "no JSON result on emacs's stdout\n{ctx}");
    assert_eq!(out["error"], Value::Null, "the Lisp script failed\n{ctx}");
    assert!(
        session.status.success(),
        "emacs exited with {}; result: {out}\n{ctx}",
        session.status
    );
    eprintln!(
        "Emacs {} + eglot {}: session took {:?}",
        out["emacs_version"],
        out["eglot_version"],
        started.elapsed()
    );

    // The shipped config attached agentls (the binary under test) to a text-mode buffer.
    assert_eq!(out["major_mode"], "text-mode", "{ctx}");
    assert_eq!(out["server_command"], json!(["agentls"]), "{ctx}");
    assert_eq!(
        out["agentls_on_path"],
        json!(env!("CARGO_BIN_EXE_agentls")),
        "{ctx}"
    );
    // eglot offers no position encodings: both ends use utf-16.
    assert_eq!(out["position_encoding"], "utf-16", "{ctx}");
    assert_eq!(out["server_encoding"], "utf-16", "{ctx}");
    assert_eq!(out["server_folders"], json!([workspace]), "{ctx}");
    assert_eq!(out["server_language_id"], "text", "{ctx}");

    // The edits did what the script meant, and the server applied each of them exactly.
    assert_eq!(
        out["buffer"], EDITED,
        "the edits did not do what the script meant\n{ctx}"
    );
    assert_eq!(
        out["server_after_edits"], EDITED,
        "server text differs from the buffer\n{ctx}"
    );

    // The review: one flymake diagnostic per change, at its line.
    let diagnostics = out["diagnostics"].as_array().expect("diagnostics");
    assert_eq!(diagnostics.len(), 2, "{ctx}");
    let first = diagnostics[0]["text"].as_str().unwrap();
    assert!(
        first.starts_with("agentls [1]: gemini proposes (change 1/2")
            && first.contains("\n- Ascii crab line emoji 😀🎉 and 🦀 here")
            && first.contains("\n+ Ascii crab line emoji 😀🎉 and 🐙 here"),
        "{first}\n{ctx}"
    );
    assert_eq!(diagnostics[0]["line"], 1, "{ctx}");
    assert_eq!(diagnostics[1]["line"], 4, "{ctx}");
    assert_eq!(diagnostics[0]["type"], "eglot-note", "{ctx}");
    assert!(
        strings(&out["shown_messages"]).contains(
            &"gemini proposes 2 changes to sample.txt: use code actions to review (Accept / Reject)"
        ),
        "{ctx}"
    );

    // Code actions at the first change, as eglot lists and offers them.
    let actions = strings(&out["actions_at_change"]);
    assert_eq!(actions.len(), 5, "{actions:?}\n{ctx}");
    assert_eq!(actions[4], "Ask demo about this", "{ctx}");
    assert!(
        actions[0].starts_with("Accept change 1/2 from gemini"),
        "{ctx}"
    );
    assert!(
        actions[1].starts_with("Reject change 1/2 from gemini"),
        "{ctx}"
    );
    assert_eq!(actions[2], "Accept all changes (2) from gemini", "{ctx}");
    assert_eq!(out["menus"][0], out["actions_at_change"], "{ctx}");

    // Accepting it: eglot asked before applying the server's edit (its default), the user said
    // y, and exactly that change landed in the buffer.
    assert!(
        out["accepted_action"]
            .as_str()
            .unwrap()
            .starts_with("Accept change 1/2 from gemini"),
        "{ctx}"
    );
    let confirmations = strings(&out["confirmations"]);
    assert_eq!(confirmations.len(), 1, "{ctx}");
    assert!(
        confirmations[0].contains(sample.to_str().unwrap()),
        "{confirmations:?}"
    );
    assert_eq!(out["buffer_after_accept"], ACCEPTED, "{ctx}");

    // Rejecting the other one ends the review: accepted, with the first change only.
    assert!(
        out["rejected_action"]
            .as_str()
            .unwrap()
            .starts_with("Reject change 2/2 from gemini"),
        "{ctx}"
    );
    let verdict = &out["verdict"];
    assert_eq!(verdict["verdict"], "accepted", "{ctx}");
    assert_eq!(verdict["text"], ACCEPTED, "{ctx}");
    assert_eq!(
        verdict["rejected"].as_array().map(Vec::len),
        Some(1),
        "{ctx}"
    );
    assert_eq!(out["buffer_final"], ACCEPTED, "{ctx}");
    assert_eq!(out["server_final"], ACCEPTED, "{ctx}");

    // The demo agent's accepted change reached the buffer only, next to the user's unsaved
    // line; Emacs saved both with no question, since its file never changed under it.
    assert!(
        out["agent_accepted_action"]
            .as_str()
            .is_some_and(|t| t.starts_with("Accept all changes (1) from demo")),
        "{ctx}"
    );
    assert_eq!(out["agent_buffer"], "mine\nkeep\n// TODO A\n", "{ctx}");
    assert_eq!(out["agent_disk_before_save"], "keep\n// TODO a\n", "{ctx}");
    assert_eq!(out["agent_file_as_visited"], true, "{ctx}");
    assert_eq!(out["supersession_questions"], json!([]), "{ctx}");
    assert_eq!(out["agent_disk"], "mine\nkeep\n// TODO A\n", "{ctx}");
    assert_eq!(out["agent_modified_after_save"], false, "{ctx}");

    // The server left cleanly after shutdown + exit.
    assert_eq!(out["shutdown_error"], Value::Null, "{ctx}");
    assert_eq!(out["server_exit"], 0, "{ctx}");
}
