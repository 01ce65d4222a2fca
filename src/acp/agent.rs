//! One running agent: its process, its connection, what it said at `initialize`, and its
//! sessions. Every request to it races the process's exit and a deadline, so a dead or silent
//! agent becomes a classed [`AgentFailure`] instead of a hang.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CancelNotification, ClientCapabilities, EnvVariable, FileSystemCapabilities, HttpHeader,
    Implementation, InitializeRequest, InitializeResponse, LoadSessionRequest, McpServer,
    McpServerHttp, McpServerStdio, NewSessionRequest, SessionId,
};
use agent_client_protocol::{
    Agent, ErrorCode, JsonRpcRequest, is_connection_terminated, is_incoming_transport_closed,
};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::connection::{self, Connection};
use super::error::AgentFailure;
use super::link::AgentLink;
use super::process::{self, ChildProcess};
use super::session::SessionState;
use super::session_defaults;
use super::transport::{self, SkippedLine};
use super::updates;
use crate::config::AgentSpec;
use crate::editor::tool_grants::{self, Grant, Transport};
use crate::editor::{EditorAccess, Level, Origin, Withdrawal};

/// How long `initialize` and `session/new` may take (agents may install things on first run).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long quick requests (`session/set_mode`) may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The name of agentls's MCP server among a session's MCP servers.
const TOOLS_SERVER: &str = "agentls";
/// How long after a closed connection agentls waits for the exit status that explains it.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// What the agent said about itself at `initialize`.
#[derive(Debug, Clone)]
pub struct AgentInfo {
    /// Whether prompts may embed resources.
    pub embedded_context: bool,
    /// Whether it can load a session of an earlier run (`session/load`).
    pub load_session: bool,
    /// Whether it takes MCP servers over HTTP (`mcpCapabilities.http`); else over stdio, which
    /// every agent takes.
    pub mcp_http: bool,
    /// Its capabilities, as sent.
    pub capabilities: Value,
    /// Its authentication methods, as sent.
    pub auth_methods: Vec<Value>,
    /// Its name and version, as sent.
    pub implementation: Option<Value>,
}

/// Its turns running now, and whether the user was told it died: a turn that sees the death
/// reports it, and the death watcher then stays quiet.
#[derive(Debug, Default)]
struct Turns {
    running: usize,
    death_reported: bool,
    /// The user was told why it may not use the editor tools (`toolsHint`).
    tools_hint_told: bool,
}

/// A started, initialized agent.
#[derive(Debug)]
pub struct RunningAgent {
    /// State its handlers share.
    pub link: Arc<AgentLink>,
    /// Its process.
    pub process: ChildProcess,
    /// What it said at `initialize`.
    pub info: AgentInfo,
    turns: Mutex<Turns>,
    cx: ConnectionTo<Agent>,
    sessions: Mutex<Sessions>,
    stop: Mutex<Option<oneshot::Sender<()>>>,
    spec: AgentSpec,
}

impl RunningAgent {
    /// Counts a turn in; `true` if it is the only one (the agent starts working).
    pub fn begin_turn(&self) -> bool {
        let mut turns = self.lock_turns();
        turns.running += 1;
        turns.running == 1
    }

    /// Counts a turn out; `true` if it was the last one (the agent stops working).
    pub fn end_turn(&self) -> bool {
        let mut turns = self.lock_turns();
        turns.running = turns.running.saturating_sub(1);
        turns.running == 0
    }

    /// Whether a turn runs.
    pub fn prompting(&self) -> bool {
        self.lock_turns().running > 0
    }

    /// Notes that the user was told the process died (or why it is being stopped).
    pub fn report_death(&self) {
        self.lock_turns().death_reported = true;
    }

    /// Whether the user needs no word of its death: a turn runs (it reports the death) or the
    /// user was told already.
    pub fn death_told(&self) -> bool {
        let turns = self.lock_turns();
        turns.running > 0 || turns.death_reported
    }

    /// Whether the user was told it died.
    pub fn death_reported(&self) -> bool {
        self.lock_turns().death_reported
    }

    fn lock_turns(&self) -> std::sync::MutexGuard<'_, Turns> {
        self.turns.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Why it may not use the editor tools (`agents.<name>.toolsHint`), the first time this is
    /// asked; `None` after that, or when nothing is known.
    pub fn tools_hint_once(&self) -> Option<&str> {
        let hint = self.spec.tools_hint.as_deref()?;
        let told = std::mem::replace(&mut self.lock_turns().tools_hint_told, true);
        (!told).then_some(hint)
    }

    /// The folders where it keeps its own state (`agents.<name>.ownFiles`), under `cwd`.
    pub fn own_files(&self, cwd: &Path) -> Vec<PathBuf> {
        self.spec.own_files.iter().map(|d| cwd.join(d)).collect()
    }

    /// Spawns `spec` as `name` in `cwd`, connects and initializes it.
    pub async fn start(
        name: &str,
        spec: &AgentSpec,
        cwd: PathBuf,
        editor: EditorAccess,
    ) -> Result<Arc<Self>, AgentFailure> {
        let (process, pipes) = process::spawn_agent(name, spec, &cwd)?;
        let link = Arc::new(AgentLink::new(name, editor.clone(), cwd));
        let agent = name.to_owned();
        let on_skipped: transport::OnSkipped = Arc::new(move |skipped| {
            let text = match skipped {
                SkippedLine::NotJson(start) => {
                    format!("{agent}: skipped a non-JSON line on its stdout: {start}\n")
                }
                SkippedLine::TooLong(bytes) => {
                    format!("{agent}: skipped a {bytes}-byte line on its stdout (too long)\n")
                }
            };
            tracing::warn!("{}", text.trim_end());
            editor.log(Level::Warning, text);
        });
        let direct = transport::Direct {
            apply: Box::new({
                let link = Arc::clone(&link);
                move |note| updates::apply(&link, note)
            }),
            dispatched: Arc::clone(&link.dispatched),
        };
        let lines = transport::lines(pipes.stdin, pipes.stdout, on_skipped, Some(direct));
        let connected = tokio::select! {
            connected = connection::connect(Arc::clone(&link), lines) => connected,
            status = process.wait() => return Err(process.died(status).await),
        };
        let Some(Connection { cx, stop }) = connected else {
            // Not left running: nothing would ever stop or reap it.
            process.terminate(Duration::from_millis(200)).await;
            return Err(AgentFailure::Protocol(
                "the connection closed at once".into(),
            ));
        };
        let mut agent = Self {
            link,
            process,
            info: AgentInfo {
                embedded_context: false,
                load_session: false,
                mcp_http: false,
                capabilities: Value::Null,
                auth_methods: Vec::new(),
                implementation: None,
            },
            turns: Mutex::default(),
            cx,
            sessions: Mutex::default(),
            stop: Mutex::new(Some(stop)),
            spec: spec.clone(),
        };
        let initialize = InitializeRequest::new(ProtocolVersion::V1)
            .client_capabilities(
                ClientCapabilities::new()
                    .fs(FileSystemCapabilities::new()
                        .read_text_file(true)
                        .write_text_file(true))
                    .terminal(true),
            )
            .client_info(Implementation::new("agentls", env!("CARGO_PKG_VERSION")));
        let result = agent
            .request(initialize, "initialize", Some(HANDSHAKE_TIMEOUT))
            .await;
        let init: InitializeResponse = match result {
            Ok(init) => {
                // The SDK takes notifications now: session updates may bypass it.
                agent.link.dispatched.start();
                init
            }
            Err(failure) => {
                agent.stop(Duration::from_millis(200)).await;
                return Err(failure);
            }
        };
        agent.info = AgentInfo {
            embedded_context: init.agent_capabilities.prompt_capabilities.embedded_context,
            load_session: init.agent_capabilities.load_session,
            mcp_http: init.agent_capabilities.mcp_capabilities.http,
            capabilities: serde_json::to_value(&init.agent_capabilities).unwrap_or_default(),
            auth_methods: init
                .auth_methods
                .iter()
                .filter_map(|m| serde_json::to_value(m).ok())
                .collect(),
            implementation: init
                .agent_info
                .as_ref()
                .and_then(|i| serde_json::to_value(i).ok()),
        };
        Ok(Arc::new(agent))
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.link.agent
    }

    /// How it was configured.
    pub fn spec(&self) -> &AgentSpec {
        &self.spec
    }

    /// Sends `request` at once (requests reach the agent in the order of these calls) and
    /// returns the wait for the answer, the process's death, or `limit`.
    pub fn request<Req: JsonRpcRequest>(
        &self,
        request: Req,
        what: &'static str,
        limit: Option<Duration>,
    ) -> impl std::future::Future<Output = Result<Req::Response, AgentFailure>> + '_ {
        let answer = self.cx.send_request(request).block_task();
        self.answer_of(answer, what, limit)
    }

    async fn answer_of<R>(
        &self,
        answer: impl std::future::Future<Output = Result<R, agent_client_protocol::Error>>,
        what: &'static str,
        limit: Option<Duration>,
    ) -> Result<R, AgentFailure> {
        let deadline = async {
            match limit {
                Some(limit) => tokio::time::sleep(limit).await,
                None => std::future::pending().await,
            }
        };
        let outcome = tokio::select! {
            answer = answer => answer,
            status = self.process.wait() => return Err(self.process.died(status).await),
            () = deadline => {
                return Err(AgentFailure::Timeout { what, secs: limit.unwrap_or_default().as_secs() })
            }
        };
        match outcome {
            Ok(response) => Ok(response),
            Err(e) if is_incoming_transport_closed(&e) || is_connection_terminated(&e) => {
                match self.process.wait_for(EXIT_GRACE).await {
                    Some(status) => Err(self.process.died(status).await),
                    None => {
                        // It lives on but cannot be talked to: stop it, so that the death
                        // watcher frees its slot and the next prompt starts it afresh. (This
                        // failure is what the user is told, not the death that follows.)
                        self.report_death();
                        self.process.terminate(EXIT_GRACE).await;
                        Err(AgentFailure::Protocol(format!(
                            "the agent closed its output while {what} was pending"
                        )))
                    }
                }
            }
            Err(e) if e.code == ErrorCode::AUTH_REQUIRED => Err(self.auth_required()),
            Err(e) => Err(AgentFailure::from_answer(&e)),
        }
    }

    /// The session prompts go to: the current one, else a new one.
    pub async fn session(&self) -> Result<String, AgentFailure> {
        if let Some(id) = self.current_session() {
            return Ok(id);
        }
        self.new_session().await
    }

    /// The session a prompt from the chat document `chat` goes to, made current: the one the
    /// chat talks to; else `earlier`, the chat's session of an earlier run, loaded where the
    /// agent can; else the current session when no chat has it yet; else a new one.
    pub async fn session_for(
        &self,
        chat: &Path,
        earlier: Option<&str>,
    ) -> Result<ChatSession, AgentFailure> {
        let taken_up = self.lock_sessions().take_up(chat);
        if let Some((id, replaced)) = taken_up {
            self.release(replaced);
            return Ok(ChatSession {
                id,
                how: Claimed::Already,
            });
        }
        if let Some(earlier) = earlier.filter(|_| self.info.load_session) {
            match self.load_session(earlier).await {
                Ok(()) => {
                    let replaced = self.lock_sessions().claim(chat, earlier);
                    self.release(replaced);
                    return Ok(ChatSession {
                        id: earlier.to_owned(),
                        how: Claimed::Loaded,
                    });
                }
                Err(failure) => self.link.editor.log(
                    Level::Warning,
                    format!(
                        "{}: the chat's earlier session did not load ({failure}); a new one \
                         is told the conversation\n",
                        self.name()
                    ),
                ),
            }
        }
        let unclaimed = self.lock_sessions().unclaimed();
        let id = match unclaimed {
            Some(id) => id,
            None => self.new_session().await?,
        };
        let replaced = self.lock_sessions().claim(chat, &id);
        self.release(replaced);
        Ok(ChatSession {
            id,
            how: Claimed::Given,
        })
    }

    /// The current session, if there is one.
    pub fn current_session(&self) -> Option<String> {
        self.lock_sessions().current.clone()
    }

    /// The session no longer current that nothing reaches (no chat talks to it, no command goes
    /// back to it): its state goes, and its editor-tools token with it, unless a turn or a
    /// question of it is still open (then it goes when its turn ends).
    fn release(&self, replaced: Option<String>) {
        if let Some(replaced) = replaced {
            self.link.forget_if_idle(&replaced);
        }
    }

    /// Forgets session `id` (and revokes its editor-tools token) when nothing can reach it any
    /// more: it is not current, no chat talks to it, and no turn or question of it is open.
    /// Called when its turn ends, so that sessions replaced meanwhile do not pile up.
    pub fn release_if_unreachable(&self, id: &str) {
        let reachable = {
            let sessions = self.lock_sessions();
            sessions.current.as_deref() == Some(id) || sessions.chats.values().any(|c| c == id)
        };
        if !reachable {
            self.link.forget_if_idle(id);
        }
    }

    fn lock_sessions(&self) -> std::sync::MutexGuard<'_, Sessions> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens a new session in the workspace and makes it current.
    pub async fn new_session(&self) -> Result<String, AgentFailure> {
        // The session's id comes with the answer: the grant names it then.
        let unknown = Origin::new(format!("acp:{}:", self.name()), self.name());
        let (servers, grant) = self.editor_tools(unknown).await;
        let request = NewSessionRequest::new(self.link.cwd.clone()).mcp_servers(servers);
        let answered = self
            .request(request, "session/new", Some(HANDSHAKE_TIMEOUT))
            .await;
        let (response, grant) = match answered {
            // Refused with the editor tools' server (an agent may take it once a process
            // only): a session without them beats none; the unused grant is revoked.
            Err(AgentFailure::Agent(refusal)) if grant.is_some() => {
                self.link.editor.log(
                    Level::Warning,
                    format!(
                        "{}: refused a session with agentls's editor tools ({refusal}); this \
                         session goes without them\n",
                        self.name()
                    ),
                );
                let bare = NewSessionRequest::new(self.link.cwd.clone());
                let response = self.request(bare, "session/new", Some(HANDSHAKE_TIMEOUT));
                (response.await?, None)
            }
            answered => (answered?, grant),
        };
        let id = response.session_id.to_string();
        let mut session = SessionState::new(self.name(), id.clone());
        session.take_settings(response.modes.as_ref(), response.config_options.as_ref());
        if let Some(grant) = &grant {
            grant.bind(session.origin.clone());
        }
        session.editor_tools = grant;
        for early in self.link.add_session(session) {
            super::updates::apply(&self.link, early);
        }
        let replaced = self.lock_sessions().make_current(&id);
        self.release(replaced);
        session_defaults::apply(self, &id).await;
        Ok(id)
    }

    /// The MCP server entry that offers session `origin` the editor's tools, in the transport
    /// the agent advertised (HTTP, else stdio through `agentls mcp-bridge`), and the grant to
    /// keep with the session; nothing when `agents.<name>.editorTools = false` or there is no
    /// listener.
    async fn editor_tools(&self, origin: Origin) -> (Vec<McpServer>, Option<Grant>) {
        if !self.spec.offers_editor_tools() {
            return (Vec::new(), None);
        }
        let transport = if self.info.mcp_http {
            Transport::Http
        } else {
            Transport::Stdio
        };
        let editor = &self.link.editor;
        let granted = editor.grant_tools(self.name(), origin, transport).await;
        let grant = match granted {
            Ok(grant) => grant,
            Err(why) => {
                editor.log(
                    Level::Warning,
                    format!("{}: no editor tools for its session: {why}\n", self.name()),
                );
                return (Vec::new(), None);
            }
        };
        let token = grant.token().as_str();
        let server = match transport {
            Transport::Http => {
                McpServer::Http(McpServerHttp::new(TOOLS_SERVER, grant.url()).headers(vec![
                    HttpHeader::new("Authorization", format!("Bearer {token}")),
                ]))
            }
            Transport::Stdio => {
                let me = std::env::current_exe().unwrap_or_else(|_| "agentls".into());
                McpServer::Stdio(
                    McpServerStdio::new(TOOLS_SERVER, me)
                        .args(grant.bridge_args())
                        .env(vec![EnvVariable::new(tool_grants::BRIDGE_TOKEN_VAR, token)]),
                )
            }
        };
        (vec![server], Some(grant))
    }

    /// Loads session `id` of an earlier run (`session/load`) and makes it current. The history
    /// the agent replays meanwhile updates the session's state but is not told again: the chat
    /// already shows it.
    async fn load_session(&self, id: &str) -> Result<(), AgentFailure> {
        let mut session = SessionState::new(self.name(), id.to_owned());
        session.replaying = true;
        let (servers, grant) = self.editor_tools(session.origin.clone()).await;
        session.editor_tools = grant;
        for early in self.link.add_session(session) {
            super::updates::apply(&self.link, early);
        }
        let request =
            LoadSessionRequest::new(SessionId::new(id), self.link.cwd.clone()).mcp_servers(servers);
        let loaded = self
            .request(request, "session/load", Some(HANDSHAKE_TIMEOUT))
            .await;
        let response = match loaded {
            Ok(response) => response,
            Err(failure) => {
                self.link.remove_session(id);
                return Err(failure);
            }
        };
        self.link.with_session(id, |s| {
            s.replaying = false;
            s.take_settings(response.modes.as_ref(), response.config_options.as_ref());
        });
        let replaced = self.lock_sessions().make_current(id);
        self.release(replaced);
        session_defaults::apply(self, id).await;
        Ok(())
    }

    /// Switches the current session to `mode`, one of the modes it offers.
    pub async fn set_mode(&self, mode: &str) -> Result<(), AgentFailure> {
        let session = self.session().await?;
        let modes = self
            .link
            .with_session(&session, |s| s.modes.clone())
            .flatten();
        if let Some(why) =
            session_defaults::unknown_mode(mode, &session_defaults::mode_ids(modes.as_ref()))
        {
            return Err(AgentFailure::NotOffered(why));
        }
        session_defaults::set_mode(self, &session, mode).await
    }

    /// Sets the current session's config option `id` to `value` (a model, say).
    pub async fn set_config_option(&self, id: &str, value: &str) -> Result<(), AgentFailure> {
        let session = self.session().await?;
        session_defaults::set_config_option(self, &session, id, value).await
    }

    /// Cancels the agent's running turns: `session/cancel` for each, and every pending permission
    /// request of them (and of the current session) answered `cancelled`. Returns whether a turn
    /// was running.
    pub fn cancel(&self) -> bool {
        let current = self.current_session();
        // Every session with a turn (a prompt may run on a session that is no longer current),
        // and the current one even when idle: their questions and reviews are withdrawn.
        let mut touched = Vec::new();
        self.link.each_session(|s| {
            let running = s.turn.as_ref().map(|t| t.cancel.cancel()).is_some();
            if running || current.as_deref() == Some(s.id.as_str()) {
                s.withdraw_permissions();
                touched.push((s.id.clone(), s.origin.clone(), running));
            }
        });
        let mut any_running = false;
        for (session, origin, running) in touched {
            self.link.editor.close_origin(&origin, Withdrawal::Silent);
            if !running {
                continue;
            }
            any_running = true;
            let cancel = CancelNotification::new(SessionId::new(session));
            if let Err(e) = self.cx.send_notification(cancel) {
                tracing::debug!(agent = self.name(), "session/cancel not sent: {e}");
            }
        }
        any_running
    }

    /// Everything the agent had open is withdrawn: permissions, questions, terminals.
    pub fn tear_down(&self) {
        let mut origins = Vec::new();
        self.link.each_session(|s| {
            s.withdraw_permissions();
            // The agent is gone: its sessions' tokens die now.
            s.editor_tools = None;
            origins.push(s.origin.clone());
        });
        for origin in &origins {
            self.link.editor.close_origin(origin, Withdrawal::Silent);
        }
        self.link.terminals.kill_all();
    }

    /// Stops the agent: `session/cancel` for running turns, stdin closed, SIGTERM, then SIGKILL
    /// of its process group after `grace`; returns once it is reaped.
    pub async fn stop(&self, grace: Duration) {
        // A dead agent's turns are failing, not being cancelled by the user.
        if self.prompting() && self.process.exited().is_none() {
            self.cancel();
        }
        self.tear_down();
        if let Some(stop) = self.stop.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = stop.send(());
        }
        if self.process.wait_for(grace / 2).await.is_none() {
            self.process.terminate(grace / 2).await;
        } else {
            self.process.signal_group(libc::SIGKILL);
        }
    }

    /// The failure to report when the agent asks for authentication.
    fn auth_required(&self) -> AgentFailure {
        let mut lines = Vec::new();
        for method in &self.info.auth_methods {
            let name = method["name"].as_str().unwrap_or("?");
            let description = method["description"]
                .as_str()
                .map(|d| format!(" — {d}"))
                .unwrap_or_default();
            if method["type"] == "terminal" {
                let args: Vec<&str> = method["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                lines.push(format!(
                    "run `{} {}` in a terminal ({name}){description}",
                    self.spec.command,
                    args.join(" ")
                ));
            } else {
                lines.push(format!("{name}{description}"));
            }
        }
        let how = if lines.is_empty() {
            "it offered no method".to_owned()
        } else {
            format!("it offers: {}", lines.join("; "))
        };
        AgentFailure::AuthRequired(format!(
            "agent `{}` needs you to log in; {how}. Log in by running `{}` once in a terminal \
             (or put the API key in `agents.{}.env` in your agentls config), then prompt again",
            self.name(),
            self.spec.command,
            self.name()
        ))
    }

    /// Its current session as `agentls.status` shows it (its modes, options and commands), or
    /// `null`: what a chat's header and `/` completion need, without the other sessions.
    pub fn describe_current(&self) -> Value {
        let Some(current) = self.current_session() else {
            return Value::Null;
        };
        self.link
            .with_session(&current, |s| s.describe(true))
            .unwrap_or(Value::Null)
    }

    /// The agent as `agentls.status` shows it.
    pub fn describe(&self) -> Value {
        let (current, chats) = {
            let sessions = self.lock_sessions();
            (sessions.current.clone(), sessions.chats.clone())
        };
        json!({
            "pid": self.process.pid,
            "agentInfo": self.info.implementation,
            "capabilities": self.info.capabilities,
            "authMethods": self.info.auth_methods,
            "currentSession": current,
            "sessions": self.link.describe_sessions(current.as_deref()),
            "chats": chats,
        })
    }
}

/// The session a chat's prompt goes to, and how the chat came by it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatSession {
    /// The session id.
    pub id: String,
    /// How the chat came by it.
    pub how: Claimed,
}

/// How a chat came by its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claimed {
    /// It talked to it before in this run.
    Already,
    /// Its session of an earlier run, loaded: the agent remembers the conversation.
    Loaded,
    /// A session new to the conversation (the current one no chat had, or a new one).
    Given,
}

/// Which session is whose: the current one (prompts from outside a chat, the pickers, new
/// sessions) and the one each chat document talks to.
#[derive(Debug, Default)]
struct Sessions {
    current: Option<String>,
    chats: HashMap<PathBuf, String>,
}

impl Sessions {
    /// The session `chat` talks to, made current; and the session that was current before when
    /// nothing reaches it now (see [`Self::make_current`]).
    fn take_up(&mut self, chat: &Path) -> Option<(String, Option<String>)> {
        let id = self.chats.get(chat)?.clone();
        let replaced = self.make_current(&id);
        Some((id, replaced))
    }

    /// `chat` talks to session `id` from now on, which is current; returns the session it
    /// replaces as current when nothing reaches that one now.
    fn claim(&mut self, chat: &Path, id: &str) -> Option<String> {
        self.chats.insert(chat.to_path_buf(), id.to_owned());
        self.make_current(id)
    }

    /// Makes `id` current; returns the session it replaces when no chat talks to that one.
    fn make_current(&mut self, id: &str) -> Option<String> {
        let replaced = self.current.replace(id.to_owned())?;
        let claimed = self.chats.values().any(|c| *c == replaced);
        (replaced != id && !claimed).then_some(replaced)
    }

    /// The current session when no chat talks to it.
    fn unclaimed(&self) -> Option<String> {
        let current = self.current.as_ref()?;
        (!self.chats.values().any(|id| id == current)).then(|| current.clone())
    }
}
