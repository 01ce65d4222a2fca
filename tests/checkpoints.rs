//! Checkpoints: a turn's changes to several files undone after the fact as a review
//! (`agentls.undoTurn`), keeping what the user typed since, and put back (`agentls.redoTurn`).
//! In-process, with the demo agent.

mod support;

use serde_json::{Value, json};
use support::agents::capabilities_without_dialogs;
use support::{TestClient, range};

async fn started() -> TestClient {
    TestClient::in_process_started(capabilities_without_dialogs()).await
}

/// The reviews still open, as the server describes them.
async fn open_reviews(client: &TestClient) -> Vec<Value> {
    client.server_state().await["reviews"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// `command` for turn `turn` is refused, saying `why`.
async fn refuses(client: &TestClient, command: &str, turn: u64, why: &str) {
    let refused = client
        .execute(command, json!({"turn": turn}))
        .await
        .unwrap_err();
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(message.contains(why), "{refused}");
}

/// Waits until turn `index` (from 0) of the kept ones holds `files` files (the workspace
/// watcher may see an agent's disk writes after its turn's end).
async fn turn_holds(client: &TestClient, index: usize, files: usize) {
    support::agents::eventually_async(|| async {
        let state = client.server_state().await;
        state["checkpoints"][index]["files"]
            .as_array()
            .map(Vec::len)
            == Some(files)
    })
    .await
    .unwrap_or_else(|| panic!("turn {index}'s checkpoint never held {files} files"));
}

/// Runs `agentls.undoTurn` (the newest turn), checks that the user is told `told` first, and
/// undoes every change it offers (each undo review accepted).
async fn undo_all(client: &TestClient, told: &str) {
    let answer = client
        .execute("agentls.undoTurn", Value::Null)
        .await
        .unwrap();
    let answer = answer.as_str().unwrap_or_default();
    assert!(answer.starts_with(told), "{answer}");
    for review in open_reviews(client).await {
        if review["kind"] == "turnUndo" {
            client
                .execute("agentls.accept", json!({"review": review["id"]}))
                .await
                .unwrap();
        }
    }
}

/// One turn proposes changes to two files, both accepted; the user types a line of their own;
/// undoing the turn offers both files back as they were, the typed line kept; redoing puts the
/// turn's changes back, the typed line still kept.
/// Opens the agent's chat (`agentls.openChat`) as the editor would; returns its URI.
async fn open_the_chat(client: &TestClient) -> String {
    let opened = client
        .execute("agentls.openChat", Value::Null)
        .await
        .unwrap();
    let path = std::path::PathBuf::from(opened["path"].as_str().unwrap());
    let text = std::fs::read_to_string(&path).unwrap();
    client.open_unsaved(&path, "markdown", &text).await
}

#[tokio::test]
async fn a_turn_over_two_files_is_undone_and_redone_keeping_later_typing() {
    let client = started().await;
    let a = client.open("a.txt", "text", "// TODO a\nx\n").await;
    let b = client.open("b.txt", "text", "// TODO b\n").await;
    client.prompt("uppercase a.txt @also b.txt").await;
    client.wait_for_review(&a).await;
    client.wait_for_review(&b).await;
    client.run_code_action(&a, "Accept all changes (1)").await;
    client.run_code_action(&b, "Accept all changes (1)").await;
    client.take_message("demo: end_turn").await;
    assert_eq!(client.document(&a).text, "// TODO A\nx\n");
    assert_eq!(client.document(&b).text, "// TODO B\n");
    client.edit(&a, range(2, 0, 2, 0), "mine\n").await;

    // The chat the turn answered in offers the undo.
    let chat = open_the_chat(&client).await;
    client
        .run_code_action(&chat, "Undo demo's turn 1 (2 files)")
        .await;
    client
        .take_message("Undoing demo's turn 1: 2 files to review (a.txt, b.txt)")
        .await;
    client
        .run_code_action(&a, "Undo all changes (1) by demo's turn 1")
        .await;
    client
        .run_code_action(&b, "Undo all changes (1) by demo's turn 1")
        .await;
    support::agents::eventually_async(|| async {
        client.document(&a).text == "// TODO a\nx\nmine\n"
            && client.document(&b).text == "// TODO b\n"
    })
    .await
    .expect("both files back as before the turn, the typed line kept");
    // The agent hears of it at its next turn, and the chat notes it at the head of the reply,
    // not under the `## You` the user writes the next message under; the chat offers the redo.
    client.prompt("read a.txt").await;
    let log = client
        .shown_until("The user undid your changes to b.txt from an earlier turn")
        .await;
    assert!(
        log.contains("agentls told me: The user undid your changes to a.txt from an earlier turn"),
        "{log}"
    );
    client.take_message("demo: end_turn").await;
    let noted = |chat: &str| {
        let Some((message, reply)) = chat
            .rsplit_once("## demo")
            .and_then(|(before, reply)| Some((before.rsplit_once("## You")?.1, reply)))
        else {
            return false;
        };
        message.trim() == "read a.txt"
            && reply.trim_start().starts_with("_Undone: demo's turn 1 in ")
            && ["a.txt", "b.txt"]
                .iter()
                .all(|f| reply.contains(&format!("_Undone: demo's turn 1 in {f}._\n\n")))
    };
    support::eventually(|| noted(&client.document(&chat).text))
        .await
        .unwrap_or_else(|| panic!("no notes atop the reply:\n{}", client.document(&chat).text));

    client.run_code_action(&chat, "Redo demo's turn 1").await;
    client
        .take_message("Redoing demo's turn 1: 2 files to review")
        .await;
    client
        .run_code_action(&a, "Undo all changes (1) by demo's turn 1")
        .await;
    support::agents::eventually_async(|| async {
        client.document(&a).text == "// TODO A\nx\nmine\n"
    })
    .await
    .expect("the turn's change back, the typed line kept");
    // Redone: nothing is left to redo (by command, with the turn named).
    refuses(
        &client,
        "agentls.redoTurn",
        1,
        "nothing of turn 1 was undone",
    )
    .await;
    assert!(client.shutdown().await.success());
}

/// A file the turn changed, then the user rewrote the same line: undoing keeps the user's line
/// and says so; a file changed without asking while closed is restored on disk.
#[tokio::test]
async fn undo_keeps_lines_changed_since_and_restores_a_closed_file() {
    let client = started().await;
    let notes = client.workspace.join("notes.txt");
    std::fs::write(&notes, "// TODO n\n").unwrap();
    client.prompt("uppercase notes.txt @unasked").await;
    client.take_message("demo: end_turn").await;
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "// TODO N\n");

    // The change is also shown as made without asking (Keep/Undo); the turn's undo is its own.
    undo_all(
        &client,
        "Undoing demo's turn 1: 1 file to review (notes.txt)",
    )
    .await;
    support::eventually(|| std::fs::read_to_string(&notes).unwrap() == "// TODO n\n")
        .await
        .expect("the closed file restored on disk");
    let reviews = open_reviews(&client).await;
    assert!(reviews.iter().any(|r| r["kind"] == "landed"), "{reviews:?}");

    // The user rewrites the line the next turn changes: nothing of that turn can go back.
    let uri = client.open("notes.txt", "text", "// TODO n\n").await;
    client.prompt("uppercase notes.txt").await;
    client.wait_for_review(&uri).await;
    client.run_code_action(&uri, "Accept all changes (1)").await;
    client.take_message("demo: end_turn").await;
    client.edit(&uri, range(0, 0, 1, 0), "mine\n").await;
    let told = client
        .execute("agentls.undoTurn", Value::Null)
        .await
        .unwrap();
    let told = told.as_str().unwrap();
    assert!(
        told.contains("nothing to change") && told.contains("1 change in notes.txt kept"),
        "{told}"
    );
    let reviews = open_reviews(&client).await;
    assert!(
        reviews.iter().all(|r| r["kind"] != "turnUndo"),
        "{reviews:?}"
    );
    refuses(&client, "agentls.undoTurn", 99, "turn 99 changed no file").await;
    // The chat offers each recent turn, newest first, and the redo of the one undone.
    let chat = open_the_chat(&client).await;
    let titles: Vec<String> = client
        .code_actions(&chat)
        .await
        .iter()
        .filter_map(|a| a["title"].as_str().map(str::to_owned))
        .filter(|t| t.contains("'s turn"))
        .collect();
    assert_eq!(
        titles,
        [
            "Undo demo's turn 2 (1 file)",
            "Undo demo's turn 1 (1 file)",
            "Redo demo's turn 1"
        ],
        "{titles:?}"
    );
    assert!(client.shutdown().await.success());
}

/// An agent that reads files through agentls and then writes them straight to disk, without
/// asking, while they are closed: what it read is what they looked like before, so undoing its
/// turn restores both on disk.
#[tokio::test]
async fn closed_files_written_straight_to_disk_are_restored() {
    let client = started().await;
    let (a, b) = (
        client.workspace.join("a.txt"),
        client.workspace.join("b.txt"),
    );
    std::fs::write(&a, "// TODO a\n").unwrap();
    std::fs::write(&b, "// TODO b\n").unwrap();
    client
        .prompt("uppercase a.txt @also b.txt @diskwrite @unasked")
        .await;
    client.take_message("demo: end_turn").await;
    assert_eq!(std::fs::read_to_string(&b).unwrap(), "// TODO B\n");
    turn_holds(&client, 0, 2).await;
    undo_all(
        &client,
        "Undoing demo's turn 1: 2 files to review (a.txt, b.txt)",
    )
    .await;
    support::eventually(|| {
        std::fs::read_to_string(&a).unwrap() == "// TODO a\n"
            && std::fs::read_to_string(&b).unwrap() == "// TODO b\n"
    })
    .await
    .expect("both files restored on disk");
    assert!(client.shutdown().await.success());
}

/// An agent reads a closed file in one turn and removes it with a command in the next: undoing
/// that turn brings the file back as the agent last read it.
#[tokio::test]
async fn a_file_an_agent_removed_is_restored() {
    let client = started().await;
    let notes = client.open("notes.txt", "text", "one\n").await;
    let gone = client.workspace.join("gone.txt");
    std::fs::write(&gone, "keep me\n").unwrap();
    client.prompt("read gone.txt").await;
    client.take_message("demo: end_turn").await;
    client.prompt("@run rm gone.txt").await;
    client.run_code_action(&notes, "Allow (Run it)").await;
    client.take_message("demo: end_turn").await;
    assert!(!gone.exists());
    turn_holds(&client, 1, 1).await;
    undo_all(
        &client,
        "Undoing demo's turn 2: 1 file to review (gone.txt)",
    )
    .await;
    support::eventually(|| std::fs::read_to_string(&gone).ok().as_deref() == Some("keep me\n"))
        .await
        .expect("the removed file is back");
    assert!(client.shutdown().await.success());
}
