//! Position math: the one place that turns `(line, character)` in the negotiated encoding into
//! char offsets of a text and back. Nothing else in agentls does offset arithmetic.
//!
//! Lines end at `\n`, `\r\n` or `\r`, exactly as LSP defines them (ropey's `cr_lines`). A position
//! past the end of its line means the end of that line; a line past the end of the text means the
//! end of the text, as the LSP specification asks of servers.

use ropey::Rope;
use serde::{Deserialize, Serialize};

/// How the `character` of a [`Position`] counts: in UTF-8 bytes or UTF-16 code units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PositionEncoding {
    /// Bytes of the UTF-8 encoding.
    #[serde(rename = "utf-8")]
    Utf8,
    /// UTF-16 code units: the LSP default.
    #[default]
    #[serde(rename = "utf-16")]
    Utf16,
}

/// A zero-based line and character, in the document's [`PositionEncoding`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub struct Position {
    /// Zero-based line.
    pub line: u32,
    /// Zero-based offset in the line, in the negotiated encoding.
    pub character: u32,
}

impl Position {
    /// A position from its line and character.
    pub const fn new(line: u32, character: u32) -> Self {
        Self { line, character }
    }
}

/// A half-open span between two [`Position`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Range {
    /// First position inside the range.
    pub start: Position,
    /// First position after the range.
    pub end: Position,
}

impl Range {
    /// A range from its two ends.
    pub const fn new(start: Position, end: Position) -> Self {
        Self { start, end }
    }

    /// The same range with its ends in order (a client may send them reversed).
    pub fn ordered(self) -> Self {
        if self.end < self.start {
            Self::new(self.end, self.start)
        } else {
            self
        }
    }

    /// Whether the range is empty (a cursor).
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }
}

/// Converts between positions and char offsets of one text in one encoding.
#[derive(Debug, Clone, Copy)]
pub struct PositionMapper<'a> {
    text: &'a Rope,
    encoding: PositionEncoding,
}

impl<'a> PositionMapper<'a> {
    /// A mapper over `text` counting characters in `encoding`.
    pub fn new(text: &'a Rope, encoding: PositionEncoding) -> Self {
        Self { text, encoding }
    }

    /// The char offset of `position`, clamped to its line and to the text.
    pub fn char_offset(&self, position: Position) -> usize {
        let rope = self.text;
        let line = position.line as usize;
        if line >= rope.len_lines() {
            return rope.len_chars();
        }
        let line_start = rope.line_to_char(line);
        let line_end = line_start + line_content_len(rope, line);
        let target = match self.encoding {
            PositionEncoding::Utf16 => {
                let start_cu = rope.char_to_utf16_cu(line_start);
                let end_cu = rope.char_to_utf16_cu(line_end);
                let cu = (start_cu + position.character as usize).min(end_cu);
                rope.utf16_cu_to_char(cu)
            }
            PositionEncoding::Utf8 => {
                let start_byte = rope.char_to_byte(line_start);
                let end_byte = rope.char_to_byte(line_end);
                let byte = (start_byte + position.character as usize).min(end_byte);
                rope.byte_to_char(byte)
            }
        };
        target.clamp(line_start, line_end)
    }

    /// The position of char offset `offset` (clamped to the text).
    pub fn position(&self, offset: usize) -> Position {
        let rope = self.text;
        let offset = offset.min(rope.len_chars());
        let line = rope.char_to_line(offset);
        let line_start = rope.line_to_char(line);
        let character = match self.encoding {
            PositionEncoding::Utf16 => {
                rope.char_to_utf16_cu(offset) - rope.char_to_utf16_cu(line_start)
            }
            PositionEncoding::Utf8 => rope.char_to_byte(offset) - rope.char_to_byte(line_start),
        };
        Position::new(to_u32(line), to_u32(character))
    }

    /// The char offsets of `range`, ordered even when the range is given backwards.
    pub fn char_range(&self, range: Range) -> std::ops::Range<usize> {
        let a = self.char_offset(range.start);
        let b = self.char_offset(range.end);
        a.min(b)..a.max(b)
    }

    /// The range covering char offsets `span`.
    pub fn range(&self, span: std::ops::Range<usize>) -> Range {
        Range::new(self.position(span.start), self.position(span.end))
    }

    /// The position just past the last character of the text.
    pub fn end(&self) -> Position {
        self.position(self.text.len_chars())
    }

    /// The range and text that replace chars `span` with `text`, kept off the empty line after
    /// a final `\n` when `text` ends with one too: the same change, with that line break taken
    /// from the end of both (or, for an insertion there, moved to the front of the text).
    /// Neovim applies an edit on that line as whole lines, which adds a line break of its own.
    pub fn replacement(&self, span: std::ops::Range<usize>, text: String) -> (Range, String) {
        let (rope, len) = (self.text, self.text.len_chars());
        let at_final_lf = span.end == len
            && len > 0
            && rope.char(len - 1) == '\n'
            && (len == 1 || rope.char(len - 2) != '\r');
        if !at_final_lf || !text.ends_with('\n') || text.ends_with("\r\n") {
            return (self.range(span), text);
        }
        let kept = &text[..text.len() - 1];
        match span.start == len {
            true => (self.range(len - 1..len - 1), format!("\n{kept}")),
            false => (self.range(span.start..len - 1), kept.to_owned()),
        }
    }
}

/// Chars of `line` without its line break.
fn line_content_len(rope: &Rope, line: usize) -> usize {
    let slice = rope.line(line);
    let len = slice.len_chars();
    let mut break_len = 0;
    if len > 0 && matches!(slice.char(len - 1), '\n' | '\r') {
        break_len = 1;
        if slice.char(len - 1) == '\n' && len > 1 && slice.char(len - 2) == '\r' {
            break_len = 2;
        }
    }
    len - break_len
}

/// Saturating conversion for positions: no real document has 4 billion lines.
fn to_u32(value: usize) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offset(text: &str, enc: PositionEncoding, line: u32, character: u32) -> usize {
        let rope = Rope::from_str(text);
        PositionMapper::new(&rope, enc).char_offset(Position::new(line, character))
    }

    fn position(text: &str, enc: PositionEncoding, offset: usize) -> Position {
        let rope = Rope::from_str(text);
        PositionMapper::new(&rope, enc).position(offset)
    }

    #[test]
    fn a_replacement_ending_in_a_line_break_stays_off_the_line_after_the_last() {
        let rope = Rope::from_str("a\nb\n");
        let mapper = PositionMapper::new(&rope, PositionEncoding::Utf16);
        let at = |line, character| Position::new(line, character);
        let cases = [
            // Appending whole lines: the line break moves to the front.
            (4..4, "c\n\n", Range::new(at(1, 1), at(1, 1)), "\nc\n"),
            // Replacing the last line: both lose their final line break.
            (2..4, "B\n", Range::new(at(1, 0), at(1, 1)), "B"),
            // Text that ends mid-line, and an edit elsewhere, are left as they are.
            (4..4, "c", Range::new(at(2, 0), at(2, 0)), "c"),
            (0..1, "x\n", Range::new(at(0, 0), at(0, 1)), "x\n"),
        ];
        for (span, text, range, moved) in cases {
            let expected = (range, moved.to_owned());
            assert_eq!(mapper.replacement(span, text.into()), expected, "{text:?}");
        }
        // A final \r\n is left as it is.
        let rope = Rope::from_str("a\r\n");
        let mapper = PositionMapper::new(&rope, PositionEncoding::Utf16);
        assert_eq!(
            mapper.replacement(3..3, "b\r\n".into()),
            (Range::new(at(1, 0), at(1, 0)), "b\r\n".into())
        );
        // Moved or not, the text comes out the same.
        let applied = |text: &str, span: std::ops::Range<usize>, new: &str| {
            let rope = Rope::from_str(text);
            let mapper = PositionMapper::new(&rope, PositionEncoding::Utf8);
            let (range, new) = mapper.replacement(span, new.to_owned());
            let chars = mapper.char_range(range);
            let mut out = rope.clone();
            out.remove(chars.clone());
            out.insert(chars.start, &new);
            out.to_string()
        };
        for (text, span, new) in [
            ("a\n", 2..2, "b\n"),
            ("a\n", 0..2, "\n"),
            ("\n", 1..1, "\n"),
        ] {
            let mut expected = text.to_owned();
            expected.replace_range(span.clone(), new);
            assert_eq!(applied(text, span, new), expected, "{text:?}");
        }
    }

    #[test]
    fn emoji_counts_two_utf16_units_and_four_bytes() {
        let text = "a😀b\n";
        // 'b' is char 2.
        assert_eq!(offset(text, PositionEncoding::Utf16, 0, 3), 2);
        assert_eq!(offset(text, PositionEncoding::Utf8, 0, 5), 2);
        assert_eq!(
            position(text, PositionEncoding::Utf16, 2),
            Position::new(0, 3)
        );
        assert_eq!(
            position(text, PositionEncoding::Utf8, 2),
            Position::new(0, 5)
        );
    }

    #[test]
    fn cjk_is_one_utf16_unit_and_three_bytes() {
        let text = "漢字x";
        assert_eq!(offset(text, PositionEncoding::Utf16, 0, 2), 2);
        assert_eq!(offset(text, PositionEncoding::Utf8, 0, 6), 2);
        assert_eq!(
            position(text, PositionEncoding::Utf8, 3),
            Position::new(0, 7)
        );
    }

    #[test]
    fn crlf_is_one_line_break_and_positions_clamp_before_it() {
        let text = "ab\r\ncd\r\n";
        assert_eq!(offset(text, PositionEncoding::Utf16, 1, 0), 4);
        assert_eq!(offset(text, PositionEncoding::Utf16, 0, 99), 2);
        assert_eq!(
            position(text, PositionEncoding::Utf16, 5),
            Position::new(1, 1)
        );
        assert_eq!(offset(text, PositionEncoding::Utf16, 2, 0), 8);
    }

    #[test]
    fn lone_cr_breaks_lines_like_lsp_says() {
        assert_eq!(offset("a\rb", PositionEncoding::Utf16, 1, 0), 2);
    }

    #[test]
    fn no_trailing_newline_and_past_the_end() {
        let text = "one\ntwo";
        assert_eq!(offset(text, PositionEncoding::Utf16, 1, 3), 7);
        assert_eq!(offset(text, PositionEncoding::Utf16, 5, 0), 7);
        let rope = Rope::from_str(text);
        assert_eq!(
            PositionMapper::new(&rope, PositionEncoding::Utf8).end(),
            Position::new(1, 3)
        );
    }

    #[test]
    fn empty_text_has_one_empty_line() {
        assert_eq!(offset("", PositionEncoding::Utf16, 0, 0), 0);
        assert_eq!(offset("", PositionEncoding::Utf8, 3, 4), 0);
        assert_eq!(
            position("", PositionEncoding::Utf16, 10),
            Position::new(0, 0)
        );
    }

    #[test]
    fn character_inside_a_surrogate_pair_rounds_down() {
        assert_eq!(offset("😀x", PositionEncoding::Utf16, 0, 1), 0);
        assert_eq!(offset("😀x", PositionEncoding::Utf8, 0, 2), 0);
    }
}
