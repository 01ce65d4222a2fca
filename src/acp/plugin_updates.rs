//! `session/update` → `agentls/sessionUpdate` for editor plugins, with streamed text merged: an
//! agent may send one `agent_message_chunk` per token, and the editor must not get one message per
//! token. The first text chunk after a quiet spell goes out at once; text arriving within
//! [`INTERVAL`] of the last one sent is held and merged (same session, same kind, same message),
//! then sent as one update when the interval is up. Any other update flushes the held text first,
//! so plugins see every update in the agent's order. It does not touch the log or the session's
//! state (that is `updates`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::schema::{ContentBlock, ContentChunk, SessionUpdate};
use serde_json::json;
use tokio::time::Instant;

use crate::editor::{EditorAccess, PluginEvent};

/// At most one text update per agent connection per interval (plus the other updates).
pub const INTERVAL: Duration = Duration::from_millis(100);
/// Held text beyond this is sent at once, so no single notification grows without bound. A reply
/// to the editor goes ahead of queued updates (`lsp/outbox.rs`) but waits behind the one being
/// written and those already in the pipe: with 1 MB here, a keystroke's reply during a flood
/// waited behind a megabyte of JSON (p95 6–11× idle); with 64 KB, 2–3.7×; with 16 KB, 0.9–1.0×
/// (four times the messages, no more CPU measured).
const MAX_HELD_BYTES: usize = 16 * 1024;

/// The plugin side of one agent connection's update stream.
#[derive(Debug, Clone)]
pub struct PluginUpdates {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    agent: String,
    editor: EditorAccess,
    held: Mutex<Held>,
}

/// What is waiting to be sent. Sending happens under the lock, which keeps the order.
#[derive(Debug, Default)]
struct Held {
    batch: Option<Batch>,
    /// Identifies the batch a timer was started for.
    generation: u64,
    /// When text was last sent.
    last_text: Option<Instant>,
}

/// Consecutive text chunks merged into the first one.
#[derive(Debug)]
struct Batch {
    session: String,
    update: SessionUpdate,
    generation: u64,
    bytes: usize,
}

impl PluginUpdates {
    /// The stream of `agent`'s updates to `editor`'s plugins.
    pub fn new(agent: &str, editor: EditorAccess) -> Self {
        Self {
            shared: Arc::new(Shared {
                agent: agent.to_owned(),
                editor,
                held: Mutex::default(),
            }),
        }
    }

    /// Takes one update of `session` in: sends it, or holds it to merge with the next ones
    /// (nothing, when the client did not ask for session updates).
    pub fn push(&self, session: &str, update: SessionUpdate) {
        let shared = &self.shared;
        if !shared.editor.plugins_want(PluginEvent::SessionUpdate) {
            return;
        }
        let mut held = shared.lock();
        if plain_text(&update).is_none() {
            shared.flush(&mut held);
            shared.send(session, &update);
            return;
        }
        if let Some(batch) = held.batch.as_mut()
            && batch.session == session
            && batch.append(&update)
        {
            if batch.bytes >= MAX_HELD_BYTES {
                shared.flush(&mut held);
            }
            return;
        }
        shared.flush(&mut held);
        let now = Instant::now();
        let due = held.last_text.map(|t| t + INTERVAL).filter(|&d| d > now);
        let (Some(due), Ok(runtime)) = (due, tokio::runtime::Handle::try_current()) else {
            shared.send(session, &update);
            held.last_text = Some(now);
            return;
        };
        held.generation += 1;
        let generation = held.generation;
        let bytes = plain_text(&update).map_or(0, str::len);
        held.batch = Some(Batch {
            session: session.to_owned(),
            update,
            generation,
            bytes,
        });
        let shared = Arc::clone(&self.shared);
        runtime.spawn(async move {
            tokio::time::sleep_until(due).await;
            let mut held = shared.lock();
            if held
                .batch
                .as_ref()
                .is_some_and(|b| b.generation == generation)
            {
                shared.flush(&mut held);
            }
        });
    }

    /// Sends held text now (before a turn's summary, a permission question, …).
    pub fn flush(&self) {
        let mut held = self.shared.lock();
        self.shared.flush(&mut held);
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn flush(&self, held: &mut Held) {
        if let Some(batch) = held.batch.take() {
            self.send(&batch.session, &batch.update);
            held.last_text = Some(Instant::now());
        }
    }

    fn send(&self, session: &str, update: &SessionUpdate) {
        self.editor.notify_plugins(
            PluginEvent::SessionUpdate,
            || json!({"agent": self.agent, "sessionId": session, "update": update}),
        );
    }
}

impl Batch {
    /// Appends `update`'s text if it continues this batch's message; `false` if it does not.
    fn append(&mut self, update: &SessionUpdate) -> bool {
        let same_kind = std::mem::discriminant(&self.update) == std::mem::discriminant(update);
        let (Some(ours), Some(theirs), Some(text)) = (
            chunk_mut(&mut self.update),
            chunk(update),
            plain_text(update),
        ) else {
            return false;
        };
        if !same_kind || ours.message_id != theirs.message_id {
            return false;
        }
        let ContentBlock::Text(ours) = &mut ours.content else {
            return false;
        };
        ours.text.push_str(text);
        self.bytes += text.len();
        true
    }
}

fn chunk(update: &SessionUpdate) -> Option<&ContentChunk> {
    match update {
        SessionUpdate::AgentMessageChunk(c) | SessionUpdate::AgentThoughtChunk(c) => Some(c),
        _ => None,
    }
}

fn chunk_mut(update: &mut SessionUpdate) -> Option<&mut ContentChunk> {
    match update {
        SessionUpdate::AgentMessageChunk(c) | SessionUpdate::AgentThoughtChunk(c) => Some(c),
        _ => None,
    }
}

/// The text of an agent message or thought chunk that carries nothing else (no annotations, no
/// `_meta`), which is what may be merged; `None` for anything else.
fn plain_text(update: &SessionUpdate) -> Option<&str> {
    let chunk = chunk(update).filter(|c| c.meta.is_none())?;
    match &chunk.content {
        ContentBlock::Text(t) if t.annotations.is_none() && t.meta.is_none() => Some(&t.text),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::editor::PluginEvents;
    use crate::editor::documents::effects::{Effect, EffectReceiver};
    use agent_client_protocol::v1::schema::{Plan, ToolCall};

    fn message(text: &str) -> SessionUpdate {
        SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::from(text)))
    }

    fn thought(text: &str) -> SessionUpdate {
        SessionUpdate::AgentThoughtChunk(ContentChunk::new(ContentBlock::from(text)))
    }

    /// The updates sent so far, as `(kind, text or "")`.
    fn sent(effects: &mut EffectReceiver) -> Vec<(String, String)> {
        let mut out = Vec::new();
        while let Ok(effect) = effects.try_recv() {
            if let Effect::Plugin { payload, .. } = effect {
                let update = &payload["update"];
                out.push((
                    update["sessionUpdate"].as_str().unwrap().to_owned(),
                    update["content"]["text"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                ));
            }
        }
        out
    }

    fn pair(kind: &str, text: &str) -> (String, String) {
        (kind.to_owned(), text.to_owned())
    }

    /// The updates of agent `a` to a client that asked for `events`.
    fn updates_to(events: PluginEvents) -> (PluginUpdates, EffectReceiver) {
        let (editor, feed, effects) = crate::editor::start();
        feed.set_plugin_events(events);
        (PluginUpdates::new("a", editor), effects)
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_did_not_ask_gets_no_update() {
        let asked_for_reviews = [PluginEvent::ReviewChanged].into_iter().collect();
        for events in [PluginEvents::default(), asked_for_reviews] {
            let (updates, mut effects) = updates_to(events);
            updates.push("s", message("Hel"));
            updates.push("s", message("lo"));
            updates.push("s", SessionUpdate::Plan(Plan::new(vec![])));
            updates.flush();
            tokio::time::sleep(INTERVAL * 2).await;
            let sent = sent(&mut effects);
            assert!(sent.is_empty(), "asked for {events:?}, got {sent:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn text_is_merged_per_interval_and_other_updates_keep_their_place() {
        let (updates, mut effects) = updates_to(PluginEvents::all());
        updates.push("s", message("Hel"));
        updates.push("s", message("lo"));
        updates.push("s", message(" you"));
        updates.push("s", thought("hmm"));
        updates.push("s", thought("…"));
        updates.push("s", SessionUpdate::Plan(Plan::new(vec![])));
        updates.push("s", message("after"));
        updates.push("t", message("other session"));
        assert_eq!(
            sent(&mut effects),
            [
                pair("agent_message_chunk", "Hel"),
                pair("agent_message_chunk", "lo you"),
                pair("agent_thought_chunk", "hmm…"),
                pair("plan", ""),
                pair("agent_message_chunk", "after"),
            ]
        );
        // The held text goes out when the interval is up.
        tokio::time::sleep(INTERVAL * 2).await;
        assert_eq!(
            sent(&mut effects),
            [pair("agent_message_chunk", "other session")]
        );
        // After a quiet spell the first chunk goes out at once again.
        updates.push("t", message("x"));
        assert_eq!(sent(&mut effects), [pair("agent_message_chunk", "x")]);
        updates.push("t", message("y"));
        updates.flush();
        updates.push("t", SessionUpdate::ToolCall(ToolCall::new("1", "Read a")));
        assert_eq!(
            sent(&mut effects),
            [pair("agent_message_chunk", "y"), pair("tool_call", "")]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_flood_becomes_a_handful_of_updates_none_too_big() {
        let (updates, mut effects) = updates_to(PluginEvents::all());
        let mut expected = String::new();
        for i in 0..100_000 {
            let text = format!("chunk {i}\n");
            expected.push_str(&text);
            updates.push("s", message(&text));
            if i % 10_000 == 0 {
                tokio::time::sleep(INTERVAL / 2).await;
            }
        }
        tokio::time::sleep(INTERVAL * 2).await;
        let sent = sent(&mut effects);
        // About 1.2 MB: a batch per MAX_HELD_BYTES, and one per pause.
        let most = expected.len() / MAX_HELD_BYTES + 2 * 11;
        assert!(
            sent.len() <= most,
            "{} updates, expected at most {most}",
            sent.len()
        );
        // None grows much beyond the limit (a reply to the editor waits behind it).
        let chunk = "chunk 99999\n".len();
        let biggest = sent.iter().map(|(_, t)| t.len()).max().unwrap();
        assert!(
            biggest < MAX_HELD_BYTES + chunk,
            "{biggest} bytes in one update"
        );
        let text: String = sent.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(text, expected);
    }
}
