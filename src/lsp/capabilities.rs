//! What the client advertised at `initialize`, boiled down to the questions agentls asks before
//! it sends anything. Never an editor's name: only its capabilities.

use serde_json::Value;
use tower_lsp_server::ls_types::{ClientCapabilities, PositionEncodingKind};

use crate::editor::{PluginEvent, PluginEvents, PositionEncoding};

/// The plugin events a client asks for in `initializationOptions.pluginEvents` (a list of event
/// names; none when it is absent), and what in it names no event (to be logged).
pub fn plugin_events(asked: Option<&Value>) -> (PluginEvents, Vec<String>) {
    let Some(asked) = asked else {
        return (PluginEvents::default(), Vec::new());
    };
    let Some(names) = asked.as_array() else {
        return (PluginEvents::default(), vec![asked.to_string()]);
    };
    let mut unknown = Vec::new();
    let events = names
        .iter()
        .filter_map(|name| {
            let event = name.as_str().and_then(PluginEvent::named);
            if event.is_none() {
                unknown.push(name.to_string());
            }
            event
        })
        .collect();
    (events, unknown)
}

/// The client features agentls can use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientFeatures {
    /// Position encoding chosen for the session: utf-8 when offered, else utf-16.
    pub encoding: PositionEncoding,
    /// `workspace/applyEdit`.
    pub apply_edit: bool,
    /// Versioned `documentChanges` in workspace edits.
    pub document_changes: bool,
    /// `window/showDocument`.
    pub show_document: bool,
    /// `window/workDoneProgress/create` and `$/progress`.
    pub work_done_progress: bool,
    /// `window/showMessageRequest`.
    pub show_message_request: bool,
    /// `textDocument/inlayHint`.
    pub inlay_hints: bool,
    /// `workspace/inlayHint/refresh`.
    pub inlay_hint_refresh: bool,
}

impl ClientFeatures {
    /// Reads the client's capabilities.
    pub fn from_capabilities(caps: &ClientCapabilities) -> Self {
        let offered = caps
            .general
            .as_ref()
            .and_then(|g| g.position_encodings.as_deref())
            .unwrap_or_default();
        let encoding = if offered.contains(&PositionEncodingKind::UTF8) {
            PositionEncoding::Utf8
        } else {
            PositionEncoding::Utf16
        };
        let workspace = caps.workspace.as_ref();
        let window = caps.window.as_ref();
        Self {
            encoding,
            apply_edit: workspace.and_then(|w| w.apply_edit).unwrap_or(false),
            document_changes: workspace
                .and_then(|w| w.workspace_edit.as_ref())
                .and_then(|e| e.document_changes)
                .unwrap_or(false),
            show_document: window
                .and_then(|w| w.show_document.as_ref())
                .is_some_and(|d| d.support),
            work_done_progress: window.and_then(|w| w.work_done_progress).unwrap_or(false),
            show_message_request: window.is_some_and(|w| w.show_message.is_some()),
            inlay_hints: caps
                .text_document
                .as_ref()
                .is_some_and(|t| t.inlay_hint.is_some()),
            inlay_hint_refresh: workspace
                .and_then(|w| w.inlay_hint.as_ref())
                .and_then(|h| h.refresh_support)
                .unwrap_or(false),
        }
    }

    /// The encoding as LSP names it.
    pub fn encoding_kind(&self) -> PositionEncodingKind {
        match self.encoding {
            PositionEncoding::Utf8 => PositionEncodingKind::UTF8,
            PositionEncoding::Utf16 => PositionEncodingKind::UTF16,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn features(caps: serde_json::Value) -> ClientFeatures {
        ClientFeatures::from_capabilities(&serde_json::from_value(caps).unwrap())
    }

    #[test]
    fn utf8_only_when_offered() {
        let offered = json!({"general": {"positionEncodings": ["utf-32", "utf-8", "utf-16"]}});
        assert_eq!(features(offered).encoding, PositionEncoding::Utf8);
        assert_eq!(features(json!({})).encoding, PositionEncoding::Utf16);
    }

    #[test]
    fn plugin_events_are_only_those_asked_for() {
        let none = PluginEvents::default();
        assert_eq!(plugin_events(None), (none, vec![]));
        let (events, unknown) = plugin_events(Some(&json!(["reviewChanged", "bogus", 3])));
        assert!(events.contains(PluginEvent::ReviewChanged));
        assert!(!events.contains(PluginEvent::SessionUpdate));
        assert_eq!(unknown, ["\"bogus\"", "3"]);
        let every = json!([
            "sessionUpdate",
            "reviewChanged",
            "turnChanged",
            "diskInBuffer"
        ]);
        assert_eq!(plugin_events(Some(&every)), (PluginEvents::all(), vec![]));
        assert_eq!(
            plugin_events(Some(&json!(true))),
            (none, vec!["true".into()])
        );
    }

    #[test]
    fn nothing_is_assumed() {
        assert_eq!(features(json!({})), ClientFeatures::default());
        let rich = features(json!({
            "workspace": {"applyEdit": true, "workspaceEdit": {"documentChanges": true}},
            "window": {"showDocument": {"support": true}, "workDoneProgress": true, "showMessage": {}}
        }));
        assert!(rich.apply_edit && rich.document_changes && rich.show_document);
        assert!(rich.work_done_progress && rich.show_message_request);
    }
}
