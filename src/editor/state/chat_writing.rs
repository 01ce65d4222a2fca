//! How the state task writes chat documents: a chat opened or reopened (its record compared
//! and restored), what the agent says streamed in (coalesced into one edit at most every
//! [`FLUSH_EVERY`], or appended on disk while the chat is closed), tool calls and plans kept
//! in place until they are out, and each turn's text kept in the chat's record.

use super::reports::Report;
use super::{State, StateHandle};
use crate::editor::chat::inbox::{ChatInbox, ChatItem};
use crate::editor::chat::links::link_at;
use crate::editor::chat::record::{Entry, YOU};
use crate::editor::chat::{
    CallMark, ChatToken, END_READ, FILE_APPEND_AT, FLUSH_EVERY, Flush, MAX_APPEND, MAX_RETRY_WAIT,
    PlanStep, QUIET_AFTER_REFUSAL, ToolCallLine, WARN_AFTER_REFUSED, Wholeness, append_to_file,
    keep_unsaved_end, pending_end, take_front,
};
use crate::editor::documents::effects::Level;
use crate::editor::documents::effects::{DocumentEdit, Effect, EffectError, TextEdit};
use crate::editor::documents::position::{Position, PositionMapper};
use crate::editor::file_names::file_name;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::oneshot;

impl State {
    /// `path` is a chat with `agent`.
    pub fn chat_opened(&mut self, path: PathBuf, agent: String) {
        self.chats.docs.entry(path.clone()).or_default().agent = agent;
        self.chats.touch(&path);
    }

    /// `path`, a chat with `agent` from an earlier run, was opened again: its next message
    /// tells the agent the conversation so far.
    /// What its document lacks of agentls's record of it is put back (see
    /// `chat_record_compared`).
    pub fn chat_reopened(&mut self, path: PathBuf, agent: String) {
        if self.chats.docs.contains_key(&path) {
            return;
        }
        self.chat_opened(path.clone(), agent);
        if let Some(chat) = self.chats.docs.get_mut(&path) {
            chat.resumed = true;
            chat.wholeness = Wholeness::Comparing;
        }
        let (me, records) = (self.me.clone(), self.chat_records.clone());
        tokio::spawn(async move {
            let record = records.read(&path).await;
            me.report(Report::ChatRecordRead { path, record });
        });
    }

    /// agentls's record of the reopened chat at `path` was read (`None`: it has none): it is
    /// compared with the document as it is now off the state task (a long chat's record is
    /// megabytes), whatever the user types meanwhile.
    pub(in crate::editor) fn compare_chat_record(
        &mut self,
        path: PathBuf,
        record: Option<Vec<u8>>,
    ) {
        let (Some(record), Some(doc)) = (record, self.documents.get(&path)) else {
            self.chat_restored(&path);
            return;
        };
        // A snapshot (ropes share their text): the copy is made off the state task.
        let document = doc.rope().clone();
        let me = self.me.clone();
        tokio::spawn(async move {
            let compared = tokio::task::spawn_blocking(move || {
                crate::editor::chat::record::restore(&record, &document.to_string())
            });
            // A comparison that failed puts nothing back, and sending waits no longer.
            let restore = compared
                .await
                .unwrap_or(crate::editor::chat::record::Restore {
                    missing: None,
                    interrupted: false,
                });
            me.report(Report::ChatRecordCompared { path, restore });
        });
    }

    /// Whether the chat at `path` is being made whole again after a reopen: then the
    /// receiver tells when it is (or gave up). A message read from it before would take along
    /// what the document lacks, the text under the previous heading.
    pub fn chat_restoring(&mut self, path: &Path) -> Option<oneshot::Receiver<()>> {
        let chat = self.chats.docs.get_mut(path)?;
        if chat.wholeness == Wholeness::Whole {
            return None;
        }
        let (tell, told) = oneshot::channel();
        chat.restored.push(tell);
        Some(told)
    }

    /// The document of the reopened chat at `path` changed, or an append to it went in: it is
    /// whole again once everything put back went out and its text ends so (the editor may say
    /// an edit was applied before its change arrives).
    pub(in crate::editor) fn chat_whole_yet(&mut self, path: &Path) {
        let Some(chat) = self.chats.docs.get(path) else {
            return;
        };
        let Wholeness::Appending { end } = &chat.wholeness else {
            return;
        };
        let shown = chat.pending.is_empty()
            && self
                .chat_end(path)
                .is_some_and(|text| text.trim_end().ends_with(end.as_str()));
        if shown {
            self.chat_restored(path);
        }
    }

    /// The reopened chat at `path` is whole again (or will not be made so): sending goes on.
    fn chat_restored(&mut self, path: &Path) {
        if let Some(chat) = self.chats.docs.get_mut(path) {
            chat.wholeness = Wholeness::Whole;
            for waiting in chat.restored.drain(..) {
                let _ = waiting.send(());
            }
        }
    }

    /// agentls's record of the chat at `path`, reopened (`None`: it has none). What the
    /// document lacks of it (the editor quit before saving, or was killed) is put back at its
    /// end, and a turn that never ended (agentls stopped mid-reply) is marked so, with a new
    /// `## You` heading: the next message never takes the old one along.
    pub(in crate::editor) fn chat_record_compared(
        &mut self,
        path: &Path,
        restore: crate::editor::chat::record::Restore,
    ) {
        let crate::editor::chat::record::Restore {
            missing,
            interrupted,
        } = restore;
        if self.documents.get(path).is_none() || missing.is_none() && !interrupted {
            self.chat_restored(path);
            return;
        }
        let Some(chat) = self.chats.docs.get_mut(path) else {
            return;
        };
        if chat.turn_running || !chat.pending.is_empty() {
            // The chat went on already: what it shows is newer than the record.
            self.chat_restored(path);
            return;
        }
        if let Some(missing) = &missing {
            // In the record already: it goes out without being recorded again.
            chat.push_raw(missing);
            chat.recorded = chat.pending.len();
        }
        if interrupted {
            let agent = chat.agent.clone();
            chat.push_paragraph(&format!(
                "_interrupted: agentls stopped before {agent} ended this turn_\n\n{YOU}\n\n"
            ));
            self.chat_records.append(path, Entry::Ended, true);
        }
        if let Some(chat) = self.chats.docs.get_mut(path) {
            chat.wholeness = Wholeness::Appending {
                end: pending_end(&chat.pending),
            };
        }
        if let Some(missing) = missing {
            self.effects.message(
                Level::Info,
                format!(
                    "agentls: put back the end of {} that was not saved ({} bytes), from its record",
                    file_name(path),
                    missing.len()
                ),
            );
        }
        self.schedule_chat_flush(path, FLUSH_EVERY);
    }

    /// The editor opened the document of the chat at `path`. Text that waits to go out to it
    /// (it was closed before it went) goes now, and sending waits until the document shows it:
    /// a message written meanwhile would come before it.
    pub(in crate::editor) fn chat_document_opened(&mut self, path: &Path) {
        self.chats.opened(path);
        let Some(chat) = self.chats.docs.get_mut(path) else {
            return;
        };
        if chat.pending.is_empty() || chat.wholeness != Wholeness::Whole {
            return;
        }
        chat.wholeness = Wholeness::Appending {
            end: pending_end(&chat.pending),
        };
        if chat.flush != Flush::Appending {
            self.flush_chat(path);
        }
    }

    /// Whether the chat at `path` was resumed and has not sent its transcript yet; from now on
    /// it has.
    pub fn take_resumed(&mut self, path: &Path) -> bool {
        self.chats
            .docs
            .get_mut(path)
            .is_some_and(|c| std::mem::take(&mut c.resumed))
    }

    /// A message from the chat at `path` went to its agent (`running`), or its answer ended:
    /// then its record has the turn's end on disk.
    pub fn chat_turn(&mut self, path: &Path, running: bool) {
        if self.chats.stopping {
            return;
        }
        if let Some(chat) = self.chats.docs.get_mut(path) {
            chat.turn_running = running;
            chat.calls.clear();
            chat.plan = None;
        }
        if running {
            self.chats.touch(path);
            let notes = self
                .chats
                .docs
                .get_mut(path)
                .map(|chat| std::mem::take(&mut chat.notes));
            for note in notes.into_iter().flatten() {
                self.append_paragraph_to_chat(path, &note);
            }
        } else {
            self.record_pending(path, false);
            self.chat_records.append(path, Entry::Ended, true);
        }
    }

    /// The user sent `message` from the chat at `path`: its record has it, after what agentls
    /// put in the document before it (recorded now, though it may not have gone out yet).
    pub fn chat_sent(&mut self, path: &Path, message: String) {
        if self.chats.docs.contains_key(path) {
            self.record_pending(path, false);
            self.chat_records.append(path, Entry::Sent(message), false);
        }
    }

    /// agentls puts `message`, the user's (a prompt sent from elsewhere), at the end of the chat
    /// at `path`: its record has it as sent, as if typed there and sent.
    pub fn chat_said(&mut self, path: &Path, message: &str) {
        if !self.chats.docs.contains_key(path) {
            return;
        }
        self.record_pending(path, false);
        if let Some(chat) = self.chats.docs.get_mut(path) {
            chat.push(message);
            chat.recorded = chat.pending.len();
        }
        self.chat_records
            .append(path, Entry::Sent(message.to_owned()), false);
        self.schedule_chat_flush(path, FLUSH_EVERY);
    }

    /// Records what waits to go out to the chat at `path` and is not in its record yet.
    fn record_pending(&mut self, path: &Path, sync: bool) {
        let Some(chat) = self.chats.docs.get_mut(path) else {
            return;
        };
        let fresh = &chat.pending[chat.recorded.min(chat.pending.len())..];
        if !fresh.is_empty() {
            self.chat_records
                .append(path, Entry::Out(fresh.to_owned()), sync);
        }
        chat.recorded = chat.pending.len();
    }

    /// agentls is about to stop: every chat's record gets what its document has not got yet
    /// (on disk once the returned recorder is [`done`](crate::editor::chat::record::Recorder::done)),
    /// and nothing more is said in the chats.
    pub fn keep_chats(&mut self) -> crate::editor::chat::record::Recorder {
        self.chats.stopping = true;
        let paths: Vec<PathBuf> = self.chats.docs.keys().cloned().collect();
        for path in &paths {
            self.record_pending(path, true);
        }
        self.chat_records.clone()
    }

    /// `text` left the front of the chat's pending text for the document: its record gets
    /// what of it was not recorded yet.
    fn record_out(&mut self, path: &Path, text: &str) {
        let Some(chat) = self.chats.docs.get_mut(path) else {
            return;
        };
        let fresh = &text[chat.recorded.min(text.len())..];
        if !fresh.is_empty() {
            self.chat_records
                .append(path, Entry::Out(fresh.to_owned()), false);
        }
        chat.recorded = chat.recorded.saturating_sub(text.len());
    }

    /// Appends `text` to the chat at `path` soon (coalesced).
    pub fn append_to_chat(&mut self, path: &Path, text: &str) {
        let Some(chat) = self.chats.live(path) else {
            return;
        };
        chat.push(text);
        self.schedule_chat_flush(path, FLUSH_EVERY);
    }

    /// Tells the user `note` in the chat at `path`: at once in a running turn's reply, else at
    /// the start of the next reply (after the user's message, never inside it).
    pub(in crate::editor) fn note_in_chat(&mut self, path: &Path, note: &str) {
        match self.chats.docs.get_mut(path) {
            Some(chat) if !chat.turn_running => chat.notes.push(note.to_owned()),
            _ => self.append_paragraph_to_chat(path, note),
        }
    }

    /// Appends `text` to the chat at `path` soon, after a blank line.
    pub fn append_paragraph_to_chat(&mut self, path: &Path, text: &str) {
        let Some(chat) = self.chats.live(path) else {
            return;
        };
        chat.push_paragraph(text);
        self.schedule_chat_flush(path, FLUSH_EVERY);
    }

    /// Appends the agent's thought `text` to the chat at `path` soon, quoted.
    pub fn append_thought_to_chat(&mut self, path: &Path, text: &str) {
        let Some(chat) = self.chats.live(path) else {
            return;
        };
        chat.push_thought(text);
        self.schedule_chat_flush(path, FLUSH_EVERY);
    }

    /// A tool call of the chat at `path` stands where `call` says: one line per call. A line
    /// not in the document yet changes in place; one already there is followed by a line of
    /// how it ended.
    pub fn chat_tool_call(&mut self, path: &Path, call: ToolCallLine) {
        let Some(chat) = self.chats.live(path) else {
            return;
        };
        let (mark, line) = (call.mark, format!("{} {}", call.mark.glyph(), call.title));
        let last = chat.calls.get(&call.id).cloned();
        if last.as_ref() == Some(&line) {
            return;
        }
        let replaced = last.as_deref().and_then(|l| chat.replace_pending(l, &line));
        match (replaced, &last) {
            (Some(_), _) => {}
            // Its line is out; a new title alone is not worth another.
            (None, Some(_)) if mark == CallMark::Running => return,
            (None, _) => chat.push_line(&line),
        }
        chat.calls.insert(call.id, line.clone());
        if let (Some(true), Some(old)) = (replaced, last) {
            self.chat_records
                .append(path, Entry::Replaced { old, new: line }, false);
        }
        self.schedule_chat_flush(path, FLUSH_EVERY);
    }

    /// The agent's plan changed to `steps` (each done or not, and its text): a check list in the
    /// chat at `path`, changed in place until it goes out, then shown again below when it
    /// changes.
    pub fn chat_plan(&mut self, path: &Path, steps: &[PlanStep]) {
        let Some(chat) = self.chats.live(path) else {
            return;
        };
        let list: String = steps.iter().map(PlanStep::line).collect();
        let list = list.trim_end().to_owned();
        let last = chat.plan.clone().unwrap_or_default();
        if last == list {
            return;
        }
        let replaced = match last.is_empty() {
            true => None,
            false => chat.replace_pending(&last, &list),
        };
        if replaced.is_none() {
            chat.push_line(&list);
        }
        chat.plan = Some(list.clone());
        if replaced == Some(true) {
            self.chat_records.append(
                path,
                Entry::Replaced {
                    old: last,
                    new: list,
                },
                false,
            );
        }
        self.schedule_chat_flush(path, FLUSH_EVERY);
    }

    /// Flushes the chat at `path` after `wait`, unless a flush is on its way already; at once
    /// when it is not open and [`FILE_APPEND_AT`] bytes wait (unless the file refused the last).
    /// What waits is recorded now: an editor may kill agentls at any moment (Helix does on
    /// `:qa!`), and the record must hold everything the agent said.
    fn schedule_chat_flush(&mut self, path: &Path, wait: Duration) {
        self.record_pending(path, false);
        let open = self.documents.get(path).is_some();
        let Some(chat) = self.chats.docs.get_mut(path) else {
            return;
        };
        if chat.pending.is_empty() {
            return;
        }
        let now = !open && chat.refused == 0 && chat.pending.len() >= FILE_APPEND_AT;
        match (chat.flush, now) {
            (Flush::Appending, _) | (Flush::Waiting(_), false) => {}
            (Flush::Idle | Flush::Waiting(_), true) => self.flush_chat(path),
            (Flush::Idle, false) => {
                chat.timers += 1;
                let timer = chat.timers;
                chat.flush = Flush::Waiting(timer);
                let (me, path) = (self.me.clone(), path.to_owned());
                tokio::spawn(async move {
                    tokio::time::sleep(wait).await;
                    me.report(Report::ChatTimerEnded { path, timer });
                });
            }
        }
    }

    /// The timer numbered `timer` of the chat at `path` ended: its flush, unless it went sooner.
    pub(in crate::editor) fn chat_timer_ended(&mut self, path: &Path, timer: u64) {
        let Some(chat) = self.chats.docs.get(path) else {
            return;
        };
        if chat.flush == Flush::Waiting(timer) {
            self.flush_chat(path);
        }
    }

    /// Puts the chat's pending text at the end of its document (or its file).
    fn flush_chat(&mut self, path: &Path) {
        let Some(chat) = self.chats.docs.get_mut(path) else {
            return;
        };
        if chat.pending.is_empty() {
            chat.flush = Flush::Idle;
            return;
        }
        chat.flush = Flush::Appending;
        if self.documents.get(path).is_none() {
            let text = std::mem::take(&mut chat.pending);
            chat.unread = true;
            self.record_out(path, &text);
            // Not open: the file gets it.
            let (me, owned) = (self.me.clone(), path.to_owned());
            tokio::spawn(async move {
                let result = append_to_file(&owned, &text)
                    .await
                    .map_err(|e| format!("agentls: cannot append to {}: {e}", owned.display()));
                me.report(Report::ChatFileAppended {
                    path: owned,
                    text,
                    result,
                });
            });
            return;
        };
        let text = take_front(&mut chat.pending, MAX_APPEND);
        let label = format!("{} replies in {}", chat.agent, file_name(path));
        let (quiet_since_refusal, shown_mid_line) = (chat.refused_at, chat.shown_mid_line);
        self.record_out(path, &text);
        let Some(doc) = self.documents.get(path) else {
            return;
        };
        let rope = doc.rope();
        let len = rope.len_chars();
        let (span, new_text) = match shown_mid_line && len > 0 && rope.char(len - 1) == '\n' {
            true => (len - 1..len - 1, text.strip_suffix('\n').unwrap_or(&text)),
            false => (len..len, text.as_str()),
        };
        let mapper = PositionMapper::new(rope, self.encoding);
        let (range, new_text) = mapper.replacement(span, new_text.to_owned());
        // The editor refused an append though nothing was typed, and has said nothing since
        // (Helix bumps the version when it undoes a completion's preview, and tells no one):
        // the text is as agentls knows it, only the number moved, so this one goes without a
        // version. Anything the editor sent meanwhile makes it a versioned append again.
        let unversioned = quiet_since_refusal == Some(doc.version());
        let version = (!unversioned).then(|| doc.version());
        let edit = DocumentEdit {
            label,
            path: path.to_owned(),
            version,
            edits: vec![TextEdit { range, new_text }],
        };
        let sent_version = doc.version();
        let (reply, applied) = oneshot::channel();
        self.effects.send(Effect::ApplyEdit { edit, reply });
        let (me, owned) = (self.me.clone(), path.to_owned());
        tokio::spawn(async move {
            let result = applied
                .await
                .unwrap_or_else(|_| Err(EffectError::Transport("the editor host stopped".into())));
            me.report(Report::ChatEditApplied {
                path: owned,
                text,
                sent_version,
                result,
            });
        });
    }

    /// The chat at `path` was closed with `text` in its buffer: what the buffer had beyond its
    /// file (agentls's appends nobody saved) is kept in the file, so that the chat opened again
    /// in this run shows it. A file the user's own edits took elsewhere is left as it is.
    /// Appends wait until it is done.
    pub(in crate::editor) fn chat_closed(&mut self, path: &Path, text: Option<String>) {
        let (Some(text), Some(chat)) = (text, self.chats.docs.get_mut(path)) else {
            return;
        };
        if chat.flush == Flush::Appending {
            return; // an edit on its way to the closed buffer comes back refused, and goes again
        }
        chat.flush = Flush::Appending;
        let (me, owned) = (self.me.clone(), path.to_owned());
        tokio::spawn(async move {
            let result = keep_unsaved_end(&owned, text)
                .await
                .map_err(|e| format!("agentls: cannot keep {}: {e}", owned.display()));
            me.report(Report::ChatFileAppended {
                path: owned,
                text: String::new(),
                result,
            });
        });
    }

    /// `text` was appended to the chat file at `path` (not open), or that failed: then it goes
    /// again, first.
    pub(in crate::editor) fn chat_file_appended(
        &mut self,
        path: &Path,
        text: String,
        result: Result<(), String>,
    ) {
        // Opened meanwhile, the document may have been read before the append landed: then
        // it lacks the text, which goes to it first, as the rest will.
        let opened_without = (self.documents.get(path)).is_some_and(|doc| {
            let rope = doc.rope();
            let tail = rope.len_chars().checked_sub(text.chars().count());
            result.is_ok() && tail.is_none_or(|tail| rope.slice(tail..) != text.as_str())
        });
        if (result.is_err() || opened_without)
            && let Some(chat) = self.chats.docs.get_mut(path)
        {
            chat.pending.insert_str(0, &text);
            chat.recorded += text.len();
        }
        self.chat_flushed(path, result.map_err(EffectError::Refused), false);
    }

    /// The editor answered the edit appending `text` to the open chat at `path`, sent at
    /// `sent_version`. Refused text is never dropped: it goes again, first.
    pub(in crate::editor) fn chat_edit_applied(
        &mut self,
        path: &Path,
        text: String,
        sent_version: i32,
        result: Result<(), EffectError>,
    ) {
        let typed_meanwhile = self.documents.get(path).map(|d| d.version()) != Some(sent_version);
        if let Some(chat) = self.chats.docs.get_mut(path) {
            match result {
                Ok(()) => chat.shown_mid_line = !text.ends_with('\n'),
                Err(_) => {
                    chat.pending.insert_str(0, &text);
                    chat.recorded += text.len();
                }
            }
        }
        self.chat_flushed(path, result, typed_meanwhile);
    }

    /// An append reached the document (or was refused): what came meanwhile (or the refused
    /// text) goes next. A refusal because the user typed meanwhile goes again at the next
    /// flush; one of an unchanged document waits longer each time, and the user is told once.
    fn chat_flushed(
        &mut self,
        path: &Path,
        result: Result<(), EffectError>,
        typed_meanwhile: bool,
    ) {
        let Some(chat) = self.chats.docs.get_mut(path) else {
            return;
        };
        chat.flush = Flush::Idle;
        let wait = match &result {
            Ok(()) => {
                chat.refused = 0;
                chat.refused_at = None;
                self.chat_whole_yet(path);
                FLUSH_EVERY
            }
            Err(e) if typed_meanwhile => {
                tracing::debug!(path = %path.display(), "chat append crossed an edit: {e}");
                chat.refused_at = None;
                FLUSH_EVERY
            }
            Err(e) => {
                tracing::debug!(path = %path.display(), "chat append refused: {e}");
                chat.refused += 1;
                let version = self.documents.get(path).map(|d| d.version());
                if version.is_some() && chat.refused_at != version {
                    // Once more when the editor stayed quiet, without a version (see
                    // `flush_chat`).
                    chat.refused_at = version;
                    self.schedule_chat_flush(path, QUIET_AFTER_REFUSAL);
                    return;
                }
                if chat.refused == WARN_AFTER_REFUSED {
                    self.effects.message(
                        Level::Warning,
                        format!(
                            "agentls: the editor refuses to append the reply to {} ({e}); \
                             it waits and goes again, or close the chat and it goes to the file",
                            file_name(path)
                        ),
                    );
                }
                FLUSH_EVERY
                    .saturating_mul(1 << chat.refused.min(6))
                    .min(MAX_RETRY_WAIT)
            }
        };
        self.schedule_chat_flush(path, wait);
    }
}

impl State {
    /// The end of the open chat document at `path` (its last `END_READ` characters), as
    /// [`file_end`](crate::editor::chat::file_end) reads a closed one's; `None` when it is not open.
    pub fn chat_end(&self, path: &Path) -> Option<String> {
        let rope = self.documents.get(path)?.rope();
        let start = rope.len_chars().saturating_sub(END_READ as usize);
        Some(rope.slice(start..).to_string())
    }

    /// The lines of the open document `path` that `range` touches, quoted for a chat message:
    /// where they come from, then a fenced block in the document's language. `None` when the
    /// document is not open.
    pub fn quote_lines(
        &self,
        path: &Path,
        range: crate::editor::documents::position::Range,
    ) -> Option<String> {
        let doc = self.documents.get(path)?;
        let rope = doc.rope();
        let lines = rope.len_lines().max(1);
        let first = (range.start.line as usize).min(lines - 1);
        let mut last = range.end.line as usize;
        // A selection that ends at the start of a line does not take that line.
        if range.end.character == 0 && last > first {
            last -= 1;
        }
        let last = last.clamp(first, lines - 1);
        let mut code: String = (first..=last).map(|i| rope.line(i).to_string()).collect();
        if !code.ends_with('\n') {
            code.push('\n');
        }
        let shown = self
            .folders
            .iter()
            .find_map(|f| path.strip_prefix(f).ok())
            .unwrap_or(path);
        // Named as a mention (`@path#L2-3`) where the path allows: the lines then go to the
        // agent as a context block too, not only as quoted text.
        let shown = shown.display().to_string();
        let head = match (first == last, shown.contains(char::is_whitespace)) {
            (true, false) => format!("@{shown}#L{}", first + 1),
            (false, false) => format!("@{shown}#L{}-{}", first + 1, last + 1),
            (true, true) => format!("`{shown}` line {}", first + 1),
            (false, true) => format!("`{shown}` lines {}–{}", first + 1, last + 1),
        };
        let fence = if code.contains("```") { "````" } else { "```" };
        Some(format!(
            "{head}:\n\n{fence}{}\n{code}{fence}\n\n",
            doc.language()
        ))
    }
}

impl State {
    /// The word before `position` in the chat document `path`; `None` when it is not a chat.
    pub fn chat_token(
        &self,
        path: &Path,
        position: crate::editor::documents::position::Position,
    ) -> Option<ChatToken> {
        let agent = self.chats.agent_of(path)?.to_owned();
        let doc = self.documents.get(path)?;
        let rope = doc.rope();
        let mapper = PositionMapper::new(rope, self.encoding);
        let cursor = mapper.char_offset(position);
        let line_start = rope.line_to_char(rope.char_to_line(cursor));
        let before: String = rope.slice(line_start..cursor).to_string();
        let word_at = before
            .char_indices()
            .rev()
            .find(|(_, c)| c.is_whitespace())
            .map_or(0, |(i, c)| i + c.len_utf8());
        let word = before[word_at..].to_owned();
        let start = mapper.position(line_start + before[..word_at].chars().count());
        Some(ChatToken {
            agent,
            starts_line: before[..word_at].trim().is_empty(),
            word,
            start,
        })
    }
}

impl State {
    /// Carries out `item` for the chat at `path`.
    pub fn chat_item(&mut self, path: &Path, item: ChatItem) {
        match item {
            ChatItem::Text(text) => self.append_to_chat(path, &text),
            ChatItem::Paragraph(text) => self.append_paragraph_to_chat(path, &text),
            ChatItem::Thought(text) => self.append_thought_to_chat(path, &text),
            ChatItem::Call(call) => self.chat_tool_call(path, call),
            ChatItem::Plan(steps) => self.chat_plan(path, &steps),
            ChatItem::Sent(message) => self.chat_sent(path, message),
            ChatItem::Said(message) => self.chat_said(path, &message),
            ChatItem::Turn(running) => self.chat_turn(path, running),
            ChatItem::Opened(agent) => self.chat_opened(path.to_owned(), agent),
            ChatItem::Reopened(agent) => self.chat_reopened(path.to_owned(), agent),
        }
    }
}

impl StateHandle {
    /// `item` goes to the chat at `path` through `inbox`, in order with every other item (a
    /// chat is known before what goes to it), one state job for all that arrive before it runs.
    pub fn send_to_chat(&self, inbox: &ChatInbox, path: &Path, item: ChatItem) {
        if inbox.put(path, item) {
            self.report(Report::ChatItemsWaiting(inbox.clone()));
        }
    }
}

impl State {
    /// The file and line the link at `position` of the chat document `path` points to.
    pub fn chat_link(&self, path: &Path, position: Position) -> Option<(PathBuf, u32)> {
        self.chats.agent_of(path)?;
        let rope = self.documents.get(path)?.rope();
        let cursor = PositionMapper::new(rope, self.encoding).char_offset(position);
        let number = rope.char_to_line(cursor);
        let start = rope.line_to_char(number);
        let line = rope.line(number).to_string();
        link_at(&line, cursor - start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::editor::chat::Stage;

    fn call(mark: CallMark, new: bool) -> ToolCallLine {
        let (id, title, lead) = ("c1".into(), "Read a.rs".into(), "");
        ToolCallLine {
            id,
            title,
            mark,
            lead,
            new,
        }
    }

    #[tokio::test]
    async fn a_tool_call_has_one_line_until_it_is_out_then_one_for_its_end() {
        let (mut state, _effects) = crate::editor::state::tests::test_state();
        let path = PathBuf::from("/chats/demo.md");
        state.chat_opened(path.clone(), "demo".into());
        let pending = |s: &State| s.chats.docs[&path].pending.clone();
        state.chat_tool_call(&path, call(CallMark::Running, true));
        state.chat_tool_call(&path, call(CallMark::Done, false));
        assert_eq!(pending(&state), "✓ Read a.rs\n\n");
        state.chat_tool_call(&path, call(CallMark::Done, false));
        assert_eq!(
            pending(&state),
            "✓ Read a.rs\n\n",
            "a repeated status adds nothing"
        );

        let second = ToolCallLine {
            id: "c2".into(),
            ..call(CallMark::Running, true)
        };
        state.chat_tool_call(&path, second.clone());
        state.chats.docs.get_mut(&path).unwrap().pending.clear(); // as if it went out
        state.chat_tool_call(
            &path,
            ToolCallLine {
                title: "Read b.rs".into(),
                ..second.clone()
            },
        );
        assert_eq!(pending(&state), "", "a new title alone is not worth a line");
        state.chat_tool_call(
            &path,
            ToolCallLine {
                mark: CallMark::Failed,
                ..second
            },
        );
        assert_eq!(pending(&state), "✗ Read a.rs\n\n");
    }

    #[tokio::test]
    async fn a_plan_is_a_check_list_changed_in_place_until_it_is_out() {
        let (mut state, _effects) = crate::editor::state::tests::test_state();
        let path = PathBuf::from("/chats/demo.md");
        state.chat_opened(path.clone(), "demo".into());
        let step = |text: &str, stage| PlanStep {
            text: text.into(),
            stage,
        };
        let pending = |s: &State| s.chats.docs[&path].pending.clone();
        state.chat_plan(&path, &[step("a", Stage::Doing), step("b", Stage::Waiting)]);
        state.chat_plan(&path, &[step("a", Stage::Done), step("b", Stage::Doing)]);
        assert_eq!(pending(&state), "- [x] a\n- [ ] b (doing now)\n\n");
        state.chats.docs.get_mut(&path).unwrap().pending.clear(); // as if it went out
        state.chat_plan(&path, &[step("a", Stage::Done), step("b", Stage::Doing)]);
        assert_eq!(pending(&state), "", "the same plan again adds nothing");
        state.chat_plan(&path, &[step("a", Stage::Done), step("b", Stage::Done)]);
        assert_eq!(pending(&state), "- [x] a\n- [x] b\n\n");
    }

    #[tokio::test]
    async fn a_chat_not_open_is_appended_to_by_size_as_well_as_by_time() {
        let (mut state, _effects) = crate::editor::state::tests::test_state();
        let dir = tempfile::tempdir().unwrap();
        let (closed, open) = (dir.path().join("closed.md"), dir.path().join("open.md"));
        state.chat_opened(closed.clone(), "demo".into());
        state.chat_opened(open.clone(), "demo".into());
        state.did_open(open.clone(), "", 1, "markdown");
        let line = "x".repeat(99) + "\n";
        let chat =
            |s: &State, path: &Path| (s.chats.docs[path].pending.len(), s.chats.docs[path].flush);

        state.append_to_chat(&closed, &line);
        assert_eq!(
            chat(&state, &closed),
            (100, Flush::Waiting(1)),
            "a little text waits"
        );
        for _ in 1..FILE_APPEND_AT / line.len() {
            state.append_to_chat(&closed, &line);
        }
        assert_eq!(chat(&state, &closed).1, Flush::Waiting(1));
        state.append_to_chat(&closed, &line);
        assert_eq!(
            chat(&state, &closed),
            (0, Flush::Appending),
            "at {FILE_APPEND_AT} bytes it goes to the file at once, not at the timer"
        );
        state.chat_timer_ended(&closed, 1);
        assert_eq!(
            chat(&state, &closed).1,
            Flush::Appending,
            "the timer is stale"
        );

        for _ in 0..=FILE_APPEND_AT / line.len() {
            state.append_to_chat(&open, &line);
        }
        assert_eq!(
            chat(&state, &open).1,
            Flush::Waiting(1),
            "an open chat is paced to the editor"
        );
    }

    /// A chat closed while text waited for it, opened again before its timer: the text goes to
    /// the document at once, and sending waits until the document shows it.
    #[tokio::test]
    async fn a_chat_opened_again_gets_what_waited_at_once_and_sending_waits_for_it() {
        let (mut state, mut effects) = crate::editor::state::tests::test_state();
        let path = PathBuf::from("/ws/chat.md");
        state.chat_opened(path.clone(), "demo".into());
        state.append_to_chat(&path, "Done.\n\n## You\n\n");
        assert_eq!(state.chats.docs[&path].flush, Flush::Waiting(1));
        state.did_open(path.clone(), "# Chat\n\n", 1, "markdown");
        assert_eq!(
            state.chats.docs[&path].flush,
            Flush::Appending,
            "not at the timer"
        );
        let appended = std::iter::from_fn(|| effects.try_recv().ok()).find_map(|e| match e {
            Effect::ApplyEdit { edit, .. } => Some(edit.edits[0].new_text.clone()),
            _ => None,
        });
        // Before the document's final line break, the same text (see `replacement`).
        assert_eq!(appended.as_deref(), Some("\nDone.\n\n## You\n"));
        assert!(state.chat_restoring(&path).is_some(), "a send waits");
    }

    #[tokio::test]
    async fn an_open_chats_end_is_taken_alone() {
        let (mut state, _effects) = crate::editor::state::tests::test_state();
        let path = PathBuf::from("/chats/demo.md");
        assert_eq!(state.chat_end(&path), None);
        let text = "é".repeat(10_000) + "\n## You\n\n";
        state.did_open(path.clone(), &text, 1, "markdown");
        let end = state.chat_end(&path).unwrap();
        assert_eq!(end.chars().count(), END_READ as usize);
        assert!(text.ends_with(&end));
    }
}
