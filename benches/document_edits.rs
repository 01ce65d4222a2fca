//! Applying 10,000 incremental edits to a 10 MB document (the server's rope), against rebuilding
//! the whole string for each edit (what a full-sync server does). Prints times and the ratio.
//!
//! Run: `cargo bench --bench document_edits`

use std::hint::black_box;
use std::time::Instant;

use agentls::editor::documents::{Document, TextChange};
use agentls::editor::{Position, PositionEncoding, Range};

const EDITS: usize = 10_000;
/// Rebuilding 10 MB per edit is slow; the baseline runs on a sample and is reported per edit.
const BASELINE_EDITS: usize = 500;

fn main() {
    let line = "let value = compute(\"漢字\", 😀, 42); // a line of code\n";
    let lines = 10 * 1024 * 1024 / line.len();
    let text = line.repeat(lines);
    let edits = edits(lines, EDITS);

    let mut doc = Document::new(&text, 0, "rust");
    let start = Instant::now();
    for (i, change) in edits.iter().enumerate() {
        doc.apply(
            i as i32 + 1,
            std::slice::from_ref(change),
            PositionEncoding::Utf16,
            false,
        );
    }
    let rope_total = start.elapsed();
    black_box(doc.rope().len_chars());

    let mut plain = text.clone();
    let start = Instant::now();
    for change in edits.iter().take(BASELINE_EDITS) {
        plain = rebuild(&plain, change);
    }
    let rebuild_total = start.elapsed();
    black_box(plain.len());

    let rope_per_edit = rope_total.as_secs_f64() / EDITS as f64;
    let rebuild_per_edit = rebuild_total.as_secs_f64() / BASELINE_EDITS as f64;
    println!("document: {:.1} MB, {lines} lines", text.len() as f64 / 1e6);
    println!(
        "incremental (rope): {EDITS} edits in {:.1} ms = {:.2} µs/edit",
        rope_total.as_secs_f64() * 1e3,
        rope_per_edit * 1e6
    );
    println!(
        "baseline (rebuild the string per edit): {:.1} µs/edit (measured on {BASELINE_EDITS} edits)",
        rebuild_per_edit * 1e6
    );
    println!(
        "ratio: incremental is {:.0}x faster per edit",
        rebuild_per_edit / rope_per_edit
    );
}

/// Deterministic edits spread over the document: replace a few UTF-16 units with a short text.
fn edits(lines: usize, count: usize) -> Vec<TextChange> {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..count)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let line = (seed % lines as u64) as u32;
            let character = (seed >> 32) as u32 % 40;
            TextChange {
                range: Some(Range::new(
                    Position::new(line, character),
                    Position::new(line, character + 2),
                )),
                text: "x😀".to_owned(),
            }
        })
        .collect()
}

/// The baseline: the text with the change applied, built from scratch. Uses the same position
/// rule on a plain string (UTF-16 units within the line).
fn rebuild(text: &str, change: &TextChange) -> String {
    let range = change.range.expect("incremental");
    let start = byte_offset(text, range.start);
    let end = byte_offset(text, range.end);
    let mut out = String::with_capacity(text.len() + change.text.len());
    out.push_str(&text[..start]);
    out.push_str(&change.text);
    out.push_str(&text[end..]);
    out
}

fn byte_offset(text: &str, position: Position) -> usize {
    let line_start = text
        .match_indices('\n')
        .nth((position.line as usize).wrapping_sub(1))
        .map_or(0, |(i, _)| i + 1);
    let line_start = if position.line == 0 { 0 } else { line_start };
    let mut units = 0;
    for (i, ch) in text[line_start..].char_indices() {
        if units >= position.character as usize || ch == '\n' {
            return line_start + i;
        }
        units += ch.len_utf16();
    }
    text.len()
}
