//! Whether one frame's body is a single JSON-RPC 2.0 message that tower-lsp can take, and the
//! answer the JSON-RPC spec gives a client when it is not. Framing (where a body starts and
//! ends) is `framing.rs`'s.
//!
//! tower-lsp ends its input at the first body it cannot decode, so nothing may reach it that it
//! would refuse: a body passes only once it is an object with `"jsonrpc": "2.0"`, an `id` that is
//! absent, null, an integer or a string, a string `method` when there is one, and nothing that
//! would make a request look like a response. It passes as it came, or re-serialized when a
//! key of the message comes twice (tower-lsp's decoder refuses that). A lone UTF-16 surrogate
//! escape (`"\ud83d"`, what
//! clients that cut text at UTF-16 code units send) is repaired to U+FFFD rather than refused:
//! the text keeps its length in UTF-16 code units, so positions after it stay right.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

/// JSON-RPC's "Parse error": the body is not JSON (or not UTF-8).
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's "Invalid Request": JSON, but not one request or notification.
pub const INVALID_REQUEST: i64 = -32600;

/// What became of one body.
#[derive(Debug, Clone, PartialEq)]
pub enum Checked {
    /// A message tower-lsp can take: the body to pass on.
    Valid(Vec<u8>),
    /// Not a message: answer the client `answer` (a JSON-RPC error response).
    Refused {
        /// The error response.
        answer: Value,
        /// Why, for the log.
        reason: String,
    },
    /// A malformed response to one of our requests: nothing to answer (an answer to an answer
    /// would look to the client like the reply to one of its own requests), only to log.
    Dropped(String),
}

/// Checks `body` (see the module doc); `repaired` counts the lone surrogates replaced.
pub fn check(body: Vec<u8>, repaired: &mut usize) -> Checked {
    let text = match std::str::from_utf8(&body) {
        Ok(text) => text,
        Err(e) => return refused(PARSE_ERROR, Value::Null, format!("not UTF-8: {e}")),
    };
    let (text, lone) = repair_lone_surrogates(text);
    *repaired += lone;
    let (value, duplicate) = match parse(&text) {
        Ok(parsed) => parsed,
        Err(e) => return refused(PARSE_ERROR, Value::Null, format!("not JSON: {e}")),
    };
    let map = match &value {
        Value::Object(map) => map,
        Value::Array(_) => {
            let reason = "a batch (array): one message per frame only".into();
            return refused(INVALID_REQUEST, Value::Null, reason);
        }
        other => {
            let reason = format!("not an object but {}", kind(other));
            return refused(INVALID_REQUEST, Value::Null, reason);
        }
    };
    if let Err((id, reason)) = shape(map) {
        return refused(INVALID_REQUEST, id, reason);
    }
    if map.get("method").is_none()
        && let Err(reason) = response_shape(map)
    {
        return Checked::Dropped(reason);
    }
    if !duplicate && lone == 0 {
        // As it came: re-encoding a document of megabytes costs more than reading it.
        return Checked::Valid(body);
    }
    match serde_json::to_vec(&value) {
        Ok(body) => Checked::Valid(body),
        Err(e) => refused(PARSE_ERROR, Value::Null, format!("cannot re-encode: {e}")),
    }
}

/// `text` as JSON, and whether an object at its top has a key twice (tower-lsp's decoder
/// refuses that; nested objects it reads into maps, where the last one wins).
fn parse(text: &str) -> serde_json::Result<(Value, bool)> {
    if !text.trim_start().starts_with('{') {
        return serde_json::from_str(text).map(|value| (value, false));
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let top = serde::Deserializer::deserialize_map(&mut deserializer, TopLevel)?;
    deserializer.end()?;
    Ok(top)
}

/// Reads the top-level object into a map, noting a key that comes twice (the last one wins,
/// as in a `Value`).
struct TopLevel;

impl<'de> serde::de::Visitor<'de> for TopLevel {
    type Value = (Value, bool);

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut access: A,
    ) -> Result<Self::Value, A::Error> {
        let mut map = Map::new();
        let mut duplicate = false;
        while let Some(key) = access.next_key::<String>()? {
            let value: Value = access.next_value()?;
            duplicate |= map.insert(key, value).is_some();
        }
        Ok((Value::Object(map), duplicate))
    }
}

/// Whether an id is one tower-lsp reads: null, an integer it holds as i64, or a string.
fn readable_id(id: &Value) -> bool {
    match id {
        Value::Null | Value::String(_) => true,
        Value::Number(n) => n.as_i64().is_some(),
        _ => false,
    }
}

/// The envelope of a request, notification or response; on failure the id to answer with (the
/// message's, when it can be read) and why.
fn shape(map: &Map<String, Value>) -> Result<(), (Value, String)> {
    let id = map.get("id");
    if let Some(id) = id
        && !readable_id(id)
    {
        let reason = format!(
            "`id` must be null, an integer or a string, not {}",
            kind(id)
        );
        return Err((Value::Null, reason));
    }
    let answer_id = id.cloned().unwrap_or(Value::Null);
    match map.get("jsonrpc") {
        Some(Value::String(version)) if version == "2.0" => {}
        Some(other) => {
            let reason = format!("`jsonrpc` must be \"2.0\", not {other}");
            return Err((answer_id, reason));
        }
        None => return Err((answer_id, "no `jsonrpc`: \"2.0\"".into())),
    }
    match map.get("method") {
        Some(Value::String(_)) => {
            if map.contains_key("result") || map.contains_key("error") {
                let reason = "a request has no `result` or `error`".into();
                return Err((answer_id, reason));
            }
            Ok(())
        }
        Some(other) => Err((
            answer_id,
            format!("`method` must be a string, not {}", kind(other)),
        )),
        None if map.contains_key("result") || map.contains_key("error") => Ok(()),
        None => Err((answer_id, "no `method`".into())),
    }
}

/// A response: an id, and exactly one of `result` and a well-formed `error`.
fn response_shape(map: &Map<String, Value>) -> Result<(), String> {
    if !map.contains_key("id") {
        return Err("a response without an `id`".into());
    }
    match (map.get("result"), map.get("error")) {
        (Some(_), None) => Ok(()),
        (None, Some(Value::Object(error))) => {
            let code = error.get("code").and_then(Value::as_i64);
            let message = error.get("message").and_then(Value::as_str);
            match (code, message) {
                (Some(_), Some(_)) => Ok(()),
                _ => Err("a response whose `error` lacks an integer `code` or a `message`".into()),
            }
        }
        (None, Some(other)) => Err(format!("a response whose `error` is {}", kind(other))),
        _ => Err("a response with both `result` and `error`".into()),
    }
}

fn refused(code: i64, id: Value, reason: String) -> Checked {
    let title = match code {
        PARSE_ERROR => "Parse error",
        _ => "Invalid Request",
    };
    let answer = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code, "message": format!("{title}: {reason}")},
    });
    Checked::Refused { answer, reason }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() => "a number",
        Value::Number(n) if n.is_u64() => "an integer too large",
        Value::Number(_) => "a fraction",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `text` with every `\uXXXX` escape of a lone surrogate (a high one not followed by a low one's
/// escape, or a low one on its own) replaced by `\ufffd`; and how many there were. Works on the
/// escapes alone: outside a string a backslash is invalid JSON anyway. A text with no `\ud` or
/// `\uD` anywhere has no surrogate escape, and is passed over in one search (a 10 MB document
/// has hundreds of thousands of other escapes, its line breaks).
fn repair_lone_surrogates(text: &str) -> (Cow<'_, str>, usize) {
    if !text.contains("\\ud") && !text.contains("\\uD") {
        return (Cow::Borrowed(text), 0);
    }
    let bytes = text.as_bytes();
    let mut repaired = String::new();
    let mut copied = 0;
    let mut count = 0;
    let mut i = 0;
    while let Some(offset) = bytes[i..].iter().position(|&b| b == b'\\') {
        let at = i + offset;
        let Some(unit) = unicode_escape(bytes, at) else {
            // Any other escape is two bytes (`\\` included, so its second byte is skipped).
            i = at + 2;
            if i >= bytes.len() {
                break;
            }
            continue;
        };
        let end = at + 6;
        let lone = match unit {
            0xD800..=0xDBFF => match unicode_escape(bytes, end) {
                Some(0xDC00..=0xDFFF) => {
                    i = end + 6;
                    continue;
                }
                _ => true,
            },
            0xDC00..=0xDFFF => true,
            _ => false,
        };
        if lone {
            repaired.push_str(&text[copied..at]);
            repaired.push_str("\\ufffd");
            copied = end;
            count += 1;
        }
        i = end;
    }
    if count == 0 {
        return (Cow::Borrowed(text), 0);
    }
    repaired.push_str(&text[copied..]);
    (Cow::Owned(repaired), count)
}

/// The code unit of a `\uXXXX` escape starting at `at`.
fn unicode_escape(bytes: &[u8], at: usize) -> Option<u16> {
    let escape = bytes.get(at..at + 6)?;
    if escape[0] != b'\\' || escape[1] != b'u' {
        return None;
    }
    let hex = std::str::from_utf8(&escape[2..]).ok()?;
    u16::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(body: &[u8]) -> Checked {
        check(body.to_vec(), &mut 0)
    }

    /// The code and id of a refusal.
    fn refusal(body: &[u8]) -> (i64, Value) {
        match checked(body) {
            Checked::Refused { answer, .. } => {
                assert_eq!(answer["jsonrpc"], "2.0");
                assert!(answer["error"]["message"].is_string(), "{answer}");
                (
                    answer["error"]["code"].as_i64().unwrap(),
                    answer["id"].clone(),
                )
            }
            other => panic!(
                "{} was not refused: {other:?}",
                String::from_utf8_lossy(body)
            ),
        }
    }

    #[test]
    fn messages_pass_as_they_came_unless_mended() {
        let bodies: [&[u8]; 6] = [
            br#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#,
            br#"{"jsonrpc":"2.0","id":"a","method":"x","params":[1,{"b":null}]}"#,
            br#"{"jsonrpc":"2.0","id":null,"method":"x","params":null}"#,
            br#"{"jsonrpc":"2.0","method":"exit"}"#,
            br#"{"jsonrpc":"2.0","id":-3,"result":null}"#,
            br#"{"jsonrpc":"2.0","id":4,"error":{"code":-1,"message":"no","data":[]}}"#,
        ];
        for body in bodies {
            assert_eq!(checked(body), Checked::Valid(body.to_vec()));
        }
        // The payload is checked too: nothing tower-lsp would choke on passes (a payload nested
        // past serde_json's limit, which skipping it unbuilt would not notice).
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{}{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let bad: [&[u8]; 3] = [
            br#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":tru}}"#,
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":\"a\nb\"}",
            deep.as_bytes(),
        ];
        for body in bad {
            let shown = String::from_utf8_lossy(body).into_owned();
            assert_eq!(refusal(body), (PARSE_ERROR, Value::Null), "{shown}");
        }
        // A payload given twice: the last one, re-encoded whole.
        let params_twice = br#"{"jsonrpc":"2.0","method":"a","params":[1],"params":{"b":2}}"#;
        assert_eq!(
            checked(params_twice),
            Checked::Valid(br#"{"jsonrpc":"2.0","method":"a","params":{"b":2}}"#.to_vec())
        );
        // Duplicate keys (refused by tower-lsp's decoder) are gone; key order stays.
        let twice = br#" {"jsonrpc":"2.0","method":"a","id":1,"method":"b"} "#;
        assert_eq!(
            checked(twice),
            Checked::Valid(br#"{"jsonrpc":"2.0","method":"b","id":1}"#.to_vec())
        );
    }

    #[test]
    fn what_is_not_one_message_gets_the_spec_answer() {
        let deep = [b'['; 100_000];
        let not_json: [&[u8]; 5] = [
            b"{\"jsonrpc\":",
            b"",
            b"{\"jsonrpc\":\"2.0\",\"method\":\"\xff\"}",
            b"{\"jsonrpc\":\"2.0\",\0\"method\":\"x\"}",
            &deep,
        ];
        for body in not_json {
            let shown = String::from_utf8_lossy(&body[..body.len().min(40)]).into_owned();
            assert_eq!(refusal(body), (PARSE_ERROR, Value::Null), "{shown}");
        }
        // No id can be read: answered with a null id.
        let no_id: [&[u8]; 12] = [
            br#"[{"jsonrpc":"2.0","id":1,"method":"x"}]"#,
            b"[]",
            b"42",
            b"null",
            br#""x""#,
            b"{}",
            br#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#,
            br#"{"jsonrpc":"2.0","id":{"a":1},"method":"x"}"#,
            br#"{"jsonrpc":"2.0","id":[1],"method":"x"}"#,
            br#"{"jsonrpc":"2.0","id":true,"method":"x"}"#,
            br#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"x"}"#,
            br#"{"jsonrpc":"1.0","id":1.5,"method":"x"}"#,
        ];
        for body in no_id {
            let shown = String::from_utf8_lossy(body).into_owned();
            assert_eq!(refusal(body), (INVALID_REQUEST, Value::Null), "{shown}");
        }
        // The id is readable: the answer carries it.
        let with_id: [(&[u8], Value); 7] = [
            (br#"{"jsonrpc":"1.0","id":7,"method":"x"}"#, json!(7)),
            (br#"{"jsonrpc":2,"id":"s","method":"x"}"#, json!("s")),
            (br#"{"id":8,"method":"x"}"#, json!(8)),
            (br#"{"jsonrpc":"2.0","id":2,"method":5}"#, json!(2)),
            (br#"{"jsonrpc":"2.0","id":3}"#, json!(3)),
            (
                br#"{"jsonrpc":"2.0","id":4,"method":"x","result":1}"#,
                json!(4),
            ),
            (br#"{"jsonrpc":"2.0","id":null,"method":null}"#, Value::Null),
        ];
        for (body, id) in with_id {
            let shown = String::from_utf8_lossy(body).into_owned();
            assert_eq!(refusal(body), (INVALID_REQUEST, id), "{shown}");
        }
    }

    #[test]
    fn malformed_responses_are_dropped_unanswered() {
        for body in [
            br#"{"jsonrpc":"2.0","result":1}"#.as_slice(),
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}"#,
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":1}}"#,
            br#"{"jsonrpc":"2.0","id":1,"error":"bad"}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}"#,
        ] {
            assert!(
                matches!(checked(body), Checked::Dropped(_)),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        let cases = [
            (r#"x\ud83dy"#, r#"x\ufffdy"#, 1),
            (r#"\ude00"#, r#"\ufffd"#, 1),
            (r#"\ud83d\ude00"#, r#"\ud83d\ude00"#, 0),
            (r#"\uD83D\uDE00\uD83D"#, r#"\uD83D\uDE00\ufffd"#, 1),
            (r#"\ud83d\ud83d\ude00"#, r#"\ufffd\ud83d\ude00"#, 1),
            (r#"\ud83d\u0041"#, r#"\ufffd\u0041"#, 1),
            (r#"\\ud83d"#, r#"\\ud83d"#, 0),
            (r#"\\\ud83d"#, r#"\\\ufffd"#, 1),
            (r#"\ud83"#, r#"\ud83"#, 0),
            (r#"end\"#, r#"end\"#, 0),
            ("é\\udc00é", "é\\ufffdé", 1),
            (r#"a\nb\u0041\\u"#, r#"a\nb\u0041\\u"#, 0),
        ];
        for (text, expected, count) in cases {
            let (repaired, n) = repair_lone_surrogates(text);
            assert_eq!((repaired.as_ref(), n), (expected, count), "{text}");
        }
        let body = br#"{"jsonrpc":"2.0","method":"m","params":{"text":"a\ud83db"}}"#;
        let mut repaired = 0;
        let Checked::Valid(passed) = check(body.to_vec(), &mut repaired) else {
            panic!("refused")
        };
        let value: Value = serde_json::from_slice(&passed).unwrap();
        assert_eq!(value["params"]["text"], "a\u{fffd}b");
        assert_eq!(repaired, 1);
    }
}
