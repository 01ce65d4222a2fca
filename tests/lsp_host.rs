//! The LSP host, served in this process (the binary for an exit code): lifecycle, position
//! encodings, ordering under load, selection, configuration, and an editor that never answers.

mod support;

use serde_json::{Value, json};
use support::text::{self, Encoding};
use support::{Answer, Options, TestClient, range};

async fn started(utf8: bool) -> TestClient {
    let client = TestClient::in_process().await;
    client
        .initialize(TestClient::rich_capabilities(utf8), None)
        .await;
    client
}

async fn server_text(client: &TestClient, uri: &str) -> String {
    let state = client.server_state().await;
    let path = support::file_uri_to_path(uri);
    state["documents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["path"] == path)
        .unwrap_or_else(|| panic!("server does not have {uri} open: {state}"))["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn initialize_advertises_what_we_serve() {
    let client = TestClient::in_process().await;
    let result = client
        .initialize(TestClient::rich_capabilities(true), None)
        .await;
    let caps = &result["capabilities"];
    assert_eq!(caps["positionEncoding"], "utf-8");
    assert_eq!(caps["textDocumentSync"]["change"], 2);
    assert_eq!(caps["textDocumentSync"]["openClose"], true);
    assert_eq!(caps["workspace"]["workspaceFolders"]["supported"], true);
    assert_eq!(result["serverInfo"]["name"], "agentls");
    assert!(client.shutdown().await.success());
}

#[tokio::test]
async fn commands_are_advertised_without_the_debug_ones_and_an_unknown_one_is_refused() {
    let client = TestClient::in_process().await;
    let result = client
        .initialize(TestClient::rich_capabilities(true), None)
        .await;
    let advertised = result["capabilities"]["executeCommandProvider"]["commands"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        advertised.contains(&json!("agentls.accept")),
        "{advertised:?}"
    );
    assert!(
        advertised.contains(&json!("agentls.openChat")),
        "{advertised:?}"
    );
    assert!(
        !advertised
            .iter()
            .any(|c| c.as_str().unwrap().starts_with("agentls.debug.")),
        "{advertised:?}"
    );
    let refused = client
        .execute("agentls.nope", Value::Null)
        .await
        .unwrap_err();
    assert_eq!(refused["code"], -32602, "{refused}");
    assert_eq!(refused["message"], "unknown command `agentls.nope`");
    // An unlisted command is still run by its name.
    let state = client.execute("agentls.debug.state", Value::Null).await;
    assert!(state.unwrap()["documents"].is_array());
    assert!(client.shutdown().await.success());
}

#[tokio::test]
async fn exit_without_shutdown_is_exit_code_1() {
    let mut client = started(false).await;
    client.notify("exit", Value::Null).await;
    assert_eq!(client.wait_exit().await.code(), Some(1));
}

#[tokio::test]
async fn closed_stdin_without_shutdown_is_exit_code_1() {
    // The process's exit code: the binary.
    let mut client = TestClient::start_initialized(Options::default()).await;
    client.close_stdin().await;
    assert_eq!(client.wait_exit().await.code(), Some(1));
}

#[tokio::test]
async fn utf16_is_chosen_when_utf8_is_not_offered() {
    let client = TestClient::in_process().await;
    let result = client.initialize(json!({}), None).await;
    assert_eq!(result["capabilities"]["positionEncoding"], "utf-16");
}

/// Edits at awkward places (after emoji and CJK, across CRLF, at the end of a file without a
/// trailing newline, in an empty file) leave the server's text equal to ours, in both encodings.
#[tokio::test]
async fn edits_with_non_ascii_text_in_both_encodings() {
    for utf8 in [false, true] {
        let client = started(utf8).await;
        let enc = client.encoding();
        assert_eq!(
            enc,
            if utf8 {
                Encoding::Utf8
            } else {
                Encoding::Utf16
            }
        );
        let cases = [
            ("emoji.txt", "a😀b😀c\n"),
            ("cjk.txt", "漢字かな\n二行目\n"),
            ("crlf.txt", "one\r\ntwo\r\nthree\r\n"),
            ("noeol.txt", "first\nlast line"),
            ("empty.txt", ""),
        ];
        for (name, initial) in cases {
            let uri = client.open(name, "text", initial).await;
            // Insert after the second character of the first line, replace across the first
            // line break, and append at the very end.
            let after_two = text_offset_after_chars(initial, 2);
            let (l, c) = text::position(initial, after_two, enc);
            client.edit(&uri, range(l, c, l, c), "🦀漢").await;
            let now = client.document(&uri).text;
            let first_break = now.find(['\r', '\n']).unwrap_or(now.len());
            let before_break = now[..first_break]
                .char_indices()
                .last()
                .map_or(0, |(i, _)| i);
            let (l1, c1) = text::position(&now, before_break, enc);
            let after_break = first_break + text_offset_after_chars(&now[first_break..], 2);
            let (l2, c2) = text::position(&now, after_break, enc);
            client.edit(&uri, range(l1, c1, l2, c2), "X\nY").await;
            let now = client.document(&uri).text;
            let (le, ce) = text::position(&now, now.len(), enc);
            client.edit(&uri, range(le, ce, le, ce), "end😀").await;
            let expected = client.document(&uri).text;
            assert_eq!(
                server_text(&client, &uri).await,
                expected,
                "{name}, utf8={utf8}"
            );
        }
        assert!(client.shutdown().await.success());
    }
}

fn text_offset_after_chars(text: &str, n: usize) -> usize {
    text.char_indices().nth(n).map_or(text.len(), |(i, _)| i)
}

/// 2,000 rapid incremental changes, with requests in flight all along, leave the server's copy
/// identical to ours.
#[tokio::test]
async fn two_thousand_rapid_changes_keep_order_under_concurrent_requests() {
    let client = started(false).await;
    let enc = client.encoding();
    let uri = client.open("order.txt", "text", "start\n").await;
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |bound: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % bound.max(1) as u64) as usize
    };
    let inserts = ["a", "😀", "漢", "\n", "xy", ""];
    let mut in_flight = Vec::new();
    for i in 0..2000 {
        let now = client.document(&uri).text;
        let chars: Vec<usize> = now
            .char_indices()
            .map(|(i, _)| i)
            .chain([now.len()])
            .collect();
        let a = chars[next(chars.len())];
        let b = chars[next(chars.len())];
        let (from, to) = (a.min(b), a.max(b).min(a.min(b) + 8));
        let to = *chars.iter().find(|&&o| o >= to).unwrap();
        let (l1, c1) = text::position(&now, from, enc);
        let (l2, c2) = text::position(&now, to, enc);
        client
            .edit(&uri, range(l1, c1, l2, c2), inserts[next(inserts.len())])
            .await;
        if i % 50 == 0 {
            let params = json!({"textDocument": {"uri": uri}, "range": range(0, 0, 0, 1),
                                "context": {"diagnostics": []}});
            in_flight.push(
                client
                    .send_request("textDocument/codeAction", params)
                    .await
                    .1,
            );
            let state = json!({"command": "agentls.debug.state", "arguments": []});
            in_flight.push(
                client
                    .send_request("workspace/executeCommand", state)
                    .await
                    .1,
            );
        }
    }
    for response in in_flight {
        let response = tokio::time::timeout(support::WAIT, response)
            .await
            .unwrap()
            .unwrap();
        assert!(response.get("error").is_none(), "{response}");
    }
    let expected = client.document(&uri).text;
    assert_eq!(server_text(&client, &uri).await, expected);
    assert!(client.shutdown().await.success());
}

#[tokio::test]
async fn selection_from_the_custom_notification_and_from_code_action_ranges() {
    let client = started(false).await;
    let a = client
        .open("a.txt", "text", "hello 漢字 world\nsecond\n")
        .await;
    let b = client.open("b.txt", "text", "other file\n").await;
    client.select(&a, range(0, 6, 0, 8)).await;
    let state = client.server_state().await;
    assert_eq!(state["currentSelection"]["text"], "漢字");
    // A client that cannot send the notification (Helix) still tells us through code actions.
    let params = json!({"textDocument": {"uri": b}, "range": range(0, 0, 0, 5),
                        "context": {"diagnostics": []}});
    client
        .request("textDocument/codeAction", params)
        .await
        .unwrap();
    let state = client.server_state().await;
    assert_eq!(state["currentSelection"]["text"], "other");
    assert_eq!(
        state["currentSelection"]["path"],
        support::file_uri_to_path(&b)
    );
    // An empty (cursor) range moves the focus but the latest real selection stays.
    let cursor = json!({"textDocument": {"uri": a}, "range": range(1, 0, 1, 0),
                        "context": {"diagnostics": []}});
    client
        .request("textDocument/codeAction", cursor)
        .await
        .unwrap();
    let state = client.server_state().await;
    assert_eq!(state["currentSelection"]["text"], "");
    assert_eq!(state["latestSelection"]["text"], "other");
    // A selection may carry its own text.
    client
        .notify(
            "agentls/didChangeSelection",
            json!({"textDocument": {"uri": a}, "selection": range(1, 0, 1, 6), "text": "second"}),
        )
        .await;
    assert_eq!(
        client.server_state().await["latestSelection"]["text"],
        "second"
    );
}

/// Config from the file, overridden by initializationOptions, overridden by didChangeConfiguration;
/// a bad value is reported by key and the server keeps running.
#[tokio::test]
async fn config_from_three_sources_and_a_bad_one() {
    let toml = "defaultAgent = \"one\"\n[agents.one]\ncommand = \"true\"\n\
                [agents.two]\ncommand = \"true\"\n[fs]\nallowOutsideWorkspace = true\n";
    let client = TestClient::start(Options {
        config_toml: Some(toml.into()),
        ..Options::default()
    })
    .await;
    // initializationOptions pick another default agent, and may not loosen the guard rails.
    client
        .initialize(
            TestClient::rich_capabilities(false),
            Some(json!({"defaultAgent": "two", "review": {"autoAccept": true}})),
        )
        .await;
    client
        .take("window/showMessage", |p| {
            p["message"]
                .as_str()
                .unwrap()
                .contains("`review.autoAccept`")
        })
        .await;
    let status = client
        .request(
            "workspace/executeCommand",
            json!({"command": "agentls.status", "arguments": []}),
        )
        .await
        .unwrap();
    assert_eq!(status["defaultAgent"], "two");
    // allowOutsideWorkspace from the file: a write outside the workspace works.
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("out.txt");
    write_through_server(&client, &target, "outside\n").await;
    wait_for_file(&target, "outside\n").await;

    // didChangeConfiguration with a bad value: reported by key, previous layers still apply.
    client
        .notify(
            "workspace/didChangeConfiguration",
            json!({"settings": {"agentls": {"review": {"maxPreviewLines": "many"}}}}),
        )
        .await;
    let message = client
        .take("window/showMessage", |p| {
            p["message"]
                .as_str()
                .unwrap()
                .contains("review.maxPreviewLines")
        })
        .await;
    assert_eq!(message["params"]["type"], 2, "a warning");
    // Editor settings may tighten what the file allows.
    client
        .notify(
            "workspace/didChangeConfiguration",
            json!({"settings": {"agentls": {"fs": {"allowOutsideWorkspace": false}}}}),
        )
        .await;
    let refused = outside.path().join("refused.txt");
    write_is_refused_as_outside(&client, &refused).await;
    // The editor may not define agents.
    client
        .notify(
            "workspace/didChangeConfiguration",
            json!({"settings": {"agents": {"evil": {"command": "rm"}}}}),
        )
        .await;
    client
        .take("window/showMessage", |p| {
            p["message"].as_str().unwrap().contains("`agents`")
        })
        .await;
    assert!(client.shutdown().await.success());
}

#[tokio::test]
async fn a_broken_config_file_is_reported_and_the_server_runs() {
    let client = TestClient::start_initialized(Options {
        config_toml: Some("[agents.x]\ncommand = 5\n".into()),
        ..Options::default()
    })
    .await;
    let message = client
        .take("window/showMessage", |p| {
            p["message"].as_str().unwrap().contains("agents.x.command")
        })
        .await;
    assert!(
        message["params"]["message"]
            .as_str()
            .unwrap()
            .contains("config.toml")
    );
    let uri = client.open("still.txt", "text", "works\n").await;
    assert_eq!(server_text(&client, &uri).await, "works\n");
    assert!(client.shutdown().await.success());
}

/// An editor that never answers `workspace/applyEdit` stalls nothing else.
#[tokio::test]
async fn an_unanswered_server_request_does_not_stall_the_server() {
    let client = started(false).await;
    client.answer("workspace/applyEdit", Answer::Never);
    let uri = client.open("hang.txt", "text", "before\n").await;
    // Six files: writes of one file take turns, and these would wait for each other.
    for i in 0..6 {
        let uri = client
            .open(&format!("hang{i}.txt"), "text", "before\n")
            .await;
        let path = std::path::PathBuf::from(support::file_uri_to_path(&uri));
        write_through_server(&client, &path, "after\n").await;
    }
    for _ in 0..6 {
        client.take("workspace/applyEdit", |_| true).await;
    }
    // More than the server's handler concurrency is now waiting on us; it still serves.
    client.edit(&uri, range(0, 0, 0, 0), ">").await;
    assert_eq!(server_text(&client, &uri).await, ">before\n");
    let params = json!({"textDocument": {"uri": uri}, "range": range(0, 0, 0, 1),
                        "context": {"diagnostics": []}});
    client
        .request("textDocument/codeAction", params)
        .await
        .unwrap();
    assert!(client.shutdown().await.success());
}

/// An agent's write to `path` is refused as outside the workspace: the user is told, and the
/// file is not created.
async fn write_is_refused_as_outside(client: &TestClient, path: &std::path::Path) {
    write_through_server(client, path, "no\n").await;
    client
        .take("window/showMessage", |p| {
            p["message"]
                .as_str()
                .unwrap()
                .contains("outside the workspace")
        })
        .await;
    assert!(!path.exists());
}

async fn write_through_server(client: &TestClient, path: &std::path::Path, text: &str) {
    let args = json!([{"uri": support::file_uri(path), "text": text}]);
    client
        .request(
            "workspace/executeCommand",
            json!({"command": "agentls.debug.write", "arguments": args}),
        )
        .await
        .expect("agentls.debug.write");
}

async fn wait_for_file(path: &std::path::Path, expected: &str) {
    support::eventually(|| std::fs::read_to_string(path).ok().as_deref() == Some(expected))
        .await
        .unwrap_or_else(|| panic!("{} never said {expected:?}", path.display()));
}

/// Plugins forward the editor's other diagnostics; agentls keeps them for agents.
#[tokio::test]
async fn forwarded_diagnostics_are_kept_per_file() {
    let client = started(false).await;
    let uri = client.open("d.rs", "rust", "fn main() {}\n").await;
    let diagnostic = json!({"range": range(0, 3, 0, 7), "severity": 1, "message": "unused",
                            "source": "rust-analyzer", "code": "E0001"});
    client
        .notify(
            "agentls/didChangeDiagnostics",
            json!({"uri": uri, "diagnostics": [diagnostic]}),
        )
        .await;
    let state = client.server_state().await;
    let forwarded = &state["diagnostics"][0];
    assert_eq!(forwarded["path"], support::file_uri_to_path(&uri));
    assert_eq!(forwarded["diagnostics"][0]["message"], "unused");
    assert_eq!(forwarded["diagnostics"][0]["level"], "Error");
    assert_eq!(forwarded["diagnostics"][0]["source"], "rust-analyzer");
    client
        .notify(
            "agentls/didChangeDiagnostics",
            json!({"uri": uri, "diagnostics": []}),
        )
        .await;
    assert_eq!(client.server_state().await["diagnostics"], json!([]));
}

/// A burst of messages is rate-limited, not lost: what does not fit the burst goes out merged
/// into one popup a little later (Helix shows only popups, so nothing may be dropped).
#[tokio::test]
async fn a_burst_of_messages_is_merged_not_dropped() {
    let client = started(false).await;
    for i in 0..8 {
        let outside = std::path::PathBuf::from(format!("/agentls-outside-{i}.txt"));
        write_through_server(&client, &outside, "x").await;
    }
    let mut seen = String::new();
    while (0..8).any(|i| !seen.contains(&format!("/agentls-outside-{i}.txt"))) {
        let popup = client.take("window/showMessage", |_| true).await;
        seen.push_str(popup["params"]["message"].as_str().unwrap());
        seen.push('\n');
    }
    let popups = seen.matches("outside the workspace").count();
    assert_eq!(popups, 8, "{seen}");
    assert!(
        client.received("window/showMessage").is_empty(),
        "every message was taken above"
    );
}

/// With no workspace folder left, the boundary is the server's working directory, not nothing:
/// a path elsewhere stays refused.
#[tokio::test]
async fn no_workspace_folder_does_not_open_the_boundary() {
    let client = started(false).await;
    let folder = support::file_uri(&client.workspace);
    client
        .notify(
            "workspace/didChangeWorkspaceFolders",
            json!({"event": {"added": [], "removed": [{"uri": folder, "name": "workspace"}]}}),
        )
        .await;
    assert_eq!(client.server_state().await["folders"], json!([]));
    let target = client.workspace.join("was-inside.txt");
    write_is_refused_as_outside(&client, &target).await;
}
