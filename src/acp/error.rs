//! The ACP adapter's errors, one enum per boundary: [`AgentFailure`] for starting and talking to
//! an agent process (each variant a class the user sees), and [`file_error`] / [`write_error`]
//! for turning the port's errors into the JSON-RPC errors an agent receives.

use agent_client_protocol::{Error, ErrorCode};
use serde_json::json;

use crate::editor::{FileError, WriteError};

/// JSON-RPC code for a path the agent may not touch (server-defined range).
pub const ACCESS_DENIED: i32 = -32003;
/// JSON-RPC code for a write refused because it would clobber the user's unsaved edits.
pub const EDIT_CONFLICT: i32 = -32004;

/// Why an agent could not do what was asked; the variant is the class of failure.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AgentFailure {
    /// No agent by that name is configured.
    #[error("no agent named `{0}` is configured")]
    UnknownAgent(String),
    /// The process could not be started.
    #[error("spawn failed: could not start `{command}`: {reason}")]
    SpawnFailed {
        /// The program.
        command: String,
        /// What the OS said.
        reason: String,
    },
    /// The process exited (or was killed) while agentls needed it.
    #[error("process died ({status}){}", stderr_tail(.stderr))]
    ProcessDied {
        /// "exit code 3" or "killed by signal 9 (SIGKILL)".
        status: String,
        /// Its last stderr lines.
        stderr: Vec<String>,
    },
    /// The agent broke the protocol (bad frames, impossible answers, a closed connection).
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The agent did not answer in time.
    #[error("timeout: no answer to {what} within {secs} s")]
    Timeout {
        /// The request.
        what: &'static str,
        /// How long agentls waited.
        secs: u64,
    },
    /// The agent wants the user to log in first.
    #[error("authentication required: {0}")]
    AuthRequired(String),
    /// The agent answered a request with an error.
    #[error("the agent reported an error: {0}")]
    Agent(String),
    /// agentls is shutting down and starts no agent.
    #[error("agentls is shutting down")]
    ShuttingDown,
    /// What was asked is not something this agent offers (a mode it does not have).
    #[error("{0}")]
    NotOffered(String),
}

impl AgentFailure {
    /// The short class name shown in summaries and `agentls.status`.
    pub fn class(&self) -> &'static str {
        match self {
            Self::UnknownAgent(_) => "unknown agent",
            Self::SpawnFailed { .. } => "spawn failed",
            Self::ProcessDied { .. } => "process died",
            Self::Protocol(_) => "protocol error",
            Self::Timeout { .. } => "timeout",
            Self::AuthRequired(_) => "authentication required",
            Self::Agent(_) => "agent error",
            Self::ShuttingDown => "shutting down",
            Self::NotOffered(_) => "not offered",
        }
    }

    /// A failure from an agent's error answer that is not about the connection.
    pub fn from_answer(error: &Error) -> Self {
        let code = error.code.value();
        if code == ErrorCode::PARSE_ERROR.value() || code == ErrorCode::INVALID_REQUEST.value() {
            Self::Protocol(describe(error))
        } else {
            Self::Agent(describe(error))
        }
    }
}

/// An ACP error as one line: its message, and its data when that says more.
pub fn describe(error: &Error) -> String {
    match &error.data {
        Some(data) if !data.is_null() => format!("{} ({data})", error.message),
        _ => error.message.clone(),
    }
}

/// The last few stderr lines, shortened, for a one-line message (`agentls.status` and the log
/// keep more).
fn stderr_tail(lines: &[String]) -> String {
    const SHOWN: usize = 3;
    const CHARS: usize = 200;
    if lines.is_empty() {
        return String::new();
    }
    let shown: Vec<String> = lines[lines.len().saturating_sub(SHOWN)..]
        .iter()
        .map(|line| {
            let mut short: String = line.chars().take(CHARS).collect();
            if short.len() < line.len() {
                short.push('…');
            }
            short
        })
        .collect();
    format!("; last stderr: {}", shown.join(" ⏎ "))
}

/// The error an agent receives when the port refused a file operation.
pub fn file_error(error: &FileError) -> Error {
    let message = error.to_string();
    match error {
        FileError::NotAbsolute(path) => Error::new(ErrorCode::INVALID_PARAMS, message)
            .data(json!({"path": path, "reason": "not_absolute"})),
        FileError::OutsideWorkspace(path) => Error::new(ACCESS_DENIED, message)
            .data(json!({"path": path, "reason": "outside_workspace"})),
        FileError::ReadOnly(path) => {
            Error::new(ACCESS_DENIED, message).data(json!({"path": path, "reason": "read_only"}))
        }
        FileError::Io { path, .. } if error.is_not_found() => {
            Error::new(ErrorCode::RESOURCE_NOT_FOUND, message)
                .data(json!({"path": path, "reason": "not_found"}))
        }
        FileError::Io { path, .. } => Error::new(ErrorCode::INTERNAL_ERROR, message)
            .data(json!({"path": path, "reason": "io"})),
    }
}

/// The error an agent receives when a write through the editor failed.
pub fn write_error(error: &WriteError) -> Error {
    match error {
        WriteError::File(e) => file_error(e),
        WriteError::Editor { path, source } => Error::new(
            ErrorCode::INTERNAL_ERROR,
            format!(
                "the editor did not apply the edit to {}: {source}",
                path.display()
            ),
        )
        .data(json!({"path": path, "reason": "editor"})),
        WriteError::Conflict(path) => Error::new(EDIT_CONFLICT, error.to_string())
            .data(json!({"path": path, "reason": "conflict_with_user_edits"})),
        WriteError::NotAccepted(why) => Error::new(EDIT_CONFLICT, why.clone())
            .data(json!({"reason": "not_the_accepted_change"})),
        WriteError::Gone(e) => Error::new(ErrorCode::INTERNAL_ERROR, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn file_errors_keep_their_class_on_the_wire() {
        let outside = file_error(&FileError::OutsideWorkspace(PathBuf::from("/etc/passwd")));
        assert_eq!(outside.code.value(), ACCESS_DENIED);
        assert!(outside.message.contains("outside the workspace"));
        let missing = file_error(&FileError::Io {
            path: PathBuf::from("/ws/x"),
            source: std::io::ErrorKind::NotFound.into(),
        });
        assert_eq!(missing.code, ErrorCode::RESOURCE_NOT_FOUND);
        let relative = file_error(&FileError::NotAbsolute(PathBuf::from("x")));
        assert_eq!(relative.code, ErrorCode::INVALID_PARAMS);
    }

    #[test]
    fn failures_name_their_class() {
        let died = AgentFailure::ProcessDied {
            status: "exit code 3".into(),
            stderr: vec!["boom".into()],
        };
        assert_eq!(died.class(), "process died");
        assert_eq!(
            died.to_string(),
            "process died (exit code 3); last stderr: boom"
        );
    }
}
