//! Bad input on the real binary's stdin: every correctly framed body that is not one JSON-RPC
//! 2.0 message gets the spec's error answer and the server serves on; headers in any case and
//! with any `Content-Type` are read; absurd lengths and garbage are skipped and reading
//! resyncs; a lone surrogate escape in a document's text is read as U+FFFD.

mod support;

use serde_json::{Value, json};
use support::{Options, TestClient, range};

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const HEADER: &str = "Content-Length: {n}\r\n\r\n";

/// `body` behind `header`, whose `{n}` is the body's length.
fn framed(header: &str, body: &[u8]) -> Vec<u8> {
    let mut bytes = header.replace("{n}", &body.len().to_string()).into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// Sends `agentls.debug.state` as a raw request with the string `id` framed with `header`, and
/// waits for its result.
async fn raw_request(client: &TestClient, header: &str, id: &str) -> Value {
    let request = json!({"jsonrpc": "2.0", "id": id, "method": "workspace/executeCommand",
                         "params": {"command": "agentls.debug.state", "arguments": []}});
    let body = serde_json::to_vec(&request).unwrap();
    client.send_raw(&framed(header, &body)).await;
    let response = client.take_response(|r| r["id"] == id).await;
    assert!(response["error"].is_null(), "{id}: {response}");
    response["result"].clone()
}

/// The bad bodies of issue 13, what each is answered, and with which id.
fn bad_bodies() -> Vec<(&'static str, Vec<u8>, i64, Value)> {
    let null = Value::Null;
    vec![
        (
            "invalid JSON",
            b"{\"jsonrpc\":\"2.0\",".to_vec(),
            PARSE_ERROR,
            null.clone(),
        ),
        (
            "a batch",
            br#"[{"jsonrpc":"2.0","id":1,"method":"shutdown"}]"#.to_vec(),
            INVALID_REQUEST,
            null.clone(),
        ),
        ("a number", b"42".to_vec(), INVALID_REQUEST, null.clone()),
        ("null", b"null".to_vec(), INVALID_REQUEST, null.clone()),
        (
            "an empty object",
            b"{}".to_vec(),
            INVALID_REQUEST,
            null.clone(),
        ),
        (
            "JSON-RPC 1.0",
            br#"{"jsonrpc":"1.0","id":"old","method":"shutdown"}"#.to_vec(),
            INVALID_REQUEST,
            json!("old"),
        ),
        (
            "a float id",
            br#"{"jsonrpc":"2.0","id":1.5,"method":"shutdown"}"#.to_vec(),
            INVALID_REQUEST,
            null.clone(),
        ),
        (
            "an object id",
            br#"{"jsonrpc":"2.0","id":{"n":1},"method":"shutdown"}"#.to_vec(),
            INVALID_REQUEST,
            null.clone(),
        ),
        (
            "a method that is no string",
            br#"{"jsonrpc":"2.0","id":"m","method":7}"#.to_vec(),
            INVALID_REQUEST,
            json!("m"),
        ),
        (
            "invalid UTF-8",
            b"{\"jsonrpc\":\"2.0\",\"method\":\"\xff\xfe\"}".to_vec(),
            PARSE_ERROR,
            null.clone(),
        ),
        (
            "NUL bytes",
            b"{\"jsonrpc\":\"2.0\",\0\"method\":\"x\"\0}".to_vec(),
            PARSE_ERROR,
            null.clone(),
        ),
        (
            "100,000 nested arrays",
            vec![b'['; 100_000],
            PARSE_ERROR,
            null.clone(),
        ),
        ("an empty body", Vec::new(), PARSE_ERROR, null),
    ]
}

#[tokio::test]
async fn every_bad_body_is_answered_and_serving_goes_on() {
    let mut client = TestClient::start_initialized(Options::default()).await;
    for (what, body, code, id) in bad_bodies() {
        client.send_raw(&framed(HEADER, &body)).await;
        let answer = client
            .take_response(|r| r["error"]["code"] == code && r["id"] == id)
            .await;
        assert_eq!(answer["jsonrpc"], "2.0", "{what}: {answer}");
        assert!(answer["error"]["message"].is_string(), "{what}: {answer}");
        assert!(answer.get("result").is_none(), "{what}: {answer}");
        // A normal request right behind it gets its normal reply.
        let state = client.server_state().await;
        assert!(state["documents"].is_array(), "{what}: {state}");
        assert!(!client.has_exited(), "{what}");
    }
    assert!(
        client
            .stderr()
            .contains("a message from the client was refused"),
        "each refusal is logged"
    );
    assert!(client.shutdown().await.success());
}

/// Before `initialize` too: the answer comes from the framing, not from the server's state.
#[tokio::test]
async fn a_bad_body_before_initialize_leaves_initialize_working() {
    let client = TestClient::start(Options::default()).await;
    client.send_raw(&framed(HEADER, b"[]")).await;
    let answer = client
        .take_response(|r| r["error"]["code"] == INVALID_REQUEST)
        .await;
    assert_eq!(answer["id"], Value::Null);
    let result = client
        .initialize(TestClient::rich_capabilities(false), None)
        .await;
    assert_eq!(result["serverInfo"]["name"], "agentls");
    assert!(client.shutdown().await.success());
}

#[tokio::test]
async fn headers_in_any_case_with_any_content_type_are_read() {
    let client = TestClient::start_initialized(Options::default()).await;
    let headers = [
        "Content-Type: application/vscode-jsonrpc\r\nContent-Length: {n}\r\n\r\n",
        "Content-Length: {n}\r\nContent-Type: application/vscode-jsonrpc; charset=UTF-8\r\n\r\n",
        "Content-Length: {n}\r\nContent-Type: application/vscode-jsonrpc; charset=utf8\r\n\r\n",
        "content-length: {n}\r\n\r\n",
        "CONTENT-LENGTH:{n}\r\nX-Something-Else: 1\r\n\r\n",
        "Content-Length: {n}\n\n",
    ];
    for (i, header) in headers.iter().enumerate() {
        let state = raw_request(&client, header, &format!("header-{i}")).await;
        assert!(state["documents"].is_array(), "{header:?}: {state}");
    }
    assert!(client.shutdown().await.success());
}

#[tokio::test]
async fn absurd_lengths_and_garbage_are_skipped_and_reading_resyncs() {
    let client = TestClient::start_initialized(Options::default()).await;
    let absurd = format!("Content-Length: {}\r\n\r\n", (64 << 20) + 1);
    client.send_raw(absurd.as_bytes()).await;
    raw_request(&client, HEADER, "after-absurd").await;
    client
        .send_raw(b"Content-Length: 99999999999999999999999\r\n\r\n")
        .await;
    raw_request(&client, HEADER, "after-overflow").await;
    client
        .send_raw(b"this is not LSP\r\nnor this\r\n\r\n")
        .await;
    raw_request(&client, HEADER, "after-garbage").await;
    // Stray bytes glued to the front of a header.
    client.send_raw(b"stray bytes without a line end").await;
    raw_request(&client, HEADER, "after-stray").await;
    let stderr = client.stderr();
    assert!(stderr.contains("over the 64 MiB limit"), "{stderr}");
    assert!(stderr.contains("not an LSP header"), "{stderr}");
    assert!(client.shutdown().await.success());
}

/// Clients that cut text at UTF-16 code units may send half a surrogate pair: it is read as
/// U+FFFD (one UTF-16 code unit too, so the positions after it stay right), not refused.
#[tokio::test]
async fn a_lone_surrogate_in_did_change_is_read_as_a_replacement_character() {
    let client = TestClient::start_initialized(Options::default()).await;
    let uri = client.open("split.txt", "text", "ab\n").await;
    let change = |version: i32, at: u32, text: &str| {
        let body = format!(
            r#"{{"jsonrpc":"2.0","method":"textDocument/didChange","params":{{"textDocument":{{"uri":"{uri}","version":{version}}},"contentChanges":[{{"range":{},"text":"{text}"}}]}}}}"#,
            range(0, at, 0, at)
        );
        framed(HEADER, body.as_bytes())
    };
    client
        .send_raw(&change(1, 1, r"x\ud83dy\ude00z\ud83d\ude00"))
        .await;
    // After `a`, `x` and the lone surrogate: UTF-16 character 3.
    client.send_raw(&change(2, 3, "!")).await;
    let state = client.server_state().await;
    let path = support::file_uri_to_path(&uri);
    let document = state["documents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["path"] == path)
        .unwrap_or_else(|| panic!("{path} is not open: {state}"));
    assert_eq!(document["text"], "ax\u{fffd}!y\u{fffd}z😀b\n");
    assert!(client.shutdown().await.success());
}

/// A key twice in a message (at its top, which tower-lsp's decoder refuses, or inside its
/// params, which it reads into maps) is read with the last one winning, and serving goes on:
/// bodies pass as they came unless mended, and these must still reach the server whole.
#[tokio::test]
async fn keys_given_twice_are_read_and_serving_goes_on() {
    let client = TestClient::start_initialized(Options::default()).await;
    let uri = client.open("twice.txt", "text", "ab\n").await;
    let change = |text: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"textDocument/didChange","params":{{"textDocument":{{"uri":"{uri}","version":2,"version":3}},"contentChanges":[{{"range":{},"text":"{text}","text":"{text}!"}}]}}}}"#,
            range(0, 0, 0, 0)
        )
    };
    client
        .send_raw(&framed(HEADER, change("x").as_bytes()))
        .await;
    let twice_at_top = format!(
        r#"{{"jsonrpc":"2.0","method":"nothing/here","method":"textDocument/didChange","params":{}}}"#,
        serde_json::from_str::<Value>(&change("y")).unwrap()["params"]
    );
    client
        .send_raw(&framed(HEADER, twice_at_top.as_bytes()))
        .await;
    let state = raw_request(&client, HEADER, "after").await;
    let path = support::file_uri_to_path(&uri);
    let document = state["documents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["path"] == path)
        .unwrap_or_else(|| panic!("{path} is not open: {state}"));
    assert_eq!(document["text"], "y!x!ab\n");
    assert!(client.shutdown().await.success());
}
