//! A test LSP client: starts the real `agentls` binary over stdio (or its `serve()` in this
//! process over an in-memory pipe, for tests on tokio's paused clock), speaks framed JSON-RPC,
//! keeps its own copy of open documents, applies `workspace/applyEdit` to them like an editor
//! would (sending the resulting `didChange`), and records everything the server sends.
//!
//! Every wait has a deadline and fails with a message saying what did not arrive.

#![allow(dead_code)] // each test binary uses a different part of this

pub mod agents;
pub mod http;
pub mod intruder;
pub mod mcp_client;
pub mod mock_llm;
pub mod peers;
pub mod processes;
pub mod pty;
pub mod reviews;
pub mod terminal_agent;
pub mod text;
pub mod tmux;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader,
};
use tokio::process::{Child, Command};
use tokio::sync::{Notify, oneshot};

/// How long any single wait may take before the test fails. A bound for failures only (a wait
/// ends as soon as its condition holds), set for the slowest real peer on a loaded 2-core
/// machine: a real agent such as OpenCode took 15–17 s to start there, beside the test suite
/// of another checkout.
pub const WAIT: Duration = Duration::from_secs(60);

/// What the client does with a server→client request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Behave like a good editor (apply edits, accept progress tokens, …).
    Normally,
    /// Never answer (an editor that hangs).
    Never,
    /// Answer with this result.
    With(Value),
    /// Pick the first of the actions offered (`window/showMessageRequest`).
    FirstAction,
    /// Answer with a JSON-RPC error of this code (Helix's "method not found" for a request it
    /// advertises but does not serve).
    Error(i64),
}

/// Options for starting the server.
#[derive(Debug, Default)]
pub struct Options {
    /// Contents of `$XDG_CONFIG_HOME/agentls/config.toml`.
    pub config_toml: Option<String>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// The workspace folder (that of an earlier run, say); a new one in the home when `None`.
    pub workspace: Option<PathBuf>,
    /// The most inotify watches the server may hold: it runs in a user namespace of its own
    /// (`unshare`) whose limit is set so, as a system whose limit is reached would refuse.
    pub inotify_watches: Option<u32>,
}

/// A document as the test client holds it.
#[derive(Debug, Clone)]
pub struct ClientDocument {
    /// Current text.
    pub text: String,
    /// Current version.
    pub version: i32,
}

/// Where the client's messages go: the server's stdin, or its end of the in-memory pipe.
type ServerInput = Box<dyn AsyncWrite + Send + Unpin>;

struct Shared {
    stdin: tokio::sync::Mutex<Option<ServerInput>>,
    pending: Mutex<HashMap<i64, oneshot::Sender<Value>>>,
    received: Mutex<Vec<Value>>,
    /// Responses no request of ours waits for (ids we did not send: null, strings, raw sends).
    unclaimed: Mutex<Vec<Value>>,
    /// Messages from the server (not responses) by method, taken or not.
    counts: Mutex<HashMap<String, usize>>,
    arrived: Notify,
    answers: Mutex<HashMap<String, Answer>>,
    documents: Mutex<HashMap<String, ClientDocument>>,
    encoding: Mutex<text::Encoding>,
    next_id: AtomicI64,
}

/// The server a [`TestClient`] talks to.
enum Server {
    /// The `agentls` binary, its stderr in a file.
    Process { child: Child, stderr_path: PathBuf },
    /// `agentls::lsp::serve` on this test's runtime.
    InProcess {
        serving: Option<tokio::task::JoinHandle<agentls::lsp::Ending>>,
        ended: Option<ExitStatus>,
    },
}

/// The agentls a bench measures instead of this build's ([`measure_the_named_binary`]).
static NAMED_BINARY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// For benches: every [`TestClient`] from now on starts the agentls named by
/// `AGENTLS_BENCH_BINARY`, when it is set. `cargo build --release`'s is the one users install,
/// where `cargo bench`'s has the features its dev-dependencies turn on. Tests never call it:
/// they run their own build.
pub fn measure_the_named_binary() {
    if let Some(binary) = std::env::var_os("AGENTLS_BENCH_BINARY") {
        // Relative to where the bench was started, whatever directory agentls starts in.
        let binary = std::path::absolute(&binary).expect("AGENTLS_BENCH_BINARY");
        NAMED_BINARY.get_or_init(|| binary);
    }
}

/// The agentls binary a [`TestClient`] starts: this build's, or the one a bench named.
pub fn agentls_binary() -> PathBuf {
    NAMED_BINARY
        .get()
        .cloned()
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_agentls").into())
}

/// The running server and our end of its pipes.
pub struct TestClient {
    server: Server,
    shared: Arc<Shared>,
    /// The isolated home directory (config, lockfiles) of this server; for a server in this
    /// process, only its workspace is under it (the process's home is [`in_process_home`]).
    pub home: tempfile::TempDir,
    /// A workspace folder for the test's files.
    pub workspace: PathBuf,
}

impl TestClient {
    /// Starts `agentls` with an isolated HOME and workspace.
    pub async fn start(options: Options) -> Self {
        let home = tempfile::tempdir().expect("temp home");
        let config_dir = home.path().join("config");
        std::fs::create_dir_all(config_dir.join("agentls")).unwrap();
        if let Some(toml) = &options.config_toml {
            std::fs::write(config_dir.join("agentls/config.toml"), toml).unwrap();
        }
        let workspace = options
            .workspace
            .clone()
            .unwrap_or_else(|| home.path().join("workspace"));
        std::fs::create_dir_all(&workspace).unwrap();
        let workspace = std::fs::canonicalize(workspace).unwrap();
        let stderr_path = home.path().join("agentls.stderr");
        // Discovery files under $TMPDIR stay inside this test's home.
        let tmp = home.path().join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let mut command = match options.inotify_watches {
            None => Command::new(agentls_binary()),
            Some(limit) => {
                let mut unshare = Command::new("unshare");
                let set =
                    format!("echo {limit} > /proc/sys/user/max_inotify_watches && exec \"$0\"");
                unshare
                    .args(["--user", "--map-root-user", "sh", "-c", &set])
                    .arg(agentls_binary());
                unshare
            }
        };
        command
            .env("HOME", home.path())
            .env("XDG_CONFIG_HOME", &config_dir)
            .env_remove("AGENTLS_CONFIG")
            .env_remove("XDG_STATE_HOME")
            .env_remove("CLAUDE_CONFIG_DIR")
            .env("TMPDIR", &tmp)
            .env_remove("CLAUDE_CODE_SSE_PORT")
            .env("AGENTLS_LOG", "debug")
            .envs(options.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("spawn agentls");
        let stdin: ServerInput = Box::new(child.stdin.take().unwrap());
        let shared = Shared::new(stdin);
        let stdout = child.stdout.take().unwrap();
        tokio::spawn(read_loop(BufReader::new(stdout), Arc::clone(&shared)));
        Self {
            server: Server::Process { child, stderr_path },
            shared,
            home,
            workspace,
        }
    }

    /// Serves LSP with `agentls::lsp::serve` on the current runtime, over an in-memory pipe: a
    /// test on tokio's paused clock then sees agentls's own timers (grace periods, timeouts)
    /// run at once, in order, as in real time. The process's environment is isolated once for
    /// all such servers ([`in_process_home`]); its config gives the demo agent the `agentls`
    /// binary (this process is the test). Per-test config goes in `initializationOptions`.
    /// No logs are kept ([`TestClient::stderr`] says so).
    pub async fn in_process() -> Self {
        let config = in_process_home();
        let home = tempfile::tempdir_in(config).expect("temp dir");
        let workspace = std::fs::canonicalize(home.path())
            .unwrap()
            .join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        let (ours, theirs) = tokio::io::duplex(1 << 20);
        let (server_input, server_output) = tokio::io::split(theirs);
        let serving = tokio::spawn(agentls::lsp::serve(server_input, server_output, None));
        let (our_input, our_output) = tokio::io::split(ours);
        let shared = Shared::new(Box::new(our_output));
        tokio::spawn(read_loop(BufReader::new(our_input), Arc::clone(&shared)));
        Self {
            server: Server::InProcess {
                serving: Some(serving),
                ended: None,
            },
            shared,
            home,
            workspace,
        }
    }

    /// [`TestClient::in_process`], then `initialize` as a capable UTF-16 editor
    /// ([`TestClient::rich_capabilities`]).
    pub async fn in_process_initialized() -> Self {
        let client = Self::in_process().await;
        client
            .initialize(Self::rich_capabilities(false), None)
            .await;
        client
    }

    /// [`TestClient::start`], then `initialize` as a capable UTF-16 editor
    /// ([`TestClient::rich_capabilities`]).
    pub async fn start_initialized(options: Options) -> Self {
        let client = Self::start(options).await;
        client
            .initialize(Self::rich_capabilities(false), None)
            .await;
        client
    }

    /// `initialize` + `initialized` with the workspace as the only folder. Returns the result.
    /// The client asks for every plugin event, as the editor packages do, unless
    /// `initialization_options` says which (`pluginEvents`; `[]`: none, as Helix).
    pub async fn initialize(
        &self,
        capabilities: Value,
        initialization_options: Option<Value>,
    ) -> Value {
        let mut initialization_options = initialization_options.unwrap_or_else(|| json!({}));
        if let Some(options) = initialization_options.as_object_mut() {
            options
                .entry("pluginEvents")
                .or_insert_with(|| json!(["sessionUpdate", "reviewChanged", "turnChanged"]));
        }
        let uri = file_uri(&self.workspace);
        let result = self
            .request(
                "initialize",
                json!({
                    "processId": std::process::id(),
                    "rootUri": uri,
                    "workspaceFolders": [{"uri": uri, "name": "workspace"}],
                    "capabilities": capabilities,
                    "initializationOptions": initialization_options,
                }),
            )
            .await
            .expect("initialize failed");
        let encoding = match result["capabilities"]["positionEncoding"].as_str() {
            Some("utf-8") => text::Encoding::Utf8,
            _ => text::Encoding::Utf16,
        };
        *self.shared.encoding.lock().unwrap() = encoding;
        self.notify("initialized", json!({})).await;
        result
    }

    /// Capabilities of a capable editor (utf-16 unless `utf8`).
    pub fn rich_capabilities(utf8: bool) -> Value {
        let encodings = if utf8 {
            json!(["utf-8", "utf-16"])
        } else {
            json!(["utf-16"])
        };
        json!({
            "general": {"positionEncodings": encodings},
            "workspace": {"applyEdit": true, "workspaceEdit": {"documentChanges": true},
                          "workspaceFolders": true, "configuration": true},
            "window": {"showDocument": {"support": true}, "workDoneProgress": true,
                       "showMessage": {"messageActionItem": {"additionalPropertiesSupport": true}}},
            "textDocument": {"inlayHint": {}, "publishDiagnostics": {}}
        })
    }

    /// Sends a request and waits for its response: `Ok(result)` or `Err(error object)`.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, Value> {
        let (id, rx) = self.send_request(method, params).await;
        let response = tokio::time::timeout(WAIT, rx)
            .await
            .unwrap_or_else(|_| panic!("no response to {method} (id {id}) within {WAIT:?}"))
            .expect("reader stopped");
        match response.get("error") {
            Some(error) => Err(error.clone()),
            None => Ok(response["result"].clone()),
        }
    }

    /// Sends a request without waiting; the receiver yields the whole response.
    pub async fn send_request(
        &self,
        method: &str,
        params: Value,
    ) -> (i64, oneshot::Receiver<Value>) {
        let id = self.shared.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        self.shared.pending.lock().unwrap().insert(id, tx);
        write_message(
            &self.shared,
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .await;
        (id, rx)
    }

    /// Sends a notification.
    pub async fn notify(&self, method: &str, params: Value) {
        write_message(
            &self.shared,
            &json!({"jsonrpc": "2.0", "method": method, "params": params}),
        )
        .await;
    }

    /// Sends raw bytes (for malformed-input tests).
    pub async fn send_raw(&self, bytes: &[u8]) {
        let mut stdin = self.shared.stdin.lock().await;
        let stdin = stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).await.unwrap();
        stdin.flush().await.unwrap();
    }

    /// Sets how server requests with `method` are answered.
    pub fn answer(&self, method: &str, answer: Answer) {
        self.shared
            .answers
            .lock()
            .unwrap()
            .insert(method.to_owned(), answer);
    }

    /// Tells the server the editor's selection in `uri` (`agentls/didChangeSelection`).
    pub async fn select(&self, uri: &str, selection: Value) {
        self.notify(
            "agentls/didChangeSelection",
            json!({"textDocument": {"uri": uri}, "selection": selection}),
        )
        .await;
    }

    /// Writes `text` to `relative` in the workspace and opens it; returns its URI.
    pub async fn open(&self, relative: &str, language: &str, text: &str) -> String {
        let path = self.workspace.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        self.open_unsaved(&path, language, text).await
    }

    /// Opens `path` with `text` as the buffer (whatever the disk holds); returns its URI.
    pub async fn open_unsaved(&self, path: &Path, language: &str, text: &str) -> String {
        let uri = file_uri(path);
        self.shared.documents.lock().unwrap().insert(
            uri.clone(),
            ClientDocument {
                text: text.to_owned(),
                version: 0,
            },
        );
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": language, "version": 0, "text": text}}),
        )
        .await;
        uri
    }

    /// Replaces `range` (LSP JSON) of `uri` with `new_text`, in our copy and in a didChange.
    pub async fn edit(&self, uri: &str, range: Value, new_text: &str) {
        let edits = vec![(range, new_text.to_owned())];
        change_document(&self.shared, uri, edits).await;
    }

    /// Saves `uri` as an editor does: our copy to its file, then `didSave`.
    pub async fn save(&self, uri: &str) {
        std::fs::write(file_uri_to_path(uri), self.document(uri).text).unwrap();
        self.notify(
            "textDocument/didSave",
            json!({"textDocument": {"uri": uri}}),
        )
        .await;
    }

    /// Our copy of a document.
    pub fn document(&self, uri: &str) -> ClientDocument {
        self.shared.documents.lock().unwrap()[uri].clone()
    }

    /// Moves the client's version of `uri` on by `by` without telling the server, as Helix does
    /// when it undoes a completion's preview: edits for the version the server knows are then
    /// refused as outdated.
    pub fn bump_version_silently(&self, uri: &str, by: i32) {
        if let Some(doc) = self.shared.documents.lock().unwrap().get_mut(uri) {
            doc.version += by;
        }
    }

    /// The client's copy of `uri`, when it opened it.
    pub fn try_document(&self, uri: &str) -> Option<ClientDocument> {
        self.shared.documents.lock().unwrap().get(uri).cloned()
    }

    /// The encoding the server chose.
    pub fn encoding(&self) -> text::Encoding {
        *self.shared.encoding.lock().unwrap()
    }

    /// Puts `message` back at the front of the record, for the next [`TestClient::take`].
    pub fn put_back(&self, message: Value) {
        self.shared.received.lock().unwrap().insert(0, message);
        self.shared.arrived.notify_waiters();
    }

    /// Waits for the first message from the server (notification or request) with `method`
    /// matching `pred`, and removes it from the record.
    pub async fn take(&self, method: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let found = tokio::time::timeout(WAIT, async {
            loop {
                let notified = self.shared.arrived.notified();
                {
                    let mut received = self.shared.received.lock().unwrap();
                    if let Some(i) = received
                        .iter()
                        .position(|m| m["method"] == method && pred(&m["params"]))
                    {
                        return received.remove(i);
                    }
                }
                notified.await;
            }
        })
        .await;
        found.unwrap_or_else(|_| {
            let seen: Vec<_> = self
                .shared
                .received
                .lock()
                .unwrap()
                .iter()
                .map(|m| m["method"].clone())
                .collect();
            panic!("no matching {method} within {WAIT:?}; unconsumed messages: {seen:?}")
        })
    }

    /// Waits for the first response no request of ours was waiting for (one to a raw request,
    /// or an error answer with a null id) matching `pred`, and removes it from the record.
    pub async fn take_response(&self, pred: impl Fn(&Value) -> bool) -> Value {
        let found = tokio::time::timeout(WAIT, async {
            loop {
                let notified = self.shared.arrived.notified();
                {
                    let mut unclaimed = self.shared.unclaimed.lock().unwrap();
                    if let Some(i) = unclaimed.iter().position(&pred) {
                        return unclaimed.remove(i);
                    }
                }
                notified.await;
            }
        })
        .await;
        found.unwrap_or_else(|_| {
            let seen = self.shared.unclaimed.lock().unwrap().clone();
            panic!("no matching response within {WAIT:?}; other responses: {seen:?}")
        })
    }

    /// Whether the server has ended (without waiting).
    pub fn has_exited(&mut self) -> bool {
        match &mut self.server {
            Server::Process { child, .. } => child.try_wait().ok().flatten().is_some(),
            Server::InProcess { serving, ended } => {
                ended.is_some() || serving.as_ref().is_some_and(|s| s.is_finished())
            }
        }
    }

    /// Every message with `method` received so far (not removed).
    pub fn received(&self, method: &str) -> Vec<Value> {
        self.shared
            .received
            .lock()
            .unwrap()
            .iter()
            .filter(|m| m["method"] == method)
            .cloned()
            .collect()
    }

    /// Drops every message received so far that was not taken (counts stay): a long run keeps
    /// the record, and the scans of it, short.
    pub fn forget_received(&self) {
        self.shared.received.lock().unwrap().clear();
        self.shared.unclaimed.lock().unwrap().clear();
    }

    /// How many messages with `method` the server has sent so far (taken or not; `None`: all
    /// methods). Responses are not counted.
    pub fn count(&self, method: Option<&str>) -> usize {
        let counts = self.shared.counts.lock().unwrap();
        match method {
            Some(method) => counts.get(method).copied().unwrap_or(0),
            None => counts.values().sum(),
        }
    }

    /// The server's view of the editor (`agentls.debug.state`).
    pub async fn server_state(&self) -> Value {
        self.request(
            "workspace/executeCommand",
            json!({"command": "agentls.debug.state", "arguments": []}),
        )
        .await
        .expect("agentls.debug.state")
    }

    /// `shutdown` then `exit`; returns how the process ended.
    pub async fn shutdown(mut self) -> ExitStatus {
        self.stop().await
    }

    /// [`TestClient::shutdown`], keeping the home and workspace (for a restart in them).
    pub async fn stop(&mut self) -> ExitStatus {
        self.request("shutdown", Value::Null)
            .await
            .expect("shutdown");
        self.notify("exit", Value::Null).await;
        self.wait_exit().await
    }

    /// Closes the server's stdin, as an editor that crashed would.
    pub async fn close_stdin(&self) {
        self.shared.stdin.lock().await.take();
    }

    /// Waits for the server to end; a server in this process ends with the exit code its
    /// [`agentls::lsp::Ending`] gives the binary.
    pub async fn wait_exit(&mut self) -> ExitStatus {
        use std::os::unix::process::ExitStatusExt as _;
        match &mut self.server {
            Server::Process { child, .. } => tokio::time::timeout(WAIT, child.wait())
                .await
                .expect("agentls did not exit")
                .unwrap(),
            Server::InProcess { serving, ended } => {
                if let Some(serving) = serving.take() {
                    let ending = tokio::time::timeout(WAIT, serving)
                        .await
                        .expect("serve() did not return")
                        .expect("serve() panicked");
                    let code = match ending {
                        agentls::lsp::Ending::Clean => 0,
                        agentls::lsp::Ending::Abrupt => 1,
                    };
                    *ended = Some(ExitStatus::from_raw(code << 8));
                }
                ended.expect("ended")
            }
        }
    }

    /// The server's stderr so far (nothing is kept for a server in this process).
    pub fn stderr(&self) -> String {
        match &self.server {
            Server::Process { stderr_path, .. } => {
                std::fs::read_to_string(stderr_path).unwrap_or_default()
            }
            Server::InProcess { .. } => "(a server in this process: its log is not kept)".into(),
        }
    }

    /// Where the server writes its lockfile (`$HOME/.claude/ide` unless `CLAUDE_CONFIG_DIR`).
    pub fn lock_dir(&self) -> PathBuf {
        match &self.server {
            Server::Process { .. } => self.home.path().join(".claude/ide"),
            Server::InProcess { .. } => in_process_home().join(".claude/ide"),
        }
    }

    /// The server's `$XDG_STATE_HOME` (chats, sessions).
    pub fn state_home(&self) -> PathBuf {
        match &self.server {
            Server::Process { .. } => self.home.path().join(".local/state"),
            Server::InProcess { .. } => in_process_home().join(".local/state"),
        }
    }

    /// Whether the server runs in this process ([`TestClient::in_process`]).
    pub fn in_this_process(&self) -> bool {
        matches!(self.server, Server::InProcess { .. })
    }

    /// The process id of the server.
    pub fn pid(&self) -> u32 {
        match &self.server {
            Server::Process { child, .. } => child.id().unwrap_or(0),
            Server::InProcess { .. } => std::process::id(),
        }
    }
}

impl Shared {
    fn new(stdin: ServerInput) -> Arc<Self> {
        Arc::new(Self {
            stdin: tokio::sync::Mutex::new(Some(stdin)),
            pending: Mutex::default(),
            received: Mutex::default(),
            unclaimed: Mutex::default(),
            counts: Mutex::default(),
            arrived: Notify::new(),
            answers: Mutex::default(),
            documents: Mutex::default(),
            encoding: Mutex::new(text::Encoding::Utf16),
            next_id: AtomicI64::new(1),
        })
    }
}

/// The home of this test process's in-process servers ([`TestClient::in_process`]): made once,
/// with the environment pointed into it as [`TestClient::start`] does for a child (HOME, config,
/// TMPDIR; no inherited agentls or terminal-agent variables), and a config that runs the demo
/// agent from the `agentls` binary.
pub fn in_process_home() -> &'static Path {
    static HOME: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    HOME.get_or_init(|| {
        let home = tempfile::tempdir().expect("temp home").keep();
        let home = std::fs::canonicalize(home).unwrap();
        let config_dir = home.join("config");
        std::fs::create_dir_all(config_dir.join("agentls")).unwrap();
        let demo = format!(
            "[agents.demo]\ncommand = {:?}\nargs = [\"demo-agent\"]\n",
            env!("CARGO_BIN_EXE_agentls")
        );
        std::fs::write(config_dir.join("agentls/config.toml"), demo).unwrap();
        let tmp = home.join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        // SAFETY: every reader of the environment in this process waits on this OnceLock
        // first (each in-process server is made through it), and the test binaries that use it
        // start no other thread that reads the environment meanwhile.
        unsafe {
            std::env::set_var("HOME", &home);
            std::env::set_var("XDG_CONFIG_HOME", &config_dir);
            std::env::set_var("TMPDIR", &tmp);
            for name in [
                "AGENTLS_CONFIG",
                "XDG_STATE_HOME",
                "CLAUDE_CONFIG_DIR",
                "CLAUDE_CODE_SSE_PORT",
            ] {
                std::env::remove_var(name);
            }
        }
        home
    })
}

impl Drop for TestClient {
    fn drop(&mut self) {
        if std::thread::panicking() && matches!(self.server, Server::Process { .. }) {
            eprintln!("---- agentls stderr ----\n{}", self.stderr());
        }
    }
}

/// The `file://` URI of a path, encoded the way editors do.
pub fn file_uri(path: &Path) -> String {
    let mut uri = String::from("file://");
    for byte in path.to_string_lossy().bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'.' | b'_' | b'~' => {
                uri.push(byte as char)
            }
            _ => uri.push_str(&format!("%{byte:02X}")),
        }
    }
    uri
}

/// The path of a `file://` URI (percent-decoded).
pub fn file_uri_to_path(uri: &str) -> String {
    let encoded = uri.strip_prefix("file://").expect("a file URI").as_bytes();
    let mut bytes = Vec::with_capacity(encoded.len());
    let mut i = 0;
    while i < encoded.len() {
        if encoded[i] == b'%' {
            let hex = std::str::from_utf8(&encoded[i + 1..i + 3]).unwrap();
            bytes.push(u8::from_str_radix(hex, 16).unwrap());
            i += 3;
        } else {
            bytes.push(encoded[i]);
            i += 1;
        }
    }
    String::from_utf8(bytes).unwrap()
}

/// Polls `condition` until it holds (returns `Some(())`) or [`WAIT`] passes (`None`). For effects
/// that leave no message to wait for, such as a file written by the server.
pub async fn eventually(condition: impl Fn() -> bool) -> Option<()> {
    let deadline = tokio::time::Instant::now() + WAIT;
    while tokio::time::Instant::now() < deadline {
        if condition() {
            return Some(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// A seed for a randomised test: the number in the environment variable `var` (to replay a
/// run), else one from the clock. The caller prints it.
pub fn seed_from(var: &str) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
}

/// An LSP range as JSON.
pub fn range(l1: u32, c1: u32, l2: u32, c2: u32) -> Value {
    json!({"start": {"line": l1, "character": c1}, "end": {"line": l2, "character": c2}})
}

async fn write_message(shared: &Shared, message: &Value) {
    let mut stdin = shared.stdin.lock().await;
    write_locked(&mut stdin, message).await;
}

async fn write_locked(stdin: &mut Option<ServerInput>, message: &Value) {
    let Some(stdin) = stdin.as_mut() else { return };
    let body = serde_json::to_vec(message).unwrap();
    let header = format!("Content-Length: {}\r\n\r\n", body.len());
    // A server that exited makes these fail; the test then fails on the missing response.
    let _ = stdin.write_all(header.as_bytes()).await;
    let _ = stdin.write_all(&body).await;
    let _ = stdin.flush().await;
}

async fn read_loop(mut stdout: impl AsyncBufRead + Unpin, shared: Arc<Shared>) {
    loop {
        let mut length = None;
        loop {
            let mut line = String::new();
            if stdout.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some(value) = line.strip_prefix("Content-Length:") {
                length = value.trim().parse::<usize>().ok();
            }
        }
        let Some(length) = length else {
            panic!(
                "frame without Content-Length: the server wrote something that is not LSP to stdout"
            );
        };
        let mut body = vec![0; length];
        if stdout.read_exact(&mut body).await.is_err() {
            return;
        }
        let message: Value = serde_json::from_slice(&body).expect("server sent invalid JSON");
        dispatch(&shared, message).await;
    }
}

async fn dispatch(shared: &Arc<Shared>, message: Value) {
    let is_response = message.get("method").is_none();
    if is_response {
        let id = message["id"].as_i64().unwrap_or(-1);
        let waiter = shared.pending.lock().unwrap().remove(&id);
        match waiter {
            Some(tx) => {
                let _ = tx.send(message);
            }
            None => {
                shared.unclaimed.lock().unwrap().push(message);
                shared.arrived.notify_waiters();
            }
        }
        return;
    }
    let request_id = message.get("id").cloned();
    let method = message["method"].as_str().unwrap_or_default().to_owned();
    let answer = request_id.as_ref().map(|_| {
        shared
            .answers
            .lock()
            .unwrap()
            .get(&method)
            .cloned()
            .unwrap_or(Answer::Normally)
    });
    // Answered (an edit applied) before it is seen: a test that saw the request finds the
    // documents as the answer left them.
    let result = match answer {
        None | Some(Answer::Never) => None,
        Some(Answer::Error(code)) => Some(Err(json!({
            "code": code,
            "message": format!("{method}: refused by the test client"),
        }))),
        Some(Answer::With(value)) => Some(Ok(value)),
        Some(Answer::FirstAction) => Some(Ok(message["params"]["actions"][0].clone())),
        Some(Answer::Normally) => Some(Ok(
            answer_normally(shared, &method, &message["params"]).await
        )),
    };
    *shared
        .counts
        .lock()
        .unwrap()
        .entry(method.clone())
        .or_default() += 1;
    shared.received.lock().unwrap().push(message);
    shared.arrived.notify_waiters();
    let (Some(id), Some(result)) = (request_id, result) else {
        return;
    };
    let response = match result {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
    };
    let shared = Arc::clone(shared);
    tokio::spawn(async move { write_message(&shared, &response).await });
}

async fn answer_normally(shared: &Arc<Shared>, method: &str, params: &Value) -> Value {
    match method {
        "workspace/applyEdit" => {
            // Held from the version check to the didChange: no edit of the test's own between.
            let mut stdin = shared.stdin.lock().await;
            // As editors do: an edit made for another version of a document than ours is
            // refused whole (the user typed meanwhile).
            let stale = params["edit"]["documentChanges"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|change| {
                    let doc = &change["textDocument"];
                    let ours = shared
                        .documents
                        .lock()
                        .unwrap()
                        .get(doc["uri"].as_str().unwrap_or_default())
                        .map(|d| d.version);
                    doc["version"]
                        .as_i64()
                        .is_some_and(|v| ours.is_some_and(|o| i64::from(o) != v))
                });
            if let Some(change) = stale {
                let why = format!("{} changed meanwhile", change["textDocument"]["uri"]);
                return json!({"applied": false, "failureReason": why});
            }
            for (uri, edits) in workspace_edits(&params["edit"]) {
                change_document_locked(shared, &mut stdin, &uri, edits).await;
            }
            json!({"applied": true})
        }
        "window/showDocument" => json!({"success": true}),
        "window/showMessageRequest" => Value::Null,
        _ => Value::Null,
    }
}

/// The text edits of a WorkspaceEdit, per URI, as (range, new text).
fn workspace_edits(edit: &Value) -> Vec<(String, Vec<(Value, String)>)> {
    let mut out = Vec::new();
    if let Some(changes) = edit["documentChanges"].as_array() {
        for change in changes {
            let uri = change["textDocument"]["uri"].as_str().unwrap().to_owned();
            out.push((uri, text_edits(&change["edits"])));
        }
    }
    if let Some(changes) = edit["changes"].as_object() {
        for (uri, edits) in changes {
            out.push((uri.clone(), text_edits(edits)));
        }
    }
    out
}

fn text_edits(edits: &Value) -> Vec<(Value, String)> {
    edits
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["range"].clone(),
                e["newText"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Applies simultaneous edits (ranges relative to the current text) to our copy and tells the
/// server with one incremental didChange (edits sent last-first so each range stays valid).
async fn change_document(shared: &Shared, uri: &str, edits: Vec<(Value, String)>) {
    // Holding the pipe while changing our copy keeps versions in the order they are sent.
    let mut stdin = shared.stdin.lock().await;
    change_document_locked(shared, &mut stdin, uri, edits).await;
}

/// [`change_document`] with the pipe already held.
async fn change_document_locked(
    shared: &Shared,
    stdin: &mut Option<ServerInput>,
    uri: &str,
    mut edits: Vec<(Value, String)>,
) {
    let encoding = *shared.encoding.lock().unwrap();
    edits.sort_by_key(|(r, _)| {
        let s = &r["start"];
        std::cmp::Reverse((
            s["line"].as_u64().unwrap(),
            s["character"].as_u64().unwrap(),
        ))
    });
    let version = {
        let mut documents = shared.documents.lock().unwrap();
        let doc = documents
            .get_mut(uri)
            .unwrap_or_else(|| panic!("edit for a document the client does not have open: {uri}"));
        for (range, new_text) in &edits {
            doc.text = text::replace(&doc.text, range, new_text, encoding);
        }
        doc.version += 1;
        doc.version
    };
    let changes: Vec<_> = edits
        .iter()
        .map(|(range, text)| json!({"range": range, "text": text}))
        .collect();
    let did_change = json!({"jsonrpc": "2.0", "method": "textDocument/didChange",
        "params": {"textDocument": {"uri": uri, "version": version}, "contentChanges": changes}});
    write_locked(stdin, &did_change).await;
}
