//! A mock LLM HTTP server for running real agent CLIs offline: HTTP/1.1 on `127.0.0.1:0`, on
//! tokio alone. A [`Script`] decides each answer; every request is recorded (method, path, body)
//! for assertions, and requests the script does not know get a 404 and a line on stderr (except
//! `HEAD`, which gets an empty 200).
//!
//! Scripts included, one per wire format, each playing a [`ToolTurn`] ("call these tools one
//! after the other, each once the previous one's result is back, then answer with text") and
//! reading the tool results back out of a request ([`Script::tool_results`]: what the agent told
//! the model about its tool):
//! - [`Gemini`]: `POST /v1beta/models/<model>:streamGenerateContent?alt=sse` (Gemini CLI with
//!   `GOOGLE_GEMINI_BASE_URL`), plus `:generateContent` and `:countTokens`;
//! - [`Anthropic`]: `POST /v1/messages` (Claude Code, claude-agent-acp with `ANTHROPIC_BASE_URL`),
//!   plus `/v1/messages/count_tokens`;
//! - [`OpenAi`]: `POST /v1/chat/completions` (OpenAI-compatible providers, e.g. OpenCode);
//! - [`Responses`]: `POST /v1/responses` (the OpenAI Responses API, e.g. codex-acp), with
//!   function and free-form (`custom`) tool calls.
//!
//! [`LateScript`] is a script set once the test knows its paths (after the mock's URL went into
//! the agent's config).
//!
//! ```ignore
//! let mock = MockLlm::start(Gemini::write_file(&path, "hello\n")).await;
//! // run `gemini --acp -m gemini-2.5-flash` with GOOGLE_GEMINI_BASE_URL=mock.url() ...
//! assert!(mock.requests().iter().any(|r| r.path.contains(":streamGenerateContent")));
//! ```

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// One request as the mock received it.
#[derive(Debug, Clone)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// Path and query, as sent (`/v1beta/models/m:streamGenerateContent?alt=sse`).
    pub path: String,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The raw body (de-chunked).
    pub body: Vec<u8>,
}

impl Request {
    /// The body as JSON (`Null` if it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The path without the query string.
    pub fn path_only(&self) -> &str {
        self.path.split('?').next().unwrap_or_default()
    }

    /// A header's value (name case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// An answer: status, content type and body (SSE bodies are sent whole).
#[derive(Debug, Clone)]
pub struct Response {
    /// HTTP status code.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// `200` with a JSON body.
    pub fn json(value: &Value) -> Self {
        Self {
            status: 200,
            content_type: "application/json",
            body: value.to_string().into_bytes(),
        }
    }

    /// `200` with a `text/event-stream` body of `(event name, data)` pairs.
    pub fn sse<'a>(events: impl IntoIterator<Item = (Option<&'a str>, Value)>) -> Self {
        let mut body = String::new();
        for (event, data) in events {
            if let Some(event) = event {
                body.push_str(&format!("event: {event}\n"));
            }
            body.push_str(&format!("data: {data}\n\n"));
        }
        Self {
            status: 200,
            content_type: "text/event-stream",
            body: body.into_bytes(),
        }
    }

    /// An error status with a JSON body `{"error": {"code", "message"}}`.
    pub fn error(status: u16, message: &str) -> Self {
        Self {
            status,
            content_type: "application/json",
            body: json!({"error": {"code": status, "message": message}})
                .to_string()
                .into_bytes(),
        }
    }
}

/// Decides the answer to each request; `None` means "unknown": a 404, logged to stderr.
pub trait Script: Send + Sync + 'static {
    /// The answer to `request`.
    fn answer(&self, request: &Request) -> Option<Response>;

    /// The tool results the conversation in `request` carries, in order, as text (what the
    /// agent told the model about each tool call). None for scripts that do not know the wire.
    fn tool_results(&self, _request: &Request) -> Vec<String> {
        Vec::new()
    }
}

impl<F: Fn(&Request) -> Option<Response> + Send + Sync + 'static> Script for F {
    fn answer(&self, request: &Request) -> Option<Response> {
        self(request)
    }
}

/// A script set later: unknown (404) until [`LateScript::set`].
#[derive(Clone, Default)]
pub struct LateScript(Arc<Mutex<Option<Arc<dyn Script>>>>);

impl LateScript {
    /// From now on, `script` answers.
    pub fn set(&self, script: impl Script) {
        *self.0.lock().unwrap() = Some(Arc::new(script));
    }

    fn current(&self) -> Option<Arc<dyn Script>> {
        self.0.lock().unwrap().clone()
    }
}

impl Script for LateScript {
    fn answer(&self, request: &Request) -> Option<Response> {
        self.current()?.answer(request)
    }

    fn tool_results(&self, request: &Request) -> Vec<String> {
        self.current()
            .map(|s| s.tool_results(request))
            .unwrap_or_default()
    }
}

/// The running server. Stops when dropped.
pub struct MockLlm {
    addr: std::net::SocketAddr,
    requests: Arc<Mutex<Vec<Request>>>,
    script: Arc<dyn Script>,
    task: JoinHandle<()>,
}

impl MockLlm {
    /// Starts serving `script` on `127.0.0.1:0`.
    pub async fn start(script: impl Script) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind mock LLM");
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<dyn Script> = Arc::new(script);
        let recorded = Arc::clone(&requests);
        let serving = Arc::clone(&script);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let script = Arc::clone(&serving);
                let recorded = Arc::clone(&recorded);
                tokio::spawn(async move {
                    let _ = serve(stream, script, recorded).await;
                });
            }
        });
        Self {
            addr,
            requests,
            script,
            task,
        }
    }

    /// `http://127.0.0.1:<port>` (no trailing slash).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    /// Requests whose path contains `fragment`.
    pub fn requests_to(&self, fragment: &str) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(|r| r.path.contains(fragment))
            .collect()
    }

    /// Every tool result the agent sent the model, over all requests, each once, in the order
    /// they first appeared ([`Script::tool_results`]).
    pub fn tool_results(&self) -> Vec<String> {
        self.tool_results_of(self.requests())
    }

    /// The tool results of `requests` (some of this mock's), each once, in the order they
    /// first appeared.
    pub fn tool_results_of(&self, requests: Vec<Request>) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for request in requests {
            for result in self.script.tool_results(&request) {
                if !out.contains(&result) {
                    out.push(result);
                }
            }
        }
        out
    }

    /// One line per request (`METHOD path  body-prefix`), for failure messages.
    pub fn summary(&self) -> String {
        self.requests()
            .iter()
            .map(|r| {
                let body = String::from_utf8_lossy(&r.body);
                let cut: String = body.chars().take(200).collect();
                format!("{} {}  {}\n", r.method, r.path, cut)
            })
            .collect()
    }
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves one connection (keep-alive: several requests in a row).
async fn serve(
    stream: TcpStream,
    script: Arc<dyn Script>,
    recorded: Arc<Mutex<Vec<Request>>>,
) -> std::io::Result<()> {
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::new(reader);
    loop {
        let Some(request) = read_request(&mut reader).await? else {
            return Ok(());
        };
        recorded.lock().unwrap().push(request.clone());
        let scripted = script.answer(&request);
        // Connectivity probes (claude-agent-acp sends `HEAD /` first): 200, no body.
        let scripted = scripted.or_else(|| {
            (request.method == "HEAD").then(|| Response {
                status: 200,
                content_type: "text/plain",
                body: Vec::new(),
            })
        });
        let response = scripted.unwrap_or_else(|| {
            eprintln!(
                "mock LLM: no script for {} {} {}",
                request.method,
                request.path,
                String::from_utf8_lossy(&request.body)
                    .chars()
                    .take(300)
                    .collect::<String>()
            );
            Response::error(404, "not scripted")
        });
        let head = format!(
            "HTTP/1.1 {} {}\r\ncontent-type: {}\r\ncontent-length: {}\r\ncache-control: no-cache\r\nconnection: keep-alive\r\n\r\n",
            response.status,
            reason(response.status),
            response.content_type,
            response.body.len()
        );
        writer.write_all(head.as_bytes()).await?;
        writer.write_all(&response.body).await?;
        writer.flush().await?;
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        _ => "Status",
    }
}

/// Reads one request; `None` at a clean end of the connection.
async fn read_request<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
) -> std::io::Result<Option<Request>> {
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).await? == 0 {
            return Ok(None);
        }
        if !line.trim().is_empty() {
            break;
        }
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).await? == 0 {
            return Ok(None);
        }
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        if let Some((name, value)) = trimmed.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if header("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked")) {
        loop {
            line.clear();
            reader.read_line(&mut line).await?;
            let size_hex = line.trim().split(';').next().unwrap_or("0");
            let size = usize::from_str_radix(size_hex, 16).unwrap_or(0);
            if size == 0 {
                // Trailers, then the empty line.
                loop {
                    line.clear();
                    if reader.read_line(&mut line).await? == 0 || line.trim().is_empty() {
                        break;
                    }
                }
                break;
            }
            let start = body.len();
            body.resize(start + size, 0);
            reader.read_exact(&mut body[start..]).await?;
            line.clear();
            reader.read_line(&mut line).await?; // CRLF after the chunk
        }
    } else if let Some(length) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body.resize(length, 0);
        reader.read_exact(&mut body).await?;
    }
    Ok(Some(Request {
        method,
        path,
        headers,
        body,
    }))
}

/// What a tool call carries: JSON arguments (function tools), or free text (the Responses API's
/// `custom` tools, such as a patch tool with its own grammar).
#[derive(Debug, Clone)]
pub enum ToolInput {
    /// Function-call arguments.
    Json(Value),
    /// A custom tool's free-form input.
    Freeform(String),
}

impl ToolInput {
    /// The input as the wire carries it: JSON arguments as a JSON string, free text as is.
    fn as_text(&self) -> String {
        match self {
            Self::Json(args) => args.to_string(),
            Self::Freeform(text) => text.clone(),
        }
    }

    /// The arguments as a JSON value (free text becomes a JSON string).
    fn as_json(&self) -> Value {
        match self {
            Self::Json(args) => args.clone(),
            Self::Freeform(text) => json!(text),
        }
    }
}

/// One tool call the scripted model makes.
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// Tool name as the agent declares it (`write_file`, `Write`, ...); `*name` stands for the
    /// offered tool whose name ends with `name` (an MCP server's tool, which each agent names
    /// its own way: `mcp__agentls__getDiagnostics`, `agentls_getDiagnostics`, …), one naming
    /// `agentls` first.
    pub tool: String,
    /// What the call carries.
    pub input: ToolInput,
}

/// What the scripted model does in a turn: its tool calls one after the other (the next one once
/// the request carries as many tool results as calls made so far), then `text`.
#[derive(Debug, Clone)]
pub struct ToolTurn {
    /// The calls, in order.
    pub calls: Vec<ToolCall>,
    /// The final answer.
    pub text: String,
}

impl ToolTurn {
    /// A turn calling `tool` with `args`, then answering `text`.
    pub fn new(tool: &str, args: Value, text: &str) -> Self {
        Self::say(text).then(tool, args)
    }

    /// A turn that only answers `text`.
    pub fn say(text: &str) -> Self {
        Self {
            calls: Vec::new(),
            text: text.to_owned(),
        }
    }

    /// Adds a call of `tool` with JSON `args` after the others.
    pub fn then(self, tool: &str, args: Value) -> Self {
        self.then_call(tool, ToolInput::Json(args))
    }

    /// Adds a call of the custom tool `tool` with free-form `input` after the others.
    pub fn then_freeform(self, tool: &str, input: &str) -> Self {
        self.then_call(tool, ToolInput::Freeform(input.to_owned()))
    }

    fn then_call(mut self, tool: &str, input: ToolInput) -> Self {
        self.calls.push(ToolCall {
            tool: tool.to_owned(),
            input,
        });
        self
    }

    /// The call to make in a request whose conversation holds `results` tool results, if the
    /// request offers that tool (`offered`: the names of the tools it offers), named as
    /// offered; `None`: answer with text (the calls are done, or it is a side call such as a
    /// title, which offers no tools).
    fn next_call<'a>(
        &self,
        results: usize,
        offered: impl Iterator<Item = &'a str>,
    ) -> Option<(usize, ToolCall)> {
        let call = self.calls.get(results)?;
        let offered: Vec<&str> = offered.collect();
        let name = match call.tool.strip_prefix('*') {
            None => offered
                .contains(&call.tool.as_str())
                .then(|| call.tool.clone())?,
            Some(suffix) => {
                let mut matching: Vec<&str> = offered
                    .into_iter()
                    .filter(|name| name.ends_with(suffix))
                    .collect();
                matching.sort_by_key(|name| !name.contains("agentls"));
                matching.first()?.to_string()
            }
        };
        let mut call = call.clone();
        call.tool = name;
        Some((results + 1, call))
    }
}

/// The text of a tool result's content: a string, or the text of its blocks (`{type: "text",
/// text}`, joined), or else the JSON.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match b["text"].as_str() {
                Some(text) => text.to_owned(),
                None => content_text(b),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

const USAGE_IN: u64 = 100;
const USAGE_OUT: u64 = 10;

/// Gemini API (`generativelanguage` v1beta) script, for Gemini CLI.
#[derive(Debug, Clone)]
pub struct Gemini {
    /// The turn.
    pub turn: ToolTurn,
    /// A thought streamed before the tool call (`agent_thought_chunk` in ACP).
    pub thought: Option<String>,
}

impl Gemini {
    /// A script playing `turn`.
    pub fn new(turn: ToolTurn) -> Self {
        Self {
            turn,
            thought: None,
        }
    }

    /// Gemini CLI's file write: `write_file {file_path, content}`.
    pub fn write_file(path: &Path, content: &str) -> Self {
        Self::new(ToolTurn::new(
            "write_file",
            json!({"file_path": path, "content": content}),
            "Done: I wrote the file.",
        ))
    }

    /// Also streams `thought` (a `thought: true` part) before the tool call.
    pub fn with_thought(mut self, thought: &str) -> Self {
        self.thought = Some(thought.to_owned());
        self
    }

    /// The `functionResponse` parts of a request's contents, in order.
    fn function_responses(body: &Value) -> Vec<&Value> {
        body["contents"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["parts"].as_array())
            .flatten()
            .filter_map(|p| p.get("functionResponse"))
            .collect()
    }

    /// One response chunk; the last one of a response carries `finishReason` and usage.
    fn candidate(parts: Value, model: &str, last: bool) -> Value {
        let mut chunk = json!({
            "candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
            "modelVersion": model
        });
        if last {
            chunk["candidates"][0]["finishReason"] = json!("STOP");
            chunk["usageMetadata"] = json!({
                "promptTokenCount": USAGE_IN,
                "candidatesTokenCount": USAGE_OUT,
                "totalTokenCount": USAGE_IN + USAGE_OUT
            });
        }
        chunk
    }

    /// The streamed chunks' parts: an optional thought, then the tool call or the text (one
    /// chunk per word, so clients see a real stream).
    fn stream_parts(&self, body: &Value) -> Vec<Value> {
        let parts = self.parts(body);
        let mut out = Vec::new();
        let calls_tool = parts[0].get("functionCall").is_some();
        if let (Some(thought), true) = (&self.thought, calls_tool) {
            out.push(json!([{"text": thought, "thought": true}]));
        }
        match parts[0]["text"].as_str() {
            Some(text) if text == self.turn.text => {
                out.extend(words(text).into_iter().map(|w| json!([{"text": w}])))
            }
            _ => out.push(parts),
        }
        out
    }

    /// The model's parts for this request: the next tool call while there is one and the
    /// request offers it, then text.
    fn parts(&self, body: &Value) -> Value {
        let offered = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["functionDeclarations"].as_array())
            .flatten()
            .filter_map(|f| f["name"].as_str());
        let results = Self::function_responses(body).len();
        if let Some((_, call)) = self.turn.next_call(results, offered) {
            json!([{"functionCall": {"name": call.tool, "args": call.input.as_json()}}])
        } else if body["generationConfig"]["responseMimeType"] == "application/json" {
            // Structured side calls (e.g. "who speaks next"): a minimal valid object.
            json!([{"text": side_call_json(body)}])
        } else {
            json!([{"text": self.turn.text}])
        }
    }
}

/// `text` cut after each space (at least one piece), for streaming it chunk by chunk.
fn words(text: &str) -> Vec<&str> {
    let mut out: Vec<&str> = text.split_inclusive(' ').collect();
    if out.is_empty() {
        out.push("");
    }
    out
}

/// Structured side calls made with a `responseJsonSchema`/`responseSchema`: the JSON that ends
/// the loop fastest (the user speaks next, nothing is wrong).
fn side_call_json(body: &Value) -> String {
    let config = &body["generationConfig"];
    let schema = config
        .get("responseJsonSchema")
        .or_else(|| config.get("responseSchema"))
        .cloned()
        .unwrap_or(Value::Null);
    let mut out = serde_json::Map::new();
    if let Some(props) = schema["properties"].as_object() {
        for (name, prop) in props {
            let kind = prop["type"]
                .as_str()
                .unwrap_or("string")
                .to_ascii_lowercase();
            let value = match (name.as_str(), kind.as_str()) {
                ("next_speaker", _) => json!("user"),
                (_, "boolean") => json!(false),
                (_, "number") | (_, "integer") => json!(0),
                (_, "array") => json!([]),
                (_, "object") => json!({}),
                _ => match prop["enum"].as_array().and_then(|e| e.first()) {
                    Some(first) => first.clone(),
                    None => json!("ok"),
                },
            };
            out.insert(name.clone(), value);
        }
    }
    Value::Object(out).to_string()
}

impl Script for Gemini {
    fn answer(&self, request: &Request) -> Option<Response> {
        let path = request.path_only();
        let (_, action) = path.rsplit_once(':')?;
        let model = path
            .rsplit_once("/models/")
            .map(|(_, m)| m.split(':').next().unwrap_or_default())
            .unwrap_or_default();
        let body = request.json();
        match action {
            "streamGenerateContent" => {
                let parts = self.stream_parts(&body);
                let n = parts.len();
                Some(Response::sse(
                    parts
                        .into_iter()
                        .enumerate()
                        .map(|(i, p)| (None, Self::candidate(p, model, i + 1 == n))),
                ))
            }
            "generateContent" => Some(Response::json(&Self::candidate(
                self.parts(&body),
                model,
                true,
            ))),
            "countTokens" => Some(Response::json(&json!({"totalTokens": USAGE_IN}))),
            "embedContent" => Some(Response::json(&json!({"embedding": {"values": [0.0]}}))),
            _ => None,
        }
    }

    /// Each `functionResponse.response`: its `output` or `error` text, else its JSON.
    fn tool_results(&self, request: &Request) -> Vec<String> {
        let body = request.json();
        Self::function_responses(&body)
            .into_iter()
            .map(|r| {
                let response = &r["response"];
                match (response["output"].as_str(), response["error"].as_str()) {
                    (Some(text), _) | (None, Some(text)) => text.to_owned(),
                    _ => response.to_string(),
                }
            })
            .collect()
    }
}

/// Anthropic Messages API script, for Claude Code and claude-agent-acp (tool `Write`).
#[derive(Debug, Clone)]
pub struct Anthropic(pub ToolTurn);

impl Anthropic {
    /// Claude Code's file write: `Write {file_path, content}`.
    pub fn write_file(path: &Path, content: &str) -> Self {
        Self(ToolTurn::new(
            "Write",
            json!({"file_path": path, "content": content}),
            "Done: I wrote the file.",
        ))
    }

    /// The `tool_result` blocks of a request's messages, in order.
    fn result_blocks(body: &Value) -> Vec<&Value> {
        body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|b| b["type"] == "tool_result")
            .collect()
    }

    /// The next tool call while there is one and the request offers it (titles, summaries and
    /// other side calls offer none and get text), with its number.
    fn call(&self, body: &Value) -> Option<(usize, ToolCall)> {
        let offered = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str());
        self.0.next_call(Self::result_blocks(body).len(), offered)
    }
}

impl Script for Anthropic {
    fn answer(&self, request: &Request) -> Option<Response> {
        match request.path_only() {
            "/v1/messages/count_tokens" => {
                return Some(Response::json(&json!({"input_tokens": USAGE_IN})));
            }
            "/v1/messages" => {}
            _ => return None,
        }
        let body = request.json();
        let model = body["model"].as_str().unwrap_or("claude").to_owned();
        let id = format!(
            "msg_mock_{}",
            body["messages"].as_array().map_or(0, Vec::len)
        );
        let call = self.call(&body);
        let block = match &call {
            Some((n, call)) => json!({"type": "tool_use", "id": format!("toolu_mock_{n}"),
                                      "name": call.tool, "input": call.input.as_json()}),
            None => json!({"type": "text", "text": self.0.text}),
        };
        let stop_reason = if call.is_some() {
            "tool_use"
        } else {
            "end_turn"
        };
        let usage = json!({"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT});
        if body["stream"] != true {
            return Some(Response::json(&json!({
                "id": id, "type": "message", "role": "assistant", "model": model,
                "content": [block], "stop_reason": stop_reason, "stop_sequence": null,
                "usage": usage
            })));
        }
        let (start_block, delta) = match &call {
            Some((_, call)) => {
                let mut start = block.clone();
                start["input"] = json!({});
                let partial = call.input.as_json().to_string();
                (
                    start,
                    json!({"type": "input_json_delta", "partial_json": partial}),
                )
            }
            None => (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": self.0.text}),
            ),
        };
        Some(Response::sse([
            (
                Some("message_start"),
                json!({"type": "message_start", "message": {
                    "id": id, "type": "message", "role": "assistant", "model": model,
                    "content": [], "stop_reason": null, "stop_sequence": null,
                    "usage": {"input_tokens": USAGE_IN, "output_tokens": 1}
                }}),
            ),
            (
                Some("content_block_start"),
                json!({"type": "content_block_start", "index": 0, "content_block": start_block}),
            ),
            (
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": 0, "delta": delta}),
            ),
            (
                Some("content_block_stop"),
                json!({"type": "content_block_stop", "index": 0}),
            ),
            (
                Some("message_delta"),
                json!({"type": "message_delta",
                       "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                       "usage": {"output_tokens": USAGE_OUT}}),
            ),
            (Some("message_stop"), json!({"type": "message_stop"})),
        ]))
    }

    /// Each `tool_result`'s text, prefixed `error: ` when it is marked `is_error`.
    fn tool_results(&self, request: &Request) -> Vec<String> {
        let body = request.json();
        Self::result_blocks(&body)
            .into_iter()
            .map(|b| {
                let text = content_text(&b["content"]);
                if b["is_error"] == true {
                    format!("error: {text}")
                } else {
                    text
                }
            })
            .collect()
    }
}

/// OpenAI-compatible Chat Completions script (`/v1/chat/completions`, with or without `/v1`),
/// for OpenCode, Qwen Code, fast-agent, Mistral Vibe, kimi-cli.
#[derive(Debug, Clone)]
pub struct OpenAi(pub ToolTurn);

impl OpenAi {
    /// The `role: "tool"` messages of a request, in order.
    fn tool_messages(body: &Value) -> Vec<&Value> {
        body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["role"] == "tool")
            .collect()
    }

    /// The next tool call while there is one and the request offers it, with its number.
    fn call(&self, body: &Value) -> Option<(usize, ToolCall)> {
        let offered = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["function"]["name"].as_str());
        self.0.next_call(Self::tool_messages(body).len(), offered)
    }
}

impl Script for OpenAi {
    fn answer(&self, request: &Request) -> Option<Response> {
        if !request.path_only().ends_with("/chat/completions") {
            return None;
        }
        let body = request.json();
        let model = body["model"].as_str().unwrap_or("mock").to_owned();
        let call = self.call(&body);
        let usage = json!({"prompt_tokens": USAGE_IN, "completion_tokens": USAGE_OUT,
                           "total_tokens": USAGE_IN + USAGE_OUT});
        let finish = if call.is_some() { "tool_calls" } else { "stop" };
        let wire_call = call.map(|(n, call)| {
            json!({"index": 0, "id": format!("call_mock_{n}"), "type": "function",
                   "function": {"name": call.tool, "arguments": call.input.as_text()}})
        });
        if body["stream"] != true {
            let message = match &wire_call {
                Some(call) => json!({"role": "assistant", "content": null, "tool_calls": [call]}),
                None => json!({"role": "assistant", "content": self.0.text}),
            };
            return Some(Response::json(&json!({
                "id": "chatcmpl-mock", "object": "chat.completion", "created": 0, "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage
            })));
        }
        let chunk = |delta: Value, finish: Value| {
            json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0,
                   "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        };
        let mut events = vec![(
            None,
            chunk(json!({"role": "assistant", "content": ""}), Value::Null),
        )];
        match wire_call {
            Some(call) => {
                let arguments = call["function"]["arguments"].clone();
                let mut head = call;
                head["function"]["arguments"] = json!("");
                events.push((None, chunk(json!({"tool_calls": [head]}), Value::Null)));
                events.push((
                    None,
                    chunk(
                        json!({"tool_calls": [{"index": 0, "function": {"arguments": arguments}}]}),
                        Value::Null,
                    ),
                ));
            }
            None => events.push((None, chunk(json!({"content": self.0.text}), Value::Null))),
        }
        let mut last = chunk(json!({}), json!(finish));
        last["usage"] = usage;
        events.push((None, last));
        let mut response = Response::sse(events);
        response.body.extend_from_slice(b"data: [DONE]\n\n");
        Some(response)
    }

    /// Each `role: "tool"` message's text.
    fn tool_results(&self, request: &Request) -> Vec<String> {
        let body = request.json();
        Self::tool_messages(&body)
            .into_iter()
            .map(|m| content_text(&m["content"]))
            .collect()
    }
}

/// OpenAI Responses API script (`/v1/responses`, SSE), for codex-acp: function tools get
/// `function_call` items, free-form (`custom`) tools `custom_tool_call` items.
#[derive(Debug, Clone)]
pub struct Responses(pub ToolTurn);

impl Responses {
    /// The tool outputs among a request's input items, in order.
    fn outputs(body: &Value) -> Vec<&Value> {
        body["input"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|item| {
                item["type"]
                    .as_str()
                    .is_some_and(|t| t.ends_with("call_output"))
            })
            .collect()
    }

    /// The next tool call while there is one and the request offers it, with its number. A
    /// tool of a namespace (how codex offers an MCP server's tools) is offered as
    /// `<namespace>.<name>`.
    fn call(&self, body: &Value) -> Option<(usize, ToolCall)> {
        let tools = body["tools"].as_array().into_iter().flatten();
        let offered: Vec<String> = tools
            .flat_map(|t| match (t["type"].as_str(), t["tools"].as_array()) {
                (Some("namespace"), Some(inner)) => inner
                    .iter()
                    .filter_map(|i| i["name"].as_str())
                    .map(|i| format!("{}.{i}", t["name"].as_str().unwrap_or_default()))
                    .collect::<Vec<_>>(),
                _ => t["name"].as_str().map(str::to_owned).into_iter().collect(),
            })
            .collect();
        let offered = offered.iter().map(String::as_str);
        self.0.next_call(Self::outputs(body).len(), offered)
    }

    /// The output item: the tool call, or the final message.
    fn item(&self, call: Option<&(usize, ToolCall)>) -> Value {
        match call {
            Some((n, call)) => match &call.input {
                ToolInput::Json(args) => {
                    let mut item = json!({
                        "type": "function_call", "id": format!("fc_mock_{n}"),
                        "status": "completed", "call_id": format!("call_mock_{n}"),
                        "name": call.tool, "arguments": args.to_string()
                    });
                    if let Some((namespace, name)) = call.tool.split_once('.') {
                        item["namespace"] = json!(namespace);
                        item["name"] = json!(name);
                    }
                    item
                }
                ToolInput::Freeform(input) => json!({
                    "type": "custom_tool_call", "id": format!("ctc_mock_{n}"),
                    "status": "completed", "call_id": format!("call_mock_{n}"),
                    "name": call.tool, "input": input
                }),
            },
            None => json!({
                "type": "message", "id": "msg_mock", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": self.0.text, "annotations": []}]
            }),
        }
    }
}

impl Script for Responses {
    fn answer(&self, request: &Request) -> Option<Response> {
        if !request.path_only().ends_with("/responses") {
            return None;
        }
        let body = request.json();
        let model = body["model"].as_str().unwrap_or("mock").to_owned();
        let call = self.call(&body);
        let item = self.item(call.as_ref());
        let usage = json!({
            "input_tokens": USAGE_IN, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": USAGE_OUT, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": USAGE_IN + USAGE_OUT
        });
        let response = json!({"id": "resp_mock", "object": "response", "created_at": 0,
                              "status": "in_progress", "model": model, "output": []});
        let mut done = response.clone();
        done["status"] = json!("completed");
        done["output"] = json!([item]);
        done["usage"] = usage;
        if body["stream"] != true {
            return Some(Response::json(&done));
        }
        let mut events = vec![
            json!({"type": "response.created", "response": response}),
            json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
        ];
        if call.is_none() {
            events.push(
                json!({"type": "response.output_text.delta", "item_id": "msg_mock",
                               "output_index": 0, "content_index": 0, "delta": self.0.text}),
            );
        }
        events.push(json!({"type": "response.output_item.done", "output_index": 0, "item": item}));
        events.push(json!({"type": "response.completed", "response": done}));
        let named: Vec<(String, Value)> = events
            .into_iter()
            .enumerate()
            .map(|(i, mut event)| {
                event["sequence_number"] = json!(i);
                (event["type"].as_str().unwrap().to_owned(), event)
            })
            .collect();
        Some(Response::sse(
            named
                .iter()
                .map(|(name, event)| (Some(name.as_str()), event.clone())),
        ))
    }

    /// Each tool output's text.
    fn tool_results(&self, request: &Request) -> Vec<String> {
        let body = request.json();
        Self::outputs(&body)
            .into_iter()
            .map(|item| content_text(&item["output"]))
            .collect()
    }
}
