//! Raw HTTP/1.1 to agentls's MCP ports, as a client that speaks it by hand: what no real client
//! shows (a foreign `Host`, a missing token) can be sent too.

use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// One `POST /mcp` of `body` on a new connection to `connect` (host:port), saying `Host: host`
/// and `headers`: the answer's status and body.
pub async fn post_to(
    connect: &str,
    host: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> (u16, String) {
    let mut socket = tokio::net::TcpStream::connect(connect).await.unwrap();
    let body = body.to_string();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
         Connection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(super::WAIT, socket.read_to_string(&mut answer))
        .await
        .expect("no answer")
        .unwrap();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// [`post_to`] 127.0.0.1:`port` as itself, with the bearer `token`.
pub async fn post_with_token(port: u16, token: &str, body: &Value) -> (u16, String) {
    let authority = format!("127.0.0.1:{port}");
    let bearer = format!("Bearer {token}");
    post_to(&authority, &authority, &[("Authorization", &bearer)], body).await
}
