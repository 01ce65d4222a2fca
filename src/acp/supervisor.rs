//! The supervisor: the agents from the config, started lazily on first use, restarted after a
//! crash on the next prompt (with backoff against crash loops), and stopped on shutdown. This is
//! what the host holds; each command it offers returns at once and does its work in a task.
//! An agent's commands (prompt, new session, set mode) take effect in the order they arrived,
//! also while it starts: each agent has one queue, worked off by one task; a prompt lets the
//! next command through once its `session/prompt` is sent. A cancel acts at once on everything
//! before it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::agent::RunningAgent;
use super::context::{Prompt, PromptContext};
use super::error::AgentFailure;
use super::turn::{self, TurnEnd};
use crate::config::{AgentSpec, Config};
use crate::editor::documents::effects::ProgressPhase;
use crate::editor::{EditorAccess, Level};

/// Crashes older than this are forgiven.
const CRASH_WINDOW: Duration = Duration::from_secs(60);
/// The longest wait before a restart.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The environment variable tests set to cap the wait before a restart (in milliseconds), so
/// that a hundred deliberate kills do not add up to minutes of backoff; read once. It can only
/// shorten it.
const BACKOFF_VAR: &str = "AGENTLS_TEST_RESTART_BACKOFF_MS";
/// How long a stopping agent gets between SIGTERM and SIGKILL (and before SIGTERM).
const STOP_GRACE: Duration = Duration::from_secs(2);

/// The agents; clone freely.
#[derive(Debug, Clone)]
pub struct Agents {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    editor: EditorAccess,
    config: watch::Receiver<Config>,
    slots: Mutex<BTreeMap<String, Arc<Slot>>>,
    shutting_down: AtomicBool,
    /// Prompts so far (each one's number names its progress and its cancel token).
    prompts: AtomicU64,
}

/// One named agent, running or not: what it is now behind one lock, and a lock of its own that
/// one start at a time holds (across the start's awaits).
#[derive(Debug, Default)]
struct Slot {
    starting: tokio::sync::Mutex<()>,
    state: Mutex<SlotState>,
}

/// What a slot knows of its agent.
#[derive(Debug, Default)]
struct SlotState {
    /// The agent, while it runs.
    running: Option<Arc<RunningAgent>>,
    history: History,
    /// The cancel tokens of this agent's prompts (by number) until their turn ended, so that a
    /// cancel reaches a prompt still waiting for the agent to start.
    waiting: Vec<(u64, CancellationToken)>,
    /// The agent's command queue, once a command came.
    queue: Option<mpsc::UnboundedSender<(AgentSpec, Command)>>,
}

/// A prompt waiting for its turn.
#[derive(Debug)]
struct QueuedPrompt {
    /// Names its progress and its cancel token.
    number: u64,
    text: String,
    context: Vec<PromptContext>,
    /// The chat document the reply goes to.
    chat: Option<std::path::PathBuf>,
    /// What agentls tells the agent along with it.
    note: Option<String>,
    /// The comment prompt it answers.
    comment: Option<super::AnsweredComment>,
    cancel: CancellationToken,
}

/// A command for one agent, taking effect in arrival order.
#[derive(Debug)]
enum Command {
    /// Start a turn.
    Prompt(QueuedPrompt),
    /// Open a new session and make it current.
    NewSession,
    /// Switch the current session's mode.
    SetMode(String),
    /// Set one of the current session's config options: (option id, value id).
    SetOption(String, String),
}

#[derive(Debug, Default, Clone)]
struct History {
    crashes: Vec<Instant>,
    last_error: Option<String>,
    starts: u64,
}

impl Agents {
    /// The agents of the config in `config` (which the host keeps current), talking to `editor`.
    pub fn new(editor: EditorAccess, config: watch::Receiver<Config>) -> Self {
        Self {
            inner: Arc::new(Inner {
                editor,
                config,
                slots: Mutex::default(),
                shutting_down: AtomicBool::new(false),
                prompts: AtomicU64::new(0),
            }),
        }
    }

    /// The name of `agent`, else of the default agent, when it is configured.
    pub fn name_of(&self, agent: Option<&str>) -> Result<String, AgentFailure> {
        self.inner.resolve(agent).map(|(name, _)| name)
    }

    /// Starts a turn in the background; returns the agent's name at once, or why there is none.
    pub fn prompt(&self, prompt: Prompt) -> Result<String, AgentFailure> {
        let (name, spec) = self.inner.resolve(prompt.agent.as_deref())?;
        // Cancellable from now on, also while the agent is still starting.
        let cancel = CancellationToken::new();
        let number = self.inner.prompts.fetch_add(1, Ordering::Relaxed) + 1;
        self.inner
            .slot(&name)
            .lock()
            .waiting
            .push((number, cancel.clone()));
        self.inner.enqueue(
            &name,
            spec,
            Command::Prompt(QueuedPrompt {
                number,
                text: prompt.text,
                context: prompt.context,
                chat: prompt.chat,
                note: prompt.note,
                comment: prompt.comment,
                cancel,
            }),
        );
        Ok(name)
    }

    /// Cancels the agent's running turns, and its prompts still waiting for it to start;
    /// returns whether there was any.
    pub fn cancel(&self, agent: Option<&str>) -> Result<bool, AgentFailure> {
        let (name, _) = self.inner.resolve(agent)?;
        let waiting: Vec<CancellationToken> = (self.inner.slot(&name).lock().waiting.iter())
            .map(|(_, token)| token.clone())
            .collect();
        let any_waiting = waiting.iter().any(|t| !t.is_cancelled());
        waiting.iter().for_each(CancellationToken::cancel);
        let running = self.inner.running(&name).is_some_and(|a| a.cancel());
        Ok(running || any_waiting)
    }

    /// Opens a new session (starting the agent if needed) after the agent's earlier commands;
    /// the user is told.
    pub fn new_session(&self, agent: Option<&str>) -> Result<String, AgentFailure> {
        let (name, spec) = self.inner.resolve(agent)?;
        self.inner.enqueue(&name, spec, Command::NewSession);
        Ok(name)
    }

    /// Sets the current session's mode after the agent's earlier commands; the user is told.
    pub fn set_mode(&self, agent: Option<&str>, mode: String) -> Result<String, AgentFailure> {
        let (name, spec) = self.inner.resolve(agent)?;
        self.inner.enqueue(&name, spec, Command::SetMode(mode));
        Ok(name)
    }

    /// Sets a config option of the current session (its model, say) after the agent's earlier
    /// commands; the user is told.
    pub fn set_option(
        &self,
        agent: Option<&str>,
        option: String,
        value: String,
    ) -> Result<String, AgentFailure> {
        let (name, spec) = self.inner.resolve(agent)?;
        self.inner
            .enqueue(&name, spec, Command::SetOption(option, value));
        Ok(name)
    }

    /// Everything agentls knows about its agents, as JSON.
    pub fn status(&self) -> Value {
        let config = self.inner.config.borrow().clone();
        let default = config.effective_default_agent();
        let agents: Vec<Value> = config
            .effective_agents()
            .into_iter()
            .map(|(name, spec)| {
                let (running, history) = {
                    let slot = self.inner.slot(&name);
                    let state = slot.lock();
                    (state.running.clone(), state.history.clone())
                };
                let state = match &running {
                    // Dead but not yet cleaned up by its watcher.
                    Some(a) if a.death_reported() || a.process.exited().is_some() => "failed",
                    Some(a) if a.prompting() => "prompting",
                    Some(_) => "running",
                    None if history.last_error.is_some() => "failed",
                    None => "not started",
                };
                let used = self.inner.editor.tool_grants().agent_use(&name);
                let mut entry = json!({
                    "name": name,
                    "default": default == name,
                    "command": spec.command,
                    "args": spec.args,
                    "state": state,
                    "starts": history.starts,
                    "lastError": history.last_error,
                    "editorTools": {
                        "enabled": spec.offers_editor_tools(),
                        "offered": used.as_ref().map(|u| json!({
                            "transport": u.transport, "sessions": u.sessions,
                        })),
                        "used": used.map(|u| u.calls).unwrap_or_default(),
                    },
                });
                if let (Some(agent), Some(map)) = (running, entry.as_object_mut())
                    && let Value::Object(more) = agent.describe()
                {
                    map.extend(more);
                }
                entry
            })
            .collect();
        json!({"defaultAgent": default, "agents": agents})
    }

    /// The current session of `agent` as [`Self::status`] shows it (`null` when it has none or
    /// does not run): cheap whatever the number of its sessions.
    pub fn current_session(&self, agent: &str) -> Value {
        let running = self.inner.slot(agent).lock().running.clone();
        running.map_or(Value::Null, |a| a.describe_current())
    }

    /// Stops every agent: cancel, close stdin, SIGTERM, SIGKILL; returns once all are reaped.
    /// (An agent still starting stops itself when its start ends, and dies with agentls anyway:
    /// its process is killed when dropped.)
    pub async fn shutdown(&self) {
        self.inner.shutting_down.store(true, Ordering::SeqCst);
        let running: Vec<_> = {
            let slots = self.inner.slots.lock().unwrap_or_else(|e| e.into_inner());
            slots
                .values()
                .filter_map(|s| s.lock().running.clone())
                .collect()
        };
        futures::future::join_all(running.iter().map(|a| a.stop(STOP_GRACE))).await;
    }
}

impl Inner {
    /// The agent's name and spec: `agent`, else the default agent.
    fn resolve(&self, agent: Option<&str>) -> Result<(String, AgentSpec), AgentFailure> {
        let config = self.config.borrow();
        let name = match agent {
            Some(name) => name.to_owned(),
            None => config.effective_default_agent(),
        };
        let spec = config
            .effective_agents()
            .remove(&name)
            .ok_or_else(|| AgentFailure::UnknownAgent(name.clone()))?;
        Ok((name, spec))
    }

    fn slot(&self, name: &str) -> Arc<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(slots.entry(name.to_owned()).or_default())
    }

    /// Queues `command` for agent `name` (started with `spec`): it runs after every command
    /// queued for that agent before it.
    fn enqueue(self: &Arc<Self>, name: &str, spec: AgentSpec, command: Command) {
        let slot = self.slot(name);
        let mut state = slot.lock();
        let queue = &mut state.queue;
        let mut item = (spec, command);
        // A worker that died (a panic in a command) is replaced, so nothing queued is dropped.
        loop {
            let sender = queue.get_or_insert_with(|| {
                let (sender, commands) = mpsc::unbounded_channel();
                tokio::spawn(work_off(Arc::clone(self), name.to_owned(), commands));
                sender
            });
            match sender.send(item) {
                Ok(()) => return,
                Err(mpsc::error::SendError(back)) => {
                    item = back;
                    *queue = None;
                }
            }
        }
    }

    /// Runs one command of agent `name`; a prompt returns once its turn is under way (or over).
    async fn run_command(self: &Arc<Self>, name: &str, spec: AgentSpec, command: Command) {
        match command {
            Command::Prompt(queued) => {
                let (sent, under_way) = oneshot::channel();
                let (inner, agent) = (Arc::clone(self), name.to_owned());
                let slot = self.slot(name);
                let number = queued.number;
                tokio::spawn(async move {
                    inner.prompt(&agent, spec, queued, sent).await;
                    slot.lock().waiting.retain(|(n, _)| *n != number);
                });
                // Dropped without a word when the prompt ended before it was sent.
                let _ = under_way.await;
            }
            Command::NewSession => {
                let result = match self.ensure_running(name, &spec).await {
                    Ok(running) => running.new_session().await,
                    Err(failure) => Err(failure),
                };
                match result {
                    Ok(id) => self
                        .editor
                        .tell_user(Level::Info, format!("{name}: new session {id}")),
                    Err(failure) => self.editor.tell_user(
                        Level::Error,
                        format!("{name}: could not open a session: {failure}"),
                    ),
                }
            }
            Command::SetMode(mode) => {
                let result = match self.ensure_running(name, &spec).await {
                    Ok(running) => running.set_mode(&mode).await,
                    Err(failure) => Err(failure),
                };
                let (done, what) = (format!("mode is now {mode}"), format!("mode `{mode}`"));
                self.tell_setting(name, (&done, &what), result);
            }
            Command::SetOption(option, value) => {
                let result = match self.ensure_running(name, &spec).await {
                    Ok(running) => running.set_config_option(&option, &value).await,
                    Err(failure) => Err(failure),
                };
                let done = format!("{option} is now {value}");
                let what = format!("{option} `{value}`");
                self.tell_setting(name, (&done, &what), result);
            }
        }
    }

    /// Tells the user that `name`'s session setting is `done` (`mode is now ask`), or why
    /// `what` (`mode `ask``) could not be set.
    fn tell_setting(
        &self,
        name: &str,
        (done, what): (&str, &str),
        result: Result<(), AgentFailure>,
    ) {
        match result {
            Ok(()) => self
                .editor
                .tell_user(Level::Info, format!("{name}: {done}")),
            Err(failure) => self.editor.tell_user(
                Level::Error,
                format!("{name}: could not set {what}: {failure}"),
            ),
        }
    }

    fn running(&self, name: &str) -> Option<Arc<RunningAgent>> {
        self.slot(name).lock().running.clone()
    }

    async fn prompt(
        self: Arc<Self>,
        name: &str,
        spec: AgentSpec,
        queued: QueuedPrompt,
        sent: oneshot::Sender<()>,
    ) {
        let QueuedPrompt {
            number,
            text,
            context,
            chat,
            note,
            comment,
            cancel,
        } = queued;
        let progress_id = format!("acp-{name}-{number}");
        self.editor.progress(
            &progress_id,
            ProgressPhase::Begin {
                title: name.to_owned(),
                message: Some("working".into()),
            },
        );
        match self.ensure_running(name, &spec).await {
            Ok(agent) => {
                let failure = turn::run_and_report(
                    &agent,
                    turn::Asked {
                        text: &text,
                        context: &context,
                        chat: chat.as_deref(),
                        note: note.as_deref(),
                        comment: comment.as_ref(),
                    },
                    &progress_id,
                    cancel,
                    sent,
                )
                .await;
                if let Some(failure) = failure {
                    self.slot(name).record_failure(&failure);
                }
            }
            Err(failure) => {
                self.slot(name).record_failure(&failure);
                let (level, text) = turn::summary(name, &TurnEnd::Failed(failure.clone()), None);
                if let Some(chat) = chat.as_deref() {
                    turn::close_chat_reply(&self.editor, chat, &text);
                }
                self.editor.tell_user(level, text);
                self.editor.progress(
                    &progress_id,
                    ProgressPhase::End {
                        message: Some(format!("failed: {}", failure.class())),
                    },
                );
            }
        }
    }

    /// The running agent `name`, started (after any backoff) if it is not running.
    async fn ensure_running(
        self: &Arc<Self>,
        name: &str,
        spec: &AgentSpec,
    ) -> Result<Arc<RunningAgent>, AgentFailure> {
        let slot = self.slot(name);
        let _starting = slot.starting.lock().await;
        if let Some(agent) = self.running(name) {
            return Ok(agent);
        }
        let delay = slot.backoff();
        if !delay.is_zero() {
            self.editor.log(
                Level::Warning,
                format!(
                    "{name} crashed recently; restarting it in {} s\n",
                    delay.as_secs_f32()
                ),
            );
            tokio::time::sleep(delay).await;
        }
        if self.shutting_down.load(Ordering::SeqCst) {
            return Err(AgentFailure::ShuttingDown);
        }
        let cwd = self
            .editor
            .workspace_folders()
            .await
            .into_iter()
            .next()
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| "/".into());
        slot.lock().history.starts += 1;
        let agent = match RunningAgent::start(name, spec, cwd, self.editor.clone()).await {
            Ok(agent) => agent,
            Err(failure) => {
                slot.crashed(&failure);
                return Err(failure);
            }
        };
        slot.lock().running = Some(Arc::clone(&agent));
        // A shutdown that began while it started did not see it in its slot: stop it here.
        // (The flag is set before the shutdown looks at the slots, so one of the two sees it.)
        if self.shutting_down.load(Ordering::SeqCst) {
            agent.stop(STOP_GRACE).await;
            return Err(AgentFailure::ShuttingDown);
        }
        tokio::spawn(watch_death(
            Arc::clone(self),
            Arc::clone(&slot),
            Arc::clone(&agent),
        ));
        Ok(agent)
    }
}

/// Works off agent `name`'s commands, one after the other, for as long as agentls runs.
async fn work_off(
    inner: Arc<Inner>,
    name: String,
    mut commands: mpsc::UnboundedReceiver<(AgentSpec, Command)>,
) {
    while let Some((spec, command)) = commands.recv().await {
        inner.run_command(&name, spec, command).await;
    }
}

/// Waits for `agent`'s process to exit, then tears down what it had open and, unless it was
/// stopped on purpose or a turn reports it, tells the user once.
async fn watch_death(inner: Arc<Inner>, slot: Arc<Slot>, agent: Arc<RunningAgent>) {
    let status = agent.process.wait().await;
    agent.tear_down();
    agent.stop(Duration::ZERO).await;
    {
        let mut state = slot.lock();
        if state
            .running
            .as_ref()
            .is_some_and(|r| Arc::ptr_eq(r, &agent))
        {
            state.running = None;
        }
    }
    let on_purpose = inner.shutting_down.load(Ordering::SeqCst);
    if on_purpose {
        return;
    }
    let failure = agent.process.died(status).await;
    slot.crashed(&failure);
    tracing::warn!(agent = agent.name(), "{failure}");
    if !agent.death_told() {
        inner.editor.tell_user(
            Level::Error,
            format!("{}: {failure}; the next prompt restarts it", agent.name()),
        );
    }
}

impl Slot {
    fn lock(&self) -> std::sync::MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn crashed(&self, failure: &AgentFailure) {
        let history = &mut self.lock().history;
        history.crashes.push(Instant::now());
        history.last_error = Some(failure.to_string());
    }

    /// Remembers a failure that was not a crash (a refused session, a protocol error) for
    /// `agentls.status`.
    fn record_failure(&self, failure: &AgentFailure) {
        self.lock().history.last_error = Some(failure.to_string());
    }

    /// Nothing after one recent crash, then 1 s, 2 s, 4 s … up to [`MAX_BACKOFF`].
    fn backoff(&self) -> Duration {
        let history = &mut self.lock().history;
        history.crashes.retain(|at| at.elapsed() < CRASH_WINDOW);
        backoff_after(history.crashes.len()).min(backoff_cap())
    }
}

fn backoff_after(recent_crashes: usize) -> Duration {
    match recent_crashes {
        0 | 1 => Duration::ZERO,
        n => Duration::from_secs(1u64 << (n - 2).min(5)).min(MAX_BACKOFF),
    }
}

/// [`MAX_BACKOFF`], or less when `AGENTLS_TEST_RESTART_BACKOFF_MS` says so.
fn backoff_cap() -> Duration {
    static CAP: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *CAP.get_or_init(|| {
        std::env::var(BACKOFF_VAR)
            .ok()
            .and_then(|ms| ms.trim().parse().ok())
            .map_or(MAX_BACKOFF, |ms| Duration::from_millis(ms).min(MAX_BACKOFF))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let secs: Vec<u64> = (0..9).map(|n| backoff_after(n).as_secs()).collect();
        assert_eq!(secs, vec![0, 0, 1, 2, 4, 8, 16, 30, 30]);
    }
}
