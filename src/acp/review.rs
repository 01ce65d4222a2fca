//! Where an agent's proposed edit meets the user. [`proposals`] turns a permission request's
//! diffs into one whole new text per file; [`review_proposed_edit`] hands each to the port's
//! review engine, which diffs it against the buffer or disk (never the agent's `oldText`),
//! previews it, and applies exactly the hunks the user accepts.

use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::Diff;

use crate::editor::review::Verdict;
use crate::editor::{EditorAccess, FileError, Origin};

/// What a permission request proposes for one file.
#[derive(Debug)]
pub struct Proposal {
    /// The file.
    pub path: PathBuf,
    /// Its whole new text, or why the agent's diff could not be turned into one.
    pub text: Result<String, String>,
}

/// One proposal per file (in the order the files first appear), each diff applied in turn to
/// what the user sees (the buffer, else the disk). ACP's `oldText`/`newText` are whole files,
/// but some agents send only the replaced fragment (an edit tool's old and new string): a
/// fragment found in the text is replaced there; one that is not found is refused rather than
/// taken for the whole file.
pub async fn proposals(editor: &EditorAccess, diffs: &[&Diff]) -> Vec<Proposal> {
    let mut proposals: Vec<Proposal> = Vec::new();
    for diff in diffs {
        let index = match proposals.iter().position(|p| p.path == diff.path) {
            Some(index) => index,
            None => {
                let current = editor.read_text_file(&diff.path, None, None).await.ok();
                proposals.push(Proposal {
                    path: diff.path.clone(),
                    text: Ok(current.unwrap_or_default()),
                });
                proposals.len() - 1
            }
        };
        let proposal = &mut proposals[index];
        if let Ok(current) = &proposal.text {
            proposal.text = whole_text(current, diff.old_text.as_deref(), &diff.new_text);
        }
    }
    proposals
}

/// The whole text after a diff of `old` → `new` is applied to `current`.
fn whole_text(current: &str, old: Option<&str>, new: &str) -> Result<String, String> {
    match old {
        None | Some("") => Ok(new.to_owned()),
        Some(old) if old == current => Ok(new.to_owned()),
        Some(old) if current.contains(old) => Ok(current.replace(old, new)),
        // Much shorter than the file and not in it: a fragment we cannot place.
        Some(old) if old.len() * 2 < current.len() => Err(
            "the text it replaces is not in the file (it changed since the agent read it)".into(),
        ),
        // A whole file the user changed since: the review shows the change against their text.
        Some(_) => Ok(new.to_owned()),
    }
}

/// Asks the user, through a review, whether `origin` may change `path` to `new_text`.
pub async fn review_proposed_edit(
    editor: &EditorAccess,
    origin: &Origin,
    path: &Path,
    new_text: &str,
    title: &str,
) -> Result<Verdict, FileError> {
    editor.review_diff(origin, path, new_text, title).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_files_and_fragments_become_the_whole_new_text() {
        let file = "fn a() {\n    let x = 1;\n}\n\nfn b() {}\n";
        // A whole file (no old text, the same old text, or one the user changed since).
        assert_eq!(whole_text(file, None, "new\n").unwrap(), "new\n");
        assert_eq!(whole_text(file, Some(file), "new\n").unwrap(), "new\n");
        let stale = file.replace("fn b() {}", "fn c() {}");
        assert_eq!(whole_text(file, Some(&stale), "new\n").unwrap(), "new\n");
        // A fragment, found: replaced in place (every occurrence, as a replace-all edit does).
        let edited = whole_text(file, Some("let x = 1;"), "let x = 2;").unwrap();
        assert_eq!(edited, file.replace("let x = 1;", "let x = 2;"));
        // The file the agent read, with the user's lines added since: still placed.
        let grown = format!("{file}// mine\n");
        let merged = whole_text(&grown, Some(file), "new\n").unwrap();
        assert_eq!(merged, "new\n// mine\n");
        // A fragment not in the file: refused, never taken for the whole file.
        let missing = whole_text(file, Some("let y = 3;"), "let y = 4;").unwrap_err();
        assert!(missing.contains("not in the file"), "{missing}");
    }
}
