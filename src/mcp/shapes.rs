//! The JSON shapes terminal agents parse: selections, diagnostics, open editors, folders,
//! mentions. Field names and nesting are the contract (the IDE integrations agents were built
//! against send exactly these); nothing here talks to anyone.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::editor::documents::context::FileDiagnostics;
use crate::editor::{Level, OpenDocument, Range, Selection};

/// The path of a `file://` URL (or of a plain path), percent-decoded.
pub fn path_of(uri: &str) -> PathBuf {
    crate::file_uri::to_path(uri).unwrap_or_else(|| uri.into())
}

fn position(p: crate::editor::Position) -> Value {
    json!({"line": p.line, "character": p.character})
}

fn range(r: Range) -> Value {
    json!({"start": position(r.start), "end": position(r.end)})
}

/// A selection as `selection_changed` and `getLatestSelection` carry it (0-based lines).
pub fn selection(s: &Selection) -> Value {
    json!({
        "text": s.text,
        "filePath": s.path,
        "fileUrl": crate::file_uri::from_path(&s.path),
        "selection": {
            "start": position(s.range.start),
            "end": position(s.range.end),
            "isEmpty": s.range.is_empty(),
        },
    })
}

/// An empty selection at the top of `path` (a focused document the user has not selected in).
pub fn cursor_at_top(path: &Path) -> Selection {
    Selection {
        path: path.to_owned(),
        range: Range::default(),
        text: String::new(),
    }
}

/// `at_mentioned`: the whole lines a selection covers (0-based; a selection that ends at the
/// start of a line does not include that line).
pub fn mention(s: &Selection) -> Value {
    let start = s.range.start.line;
    let mut end = s.range.end.line;
    if s.range.end.character == 0 && end > start {
        end -= 1;
    }
    json!({"filePath": s.path, "lineStart": start, "lineEnd": end})
}

/// `getDiagnostics`: `[{uri, diagnostics: [{message, severity, range, source?, code?}]}]`.
pub fn diagnostics(files: &[FileDiagnostics]) -> Value {
    let files: Vec<Value> = files
        .iter()
        .map(|file| {
            let diagnostics: Vec<Value> = file
                .diagnostics
                .iter()
                .map(|d| {
                    let mut entry = json!({
                        "message": d.message,
                        "severity": severity(d.level),
                        "range": range(d.range),
                    });
                    if let Some(source) = &d.source {
                        entry["source"] = json!(source);
                    }
                    if let Some(code) = &d.code {
                        entry["code"] = json!(code);
                    }
                    entry
                })
                .collect();
            json!({"uri": crate::file_uri::from_path(&file.path), "diagnostics": diagnostics})
        })
        .collect();
    Value::Array(files)
}

fn severity(level: Level) -> &'static str {
    match level {
        Level::Error => "Error",
        Level::Warning => "Warning",
        Level::Info => "Info",
        Level::Log => "Hint",
    }
}

/// One open document as `getOpenEditors` lists it.
pub struct EditorTab<'a> {
    /// The document.
    pub document: &'a OpenDocument,
    /// Whether the buffer differs from the disk.
    pub dirty: bool,
    /// Lines in the buffer.
    pub line_count: usize,
    /// The user's selection in it, for the focused one.
    pub selection: Option<&'a Selection>,
}

/// `getOpenEditors`: `{tabs: [...]}`.
pub fn open_editors(tabs: &[EditorTab<'_>]) -> Value {
    let tabs: Vec<Value> = tabs
        .iter()
        .map(|tab| {
            let doc = tab.document;
            let mut entry = json!({
                "uri": crate::file_uri::from_path(&doc.path),
                "isActive": doc.focused,
                "isPinned": false,
                "isPreview": false,
                "isDirty": tab.dirty,
                "label": crate::editor::file_name(&doc.path),
                "groupIndex": 0,
                "viewColumn": 1,
                "isGroupActive": true,
                "fileName": doc.path,
                "languageId": doc.language,
                "lineCount": tab.line_count,
                "isUntitled": false,
            });
            if let Some(s) = tab.selection.filter(|_| doc.focused) {
                entry["selection"] = json!({
                    "start": position(s.range.start),
                    "end": position(s.range.end),
                    "isReversed": false,
                });
            }
            entry
        })
        .collect();
    json!({ "tabs": tabs })
}

/// `getWorkspaceFolders`: `{success, folders: [{name, uri, path}], rootPath}`.
pub fn workspace_folders(folders: &[std::path::PathBuf]) -> Value {
    let list: Vec<Value> = folders
        .iter()
        .map(|f| json!({"name": crate::editor::file_name(f), "uri": crate::file_uri::from_path(f), "path": f}))
        .collect();
    json!({"success": true, "folders": list, "rootPath": folders.first()})
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::editor::Position;
    use crate::editor::documents::effects::Diagnostic;

    fn sel(l1: u32, c1: u32, l2: u32, c2: u32) -> Selection {
        Selection {
            path: PathBuf::from("/ws/a b.rs"),
            range: Range::new(Position::new(l1, c1), Position::new(l2, c2)),
            text: "x".into(),
        }
    }

    #[test]
    fn selection_shape() {
        assert_eq!(
            selection(&sel(1, 2, 3, 0)),
            json!({
                "text": "x", "filePath": "/ws/a b.rs", "fileUrl": "file:///ws/a%20b.rs",
                "selection": {"start": {"line": 1, "character": 2},
                              "end": {"line": 3, "character": 0}, "isEmpty": false}
            })
        );
        assert_eq!(path_of("file:///ws/a%20b.rs"), PathBuf::from("/ws/a b.rs"));
        assert_eq!(path_of("/plain"), PathBuf::from("/plain"));
    }

    #[test]
    fn mentions_name_whole_lines() {
        assert_eq!(
            mention(&sel(1, 2, 3, 0)),
            json!({"filePath": "/ws/a b.rs", "lineStart": 1, "lineEnd": 2})
        );
        assert_eq!(mention(&sel(4, 0, 4, 0))["lineEnd"], 4);
    }

    #[test]
    fn diagnostics_shape() {
        let files = [FileDiagnostics {
            path: PathBuf::from("/ws/a.rs"),
            diagnostics: vec![Diagnostic {
                range: Range::new(Position::new(0, 1), Position::new(0, 4)),
                level: Level::Warning,
                message: "unused".into(),
                code: None,
                source: Some("rustc".into()),
            }],
        }];
        assert_eq!(
            diagnostics(&files),
            json!([{"uri": "file:///ws/a.rs", "diagnostics": [{
                "message": "unused", "severity": "Warning", "source": "rustc",
                "range": {"start": {"line": 0, "character": 1}, "end": {"line": 0, "character": 4}}
            }]}])
        );
    }
}
