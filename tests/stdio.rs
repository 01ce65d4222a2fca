//! The server's stdin and stdout as editors give them: a pair of pipes (Helix, Emacs), a pair
//! of sockets (Neovim and VS Code start servers through libuv, which makes socket pairs), and
//! plain files (the fallback for anything else). On each, thousands of requests written before
//! any answer is read are all answered, in order, though the server's writes fill the channel
//! and must wait for the reader; on pipes and sockets `shutdown` and `exit` then end it cleanly.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Requests written before the first answer is read: about 600 KB of answers, several times
/// what a pipe or a socket holds.
const PIPELINED: u64 = 5_000;
/// The longest any step may take.
const LIMIT: Duration = Duration::from_secs(60);

fn frame(message: &Value) -> Vec<u8> {
    let body = message.to_string();
    format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

fn initialize() -> Vec<u8> {
    frame(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"processId": null, "rootUri": null, "capabilities": {},
                   "clientInfo": {"name": "stdio-test"}}}))
}

/// `initialized`, then [`PIPELINED`] requests of a method the server does not have.
fn pipelined() -> Vec<u8> {
    let mut bytes = frame(&json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
    for id in 1..=PIPELINED {
        bytes.extend(frame(
            &json!({"jsonrpc": "2.0", "id": id, "method": "stdio/unknown", "params": {}}),
        ));
    }
    bytes
}

/// The server, with its own home and state folders, on `stdin` / `stdout`.
fn server(stdin: Stdio, stdout: Stdio, home: &std::path::Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_agentls"))
        .current_dir(home)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_STATE_HOME", home.join("state"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_RUNTIME_DIR", home.join("run"))
        .env("TMPDIR", home)
        .stdin(stdin)
        .stdout(stdout)
        .stderr(Stdio::null())
        .spawn()
        .expect("start agentls")
}

/// The messages in `output`, read until the answer to request `until` (or its end).
fn replies(output: &mut impl BufRead, until: u64) -> Vec<Value> {
    let mut messages = Vec::new();
    let started = Instant::now();
    while started.elapsed() < LIMIT {
        let mut length = None;
        loop {
            let mut line = String::new();
            if output.read_line(&mut line).expect("read a header") == 0 {
                return messages;
            }
            if line == "\r\n" {
                break;
            }
            if let Some(n) = line.strip_prefix("Content-Length: ") {
                length = Some(n.trim().parse::<usize>().unwrap());
            }
        }
        let mut body = vec![0; length.expect("a Content-Length")];
        output.read_exact(&mut body).expect("read a body");
        let message: Value = serde_json::from_slice(&body).unwrap();
        let done = message["id"] == until;
        messages.push(message);
        if done {
            return messages;
        }
    }
    panic!("no answer to {until} within {LIMIT:?}");
}

/// The answers to `initialize` and the pipelined requests: each once, in order, the unknown
/// method refused.
fn assert_answered(messages: &[Value]) {
    let answers: Vec<&Value> = messages
        .iter()
        .filter(|m| m.get("method").is_none())
        .collect();
    let ids: Vec<u64> = answers.iter().map(|m| m["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, (0..=PIPELINED).collect::<Vec<_>>(), "the answers' ids");
    assert!(
        answers[0]["result"]["capabilities"].is_object(),
        "{}",
        answers[0]
    );
    for answer in &answers[1..] {
        assert_eq!(answer["error"]["code"], -32601, "{answer}");
    }
}

/// Waits for the server to end; whether it ended with success.
fn ended(mut child: Child) -> bool {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.success();
        }
        assert!(started.elapsed() < LIMIT, "still running");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A client's whole exchange over `input` / `output`: `initialize` and its answer; then the
/// pipelined requests, written from another thread while their answers are read here (the
/// answers fill the channel back before the requests are all written); then `shutdown` and
/// `exit`, after which the server ends cleanly.
fn exchange(child: Child, mut input: impl Write + Send + 'static, output: impl Read) {
    let mut output = BufReader::new(output);
    input.write_all(&initialize()).unwrap();
    let mut messages = replies(&mut output, 0);
    let writer = std::thread::spawn(move || {
        input.write_all(&pipelined()).expect("write the requests");
        input
    });
    messages.extend(replies(&mut output, PIPELINED));
    assert_answered(&messages);
    let mut input = writer.join().expect("the writer");
    let shutdown = PIPELINED + 1;
    input
        .write_all(&frame(
            &json!({"jsonrpc": "2.0", "id": shutdown, "method": "shutdown"}),
        ))
        .unwrap();
    let answer = replies(&mut output, shutdown).pop().unwrap();
    assert!(answer["error"].is_null(), "{answer}");
    input
        .write_all(&frame(&json!({"jsonrpc": "2.0", "method": "exit"})))
        .unwrap();
    assert!(ended(child), "not a clean exit");
}

#[test]
fn on_pipes() {
    let home = tempfile::tempdir().unwrap();
    let mut child = server(Stdio::piped(), Stdio::piped(), home.path());
    let (input, output) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
    exchange(child, input, output);
}

#[test]
fn on_sockets() {
    let home = tempfile::tempdir().unwrap();
    let (input, server_input) = UnixStream::pair().unwrap();
    let (output, server_output) = UnixStream::pair().unwrap();
    let child = server(
        Stdio::from(std::os::fd::OwnedFd::from(server_input)),
        Stdio::from(std::os::fd::OwnedFd::from(server_output)),
        home.path(),
    );
    output.set_read_timeout(Some(LIMIT)).unwrap();
    exchange(child, input, output);
}

/// Files cannot wait for answers: all the requests are there at once, and the input ends
/// after them (so the server ends too, not cleanly: there was no `exit`).
#[test]
fn on_files() {
    let home = tempfile::tempdir().unwrap();
    let (input, output) = (home.path().join("in"), home.path().join("out"));
    let mut requests = initialize();
    requests.extend(pipelined());
    std::fs::write(&input, requests).unwrap();
    let child = server(
        Stdio::from(std::fs::File::open(&input).unwrap()),
        Stdio::from(std::fs::File::create(&output).unwrap()),
        home.path(),
    );
    ended(child);
    let mut written = BufReader::new(std::fs::File::open(&output).unwrap());
    assert_answered(&replies(&mut written, PIPELINED));
}
