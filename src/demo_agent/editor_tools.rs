//! The demo agent's use of the MCP servers its session was given (the `@tools` prompt word): it
//! connects to each (over HTTP, or over stdio by running its command), lists the tools, calls
//! each of the editor's with arguments that fit, and says what it got, as a model would read it.
//! Its MCP client is the least that works: `initialize`, `tools/list`, `tools/call`, one
//! request at a time.

use std::path::Path;
use std::process::Stdio;

use agent_client_protocol::v1::schema::McpServer;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::mcp::bridge::Poster;

/// How much of each tool's answer the demo agent repeats.
const SHOWN_CHARS: usize = 600;

/// The tools it calls, in order, and whether each needs a file.
const CALLS: [(&str, bool); 7] = [
    ("getDiagnostics", false),
    ("getOpenEditors", false),
    ("getCurrentSelection", false),
    ("getLatestSelection", false),
    ("getWorkspaceFolders", false),
    ("checkDocumentDirty", true),
    ("openFile", true),
];

/// One connected MCP server.
struct Client {
    link: Link,
    next_id: u64,
}

enum Link {
    Http(Poster),
    Stdio(Box<Piped>),
}

/// An MCP server the demo agent runs as a child, and its pipes.
struct Piped {
    _child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl Client {
    async fn connect(server: &McpServer) -> Result<(Self, &'static str), String> {
        let (link, transport) = match server {
            McpServer::Http(http) => {
                let token = http
                    .headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case("authorization"))
                    .and_then(|h| h.value.strip_prefix("Bearer "))
                    .unwrap_or_default();
                let poster = Poster::new(&http.url, token).map_err(|e| e.to_string())?;
                (Link::Http(poster), "http")
            }
            McpServer::Stdio(stdio) => {
                let mut child = tokio::process::Command::new(&stdio.command)
                    .args(&stdio.args)
                    .envs(stdio.env.iter().map(|v| (&v.name, &v.value)))
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::inherit())
                    .kill_on_drop(true)
                    .spawn()
                    .map_err(|e| format!("cannot run {}: {e}", stdio.command.display()))?;
                let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                    return Err("no pipes to the MCP server".into());
                };
                let stdout = BufReader::new(stdout).lines();
                let link = Link::Stdio(Box::new(Piped {
                    _child: child,
                    stdin,
                    stdout,
                }));
                (link, "stdio")
            }
            _ => return Err("a transport the demo agent does not speak".into()),
        };
        let mut client = Self { link, next_id: 0 };
        let init = json!({"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "agentls-demo", "version": "1"}});
        client.request("initialize", init).await?;
        client
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        Ok((client, transport))
    }

    /// Sends `message`; returns what came back at once (HTTP answers in the same exchange).
    async fn send(&mut self, message: &Value) -> Result<Vec<String>, String> {
        let line = message.to_string();
        match &mut self.link {
            Link::Http(poster) => poster.post(&line).await.map_err(|e| e.to_string()),
            Link::Stdio(piped) => {
                let stdin = &mut piped.stdin;
                stdin
                    .write_all(format!("{line}\n").as_bytes())
                    .await
                    .map_err(|e| e.to_string())?;
                stdin.flush().await.map_err(|e| e.to_string())?;
                Ok(Vec::new())
            }
        }
    }

    async fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        let answers = self
            .send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        let mut answers = answers.into_iter();
        loop {
            let line = match &mut self.link {
                Link::Http(_) => answers.next(),
                Link::Stdio(piped) => piped.stdout.next_line().await.map_err(|e| e.to_string())?,
            };
            let Some(line) = line else {
                return Err(format!("no answer to {method}"));
            };
            let answer: Value = serde_json::from_str(&line).map_err(|e| e.to_string())?;
            if answer["id"] != id {
                continue;
            }
            if let Some(error) = answer.get("error") {
                return Err(error["message"].as_str().unwrap_or("error").to_owned());
            }
            return Ok(answer["result"].clone());
        }
    }

    async fn tools(&mut self) -> Result<Vec<String>, String> {
        let listed = self.request("tools/list", json!({})).await?;
        Ok(listed["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect())
    }

    async fn call(&mut self, name: &str, args: Value) -> Result<String, String> {
        let result = self
            .request("tools/call", json!({"name": name, "arguments": args}))
            .await?;
        let text: Vec<&str> = result["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|b| b["text"].as_str())
            .collect();
        let text = text.join("\n");
        if result["isError"] == true {
            Err(text)
        } else {
            Ok(text)
        }
    }
}

/// What the demo agent says after using the editor's tools of `servers` (`file`: the file the
/// prompt named, for the tools that take one).
pub async fn report(servers: &[McpServer], file: Option<&Path>) -> Vec<String> {
    if servers.is_empty() {
        return vec!["I was offered no editor tools.\n".into()];
    }
    let mut said = Vec::new();
    for server in servers {
        let (mut client, transport) = match Client::connect(server).await {
            Ok(connected) => connected,
            Err(e) => {
                said.push(format!("I could not use the editor tools: {e}\n"));
                continue;
            }
        };
        let tools = match client.tools().await {
            Ok(tools) => tools,
            Err(e) => {
                said.push(format!("The editor tools would not list: {e}\n"));
                continue;
            }
        };
        said.push(format!(
            "I was offered {} editor tools over {transport}: {}.\n",
            tools.len(),
            tools.join(", ")
        ));
        for (tool, needs_file) in CALLS {
            if !tools.iter().any(|t| t == tool) {
                continue;
            }
            let args = match (needs_file, file) {
                (false, _) => json!({}),
                (true, Some(file)) => json!({"filePath": file}),
                (true, None) => continue,
            };
            let line = match client.call(tool, args).await {
                Ok(text) => format!("editor tool {tool}: {}\n", shown(&text)),
                Err(e) => format!("editor tool {tool} failed: {}\n", shown(&e)),
            };
            said.push(line);
        }
    }
    said
}

fn shown(text: &str) -> String {
    let flat = text.replace('\n', " ");
    match flat.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}
