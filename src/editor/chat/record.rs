//! agentls's own record of every chat it made: `.<chat file>.chat` beside the chat document in
//! the private chats folder, JSON lines. The first names the chat and its agent; then come, in
//! order, what agentls put into the document ([`Entry::Out`]), each message the user sent
//! ([`Entry::Sent`]) and each turn's end ([`Entry::Ended`], on disk before the next turn can
//! start). A document is a chat only when agentls keeps such a record of it (a look-alike in a
//! repository has none), and what agentls tells an agent on its own behalf (the transcript of
//! a resumed chat) comes from here, never from the document's text.
//!
//! Records are written by one thread per [`Recorder`], in the order they were asked for, so
//! that the state task never waits on the disk.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use crate::private_files::{PrivateDir, PrivateError};

/// The heading the user writes under in a chat document.
pub const YOU: &str = "## You";

/// What a record's file name adds to its chat's: `.<chat>` + this.
pub const SUFFIX: &str = ".chat";
/// The most of a record read to learn which agent a chat talks to (its first line).
const HEADER_READ: u64 = 4096;
/// The most of a record read for a transcript.
const RECORD_READ: u64 = 64 * 1024 * 1024;
/// The most of a resumed chat's transcript told to the agent (its end).
const MAX_TRANSCRIPT: usize = 20_000;

/// One line of a record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Entry {
    /// The first line: which agent the chat talks to.
    Chat {
        /// The agent's name.
        agent: String,
    },
    /// Text agentls put at the document's end (the template, replies, headings).
    Out(String),
    /// A message the user sent from it.
    Sent(String),
    /// A turn ended (how is in the text agentls put out for it).
    Ended,
    /// The last `old` of the text put out so far became `new` before it reached the document
    /// (a tool call's line or a plan, changed in place).
    Replaced {
        /// The text as recorded.
        old: String,
        /// What it became.
        new: String,
    },
}

/// The record's file name for the chat file `name`.
fn record_name(name: &str) -> String {
    format!(".{name}{SUFFIX}")
}

/// The chat a record at `record` (or its file being written) belongs to, when it is one.
pub fn chat_of(record: &Path) -> Option<PathBuf> {
    let name = record.file_name()?.to_str()?;
    let name = crate::private_files::being_written(name).unwrap_or(name);
    let chat = name.strip_prefix('.')?.strip_suffix(SUFFIX)?;
    Some(record.with_file_name(chat))
}

/// Makes the record of the new chat file `name` in `dir`, with `agent` and the chat's first
/// text; refused when anything is in its place.
pub fn create(dir: &PrivateDir, name: &str, agent: &str, text: &str) -> Result<(), PrivateError> {
    let mut lines = line(&Entry::Chat {
        agent: agent.to_owned(),
    });
    lines.push_str(&line(&Entry::Out(text.to_owned())));
    dir.create_new(&record_name(name), lines.as_bytes())
}

/// `entry` as a line of a record.
fn line(entry: &Entry) -> String {
    let mut line = serde_json::to_string(entry).unwrap_or_default();
    line.push('\n');
    line
}

/// The agent of the chat document at `path` when agentls made it: `path` is a file of a
/// workspace folder directly in `root` (the chats folder) and its record is there. Blocking.
pub fn agent_of(root: &Path, path: &Path) -> Option<String> {
    let folder = path.parent()?;
    if folder.parent()? != root {
        return None;
    }
    let name = path.file_name()?.to_str()?;
    let dir = PrivateDir::open(folder).ok()?;
    let start = dir.read(&record_name(name), HEADER_READ).ok()??;
    let first = start.split(|b| *b == b'\n').next()?;
    match serde_json::from_slice(first).ok()? {
        Entry::Chat { agent } => Some(agent),
        _ => None,
    }
}

/// A chat agentls made in a folder of the chats folder, as its record tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedChat {
    /// The chat document.
    pub path: PathBuf,
    /// The agent it talks to.
    pub agent: String,
    /// The first message the user sent from it (`None`: none yet).
    pub first_message: Option<String>,
    /// When its record last changed: its last activity.
    pub modified: Option<std::time::SystemTime>,
}

/// The most of a record read to list its chat (its agent and first message come early).
const LIST_READ: u64 = 64 * 1024;

/// The chats agentls made in `folder` (one workspace's folder of the chats folder), whose
/// document is still there, most recently active first. Blocking.
pub fn list(folder: &Path) -> Vec<ListedChat> {
    let (Ok(entries), Ok(dir)) = (std::fs::read_dir(folder), PrivateDir::open(folder)) else {
        return Vec::new();
    };
    let mut chats: Vec<ListedChat> = entries
        .flatten()
        .filter_map(|entry| {
            let record = entry.file_name().into_string().ok()?;
            let path = chat_of(&folder.join(&record))?;
            let name = path.file_name()?.to_str()?;
            if record != record_name(name) || !path.symlink_metadata().ok()?.is_file() {
                return None;
            }
            let modified = entry.metadata().and_then(|m| m.modified()).ok();
            let bytes = dir.read(&record, LIST_READ).ok()??;
            let mut entries = bytes
                .split(|b| *b == b'\n')
                .filter_map(|l| serde_json::from_slice::<Entry>(l).ok());
            let Some(Entry::Chat { agent }) = entries.next() else {
                return None;
            };
            let first_message = entries.find_map(|entry| match entry {
                Entry::Sent(message) => Some(message.trim().to_owned()),
                _ => None,
            });
            Some(ListedChat {
                path,
                agent,
                first_message,
                modified,
            })
        })
        .collect();
    chats.sort_by(|a, b| {
        b.modified
            .cmp(&a.modified)
            .then_with(|| b.path.cmp(&a.path))
    });
    chats
}

/// Makes a record for the chat file at `path` (in a workspace folder directly in `root`) of an
/// earlier agentls, which kept none: it names `agent` and holds nothing of the document. Only
/// there: a look-alike elsewhere never gets one. Blocking.
pub fn adopt(root: &Path, path: &Path, agent: &str) -> Result<(), PrivateError> {
    let (Some(folder), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str()))
    else {
        return Ok(());
    };
    if folder.parent() != Some(root) {
        return Ok(());
    }
    let header = line(&Entry::Chat {
        agent: agent.to_owned(),
    });
    PrivateDir::open(folder)?.create_new(&record_name(name), header.as_bytes())
}

/// The conversation a record holds, as the document showed it, from its first `## You` heading
/// to its last (where the next message goes): the end of it (at most [`MAX_TRANSCRIPT`]
/// bytes), for an agent that did not see it. `None` when there is none yet.
fn transcript(record: &[u8]) -> Option<String> {
    let text = conversation(record).text;
    let you = format!("\n{YOU}\n");
    let (first, last) = (text.find(&you)?, text.rfind(&you)?);
    let conversation = text[first..last].trim();
    if conversation.is_empty() {
        return None;
    }
    let start = conversation.len().saturating_sub(MAX_TRANSCRIPT);
    let start = (start..=conversation.len())
        .find(|&i| conversation.is_char_boundary(i))
        .unwrap_or(0);
    Some(format!(
        "this conversation goes on from an earlier session you do not remember; it went:\n{}",
        &conversation[start..]
    ))
}

/// A chat's conversation rebuilt from its record: everything agentls put into the document
/// and every message the user sent, in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Conversation {
    /// The document's text as agentls and the user's messages made it.
    pub text: String,
    /// Its last turn never ended: agentls stopped while the agent answered.
    pub interrupted: bool,
}

/// The conversation a record holds.
pub fn conversation(record: &[u8]) -> Conversation {
    let mut conversation = Conversation::default();
    for entry in record
        .split(|b| *b == b'\n')
        .filter_map(|l| serde_json::from_slice::<Entry>(l).ok())
    {
        match entry {
            Entry::Out(out) => conversation.text.push_str(&out),
            Entry::Sent(message) => {
                conversation.text.push_str(message.trim());
                conversation.interrupted = true;
            }
            Entry::Ended => conversation.interrupted = false,
            Entry::Replaced { old, new } => {
                if let Some(at) = conversation.text.rfind(&old) {
                    conversation.text.replace_range(at..at + old.len(), &new);
                }
            }
            Entry::Chat { .. } => {}
        }
    }
    conversation
}

/// What a reopened chat's document lacks of agentls's record of it, and how its last turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restore {
    /// The record's text after the point where the document ends (see [`missing_tail`]).
    pub missing: Option<String>,
    /// Its last turn never ended: agentls stopped while the agent answered.
    pub interrupted: bool,
}

/// What `document`, a reopened chat's text, needs from `record` to be whole. Blocking: a long
/// chat's record is megabytes.
pub fn restore(record: &[u8], document: &str) -> Restore {
    let recorded = conversation(record);
    Restore {
        missing: missing_tail(&recorded.text, document).map(str::to_owned),
        interrupted: recorded.interrupted,
    }
}

/// What `document` (a reopened chat's text) lacks of `recorded` (its conversation rebuilt from
/// agentls's record): the recorded text after the point where the document ends, when that
/// end is found in it exactly once. Runs of white space count as one space when looking (the
/// line ends a user typed after a message are not in the record). `None` when nothing is
/// missing, or when the document went its own way (the user rewrote it) and no place can be
/// told for sure.
pub fn missing_tail<'r>(recorded: &'r str, document: &str) -> Option<&'r str> {
    if ends_alike(recorded, document) {
        return None; // the usual case, told from the last few KB of each
    }
    let document = squeezed(document.trim_end());
    if document.is_empty() {
        return None;
    }
    let squeezed_record = squeezed(recorded);
    // The document's last chars, more of them until they are found only once.
    let mut take = 256;
    let end = loop {
        let start = document.len().saturating_sub(take);
        let start = (start..=document.len())
            .find(|&i| document.is_char_boundary(i))
            .unwrap_or(0);
        let end_of_document = &document[start..];
        let mut found = squeezed_record.match_indices(end_of_document);
        let (at, _) = found.next()?;
        if found.next().is_none() {
            break at + end_of_document.len();
        }
        if start == 0 {
            return None;
        }
        take *= 4;
    };
    let rest = &recorded[unsqueezed_offset(recorded, end)..];
    (!rest.trim().is_empty()).then_some(rest)
}

/// Whether `recorded` and `document` end with the same [`TAIL_PROBE`] bytes (white space runs
/// counted as one space, white space at the end ignored): then the document lacks nothing.
fn ends_alike(recorded: &str, document: &str) -> bool {
    let window = |text: &str| squeezed(last_bytes(text.trim_end(), 4 * TAIL_PROBE));
    let (recorded, document) = (window(recorded), window(document));
    let probe = last_bytes(&document, TAIL_PROBE);
    !probe.trim().is_empty() && recorded.ends_with(probe)
}

/// How much of a document's end tells that a record ends the same way.
const TAIL_PROBE: usize = 1024;

/// The last `bytes` of `text` or a little fewer (it starts on a char).
fn last_bytes(text: &str, bytes: usize) -> &str {
    let start = text.len().saturating_sub(bytes);
    let start = (start..=text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    &text[start..]
}

/// `text` with each run of white space as one space.
fn squeezed(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            if !in_space {
                out.push(' ');
            }
            in_space = true;
        } else {
            out.push(c);
            in_space = false;
        }
    }
    out
}

/// The offset in `text` just after the char that ends the first `squeezed_len` bytes of
/// [`squeezed`]`(text)`; a run of white space ends where its last char does.
fn unsqueezed_offset(text: &str, squeezed_len: usize) -> usize {
    let mut len = 0;
    let mut in_space = false;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c.is_whitespace() {
            if !in_space {
                len += 1;
            }
            in_space = true;
            let space_goes_on = chars.peek().is_some_and(|(_, next)| next.is_whitespace());
            if len == squeezed_len && !space_goes_on {
                return at + c.len_utf8();
            }
        } else {
            len += c.len_utf8();
            in_space = false;
            if len == squeezed_len {
                return at + c.len_utf8();
            }
        }
    }
    text.len()
}

/// What the writer is asked to do.
enum Job {
    /// Append `entry` to the record of the chat at `chat`; on disk before the next job when
    /// `sync`.
    Append {
        chat: PathBuf,
        entry: Entry,
        sync: bool,
    },
    /// Read the record of `chat` (after everything asked before) and answer it.
    Read {
        chat: PathBuf,
        reply: oneshot::Sender<Option<Vec<u8>>>,
    },
    /// Answer once everything asked before is done.
    Done(oneshot::Sender<()>),
}

/// Writes chats' records, in order, on a thread of its own (which ends when the last clone is
/// dropped).
#[derive(Debug, Clone)]
pub struct Recorder(mpsc::Sender<Job>);

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Append { chat, .. } => write!(f, "Append({})", chat.display()),
            Self::Read { chat, .. } => write!(f, "Read({})", chat.display()),
            Self::Done(_) => write!(f, "Done"),
        }
    }
}

impl Default for Recorder {
    fn default() -> Self {
        let (jobs, queue) = mpsc::channel();
        let started = std::thread::Builder::new()
            .name("chat-records".into())
            .spawn(move || write_records(&queue));
        if let Err(e) = started {
            tracing::warn!("chats are not recorded (no thread to write them): {e}");
        }
        Self(jobs)
    }
}

impl Recorder {
    /// Appends `entry` to the record of the chat at `chat` (soon); with `sync`, it is on disk
    /// before anything asked later is done.
    pub fn append(&self, chat: &Path, entry: Entry, sync: bool) {
        let _ = self.0.send(Job::Append {
            chat: chat.to_owned(),
            entry,
            sync,
        });
    }

    /// The transcript of the chat at `chat` from its record, once everything asked before is
    /// written; `None` when it has none (or sent nothing yet).
    pub async fn transcript(&self, chat: &Path) -> Option<String> {
        transcript(&self.read(chat).await?)
    }

    /// Once everything asked before is done (appends asked with `sync` are on disk).
    pub async fn done(&self) {
        let (reply, answer) = oneshot::channel();
        if self.0.send(Job::Done(reply)).is_ok() {
            let _ = writer_answer(answer).await;
        }
    }

    /// The record of the chat at `chat`, once everything asked before is written; `None` when
    /// it has none.
    pub async fn read(&self, chat: &Path) -> Option<Vec<u8>> {
        let (reply, answer) = oneshot::channel();
        let job = Job::Read {
            chat: chat.to_owned(),
            reply,
        };
        self.0.send(job).ok()?;
        writer_answer(answer).await.flatten()
    }
}

/// The writer thread's `answer`, waited for on the blocking pool: the wait is for another
/// thread's work, which a runtime on a paused clock (the tests') must not take for idleness
/// and jump to its next timer meanwhile.
async fn writer_answer<T: Send + 'static>(answer: oneshot::Receiver<T>) -> Option<T> {
    tokio::task::spawn_blocking(move || answer.blocking_recv().ok())
        .await
        .ok()
        .flatten()
}

/// The folder of the chat at `chat`, opened once and kept in `folders`, and its record's name.
fn record_of<'f>(
    folders: &'f mut HashMap<PathBuf, PrivateDir>,
    chat: &Path,
) -> Result<(&'f PrivateDir, String), PrivateError> {
    let folder = chat.parent().unwrap_or(Path::new("/")).to_owned();
    let name = chat
        .file_name()
        .and_then(|n| n.to_str())
        .map(record_name)
        .unwrap_or_default();
    let dir = match folders.entry(folder) {
        std::collections::hash_map::Entry::Occupied(open) => open.into_mut(),
        std::collections::hash_map::Entry::Vacant(new) => {
            let dir = PrivateDir::open(new.key())?;
            new.insert(dir)
        }
    };
    Ok((dir, name))
}

/// The writer thread: does each job in turn, with the chats' folders kept open. Text put out
/// to one chat in a burst (a streamed reply's chunks, queued meanwhile) is written as one line.
fn write_records(queue: &mpsc::Receiver<Job>) {
    let mut folders = HashMap::new();
    let mut next = None;
    while let Some(job) = next.take().or_else(|| queue.recv().ok()) {
        match job {
            Job::Append {
                chat,
                entry: Entry::Out(mut out),
                mut sync,
            } => {
                // The burst: what is queued already, while it is more text for the same chat.
                loop {
                    match queue.try_recv() {
                        Ok(Job::Append {
                            chat: same,
                            entry: Entry::Out(more),
                            sync: also,
                        }) if same == chat => {
                            out.push_str(&more);
                            sync |= also;
                        }
                        Ok(other) => {
                            next = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                append(&mut folders, &chat, &Entry::Out(out), sync);
            }
            Job::Append { chat, entry, sync } => append(&mut folders, &chat, &entry, sync),
            Job::Read { chat, reply } => {
                let record = record_of(&mut folders, &chat)
                    .and_then(|(dir, name)| dir.read(&name, RECORD_READ))
                    .ok()
                    .flatten();
                let _ = reply.send(record);
            }
            Job::Done(reply) => {
                let _ = reply.send(());
            }
        }
    }
}

/// Appends `entry` to the record of the chat at `chat` (on disk before this returns with
/// `sync`).
fn append(folders: &mut HashMap<PathBuf, PrivateDir>, chat: &Path, entry: &Entry, sync: bool) {
    let written = record_of(folders, chat)
        .and_then(|(dir, name)| dir.append(&name, line(entry).as_bytes(), sync));
    if let Err(e) = written {
        tracing::warn!(chat = %chat.display(), "chat record not written: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_chat_made_by_agentls_is_known_by_its_record_and_tells_its_transcript() {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("chats");
        let dir = PrivateDir::open(&root).unwrap().subdir("ws-1").unwrap();
        let chat = root.join("ws-1/demo-1.md");
        std::fs::write(&chat, "# Chat with demo\n").unwrap();
        assert_eq!(agent_of(&root, &chat), None, "no record yet");
        create(&dir, "demo-1.md", "demo", "# Chat with demo\n\n## You\n\n").unwrap();
        assert_eq!(agent_of(&root, &chat).as_deref(), Some("demo"));
        assert_eq!(
            chat_of(&root.join("ws-1/.demo-1.md.chat")),
            Some(chat.clone())
        );
        assert_eq!(
            chat_of(&root.join("ws-1/..demo-1.md.chat.0123456789abcdef.tmp")),
            Some(chat.clone())
        );

        let recorder = Recorder::default();
        assert_eq!(recorder.transcript(&chat).await, None, "nothing sent yet");
        recorder.append(&chat, Entry::Sent("hello".into()), false);
        let reply = "\n\n## demo\n\nHi there.\n\n_end_turn_\n\n## You\n\n".to_owned();
        recorder.append(&chat, Entry::Out(reply), false);
        recorder.append(&chat, Entry::Ended, true);
        let told = recorder.transcript(&chat).await.unwrap();
        assert!(
            told.ends_with(":\n## You\n\nhello\n\n## demo\n\nHi there.\n\n_end_turn_"),
            "{told}"
        );

        // The same file and header elsewhere (a repository's look-alike) is not a chat.
        let elsewhere = base.path().join("repo/agentls/chats/ws-1/demo-1.md");
        std::fs::create_dir_all(elsewhere.parent().unwrap()).unwrap();
        std::fs::copy(&chat, &elsewhere).unwrap();
        std::fs::copy(
            root.join("ws-1/.demo-1.md.chat"),
            elsewhere.with_file_name(".demo-1.md.chat"),
        )
        .unwrap();
        assert_eq!(agent_of(&root, &elsewhere), None);
        assert!(adopt(&root, &elsewhere, "demo").is_ok());
        assert_eq!(agent_of(&root, &elsewhere), None);
    }

    #[tokio::test]
    async fn chats_are_listed_with_their_agent_and_first_message_latest_first() {
        let base = tempfile::tempdir().unwrap();
        let folder = base.path().join("ws-1");
        let dir = PrivateDir::open(base.path())
            .unwrap()
            .subdir("ws-1")
            .unwrap();
        for name in ["demo-1.md", "other-2.md"] {
            dir.create_new(name, b"# Chat\n").unwrap();
            create(&dir, name, name.split('-').next().unwrap(), "# Chat\n").unwrap();
        }
        // A record whose document is gone, and a stray file, are not listed.
        create(&dir, "gone-3.md", "gone", "# Chat\n").unwrap();
        std::fs::write(folder.join("notes.md"), "# Chat with demo\n").unwrap();
        let recorder = Recorder::default();
        recorder.append(
            &folder.join("demo-1.md"),
            Entry::Sent(" hello \n".into()),
            false,
        );
        recorder.append(&folder.join("demo-1.md"), Entry::Ended, true);
        // Written by the recorder's thread: the ended turn is on disk once a transcript reads it.
        recorder.transcript(&folder.join("demo-1.md")).await;
        let a_minute_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        std::fs::File::options()
            .append(true)
            .open(folder.join(".other-2.md.chat"))
            .unwrap()
            .set_modified(a_minute_ago)
            .unwrap();
        let listed = list(&folder);
        let names: Vec<_> = listed
            .iter()
            .map(|c| (c.agent.as_str(), c.first_message.as_deref()))
            .collect();
        assert_eq!(
            names,
            [("demo", Some("hello")), ("other", None)],
            "{listed:#?}"
        );
    }

    #[tokio::test]
    async fn pieces_put_out_and_a_line_changed_in_place_make_the_conversation() {
        let base = tempfile::tempdir().unwrap();
        let dir = PrivateDir::open(base.path()).unwrap();
        create(&dir, "demo-1.md", "demo", "# Chat\n").unwrap();
        let chat = base.path().join("demo-1.md");
        let recorder = Recorder::default();
        recorder.append(&chat, Entry::Sent("go".into()), false);
        for piece in ["\n## demo\n\n", "◐ Read", " a.rs\n\n", "Done."] {
            recorder.append(&chat, Entry::Out(piece.into()), false);
        }
        let replaced = Entry::Replaced {
            old: "◐ Read a.rs".into(),
            new: "✓ Read a.rs".into(),
        };
        recorder.append(&chat, replaced, false);
        let record = recorder.read(&chat).await.unwrap();
        let recorded = conversation(&record);
        assert_eq!(recorded.text, "# Chat\ngo\n## demo\n\n✓ Read a.rs\n\nDone.");
        assert!(recorded.interrupted);
    }

    #[test]
    fn a_document_that_ends_as_its_record_lacks_nothing_however_often_its_end_recurs() {
        let turn = "## You\n\nagain?\n\n## demo\n\nYes.\n\n";
        let record = turn.repeat(2_000);
        // Typed line ends and spaces differ; the same words end both.
        let document = format!("{}\n\n\n", record.replace("Yes.\n\n", "Yes.  \n"));
        assert_eq!(missing_tail(&record, &document), None);
        let cut = &record[..record.len() - turn.len()];
        assert_eq!(missing_tail(&record, cut), None, "ambiguous: nothing told");
    }

    #[test]
    fn a_document_missing_its_end_gets_what_the_record_holds_after_it() {
        let template = "# Chat with demo\n\n## You\n\n";
        let mut record = line(&Entry::Chat {
            agent: "demo".into(),
        });
        for entry in [
            Entry::Out(template.into()),
            Entry::Sent("hello\n".into()),
            Entry::Out("\n\n## demo\n\nHi.\n\n_end_turn_\n\n## You\n\n".into()),
            Entry::Ended,
            Entry::Sent("more".into()),
            Entry::Out("\n\n## demo\n\nPart".into()),
        ] {
            record.push_str(&line(&entry));
        }
        let recorded = conversation(record.as_bytes());
        assert!(recorded.interrupted, "the last turn never ended");
        let text = &recorded.text;
        // Quit without saving: the file holds the template only.
        assert_eq!(
            missing_tail(text, template),
            Some(&text[template.len() - 2..])
        );
        // Saved mid-reply, the message with its own line end: the rest of the reply.
        let saved = format!("{template}hello\n\n\n## demo\n\nHi.\n");
        assert_eq!(
            missing_tail(text, &saved),
            Some("\n\n_end_turn_\n\n## You\n\nmore\n\n## demo\n\nPart")
        );
        // Everything there, or a draft after it: nothing missing.
        assert_eq!(missing_tail(text, text), None);
        assert_eq!(missing_tail(text, &format!("{text}\n\nmy draft")), None);
        // A document rewritten by the user: no place can be told.
        assert_eq!(
            missing_tail(text, "# Chat with demo\n\nsomething else\n"),
            None
        );
        // "## You" ends every turn: the document's end is taken long enough to be found once.
        let two_turns = format!("{template}hello\n\n## demo\n\nHi.\n\n_end_turn_\n\n## You");
        assert_eq!(
            missing_tail(text, &two_turns),
            Some("\n\nmore\n\n## demo\n\nPart")
        );
    }
}
