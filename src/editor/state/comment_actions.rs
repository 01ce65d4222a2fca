//! What the state task does with comment prompts: finds them in open documents (a hint on each,
//! a while after the user stops typing), offers sending one as a code action, and takes the
//! comment out of the buffer once it went to the agent.

use super::State;
use crate::editor::chat::comment_prompt::{
    CommentPrompt, at_line, find_all, line_text, without_line,
};

/// How long after a change a document is looked through for comment prompts (coalesced).
const SCAN_AFTER: std::time::Duration = std::time::Duration::from_millis(300);

impl State {
    /// The comment prompt on line `line` of the open file `path` (not a chat), with the
    /// configured marker.
    pub fn comment_prompt(&self, path: &std::path::Path, line: usize) -> Option<CommentPrompt> {
        if self.chats.agent_of(path).is_some() {
            return None;
        }
        at_line(self.documents.get(path)?.rope(), line, &self.comment_marker)
    }

    /// *Send to `agent`* on a comment prompt under the cursor (the range's first line).
    pub fn comment_action(
        &self,
        path: &std::path::Path,
        range: crate::editor::documents::position::Range,
        agent: &str,
    ) -> Option<crate::editor::actions::UserAction> {
        let line = range.start.line as usize;
        let found = self.comment_prompt(path, line)?;
        Some(crate::editor::actions::UserAction {
            title: format!("Send to {agent}: {}", found.instruction),
            command: crate::editor::actions::ActionCommand::SendComment {
                agent: agent.to_owned(),
                path: path.to_owned(),
                line,
            },
        })
    }

    /// The comment prompt `comment` was answered with a change to `path`: its line goes (the
    /// first line saying exactly that, in the buffer where the file is open, else on disk).
    /// Gone already (the agent took it out, the user edited it): nothing happens. An edit the
    /// editor refuses goes once more when `retry`.
    pub fn remove_comment(&mut self, path: &std::path::Path, comment: &str, retry: bool) {
        let Some(doc) = self.documents.get(path) else {
            let (me, path, comment) = (self.me.clone(), path.to_owned(), comment.to_owned());
            tokio::spawn(async move {
                let Ok(text) = crate::editor::disk::files::read(&path).await else {
                    return;
                };
                if let Some(without) = without_line(&text, &comment) {
                    let _ = me.write_file(&path, &without).await;
                }
            });
            return;
        };
        let rope = doc.rope();
        let Some(line) =
            (0..rope.len_lines()).find(|&i| line_text(rope, i).is_some_and(|l| l == comment))
        else {
            return;
        };
        let mapper = crate::editor::documents::position::PositionMapper::new(rope, self.encoding);
        let start = mapper.position(rope.line_to_char(line));
        let end = mapper.position(rope.line_to_char((line + 1).min(rope.len_lines())));
        let edit = crate::editor::documents::effects::DocumentEdit {
            label: format!(
                "the comment prompt in {}",
                crate::editor::file_names::file_name(path)
            ),
            path: path.to_owned(),
            version: Some(doc.version()),
            edits: vec![crate::editor::documents::effects::TextEdit {
                range: crate::editor::documents::position::Range::new(start, end),
                new_text: String::new(),
            }],
        };
        let (reply, applied) = tokio::sync::oneshot::channel();
        self.effects
            .send(crate::editor::documents::effects::Effect::ApplyEdit { edit, reply });
        // Refused because the buffer moved on meanwhile (the accepted change landing): once
        // more, on the buffer as it is then.
        let (me, path, comment) = (self.me.clone(), path.to_owned(), comment.to_owned());
        tokio::spawn(async move {
            if !matches!(applied.await, Ok(Ok(()))) && retry {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                me.report(super::reports::Report::CommentRemovalRefused { path, comment });
            }
        });
    }
}

impl State {
    /// `path` changed (or opened): it is looked through for comment prompts soon.
    pub fn comment_hints_due(&mut self, path: &std::path::Path) {
        if self.chats.agent_of(path).is_some() || !self.comment_hints.due.insert(path.to_owned()) {
            return;
        }
        let (me, path) = (self.me.clone(), path.to_owned());
        tokio::spawn(async move {
            tokio::time::sleep(SCAN_AFTER).await;
            me.report(super::reports::Report::CommentScanDue(path));
        });
    }

    /// Looks `path` through; when its comment prompts changed, its diagnostics go out again.
    /// A chat (known as one since the scan was due: a reopened chat is) has none.
    pub(in crate::editor) fn scan_comment_prompts(&mut self, path: &std::path::Path) {
        self.comment_hints.due.remove(path);
        let found = match self.documents.get(path) {
            Some(doc) if self.chats.agent_of(path).is_none() => {
                find_all(doc.rope(), &self.comment_marker)
            }
            _ => Vec::new(),
        };
        let before = self
            .comment_hints
            .found
            .get(path)
            .map_or(&[][..], Vec::as_slice);
        if before == found.as_slice() {
            return;
        }
        if found.is_empty() {
            self.comment_hints.found.remove(path);
        } else {
            self.comment_hints.found.insert(path.to_owned(), found);
        }
        self.publish_diagnostics(path);
    }

    /// A hint on each comment prompt of `path`: how to send it.
    pub fn comment_prompt_hints(
        &self,
        path: &std::path::Path,
    ) -> Vec<crate::editor::documents::effects::Diagnostic> {
        let (Some(found), Some(doc)) =
            (self.comment_hints.found.get(path), self.documents.get(path))
        else {
            return Vec::new();
        };
        let mapper =
            crate::editor::documents::position::PositionMapper::new(doc.rope(), self.encoding);
        found
            .iter()
            .map(|(line, instruction)| {
                let start = doc.rope().line_to_char(*line);
                let end = start + line_text(doc.rope(), *line).map_or(0, |l| l.chars().count());
                crate::editor::documents::effects::Diagnostic {
                    range: crate::editor::documents::position::Range::new(
                        mapper.position(start),
                        mapper.position(end),
                    ),
                    level: crate::editor::documents::effects::Level::Log,
                    message: format!(
                        "comment prompt: the code action *Send to …* on this line sends \
                         {instruction:?} to the agent"
                    ),
                    code: None,
                    source: Some("agentls".to_owned()),
                }
            })
            .collect()
    }
}
