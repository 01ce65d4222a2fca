//! The mock LLM server (tests/support/mock_llm.rs) over real sockets: what each script answers,
//! what is recorded, the tool results read back, keep-alive, chunked bodies and unknown endpoints.

mod support;

use serde_json::{Value, json};
use support::mock_llm::{
    Anthropic, Gemini, LateScript, MockLlm, OpenAi, Response, Responses, ToolTurn,
};
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

#[tokio::test]
async fn calls_are_played_in_order_one_per_tool_result_and_results_are_read_back() {
    let turn = ToolTurn::new("Read", json!({"file_path": "/ws/a"}), "Edited.").then(
        "Edit",
        json!({"file_path": "/ws/a", "old_string": "x", "new_string": "y"}),
    );
    let mock = MockLlm::start(Anthropic(turn)).await;
    let mut client = Client::connect(&mock).await;
    let tools = json!([{"name": "Read"}, {"name": "Edit"}]);
    let ask = |messages: Value| json!({"model": "m", "tools": tools, "messages": messages});
    let result = |id: &str, text: &str, error: bool| {
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id,
               "content": [{"type": "text", "text": text}], "is_error": error}]})
    };
    let user = json!({"role": "user", "content": "edit a"});

    let first: Value =
        serde_json::from_str(&client.post("/v1/messages", &ask(json!([user]))).await.body).unwrap();
    assert_eq!(first["content"][0]["name"], "Read");
    assert_eq!(first["content"][0]["id"], "toolu_mock_1");
    let read = result("toolu_mock_1", "1\tx", false);
    let second: Value = serde_json::from_str(
        &client
            .post("/v1/messages", &ask(json!([user, read])))
            .await
            .body,
    )
    .unwrap();
    assert_eq!(second["content"][0]["name"], "Edit");
    assert_eq!(second["content"][0]["id"], "toolu_mock_2");
    assert_eq!(second["content"][0]["input"]["new_string"], "y");
    let edit = result("toolu_mock_2", "refused", true);
    let third: Value = serde_json::from_str(
        &client
            .post("/v1/messages", &ask(json!([user, read, edit])))
            .await
            .body,
    )
    .unwrap();
    assert_eq!(third["content"][0]["text"], "Edited.");
    assert_eq!(mock.tool_results(), ["1\tx", "error: refused"]);
}

#[tokio::test]
async fn a_late_script_is_unknown_until_set_and_reads_its_results_back() {
    let late = LateScript::default();
    let mock = MockLlm::start(late.clone()).await;
    let mut client = Client::connect(&mock).await;
    let body = json!({"model": "m", "messages": [
        {"role": "user", "content": "go"},
        {"role": "tool", "tool_call_id": "call_mock_1", "content": [{"type": "text", "text": "Wrote it."}]}]});
    assert_eq!(client.post("/v1/chat/completions", &body).await.status, 404);
    late.set(OpenAi(ToolTurn::say("ok")));
    let reply: Value =
        serde_json::from_str(&client.post("/v1/chat/completions", &body).await.body).unwrap();
    assert_eq!(reply["choices"][0]["message"]["content"], "ok");
    assert_eq!(mock.tool_results(), ["Wrote it."]);
}

#[tokio::test]
async fn responses_streams_custom_and_function_calls_then_a_message() {
    let patch = "*** Begin Patch\n*** Add File: /ws/n.txt\n+n\n*** End Patch\n";
    let turn = ToolTurn::say("Patched.")
        .then_freeform("apply_patch", patch)
        .then("exec_command", json!({"cmd": "true"}));
    let mock = MockLlm::start(Responses(turn)).await;
    let mut client = Client::connect(&mock).await;
    let tools = json!([{"type": "custom", "name": "apply_patch"},
                       {"type": "function", "name": "exec_command"}]);
    let user = json!({"type": "message", "role": "user",
                      "content": [{"type": "input_text", "text": "go"}]});

    let first = client
        .post(
            "/v1/responses",
            &json!({"model": "m", "stream": true, "tools": tools, "input": [user]}),
        )
        .await;
    assert_eq!(first.content_type, "text/event-stream");
    assert_eq!(
        first.event_names(),
        [
            "response.created",
            "response.output_item.added",
            "response.output_item.done",
            "response.completed"
        ]
    );
    let events = first.events();
    let item = &events[2]["item"];
    assert_eq!(item["type"], "custom_tool_call");
    assert_eq!(item["name"], "apply_patch");
    assert_eq!(item["input"], patch);
    assert_eq!(item["call_id"], "call_mock_1");
    assert_eq!(events[3]["response"]["status"], "completed");
    assert_eq!(events[3]["response"]["output"][0], *item);
    assert!(events[3]["response"]["usage"]["total_tokens"].is_number());
    assert_eq!(events[3]["sequence_number"], 3);

    let output = json!({"type": "custom_tool_call_output", "call_id": "call_mock_1",
                        "output": "Success. Updated the following files:\nA /ws/n.txt\n"});
    let second = client
        .post(
            "/v1/responses",
            &json!({"model": "m", "stream": true, "tools": tools,
                    "input": [user, events[2]["item"], output]}),
        )
        .await;
    let item = &second.events()[2]["item"];
    assert_eq!(item["type"], "function_call");
    assert_eq!(item["name"], "exec_command");
    assert_eq!(
        serde_json::from_str::<Value>(item["arguments"].as_str().unwrap()).unwrap(),
        json!({"cmd": "true"})
    );

    let done = json!({"type": "function_call_output", "call_id": "call_mock_2", "output": "ok"});
    let third = client
        .post(
            "/v1/responses",
            &json!({"model": "m", "tools": tools, "input": [user, output, done]}),
        )
        .await;
    let third: Value = serde_json::from_str(&third.body).unwrap();
    assert_eq!(third["output"][0]["type"], "message");
    assert_eq!(third["output"][0]["content"][0]["text"], "Patched.");
    assert_eq!(
        mock.tool_results(),
        ["Success. Updated the following files:\nA /ws/n.txt\n", "ok"]
    );
}

#[tokio::test]
async fn generate_content_results_are_read_back_as_their_output_or_error() {
    let mock = MockLlm::start(Gemini::new(ToolTurn::say("ok"))).await;
    let mut client = Client::connect(&mock).await;
    let parts = json!([
        {"functionResponse": {"name": "replace", "response": {"output": "Successfully modified file"}}},
        {"functionResponse": {"name": "replace", "response": {"error": "Could not find"}}},
        {"functionResponse": {"name": "other", "response": {"llmContent": "x"}}}
    ]);
    client.post(GEMINI_STREAM, &gemini_request(parts)).await;
    assert_eq!(
        mock.tool_results(),
        [
            "Successfully modified file",
            "Could not find",
            r#"{"llmContent":"x"}"#
        ]
    );
}
