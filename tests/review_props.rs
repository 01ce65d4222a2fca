//! Properties of the review model over random texts (emoji, CJK, CRLF, empty, no trailing
//! newline) and random proposals: accept all = the proposal, reject all = the original, any
//! subset = exactly those changes; and random interleavings of user edits with accept/reject
//! never lose a keystroke. 10,000 cases each by default (`PROPTEST_CASES` to change).

use std::path::PathBuf;

use agentls::editor::Origin;
use agentls::editor::diff;
use agentls::editor::review::{Applier, HunkState, Review, ReviewKind};
use proptest::prelude::*;
use ropey::Rope;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    ProptestConfig {
        cases,
        // The seeds of past failures (tests/review_props.proptest-regressions) run first.
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::SourceParallel("proptest-regressions"),
        )),
        ..ProptestConfig::default()
    }
}

/// A line from a small alphabet so that proposals share lines with their base.
fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("fn main() {".to_owned()),
        Just("    let x = 1;".to_owned()),
        Just("漢字かな".to_owned()),
        Just("😀 emoji 🦀".to_owned()),
        Just("".to_owned()),
        Just("}".to_owned()),
        "[a-c😀漢]{0,6}",
    ]
}

/// A text: lines joined by `\n` or `\r\n`, with or without a final line break.
fn text() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(line(), 0..12),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(lines, crlf, final_break)| {
            let sep = if crlf { "\r\n" } else { "\n" };
            let mut text = lines.join(sep);
            if final_break && !lines.is_empty() {
                text.push_str(sep);
            }
            text
        })
}

/// A proposal derived from `base` by replacing, inserting and deleting lines.
fn base_and_proposal() -> impl Strategy<Value = (String, String)> {
    (
        text(),
        prop::collection::vec((0usize..20, 0u8..3, line()), 0..6),
    )
        .prop_map(|(base, ops)| {
            let mut lines: Vec<String> = base.split_inclusive('\n').map(str::to_owned).collect();
            for (at, op, new) in ops {
                let at = at % (lines.len() + 1);
                match op {
                    0 if at < lines.len() => lines[at] = format!("{new}\n"),
                    1 => lines.insert(at, format!("{new}\n")),
                    _ if at < lines.len() => {
                        lines.remove(at);
                    }
                    _ => {}
                }
            }
            (base, lines.concat())
        })
}

fn review_of(base: &str, proposal: &str) -> Review {
    Review {
        id: agentls::editor::review::ReviewId(1),
        kind: ReviewKind::Proposal,
        applied_by: Applier::Editor,
        phase: agentls::editor::review::Phase::Deciding,
        origin: Origin::new("test", "test"),
        path: PathBuf::from("/t"),
        title: String::new(),
        base: base.to_owned(),
        proposal: proposal.to_owned(),
        file_existed: true,
        hunks: Review::hunks_between(base, proposal),
        text: agentls::editor::review::ReviewText::Closed(ropey::Rope::from_str(base)),
        verdict: None,
    }
}

/// Applies the accepted hunks with plain string surgery, independently of the model's rope.
fn splice_by_hand(base: &str, review: &Review) -> String {
    let chars: Vec<char> = base.chars().collect();
    let mut out = String::new();
    let mut at = 0;
    for hunk in &review.hunks {
        out.extend(&chars[at..hunk.span.start]);
        if hunk.state == HunkState::Accepted {
            out.push_str(&hunk.new_text);
        } else {
            out.extend(&chars[hunk.span.clone()]);
        }
        at = hunk.span.end;
    }
    out.extend(&chars[at..]);
    out
}

/// The user's `k`-th keystroke.
fn marker(k: u32) -> char {
    char::from_u32(0xE000 + k).expect("private use area")
}

fn is_marker(c: char) -> bool {
    ('\u{E000}'..='\u{E0FF}').contains(&c)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn accepting_all_gives_the_proposal((base, proposal) in base_and_proposal()) {
        let mut review = review_of(&base, &proposal);
        review.hunks.iter_mut().for_each(|h| h.state = HunkState::Accepted);
        prop_assert_eq!(review.accepted_text(&Rope::from_str(&base)), proposal);
    }

    #[test]
    fn rejecting_all_gives_the_original((base, proposal) in base_and_proposal()) {
        let mut review = review_of(&base, &proposal);
        review.hunks.iter_mut().for_each(|h| h.state = HunkState::Rejected);
        prop_assert_eq!(review.accepted_text(&Rope::from_str(&base)), base);
    }

    #[test]
    fn any_subset_gives_exactly_those_changes(
        (base, proposal) in base_and_proposal(),
        picks in prop::collection::vec(any::<bool>(), 32),
    ) {
        let mut review = review_of(&base, &proposal);
        for (hunk, pick) in review.hunks.iter_mut().zip(picks) {
            hunk.state = if pick { HunkState::Accepted } else { HunkState::Rejected };
        }
        let result = review.accepted_text(&Rope::from_str(&base));
        prop_assert_eq!(&result, &splice_by_hand(&base, &review));
        prop_assert_eq!(&result, &review.accepted_over_base());
        // Accepting the rest on top of the result gives the proposal.
        let rest = Review::hunks_between(&result, &proposal);
        let mut finish = review_of(&result, &proposal);
        finish.hunks = rest;
        finish.hunks.iter_mut().for_each(|h| h.state = HunkState::Accepted);
        prop_assert_eq!(finish.accepted_text(&Rope::from_str(&result)), proposal);
    }

    /// Random user edits (marker insertions and deletions of unmarked text) interleaved with
    /// accepting and rejecting hunks, applied to the text the way the editor would: every
    /// marker survives, and a pending hunk always still sits on its old text.
    #[test]
    fn interleaved_user_edits_are_never_lost(
        (base, proposal) in base_and_proposal(),
        steps in prop::collection::vec((0u8..4, any::<prop::sample::Index>(), any::<prop::sample::Index>()), 0..24),
    ) {
        let mut review = review_of(&base, &proposal);
        let mut text: Vec<char> = base.chars().collect();
        let mut markers = 0u32;
        for (kind, a, b) in steps {
            match kind {
                0 => {
                    // Each keystroke is one private-use char, so nothing can split it.
                    let at = a.index(text.len() + 1);
                    text.insert(at, marker(markers));
                    markers += 1;
                    review.rebase(at..at, 1);
                }
                1 if !text.is_empty() => {
                    let (x, y) = (a.index(text.len()), b.index(text.len()));
                    let (from, to) = (x.min(y), x.max(y).min(x.min(y) + 3));
                    if text[from..to].iter().any(|&c| is_marker(c)) {
                        continue;
                    }
                    text.drain(from..to);
                    review.rebase(from..to, 0);
                }
                2 if !review.hunks.is_empty() => {
                    let i = a.index(review.hunks.len());
                    if review.hunks[i].state != HunkState::Pending {
                        continue;
                    }
                    // The editor applies the hunk's minimal edits, last first.
                    let span = review.hunks[i].span.clone();
                    let current: String = text[span.clone()].iter().collect();
                    prop_assert_eq!(&current, &review.hunks[i].old_text);
                    review.hunks[i].state = HunkState::Applying;
                    let mut edits = diff::minimal_edits(&current, &review.hunks[i].new_text);
                    edits.reverse();
                    for edit in edits {
                        let start = span.start + current[..edit.range.start].chars().count();
                        let end = span.start + current[..edit.range.end].chars().count();
                        let inserted: Vec<char> = edit.text.chars().collect();
                        text.splice(start..end, inserted.iter().copied());
                        review.rebase(start..end, inserted.len());
                    }
                    review.hunks[i].state = HunkState::Accepted;
                    // The hunk now sits on its new text, whatever edits carried it there.
                    let now: String = text[review.hunks[i].span.clone()].iter().collect();
                    prop_assert_eq!(&now, &review.hunks[i].new_text);
                }
                3 if !review.hunks.is_empty() => {
                    let i = a.index(review.hunks.len());
                    if matches!(review.hunks[i].state, HunkState::Pending | HunkState::Conflict) {
                        review.hunks[i].state = HunkState::Rejected;
                    }
                }
                _ => {}
            }
            for hunk in review.hunks.iter().filter(|h| h.state == HunkState::Pending) {
                let current: String = text[hunk.span.clone()].iter().collect();
                prop_assert_eq!(&current, &hunk.old_text);
            }
        }
        let text: String = text.into_iter().collect();
        for k in 0..markers {
            prop_assert_eq!(text.matches(marker(k)).count(), 1, "keystroke {} lost in {:?}", k, text);
        }
    }
}
