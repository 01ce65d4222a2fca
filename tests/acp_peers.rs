//! Real ACP peers through the real binary, configured as agents in config.toml (agents are data):
//! the reference example agent of `@agentclientprotocol/sdk` 1.9.0, and Gemini CLI run offline
//! against the mock LLM (`support::mock_llm`), whose scripted `write_file` call makes Gemini ask
//! permission with a diff that becomes a review.
//!
//! The peers come from `scripts/test-tools.sh` (`AGENTLS_TEST_NODE`, `AGENTLS_TEST_ACP_EXAMPLE`,
//! `AGENTLS_TEST_GEMINI`). Without the feature `real-peers` (scripts/test.sh turns it on) the
//! tests are ignored; with it, a missing peer fails its test, saying how to install it. Each
//! test prints its timings (`peer timing: …`; see them with `--nocapture`). With
//! `AGENTLS_TEST_WIRE=<dir>` the agents' stdin and stdout are also copied to
//! `<dir>/<test>.{in,out}.ndjson`, to read what a peer really sent.

mod support;

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{Value, json};
use support::agents::{agent_toml, capabilities_without_dialogs};
use support::mock_llm::{Gemini, LateScript, MockLlm, ToolTurn};
use support::{Answer, Options, TestClient, file_uri};

/// The path in env var `var`. A test that needs one is ignored without the feature
/// `real-peers`; with it, a missing peer fails the test here, saying how to install it.
fn peer(var: &str) -> String {
    let reason = match std::env::var(var) {
        Ok(path) if Path::new(&path).exists() => return path,
        Ok(path) => format!("{var}={path} does not exist"),
        Err(_) => format!("{var} is not set"),
    };
    panic!(
        "real peer missing: {reason}; run `eval \"$(scripts/test-tools.sh)\"` to install the \
         peers (scripts/test.sh does)"
    );
}

/// `node` and the script of a peer.
fn node_and(var: &str) -> (String, String) {
    (peer("AGENTLS_TEST_NODE"), peer(var))
}

/// Starts agentls with `toml` as its config and initializes it with `capabilities`.
async fn started(toml: String, capabilities: Value) -> TestClient {
    let client = TestClient::start(Options {
        config_toml: Some(toml),
        ..Options::default()
    })
    .await;
    client.initialize(capabilities, None).await;
    client
}

/// Starts `agent` (spawn, `initialize`, `session/new`) ahead of the first prompt; returns how
/// long that took, in seconds.
async fn start_agent(client: &TestClient, agent: &str) -> f64 {
    let started = Instant::now();
    client
        .execute("agentls.newSession", json!({"agent": agent}))
        .await
        .expect("agentls.newSession");
    client.take_message(&format!("{agent}: new session")).await;
    started.elapsed().as_secs_f64()
}

/// Prompts the default agent with `text` and waits for the turn's summary; returns the summary
/// and the seconds it took.
async fn turn(client: &TestClient, agent: &str, text: &str) -> (String, f64) {
    let started = Instant::now();
    client.prompt(text).await;
    let summary = client.take_message(&format!("{agent}: end_turn")).await;
    (summary, started.elapsed().as_secs_f64())
}

fn timing(test: &str, what: &str, seconds: f64) {
    eprintln!("peer timing: {test}: {what} {seconds:.2} s");
}

// ---- The reference example agent (@agentclientprotocol/sdk 1.9.0, dist/examples/agent.js) ----

/// Its permission request has no diff (and fake paths), so it is a question: a dialog where the
/// editor has `window/showMessageRequest`. Allowed, the turn completes with its "Perfect!" text.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[tokio::test]
async fn example_agent_turn_with_its_permission_allowed_in_a_dialog() {
    let (node, agent) = node_and("AGENTLS_TEST_ACP_EXAMPLE");
    let toml = agent_toml("example", "example_dialog", &[&node, &agent], &[], "");
    let client = started(toml, TestClient::rich_capabilities(false)).await;
    client.answer(
        "window/showMessageRequest",
        Answer::With(json!({"title": "Allow this change"})),
    );
    let start = start_agent(&client, "example").await;
    let (summary, seconds) = turn(&client, "example", "improve the project").await;
    timing("example/dialog", "start", start);
    timing("example/dialog", "turn", seconds);
    // "files: config.json": the agent's edit tool call (locations /project/config.json, a
    // path that does not exist) completed, so the summary names it though nothing was written.
    assert!(
        summary.starts_with("example: end_turn · 2 tool calls · files: config.json"),
        "{summary}"
    );
    assert!(
        summary.contains("Perfect! I've successfully updated the configuration."),
        "{summary}"
    );
    let question = client.take("window/showMessageRequest", |_| true).await;
    assert_eq!(
        question["params"]["message"],
        "example: Modifying critical configuration file"
    );
    assert_eq!(
        question["params"]["actions"],
        json!([{"title": "Allow this change"}, {"title": "Skip this change"}])
    );
    // The whole stream reached plugins, in order, and the log.
    let kinds: Vec<String> = client
        .received("agentls/sessionUpdate")
        .iter()
        .map(|u| {
            u["params"]["update"]["sessionUpdate"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "agent_message_chunk",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk"
        ]
    );
    let log = client.shown_until("_example: end_turn").await;
    assert!(log.contains("✓ Reading project files"), "{log}");
    assert!(
        log.contains("✓ Modifying critical configuration file"),
        "{log}"
    );
    let status = client.agent_status().await;
    let example = status["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "example")
        .expect("the example agent in agentls.status");
    assert_eq!(example["state"], "running");
    assert_eq!(example["sessions"].as_array().unwrap().len(), 1);
    eprintln!("example/dialog summary: {summary}");
    assert!(client.shutdown().await.success());
}

/// Without a dialog (like Helix) the question is offered as code actions "Allow (…)" /
/// "Reject (…)" on any document; the test answers one turn with each.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[tokio::test]
async fn example_agent_permission_answered_through_code_actions() {
    let (node, agent) = node_and("AGENTLS_TEST_ACP_EXAMPLE");
    let toml = agent_toml("example", "example_actions", &[&node, &agent], &[], "");
    let client = started(toml, capabilities_without_dialogs()).await;
    let uri = client.open("notes.txt", "text", "anything\n").await;
    let start = start_agent(&client, "example").await;
    timing("example/code actions", "start", start);

    let started = Instant::now();
    client.prompt("improve the project").await;
    let told = client
        .take_message("answer with a code action (Allow… / Reject…)")
        .await;
    assert_eq!(
        told,
        "example: Modifying critical configuration file — answer with a code action (Allow… / Reject…)"
    );
    let titles: Vec<String> = client
        .decision_actions(&uri)
        .await
        .iter()
        .map(|a| a["title"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        titles,
        [
            "Allow (Allow this change): example — Modifying critical configuration file",
            "Reject (Skip this change): example — Modifying critical configuration file"
        ]
    );
    client
        .run_code_action(&uri, "Reject (Skip this change)")
        .await;
    // Needles unique to each turn: the log still holds the earlier summaries.
    let summary = client
        .take_message("I understand you prefer not to make that change.")
        .await;
    timing(
        "example/code actions",
        "turn (rejected)",
        started.elapsed().as_secs_f64(),
    );
    assert!(summary.starts_with("example: end_turn"), "{summary}");
    assert!(client.decision_actions(&uri).await.is_empty());

    let started = Instant::now();
    client.prompt("improve the project again").await;
    client
        .run_code_action(&uri, "Allow (Allow this change)")
        .await;
    let summary = client
        .take_message("Perfect! I've successfully updated the configuration.")
        .await;
    timing(
        "example/code actions",
        "turn (allowed)",
        started.elapsed().as_secs_f64(),
    );
    assert!(summary.starts_with("example: end_turn"), "{summary}");
    assert_eq!(
        std::fs::read_to_string(client.workspace.join("notes.txt")).unwrap(),
        "anything\n"
    );
    assert!(client.shutdown().await.success());
}

// ---- Gemini CLI (@google/gemini-cli 0.61.0, `gemini --acp`), offline against the mock LLM ----

/// agentls with Gemini CLI as agent `gemini` (its own HOME, telemetry off, API at the mock).
struct GeminiRun {
    client: TestClient,
    mock: MockLlm,
    /// The model's script, set once the workspace (and so the file's path) exists.
    script: LateScript,
    _home: tempfile::TempDir,
}

impl GeminiRun {
    async fn start(wire_name: &str, capabilities: Value) -> Self {
        let (node, gemini) = node_and("AGENTLS_TEST_GEMINI");
        let home = tempfile::tempdir().unwrap();
        let settings = home.path().join(".gemini/settings.json");
        std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
        std::fs::write(
            &settings,
            r#"{"privacy": {"usageStatisticsEnabled": false}}"#,
        )
        .unwrap();
        let script = LateScript::default();
        let mock = MockLlm::start(script.clone()).await;
        let home_dir = home.path().display().to_string();
        let url = mock.url();
        let toml = agent_toml(
            "gemini",
            wire_name,
            &[&node, &gemini, "--acp", "-m", "gemini-2.5-flash"],
            &[
                ("HOME", &home_dir),
                ("GEMINI_API_KEY", "dummy"),
                ("GOOGLE_GEMINI_BASE_URL", &url),
                ("GEMINI_CLI_NO_RELAUNCH", "true"),
            ],
            "",
        );
        let client = started(toml, capabilities).await;
        Self {
            client,
            mock,
            script,
            _home: home,
        }
    }

    /// The model will call `write_file {path, content}`, then say `answer`.
    fn model_writes(&self, path: &Path, content: &str, answer: &str) {
        let turn = ToolTurn::new(
            "write_file",
            json!({"file_path": path, "content": content}),
            answer,
        );
        self.script.set(Gemini::new(turn));
    }

    /// The model will answer `text` without calling a tool.
    fn model_says(&self, text: &str) {
        self.script.set(Gemini::new(ToolTurn::say(text)));
    }

    /// The `functionResponse` of the model's last request (what Gemini told it about the tool).
    fn last_function_response(&self) -> Value {
        let requests = self.mock.requests_to(":streamGenerateContent");
        let last = requests.last().expect("a model request").json();
        let content = last["contents"].as_array().unwrap().last().unwrap().clone();
        content["parts"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|p| p.get("functionResponse").cloned())
            .unwrap_or(Value::Null)
    }

    /// Shuts agentls down (and with it Gemini); it must exit cleanly.
    async fn finish(self) {
        assert!(self.client.shutdown().await.success());
    }

    /// Lines of agentls's log (stderr) about permissions, for the record.
    fn permission_log(&self) -> String {
        self.client
            .stderr()
            .lines()
            .filter(|l| l.contains("permission answered"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Waits until agentls published review diagnostics for `uri`; returns them.
async fn review_diagnostics(client: &TestClient, uri: &str) -> Vec<Value> {
    let published = client
        .take("textDocument/publishDiagnostics", |p| {
            p["uri"] == uri && p["diagnostics"].as_array().is_some_and(|d| !d.is_empty())
        })
        .await;
    published["params"]["diagnostics"]
        .as_array()
        .unwrap()
        .clone()
}

fn path_of(uri: &str) -> PathBuf {
    PathBuf::from(support::file_uri_to_path(uri))
}

/// Gemini edits an open file: its permission request carries the diff, which becomes a review;
/// accepting it through a code action answers the permission, Gemini writes through
/// `fs/write_text_file`, and the buffer and the disk hold the new text.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[tokio::test]
async fn gemini_edit_of_an_open_file_is_reviewed_accepted_and_written() {
    let run = GeminiRun::start("gemini_accept", TestClient::rich_capabilities(false)).await;
    let client = &run.client;
    let uri = client
        .open("notes.txt", "text", "first line\nsecond line\n")
        .await;
    let new = "first line\nsecond line, edited by the model\n";
    run.model_writes(&path_of(&uri), new, "Done: I edited notes.txt.");
    let start = start_agent(client, "gemini").await;
    timing("gemini/accept", "start", start);

    let started = Instant::now();
    client.prompt("edit notes.txt").await;
    let diagnostics = review_diagnostics(client, &uri).await;
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert_eq!(diagnostics[0]["source"], "agentls");
    assert_eq!(diagnostics[0]["range"]["start"]["line"], 1);
    // Nothing is written before the user decides.
    assert_eq!(client.document(&uri).text, "first line\nsecond line\n");
    client
        .run_code_action(&uri, "Accept all changes (1) from gemini")
        .await;
    let summary = client.take_message("gemini: end_turn").await;
    timing("gemini/accept", "turn", started.elapsed().as_secs_f64());
    assert!(summary.contains("files: notes.txt"), "{summary}");
    assert!(summary.contains("Done: I edited notes.txt."), "{summary}");
    assert_eq!(client.document(&uri).text, new);
    // Gemini writes through agentls: the open file waits for the editor's save.
    assert_eq!(
        std::fs::read_to_string(path_of(&uri)).unwrap(),
        "first line\nsecond line\n"
    );
    client.save(&uri).await;
    assert_eq!(std::fs::read_to_string(path_of(&uri)).unwrap(), new);
    let response = run.last_function_response();
    assert_eq!(response["name"], "write_file", "{}", run.mock.summary());
    assert!(response["response"].get("error").is_none(), "{response}");
    // The review is gone: no diagnostics, no code actions.
    client
        .take("textDocument/publishDiagnostics", |p| {
            p["uri"] == uri.as_str() && p["diagnostics"] == json!([])
        })
        .await;
    assert!(client.decision_actions(&uri).await.is_empty());
    eprintln!("gemini/accept wire: {}", run.permission_log());
    run.finish().await;
}

/// Gemini creates a file that does not exist (and is not open): its read of the missing file
/// must succeed (empty) or it cannot write at all; the review is accepted on the file's URI.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[tokio::test]
async fn gemini_new_file_is_reviewed_and_created() {
    let run = GeminiRun::start("gemini_new_file", capabilities_without_dialogs()).await;
    let client = &run.client;
    let path = client.workspace.join("hello.txt");
    let uri = file_uri(&path);
    run.model_writes(&path, "hello from the mock\n", "Done: I created hello.txt.");
    let started = Instant::now();
    client.prompt("create hello.txt").await;
    review_diagnostics(client, &uri).await;
    assert!(!path.exists());
    client.run_code_action(&uri, "Accept all changes (1)").await;
    let summary = client.take_message("gemini: end_turn").await;
    timing(
        "gemini/new file",
        "start + turn",
        started.elapsed().as_secs_f64(),
    );
    assert!(summary.contains("files: hello.txt"), "{summary}");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "hello from the mock\n"
    );
    eprintln!("gemini/new file wire: {}", run.permission_log());
    run.finish().await;
}

/// Rejected: nothing changes on disk or in the buffer, and Gemini tells the model the user
/// cancelled the tool.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[tokio::test]
async fn gemini_rejected_edit_changes_nothing() {
    let run = GeminiRun::start("gemini_reject", TestClient::rich_capabilities(false)).await;
    let client = &run.client;
    let original = "keep me\n";
    let uri = client.open("notes.txt", "text", original).await;
    run.model_writes(
        &path_of(&uri),
        "replaced\n",
        "Understood: I left notes.txt alone.",
    );
    let started = Instant::now();
    client.prompt("rewrite notes.txt").await;
    review_diagnostics(client, &uri).await;
    client
        .run_code_action(&uri, "Reject all changes (1) from gemini")
        .await;
    let summary = client.take_message("gemini: end_turn").await;
    timing(
        "gemini/reject",
        "start + turn",
        started.elapsed().as_secs_f64(),
    );
    // Its only sight of the tool call was the permission request, which still counts, as
    // declined by the user (not as a failure).
    assert_eq!(
        summary,
        "gemini: end_turn · 1 tool call · 1 declined by you (Writing to notes.txt) — \
         “Understood: I left notes.txt alone.”"
    );
    assert_eq!(client.document(&uri).text, original);
    assert_eq!(std::fs::read_to_string(path_of(&uri)).unwrap(), original);
    assert!(client.received("workspace/applyEdit").is_empty());
    let response = run.last_function_response();
    assert_eq!(response["name"], "write_file", "{}", run.mock.summary());
    assert!(
        response["response"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("canceled by the user")),
        "{response}"
    );
    eprintln!("gemini/reject summary: {summary}");
    eprintln!("gemini/reject wire: {}", run.permission_log());
    run.finish().await;
}

/// Two hunks, the first accepted and the second rejected: Gemini is allowed, writes its whole
/// proposal, and the disk and the buffer end with exactly the accepted hunk.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[tokio::test]
async fn gemini_partly_accepted_edit_writes_only_the_accepted_hunk() {
    let run = GeminiRun::start("gemini_partial", capabilities_without_dialogs()).await;
    let client = &run.client;
    let original = "// TODO a\nx\nx\nx\nx\nx\nx\n// TODO b\n";
    let uri = client.open("notes.txt", "text", original).await;
    let proposal = original
        .replace("TODO a", "TODO A")
        .replace("TODO b", "TODO B");
    run.model_writes(&path_of(&uri), &proposal, "Done: both TODOs uppercased.");
    let started = Instant::now();
    client.prompt("uppercase the TODOs in notes.txt").await;
    let diagnostics = review_diagnostics(client, &uri).await;
    assert_eq!(diagnostics.len(), 2, "{diagnostics:?}");
    client
        .run_code_action_at(&uri, support::range(0, 0, 0, 1), "Accept change 1/2")
        .await;
    client.run_code_action(&uri, "Reject all changes (1)").await;
    let summary = client.take_message("gemini: end_turn").await;
    timing(
        "gemini/partial",
        "start + turn",
        started.elapsed().as_secs_f64(),
    );
    let expected = original.replace("TODO a", "TODO A");
    assert_eq!(client.document(&uri).text, expected);
    assert_eq!(std::fs::read_to_string(path_of(&uri)).unwrap(), original);
    client.save(&uri).await;
    assert_eq!(std::fs::read_to_string(path_of(&uri)).unwrap(), expected);
    let response = run.last_function_response();
    assert!(response["response"].get("error").is_none(), "{response}");
    eprintln!("gemini/partial summary: {summary}");
    eprintln!("gemini/partial wire: {}", run.permission_log());
    // The next prompt tells the model which part the user rejected.
    run.model_says("Noted.");
    client.prompt("thanks").await;
    client.take_message("“Noted.”").await;
    let requests = run.mock.requests_to(":streamGenerateContent");
    let last = requests.last().unwrap().json().to_string();
    assert!(
        last.contains("(From agentls) The user rejected part of your change to")
            && last.contains("TODO B"),
        "{last:.2000}"
    );
    run.finish().await;
}
