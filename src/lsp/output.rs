//! Output channels: the one place that turns "tell the user" into `window/showMessage` (and a
//! line in the log), "log this" into `window/logMessage` and "this is running" into
//! `$/progress`. It coalesces and rate-limits so that an agent streaming megabytes never floods
//! the editor: log text goes out in batches every 100 ms, popups beyond a small burst wait and
//! go out merged (none is dropped), progress reports to ten a second.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tower_lsp_server::Client;
use tower_lsp_server::ls_types::{
    NumberOrString, ProgressParams, ProgressParamsValue, WorkDoneProgress, WorkDoneProgressBegin,
    WorkDoneProgressEnd, WorkDoneProgressReport, notification,
};

use super::capabilities::ClientFeatures;
use super::convert::message_type;
use crate::editor::Level;
use crate::editor::documents::effects::ProgressPhase;

/// How often buffered log text is flushed.
const FLUSH_EVERY: Duration = Duration::from_millis(100);
/// The most log text sent in one flush; the rest is counted and elided.
const MAX_LOG_BATCH: usize = 64 * 1024;
/// Popups allowed in a burst, and how fast the allowance comes back.
const MESSAGE_BURST: f64 = 3.0;
const MESSAGE_REFILL_PER_SEC: f64 = 0.5;
/// How long the editor may take to accept a progress token.
const PROGRESS_CREATE_TIMEOUT: Duration = Duration::from_secs(5);

/// One thing to show.
#[derive(Debug)]
pub enum OutputEvent {
    /// A popup / status-line message.
    Message(Level, String),
    /// Log text (may be a fragment of a line).
    Log(Level, String),
    /// A step of work `id`.
    Progress(String, ProgressPhase),
}

/// Spawns the output task for `client`; send it [`OutputEvent`]s.
pub fn spawn(client: Client, features: ClientFeatures) -> mpsc::UnboundedSender<OutputEvent> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(Outbox::new(client, features).run(rx));
    tx
}

/// Coalescing state of the output task.
struct Outbox {
    client: Client,
    features: ClientFeatures,
    log: String,
    log_level: Level,
    elided: usize,
    allowance: f64,
    refilled: Instant,
    /// Popups waiting for allowance, oldest first; sent merged when several wait.
    waiting: Vec<(Level, String)>,
    progress: HashMap<String, mpsc::UnboundedSender<ProgressPhase>>,
}

impl Outbox {
    fn new(client: Client, features: ClientFeatures) -> Self {
        Self {
            client,
            features,
            log: String::new(),
            log_level: Level::Log,
            elided: 0,
            allowance: MESSAGE_BURST,
            refilled: Instant::now(),
            waiting: Vec::new(),
            progress: HashMap::new(),
        }
    }

    async fn run(mut self, mut events: mpsc::UnboundedReceiver<OutputEvent>) {
        let mut ticker = tokio::time::interval(FLUSH_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                event = events.recv() => match event {
                    Some(event) => self.handle(event).await,
                    None => break,
                },
                _ = ticker.tick() => self.tick().await,
            }
        }
        self.flush_log().await;
    }

    async fn handle(&mut self, event: OutputEvent) {
        match event {
            OutputEvent::Log(level, text) => self.append_log(level, &text).await,
            OutputEvent::Message(level, text) => self.message(level, text).await,
            OutputEvent::Progress(id, phase) => self.progress(id, phase),
        }
    }

    async fn append_log(&mut self, level: Level, text: &str) {
        if level != self.log_level && !self.log.is_empty() {
            self.flush_log().await;
        }
        self.log_level = level;
        let room = MAX_LOG_BATCH.saturating_sub(self.log.len());
        if text.len() <= room {
            self.log.push_str(text);
        } else {
            let cut = floor_char_boundary(text, room);
            self.log.push_str(&text[..cut]);
            self.elided += text.len() - cut;
        }
    }

    async fn tick(&mut self) {
        self.flush_log().await;
        self.send_waiting().await;
    }

    async fn flush_log(&mut self) {
        if self.log.is_empty() && self.elided == 0 {
            return;
        }
        let mut text = std::mem::take(&mut self.log);
        if self.elided > 0 {
            text.push_str(&format!("\n[agentls: {} bytes elided]", self.elided));
            self.elided = 0;
        }
        let text = text.strip_suffix('\n').unwrap_or(&text);
        self.client
            .log_message(message_type(self.log_level), text)
            .await;
    }

    async fn message(&mut self, level: Level, text: String) {
        // The log keeps every message, popups or not: it is the record a user scrolls back in.
        self.append_log(level, &format!("{text}\n")).await;
        // A message already waiting to go out goes out once; one that was shown is shown again
        // (it may be news again: the same question asked twice).
        if !self.waiting.iter().any(|(_, waiting)| *waiting == text) {
            self.waiting.push((level, text));
        }
        self.send_waiting().await;
    }

    /// Sends waiting popups as the allowance permits. Nothing is dropped: when several wait
    /// (a burst), they go out as one popup, so an editor that only shows popups (Helix) still
    /// gets every turn summary, at most a couple of seconds late.
    async fn send_waiting(&mut self) {
        self.refill();
        if self.waiting.is_empty() || self.allowance < 1.0 {
            return;
        }
        self.allowance -= 1.0;
        let waiting = std::mem::take(&mut self.waiting);
        let level = waiting.iter().map(|(l, _)| *l).min().unwrap_or(Level::Info);
        let text = match waiting.as_slice() {
            [(_, one)] => one.clone(),
            many => many
                .iter()
                .map(|(_, text)| text.as_str())
                .collect::<Vec<_>>()
                .join("\n"),
        };
        self.client.show_message(message_type(level), text).await;
    }

    fn refill(&mut self) {
        let now = Instant::now();
        let gained = now.duration_since(self.refilled).as_secs_f64() * MESSAGE_REFILL_PER_SEC;
        self.allowance = (self.allowance + gained).min(MESSAGE_BURST);
        self.refilled = now;
    }

    fn progress(&mut self, id: String, phase: ProgressPhase) {
        if !self.features.work_done_progress {
            return;
        }
        let ended = matches!(phase, ProgressPhase::End { .. });
        let sender = self.progress.entry(id.clone()).or_insert_with(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(run_progress(self.client.clone(), id.clone(), rx));
            tx
        });
        let _ = sender.send(phase);
        if ended {
            self.progress.remove(&id);
        }
    }
}

/// Drives one progress token: create it, then begin, throttled reports, end.
async fn run_progress(
    client: Client,
    id: String,
    mut phases: mpsc::UnboundedReceiver<ProgressPhase>,
) {
    let token = NumberOrString::String(format!("agentls/{id}"));
    let created = tokio::time::timeout(
        PROGRESS_CREATE_TIMEOUT,
        client.create_work_done_progress(token.clone()),
    )
    .await;
    if !matches!(created, Ok(Ok(()))) {
        tracing::debug!(%id, "the editor did not accept a progress token; no progress shown");
        return;
    }
    let mut last_report = Instant::now() - FLUSH_EVERY;
    while let Some(mut phase) = phases.recv().await {
        // Coalesce: of queued reports only the newest matters.
        while let ProgressPhase::Report { .. } = phase {
            match phases.try_recv() {
                Ok(next) => phase = next,
                Err(_) => break,
            }
        }
        let (value, done) = match phase {
            ProgressPhase::Begin { title, message } => (
                WorkDoneProgress::Begin(WorkDoneProgressBegin {
                    title,
                    message,
                    ..Default::default()
                }),
                false,
            ),
            ProgressPhase::Report { message } => {
                let wait = FLUSH_EVERY.saturating_sub(last_report.elapsed());
                tokio::time::sleep(wait).await;
                last_report = Instant::now();
                (
                    WorkDoneProgress::Report(WorkDoneProgressReport {
                        message: Some(message),
                        ..Default::default()
                    }),
                    false,
                )
            }
            ProgressPhase::End { message } => {
                (WorkDoneProgress::End(WorkDoneProgressEnd { message }), true)
            }
        };
        let params = ProgressParams {
            token: token.clone(),
            value: ProgressParamsValue::WorkDone(value),
        };
        client
            .send_notification::<notification::Progress>(params)
            .await;
        if done {
            break;
        }
    }
}

/// The largest char boundary of `text` at or below `at`.
fn floor_char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}
