//! A real editor end to end: headless Neovim (0.11+) loads the shipped `editors/nvim` config,
//! starts the real `agentls` binary, edits non-ASCII text and selects in visual mode; the
//! server's view must match the buffer exactly. The Lua side is `tests/nvim/`.
//!
//! Neovim comes from `AGENTLS_TEST_NVIM` (`eval "$(scripts/test-tools.sh)"` installs it). The
//! tests are ignored without the feature `real-peers` (scripts/test.sh turns it on); with it, a
//! missing Neovim fails them.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::peers::{self, Sandbox, Session};

/// The whole Neovim session, startup to exit, must fit in this.
const TIMEOUT: Duration = Duration::from_secs(60);

const SAMPLE: &str = "ascii crab line\nemoji 😀 and 🦀 here\n漢字 and かな mixed\nlast line\n";
/// `SAMPLE` after the script's edits, as the buffer holds it.
const EDITED: &str =
    "ascii crab line emoji 😀🎉 and 🦀 here + 子漢 and かな\n mixed\nlast line ✓ 末尾\n새 줄 🦀\n";
/// A file without a type and without a final line break, before and after the script's append.
const UNTYPED: &str = "plain words\nno final break";
const UNTYPED_EDITED: &str = "plain words\nno final break, 끝 🦀";

/// Neovim's stderr and the tails of the server's and Neovim's LSP logs.
fn context(session: &Session) -> String {
    session.context("nvim", &["agentls.log", "state/nvim/lsp.log"], 6000)
}

/// Runs `tests/nvim/<script>` with the plugin dir, the agentls binary and its log file, then
/// `args`, in an isolated Neovim whose working directory is the sandbox's workspace.
fn run_script(nvim: &Path, script: &str, sandbox: Sandbox, args: &[&Path]) -> Session {
    let mut command = nvim_command(nvim, script, &sandbox, args);
    sandbox.run(&mut command, "nvim", TIMEOUT)
}

/// The command [`run_script`] runs.
fn nvim_command(nvim: &Path, script: &str, sandbox: &Sandbox, args: &[&Path]) -> Command {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut command = Command::new(nvim);
    command
        .args(["--headless", "--clean", "-l"])
        .arg(manifest.join("tests/nvim").join(script))
        .arg(manifest.join("editors/nvim"))
        .arg(env!("CARGO_BIN_EXE_agentls"))
        .arg(sandbox.root.join("agentls.log"))
        .args(args);
    // `agentls` on PATH, as the README asks (for the scripts that follow it literally).
    let bin = Path::new(env!("CARGO_BIN_EXE_agentls")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // Neovim and the server it starts (which inherits this environment) see only the temp dir:
    // no user config, state, or agentls config file.
    sandbox
        .isolate(&mut command)
        .env("PATH", path)
        .env_remove("AGENTLS_CONFIG")
        .env_remove("AGENTLS_LOG")
        .env_remove("NVIM")
        .env_remove("NVIM_APPNAME")
        .env_remove("NVIM_LOG_FILE")
        .env_remove("VIMINIT")
        .env_remove("VIMRUNTIME")
        .env_remove("VIM");
    command
}

/// Runs `tests/nvim/edits_and_selection.lua` in a fresh, isolated Neovim against agentls.
fn run_session(nvim: &Path, debounce: &str) -> (Session, PathBuf, PathBuf, PathBuf) {
    let sandbox = Sandbox::create();
    let workspace = sandbox.workspace.clone();
    let sample = workspace.join("sample.txt");
    std::fs::write(&sample, SAMPLE).unwrap();
    let untyped = workspace.join("scratch.zzz");
    std::fs::write(&untyped, UNTYPED).unwrap();
    let args = [sample.as_path(), untyped.as_path(), Path::new(debounce)];
    let session = run_script(nvim, "edits_and_selection.lua", sandbox, &args);
    (session, workspace, sample, untyped)
}

/// The document the server holds for `path` in a `agentls.debug.state` dump.
fn document<'a>(state: &'a Value, path: &Path, context: &str) -> &'a Value {
    state["documents"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|d| d["path"] == json!(path))
        .unwrap_or_else(|| {
            panic!(
                "server does not hold {}: {state}\n{context}",
                path.display()
            )
        })
}

fn check_session(nvim: &Path, debounce: &str) {
    let (session, workspace, sample, untyped) = run_session(nvim, debounce);
    let ctx = format!("[debounce {debounce}]\n{}", context(&session));
    let out = &session.result;
    assert!(
        session.status.success(),
        "nvim exited with {}; result: {out}\n{ctx}",
        session.status
    );
    assert!(out.is_object(), "no JSON result on nvim's stdout\n{ctx}");
    assert_eq!(out["error"], Value::Null, "the Lua script failed\n{ctx}");

    // Encoding: offered utf-8, so both ends use it.
    assert_eq!(out["offset_encoding"], "utf-8", "{ctx}");
    let server = &out["server"];
    assert_eq!(server["encoding"], "utf-8", "{ctx}");
    assert_eq!(server["folders"], json!([workspace]), "{ctx}");

    // The edits happened as intended, and the server applied every one of them exactly.
    let buffer = out["buffer"].as_str().expect("buffer text");
    assert_eq!(
        buffer, EDITED,
        "the edits did not do what the script meant\n{ctx}"
    );
    let doc = document(server, &sample, &ctx);
    assert_eq!(
        doc["text"], buffer,
        "server text differs from the buffer; Neovim sent these changes: {}\n{ctx}",
        out["did_change"]
    );
    assert_eq!(doc["languageId"], "text", "{ctx}");

    // The visual selection, sent by the shipped notifier once (the debounce coalesced the
    // one-character selection made on entering visual mode), with utf-8 byte columns.
    let selected = "漢 and か";
    let column = EDITED.find(selected).unwrap();
    let range = json!({
        "start": {"line": 0, "character": column},
        "end": {"line": 0, "character": column + selected.len()},
    });
    assert_eq!(
        out["sent_selections"].as_array().map(Vec::len),
        Some(1),
        "{ctx}"
    );
    assert_eq!(out["sent_selections"][0]["selection"], range, "{ctx}");
    let current = &server["currentSelection"];
    assert_eq!(current["text"], selected, "{ctx}");
    assert_eq!(current["range"], range, "{ctx}");
    assert_eq!(current["path"], json!(sample), "{ctx}");

    // Yanking right after selecting sends the selection at once, before the debounce would
    // have (otherwise the cursor captured on leaving visual mode replaces it unsent): two
    // notifications, the selection then the cursor. The cursor is the current selection, the
    // yanked text stays the latest one.
    let after_yank = &out["after_yank"];
    assert_eq!(out["register"], "😀🎉", "{ctx}");
    assert_eq!(out["sent_at_yank"], 2, "{ctx}");
    assert_eq!(after_yank["latestSelection"]["text"], "😀🎉", "{ctx}");
    assert_eq!(after_yank["currentSelection"]["text"], "", "{ctx}");

    // Linewise: whole lines with their breaks.
    assert_eq!(
        out["linewise"]["currentSelection"]["text"], " mixed\nlast line ✓ 末尾\n",
        "{ctx}"
    );

    // A file without a type attaches too, and an append to its unterminated last line lands.
    assert_eq!(out["untyped_filetype"], "", "{ctx}");
    assert_eq!(out["untyped_buffer"], UNTYPED_EDITED, "{ctx}");
    let final_state = &out["final"];
    assert_eq!(
        document(final_state, &untyped, &ctx)["text"],
        UNTYPED_EDITED,
        "{ctx}"
    );
    assert_eq!(final_state["focused"], json!(untyped), "{ctx}");
    assert_eq!(out["clients"], 1, "one client serves both files\n{ctx}");

    // The server left cleanly after shutdown + exit.
    assert_eq!(out["stopped"], true, "{ctx}");
    assert_eq!(out["server_exit"], json!({"code": 0, "signal": 0}), "{ctx}");
}

/// Edits and selections through the shipped Neovim config, once with every change sent at
/// once (debounce 0) and once with Neovim's default debounce, which batches changes.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn neovim_edits_and_selections_reach_the_server() {
    let nvim = peers::binary("AGENTLS_TEST_NVIM", "Neovim");
    for debounce in ["0", "default"] {
        let started = Instant::now();
        check_session(&nvim, debounce);
        eprintln!(
            "nvim session (debounce {debounce}) took {:?}",
            started.elapsed()
        );
    }
}

/// Runs `tests/nvim/<script>` on one workspace file `name` holding `text`, and checks that Neovim
/// and the script succeeded. Returns the script's JSON result, the file, and the context for
/// failure messages.
fn run_on_file(script: &str, name: &str, text: &str) -> (Value, PathBuf, String) {
    let nvim = peers::binary("AGENTLS_TEST_NVIM", "Neovim");
    let sandbox = Sandbox::create();
    let file = sandbox.workspace.join(name);
    std::fs::write(&file, text).unwrap();
    let session = run_script(&nvim, script, sandbox, &[&file]);
    let ctx = context(&session);
    let out = session.result.clone();
    assert!(
        session.status.success(),
        "nvim exited with {}; {out}\n{ctx}",
        session.status
    );
    assert_eq!(out["error"], Value::Null, "the Lua script failed\n{ctx}");
    (out, file, ctx)
}

const NOTES: &str = "shopping\nTODO buy milk\neggs\nbread\nflour\nTODO call the plumber\n";

/// A review opened by the built-in demo agent, seen in Neovim as agentls diagnostics and code
/// actions: accepting the first change puts it in the buffer next to a line the user typed,
/// rejecting the second keeps it out of the buffer and the file, even though the agent then
/// writes its whole proposal; a plain `:write` then saves everything, with no warning.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn neovim_reviews_a_demo_agent_proposal_with_code_actions() {
    let (out, _notes, ctx) = run_on_file("review.lua", "notes.txt", NOTES);
    let out = &out;
    assert_eq!(out["diagnostic_lines"], json!([1, 5]), "{ctx}");
    let titles: Vec<&str> = out["titles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        titles[0].starts_with("Accept change 1/2 from demo"),
        "{titles:?}"
    );
    assert!(
        titles.contains(&"Accept all changes (2) from demo"),
        "{titles:?}"
    );
    let expected = NOTES
        .replace("TODO buy milk", "TODO BUY MILK")
        .replace("eggs\n", "eggs\nmine\n");
    assert_eq!(out["buffer"], expected, "{ctx}");
    // agentls left the file to Neovim's own save: no W11/W12, a plain `:write`.
    assert_eq!(out["disk_before_save"], NOTES, "{ctx}");
    assert_eq!(out["changed_on_disk"], false, "{ctx}");
    assert_eq!(out["modified_after_save"], false, "{ctx}");
    assert_eq!(out["disk"], expected, "{ctx}");
    let messages = out["messages"].to_string();
    assert!(
        messages.contains("demo proposes 2 changes to notes.txt"),
        "{messages}"
    );
}

/// A whole turn undone in Neovim: the demo agent's changes accepted (`\\aA`) and saved, then
/// `:AgentUndoTurn` offers them back as a review, `\\aA` undoes them all, and a plain `:write`
/// saves the file as it was before the turn.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn neovim_undoes_a_whole_turn() {
    let (out, _notes, ctx) = run_on_file("undo_turn.lua", "notes.txt", NOTES);
    let uppercased = NOTES
        .replace("TODO buy milk", "TODO BUY MILK")
        .replace("TODO call the plumber", "TODO CALL THE PLUMBER");
    assert_eq!(out["accepted"], uppercased, "{ctx}");
    let messages = out["undo_messages"].to_string();
    assert!(
        messages.contains("demo's turn 1 changed this"),
        "{messages}"
    );
    assert_eq!(out["buffer"], NOTES, "{ctx}");
    assert_eq!(out["modified_after_save"], false, "{ctx}");
    assert_eq!(out["disk"], NOTES, "{ctx}");
}

/// The shipped module forwards what Neovim's other diagnostic sources report (here a plain
/// namespace standing in for another language server) to agentls, and their clearing too.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn neovim_forwards_other_diagnostics_to_agentls() {
    let (out, file, ctx) = run_on_file("diagnostics.lua", "main.txt", "let 漢字 = 1\nfoo()\n");
    let forwarded = &out["forwarded"][0];
    assert_eq!(forwarded["path"], json!(file), "{ctx}");
    let first = &forwarded["diagnostics"][0];
    assert_eq!(first["message"], "unused 漢字", "{ctx}");
    assert_eq!(first["level"], "Error", "{ctx}");
    assert_eq!(first["source"], "another-server", "{ctx}");
    assert_eq!(first["code"], "E1", "{ctx}");
    // utf-8 was negotiated: byte columns, 漢字 is bytes 4..10.
    assert_eq!(
        first["range"],
        json!({"start": {"line": 0, "character": 4}, "end": {"line": 0, "character": 10}}),
        "{ctx}"
    );
    assert_eq!(forwarded["diagnostics"][1]["level"], "Log", "a hint: {ctx}");
    assert_eq!(out["cleared"], true, "{ctx}");
}

/// A conversation in a chat document in Neovim with its built-in client and the shipped
/// config: the chat opens through Neovim's showDocument handler, the same server serves it
/// (it lives outside the repository), the code action sends the first message and
/// `agentls.send` the second, and both replies stream into the buffer; two more replies stream
/// slowly, whole lines and then lines in pieces, and read exactly as the agent said them.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn neovim_holds_a_conversation_in_a_chat_document() {
    let (out, _notes, ctx) = run_on_file("chat.lua", "notes.txt", NOTES);
    assert_eq!(out["servers"], 1, "one agentls serves the chat too\n{ctx}");
    assert_eq!(out["filetype"], "markdown", "{ctx}");
    let chat = out["chat"].as_str().unwrap();
    assert!(chat.starts_with("# Chat with demo\n"), "{chat}");
    assert!(
        chat.contains("## You\n\nread notes.txt\n\n## demo\n\nHello from the demo agent."),
        "{chat}"
    );
    assert_eq!(
        chat.matches("\nnotes.txt has 6 lines.\n").count(),
        2,
        "{chat}"
    );
    assert!(
        chat.contains("Nothing to change.\n\n_demo: end_turn"),
        "{chat}"
    );
    // Each piece reached the buffer on its own (the pace is longer than agentls's coalescing),
    // and Neovim's own final line break never became part of the reply.
    let streamed = "\n\nHello from the demo agent.\nchunk 0\nchunk 1\nchunk 2\nName a file";
    assert!(
        chat.contains(&format!("@flood 3 @pace 300\n\n## demo{streamed}")),
        "{chat}"
    );
    let split = "@flood 2 @pace 300 @split\n\n## demo\n\nHello from the demo agent.\nchunk 0\nchunk 1\nName";
    assert!(chat.contains(split), "{chat}");
    // Neovim keeps its final line break apart from the text, so its buffer may end with one
    // more empty line than the server wrote.
    assert!(chat.trim_end().ends_with("\n## You"), "{chat:?}");
    assert_eq!(out["modified_after_reply"], false, "{ctx}");
    assert_eq!(out["modified_with_draft"], true, "{ctx}");
}

/// `:qa!` never loses a conversation in Neovim: quit mid-reply, then (reopened, everything
/// back, the cut reply marked) quit again while a proposal waits; opened a third time, both
/// turns are there, marked, the proposal never reached the file, and the next message goes
/// alone. Each Neovim quits with `:qa!` (the script's own watchdog bounds it).
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn neovim_quit_without_saving_mid_reply_and_mid_review_loses_nothing() {
    let nvim = peers::binary("AGENTLS_TEST_NVIM", "Neovim");
    let sandbox = Sandbox::create();
    let notes = sandbox.workspace.join("notes.txt");
    std::fs::write(&notes, NOTES).unwrap();
    let log = sandbox.root.join("agentls.log");
    let quit = |phase: &str, chat: Option<&Path>| -> Value {
        let mut args = vec![notes.as_path(), Path::new(phase)];
        args.extend(chat);
        let ran = nvim_command(&nvim, "quit_and_reopen.lua", &sandbox, &args)
            .output()
            .unwrap();
        let result = String::from_utf8_lossy(&ran.stdout)
            .lines()
            .rev()
            .find_map(|line| serde_json::from_str::<Value>(line).ok())
            .unwrap_or(Value::Null);
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        let context = format!(
            "{}\n--- agentls.log ---\n{}",
            String::from_utf8_lossy(&ran.stderr),
            &log[log.len().saturating_sub(4000)..]
        );
        assert_eq!(
            result["error"],
            Value::Null,
            "{phase}: {}\n{context}",
            result["reopened"]
        );
        assert!(ran.status.success(), "{phase}: {}\n{context}", ran.status);
        result
    };
    let first = quit("stream", None);
    let chat = PathBuf::from(first["chat_path"].as_str().unwrap());
    let second = quit("review", Some(&chat));
    let reopened = second["reopened"].as_str().unwrap();
    assert!(reopened.contains("Waiting until you cancel"), "{reopened}");
    let third = quit("continue", Some(&chat));
    let text = third["chat"].as_str().unwrap();
    for said in [
        "\nread notes.txt\n",
        "Waiting until you cancel",
        "uppercase notes.txt",
        "proposes** changes to `notes.txt`",
        "read notes.txt again",
    ] {
        assert_eq!(text.matches(said).count(), 1, "{said:?} in:\n{text}");
    }
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), NOTES);
    let name = chat.file_name().unwrap().to_str().unwrap();
    let record = std::fs::read_to_string(chat.with_file_name(format!(".{name}.chat"))).unwrap();
    let sent: Vec<String> = record
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|entry| entry["sent"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        sent,
        [
            "read notes.txt",
            "@hang",
            "uppercase notes.txt",
            "read notes.txt again"
        ]
    );
}

/// The shipped plugin's user commands, typed as a user does: a chat opened and sent from, a
/// prompt about two lines of a file answered in the chat, mode and model picked from the
/// agent's lists, the status told, a pending proposal in the quickfix list, the first chat
/// picked again from the workspace's chats after a new one,
/// `:checkhealth agentls`, and a handler of the user's own for an `agentls/*` notification.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn neovim_user_commands_drive_the_conversation() {
    let (out, notes, ctx) = run_on_file("commands.lua", "notes.txt", NOTES);
    let chat = out["chat"].as_str().unwrap();
    assert!(chat.contains("## You\n\nread notes.txt\n"), "{chat}\n{ctx}");
    assert!(chat.contains("\nnotes.txt has 6 lines.\n"), "{chat}");
    // The prompt from the file went to the chat with its two lines as the context.
    assert!(
        chat.contains("what are these lines?\n\n_about notes.txt lines 1–2_"),
        "{chat}"
    );
    // So did the one after lines 3–4 were selected and visual mode was left.
    assert!(
        chat.contains("and these?\n\n_about notes.txt lines 3–4_"),
        "{chat}"
    );
    assert!(chat.contains("I was given file://"), "{chat}");
    assert_eq!(
        out["picked_from"][0],
        json!(["Ask (current)", "Read only"]),
        "{ctx}"
    );
    assert_eq!(out["picked_from"][1], json!(["Quick", "Careful"]), "{ctx}");
    // The plugin asked for its own notification and for the user's handler's, not the stream;
    // the user's handler heard the first turn begin and end.
    assert_eq!(
        out["plugin_events"],
        json!(["diskInBuffer", "reviewChanged", "turnChanged"]),
        "{ctx}"
    );
    assert_eq!(out["turns"][0], true, "{out}");
    assert_eq!(out["turns"][1], false, "{out}");
    let status = out["status"].as_str().unwrap();
    assert!(status.starts_with("demo (default) · "), "{status}");
    assert!(status.contains("mode read-only"), "{status}");
    // One entry per change: the demo agent uppercases both TODO lines.
    assert_eq!(out["reviews"], 2, "{out}\n{ctx}");
    assert_eq!(out["review_file"], json!(notes), "{ctx}");
    // The chats, most recent first, by their first message; the first one picked again.
    assert_eq!(out["new_chat_asked_from"], "quickfix", "{ctx}");
    assert_eq!(out["new_chat_is_another_file"], true, "{ctx}");
    assert_eq!(
        out["chats_offered"],
        json!([
            "(no message yet) (Chat with demo)",
            "read notes.txt (Chat with demo)"
        ]),
        "{ctx}"
    );
    let health = out["health"].as_str().unwrap();
    eprintln!("checkhealth agentls:\n{health}");
    assert!(health.contains("agentls 0.1.0 ("), "{health}");
    assert!(
        health.contains("OK Neovim 0.11.4 (the plugin needs 0.10 or newer)"),
        "{health}"
    );
    assert!(
        health.contains("agent demo (default): prompting")
            || health.contains("agent demo (default): running"),
        "{health}"
    );
    assert!(
        health.contains("agentls: config (agentls doctor)"),
        "{health}"
    );
}

/// The demo agent's proposal shown inline by the shipped plugin: each change's old line
/// highlighted with its new text as a virtual line under it and a label naming the keys; `]e`
/// goes from change to change; `:AgentDiff` opens the proposal beside the buffer in diff mode;
/// `\aa` on the first change accepts it and `\ar` on the second rejects it, after which the
/// marks and the buffer-local keys are gone and the buffer holds the accepted change only.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn neovim_shows_a_proposal_inline_and_decides_it_with_keys() {
    let (out, _notes, ctx) = run_on_file("inline_review.lua", "notes.txt", NOTES);
    // A warning is shown whole; information arriving together shares one line that fits.
    let shown = out["shown"].as_array().unwrap();
    assert_eq!(shown[0], format!("agentls: {}", "w".repeat(300)), "{out}");
    let info = shown[1].as_str().unwrap();
    assert!(info.starts_with("agentls: first · agentls: iii"), "{info}");
    assert!(info.ends_with('…'), "{info}");
    assert_eq!(
        info.chars().count() as u64,
        out["echospace"].as_u64().unwrap(),
        "{info}"
    );
    let rows: Vec<_> = out["pending"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["row"].clone(), p["index"].clone(), p["state"].clone()))
        .collect();
    assert_eq!(
        rows,
        [
            (json!(1), json!(0), json!("pending")),
            (json!(5), json!(1), json!("pending"))
        ],
        "{out}\n{ctx}"
    );
    let marks = &out["marks"];
    assert_eq!(
        marks["virt_lines"],
        json!([
            {"row": 1, "text": "TODO BUY MILK", "hl": "AgentlsReviewNew"},
            {"row": 5, "text": "TODO CALL THE PLUMBER", "hl": "AgentlsReviewNew"},
        ]),
        "{out}"
    );
    assert_eq!(
        marks["labels"][0]["text"], r"  demo: change 1/2  \aa accept · \ar reject",
        "{out}"
    );
    assert_eq!(
        marks["highlighted"][0],
        json!({"row": 1, "end_row": 2, "hl": "AgentlsReviewOld"}),
        "{out}"
    );
    for key in [r"\aa", r"\ar", r"\aA", r"\aR", r"\ad", "]e", "[e"] {
        assert!(
            out["keys"].as_array().unwrap().contains(&json!(key)),
            "{key} not mapped: {}",
            out["keys"]
        );
    }
    assert_eq!(
        (&out["first_jump"], &out["second_jump"]),
        (&json!(2), &json!(6))
    );
    assert!(
        out["diff_name"]
            .as_str()
            .unwrap()
            .ends_with("agentls://proposal/notes.txt"),
        "{out}"
    );
    assert_eq!(
        out["diff_text"],
        NOTES
            .to_uppercase()
            .replace("SHOPPING", "shopping")
            .replace("EGGS", "eggs")
            .replace("BREAD", "bread")
            .replace("FLOUR", "flour")
            .trim_end_matches('\n'),
        "{out}"
    );
    assert_eq!(out["diff_windows"], 2, "{out}");
    assert_eq!(out["diff_closed"], true, "{out}");
    let accepted = &out["after_accept"]["virt_lines"][0];
    assert_eq!(accepted["hl"], "AgentlsReviewAccepted", "{out}");
    assert_eq!(out["keys_after"], 0, "{out}");
    assert_eq!(
        out["buffer"],
        NOTES.replace("TODO buy milk", "TODO BUY MILK"),
        "{out}\n{ctx}"
    );
    // A change that landed without asking (another file): its text marked, what was there
    // before under it, and `\aa` undoes it (the script waits for that).
    let landed = &out["landed"];
    assert_eq!(
        landed["labels"][0]["text"],
        r"  demo changed this without asking (1/1)  \aa undo · \ar keep",
        "{out}"
    );
    assert_eq!(
        landed["virt_lines"],
        json!([{"row": 1, "text": "TODO later", "hl": "AgentlsReviewOld"}]),
        "{out}"
    );
    assert_eq!(landed["highlighted"][0]["hl"], "AgentlsReviewNew", "{out}");
    assert_eq!(out["landed_buffer"], "keep\nTODO LATER\n", "{out}");
    // The agent's own disk write under an unsaved edit: in the buffer with the edit kept, the
    // buffer still modified, and :w then wrote it without asking (W12 would have stopped it).
    let merged = &out["disk_in_buffer"];
    assert_eq!(merged["buffer"], "mine\nTODO LATER\n", "{out}");
    assert_eq!(merged["disk"], "keep\nTODO LATER", "{out}");
    assert_eq!(merged["modified"], true, "{out}");
    assert_eq!(merged["written"], "mine\nTODO LATER", "{out}");
    assert_eq!(merged["modified_after_write"], false, "{out}");
}

/// The README's code blocks, run as written: the lazy.nvim spec set up the way lazy.nvim does it
/// (the folder on the runtime path, `require(main).setup(opts)`), which starts agentls from PATH;
/// the suggested keymaps; and the terminal-agent snippet, whose terminal gets the environment
/// `claude` needs to connect.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn neovim_readme_blocks_work_as_written() {
    let nvim = peers::binary("AGENTLS_TEST_NVIM", "Neovim");
    let sandbox = Sandbox::create();
    let notes = sandbox.workspace.join("notes.txt");
    std::fs::write(&notes, NOTES).unwrap();
    let env_file = sandbox.root.join("terminal.env");
    let session = run_script(&nvim, "readme_blocks.lua", sandbox, &[&notes, &env_file]);
    let ctx = context(&session);
    let out = &session.result;
    assert!(session.status.success(), "{out}\n{ctx}");
    assert_eq!(out["error"], Value::Null, "{ctx}");
    assert_eq!(
        out["spec"],
        json!({"name": "agentls", "main": "agentls", "dir_is_plugin": true}),
        "{ctx}"
    );
    assert_eq!(out["attached"], true, "{ctx}");
    assert_eq!(
        out["keymaps"],
        json!([r"n \ac", r"n \as", r"n \ax", r"x \ap"]),
        "{ctx}"
    );
    assert_eq!(out["terminal_env"], true, "{ctx}");
}
