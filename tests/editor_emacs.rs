//! A real editor end to end: batch Emacs with eglot, with the shipped `editors/emacs` package.
//!
//! - Emacs 28.2 + eglot 1.9 loads `agentls.el`, starts the real `agentls` binary (found on PATH,
//!   as the package expects), edits non-ASCII text, then reviews a proposal the way a user does:
//!   diagnostics in flymake, the code action menu at a change, "Accept change 1/2" with no y/n
//!   question (the package answers eglot's for agentls's own edits), "Reject change 2/2"
//!   (`tests/emacs/review_and_edits.el`). Emacs 28's jsonrpc stops parsing a read at the reply of
//!   a synchronous request, so this also proves that what agentls sends after a command's reply
//!   (the applyEdit, the diagnostics) reaches eglot: without the server's output pacing
//!   (`src/lsp/transport.rs`) it stalls.
//! - The package byte-compiles without a warning on Emacs 28 + eglot 1.9 and on Emacs 30, and
//!   `agentls-lsp.el` on Emacs 28 + Debian's lsp-mode 8.0.
//! - lsp-mode with agentls as an add-on server beside a real pylsp: a review decided through its
//!   code actions, an unsaved edit kept (`tests/emacs/lsp_mode.el`).
//! - A whole conversation, on Emacs 28 and on Emacs 30, with the init code of
//!   `editors/emacs/README.md`: chat, send, the streamed reply, the region as the selection, a
//!   prompt, one change accepted and one rejected with no question, save, quit with no
//!   question, and agentls's discovery files gone after the quit (`tests/emacs/conversation.el`).
//!
//! - Beside the user's own language server: `(agentls-beside 'python-mode "pylsp")` joins a real
//!   pylsp and agentls through a real `rass` (rassumfrassum), and a review is decided in a Python
//!   buffer pylsp serves, an unsaved edit kept, on Emacs 28 and 30 (`tests/emacs/beside.el`).
//! - The same conversation in `emacs -nw` under tmux, typed as a user with the README's keys,
//!   with the README's init code as the user's init file; the screens of the key moments are
//!   saved under `$AGENTLS_TEST_CAPTURES/emacs/` when that is set. And quitting `emacs -nw`
//!   with `C-x C-c`, three times, leaves none of agentls's discovery files behind.
//!
//! Emacs comes from `AGENTLS_TEST_EMACS` and Emacs 30 from `AGENTLS_TEST_EMACS30`
//! and tmux from `AGENTLS_TEST_TMUX` (`eval "$(scripts/test-tools.sh)"` installs them). The
//! tests are ignored without the feature `real-peers` (scripts/test.sh turns it on); with it, a
//! missing editor or tmux fails its test.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::peers::{self, Sandbox, Session};
use support::tmux::Tmux;

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

/// A batch Emacs (`--batch -q --no-site-file`) that sees only the sandbox (no user config,
/// packages or state, no agentls config file; the server it starts inherits this environment)
/// and finds the `agentls` under test first on PATH, as the package runs it.
fn emacs_in(emacs: &Path, sandbox: &Sandbox) -> Command {
    let server = Path::new(env!("CARGO_BIN_EXE_agentls"));
    let mut path = vec![server.parent().unwrap().to_path_buf()];
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    // `-q --no-site-file` rather than `-Q`: keep the system site-lisp directory, where
    // distribution packages (Debian's elpa-eglot) live, but load no init or site-start file.
    let mut command = Command::new(emacs);
    command.args(["--batch", "-q", "--no-site-file"]);
    sandbox
        .isolate(&mut command)
        .env("PATH", std::env::join_paths(path).unwrap())
        .env("TMPDIR", sandbox.root.join("tmp"))
        .env("AGENTLS_LOG", "debug")
        .env_remove("AGENTLS_CONFIG")
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("EMACSLOADPATH")
        .env_remove("EMACSDATA")
        .env_remove("EMACSPATH")
        .env_remove("EMACSDOC");
    command
}

/// Runs `tests/emacs/review_and_edits.el` in a fresh, isolated batch Emacs against agentls.
fn run_session(emacs: &Path) -> (Session, PathBuf, PathBuf) {
    let sandbox = Sandbox::create();
    let (root, workspace) = (sandbox.root.clone(), sandbox.workspace.clone());
    let sample = workspace.join("sample.txt");
    std::fs::write(&sample, SAMPLE).unwrap();
    let proposal = root.join("proposal.txt");
    std::fs::write(&proposal, PROPOSAL).unwrap();

    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut command = emacs_in(emacs, &sandbox);
    command
        .arg("-l")
        .arg(manifest.join("tests/emacs/review_and_edits.el"))
        .arg(manifest.join("editors/emacs/agentls.el"))
        .arg(&sample)
        .arg(&proposal)
        .arg(&root);
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
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn emacs_eglot_edits_and_a_review_accepted_from_code_actions() {
    let emacs = peers::binary("AGENTLS_TEST_EMACS", "Emacs");
    let started = Instant::now();
    let (session, workspace, _sample) = run_session(&emacs);
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

    // Accepting it: exactly that change landed in the buffer.
    assert!(
        out["accepted_action"]
            .as_str()
            .unwrap()
            .starts_with("Accept change 1/2 from gemini"),
        "{ctx}"
    );
    // No y/n question: agentls's own edits apply directly.
    assert_eq!(out["confirmations"], json!([]), "{ctx}");
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

/// The init code `editors/emacs/README.md` tells the user to write (its `elisp` block number
/// `block`, from 1), with the clone's path for `~/src/agentls`, written to `init.el` in the
/// sandbox.
fn readme_init(sandbox: &Sandbox, block: usize) -> PathBuf {
    let manifest = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(Path::new(manifest).join("editors/emacs/README.md"))
        .expect("editors/emacs/README.md");
    let block = readme
        .split("```elisp\n")
        .nth(block)
        .and_then(|rest| rest.split("```").next())
        .unwrap_or_else(|| panic!("no elisp block {block} in editors/emacs/README.md"));
    assert!(
        block.contains("\"~/src/agentls/editors/emacs\""),
        "the README's init code no longer names ~/src/agentls/editors/emacs:\n{block}"
    );
    let init = sandbox.root.join("init.el");
    std::fs::write(&init, block.replace("~/src/agentls", manifest)).unwrap();
    init
}

/// `file` of `editors/emacs` compiles on `emacs` with every warning an error, run as a user
/// runs it (`emacs -batch -f batch-byte-compile`: the site files load, no package is activated
/// first); returns what it printed.
fn byte_compile(emacs: &Path, file: &str) -> (bool, String) {
    let sandbox = Sandbox::create();
    let copy = sandbox.root.join(file);
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(manifest.join("editors/emacs").join(file), &copy).unwrap();
    let mut command = Command::new(emacs);
    sandbox.isolate(&mut command).args([
        "-batch",
        "--eval",
        "(setq byte-compile-error-on-warn t)",
        "-f",
        "batch-byte-compile",
    ]);
    command.arg(&copy);
    let output = command.output().expect("run emacs");
    let printed = String::from_utf8_lossy(&output.stderr).into_owned();
    (
        output.status.success() && copy.with_extension("elc").is_file(),
        printed,
    )
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn the_package_byte_compiles_without_a_warning_on_emacs_28_and_30() {
    // agentls-lsp.el where lsp-mode is installed (Debian's, for Emacs 28).
    for (var, what, file) in [
        ("AGENTLS_TEST_EMACS", "Emacs", "agentls.el"),
        ("AGENTLS_TEST_EMACS30", "Emacs 30", "agentls.el"),
        ("AGENTLS_TEST_EMACS", "Emacs", "agentls-lsp.el"),
    ] {
        let emacs = peers::binary(var, what);
        let (compiled, printed) = byte_compile(&emacs, file);
        assert!(
            compiled,
            "{what}: {file} did not compile cleanly:\n{printed}"
        );
        assert!(
            !printed.to_lowercase().contains("warning"),
            "{what}: {printed}"
        );
    }
}

const NOTES: &str = "keep\n// TODO first\nx\nx\nx\n// TODO second\n";
/// `NOTES` with the first change accepted, the second rejected.
const NOTES_ACCEPTED: &str = "keep\n// TODO FIRST\nx\nx\nx\n// TODO second\n";

/// Whether `dir` holds no file (or does not exist).
fn empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).map_or(true, |mut d| d.next().is_none())
}

/// The whole conversation of `tests/emacs/conversation.el` in `emacs`, with the README's init
/// code block number `block`.
fn conversation(emacs: &Path, block: usize) {
    let started = Instant::now();
    let sandbox = Sandbox::create();
    let (root, workspace) = (sandbox.root.clone(), sandbox.workspace.clone());
    let notes = workspace.join("notes.txt");
    std::fs::write(&notes, NOTES).unwrap();
    let init = readme_init(&sandbox, block);
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut command = emacs_in(emacs, &sandbox);
    command
        .arg("-l")
        .arg(manifest.join("tests/emacs/conversation.el"))
        .arg(&init)
        .arg(&notes)
        .arg(&root);
    let session = sandbox.run(&mut command, "emacs", TIMEOUT);
    let ctx = context(&session);
    let out = &session.result;
    let stdout =
        std::fs::read_to_string(session.dir.path().join("emacs.stdout")).unwrap_or_default();
    assert!(
        out.is_object(),
        "no JSON result on emacs's stdout:\n{stdout}\n{ctx}"
    );
    assert_eq!(out["error"], Value::Null, "the Lisp script failed\n{ctx}");
    assert_eq!(out["ok"], true, "{ctx}");
    assert!(
        session.status.success(),
        "emacs exited with {}\n{ctx}",
        session.status
    );
    eprintln!(
        "Emacs {} + eglot {}: the conversation took {:?}",
        out["emacs_version"],
        out["eglot_version"],
        started.elapsed()
    );

    // The README's keys, and one agentls, started by `agentls-chat`, for notes.txt and the chat.
    assert_eq!(out["key_chat"], "agentls-chat", "{ctx}");
    assert_eq!(out["key_prompt"], "agentls-prompt", "{ctx}");
    assert_eq!(out["server_command"], json!(["agentls"]), "{ctx}");
    assert_eq!(out["notes_mode"], "text-mode", "{ctx}");
    assert_eq!(out["chat_mode"], "agentls-chat-mode", "{ctx}");
    assert_eq!(out["chat_same_server"], true, "{ctx}");
    assert_eq!(out["notes_same_server"], true, "{ctx}");
    assert_eq!(out["agentls_servers"], 1, "{ctx}");
    assert_eq!(out["server_folders"], json!([workspace]), "{ctx}");
    let chat = PathBuf::from(out["chat_file"].as_str().unwrap());
    assert!(!chat.starts_with(&workspace), "{ctx}");

    // The reply streamed into the chat buffer.
    let reply = out["chat_after_reply"].as_str().unwrap();
    assert!(
        reply.contains("## You\n\nread notes.txt\n\n## demo\n"),
        "{reply}"
    );
    assert!(reply.contains("Hello from the demo agent."), "{reply}");
    assert!(reply.contains("notes.txt has 6 lines."), "{reply}");
    assert!(reply.contains("_demo: end_turn"), "{reply}");

    let versions = &out["chat_versions"];
    assert_eq!(
        versions[0], versions[1],
        "Emacs's chat version, agentls's\n{ctx}"
    );
    // Every part of the replies went in at once: none was refused for a stale version.
    let shown = strings(&out["shown_messages"]);
    assert!(
        !shown.iter().any(|m| m.contains("refuses")),
        "{shown:?}\n{ctx}"
    );

    // A waiting turn stopped with `agentls-cancel`.
    assert_eq!(out["cancelled"], true, "{ctx}");

    // The mode picker offered the demo agent's modes.
    let modes = strings(&out["modes_offered"]);
    assert!(modes.iter().any(|m| m.starts_with("Ask")), "{modes:?}");
    assert!(
        modes.iter().any(|m| m.starts_with("Read only")),
        "{modes:?}"
    );

    // The region reached agentls as the selection, with the keys a user types.
    assert_eq!(out["region_active"], true, "{ctx}");
    assert_eq!(out["selection"]["text"], NOTES, "{ctx}");
    assert_eq!(
        out["prompt_asked"], "Ask the agent about the region: ",
        "{ctx}"
    );

    // Two changes; one accepted, one rejected, with no y/n question.
    assert_eq!(out["diagnostic_lines"], json!([2, 6]), "{ctx}");
    assert!(
        out["accepted"]
            .as_str()
            .unwrap()
            .starts_with("Accept change 1/2 from demo"),
        "{ctx}"
    );
    assert!(
        out["rejected"]
            .as_str()
            .unwrap()
            .starts_with("Reject change 2/2 from demo"),
        "{ctx}"
    );
    assert_eq!(out["confirmations"], json!([]), "{ctx}");
    assert_eq!(out["notes_buffer"], NOTES_ACCEPTED, "{ctx}");
    assert_eq!(out["notes_disk"], NOTES_ACCEPTED, "{ctx}");
    assert_eq!(out["notes_modified"], false, "{ctx}");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), NOTES_ACCEPTED);

    // The mode line told the agent's state and the changes waiting.
    let lighters = strings(&out["lighters"]);
    assert!(
        lighters.iter().any(|l| l.contains("demo:working")),
        "{lighters:?}"
    );
    assert!(
        lighters.iter().any(|l| l.contains("2 to review")),
        "{lighters:?}"
    );
    assert!(
        lighters.iter().any(|l| l.ends_with("[demo:ready]")),
        "{lighters:?}"
    );

    // The chat, opened again with nothing remembered, went to the same agentls.
    assert_eq!(out["reopened_same_server"], true, "{ctx}");
    assert_eq!(out["agentls_servers_at_end"], 1, "{ctx}");
    // And found again by its first message.
    assert_eq!(
        out["chats_offered"],
        json!(["read notes.txt (Chat with demo)"]),
        "{ctx}"
    );
    assert_eq!(out["chat_picked"], true, "{ctx}");

    // Quitting asked nothing and saved the chat.
    assert_eq!(out["quit_questions"], json!([]), "{ctx}");
    assert_eq!(out["chat_modified_before_quit"], true, "{ctx}");
    let saved = std::fs::read_to_string(&chat).unwrap();
    // The first message's turn, the prompt's about the region, the reopened chat's message's.
    let (_, after) = saved
        .split_once("read notes.txt again")
        .unwrap_or_else(|| panic!("{saved}"));
    assert!(after.contains("_demo: end_turn"), "{saved}");
    assert_eq!(saved.matches("_demo: end_turn").count(), 3, "{saved}");

    // agentls wrote its discovery files, and removed them when Emacs quit.
    let discovery = strings(&out["discovery_files"]);
    assert_eq!(discovery.len(), 2, "{discovery:?}\n{ctx}");
    let pid = out["server_pid"].as_u64().unwrap();
    let dirs = [root.join("home/.claude/ide"), root.join("tmp/gemini/ide")];
    let deadline = Instant::now() + Duration::from_secs(10);
    let gone = || dirs.iter().all(|d| empty(d)) && !Path::new(&format!("/proc/{pid}")).exists();
    while !gone() {
        assert!(
            Instant::now() < deadline,
            "agentls (pid {pid}) left {:?} after Emacs quit\n{ctx}",
            dirs.iter()
                .flat_map(|d| std::fs::read_dir(d).into_iter().flatten())
                .map(|e| e.unwrap().path())
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn emacs_28_holds_a_conversation_and_reviews_with_the_package() {
    // The README's first init code: `load-path` and `require`.
    let emacs = peers::binary("AGENTLS_TEST_EMACS", "Emacs");
    conversation(&emacs, 1);
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn emacs_30_holds_a_conversation_and_reviews_with_the_package() {
    // The README's `use-package` init code.
    let emacs = peers::binary("AGENTLS_TEST_EMACS30", "Emacs 30");
    conversation(&emacs, 2);
}

/// Where the screens of key moments go: `$AGENTLS_TEST_CAPTURES/emacs`, else the sandbox.
fn captures(sandbox_root: &Path) -> PathBuf {
    std::env::var_os("AGENTLS_TEST_CAPTURES")
        .map(|dir| PathBuf::from(dir).join("emacs"))
        .unwrap_or_else(|| sandbox_root.join("captures"))
}

/// `emacs -nw FILE` in the workspace, in tmux, as the sandbox's user: the README's init code is
/// the user's `~/.emacs.d/init.el`, and the `agentls` under test is first on PATH.
fn emacs_nw(tmux: &Path, emacs: &Path, sandbox: &Sandbox, file: &str) -> Tmux {
    let init_dir = sandbox.root.join("home/.emacs.d");
    std::fs::create_dir_all(&init_dir).unwrap();
    std::fs::copy(readme_init(sandbox, 1), init_dir.join("init.el")).unwrap();
    // Not agentls's: Emacs 28 natively compiles Debian's elpa packages in the background at
    // first start and pops their warnings up in a window of its own.
    std::fs::write(
        init_dir.join("early-init.el"),
        "(setq native-comp-async-report-warnings-errors 'silent)\n",
    )
    .unwrap();
    let server = Path::new(env!("CARGO_BIN_EXE_agentls"));
    let path = format!(
        "{}:{}",
        server.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let root = &sandbox.root;
    let shell = format!(
        "cd {:?} && exec env -u AGENTLS_CONFIG -u CLAUDE_CONFIG_DIR -u EMACSLOADPATH -u EMACSDATA \
         HOME={:?} XDG_CONFIG_HOME={:?} XDG_STATE_HOME={:?} XDG_DATA_HOME={:?} \
         XDG_CACHE_HOME={:?} TMPDIR={:?} PATH={path:?} TERM=xterm-256color {:?} -nw {file}",
        sandbox.workspace,
        root.join("home"),
        root.join("config"),
        root.join("state"),
        root.join("data"),
        root.join("cache"),
        root.join("tmp"),
        emacs
    );
    // 150 columns: below `split-width-threshold`, so the chat shown beside a file goes below
    // it and each window's mode line has the whole width.
    Tmux::start(tmux, &shell, 150, 50)
}

/// agentls's discovery files (the Claude Code lockfile and the Gemini CLI file) in the sandbox.
fn discovery_files(root: &Path) -> Vec<PathBuf> {
    [root.join("home/.claude/ide"), root.join("tmp/gemini/ide")]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).into_iter().flatten())
        .map(|e| e.unwrap().path())
        // Not a file being written (a dot name, renamed into place when whole).
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect()
}

/// Waits until agentls's two discovery files are there (one written after the other).
fn wait_for_discovery_files(root: &Path, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while discovery_files(root).len() < 2 {
        assert!(
            Instant::now() < deadline,
            "{what}: discovery files {:?}",
            discovery_files(root)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(discovery_files(root).len(), 2, "{what}");
}

/// The pid in agentls's Claude Code lockfile, once there is one.
fn agentls_pid(root: &Path) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let lock = discovery_files(root)
            .into_iter()
            .find(|p| p.extension().is_some_and(|e| e == "lock"));
        if let Some(pid) = lock
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .and_then(|lock| lock["pid"].as_u64())
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "agentls wrote no lockfile");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until agentls `pid` is gone and its discovery files with it.
fn wait_for_cleanup(root: &Path, pid: u64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = discovery_files(root);
        if left.is_empty() && !Path::new(&format!("/proc/{pid}")).exists() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: agentls (pid {pid}) left {left:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn emacs_nw_in_tmux_holds_a_conversation_typed_as_a_user() {
    let emacs = peers::binary("AGENTLS_TEST_EMACS", "Emacs");
    let tmux = peers::binary("AGENTLS_TEST_TMUX", "tmux");
    let started = Instant::now();
    let sandbox = Sandbox::create();
    let root = sandbox.root.clone();
    let shots = captures(&root);
    let notes = sandbox.workspace.join("notes.txt");
    std::fs::write(&notes, NOTES).unwrap();
    let ui = emacs_nw(&tmux, &emacs, &sandbox, "notes.txt");
    ui.wait_until("notes.txt in Emacs", |s| {
        s.contains("// TODO second") && s.contains("notes.txt")
    });

    // C-c a c: a chat, and agentls started for the project.
    ui.keys(&["C-c", "a", "c"]);
    ui.wait_until("the chat with the lighter", |s| {
        s.contains("# Chat with demo") && s.contains("agentls[demo:")
    });
    Tmux::save(Some(&shots), "1-chat-opened", &ui.screen());
    let pid = agentls_pid(&root);

    // A message, sent with C-c C-c: the reply streams in below it.
    ui.type_text("read notes.txt");
    ui.keys(&["C-c", "C-c"]);
    let screen = ui.wait_for("_demo: end_turn");
    assert!(screen.contains("notes.txt has 6 lines."), "{screen}");
    Tmux::save(Some(&shots), "2-reply-streamed", &ui.screen());

    // notes.txt, all of it selected, and C-c a p: the minibuffer asks about the region.
    ui.keys(&["C-x", "b"]);
    ui.type_text("notes.txt");
    ui.keys(&["Enter"]);
    ui.wait_until("notes.txt again", |s| {
        s.contains("// TODO first") && !s.contains("# Chat with demo")
    });
    ui.keys(&["M-<", "C-Space", "M->"]);
    ui.keys(&["C-c", "a", "p"]);
    ui.wait_for("Ask the agent about the region:");
    ui.type_text("uppercase");
    Tmux::save(Some(&shots), "3-prompt-about-the-region", &ui.screen());
    ui.keys(&["Enter"]);
    // The proposal: two flymake notes, the mode line counts them, the chat shows below.
    let screen = ui.wait_until("the proposal in the file and the chat", |s| {
        s.contains("Flymake[0 0 2]")
            && s.contains("2 to review")
            && s.contains("> - [notes.txt:6](")
    });
    Tmux::save(Some(&shots), "4-proposal", &ui.screen());
    assert!(
        screen.contains("> **demo proposes** changes to `notes.txt`"),
        "{screen}"
    );

    // C-c a a on the first change: the default action accepts it.
    ui.keys(&["M-<", "C-n", "C-c", "a", "a"]);
    ui.wait_for("Pick an action (default Accept change 1/2 from demo");
    Tmux::save(Some(&shots), "5-code-actions", &ui.screen());
    ui.keys(&["Enter"]);
    ui.wait_for("1 to review");
    // The second: rejected by name.
    ui.keys(&["M->", "C-p", "C-c", "a", "a"]);
    ui.wait_for("Pick an action (default Accept change 2/2 from demo");
    ui.type_text("Reject change 2");
    ui.keys(&["Tab", "Enter"]);
    let screen = ui.wait_until("the change accepted, the turn over", |s| {
        s.contains("// TODO FIRST") && s.contains("agentls[demo:ready]") && s.contains("Done:")
    });
    Tmux::save(Some(&shots), "6-one-accepted-one-rejected", &ui.screen());
    assert!(screen.contains("// TODO second"), "{screen}");
    assert!(!screen.contains("(y or n)"), "{screen}");

    // C-x C-s, then C-x C-c: no question, and agentls cleans up after its SIGHUP.
    ui.keys(&["C-x", "C-s"]);
    // Saved: the mode line says unmodified (eldoc clears the echo area's "Wrote …" at once).
    ui.wait_for("-UU-:----F1  notes.txt");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), NOTES_ACCEPTED);
    Tmux::save(Some(&shots), "7-saved", &ui.screen());
    ui.keys(&["C-x", "C-c"]);
    ui.wait_exit();
    wait_for_cleanup(&root, pid, "after C-x C-c");
    eprintln!(
        "emacs -nw in tmux: the conversation took {:?}; screens in {}",
        started.elapsed(),
        shots.display()
    );
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn quitting_emacs_nw_leaves_no_discovery_file_three_times_out_of_three() {
    let emacs = peers::binary("AGENTLS_TEST_EMACS", "Emacs");
    let tmux = peers::binary("AGENTLS_TEST_TMUX", "tmux");
    for round in 1..=3 {
        let sandbox = Sandbox::create();
        std::fs::write(sandbox.workspace.join("notes.txt"), NOTES).unwrap();
        let ui = emacs_nw(&tmux, &emacs, &sandbox, "notes.txt");
        ui.wait_for("// TODO second");
        ui.keys(&["C-c", "a", "c"]);
        ui.wait_for("agentls[demo:");
        let pid = agentls_pid(&sandbox.root);
        wait_for_discovery_files(&sandbox.root, &format!("round {round}"));
        ui.keys(&["C-x", "C-c"]);
        ui.wait_exit();
        wait_for_cleanup(&sandbox.root, pid, &format!("round {round}"));
    }
}

/// `(agentls-beside 'python-mode "pylsp")`, as the README says, on `emacs`: in a Python buffer
/// that a real pylsp serves (its hover answers) joined with agentls through a real `rass`, an
/// unsaved edit; a message sent from the chat (served by the same connection); then one change
/// of the agent's accepted and one rejected from eglot's menu; nothing lost, nothing asked.
fn reviews_beside_pylsp(emacs: &Path) {
    let (out, ctx) = on_a_python_file(emacs, "beside.el", "agentls.el");
    let out = &out;
    assert_eq!(out["server_class"], "agentls-server", "{out}");
    let command_line = strings(&out["server_command"]).join(" ");
    assert_eq!(command_line, "rass -- pylsp -- agentls", "{out}");
    // The chat is served by the same connection: one agentls for the project.
    assert_eq!(out["chat_managed_by_the_same_server"], true, "{out}");
    assert_eq!(out["servers_in_project"], 1, "{out}");
    // pylsp answers in the same connection: its hover names the module.
    let hover = out["hover"].as_str().unwrap_or_default();
    assert!(hover.contains("os"), "no pylsp hover on `os`: {out}\n{ctx}");
    assert_eq!(
        out["diagnostics"].as_array().map(Vec::len),
        Some(2),
        "{out}"
    );
    one_accepted_one_rejected_nothing_lost(out);
}

/// The Python file of [`reviews_beside_pylsp`] and the lsp-mode test.
const BESIDE_SAMPLE: &str = "import os\n# TODO buy milk\nx = 1\n# TODO call the plumber\n";
/// [`BESIDE_SAMPLE`] with the user's unsaved edit and the first change accepted.
const BESIDE_DECIDED: &str = "import os  # mine\n# TODO BUY MILK\nx = 1\n# TODO call the plumber\n";

/// `command` with `rass` and `pylsp` first on its PATH, as `pipx install` puts them.
fn with_python_servers(mut command: Command) -> Command {
    let rass = peers::binary("AGENTLS_TEST_RASS", "rassumfrassum (rass)");
    let pylsp = peers::binary("AGENTLS_TEST_PYLSP", "python-lsp-server (pylsp)");
    let inherited = command
        .get_envs()
        .find(|(name, _)| *name == "PATH")
        .and_then(|(_, value)| value)
        .map(std::ffi::OsStr::to_owned)
        .unwrap_or_default();
    let mut path = vec![
        rass.parent().unwrap().to_path_buf(),
        pylsp.parent().unwrap().to_path_buf(),
    ];
    path.extend(std::env::split_paths(&inherited));
    command.env("PATH", std::env::join_paths(path).unwrap());
    command
}

/// lsp-mode (Debian's elpa-lsp-mode 8.0 on Emacs 28) with `agentls-lsp.el` as its README says:
/// `M-x lsp` on a Python file starts pylsp and agentls as an add-on; with an unsaved edit, the
/// agent's two changes are diagnostics, one accepted and one rejected through lsp-mode's code
/// actions; nothing lost, nothing asked; `agentls-lsp-chat` opens the chat.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn emacs_lsp_mode_reviews_with_agentls_as_an_add_on_server() {
    let emacs = peers::binary("AGENTLS_TEST_EMACS", "Emacs");
    let (out, _) = on_a_python_file(&emacs, "lsp_mode.el", "agentls-lsp.el");
    let out = &out;
    assert_eq!(out["servers"], json!(["pylsp", "agentls"]), "{out}");
    assert_eq!(out["told_where_it_answers"], true, "{out}");
    one_accepted_one_rejected_nothing_lost(out);
    assert_eq!(out["chat_first_line"], "# Chat with demo", "{out}");
}

/// Runs `tests/emacs/<script>` with `editors/emacs/<package>` on a Python file holding
/// [`BESIDE_SAMPLE`], `rass` and `pylsp` on PATH, and checks that it ran through in
/// `python-mode`. Returns its result and the context for failure messages.
fn on_a_python_file(emacs: &Path, script: &str, package: &str) -> (Value, String) {
    let sandbox = Sandbox::create();
    let sample = sandbox.workspace.join("notes.py");
    std::fs::write(&sample, BESIDE_SAMPLE).unwrap();
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut command = with_python_servers(emacs_in(emacs, &sandbox));
    command
        .arg("-l")
        .arg(manifest.join("tests/emacs").join(script))
        .arg(manifest.join("editors/emacs").join(package))
        .arg(&sample)
        .arg(&sandbox.root);
    let session = sandbox.run(&mut command, "emacs", TIMEOUT);
    let ctx = context(&session);
    let out = session.result.clone();
    assert!(session.status.success(), "{out}\n{ctx}");
    assert_eq!(out["error"], Value::Null, "{ctx}");
    assert_eq!(out["major_mode"], "python-mode", "{out}");
    (out, ctx)
}

/// The first of the agent's two changes accepted and the second rejected from the code action
/// menu: the buffer holds the user's unsaved edit and the accepted change, the file waits for
/// the save, nothing was asked.
fn one_accepted_one_rejected_nothing_lost(out: &Value) {
    for (key, title) in [
        ("accepted", "Accept change 1/2"),
        ("rejected", "Reject change 2/2"),
    ] {
        assert!(
            out[key].as_str().is_some_and(|t| t.starts_with(title)),
            "{out}"
        );
    }
    assert_eq!(out["buffer"], BESIDE_DECIDED, "{out}");
    assert_eq!(out["modified"], true, "{out}");
    assert_eq!(
        out["disk"], BESIDE_SAMPLE,
        "the disk waits for the save: {out}"
    );
    assert_eq!(out["questions"], json!([]), "{out}");
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn emacs_28_reviews_in_a_buffer_pylsp_serves_too() {
    reviews_beside_pylsp(&peers::binary("AGENTLS_TEST_EMACS", "Emacs"));
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn emacs_30_reviews_in_a_buffer_pylsp_serves_too() {
    reviews_beside_pylsp(&peers::binary("AGENTLS_TEST_EMACS30", "Emacs 30"));
}
