//! What a file says after an agent's write meets what the user decided and typed: the one place
//! that decides it, whatever route the write came by. Text in, text out: no state, no I/O.
//!
//! The routes, and who calls what here:
//! - a write through agentls (`fs/write_text_file`, an MCP tool) while an accepted proposal waits
//!   for it (`state/settlement.rs`, [`Reviewed::carried_out_by`], [`Reviewed::accepted_onto`]);
//! - the same write straight to disk, seen by the settling review's watcher (`state/settlement.rs`);
//! - the whole proposal written again after the review settled (`state/disk_sync.rs`,
//!   [`Reviewed::late_write`]);
//! - a write no review waits for, onto the buffer the user may have changed since the agent
//!   read it (`state/mod.rs`), an agent's disk write under unsaved edits (`state/unasked.rs`), and a
//!   proposal shown over a buffer the agent did not see (`acp/review.rs`): [`onto`].
//!
//! Every route keeps the same two promises: nothing of a write beyond the hunks the user
//! accepted lands, and no edit the user made since is lost — where both changed the same lines,
//! the caller is told (`None`) and leaves the user's text.

use crate::editor::diff;

/// A change the user reviewed, as text.
#[derive(Debug, Clone, Copy)]
pub struct Reviewed<'a> {
    /// The text the proposal was diffed against.
    pub base: &'a str,
    /// The whole proposal.
    pub proposal: &'a str,
    /// `base` with only the accepted hunks.
    pub accepted: &'a str,
}

impl Reviewed<'_> {
    /// Whether `write` is the whole proposal carried out on one of the texts its writer could
    /// have seen (`seen`): the proposal itself, or its change merged into what the writer saw.
    /// A final newline more or less is the same write (some agents show a new file without it
    /// and write it with one).
    pub fn carried_out_by(&self, write: &str, seen: &[&str]) -> bool {
        same_but_final_newlines(write, self.proposal)
            || seen.iter().any(|seen| {
                diff::merge3(self.base, seen, self.proposal)
                    .is_some_and(|expected| same_but_final_newlines(write, &expected))
            })
    }

    /// The accepted hunks on `under` (what the file says where they must land: the disk as the
    /// writer found it, or as it is now), keeping every change `under` has since the base.
    /// `None` where both changed the same lines.
    pub fn accepted_onto(&self, under: &str) -> Option<String> {
        onto(self.base, under, self.accepted)
    }

    /// The accepted hunks on `under`, ending with as many final newlines as `write` (the
    /// agent's own write of its whole proposal, which meant the file to end that way).
    pub fn accepted_onto_as_written(&self, under: &str, write: &str) -> Option<String> {
        let target = self.accepted_onto(under)?;
        if write == self.proposal || !same_but_final_newlines(write, self.proposal) {
            return Some(target);
        }
        let newlines = write.len() - write.trim_end_matches('\n').len();
        Some(format!(
            "{}{}",
            target.trim_end_matches('\n'),
            "\n".repeat(newlines)
        ))
    }

    /// The whole proposal written again after the review settled, onto a disk that says
    /// `disk`: what the disk gets instead. `settled`: what agentls made the disk say when the
    /// review settled, if it wrote it (the disk since holds the accepted hunks; merging them in
    /// again would apply them twice where lines repeat). A disk that says the base or the
    /// proposal is the agent's own doing; anything else was saved by the user and is kept, with
    /// the accepted hunks merged in where they fit.
    pub fn late_write(&self, disk: &str, settled: Option<&str>) -> String {
        let agents_own = disk == self.base || disk == self.proposal;
        match settled {
            Some(settled) if agents_own => settled.to_owned(),
            Some(_) => disk.to_owned(),
            None if agents_own => self.accepted.to_owned(),
            None => self.accepted_onto(disk).unwrap_or_else(|| disk.to_owned()),
        }
    }

    /// What the disk must say once the agent's late write lands on `under` (an open file as the
    /// user last saved it, else the disk before the write): the accepted hunks on it, or
    /// `under` itself where they overlap (the accepted change is then in the buffer, for the
    /// editor's save).
    pub fn late_target(&self, under: &str, settled: Option<&str>) -> String {
        match settled {
            Some(settled) => settled.to_owned(),
            None => self
                .accepted_onto(under)
                .unwrap_or_else(|| under.to_owned()),
        }
    }
}

/// `new`, written by someone who saw `seen`, landed on `current`: what `current` changed of
/// `seen` is kept. `None` where both changed the same lines.
pub fn onto(seen: &str, current: &str, new: &str) -> Option<String> {
    if current == seen {
        return Some(new.to_owned());
    }
    diff::merge3(seen, current, new)
}

/// Whether `a` and `b` differ at most in how many newlines they end with.
fn same_but_final_newlines(a: &str, b: &str) -> bool {
    a == b || a.trim_end_matches('\n') == b.trim_end_matches('\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    const REVIEWED: Reviewed<'static> = Reviewed {
        base: "a\nb\nc\n",
        proposal: "A\nb\nC\n",
        accepted: "A\nb\nc\n",
    };

    #[test]
    fn the_proposal_is_recognised_on_what_the_writer_saw() {
        assert!(REVIEWED.carried_out_by("A\nb\nC\n", &[]));
        assert!(REVIEWED.carried_out_by("A\nb\nC", &[]), "final newline");
        // The writer saw the user's extra line, and kept it.
        assert!(REVIEWED.carried_out_by("A\nb\nC\nd\n", &["a\nb\nc\nd\n"]));
        assert!(!REVIEWED.carried_out_by("A\nb\nC\nd\n", &["a\nb\nc\n"]));
        assert!(!REVIEWED.carried_out_by("x\n", &["a\nb\nc\n"]));
    }

    #[test]
    fn accepted_hunks_keep_what_changed_under_them() {
        assert_eq!(REVIEWED.accepted_onto("a\nb\nc\n").unwrap(), "A\nb\nc\n");
        assert_eq!(
            REVIEWED.accepted_onto("a\nB\nc\n").unwrap(),
            "A\nB\nc\n",
            "the user's line b"
        );
        assert_eq!(REVIEWED.accepted_onto("z\nb\nc\n"), None, "the same line");
        assert_eq!(
            REVIEWED
                .accepted_onto_as_written("a\nb\nc\n", "A\nb\nC\n\n")
                .unwrap(),
            "A\nb\nc\n\n"
        );
    }

    #[test]
    fn a_late_write_becomes_the_accepted_text() {
        for disk in ["a\nb\nc\n", "A\nb\nC\n"] {
            assert_eq!(REVIEWED.late_write(disk, None), "A\nb\nc\n", "{disk:?}");
            assert_eq!(REVIEWED.late_write(disk, Some("S\n")), "S\n", "{disk:?}");
        }
        // The user saved a line of their own since: it is kept.
        assert_eq!(REVIEWED.late_write("a\nb\nc\nd\n", None), "A\nb\nc\nd\n");
        assert_eq!(REVIEWED.late_write("mine\n", Some("S\n")), "mine\n");
        assert_eq!(REVIEWED.late_write("z\nb\nc\n", None), "z\nb\nc\n");
        assert_eq!(REVIEWED.late_target("a\nb\nc\nd\n", None), "A\nb\nc\nd\n");
        assert_eq!(REVIEWED.late_target("z\nb\nc\n", None), "z\nb\nc\n");
    }

    #[test]
    fn a_write_onto_unchanged_text_is_the_write() {
        assert_eq!(onto("a\n", "a\n", "b\n").unwrap(), "b\n");
        assert_eq!(onto("a\nb\n", "a\nB\n", "x\nb\n").unwrap(), "x\nB\n");
        assert_eq!(onto("a\n", "b\n", "c\n"), None);
    }
}
