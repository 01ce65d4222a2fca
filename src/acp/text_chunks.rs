//! The most common line of a streamed reply, read fast: a `session/update` notification carrying
//! one text chunk of the agent's message or thought, and nothing else. The schema's
//! `SessionUpdate` is an internally tagged enum, which serde reads by first copying the whole
//! update into an intermediate tree and then reading the tree again; about half of the reader's
//! work per chunk. Here the few fields of such a line are read straight from the text, borrowed
//! where there is nothing to unescape. A line with any other field (`messageId`, `_meta`,
//! annotations, an `id`), another kind of update or content, is `None` here and is read whole
//! by the schema's types, so nothing an agent sends is dropped.

use std::borrow::Cow;

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, SessionNotification, SessionUpdate,
};
use serde::Deserialize;

/// The update in `line`, when it is exactly a text chunk notification.
pub fn parse(line: &str) -> Option<SessionNotification> {
    let message: Message = serde_json::from_str(line).ok()?;
    let Params { session_id, update } = message.params;
    if message.jsonrpc != "2.0"
        || message.method != "session/update"
        || update.content.kind != "text"
    {
        return None;
    }
    let chunk = ContentChunk::new(ContentBlock::from(update.content.text.into_owned()));
    let update = match update.session_update.as_ref() {
        "agent_message_chunk" => SessionUpdate::AgentMessageChunk(chunk),
        "agent_thought_chunk" => SessionUpdate::AgentThoughtChunk(chunk),
        _ => return None,
    };
    Some(SessionNotification::new(session_id.into_owned(), update))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Message<'a> {
    #[serde(borrow)]
    jsonrpc: Cow<'a, str>,
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow)]
    params: Params<'a>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Params<'a> {
    #[serde(borrow)]
    session_id: Cow<'a, str>,
    #[serde(borrow)]
    update: Update<'a>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Update<'a> {
    #[serde(borrow)]
    session_update: Cow<'a, str>,
    #[serde(borrow)]
    content: Text<'a>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Text<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    text: Cow<'a, str>,
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// What the schema's own types read from `line`, as JSON (`None`: not a notification).
    fn by_schema(line: &str) -> Option<Value> {
        let message: Value = serde_json::from_str(line).ok()?;
        let note: SessionNotification = serde_json::from_value(message["params"].clone()).ok()?;
        Some(serde_json::to_value(note).unwrap())
    }

    /// Every line read here is read exactly as the schema's types read it; the others are left
    /// to them.
    #[test]
    fn reads_text_chunks_as_the_schema_does_and_leaves_the_rest() {
        let update = |update: Value| {
            json!({"jsonrpc": "2.0", "method": "session/update",
                   "params": {"sessionId": "s-1", "update": update}})
            .to_string()
        };
        let text = |kind: &str, text: &str| {
            update(json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}}))
        };
        let fast = [
            text("agent_message_chunk", "Hello"),
            text("agent_thought_chunk", "hmm"),
            text("agent_message_chunk", "line\n\"quoted\" \u{e9}\u{1f600} \\ tab\t"),
            text("agent_message_chunk", ""),
            // Field order is free.
            r#"{"params":{"update":{"content":{"text":"x","type":"text"},"sessionUpdate":"agent_message_chunk"},"sessionId":"s"},"method":"session/update","jsonrpc":"2.0"}"#.to_owned(),
        ];
        for line in &fast {
            let note = parse(line).unwrap_or_else(|| panic!("not read: {line}"));
            assert_eq!(
                Some(serde_json::to_value(note).unwrap()),
                by_schema(line),
                "{line}"
            );
        }
        let left = [
            text("user_message_chunk", "me"),
            update(
                json!({"sessionUpdate": "agent_message_chunk", "messageId": "m",
                          "content": {"type": "text", "text": "x"}}),
            ),
            update(json!({"sessionUpdate": "agent_message_chunk",
                          "content": {"type": "text", "text": "x", "_meta": {"k": 1}}})),
            update(json!({"sessionUpdate": "agent_message_chunk",
                          "content": {"type": "text", "text": "x",
                                      "annotations": {"priority": 1.0}}})),
            update(json!({"sessionUpdate": "agent_message_chunk",
                          "content": {"type": "image", "data": "", "mimeType": "image/png"}})),
            update(json!({"sessionUpdate": "tool_call", "toolCallId": "t", "title": "Read"})),
            json!({"jsonrpc": "2.0", "id": 1, "method": "session/update",
                   "params": {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk",
                              "content": {"type": "text", "text": "x"}}}})
            .to_string(),
            json!({"jsonrpc": "1.0", "method": "session/update",
                   "params": {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk",
                              "content": {"type": "text", "text": "x"}}}})
            .to_string(),
            json!({"jsonrpc": "2.0", "method": "session/other",
                   "params": {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk",
                              "content": {"type": "text", "text": "x"}}}})
            .to_string(),
            json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s",
                   "_meta": {}, "update": {"sessionUpdate": "agent_message_chunk",
                              "content": {"type": "text", "text": "x"}}}})
            .to_string(),
            "not json".to_owned(),
        ];
        for line in &left {
            assert!(parse(line).is_none(), "read here: {line}");
        }
    }
}
