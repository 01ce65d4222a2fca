//! Comment prompts: a line comment holding the marker (`agent:` by default, `chat.commentMarker`)
//! is an instruction for the agent, where the code is. `// agent: handle the empty case` gets a
//! hint and the code action *Send to \<agent\>*, which sends the instruction with the code under
//! it; once the agent's change to the file is in, the comment goes.

use ropey::Rope;

/// The marker when the config names none.
pub const DEFAULT_MARKER: &str = "agent:";

/// How line comments start in the languages people write; the marker must follow one.
const COMMENT_STARTS: [&str; 8] = ["//", "#", "--", ";", "/*", "*", "<!--", "%"];

/// The most lines of code under a comment prompt sent along with it.
const MAX_CODE_LINES: usize = 40;

/// A comment prompt found on a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommentPrompt {
    /// Its line (0-based).
    pub line: usize,
    /// The line as written, without its line break: what goes once the change is in.
    pub comment: String,
    /// What it asks.
    pub instruction: String,
    /// The last line (0-based, inclusive) of the code it is about: up to the next blank line.
    pub code_end: usize,
}

/// The instruction of `line` when it is a comment prompt with `marker`: the marker follows a
/// comment start, and something follows the marker.
pub fn instruction(line: &str, marker: &str) -> Option<String> {
    if marker.is_empty() {
        return None;
    }
    let at = line.find(marker)?;
    let before = line[..at].trim_end();
    if !COMMENT_STARTS.iter().any(|start| before.ends_with(start)) {
        return None;
    }
    let said = line[at + marker.len()..].trim();
    let said = said.trim_end_matches("*/").trim_end_matches("-->").trim();
    (!said.is_empty()).then(|| said.to_owned())
}

/// The comment prompt on line `line` of `text`, if it is one.
pub fn at_line(text: &Rope, line: usize, marker: &str) -> Option<CommentPrompt> {
    let comment = line_text(text, line)?;
    let instruction = instruction(&comment, marker)?;
    let last = text.len_lines().saturating_sub(1);
    let code_end = (line + 1..=last.min(line + MAX_CODE_LINES))
        .take_while(|&i| line_text(text, i).is_some_and(|l| !l.trim().is_empty()))
        .last()
        .unwrap_or(line);
    Some(CommentPrompt {
        line,
        comment,
        instruction,
        code_end,
    })
}

/// Line `line` of `text` without its line break.
fn line_text(text: &Rope, line: usize) -> Option<String> {
    (line < text.len_lines()).then(|| {
        let mut l = text.line(line).to_string();
        let kept = l.trim_end_matches(['\n', '\r']).len();
        l.truncate(kept);
        l
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_after_a_comment_start_is_an_instruction() {
        let found = |line| instruction(line, DEFAULT_MARKER);
        assert_eq!(
            found("  // agent: handle empty input").unwrap(),
            "handle empty input"
        );
        assert_eq!(found("x = 1  # agent: name it").unwrap(), "name it");
        assert_eq!(found("/* agent: split this */").unwrap(), "split this");
        assert_eq!(found("<!-- agent: shorten -->").unwrap(), "shorten");
        assert_eq!(found("-- agent:use a join").unwrap(), "use a join");
        assert_eq!(found("let s = \"agent: not a comment\";"), None);
        assert_eq!(found("// agent:   "), None);
        assert_eq!(found("// nothing here"), None);
        assert_eq!(instruction("// ai! do it", "ai!").unwrap(), "do it");
    }

    #[test]
    fn a_comment_line_goes_whole_and_only_once() {
        let text = "a\n// agent: x\nb\n// agent: x\n";
        assert_eq!(
            without_line(text, "// agent: x").unwrap(),
            "a\nb\n// agent: x\n"
        );
        assert_eq!(without_line("a\n", "// agent: x"), None);
    }

    #[test]
    fn the_code_is_what_follows_up_to_a_blank_line() {
        let text = Rope::from_str("fn a() {}\n\n// agent: fix\nfn b() {\n}\n\nfn c() {}\n");
        let found = at_line(&text, 2, DEFAULT_MARKER).unwrap();
        assert_eq!(
            (found.line, found.code_end, found.comment.as_str()),
            (2, 4, "// agent: fix")
        );
        assert_eq!(at_line(&text, 0, DEFAULT_MARKER), None);
        let last = Rope::from_str("// agent: end");
        assert_eq!(at_line(&last, 0, DEFAULT_MARKER).unwrap().code_end, 0);
    }
}

impl super::state::State {
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
        range: super::position::Range,
        agent: &str,
    ) -> Option<super::actions::UserAction> {
        let line = range.start.line as usize;
        let found = self.comment_prompt(path, line)?;
        Some(super::actions::UserAction {
            title: format!("Send to {agent}: {}", found.instruction),
            command: super::actions::ActionCommand::SendComment {
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
                let Ok(text) = super::files::read(&path).await else {
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
        let mapper = super::position::PositionMapper::new(rope, self.encoding);
        let start = mapper.position(rope.line_to_char(line));
        let end = mapper.position(rope.line_to_char((line + 1).min(rope.len_lines())));
        let edit = super::effects::DocumentEdit {
            label: format!(
                "the comment prompt in {}",
                super::file_names::file_name(path)
            ),
            path: path.to_owned(),
            version: Some(doc.version()),
            edits: vec![super::effects::TextEdit {
                range: super::position::Range::new(start, end),
                new_text: String::new(),
            }],
        };
        let (reply, applied) = tokio::sync::oneshot::channel();
        self.effects
            .send(super::effects::Effect::ApplyEdit { edit, reply });
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

/// `text` without its first line saying exactly `line`, if it has one.
fn without_line(text: &str, line: &str) -> Option<String> {
    let mut start = 0;
    for piece in text.split_inclusive('\n') {
        if piece.trim_end_matches(['\n', '\r']) == line {
            return Some(format!(
                "{}{}",
                &text[..start],
                &text[start + piece.len()..]
            ));
        }
        start += piece.len();
    }
    None
}

/// How long after a change a document is looked through for comment prompts (coalesced).
const SCAN_AFTER: std::time::Duration = std::time::Duration::from_millis(300);

/// The comment prompts of each open document, as last looked for, and the looks due.
#[derive(Debug, Default)]
pub struct CommentHints {
    found: std::collections::HashMap<std::path::PathBuf, Vec<(usize, String)>>,
    due: std::collections::HashSet<std::path::PathBuf>,
}

/// The lines of `text` that are comment prompts with `marker`: (line, instruction). Only the
/// lines holding the marker are looked at.
pub fn find_all(text: &Rope, marker: &str) -> Vec<(usize, String)> {
    if marker.is_empty() {
        return Vec::new();
    }
    let mut lines = Vec::new();
    let mut offset = 0;
    for chunk in text.chunks() {
        for (at, _) in chunk.match_indices(marker) {
            let line = text.byte_to_line(offset + at);
            if lines.last() != Some(&line) {
                lines.push(line);
            }
        }
        offset += chunk.len();
    }
    lines
        .into_iter()
        .filter_map(|line| Some((line, instruction(&line_text(text, line)?, marker)?)))
        .collect()
}

impl CommentHints {
    /// `path` was closed: what was found in it goes.
    pub fn forget(&mut self, path: &std::path::Path) {
        self.found.remove(path);
    }
}

impl super::state::State {
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
    pub(super) fn scan_comment_prompts(&mut self, path: &std::path::Path) {
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
    pub fn comment_prompt_hints(&self, path: &std::path::Path) -> Vec<super::effects::Diagnostic> {
        let (Some(found), Some(doc)) =
            (self.comment_hints.found.get(path), self.documents.get(path))
        else {
            return Vec::new();
        };
        let mapper = super::position::PositionMapper::new(doc.rope(), self.encoding);
        found
            .iter()
            .map(|(line, instruction)| {
                let start = doc.rope().line_to_char(*line);
                let end = start + line_text(doc.rope(), *line).map_or(0, |l| l.chars().count());
                super::effects::Diagnostic {
                    range: super::position::Range::new(
                        mapper.position(start),
                        mapper.position(end),
                    ),
                    level: super::effects::Level::Log,
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
