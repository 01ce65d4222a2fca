//! A mock LLM HTTP server for running real agent CLIs offline: HTTP/1.1 on `127.0.0.1:0`, on
//! tokio alone. A [`Script`] decides each answer; every request is recorded (method, path, body)
//! for assertions, and requests the script does not know get a 404 and a line on stderr (except
//! `HEAD`, which gets an empty 200).
//!
//! Scripts included, each "call one tool, then answer with text once the tool result is back":
//! - [`Gemini`]: `POST /v1beta/models/<model>:streamGenerateContent?alt=sse` (Gemini CLI with
//!   `GOOGLE_GEMINI_BASE_URL`), plus `:generateContent` and `:countTokens`;
//! - [`Anthropic`]: `POST /v1/messages` (Claude Code, claude-agent-acp with `ANTHROPIC_BASE_URL`),
//!   plus `/v1/messages/count_tokens`;
//! - [`OpenAi`]: `POST /v1/chat/completions` (OpenAI-compatible providers, e.g. OpenCode).
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
}

impl<F: Fn(&Request) -> Option<Response> + Send + Sync + 'static> Script for F {
    fn answer(&self, request: &Request) -> Option<Response> {
        self(request)
    }
}

/// The running server. Stops when dropped.
pub struct MockLlm {
    addr: std::net::SocketAddr,
    requests: Arc<Mutex<Vec<Request>>>,
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
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let script = Arc::clone(&script);
                let recorded = Arc::clone(&recorded);
                tokio::spawn(async move {
                    let _ = serve(stream, script, recorded).await;
                });
            }
        });
        Self {
            addr,
            requests,
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

/// What the scripted model does in a turn: call `tool` with `args`, then (once the request
/// carries the tool's result) answer `text`.
#[derive(Debug, Clone)]
pub struct ToolTurn {
    /// Tool name as the agent declares it (`write_file`, `Write`, ...).
    pub tool: String,
    /// Tool arguments.
    pub args: Value,
    /// The final answer.
    pub text: String,
}

impl ToolTurn {
    /// A turn calling `tool` with `args`, then answering `text`.
    pub fn new(tool: &str, args: Value, text: &str) -> Self {
        Self {
            tool: tool.to_owned(),
            args,
            text: text.to_owned(),
        }
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

    /// The model's parts for this request: the tool call unless the last content carries a
    /// `functionResponse` or the request offers no such tool (a side call), then text.
    fn parts(&self, body: &Value) -> Value {
        let last_is_result = body["contents"]
            .as_array()
            .and_then(|c| c.last())
            .and_then(|c| c["parts"].as_array())
            .is_some_and(|parts| parts.iter().any(|p| p.get("functionResponse").is_some()));
        let offers_tool = body["tools"].as_array().is_some_and(|tools| {
            tools.iter().any(|t| {
                t["functionDeclarations"]
                    .as_array()
                    .is_some_and(|d| d.iter().any(|f| f["name"] == self.turn.tool.as_str()))
            })
        });
        if offers_tool && !last_is_result {
            json!([{"functionCall": {"name": self.turn.tool, "args": self.turn.args}}])
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

    /// The tool call unless the last message carries a `tool_result` or the request offers no
    /// such tool (titles, summaries and other side calls get text).
    fn calls_tool(&self, body: &Value) -> bool {
        let offers_tool = body["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == self.0.tool.as_str()));
        let last_is_result = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_array())
            .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"));
        offers_tool && !last_is_result
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
        let tool = self.calls_tool(&body);
        let block = if tool {
            json!({"type": "tool_use", "id": "toolu_mock_1", "name": self.0.tool, "input": self.0.args})
        } else {
            json!({"type": "text", "text": self.0.text})
        };
        let stop_reason = if tool { "tool_use" } else { "end_turn" };
        let usage = json!({"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT});
        if body["stream"] != true {
            return Some(Response::json(&json!({
                "id": id, "type": "message", "role": "assistant", "model": model,
                "content": [block], "stop_reason": stop_reason, "stop_sequence": null,
                "usage": usage
            })));
        }
        let (start_block, delta) = if tool {
            (
                json!({"type": "tool_use", "id": "toolu_mock_1", "name": self.0.tool, "input": {}}),
                json!({"type": "input_json_delta", "partial_json": self.0.args.to_string()}),
            )
        } else {
            (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": self.0.text}),
            )
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
}

/// OpenAI-compatible Chat Completions script (`/v1/chat/completions`, with or without `/v1`).
#[derive(Debug, Clone)]
pub struct OpenAi(pub ToolTurn);

impl OpenAi {
    fn calls_tool(&self, body: &Value) -> bool {
        let offers_tool = body["tools"].as_array().is_some_and(|t| {
            t.iter()
                .any(|t| t["function"]["name"] == self.0.tool.as_str())
        });
        let last_is_result = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .is_some_and(|m| m["role"] == "tool");
        offers_tool && !last_is_result
    }
}

impl Script for OpenAi {
    fn answer(&self, request: &Request) -> Option<Response> {
        if !request.path_only().ends_with("/chat/completions") {
            return None;
        }
        let body = request.json();
        let model = body["model"].as_str().unwrap_or("mock").to_owned();
        let tool = self.calls_tool(&body);
        let usage = json!({"prompt_tokens": USAGE_IN, "completion_tokens": USAGE_OUT,
                           "total_tokens": USAGE_IN + USAGE_OUT});
        let call = json!({"index": 0, "id": "call_mock_1", "type": "function",
                          "function": {"name": self.0.tool, "arguments": self.0.args.to_string()}});
        let finish = if tool { "tool_calls" } else { "stop" };
        if body["stream"] != true {
            let message = if tool {
                json!({"role": "assistant", "content": null, "tool_calls": [call]})
            } else {
                json!({"role": "assistant", "content": self.0.text})
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
        if tool {
            let mut head = call.clone();
            head["function"]["arguments"] = json!("");
            events.push((None, chunk(json!({"tool_calls": [head]}), Value::Null)));
            events.push((
                None,
                chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": self.0.args.to_string()}}]}),
                    Value::Null,
                ),
            ));
        } else {
            events.push((None, chunk(json!({"content": self.0.text}), Value::Null)));
        }
        let mut last = chunk(json!({}), json!(finish));
        last["usage"] = usage;
        events.push((None, last));
        let mut response = Response::sse(events);
        response.body.extend_from_slice(b"data: [DONE]\n\n");
        Some(response)
    }
}
