//! `agentls demo`: agentls's main job end to end, with the built-in demo agent and no editor.
//! It starts `agentls serve` exactly as an editor would, opens a small file, prompts the demo
//! agent, shows the streamed answer and the review the proposal becomes, accepts it the way a
//! user runs the "Accept all changes" code action, and shows the file afterwards.

mod client;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde_json::{Value, json};
use tower_lsp_server::ls_types::Uri;

use client::Client;

/// The agent the walkthrough talks to.
const AGENT: &str = "demo";
/// The file it edits, and what it says at first.
const FILE: &str = "notes.txt";
const NOTES: &str = "Shopping\nTODO: buy milk\neggs and bread\nTODO: call the plumber\n";
/// How long the whole turn may take.
const TURN_LIMIT: Duration = Duration::from_secs(60);

/// Runs the walkthrough in `dir` (a new temporary directory, removed afterwards, when `None`),
/// writing what happens to `out` for a person to read.
pub async fn run(dir: Option<PathBuf>, out: &mut dyn Write) -> anyhow::Result<()> {
    // A temporary run keeps everything it makes (the chat, the demo agent's session) in its own
    // folder, so nothing is left behind in the user's state folder.
    let temporary = match dir {
        Some(_) => None,
        None => Some(tempfile::Builder::new().prefix("agentls-demo-").tempdir()?),
    };
    let dir = match (dir, &temporary) {
        (Some(dir), _) => {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            std::fs::canonicalize(dir)?
        }
        (None, Some(temporary)) => {
            let dir = std::fs::canonicalize(temporary.path())?.join("workspace");
            std::fs::create_dir(&dir)?;
            dir
        }
        (None, None) => unreachable!("a temporary folder is made when no folder is given"),
    };
    let state = temporary.as_ref().map(|t| t.path().join("state"));
    let path = dir.join(FILE);
    std::fs::write(&path, NOTES).with_context(|| format!("cannot write {}", path.display()))?;
    writeln!(
        out,
        "agentls demo: the built-in `{AGENT}` agent edits {}",
        path.display()
    )?;
    show_file(out, &path)?;

    writeln!(out, "\n1. Starting `agentls serve`, as your editor does.")?;
    let mut client = Client::start(&dir, state.as_deref())?;
    initialize(&mut client, &dir).await?;
    let uri = client.open(&path, NOTES).await?;

    let prompt = json!({"command": "agentls.prompt",
        "arguments": [{"agent": AGENT, "text": format!("uppercase {FILE}"), "uri": uri}]});
    let sent = client.request("workspace/executeCommand", prompt).await?;
    let chat = PathBuf::from(
        sent["chat"]
            .as_str()
            .context("agentls.prompt named no chat")?,
    );
    writeln!(
        out,
        "2. Prompting {AGENT}: \"uppercase {FILE}\" (agentls.prompt). It answers in a chat \
         document, {}, which an editor opens as a markdown file.",
        chat.display()
    )?;
    let summary = tokio::time::timeout(TURN_LIMIT, follow_turn(&mut client, &uri, out))
        .await
        .context("the demo turn took too long")??;
    writeln!(out, "\n5. The turn ended: {summary}")?;

    writeln!(out, "6. The chat document now reads:")?;
    let transcript = tokio::time::timeout(TURN_LIMIT, turn_written(&chat))
        .await
        .context("the chat never showed the end of the turn")??;
    for line in transcript.lines() {
        writeln!(out, "   │ {line}")?;
    }
    writeln!(
        out,
        "7. The editor saves {FILE}: the accepted change was in its buffer, and its own save \
         writes the file (no \"changed on disk\" warning)."
    )?;
    client.save(&path).await?;
    show_file(out, &path)?;
    client.stop().await?;
    if let Some(temporary) = temporary {
        let place = temporary.path().display().to_string();
        temporary
            .close()
            .with_context(|| format!("cannot remove {place}"))?;
        writeln!(
            out,
            "\n(The temporary folder {place} is removed; `agentls demo DIR` keeps the files in DIR.)"
        )?;
    }
    writeln!(
        out,
        "\nThat is the whole loop: prompt → streamed answer → review → accept → save.\n\
         Next: attach agentls to your editor (README, \"Attach it to your editor\") and configure\n\
         a real agent in ~/.config/agentls/config.toml."
    )?;
    Ok(())
}

/// The chat's text once it holds the end of the turn (the server appends to a chat no editor
/// has open; the last piece may land just after the turn's summary).
async fn turn_written(chat: &Path) -> anyhow::Result<String> {
    let end = format!("_{AGENT}: ");
    loop {
        match tokio::fs::read_to_string(chat).await {
            Ok(text) if text.contains(&end) => return Ok(text),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", chat.display())),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn initialize(client: &mut Client, dir: &Path) -> anyhow::Result<()> {
    let root = Uri::from_file_path(dir).context("the directory has no file URI")?;
    let capabilities = json!({
        "general": {"positionEncodings": ["utf-8"]},
        "workspace": {"applyEdit": true, "workspaceEdit": {"documentChanges": true}},
        "window": {"showDocument": {"support": true}},
    });
    client
        .request(
            "initialize",
            json!({"processId": std::process::id(), "rootUri": root,
                   "workspaceFolders": [{"uri": root, "name": "demo"}],
                   "capabilities": capabilities}),
        )
        .await?;
    client.notify("initialized", json!({})).await
}

/// Follows the server's output until the turn's summary; accepts the review when it appears.
/// Returns the summary.
async fn follow_turn(
    client: &mut Client,
    uri: &str,
    out: &mut dyn Write,
) -> anyhow::Result<String> {
    let mut reviewed = false;
    while let Some(message) = client.notifications.recv().await {
        let params = &message["params"];
        match message["method"].as_str().unwrap_or_default() {
            "textDocument/publishDiagnostics" if !reviewed => {
                let diagnostics = params["diagnostics"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                if diagnostics.is_empty() {
                    continue;
                }
                reviewed = true;
                review(client, uri, &diagnostics, out).await?;
            }
            "workspace/applyEdit" => {
                let edits = &params["edit"]["documentChanges"][0]["edits"];
                writeln!(
                    out,
                    "4. The editor applied {} edit(s) as one undo step: \"{}\"",
                    edits.as_array().map_or(0, Vec::len),
                    params["label"].as_str().unwrap_or_default()
                )?;
            }
            "window/showMessage" => {
                let text = params["message"].as_str().unwrap_or_default();
                if text.starts_with(&format!("{AGENT}: ")) {
                    return Ok(text.to_owned());
                }
            }
            _ => {}
        }
    }
    bail!("agentls stopped before the turn ended")
}

/// Shows the review's previews and code actions, then accepts all of it.
async fn review(
    client: &mut Client,
    uri: &str,
    diagnostics: &[Value],
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    writeln!(
        out,
        "3. The proposal is a review, shown as diagnostics on {FILE}:"
    )?;
    for diagnostic in diagnostics {
        let line = diagnostic["range"]["start"]["line"].as_u64().unwrap_or(0) + 1;
        writeln!(out, "   line {line}:")?;
        for text in diagnostic["message"].as_str().unwrap_or_default().lines() {
            writeln!(out, "     {text}")?;
        }
    }
    let range = diagnostics[0]["range"].clone();
    let actions = client
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": uri}, "range": range, "context": {"diagnostics": []}}),
        )
        .await?;
    let actions = actions.as_array().cloned().unwrap_or_default();
    writeln!(out, "   Code actions offered there:")?;
    for action in &actions {
        writeln!(
            out,
            "     • {}",
            action["title"].as_str().unwrap_or_default()
        )?;
    }
    let Some(accept_all) = actions.iter().find(|a| {
        a["title"]
            .as_str()
            .is_some_and(|t| t.starts_with("Accept all changes"))
    }) else {
        bail!("no \"Accept all changes\" action was offered");
    };
    writeln!(
        out,
        "   Running \"{}\".",
        accept_all["title"].as_str().unwrap_or_default()
    )?;
    client
        .request("workspace/executeCommand", accept_all["command"].clone())
        .await?;
    Ok(())
}

fn show_file(out: &mut dyn Write, path: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path)?;
    writeln!(out, "   {FILE} on disk:")?;
    for line in text.lines() {
        writeln!(out, "   │ {line}")?;
    }
    Ok(())
}
