//! A WebSocket as an MCP transport: one JSON-RPC message per text frame, both ways, each frame
//! parsed once. What is not a JSON-RPC message (bad JSON, a binary frame that is not JSON
//! either) gets a JSON-RPC error frame and a log line; the connection stays up. A broken socket
//! (oversized frame, protocol violation, reset) ends the reader, which ends the session.
//! The socket's reader runs in the connection's own task (see `websocket.rs`), which may
//! answer a message itself or hand it to rmcp through [`Transport`].

use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket};
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt as _, StreamExt as _};
use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use tokio::sync::{Mutex, mpsc};

/// The largest message (and frame) a client may send: big enough for a whole-file `openDiff`.
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// Messages read for rmcp before the reader waits for it.
const INCOMING: usize = 64;

/// Why a message could not go out.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The socket failed or is closed.
    #[error("the WebSocket is closed: {0}")]
    Closed(#[from] axum::Error),
    /// The message did not serialise (a bug).
    #[error("cannot encode a JSON-RPC message: {0}")]
    Encode(#[from] serde_json::Error),
}

/// The sending half of a socket, shared by whoever answers (rmcp's replies and notifications,
/// answers given by the reader, error frames): each frame is written and flushed whole by its
/// sender, under the lock, so frames never interleave and need no writer task.
#[derive(Clone)]
pub struct Writer(Arc<Mutex<SplitSink<WebSocket, Message>>>);

impl Writer {
    /// Writes `message` as one text frame.
    pub async fn send(&self, message: &TxJsonRpcMessage<RoleServer>) -> Result<(), FrameError> {
        let text = serde_json::to_string(message)?;
        self.send_text(text).await
    }

    async fn send_text(&self, text: String) -> Result<(), FrameError> {
        Ok(self.0.lock().await.send(Message::Text(text.into())).await?)
    }
}

/// The reading half of a socket: parses each frame once, answers what is not JSON-RPC with an
/// error frame.
pub struct Reader {
    socket: SplitStream<WebSocket>,
    writer: Writer,
    label: String,
}

/// What the reader read.
pub enum Incoming {
    /// A frame answered by the reader's caller: this answer is to be written.
    Answered(TxJsonRpcMessage<RoleServer>),
    /// A message for rmcp.
    Message(RxJsonRpcMessage<RoleServer>),
}

impl Reader {
    /// The next frame, answered by `answer` when it can (given the frame's text, before any
    /// other parse), else parsed into a JSON-RPC message; `None` when the socket closed or
    /// broke. Dropped while it waits for a frame, nothing is lost; while it writes a refused
    /// frame's error reply, that reply may be.
    pub async fn next(
        &mut self,
        answer: impl Fn(&str) -> Option<TxJsonRpcMessage<RoleServer>>,
    ) -> Option<Incoming> {
        let read = |text: &str| match answer(text) {
            Some(answer) => Ok(Incoming::Answered(answer)),
            None => parse(text).map(Incoming::Message),
        };
        loop {
            let parsed = match self.socket.next().await? {
                Ok(Message::Text(text)) => read(text.as_str()),
                Ok(Message::Binary(bytes)) => read(&String::from_utf8_lossy(&bytes)),
                Ok(Message::Close(_)) => return None,
                Ok(Message::Ping(_) | Message::Pong(_)) => continue,
                Err(e) => {
                    tracing::warn!(client = %self.label, "WebSocket error, closing: {e}");
                    return None;
                }
            };
            match parsed {
                Ok(incoming) => return Some(incoming),
                Err(reply) => {
                    tracing::warn!(client = %self.label, "refused a frame: {}", reply.1);
                    let _ = self.writer.send_text(reply.0).await;
                }
            }
        }
    }
}

/// The transport rmcp serves over: messages the socket's reader passes on, replies written
/// straight to the socket.
pub struct Transport {
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleServer>>,
    writer: Writer,
}

impl rmcp::transport::Transport<RoleServer> for Transport {
    type Error = FrameError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), FrameError>> + Send + 'static {
        let writer = self.writer.clone();
        async move { writer.send(&item).await }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.incoming.recv()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), FrameError>> + Send {
        self.incoming.close();
        let writer = self.writer.clone();
        async move { Ok(writer.0.lock().await.close().await?) }
    }
}

/// Splits `socket` into its reader, its writer, the transport rmcp serves over and the sender
/// that hands it what the reader read; `label` names the connection in logs.
pub fn split(
    socket: WebSocket,
    label: String,
) -> (
    Reader,
    Writer,
    Transport,
    mpsc::Sender<RxJsonRpcMessage<RoleServer>>,
) {
    let (sink, socket) = socket.split();
    let writer = Writer(Arc::new(Mutex::new(sink)));
    let (to_rmcp, incoming) = mpsc::channel(INCOMING);
    let reader = Reader {
        socket,
        writer: writer.clone(),
        label,
    };
    let transport = Transport {
        incoming,
        writer: writer.clone(),
    };
    (reader, writer, transport, to_rmcp)
}

/// A message, or the error frame to answer with and what was wrong.
fn parse(text: &str) -> Result<RxJsonRpcMessage<RoleServer>, (String, String)> {
    serde_json::from_str(text).map_err(|e| {
        // Only a refused frame pays for telling bad JSON from JSON that is no message.
        if serde_json::from_str::<serde::de::IgnoredAny>(text).is_err() {
            (error_frame(-32700, "Parse error"), format!("not JSON: {e}"))
        } else {
            (
                error_frame(-32600, "Invalid Request"),
                format!("not a JSON-RPC message: {e}"),
            )
        }
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
