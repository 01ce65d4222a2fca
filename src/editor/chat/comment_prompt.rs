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
pub(in crate::editor) fn line_text(text: &Rope, line: usize) -> Option<String> {
    (line < text.len_lines()).then(|| {
        let mut l = text.line(line).to_string();
        let kept = l.trim_end_matches(['\n', '\r']).len();
        l.truncate(kept);
        l
    })
}

/// `text` without its first line saying exactly `line`, if it has one.
pub(in crate::editor) fn without_line(text: &str, line: &str) -> Option<String> {
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

/// The comment prompts of each open document, as last looked for, and the looks due.
#[derive(Debug, Default)]
pub struct CommentHints {
    pub(in crate::editor) found:
        std::collections::HashMap<std::path::PathBuf, Vec<(usize, String)>>,
    pub(in crate::editor) due: std::collections::HashSet<std::path::PathBuf>,
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
