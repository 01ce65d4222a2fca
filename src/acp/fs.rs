//! `fs/read_text_file` and `fs/write_text_file`, served through the port (which enforces the
//! workspace boundary). A write never silently clobbers the user's unsaved edits: agentls
//! remembers what the agent last read of each file and, when the buffer changed since, merges the
//! agent's text into the user's three-way; overlapping changes are refused, and so is a write to a
//! read-only file (the user is told either way).

use agent_client_protocol::Error;
use agent_client_protocol::v1::schema::{
    ReadTextFileRequest, ReadTextFileResponse, WriteTextFileRequest, WriteTextFileResponse,
};

use super::error::{file_error, write_error};
use super::link::AgentLink;
use crate::editor::{FileError, Level, WriteError, file_name, select_lines};

/// Serves `fs/read_text_file`: the open buffer's text, else the disk; `line`/`limit` honoured.
pub async fn read(
    link: &AgentLink,
    request: ReadTextFileRequest,
) -> Result<ReadTextFileResponse, Error> {
    let path = request.path;
    let origin = link.origin(&request.session_id.0);
    let whole = match link.editor.read_text_file(&path, None, None).await {
        Ok(text) => {
            link.editor.agent_read(&origin, &path, Some(&text));
            text
        }
        // Inside the workspace a missing file reads as empty: agents check before creating a
        // file, and some (Gemini CLI) cannot create one at all when this read fails.
        Err(e) if e.is_not_found() => {
            link.editor.agent_read(&origin, &path, None);
            String::new()
        }
        Err(e) => return Err(file_error(&e)),
    };
    let content = select_lines(&whole, request.line, request.limit);
    link.with_session(&request.session_id.0, |s| s.reads.insert(path, whole));
    Ok(ReadTextFileResponse::new(content))
}

/// Serves `fs/write_text_file` through the port: minimal edits to an open buffer, then disk;
/// the user's edits since the agent's last read are merged in, overlapping ones refuse the write;
/// a write of a reviewed proposal lands as exactly what the user accepted.
pub async fn write(
    link: &AgentLink,
    request: WriteTextFileRequest,
) -> Result<WriteTextFileResponse, Error> {
    let path = &request.path;
    let session = request.session_id.0.as_ref();
    let base = link
        .with_session(session, |s| s.reads.get(path).cloned())
        .flatten();
    match link
        .editor
        .write_text_file(
            &link.origin(session),
            path,
            &request.content,
            base.as_deref(),
        )
        .await
    {
        Ok(written) => {
            if let Some(before) = written.unasked_over {
                // Nobody asked the user: the change is shown after the fact, for Keep/Undo.
                let origin = link.origin(session);
                let after = written.text.clone();
                link.editor.show_landed(&origin, path, before, after);
                link.with_session(session, |s| {
                    if let Some(turn) = s.turn.as_mut() {
                        turn.unasked.insert(path.to_path_buf());
                    }
                });
            }
            remember(link, session, path, written.text);
            Ok(WriteTextFileResponse::new())
        }
        Err(e) => {
            let why = match &e {
                WriteError::Conflict(_) => {
                    Some("you changed the same lines since it read the file; your edits are kept")
                }
                WriteError::File(FileError::ReadOnly(_)) => {
                    Some("the file is read-only; it was left as it is")
                }
                _ => None,
            };
            if let Some(why) = why {
                let (agent, file) = (&link.agent, file_name(path));
                link.editor.tell_user(
                    Level::Warning,
                    format!("{agent}: refused its write to {file}: {why}"),
                );
            }
            Err(write_error(&e))
        }
    }
}

/// Remembers `content` as what the agent knows of the file, and the file as touched this turn.
fn remember(link: &AgentLink, session: &str, path: &std::path::Path, content: String) {
    link.with_session(session, |s| {
        s.reads.insert(path.to_path_buf(), content);
        if let Some(turn) = s.turn.as_mut() {
            turn.files.insert(path.to_path_buf());
        }
    });
}
