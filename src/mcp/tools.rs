//! The tools each protocol offers, as `tools/list` shows them: names, descriptions, input
//! schemas. The names and argument names are the contract agents call; the behaviour lives in
//! `context_tools.rs` and `diff_tabs.rs`.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool};
use serde_json::{Value, json};

/// How `openDiff` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffStyle {
    /// The call waits for the user's verdict and returns it (the WebSocket IDE protocol:
    /// `openDiff {old_file_path, new_file_path, new_file_contents, tab_name}`).
    Blocking,
    /// The call returns at once; the verdict follows as a notification (the Streamable HTTP
    /// companion protocol: `openDiff {filePath, newContent}`, `closeDiff`).
    Notified,
}

fn schema(properties: Value, required: &[&str]) -> Arc<JsonObject> {
    let mut schema = json!({
        "type": "object",
        "properties": properties,
        "additionalProperties": false,
    });
    if !required.is_empty() {
        schema["required"] = json!(required);
    }
    match schema {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("built as an object"),
    }
}

fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn tool(name: &'static str, description: &'static str, input: Arc<JsonObject>) -> Tool {
    Tool::new(name, description, input)
}

/// Every tool offered in `style`.
pub fn list(style: DiffStyle) -> Vec<Tool> {
    match style {
        DiffStyle::Blocking => blocking_tools(),
        DiffStyle::Notified => notified_tools(),
    }
}

fn blocking_tools() -> Vec<Tool> {
    let file_path = || json!({"filePath": string("Absolute path of the file")});
    vec![
        tool(
            "openDiff",
            "Show a proposed new version of a file for review in the editor and wait until \
             the user accepts (all or part of it) or rejects it",
            schema(
                json!({
                    "old_file_path": string("The file as it is"),
                    "new_file_path": string("The file to write"),
                    "new_file_contents": string("The proposed contents"),
                    "tab_name": string("Name of this diff, used by close_tab"),
                }),
                &[
                    "old_file_path",
                    "new_file_path",
                    "new_file_contents",
                    "tab_name",
                ],
            ),
        ),
        tool(
            "close_tab",
            "Close a diff opened by openDiff (a pending one counts as rejected)",
            schema(
                json!({"tab_name": string("The diff's tab_name")}),
                &["tab_name"],
            ),
        ),
        tool(
            "closeAllDiffTabs",
            "Close every diff this client opened",
            schema(json!({}), &[]),
        ),
        tool(
            "getDiagnostics",
            "Diagnostics (errors, warnings) the editor knows, for one file or all",
            schema(
                json!({"uri": string("A file URI; all files when absent")}),
                &[],
            ),
        ),
        tool(
            "openFile",
            "Open a file in the editor, optionally selecting lines or text",
            schema(
                json!({
                    "filePath": string("Absolute path of the file"),
                    "preview": {"type": "boolean"},
                    "startLine": {"type": "integer", "description": "First line to select (1-based)"},
                    "endLine": {"type": "integer", "description": "Last line to select (1-based)"},
                    "startText": string("Select from the line holding this text"),
                    "endText": string("Select to the line holding this text"),
                    "selectToEndOfLine": {"type": "boolean"},
                    "makeFrontmost": {"type": "boolean"},
                }),
                &["filePath"],
            ),
        ),
        tool(
            "getCurrentSelection",
            "The selection in the document the user is in",
            schema(json!({}), &[]),
        ),
        tool(
            "getLatestSelection",
            "The latest text the user selected, in any document",
            schema(json!({}), &[]),
        ),
        tool(
            "getOpenEditors",
            "The documents open in the editor",
            schema(json!({}), &[]),
        ),
        tool(
            "getWorkspaceFolders",
            "The editor's workspace folders",
            schema(json!({}), &[]),
        ),
        tool(
            "checkDocumentDirty",
            "Whether an open document has unsaved changes",
            schema(file_path(), &["filePath"]),
        ),
        tool(
            "saveDocument",
            "Save an open document to disk",
            schema(file_path(), &["filePath"]),
        ),
    ]
}

fn notified_tools() -> Vec<Tool> {
    vec![
        tool(
            "openDiff",
            "Show a proposed new version of a file for review; the verdict follows as \
             ide/diffAccepted or ide/diffRejected",
            schema(
                json!({
                    "filePath": string("Absolute path of the file"),
                    "newContent": string("The proposed contents"),
                }),
                &["filePath", "newContent"],
            ),
        ),
        tool(
            "closeDiff",
            "Withdraw the review of a file opened by openDiff",
            schema(
                json!({"filePath": string("Absolute path of the file")}),
                &["filePath"],
            ),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_an_object_schema_and_a_unique_name() {
        for style in [DiffStyle::Blocking, DiffStyle::Notified] {
            let tools = list(style);
            let mut names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), tools.len());
            for t in &tools {
                assert_eq!(t.input_schema["type"], "object", "{}", t.name);
            }
        }
        assert_eq!(list(DiffStyle::Blocking).len(), 11);
    }
}
