//! The tools that read or show the editor's state: selections, open documents, folders,
//! diagnostics, opening and saving files. Each reads through `EditorAccess` (or the context
//! snapshot it publishes) and answers in the shapes of `shapes.rs`.

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{Value, json};

use super::outcome::{ToolError, ToolOutcome, json, parse};
use super::shapes;
use crate::editor::documents::context::ContextSnapshot;
use crate::editor::{EditorAccess, FileError, Origin, Position, Range};

#[derive(Debug, Deserialize)]
struct UriArgs {
    uri: Option<String>,
}

/// `getDiagnostics {uri?}`.
pub async fn get_diagnostics(editor: &EditorAccess, args: Value) -> ToolOutcome {
    let args: UriArgs = parse(args)?;
    let path = args
        .uri
        .filter(|u| !u.is_empty())
        .map(|u| shapes::path_of(&u));
    let mut files = editor.diagnostics(path.as_deref()).await;
    let folders = editor.workspace_folders().await;
    files.retain(|f| editor.agents_may_see(&f.path, &folders));
    json(&shapes::diagnostics(&files))
}

/// `getCurrentSelection`.
pub fn get_current_selection(context: &ContextSnapshot) -> ToolOutcome {
    let cursor;
    let selection = match (&context.current_selection, &context.focused_document) {
        (Some(s), _) => s,
        (None, Some(path)) => {
            cursor = shapes::cursor_at_top(path);
            &cursor
        }
        (None, None) => {
            return json(&json!({"success": false, "message": "No active editor found"}));
        }
    };
    let mut shape = shapes::selection(selection);
    shape["success"] = json!(true);
    json(&shape)
}

/// `getLatestSelection`.
pub fn get_latest_selection(context: &ContextSnapshot) -> ToolOutcome {
    match &context.latest_selection {
        Some(s) => json(&shapes::selection(s)),
        None => json(&json!({"success": false, "message": "No selection available"})),
    }
}

/// `getOpenEditors`.
pub async fn get_open_editors(editor: &EditorAccess) -> ToolOutcome {
    let folders = editor.workspace_folders().await;
    let mut documents = editor.open_documents().await;
    documents.retain(|d| editor.agents_may_see(&d.path, &folders));
    let selection = editor.current_selection().await;
    let mut facts = Vec::with_capacity(documents.len());
    for doc in &documents {
        let dirty = editor.document_dirty(&doc.path).await.unwrap_or(false);
        let lines = editor
            .read_text_file(&doc.path, None, None)
            .await
            .map(|t| line_count(&t))
            .unwrap_or(0);
        facts.push((dirty, lines));
    }
    let tabs: Vec<shapes::EditorTab<'_>> = documents
        .iter()
        .zip(&facts)
        .map(|(document, &(dirty, line_count))| shapes::EditorTab {
            document,
            dirty,
            line_count,
            selection: selection.as_ref().filter(|s| s.path == document.path),
        })
        .collect();
    json(&shapes::open_editors(&tabs))
}

/// `getWorkspaceFolders`.
pub fn get_workspace_folders(context: &ContextSnapshot) -> ToolOutcome {
    json(&shapes::workspace_folders(&context.folders))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileArgs {
    file_path: String,
}

/// `checkDocumentDirty {filePath}`.
pub async fn check_document_dirty(editor: &EditorAccess, args: Value) -> ToolOutcome {
    let args: FileArgs = parse(args)?;
    let path = shapes::path_of(&args.file_path);
    let folders = editor.workspace_folders().await;
    if !editor.agents_may_see(&path, &folders) || !is_open(editor, &path).await {
        return not_open(&args.file_path);
    }
    match editor.document_dirty(&path).await {
        Ok(dirty) => json(&json!({
            "success": true, "filePath": args.file_path, "isDirty": dirty, "isUntitled": false,
        })),
        Err(e) => Err(ToolError::Failed(e.to_string())),
    }
}

/// `saveDocument {filePath}`.
pub async fn save_document(editor: &EditorAccess, args: Value) -> ToolOutcome {
    let args: FileArgs = parse(args)?;
    let path = shapes::path_of(&args.file_path);
    if !is_open(editor, &path).await {
        return not_open(&args.file_path);
    }
    match editor.save_document(&path).await {
        Ok(()) => json(&json!({
            "success": true, "filePath": args.file_path, "saved": true,
            "message": "Document saved successfully",
        })),
        Err(e) => json(&json!({
            "success": false, "filePath": args.file_path,
            "message": format!("Failed to save file: {e}"),
        })),
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OpenFileArgs {
    file_path: String,
    start_line: Option<u32>,
    end_line: Option<u32>,
    start_text: Option<String>,
    end_text: Option<String>,
    make_frontmost: Option<bool>,
}

/// `openFile {filePath, startLine?, endLine?, startText?, endText?, makeFrontmost?}`. Selections
/// are whole lines: the editor's column encoding is the host's business.
pub async fn open_file(editor: &EditorAccess, origin: &Origin, args: Value) -> ToolOutcome {
    let args: OpenFileArgs = parse(args)?;
    let path = shapes::path_of(&args.file_path);
    let text = editor
        .read_text_file(&path, None, None)
        .await
        .map_err(|e| ToolError::Failed(read_failure(&args.file_path, &e)))?;
    let lines: Vec<&str> = text.lines().collect();
    let find = |needle: &str, from: usize| (from..lines.len()).find(|&i| lines[i].contains(needle));
    let (selection, mut message) = match (&args.start_text, args.start_line) {
        (Some(start), _) if !start.is_empty() => match find(start, 0) {
            Some(first) => {
                let last = args
                    .end_text
                    .as_deref()
                    .filter(|e| !e.is_empty())
                    .and_then(|e| find(e, first))
                    .unwrap_or(first);
                (
                    Some(lines_range(first, last)),
                    format!("Opened file and selected text \"{start}\""),
                )
            }
            None => (None, format!("Opened file, but text \"{start}\" not found")),
        },
        (_, Some(start)) => {
            let first = start.saturating_sub(1) as usize;
            let last = args
                .end_line
                .map_or(first, |e| e.saturating_sub(1) as usize);
            (
                Some(lines_range(first, last.max(first))),
                format!(
                    "Opened file and selected lines {} to {}",
                    first + 1,
                    last.max(first) + 1
                ),
            )
        }
        _ => (None, String::new()),
    };
    if message.is_empty() {
        message = format!("Opened file: {}", args.file_path);
    }
    editor
        .open_file(origin, &path, selection)
        .await
        .map_err(|e| ToolError::Failed(e.to_string()))?;
    if args.make_frontmost == Some(false) {
        let language = editor
            .open_documents()
            .await
            .into_iter()
            .find(|d| d.path == path)
            .map_or_else(String::new, |d| d.language);
        return json(&json!({
            "success": true, "filePath": args.file_path, "languageId": language,
            "lineCount": line_count(&text),
        }));
    }
    Ok(vec![message])
}

/// Why `openFile` could not read the file, in its own words: only a missing file is "not found";
/// a path outside the workspace or a relative one says so (and how to allow it).
fn read_failure(file_path: &str, e: &FileError) -> String {
    if e.is_not_found() {
        format!("File not found: {file_path}")
    } else {
        format!("Cannot open file: {e}")
    }
}

/// Lines `first..=last` (0-based) as a range from the start of `first` to the start of the
/// line after `last`.
fn lines_range(first: usize, last: usize) -> Range {
    Range::new(
        Position::new(first as u32, 0),
        Position::new(last as u32 + 1, 0),
    )
}

fn line_count(text: &str) -> usize {
    text.lines().count()
}

async fn is_open(editor: &EditorAccess, path: &PathBuf) -> bool {
    editor
        .open_documents()
        .await
        .iter()
        .any(|d| &d.path == path)
}

fn not_open(file_path: &str) -> ToolOutcome {
    json(&json!({"success": false, "message": format!("Document not open: {file_path}")}))
}
