//! What agentls remembers about one ACP session: what the agent told it (modes, config options,
//! commands, plan, usage), the running turn's tally for its summary, what the agent last read
//! of each file (to merge its writes with the user's edits), and its pending permissions.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

use agent_client_protocol::v1::schema::{Diff, SessionConfigOption, SessionModeState};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::editor::Origin;
use crate::editor::tool_grants::{self, Grant};

/// How much of the agent's last message a summary quotes.
const QUOTE_CHARS: usize = 160;

/// One session of one agent.
#[derive(Debug)]
pub struct SessionState {
    /// The agent's session id.
    pub id: String,
    /// Who the session is to the port.
    pub origin: Origin,
    /// The modes the agent offers (`SessionModeState`, as sent).
    pub modes: Option<Value>,
    /// The current mode id.
    pub current_mode: Option<String>,
    /// Config options (as sent).
    pub config_options: Option<Value>,
    /// Available slash commands (as sent).
    pub commands: Option<Value>,
    /// The latest plan (as sent).
    pub plan: Option<Value>,
    /// The latest usage (tokens, cost; as sent).
    pub usage: Option<Value>,
    /// The running turn, if any.
    pub turn: Option<Turn>,
    /// Turns started so far.
    pub turns: u64,
    /// Per file: the whole text the agent last read (or wrote).
    pub reads: HashMap<PathBuf, String>,
    /// Things to tell the agent at the start of its next prompt (hunks the user rejected).
    pub notes: Vec<String>,
    /// Pending permission requests: id → title.
    pub permissions: BTreeMap<u64, String>,
    /// Cancelled to withdraw every pending permission request (then replaced).
    pub withdraw: CancellationToken,
    /// A cancelled turn ended without the agent's answer (after the grace): whatever it still
    /// asks before the next turn belongs to it and is answered `cancelled`.
    pub cancelled_unanswered: bool,
    /// The agent is replaying the session's history (`session/load`): what it says was told
    /// before and is not told again.
    pub replaying: bool,
    /// The session's right to the editor's tools (dropped with the session: its token dies).
    pub editor_tools: Option<Grant>,
}

/// The tally of a running turn.
#[derive(Debug, Default)]
pub struct Turn {
    /// Identifies the turn's progress in the editor.
    pub progress_id: String,
    /// Tool calls by id: title.
    pub tool_calls: BTreeMap<String, String>,
    /// Ids of tool calls that failed (those the user declined are not failures).
    pub failed: BTreeSet<String>,
    /// Ids of tool calls whose permission the user answered with no.
    pub declined: BTreeSet<String>,
    /// Files the agent changed (written through agentls, or by an edit tool call that completed).
    pub files: BTreeSet<PathBuf>,
    /// Files it changed without asking the user (shown for Keep/Undo after the fact).
    pub unasked: BTreeSet<PathBuf>,
    /// Files each pending edit tool call is about, by tool call id.
    pub editing: BTreeMap<String, Vec<PathBuf>>,
    /// The latest diffs each tool call carried, by tool call id (a permission request may refer
    /// to its tool call without repeating them).
    pub diffs: BTreeMap<String, Vec<Diff>>,
    /// The agent's current (latest) message.
    pub message: String,
    /// Whether the next text chunk starts a new message.
    pub message_done: bool,
    /// Cancelled when the user cancels it (`session/cancel` was sent).
    pub cancel: CancellationToken,
    /// Whether the log's last text ended without a newline.
    pub log_mid_line: bool,
    /// The chat document the reply streams into, when the prompt came from one.
    pub chat: Option<PathBuf>,
    /// The editor tools the agent called in this turn, by tool.
    pub editor_tools: BTreeMap<String, u64>,
}

impl SessionState {
    /// A new session `id` of `agent`.
    pub fn new(agent: &str, id: String) -> Self {
        Self {
            origin: Origin::new(format!("acp:{agent}:{id}"), agent),
            id,
            modes: None,
            current_mode: None,
            config_options: None,
            commands: None,
            plan: None,
            usage: None,
            turn: None,
            turns: 0,
            reads: HashMap::new(),
            notes: Vec::new(),
            permissions: BTreeMap::new(),
            withdraw: CancellationToken::new(),
            cancelled_unanswered: false,
            replaying: false,
            editor_tools: None,
        }
    }

    /// Takes the modes and config options the agent answered `session/new` or `session/load`
    /// with.
    pub fn take_settings(
        &mut self,
        modes: Option<&SessionModeState>,
        config_options: Option<&Vec<SessionConfigOption>>,
    ) {
        if let Some(modes) = modes {
            self.current_mode = Some(modes.current_mode_id.to_string());
            self.modes = serde_json::to_value(modes).ok();
        }
        if let Some(options) = config_options {
            self.config_options = serde_json::to_value(options).ok();
        }
    }

    /// Withdraws every pending permission request; later ones get a fresh token.
    pub fn withdraw_permissions(&mut self) {
        self.withdraw.cancel();
        self.withdraw = CancellationToken::new();
    }

    /// The session as `agentls.status` shows it.
    pub fn describe(&self, current: bool) -> Value {
        json!({
            "id": self.id,
            "current": current,
            "state": if self.turn.is_some() { "prompting" } else { "idle" },
            "turns": self.turns,
            "mode": self.current_mode,
            "modes": self.modes,
            "configOptions": self.config_options,
            "commands": self.commands,
            "plan": self.plan,
            "usage": self.usage,
            "pendingPermissions": self.permissions.iter()
                .map(|(id, title)| json!({"id": id, "title": title}))
                .collect::<Vec<_>>(),
            "turn": self.turn.as_ref().map(|t| json!({
                "toolCalls": t.tool_calls.len(),
                "failed": t.titles(&t.failed),
                "declined": t.titles(&t.declined),
                "files": t.files,
                "cancelled": t.cancel.is_cancelled(),
            })),
        })
    }
}

impl Turn {
    /// A turn whose progress is `progress_id`.
    pub fn new(progress_id: String) -> Self {
        Self {
            progress_id,
            ..Self::default()
        }
    }

    /// The agent said `text` (a fragment of its message).
    pub fn said(&mut self, text: &str) {
        if self.message_done {
            self.message.clear();
            self.message_done = false;
        }
        if self.message.len() < 4 * QUOTE_CHARS {
            self.message.push_str(text);
        }
    }

    /// The start of the agent's last message, on one line.
    pub fn quote(&self) -> Option<String> {
        let flat = self
            .message
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if flat.is_empty() {
            return None;
        }
        let mut quote: String = flat.chars().take(QUOTE_CHARS).collect();
        if quote.len() < flat.len() {
            quote.push('…');
        }
        Some(quote)
    }

    /// Tool call `id` failed; a call the user declined is counted as declined instead (agents
    /// end it as failed).
    pub fn tool_call_failed(&mut self, id: &str) {
        if !self.declined.contains(id) {
            self.failed.insert(id.to_owned());
        }
    }

    /// The user answered no to tool call `id`'s permission request.
    pub fn tool_call_declined(&mut self, id: &str) {
        self.failed.remove(id);
        self.declined.insert(id.to_owned());
    }

    /// The titles of the tool calls `ids`, in order (the id where the title is unknown).
    fn titles<'a>(&'a self, ids: &'a BTreeSet<String>) -> Vec<&'a str> {
        ids.iter()
            .map(|id| self.tool_calls.get(id).unwrap_or(id).as_str())
            .collect()
    }

    /// "3 tool calls · files: a.txt, b.txt · 1 failed (Run tests) · 1 declined by you (Edit c)".
    pub fn tally(&self) -> String {
        let mut parts = vec![match self.tool_calls.len() {
            1 => "1 tool call".to_owned(),
            n => format!("{n} tool calls"),
        }];
        if !self.files.is_empty() {
            parts.push(format!(
                "files: {}",
                crate::editor::some_file_names(&self.files)
            ));
        }
        if !self.unasked.is_empty() {
            parts.push(format!(
                "changed without asking: {}",
                crate::editor::some_file_names(&self.unasked)
            ));
        }
        if !self.editor_tools.is_empty() {
            parts.push(format!(
                "editor tools: {}",
                tool_grants::tally(&self.editor_tools)
            ));
        }
        if !self.failed.is_empty() {
            let titles = self.titles(&self.failed).join(", ");
            parts.push(format!("{} failed ({titles})", self.failed.len()));
        }
        if !self.declined.is_empty() {
            let titles = self.titles(&self.declined).join(", ");
            parts.push(format!(
                "{} declined by you ({titles})",
                self.declined.len()
            ));
        }
        parts.join(" · ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_names_a_few_files_and_counts_the_rest() {
        let mut turn = Turn::new("p".into());
        turn.tool_calls.insert("1".into(), "Write".into());
        for n in 0..10_000 {
            turn.unasked
                .insert(PathBuf::from(format!("/ws/d/f{n:05}.txt")));
        }
        assert_eq!(
            turn.tally(),
            "1 tool call · changed without asking: f00000.txt, f00001.txt, f00002.txt, \
             f00003.txt, f00004.txt, and 9995 more (all in agentls's log)"
        );
    }

    #[test]
    fn the_quote_is_the_last_message_after_a_tool_call() {
        let mut turn = Turn::new("p".into());
        turn.said("Reading the file.");
        turn.message_done = true;
        turn.said("All\n");
        turn.said("done.");
        assert_eq!(turn.quote().as_deref(), Some("All done."));
        turn.tool_calls.insert("1".into(), "Edit a".into());
        turn.files.insert(PathBuf::from("/ws/a.txt"));
        turn.tool_call_failed("1");
        turn.editor_tools.insert("getDiagnostics".into(), 2);
        assert_eq!(
            turn.tally(),
            "1 tool call · files: a.txt · editor tools: getDiagnostics ×2 · 1 failed (Edit a)"
        );
    }

    #[test]
    fn a_declined_tool_call_is_not_a_failure_whenever_it_ends() {
        let mut turn = Turn::new("p".into());
        turn.tool_calls.insert("1".into(), "Edit a".into());
        turn.tool_calls.insert("2".into(), "Edit b".into());
        // One agent ends the call as failed after the no, another before agentls hears it.
        turn.tool_call_declined("1");
        turn.tool_call_failed("1");
        turn.tool_call_failed("2");
        turn.tool_call_declined("2");
        assert_eq!(
            turn.tally(),
            "2 tool calls · 2 declined by you (Edit a, Edit b)"
        );
    }

    #[test]
    fn withdrawing_cancels_the_old_token_only() {
        let mut session = SessionState::new("demo", "s1".into());
        assert_eq!(session.origin.key, "acp:demo:s1");
        let old = session.withdraw.clone();
        session.withdraw_permissions();
        assert!(old.is_cancelled() && !session.withdraw.is_cancelled());
    }
}
