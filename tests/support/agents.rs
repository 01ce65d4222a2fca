//! Helpers for driving agents through the test client: an agent's config table, the agent
//! commands, waiting for a turn's summary, and answering questions through code actions.

use std::path::Path;

use serde_json::{Value, json};

use super::{TestClient, WAIT};

/// Polls the async `condition` until it holds (`Some(())`) or [`WAIT`] passes (`None`).
pub async fn eventually_async<F: std::future::Future<Output = bool>>(
    condition: impl Fn() -> F,
) -> Option<()> {
    let deadline = tokio::time::Instant::now() + WAIT;
    while tokio::time::Instant::now() < deadline {
        if condition().await {
            return Some(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    None
}

/// Capabilities of an editor without `window/showMessageRequest` (like Helix): questions come as
/// code actions.
pub fn capabilities_without_dialogs() -> Value {
    let mut caps = TestClient::rich_capabilities(false);
    caps["window"]
        .as_object_mut()
        .unwrap()
        .remove("showMessage");
    caps
}

/// The config making `name` the default agent: its `[agents.<name>]` table for `command args…`
/// with `env`, and the TOML lines `more` (such as `mode = "default"`) in that table, copying the
/// wire to `$AGENTLS_TEST_WIRE/<wire_name>.{in,out}.ndjson` when that is set.
pub fn agent_toml(
    name: &str,
    wire_name: &str,
    command: &[&str],
    env: &[(&str, &str)],
    more: &str,
) -> String {
    let quote = |s: &str| serde_json::to_string(s).unwrap();
    let mut argv: Vec<String> = command.iter().map(|s| s.to_string()).collect();
    if let Ok(dir) = std::env::var("AGENTLS_TEST_WIRE") {
        std::fs::create_dir_all(&dir).unwrap();
        let prefix = Path::new(&dir).join(wire_name);
        let tap = "tee \"$0.in.ndjson\" | \"$@\" | tee \"$0.out.ndjson\"";
        let mut wrapped = vec!["/bin/sh".to_owned(), "-c".into(), tap.into()];
        wrapped.push(prefix.display().to_string());
        wrapped.extend(argv);
        argv = wrapped;
    }
    let args: Vec<String> = argv[1..].iter().map(|a| quote(a)).collect();
    let mut toml = format!(
        "defaultAgent = {name:?}\n[agents.{name}]\ncommand = {}\nargs = [{}]\n{more}",
        quote(&argv[0]),
        args.join(", ")
    );
    if !env.is_empty() {
        toml.push_str(&format!("[agents.{name}.env]\n"));
        for (key, value) in env {
            toml.push_str(&format!("{key} = {}\n", quote(value)));
        }
    }
    toml
}

/// The path of a `file://` URI.
pub fn path_of(uri: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(super::file_uri_to_path(uri))
}

impl TestClient {
    /// A server initialized with `capabilities`, with the default options (the demo agent).
    pub async fn started(capabilities: Value) -> Self {
        Self::configured("", capabilities).await
    }

    /// [`TestClient::started`], served in this process ([`TestClient::in_process`]).
    pub async fn in_process_started(capabilities: Value) -> Self {
        let client = Self::in_process().await;
        client.initialize(capabilities, None).await;
        client
    }

    /// Started with `config` as the user's config file, and initialized with `capabilities`.
    pub async fn configured(config: &str, capabilities: Value) -> Self {
        let client = Self::start(super::Options {
            config_toml: (!config.is_empty()).then(|| config.to_owned()),
            ..super::Options::default()
        })
        .await;
        client.initialize(capabilities, None).await;
        client
    }

    /// Waits until a review's code actions are offered at the start of `uri`.
    pub async fn wait_for_review(&self, uri: &str) {
        eventually_async(|| async {
            self.code_actions(uri).await.iter().any(|a| {
                a["title"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("Accept all")
            })
        })
        .await
        .expect("a review's code actions");
    }

    /// Runs `workspace/executeCommand`.
    pub async fn execute(&self, command: &str, argument: Value) -> Result<Value, Value> {
        let arguments = if argument.is_null() {
            json!([])
        } else {
            json!([argument])
        };
        self.request(
            "workspace/executeCommand",
            json!({"command": command, "arguments": arguments}),
        )
        .await
    }

    /// `agentls.terminalEnv`: the environment a terminal agent gets to find this server.
    pub async fn terminal_env(&self) -> Result<Value, Value> {
        self.execute("agentls.terminalEnv", Value::Null).await
    }

    /// `agentls.cancel` finds a turn to cancel, and the turn ends as cancelled.
    pub async fn cancel_ends_the_turn(&self, agent: &str) {
        let cancelled = self.execute("agentls.cancel", json!({})).await.unwrap();
        assert_eq!(cancelled, json!({"cancelled": true}));
        let told = self.take_message(&format!("{agent}: ")).await;
        assert!(told.starts_with(&format!("{agent}: cancelled")), "{told}");
    }

    /// Checks that `agent` answers a new prompt (reading a new two-line file) to its end.
    pub async fn takes_the_next_prompt(&self, agent: &str) {
        self.open("next.txt", "text", "one\ntwo\n").await;
        self.prompt("read next.txt").await;
        let summary = self.take_message(&format!("{agent}: ")).await;
        assert!(
            summary.starts_with(&format!("{agent}: end_turn"))
                && summary.contains("next.txt has 2 lines"),
            "{summary}"
        );
    }

    /// The companion protocol's HTTP port and its token, as a terminal's environment names
    /// them (`agentls.terminalEnv`).
    pub async fn companion_port(&self) -> (u16, String) {
        let env = self.terminal_env().await.unwrap();
        let port = env["GEMINI_CLI_IDE_SERVER_PORT"].as_str().unwrap();
        let token = env["GEMINI_CLI_IDE_AUTH_TOKEN"].as_str().unwrap();
        (port.parse().unwrap(), token.to_owned())
    }

    /// `agentls.prompt` with `text` to the default agent.
    pub async fn prompt(&self, text: &str) {
        self.execute("agentls.prompt", json!({"text": text}))
            .await
            .expect("agentls.prompt");
    }

    /// `agentls.status`.
    pub async fn agent_status(&self) -> Value {
        self.execute("agentls.status", Value::Null)
            .await
            .expect("agentls.status")
    }

    /// Waits until the user was told something containing `needle` in a `window/showMessage`;
    /// returns that line. agentls merges a burst of popups into one: its other lines stay for
    /// the next take.
    pub async fn take_message(&self, needle: &str) -> String {
        // Popups are never dropped (a burst goes out merged, a little later); the log copy
        // stays for `shown_until`.
        self.take_line("window/showMessage", needle).await
    }

    /// Waits until agentls's log (`window/logMessage`) has a line containing `needle`; returns
    /// that line. Every popup is logged as it is raised, while the popup itself may wait its
    /// turn (agentls shows a few a second at most): a test that reads what it said, not when
    /// it was shown, reads it here. The other lines of the same log message stay.
    pub async fn take_logged(&self, needle: &str) -> String {
        self.take_line("window/logMessage", needle).await
    }

    /// Takes the first `method` notification with a line containing `needle` and returns that
    /// line; its other lines are put back for the next take.
    async fn take_line(&self, method: &str, needle: &str) -> String {
        let matches = |p: &Value| p["message"].as_str().unwrap_or_default().contains(needle);
        let mut message = self.take(method, matches).await;
        let text = message["params"]["message"].as_str().unwrap().to_owned();
        let Some(at) = text.lines().position(|line| line.contains(needle)) else {
            return text;
        };
        let others: Vec<&str> = (text.lines().enumerate())
            .filter(|&(i, _)| i != at)
            .map(|(_, line)| line)
            .collect();
        if !others.is_empty() {
            message["params"]["message"] = others.join("\n").into();
            self.put_back(message);
        }
        text.lines().nth(at).unwrap_or_default().to_owned()
    }

    /// Waits until the user was shown `needle`, in the log or in a chat document (where
    /// `agentls.prompt`'s replies go), then returns all of it: the log, then every chat.
    pub async fn shown_until(&self, needle: &str) -> String {
        super::eventually(|| self.shown_text().contains(needle))
            .await
            .unwrap_or_else(|| panic!("never shown {needle:?}:\n{}", self.shown_text()));
        self.shown_text()
    }

    /// Everything logged so far that was not taken, then every chat document's text (the
    /// client's copy where it opened one, else the file).
    pub fn shown_text(&self) -> String {
        let mut shown = self.log_text();
        let dir = self.state_home().join("agentls/chats");
        // Servers in this process share a state home: each workspace has its own folder.
        let ours = |folder: &std::path::Path| {
            std::fs::read_to_string(folder.join(".workspace")).map_or(true, |named| {
                named.trim() == self.workspace.to_string_lossy()
            })
        };
        let chats = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|folder| ours(&folder.path()))
            .flat_map(|folder| {
                std::fs::read_dir(folder.path())
                    .into_iter()
                    .flatten()
                    .flatten()
            })
            // agentls's own records beside the chats start with a dot.
            .filter(|file| !file.file_name().to_string_lossy().starts_with('.'));
        for chat in chats {
            let uri = super::file_uri(&chat.path());
            let text = match self.try_document(&uri) {
                Some(doc) => doc.text,
                None => std::fs::read_to_string(chat.path()).unwrap_or_default(),
            };
            shown.push('\n');
            shown.push_str(&text);
        }
        shown
    }

    /// Everything logged so far that was not taken, joined.
    pub fn log_text(&self) -> String {
        self.received("window/logMessage")
            .iter()
            .map(|m| {
                m["params"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The code actions offered at the start of `uri`.
    pub async fn code_actions(&self, uri: &str) -> Vec<Value> {
        self.code_actions_at(uri, super::range(0, 0, 0, 0)).await
    }

    /// The code actions at the start of `uri` that decide something (a review, a question):
    /// all but *Open <agent>'s chat*, which a prompt answered in an unopened chat adds.
    pub async fn decision_actions(&self, uri: &str) -> Vec<Value> {
        let mut actions = self.code_actions(uri).await;
        actions.retain(|a| a["command"]["command"] != "agentls.openChat");
        actions
    }

    /// The code actions offered for `range` of `uri`.
    pub async fn code_actions_at(&self, uri: &str, range: Value) -> Vec<Value> {
        let params = json!({"textDocument": {"uri": uri}, "range": range,
                            "context": {"diagnostics": []}});
        let actions = self
            .request("textDocument/codeAction", params)
            .await
            .expect("codeAction");
        actions.as_array().cloned().unwrap_or_default()
    }

    /// Runs the command of the code action at the start of `uri` whose title starts with
    /// `prefix`, waiting (with a deadline) until it is offered.
    pub async fn run_code_action(&self, uri: &str, prefix: &str) {
        self.run_code_action_at(uri, super::range(0, 0, 0, 0), prefix)
            .await;
    }

    /// Runs the command of the code action for `range` whose title starts with `prefix`,
    /// waiting (with a deadline) until it is offered.
    pub async fn run_code_action_at(&self, uri: &str, range: Value, prefix: &str) {
        let deadline = tokio::time::Instant::now() + WAIT;
        let action = loop {
            let actions = self.code_actions_at(uri, range.clone()).await;
            let found = actions
                .iter()
                .find(|a| a["title"].as_str().unwrap_or_default().starts_with(prefix));
            if let Some(action) = found {
                break action.clone();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no code action starting with {prefix:?}: {actions:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        };
        let command = &action["command"];
        self.request(
            "workspace/executeCommand",
            json!({"command": command["command"], "arguments": command["arguments"]}),
        )
        .await
        .expect("code action command");
    }

    /// The pid of agent `name` from `agentls.status`.
    pub async fn agent_pid(&self, name: &str) -> Option<i32> {
        let status = self.agent_status().await;
        status["agents"]
            .as_array()?
            .iter()
            .find(|a| a["name"] == name)?["pid"]
            .as_i64()
            .map(|p| p as i32)
    }
}
