//! Fuzzing on the stable toolchain, bounded, in every `cargo test`: each target replays its
//! committed corpus (`tests/fuzz/corpus/<target>/`) and then random mutations of it (bit flips,
//! inserted protocol tokens, cut and spliced seeds). What must hold:
//!
//! - the LSP framer cuts the same bodies out of a byte stream whatever the read boundaries, none
//!   over its limit, and every body is passed on as a JSON-RPC 2.0 object or answered with the
//!   spec's error (`lsp_frames`, `lsp_bodies`);
//! - ACP's line reader yields the same lines and skips whatever the read boundaries
//!   (`acp_lines`);
//! - the real server, sent random LSP messages and random MCP WebSocket frames, never dies,
//!   never panics, and still answers the editor and a new terminal agent.
//!
//! `AGENTLS_FUZZ_CASES` sets the mutations per target (default 2,000); `AGENTLS_FUZZ_SEED`
//! replays a run (every run prints its seed). A failing input is kept as
//! `target/fuzz-failures/<target>-<seed>.bin`, to be added to the corpus.

mod support;

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use agentls::acp::transport::{OnSkipped, SkippedLine, incoming_messages};
use agentls::lsp::framing::{Framer, MAX_BODY};
use agentls::lsp::message_check::{Checked, check};
use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use support::mcp_client::{McpClient, websocket};
use support::{Options, TestClient};
use tokio_tungstenite::tungstenite::Message;

/// xorshift64*: small, seedable, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// The run's seed: `AGENTLS_FUZZ_SEED`, else the clock (printed either way).
fn seed(target: &str) -> u64 {
    let seed = support::seed_from("AGENTLS_FUZZ_SEED");
    eprintln!("fuzz {target}: AGENTLS_FUZZ_SEED={seed}");
    seed
}

/// Mutations per target.
fn cases() -> usize {
    std::env::var("AGENTLS_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000)
}

/// The committed seeds of `target`.
fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no corpus in {}", dir.display());
    files.iter().map(|f| std::fs::read(f).unwrap()).collect()
}

/// Pieces of the protocols, inserted whole: they reach deeper than random bytes.
const TOKENS: &[&[u8]] = &[
    b"\r\n",
    b"\n",
    b"\r\n\r\n",
    b"Content-Length: ",
    b"content-length:",
    b"Content-Type: application/json\r\n",
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b":",
    b",",
    b"\\ud83d",
    b"\\udc00",
    b"\\u0000",
    b"\0",
    b"\xff",
    b"\xed\xa0\x80",
    b"99999999999999999999",
    b"-1",
    b"1.5",
    b"null",
    b"\"jsonrpc\":\"2.0\"",
    b"\"id\":",
    b"\"method\":",
    b"\"params\":",
    b"\"result\":",
    "😀漢".as_bytes(),
];

/// One seed, changed one to four times.
fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut data = rng.pick(seeds).clone();
    for _ in 0..1 + rng.below(4) {
        let len = data.len();
        match rng.below(6) {
            0 if len > 0 => {
                let at = rng.below(len);
                data[at] ^= 1 << rng.below(8);
            }
            1 => {
                let at = rng.below(len + 1);
                data.insert(at, rng.next() as u8);
            }
            2 => {
                let token = *rng.pick(TOKENS);
                let at = rng.below(len + 1);
                data.splice(at..at, token.iter().copied());
            }
            3 if len > 0 => {
                let from = rng.below(len);
                let to = from + rng.below((len - from).min(64) + 1);
                data.drain(from..to);
            }
            4 => {
                let other = rng.pick(seeds).clone();
                let cut = rng.below(len + 1);
                let from = rng.below(other.len() + 1);
                data.truncate(cut);
                data.extend_from_slice(&other[from..]);
            }
            _ if len > 0 => {
                let from = rng.below(len);
                let to = from + rng.below((len - from).min(32) + 1);
                let piece = data[from..to].to_vec();
                let at = rng.below(len + 1);
                data.splice(at..at, piece);
            }
            _ => {}
        }
    }
    data
}

/// Runs `property` on every seed of `target`, then on [`cases`] mutations; a failing input is
/// kept before the panic goes on.
fn fuzz(target: &str, mut property: impl FnMut(&[u8], &mut Rng)) {
    let seeds = corpus(target);
    let seed = seed(target);
    let mut rng = Rng::new(seed);
    let inputs = seeds
        .clone()
        .into_iter()
        .map(Some)
        .chain((0..cases()).map(|_| None));
    for input in inputs {
        let input = input.unwrap_or_else(|| mutate(&mut rng, &seeds));
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| property(&input, &mut rng)));
        if let Err(panic) = outcome {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-failures");
            let file = dir.join(format!("{target}-{seed}.bin"));
            let _ = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&file, &input));
            eprintln!("fuzz {target}: failing input kept as {}", file.display());
            std::panic::resume_unwind(panic);
        }
    }
}

/// `input` cut at random places (at most 8 pieces).
fn chunks<'a>(input: &'a [u8], rng: &mut Rng) -> Vec<&'a [u8]> {
    let mut cuts: Vec<usize> = (0..rng.below(8))
        .map(|_| rng.below(input.len() + 1))
        .collect();
    cuts.sort_unstable();
    let mut pieces = Vec::new();
    let mut from = 0;
    for cut in cuts.into_iter().chain([input.len()]) {
        pieces.push(&input[from..cut]);
        from = cut;
    }
    pieces
}

/// The bodies the framer cuts out of `chunks`, read one after the other.
fn bodies(chunks: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut framer = Framer::default();
    let mut out = Vec::new();
    for chunk in chunks {
        framer.push(chunk);
        while let Some(body) = framer.next_body() {
            out.push(body);
        }
    }
    out
}

/// A body is passed on as a JSON-RPC 2.0 object, or refused with the spec's error answer.
fn checked_as_the_spec_says(body: &[u8]) {
    match check(body.to_vec(), &mut 0) {
        Checked::Valid(passed) => {
            let value: Value = serde_json::from_slice(&passed).expect("passed on as JSON");
            assert_eq!(value["jsonrpc"], "2.0", "{value}");
        }
        Checked::Refused { answer, .. } => {
            assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
            let code = answer["error"]["code"].as_i64();
            assert!(matches!(code, Some(-32700 | -32600)), "{answer}");
        }
        Checked::Dropped(_) => {}
    }
}

#[test]
fn lsp_frames_are_cut_the_same_whatever_the_reads() {
    fuzz("lsp_frames", |input, rng| {
        let whole = bodies(&[input]);
        let pieces = chunks(input, rng);
        assert_eq!(
            bodies(&pieces),
            whole,
            "cut at {:?}",
            pieces.iter().map(|p| p.len()).collect::<Vec<_>>()
        );
        for body in &whole {
            assert!(body.len() <= MAX_BODY);
            checked_as_the_spec_says(body);
        }
    });
}

#[test]
fn lsp_bodies_are_passed_on_or_answered() {
    fuzz("lsp_bodies", |input, _| checked_as_the_spec_says(input));
}

/// An `AsyncRead` that hands out its pieces one read at a time.
struct Pieces(std::collections::VecDeque<Vec<u8>>);

impl tokio::io::AsyncRead for Pieces {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        // An empty read is the end of input: empty pieces are no reads.
        while self.0.front().is_some_and(Vec::is_empty) {
            self.0.pop_front();
        }
        if let Some(mut piece) = self.0.pop_front() {
            let n = piece.len().min(buf.remaining());
            buf.put_slice(&piece[..n]);
            if n < piece.len() {
                self.0.push_front(piece.split_off(n));
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// The lines ACP's reader passes on and the ones it skips, reading `pieces`.
fn acp_lines(pieces: Vec<Vec<u8>>) -> (Vec<String>, Vec<SkippedLine>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let skipped = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = std::sync::Arc::clone(&skipped);
        let on_skipped: OnSkipped = std::sync::Arc::new(move |s| sink.lock().unwrap().push(s));
        let lines = incoming_messages(Pieces(pieces.into()), on_skipped, None)
            .map(|line| line.expect("no I/O error from memory"))
            .collect::<Vec<_>>()
            .await;
        let skipped = std::mem::take(&mut *skipped.lock().unwrap());
        (lines, skipped)
    })
}

#[test]
fn acp_lines_are_read_the_same_whatever_the_reads() {
    fuzz("acp_lines", |input, rng| {
        let whole = acp_lines(vec![input.to_vec()]);
        let pieces = chunks(input, rng).into_iter().map(<[u8]>::to_vec).collect();
        assert_eq!(acp_lines(pieces), whole);
        for line in &whole.0 {
            assert!(!line.contains('\n'), "{line:?}");
        }
    });
}

/// Keys a random object draws from, so that random params reach the handlers' fields.
const KEYS: &[&str] = &[
    "uri",
    "textDocument",
    "range",
    "start",
    "end",
    "line",
    "character",
    "position",
    "text",
    "version",
    "languageId",
    "contentChanges",
    "command",
    "arguments",
    "settings",
    "agentls",
    "context",
    "diagnostics",
    "review",
    "hunk",
    "agent",
    "path",
    "lines",
    "selection",
    "event",
    "added",
    "removed",
    "workspaceFolders",
    "id",
    "question",
    "choice",
    "mode",
    "option",
    "value",
    "review",
    "fs",
    "autoAccept",
    "chat",
    "only",
    "triggerKind",
];

/// A random JSON value, `depth` levels deep at most; `uris` are the workspace's files.
fn random_json(rng: &mut Rng, depth: usize, uris: &[String]) -> Value {
    let strings = [
        "",
        "a",
        "😀 漢字 \u{0}",
        "\u{FEFF}x",
        "## You\nhi",
        "agent: do it",
        "x\ny\r\nz",
    ];
    match rng.below(if depth == 0 { 6 } else { 9 }) {
        0 => Value::Null,
        1 => json!(rng.below(2) == 0),
        2 => json!(*rng.pick(&[
            0i64,
            1,
            -1,
            7,
            1 << 31,
            u32::MAX as i64 + 1,
            i64::MIN,
            i64::MAX
        ])),
        3 => json!(*rng.pick(&[0.5f64, -3.25, 1e300])),
        4 => json!(rng.pick(&strings)),
        5 => json!(rng.pick(uris)),
        6 | 7 => {
            let mut map = serde_json::Map::new();
            for _ in 0..rng.below(5) {
                let key = *rng.pick(KEYS);
                map.insert(key.to_owned(), random_json(rng, depth - 1, uris));
            }
            Value::Object(map)
        }
        _ => Value::Array(
            (0..rng.below(4))
                .map(|_| random_json(rng, depth - 1, uris))
                .collect(),
        ),
    }
}

/// A position or range with numbers from the edges of what fits.
fn random_range(rng: &mut Rng) -> Value {
    let mut n = || json!(*rng.pick(&[0u64, 0, 1, 2, 3, 40, 4_294_967_295]));
    json!({"start": {"line": n(), "character": n()}, "end": {"line": n(), "character": n()}})
}

/// Methods a random message is sent as (not `shutdown` or `exit`, which end the server as
/// they should).
const METHODS: &[&str] = &[
    "textDocument/didOpen",
    "textDocument/didChange",
    "textDocument/didChange",
    "textDocument/didSave",
    "textDocument/didClose",
    "textDocument/codeAction",
    "textDocument/inlayHint",
    "textDocument/completion",
    "textDocument/definition",
    "workspace/executeCommand",
    "workspace/executeCommand",
    "workspace/didChangeConfiguration",
    "workspace/didChangeWorkspaceFolders",
    "agentls/didChangeSelection",
    "agentls/didChangeDiagnostics",
    "$/cancelRequest",
    "$/setTrace",
    "initialize",
    "initialized",
    "no/such/method",
];

/// Commands a random `workspace/executeCommand` runs (not the `debug` ones, which write files
/// for tests, nor prompts, which start agents' turns).
const COMMANDS: &[&str] = &[
    "agentls.openChat",
    "agentls.askAbout",
    "agentls.cancel",
    "agentls.setMode",
    "agentls.setOption",
    "agentls.status",
    "agentls.accept",
    "agentls.reject",
    "agentls.showReview",
    "agentls.answer",
    "agentls.mention",
    "agentls.terminalEnv",
    "agentls.undoTurn",
    "agentls.redoTurn",
    "agentls.nope",
];

/// One random message: a method with params shaped like its own (often) or random.
fn random_message(rng: &mut Rng, n: usize, uris: &[String]) -> Value {
    let method = *rng.pick(METHODS);
    let uri = rng.pick(uris).clone();
    let mut params = match method {
        "workspace/executeCommand" => json!({
            "command": rng.pick(COMMANDS),
            "arguments": [random_json(rng, 3, uris)],
        }),
        _ if rng.below(2) == 0 => json!({
            "textDocument": {"uri": uri, "version": rng.below(5), "languageId": "rust",
                             "text": random_json(rng, 0, uris)},
            "contentChanges": [{"range": random_range(rng), "text": random_json(rng, 0, uris)}],
            "range": random_range(rng),
            "position": random_range(rng)["start"],
            "selection": random_range(rng),
            "context": {"diagnostics": []},
        }),
        _ => random_json(rng, 3, uris),
    };
    if rng.below(8) == 0 {
        params = random_json(rng, 2, uris);
    }
    let mut message = json!({"jsonrpc": "2.0", "method": method, "params": params});
    // A request now and then, with ids the test client never uses for its own.
    if rng.below(3) == 0 {
        message["id"] = match rng.below(3) {
            0 => json!(format!("fuzz-{n}")),
            1 => json!(-(n as i64) - 1),
            // Anything but a whole number ≥ 0, which could be one of the client's own ids (its
            // request would then get this one's answer).
            _ => match random_json(rng, 1, uris) {
                Value::Number(id) if id.as_u64().is_some() => json!(-(n as i64) - 1),
                id => id,
            },
        };
    }
    message
}

/// The real server takes random messages (with real documents in play) and serves on: it
/// answers the editor between them, shuts down cleanly after them, and never panics.
#[tokio::test]
async fn the_server_survives_random_lsp_messages() {
    let client = TestClient::start_initialized(Options::default()).await;
    let mut uris = Vec::new();
    for name in ["a.rs", "b.txt", "c.md"] {
        uris.push(client.open(name, "rust", "fn main() {}\n// TODO x\n").await);
    }
    uris.push("file:///nowhere/x.rs".to_owned());
    uris.push("untitled:Untitled-1".to_owned());
    let seed = seed("lsp_messages");
    let mut rng = Rng::new(seed);
    let count = cases();
    for n in 0..count {
        let message = random_message(&mut rng, n, &uris);
        let body = serde_json::to_vec(&message).unwrap();
        let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        frame.extend_from_slice(&body);
        client.send_raw(&frame).await;
        if n % 100 == 99 {
            client.server_state().await;
        }
    }
    client.server_state().await;
    assert!(!client.stderr().contains("panicked"), "{}", client.stderr());
    assert!(client.shutdown().await.success(), "seed {seed}");
}

/// A terminal agent's WebSocket sent random frames (valid calls among them): the server answers
/// or closes that socket, and serves a new agent and the editor as before.
#[tokio::test]
async fn the_server_survives_random_mcp_frames() {
    let client = TestClient::start_initialized(Options::default()).await;
    let lock = client.lockfile().await;
    let seeds = corpus("mcp_frames");
    let seed = seed("mcp_frames");
    let mut rng = Rng::new(seed);
    let socket = websocket(lock.port, &lock.token()).await;
    let (mut sink, mut stream) = socket.split();
    // Whatever comes back is read, so the server is never held up by a full socket.
    let drained = tokio::spawn(async move { while stream.next().await.is_some() {} });
    for n in 0..seeds.len() + cases() {
        let frame = match seeds.get(n) {
            Some(seed) => seed.clone(),
            None => mutate(&mut rng, &seeds),
        };
        let message = match std::str::from_utf8(&frame) {
            Ok(text) if rng.below(8) != 0 => Message::Text(text.to_owned().into()),
            _ => Message::Binary(frame.into()),
        };
        if sink.send(message).await.is_err() {
            break; // the server closed this socket: allowed, for a broken one
        }
    }
    let _ = sink.close().await;
    drained.abort();
    let mcp = McpClient::connect(&lock, "after the fuzz").await;
    assert_eq!(
        mcp.json("getWorkspaceFolders", json!({})).await["success"],
        true
    );
    client.server_state().await;
    assert!(!client.stderr().contains("panicked"), "{}", client.stderr());
    assert!(client.shutdown().await.success(), "seed {seed}");
}
