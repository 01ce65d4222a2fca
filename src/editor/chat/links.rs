//! Links from a chat document to the hunks of a proposal: each hunk is a markdown link to its
//! file and line (`[notes.rs:3](file:///…/notes.rs#L3)`), which editors that render markdown
//! follow, and which `textDocument/definition` on its line follows in every editor (Helix `gd`,
//! Neovim `CTRL-]`).

use std::path::{Path, PathBuf};

use crate::editor::diff::line_hunks;
use crate::editor::file_names::file_name;

/// The most hunks of one file listed as links.
const MAX_LINKS: usize = 20;

/// One line per hunk between `before` and `after` of `path`: a link to where it starts, and
/// how many lines it removes and adds.
pub fn hunk_links(path: &Path, before: &str, after: &str) -> Vec<String> {
    let hunks = line_hunks(before, after);
    let uri = crate::file_uri::from_path(path);
    let name = file_name(path);
    let mut lines: Vec<String> = hunks
        .iter()
        .take(MAX_LINKS)
        .map(|hunk| {
            let line = hunk.old_lines.start + 1;
            let added = after[hunk.new.clone()].lines().count();
            let removed = hunk.old_lines.len();
            format!("- [{name}:{line}]({uri}#L{line}) (−{removed} +{added})")
        })
        .collect();
    if hunks.len() > MAX_LINKS {
        lines.push(format!("- … and {} more", hunks.len() - MAX_LINKS));
    }
    lines
}

/// The file and zero-based line of the link at char `column` of `line`, else of the only link
/// on it.
pub fn link_at(line: &str, column: usize) -> Option<(PathBuf, u32)> {
    let mut links = Vec::new();
    let mut rest = line;
    let mut offset = 0;
    while let Some(at) = rest.find("](file://") {
        let target = &rest[at + 2..];
        let Some(end) = target.find(')') else { break };
        let opening = line[..offset + at].rfind('[').unwrap_or(offset + at);
        let (uri, fragment) = target[..end]
            .split_once("#L")
            .unwrap_or((&target[..end], "1"));
        if let (Some(path), Ok(number)) = (crate::file_uri::to_path(uri), fragment.parse::<u32>()) {
            let span =
                line[..opening].chars().count()..=line[..offset + at + 2 + end].chars().count();
            links.push((span, path, number.saturating_sub(1)));
        }
        offset += at + 2 + end;
        rest = &line[offset..];
    }
    let at_cursor = links.iter().position(|(span, _, _)| span.contains(&column));
    let index = at_cursor.or((links.len() == 1).then_some(0))?;
    let (_, path, number) = links.swap_remove(index);
    Some((path, number))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_hunk_is_a_link_that_leads_to_its_line() {
        let before = "a\nb\nc\nd\ne\nf\ng\n";
        let after = "a\nB\nc\nd\ne\nf\nG\nG2\n";
        let links = hunk_links(Path::new("/ws/notes.rs"), before, after);
        assert_eq!(
            links,
            [
                "- [notes.rs:2](file:///ws/notes.rs#L2) (−1 +1)",
                "- [notes.rs:7](file:///ws/notes.rs#L7) (−1 +2)",
            ]
        );
        let line = format!("> {} and {}", &links[0][2..], &links[1][2..]);
        let target = |column| link_at(&line, column);
        assert_eq!(target(3), Some((PathBuf::from("/ws/notes.rs"), 1)));
        let second = line[..line.find("[notes.rs:7").unwrap()].chars().count();
        assert_eq!(target(second + 1), Some((PathBuf::from("/ws/notes.rs"), 6)));
        // Between two links: none; on a line with one: that one.
        assert_eq!(target(0), None);
        assert_eq!(
            link_at(&links[1], 0),
            Some((PathBuf::from("/ws/notes.rs"), 6))
        );
        assert_eq!(link_at("no link here", 3), None);
    }
}
