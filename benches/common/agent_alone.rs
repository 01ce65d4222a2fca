//! The floor every stream through agentls is measured against: the built-in demo agent alone,
//! its stdout parsed line by line as a client would, with no agentls in between.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Runs `agentls demo-agent` alone for one turn of `prompt`, its stdout parsed line by line and
/// copied to `out` (all but the prompt's response); returns the time from the prompt to its
/// response, the lines it wrote, and the session id.
pub fn run(prompt: &str, out: &mut impl Write) -> (Duration, usize, String) {
    let cwd = tempfile::tempdir().unwrap();
    let mut agent = Command::new(crate::support::agentls_binary())
        .arg("demo-agent")
        .current_dir(cwd.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("agentls demo-agent");
    let mut stdin = agent.stdin.take().unwrap();
    let mut stdout = BufReader::new(agent.stdout.take().unwrap());
    let mut sink = std::io::sink();
    let init = json!({"protocolVersion": 1, "clientCapabilities": {}});
    send(&mut stdin, 1, "initialize", init);
    until_response(&mut stdout, 1, &mut sink);
    let new = json!({"cwd": cwd.path(), "mcpServers": []});
    send(&mut stdin, 2, "session/new", new);
    let (session, _) = until_response(&mut stdout, 2, &mut sink);
    let session = session["result"]["sessionId"].clone();
    let started = Instant::now();
    let prompt = json!({"sessionId": session, "prompt": [{"type": "text", "text": prompt}]});
    send(&mut stdin, 3, "session/prompt", prompt);
    let (response, lines) = until_response(&mut stdout, 3, out);
    let elapsed = started.elapsed();
    assert_eq!(response["result"]["stopReason"], "end_turn");
    drop(stdin);
    agent.wait().unwrap();
    (elapsed, lines, session.as_str().unwrap().to_owned())
}

/// Writes one JSON-RPC request line.
fn send(stdin: &mut impl Write, id: u64, method: &str, params: Value) {
    let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    writeln!(stdin, "{line}").unwrap();
    stdin.flush().unwrap();
}

/// Reads (and parses) lines up to the response to `id`, copying the others to `copy`; returns
/// the response and how many lines were read.
fn until_response(stdout: &mut impl BufRead, id: u64, copy: &mut impl Write) -> (Value, usize) {
    let mut lines = 0;
    let mut line = String::new();
    loop {
        line.clear();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "demo agent quit");
        let message: Value = serde_json::from_str(&line).unwrap();
        lines += 1;
        if message["id"] == id && message.get("method").is_none() {
            return (message, lines);
        }
        copy.write_all(line.as_bytes()).unwrap();
    }
}
