//! Undoing a whole turn (`agentls.undoTurn`) and redoing it (`agentls.redoTurn`): every file the
//! turn changed ([`crate::editor::review::checkpoints`]) gets a review whose changes go back to the text before
//! the turn, decided with Undo/Keep per change like a change made without asking. What the user
//! or a later turn changed since stays; a change whose lines were touched since is kept and
//! said so. The accepted undo is itself kept as a turn of its own, so redoing is undoing it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ropey::Rope;

use super::State;
use crate::editor::actions::{ActionCommand, UserAction};
use crate::editor::documents::effects::Level;
use crate::editor::file_names::file_name;
use crate::editor::origin::Origin;
use crate::editor::review::checkpoints::{Change, TurnNumber, undo};
use crate::editor::review::{Applier, Phase, Review, ReviewKind, ReviewText};

/// The prefix of the origin key an undo's reviews carry, followed by the undone turn's number.
const UNDO_KEY: &str = "turn-undo:";
/// The same for a redo's reviews.
const REDO_KEY: &str = "turn-redo:";
/// How many of an agent's latest turns that changed files its chat offers to undo.
const CHAT_TURNS: usize = 3;

/// Whether `origin` is an undo of a turn (its changes are what the user accepted of it).
fn is_undo(origin: &Origin) -> bool {
    origin.key.starts_with(UNDO_KEY)
}

/// Which turn to undo or redo, and what it changed.
#[derive(Debug)]
pub struct UndoPlan {
    /// The turn undone (for a redo: the turn whose undo is undone).
    number: TurnNumber,
    /// What the user calls the turn ("demo's turn 3").
    turn: String,
    /// Undoing the undo of turn `number`.
    redo: bool,
    /// Its changes by file.
    files: BTreeMap<PathBuf, Vec<Change>>,
}

impl UndoPlan {
    /// The files not open in the editor: what their disks say is read before the reviews open.
    fn closed<'a>(&'a self, state: &'a State) -> impl Iterator<Item = PathBuf> + 'a {
        self.files
            .keys()
            .filter(|p| state.documents.get(p).is_none())
            .cloned()
    }
}

impl State {
    /// `origin` read `text` of `path` (`None`: missing): kept for its turn's checkpoint when
    /// the file is closed (an open file's text before a change is its buffer's).
    pub(in crate::editor) fn agent_read(
        &mut self,
        origin: &Origin,
        path: &Path,
        text: Option<&str>,
    ) {
        if self.documents.get(path).is_none() {
            self.checkpoints.read(origin, path, text);
        }
    }

    /// The user accepted (some of) an undo or a redo by `origin` in `path`: the turn's agent
    /// hears of it at its next turn.
    pub(in crate::editor) fn turn_undone(&mut self, origin: &Origin, path: &Path) {
        let (number, redo) = match (
            origin.key.strip_prefix(UNDO_KEY),
            origin.key.strip_prefix(REDO_KEY),
        ) {
            (Some(n), _) => (n, false),
            (_, Some(n)) => (n, true),
            _ => return,
        };
        let Ok(number) = number.parse() else {
            return;
        };
        let file = file_name(path);
        let chat = self.checkpoints.tell(number, &file, redo);
        if let Some(chat) = chat {
            let what = if redo { "Put back" } else { "Undone" };
            self.note_in_chat(&chat, &format!("_{what}: {} in {file}._\n\n", origin.label));
        }
        if redo {
            // Put back: nothing is left to redo.
            let undone = format!("{UNDO_KEY}{number}");
            self.checkpoints.forget(|o| o.key == undone);
        }
    }

    /// In a chat with `agent`: *Undo* each of its three latest turns that changed
    /// files, newest first, and *Redo* one once an undo of it was accepted.
    pub fn turn_undo_actions(&self, agent: &str) -> Vec<UserAction> {
        let agents = |o: &Origin| o.label == agent && !is_undo(o);
        let mut actions = Vec::new();
        for turn in self.checkpoints.turns_with_files(agents).take(CHAT_TURNS) {
            let (number, files) = (turn.number, turn.files.len());
            actions.push(UserAction {
                title: format!(
                    "Undo {agent}'s turn {number} ({files} file{})",
                    if files == 1 { "" } else { "s" }
                ),
                command: ActionCommand::UndoTurn {
                    turn: number,
                    redo: false,
                },
            });
            let undone = format!("{UNDO_KEY}{number}");
            if self.checkpoints.latest_turn(|o| o.key == undone).is_some() {
                actions.push(UserAction {
                    title: format!("Redo {agent}'s turn {number}"),
                    command: ActionCommand::UndoTurn {
                        turn: number,
                        redo: true,
                    },
                });
            }
        }
        actions
    }

    /// What undoing turn `number` (the newest turn that changed a file when `None`) takes, or
    /// why it cannot be; `redo`: undo that turn's accepted undo instead.
    pub fn turn_undo_plan(
        &self,
        number: Option<TurnNumber>,
        redo: bool,
    ) -> Result<(UndoPlan, Vec<PathBuf>), String> {
        let undo_of = |n: TurnNumber| format!("{UNDO_KEY}{n}");
        let checkpoint = match (number, redo) {
            (Some(n), false) => self.checkpoints.get(n),
            (Some(n), true) => self.checkpoints.latest_turn(|o| o.key == undo_of(n)),
            (None, false) => self.checkpoints.latest_turn(|o| !is_undo(o)),
            (None, true) => self.checkpoints.latest_turn(is_undo),
        };
        let Some(checkpoint) = checkpoint.filter(|c| !c.files.is_empty()) else {
            return Err(match number {
                Some(n) if self.checkpoints.was_dropped(n) => {
                    format!("turn {n} is no longer kept (only the newest turns are)")
                }
                Some(n) if redo => format!("nothing of turn {n} was undone"),
                Some(n) => format!("turn {n} changed no file"),
                None if redo => "no undone turn to redo".to_owned(),
                None => "no turn changed a file yet".to_owned(),
            });
        };
        let origin = &checkpoint.origin;
        let (number, turn) = match origin.key.strip_prefix(UNDO_KEY) {
            Some(n) => (n.parse().unwrap_or_default(), origin.label.clone()),
            None => (
                checkpoint.number,
                format!("{}'s turn {}", origin.label, checkpoint.number),
            ),
        };
        let plan = UndoPlan {
            number,
            turn,
            redo,
            files: checkpoint.files.clone(),
        };
        let closed = plan.closed(self).collect();
        Ok((plan, closed))
    }

    /// Opens the reviews undoing `plan`; `disks`: what each closed file says now (`None`:
    /// missing). Returns what the user is told.
    pub fn open_turn_undo(
        &mut self,
        plan: UndoPlan,
        disks: BTreeMap<PathBuf, Option<String>>,
    ) -> String {
        let what = if plan.redo { "Redoing" } else { "Undoing" };
        let key = if plan.redo { REDO_KEY } else { UNDO_KEY };
        let origin = Origin::new(format!("{key}{}", plan.number), plan.turn);
        // What the user accepts of the undo is kept as a turn of its own: redo undoes it.
        if !plan.redo {
            self.checkpoints.undo_started(&origin);
        }
        let mut reviewed = Vec::new();
        let mut notes = Vec::new();
        for (path, changes) in plan.files {
            let open = self.buffer(&path).map(|(text, _)| text);
            let disk = disks.get(&path).cloned().flatten();
            let exists = open.is_some() || disk.is_some();
            let current = open.clone().or(disk).unwrap_or_default();
            let undone = undo(&changes, &current);
            let file = file_name(&path);
            if undone.kept > 0 {
                notes.push(format!(
                    "{} change{} in {file} kept (its lines changed since)",
                    undone.kept,
                    if undone.kept == 1 { "" } else { "s" }
                ));
            }
            let removes = undone.created && undone.text.is_empty();
            if removes && (!exists || open.is_some()) {
                if exists {
                    notes.push(format!(
                        "{file} was created by that turn: close it and remove it yourself"
                    ));
                }
                continue;
            }
            if undone.text == current && exists {
                continue;
            }
            let hunks = Review::hunks_between(&current, &undone.text);
            if hunks.is_empty() {
                continue;
            }
            let text = match self.documents.get(&path) {
                Some(doc) => ReviewText::Open {
                    version: doc.version(),
                    echo_after: None,
                },
                None => ReviewText::Closed(Rope::from_str(&current)),
            };
            let id = self.reviews.next_id();
            self.reviews.add(Review {
                id,
                kind: ReviewKind::TurnUndo,
                applied_by: Applier::Editor,
                phase: Phase::Deciding,
                origin: origin.clone(),
                path: path.clone(),
                title: format!("{what} {} in {file}", origin.label),
                base: current,
                proposal: undone.text,
                file_existed: exists,
                hunks,
                text,
                verdict: None,
            });
            if removes {
                // Undone whole, the file the turn created goes (not left empty).
                self.checkpoints.removes_file(id);
                notes.push(format!(
                    "undoing all of {file} removes it (the turn created it)"
                ));
            }
            self.present(&path);
            reviewed.push((id, file));
        }
        // The user is taken to the first file, as to a proposal.
        if let Some((first, _)) = reviewed.first() {
            let _ = self.show_review(*first);
        }
        let reviewed: Vec<String> = reviewed.into_iter().map(|(_, file)| file).collect();
        let mut message = match reviewed.len() {
            0 => format!("{what} {}: nothing to change", origin.label),
            n => format!(
                "{what} {}: {n} file{} to review ({}); Undo or Keep each change with code actions",
                origin.label,
                if n == 1 { "" } else { "s" },
                reviewed.join(", ")
            ),
        };
        for note in notes {
            message.push_str("; ");
            message.push_str(&note);
        }
        self.effects.message(Level::Info, message.clone());
        message
    }
}
