//! Chat documents: a markdown file per conversation with an agent, which the user reads and
//! writes in their own editor. The agent's reply is appended at the end through the editor
//! (`workspace/applyEdit`, at most [`FLUSH_EVERY`] apart, one undo step each), so whatever the
//! user types anywhere in the document meanwhile is never touched; a chat that is not open is
//! appended to on disk. What the user sends is the text under the last `## You` heading.

pub mod comment_prompt;
pub mod inbox;
pub mod links;
pub mod record;
pub mod sessions;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::oneshot;

use super::documents::effects::Level;
use crate::private_files::{PrivateDir, PrivateError};
use record::YOU;

/// The longest a reply waits before it reaches the document (10 edits a second at most).
pub const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// The chat documents agentls knows, by path.
#[derive(Debug, Default)]
pub struct Chats {
    pub(super) docs: HashMap<PathBuf, Chat>,
    /// agentls is stopping and its chats' records are kept as they were: what the agents say
    /// while they are stopped (a turn failing as its agent dies) is not the conversation, and
    /// a turn cut short so is marked interrupted when its chat is opened again.
    pub(super) stopping: bool,
}

#[derive(Debug, Default)]
pub(super) struct Chat {
    /// The agent it talks to.
    pub(super) agent: String,
    /// Reply text not in the document yet.
    pub(super) pending: String,
    /// How much of the start of `pending` is in the chat's record already (text a refused
    /// append put back, or text recorded when a message was sent before it went out).
    pub(super) recorded: usize,
    /// Where its next append stands.
    pub(super) flush: Flush,
    /// Timers set so far: the number of the latest (a timer that is not the latest is stale).
    pub(super) timers: u64,
    /// Appends the editor refused in a row though the document had not changed meanwhile.
    pub(super) refused: u32,
    /// The document's version when the editor last refused an append of it though it had not
    /// changed (`None`: the last append went in).
    pub(super) refused_at: Option<i32>,
    /// A message sent from it is being answered.
    pub(super) turn_running: bool,
    /// When it was last opened or sent from (a counter): the agent's latest chat is its own.
    used: u64,
    /// Opened again from an earlier run: its next message takes the transcript along.
    pub(super) resumed: bool,
    /// Whether its document shows all agentls's record holds of it (sending waits until it
    /// does, see [`State::chat_restoring`]).
    pub(super) wholeness: Wholeness,
    /// Who waits for it to be whole again.
    pub(super) restored: Vec<oneshot::Sender<()>>,
    /// It got text while not open in the editor, and has not been opened since.
    pub(super) unread: bool,
    /// The line each tool call of the running turn last got, by call id.
    pub(super) calls: HashMap<String, String>,
    /// The agent's thoughts are being quoted: a `> ` is due before the next thought text
    /// (`Some(true)`) or not (`Some(false)`); `None` outside a quote.
    thought: Option<bool>,
    /// How what was appended last ends.
    ends: Ending,
    /// What agentls last put in the open document ended mid-line: a `\n` after it at the
    /// document's end is the editor's own (Neovim keeps one past its last line), and the next
    /// append goes before it.
    pub(super) shown_mid_line: bool,
    /// The agent's plan as last shown in the running turn.
    pub(super) plan: Option<String>,
    /// Notes for the user that came while no turn ran: they wait for the next reply, so that
    /// none lands under the `## You` heading and goes out as part of the user's message.
    pub(super) notes: Vec<String>,
}

/// Where a chat's next append stands.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flush {
    /// Nothing waits for it.
    #[default]
    Idle,
    /// The timer numbered so is set.
    Waiting(u64),
    /// An append is on its way (to the editor or the file).
    Appending,
}

/// Whether a chat's document shows all agentls's record holds of it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) enum Wholeness {
    /// It does (or it was opened in this run, or its record cannot tell).
    #[default]
    Whole,
    /// Opened again from an earlier run: its record is being read and compared with it.
    Comparing,
    /// What it lacked is on its way into it: it is whole once its text ends so (the last
    /// few hundred bytes of what was put back).
    Appending { end: String },
}

/// How the text appended to a chat so far ends.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// With a blank line (or nothing was appended yet).
    #[default]
    BlankLine,
    /// With one line end.
    LineEnd,
    /// In the middle of a line.
    MidLine,
}

impl Chat {
    /// Appends `text` to what goes out next, ending a quote of thoughts first.
    pub(super) fn push(&mut self, text: &str) {
        if self.thought.take().is_some() {
            self.blank_line();
        }
        self.push_raw(text);
    }

    /// Replaces the last `old` of what has not gone out yet with `new`: `None` when it is not
    /// there, else whether the chat's record has `old` already (then the record must be told).
    pub(super) fn replace_pending(&mut self, old: &str, new: &str) -> Option<bool> {
        let at = self.pending.rfind(old)?;
        self.pending.replace_range(at..at + old.len(), new);
        let recorded = at < self.recorded;
        if recorded {
            self.recorded = (self.recorded + new.len())
                .saturating_sub(old.len())
                .max(at + new.len());
        }
        Some(recorded)
    }

    /// Appends `line` as a paragraph of its own.
    pub(super) fn push_line(&mut self, line: &str) {
        self.push_paragraph(line);
        self.push_raw("\n\n");
    }

    /// Appends `text` after a blank line (one is added unless what was appended ends with one).
    pub(super) fn push_paragraph(&mut self, text: &str) {
        self.push("");
        self.blank_line();
        self.push_raw(text);
    }

    /// Appends the agent's thought `text`, quoted (`> ` before each line).
    pub(super) fn push_thought(&mut self, text: &str) {
        let mut due = match self.thought {
            Some(due) => due,
            None => {
                self.blank_line();
                true
            }
        };
        for piece in text.split_inclusive('\n') {
            if due {
                self.push_raw("> ");
            }
            self.push_raw(piece);
            due = piece.ends_with('\n');
        }
        self.thought = Some(due);
    }

    /// Ends what was appended with a blank line, unless it does.
    fn blank_line(&mut self) {
        match self.ends {
            Ending::BlankLine => {}
            Ending::LineEnd => self.push_raw("\n"),
            Ending::MidLine => self.push_raw("\n\n"),
        }
    }

    pub(super) fn push_raw(&mut self, text: &str) {
        let kept = text.trim_end_matches('\n');
        let ends = match (text.len() - kept.len(), kept.is_empty(), self.ends) {
            (0, true, ends) => ends,
            (0, false, _) => Ending::MidLine,
            (1, true, Ending::MidLine) | (1, false, _) => Ending::LineEnd,
            _ => Ending::BlankLine,
        };
        self.pending.push_str(text);
        self.ends = ends;
    }
}

/// A step of an agent's plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanStep {
    /// What the step does.
    pub text: String,
    /// Where it stands.
    pub stage: Stage,
}

/// Where a plan step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Not started.
    Waiting,
    /// Being worked on.
    Doing,
    /// Done.
    Done,
}

impl PlanStep {
    /// Its line of a markdown check list.
    pub(super) fn line(&self) -> String {
        let text = &self.text;
        match self.stage {
            Stage::Waiting => format!("- [ ] {text}\n"),
            Stage::Doing => format!("- [ ] {text} (doing now)\n"),
            Stage::Done => format!("- [x] {text}\n"),
        }
    }
}

/// Where a tool call stands, as its line in a chat shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallMark {
    /// Asked for or running: `… title`.
    Running,
    /// Completed: `✓ title`.
    Done,
    /// Failed: `✗ title`.
    Failed,
}

/// A tool call's line: what it is called now and where it stands.
#[derive(Debug, Clone)]
pub struct ToolCallLine {
    /// The agent's id for the call.
    pub id: String,
    /// Its title now.
    pub title: String,
    /// Where it stands.
    pub mark: CallMark,
    /// What goes before its line in the log when it starts mid-line (`"\n"`), else `""`.
    pub lead: &'static str,
    /// The call was just made (not an update of it).
    pub new: bool,
}

impl ToolCallLine {
    /// Its line for the editor's log, where no chat takes it: its start and its failure.
    pub fn log_line(&self) -> Option<(Level, String)> {
        let (lead, title) = (self.lead, &self.title);
        match self.mark {
            CallMark::Failed => Some((Level::Warning, format!("{lead}✗ {title} failed\n"))),
            _ if self.new => Some((Level::Info, format!("{lead}▸ {title}\n"))),
            _ => None,
        }
    }
}

impl CallMark {
    pub(super) fn glyph(self) -> char {
        match self {
            Self::Running => '…',
            Self::Done => '✓',
            Self::Failed => '✗',
        }
    }
}

/// The most one append to an open chat carries. An edit is made for one version of the
/// document and refused if the user typed before the editor read it, so it is kept small
/// enough to cross quickly: a megabyte at once is never read before the next keystroke.
pub(super) const MAX_APPEND: usize = 64 * 1024;
/// After this many refusals of an unchanged document the user is told the reply waits (once).
pub(super) const WARN_AFTER_REFUSED: u32 = 5;
/// How long after a refusal of an unchanged document the editor must stay silent before the
/// next append goes without a version: long enough for any keystroke it holds back to arrive
/// (Neovim gathers them for 150 ms), short enough that the reply still flows within a second.
pub(super) const QUIET_AFTER_REFUSAL: Duration = Duration::from_millis(300);
/// The longest a refused append waits before it goes again.
pub(super) const MAX_RETRY_WAIT: Duration = Duration::from_secs(5);
/// A chat that is not open is appended to as soon as this much reply text waits, not only every
/// [`FLUSH_EVERY`]: an agent that streams megabytes a second has them written out, not held.
pub(super) const FILE_APPEND_AT: usize = 256 * 1024;

impl Chats {
    /// The chat at `path`, to say more in (`None` once agentls is stopping).
    pub(super) fn live(&mut self, path: &Path) -> Option<&mut Chat> {
        if self.stopping {
            return None;
        }
        self.docs.get_mut(path)
    }

    /// The chats that got text while not open and were not opened since, with their agents.
    pub fn unread(&self) -> impl Iterator<Item = (&Path, &str)> {
        self.docs
            .iter()
            .filter(|(_, chat)| chat.unread)
            .map(|(path, chat)| (path.as_path(), chat.agent.as_str()))
    }

    /// The document at `path` was opened: a chat's text is seen.
    pub fn opened(&mut self, path: &Path) {
        if let Some(chat) = self.docs.get_mut(path) {
            chat.unread = false;
            chat.shown_mid_line = false;
        }
    }

    /// The agent of the chat document at `path`.
    pub fn agent_of(&self, path: &Path) -> Option<&str> {
        self.docs.get(path).map(|c| c.agent.as_str())
    }

    /// Whether `path` is the workspace record of a folder holding a known chat
    /// ([`self::sessions::WORKSPACE_RECORD`]): agentls's own file.
    pub fn is_folder_record(&self, path: &Path) -> bool {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let name = crate::private_files::being_written(name).unwrap_or(name);
        name == self::sessions::WORKSPACE_RECORD
            && self.docs.keys().any(|chat| chat.parent() == path.parent())
    }

    /// Whether a message sent from the chat at `path` is being answered.
    pub fn turn_running(&self, path: &Path) -> bool {
        self.docs.get(path).is_some_and(|c| c.turn_running)
    }

    /// The chat with `agent` used last.
    pub fn latest_of(&self, agent: &str) -> Option<&Path> {
        self.docs
            .iter()
            .filter(|(_, c)| c.agent == agent)
            .max_by_key(|(_, c)| c.used)
            .map(|(p, _)| p.as_path())
    }

    pub(super) fn touch(&mut self, path: &Path) {
        let next = self.docs.values().map(|c| c.used).max().unwrap_or(0) + 1;
        if let Some(chat) = self.docs.get_mut(path) {
            chat.used = next;
        }
    }
}

/// Takes the first `most` bytes of `text` or fewer: up to its last line end within them,
/// else its last whole character; all of it when it is shorter.
pub(super) fn take_front(text: &mut String, most: usize) -> String {
    if text.len() <= most {
        return std::mem::take(text);
    }
    let mut cut = most;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let cut = text[..cut].rfind('\n').map_or(cut, |at| at + 1);
    let rest = text.split_off(cut);
    std::mem::replace(text, rest)
}

/// Appends `text` to the chat file at `path` (made again if it went), writing only the new text:
/// a long reply into a chat that is not open costs what it adds, never a rewrite of the file,
/// and an append made meanwhile by another task is kept. Its folder must be private and the
/// file a regular file of ours (see [`PrivateDir`]).
pub async fn append_to_file(path: &Path, text: &str) -> Result<(), PrivateError> {
    let (path, text) = (path.to_owned(), text.to_owned());
    tokio::task::spawn_blocking(move || {
        let folder = path.parent().unwrap_or(Path::new("/"));
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        PrivateDir::open(folder)?.append(&name, text.as_bytes(), false)
    })
    .await
    .unwrap_or_else(|e| {
        Err(PrivateError::Io {
            path: PathBuf::new(),
            source: std::io::Error::other(e),
        })
    })
}

/// The most of a chat file read to compare it with its closed buffer.
const KEEP_READ: u64 = 64 * 1024 * 1024;

/// Replaces the chat file at `path` with `buffer` when the buffer only adds to it.
pub(super) async fn keep_unsaved_end(path: &Path, buffer: String) -> Result<(), PrivateError> {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || {
        let folder = path.parent().unwrap_or(Path::new("/"));
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let dir = PrivateDir::open(folder)?;
        let file = dir.read(&name, KEEP_READ)?.unwrap_or_default();
        if buffer.len() > file.len() && buffer.as_bytes().starts_with(&file) {
            dir.replace(&name, buffer.as_bytes(), false)?;
        }
        Ok(())
    })
    .await
    .unwrap_or_else(|e| {
        Err(PrivateError::Io {
            path: PathBuf::new(),
            source: std::io::Error::other(e),
        })
    })
}

/// How much of a chat file's end is read to see how it ends.
pub(super) const END_READ: u64 = 4096;

/// The end of the chat file at `path` (its last `END_READ` bytes; a character cut at their
/// start is replaced), enough to see whether it ends with a blank line or an empty `## You`
/// heading without reading a long chat whole; "" when it cannot be read.
pub async fn file_end(path: &Path) -> String {
    let path = path.to_owned();
    let read = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<u8>> {
        use std::io::{Read as _, Seek as _, SeekFrom};
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)?;
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(END_READ)))?;
        let mut end = Vec::new();
        file.read_to_end(&mut end)?;
        Ok(end)
    });
    match read.await {
        Ok(Ok(end)) => String::from_utf8_lossy(&end).into_owned(),
        _ => String::new(),
    }
}

/// The message to send: what is under the last `## You` heading (trimmed), else the whole text
/// after the header; `None` when there is nothing.
pub fn message_to_send(text: &str) -> Option<String> {
    let after = match text.rfind(&format!("\n{YOU}\n")) {
        Some(at) => &text[at + YOU.len() + 2..],
        None => text.strip_prefix(&format!("{YOU}\n")).unwrap_or(""),
    };
    let message = after.trim();
    (!message.is_empty()).then(|| message.to_owned())
}

/// A file a chat message mentions: `@path`, `@path#L10` or `@path#L10-20`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mention {
    /// The path as written.
    pub path: String,
    /// The first and last line (1-based, inclusive); `None` for the whole file.
    pub lines: Option<(u32, u32)>,
}

/// How much of the end of what a reopened chat got back tells that its document shows it.
const WHOLE_END: usize = 256;

/// How the document ends once `pending` is in it (its last [`WHOLE_END`] bytes, trimmed).
pub(super) fn pending_end(pending: &str) -> String {
    let start = pending.len().saturating_sub(WHOLE_END);
    let start = (start..pending.len())
        .find(|&i| pending.is_char_boundary(i))
        .unwrap_or(start);
    pending[start..].trim_end().to_owned()
}

/// The most files one message takes along.
pub const MAX_MENTIONS: usize = 10;

/// The files `message` mentions, in order, each once, at most [`MAX_MENTIONS`]. Punctuation
/// after a mention is not part of it; a line spec that does not parse means the whole file.
pub fn mentions(message: &str) -> Vec<Mention> {
    let mut found: Vec<Mention> = Vec::new();
    for word in message.split_whitespace() {
        let Some(rest) = word.strip_prefix('@') else {
            continue;
        };
        let rest = rest.trim_end_matches([',', '.', ';', ':', ')', '!', '?']);
        let (path, lines) = match rest.split_once("#L") {
            Some((path, spec)) => (path, line_span(spec)),
            None => (rest, None),
        };
        let mention = Mention {
            path: path.to_owned(),
            lines,
        };
        if !path.is_empty() && !found.contains(&mention) && found.len() < MAX_MENTIONS {
            found.push(mention);
        }
    }
    found
}

/// `10` or `10-20` (or `10-L20`): the first and last line.
fn line_span(spec: &str) -> Option<(u32, u32)> {
    let (first, last) = match spec.split_once('-') {
        Some((first, last)) => (first, last.trim_start_matches('L')),
        None => (spec, spec),
    };
    let (first, last): (u32, u32) = (first.parse().ok()?, last.parse().ok()?);
    (first >= 1 && last >= first).then_some((first, last))
}

/// What the user is typing in a chat at the cursor, for completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatToken {
    /// The chat's agent.
    pub agent: String,
    /// The word before the cursor (`/com`, `@src/li`).
    pub word: String,
    /// Whether only blanks come before it on its line.
    pub starts_line: bool,
    /// Where the word starts.
    pub start: super::documents::position::Position,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_closed_chats_file_gets_what_its_buffer_added_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("demo-1.md");
        std::fs::write(&path, "# Chat\n").unwrap();
        keep_unsaved_end(&path, "# Chat\nreply\n".into())
            .await
            .unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "# Chat\nreply\n");
        // A buffer the user rewrote (or one with less): the file stays as it is.
        keep_unsaved_end(&path, "rewritten\nreply\nmore\n".into())
            .await
            .unwrap();
        keep_unsaved_end(&path, "# Chat\n".into()).await.unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "# Chat\nreply\n");
    }

    #[test]
    fn mentions_name_files_and_line_spans() {
        let found = mentions("see @src/a.rs#L10-20, @b.md#L3 and @c.txt. @c.txt @x#Lz @ mail@x");
        let expected = [
            ("src/a.rs", Some((10, 20))),
            ("b.md", Some((3, 3))),
            ("c.txt", None),
            ("x", None),
        ];
        let expected: Vec<Mention> = expected
            .into_iter()
            .map(|(path, lines)| Mention {
                path: path.into(),
                lines,
            })
            .collect();
        assert_eq!(found, expected);
        assert_eq!(mentions("@a#L5-2")[0].lines, None);
    }

    #[tokio::test]
    async fn a_chat_files_end_is_read_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chat.md");
        // A character cut by where the read starts, then the end.
        let text = "é".repeat(10_000) + "\n## You\n\n";
        std::fs::write(&path, &text).unwrap();
        let end = file_end(&path).await;
        assert_eq!(
            end.len(),
            END_READ as usize + 2,
            "one cut byte became a 3-byte mark"
        );
        assert!(end.starts_with("\u{fffd}é") && end.ends_with("é\n## You\n\n"));
        std::fs::write(&path, "short").unwrap();
        assert_eq!(file_end(&path).await, "short");
        assert_eq!(file_end(&dir.path().join("gone.md")).await, "");
    }

    #[test]
    fn a_long_append_is_cut_at_a_line_end_or_a_character() {
        let mut text = "ab\ncd\nef".to_owned();
        assert_eq!(take_front(&mut text, 7), "ab\ncd\n");
        assert_eq!(text, "ef");
        let mut text = "ééé".to_owned();
        assert_eq!(take_front(&mut text, 3), "é");
        assert_eq!(text, "éé");
        let mut text = "short".to_owned();
        assert_eq!(take_front(&mut text, 7), "short");
        assert_eq!(text, "");
    }

    #[test]
    fn the_message_is_what_is_under_the_last_you_heading() {
        let doc = "# Chat with demo\n\n## You\n\nfirst\n\n## demo\n\nanswer\n\n## You\n\n  second\nline\n";
        assert_eq!(message_to_send(doc).unwrap(), "second\nline");
        assert_eq!(message_to_send("# Chat with demo\n\n## You\n\n"), None);
    }
}
