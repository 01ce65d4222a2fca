//! `agentls mcp-bridge <url>`: the editor's tools for an agent that takes MCP servers over
//! stdio only. It reads JSON-RPC messages a line at a time from stdin, POSTs each to agentls's
//! stateless Streamable HTTP server at `<url>` with the session's token (from
//! `AGENTLS_MCP_TOKEN`, never an argument), and writes what comes back to stdout, a message a
//! line. A request the server refuses (the session ended, a wrong token) is answered with a
//! JSON-RPC error, so the agent is never left waiting. [`Poster`] is the HTTP half, also used
//! by the demo agent as its MCP client.

use std::sync::{Arc, Mutex};

use axum::http::{Request, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};

/// Why a POST got no MCP answer.
#[derive(Debug, thiserror::Error)]
pub enum PostError {
    /// The URL is not `http://<host>:<port>/<path>`.
    #[error("not an http://host:port/path URL: {0}")]
    Url(String),
    /// No connection, or it broke.
    #[error("cannot reach agentls's MCP server: {0}")]
    Io(#[from] std::io::Error),
    /// HTTP failed underneath.
    #[error("HTTP: {0}")]
    Http(String),
    /// The server refused the request.
    #[error("agentls's MCP server refused the request ({status}): {body}")]
    Refused {
        /// The status.
        status: StatusCode,
        /// What it said.
        body: String,
    },
}

/// POSTs MCP messages to one Streamable HTTP endpoint with a bearer token; a new connection
/// per message (loopback: cheap), so messages may be in flight together.
#[derive(Debug)]
pub struct Poster {
    authority: String,
    path: String,
    token: String,
    /// The protocol version `initialize` settled on, sent with every later message.
    version: Mutex<Option<String>>,
}

impl Poster {
    /// For `url` (`http://127.0.0.1:<port>/mcp`) and `token`.
    pub fn new(url: &str, token: &str) -> Result<Self, PostError> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| PostError::Url(url.to_owned()))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if !authority.contains(':') {
            return Err(PostError::Url(url.to_owned()));
        }
        Ok(Self {
            authority: authority.to_owned(),
            path: path.to_owned(),
            token: token.to_owned(),
            version: Mutex::new(None),
        })
    }

    /// Sends one JSON-RPC message; returns the messages that answer it (none for a
    /// notification).
    pub async fn post(&self, message: &str) -> Result<Vec<String>, PostError> {
        let stream = tokio::net::TcpStream::connect(&self.authority).await?;
        stream.set_nodelay(true)?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| PostError::Http(e.to_string()))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("mcp-bridge: connection ended: {e}");
            }
        });
        let mut request = Request::post(&self.path)
            .header(header::HOST, &self.authority)
            .header(header::AUTHORIZATION, format!("Bearer {}", self.token))
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json, text/event-stream");
        let version = self
            .version
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(version) = version {
            request = request.header("mcp-protocol-version", version);
        }
        let request = request
            .body(Full::new(Bytes::from(message.to_owned())))
            .map_err(|e| PostError::Http(e.to_string()))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| PostError::Http(e.to_string()))?;
        let status = response.status();
        let event_stream = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| PostError::Http(e.to_string()))?
            .to_bytes();
        let body = String::from_utf8_lossy(&body).into_owned();
        if !status.is_success() {
            return Err(PostError::Refused { status, body });
        }
        let messages = if event_stream {
            events(&body)
        } else if body.trim().is_empty() {
            Vec::new()
        } else {
            vec![body]
        };
        for answer in &messages {
            self.learn_version(answer);
        }
        Ok(messages)
    }

    fn learn_version(&self, answer: &str) {
        let Ok(value) = serde_json::from_str::<Value>(answer) else {
            return;
        };
        if let Some(version) = value["result"]["protocolVersion"].as_str() {
            *self.version.lock().unwrap_or_else(|e| e.into_inner()) = Some(version.to_owned());
        }
    }
}

/// The `data:` of each event of an event stream (multi-line data joined with newlines).
fn events(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    for event in body.split("\n\n") {
        let data: Vec<&str> = event
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        if !data.is_empty() && !data.iter().all(|d| d.trim().is_empty()) {
            out.push(data.join("\n"));
        }
    }
    out
}

/// Carries `input` to the server at `url` and its answers to `output` until `input` ends and
/// every message in flight is answered.
pub async fn run(
    url: &str,
    token: &str,
    input: impl AsyncRead + Unpin,
    output: impl AsyncWrite + Unpin + Send + 'static,
) -> Result<(), PostError> {
    let poster = Arc::new(Poster::new(url, token)?);
    let (lines, mut to_write) = tokio::sync::mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        let mut output = output;
        while let Some(line) = to_write.recv().await {
            let written = async {
                output.write_all(line.as_bytes()).await?;
                output.write_all(b"\n").await?;
                output.flush().await
            };
            if written.await.is_err() {
                return;
            }
        }
    });
    let mut input = BufReader::new(input).lines();
    let mut in_flight = tokio::task::JoinSet::new();
    while let Some(line) = input.next_line().await? {
        let line = line.trim().to_owned();
        if line.is_empty() {
            continue;
        }
        let (poster, lines) = (Arc::clone(&poster), lines.clone());
        in_flight.spawn(async move {
            match poster.post(&line).await {
                Ok(answers) => answers.into_iter().for_each(|a| drop(lines.send(a))),
                Err(e) => {
                    tracing::warn!("mcp-bridge: {e}");
                    if let Some(error) = error_answer(&line, &e) {
                        let _ = lines.send(error);
                    }
                }
            }
        });
    }
    while in_flight.join_next().await.is_some() {}
    drop(lines);
    let _ = writer.await;
    Ok(())
}

/// The JSON-RPC error that answers `line` when it is a request the server did not answer.
fn error_answer(line: &str, e: &PostError) -> Option<String> {
    let message: Value = serde_json::from_str(line).ok()?;
    let id = message
        .get("id")
        .filter(|_| message.get("method").is_some())?;
    Some(
        json!({"jsonrpc": "2.0", "id": id,
               "error": {"code": -32000, "message": format!("agentls: {e}")}})
        .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_events_and_refusals() {
        let poster = Poster::new("http://127.0.0.1:4000/mcp", "t").unwrap();
        assert_eq!(
            (poster.authority.as_str(), poster.path.as_str()),
            ("127.0.0.1:4000", "/mcp")
        );
        assert!(Poster::new("https://127.0.0.1:4000/mcp", "t").is_err());
        assert!(Poster::new("http://localhost/mcp", "t").is_err());
        let stream =
            "id: 1\ndata: {\"a\":1}\n\nevent: message\ndata: {\"b\":\ndata: 2}\n\ndata:\n\n";
        assert_eq!(events(stream), vec!["{\"a\":1}", "{\"b\":\n2}"]);
        let refused = PostError::Refused {
            status: StatusCode::UNAUTHORIZED,
            body: "wrong authorization token".into(),
        };
        let answer = error_answer(
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#,
            &refused,
        );
        let answer: Value = serde_json::from_str(&answer.unwrap()).unwrap();
        assert_eq!(answer["id"], 7);
        assert!(answer["error"]["message"].as_str().unwrap().contains("401"));
        assert!(
            error_answer(
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                &refused
            )
            .is_none()
        );
    }
}
