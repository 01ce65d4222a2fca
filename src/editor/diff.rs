//! Minimal edits between two texts: line hunks from `similar`, refined to character edits inside
//! replaced lines. Offsets here are bytes of the old text; turning them into positions is
//! `documents/position.rs`'s job.

use std::ops::Range;

use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;
use similar::{Algorithm, DiffOp, TextDiff, capture_diff_slices_deadline};

/// The most time a line diff may take before settling for a coarser result.
const LINE_DIFF_BUDGET: Duration = Duration::from_millis(500);

/// Replaced blocks larger than this (old + new bytes) are not refined to characters: a char diff
/// is quadratic in the worst case and a block this large is a rewrite anyway.
const MAX_REFINE_BYTES: usize = 16 * 1024;

/// Equal runs shorter than this between two char edits are folded into one edit, so a reworded
/// identifier reads as one change rather than a scatter of letters.
const MIN_EQUAL_RUN: usize = 3;

/// A replacement of `old[range]` by `text`, in byte offsets of the old text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ByteEdit {
    /// Bytes of the old text to replace.
    pub range: Range<usize>,
    /// What replaces them.
    pub text: String,
}

/// A block of consecutive changed lines: `old[old]` becomes `new[new]` (byte ranges covering
/// whole lines, line breaks included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineHunk {
    /// Bytes of the old text the hunk replaces.
    pub old: Range<usize>,
    /// Bytes of the new text that replace them.
    pub new: Range<usize>,
    /// Zero-based old line numbers the hunk covers.
    pub old_lines: Range<usize>,
}

/// The blocks of changed lines between `old` and `new`, in order. Lines are interned to
/// integers first (comparing two lines is then one integer compare), and Myers runs with a
/// deadline: a rewrite of a huge file degrades to a coarser diff instead of taking seconds.
pub fn line_hunks(old: &str, new: &str) -> Vec<LineHunk> {
    let old_lines: Vec<&str> = old.split_inclusive('\n').collect();
    let new_lines: Vec<&str> = new.split_inclusive('\n').collect();
    let mut ids: FxHashMap<&str, u32> = FxHashMap::default();
    let old_ids = intern(&mut ids, &old_lines);
    let new_ids = intern(&mut ids, &new_lines);
    let deadline = Instant::now() + LINE_DIFF_BUDGET;
    let ops = capture_diff_slices_deadline(Algorithm::Myers, &old_ids, &new_ids, Some(deadline));
    let old_starts = line_starts(old_lines.iter().copied());
    let new_starts = line_starts(new_lines.iter().copied());
    let mut hunks: Vec<LineHunk> = Vec::new();
    for op in &ops {
        if matches!(op, DiffOp::Equal { .. }) {
            continue;
        }
        let (old_range, new_range) = (op.old_range(), op.new_range());
        let hunk = LineHunk {
            old: old_starts[old_range.start]..old_starts[old_range.end],
            new: new_starts[new_range.start]..new_starts[new_range.end],
            old_lines: old_range,
        };
        // A replaced block comes as a delete and an insert: join touching ops.
        match hunks.last_mut() {
            Some(last) if last.old.end == hunk.old.start && last.new.end == hunk.new.start => {
                last.old.end = hunk.old.end;
                last.new.end = hunk.new.end;
                last.old_lines.end = hunk.old_lines.end;
            }
            _ => hunks.push(hunk),
        }
    }
    hunks
}

/// Each line as a small integer, equal lines equal integers.
fn intern<'a>(ids: &mut FxHashMap<&'a str, u32>, lines: &[&'a str]) -> Vec<u32> {
    lines
        .iter()
        .map(|line| {
            let next = ids.len() as u32;
            *ids.entry(line).or_insert(next)
        })
        .collect()
}

/// The character edits that turn `old[hunk.old]` into `new[hunk.new]`, in old-text offsets.
pub fn refine(old: &str, new: &str, hunk: &LineHunk) -> Vec<ByteEdit> {
    let (old_block, new_block) = (&old[hunk.old.clone()], &new[hunk.new.clone()]);
    if old_block.is_empty()
        || new_block.is_empty()
        || old_block.len() + new_block.len() > MAX_REFINE_BYTES
    {
        return vec![ByteEdit {
            range: hunk.old.clone(),
            text: new_block.to_owned(),
        }];
    }
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Myers)
        .diff_chars(old_block, new_block);
    let old_starts = line_starts(diff.iter_old_slices());
    let new_starts = line_starts(diff.iter_new_slices());
    let mut edits: Vec<(Range<usize>, Range<usize>)> = Vec::new();
    for op in diff.ops() {
        if matches!(op, DiffOp::Equal { .. }) {
            continue;
        }
        let o = old_starts[op.old_range().start]..old_starts[op.old_range().end];
        let n = new_starts[op.new_range().start]..new_starts[op.new_range().end];
        match edits.last_mut() {
            Some((lo, ln))
                if o.start - lo.end < MIN_EQUAL_RUN && n.start - ln.end < MIN_EQUAL_RUN =>
            {
                lo.end = o.end;
                ln.end = n.end;
            }
            _ => edits.push((o, n)),
        }
    }
    edits
        .into_iter()
        .map(|(o, n)| ByteEdit {
            range: hunk.old.start + o.start..hunk.old.start + o.end,
            text: new_block[n].to_owned(),
        })
        .collect()
}

/// Small edits that turn `old` into `new`: what an editor applies so that undo, marks and the
/// cursor survive a whole-file rewrite.
pub fn minimal_edits(old: &str, new: &str) -> Vec<ByteEdit> {
    line_hunks(old, new)
        .iter()
        .flat_map(|hunk| refine(old, new, hunk))
        .collect()
}

/// `old` with `edits` applied; edits must be sorted and must not overlap.
pub fn apply(old: &str, edits: &[ByteEdit]) -> String {
    let mut out = String::with_capacity(old.len());
    let mut cursor = 0;
    for edit in edits {
        out.push_str(&old[cursor..edit.range.start]);
        out.push_str(&edit.text);
        cursor = edit.range.end;
    }
    out.push_str(&old[cursor..]);
    out
}

/// Three-way merge: the changes from `base` to `ours` and from `base` to `theirs`, combined.
/// `None` when both sides changed the same lines differently (or inserted at the same place):
/// then there is no merge that keeps both without a human choosing.
pub fn merge3(base: &str, ours: &str, theirs: &str) -> Option<String> {
    let side = |new: &str| -> Vec<ByteEdit> {
        line_hunks(base, new)
            .into_iter()
            .map(|h| ByteEdit {
                range: h.old,
                text: new[h.new].to_owned(),
            })
            .collect()
    };
    let mut edits = side(ours);
    edits.extend(side(theirs));
    edits.sort_by_key(|e| (e.range.start, e.range.end));
    let mut merged: Vec<ByteEdit> = Vec::with_capacity(edits.len());
    for edit in edits {
        if let Some(last) = merged.last() {
            if *last == edit {
                continue; // both sides made the same change
            }
            let overlaps = edit.range.start < last.range.end;
            let same_spot = edit.range.start == last.range.start;
            if overlaps || same_spot {
                return None;
            }
        }
        merged.push(edit);
    }
    Some(apply(base, &merged))
}

/// Byte offsets where each slice starts, plus the total length at the end.
fn line_starts<'a>(slices: impl Iterator<Item = &'a str>) -> Vec<usize> {
    let mut starts = vec![0];
    let mut at = 0;
    for slice in slices {
        at += slice.len();
        starts.push(at);
    }
    starts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_changed_word_is_one_small_edit() {
        let old = "fn main() {\n    let x = 1;\n}\n";
        let new = "fn main() {\n    let y = 1;\n}\n";
        let edits = minimal_edits(old, new);
        assert_eq!(edits.len(), 1);
        assert_eq!(&old[edits[0].range.clone()], "x");
        assert_eq!(edits[0].text, "y");
        assert_eq!(apply(old, &edits), new);
    }

    #[test]
    fn replaced_lines_form_one_hunk() {
        let old = "a\nb\nc\nd\n";
        let new = "a\nB\nC\nd\n";
        let hunks = line_hunks(old, new);
        assert_eq!(hunks.len(), 1);
        assert_eq!(hunks[0].old_lines, 1..3);
        assert_eq!(&old[hunks[0].old.clone()], "b\nc\n");
    }

    #[test]
    fn merge3_keeps_both_sides_or_refuses() {
        let base = "one\ntwo\nthree\nfour\n";
        let ours = "ONE\ntwo\nthree\nfour\n";
        let theirs = "one\ntwo\nthree\nFOUR\n";
        assert_eq!(
            merge3(base, ours, theirs).unwrap(),
            "ONE\ntwo\nthree\nFOUR\n"
        );
        assert_eq!(merge3(base, ours, ours).unwrap(), ours);
        assert_eq!(merge3(base, base, theirs).unwrap(), theirs);
        assert!(merge3(base, "uno\ntwo\nthree\nfour\n", ours).is_none());
        assert!(
            merge3(
                base,
                "zero\none\ntwo\nthree\nfour\n",
                "nil\none\ntwo\nthree\nfour\n"
            )
            .is_none()
        );
    }

    #[test]
    fn edge_cases_round_trip() {
        let cases = [
            ("", "new file\n"),
            ("gone\n", ""),
            ("no newline", "no newline\n"),
            ("a\r\nb\r\n", "a\r\nx\r\nb\r\n"),
            ("😀 漢字\n", "😀 字漢\n"),
            ("same\n", "same\n"),
        ];
        for (old, new) in cases {
            assert_eq!(
                apply(old, &minimal_edits(old, new)),
                new,
                "{old:?} -> {new:?}"
            );
        }
    }
}
