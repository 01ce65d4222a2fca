//! A file the user made read-only is never replaced (a new file renamed over it would succeed all
//! the same): accepting a review of it while it is closed, an agent's write to it, closed or
//! open, leave it as it was — same contents, same mode, same inode, the buffer untouched — and
//! the user is told why while the writer gets an error.

mod support;

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;

use serde_json::json;
use support::reviews::{propose, verdict};
use support::{TestClient, file_uri};

/// Writes `text` to `relative` in the workspace and makes it read-only (0444); its inode.
fn read_only(client: &TestClient, relative: &str, text: &str) -> u64 {
    let path = client.workspace.join(relative);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::metadata(&path).unwrap().ino()
}

/// `path` still holds `text` in the file that was there (`inode`), still read-only.
fn left_alone(path: &Path, text: &str, inode: u64) {
    let meta = std::fs::metadata(path).unwrap();
    assert_eq!(std::fs::read_to_string(path).unwrap(), text);
    assert_eq!(meta.ino(), inode, "{} was replaced", path.display());
    assert_eq!(meta.permissions().mode() & 0o777, 0o444);
}

#[tokio::test]
async fn accepting_a_change_to_a_closed_read_only_file_writes_nothing() {
    let client = TestClient::in_process_initialized().await;
    let inode = read_only(&client, "locked.txt", "old\n");
    let path = client.workspace.join("locked.txt");
    let uri = file_uri(&path);
    propose(&client, &uri, "new\n", "agent").await;
    client.run_code_action(&uri, "Accept all").await;
    let verdict = verdict(&client).await;
    assert_eq!(verdict["verdict"], "rejected", "{verdict}");
    assert!(
        verdict["reason"]
            .as_str()
            .is_some_and(|r| r.contains("locked.txt: the file is read-only")),
        "{verdict}"
    );
    let told = client.take_message("read-only").await;
    assert!(
        told.contains("could not write the accepted change") && told.contains("locked.txt"),
        "{told}"
    );
    left_alone(&path, "old\n", inode);
}

#[tokio::test]
async fn an_agents_write_to_a_read_only_file_is_refused() {
    let client = TestClient::in_process_initialized().await;
    // An agent (the demo one) writing without asking, to a closed file: refused, user told.
    let inode = read_only(&client, "closed.txt", "TODO closed\n");
    client.prompt("uppercase closed.txt @unasked").await;
    let told = client.take_message("refused its write").await;
    assert_eq!(
        told,
        "demo: refused its write to closed.txt: the file is read-only; it was left as it is"
    );
    let summary = client.take_message("demo: end_turn").await;
    assert!(summary.contains("read-only"), "{summary}");
    left_alone(&client.workspace.join("closed.txt"), "TODO closed\n", inode);

    // A write to an open one is refused before it reaches the buffer.
    let open = client.workspace.join("open.txt");
    let uri = client.open("open.txt", "text", "mine\n").await;
    let inode = read_only(&client, "open.txt", "mine\n");
    client
        .execute(
            "agentls.debug.write",
            json!({"uri": uri, "text": "theirs\n"}),
        )
        .await
        .unwrap();
    let told = client.take_message("write failed").await;
    assert!(told.contains("open.txt: the file is read-only"), "{told}");
    assert!(client.received("workspace/applyEdit").is_empty());
    assert_eq!(client.document(&uri).text, "mine\n");
    left_alone(&open, "mine\n", inode);
}

/// An accepted change that cannot be written is a failure, not the user's no: the turn's summary
/// counts the edit as failed and quotes why, with no word of a rejection.
#[tokio::test]
async fn an_accepted_change_that_cannot_be_written_is_a_failure_not_a_rejection() {
    let client = TestClient::in_process_initialized().await;
    let inode = read_only(&client, "locked.txt", "// TODO locked\n");
    let uri = file_uri(&client.workspace.join("locked.txt"));
    client.prompt("uppercase locked.txt").await;
    client.run_code_action(&uri, "Accept all").await;
    let summary = client.take_message("demo: end_turn").await;
    assert!(
        summary.contains("1 failed (Edit locked.txt)")
            && summary.contains("the file is read-only")
            && !summary.contains("declined")
            && !summary.contains("not allowed"),
        "{summary}"
    );
    left_alone(
        &client.workspace.join("locked.txt"),
        "// TODO locked\n",
        inode,
    );
}
