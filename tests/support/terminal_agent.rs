//! A terminal agent's CLI driven the way a user drives it: interactive in a pseudo-terminal,
//! pointed at agentls by the terminal env and at a mock model API; the user types a prompt and
//! accepts the review its write opens with agentls's code action. A failure shows the screen,
//! what the mock model was asked, and agentls's log.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use super::mock_llm::MockLlm;
use super::pty::Pty;
use super::{TestClient, eventually, range};

/// `program` run in the workspace with `HOME` and a terminal, and of this process's environment
/// only `PATH`; the caller adds the CLI's own arguments and variables.
pub fn command(program: &Path, client: &TestClient, home: &Path) -> Command {
    let mut command = Command::new(program);
    command
        .current_dir(&client.workspace)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("TERM", "xterm-256color");
    command
}

/// A CLI on a pseudo-terminal, connected to agentls.
pub struct Session<'a> {
    client: &'a TestClient,
    mock: &'a MockLlm,
    /// The CLI's terminal.
    pub pty: Pty,
}

impl<'a> Session<'a> {
    /// Adds agentls's terminal env (`env`) to `command`, starts it on a pseudo-terminal and
    /// waits until agentls logs the connection. `name` names the CLI in failures.
    pub async fn connect(
        name: &'a str,
        client: &'a TestClient,
        mock: &'a MockLlm,
        mut command: Command,
        env: &Value,
    ) -> Self {
        for (variable, value) in env.as_object().unwrap() {
            command.env(variable, value.as_str().unwrap());
        }
        let session = Self {
            client,
            mock,
            pty: Pty::spawn(&mut command),
        };
        // Connected, and it knows the editor's tools: a prompt typed before the CLI listed them
        // is carried out without them (its write goes straight to disk, no review).
        let ready = eventually(|| {
            let logged = client.stderr();
            logged.contains("terminal agent connected")
                && logged.contains("terminal agent listed the editor tools")
        })
        .await;
        assert!(
            ready.is_some(),
            "{}",
            session.report(&format!(
                "{name} never connected and listed the editor tools"
            ))
        );
        session
    }

    /// Whether the CLI draws `text` within `within`.
    pub async fn shows(&self, text: &str, within: Duration) -> bool {
        self.pty.wait_for(text, within).await
    }

    /// Waits until the CLI draws `ready` (a sign of its input box: a CLI loaded slowly drops
    /// keys typed before it is drawn), then types `prompt` and, once the CLI shows it, Enter
    /// (an Enter that comes with the text may be taken as part of a paste).
    pub async fn type_prompt(&mut self, ready: &str, prompt: &str) {
        let drawn = self.pty.wait_for(ready, Duration::from_secs(60)).await;
        assert!(
            drawn,
            "{}",
            self.report(&format!("the CLI never showed {ready:?}"))
        );
        self.pty.type_text(prompt);
        // The CLI moves the cursor over a space rather than printing one.
        let unspaced = |text: &str| text.replace(' ', "");
        let echoed = eventually(|| unspaced(&self.pty.screen()).contains(&unspaced(prompt))).await;
        assert!(
            echoed.is_some(),
            "{}",
            self.report(&format!("the CLI never showed the prompt {prompt:?}"))
        );
        self.pty.type_text("\r");
    }

    /// Waits until the CLI's write of `uri` arrives as a review of one change, then accepts it
    /// all with agentls's code action, as the user does in the editor. `write` names the write
    /// in a failure.
    pub async fn accept_review(&self, uri: &str, write: &str) {
        let client = self.client;
        let previewed = eventually(|| {
            client
                .received("textDocument/publishDiagnostics")
                .iter()
                .any(|m| {
                    m["params"]["uri"] == uri
                        && m["params"]["diagnostics"].as_array().unwrap().len() == 1
                })
        })
        .await;
        assert!(
            previewed.is_some(),
            "{}",
            self.report(&format!("no review for the {write}"))
        );
        let actions = client.code_actions_at(uri, range(0, 0, 0, 0)).await;
        let accept = actions
            .iter()
            .find(|a| {
                a["title"]
                    .as_str()
                    .unwrap()
                    .starts_with("Accept all changes")
            })
            .unwrap_or_else(|| panic!("no accept action in {:#}", json!(actions)));
        client
            .request("workspace/executeCommand", accept["command"].clone())
            .await
            .unwrap();
    }

    /// Waits until `find` finds something in what the CLI sent the mock model, and returns it;
    /// `what` names it in a failure.
    pub async fn sent_to_model(&self, what: &str, find: impl Fn() -> Option<Value>) -> Value {
        let found = eventually(|| find().is_some()).await;
        assert!(
            found.is_some(),
            "{}",
            self.report(&format!("no {what} reached the model"))
        );
        find().unwrap()
    }

    /// `what`, then the screen, the mock model's requests and agentls's log.
    pub fn report(&self, what: &str) -> String {
        format!(
            "{what}\n---- screen ----\n{}\n---- mock ----\n{}\n---- agentls ----\n{}",
            self.pty.screen(),
            self.mock.summary(),
            self.client.stderr()
        )
    }
}
