//! Reviews through the real binary: previews as diagnostics, inlay hints and code actions;
//! accepting and rejecting hunks; the user's concurrent edits; teardown; files not open.

mod support;

use serde_json::{Value, json};
use support::reviews::{propose, verdict};
use support::{Answer, Options, TestClient, file_uri, file_uri_to_path, range};

const BASE: &str = "fn main() {\n    let x = 1;\n    println!(\"{x}\");\n}\n\nfn other() {}\n";
const PROPOSAL: &str =
    "fn main() {\n    let x = 2;\n    println!(\"{x}\");\n}\n\nfn other() {\n    todo!()\n}\n";

/// The diagnostics agentls publishes next for `uri` with `count` entries.
async fn diagnostics(client: &TestClient, uri: &str, count: usize) -> Vec<Value> {
    let published = client
        .take("textDocument/publishDiagnostics", |p| {
            p["uri"] == uri && p["diagnostics"].as_array().unwrap().len() == count
        })
        .await;
    published["params"]["diagnostics"]
        .as_array()
        .unwrap()
        .clone()
}

fn titled<'a>(actions: &'a [Value], prefix: &str) -> &'a Value {
    actions
        .iter()
        .find(|a| a["title"].as_str().unwrap().starts_with(prefix))
        .unwrap_or_else(|| panic!("no action starting with {prefix:?} in {actions:#?}"))
}

async fn run(client: &TestClient, action: &Value) -> Result<Value, Value> {
    client
        .request("workspace/executeCommand", action["command"].clone())
        .await
}

#[tokio::test]
async fn accept_one_hunk_and_reject_the_other() {
    let client = TestClient::in_process_initialized().await;
    let uri = client.open("src/main.rs", "rust", BASE).await;
    propose(&client, &uri, PROPOSAL, "gemini").await;

    let diags = diagnostics(&client, &uri, 2).await;
    assert_eq!(diags[0]["source"], "agentls");
    assert_eq!(diags[0]["code"], "1");
    assert_eq!(diags[0]["range"], range(1, 0, 2, 0));
    let message = diags[0]["message"].as_str().unwrap();
    assert!(
        message.contains("-     let x = 1;") && message.contains("+     let x = 2;"),
        "{message}"
    );
    let shown = client
        .take("window/showMessage", |p| {
            p["message"].as_str().unwrap().contains("proposes")
        })
        .await;
    assert_eq!(
        shown["params"]["message"],
        "gemini proposes 2 changes to main.rs: use code actions to review (Accept / Reject)"
    );
    let show_document = client.take("window/showDocument", |_| true).await;
    assert_eq!(show_document["params"]["selection"]["start"]["line"], 1);
    let changed = client.take("agentls/reviewChanged", |_| true).await;
    assert_eq!(
        changed["params"]["reviews"][0]["hunks"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // Inlay hints show the inserted text.
    let hints = client
        .request(
            "textDocument/inlayHint",
            json!({"textDocument": {"uri": uri}, "range": range(0, 0, 9, 0)}),
        )
        .await
        .unwrap();
    assert_eq!(hints[0]["label"], "+     let x = 2;");

    // Code actions on the first hunk: per-hunk and whole-file.
    let actions = client.code_actions_at(&uri, range(1, 8, 1, 9)).await;
    let titles: Vec<&str> = actions
        .iter()
        .map(|a| a["title"].as_str().unwrap())
        .collect();
    // Then, on a selection like this one, asking the default agent about it.
    assert_eq!(titles.len(), 5, "{titles:?}");
    assert_eq!(titles[4], "Ask demo about this");
    assert!(titles[0].starts_with("Accept change 1/2 from gemini"));
    assert!(titles[1].starts_with("Reject change 1/2 from gemini"));
    assert_eq!(titles[2], "Accept all changes (2) from gemini");
    assert_eq!(titles[3], "Reject all changes (2) from gemini");
    assert_eq!(actions[0]["kind"], "quickfix");
    assert_eq!(actions[0]["command"]["command"], "agentls.accept");
    assert_eq!(
        actions[0]["command"]["arguments"],
        json!([{"review": 1, "hunk": 0}])
    );

    run(&client, &actions[0]).await.unwrap();
    let edit = client.take("workspace/applyEdit", |_| true).await;
    assert!(
        edit["params"]["label"]
            .as_str()
            .unwrap()
            .starts_with("Accept 1 change from gemini")
    );
    // Only the changed character is replaced, in one step.
    let edits = &edit["params"]["edit"]["documentChanges"][0]["edits"];
    assert_eq!(
        edits,
        &json!([{"range": range(1, 12, 1, 13), "newText": "2"}])
    );
    diagnostics(&client, &uri, 1).await;

    let actions = client.code_actions_at(&uri, range(5, 0, 5, 3)).await;
    run(&client, titled(&actions, "Reject change 2/2"))
        .await
        .unwrap();
    let verdict = verdict(&client).await;
    let expected = BASE.replace("let x = 1", "let x = 2");
    assert_eq!(verdict["verdict"], "accepted");
    assert_eq!(verdict["text"], expected);
    assert_eq!(client.document(&uri).text, expected);
    assert_eq!(verdict["rejected"].as_array().unwrap().len(), 1);
    diagnostics(&client, &uri, 0).await;
    assert!(client.shutdown().await.success());
}

#[tokio::test]
async fn reject_all_touches_nothing() {
    let client = TestClient::in_process_initialized().await;
    let uri = client.open("a.rs", "rust", BASE).await;
    propose(&client, &uri, PROPOSAL, "agent").await;
    diagnostics(&client, &uri, 2).await;
    let actions = client.code_actions_at(&uri, range(0, 0, 0, 0)).await;
    run(&client, titled(&actions, "Reject all changes (2)"))
        .await
        .unwrap();
    assert_eq!(
        verdict(&client).await,
        json!({"verdict": "rejected", "reason": null})
    );
    assert_eq!(client.document(&uri).text, BASE);
    assert!(client.received("workspace/applyEdit").is_empty());
    diagnostics(&client, &uri, 0).await;
}

/// The user accepts a hunk and types inside it before the editor answers; the editor then
/// refuses the stale edit. The hunk is a conflict now, not pending: accepting it again would
/// replace the typing.
#[tokio::test]
async fn a_refused_accept_after_typing_inside_the_hunk_is_a_conflict() {
    let client = TestClient::in_process_initialized().await;
    client.answer(
        "workspace/applyEdit",
        Answer::With(json!({"applied": false, "failureReason": "version mismatch"})),
    );
    let uri = client.open("a.rs", "rust", BASE).await;
    propose(&client, &uri, PROPOSAL, "agent").await;
    diagnostics(&client, &uri, 2).await;
    let accept = json!({"command": "agentls.accept", "arguments": [{"review": 1, "hunk": 0}]});
    // The accept goes out first, the keystroke right behind it.
    let (accepted, ()) = tokio::join!(
        client.request("workspace/executeCommand", accept.clone()),
        client.edit(&uri, range(1, 13, 1, 13), "0"),
    );
    accepted.unwrap();
    client.take("workspace/applyEdit", |_| true).await;
    let diags = diagnostics(&client, &uri, 2).await;
    assert!(
        diags[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("CONFLICT"),
        "{diags:?}"
    );
    let again = client.request("workspace/executeCommand", accept).await;
    assert!(again.is_err(), "accepted again over the typing: {again:?}");
    assert!(client.document(&uri).text.contains("let x = 10;"));
}

#[tokio::test]
async fn typing_inside_a_hunk_makes_it_a_conflict() {
    let client = TestClient::in_process_initialized().await;
    let uri = client.open("a.rs", "rust", BASE).await;
    propose(&client, &uri, PROPOSAL, "agent").await;
    diagnostics(&client, &uri, 2).await;
    // The user changes `1` to `10` on the line the first hunk replaces.
    client.edit(&uri, range(1, 13, 1, 13), "0").await;
    client
        .take("window/showMessage", |p| {
            p["message"].as_str().unwrap().contains("overlaps")
        })
        .await;
    let diags = diagnostics(&client, &uri, 2).await;
    assert_eq!(diags[0]["severity"], 2, "a conflict is a warning");
    assert!(
        diags[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("CONFLICT")
    );
    // It cannot be accepted blindly.
    let refused = client
        .request(
            "workspace/executeCommand",
            json!({"command": "agentls.accept", "arguments": [{"review": 1, "hunk": 0}]}),
        )
        .await
        .unwrap_err();
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("overlaps your own edit")
    );
    let actions = client.code_actions_at(&uri, range(1, 0, 1, 0)).await;
    run(&client, titled(&actions, "Ask agent to propose"))
        .await
        .unwrap();
    let verdict = verdict(&client).await;
    assert_eq!(verdict["verdict"], "rejected");
    assert!(
        verdict["reason"]
            .as_str()
            .unwrap()
            .contains("propose the change again")
    );
    assert_eq!(client.document(&uri).text, BASE.replace("= 1", "= 10"));
}

/// When every open change is in conflict with the user's typing, the menu offers no "Accept
/// all" (it could accept nothing), and the command run anyway says why instead of doing
/// nothing; "Reject all" still counts the conflict.
#[tokio::test]
async fn accept_all_is_not_offered_when_only_conflicts_are_open() {
    let client = TestClient::in_process_initialized().await;
    let uri = client.open("a.rs", "rust", BASE).await;
    propose(&client, &uri, PROPOSAL, "agent").await;
    diagnostics(&client, &uri, 2).await;
    client.edit(&uri, range(1, 13, 1, 13), "0").await;
    let reject_second =
        json!({"command": "agentls.reject", "arguments": [{"review": 1, "hunk": 1}]});
    client
        .request("workspace/executeCommand", reject_second)
        .await
        .unwrap();
    diagnostics(&client, &uri, 1).await;
    let titles: Vec<String> = client
        .code_actions_at(&uri, range(1, 0, 1, 0))
        .await
        .iter()
        .map(|a| a["title"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        !titles.iter().any(|t| t.starts_with("Accept")),
        "{titles:#?}"
    );
    assert!(
        titles
            .iter()
            .any(|t| t == "Reject all changes (1) from agent"),
        "{titles:#?}"
    );
    let accept_all = json!({"command": "agentls.accept", "arguments": [{"review": 1}]});
    let refused = client
        .request("workspace/executeCommand", accept_all)
        .await
        .unwrap_err();
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("overlaps your own edits"),
        "{refused}"
    );
    assert_eq!(client.document(&uri).text, BASE.replace("= 1", "= 10"));
}

#[tokio::test]
async fn edits_elsewhere_move_the_hunks_and_are_kept() {
    let client = TestClient::in_process_initialized().await;
    let uri = client.open("a.rs", "rust", BASE).await;
    propose(&client, &uri, PROPOSAL, "agent").await;
    diagnostics(&client, &uri, 2).await;
    client.edit(&uri, range(0, 0, 0, 0), "// note\n").await;
    let diags = diagnostics(&client, &uri, 2).await;
    assert_eq!(diags[0]["range"], range(2, 0, 3, 0), "moved down one line");
    let actions = client.code_actions_at(&uri, range(0, 0, 0, 0)).await;
    run(&client, titled(&actions, "Accept all changes (2)"))
        .await
        .unwrap();
    let verdict = verdict(&client).await;
    let expected = format!("// note\n{PROPOSAL}");
    assert_eq!(verdict["verdict"], "accepted");
    assert_eq!(verdict["text"], expected);
    assert_eq!(client.document(&uri).text, expected);
}

#[tokio::test]
async fn an_origin_that_goes_away_withdraws_its_reviews() {
    let client = TestClient::in_process_initialized().await;
    let uri = client.open("a.rs", "rust", BASE).await;
    propose(&client, &uri, PROPOSAL, "flaky").await;
    diagnostics(&client, &uri, 2).await;
    client
        .request(
            "workspace/executeCommand",
            json!({"command": "agentls.debug.closeOrigin", "arguments": [{"origin": "flaky"}]}),
        )
        .await
        .unwrap();
    assert_eq!(verdict(&client).await, json!({"verdict": "cancelled"}));
    diagnostics(&client, &uri, 0).await;
    client
        .take("window/showMessage", |p| {
            p["message"] == "flaky went away: 1 pending review(s) and 0 question(s) withdrawn"
        })
        .await;
    assert_eq!(client.document(&uri).text, BASE);
}

/// `agentls/reviewChanged` carries the reviews of the file that changed, not every open review:
/// deciding one file's review tells plugins that file has none left, and nothing of the other.
#[tokio::test]
async fn review_changes_are_told_per_file() {
    let client = TestClient::in_process_initialized().await;
    let first = client.open("a.rs", "rust", BASE).await;
    let second = client.open("b.rs", "rust", BASE).await;
    propose(&client, &first, PROPOSAL, "agent").await;
    propose(&client, &second, PROPOSAL, "agent").await;
    diagnostics(&client, &first, 2).await;
    diagnostics(&client, &second, 2).await;
    // The messages about `uri`; with `empty`, only those saying no review is left there.
    let about = |uri: &str, empty: bool| {
        let uri = uri.to_owned();
        move |p: &Value| {
            p["uri"] == uri.as_str()
                && (!empty || p["reviews"].as_array().is_some_and(Vec::is_empty))
        }
    };
    let shown = client
        .take("agentls/reviewChanged", about(&second, false))
        .await;
    let reviews = shown["params"]["reviews"].as_array().unwrap();
    assert_eq!(reviews.len(), 1, "{shown}");
    assert_eq!(reviews[0]["uri"], second.as_str());
    assert_eq!(reviews[0]["hunks"].as_array().unwrap().len(), 2);

    let actions = client.code_actions_at(&first, range(0, 0, 0, 0)).await;
    run(&client, titled(&actions, "Reject all changes (2)"))
        .await
        .unwrap();
    verdict(&client).await;
    let gone = client
        .take("agentls/reviewChanged", about(&first, true))
        .await;
    assert_eq!(gone["params"]["path"], file_uri_to_path(&first));
    assert!(
        client
            .received("agentls/reviewChanged")
            .iter()
            .all(|m| m["params"]["reviews"].as_array().unwrap().len() <= 1),
        "a message listed reviews of other files"
    );
}

#[tokio::test]
async fn a_newer_proposal_supersedes_the_older_one() {
    let client = TestClient::in_process_initialized().await;
    let uri = client.open("a.rs", "rust", BASE).await;
    propose(&client, &uri, PROPOSAL, "agent").await;
    diagnostics(&client, &uri, 2).await;
    propose(
        &client,
        &uri,
        &BASE.replace("fn other", "fn renamed"),
        "agent",
    )
    .await;
    let first = verdict(&client).await;
    assert_eq!(first["verdict"], "rejected");
    assert!(first["reason"].as_str().unwrap().contains("superseded"));
    diagnostics(&client, &uri, 1).await;
}

#[tokio::test]
async fn a_file_that_is_not_open_is_written_on_accept() {
    let client = TestClient::in_process_initialized().await;
    let path = client.workspace.join("closed.rs");
    std::fs::write(&path, BASE).unwrap();
    let uri = file_uri(&path);
    propose(&client, &uri, PROPOSAL, "agent").await;
    diagnostics(&client, &uri, 2).await;
    let actions = client.code_actions_at(&uri, range(6, 0, 6, 0)).await;
    run(&client, titled(&actions, "Accept change 2/2"))
        .await
        .unwrap();
    let actions = client.code_actions_at(&uri, range(1, 0, 1, 0)).await;
    run(&client, titled(&actions, "Reject change 1/2"))
        .await
        .unwrap();
    let verdict = verdict(&client).await;
    let expected = BASE.replace("fn other() {}", "fn other() {\n    todo!()\n}");
    assert_eq!(verdict["text"], expected);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), expected);
    assert!(client.received("workspace/applyEdit").is_empty());
}

/// A hunk accepted while the file was closed, then the file is opened before the rest is
/// decided: the accepted change reaches the buffer, and the verdict has it.
#[tokio::test]
async fn a_hunk_accepted_while_closed_survives_opening_the_file() {
    let client = TestClient::in_process_initialized().await;
    let path = client.workspace.join("a.rs");
    std::fs::write(&path, BASE).unwrap();
    let uri = file_uri(&path);
    propose(&client, &uri, PROPOSAL, "agent").await;
    diagnostics(&client, &uri, 2).await;
    let actions = client.code_actions_at(&uri, range(1, 0, 1, 0)).await;
    run(&client, titled(&actions, "Accept change 1/2"))
        .await
        .unwrap();
    client.open_unsaved(&path, "rust", BASE).await;
    client.take("workspace/applyEdit", |_| true).await;
    let actions = client.code_actions_at(&uri, range(5, 0, 5, 0)).await;
    run(&client, titled(&actions, "Reject change 2/2"))
        .await
        .unwrap();
    let expected = BASE.replace("let x = 1", "let x = 2");
    assert_eq!(verdict(&client).await["text"], expected);
    assert_eq!(client.document(&uri).text, expected);
}

#[tokio::test]
async fn a_new_file_is_created_on_accept() {
    let client = TestClient::in_process_initialized().await;
    let path = client.workspace.join("new/dir/file.txt");
    let uri = file_uri(&path);
    propose(&client, &uri, "hello\n", "agent").await;
    diagnostics(&client, &uri, 1).await;
    let actions = client.code_actions_at(&uri, range(0, 0, 0, 0)).await;
    run(&client, titled(&actions, "Accept all changes (1)"))
        .await
        .unwrap();
    assert_eq!(verdict(&client).await["verdict"], "accepted");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "hello\n");
}

#[tokio::test]
async fn auto_accept_applies_without_asking() {
    let client = TestClient::start_initialized(Options {
        config_toml: Some("[review.agents.trusted]\nautoAccept = true\n".into()),
        ..Options::default()
    })
    .await;
    let uri = client.open("a.rs", "rust", BASE).await;
    propose(&client, &uri, PROPOSAL, "trusted").await;
    client.take("workspace/applyEdit", |_| true).await;
    assert_eq!(verdict(&client).await["text"], PROPOSAL);
    assert_eq!(client.document(&uri).text, PROPOSAL);
}

#[tokio::test]
async fn proposals_outside_the_workspace_are_refused() {
    let client = TestClient::in_process_initialized().await;
    propose(
        &client,
        &file_uri(std::path::Path::new("/etc/hosts")),
        "x",
        "agent",
    )
    .await;
    let verdict = verdict(&client).await;
    assert!(
        verdict["error"]
            .as_str()
            .unwrap()
            .contains("outside the workspace")
    );
}

/// Accepts the first hunk of `PROPOSAL` on an open `BASE` and rejects the second; returns the
/// expected text (the first hunk only).
async fn accept_first_hunk_only(client: &TestClient, uri: &str) -> String {
    propose(client, uri, PROPOSAL, "agent").await;
    diagnostics(client, uri, 2).await;
    let actions = client.code_actions_at(uri, range(1, 0, 1, 0)).await;
    run(client, titled(&actions, "Accept change 1/2"))
        .await
        .unwrap();
    let actions = client.code_actions_at(uri, range(5, 0, 5, 0)).await;
    run(client, titled(&actions, "Reject change 2/2"))
        .await
        .unwrap();
    let expected = BASE.replace("let x = 1", "let x = 2");
    assert_eq!(verdict(client).await["text"], expected);
    expected
}

/// Real agents write the file themselves after permission. Writing the whole proposal after a
/// partial accept must still leave exactly the accepted hunk on disk.
#[tokio::test]
async fn an_agent_writing_its_whole_proposal_to_disk_gets_the_accepted_part() {
    let client = TestClient::in_process_initialized().await;
    let uri = client.open("a.rs", "rust", BASE).await;
    let expected = accept_first_hunk_only(&client, &uri).await;
    let path = client.workspace.join("a.rs");
    std::fs::write(&path, PROPOSAL).unwrap();
    client
        .take("window/showMessage", |p| {
            p["message"]
                .as_str()
                .unwrap()
                .contains("kept only the changes you accepted")
        })
        .await;
    assert_eq!(std::fs::read_to_string(&path).unwrap(), expected);
    assert_eq!(client.document(&uri).text, expected);
}

/// The agent's whole proposal reached the disk before the verdict (its write came first, or the
/// watcher started late on a busy machine): it is still turned into the accepted hunk.
#[tokio::test]
async fn a_whole_proposal_on_disk_before_the_verdict_gets_the_accepted_part() {
    let client = TestClient::in_process_initialized().await;
    let uri = client.open("a.rs", "rust", BASE).await;
    propose(&client, &uri, PROPOSAL, "agent").await;
    diagnostics(&client, &uri, 2).await;
    let actions = client.code_actions_at(&uri, range(1, 0, 1, 0)).await;
    run(&client, titled(&actions, "Accept change 1/2"))
        .await
        .unwrap();
    let path = client.workspace.join("a.rs");
    std::fs::write(&path, PROPOSAL).unwrap();
    let actions = client.code_actions_at(&uri, range(5, 0, 5, 0)).await;
    run(&client, titled(&actions, "Reject change 2/2"))
        .await
        .unwrap();
    let expected = BASE.replace("let x = 1", "let x = 2");
    assert_eq!(verdict(&client).await["text"], expected);
    support::eventually(|| std::fs::read_to_string(&path).ok().as_deref() == Some(&expected))
        .await
        .unwrap_or_else(|| panic!("{:?}", std::fs::read_to_string(&path)));
}

#[tokio::test]
async fn an_agent_writing_its_whole_proposal_through_the_editor_gets_the_accepted_part() {
    let client = TestClient::in_process_initialized().await;
    let uri = client.open("a.rs", "rust", BASE).await;
    let expected = accept_first_hunk_only(&client, &uri).await;
    // An unsaved edit of the user's stays in the buffer (and off the disk).
    client.edit(&uri, range(0, 0, 0, 0), "// mine\n").await;
    write_as_agent(&client, &uri, PROPOSAL).await;
    let path = client.workspace.join("a.rs");
    // The buffer holds the verdict; the file follows the editor's save.
    assert_eq!(std::fs::read_to_string(&path).unwrap(), BASE);
    assert_eq!(client.document(&uri).text, format!("// mine\n{expected}"));
    assert_eq!(
        client.received("workspace/applyEdit").len(),
        1,
        "only the accept's edit"
    );
}

/// The user accepts part of a proposal, types and saves; the agent's later write of its whole
/// proposal puts the accepted part on top of what the user saved, not over it.
#[tokio::test]
async fn an_agent_writing_its_proposal_after_the_user_saved_keeps_the_save() {
    let client = TestClient::in_process_initialized().await;
    let uri = client.open("a.rs", "rust", BASE).await;
    let expected = format!("// mine\n{}", accept_first_hunk_only(&client, &uri).await);
    client.edit(&uri, range(0, 0, 0, 0), "// mine\n").await;
    let path = client.workspace.join("a.rs");
    std::fs::write(&path, client.document(&uri).text).unwrap();
    client
        .notify(
            "textDocument/didSave",
            json!({"textDocument": {"uri": uri}}),
        )
        .await;
    write_as_agent(&client, &uri, PROPOSAL).await;
    assert_eq!(std::fs::read_to_string(&path).unwrap(), expected);
    assert_eq!(client.document(&uri).text, expected);
}

/// The user rejects a hunk, then makes that very change by hand and saves: the disk now equals
/// the whole proposal, but it is the user's doing and is not "corrected" back.
#[tokio::test]
async fn a_rejected_change_the_user_makes_and_saves_stays() {
    let client = TestClient::in_process_initialized().await;
    let uri = client.open("a.rs", "rust", BASE).await;
    let accepted = accept_first_hunk_only(&client, &uri).await;
    let lines = accepted.lines().count() as u32;
    client.edit(&uri, range(0, 0, lines, 0), PROPOSAL).await;
    let path = client.workspace.join("a.rs");
    std::fs::write(&path, PROPOSAL).unwrap();
    client
        .notify(
            "textDocument/didSave",
            json!({"textDocument": {"uri": uri}}),
        )
        .await;
    // The verdict's disk watch looks every second for 30 s, and then stops: on the paused
    // clock its whole life passes at once, every look included.
    tokio::time::pause();
    tokio::time::sleep(std::time::Duration::from_secs(31)).await;
    tokio::time::resume();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), PROPOSAL);
    assert_eq!(client.document(&uri).text, PROPOSAL);
}

/// A server where the user accepted the whole proposal for `a.rs`, then typed `// mine` on top
/// (unsaved); returns it and the document's URI.
async fn accepted_whole_then_typed() -> (TestClient, String) {
    let client = TestClient::in_process_initialized().await;
    let uri = client.open("a.rs", "rust", BASE).await;
    propose(&client, &uri, PROPOSAL, "agent").await;
    diagnostics(&client, &uri, 2).await;
    let actions = client.code_actions_at(&uri, range(0, 0, 0, 0)).await;
    run(&client, titled(&actions, "Accept all changes (2)"))
        .await
        .unwrap();
    assert_eq!(verdict(&client).await["text"], PROPOSAL);
    client.edit(&uri, range(0, 0, 0, 0), "// mine\n").await;
    (client, uri)
}

/// The user accepts everything, keeps typing, and the agent then writes its proposal: the typing
/// stays in the buffer, and the write changes neither it nor the file (the buffer holds the
/// verdict; the editor's save writes it).
#[tokio::test]
async fn an_agent_writing_an_accepted_proposal_keeps_later_typing() {
    let (client, uri) = accepted_whole_then_typed().await;
    write_as_agent(&client, &uri, PROPOSAL).await;
    let path = client.workspace.join("a.rs");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), BASE);
    assert_eq!(client.document(&uri).text, format!("// mine\n{PROPOSAL}"));
    client.save(&uri).await;
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        format!("// mine\n{PROPOSAL}")
    );
    assert_eq!(
        client.received("workspace/applyEdit").len(),
        1,
        "only the accept's edit"
    );
}

async fn write_as_agent(client: &TestClient, uri: &str, text: &str) {
    let args = json!([{"uri": uri, "text": text}]);
    client
        .request(
            "workspace/executeCommand",
            json!({"command": "agentls.debug.write", "arguments": args}),
        )
        .await
        .unwrap();
}

/// A write from someone who never read the file is judged against the disk: the user's unsaved
/// edits on other lines are merged in, on the same lines the write is refused.
#[tokio::test]
async fn a_write_keeps_unsaved_edits_or_is_refused() {
    let client = TestClient::in_process_initialized().await;
    let uri = client.open("a.rs", "rust", "one\ntwo\nthree\n").await;
    client.edit(&uri, range(0, 0, 0, 3), "ONE").await;
    write_as_agent(&client, &uri, "one\ntwo\nTHREE\n").await;
    client.take("workspace/applyEdit", |_| true).await;
    assert_eq!(client.document(&uri).text, "ONE\ntwo\nTHREE\n");
    // The file of an open document follows the editor's save, not agentls.
    let path = client.workspace.join("a.rs");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\ntwo\nthree\n");

    client.edit(&uri, range(1, 0, 1, 3), "mine").await;
    write_as_agent(&client, &uri, "ONE\ntheirs\nTHREE\n").await;
    told_of_conflict(&client).await;
    assert_eq!(client.document(&uri).text, "ONE\nmine\nTHREE\n");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\ntwo\nthree\n");
}

/// Waits until the user is told an agent's write was refused for touching their edits.
async fn told_of_conflict(client: &TestClient) {
    client
        .take("window/showMessage", |p| {
            p["message"]
                .as_str()
                .unwrap()
                .contains("edited the same lines")
        })
        .await;
}

/// A buffer that exists only in the editor (not on disk yet) is not replaced by a blind write.
#[tokio::test]
async fn a_blind_write_does_not_replace_an_unsaved_new_buffer() {
    let client = TestClient::in_process_initialized().await;
    let path = client.workspace.join("draft.md");
    let uri = client.open_unsaved(&path, "markdown", "my draft\n").await;
    write_as_agent(&client, &uri, "agent text\n").await;
    told_of_conflict(&client).await;
    assert_eq!(client.document(&uri).text, "my draft\n");
    assert!(!path.exists());
}

/// A proposal its agent already wrote to disk before the user decided (a careless agent's tool
/// does), then rejected: the user is told; a file that is not open gets back what was there
/// (the file goes when it was new); an open one keeps it in the buffer, for its next save.
#[tokio::test]
async fn a_rejected_proposal_already_on_disk_is_taken_back() {
    let client = TestClient::in_process_initialized().await;
    let original = "keep\n// TODO a\n";
    let proposal = "keep\n// TODO A\n";
    let uri = client.open("notes.txt", "text", original).await;
    let notes = client.workspace.join("notes.txt");
    propose(&client, &uri, proposal, "gemini").await;
    client.wait_for_review(&uri).await;
    std::fs::write(&notes, proposal).unwrap();
    client.run_code_action(&uri, "Reject all changes (1)").await;
    assert_eq!(verdict(&client).await["verdict"], "rejected");
    // Open: agentls never writes an open file; the buffer keeps what was there, and saving
    // puts it back.
    client
        .take_message("gemini wrote its proposal to notes.txt before you decided; the buffer")
        .await;
    assert_eq!(client.document(&uri).text, original);
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), proposal);

    // Not open: what was there goes back.
    let closed = client.workspace.join("closed.txt");
    std::fs::write(&closed, original).unwrap();
    let closed_uri = file_uri(&closed);
    propose(&client, &closed_uri, proposal, "gemini").await;
    client.wait_for_review(&closed_uri).await;
    std::fs::write(&closed, proposal).unwrap();
    client
        .run_code_action(&closed_uri, "Reject all changes (1)")
        .await;
    assert_eq!(verdict(&client).await["verdict"], "rejected");
    client
        .take_message("gemini wrote its proposal to closed.txt before you decided; your Reject")
        .await;
    assert_eq!(std::fs::read_to_string(&closed).unwrap(), original);

    // A new file it proposed, written first: rejected, it goes.
    let fresh = client.workspace.join("fresh.txt");
    let fresh_uri = file_uri(&fresh);
    propose(&client, &fresh_uri, "made up\n", "gemini").await;
    client.wait_for_review(&fresh_uri).await;
    std::fs::write(&fresh, "made up\n").unwrap();
    client
        .run_code_action(&fresh_uri, "Reject all changes (1)")
        .await;
    assert_eq!(verdict(&client).await["verdict"], "rejected");
    client
        .take_message("gemini wrote its proposal to fresh.txt before you decided")
        .await;
    assert!(!fresh.exists());
    assert!(client.shutdown().await.success());
}

/// Typing in a file with a review shows the review again once per burst, not once per
/// keystroke: at most one `agentls/reviewChanged` (and diagnostics publish) per 100 ms while
/// the user types lines above it, and the last one shows where the changes are after the last
/// keystroke.
#[tokio::test]
async fn typing_in_a_file_with_a_review_shows_it_once_per_burst() {
    let client = TestClient::in_process_initialized().await;
    let uri = client.open("src/main.rs", "rust", BASE).await;
    propose(&client, &uri, PROPOSAL, "gemini").await;
    diagnostics(&client, &uri, 2).await;
    let before = client.count(Some("agentls/reviewChanged"));
    let began = std::time::Instant::now();
    const KEYSTROKES: usize = 50;
    for _ in 0..KEYSTROKES {
        client.edit(&uri, range(0, 0, 0, 0), "\n").await;
    }
    // After the burst (new lines above both changes, moving them down), a publish for the
    // last version has both hunks where they are now.
    let version = client.document(&uri).version;
    let last = client
        .take("textDocument/publishDiagnostics", |p| {
            p["uri"] == uri.as_str() && p["version"] == version
        })
        .await;
    let moved = KEYSTROKES as u32;
    assert_eq!(
        last["params"]["diagnostics"][0]["range"],
        range(1 + moved, 0, 2 + moved, 0)
    );
    let elapsed = began.elapsed().as_millis() as usize;
    let shown = client.count(Some("agentls/reviewChanged")) - before;
    assert!(
        shown <= elapsed / 100 + 2 && shown < KEYSTROKES,
        "{shown} reviewChanged in {elapsed} ms for {KEYSTROKES} keystrokes"
    );
    assert!(client.shutdown().await.success());
}

/// An origin that proposes without end gets [`MAX_OPEN_PER_ORIGIN`] proposals open, then
/// refusals (its verdict says why) and one message, not one per proposal; another origin is
/// not held back by it.
#[tokio::test]
async fn proposals_beyond_the_cap_of_one_origin_are_refused() {
    const CAP: usize = 50;
    let client = TestClient::in_process_initialized().await;
    for i in 0..=CAP {
        let uri = file_uri(&client.workspace.join(format!("f{i}.txt")));
        propose(&client, &uri, "new\n", "flood").await;
    }
    let refused = verdict(&client).await;
    assert_eq!(refused["verdict"], "rejected", "{refused}");
    assert!(
        refused["reason"]
            .as_str()
            .is_some_and(|r| r.contains("has 50 proposals waiting for the user")),
        "{refused}"
    );
    let uri = file_uri(&client.workspace.join("one-more.txt"));
    propose(&client, &uri, "new\n", "flood").await;
    verdict(&client).await;
    client
        .take_message("its further proposals are refused")
        .await;
    // The log keeps a copy of every message, merged or not.
    let log = client.log_text();
    assert_eq!(log.matches("further proposals").count(), 1, "{log}");
    // Another origin still gets its review.
    let other = file_uri(&client.workspace.join("other.txt"));
    propose(&client, &other, "theirs\n", "calm").await;
    diagnostics(&client, &other, 1).await;
    let state = client.server_state().await;
    assert_eq!(state["reviews"].as_array().unwrap().len(), CAP + 1);
}
