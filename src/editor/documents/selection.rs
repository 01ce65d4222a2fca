//! The user's selections: the latest one per document, which document has focus, and the latest
//! non-empty selection anywhere (what an agent means by "the code I selected").

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::position::Range;

/// A selection in one document, with the text it covered when it was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Selection {
    /// The document.
    pub path: PathBuf,
    /// The selected range (empty for a bare cursor).
    pub range: Range,
    /// The selected text.
    pub text: String,
}

/// Selections as the editor reported them.
#[derive(Debug, Default)]
pub struct Selections {
    by_path: HashMap<PathBuf, Selection>,
    focused: Option<PathBuf>,
    latest_non_empty: Option<Selection>,
}

impl Selections {
    /// Records a selection and gives its document the focus.
    pub fn update(&mut self, selection: Selection) {
        if !selection.range.is_empty() {
            self.latest_non_empty = Some(selection.clone());
        }
        self.focused = Some(selection.path.clone());
        self.by_path.insert(selection.path.clone(), selection);
    }

    /// Gives `path` the focus without a selection of its own (a document just opened).
    pub fn focus(&mut self, path: &Path) {
        self.focused = Some(path.to_owned());
    }

    /// The selection in the focused document, if it has one.
    pub fn current(&self) -> Option<&Selection> {
        self.by_path.get(self.focused.as_ref()?)
    }

    /// The document with the focus.
    pub fn focused(&self) -> Option<&Path> {
        self.focused.as_deref()
    }

    /// The latest selection that covered any text, even if its document lost the focus.
    pub fn latest(&self) -> Option<&Selection> {
        self.latest_non_empty.as_ref()
    }

    /// Forgets a closed document's selection and focus (the latest non-empty one stays: the user
    /// may still mean it).
    pub fn forget(&mut self, path: &Path) {
        self.by_path.remove(path);
        if self.focused.as_deref() == Some(path) {
            self.focused = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::position::Position;
    use super::*;

    fn sel(path: &str, from: u32, to: u32) -> Selection {
        Selection {
            path: PathBuf::from(path),
            range: Range::new(Position::new(from, 0), Position::new(to, 0)),
            text: format!("{from}-{to}"),
        }
    }

    #[test]
    fn current_follows_focus_and_latest_keeps_the_last_real_selection() {
        let mut s = Selections::default();
        s.update(sel("/a", 1, 3));
        s.update(sel("/b", 2, 2));
        assert_eq!(s.current().unwrap().path, PathBuf::from("/b"));
        assert_eq!(s.latest().unwrap().path, PathBuf::from("/a"));
        s.forget(Path::new("/b"));
        assert!(s.current().is_none());
        assert_eq!(s.latest().unwrap().text, "1-3");
    }
}
