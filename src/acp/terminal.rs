//! `terminal/*`: commands the agent runs through agentls, each in its own process group in the
//! workspace (a working directory outside it is refused, as files are), with output captured (capped by `outputByteLimit`, else 1 MiB, never more than
//! 16 MiB; oldest bytes dropped first) and streamed to the editor's log.

use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt as _;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    CreateTerminalRequest, CreateTerminalResponse, KillTerminalRequest, KillTerminalResponse,
    ReleaseTerminalRequest, ReleaseTerminalResponse, TerminalExitStatus, TerminalId,
    TerminalOutputRequest, TerminalOutputResponse, WaitForTerminalExitRequest,
    WaitForTerminalExitResponse,
};
use agent_client_protocol::{Error, ErrorCode};
use tokio::io::{AsyncRead, AsyncReadExt as _};
use tokio::sync::watch;

use super::error::file_error;
use super::link::AgentLink;
use super::orphans;
use super::process::{ChildProcess, signal_name};
use crate::editor::{EditorAccess, Level};

/// The output kept of a command whose agent set no `outputByteLimit` (the newest bytes).
const DEFAULT_OUTPUT_LIMIT: usize = 1024 * 1024;
/// The most output kept of any command, whatever limit its agent asked for.
const MAX_OUTPUT_LIMIT: usize = 16 * 1024 * 1024;

/// How long output may keep draining after the command exited (a grandchild may hold the pipe).
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// The terminals of one agent connection.
#[derive(Debug, Default)]
pub struct Terminals {
    map: Mutex<HashMap<String, Arc<Terminal>>>,
}

/// One command the agent runs.
#[derive(Debug)]
struct Terminal {
    process: ChildProcess,
    output: Arc<Mutex<Output>>,
    drained: watch::Receiver<usize>,
}

#[derive(Debug, Default)]
struct Output {
    text: String,
    truncated: bool,
    limit: usize,
}

impl Output {
    fn push(&mut self, chunk: &str) {
        self.text.push_str(chunk);
        if self.text.len() > self.limit {
            let mut cut = self.text.len() - self.limit;
            while !self.text.is_char_boundary(cut) {
                cut += 1;
            }
            self.text.drain(..cut);
            self.truncated = true;
        }
    }
}

impl Terminals {
    /// Kills every terminal's process group and forgets them.
    pub fn kill_all(&self) {
        let all: Vec<_> = self.lock().drain().map(|(_, t)| t).collect();
        for terminal in all {
            terminal.process.signal_group(libc::SIGKILL);
        }
    }

    fn get(&self, id: &TerminalId) -> Result<Arc<Terminal>, Error> {
        self.lock().get(id.0.as_ref()).cloned().ok_or_else(|| {
            Error::new(
                ErrorCode::RESOURCE_NOT_FOUND,
                format!("no terminal `{id}` (released or never created)"),
            )
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Terminal>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `terminal/create`: starts the command, in the directory the agent named if the workspace
/// boundary allows it (the same one as for files), else in the agent's own.
pub async fn create(
    link: &AgentLink,
    request: CreateTerminalRequest,
) -> Result<CreateTerminalResponse, Error> {
    if let Some(cwd) = &request.cwd {
        link.editor.check_path(cwd).await.map_err(|e| {
            let mut error = file_error(&e);
            error.message = format!(
                "refused to run `{}` in that working directory: {}",
                request.command, error.message
            );
            error
        })?;
    }
    // The command sees the text the editor shows, unsaved agents' changes included.
    link.editor.write_buffer_only_changes(&link.agent).await;
    let cwd = request.cwd.clone().unwrap_or_else(|| link.cwd.clone());
    let mut command = tokio::process::Command::new(&request.command);
    command
        .args(&request.args)
        .envs(request.env.iter().map(|v| (&v.name, &v.value)))
        .current_dir(&cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let (mut child, own) = orphans::spawn(&mut command).map_err(|e| {
        let code = match e.kind() {
            std::io::ErrorKind::NotFound => ErrorCode::RESOURCE_NOT_FOUND,
            _ => ErrorCode::INTERNAL_ERROR,
        };
        Error::new(code, format!("cannot run `{}`: {e}", request.command))
    })?;
    let limit = request
        .output_byte_limit
        .map_or(DEFAULT_OUTPUT_LIMIT, |l| {
            usize::try_from(l).unwrap_or(usize::MAX)
        })
        .min(MAX_OUTPUT_LIMIT);
    let output = Arc::new(Mutex::new(Output {
        limit,
        ..Output::default()
    }));
    let (done, drained) = watch::channel(0usize);
    let done = Arc::new(done);
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let process = ChildProcess::watch(child, own);
    for pipe in [
        Box::new(stdout) as Box<dyn AsyncRead + Send + Unpin>,
        Box::new(stderr),
    ] {
        let (output, done, editor) = (Arc::clone(&output), Arc::clone(&done), link.editor.clone());
        tokio::spawn(async move {
            pump(pipe, &output, &editor).await;
            done.send_modify(|n| *n += 1);
        });
    }
    let id = format!("term-{}", link.next_id());
    link.editor.log(
        Level::Log,
        format!("\n$ {} {}\n", request.command, request.args.join(" ")),
    );
    link.terminals.lock().insert(
        id.clone(),
        Arc::new(Terminal {
            process,
            output,
            drained,
        }),
    );
    Ok(CreateTerminalResponse::new(id))
}

/// `terminal/output`: what it printed so far, and its exit status once it exited.
pub fn output(
    link: &AgentLink,
    request: TerminalOutputRequest,
) -> Result<TerminalOutputResponse, Error> {
    let terminal = link.terminals.get(&request.terminal_id)?;
    let output = terminal.output.lock().unwrap_or_else(|e| e.into_inner());
    Ok(
        TerminalOutputResponse::new(output.text.clone(), output.truncated)
            .exit_status(terminal.process.exited().map(exit_status)),
    )
}

/// `terminal/wait_for_exit`: waits for the command (and its output) to finish.
pub async fn wait_for_exit(
    link: &AgentLink,
    request: WaitForTerminalExitRequest,
) -> Result<WaitForTerminalExitResponse, Error> {
    let terminal = link.terminals.get(&request.terminal_id)?;
    let status = terminal.process.wait().await;
    let mut drained = terminal.drained.clone();
    let _ = tokio::time::timeout(DRAIN_GRACE, drained.wait_for(|n| *n >= 2)).await;
    Ok(WaitForTerminalExitResponse::new(exit_status(status)))
}

/// `terminal/kill`: kills the command's process group; the terminal stays readable.
pub fn kill(link: &AgentLink, request: KillTerminalRequest) -> Result<KillTerminalResponse, Error> {
    link.terminals
        .get(&request.terminal_id)?
        .process
        .signal_group(libc::SIGKILL);
    Ok(KillTerminalResponse::new())
}

/// `terminal/release`: kills the command if still running and forgets the terminal.
pub fn release(
    link: &AgentLink,
    request: ReleaseTerminalRequest,
) -> Result<ReleaseTerminalResponse, Error> {
    let terminal = link.terminals.get(&request.terminal_id)?;
    terminal.process.signal_group(libc::SIGKILL);
    link.terminals.lock().remove(request.terminal_id.0.as_ref());
    Ok(ReleaseTerminalResponse::new())
}

fn exit_status(status: ExitStatus) -> TerminalExitStatus {
    TerminalExitStatus::new()
        .exit_code(status.code().map(|c| c as u32))
        .signal(
            status
                .signal()
                .map(|s| signal_name(s).map_or_else(|| s.to_string(), str::to_owned)),
        )
}

async fn pump(mut pipe: impl AsyncRead + Unpin, output: &Mutex<Output>, editor: &EditorAccess) {
    let mut buffer = vec![0u8; 8192];
    let mut pending = Vec::new();
    loop {
        let n = match pipe.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        pending.extend_from_slice(&buffer[..n]);
        // Keep an incomplete UTF-8 sequence for the next read.
        let valid = match std::str::from_utf8(&pending) {
            Ok(_) => pending.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => pending.len(),
        };
        let chunk = String::from_utf8_lossy(&pending[..valid]).into_owned();
        pending.drain(..valid);
        output
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(&chunk);
        editor.log(Level::Log, chunk);
    }
    if !pending.is_empty() {
        let chunk = String::from_utf8_lossy(&pending).into_owned();
        output
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(&chunk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_keeps_the_newest_bytes_within_the_limit() {
        let mut output = Output {
            limit: 5,
            ..Output::default()
        };
        output.push("abc");
        assert!(!output.truncated);
        output.push("déf");
        assert_eq!(output.text, "cdéf");
        assert!(output.truncated);
    }
}
