//! Position math for the test client, written independently of the server's so that a bug in
//! one is not mirrored by the other.

use serde_json::Value;

/// How the server counts characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// UTF-8 bytes.
    Utf8,
    /// UTF-16 code units.
    Utf16,
}

/// The byte offset of an LSP position (JSON) in `text`.
pub fn offset(text: &str, position: &Value, encoding: Encoding) -> usize {
    let line = position["line"].as_u64().unwrap() as usize;
    let character = position["character"].as_u64().unwrap() as usize;
    let mut start = 0;
    for _ in 0..line {
        match next_line_start(text, start) {
            Some(next) => start = next,
            None => return text.len(),
        }
    }
    let line_end = line_content_end(text, start);
    let mut units = 0;
    for (i, ch) in text[start..line_end].char_indices() {
        if units >= character {
            return start + i;
        }
        units += match encoding {
            Encoding::Utf8 => ch.len_utf8(),
            Encoding::Utf16 => ch.len_utf16(),
        };
    }
    line_end
}

/// `text` with the LSP `range` replaced by `new_text`.
pub fn replace(text: &str, range: &Value, new_text: &str, encoding: Encoding) -> String {
    let start = offset(text, &range["start"], encoding);
    let end = offset(text, &range["end"], encoding);
    format!("{}{}{}", &text[..start], new_text, &text[end..])
}

/// The LSP position of byte offset `at` in `text`.
pub fn position(text: &str, at: usize, encoding: Encoding) -> (u32, u32) {
    let mut line = 0;
    let mut start = 0;
    while let Some(next) = next_line_start(text, start) {
        if next > at {
            break;
        }
        line += 1;
        start = next;
    }
    let units: usize = text[start..at]
        .chars()
        .map(|c| match encoding {
            Encoding::Utf8 => c.len_utf8(),
            Encoding::Utf16 => c.len_utf16(),
        })
        .sum();
    (line, units as u32)
}

fn next_line_start(text: &str, from: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = from;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => return Some(i + 1),
            b'\r' if bytes.get(i + 1) == Some(&b'\n') => return Some(i + 2),
            b'\r' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

fn line_content_end(text: &str, start: usize) -> usize {
    text[start..]
        .find(['\n', '\r'])
        .map_or(text.len(), |i| start + i)
}
