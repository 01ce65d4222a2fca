//! Child processes agentls starts (agents and their terminals): spawned in their own process
//! group (registered as agentls's own, see `orphans`), reaped by a task that owns the `Child`, stderr kept line by line, and signalled as a
//! group so that grandchildren go too. Nothing about ACP here.

use std::collections::VecDeque;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, AsyncRead, BufReader};
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::watch;

use super::error::AgentFailure;
use super::orphans::{self, OwnChild};
use crate::config::AgentSpec;

/// How many stderr lines are kept for error messages.
const STDERR_LINES: usize = 20;
/// Longest stderr line kept (the log gets it whole).
const STDERR_LINE_CHARS: usize = 500;
/// The longest a death report waits for the rest of the agent's stderr.
const STDERR_GRACE: Duration = Duration::from_millis(500);

/// A running (or exited) process and what agentls keeps about it.
#[derive(Debug, Clone)]
pub struct ChildProcess {
    /// Its pid, which is also its process group id.
    pub pid: u32,
    exit: watch::Receiver<Option<ExitStatus>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    /// Set once its stderr reached its end (everything it wrote there is in `stderr`).
    stderr_read: Arc<watch::Sender<bool>>,
}

/// The pipes of an agent process.
#[derive(Debug)]
pub struct Pipes {
    /// Where requests go.
    pub stdin: ChildStdin,
    /// Where answers come from.
    pub stdout: ChildStdout,
}

/// Starts `spec` in `cwd` with piped stdio; stderr goes to the log as `agent` (and its last
/// lines stay with the process).
pub fn spawn_agent(
    agent: &str,
    spec: &AgentSpec,
    cwd: &Path,
) -> Result<(ChildProcess, Pipes), AgentFailure> {
    let mut command = Command::new(&spec.command);
    command
        .args(&spec.args)
        .envs(&spec.env)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let (mut child, own) = orphans::spawn(&mut command).map_err(|e| AgentFailure::SpawnFailed {
        command: spec.command.clone(),
        reason: e.to_string(),
    })?;
    let pipes = Pipes {
        stdin: child.stdin.take().expect("stdin is piped"),
        stdout: child.stdout.take().expect("stdout is piped"),
    };
    let stderr = child.stderr.take().expect("stderr is piped");
    let process = ChildProcess::watch(child, own);
    tokio::spawn(keep_stderr(
        agent.to_owned(),
        stderr,
        Arc::clone(&process.stderr),
        Arc::clone(&process.stderr_read),
    ));
    tracing::info!(agent, pid = process.pid, ?spec, cwd = %cwd.display(), "agent started");
    Ok((process, pipes))
}

impl ChildProcess {
    /// Takes ownership of `child` (started by [`orphans::spawn`], which gave `own`): a task
    /// reaps it and publishes its exit status.
    pub fn watch(mut child: tokio::process::Child, own: OwnChild) -> Self {
        let pid = child.id().unwrap_or(0);
        let (tx, exit) = watch::channel(None);
        tokio::spawn(async move {
            let status = child.wait().await;
            drop(own); // reaped: the pid is no longer ours
            let status = status.unwrap_or_else(|_| ExitStatus::from_raw(-1));
            let _ = tx.send(Some(status));
        });
        Self {
            pid,
            exit,
            stderr: Arc::default(),
            stderr_read: Arc::new(watch::channel(false).0),
        }
    }

    /// Its exit status, if it has exited.
    pub fn exited(&self) -> Option<ExitStatus> {
        *self.exit.borrow()
    }

    /// Waits until it has exited (and been reaped).
    pub async fn wait(&self) -> ExitStatus {
        let mut exit = self.exit.clone();
        match exit.wait_for(Option::is_some).await {
            Ok(status) => status.unwrap_or_else(|| ExitStatus::from_raw(-1)),
            Err(_) => ExitStatus::from_raw(-1),
        }
    }

    /// Waits at most `limit` for it to exit.
    pub async fn wait_for(&self, limit: Duration) -> Option<ExitStatus> {
        tokio::time::timeout(limit, self.wait()).await.ok()
    }

    /// The last lines it wrote to stderr.
    pub fn stderr_tail(&self) -> Vec<String> {
        let lines = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        lines.iter().cloned().collect()
    }

    /// Sends `signal` to its whole process group (harmless when it is gone).
    pub fn signal_group(&self, signal: i32) {
        if self.pid > 1 {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe {
                libc::kill(-(self.pid as i32), signal);
            }
        }
    }

    /// SIGTERM to the group, then SIGKILL after `grace`; waits until it is reaped.
    pub async fn terminate(&self, grace: Duration) -> ExitStatus {
        if let Some(status) = self.exited() {
            self.signal_group(libc::SIGKILL);
            return status;
        }
        self.signal_group(libc::SIGTERM);
        if let Some(status) = self.wait_for(grace).await {
            self.signal_group(libc::SIGKILL);
            return status;
        }
        self.signal_group(libc::SIGKILL);
        self.wait().await
    }

    /// The failure to report for its exit, with the last lines it wrote to stderr, read to
    /// their end first (the exit status may come before the reader has the last line; a
    /// descendant holding the pipe open delays it by `STDERR_GRACE` at most).
    pub async fn died(&self, status: ExitStatus) -> AgentFailure {
        let mut read = self.stderr_read.subscribe();
        let _ = tokio::time::timeout(STDERR_GRACE, read.wait_for(|done| *done)).await;
        AgentFailure::ProcessDied {
            status: describe_status(status),
            stderr: self.stderr_tail(),
        }
    }
}

/// "exit code 3", "killed by signal 9 (SIGKILL)".
pub fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => match signal_name(signal) {
            Some(name) => format!("killed by signal {signal} ({name})"),
            None => format!("killed by signal {signal}"),
        },
        (None, None) => "unknown status".into(),
    }
}

/// The usual name of a signal number.
pub fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGABRT => "SIGABRT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => return None,
    })
}

async fn keep_stderr(
    agent: String,
    stderr: impl AsyncRead + Unpin,
    tail: Arc<Mutex<VecDeque<String>>>,
    read: Arc<watch::Sender<bool>>,
) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => {
                read.send_replace(true);
                break;
            }
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end();
        tracing::info!(agent = %agent, "stderr: {text}");
        let kept: String = text.chars().take(STDERR_LINE_CHARS).collect();
        let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
        if tail.len() == STDERR_LINES {
            tail.pop_front();
        }
        tail.push_back(kept);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stderr_tail_and_exit_status_are_kept() {
        let spec = AgentSpec {
            command: "sh".into(),
            args: vec![
                "-c".into(),
                "for i in $(seq 1 30); do echo line$i >&2; done; exit 3".into(),
            ],
            ..AgentSpec::default()
        };
        let (process, _pipes) = spawn_agent("t", &spec, Path::new("/")).unwrap();
        let status = process.wait().await;
        assert_eq!(describe_status(status), "exit code 3");
        // The failure has the whole tail, though the exit may come before its last line.
        let AgentFailure::ProcessDied { status, stderr } = process.died(status).await else {
            panic!("not a death");
        };
        assert_eq!(status, "exit code 3");
        assert_eq!(stderr.len(), STDERR_LINES);
        assert_eq!(stderr.last().unwrap(), "line30");
    }

    #[tokio::test]
    async fn terminate_kills_the_group_and_reaps() {
        let spec = AgentSpec {
            command: "sh".into(),
            args: vec![
                "-c".into(),
                "trap '' TERM; sleep 30 & echo ready; wait".into(),
            ],
            ..AgentSpec::default()
        };
        let (process, pipes) = spawn_agent("t", &spec, Path::new("/")).unwrap();
        // Signal only once the shell ignores SIGTERM.
        let mut ready = String::new();
        tokio::io::BufReader::new(pipes.stdout)
            .read_line(&mut ready)
            .await
            .unwrap();
        assert_eq!(ready, "ready\n");
        let status = process.terminate(Duration::from_millis(100)).await;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
    }

    #[test]
    fn a_missing_program_is_a_spawn_failure() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let spec = AgentSpec {
                command: "/nonexistent/agent".into(),
                ..AgentSpec::default()
            };
            let err = spawn_agent("t", &spec, Path::new("/")).unwrap_err();
            assert_eq!(err.class(), "spawn failed");
        });
    }
}
