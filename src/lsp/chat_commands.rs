//! Chat documents as commands and code actions: `agentls.openChat` creates a markdown document
//! for a conversation with an agent (outside the repository, in the XDG state dir per
//! workspace) and opens it; `agentls.send` (or the code action *Send to \<agent\>* anywhere in a
//! chat document) sends what the user wrote under the last `## You` heading, and the reply
//! streams into the document. A chat document opened again (after a restart) is known again by
//! its place and its first line.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Value, json};
use tower_lsp_server::jsonrpc::{Error, Result};
use tower_lsp_server::ls_types::{CodeActionOrCommand, LSPAny, Uri};

use super::command_table::CommandId;
use super::convert;
use super::prompt_context::Budget;
use super::server::Backend;
use crate::acp::{Prompt, PromptContext};
use crate::editor::chat;
use crate::editor::chat::record::YOU;
use crate::editor::chat::sessions::WORKSPACE_RECORD;
use crate::editor::chat::{file_end, mentions, message_to_send};
use crate::editor::{Level, file_name};
use crate::private_files::{NO_STATE_HOME, PrivateDir, PrivateError};

/// A chat document's first line, before the agent's name.
const HEADER: &str = "# Chat with ";

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct OpenArgs {
    agent: Option<String>,
    /// A new chat, not the agent's latest.
    #[serde(default)]
    new: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SendArgs {
    uri: Option<Uri>,
    path: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AskArgs {
    agent: Option<String>,
    uri: Option<Uri>,
    path: Option<String>,
    range: Option<tower_lsp_server::ls_types::Range>,
    lines: Option<[u32; 2]>,
}

/// `agentls.openChat`: the agent's latest chat of this workspace (a new one when it has none,
/// or with `{"new": true}`), opened.
pub async fn open_command(backend: &Backend, arguments: Vec<Value>) -> Result<Option<LSPAny>> {
    let args: OpenArgs = optional(first(arguments))?;
    open(backend, args).await
}

/// `agentls.send`: sends what the user wrote in the named chat, else the focused one.
pub async fn send_command(backend: &Backend, arguments: Vec<Value>) -> Result<Option<LSPAny>> {
    let args: SendArgs = optional(first(arguments))?;
    let path = named_file(backend, args.uri.as_ref(), args.path.as_deref()).await?;
    send(backend, path).await
}

/// `agentls.askAbout`: quotes lines of a file in the agent's latest chat and shows it.
pub async fn ask_about_command(backend: &Backend, arguments: Vec<Value>) -> Result<Option<LSPAny>> {
    let args = serde_json::from_value::<AskArgs>(first(arguments))
        .map_err(|e| refuse_ask(&format!("bad arguments: {e}")))?;
    ask_about(backend, args).await
}

/// The first argument; none is `null`.
fn first(arguments: Vec<Value>) -> Value {
    arguments.into_iter().next().unwrap_or(Value::Null)
}

/// The arguments, parsed; none at all (run from a picker) are the defaults.
fn optional<T: serde::de::DeserializeOwned + Default>(value: Value) -> Result<T> {
    if value.is_null() {
        return Ok(T::default());
    }
    serde_json::from_value(value).map_err(|e| Error::invalid_params(format!("bad arguments: {e}")))
}

/// Where all chats live: `chat.directory` of the user's config file (editor settings may not
/// set it), else `chats` in agentls's state folder; an error saying why when there is no home
/// to keep them in.
fn chats_root(backend: &Backend) -> std::result::Result<PathBuf, String> {
    if let Some(dir) = backend.agent_config.borrow().chat.directory.clone() {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute());
        return match (dir.strip_prefix("~"), home) {
            (Ok(rest), Some(home)) => Ok(home.join(rest)),
            (Ok(_), None) => Err(format!(
                "chat.directory starts with `~` but {NO_STATE_HOME}"
            )),
            (Err(_), _) => Ok(dir),
        };
    }
    crate::private_files::state_home()
        .map(|state| state.join("chats"))
        .ok_or_else(|| NO_STATE_HOME.to_owned())
}

/// The folder in the chats folder for the workspace `folder`: `<folder's name>-<hash>`.
fn chat_folder(folder: Option<&Path>) -> String {
    match folder {
        Some(folder) => {
            use std::hash::{Hash, Hasher};
            let mut hasher = rustc_hash::FxHasher::default();
            folder.hash(&mut hasher);
            format!("{}-{:08x}", file_name(folder), hasher.finish() as u32)
        }
        None => "no-workspace".to_owned(),
    }
}

async fn open(backend: &Backend, args: OpenArgs) -> Result<Option<LSPAny>> {
    let agent = backend
        .agents
        .name_of(args.agent.as_deref())
        .map_err(|e| Error::invalid_params(e.to_string()))?;
    let latest = match args.new {
        true => None,
        false => super::chat_list::latest(backend, &agent).await,
    };
    let path = match latest {
        Some(path) => path,
        None => create(backend, &agent, "").await?,
    };
    show(backend, &agent, &path);
    Ok(Some(
        json!({"path": path, "uri": crate::file_uri::from_path(&path)}),
    ))
}

/// This workspace's folder of the chats folder (see [`chats_root`]).
pub(super) async fn workspace_chats(backend: &Backend) -> std::result::Result<PathBuf, String> {
    let folder = backend.editor.workspace_folders().await.into_iter().next();
    Ok(chats_root(backend)?.join(chat_folder(folder.as_deref())))
}

/// Creates a chat document with `agent`, ending with `first` under the `## You` heading, and
/// agentls's record of it, in a private folder (nothing written through a symlink).
/// The most of `chat.keys` a header shows.
const KEYS_HINT_CHARS: usize = 120;

/// `Keys: <keys>` as a paragraph of a chat's header, first so that an editor that does not wrap
/// lines shows it whole: the editor's keys as its settings name them, on one line and cut short;
/// nothing when none are named.
fn keys_line(keys: &str) -> String {
    let one_line: String = keys.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.is_empty() {
        return String::new();
    }
    let shown: String = one_line.chars().take(KEYS_HINT_CHARS).collect();
    format!("Keys: {shown}\n\n")
}

async fn create(backend: &Backend, agent: &str, first: &str) -> Result<PathBuf> {
    let folder = backend.editor.workspace_folders().await.into_iter().next();
    let root = chats_root(backend).map_err(|why| refuse(&format!("agentls: no chat: {why}")))?;
    let key = chat_folder(folder.as_deref());
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    let name = format!("{agent}-{stamp}.md");
    let path = root.join(&key).join(&name);
    let keys = keys_line(&backend.agent_config.borrow().chat.keys);
    let text = format!(
        "{HEADER}{agent}\n\n{keys}Write under the last `{YOU}` heading, then run the code action *Send to {agent}*. \
         Quitting without saving loses nothing: agentls puts the conversation back when you open \
         this chat again.\n\n{YOU}\n\n{first}"
    );
    let agent_name = agent.to_owned();
    let written = tokio::task::spawn_blocking(move || -> std::result::Result<(), PrivateError> {
        let dir = PrivateDir::open(&root)?.subdir(&key)?;
        if let Some(folder) = &folder {
            let record = format!("{}\n", folder.display());
            dir.replace(WORKSPACE_RECORD, record.as_bytes(), false)?;
        }
        dir.create_new(&name, text.as_bytes())?;
        chat::record::create(&dir, &name, &agent_name, &text)
    })
    .await
    .unwrap_or_else(|e| {
        Err(PrivateError::Io {
            path: PathBuf::new(),
            source: std::io::Error::other(e),
        })
    });
    if let Err(e) = written {
        return Err(refuse(&format!("agentls: could not create a chat: {e}")));
    }
    backend.feed.chat_opened(path.clone(), agent.to_owned());
    Ok(path)
}

/// A prompt sent from elsewhere as the chat shows it: its text, then what it is about (its
/// path within the first of `folders` that holds it).
pub fn describe_prompt(text: &str, context: Option<&PromptContext>, folders: &[PathBuf]) -> String {
    let Some(context) = context else {
        return text.trim().to_owned();
    };
    // A range that ends at the start of a line (whole lines selected) does not take that line.
    let last = |r: crate::editor::Range| {
        let before_end = r.end.character == 0 && r.end.line > r.start.line;
        u64::from(r.end.line) + 1 - u64::from(before_end)
    };
    let place = match context.range {
        Some(r) if last(r) == u64::from(r.start.line) + 1 => {
            format!(" line {}", u64::from(r.start.line) + 1)
        }
        Some(r) => format!(" lines {}–{}", u64::from(r.start.line) + 1, last(r)),
        None => String::new(),
    };
    let shown = folders
        .iter()
        .find_map(|f| context.path.strip_prefix(f).ok())
        .unwrap_or(&context.path);
    format!("{}\n\n_about {}{place}_", text.trim(), shown.display())
}

/// The chat where a prompt sent from elsewhere (`agentls.prompt`) is answered: `agent`'s
/// latest chat (of this run, else of an earlier one), else a new one. A chat not used yet in
/// this run is not shown (a prompt from a keymap must not take the user away from their code):
/// the user is told where it is.
/// `said` goes in as the user's message, recorded as sent, under an empty last `## You` heading
/// or a new one (a draft there stays the user's).
pub async fn chat_for_prompt(backend: &Backend, agent: &str, said: &str) -> Result<PathBuf> {
    let latest = if backend.takes_new_conversation(agent) {
        // The user opened a new session: it gets a chat of its own.
        None
    } else {
        latest_chat(backend, agent).await?
    };
    // A prompt while the chat's turn runs is refused before it goes in, not in the middle of
    // the running reply.
    if let Some((chat, _)) = &latest
        && backend.feed.chat_turn_running(chat).await.unwrap_or(false)
    {
        return Err(refuse(&crate::acp::busy_message(agent)));
    }
    let (chat, text) = match latest {
        Some((chat, Some(text))) => (chat, text),
        Some((chat, None)) => {
            let text = file_end(&chat).await;
            (chat, text)
        }
        None => {
            let path = create(backend, agent, "").await?;
            backend.editor.tell_user(
                Level::Info,
                format!(
                    "agentls: {agent} answers in {} (the code action *Open {agent}'s chat* or \
                     agentls.openChat opens it)",
                    path.display()
                ),
            );
            (path, format!("{YOU}\n\n"))
        }
    };
    let gap = blank_line_after(&text);
    let heading = if text.trim_end().ends_with(YOU) {
        gap.to_owned()
    } else {
        format!("{gap}{YOU}\n\n")
    };
    if !heading.is_empty() {
        backend.editor.append_to_chat(&chat, heading);
    }
    backend.editor.chat_said(&chat, said.trim_end().to_owned());
    backend
        .editor
        .append_to_chat(&chat, format!("\n\n## {agent}\n\n"));
    Ok(chat)
}

/// `agent`'s latest chat in use, with its text when agentls holds it; else its latest chat of
/// an earlier run, which goes on from there as from the chat itself (the user hears where,
/// once: from now on it is the chat in use).
async fn latest_chat(backend: &Backend, agent: &str) -> Result<Option<(PathBuf, Option<String>)>> {
    let in_use = backend
        .feed
        .latest_chat_end(agent)
        .await
        .map_err(|e| Error::invalid_params(e.to_string()))?;
    if in_use.is_some() {
        return Ok(in_use);
    }
    Ok(super::chat_list::latest(backend, agent).await.map(|path| {
        backend.feed.chat_reopened(path.clone(), agent.to_owned());
        backend.editor.tell_user(
            Level::Info,
            format!(
                "agentls: {agent} answers in its chat {} (the code action *Open {agent}'s chat* \
                 or agentls.openChat opens it)",
                path.display()
            ),
        );
        (path, None)
    }))
}

/// What to append to `text` so that what comes next starts after one blank line (an editor
/// that keeps a final line break, as Neovim does, must not get two).
fn blank_line_after(text: &str) -> &'static str {
    match text.len() - text.trim_end_matches('\n').len() {
        0 => "\n\n",
        1 => "\n",
        _ => "",
    }
}

/// Shows the chat at `path` (in the background); where the editor cannot, says where it is.
fn show(backend: &Backend, agent: &str, path: &Path) {
    let (editor, shown, agent) = (backend.editor.clone(), path.to_owned(), agent.to_owned());
    tokio::spawn(async move {
        if editor.show_own_file(&shown).await.is_err() {
            editor.tell_user(
                Level::Info,
                format!("agentls: chat with {agent}: open {}", shown.display()),
            );
        }
    });
}

/// The file a command's `uri` or `path` names (`None`: neither was given).
async fn named_file(
    backend: &Backend,
    uri: Option<&Uri>,
    path: Option<&str>,
) -> Result<Option<PathBuf>> {
    let folders = match path {
        Some(_) => backend.editor.workspace_folders().await,
        None => Vec::new(),
    };
    super::file_args::file(uri, path, &folders).map_err(|why| refuse(&why))
}

/// Quotes the lines of `args.range` in the agent's latest chat, ready for the user's question.
async fn ask_about(backend: &Backend, args: AskArgs) -> Result<Option<LSPAny>> {
    let agent = backend
        .agents
        .name_of(args.agent.as_deref())
        .map_err(|e| refuse(&e.to_string()))?;
    let path = named_file(backend, args.uri.as_ref(), args.path.as_deref())
        .await?
        .ok_or_else(|| refuse_ask("give the file as `uri` or `path`"))?;
    let range = match (args.range, args.lines) {
        (Some(range), _) => convert::range(range),
        (None, Some([first, last])) => super::file_args::lines(first, last),
        (None, None) => {
            return Err(refuse_ask("give the lines as `range` or `lines`"));
        }
    };
    let (quoted, chat) = backend
        .feed
        .quote_for_chat(&path, range, &agent)
        .await
        .map_err(|e| Error::invalid_params(e.to_string()))?;
    let quoted =
        quoted.ok_or_else(|| refuse(&format!("agentls: {} is not open", file_name(&path))))?;
    let chat = match chat {
        // Not open: its file gets it (through the state, which records it).
        Some(chat) => {
            backend.editor.append_to_chat(&chat, quoted);
            chat
        }
        None => create(backend, &agent, &quoted).await?,
    };
    show(backend, &agent, &chat);
    Ok(Some(
        json!({"path": chat, "uri": crate::file_uri::from_path(&chat)}),
    ))
}

/// Sends what the user wrote in the chat at `path` (`None`: the focused document).
async fn send(backend: &Backend, path: Option<PathBuf>) -> Result<Option<LSPAny>> {
    let path = match path {
        Some(path) => path,
        None => backend
            .feed
            .focused()
            .await
            .ok_or_else(|| refuse("agentls.send: no chat document is focused"))?,
    };
    let crate::editor::host_queries::ChatToSend {
        agent,
        text,
        resumed,
        restoring,
        running,
    } = backend
        .feed
        .chat_to_send(&path)
        .await
        .map_err(|e| Error::invalid_params(e.to_string()))?;
    if restoring {
        let why = format!(
            "agentls: {} is still getting back the end it lacks from its record; \
             send again once it ends under a new `{YOU}`",
            file_name(&path)
        );
        return Err(refuse(&why));
    }
    if running && let Some(agent) = &agent {
        return Err(refuse(&crate::acp::busy_message(agent)));
    }
    let Some(agent) = agent else {
        let why = format!("agentls.send: {} is not a chat document", file_name(&path));
        return Err(refuse(&why));
    };
    let Some(message) = text.as_deref().and_then(message_to_send) else {
        let why = format!("agentls: write your message under the last `{YOU}` heading first");
        return Err(refuse(&why));
    };
    // A chat opened again after a restart tells the agent what was said, from agentls's own
    // record of it (never from the document, which anyone may have written).
    let note = match resumed {
        true => backend.editor.chat_transcript(&path).await,
        false => None,
    };
    let context = mentioned(backend, &message).await;
    let gap = blank_line_after(text.as_deref().unwrap_or_default());
    backend.editor.chat_sent(&path, message.clone());
    backend
        .editor
        .append_to_chat(&path, format!("{gap}## {agent}\n\n"));
    backend.editor.chat_turn(&path, true);
    let sent = backend.agents.prompt(Prompt {
        agent: Some(agent.clone()),
        text: message,
        context,
        chat: Some(path.clone()),
        note,
        comment: None,
    });
    if let Err(e) = sent {
        backend.editor.chat_turn(&path, false);
        return Err(refuse(&e.to_string()));
    }
    Ok(Some(json!({"agent": agent})))
}

/// The workspace files `message` mentions (`@path`, `@path#L10-20`), read as the user sees
/// them (the buffer, else the disk), to go along as context. A mention that names no file in a
/// workspace folder stays mere text.
async fn mentioned(backend: &Backend, message: &str) -> Vec<PromptContext> {
    let folders = backend.editor.workspace_folders().await;
    let mut budget = Budget::new(&backend.agent_config.borrow().context);
    let mut context = Vec::new();
    for mention in mentions(message) {
        let Some(path) = workspace_file(&folders, &mention.path).await else {
            continue;
        };
        let (line, limit) = match mention.lines {
            Some((first, last)) => (Some(first), Some(last - first + 1)),
            None => (None, None),
        };
        if budget.next() == 0 {
            budget.none_left(&backend.editor, &path);
            continue;
        }
        let read = backend
            .editor
            .read_text_bounded(&path, line, limit, budget.next())
            .await;
        let Ok(read) = read else {
            continue;
        };
        let text = budget.take(&backend.editor, &path, read);
        let range = mention.lines.map(|(first, last)| {
            crate::editor::Range::new(
                crate::editor::Position::new(first - 1, 0),
                crate::editor::Position::new(last - 1, 0),
            )
        });
        context.push(PromptContext { path, range, text });
    }
    context
}

/// The file `written` names in one of `folders` (relative to each, or absolute inside one);
/// never outside them (`..` is not followed).
async fn workspace_file(folders: &[PathBuf], written: &str) -> Option<PathBuf> {
    let written = Path::new(written);
    if written
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return None;
    }
    for folder in folders {
        let candidate = folder.join(written);
        let is_file = tokio::fs::metadata(&candidate)
            .await
            .is_ok_and(|m| m.is_file());
        if candidate.starts_with(folder) && is_file {
            return Some(candidate);
        }
    }
    None
}

/// Code actions switching `agent`'s current session to each of its other modes and to each
/// other value of its select options (its model, say), from `session` (as `agentls.status`
/// shows it; `null` when there is none): the pickers in a chat's header.
pub fn setting_actions(session: &Value, agent: &str) -> Vec<CodeActionOrCommand> {
    if session.is_null() {
        return Vec::new();
    }
    let mut actions = Vec::new();
    let current = session["mode"].as_str().unwrap_or_default();
    for mode in session["modes"]["availableModes"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let Some(id) = mode["id"].as_str().filter(|id| *id != current) else {
            continue;
        };
        let name = mode["name"].as_str().unwrap_or(id);
        actions.push(CommandId::SetMode.action(
            format!("Switch {agent} to mode {name} ({id})"),
            json!({"agent": agent, "mode": id}),
        ));
    }
    let options = session["configOptions"].as_array().into_iter().flatten();
    for option in options.filter(|o| o["type"] == "select") {
        let (Some(id), current) = (option["id"].as_str(), &option["currentValue"]) else {
            continue;
        };
        let label = option["name"].as_str().unwrap_or(id);
        for choice in select_choices(&option["options"]) {
            let Some(value) = choice["value"].as_str().filter(|v| current != v) else {
                continue;
            };
            let name = choice["name"].as_str().unwrap_or(value);
            actions.push(CommandId::SetOption.action(
                format!("Set {agent}'s {label} to {name} ({value})"),
                json!({"agent": agent, "option": id, "value": value}),
            ));
        }
    }
    actions
}

/// The choices of a select option, flat or in groups (`[{"group", "name", "options"}]`).
fn select_choices(options: &Value) -> Vec<&Value> {
    let flat = options.as_array().into_iter().flatten();
    flat.flat_map(|entry| match entry["options"].as_array() {
        Some(grouped) => grouped.iter().collect(),
        None => vec![entry],
    })
    .collect()
}

/// A command refused for `why`, which the user is told (the executeCommand handler says it).
fn refuse(why: &str) -> Error {
    Error::invalid_params(why.to_owned())
}

/// `agentls.askAbout` refused for `why`.
fn refuse_ask(why: &str) -> Error {
    refuse(&format!("{}: {why}", CommandId::AskAbout.name()))
}

/// A document opened: when it is a chat agentls made, it is known as one again. Checked at
/// once (a small read of agentls's record, only for a document in the chats folder), so that
/// every request after the open sees it as the chat it is.
pub fn follow_open(backend: &Backend, path: &Path, text: &str) {
    let Ok(root) = chats_root(backend) else {
        return;
    };
    if let Some(agent) = made_by_agentls(&root, path, text) {
        backend.feed.chat_reopened(path.to_owned(), agent);
    }
}

/// The agent of the document at `path` (whose text starts so) when it is a chat agentls made:
/// one in the chats folder `root` whose record agentls keeps names its agent. A chat of an
/// earlier agentls there, which kept no record, gets one naming the agent of its header (and
/// holding nothing of its text). A look-alike anywhere else is plain markdown. Blocking.
fn made_by_agentls(root: &Path, path: &Path, text: &str) -> Option<String> {
    if path.parent().and_then(Path::parent) != Some(root) {
        return None;
    }
    chat::record::agent_of(root, path).or_else(|| {
        let first = text.lines().next()?;
        let agent = first.strip_prefix(HEADER)?.trim();
        chat::record::adopt(root, path, agent).ok()?;
        chat::record::agent_of(root, path)
    })
}
