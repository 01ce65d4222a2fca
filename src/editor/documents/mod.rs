//! The documents the editor has open: their text (a rope, so a keystroke in a 10 MB file costs
//! a log-time splice), version and language, keyed by absolute path. Offsets go through
//! `position.rs` in the negotiated encoding.

pub mod context;
pub mod effects;
pub mod position;
pub mod selection;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ropey::Rope;

use position::{PositionEncoding, PositionMapper, Range};

/// One change the editor reports: a range replaced by text, or the whole text when `range` is
/// `None` (full sync).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextChange {
    /// What the change replaces; `None` replaces the whole document.
    pub range: Option<Range>,
    /// The new text.
    pub text: String,
}

/// An open document as the editor last described it.
#[derive(Debug, Clone)]
pub struct Document {
    text: Rope,
    version: i32,
    language: String,
    /// What the file says on disk as far as agentls knows: the text when opened or last saved.
    saved: Rope,
    /// Whether `saved` was learnt since the open (a save, agentls's own write): then a read of
    /// the disk begun at the open is older news.
    saved_since_open: bool,
}

impl Document {
    /// A document with its first text.
    pub fn new(text: &str, version: i32, language: impl Into<String>) -> Self {
        let text = Rope::from_str(text);
        Self {
            saved: text.clone(),
            saved_since_open: false,
            text,
            version,
            language: language.into(),
        }
    }

    /// The editor's version of this text.
    pub fn version(&self) -> i32 {
        self.version
    }

    /// The language id the editor gave.
    pub fn language(&self) -> &str {
        &self.language
    }

    /// The whole text as a string (allocates; rope-aware callers use [`Document::rope`]).
    pub fn text(&self) -> String {
        self.text.to_string()
    }

    /// What the disk says as far as agentls knows (the text when opened or last saved).
    pub fn saved_text(&self) -> String {
        self.saved.to_string()
    }

    /// The disk now says `text`.
    pub fn set_saved(&mut self, text: &str) {
        self.saved = Rope::from_str(text);
        self.saved_since_open = true;
    }

    /// A read of the disk begun when the document opened says `text`; kept unless the disk
    /// was saved or written since.
    pub fn read_at_open(&mut self, text: &str) {
        if !self.saved_since_open {
            self.saved = Rope::from_str(text);
        }
    }

    /// The user saved: the disk says what the buffer says.
    pub fn mark_saved(&mut self) {
        self.saved = self.text.clone();
        self.saved_since_open = true;
    }

    /// The text as a rope.
    pub fn rope(&self) -> &Rope {
        &self.text
    }

    /// Position math for this text.
    pub fn mapper(&self, encoding: PositionEncoding) -> PositionMapper<'_> {
        PositionMapper::new(&self.text, encoding)
    }

    /// The text inside `range`.
    pub fn slice(&self, range: Range, encoding: PositionEncoding) -> String {
        let span = self.mapper(encoding).char_range(range);
        self.text.slice(span).to_string()
    }

    /// Applies the editor's changes in order and takes the new version. With `track`, returns
    /// what each change did as [`Splice`]s, in order, each relative to the text just before it
    /// (a whole-text replacement is broken into the minimal splices, so a review over the text
    /// can follow it).
    pub fn apply(
        &mut self,
        version: i32,
        changes: &[TextChange],
        encoding: PositionEncoding,
        track: bool,
    ) -> Vec<Splice> {
        let mut splices = Vec::new();
        for change in changes {
            match change.range {
                None => {
                    if track {
                        splices.extend(splices_between(&self.text.to_string(), &change.text));
                    }
                    self.text = Rope::from_str(&change.text);
                }
                Some(range) => {
                    let span = self.mapper(encoding).char_range(range);
                    self.text.remove(span.clone());
                    self.text.insert(span.start, &change.text);
                    if track {
                        let inserted = change.text.chars().count();
                        splices.push(Splice {
                            removed: span,
                            inserted,
                        });
                    }
                }
            }
        }
        self.version = version;
        splices
    }
}

/// One change of a text: the chars `removed` replaced by `inserted` chars.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Splice {
    /// Char offsets replaced, in the text just before this splice.
    pub removed: std::ops::Range<usize>,
    /// How many chars replace them.
    pub inserted: usize,
}

/// The minimal splices turning `old` into `new`, in an order where each is relative to the
/// text left by the ones before it (last in the text first).
pub fn splices_between(old: &str, new: &str) -> Vec<Splice> {
    let rope = Rope::from_str(old);
    let mut splices: Vec<Splice> = super::diff::minimal_edits(old, new)
        .into_iter()
        .map(|edit| Splice {
            removed: rope.byte_to_char(edit.range.start)..rope.byte_to_char(edit.range.end),
            inserted: edit.text.chars().count(),
        })
        .collect();
    splices.reverse();
    splices
}

/// All open documents.
#[derive(Debug, Default)]
pub struct Documents {
    by_path: HashMap<PathBuf, Document>,
}

impl Documents {
    /// Records a newly opened document, replacing any stale copy.
    pub fn open(&mut self, path: PathBuf, document: Document) {
        self.by_path.insert(path, document);
    }

    /// Forgets a closed document.
    pub fn close(&mut self, path: &Path) -> Option<Document> {
        self.by_path.remove(path)
    }

    /// The open document at `path`.
    pub fn get(&self, path: &Path) -> Option<&Document> {
        self.by_path.get(path)
    }

    /// The open document at `path`, to change.
    pub fn get_mut(&mut self, path: &Path) -> Option<&mut Document> {
        self.by_path.get_mut(path)
    }

    /// Every open document, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&PathBuf, &Document)> {
        self.by_path.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::position::Position;
    use super::*;

    fn change(l1: u32, c1: u32, l2: u32, c2: u32, text: &str) -> TextChange {
        TextChange {
            range: Some(Range::new(Position::new(l1, c1), Position::new(l2, c2))),
            text: text.to_owned(),
        }
    }

    #[test]
    fn incremental_changes_in_utf16_splice_the_right_chars() {
        let mut doc = Document::new("a😀b\n漢字\n", 1, "text");
        doc.apply(
            2,
            &[change(0, 3, 0, 4, "B")],
            PositionEncoding::Utf16,
            false,
        );
        doc.apply(
            3,
            &[change(1, 1, 1, 2, "語")],
            PositionEncoding::Utf16,
            false,
        );
        assert_eq!(doc.text(), "a😀B\n漢語\n");
        assert_eq!(doc.version(), 3);
    }

    #[test]
    fn incremental_changes_in_utf8_splice_the_right_chars() {
        let mut doc = Document::new("a😀b", 1, "text");
        doc.apply(
            2,
            &[change(0, 5, 0, 6, "c"), change(0, 0, 0, 0, ">")],
            PositionEncoding::Utf8,
            false,
        );
        assert_eq!(doc.text(), ">a😀c");
    }

    #[test]
    fn full_sync_replaces_the_text_and_reports_minimal_splices() {
        let mut doc = Document::new("one\ntwo\nthree\n", 1, "text");
        let splices = doc.apply(
            2,
            &[TextChange {
                range: None,
                text: "ONE\ntwo\nthree!\n".into(),
            }],
            PositionEncoding::Utf16,
            true,
        );
        assert_eq!(doc.text(), "ONE\ntwo\nthree!\n");
        // Last first, so each splice is relative to the text the previous ones left.
        assert_eq!(
            splices,
            vec![
                Splice {
                    removed: 13..13,
                    inserted: 1
                },
                Splice {
                    removed: 0..3,
                    inserted: 3
                },
            ]
        );
    }
}
