//! Checkpoints: every agent turn keeps what it changed in each file (the text before and after
//! each change: an accepted proposal, an unasked write, a write no review waited for), so the
//! whole turn can be undone later, across files, as a review the user decides like any other.
//! Undoing goes back change by change, three-way: what the user (or a later turn) changed since
//! stays, and a change whose lines were touched since is left and said so.
//!
//! In memory, bounded: the newest `review.keepTurns` turns ([`KEEP_TURNS`] by default) and
//! [`KEEP_BYTES`] of text; the oldest go first, and undoing one of them says it is no longer
//! kept.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};

use super::ReviewId;
use super::reconcile;
use crate::editor::diff;
use crate::editor::origin::Origin;

/// How many turns are kept unless `review.keepTurns` says otherwise.
pub const KEEP_TURNS: usize = 50;
/// How much text (before and after images together) is kept over all turns.
pub const KEEP_BYTES: usize = 64 << 20;

/// A turn's number, counted from 1 in this server's life (0: an undo, kept as a turn).
pub type TurnNumber = u64;

/// One change a turn made to a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The text before (`None`: the file did not exist).
    pub before: Option<String>,
    /// The text after.
    pub after: String,
}

impl Change {
    fn bytes(&self) -> usize {
        self.before.as_ref().map_or(0, String::len) + self.after.len()
    }
}

/// What one turn changed.
#[derive(Debug)]
pub struct Checkpoint {
    /// Its number.
    pub number: TurnNumber,
    /// Whose turn it was.
    pub origin: Origin,
    /// Its changes by file, in the order they were made.
    pub files: BTreeMap<PathBuf, Vec<Change>>,
    /// The chat it answered in, if any.
    pub chat: Option<PathBuf>,
    /// What its agent read of closed files it has not changed yet (`None`: missing): their
    /// text before, should it change them on disk.
    reads: BTreeMap<PathBuf, Option<String>>,
    /// The bytes of text its changes and reads hold, kept as they come (counting them on every
    /// change would cost a turn writing n files n² additions).
    bytes: usize,
}

impl Checkpoint {
    fn bytes(&self) -> usize {
        self.bytes
    }
}

/// The turns' checkpoints, oldest first.
#[derive(Debug)]
pub struct Checkpoints {
    turns: VecDeque<Checkpoint>,
    /// How many turns are kept.
    keep_turns: usize,
    next: TurnNumber,
    /// How many turns were dropped for room, for the message when one is asked for.
    dropped: usize,
    /// What each origin (by key) is to be told at its next turn: its turns undone or redone.
    told: HashMap<String, Vec<String>>,
    /// Undo reviews of closed files their turn created: accepted whole, the file goes.
    removals: HashSet<ReviewId>,
}

impl Default for Checkpoints {
    fn default() -> Self {
        Self {
            turns: VecDeque::new(),
            keep_turns: KEEP_TURNS,
            next: 0,
            dropped: 0,
            told: HashMap::new(),
            removals: HashSet::new(),
        }
    }
}

impl Checkpoints {
    /// Keeps the newest `turns` turns from now on (0: none).
    pub fn keep(&mut self, turns: usize) {
        self.keep_turns = turns;
        self.make_room();
    }

    /// `origin` began a turn, answering in `chat`: its changes from now on are this turn's.
    /// Returns its number.
    pub fn turn_started(&mut self, origin: &Origin, chat: Option<PathBuf>) -> TurnNumber {
        self.next += 1;
        self.push(self.next, origin, chat);
        self.next
    }

    /// An undo of a turn began (`origin` names it): what the user accepts of it is kept as a
    /// turn of its own, which has no number (the agents' turns are numbered without gaps).
    pub fn undo_started(&mut self, origin: &Origin) {
        self.push(0, origin, None);
    }

    fn push(&mut self, number: TurnNumber, origin: &Origin, chat: Option<PathBuf>) {
        self.turns.push_back(Checkpoint {
            number,
            origin: origin.clone(),
            files: BTreeMap::new(),
            chat,
            reads: BTreeMap::new(),
            bytes: 0,
        });
        self.make_room();
    }

    /// `origin` changed `path` from `before` to `after`: kept in its latest turn (a change it
    /// carries out after its turn ended, such as an accepted proposal settling, is still that
    /// turn's). Nothing is kept for an origin with no turn (a terminal agent's proposal).
    pub fn changed(&mut self, origin: &Origin, path: &Path, before: Option<String>, after: String) {
        if before.as_deref() == Some(after.as_str()) {
            return;
        }
        let Some(turn) = self.turns.iter_mut().rev().find(|t| t.origin == *origin) else {
            return;
        };
        // What it read before is this change's `before` now.
        if let Some(Some(read)) = turn.reads.remove(path) {
            turn.bytes -= read.len();
        }
        let change = Change { before, after };
        turn.bytes += change.bytes();
        turn.files.entry(path.to_owned()).or_default().push(change);
        self.make_room();
    }

    /// The user accepted an undo (or redo) of turn `number` in `file`: its agent hears of it at
    /// its next turn, once per file. Returns the turn's chat, to note it there too.
    pub fn tell(&mut self, number: TurnNumber, file: &str, redo: bool) -> Option<PathBuf> {
        let turn = self.get(number)?;
        let chat = turn.chat.clone();
        let note = if redo {
            format!("The user put back your changes to {file} from an earlier turn.")
        } else {
            format!(
                "The user undid your changes to {file} from an earlier turn; read it again \
                 before you change it."
            )
        };
        let notes = self.told.entry(turn.origin.key.clone()).or_default();
        if !notes.contains(&note) {
            notes.push(note);
        }
        chat
    }

    /// What `origin` is to be told of its turns undone or redone since it last heard.
    pub fn take_told(&mut self, origin: &str) -> Vec<String> {
        self.told.remove(origin).unwrap_or_default()
    }

    /// Forgets the turns of the origins `of` takes.
    pub fn forget(&mut self, of: impl Fn(&Origin) -> bool) {
        self.turns.retain(|t| !of(&t.origin));
    }

    /// `origin` read `text` of the closed file `path` (`None`: it is missing): what it looked
    /// like before, should the agent then change it on disk in this turn.
    pub fn read(&mut self, origin: &Origin, path: &Path, text: Option<&str>) {
        let Some(turn) = self.turns.iter_mut().rev().find(|t| t.origin == *origin) else {
            return;
        };
        if !turn.files.contains_key(path) && !turn.reads.contains_key(path) {
            turn.bytes += text.map_or(0, str::len);
            turn.reads.insert(path.to_owned(), text.map(str::to_owned));
            self.make_room();
        }
    }

    /// The latest text of the closed file `path` that `origin` knew (`Some(None)`: that it was
    /// missing): what its turns last made it, else what it last read of it. What the file was
    /// before `origin` changed (or removed) it on disk itself.
    pub fn known_text(&self, origin: &Origin, path: &Path) -> Option<Option<String>> {
        self.turns
            .iter()
            .rev()
            .filter(|t| t.origin == *origin)
            .find_map(|t| match t.files.get(path).and_then(|c| c.last()) {
                Some(change) => Some(Some(change.after.clone())),
                None => t.reads.get(path).cloned(),
            })
    }

    /// Each kept turn: its number, its origin's label, the files it changed and the bytes it
    /// keeps (for `agentls.debug.state`).
    pub fn summary(&self) -> Vec<serde_json::Value> {
        self.turns
            .iter()
            .map(|t| {
                serde_json::json!({
                    "turn": t.number,
                    "origin": t.origin.label,
                    "files": t.files.keys().collect::<Vec<_>>(),
                    "bytes": t.bytes(),
                })
            })
            .collect()
    }

    /// Review `id` undoes the creation of its (closed) file: accepted whole, the file goes.
    pub fn removes_file(&mut self, id: ReviewId) {
        self.removals.insert(id);
    }

    /// Whether review `id`, done, removes its file (asked once).
    pub fn take_removal(&mut self, id: ReviewId) -> bool {
        self.removals.remove(&id)
    }

    /// Turn `number`, when still kept.
    pub fn get(&self, number: TurnNumber) -> Option<&Checkpoint> {
        self.turns.iter().find(|t| t.number == number && number > 0)
    }

    /// The newest turn that changed a file, of an origin `of` takes.
    pub fn latest_turn(&self, of: impl Fn(&Origin) -> bool) -> Option<&Checkpoint> {
        self.turns_with_files(of).next()
    }

    /// The turns that changed a file, of the origins `of` takes, newest first.
    pub fn turns_with_files(
        &self,
        of: impl Fn(&Origin) -> bool,
    ) -> impl Iterator<Item = &Checkpoint> {
        self.turns
            .iter()
            .rev()
            .filter(move |t| of(&t.origin) && !t.files.is_empty())
    }

    /// Whether a turn numbered `number` was made and has been dropped for room.
    pub fn was_dropped(&self, number: TurnNumber) -> bool {
        number <= self.next && self.get(number).is_none() && self.dropped > 0
    }

    fn make_room(&mut self) {
        let mut bytes: usize = self.turns.iter().map(Checkpoint::bytes).sum();
        while self.turns.len() > self.keep_turns || (bytes > KEEP_BYTES && self.turns.len() > 1) {
            if let Some(oldest) = self.turns.pop_front() {
                bytes -= oldest.bytes();
                self.dropped += 1;
            }
        }
    }
}

/// What undoing a turn's changes to one file gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undo {
    /// The file's text with the turn's changes undone where they could be.
    pub text: String,
    /// How many changed blocks could not be undone: their lines changed since.
    pub kept: usize,
    /// The turn created the file (undoing it fully would remove it).
    pub created: bool,
}

/// Undoes `changes` (one turn's changes to a file, in order) on `current`, the file's text now.
/// Each change goes back three-way; when the whole of one cannot, its blocks go back one by one,
/// and those whose lines changed since are kept (counted in [`Undo::kept`]).
pub fn undo(changes: &[Change], current: &str) -> Undo {
    let mut text = current.to_owned();
    let mut kept = 0;
    for change in changes.iter().rev() {
        let before = change.before.as_deref().unwrap_or_default();
        // Some agents propose a file without its final newline and write it with one: the
        // change is the same.
        let after = final_newlines_as(&change.after, &text);
        if let Some(undone) = reconcile::onto(&after, &text, before) {
            text = undone;
            continue;
        }
        for hunk in diff::line_hunks(&after, before) {
            let mut one = after.clone();
            one.replace_range(hunk.old.clone(), &before[hunk.new.clone()]);
            match reconcile::onto(&after, &text, &one) {
                Some(undone) => text = undone,
                None => kept += 1,
            }
        }
    }
    Undo {
        text,
        kept,
        created: changes.first().is_some_and(|c| c.before.is_none()),
    }
}

/// `text` ending with as many newlines as `like` does.
fn final_newlines_as(text: &str, like: &str) -> String {
    let newlines = like.len() - like.trim_end_matches('\n').len();
    format!("{}{}", text.trim_end_matches('\n'), "\n".repeat(newlines))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(before: &str, after: &str) -> Change {
        Change {
            before: Some(before.to_owned()),
            after: after.to_owned(),
        }
    }

    #[test]
    fn undoing_keeps_what_changed_since() {
        let changes = [
            change("a\nb\nc\n", "A\nb\nc\n"),
            change("A\nb\nc\n", "A\nb\nC\n"),
        ];
        let untouched = undo(&changes, "A\nb\nC\n");
        assert_eq!(untouched.text, "a\nb\nc\n");
        assert_eq!(untouched.kept, 0);
        // Written with a final newline its proposal lacked: the same change.
        let created = [Change {
            before: None,
            after: "new".to_owned(),
        }];
        let undone = undo(&created, "new\n");
        assert_eq!(
            (undone.text.as_str(), undone.kept, undone.created),
            ("", 0, true)
        );
        // The user added a line since: it stays.
        assert_eq!(undo(&changes, "A\nb\nC\nd\n").text, "a\nb\nc\nd\n");
        // The user rewrote the first change's line: that block is kept, the other undone.
        let touched = undo(&changes, "X\nb\nC\n");
        assert_eq!(touched.text, "X\nb\nc\n");
        assert_eq!(touched.kept, 1);
    }

    #[test]
    fn the_store_keeps_each_turns_changes_and_drops_the_oldest() {
        let (one, two) = (Origin::new("a", "A"), Origin::new("b", "B"));
        let mut checkpoints = Checkpoints::default();
        // No turn yet: nothing is kept.
        checkpoints.changed(&one, Path::new("/f"), None, "x".into());
        assert!(checkpoints.latest_turn(|_| true).is_none());
        let first = checkpoints.turn_started(&one, None);
        let second = checkpoints.turn_started(&two, None);
        checkpoints.changed(&one, Path::new("/f"), Some("a".into()), "b".into());
        checkpoints.changed(&two, Path::new("/g"), None, "new".into());
        assert_eq!(
            checkpoints.latest_turn(|o| o.key == "a").unwrap().number,
            first
        );
        assert_eq!(checkpoints.latest_turn(|_| true).unwrap().number, second);
        for _ in 0..KEEP_TURNS {
            checkpoints.turn_started(&one, None);
        }
        assert!(checkpoints.get(first).is_none());
        assert!(checkpoints.was_dropped(first));
        assert!(!checkpoints.was_dropped(first + 1000));
        // A read is counted until the file changes; then the change's two texts are.
        let counted = checkpoints.turn_started(&two, None);
        checkpoints.read(&two, Path::new("/r"), Some("abc"));
        assert_eq!(checkpoints.get(counted).unwrap().bytes(), 3);
        checkpoints.changed(&two, Path::new("/r"), Some("abc".into()), "abcd".into());
        assert_eq!(checkpoints.get(counted).unwrap().bytes(), 7);
        // `review.keepTurns`: fewer turns from now on, or none.
        checkpoints.keep(2);
        let last = checkpoints.turn_started(&one, None);
        assert!(checkpoints.get(last - 2).is_none() && checkpoints.get(last - 1).is_some());
        checkpoints.keep(0);
        checkpoints.turn_started(&one, None);
        checkpoints.changed(&one, Path::new("/f"), Some("a".into()), "b".into());
        assert!(checkpoints.latest_turn(|_| true).is_none());
    }
}
