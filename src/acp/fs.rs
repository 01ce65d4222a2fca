//! `fs/read_text_file` and `fs/write_text_file`, served through the port (which enforces the
//! workspace boundary). A write never silently clobbers the user's unsaved edits: agentls
//! remembers what the agent last read of each file and, when the buffer changed since, merges the
//! agent's text into the user's three-way; overlapping changes are refused.

use agent_client_protocol::Error;
use agent_client_protocol::v1::schema::{
    ReadTextFileRequest, ReadTextFileResponse, WriteTextFileRequest, WriteTextFileResponse,
};
use serde_json::json;

use super::error::{EDIT_CONFLICT, file_error, write_error};
use super::link::AgentLink;
use crate::editor::{Level, diff, file_name, files, select_lines};

/// Serves `fs/read_text_file`: the open buffer's text, else the disk; `line`/`limit` honoured.
pub async fn read(
    link: &AgentLink,
    request: ReadTextFileRequest,
) -> Result<ReadTextFileResponse, Error> {
    let path = request.path;
    let whole = match link.editor.read_text_file(&path, None, None).await {
        Ok(text) => text,
        // Inside the workspace a missing file reads as empty: agents check before creating a
        // file, and some (Gemini CLI) cannot create one at all when this read fails.
        Err(e) if e.is_not_found() => String::new(),
        Err(e) => return Err(file_error(&e)),
    };
    let content = select_lines(&whole, request.line, request.limit);
    link.with_session(&request.session_id.0, |s| s.reads.insert(path, whole));
    Ok(ReadTextFileResponse::new(content))
}

/// Serves `fs/write_text_file` through the editor (minimal edits to an open buffer, then disk).
pub async fn write(
    link: &AgentLink,
    request: WriteTextFileRequest,
) -> Result<WriteTextFileResponse, Error> {
    let (path, new) = (&request.path, request.content);
    let session = request.session_id.0.as_ref();
    let base = link
        .with_session(session, |s| s.reads.get(path).cloned())
        .flatten();
    let current = match link.editor.read_text_file(path, None, None).await {
        Ok(text) => Some(text),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(file_error(&e)),
    };
    // The agent writes the very proposal the user reviewed: the file already holds what the
    // user accepted (perhaps only some hunks), so that is what gets written.
    let accepted = link
        .with_session(session, |s| match s.accepted.get(path) {
            Some((proposal, _)) if *proposal == new => s.accepted.remove(path),
            _ => None,
        })
        .flatten();
    if let Some((_, accepted_text)) = accepted {
        // The port turns the whole proposal into exactly the accepted hunks on disk and leaves
        // the buffer (accepted hunks plus the user's own edits) as it is.
        write_through(link, path, &new).await?;
        remember(link, session, path, current.unwrap_or(accepted_text));
        return Ok(WriteTextFileResponse::new());
    }
    let base = match (&base, &current) {
        (Some(base), _) => Some(base.clone()),
        // The agent never read it: it worked from the disk, and the buffer may differ.
        (None, Some(_)) => files::read(path).await.ok(),
        (None, None) => None,
    };
    let content = match (base, current) {
        (Some(base), Some(current)) if base != current => {
            match diff::merge3(&base, &current, &new) {
                Some(merged) => merged,
                None => {
                    let file = file_name(path);
                    link.editor.tell_user(
                        Level::Warning,
                        format!(
                            "{}: refused its write to {file}: you changed the same lines since \
                             it read the file; your edits are kept",
                            link.agent
                        ),
                    );
                    return Err(Error::new(
                        EDIT_CONFLICT,
                        format!(
                            "{}: the user edited the same lines since you read this file; \
                             the write was refused. Read the file again and redo the change.",
                            path.display()
                        ),
                    )
                    .data(json!({"path": path, "reason": "conflict_with_user_edits"})));
                }
            }
        }
        _ => new,
    };
    write_through(link, path, &content).await?;
    remember(link, session, path, content);
    Ok(WriteTextFileResponse::new())
}

async fn write_through(
    link: &AgentLink,
    path: &std::path::Path,
    content: &str,
) -> Result<(), Error> {
    link.editor
        .write_text_file(path, content)
        .await
        .map_err(|e| write_error(&e))
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
