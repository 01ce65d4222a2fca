//! The mock LLM server (tests/support/mock_llm.rs) over real sockets: what each script answers,
//! what is recorded, keep-alive, chunked bodies and unknown endpoints.

mod support;

use serde_json::{Value, json};
use support::mock_llm::{Anthropic, Gemini, MockLlm, OpenAi, Response, ToolTurn};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// A response as the test client read it.
struct Reply {
    status: u16,
    content_type: String,
    body: String,
}

impl Reply {
    /// The `data:` payloads of an SSE body, parsed (`[DONE]` becomes a string).
    fn events(&self) -> Vec<Value> {
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap_or_else(|_| json!(d)))
            .collect()
    }

    /// The `event:` names of an SSE body.
    fn event_names(&self) -> Vec<String> {
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("event: "))
            .map(str::to_owned)
            .collect()
    }
}

/// A minimal HTTP/1.1 client over one keep-alive connection.
struct Client(BufReader<TcpStream>);

impl Client {
    async fn connect(mock: &MockLlm) -> Self {
        Self(BufReader::new(
            TcpStream::connect(("127.0.0.1", mock.port()))
                .await
                .unwrap(),
        ))
    }

    async fn post(&mut self, path: &str, body: &Value) -> Reply {
        let body = body.to_string();
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        self.send(request.as_bytes()).await
    }

    async fn send(&mut self, raw: &[u8]) -> Reply {
        self.0.get_mut().write_all(raw).await.unwrap();
        let mut line = String::new();
        self.0.read_line(&mut line).await.unwrap();
        let status = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        let (mut length, mut content_type) = (0, String::new());
        loop {
            line.clear();
            self.0.read_line(&mut line).await.unwrap();
            if line.trim().is_empty() {
                break;
            }
            let (name, value) = line.trim().split_once(':').unwrap();
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap(),
                "content-type" => content_type = value.trim().to_owned(),
                _ => {}
            }
        }
        let mut body = vec![0; length];
        self.0.read_exact(&mut body).await.unwrap();
        Reply {
            status,
            content_type,
            body: String::from_utf8(body).unwrap(),
        }
    }
}

const GEMINI_STREAM: &str = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse";

fn gemini_request(last_parts: Value) -> Value {
    json!({
        "contents": [{"role": "user", "parts": last_parts}],
        "tools": [{"functionDeclarations": [{"name": "read_file"}, {"name": "write_file"}]}],
        "generationConfig": {"temperature": 1}
    })
}

#[tokio::test]
async fn gemini_calls_write_file_then_answers_after_the_function_response() {
    let path = std::path::Path::new("/ws/hello.txt");
    let mock = MockLlm::start(Gemini::write_file(path, "hello\n").with_thought("Thinking.")).await;
    let mut client = Client::connect(&mock).await;

    let first = client
        .post(
            GEMINI_STREAM,
            &gemini_request(json!([{"text": "write it"}])),
        )
        .await;
    assert_eq!(first.status, 200);
    assert_eq!(first.content_type, "text/event-stream");
    let events = first.events();
    assert_eq!(events.len(), 2, "{}", first.body);
    assert_eq!(
        events[0]["candidates"][0]["content"]["parts"][0]["thought"],
        true
    );
    let call = &events[1]["candidates"][0]["content"]["parts"][0]["functionCall"];
    assert_eq!(call["name"], "write_file");
    assert_eq!(
        call["args"],
        json!({"file_path": "/ws/hello.txt", "content": "hello\n"})
    );
    assert_eq!(events[1]["candidates"][0]["finishReason"], "STOP");
    assert!(events[1]["usageMetadata"]["totalTokenCount"].is_number());

    // Same connection (keep-alive): the tool result comes back, the model answers in words.
    let response =
        json!([{"functionResponse": {"name": "write_file", "response": {"output": "ok"}}}]);
    let second = client
        .post(GEMINI_STREAM, &gemini_request(response.clone()))
        .await;
    let text: String = second
        .events()
        .iter()
        .map(|e| {
            e["candidates"][0]["content"]["parts"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(text, "Done: I wrote the file.");
    assert!(second.events().len() > 1, "text is streamed in pieces");
    assert_eq!(
        second.events().last().unwrap()["candidates"][0]["finishReason"],
        "STOP"
    );

    let recorded = mock.requests_to(":streamGenerateContent");
    assert_eq!(recorded.len(), 2);
    assert_eq!(recorded[0].method, "POST");
    assert_eq!(recorded[0].path, GEMINI_STREAM);
    assert_eq!(recorded[1].json()["contents"][0]["parts"], response);
}

#[tokio::test]
async fn gemini_side_calls_get_text_json_and_token_counts() {
    let mock = MockLlm::start(Gemini::write_file(std::path::Path::new("/f"), "x")).await;
    let mut client = Client::connect(&mock).await;

    // No tools offered: plain text, even though the last content is not a function response.
    let plain = client
        .post(
            "/v1beta/models/gemini-2.5-flash-lite:generateContent",
            &json!({"contents": [{"role": "user", "parts": [{"text": "title?"}]}]}),
        )
        .await;
    assert_eq!(plain.content_type, "application/json");
    let plain: Value = serde_json::from_str(&plain.body).unwrap();
    assert_eq!(
        plain["candidates"][0]["content"]["parts"][0]["text"],
        "Done: I wrote the file."
    );
    assert_eq!(plain["modelVersion"], "gemini-2.5-flash-lite");

    // Structured output: an object that satisfies the schema (the user speaks next).
    let structured = client
        .post(
            "/v1beta/models/gemini-2.5-flash:generateContent",
            &json!({"contents": [], "generationConfig": {
                "responseMimeType": "application/json",
                "responseJsonSchema": {"type": "object", "properties": {
                    "reasoning": {"type": "string"},
                    "next_speaker": {"type": "string", "enum": ["user", "model"]}}}}}),
        )
        .await;
    let structured: Value = serde_json::from_str(&structured.body).unwrap();
    let text = structured["candidates"][0]["content"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    let object: Value = serde_json::from_str(text).unwrap();
    assert_eq!(object["next_speaker"], "user");
    assert!(object["reasoning"].is_string());

    let count = client
        .post(
            "/v1beta/models/gemini-2.5-flash:countTokens",
            &json!({"contents": []}),
        )
        .await;
    assert!(serde_json::from_str::<Value>(&count.body).unwrap()["totalTokens"].is_number());
}

#[tokio::test]
async fn unknown_endpoints_get_404_and_are_recorded() {
    let mock = MockLlm::start(Gemini::write_file(std::path::Path::new("/f"), "x")).await;
    let mut client = Client::connect(&mock).await;
    let reply = client
        .send(b"GET /v1internal:loadCodeAssist HTTP/1.1\r\nHost: x\r\n\r\n")
        .await;
    assert_eq!(reply.status, 404);
    let recorded = mock.requests();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].method, "GET");
    assert_eq!(recorded[0].path_only(), "/v1internal:loadCodeAssist");
    assert_eq!(recorded[0].header("HOST"), Some("x"));
    assert!(mock.summary().contains("GET /v1internal:loadCodeAssist"));
}

#[tokio::test]
async fn chunked_request_bodies_are_decoded() {
    let mock = MockLlm::start(Gemini::write_file(std::path::Path::new("/f"), "x")).await;
    let mut client = Client::connect(&mock).await;
    let body = br#"{"contents": []}"#;
    let (a, b) = body.split_at(5);
    let raw = format!(
        "POST {GEMINI_STREAM} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{}\r\n{:x}\r\n{}\r\n0\r\n\r\n",
        a.len(),
        std::str::from_utf8(a).unwrap(),
        b.len(),
        std::str::from_utf8(b).unwrap()
    );
    let reply = client.send(raw.as_bytes()).await;
    assert_eq!(reply.status, 200);
    assert_eq!(mock.requests()[0].body, body);
}

#[tokio::test]
async fn custom_scripts_are_closures() {
    let mock = MockLlm::start(|request: &support::mock_llm::Request| {
        (request.path_only() == "/health").then(|| Response::json(&json!({"ok": true})))
    })
    .await;
    let mut client = Client::connect(&mock).await;
    assert_eq!(
        client.post("/health", &json!({})).await.body,
        r#"{"ok":true}"#
    );
    assert_eq!(client.post("/other", &json!({})).await.status, 404);
}

#[tokio::test]
async fn anthropic_streams_a_tool_use_then_text_after_the_tool_result() {
    let path = std::path::Path::new("/ws/a.txt");
    let mock = MockLlm::start(Anthropic::write_file(path, "A\n")).await;
    let mut client = Client::connect(&mock).await;
    let tools = json!([{"name": "Read"}, {"name": "Write"}]);

    let first = client
        .post(
            "/v1/messages?beta=true",
            &json!({"model": "claude-x", "stream": true, "tools": tools,
                    "messages": [{"role": "user", "content": "write"}]}),
        )
        .await;
    assert_eq!(
        first.event_names(),
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let events = first.events();
    assert_eq!(events[1]["content_block"]["type"], "tool_use");
    assert_eq!(events[1]["content_block"]["name"], "Write");
    let input: Value =
        serde_json::from_str(events[2]["delta"]["partial_json"].as_str().unwrap()).unwrap();
    assert_eq!(input, json!({"file_path": "/ws/a.txt", "content": "A\n"}));
    assert_eq!(events[4]["delta"]["stop_reason"], "tool_use");

    let second = client
        .post(
            "/v1/messages",
            &json!({"model": "claude-x", "stream": true, "tools": tools, "messages": [
                {"role": "user", "content": "write"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_mock_1"}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_mock_1"}]}]}),
        )
        .await;
    let events = second.events();
    assert_eq!(events[2]["delta"]["text"], "Done: I wrote the file.");
    assert_eq!(events[4]["delta"]["stop_reason"], "end_turn");

    // A side call without tools, not streamed: one JSON message with text.
    let side = client
        .post(
            "/v1/messages",
            &json!({"model": "claude-haiku", "messages": [{"role": "user", "content": "title?"}]}),
        )
        .await;
    let side: Value = serde_json::from_str(&side.body).unwrap();
    assert_eq!(side["content"][0]["type"], "text");
    assert_eq!(side["stop_reason"], "end_turn");
}

#[tokio::test]
async fn openai_streams_a_tool_call_then_text_after_the_tool_message() {
    let turn = ToolTurn::new(
        "write",
        json!({"filePath": "/ws/o.txt", "content": "O"}),
        "ok",
    );
    let mock = MockLlm::start(OpenAi(turn)).await;
    let mut client = Client::connect(&mock).await;
    let tools = json!([{"type": "function", "function": {"name": "write"}}]);

    let first = client
        .post(
            "/v1/chat/completions",
            &json!({"model": "m", "stream": true, "tools": tools,
                    "messages": [{"role": "user", "content": "go"}]}),
        )
        .await;
    let events = first.events();
    assert_eq!(events.last().unwrap(), "[DONE]");
    let head = &events[1]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(head["function"]["name"], "write");
    let arguments = events[2]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(arguments).unwrap()["filePath"],
        "/ws/o.txt"
    );
    assert_eq!(events[3]["choices"][0]["finish_reason"], "tool_calls");

    let second = client
        .post(
            "/v1/chat/completions",
            &json!({"model": "m", "stream": true, "tools": tools, "messages": [
                {"role": "user", "content": "go"},
                {"role": "tool", "tool_call_id": "call_mock_1", "content": "done"}]}),
        )
        .await;
    let events = second.events();
    assert_eq!(events[1]["choices"][0]["delta"]["content"], "ok");
    assert_eq!(events[2]["choices"][0]["finish_reason"], "stop");
}

#[tokio::test]
async fn head_probes_get_an_empty_200() {
    let mock = MockLlm::start(Anthropic::write_file(std::path::Path::new("/f"), "x")).await;
    let mut client = Client::connect(&mock).await;
    let reply = client.send(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!((reply.status, reply.body.as_str()), (200, ""));
    assert_eq!(mock.requests()[0].method, "HEAD");
}
