//! How pending reviews look in the editor, with standard LSP only: one diagnostic per open hunk
//! (the change, compactly, at the text it replaces), inlay hints with the inserted text, code
//! actions to accept or reject, and a JSON summary for plugins and `agentls.status`.

use std::path::Path;

use ropey::Rope;
use serde_json::{Value, json};

use super::State;
use crate::editor::actions::{ActionCommand, UserAction};
use crate::editor::documents::effects::Hint;
use crate::editor::documents::effects::Level;
use crate::editor::documents::effects::{Diagnostic, Effect, PluginEvent};
use crate::editor::documents::position::{PositionMapper, Range};
use crate::editor::file_names::file_name;
use crate::editor::review::decision::{Choice, Decision};
use crate::editor::review::{Hunk, HunkState, Review, ReviewKind};

/// How often reviews are shown again while the user types in their file (at most).
pub const PRESENT_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// Default for `review.maxPreviewLines`.
pub const DEFAULT_PREVIEW_LINES: usize = 8;

impl State {
    /// Tells plugins the reviews on `path` changed, then publishes everything agentls shows on
    /// it: a plugin knows a review before its user can see it (a key pressed at the sight of
    /// the diagnostics finds it). Only that file's reviews travel (an empty list: none left
    /// there), so the message stays the size of one file's changes however many reviews are
    /// open elsewhere.
    pub fn present(&self, path: &Path) {
        self.effects.notify_plugins(PluginEvent::ReviewChanged, || {
            json!({
                "uri": crate::file_uri::from_path(path),
                "path": path,
                "reviews": self.reviews_summary(Some(path)),
            })
        });
        self.publish_diagnostics(path);
        self.effects.send(Effect::RefreshInlayHints);
    }

    /// Shows the reviews on `path` again within [`PRESENT_EVERY`]: what the user types in a file
    /// with a review is shown once per burst, not once per keystroke.
    pub fn present_soon(&mut self, path: &Path) {
        let first = self.present_due.is_empty();
        self.present_due.insert(path.to_owned());
        if first {
            let me = self.me.clone();
            tokio::spawn(async move {
                tokio::time::sleep(PRESENT_EVERY).await;
                me.report(super::reports::Report::PresentationDue);
            });
        }
    }

    /// Publishes agentls's diagnostics for `path`.
    pub fn publish_diagnostics(&self, path: &Path) {
        let version = self.documents.get(path).map(|d| d.version());
        self.effects.send(Effect::Diagnostics {
            path: path.to_owned(),
            version,
            diagnostics: self.diagnostics(path),
        });
    }

    /// agentls's diagnostics for `path`: one per open hunk of every review on it, and a hint on
    /// each comment prompt.
    pub fn diagnostics(&self, path: &Path) -> Vec<Diagnostic> {
        let mut out = self.comment_prompt_hints(path);
        for review in self.reviews.on(path) {
            let Some(rope) = self.review_rope(review) else {
                continue;
            };
            let mapper = PositionMapper::new(&rope, self.encoding);
            let count = review.hunks.len();
            for (i, hunk) in review.hunks.iter().enumerate() {
                let level = match hunk.state {
                    HunkState::Pending => Level::Info,
                    HunkState::Conflict => Level::Warning,
                    // Accepted; it lands once every change is decided and the agent heard.
                    HunkState::Approved if !review.is_settling() => Level::Log,
                    _ => continue,
                };
                let conflict = match (hunk.state, review.kind) {
                    (HunkState::Conflict, ReviewKind::Proposal) => {
                        "CONFLICT with your edit — reject it or ask for it again. "
                    }
                    (HunkState::Conflict, ReviewKind::Landed | ReviewKind::TurnUndo) => {
                        "You edited this since — it can only be kept. "
                    }
                    (HunkState::Approved, _) => {
                        "ACCEPTED — applied once you have decided the other changes. "
                    }
                    _ => "",
                };
                let did = match review.kind {
                    ReviewKind::Proposal => "proposes",
                    ReviewKind::Landed => "changed this without asking",
                    ReviewKind::TurnUndo => "changed this",
                };
                let message = format!(
                    "{conflict}{} {did} (change {}/{count} of review {}):\n{}",
                    review.origin.label,
                    i + 1,
                    review.id,
                    preview(Change::of(review, hunk), self.review_preview_lines)
                );
                out.push(Diagnostic {
                    range: mapper.range(hunk.span.clone()),
                    level,
                    message,
                    code: Some(review.id.to_string()),
                    source: Some("agentls".to_owned()),
                });
            }
        }
        out
    }

    /// Inlay hints in `range` of `path`: the text each open hunk would insert.
    pub fn review_hints(&self, path: &Path, range: Range) -> Vec<Hint> {
        let mut out = Vec::new();
        for review in self
            .reviews
            .iter()
            .filter(|r| r.path == path && r.kind == ReviewKind::Proposal)
        {
            let Some(rope) = self.review_rope(review) else {
                continue;
            };
            let mapper = PositionMapper::new(&rope, self.encoding);
            // Compared in char offsets: only the hunks in the range are mapped to positions.
            let wanted = mapper.char_range(range);
            for hunk in review
                .hunks
                .iter()
                .filter(|h| h.state == HunkState::Pending)
            {
                let in_range = (wanted.start..=wanted.end).contains(&hunk.span.start);
                if hunk.new_text.is_empty() || !in_range {
                    continue;
                }
                let position = mapper.position(hunk.span.start);
                out.push(Hint {
                    position,
                    label: format!("+ {}", one_line(&hunk.new_text, 60)),
                    tooltip: preview(Change::of(review, hunk), self.review_preview_lines),
                });
            }
        }
        out
    }

    /// Code actions for reviews at `range` of `path`: per hunk touching the range, then for
    /// each whole review on the file.
    pub fn review_actions(&self, path: &Path, range: Range) -> Vec<UserAction> {
        let mut per_hunk = Vec::new();
        let mut per_review = Vec::new();
        for review in self.reviews.on(path) {
            let Some(rope) = self.review_rope(review) else {
                continue;
            };
            // Compared in char offsets: the range is mapped once, not every hunk per keystroke.
            let wanted = PositionMapper::new(&rope, self.encoding).char_range(range);
            let count = review.hunks.len();
            let label = &review.origin.label;
            for (i, hunk) in review.hunks.iter().enumerate() {
                // Touching ends count, so a cursor at a hunk's edge still finds it.
                if hunk.span.start > wanted.end || wanted.start > hunk.span.end {
                    continue;
                }
                let change = Change::of(review, hunk);
                let decide = |choice| {
                    let hunk = (choice != Choice::Rerequest).then_some(i);
                    ActionCommand::Decide(Decision {
                        review: review.id,
                        hunk,
                        choice,
                    })
                };
                if review.kind.goes_back() {
                    let what = format!("change {}/{count} by {label}: {}", i + 1, summary(change));
                    if hunk.state.is_open() {
                        per_hunk.push(action(format!("Keep {what}"), decide(Choice::Reject)));
                    }
                    if hunk.state == HunkState::Pending {
                        per_hunk.push(action(format!("Undo {what}"), decide(Choice::Accept)));
                    }
                    continue;
                }
                let what = format!("change {}/{count} from {label}: {}", i + 1, summary(change));
                match hunk.state {
                    HunkState::Pending => {
                        per_hunk.push(action(format!("Accept {what}"), decide(Choice::Accept)));
                        per_hunk.push(action(format!("Reject {what}"), decide(Choice::Reject)));
                    }
                    HunkState::Conflict => {
                        per_hunk.push(action(
                            format!("Reject conflicting {what}"),
                            decide(Choice::Reject),
                        ));
                        per_hunk.push(action(
                            format!("Ask {label} to propose {} again", file_name(path)),
                            decide(Choice::Rerequest),
                        ));
                    }
                    _ => {}
                }
            }
            let (open, acceptable) = (review.open_count(), review.acceptable_count());
            let all = |choice| ActionCommand::Decide(Decision::all(review.id, choice));
            let (yes, no, by) = match review.kind {
                ReviewKind::Proposal => ("Accept", "Reject", "from"),
                ReviewKind::Landed | ReviewKind::TurnUndo => ("Undo", "Keep", "by"),
            };
            // Changes in conflict with the user's edits cannot be accepted: "all" counts
            // those that can, and is not offered when none can.
            if acceptable > 0 {
                per_review.push(action(
                    format!("{yes} all changes ({acceptable}) {by} {label}"),
                    all(Choice::Accept),
                ));
            }
            if open > 0 {
                per_review.push(action(
                    format!("{no} all changes ({open}) {by} {label}"),
                    all(Choice::Reject),
                ));
            }
        }
        per_hunk.extend(per_review);
        per_hunk
    }

    /// The open reviews as JSON, on `path` or everywhere (for `agentls/reviewChanged` and
    /// `agentls.status`).
    pub fn reviews_summary(&self, path: Option<&Path>) -> Value {
        let reviews: Vec<Value> = self
            .reviews
            .iter()
            .filter(|review| path.is_none_or(|path| review.path == path))
            .map(|review| summarize(review, self.review_rope(review), self))
            .collect();
        Value::Array(reviews)
    }
}

fn summarize(review: &Review, rope: Option<Rope>, state: &State) -> Value {
    let hunks: Vec<Value> = review
        .hunks
        .iter()
        .enumerate()
        .map(|(i, hunk)| {
            let range = rope
                .as_ref()
                .map(|r| PositionMapper::new(r, state.encoding).range(hunk.span.clone()));
            json!({
                "index": i,
                "state": hunk.state,
                "range": range,
                "oldText": hunk.old_text,
                "newText": hunk.new_text,
            })
        })
        .collect();
    json!({
        "id": review.id,
        "kind": review.kind,
        "origin": review.origin,
        "path": review.path,
        "uri": crate::file_uri::from_path(&review.path),
        "title": review.title,
        "version": review.version(),
        "fileExisted": review.file_existed,
        "hunks": hunks,
    })
}

fn action(title: String, command: ActionCommand) -> UserAction {
    UserAction { title, command }
}

/// A hunk as the user reads it: the text before the change and after it. (A landed change's
/// hunk proposes going back, so its sides are the other way round.)
#[derive(Debug, Clone, Copy)]
struct Change<'a> {
    old: &'a str,
    new: &'a str,
}

impl<'a> Change<'a> {
    fn of(review: &Review, hunk: &'a Hunk) -> Self {
        match review.kind {
            ReviewKind::Proposal => Self {
                old: &hunk.old_text,
                new: &hunk.new_text,
            },
            ReviewKind::Landed | ReviewKind::TurnUndo => Self {
                old: &hunk.new_text,
                new: &hunk.old_text,
            },
        }
    }
}

/// `- old` / `+ new` lines, at most `max_lines` of each, with a count of what was cut.
fn preview(change: Change<'_>, max_lines: usize) -> String {
    let mut out = String::new();
    for (sign, text) in [('-', change.old), ('+', change.new)] {
        let lines: Vec<&str> = text.lines().collect();
        for line in lines.iter().take(max_lines) {
            out.push(sign);
            out.push(' ');
            out.push_str(&one_line(line, 120));
            out.push('\n');
        }
        if lines.len() > max_lines {
            out.push_str(&format!(
                "{sign} … {} more line(s)\n",
                lines.len() - max_lines
            ));
        }
    }
    out.trim_end().to_owned()
}

/// A short description for action titles: the first changed line, or what the change does.
fn summary(change: Change<'_>) -> String {
    match (change.old.is_empty(), change.new.is_empty()) {
        (true, _) => format!("insert {}", quoted(change.new)),
        (_, true) => format!("delete {}", quoted(change.old)),
        _ => format!("{} → {}", quoted(change.old), quoted(change.new)),
    }
}

fn quoted(text: &str) -> String {
    format!("“{}”", one_line(text, 40))
}

/// `text` on one line: line breaks shown as ⏎, cut to `max` chars with an ellipsis.
fn one_line(text: &str, max: usize) -> String {
    let flat = text
        .trim_end_matches(['\n', '\r'])
        .replace("\r\n", "⏎")
        .replace('\n', "⏎");
    if flat.chars().count() > max {
        let cut: String = flat.chars().take(max).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::test_state;
    use crate::editor::documents::effects::{Effect, PluginEvents};

    /// A plugin hears of a file's reviews before the diagnostics its user sees: a key pressed at
    /// their sight finds the review.
    #[tokio::test]
    async fn plugins_hear_of_reviews_before_the_diagnostics_show() {
        let (state, mut effects) = test_state();
        state.effects.set_plugin_events(PluginEvents::all());
        state.present(std::path::Path::new("/ws/a.txt"));
        assert!(matches!(effects.try_recv(), Ok(Effect::Plugin { .. })));
        assert!(matches!(effects.try_recv(), Ok(Effect::Diagnostics { .. })));
    }
}
