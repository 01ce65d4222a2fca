//! A conversation in a chat document, with standard LSP only (as in Helix: no dialogs, no
//! custom notifications): `agentls.openChat` makes the document, the user writes under `## You`
//! and runs the code action *Send to demo*, the reply streams into the document, the next
//! message goes with `agentls.send` and no arguments, and what the user types elsewhere in the
//! document meanwhile stays.

mod support;

use serde_json::{Value, json};
use support::agents::capabilities_without_dialogs;
use support::{TestClient, range};

/// The end of `text` as an LSP position (ASCII and `\n` only here).
fn end_of(text: &str) -> Value {
    let line = text.matches('\n').count() as u32;
    let column = text.rsplit('\n').next().unwrap_or("").len() as u32;
    range(line, column, line, column)
}

/// Waits until the chat document holds `needle`.
async fn chat_says(client: &TestClient, uri: &str, needle: &str) {
    support::eventually(|| client.document(uri).text.contains(needle))
        .await
        .unwrap_or_else(|| panic!("no {needle:?} in the chat: {:?}", client.document(uri).text));
}

#[tokio::test]
async fn a_conversation_in_a_chat_document_with_code_actions_only() {
    let client = TestClient::started(capabilities_without_dialogs()).await;
    client.open("notes.txt", "text", "one\ntwo\n").await;
    let opened = client
        .execute("agentls.openChat", Value::Null)
        .await
        .unwrap();
    let path = std::path::PathBuf::from(opened["path"].as_str().unwrap());
    assert!(
        !path.starts_with(&client.workspace),
        "chats live outside the repository: {}",
        path.display()
    );
    // The editor opens what showDocument named.
    client
        .take("window/showDocument", |p| p["uri"] == opened["uri"])
        .await;
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("# Chat with demo\n"), "{text:?}");
    let uri = client.open_unsaved(&path, "markdown", &text).await;

    client.edit(&uri, end_of(&text), "read notes.txt").await;
    client.run_code_action(&uri, "Send to demo").await;
    chat_says(&client, &uri, "notes.txt has 2 lines").await;
    chat_says(&client, &uri, "_demo: end_turn").await;
    let after_first = client.document(&uri).text;
    assert!(after_first.contains("\n## demo\n\n"), "{after_first}");
    assert!(after_first.ends_with("\n## You\n\n"), "{after_first:?}");

    // The second message goes with the command alone; the user types at the top meanwhile.
    client
        .edit(
            &uri,
            end_of(&after_first),
            "read notes.txt again @flood 200",
        )
        .await;
    client.execute("agentls.send", Value::Null).await.unwrap();
    client.edit(&uri, range(1, 0, 1, 0), "my own note\n").await;
    chat_says(&client, &uri, "chunk 199").await;
    support::eventually(|| {
        client
            .document(&uri)
            .text
            .matches("_demo: end_turn")
            .count()
            == 2
    })
    .await
    .expect("the second turn's end in the chat");
    let last = client.document(&uri).text;
    assert!(last.contains("# Chat with demo\nmy own note\n"), "{last}");
    assert!(last.ends_with("\n## You\n\n"), "{last:?}");
    // Streamed text is coalesced: far fewer edits than chunks.
    let edits = client.count(Some("workspace/applyEdit"));
    assert!(edits < 60, "{edits} applyEdits for two replies");
    // Nothing to send: the user is told where to write.
    let empty = client.execute("agentls.send", json!({"uri": uri})).await;
    assert!(empty.is_err());
    client
        .take_message("write your message under the last")
        .await;
    assert!(client.shutdown().await.success());
}
