//! Conversions between LSP wire types and the port's types. Positions keep their numbers (both
//! sides speak the negotiated encoding); only `editor::position` interprets them.

use std::path::{Path, PathBuf};

use tower_lsp_server::ls_types::{self as lsp, Uri};

use crate::editor::{self, Level, Position, Range, TextChange};

/// The file path of a `file:` URI; other schemes have none.
pub fn path_of(uri: &Uri) -> Option<PathBuf> {
    let is_file = uri.scheme().as_str().eq_ignore_ascii_case("file");
    if !is_file {
        return None;
    }
    uri.to_file_path().map(|p| p.into_owned())
}

/// The `file:` URI of an absolute path.
pub fn uri_of(path: &Path) -> Option<Uri> {
    Uri::from_file_path(path)
}

/// An LSP position as the port's.
pub fn position(p: lsp::Position) -> Position {
    Position::new(p.line, p.character)
}

/// A port position as LSP's.
pub fn lsp_position(p: Position) -> lsp::Position {
    lsp::Position::new(p.line, p.character)
}

/// An LSP range as the port's.
pub fn range(r: lsp::Range) -> Range {
    Range::new(position(r.start), position(r.end))
}

/// A port range as LSP's.
pub fn lsp_range(r: Range) -> lsp::Range {
    lsp::Range::new(lsp_position(r.start), lsp_position(r.end))
}

/// A `didChange` content change as the port's.
pub fn text_change(change: lsp::TextDocumentContentChangeEvent) -> TextChange {
    TextChange {
        range: change.range.map(range),
        text: change.text,
    }
}

/// A port edit as LSP's.
pub fn text_edit(edit: editor::documents::effects::TextEdit) -> lsp::TextEdit {
    lsp::TextEdit::new(lsp_range(edit.range), edit.new_text)
}

/// A port diagnostic as LSP's, with source `agentls`.
pub fn diagnostic(d: editor::documents::effects::Diagnostic) -> lsp::Diagnostic {
    let severity = match d.level {
        Level::Error => lsp::DiagnosticSeverity::ERROR,
        Level::Warning => lsp::DiagnosticSeverity::WARNING,
        Level::Info => lsp::DiagnosticSeverity::INFORMATION,
        Level::Log => lsp::DiagnosticSeverity::HINT,
    };
    lsp::Diagnostic {
        range: lsp_range(d.range),
        severity: Some(severity),
        code: d.code.map(lsp::NumberOrString::String),
        source: d.source,
        message: d.message,
        ..Default::default()
    }
}

/// A port inlay hint as LSP's.
pub fn inlay_hint(hint: editor::documents::effects::Hint) -> lsp::InlayHint {
    lsp::InlayHint {
        position: lsp_position(hint.position),
        label: lsp::InlayHintLabel::String(hint.label),
        kind: None,
        text_edits: None,
        tooltip: Some(lsp::InlayHintTooltip::String(hint.tooltip)),
        padding_left: Some(true),
        padding_right: Some(true),
        data: None,
    }
}

/// An LSP diagnostic (forwarded by the editor) as the port's.
pub fn editor_diagnostic(d: lsp::Diagnostic) -> editor::documents::effects::Diagnostic {
    let level = match d.severity {
        Some(lsp::DiagnosticSeverity::ERROR) => Level::Error,
        Some(lsp::DiagnosticSeverity::WARNING) => Level::Warning,
        Some(lsp::DiagnosticSeverity::HINT) => Level::Log,
        _ => Level::Info,
    };
    let code = d.code.map(|c| match c {
        lsp::NumberOrString::Number(n) => n.to_string(),
        lsp::NumberOrString::String(s) => s,
    });
    editor::documents::effects::Diagnostic {
        range: range(d.range),
        level,
        message: d.message,
        code,
        source: d.source,
    }
}

/// A message level as LSP's message type.
pub fn message_type(level: Level) -> lsp::MessageType {
    match level {
        Level::Error => lsp::MessageType::ERROR,
        Level::Warning => lsp::MessageType::WARNING,
        Level::Info => lsp::MessageType::INFO,
        Level::Log => lsp::MessageType::LOG,
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    #[test]
    fn file_uris_round_trip_with_spaces_and_unicode() {
        let path = PathBuf::from("/tmp/a dir/漢字 😀.rs");
        let uri = uri_of(&path).unwrap();
        assert_eq!(path_of(&uri).unwrap(), path);
        let from_editor = Uri::from_str("file:///tmp/a%20dir/%E6%BC%A2.rs").unwrap();
        assert_eq!(
            path_of(&from_editor).unwrap(),
            PathBuf::from("/tmp/a dir/漢.rs")
        );
    }

    #[test]
    fn other_schemes_have_no_path() {
        assert!(path_of(&Uri::from_str("untitled:Untitled-1").unwrap()).is_none());
    }
}
