//! The ACP adapter, served in this process (the binary where a test needs a process), driving
//! the built-in demo agent (`agentls demo-agent`, the default when no agent is configured):
//! streamed output, progress, summaries, plugin events, permissions accepted and rejected,
//! cancel, a killed agent, stdout noise, a 10 MB line, and file access outside the workspace.

mod support;

use serde_json::{Value, json};
use support::agents::{capabilities_without_dialogs, path_of};
use support::processes::runs;
use support::reviews::propose;
use support::{Answer, Options, TestClient};

/// A server in this process ([`TestClient::in_process`]) initialized with `capabilities`; the
/// tests that kill the server, watch its child processes or read its log start the binary.
async fn started(capabilities: Value) -> TestClient {
    TestClient::in_process_started(capabilities).await
}

/// The binary with `config` as its agentls config, initialized without dialogs (for agents
/// scripted in the test: their processes are what the test watches).
async fn configured(config: String) -> TestClient {
    let client = TestClient::start(Options {
        config_toml: Some(config),
        ..Options::default()
    })
    .await;
    client
        .initialize(capabilities_without_dialogs(), None)
        .await;
    client
}

/// Waits for the turn's end and checks that the buffer says `expected` while the file still
/// says `before` (the editor's save writes it, so no editor finds it changed under it), then
/// saves, checks the file, and shuts down.
async fn ends_with_the_file_saying(client: TestClient, uri: &str, before: &str, expected: &str) {
    client.take_message("demo: end_turn").await;
    assert_eq!(client.document(uri).text, expected);
    assert_eq!(std::fs::read_to_string(path_of(uri)).unwrap(), before);
    client.save(uri).await;
    assert_eq!(std::fs::read_to_string(path_of(uri)).unwrap(), expected);
    assert!(client.shutdown().await.success());
}

#[tokio::test]
async fn a_prompt_streams_text_progress_plugin_events_and_one_summary() {
    let client = started(TestClient::rich_capabilities(false)).await;
    client.open("notes.txt", "text", "one\ntwo\n").await;
    client.prompt("read notes.txt").await;
    let summary = client.take_message("demo: end_turn").await;
    assert_eq!(
        summary,
        "demo: end_turn · 1 tool call — “notes.txt has 2 lines. Nothing to change.”"
    );
    let log = client.shown_until("_demo: end_turn").await;
    assert!(log.contains("Hello from the demo agent."), "{log}");
    assert!(log.contains("✓ Read notes.txt"), "{log}");
    let begin = client
        .take("$/progress", |p| p["value"]["kind"] == "begin")
        .await;
    assert_eq!(begin["params"]["value"]["title"], "demo");
    let end = client
        .take("$/progress", |p| p["value"]["kind"] == "end")
        .await;
    assert_eq!(end["params"]["token"], begin["params"]["token"]);
    assert_eq!(end["params"]["value"]["message"], "end_turn");
    let update = client
        .take("agentls/sessionUpdate", |p| {
            p["update"]["sessionUpdate"] == "agent_message_chunk"
        })
        .await;
    assert_eq!(update["params"]["agent"], "demo");
    assert_eq!(
        update["params"]["update"]["content"],
        json!({"type": "text", "text": "Hello"})
    );
    client
        .take("agentls/sessionUpdate", |p| {
            p["update"]["sessionUpdate"] == "tool_call"
        })
        .await;
    // Only one summary for the turn, besides where its chat is.
    client.take_message("demo answers in ").await;
    assert!(client.received("window/showMessage").is_empty());
    let status = client.agent_status().await;
    let demo = &status["agents"][0];
    assert_eq!(demo["name"], "demo");
    assert_eq!(demo["state"], "running");
    assert_eq!(demo["agentInfo"]["name"], "agentls-demo");
    assert_eq!(demo["sessions"][0]["mode"], "ask");
    assert_eq!(
        demo["sessions"][0]["plan"]["entries"][0]["content"],
        "Read the file"
    );
    assert!(client.shutdown().await.success());
}

/// Two turns that end alike both tell the user (an editor like Helix shows only popups), and
/// both are in the log.
#[tokio::test]
async fn the_same_summary_twice_is_told_twice() {
    let client = started(capabilities_without_dialogs()).await;
    client.open("notes.txt", "text", "one\n").await;
    let mut told = Vec::new();
    for _ in 0..2 {
        client.prompt("read notes.txt").await;
        told.push(client.take_message("demo: end_turn").await);
    }
    assert_eq!(told[0], told[1]);
    let both_logged = || client.log_text().matches("demo: end_turn").count() == 2;
    support::eventually(both_logged)
        .await
        .unwrap_or_else(|| panic!("{}", client.log_text()));
    assert!(client.shutdown().await.success());
}

#[tokio::test]
async fn accepting_a_diff_updates_the_buffer_and_the_file() {
    let client = started(TestClient::rich_capabilities(false)).await;
    let uri = client
        .open("notes.txt", "text", "keep me\n// TODO fix this\n")
        .await;
    client.prompt("uppercase the TODO lines in notes.txt").await;
    client
        .run_code_action(&uri, "Accept all changes (1) from demo")
        .await;
    let summary = client.take_message("demo: end_turn").await;
    assert!(summary.contains("files: notes.txt"), "{summary}");
    assert!(
        summary.contains("Done: I uppercase the TODO lines of notes.txt"),
        "{summary}"
    );
    let expected = "keep me\n// TODO FIX THIS\n";
    assert_eq!(client.document(&uri).text, expected);
    // The file follows the editor's save: no editor finds it changed under it.
    assert_eq!(
        std::fs::read_to_string(path_of(&uri)).unwrap(),
        "keep me\n// TODO fix this\n"
    );
    client.save(&uri).await;
    assert_eq!(std::fs::read_to_string(path_of(&uri)).unwrap(), expected);
    assert!(client.shutdown().await.success());
}

/// The user accepts one hunk and rejects the other; the agent then writes its whole proposal
/// through `fs/write_text_file`, and the file still gets only the accepted hunk.
#[tokio::test]
async fn a_partly_accepted_diff_keeps_the_rejected_hunk_out() {
    let client = started(capabilities_without_dialogs()).await;
    let original = "// TODO a\nx\nx\nx\nx\nx\nx\n// TODO b\n";
    let uri = client.open("notes.txt", "text", original).await;
    client.prompt("uppercase notes.txt").await;
    client
        .run_code_action_at(&uri, support::range(0, 0, 0, 1), "Accept change 1/2")
        .await;
    client.run_code_action(&uri, "Reject all changes (1)").await;
    let expected = "// TODO A\nx\nx\nx\nx\nx\nx\n// TODO b\n";
    ends_with_the_file_saying(client, &uri, original, expected).await;
}

/// An agent that proposes only the lines it changes (`oldText`/`newText` a fragment, as the
/// edit tools of some agents do): the review shows that change in place, not a file reduced to
/// the fragment, and accepting it keeps the rest of the file.
#[tokio::test]
async fn a_fragment_diff_is_reviewed_in_place() {
    let client = started(capabilities_without_dialogs()).await;
    let uri = client
        .open("notes.txt", "text", "keep\n// TODO a\nkeep too\n")
        .await;
    client.prompt("uppercase notes.txt @snippet").await;
    client
        .run_code_action(&uri, "Accept all changes (1) from demo")
        .await;
    let (before, expected) = ("keep\n// TODO a\nkeep too\n", "keep\n// TODO A\nkeep too\n");
    ends_with_the_file_saying(client, &uri, before, expected).await;
}

/// The diff came with the tool call; the permission request only names the tool call. It is
/// still a review, not a bare question.
#[tokio::test]
async fn a_permission_naming_a_tool_call_with_a_diff_is_a_review() {
    let client = started(capabilities_without_dialogs()).await;
    let uri = client.open("notes.txt", "text", "// TODO a\n").await;
    client.prompt("uppercase notes.txt @diffearlier").await;
    client
        .run_code_action(&uri, "Accept all changes (1) from demo")
        .await;
    client.take_message("demo: end_turn").await;
    assert_eq!(client.document(&uri).text, "// TODO A\n");
    assert!(client.shutdown().await.success());
}

#[tokio::test]
async fn rejecting_through_a_code_action_touches_nothing() {
    let client = started(capabilities_without_dialogs()).await;
    let original = "// TODO one\n";
    let uri = client.open("notes.txt", "text", original).await;
    client.prompt("uppercase notes.txt").await;
    client.run_code_action(&uri, "Reject all changes").await;
    let summary = client.take_message("demo: end_turn").await;
    assert!(
        summary.contains("1 declined by you (Edit notes.txt)") && !summary.contains("failed"),
        "{summary}"
    );
    assert!(summary.contains("The change was not allowed"), "{summary}");
    assert_eq!(client.document(&uri).text, original);
    assert_eq!(std::fs::read_to_string(path_of(&uri)).unwrap(), original);
    assert!(client.received("workspace/applyEdit").is_empty());
    assert!(client.shutdown().await.success());
}

#[tokio::test]
async fn cancel_ends_a_hanging_turn_and_withdraws_a_pending_permission() {
    let client = started(capabilities_without_dialogs()).await;
    client.prompt("@hang").await;
    client
        .take("agentls/sessionUpdate", |p| {
            // Streamed text reaches plugins merged (at most one text update per 100 ms).
            p["update"]["content"]["text"]
                .as_str()
                .is_some_and(|t| t.ends_with("Waiting until you cancel…\n"))
        })
        .await;
    client.cancel_ends_the_turn("demo").await;

    let uri = client.open("notes.txt", "text", "TODO fix\n").await;
    client.prompt("uppercase notes.txt").await;
    client.wait_for_review(&uri).await;
    client.execute("agentls.cancel", Value::Null).await.unwrap();
    client.take_message("demo: cancelled").await;
    assert!(client.decision_actions(&uri).await.is_empty());
    assert_eq!(
        std::fs::read_to_string(path_of(&uri)).unwrap(),
        "TODO fix\n"
    );
    assert!(client.shutdown().await.success());
}

/// Updates the agent sends after its turn ended are logged and forwarded but start no turn: the
/// next prompt is not refused as busy.
#[tokio::test]
async fn a_tool_call_after_the_turn_ended_does_not_leave_the_session_busy() {
    let client = started(capabilities_without_dialogs()).await;
    client.open("notes.txt", "text", "one\n").await;
    client.prompt("@late read notes.txt").await;
    client.take_message("demo: end_turn").await;
    client
        .take("agentls/sessionUpdate", |p| {
            p["update"]["title"] == "Late tool call, finished"
        })
        .await;
    let status = client.agent_status().await;
    assert_eq!(
        status["agents"][0]["sessions"][0]["turn"],
        Value::Null,
        "{status}"
    );
    client.takes_the_next_prompt("demo").await;
    assert!(client.shutdown().await.success());
}

/// One permission request proposing changes to two files: each gets its own review; it is
/// allowed (and the agent writes both) only when both are accepted. When one is rejected the
/// request is rejected, and the agent's next prompt says which file was rejected and that the
/// accepted one is already applied.
#[tokio::test]
async fn a_permission_with_two_diffs_is_allowed_only_when_both_are_accepted() {
    let client = started(capabilities_without_dialogs()).await;
    let a = client.open("a.txt", "text", "// TODO a\n").await;
    let b = client.open("b.txt", "text", "// TODO b\n").await;
    client.prompt("uppercase a.txt @also b.txt").await;
    client.wait_for_review(&a).await;
    client.wait_for_review(&b).await;
    client.run_code_action(&a, "Accept all changes (1)").await;
    client.run_code_action(&b, "Reject all changes (1)").await;
    let summary = client.take_message("demo: end_turn").await;
    assert!(summary.contains("The change was not allowed"), "{summary}");
    // The agent is not allowed, so agentls carries out what was accepted of a.txt itself.
    client
        .take("workspace/applyEdit", |p| {
            p["label"] == "Accept 1 change from demo to a.txt"
        })
        .await;
    assert_eq!(client.document(&a).text, "// TODO A\n");
    assert_eq!(client.document(&b).text, "// TODO b\n");
    assert_eq!(std::fs::read_to_string(path_of(&b)).unwrap(), "// TODO b\n");

    client.prompt("read a.txt").await;
    let log = client.shown_until("do not write them again").await;
    assert!(
        log.contains(
            "agentls told me: Your changes to b.txt (rejected by the user) were not applied"
        ) && log.contains("Your changes to a.txt were accepted and the editor applied"),
        "{log}"
    );
    client.take_message("demo: end_turn").await;

    client.prompt("uppercase a.txt @also b.txt").await;
    client.wait_for_review(&b).await;
    client.run_code_action(&b, "Accept all changes (1)").await;
    // a.txt is already uppercase: only b.txt is proposed, and this time it is written.
    let summary = client.take_message("demo: end_turn").await;
    assert!(summary.contains("Done: I uppercase"), "{summary}");
    assert_eq!(client.document(&b).text, "// TODO B\n");
    assert_eq!(std::fs::read_to_string(path_of(&b)).unwrap(), "// TODO b\n");
    client.save(&b).await;
    assert_eq!(std::fs::read_to_string(path_of(&b)).unwrap(), "// TODO B\n");
    assert!(client.shutdown().await.success());
}

/// A turn runs on a session that is no longer the current one (the user opened a new session
/// meanwhile): cancel still reaches it.
#[tokio::test]
async fn cancel_reaches_a_turn_on_a_session_that_is_no_longer_current() {
    let client = started(capabilities_without_dialogs()).await;
    client.prompt("@hang").await;
    client.shown_until("Waiting until you cancel").await;
    client
        .execute("agentls.newSession", json!({"agent": "demo"}))
        .await
        .unwrap();
    // Session ids count on across the servers of this process (they share a home).
    let told = client.take_message("demo: new session").await;
    assert!(told.starts_with("demo: new session demo-"), "{told}");
    client.cancel_ends_the_turn("demo").await;
    assert!(client.shutdown().await.success());
}

/// An agent that goes on after the cancel and asks something more: the question is answered
/// `cancelled` at once, not put to the user.
#[tokio::test]
async fn a_question_asked_after_cancel_is_answered_cancelled() {
    asks_after_the_cancel("@askaftercancel").await;
}

/// Prompts `prompt` (an `@askaftercancel` hook), cancels, and checks that the agent's later
/// question was answered `cancelled` without reaching the user.
async fn asks_after_the_cancel(prompt: &str) {
    let client = started(capabilities_without_dialogs()).await;
    let uri = client.open("notes.txt", "text", "x\n").await;
    client.prompt(prompt).await;
    client.shown_until("Waiting until you cancel").await;
    let cancelled = client.execute("agentls.cancel", json!({})).await.unwrap();
    assert_eq!(cancelled, json!({"cancelled": true}));
    let log = client
        .shown_until("After the cancel my question was answered")
        .await;
    assert!(log.contains("answered Cancelled"), "{log}");
    assert!(client.decision_actions(&uri).await.is_empty());
    assert!(client.shutdown().await.success());
}

#[tokio::test]
async fn a_killed_agent_withdraws_its_question_tells_once_and_restarts() {
    let client = started(capabilities_without_dialogs()).await;
    let uri = client.open("notes.txt", "text", "TODO fix\n").await;
    client.prompt("uppercase notes.txt").await;
    client.wait_for_review(&uri).await;
    let pid = client
        .agent_pid("demo")
        .await
        .expect("a running demo agent");
    // SAFETY: kill(2) on the agent's pid.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let told = client.take_message("process died").await;
    assert_eq!(
        told,
        "demo: turn failed: process died (killed by signal 9 (SIGKILL)) (2 tool calls)"
    );
    assert!(client.decision_actions(&uri).await.is_empty());
    let status = client.agent_status().await;
    assert_eq!(status["agents"][0]["state"], "failed");
    // The next prompt starts it again.
    client.prompt("read notes.txt").await;
    client.take_message("demo: end_turn").await;
    assert_ne!(client.agent_pid("demo").await, Some(pid));
    let deaths: Vec<_> = client
        .received("window/showMessage")
        .into_iter()
        .filter(|m| m["params"]["message"].as_str().unwrap().contains("died"))
        .collect();
    assert!(deaths.is_empty(), "told more than once: {deaths:?}");
    assert!(client.shutdown().await.success());
}

#[tokio::test]
async fn an_agent_that_exits_mid_turn_reports_its_exit_code() {
    let client = started(TestClient::rich_capabilities(false)).await;
    client.prompt("@crash").await;
    let told = client.take_message("process died").await;
    assert!(told.contains("(exit code 3)"), "{told}");
    assert!(told.contains("crashing on purpose"), "stderr tail: {told}");
    assert!(client.shutdown().await.success());
}

#[tokio::test]
async fn stray_stdout_noise_and_a_ten_megabyte_line_are_survived() {
    let client = started(TestClient::rich_capabilities(false)).await;
    let uri = client.open("notes.txt", "text", "x\n").await;
    client.prompt("read notes.txt @noise @bigline").await;
    client.take_message("demo: end_turn").await;
    let log = client.shown_until("_demo: end_turn").await;
    assert!(
        log.contains(
            "demo: skipped a non-JSON line on its stdout: demo-agent: this line is debug noise"
        ),
        "{log}"
    );
    assert!(
        log.contains("skipped a non-JSON line on its stdout: ####"),
        "{log}"
    );
    // The 10 MB chunk is the agent's reply: its chat has it whole.
    assert!(
        log.contains(&format!("\n{}\n", "x".repeat(10 * 1024 * 1024))),
        "the 10 MB chunk is not whole in the chat"
    );
    // The editor side stayed responsive throughout.
    client.edit(&uri, support::range(0, 0, 0, 0), ">").await;
    let state = client.server_state().await;
    assert_eq!(state["documents"][0]["text"], ">x\n");
    assert!(client.shutdown().await.success());
}

/// A prompt whose context range is reversed, or reaches the largest line number, about a file
/// that is not open: the context is read from disk, and the server lives on.
#[tokio::test]
async fn a_reversed_or_huge_context_range_is_read_not_crashed_on() {
    let client = started(TestClient::rich_capabilities(false)).await;
    let path = client.workspace.join("notes.txt");
    std::fs::write(&path, "one\ntwo\nthree\n").unwrap();
    let uri = support::file_uri(&path);
    for (start, end) in [(2, 0), (1, u32::MAX)] {
        let range = json!({"start": {"line": start, "character": 0},
                           "end": {"line": end, "character": 0}});
        let prompt = json!({"text": "read notes.txt", "uri": uri, "range": range});
        client.execute("agentls.prompt", prompt).await.unwrap();
        let summary = client.take_message("demo: ").await;
        assert!(summary.starts_with("demo: end_turn"), "{summary}");
    }
    assert!(client.shutdown().await.success());
}

#[tokio::test]
async fn reads_outside_the_workspace_are_refused_with_a_clear_error() {
    let client = started(TestClient::rich_capabilities(false)).await;
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret\n").unwrap();
    std::os::unix::fs::symlink(outside.path(), client.workspace.join("link")).unwrap();
    let secret = outside.path().join("secret.txt");
    client.prompt(&format!("read {}", secret.display())).await;
    let summary = client.take_message("demo: end_turn").await;
    assert!(
        summary.contains("outside the workspace folders"),
        "{summary}"
    );
    let log = client.shown_until("_demo: end_turn").await;
    assert!(log.contains("outside the workspace folders (set `fs.allowOutsideWorkspace = true` to permit this) (-32003)"), "{log}");
    client.prompt("read link/secret.txt").await;
    let summary = client.take_message("demo: end_turn").await;
    assert!(
        summary.contains("outside the workspace folders"),
        "{summary}"
    );
    assert!(!summary.contains("secret\n"));
    assert!(client.shutdown().await.success());
}

#[tokio::test]
async fn a_permission_without_a_diff_offers_the_agents_options_and_runs_a_terminal() {
    let client = started(TestClient::rich_capabilities(false)).await;
    client.answer(
        "window/showMessageRequest",
        Answer::With(json!({"title": "Run it"})),
    );
    client.prompt("@ask").await;
    let summary = client.take_message("demo: end_turn").await;
    assert!(
        summary.contains("The command printed \"demo terminal output\" and exited with Some(0)"),
        "{summary}"
    );
    let question = client.take("window/showMessageRequest", |_| true).await;
    let titles: Vec<_> = question["params"]["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["title"].clone())
        .collect();
    assert_eq!(titles, vec![json!("Run it"), json!("Don't run it")]);
    let log = client.shown_until("demo terminal output").await;
    assert!(log.contains("$ echo demo terminal output"), "{log}");
    assert!(client.shutdown().await.success());
}

/// An editor that advertises dialogs and then answers `window/showMessageRequest` with "method
/// not found" (Helix): the question is not taken as rejected; it waits for a code action, and
/// the answer given there runs the command.
#[tokio::test]
async fn a_dialog_that_fails_leaves_the_question_to_a_code_action() {
    let client = started(TestClient::rich_capabilities(false)).await;
    client.answer("window/showMessageRequest", Answer::Error(-32601));
    let notes = client.open("notes.txt", "text", "one\n").await;
    client.prompt("@run echo hi").await;
    client.take("window/showMessageRequest", |_| true).await;
    client
        .take_message("answer with a code action (Allow… / Reject…)")
        .await;
    client.run_code_action(&notes, "Allow (Run it)").await;
    let summary = client.take_message("demo: end_turn").await;
    assert!(summary.contains("The command printed \"hi\""), "{summary}");
    assert!(client.shutdown().await.success());
}

/// A command run with no arguments from a picker when it needs some (Helix drops command
/// errors): the user is told what it needs, once.
#[tokio::test]
async fn a_command_missing_its_arguments_says_so_where_the_user_looks() {
    let client = started(TestClient::rich_capabilities(false)).await;
    let result = client
        .execute("agentls.setMode", serde_json::Value::Null)
        .await;
    assert!(result.is_err(), "{result:?}");
    let told = client.take_message("agentls.setMode").await;
    assert!(
        told.contains("needs arguments and was run with none"),
        "{told}"
    );
    let empty = client
        .execute("agentls.send", serde_json::Value::Null)
        .await;
    assert!(empty.is_err(), "{empty:?}");
    client.take_message("agentls.send").await;
    // Once each: one message per refusal.
    assert_eq!(client.count(Some("window/showMessage")), 2);
    assert!(client.shutdown().await.success());
}

/// A command's output is kept to 1 MiB (the newest bytes) when the agent sets no limit, and a
/// command that does not exist is "resource not found" (-32002), not an internal error.
#[tokio::test]
async fn terminals_cap_unlimited_output_and_name_a_missing_command() {
    let client = started(TestClient::rich_capabilities(false)).await;
    client.answer(
        "window/showMessageRequest",
        Answer::With(json!({"title": "Run it"})),
    );
    // 300,000 lines, 1,988,895 bytes.
    client.prompt("@run seq 1 300000").await;
    let summary = client.take_message("demo: end_turn").await;
    let kept: usize = summary
        .split("The command printed ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{summary}"));
    assert!(
        (1024 * 1024 - 7..=1024 * 1024).contains(&kept),
        "kept {kept} bytes: {summary}"
    );
    assert!(
        summary.contains("(truncated), ending with \"300000\""),
        "{summary}"
    );

    client.prompt("@run agentls-no-such-command --flag").await;
    let summary = client.take_message("demo: end_turn").await;
    assert!(
        summary.contains("Could not run `agentls-no-such-command`") && summary.contains("(-32002)"),
        "{summary}"
    );
    assert!(client.shutdown().await.success());
}

/// A server whose default agent is `sh -c SCRIPT`, where `$PID_FILE` in the script names a file
/// for it to write its pid to; prompted once with `prompt`. Returns the client and the file's
/// directory.
async fn prompted_shell_agent(script: &str, prompt: &str) -> (TestClient, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let script = script.replace(
        "$PID_FILE",
        &format!("'{}'", dir.path().join("pid").display()),
    );
    let config = format!(
        "defaultAgent = \"sh\"\n[agents.sh]\ncommand = \"sh\"\nargs = [\"-c\", {script:?}]\n"
    );
    let client = configured(config).await;
    client.prompt(prompt).await;
    (client, dir)
}

/// A [`prompted_shell_agent`] script: the demo agent, after a second's start.
fn slow_starting_demo_agent() -> String {
    format!(
        "echo $$ > $PID_FILE; sleep 1; exec '{}' demo-agent",
        env!("CARGO_BIN_EXE_agentls")
    )
}

/// The pid the agent of [`prompted_shell_agent`] wrote, once it is all there.
async fn written_pid(dir: &tempfile::TempDir) -> u32 {
    let read = || {
        std::fs::read_to_string(dir.path().join("pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    support::agents::eventually_async(|| async { read().is_some() })
        .await
        .expect("the agent wrote its pid");
    read().unwrap()
}

/// An agent that closes its stdout at once but lives on is stopped, not left running unseen.
#[tokio::test]
async fn an_agent_that_hangs_up_at_once_is_not_left_running() {
    let script = "exec >&-; echo $$ > $PID_FILE; sleep 60";
    let (client, dir) = prompted_shell_agent(script, "hello").await;
    let told = client.take_message("sh: ").await;
    assert!(told.contains("protocol error"), "{told}");
    let pid = written_pid(&dir).await;
    // Stopped while agentls runs on.
    support::agents::eventually_async(|| async { !runs(pid) })
        .await
        .unwrap_or_else(|| panic!("agent {pid} still runs"));
    assert!(client.shutdown().await.success());
}

/// A server whose default agent `py` is a minimal ACP agent in Python: it answers the handshake,
/// and runs `on_prompt` (Python, indented 8 spaces, with `os`, `sys`, `time`, `json` imported;
/// it sets `result` or ends with `continue`) for `session/prompt`. `PID_FILE` in its
/// environment names `pids` in the returned directory.
async fn python_agent(on_prompt: &str) -> (TestClient, tempfile::TempDir) {
    let agent = format!(
        r#"
import json, os, sys, time
for line in sys.stdin:
    msg = json.loads(line)
    method, id = msg.get("method"), msg.get("id")
    if method == "initialize":
        result = {{"protocolVersion": 1, "agentCapabilities": {{}}, "authMethods": []}}
    elif method == "session/new":
        result = {{"sessionId": "s1"}}
    elif method == "session/prompt":{on_prompt}
    else:
        continue
    sys.stdout.write(json.dumps({{"jsonrpc": "2.0", "id": id, "result": result}}) + "\n")
    sys.stdout.flush()
"#
    );
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("agent.py");
    std::fs::write(&script, agent).unwrap();
    let config = format!(
        "defaultAgent = \"py\"\n[agents.py]\ncommand = \"python3\"\nargs = [{:?}]\n\
         [agents.py.env]\nPID_FILE = {:?}\n",
        script.display().to_string(),
        dir.path().join("pids").display().to_string()
    );
    let client = configured(config).await;
    (client, dir)
}

/// An agent that closes its stdout in the middle of a turn but lives on is stopped, and the
/// next prompt starts it afresh (instead of failing forever on a dead connection).
#[tokio::test]
async fn an_agent_that_hangs_up_mid_turn_is_stopped_and_restarted() {
    // On a prompt it writes its pid, closes its stdout and sleeps.
    let on_prompt = "
        with open(os.environ['PID_FILE'], 'a') as f:
            f.write(f'{os.getpid()}\\n')
        os.close(1)
        time.sleep(60)
        continue";
    let (client, dir) = python_agent(on_prompt).await;
    let pid_file = dir.path().join("pids");
    let pids = || -> Vec<u32> {
        std::fs::read_to_string(&pid_file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.parse().ok())
            .collect()
    };
    client.prompt("one").await;
    let told = client.take_message("py: ").await;
    assert!(told.contains("closed its output"), "{told}");
    let first = pids()[0];
    assert!(!runs(first), "agent {first} left running");
    client.prompt("two").await;
    let told = client.take_message("py: ").await;
    assert!(told.contains("closed its output"), "{told}");
    assert_eq!(pids().len(), 2, "the second prompt started the agent again");
    assert!(client.shutdown().await.success());
}

/// The user cancels while the agent is still starting: the prompt never runs as a turn.
#[tokio::test]
async fn a_prompt_cancelled_while_its_agent_starts_does_not_run() {
    let (client, dir) = prompted_shell_agent(&slow_starting_demo_agent(), "@hang").await;
    written_pid(&dir).await;
    client.cancel_ends_the_turn("sh").await;
    // The agent started all the same, and takes the next prompt.
    client.takes_the_next_prompt("sh").await;
    assert!(client.shutdown().await.success());
}

/// An agent still starting when the editor shuts agentls down is stopped too, not left behind.
#[tokio::test]
async fn an_agent_still_starting_at_shutdown_does_not_outlive_agentls() {
    let (client, dir) = prompted_shell_agent(&slow_starting_demo_agent(), "hello").await;
    let pid = written_pid(&dir).await;
    assert!(client.shutdown().await.success());
    assert!(!runs(pid), "agent {pid} outlived agentls");
}

/// A command that leaves a background job behind (its output elsewhere, the shell gone at once):
/// releasing the terminal takes the job with it.
#[tokio::test]
async fn a_released_terminal_takes_its_background_jobs_with_it() {
    let client = started(TestClient::rich_capabilities(false)).await;
    client.answer(
        "window/showMessageRequest",
        Answer::With(json!({"title": "Run it"})),
    );
    let pid_file = client.workspace.join("pid");
    let script = format!(
        "sleep 60 >/dev/null 2>&1 & echo $! > '{}'\n",
        pid_file.display()
    );
    std::fs::write(client.workspace.join("bg.sh"), script).unwrap();
    client.prompt("@run sh bg.sh").await;
    client.take_message("demo: end_turn").await;
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    support::agents::eventually_async(|| async { !runs(pid) })
        .await
        .unwrap_or_else(|| panic!("{pid}, left by the agent's command, still runs"));
    assert!(client.shutdown().await.success());
}

/// The editor goes away without `shutdown` (it crashed): the commands agents run through
/// agentls go too, with everything they started in the background.
#[tokio::test]
async fn an_editor_that_vanishes_takes_the_agents_commands_with_it() {
    let mut client = TestClient::started(TestClient::rich_capabilities(false)).await;
    client.answer(
        "window/showMessageRequest",
        Answer::With(json!({"title": "Run it"})),
    );
    let pid_file = client.workspace.join("pid");
    let script = format!("sleep 60 & echo $! > '{}'; wait\n", pid_file.display());
    std::fs::write(client.workspace.join("bg.sh"), script).unwrap();
    client.prompt("@run sh bg.sh").await;
    let read = || std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok();
    support::agents::eventually_async(|| async { read().is_some() })
        .await
        .expect("the command started");
    let pid: u32 = read().unwrap();
    assert!(runs(pid));
    client.close_stdin().await;
    assert!(!client.wait_exit().await.success());
    assert!(
        !runs(pid),
        "{pid}, started by the agent's command, outlived agentls"
    );
}

#[tokio::test]
async fn modes_sessions_and_shutdown_without_zombies() {
    let client = TestClient::started(TestClient::rich_capabilities(false)).await;
    client.open("notes.txt", "text", "TODO\n").await;
    client
        .execute("agentls.setMode", json!({"mode": "read-only"}))
        .await
        .unwrap();
    client.take_message("demo: mode is now read-only").await;
    client.prompt("uppercase notes.txt").await;
    client.take_message("demo: end_turn").await;
    assert!(client.received("window/showMessageRequest").is_empty());
    client
        .execute("agentls.newSession", json!({"agent": "demo"}))
        .await
        .unwrap();
    // Session ids count on across the servers of this process (they share a home).
    let told = client.take_message("demo: new session").await;
    assert!(told.starts_with("demo: new session demo-"), "{told}");
    let status = client.agent_status().await;
    assert_eq!(status["agents"][0]["currentSession"], "demo-2");
    assert_eq!(status["agents"][0]["sessions"].as_array().unwrap().len(), 2);
    let unknown = client
        .execute("agentls.prompt", json!({"agent": "nope", "text": "hi"}))
        .await
        .unwrap_err();
    assert!(
        unknown["message"]
            .as_str()
            .unwrap()
            .contains("no agent named `nope`")
    );
    let pid = client.agent_pid("demo").await.unwrap();
    assert!(client.shutdown().await.success());
    // Reaped, not a zombie: its /proc entry is gone.
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
}

/// 20,000 streamed chunks reach plugins as a handful of `agentls/sessionUpdate`s (merged text,
/// nothing lost, order kept), not one notification per chunk.
#[tokio::test]
async fn a_flood_of_chunks_reaches_plugins_merged() {
    let client = started(TestClient::rich_capabilities(false)).await;
    client.prompt("@flood 20000").await;
    client.take_message("demo: end_turn").await;
    let updates = client.received("agentls/sessionUpdate");
    let texts: Vec<&str> = updates
        .iter()
        .filter(|u| u["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["params"]["update"]["content"]["text"].as_str().unwrap())
        .collect();
    assert!(texts.len() < 200, "{} text updates", texts.len());
    let expected: String = (0..20_000).map(|i| format!("chunk {i}\n")).collect();
    let all = texts.concat();
    assert!(
        all.starts_with("Hello from the demo agent.\n"),
        "{all:.100}"
    );
    assert!(all.contains(&expected));
    assert!(client.shutdown().await.success());
}

/// A client that asked for no plugin events (Helix, eglot without the package) gets none: not
/// the stream's updates, not the reviews; one that asked for reviews only gets only those. What
/// every editor shows (diagnostics) comes all the same.
#[tokio::test]
async fn plugin_events_go_only_to_a_client_that_asks_for_them() {
    for (asked, reviews_expected) in [(json!([]), false), (json!(["reviewChanged"]), true)] {
        let client = TestClient::start(Options::default()).await;
        let options = json!({"pluginEvents": asked});
        client
            .initialize(TestClient::rich_capabilities(false), Some(options))
            .await;
        let first = client.open("first.txt", "text", "one\n").await;
        let second = client.open("second.txt", "text", "one\n").await;
        client.prompt("@flood 2000").await;
        client.take_message("demo: end_turn").await;
        propose(&client, &first, "two\n", "gemini").await;
        // The host sends effects in order: once the second file's review is shown, anything the
        // first's or the stream's made has been sent. (Its own plugin event follows its
        // diagnostics, so a client that asked waits for that one too.)
        propose(&client, &second, "two\n", "gemini").await;
        client
            .take("textDocument/publishDiagnostics", |p| {
                p["uri"] == second && p["diagnostics"].as_array().unwrap().len() == 1
            })
            .await;
        if reviews_expected {
            client
                .take("agentls/reviewChanged", |p| p["uri"] == second)
                .await;
        }
        assert_eq!(client.count(Some("agentls/sessionUpdate")), 0, "{asked}");
        let reviews = client.count(Some("agentls/reviewChanged"));
        // The first file's, when asked for (the second's was taken above).
        assert_eq!(
            reviews >= 1,
            reviews_expected,
            "{asked}: {reviews} reviewChanged"
        );
        assert!(client.shutdown().await.success());
    }
}

/// A plugin that asked for `turnChanged` alone (a status line) hears when the agent starts
/// working and when it stops, in that order, and nothing of the stream.
#[tokio::test]
async fn a_plugin_hears_when_an_agent_starts_and_stops_working() {
    let client = TestClient::start(Options::default()).await;
    let options = json!({"pluginEvents": ["turnChanged"]});
    client
        .initialize(TestClient::rich_capabilities(false), Some(options))
        .await;
    client.prompt("@flood 2000").await;
    client.take_message("demo: end_turn").await;
    for prompting in [true, false] {
        // The first one not taken yet, whatever it says.
        let change = client.take("agentls/turnChanged", |_| true).await;
        let expected = json!({"agent": "demo", "prompting": prompting});
        assert_eq!(change["params"], expected);
    }
    assert_eq!(client.count(Some("agentls/turnChanged")), 2);
    assert_eq!(client.count(Some("agentls/sessionUpdate")), 0);
    assert!(client.shutdown().await.success());
}

/// An agent whose user has not logged in: the user is told what it offers and what to do, once,
/// and nothing hangs.
#[tokio::test]
async fn an_agent_that_needs_a_login_says_what_to_do() {
    let exe = env!("CARGO_BIN_EXE_agentls");
    let config = format!(
        "defaultAgent = \"locked\"\n[agents.locked]\ncommand = \"{exe}\"\nargs = [\"demo-agent\"]\n\
         env = {{ AGENTLS_DEMO_REQUIRE_LOGIN = \"1\" }}\n"
    );
    let client = TestClient::start_initialized(Options {
        config_toml: Some(config),
        ..Options::default()
    })
    .await;
    client.prompt("read notes.txt").await;
    let message = client.take_message("needs you to log in").await;
    assert!(message.contains("Demo login"), "{message}");
    assert!(message.contains("agents.locked.env"), "{message}");
    let status = client.agent_status().await;
    let text = status.to_string();
    assert!(text.contains("authentication required"), "{status}");
    assert!(client.shutdown().await.success());
}

/// An agent that takes its proposal back (`$/cancel_request` on its permission request): the
/// review disappears from the editor; nothing is written.
#[tokio::test]
async fn a_proposal_the_agent_takes_back_is_withdrawn() {
    let client = started(TestClient::rich_capabilities(false)).await;
    let uri = client.open("notes.txt", "text", "TODO fix\n").await;
    client.prompt("uppercase notes.txt @withdraw 300").await;
    client
        .take("textDocument/publishDiagnostics", |p| {
            p["uri"] == uri.as_str() && p["diagnostics"].as_array().unwrap().len() == 1
        })
        .await;
    client
        .take("textDocument/publishDiagnostics", |p| {
            p["uri"] == uri.as_str() && p["diagnostics"].as_array().unwrap().is_empty()
        })
        .await;
    client.take_message("demo: end_turn").await;
    assert!(client.decision_actions(&uri).await.is_empty());
    assert_eq!(
        std::fs::read_to_string(path_of(&uri)).unwrap(),
        "TODO fix\n"
    );
    assert!(client.received("workspace/applyEdit").is_empty());
}

/// A session nothing can reach any more (a newer one is current, no chat talks to it) is
/// forgotten: starting over and over does not grow agentls's state or `agentls.status`.
#[tokio::test]
async fn sessions_nothing_can_reach_are_forgotten() {
    let client = TestClient::started(TestClient::rich_capabilities(false)).await;
    for n in 1..=5 {
        client
            .execute("agentls.newSession", json!({"agent": "demo"}))
            .await
            .unwrap();
        client
            .take_message(&format!("demo: new session demo-{n}"))
            .await;
    }
    let status = client.agent_status().await;
    let sessions = status["agents"][0]["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{status:#}");
    assert_eq!(sessions[0]["id"], "demo-5");
    // The current one takes the next prompt, whose chat then talks to it; the next new
    // session leaves it in place.
    client.prompt("hello").await;
    client.take_message("demo: end_turn").await;
    client
        .execute("agentls.newSession", json!({"agent": "demo"}))
        .await
        .unwrap();
    client.take_message("demo: new session demo-6").await;
    let status = client.agent_status().await;
    let ids: Vec<&str> = status["agents"][0]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert_eq!(ids, ["demo-5", "demo-6"], "{status:#}");
    assert!(client.shutdown().await.success());
}

/// A new session (`agentls.newSession`) takes the next prompt, in a chat of its own: the
/// prompt does not go back to the latest chat's session, and the mode set on the new session
/// is the one its turn runs in.
#[tokio::test]
async fn a_new_session_takes_the_next_prompt_in_a_chat_of_its_own() {
    let client = started(capabilities_without_dialogs()).await;
    let prompt = async |text: &str| {
        let sent = client.execute("agentls.prompt", json!({"text": text}));
        let chat = sent.await.unwrap()["chat"].clone();
        client.take_message("demo: end_turn").await;
        chat
    };
    let first = prompt("hello").await;
    let old = client.agent_status().await["agents"][0]["currentSession"].clone();
    client
        .execute("agentls.newSession", json!({"agent": "demo"}))
        .await
        .unwrap();
    let told = client.take_message("demo: new session").await;
    let new = told.trim_start_matches("demo: new session ").to_owned();
    client
        .execute("agentls.setMode", json!({"mode": "read-only"}))
        .await
        .unwrap();
    client.take_message("demo: mode is now read-only").await;
    let second = prompt("hello again").await;
    assert_ne!(first, second, "the prompt went to the latest chat");
    let status = client.agent_status().await;
    let sessions = status["agents"][0]["sessions"].as_array().unwrap();
    let turns = |id: &str| {
        let session = sessions.iter().find(|s| s["id"] == id);
        session.map(|s| (s["turns"].clone(), s["mode"].clone()))
    };
    assert_eq!(
        turns(&new),
        Some((json!(1), json!("read-only"))),
        "{status:#}"
    );
    let old = old.as_str().unwrap();
    assert_eq!(turns(old).map(|t| t.0), Some(json!(1)), "{status:#}");
    assert!(client.shutdown().await.success());
}

/// A prompt while the chat's turn still runs, from elsewhere or sent from the chat, is refused
/// with the reason before it goes into the chat: the running reply is not cut by a second
/// `## You`, and the refused message is not lost from the chat's draft.
#[tokio::test]
async fn a_prompt_while_the_turn_runs_is_refused_and_stays_out_of_the_chat() {
    let client = started(capabilities_without_dialogs()).await;
    let first = client
        .execute("agentls.prompt", json!({"text": "wait @hang"}))
        .await
        .unwrap();
    let chat = std::path::PathBuf::from(first["chat"].as_str().unwrap());
    client.shown_until("Waiting until you cancel").await;
    let refused_as_busy = async |command: &str, argument: Value| {
        let refused = client.execute(command, argument).await.unwrap_err();
        let why = refused["message"].as_str().unwrap_or_default();
        assert!(
            why.contains("demo is still working on the previous prompt"),
            "{command}: {refused}"
        );
    };
    refused_as_busy("agentls.prompt", json!({"text": "second prompt"})).await;
    let text = std::fs::read_to_string(&chat).unwrap();
    let uri = client.open_unsaved(&chat, "markdown", &text).await;
    refused_as_busy("agentls.send", json!({"uri": uri})).await;
    client.execute("agentls.cancel", Value::Null).await.unwrap();
    client.take_message("demo: cancelled").await;
    let ended = support::eventually(|| client.document(&uri).text.contains("demo: cancelled"));
    assert!(ended.await.is_some(), "{}", client.document(&uri).text);
    let text = client.document(&uri).text;
    assert!(!text.contains("second prompt"), "{text}");
    assert_eq!(text.matches("\n## You\n").count(), 2, "{text}");
    assert!(client.shutdown().await.success());
}

/// An agent that refuses a second session offered agentls's editor tools (one that takes an
/// MCP server by a name once a process) still gets that session, without the tools, and the
/// user's log says why.
#[tokio::test]
async fn a_session_refused_with_the_editor_tools_is_opened_without_them() {
    let agent = r#"
import json, sys
sessions = 0
for line in sys.stdin:
    msg = json.loads(line)
    method, id = msg.get("method"), msg.get("id")
    reply = {"jsonrpc": "2.0", "id": id}
    if method == "initialize":
        reply["result"] = {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}
    elif method == "session/new":
        sessions += 1
        if sessions > 1 and msg["params"].get("mcpServers"):
            reply["error"] = {"code": -32603, "message": "MCP server 'agentls' is already registered"}
        else:
            reply["result"] = {"sessionId": "s%d" % sessions}
    else:
        continue
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
"#;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("agent.py");
    std::fs::write(&script, agent).unwrap();
    let config = format!(
        "defaultAgent = \"py\"\n[agents.py]\ncommand = \"python3\"\nargs = [{:?}]\n",
        script.display().to_string()
    );
    let client = configured(config).await;
    for told in ["py: new session s1", "py: new session s3"] {
        client
            .execute("agentls.newSession", json!({}))
            .await
            .unwrap();
        client.take_message(told).await;
    }
    let why = client
        .take_logged("refused a session with agentls's editor tools")
        .await;
    assert!(why.contains("already registered"), "{why}");
    let status = client.agent_status().await;
    let py = status["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "py");
    assert_eq!(py.unwrap()["currentSession"], "s3", "{status:#}");
    assert!(client.shutdown().await.success());
}
