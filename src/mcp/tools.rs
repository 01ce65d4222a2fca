//! The one table of tools: for each, its name and input schema as `tools/list` shows them, the
//! surfaces it is offered on, and the function that runs it. `tools/list` and `tools/call` both
//! read it, so a tool is offered exactly where it can be called. The names and argument names
//! are the contract agents call; the behaviour lives in `context_tools.rs` and `diff_tabs.rs`.

use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::model::{CustomNotification, JsonObject, ServerNotification, Tool, ToolAnnotations};
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};

use super::context_tools as ctx;
use super::diff_tabs::DiffTabs;
use super::outcome::ToolOutcome;
use crate::editor::documents::context::ContextSnapshot;
use crate::editor::{EditorAccess, Origin};

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

/// Who a tool is offered to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// Terminal agents over the WebSocket IDE protocol (diffs block).
    IdeSocket,
    /// Terminal agents over the Streamable HTTP companion protocol (diffs are notified).
    Companion,
    /// An ACP session agentls drives: it reads the editor and shows files, and proposes edits
    /// through ACP only (permissions and reviews), never through a tool.
    Session,
}

impl From<DiffStyle> for Surface {
    fn from(style: DiffStyle) -> Self {
        match style {
            DiffStyle::Blocking => Self::IdeSocket,
            DiffStyle::Notified => Self::Companion,
        }
    }
}

/// What a tool runs with.
pub struct Call<'a> {
    /// The port.
    pub editor: &'a EditorAccess,
    /// Who calls: its reviews and what it opens are its own.
    pub origin: &'a Origin,
    /// The diffs this connection opened.
    pub tabs: &'a Arc<DiffTabs>,
    /// The client, for notifications.
    pub peer: &'a Peer<RoleServer>,
    /// The call's arguments.
    pub args: Value,
}

type Run = for<'a> fn(Call<'a>) -> BoxFuture<'a, ToolOutcome>;

/// How a tool answers.
#[derive(Clone, Copy)]
enum Answer {
    /// By running, which may wait (for the state task, the disk, the editor, the user).
    Run(Run),
    /// From the context the state task publishes: without waiting when that is current
    /// ([`ToolSpec::answer_now`]), which lets a transport answer it in the task that read the
    /// call.
    FromContext(fn(&ContextSnapshot) -> ToolOutcome),
}

/// What a tool does to the user's world, as its MCP annotations say (agents may skip asking
/// the user before a call that only reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Touches {
    /// Nothing: it reads the editor's state.
    Nothing,
    /// What the editor shows, not any file.
    View,
    /// Files or reviews (no annotation: agents ask as for any tool).
    Files,
}

/// One tool of the table.
pub struct ToolSpec {
    /// Its name, as agents call it.
    pub name: &'static str,
    description: &'static str,
    input: fn() -> Arc<JsonObject>,
    surfaces: &'static [Surface],
    touches: Touches,
    answer: Answer,
}

impl ToolSpec {
    /// Runs a call of it.
    pub fn run<'a>(&self, call: Call<'a>) -> BoxFuture<'a, ToolOutcome> {
        match self.answer {
            Answer::Run(run) => run(call),
            Answer::FromContext(answer) => Box::pin(async move {
                let context = call.editor.context().await;
                answer(&call.editor.context_for_agents(context))
            }),
        }
    }

    /// Its answer when it can be had without waiting: a tool that answers from the editor's
    /// context, when the state task has caught up with everything the editor fed before. The
    /// tools doing so take no arguments.
    pub fn answer_now(&self, editor: &EditorAccess) -> Option<ToolOutcome> {
        match self.answer {
            Answer::Run(_) => None,
            Answer::FromContext(answer) => editor
                .context_now()
                .map(|c| answer(&editor.context_for_agents(c))),
        }
    }

    /// The tool as `tools/list` shows it.
    pub fn tool(&self) -> Tool {
        let tool = Tool::new(self.name, self.description, (self.input)());
        let local = ToolAnnotations::new().destructive(false).open_world(false);
        match self.touches {
            Touches::Nothing => tool.annotate(local.read_only(true)),
            Touches::View => tool.annotate(local.read_only(false).idempotent(true)),
            Touches::Files => tool,
        }
    }
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

/// Every tool offered on `surface`.
pub fn list(surface: impl Into<Surface>) -> Vec<Tool> {
    let surface = surface.into();
    TOOLS
        .iter()
        .filter(|t| t.surfaces.contains(&surface))
        .map(ToolSpec::tool)
        .collect()
}

/// The tool `name` as offered on `surface`.
pub fn find(surface: impl Into<Surface>, name: &str) -> Option<&'static ToolSpec> {
    let surface = surface.into();
    TOOLS
        .iter()
        .find(|t| t.name == name && t.surfaces.contains(&surface))
}

use Surface::{Companion, IdeSocket, Session};

/// Read the editor, show a file: for terminal agents and ACP sessions alike.
const CONTEXT: &[Surface] = &[IdeSocket, Session];

fn file_path() -> Value {
    json!({"filePath": string("Absolute path of the file")})
}

fn no_input() -> Arc<JsonObject> {
    schema(json!({}), &[])
}

static TOOLS: [ToolSpec; 13] = [
    ToolSpec {
        name: "openDiff",
        description: "Show a proposed new version of a file for review in the editor and wait \
                      until the user accepts (all or part of it) or rejects it",
        input: || {
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
            )
        },
        surfaces: &[IdeSocket],
        touches: Touches::Files,
        answer: Answer::Run(|c| {
            Box::pin(async move { c.tabs.open_blocking(c.editor, c.origin, c.args).await })
        }),
    },
    ToolSpec {
        name: "close_tab",
        description: "Close a diff opened by openDiff (a pending one counts as rejected)",
        input: || {
            schema(
                json!({"tab_name": string("The diff's tab_name")}),
                &["tab_name"],
            )
        },
        surfaces: &[IdeSocket],
        touches: Touches::Files,
        answer: Answer::Run(|c| Box::pin(async move { c.tabs.close_tab(c.args) })),
    },
    ToolSpec {
        name: "closeAllDiffTabs",
        description: "Close every diff this client opened",
        input: no_input,
        surfaces: &[IdeSocket],
        touches: Touches::Files,
        answer: Answer::Run(|c| Box::pin(async move { c.tabs.close_all() })),
    },
    ToolSpec {
        name: "openDiff",
        description: "Show a proposed new version of a file for review; the verdict follows as \
                      ide/diffAccepted or ide/diffRejected",
        input: || {
            schema(
                json!({
                    "filePath": string("Absolute path of the file"),
                    "newContent": string("The proposed contents"),
                }),
                &["filePath", "newContent"],
            )
        },
        surfaces: &[Companion],
        touches: Touches::Files,
        answer: Answer::Run(|c| Box::pin(async move { open_diff_notified(c) })),
    },
    ToolSpec {
        name: "closeDiff",
        description: "Withdraw the review of a file opened by openDiff",
        input: || schema(file_path(), &["filePath"]),
        surfaces: &[Companion],
        touches: Touches::Files,
        answer: Answer::Run(|c| Box::pin(async move { c.tabs.close_notified(c.args) })),
    },
    ToolSpec {
        name: "getDiagnostics",
        description: "Diagnostics (errors, warnings) the editor knows, for one file or all",
        input: || {
            schema(
                json!({"uri": string("A file URI; all files when absent")}),
                &[],
            )
        },
        surfaces: CONTEXT,
        touches: Touches::Nothing,
        answer: Answer::Run(|c| Box::pin(ctx::get_diagnostics(c.editor, c.args))),
    },
    ToolSpec {
        name: "openFile",
        description: "Open a file in the editor, optionally selecting lines or text",
        input: || {
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
            )
        },
        surfaces: CONTEXT,
        touches: Touches::View,
        answer: Answer::Run(|c| Box::pin(ctx::open_file(c.editor, c.origin, c.args))),
    },
    ToolSpec {
        name: "getCurrentSelection",
        description: "The selection in the document the user is in",
        input: no_input,
        surfaces: CONTEXT,
        touches: Touches::Nothing,
        answer: Answer::FromContext(ctx::get_current_selection),
    },
    ToolSpec {
        name: "getLatestSelection",
        description: "The latest text the user selected, in any document",
        input: no_input,
        surfaces: CONTEXT,
        touches: Touches::Nothing,
        answer: Answer::FromContext(ctx::get_latest_selection),
    },
    ToolSpec {
        name: "getOpenEditors",
        description: "The documents open in the editor",
        input: no_input,
        surfaces: CONTEXT,
        touches: Touches::Nothing,
        answer: Answer::Run(|c| Box::pin(ctx::get_open_editors(c.editor))),
    },
    ToolSpec {
        name: "getWorkspaceFolders",
        description: "The editor's workspace folders",
        input: no_input,
        surfaces: CONTEXT,
        touches: Touches::Nothing,
        answer: Answer::FromContext(ctx::get_workspace_folders),
    },
    ToolSpec {
        name: "checkDocumentDirty",
        description: "Whether an open document has unsaved changes",
        input: || schema(file_path(), &["filePath"]),
        surfaces: CONTEXT,
        touches: Touches::Nothing,
        answer: Answer::Run(|c| Box::pin(ctx::check_document_dirty(c.editor, c.args))),
    },
    ToolSpec {
        name: "saveDocument",
        description: "Save an open document to disk",
        input: || schema(file_path(), &["filePath"]),
        surfaces: &[IdeSocket],
        touches: Touches::Files,
        answer: Answer::Run(|c| Box::pin(ctx::save_document(c.editor, c.args))),
    },
];

/// `openDiff {filePath, newContent}` of the companion protocol: the verdict goes to the client
/// as a notification.
fn open_diff_notified(c: Call<'_>) -> ToolOutcome {
    let peer = c.peer.clone();
    let notify = Box::new(move |method: &'static str, params: Value| {
        tokio::spawn(async move {
            let note = CustomNotification::new(method, Some(params));
            let sent = peer
                .send_notification(ServerNotification::CustomNotification(note))
                .await;
            if let Err(e) = sent {
                tracing::info!("verdict {method} not delivered: {e}");
            }
        });
    });
    c.tabs.open_notified(c.editor, c.origin, c.args, notify)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_an_object_schema_and_a_unique_name_per_surface() {
        for surface in [IdeSocket, Companion, Session] {
            let tools = list(surface);
            let mut names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), tools.len());
            for t in &tools {
                assert_eq!(t.input_schema["type"], "object", "{}", t.name);
                assert!(
                    find(surface, &t.name).is_some(),
                    "{} cannot be called",
                    t.name
                );
            }
        }
        assert_eq!(list(DiffStyle::Blocking).len(), 11);
        assert_eq!(list(DiffStyle::Notified).len(), 2);
    }

    #[test]
    fn the_reading_tools_say_so() {
        for tool in list(Session) {
            let annotations = tool.annotations.clone().unwrap();
            let reads = tool.name != "openFile";
            assert_eq!(annotations.read_only_hint, Some(reads), "{}", tool.name);
            assert_eq!(annotations.destructive_hint, Some(false), "{}", tool.name);
        }
        let open_diff = &list(IdeSocket)[0];
        assert_eq!(
            (open_diff.name.as_ref(), &open_diff.annotations),
            ("openDiff", &None)
        );
    }

    #[test]
    fn sessions_get_the_context_tools_and_no_edit_tool() {
        let names: Vec<String> = list(Session).iter().map(|t| t.name.to_string()).collect();
        assert_eq!(
            names,
            [
                "getDiagnostics",
                "openFile",
                "getCurrentSelection",
                "getLatestSelection",
                "getOpenEditors",
                "getWorkspaceFolders",
                "checkDocumentDirty",
            ]
        );
        for edit in ["openDiff", "closeDiff", "close_tab", "saveDocument"] {
            assert!(find(Session, edit).is_none(), "{edit}");
        }
    }
}
