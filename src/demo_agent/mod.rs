//! `agentls demo-agent`: a small ACP agent with no network, for trying agentls out and for its
//! tests. In one turn it streams text, reads the file named in the prompt (a read tool call over
//! `fs/read_text_file`), proposes a deterministic change to it as a diff through
//! `session/request_permission`, and writes it through `fs/write_text_file` if allowed. The
//! prompt language is in [`script`]. It honours `session/cancel`, and repeats what agentls told
//! it (the `(From agentls)` notes of a prompt) at the start of its answer. Its sessions are kept
//! on disk (`history`): `session/load` replays one, and its next answer says what it recalls.
//! It takes MCP servers over HTTP (over stdio only with `AGENTLS_DEMO_MCP=stdio`) and uses
//! them when a prompt says `@tools` (`editor_tools`).

mod editor_tools;
mod history;
pub mod script;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{
    AgentCapabilities, AuthMethod, AuthMethodAgent, AvailableCommand, AvailableCommandsUpdate,
    CancelNotification, ContentBlock, ContentChunk, CreateTerminalRequest, Diff,
    EmbeddedResourceResource, Implementation, InitializeRequest, InitializeResponse,
    LoadSessionRequest, LoadSessionResponse, McpCapabilities, McpServer, NewSessionRequest,
    NewSessionResponse, PermissionOption, PermissionOptionKind, Plan, PlanEntry, PlanEntryPriority,
    PlanEntryStatus, PromptCapabilities, PromptRequest, PromptResponse, ReadTextFileRequest,
    ReleaseTerminalRequest, RequestPermissionOutcome, RequestPermissionRequest,
    SessionConfigOption, SessionConfigOptionValue, SessionConfigSelectOption, SessionId,
    SessionMode, SessionModeState, SessionNotification, SessionUpdate,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest,
    SetSessionModeResponse, StopReason, TerminalOutputRequest, ToolCall, ToolCallContent,
    ToolCallLocation, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind, UsageUpdate,
    WaitForTerminalExitRequest, WriteTextFileRequest,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{
    Agent, Client, Error, Lines, on_receive_notification, on_receive_request,
};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _};
use tokio_util::sync::CancellationToken;

use crate::acp::transport;
use script::{Action, Script};

/// A setting of each session (its mode, its model), by session id.
type PerSession = Arc<Mutex<HashMap<String, String>>>;

/// The models the demo agent offers as its `model` config option (id, name); the first is the
/// default.
const MODELS: [(&str, &str); 2] = [("quick", "Quick"), ("careful", "Careful")];

/// The `model` config option with `current` chosen.
fn model_option(current: &str) -> SessionConfigOption {
    let choices: Vec<SessionConfigSelectOption> = MODELS
        .iter()
        .map(|(id, name)| SessionConfigSelectOption::new(*id, *name))
        .collect();
    SessionConfigOption::select("model", "Model", current.to_owned(), choices)
}

/// With `AGENTLS_DEMO_REQUIRE_LOGIN` set, the agent behaves like one whose user has not logged
/// in: it lists a login method and refuses to open sessions (for trying agentls's message).
fn requires_login() -> bool {
    std::env::var_os("AGENTLS_DEMO_REQUIRE_LOGIN").is_some_and(|v| !v.is_empty())
}

/// The size of the `@bigline` chunk and noise line.
const BIG_LINE: usize = 10 * 1024 * 1024;

/// The protocol output, shared so that test hooks can write raw lines between messages.
type SharedStdout = Arc<tokio::sync::Mutex<Box<dyn AsyncWrite + Send + Unpin>>>;
type Turns = Arc<Mutex<HashMap<String, CancellationToken>>>;
/// What each loaded session held, until its next turn recalls it.
type Recalled = Arc<Mutex<HashMap<String, Vec<history::Exchange>>>>;
/// The MCP servers each session was given.
type Servers = Arc<Mutex<HashMap<String, Vec<McpServer>>>>;

/// With `AGENTLS_DEMO_MCP=stdio` the agent advertises no HTTP MCP servers (as agents that take
/// only stdio ones).
fn mcp_over_http() -> bool {
    std::env::var("AGENTLS_DEMO_MCP").map_or(true, |v| v != "stdio")
}

/// Keeps the MCP servers session `id` was given; with `AGENTLS_DEMO_RECORD_MCP=<file>` they
/// are also appended there, a JSON line each (for tests that need the tokens).
fn keep_servers(servers: &Servers, id: &str, given: Vec<McpServer>) {
    if let Some(path) = std::env::var_os("AGENTLS_DEMO_RECORD_MCP") {
        let line = serde_json::json!({"session": id, "mcpServers": given});
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()));
        if let Err(e) = appended {
            tracing::warn!("demo agent: cannot record the MCP servers: {e}");
        }
    }
    servers
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(id.to_owned(), given);
}

/// The modes and config options of a session as it opens.
fn new_settings() -> (SessionModeState, Vec<SessionConfigOption>) {
    let modes = SessionModeState::new(
        "ask",
        vec![
            SessionMode::new("ask", "Ask").description("propose edits for review".to_owned()),
            SessionMode::new("read-only", "Read only")
                .description("never propose edits".to_owned()),
        ],
    );
    (modes, vec![model_option(MODELS[0].0)])
}

/// Its slash commands, as agents advertise them once a session exists.
fn announce_commands(cx: &ConnectionTo<Client>, session: String) -> Result<(), Error> {
    let commands = vec![AvailableCommand::new("help", "What the demo agent can do")];
    cx.send_notification(SessionNotification::new(
        session,
        SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands)),
    ))
}

/// Serves ACP on `input`/`output` (the process's stdin/stdout) until the input closes.
pub async fn run(
    input: impl AsyncRead + Send + Unpin + 'static,
    output: impl AsyncWrite + Send + Unpin + 'static,
) -> Result<(), Error> {
    let stdout: SharedStdout = Arc::new(tokio::sync::Mutex::new(Box::new(output)));
    let sink = futures::sink::unfold(Arc::clone(&stdout), |out, line: String| async move {
        write_line(&out, &line).await?;
        Ok::<_, std::io::Error>(out)
    });
    let incoming = transport::incoming_messages(
        input,
        Arc::new(|skipped| tracing::warn!(?skipped, "demo agent: skipped input")),
        None,
    );
    let turns: Turns = Arc::default();
    let modes: PerSession = Arc::default();
    let models: PerSession = Arc::default();
    let history = Arc::new(history::History::from_env());
    let recalled: Recalled = Arc::default();
    let servers: Servers = Arc::default();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    Agent
        .v1()
        .name("agentls-demo")
        .on_receive_request(
            async move |init: InitializeRequest, responder: Responder<InitializeResponse>, _cx| {
                let capabilities = AgentCapabilities::new()
                    .load_session(true)
                    .mcp_capabilities(McpCapabilities::new().http(mcp_over_http()))
                    .prompt_capabilities(PromptCapabilities::new().embedded_context(true));
                let mut response = InitializeResponse::new(init.protocol_version)
                    .agent_capabilities(capabilities)
                    .agent_info(Implementation::new(
                        "agentls-demo",
                        env!("CARGO_PKG_VERSION"),
                    ));
                if requires_login() {
                    let login = AuthMethodAgent::new("demo-login", "Demo login")
                        .description("set AGENTLS_DEMO_REQUIRE_LOGIN to nothing".to_owned());
                    response = response.auth_methods(vec![AuthMethod::Agent(login)]);
                }
                responder.respond(response)
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let (history, servers) = (Arc::clone(&history), Arc::clone(&servers));
                async move |request: NewSessionRequest,
                            responder: Responder<NewSessionResponse>,
                            cx: ConnectionTo<Client>| {
                    if requires_login() {
                        return responder.respond_with_error(Error::auth_required());
                    }
                    let id = history.new_session();
                    keep_servers(&servers, &id, request.mcp_servers);
                    let (modes, options) = new_settings();
                    let response = NewSessionResponse::new(id.clone())
                        .modes(modes)
                        .config_options(options);
                    responder.respond(response)?;
                    announce_commands(&cx, id)
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let (history, recalled) = (Arc::clone(&history), Arc::clone(&recalled));
                let servers = Arc::clone(&servers);
                async move |request: LoadSessionRequest,
                            responder: Responder<LoadSessionResponse>,
                            cx: ConnectionTo<Client>| {
                    let id = request.session_id.to_string();
                    let Some(exchanges) = history.load(&id) else {
                        let why = format!("the demo agent keeps no session {id}");
                        return responder.respond_with_error(Error::invalid_params().data(why));
                    };
                    keep_servers(&servers, &id, request.mcp_servers);
                    for exchange in &exchanges {
                        for (text, user) in [(&exchange.user, true), (&exchange.agent, false)] {
                            let chunk = ContentChunk::new(ContentBlock::from(text.as_str()));
                            let update = if user {
                                SessionUpdate::UserMessageChunk(chunk)
                            } else {
                                SessionUpdate::AgentMessageChunk(chunk)
                            };
                            cx.send_notification(SessionNotification::new(id.clone(), update))?;
                        }
                    }
                    recalled
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(id.clone(), exchanges);
                    let (modes, options) = new_settings();
                    let response = LoadSessionResponse::new()
                        .modes(modes)
                        .config_options(options);
                    responder.respond(response)?;
                    announce_commands(&cx, id)
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let modes = Arc::clone(&modes);
                async move |request: SetSessionModeRequest,
                            responder: Responder<SetSessionModeResponse>,
                            _cx| {
                    modes
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(request.session_id.to_string(), request.mode_id.to_string());
                    responder.respond(SetSessionModeResponse::new())
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let models = Arc::clone(&models);
                async move |request: SetSessionConfigOptionRequest,
                            responder: Responder<SetSessionConfigOptionResponse>,
                            _cx| {
                    let chosen = match &request.value {
                        SessionConfigOptionValue::ValueId { value } => value.to_string(),
                        _ => String::new(),
                    };
                    if request.config_id.to_string() != "model"
                        || !MODELS.iter().any(|(id, _)| *id == chosen)
                    {
                        let why = format!("no option {} = {chosen:?}", request.config_id);
                        return responder.respond_with_error(Error::invalid_params().data(why));
                    }
                    models
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(request.session_id.to_string(), chosen.clone());
                    responder.respond(SetSessionConfigOptionResponse::new(vec![model_option(
                        &chosen,
                    )]))
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let (turns, stdout) = (Arc::clone(&turns), Arc::clone(&stdout));
                async move |request: PromptRequest,
                            responder: Responder<PromptResponse>,
                            cx: ConnectionTo<Client>| {
                    let token = CancellationToken::new();
                    let session = request.session_id.clone();
                    turns
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(session.to_string(), token.clone());
                    let read_only = modes
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get(session.0.as_ref())
                        .is_some_and(|m| m == "read-only");
                    let model = models
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get(session.0.as_ref())
                        .cloned();
                    let recalled = recalled
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(session.0.as_ref());
                    let given = servers
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get(session.0.as_ref())
                        .cloned()
                        .unwrap_or_default();
                    let prompt = prompt_text(&request.prompt);
                    let mut script = script::parse(&prompt.text, &prompt.uris, &cwd);
                    if read_only {
                        script.action = Action::Read;
                    }
                    let (turns, stdout) = (Arc::clone(&turns), Arc::clone(&stdout));
                    let history = Arc::clone(&history);
                    cx.clone().spawn(async move {
                        let turn = Turn {
                            model,
                            recalled,
                            servers: given,
                            said: Mutex::default(),
                            cx: &cx,
                            session: session.clone(),
                            cancel: token.clone(),
                        };
                        let work = run_turn(&turn, &script, &prompt, &stdout);
                        let result = if script.deaf || script.ask_after_cancel.is_some() {
                            work.await
                        } else {
                            tokio::select! {
                                result = work => result,
                                () = token.cancelled() => Ok(StopReason::Cancelled),
                            }
                        };
                        turns
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .remove(session.0.as_ref());
                        history.append(&session.0, &prompt.text, &turn.said());
                        let _ = responder.respond_with_result(result.map(PromptResponse::new));
                        if script.late {
                            turn.late_tool_call().await?;
                        }
                        Ok(())
                    })
                }
            },
            on_receive_request!(),
        )
        .on_receive_notification(
            async move |note: CancelNotification, _cx| {
                let turns = turns.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(token) = turns.get(note.session_id.0.as_ref()) {
                    token.cancel();
                }
                Ok(())
            },
            on_receive_notification!(),
        )
        .connect_to(Lines::new(sink, incoming))
        .await
}

async fn write_line(out: &SharedStdout, line: &str) -> std::io::Result<()> {
    let mut out = out.lock().await;
    out.write_all(format!("{line}\n").as_bytes()).await?;
    out.flush().await
}

/// One turn, following the prompt's script.
async fn run_turn(
    turn: &Turn<'_>,
    script: &Script,
    prompt: &PromptText,
    stdout: &SharedStdout,
) -> Result<StopReason, Error> {
    if script.noise {
        write_line(stdout, "demo-agent: this line is debug noise, not JSON")
            .await
            .map_err(Error::into_internal_error)?;
    }
    for chunk in ["Hello", " from the", " demo agent.", "\n"] {
        turn.say(chunk)?;
    }
    if let Some(model) = &turn.model {
        turn.say(&format!("I think with the {model} model.\n"))?;
    }
    if let Some(recalled) = &turn.recalled {
        let first = recalled.first().map_or("", |e| e.user.as_str());
        let count = match recalled.len() {
            1 => "1 earlier message".to_owned(),
            n => format!("{n} earlier messages"),
        };
        turn.say(&format!(
            "I recall this session: {count}; the first was \"{first}\".\n"
        ))?;
    }
    if script.help {
        turn.say(script::HELP)?;
        return Ok(StopReason::EndTurn);
    }
    for note in &prompt.notes {
        turn.say(&format!("agentls told me: {note}\n"))?;
    }
    for (uri, lines, bytes) in &prompt.embedded {
        turn.say(&format!(
            "I was given {uri}: {lines} lines ({bytes} bytes)\n"
        ))?;
    }
    if script.tools {
        for line in editor_tools::report(&turn.servers, script.path.as_deref()).await {
            turn.say(&line)?;
        }
        return Ok(StopReason::EndTurn);
    }
    if script.crash {
        tracing::error!("demo-agent: crashing on purpose (@crash)");
        std::process::exit(3);
    }
    if script.big_line {
        turn.say(&"x".repeat(BIG_LINE))?;
        turn.say("\n")?;
        write_line(stdout, &"#".repeat(BIG_LINE))
            .await
            .map_err(Error::into_internal_error)?;
    }
    for i in 0..script.flood {
        if i > 0 && !script.pace.is_zero() {
            tokio::time::sleep(script.pace).await;
        }
        let chunk = script::flood_chunk(i, script.chunk_bytes);
        match chunk.split_once(' ') {
            Some((first, rest)) if script.split => {
                turn.say(first)?;
                tokio::time::sleep(script.pace).await;
                turn.say(&format!(" {rest}"))?;
            }
            _ => turn.say(&chunk)?,
        }
    }
    if let Some(wait) = script.ask_after_cancel {
        turn.say("Waiting until you cancel…\n")?;
        turn.cancel.cancelled().await;
        tokio::time::sleep(wait).await;
        let outcome = turn.ask("Run one more thing after the cancel").await?;
        turn.say(&format!(
            "After the cancel my question was answered {outcome:?}.\n"
        ))?;
        return Ok(StopReason::EndTurn);
    }
    if script.hang || script.deaf {
        turn.say("Waiting until you cancel…\n")?;
        std::future::pending::<()>().await;
    }
    let cwd = script.cwd.as_deref();
    if let Some(command) = &script.run {
        return turn.ask_and_run(command, None, cwd).await;
    }
    if script.ask {
        let command = ["echo".to_owned(), "demo terminal output".to_owned()];
        return turn.ask_and_run(&command, Some(1000), cwd).await;
    }
    let Some(path) = script.path.clone() else {
        turn.say("Name a file in the workspace, e.g. `uppercase the TODO lines in notes.txt`.\n")?;
        return Ok(StopReason::EndTurn);
    };
    let mut files = vec![path];
    files.extend(script.also.iter().cloned());
    turn.edit(script, &files).await
}

/// What a prompt holds for the demo agent.
struct PromptText {
    /// The user's text, blocks joined by newlines.
    text: String,
    /// The URIs of its resources.
    uris: Vec<String>,
    /// What agentls told the agent (`(From agentls) …` blocks), without the prefix.
    notes: Vec<String>,
    /// The embedded resources: their URIs and how many lines and bytes they hold.
    embedded: Vec<(String, usize, usize)>,
}

/// The prompt's text, the URIs of its resources, and agentls's notes (kept apart so that a
/// file a note names is not taken for the file the user means).
fn prompt_text(prompt: &[ContentBlock]) -> PromptText {
    let mut text = String::new();
    let mut uris = Vec::new();
    let mut notes = Vec::new();
    let mut embedded = Vec::new();
    for block in prompt {
        match block {
            ContentBlock::Text(t) => match t.text.strip_prefix("(From agentls) ") {
                Some(note) => notes.push(note.to_owned()),
                None => {
                    text.push_str(&t.text);
                    text.push('\n');
                }
            },
            ContentBlock::ResourceLink(link) => uris.push(link.uri.clone()),
            ContentBlock::Resource(resource) => {
                if let EmbeddedResourceResource::TextResourceContents(r) = &resource.resource {
                    uris.push(r.uri.clone());
                    embedded.push((r.uri.clone(), r.text.lines().count(), r.text.len()));
                }
            }
            _ => {}
        }
    }
    PromptText {
        text,
        uris,
        notes,
        embedded,
    }
}

struct Turn<'a> {
    /// The model the user chose for the session (`None`: the default).
    model: Option<String>,
    /// What the session held when it was loaded, for its first turn since.
    recalled: Option<Vec<history::Exchange>>,
    /// The MCP servers the session was given.
    servers: Vec<McpServer>,
    /// What it said in this turn (its start).
    said: Mutex<String>,
    cx: &'a ConnectionTo<Client>,
    session: SessionId,
    /// Cancelled by `session/cancel`.
    cancel: CancellationToken,
}

impl Turn<'_> {
    /// What it said in this turn (its start).
    fn said(&self) -> String {
        self.said.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn update(&self, update: SessionUpdate) -> Result<(), Error> {
        self.cx
            .send_notification(SessionNotification::new(self.session.clone(), update))
    }

    fn say(&self, text: &str) -> Result<(), Error> {
        let mut said = self.said.lock().unwrap_or_else(|e| e.into_inner());
        if said.len() < 2_000 {
            said.push_str(text);
        }
        drop(said);
        self.update(SessionUpdate::AgentMessageChunk(ContentChunk::new(
            ContentBlock::from(text),
        )))
    }

    fn tool_status(&self, id: &str, status: ToolCallStatus) -> Result<(), Error> {
        self.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            id.to_owned(),
            ToolCallUpdateFields::new().status(status),
        )))
    }

    fn plan(&self, done: usize) -> Result<(), Error> {
        let steps = ["Read the file", "Propose the change", "Write it"];
        let entries = steps
            .iter()
            .enumerate()
            .map(|(i, step)| {
                let status = match i.cmp(&done) {
                    std::cmp::Ordering::Less => PlanEntryStatus::Completed,
                    std::cmp::Ordering::Equal => PlanEntryStatus::InProgress,
                    std::cmp::Ordering::Greater => PlanEntryStatus::Pending,
                };
                PlanEntry::new(*step, PlanEntryPriority::Medium, status)
            })
            .collect();
        self.update(SessionUpdate::Plan(Plan::new(entries)))
    }

    /// Read, propose, and (if allowed) write. Several files are proposed in one permission
    /// request (one diff each).
    async fn edit(&self, script: &Script, files: &[PathBuf]) -> Result<StopReason, Error> {
        let names = |paths: &mut dyn Iterator<Item = &PathBuf>| {
            paths
                .map(|p| crate::editor::file_name(p))
                .collect::<Vec<_>>()
                .join(" and ")
        };
        self.update(SessionUpdate::AgentThoughtChunk(ContentChunk::new(
            ContentBlock::from(format!(
                "The user wants me to {} {}.\n",
                script.action.describe(),
                names(&mut files.iter())
            )),
        )))?;
        self.plan(0)?;
        let mut changes = Vec::new();
        for (i, path) in files.iter().enumerate() {
            let old = if script.blind {
                Some(self.reread(path, true).await?)
            } else {
                self.read(&format!("read-{}", i + 1), path).await?
            };
            let Some(old) = old else {
                return Ok(StopReason::EndTurn);
            };
            if let Some(new) = script.action.apply(&old) {
                changes.push((path.clone(), old, new));
            }
        }
        if changes.is_empty() {
            self.say("Nothing to change.\n")?;
            return Ok(StopReason::EndTurn);
        }
        self.plan(1)?;
        let changed = names(&mut changes.iter().map(|(path, ..)| path));
        let title = format!("Edit {changed}");
        let diffs: Vec<_> = changes
            .iter()
            .map(|(path, old, new)| {
                let (old, new) = if script.snippet {
                    script::changed_lines(old, new)
                } else {
                    (old.clone(), new.clone())
                };
                let diff = Diff::new(path.clone(), new);
                ToolCallContent::Diff(if script.blind {
                    diff
                } else {
                    diff.old_text(old)
                })
            })
            .collect();
        let locations = changes
            .iter()
            .map(|(path, ..)| ToolCallLocation::new(path.clone()))
            .collect();
        self.update(SessionUpdate::ToolCall(
            ToolCall::new("edit-1", title.clone())
                .kind(ToolKind::Edit)
                .status(ToolCallStatus::Pending)
                .content(diffs.clone())
                .locations(locations),
        ))?;
        if !script.unasked
            && let Some(stop) = self.ask_to_edit(script, title, diffs).await?
        {
            return Ok(stop);
        }
        self.plan(2)?;
        for (path, old, new) in changes {
            // As real edit tools do: read the file again and replace each old text where it is
            // (a write tool writes the whole file it made).
            let replaced = if script.blind {
                Some(new)
            } else {
                let now = self.reread(&path, script.disk_write).await?;
                script::replace_each(&now, &old, &new)
            };
            let Some(mut new) = replaced else {
                self.tool_status("edit-1", ToolCallStatus::Failed)?;
                self.say(&format!(
                    "Edit failed: could not find the text to replace in {}\n",
                    crate::editor::file_name(&path)
                ))?;
                return Ok(StopReason::EndTurn);
            };
            if script.write_more {
                new.push_str("// and something I never proposed\n");
            }
            let write = if script.disk_write {
                tokio::fs::write(&path, new)
                    .await
                    .map_err(|e| Error::internal_error().data(e.to_string()))
            } else {
                self.cx
                    .send_request(WriteTextFileRequest::new(self.session.clone(), path, new))
                    .block_task()
                    .await
                    .map(drop)
            };
            if let Err(e) = write {
                self.tool_status("edit-1", ToolCallStatus::Failed)?;
                self.say(&format!(
                    "Write failed: {} ({})\n",
                    e.message,
                    e.code.value()
                ))?;
                return Ok(StopReason::EndTurn);
            }
        }
        self.tool_status("edit-1", ToolCallStatus::Completed)?;
        self.plan(3)?;
        self.update(SessionUpdate::UsageUpdate(UsageUpdate::new(1200, 200_000)))?;
        self.say(&format!(
            "Done: I {} {changed}.\n",
            script.action.describe()
        ))?;
        Ok(StopReason::EndTurn)
    }

    /// Asks for permission to make the edit; `Some` with how the turn ends when not allowed.
    async fn ask_to_edit(
        &self,
        script: &Script,
        title: String,
        diffs: Vec<ToolCallContent>,
    ) -> Result<Option<StopReason>, Error> {
        let permission = RequestPermissionRequest::new(
            self.session.clone(),
            ToolCallUpdate::new(
                "edit-1",
                if script.diff_earlier {
                    // The diffs went with the tool call; the request only names it.
                    ToolCallUpdateFields::new().title(title)
                } else {
                    ToolCallUpdateFields::new().title(title).content(diffs)
                },
            ),
            vec![
                PermissionOption::new("allow", "Allow", PermissionOptionKind::AllowOnce),
                PermissionOption::new("reject", "Reject", PermissionOptionKind::RejectOnce),
            ],
        );
        let asking = std::time::Instant::now();
        let asked = self.cx.send_request(permission).block_task();
        let answer = match script.withdraw_after {
            None => asked.await?,
            Some(delay) => tokio::select! {
                answer = asked => answer?,
                // Dropping the request sends `$/cancel_request`: the proposal is taken back.
                () = tokio::time::sleep(delay) => {
                    self.say("I took my proposal back.\n")?;
                    return Ok(Some(StopReason::EndTurn));
                }
            },
        };
        if script.timed {
            let micros = asking.elapsed().as_micros();
            self.say(&format!("The permission was answered in {micros} µs.\n"))?;
        }
        let allowed = match &answer.outcome {
            RequestPermissionOutcome::Selected(selected) => {
                selected.option_id.0.as_ref() == "allow"
            }
            RequestPermissionOutcome::Cancelled => return Ok(Some(StopReason::Cancelled)),
            _ => false,
        };
        if !allowed {
            self.tool_status("edit-1", ToolCallStatus::Failed)?;
            self.say("The change was not allowed; nothing was written.\n")?;
            return Ok(Some(StopReason::EndTurn));
        }
        Ok(None)
    }

    /// The text of `path` as an edit tool finds it: from the disk, or through `fs/read_text_file`
    /// (a missing file is empty).
    async fn reread(&self, path: &Path, from_disk: bool) -> Result<String, Error> {
        if from_disk {
            return Ok(tokio::fs::read_to_string(path).await.unwrap_or_default());
        }
        let request = ReadTextFileRequest::new(self.session.clone(), path.to_path_buf());
        let read = self.cx.send_request(request).block_task().await?;
        Ok(read.content)
    }

    /// Reads `path` through `fs/read_text_file` as tool call `id`; `None` (after saying why)
    /// when it could not.
    async fn read(&self, id: &str, path: &Path) -> Result<Option<String>, Error> {
        let file = crate::editor::file_name(path);
        self.update(SessionUpdate::ToolCall(
            ToolCall::new(id.to_owned(), format!("Read {file}"))
                .kind(ToolKind::Read)
                .status(ToolCallStatus::InProgress)
                .locations(vec![ToolCallLocation::new(path.to_path_buf())]),
        ))?;
        let read = self
            .cx
            .send_request(ReadTextFileRequest::new(
                self.session.clone(),
                path.to_path_buf(),
            ))
            .block_task()
            .await;
        match read {
            Ok(response) => {
                self.tool_status(id, ToolCallStatus::Completed)?;
                let lines = response.content.lines().count();
                self.say(&format!("{file} has {lines} lines.\n"))?;
                Ok(Some(response.content))
            }
            Err(e) => {
                self.tool_status(id, ToolCallStatus::Failed)?;
                self.say(&format!(
                    "Could not read {}: {} ({})\n",
                    path.display(),
                    e.message,
                    e.code.value()
                ))?;
                Ok(None)
            }
        }
    }

    /// A permission without a diff; if allowed, `command` in a terminal (its output capped at
    /// `limit` bytes, or only by agentls; in `cwd` if given).
    async fn ask_and_run(
        &self,
        command: &[String],
        limit: Option<u64>,
        cwd: Option<&std::path::Path>,
    ) -> Result<StopReason, Error> {
        let Some((program, args)) = command.split_first() else {
            self.say("Name a command after @run.\n")?;
            return Ok(StopReason::EndTurn);
        };
        let title = format!("Run `{}`", command.join(" "));
        let allowed = match &self.ask(&title).await? {
            RequestPermissionOutcome::Selected(selected) => selected.option_id.0.as_ref() == "yes",
            RequestPermissionOutcome::Cancelled => return Ok(StopReason::Cancelled),
            _ => false,
        };
        if !allowed {
            self.tool_status("run-1", ToolCallStatus::Failed)?;
            self.say("Not running it.\n")?;
            return Ok(StopReason::EndTurn);
        }
        let session = self.session.clone();
        let mut create =
            CreateTerminalRequest::new(session.clone(), program.clone()).args(args.to_vec());
        if let Some(limit) = limit {
            create = create.output_byte_limit(limit);
        }
        if let Some(cwd) = cwd {
            create = create.cwd(cwd.to_path_buf());
        }
        let terminal = match self.cx.send_request(create).block_task().await {
            Ok(terminal) => terminal,
            Err(e) => {
                self.tool_status("run-1", ToolCallStatus::Failed)?;
                self.say(&format!(
                    "Could not run `{program}`: {} ({})\n",
                    e.message,
                    e.code.value()
                ))?;
                return Ok(StopReason::EndTurn);
            }
        };
        let id = terminal.terminal_id;
        let exit = self
            .cx
            .send_request(WaitForTerminalExitRequest::new(session.clone(), id.clone()))
            .block_task()
            .await?;
        let output = self
            .cx
            .send_request(TerminalOutputRequest::new(session.clone(), id.clone()))
            .block_task()
            .await?;
        self.cx
            .send_request(ReleaseTerminalRequest::new(session, id))
            .block_task()
            .await?;
        self.tool_status("run-1", ToolCallStatus::Completed)?;
        let printed = output.output.trim_end();
        let printed = if printed.len() <= 200 && !output.truncated {
            format!("{printed:?}")
        } else {
            format!(
                "{} bytes{}, ending with {:?},",
                output.output.len(),
                if output.truncated { " (truncated)" } else { "" },
                printed.lines().last().unwrap_or_default()
            )
        };
        self.say(&format!(
            "The command printed {printed} and exited with {:?}.\n",
            exit.exit_status.exit_code
        ))?;
        Ok(StopReason::EndTurn)
    }

    /// Asks to run something (tool call `run-1`, titled `title`): the user's answer.
    async fn ask(&self, title: &str) -> Result<RequestPermissionOutcome, Error> {
        self.update(SessionUpdate::ToolCall(
            ToolCall::new("run-1", title.to_owned())
                .kind(ToolKind::Execute)
                .status(ToolCallStatus::Pending),
        ))?;
        let permission = RequestPermissionRequest::new(
            self.session.clone(),
            ToolCallUpdate::new("run-1", ToolCallUpdateFields::new().title(title.to_owned())),
            vec![
                PermissionOption::new("yes", "Run it", PermissionOptionKind::AllowOnce),
                PermissionOption::new("no", "Don't run it", PermissionOptionKind::RejectOnce),
            ],
        );
        let answer = self.cx.send_request(permission).block_task().await?;
        Ok(answer.outcome)
    }

    /// A tool call, and an update of it, after the turn was answered (as agents that report a
    /// finished tool late do).
    async fn late_tool_call(&self) -> Result<(), Error> {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        self.update(SessionUpdate::ToolCall(
            ToolCall::new("late-1", "Late tool call")
                .kind(ToolKind::Edit)
                .status(ToolCallStatus::InProgress),
        ))?;
        self.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            "late-1",
            ToolCallUpdateFields::new()
                .title("Late tool call, finished".to_owned())
                .status(ToolCallStatus::Completed),
        )))
    }
}
