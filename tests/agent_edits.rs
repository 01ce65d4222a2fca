//! Agents' edits land exactly once, reviewed, and nothing of the user's is lost: the paths real
//! agents' edit tools take after "Accept". The demo agent acts like them: once allowed it reads
//! the file again, looks for the text it proposed to replace (its tool fails when that is gone),
//! and writes through `fs/write_text_file` or, with `@diskwrite`, straight to disk.

mod support;

use support::agents::{capabilities_without_dialogs, path_of};
use support::{TestClient, range};

/// Waits for the editor to be asked to apply an accepted change.
async fn accept_applied(client: &TestClient) {
    client
        .take("workspace/applyEdit", |p| {
            p["label"]
                .as_str()
                .unwrap_or_default()
                .starts_with("Accept")
        })
        .await;
}

/// Waits for the end of the turn and checks the agent's edit tool reported success.
async fn the_agents_tool_succeeded(client: &TestClient) {
    let summary = client.take_message("demo: end_turn").await;
    assert!(summary.contains("Done: I uppercase"), "{summary}");
}

/// Writes `text` to `relative` in the workspace without opening it; returns its URI.
fn closed_file(client: &TestClient, relative: &str, text: &str) -> String {
    let path = client.workspace.join(relative);
    std::fs::write(&path, text).unwrap();
    support::file_uri(&path)
}

/// What the file of an open document says after its accepted change, before the editor saves
/// it: an agent writing through `fs/write_text_file` leaves the file to the editor's save (so no
/// editor finds it changed under it); one writing the disk itself has written it.
fn file_before_save<'a>(route: &str, before: &'a str, after: &'a str) -> &'a str {
    if route.contains("@diskwrite") {
        after
    } else {
        before
    }
}

async fn open_file_accepted(route: &str) {
    let client = TestClient::in_process_started(capabilities_without_dialogs()).await;
    let uri = client.open("notes.txt", "text", "keep\n// TODO a\n").await;
    client.prompt(&format!("uppercase notes.txt {route}")).await;
    client.wait_for_review(&uri).await;
    client.run_code_action(&uri, "Accept all changes (1)").await;
    the_agents_tool_succeeded(&client).await;
    let expected = "keep\n// TODO A\n";
    accept_applied(&client).await;
    assert_eq!(client.document(&uri).text, expected);
    let file = file_before_save(route, "keep\n// TODO a\n", expected);
    assert_eq!(std::fs::read_to_string(path_of(&uri)).unwrap(), file);
    // Applied once: no second edit of the buffer.
    assert_eq!(client.count(Some("workspace/applyEdit")), 1);
    client.save(&uri).await;
    assert_eq!(std::fs::read_to_string(path_of(&uri)).unwrap(), expected);
    assert!(client.shutdown().await.success());
}

/// The edit tool re-reads the file through `fs/read_text_file` after the accept: it still finds
/// what it proposed to replace, because nothing was applied before it heard the verdict.
#[tokio::test]
async fn an_agent_writing_through_fs_finds_its_old_text_after_the_accept() {
    open_file_accepted("").await;
}

/// The same with an edit tool that reads and writes the disk itself: the buffer gets the change
/// once, after the agent wrote it.
#[tokio::test]
async fn an_agent_writing_the_disk_itself_finds_its_old_text_after_the_accept() {
    open_file_accepted("@diskwrite").await;
}

async fn closed_file_partly_accepted(route: &str) {
    let client = TestClient::in_process_started(capabilities_without_dialogs()).await;
    let uri = closed_file(
        &client,
        "notes.txt",
        "// TODO a\nx\nx\nx\nx\nx\nx\n// TODO b\n",
    );
    client.prompt(&format!("uppercase notes.txt {route}")).await;
    client.wait_for_review(&uri).await;
    client
        .run_code_action_at(&uri, range(0, 0, 0, 1), "Accept change 1/2")
        .await;
    client.run_code_action(&uri, "Reject all changes (1)").await;
    the_agents_tool_succeeded(&client).await;
    let expected = "// TODO A\nx\nx\nx\nx\nx\nx\n// TODO b\n";
    support::eventually(|| std::fs::read_to_string(path_of(&uri)).unwrap() == expected)
        .await
        .unwrap_or_else(|| panic!("{:?}", std::fs::read_to_string(path_of(&uri))));
    assert_eq!(client.count(Some("workspace/applyEdit")), 0);
    assert!(client.shutdown().await.success());
}

/// A file that is not open, one of two hunks accepted: the agent's tool succeeds and writes its
/// whole proposal; the disk ends with the accepted hunk only.
#[tokio::test]
async fn a_closed_file_written_through_fs_gets_only_the_accepted_hunk() {
    closed_file_partly_accepted("").await;
}

/// The same when the agent writes the disk itself: agentls corrects the disk to the accepted hunk.
#[tokio::test]
async fn a_closed_file_written_to_disk_gets_only_the_accepted_hunk() {
    closed_file_partly_accepted("@diskwrite").await;
}

async fn unsaved_lines_survive(route: &str) {
    let client = TestClient::in_process_started(capabilities_without_dialogs()).await;
    let uri = client.open("notes.rs", "rust", "keep\n// TODO a\n").await;
    // Typed before the prompt, and not saved.
    client.edit(&uri, range(0, 0, 0, 0), "mine\n").await;
    client.prompt(&format!("uppercase notes.rs {route}")).await;
    client.wait_for_review(&uri).await;
    // Typed while the review is open, right after the hunk, and not saved.
    client.edit(&uri, range(3, 0, 3, 0), "also mine\n").await;
    client.run_code_action(&uri, "Accept all changes (1)").await;
    the_agents_tool_succeeded(&client).await;
    accept_applied(&client).await;
    // A later turn gives any stray edit time to show.
    client.prompt("read notes.rs").await;
    client.take_message("demo: end_turn").await;
    assert_eq!(
        client.document(&uri).text,
        "mine\nkeep\n// TODO A\nalso mine\n"
    );
    // The disk never gets the unsaved lines from agentls: the accepted change only when the
    // agent wrote the disk itself, else nothing until the editor saves.
    let disk = std::fs::read_to_string(path_of(&uri)).unwrap();
    assert_eq!(
        disk,
        file_before_save(route, "keep\n// TODO a\n", "keep\n// TODO A\n")
    );
    assert_eq!(client.count(Some("workspace/applyEdit")), 1);
    assert!(client.shutdown().await.success());
}

/// Unsaved lines the user typed before the prompt and while the review was open stay in the
/// buffer, next to the accepted change, and never reach the disk with the agent's write.
#[tokio::test]
async fn unsaved_lines_survive_an_accepted_write_through_fs() {
    unsaved_lines_survive("").await;
}

/// The same when the agent writes the disk itself.
#[tokio::test]
async fn unsaved_lines_survive_an_accepted_write_to_disk() {
    unsaved_lines_survive("@diskwrite").await;
}

/// A server whose default agent is the demo agent started by `sh` after `delay` seconds, with
/// `more` appended to its `[agents.demo2]` table.
async fn demo_agent_configured(delay: &str, more: &str) -> TestClient {
    let script = format!(
        "sleep {delay}; exec '{}' demo-agent",
        env!("CARGO_BIN_EXE_agentls")
    );
    let config = format!(
        "defaultAgent = \"demo2\"\n[agents.demo2]\ncommand = \"sh\"\nargs = [\"-c\", {script:?}]\n{more}"
    );
    TestClient::configured(&config, capabilities_without_dialogs()).await
}

/// `setMode` then `prompt` at once, while the agent is still starting: the prompt runs in the
/// new mode (the demo agent's `read-only` never proposes an edit).
#[tokio::test]
async fn a_mode_set_while_the_agent_starts_applies_to_the_prompt_after_it() {
    let client = demo_agent_configured("1", "").await;
    client.open("notes.txt", "text", "// TODO a\n").await;
    client
        .execute("agentls.setMode", serde_json::json!({"mode": "read-only"}))
        .await
        .unwrap();
    client.prompt("uppercase notes.txt").await;
    client.take_message("demo2: mode is now read-only").await;
    let summary = client.take_message("demo2: end_turn").await;
    assert!(summary.contains("Nothing to change"), "{summary}");
    assert_eq!(
        client.server_state().await["reviews"],
        serde_json::json!([])
    );
    assert!(client.shutdown().await.success());
}

/// `agents.<name>.mode` puts every new session in that mode before its first prompt.
#[tokio::test]
async fn the_configured_mode_is_set_before_the_first_prompt() {
    let client = demo_agent_configured("0", "mode = \"read-only\"\n").await;
    client.open("notes.txt", "text", "// TODO a\n").await;
    client.prompt("uppercase notes.txt").await;
    let summary = client.take_message("demo2: end_turn").await;
    assert!(summary.contains("Nothing to change"), "{summary}");
    let status = client.agent_status().await;
    let agents = status["agents"].as_array().unwrap();
    let demo2 = agents.iter().find(|a| a["name"] == "demo2").unwrap();
    assert_eq!(demo2["sessions"][0]["mode"], "read-only", "{status}");
    assert!(client.shutdown().await.success());
}

/// A configured mode the agent does not have is named with the modes it has; the prompt still
/// runs, in the agent's own default mode.
#[tokio::test]
async fn an_unknown_configured_mode_names_the_agents_modes() {
    let client = demo_agent_configured("0", "mode = \"yolo\"\n").await;
    client.open("notes.txt", "text", "one\n").await;
    client.prompt("read notes.txt").await;
    let told = client.take_message("agents.demo2.mode").await;
    assert!(
        told.contains("mode `yolo` is not one of the agent's modes: ask, read-only"),
        "{told}"
    );
    client.take_message("demo2: end_turn").await;
    let unknown = client
        .execute("agentls.setMode", serde_json::json!({"mode": "plan"}))
        .await;
    assert!(unknown.is_ok(), "{unknown:?}");
    let told = client.take_message("could not set mode `plan`").await;
    assert!(told.contains("ask, read-only"), "{told}");
    assert!(client.shutdown().await.success());
}

/// `agents.<name>.configOptions` sets the agent's options before the first prompt (the demo
/// agent says which model it thinks with); one it does not offer is named with those it does.
#[tokio::test]
async fn configured_options_are_set_before_the_first_prompt() {
    let options = "configOptions = { model = \"careful\", size = \"xl\" }\n";
    let client = demo_agent_configured("0", options).await;
    client.open("notes.txt", "text", "one\n").await;
    client.prompt("read notes.txt").await;
    let told = client.take_message("agents.demo2.configOptions.size").await;
    assert!(told.contains("(it offers: model)"), "{told}");
    let summary = client.take_message("demo2: end_turn").await;
    let chat = client.shown_until("_demo2: end_turn").await;
    assert!(
        chat.contains("I think with the careful model."),
        "{summary}\n{chat}"
    );
    assert!(client.shutdown().await.success());
}

/// An agent that writes without asking (an auto mode): the change lands, is shown after the fact
/// with Keep / Undo per hunk, and the summary names it. Undo restores the old text of that hunk
/// and keeps the user's own edit next to it; Keep leaves the other one.
#[tokio::test]
async fn a_change_made_without_asking_is_shown_for_keep_or_undo() {
    let client = TestClient::in_process_started(capabilities_without_dialogs()).await;
    let original = "// TODO a\nx\nx\nx\nx\nx\nx\n// TODO b\n";
    let uri = client.open("notes.txt", "text", original).await;
    client.prompt("uppercase notes.txt @unasked").await;
    let summary = client.take_message("demo: end_turn").await;
    assert!(
        summary.contains("changed without asking: notes.txt"),
        "{summary}"
    );
    client
        .take_message("demo changed notes.txt without asking (2 changes)")
        .await;
    let changed = "// TODO A\nx\nx\nx\nx\nx\nx\n// TODO B\n";
    assert_eq!(client.document(&uri).text, changed);
    // The user types a line of their own after the agent's change.
    client.edit(&uri, range(1, 0, 1, 0), "mine\n").await;
    client
        .run_code_action_at(&uri, range(0, 0, 0, 1), "Undo change 1/2 by demo")
        .await;
    client
        .run_code_action_at(&uri, range(8, 0, 8, 1), "Keep change 2/2 by demo")
        .await;
    client
        .take("workspace/applyEdit", |p| {
            p["label"]
                .as_str()
                .unwrap_or_default()
                .starts_with("Undo 1 change by demo")
        })
        .await;
    assert_eq!(
        client.document(&uri).text,
        "// TODO a\nmine\nx\nx\nx\nx\nx\nx\n// TODO B\n"
    );
    support::agents::eventually_async(|| async {
        client.server_state().await["reviews"] == serde_json::json!([])
    })
    .await
    .expect("the review closes once every change is kept or undone");
    assert!(client.shutdown().await.success());
}

/// Something else (a checkout, another tool) writes a file between turns, under the user's
/// unsaved edit; the user takes the disk's text (Neovim's W12 answered *Load File*: the buffer
/// becomes the file's text, unsaved). The next turn, which does not touch the file, does not
/// report it as changed without asking, and no Keep/Undo review opens on it.
#[tokio::test]
async fn a_file_reloaded_from_disk_between_turns_is_not_the_agents_change() {
    let client = TestClient::in_process_started(capabilities_without_dialogs()).await;
    let uri = client.open("notes.txt", "text", "one\ntwo\n").await;
    client.edit(&uri, range(0, 0, 0, 0), "mine ").await;
    std::fs::write(client.workspace.join("notes.txt"), "one\ntwo\nthree\n").unwrap();
    client
        .edit(&uri, range(0, 0, 2, 0), "one\ntwo\nthree\n")
        .await;
    let other = client.open("other.txt", "text", "a\n").await;
    client.prompt("read other.txt").await;
    let summary = client.take_message("demo: end_turn").await;
    assert!(!summary.contains("without asking"), "{summary}");
    assert!(client.decision_actions(&uri).await.is_empty());
    assert_eq!(client.document(&uri).text, "one\ntwo\nthree\n");
    assert!(
        !client.shown_text().contains("without asking"),
        "{}",
        client.shown_text()
    );
    drop(other);
    assert!(client.shutdown().await.success());
}

/// A change the user rejected, proposed again in a later turn and written without asking this
/// time, lands: the earlier verdict covered only the earlier turn's write (it used to turn the
/// new write into the old accepted text, silently).
#[tokio::test]
async fn a_rejected_change_written_in_a_later_turn_lands() {
    let client = TestClient::in_process_started(capabilities_without_dialogs()).await;
    let original = "// TODO a\nx\nx\nx\nx\nx\nx\n// TODO b\n";
    let uri = client.open("notes.txt", "text", original).await;
    client.prompt("uppercase notes.txt").await;
    client.wait_for_review(&uri).await;
    client
        .run_code_action_at(&uri, range(0, 0, 0, 1), "Accept change 1/2")
        .await;
    client
        .run_code_action_at(&uri, range(7, 0, 7, 1), "Reject change 2/2")
        .await;
    client.take_message("demo: end_turn").await;
    // The chat says what the user decided, not "accepted".
    client
        .shown_until("> → notes.txt partly accepted (1 rejected)")
        .await;
    let decided = "// TODO A\nx\nx\nx\nx\nx\nx\n// TODO b\n";
    support::eventually(|| client.document(&uri).text == decided)
        .await
        .unwrap_or_else(|| panic!("{:?}", client.document(&uri).text));
    client.prompt("uppercase notes.txt @unasked").await;
    client
        .take_message("demo changed notes.txt without asking (1 change)")
        .await;
    assert_eq!(
        client.document(&uri).text,
        "// TODO A\nx\nx\nx\nx\nx\nx\n// TODO B\n"
    );
    assert!(client.shutdown().await.success());
}

/// The same for a file that is not open: Undo writes the old text back to the disk.
#[tokio::test]
async fn a_change_made_without_asking_to_a_closed_file_can_be_undone() {
    let client = TestClient::in_process_started(capabilities_without_dialogs()).await;
    let uri = closed_file(&client, "notes.txt", "keep\n// TODO a\n");
    client.prompt("uppercase notes.txt @unasked").await;
    client.take_message("demo: end_turn").await;
    assert_eq!(
        std::fs::read_to_string(path_of(&uri)).unwrap(),
        "keep\n// TODO A\n"
    );
    client
        .run_code_action(&uri, "Undo all changes (1) by demo")
        .await;
    support::eventually(|| std::fs::read_to_string(path_of(&uri)).unwrap() == "keep\n// TODO a\n")
        .await
        .expect("the old text back on disk");
    assert!(client.shutdown().await.success());
}

/// An agent that writes straight to disk without asking (an auto mode): the workspace watcher
/// sees it, the buffer gets the change merged with the user's unsaved line, and the change is
/// shown for Keep/Undo; Undo brings the old line back and keeps the user's.
#[tokio::test]
async fn a_disk_write_made_without_asking_reaches_the_buffer_for_keep_or_undo() {
    let client = TestClient::in_process_started(capabilities_without_dialogs()).await;
    let uri = client.open("notes.txt", "text", "keep\n// TODO a\n").await;
    client.edit(&uri, range(0, 0, 0, 0), "mine\n").await;
    client
        .prompt("uppercase notes.txt @diskwrite @unasked")
        .await;
    client
        .take_message("demo changed notes.txt without asking (1 change)")
        .await;
    assert_eq!(client.document(&uri).text, "mine\nkeep\n// TODO A\n");
    client
        .run_code_action_at(&uri, range(2, 0, 2, 1), "Undo change 1/1 by demo")
        .await;
    client
        .take("workspace/applyEdit", |p| {
            p["label"]
                .as_str()
                .unwrap_or_default()
                .starts_with("Undo 1 change by demo")
        })
        .await;
    assert_eq!(client.document(&uri).text, "mine\nkeep\n// TODO a\n");
    assert!(client.shutdown().await.success());
}

/// The same for a file that is not open: the user is told which file changed.
#[tokio::test]
async fn a_disk_write_made_without_asking_to_a_closed_file_is_named() {
    let client = TestClient::in_process_started(capabilities_without_dialogs()).await;
    closed_file(&client, "notes.txt", "keep\n// TODO a\n");
    client
        .prompt("uppercase notes.txt @diskwrite @unasked")
        .await;
    // In the turn's summary, or told on its own when the watcher saw it after the turn ended.
    let summary = client.take_message("demo: end_turn").await;
    if !summary.contains("changed without asking: notes.txt") {
        client
            .take_message("demo changed notes.txt on disk without asking")
            .await;
    }
    assert!(client.shutdown().await.success());
}

/// Where the system refuses to watch folders (its limit of inotify watches is reached), the user
/// is told so and how to raise it, and a file an agent changes there without asking is found
/// when its turn ends, by its time, and named; the files it did not change are not.
#[tokio::test]
async fn a_write_in_a_folder_the_system_would_not_watch_is_found_at_the_turns_end() {
    let workspace = tempfile::tempdir().unwrap();
    for i in 0..20 {
        let folder = workspace.path().join(format!("d{i:02}"));
        std::fs::create_dir(&folder).unwrap();
        std::fs::write(folder.join("notes.txt"), "keep\n// TODO a\n").unwrap();
    }
    // One watch: the workspace folder's own; every folder in it is refused.
    let client = TestClient::start(support::Options {
        workspace: Some(workspace.path().to_owned()),
        inotify_watches: Some(1),
        ..support::Options::default()
    })
    .await;
    client
        .initialize(capabilities_without_dialogs(), None)
        .await;
    let told = client.take_message("agentls cannot watch").await;
    assert!(told.contains("and 19 more"), "{told}");
    assert!(told.contains("max_user_watches"), "{told}");
    client
        .prompt("uppercase d19/notes.txt @diskwrite @unasked")
        .await;
    let summary = client.take_message("demo: end_turn").await;
    assert!(!summary.contains("changed without asking"), "{summary}");
    let named = client.take_message("on disk without asking").await;
    assert!(named.contains("notes.txt"), "{named}");
    assert_eq!(
        std::fs::read_to_string(workspace.path().join("d19/notes.txt")).unwrap(),
        "keep\n// TODO A\n"
    );
    assert!(client.shutdown().await.success());
}

/// The agent's change is on a line the user typed and has not saved: accepting it keeps both
/// (the buffer has the changed line), the disk never gets the unsaved line, and no later edit
/// turns the buffer back into the disk copy (the defect: ~100 ms after the accept a second
/// edit "demo changed notes.rs" threw both away).
#[tokio::test]
async fn an_accepted_change_to_an_unsaved_line_is_kept_with_it() {
    let client = TestClient::in_process_started(capabilities_without_dialogs()).await;
    let uri = client.open("notes.rs", "rust", "keep\n").await;
    client.edit(&uri, range(1, 0, 1, 0), "// TODO mine\n").await;
    client.prompt("uppercase notes.rs").await;
    client.wait_for_review(&uri).await;
    client.run_code_action(&uri, "Accept all changes (1)").await;
    the_agents_tool_succeeded(&client).await;
    accept_applied(&client).await;
    // Another whole turn: time for any stray edit to arrive, which would be counted below.
    client.prompt("read notes.rs").await;
    client.take_message("demo: end_turn").await;
    assert_eq!(client.document(&uri).text, "keep\n// TODO MINE\n");
    assert_eq!(std::fs::read_to_string(path_of(&uri)).unwrap(), "keep\n");
    assert_eq!(client.count(Some("workspace/applyEdit")), 1);
    assert!(client.shutdown().await.success());
}

/// Once allowed, the agent writes more than it proposed: that write is refused (its tool is told
/// why), the accepted change is applied as the user decided, and the unproposed line is nowhere.
#[tokio::test]
async fn a_write_that_is_not_the_accepted_change_is_refused_and_the_change_applied() {
    let client = TestClient::in_process_started(capabilities_without_dialogs()).await;
    let uri = client.open("notes.txt", "text", "keep\n// TODO a\n").await;
    client.prompt("uppercase notes.txt @writemore").await;
    client.wait_for_review(&uri).await;
    client.run_code_action(&uri, "Accept all changes (1)").await;
    let summary = client.take_message("demo: end_turn").await;
    assert!(
        summary.contains("Write failed: ") && summary.contains("not the change the user accepted"),
        "{summary}"
    );
    client
        .take_message("demo wrote something other than the change you accepted")
        .await;
    accept_applied(&client).await;
    assert_eq!(client.document(&uri).text, "keep\n// TODO A\n");
    // agentls applied the accepted change to the buffer; the disk waits for the user's save.
    assert_eq!(
        std::fs::read_to_string(path_of(&uri)).unwrap(),
        "keep\n// TODO a\n"
    );
    assert!(client.shutdown().await.success());
}

/// A buffer opened with unsaved text (the editor restored it): an agent's disk write without
/// asking is merged against what the disk said, so the unsaved line stays (it was merged against
/// the opened text, which threw the line away).
#[tokio::test]
async fn a_disk_write_without_asking_keeps_text_that_was_unsaved_at_open() {
    let client = TestClient::in_process_started(capabilities_without_dialogs()).await;
    let path = client.workspace.join("notes.txt");
    std::fs::write(&path, "keep\n// TODO a\n").unwrap();
    let uri = client
        .open_unsaved(&path, "text", "mine\nkeep\n// TODO a\n")
        .await;
    client
        .prompt("uppercase notes.txt @diskwrite @unasked")
        .await;
    client
        .take_message("demo changed notes.txt without asking (1 change)")
        .await;
    assert_eq!(client.document(&uri).text, "mine\nkeep\n// TODO A\n");
    assert!(client.shutdown().await.success());
}

/// Two disk writes without asking, one after the other: the second reaches the buffer too (it
/// was skipped while the first one's Keep/Undo review was open).
#[tokio::test]
async fn a_second_disk_write_without_asking_reaches_the_buffer_too() {
    let client = TestClient::in_process_started(capabilities_without_dialogs()).await;
    let uri = client.open("notes.txt", "text", "b\n// TODO a\n").await;
    client
        .prompt("uppercase notes.txt @diskwrite @unasked")
        .await;
    client
        .take_message("demo changed notes.txt without asking (1 change)")
        .await;
    client.take_message("demo: end_turn").await;
    client.prompt("sort notes.txt @diskwrite @unasked").await;
    support::eventually(|| client.document(&uri).text == "// TODO A\nb\n")
        .await
        .unwrap_or_else(|| panic!("{:?}\n{}", client.document(&uri).text, client.stderr()));
    assert!(client.shutdown().await.success());
}

/// Accepts the demo agent's change to an open `notes.txt` (`keep` / `// TODO a`) and waits for
/// the turn's end: the buffer has the change, the file does not (the editor's save writes it).
async fn accepted_into_the_buffer(client: &TestClient) -> String {
    let uri = client.open("notes.txt", "text", "keep\n// TODO a\n").await;
    client.prompt("uppercase notes.txt").await;
    client.wait_for_review(&uri).await;
    client.run_code_action(&uri, "Accept all changes (1)").await;
    the_agents_tool_succeeded(client).await;
    assert_eq!(client.document(&uri).text, "keep\n// TODO A\n");
    assert_eq!(
        std::fs::read_to_string(path_of(&uri)).unwrap(),
        "keep\n// TODO a\n"
    );
    uri
}

/// A command the agent runs through the editor's terminal sees the accepted change that is
/// still unsaved in the editor: agentls writes such buffers before the command starts.
#[tokio::test]
async fn a_command_the_agent_runs_sees_its_unsaved_accepted_change() {
    let client = TestClient::in_process_started(TestClient::rich_capabilities(false)).await;
    client.answer(
        "window/showMessageRequest",
        support::Answer::With(serde_json::json!({"title": "Run it"})),
    );
    let uri = accepted_into_the_buffer(&client).await;
    client.prompt("@run cat notes.txt").await;
    let said = client.take_message("demo: end_turn").await;
    assert!(
        said.contains(r#"The command printed "keep\n// TODO A""#),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(path_of(&uri)).unwrap(),
        "keep\n// TODO A\n"
    );
    assert!(client.shutdown().await.success());
}

/// Closing a buffer without saving it is the user's decision, but the agent's change goes with
/// it: the user is told, and the file is left as it was.
#[tokio::test]
async fn closing_an_unsaved_accepted_change_tells_the_user() {
    let client = TestClient::in_process_started(capabilities_without_dialogs()).await;
    let uri = accepted_into_the_buffer(&client).await;
    client
        .notify(
            "textDocument/didClose",
            serde_json::json!({"textDocument": {"uri": uri}}),
        )
        .await;
    let told = client
        .take_message("notes.txt was closed without saving")
        .await;
    assert!(
        told.contains("the change demo made to it is not in the file"),
        "{told}"
    );
    assert_eq!(
        std::fs::read_to_string(path_of(&uri)).unwrap(),
        "keep\n// TODO a\n"
    );
    assert!(client.shutdown().await.success());
}

/// Closes `uri` and checks that agentls says nothing of it (a later turn's summary comes after
/// anything the close would have said).
async fn closing_says_nothing(client: TestClient, uri: &str) {
    client
        .notify(
            "textDocument/didClose",
            serde_json::json!({"textDocument": {"uri": uri}}),
        )
        .await;
    client.prompt("read notes.txt").await;
    client.take_message("demo: end_turn").await;
    let messages = client.received("window/showMessage");
    assert!(
        !messages
            .iter()
            .any(|m| m.to_string().contains("closed without saving")),
        "{messages:?}"
    );
    assert!(client.shutdown().await.success());
}

/// A buffer closed with the text its file holds lost nothing (the disk caught up with it, and
/// the editor closed it to reload it from there, as Neovim does): closing it says nothing.
#[tokio::test]
async fn closing_a_buffer_its_file_caught_up_with_says_nothing() {
    let client = TestClient::in_process_started(capabilities_without_dialogs()).await;
    let uri = accepted_into_the_buffer(&client).await;
    std::fs::write(path_of(&uri), "keep\n// TODO A\n").unwrap();
    closing_says_nothing(client, &uri).await;
}

/// A saved buffer has nothing left to write: closing it says nothing.
#[tokio::test]
async fn closing_a_saved_accepted_change_says_nothing() {
    let client = TestClient::in_process_started(capabilities_without_dialogs()).await;
    let uri = accepted_into_the_buffer(&client).await;
    client.save(&uri).await;
    closing_says_nothing(client, &uri).await;
}

/// A file saved just before the prompt whose change the watcher reports only after the turn
/// began (an editor's or a build's atomic save: a temp file renamed into place) is not put down
/// to the agent; a file changed on disk during the turn is. The late report is made certain by
/// renaming in, during the turn, a file last modified a minute before it.
#[tokio::test]
async fn a_file_saved_before_the_prompt_is_not_put_down_to_the_agent() {
    let client = TestClient::in_process_started(capabilities_without_dialogs()).await;
    closed_file(&client, "saved.txt", "old\n");
    closed_file(&client, "during.txt", "old\n");
    client.prompt("@hang").await;
    client.shown_until("Waiting until you cancel").await;
    let staged = client.home.path().join("saved.txt.tmp");
    std::fs::write(&staged, "saved before the prompt\n").unwrap();
    let before_the_prompt = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(&staged)
        .unwrap()
        .set_modified(before_the_prompt)
        .unwrap();
    std::fs::rename(&staged, client.workspace.join("saved.txt")).unwrap();
    std::fs::write(client.workspace.join("during.txt"), "changed in the turn\n").unwrap();
    // The watcher reports both in order: once the later one is put down to the agent (in the
    // summary, or told on its own when seen after the turn), the earlier one was judged.
    let cancelled = client
        .execute("agentls.cancel", serde_json::json!({}))
        .await;
    assert_eq!(cancelled, Ok(serde_json::json!({"cancelled": true})));
    let summary = client.take_message("demo: cancelled").await;
    if !summary.contains("changed without asking: during.txt") {
        client
            .take_message("demo changed during.txt on disk without asking")
            .await;
    }
    client.server_state().await;
    let told = format!("{summary}\n{}", client.log_text());
    assert!(!told.contains("saved.txt"), "{told}");
    assert!(client.shutdown().await.success());
}

/// How many files the flood test's "agent" writes, in how many new folders.
const FLOOD_FILES: usize = 10_000;
const FLOOD_FOLDERS: usize = 100;

/// A turn that writes thousands of new files in new folders (an agent in an auto mode running a
/// generator): every file is seen, the first one written into each new folder too (before the
/// watcher watched it); the summary names a few and counts the rest; agentls's log (its stderr,
/// which editors keep) names them all.
#[tokio::test]
async fn a_turn_writing_thousands_of_files_is_summed_up_and_names_every_one() {
    // A process of its own: the test reads its log.
    let client = TestClient::started(capabilities_without_dialogs()).await;
    client.prompt("@hang").await;
    client.shown_until("Waiting until you cancel").await;
    for folder in 0..FLOOD_FOLDERS {
        let dir = client.workspace.join(format!("gen{folder:03}"));
        std::fs::create_dir(&dir).unwrap();
        for file in 0..FLOOD_FILES / FLOOD_FOLDERS {
            std::fs::write(dir.join(format!("f{file:03}.txt")), "x\n").unwrap();
        }
    }
    let seen_all = support::agents::eventually_async(|| async {
        let state = client.server_state().await;
        let counts = state["changedWithoutAsking"].as_object().unwrap().values();
        counts.filter_map(|n| n.as_u64()).sum::<u64>() == FLOOD_FILES as u64
    })
    .await;
    let state = client.server_state().await;
    assert!(seen_all.is_some(), "{}", state["changedWithoutAsking"]);
    let cancelled = client
        .execute("agentls.cancel", serde_json::json!({}))
        .await;
    assert_eq!(cancelled, Ok(serde_json::json!({"cancelled": true})));
    let summary = client.take_message("demo: cancelled").await;
    assert!(summary.len() < 400, "{} bytes: {summary}", summary.len());
    assert!(
        summary.contains("changed without asking: f000.txt, f001.txt")
            && summary.contains("and 9995 more (all in agentls's log)"),
        "{summary}"
    );
    // Logged before the summary was sent.
    let log = client.stderr();
    for folder in [0, FLOOD_FOLDERS - 1] {
        for file in [0, FLOOD_FILES / FLOOD_FOLDERS - 1] {
            let path = client
                .workspace
                .join(format!("gen{folder:03}/f{file:03}.txt"));
            assert!(log.contains(&format!("{}\n", path.display())), "{path:?}");
        }
    }
    assert!(client.shutdown().await.success());
}

/// An open file an agent swaps for a symbolic link (to a file of the user's elsewhere): the
/// user is told, the buffer keeps its text, and agentls does not read through the link.
#[tokio::test]
async fn an_open_file_swapped_for_a_link_is_told_and_not_followed() {
    let client = TestClient::in_process_started(capabilities_without_dialogs()).await;
    let uri = client.open("notes.txt", "text", "mine\n").await;
    std::fs::write(path_of(&uri), "mine\n").unwrap();
    let secret = client.home.path().join("secret.txt");
    std::fs::write(&secret, "not for the buffer\n").unwrap();
    client.prompt("@hang").await;
    client.shown_until("Waiting until you cancel").await;
    let staged = client.workspace.join("link.tmp");
    std::os::unix::fs::symlink(&secret, &staged).unwrap();
    std::fs::rename(&staged, path_of(&uri)).unwrap();
    client
        .take_message("demo replaced notes.txt with a symbolic link")
        .await;
    assert_eq!(client.document(&uri).text, "mine\n");
    let state = client.server_state().await;
    assert!(
        !state.to_string().contains("not for the buffer"),
        "{state:#}"
    );
    client
        .execute("agentls.cancel", serde_json::json!({}))
        .await
        .unwrap();
    assert!(client.shutdown().await.success());
}

/// A write tool that replaces a file it read from the disk itself (its diff has no old text)
/// while the user has an unsaved line in the buffer: the review proposes the agent's change
/// only, never the unsaved line's removal, and after "Accept all" and the agent's whole-file
/// write the buffer has both.
#[tokio::test]
async fn a_whole_file_write_keeps_the_users_unsaved_lines() {
    let client = TestClient::in_process_started(capabilities_without_dialogs()).await;
    let uri = client.open("notes.txt", "text", "keep\n// TODO a\n").await;
    client
        .edit(&uri, range(0, 0, 0, 0), "// mine, unsaved\n")
        .await;
    client.prompt("uppercase notes.txt @blind").await;
    client.wait_for_review(&uri).await;
    let state = client.server_state().await;
    let review = &state["reviews"][0];
    assert_eq!(review["hunks"].as_array().unwrap().len(), 1, "{review:#}");
    client.run_code_action(&uri, "Accept all changes (1)").await;
    the_agents_tool_succeeded(&client).await;
    client.server_state().await;
    assert_eq!(
        client.document(&uri).text,
        "// mine, unsaved\nkeep\n// TODO A\n"
    );
    assert!(client.shutdown().await.success());
}

/// The inotify watches process `pid` holds.
fn inotify_watches(pid: u32) -> usize {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fdinfo")).unwrap();
    fds.flatten()
        .map(|fd| std::fs::read_to_string(fd.path()).unwrap_or_default())
        .map(|info| {
            info.lines()
                .filter(|l| l.starts_with("inotify wd:"))
                .count()
        })
        .sum()
}

/// The workspace watcher watches only what can be reviewed: 2,000 folders under
/// `node_modules`, a `target`, a folder `.gitignore` names and one the user's config file
/// leaves out (`watch.ignore`) cost no watch, the 22 reviewable folders one each; a file an
/// agent writes into a new folder is still seen.
#[tokio::test]
async fn only_reviewable_folders_are_watched() {
    let home = tempfile::tempdir().unwrap();
    let workspace = std::fs::canonicalize(home.path()).unwrap().join("ws");
    for i in 0..2000 {
        std::fs::create_dir_all(workspace.join(format!("node_modules/p{i}"))).unwrap();
    }
    for i in 0..20 {
        std::fs::create_dir_all(workspace.join(format!("src/m{i}"))).unwrap();
    }
    std::fs::create_dir_all(workspace.join("target/debug")).unwrap();
    std::fs::create_dir_all(workspace.join("logs/old")).unwrap();
    std::fs::write(workspace.join(".gitignore"), "logs/\n").unwrap();
    for i in 0..10 {
        std::fs::create_dir_all(workspace.join(format!("generated/g{i}"))).unwrap();
    }
    let reviewable = 1 + 1 + 20; // the folder, src, src/m*
    let client = TestClient::start(support::Options {
        workspace: Some(workspace.clone()),
        config_toml: Some("[watch]\nignore = [\"generated/\"]\n".into()),
        ..support::Options::default()
    })
    .await;
    client
        .initialize(capabilities_without_dialogs(), None)
        .await;
    let pid = client.pid();
    support::eventually(|| inotify_watches(pid) >= reviewable)
        .await
        .unwrap_or_else(|| panic!("{} watches", inotify_watches(pid)));
    client.server_state().await;
    let watches = inotify_watches(pid);
    assert_eq!(
        watches, reviewable,
        "{watches} watches for {reviewable} folders"
    );
    client.prompt("@hang").await;
    client.shown_until("Waiting until you cancel").await;
    std::fs::create_dir(workspace.join("src/new")).unwrap();
    std::fs::write(workspace.join("src/new/first.txt"), "x\n").unwrap();
    std::fs::write(workspace.join("logs/old/ignored.txt"), "x\n").unwrap();
    let seen = support::agents::eventually_async(|| async {
        let state = client.server_state().await;
        let counts = state["changedWithoutAsking"].as_object().unwrap().values();
        counts.filter_map(|n| n.as_u64()).sum::<u64>() == 1
    })
    .await;
    assert!(
        seen.is_some(),
        "{}",
        client.server_state().await["changedWithoutAsking"]
    );
    client
        .execute("agentls.cancel", serde_json::json!({}))
        .await
        .unwrap();
    let summary = client.take_message("demo: cancelled").await;
    assert!(
        summary.contains("changed without asking: first.txt —"),
        "{summary}"
    );
    assert!(client.shutdown().await.success());
}
