//! A WebSocket as an MCP transport: one JSON-RPC message per text frame, both ways. What is not
//! a JSON-RPC message (bad JSON, a binary frame that is not JSON either) gets a JSON-RPC error
//! frame and a log line; the connection stays up. A broken socket (oversized frame, protocol
//! violation, reset) ends the stream, which ends the session.

use axum::extract::ws::{Message, WebSocket};
use futures::channel::mpsc;
use futures::stream::BoxStream;
use futures::{Sink, SinkExt as _, StreamExt as _};
use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};

/// The largest message (and frame) a client may send: big enough for a whole-file `openDiff`.
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// Frames queued for the socket before senders wait.
const OUTGOING: usize = 64;

/// Why a message could not go out.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The socket's writer is gone: the connection closed.
    #[error("the WebSocket is closed")]
    Closed(#[from] mpsc::SendError),
    /// The message did not serialise (a bug).
    #[error("cannot encode a JSON-RPC message: {0}")]
    Encode(#[from] serde_json::Error),
}

/// The transport rmcp serves over: a sink of outgoing messages, a stream of incoming ones.
pub type Transport = (
    std::pin::Pin<Box<dyn Sink<TxJsonRpcMessage<RoleServer>, Error = FrameError> + Send>>,
    BoxStream<'static, RxJsonRpcMessage<RoleServer>>,
);

/// Splits `socket` into an MCP transport; `label` names the connection in logs.
pub fn transport(socket: WebSocket, label: String) -> Transport {
    let (ws_sink, ws_stream) = socket.split();
    let (out, queued) = mpsc::channel::<Message>(OUTGOING);
    // One writer owns the socket's sending half, so replies and error frames never interleave.
    tokio::spawn(async move {
        let _ = queued.map(Ok).forward(ws_sink).await;
    });
    let errors = out.clone();
    let sink = out.sink_map_err(FrameError::from).with(
        |message: TxJsonRpcMessage<RoleServer>| async move {
            Ok::<_, FrameError>(Message::Text(serde_json::to_string(&message)?.into()))
        },
    );
    let stream = futures::stream::unfold(
        (ws_stream, errors, label),
        |(mut ws, mut errors, label)| async move {
            loop {
                let text = match ws.next().await? {
                    Ok(Message::Text(text)) => text.as_str().to_owned(),
                    Ok(Message::Binary(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
                    Ok(Message::Close(_)) => return None,
                    Ok(Message::Ping(_) | Message::Pong(_)) => continue,
                    Err(e) => {
                        tracing::warn!(client = %label, "WebSocket error, closing: {e}");
                        return None;
                    }
                };
                match parse(&text) {
                    Ok(message) => return Some((message, (ws, errors, label))),
                    Err(reply) => {
                        tracing::warn!(client = %label, "refused a frame: {}", reply.1);
                        let _ = errors.send(Message::Text(reply.0.into())).await;
                    }
                }
            }
        },
    )
    .boxed();
    (Box::pin(sink), stream)
}

/// A message, or the error frame to answer with and what was wrong.
fn parse(text: &str) -> Result<RxJsonRpcMessage<RoleServer>, (String, String)> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| (error_frame(-32700, "Parse error"), format!("not JSON: {e}")))?;
    serde_json::from_value(value).map_err(|e| {
        (
            error_frame(-32600, "Invalid Request"),
            format!("not a JSON-RPC message: {e}"),
        )
    })
}

fn error_frame(code: i32, message: &str) -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}})
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_frames_get_json_rpc_errors() {
        let (frame, why) = parse("{nope").unwrap_err();
        assert!(frame.contains("-32700"), "{frame}");
        assert!(why.contains("not JSON"));
        let (frame, _) = parse(r#"{"hello": 1}"#).unwrap_err();
        assert!(frame.contains("-32600"), "{frame}");
        let ok = parse(r#"{"jsonrpc":"2.0","method":"ide_connected","params":{"pid":1}}"#);
        assert!(ok.is_ok(), "{ok:?}");
    }
}
