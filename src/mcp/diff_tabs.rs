//! The diffs one connection opened, by tab name (or by file, in the notified style), and how a
//! review's verdict is told: `openDiff` waits for the user and answers `FILE_SAVED` + the final
//! text, `DIFF_REJECTED` + the tab name, or `TAB_CLOSED`; or it answers at once and the verdict
//! follows as `ide/diffAccepted` / `ide/diffRejected`. Closing a pending diff (`close_tab`,
//! `closeAllDiffTabs`, `closeDiff`, a new diff under the same name) withdraws its review, and
//! the agent hears `DIFF_REJECTED`, as it does from IDEs when a diff tab is closed.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_json::{Value, json};

use super::outcome::{ToolError, ToolOutcome, parse};
use super::shapes;
use crate::editor::{EditorAccess, Origin, Verdict};

/// A diff the agent has not closed.
const OPEN: u8 = 0;
/// The agent closed the diff while the user had not decided.
const CLOSED: u8 = 1;
/// The same, and the agent asked not to be told (it settled the diff itself).
const CLOSED_QUIETLY: u8 = 2;

/// One diff: its file and proposal, whether the user still has to decide, and whether the
/// agent closed it.
#[derive(Debug)]
struct Tab {
    path: PathBuf,
    proposal: String,
    pending: bool,
    closed: Arc<AtomicU8>,
}

/// A connection's diffs.
#[derive(Debug, Default)]
pub struct DiffTabs {
    tabs: Mutex<HashMap<String, Tab>>,
}

/// Where a verdict notification goes (the notified style).
pub type Notify = Box<dyn FnOnce(&'static str, Value) + Send>;

#[derive(Debug, Deserialize)]
struct OpenDiffArgs {
    #[allow(dead_code)] // the agent's idea of the old file; we diff against what the user sees
    old_file_path: Option<String>,
    new_file_path: String,
    new_file_contents: String,
    tab_name: String,
}

#[derive(Debug, Deserialize)]
struct TabArgs {
    tab_name: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NotifiedOpenArgs {
    file_path: String,
    new_content: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NotifiedCloseArgs {
    file_path: String,
    #[serde(default)]
    suppress_notification: bool,
}

impl DiffTabs {
    /// Registers a new pending diff under `name`, closing a pending one of that name first.
    fn open(
        &self,
        editor: &EditorAccess,
        origin: &Origin,
        name: &str,
        path: PathBuf,
        proposal: &str,
    ) -> Arc<AtomicU8> {
        let closed = Arc::new(AtomicU8::new(OPEN));
        let mut tabs = self.tabs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = tabs.remove(name) {
            close(editor, origin, &old, CLOSED);
        }
        tabs.insert(
            name.to_owned(),
            Tab {
                path,
                proposal: proposal.to_owned(),
                pending: true,
                closed: Arc::clone(&closed),
            },
        );
        closed
    }

    /// The review of `name` was decided (if `name` still means that review).
    fn settle(&self, name: &str, which: &Arc<AtomicU8>) {
        let mut tabs = self.tabs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tab) = tabs.get_mut(name)
            && Arc::ptr_eq(&tab.closed, which)
        {
            tab.pending = false;
        }
    }

    /// `openDiff {old_file_path, new_file_path, new_file_contents, tab_name}`: waits for the
    /// user's verdict.
    pub async fn open_blocking(
        &self,
        editor: &EditorAccess,
        origin: &Origin,
        args: Value,
    ) -> ToolOutcome {
        let args: OpenDiffArgs = parse(args)?;
        let path = shapes::path_of(&args.new_file_path);
        let closed = self.open(
            editor,
            origin,
            &args.tab_name,
            path.clone(),
            &args.new_file_contents,
        );
        let title = format!("{}: {}", origin.label, args.tab_name);
        let verdict = editor
            .review_diff(origin, &path, &args.new_file_contents, &title)
            .await;
        self.settle(&args.tab_name, &closed);
        match verdict {
            Ok(Verdict::Accepted { text, .. }) => Ok(vec!["FILE_SAVED".into(), text]),
            Ok(Verdict::Rejected { .. }) => Ok(vec!["DIFF_REJECTED".into(), args.tab_name]),
            Ok(Verdict::Cancelled) if closed.load(Ordering::SeqCst) != OPEN => {
                Ok(vec!["DIFF_REJECTED".into(), args.tab_name])
            }
            Ok(Verdict::Cancelled) => Ok(vec!["TAB_CLOSED".into()]),
            Err(e) => Err(ToolError::Failed(e.to_string())),
        }
    }

    /// `close_tab {tab_name}`.
    pub fn close_tab(&self, editor: &EditorAccess, origin: &Origin, args: Value) -> ToolOutcome {
        let args: TabArgs = parse(args)?;
        let removed = self
            .tabs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&args.tab_name);
        if let Some(tab) = removed {
            close(editor, origin, &tab, CLOSED);
        }
        Ok(vec!["TAB_CLOSED".into()])
    }

    /// `closeAllDiffTabs`: every diff of this connection, pending or decided.
    pub fn close_all(&self, editor: &EditorAccess, origin: &Origin) -> ToolOutcome {
        let tabs: Vec<Tab> = self
            .tabs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .map(|(_, tab)| tab)
            .collect();
        for tab in &tabs {
            close(editor, origin, tab, CLOSED);
        }
        Ok(vec![format!("CLOSED_{}_DIFF_TABS", tabs.len())])
    }

    /// `openDiff {filePath, newContent}`: answers at once; `notify` gets the verdict.
    pub fn open_notified(
        self: &Arc<Self>,
        editor: &EditorAccess,
        origin: &Origin,
        args: Value,
        notify: Notify,
    ) -> ToolOutcome {
        let args: NotifiedOpenArgs = parse(args)?;
        let path = shapes::path_of(&args.file_path);
        let closed = self.open(
            editor,
            origin,
            &args.file_path,
            path.clone(),
            &args.new_content,
        );
        let (me, editor, origin) = (Arc::clone(self), editor.clone(), origin.clone());
        tokio::spawn(async move {
            let title = format!("{}: {}", origin.label, crate::editor::file_name(&path));
            let verdict = editor
                .review_diff(&origin, &path, &args.new_content, &title)
                .await;
            me.settle(&args.file_path, &closed);
            match verdict {
                Ok(Verdict::Accepted { text, .. }) => notify(
                    "ide/diffAccepted",
                    json!({"filePath": args.file_path, "content": text}),
                ),
                Ok(Verdict::Cancelled) if closed.load(Ordering::SeqCst) == CLOSED_QUIETLY => {}
                Ok(Verdict::Rejected { .. } | Verdict::Cancelled) => {
                    notify("ide/diffRejected", json!({"filePath": args.file_path}))
                }
                Err(e) => {
                    tracing::warn!(file = %args.file_path, "openDiff failed: {e}");
                    notify("ide/diffRejected", json!({"filePath": args.file_path}))
                }
            }
        });
        Ok(Vec::new())
    }

    /// `closeDiff {filePath, suppressNotification?}`: answers `{"content": <the proposal>}`
    /// (`null` when there was no such diff).
    pub fn close_notified(
        &self,
        editor: &EditorAccess,
        origin: &Origin,
        args: Value,
    ) -> ToolOutcome {
        let args: NotifiedCloseArgs = parse(args)?;
        let removed = self
            .tabs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&args.file_path);
        let how = if args.suppress_notification {
            CLOSED_QUIETLY
        } else {
            CLOSED
        };
        let content = removed.map(|tab| {
            close(editor, origin, &tab, how);
            tab.proposal
        });
        Ok(vec![json!({ "content": content }).to_string()])
    }
}

/// Withdraws a tab's review if the user has not decided it yet.
fn close(editor: &EditorAccess, origin: &Origin, tab: &Tab, how: u8) {
    if tab.pending {
        tab.closed.store(how, Ordering::SeqCst);
        editor.withdraw_review(origin, &tab.path);
    }
}
