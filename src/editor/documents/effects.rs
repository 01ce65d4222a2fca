//! Effects: what the port asks of the editor. The host (`lsp/`) turns each one into LSP, gated on
//! what the client advertised; effects that need an answer carry a oneshot for it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde::Serialize;
use sha2::{Digest, Sha256};
use thiserror::Error;
use tokio::sync::{mpsc, oneshot};

use super::position::{Position, Range};

/// How loud a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Level {
    /// Something failed.
    Error,
    /// Something needs attention.
    Warning,
    /// Worth knowing.
    Info,
    /// Detail for the log only.
    Log,
}

/// One text replacement in a document, in the negotiated position encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextEdit {
    /// What to replace.
    pub range: Range,
    /// What replaces it.
    pub new_text: String,
}

/// Edits to one open document, computed against one version of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentEdit {
    /// What the editor may show for the edit (and name its undo step after).
    pub label: String,
    /// The document.
    pub path: PathBuf,
    /// The version the edits were computed against; `None`: applied whatever version the editor
    /// is at (only for appending at the end of a document the editor holds as agentls does).
    pub version: Option<i32>,
    /// Non-overlapping edits, in document order.
    pub edits: Vec<TextEdit>,
}

/// A message at a place in a file: agentls's own (published as LSP diagnostics) or one the
/// editor forwarded from its other language servers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// Where.
    pub range: Range,
    /// How loud.
    pub level: Level,
    /// What to say.
    pub message: String,
    /// A code tying it to what it is about (e.g. a review id).
    pub code: Option<String>,
    /// Who says it (`agentls` for ours).
    pub source: Option<String>,
}

/// A step of a long-running piece of work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgressPhase {
    /// It started.
    Begin {
        /// Short name of the work.
        title: String,
        /// What it is doing first.
        message: Option<String>,
    },
    /// It is still going.
    Report {
        /// What it is doing now.
        message: String,
    },
    /// It finished.
    End {
        /// How it ended.
        message: Option<String>,
    },
}

/// Why the editor did not do what an effect asked.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum EffectError {
    /// The client did not advertise the capability this needs.
    #[error("the editor does not support {0}")]
    Unsupported(&'static str),
    /// The client answered and declined.
    #[error("the editor declined: {0}")]
    Refused(String),
    /// The client did not answer in time (milliseconds).
    #[error("the editor did not answer within {} s", *.0 as f64 / 1000.0)]
    Timeout(u64),
    /// The connection to the editor failed or answered with an error.
    #[error("the editor connection failed: {0}")]
    Transport(String),
}

/// Where an effect's outcome goes.
pub type Reply<T> = oneshot::Sender<Result<T, EffectError>>;

/// Something the host should do in the editor.
#[derive(Debug)]
pub enum Effect {
    /// Tell the user.
    Message {
        /// How loud.
        level: Level,
        /// What to say.
        text: String,
    },
    /// Write to the editor's log.
    Log {
        /// How loud.
        level: Level,
        /// What to log; may be a fragment of a line.
        text: String,
    },
    /// Show that work `id` is running.
    Progress {
        /// Identifies one piece of work across its phases.
        id: String,
        /// Where it stands.
        phase: ProgressPhase,
    },
    /// Apply edits to an open document.
    ApplyEdit {
        /// The edits.
        edit: DocumentEdit,
        /// Whether the editor applied them.
        reply: Reply<()>,
    },
    /// Replace everything agentls shows as diagnostics on `path` (an empty list clears them).
    Diagnostics {
        /// The file.
        path: PathBuf,
        /// The document version they belong to, when the file is open.
        version: Option<i32>,
        /// All of agentls's diagnostics for the file.
        diagnostics: Vec<Diagnostic>,
    },
    /// Inlay hints changed; editors that can should ask again.
    RefreshInlayHints,
    /// Tell editor plugins about an event the client asked for (the host sends it as the
    /// notification `agentls/<event>`).
    Plugin {
        /// What happened.
        event: PluginEvent,
        /// Its payload.
        payload: serde_json::Value,
    },
    /// Ask the user to pick one of `choices` in a dialog; `Unsupported` if the editor has none.
    AskUser {
        /// The question.
        text: String,
        /// The answers to offer.
        choices: Vec<crate::editor::questions::Choice>,
        /// The id of the chosen answer, `None` if dismissed.
        reply: Reply<Option<String>>,
    },
    /// Open a file in the editor, optionally selecting a range.
    ShowDocument {
        /// The file.
        path: PathBuf,
        /// What to select or scroll to.
        selection: Option<Range>,
        /// Whether the editor showed it.
        reply: Reply<()>,
    },
}

/// What agentls tells editor plugins about, each as the notification `agentls/<name>`, and only
/// to a client that named it at `initialize` (`initializationOptions.pluginEvents`): an editor
/// without a plugin (Helix, plain eglot) would read and drop every one, and an agent's stream
/// is megabytes of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginEvent {
    /// An agent's `session/update`, streamed text merged (`agentls/sessionUpdate`).
    SessionUpdate,
    /// The reviews of one file changed (`agentls/reviewChanged`).
    ReviewChanged,
    /// An agent's first turn began, or its last one ended (`agentls/turnChanged`): what a
    /// status line needs, without the stream.
    TurnChanged,
    /// An open file's disk copy, written by an agent, is in its buffer already, under the
    /// user's unsaved edits (`agentls/diskInBuffer`, with the SHA-256 of that copy): the editor
    /// may take the file as read again, and not ask about it on the next save.
    DiskInBuffer,
}

impl PluginEvent {
    /// Every event, in the order of their bits in [`PluginEvents`].
    pub const ALL: [Self; 4] = [
        Self::SessionUpdate,
        Self::ReviewChanged,
        Self::TurnChanged,
        Self::DiskInBuffer,
    ];

    /// The event's name, as clients ask for it and as its method ends.
    pub fn name(self) -> &'static str {
        match self {
            Self::SessionUpdate => "sessionUpdate",
            Self::ReviewChanged => "reviewChanged",
            Self::TurnChanged => "turnChanged",
            Self::DiskInBuffer => "diskInBuffer",
        }
    }

    /// The event called `name`, if there is one.
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.name() == name)
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// The plugin events a client asked for (none unless it asked).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PluginEvents(u8);

impl PluginEvents {
    /// Every event.
    pub fn all() -> Self {
        PluginEvent::ALL.into_iter().collect()
    }

    /// Whether `event` was asked for.
    pub fn contains(self, event: PluginEvent) -> bool {
        self.0 & event.bit() != 0
    }
}

impl FromIterator<PluginEvent> for PluginEvents {
    fn from_iter<I: IntoIterator<Item = PluginEvent>>(events: I) -> Self {
        Self(events.into_iter().fold(0, |bits, e| bits | e.bit()))
    }
}

/// The sending half of the effect stream; cheap to clone.
#[derive(Debug, Clone)]
pub struct EffectSender {
    effects: mpsc::UnboundedSender<Effect>,
    /// Set once, at `initialize`; until then no plugin listens.
    plugin_events: Arc<OnceLock<PluginEvents>>,
}

/// The receiving half, owned by the host.
pub type EffectReceiver = mpsc::UnboundedReceiver<Effect>;

impl EffectSender {
    /// A connected sender and receiver.
    pub fn channel() -> (Self, EffectReceiver) {
        let (effects, rx) = mpsc::unbounded_channel();
        let sender = Self {
            effects,
            plugin_events: Arc::default(),
        };
        (sender, rx)
    }

    /// Queues an effect; dropped silently only when the host is gone (shutting down).
    pub fn send(&self, effect: Effect) {
        let _ = self.effects.send(effect);
    }

    /// Sets the plugin events the client asked for; only the first call counts (`initialize`
    /// comes once).
    pub fn set_plugin_events(&self, events: PluginEvents) {
        let _ = self.plugin_events.set(events);
    }

    /// Whether the client asked for `event`: what would build a large payload asks first.
    pub fn plugins_want(&self, event: PluginEvent) -> bool {
        self.plugin_events
            .get()
            .is_some_and(|events| events.contains(event))
    }

    /// Tells plugins about `event` with the payload `payload` makes, if the client asked for it
    /// (else `payload` is not called).
    pub fn notify_plugins(&self, event: PluginEvent, payload: impl FnOnce() -> serde_json::Value) {
        if self.plugins_want(event) {
            self.send(Effect::Plugin {
                event,
                payload: payload(),
            });
        }
    }

    /// Tells plugins that `disk`, what `path` holds on disk now, is in its open buffer already
    /// ([`PluginEvent::DiskInBuffer`]).
    pub fn disk_in_buffer(&self, path: &Path, disk: &str) {
        self.notify_plugins(PluginEvent::DiskInBuffer, || {
            let digest = Sha256::digest(disk.as_bytes());
            let sha256: String = digest.iter().map(|b| format!("{b:02x}")).collect();
            serde_json::json!({
                "uri": crate::file_uri::from_path(path),
                "sha256": sha256,
            })
        });
    }

    /// Queues an effect that answers, and waits for the answer.
    pub async fn request<T>(
        &self,
        make: impl FnOnce(Reply<T>) -> Effect,
    ) -> Result<T, EffectError> {
        let (reply, answer) = oneshot::channel();
        self.send(make(reply));
        answer
            .await
            .unwrap_or_else(|_| Err(EffectError::Transport("the editor host stopped".into())))
    }

    /// Tells the user something.
    pub fn message(&self, level: Level, text: impl Into<String>) {
        self.send(Effect::Message {
            level,
            text: text.into(),
        });
    }

    /// Writes to the editor's log.
    pub fn log(&self, level: Level, text: impl Into<String>) {
        self.send(Effect::Log {
            level,
            text: text.into(),
        });
    }
}

/// An inlay hint: text shown at a position without being in the buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hint {
    /// Where it shows.
    pub position: Position,
    /// What it says.
    pub label: String,
    /// Hover text with the whole change.
    pub tooltip: String,
}
