//! A terminal agent's end of the IDE WebSocket, for benches: connect (with the lockfile's token,
//! or as a plain WebSocket client when there is none), initialize, and one request at a time.

use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

/// A client WebSocket.
pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Connects to 127.0.0.1:`port` as a terminal agent with `token`; with an empty token, as a
/// plain WebSocket client (no subprotocol, no token: an echo baseline).
pub async fn connect(port: u16, token: &str) -> Socket {
    let mut request = format!("ws://127.0.0.1:{port}/")
        .into_client_request()
        .unwrap();
    if !token.is_empty() {
        let headers = request.headers_mut();
        headers.insert("sec-websocket-protocol", "mcp".parse().unwrap());
        headers.insert("x-claude-code-ide-authorization", token.parse().unwrap());
    }
    tokio_tungstenite::connect_async(request).await.unwrap().0
}

/// `initialize`, then `notifications/initialized`.
pub async fn initialize(socket: &mut Socket) {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"}}});
    round_trip(socket, init.to_string()).await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    socket
        .send(Message::Text(initialized.to_string().into()))
        .await
        .unwrap();
}

/// Sends one text frame and waits for the next text frame that is a response (has an `id`),
/// skipping notifications and control frames.
pub async fn round_trip(socket: &mut Socket, text: String) -> String {
    socket.send(Message::Text(text.into())).await.unwrap();
    loop {
        if let Message::Text(answer) = socket.next().await.expect("open").expect("frame") {
            let value: Value = serde_json::from_str(answer.as_str()).unwrap();
            if value.get("id").is_some() {
                return answer.as_str().to_owned();
            }
        }
    }
}
