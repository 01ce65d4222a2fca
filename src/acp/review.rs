//! Where an agent's proposed edit meets the user. [`proposals`] turns a permission request's
//! diffs into one whole new text per file; [`review_proposed_edit`] hands each to the port's
//! review engine, which diffs it against the buffer or disk (never the agent's `oldText`),
//! previews it, and applies exactly the hunks the user accepts.

use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::Diff;

use crate::editor::{EditorAccess, FileError, Origin, PendingVerdict, Terms};

/// What a permission request proposes for one file.
#[derive(Debug)]
pub struct Proposal {
    /// The file.
    pub path: PathBuf,
    /// Its text as the user sees it now (the buffer, else the disk; empty when it is new).
    pub before: String,
    /// Its whole new text, or why the agent's diff could not be turned into one.
    pub text: Result<String, String>,
}

/// One proposal per file (in the order the files first appear), each diff applied in turn to
/// what the user sees (the buffer, else the disk). ACP's `oldText`/`newText` are whole files,
/// but some agents send only the replaced fragment (an edit tool's old and new string): a
/// fragment found in the text is replaced there. An old text that is neither found nor the
/// whole file the agent last read (`last_read`) is refused rather than taken for the whole file.
pub async fn proposals(
    editor: &EditorAccess,
    diffs: &[&Diff],
    last_read: impl Fn(&Path) -> Option<String>,
) -> Vec<Proposal> {
    let mut proposals: Vec<Proposal> = Vec::new();
    for diff in diffs {
        let index = match proposals.iter().position(|p| p.path == diff.path) {
            Some(index) => index,
            None => {
                let current = editor.read_text_file(&diff.path, None, None).await;
                let current = current.unwrap_or_default();
                proposals.push(Proposal {
                    path: diff.path.clone(),
                    text: Ok(current.clone()),
                    before: current,
                });
                proposals.len() - 1
            }
        };
        let proposal = &mut proposals[index];
        if let Ok(current) = &proposal.text {
            // What the agent could have seen of the file: what it last read through agentls,
            // else the disk (a tool reading the file itself).
            let seen = match last_read(&diff.path) {
                Some(read) => Some(read),
                None => crate::editor::disk::files::read(&diff.path).await.ok(),
            };
            proposal.text = whole_text(
                current,
                seen.as_deref(),
                diff.old_text.as_deref(),
                &diff.new_text,
            );
        }
    }
    proposals
}

/// The whole text after a diff of `old` → `new` is applied to `current`, by an agent that could
/// have seen `seen` of the file (what it last read, else the disk).
fn whole_text(
    current: &str,
    seen: Option<&str>,
    old: Option<&str>,
    new: &str,
) -> Result<String, String> {
    match old {
        Some(old) if !old.is_empty() && old == current => Ok(new.to_owned()),
        // A whole file written over what the agent saw (no old text: a write tool), or over
        // the whole file as it read it, while the user changed the text since: the agent's
        // change is merged onto what the user sees, so their unsaved lines are not proposed
        // for removal. Where both changed the same lines, the whole new text is proposed and
        // the review shows what it would replace.
        None | Some("") => Ok(merged_onto(current, seen, new)),
        Some(old) if seen == Some(old) => Ok(merged_onto(current, seen, new)),
        // A fragment (an edit tool's old string: unique, or meant everywhere).
        Some(old) if current.contains(old) => Ok(current.replace(old, new)),
        Some(_) => Err(
            "the text it replaces is not in the file (it changed since the agent read it)".into(),
        ),
    }
}

/// `new`, written over `seen`, with what `current` changed of `seen` kept where it can be.
fn merged_onto(current: &str, seen: Option<&str>, new: &str) -> String {
    match seen {
        Some(seen) if !seen.is_empty() => {
            crate::editor::review::reconcile::onto(seen, current, new)
                .unwrap_or_else(|| new.to_owned())
        }
        _ => new.to_owned(),
    }
}

/// Asks the user, through a review, whether `origin` may change `path` to `new_text`: the
/// review is open once this returns, its verdict to come.
pub async fn open_proposed_edit(
    editor: &EditorAccess,
    origin: &Origin,
    path: &Path,
    new_text: &str,
    title: &str,
) -> Result<PendingVerdict, FileError> {
    editor
        .open_review(origin, path, new_text, title, Terms::APPLIED_BY_PROPOSER)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_files_and_fragments_become_the_whole_new_text() {
        let file = "fn a() {\n    let x = 1;\n}\n\nfn b() {}\n";
        // A whole file: no old text, the same old text, or the text the agent read of a file
        // the user changed since.
        assert_eq!(whole_text(file, None, None, "new\n").unwrap(), "new\n");
        assert_eq!(
            whole_text(file, None, Some(file), "new\n").unwrap(),
            "new\n"
        );
        let stale = file.replace("fn b() {}", "fn c() {}");
        let read = Some(stale.as_str());
        assert_eq!(whole_text(file, read, read, "new\n").unwrap(), "new\n");
        // A whole file written over what the agent saw, while the user added a line: the
        // line stays; where both changed the same line, the agent's text is proposed.
        let seen = "keep\n// TODO a\n";
        let current = "// mine\nkeep\n// TODO a\n";
        let merged = whole_text(current, Some(seen), None, "keep\n// TODO A\n").unwrap();
        assert_eq!(merged, "// mine\nkeep\n// TODO A\n");
        let clash = "keep\n// TODO mine\n";
        let proposed = whole_text(clash, Some(seen), None, "keep\n// TODO A\n").unwrap();
        assert_eq!(proposed, "keep\n// TODO A\n");
        // A fragment, found: replaced in place (every occurrence, as a replace-all edit does).
        let edited = whole_text(file, None, Some("let x = 1;"), "let x = 2;").unwrap();
        assert_eq!(edited, file.replace("let x = 1;", "let x = 2;"));
        // The file the agent read, with the user's lines added since: still placed.
        let grown = format!("{file}// mine\n");
        let merged = whole_text(&grown, None, Some(file), "new\n").unwrap();
        assert_eq!(merged, "new\n// mine\n");
        // Not in the file and not what the agent read: refused, never taken for the whole file
        // (however long it is next to the file).
        let missing = whole_text(file, None, Some("let y = 3;"), "let y = 4;").unwrap_err();
        assert!(missing.contains("not in the file"), "{missing}");
        let long = "fn a() {\n    let x = 10;\n";
        assert!(whole_text(file, Some(file), Some(long), "x").is_err());
    }
}
