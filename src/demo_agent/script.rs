//! The demo agent's prompt language, with no I/O: which file a prompt is about, what to do to
//! it, and the test hooks (`@noise`, `@bigline`, `@hang`, `@deaf`, `@crash`, `@ask`,
//! `@run COMMAND…`, `@cwd DIR`, `@withdraw MS`, `@flood N`, `@chunk BYTES`, `@pace MS`,
//! `@split`, `@also FILE`,
//! `@late`, `@snippet`, `@askaftercancel [MS]`, `@diffearlier`, `@diskwrite`, `@unasked`,
//! `@writemore`, `@blind`, `@tools`, `@timed`).
//!
//! - `uppercase <file>`: uppercase the lines that contain `TODO` (every line if none does);
//! - `sort <file>`: sort the lines;
//! - `read <file>` (or any other text naming a file): read it and say how long it is;
//! - `@tools [file]`: call each of the editor's tools agentls offered the session, and say what
//!   each answered.
//!
//! The file is the prompt's `resource` / `resource_link`, else the first word that names an
//! existing file (absolute, or relative to the agent's working directory).

use std::path::{Path, PathBuf};

/// What the user asked for.
/// What `/help` answers.
pub const HELP: &str = "I edit the file you name (`uppercase notes.txt`, `read notes.txt`). Words \
that change what I do: @snippet, @diskwrite, @unasked, @writemore, @also <file>, @run <command>, \
@cwd <dir>, @ask, @hang, @flood <n>, @chunk <bytes>, @tools (use the editor's tools).\n";

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Script {
    /// `/help`: list what it understands, nothing else.
    pub help: bool,
    /// The change to make.
    pub action: Action,
    /// The file it is about.
    pub path: Option<PathBuf>,
    /// Print a non-JSON line on stdout first.
    pub noise: bool,
    /// Send a 10 MB message chunk and a 10 MB non-JSON line.
    pub big_line: bool,
    /// Stream a line, then wait until cancelled.
    pub hang: bool,
    /// Stream a line, then wait forever, ignoring `session/cancel`.
    pub deaf: bool,
    /// Stream a line, then exit with code 3.
    pub crash: bool,
    /// Ask a permission without a diff, then run a command in a terminal if allowed.
    pub ask: bool,
    /// Like `ask`, with this command (the rest of the prompt) and no output limit.
    pub run: Option<Vec<String>>,
    /// The working directory to ask for the command's terminal (else agentls picks).
    pub cwd: Option<PathBuf>,
    /// More files to change the same way, proposed in the same permission request.
    pub also: Vec<PathBuf>,
    /// After answering the prompt, send a tool call and an update of it.
    pub late: bool,
    /// Stream a line, wait for `session/cancel` but go on: after this long, ask a question, say
    /// how it was answered, end the turn.
    pub ask_after_cancel: Option<std::time::Duration>,
    /// Send the diffs with the tool call only, not again in the permission request.
    pub diff_earlier: bool,
    /// Propose only the changed lines (old and new fragment), as edit tools of some agents do.
    pub snippet: bool,
    /// Once allowed, read the disk and write the change straight to it (as agents whose edit
    /// tools bypass `fs/*` do), instead of through `fs/read_text_file` / `fs/write_text_file`.
    pub disk_write: bool,
    /// Write the change without asking for permission (as agents in an auto mode do).
    pub unasked: bool,
    /// Once allowed, write more than it proposed (a line it never showed).
    pub write_more: bool,
    /// Read the file from the disk (not through `fs/read_text_file`), propose the whole new file
    /// with no old text, and once allowed write the whole file: a write tool that replaces a
    /// file it never read through the editor.
    pub blind: bool,
    /// Send this many extra message chunks.
    pub flood: usize,
    /// Take the proposal back (cancel the permission request) after this long unanswered.
    pub withdraw_after: Option<std::time::Duration>,
    /// The size of each flood chunk in bytes (0: just `chunk <n>\n`).
    pub chunk_bytes: usize,
    /// The pause before each flood chunk after the first (a reply that streams for a while).
    pub pace: std::time::Duration,
    /// Send each flood chunk in two pieces, the pace between them: a line that arrives in parts.
    pub split: bool,
    /// Call each of the editor's tools the session was offered (over MCP) and say what they
    /// answered, instead of editing.
    pub tools: bool,
    /// Say how long the edit's permission request took, from sending it to reading its answer
    /// (for benches).
    pub timed: bool,
}

/// A deterministic change to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Action {
    /// Read only.
    #[default]
    Read,
    /// Uppercase `TODO` lines (all lines if none).
    Uppercase,
    /// Sort the lines.
    Sort,
}

impl Action {
    /// What the action does, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Uppercase => "uppercase the TODO lines of",
            Self::Sort => "sort the lines of",
        }
    }

    /// The new text, or `None` when the action changes nothing.
    pub fn apply(self, text: &str) -> Option<String> {
        let new = match self {
            Self::Read => return None,
            Self::Uppercase => {
                let any_todo = text.lines().any(|l| l.contains("TODO"));
                text.split_inclusive('\n')
                    .map(|line| {
                        if !any_todo || line.contains("TODO") {
                            line.to_uppercase()
                        } else {
                            line.to_owned()
                        }
                    })
                    .collect()
            }
            Self::Sort => {
                let mut lines: Vec<&str> = text.lines().collect();
                lines.sort_unstable();
                let mut sorted = lines.join("\n");
                if text.ends_with('\n') {
                    sorted.push('\n');
                }
                sorted
            }
        };
        (new != text).then_some(new)
    }
}

/// Flood chunk `i`: `chunk <i>`, padded with dots to `bytes` bytes (newline included) when
/// `bytes` is larger, and a newline.
pub fn flood_chunk(i: usize, bytes: usize) -> String {
    let mut chunk = format!("chunk {i}");
    let padding = bytes.saturating_sub(chunk.len() + 1);
    chunk.extend(std::iter::repeat_n('.', padding));
    chunk.push('\n');
    chunk
}

/// Reads a prompt: its words, and the file URIs of its resources.
pub fn parse(text: &str, resource_uris: &[String], cwd: &Path) -> Script {
    let mut script = Script {
        path: resource_uris
            .iter()
            .find_map(|u| crate::file_uri::to_path(u)),
        ..Script::default()
    };
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut skip = 0;
    for (i, word) in words.iter().enumerate() {
        if skip > 0 {
            skip -= 1;
            continue;
        }
        let bare = word.trim_matches(|c: char| matches!(c, ',' | ';' | '`' | '"' | '\''));
        match bare.to_ascii_lowercase().as_str() {
            "uppercase" => script.action = Action::Uppercase,
            "sort" => script.action = Action::Sort,
            "/help" => script.help = true,
            "@noise" => script.noise = true,
            "@bigline" => script.big_line = true,
            "@hang" => script.hang = true,
            "@deaf" => script.deaf = true,
            "@crash" => script.crash = true,
            "@ask" => script.ask = true,
            "@late" => script.late = true,
            "@snippet" => script.snippet = true,
            "@diskwrite" => script.disk_write = true,
            "@unasked" => script.unasked = true,
            "@writemore" => script.write_more = true,
            "@blind" => script.blind = true,
            "@tools" => script.tools = true,
            "@timed" => script.timed = true,
            "@askaftercancel" => {
                let ms = words.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(0);
                script.ask_after_cancel = Some(std::time::Duration::from_millis(ms));
            }
            "@diffearlier" => script.diff_earlier = true,
            "@run" => {
                script.run = Some(words[i + 1..].iter().map(|w| (*w).to_owned()).collect());
                break;
            }
            "@cwd" => {
                script.cwd = words.get(i + 1).map(|dir| cwd.join(dir));
                skip = 1;
            }
            "@also" => {
                if let Some(file) = words.get(i + 1) {
                    script.also.push(cwd.join(file));
                    skip = 1;
                }
            }
            "@flood" => {
                script.flood = words
                    .get(i + 1)
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(1000);
            }
            "@withdraw" => {
                let ms = words.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(500);
                script.withdraw_after = Some(std::time::Duration::from_millis(ms));
            }
            "@chunk" => {
                script.chunk_bytes = words.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(0);
            }
            "@split" => script.split = true,
            "@pace" => {
                let ms = words.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(100);
                script.pace = std::time::Duration::from_millis(ms);
            }
            _ => {
                if script.path.is_none() && (bare.contains('/') || bare.contains('.')) {
                    let candidate = cwd.join(bare);
                    if candidate.is_file() {
                        script.path = Some(candidate);
                    }
                }
            }
        }
    }
    script
}

/// The lines from the first to the last that differ between `old` and `new`, in each (a
/// fragment diff; whole files when nothing differs).
pub fn changed_lines(old: &str, new: &str) -> (String, String) {
    let (a, b): (Vec<&str>, Vec<&str>) = (
        old.split_inclusive('\n').collect(),
        new.split_inclusive('\n').collect(),
    );
    let same_start = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let same_end = a[same_start..]
        .iter()
        .rev()
        .zip(b[same_start..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let cut = |lines: &[&str]| lines[same_start..lines.len() - same_end].concat();
    (cut(&a), cut(&b))
}

/// `now` with each changed block of `old` → `new` replaced where it is found (with the line
/// before it as context, as an edit tool's old string has), last block first; `None` when one
/// is not found.
pub fn replace_each(now: &str, old: &str, new: &str) -> Option<String> {
    let mut out = now.to_owned();
    // Blocks are replaced last first; an earlier block lies before where the later one went.
    let mut end = out.len();
    for hunk in crate::editor::diff::line_hunks(old, new).into_iter().rev() {
        let context_start = old[..hunk.old.start]
            .trim_end_matches('\n')
            .rfind('\n')
            .map_or(0, |i| i + 1);
        let context = &old[context_start..hunk.old.start];
        let find = format!("{context}{}", &old[hunk.old.clone()]);
        let replace = format!("{context}{}", &new[hunk.new.clone()]);
        // Nothing to look for: an insertion at the very start.
        let at = if find.is_empty() {
            0
        } else {
            out[..end].rfind(&find)?
        };
        out.replace_range(at..at + find.len(), &replace);
        end = at + context.len();
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_changed_block_is_replaced_where_it_now_is() {
        let old = "keep\n// TODO a\nx\nx\n// TODO b\n";
        let new = "keep\n// TODO A\nx\nx\n// TODO B\n";
        // The user typed a line between the two blocks since.
        let now = "keep\n// TODO a\nx\nmine\nx\n// TODO b\n";
        assert_eq!(
            replace_each(now, old, new).unwrap(),
            "keep\n// TODO A\nx\nmine\nx\n// TODO B\n"
        );
        assert_eq!(replace_each("gone\n", old, new), None);
        // Moving a line: the block put in later is not taken for the one to take out.
        assert_eq!(
            replace_each("b\n// TODO A\n", "b\n// TODO A\n", "// TODO A\nb\n").unwrap(),
            "// TODO A\nb\n"
        );
    }

    #[test]
    fn uppercase_touches_todo_lines_only() {
        let text = "fn a() {}\n// TODO: fix\nlet x;\n// todo later TODO\n";
        assert_eq!(
            Action::Uppercase.apply(text).unwrap(),
            "fn a() {}\n// TODO: FIX\nlet x;\n// TODO LATER TODO\n"
        );
        assert_eq!(Action::Uppercase.apply("abc").unwrap(), "ABC");
        assert_eq!(Action::Uppercase.apply("ABC\n"), None);
        assert_eq!(Action::Sort.apply("b\na\n").unwrap(), "a\nb\n");
    }

    #[test]
    fn the_file_comes_from_a_resource_or_an_existing_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        let script = parse(
            "Uppercase the TODO lines in notes.txt @noise",
            &[],
            dir.path(),
        );
        assert_eq!(script.action, Action::Uppercase);
        assert_eq!(script.path, Some(dir.path().join("notes.txt")));
        assert!(script.noise && !script.hang);
        let uri = vec!["file:///ws/a%20b.rs".to_owned()];
        let script = parse("sort @flood 5", &uri, dir.path());
        assert_eq!(script.path, Some(PathBuf::from("/ws/a b.rs")));
        assert_eq!((script.action, script.flood), (Action::Sort, 5));
        assert_eq!(parse("missing.txt", &[], dir.path()).path, None);
        let script = parse("@flood 3 @chunk 100 @pace 50", &[], dir.path());
        assert_eq!(script.pace, std::time::Duration::from_millis(50));
        assert!(!script.split);
        assert!(parse("@flood 3 @split", &[], dir.path()).split);
        assert_eq!((script.flood, script.chunk_bytes), (3, 100));
        assert_eq!(flood_chunk(7, 0), "chunk 7\n");
        let script = parse("uppercase @also b.txt notes.txt @late", &[], dir.path());
        assert_eq!(script.path, Some(dir.path().join("notes.txt")));
        assert_eq!(script.also, vec![dir.path().join("b.txt")]);
        assert!(script.late);
        assert!(!script.timed);
        assert!(parse("uppercase notes.txt @timed", &[], dir.path()).timed);
        let script = parse("@deaf @cwd /etc @run seq 1 3.txt", &[], dir.path());
        assert!(script.deaf);
        assert_eq!(script.cwd, Some(PathBuf::from("/etc")));
        assert_eq!(
            script.run,
            Some(vec!["seq".into(), "1".into(), "3.txt".into()])
        );
        assert_eq!(flood_chunk(7, 12), "chunk 7....\n");
        let (old, new) = changed_lines("a\nb\nc\nd\n", "a\nB\nC\nd\n");
        assert_eq!((old.as_str(), new.as_str()), ("b\nc\n", "B\nC\n"));
        assert_eq!(flood_chunk(12345, 100).len(), 100);
    }
}
