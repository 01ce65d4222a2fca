//! The diffs one connection opened, by tab name (or by file, in the notified style), and how a
//! review's verdict is told: `openDiff` waits for the user and answers `FILE_SAVED` + the final
//! text, `DIFF_REJECTED` + the tab name, or `TAB_CLOSED`; or it answers at once and the verdict
//! follows as `ide/diffAccepted` / `ide/diffRejected`. Closing a pending diff (`close_tab`,
//! `closeAllDiffTabs`, `closeDiff`, a new diff under the same name) stops the wait for its
//! verdict, which withdraws exactly that review (or keeps it from opening), and the agent hears
//! `DIFF_REJECTED`, as it does from IDEs when a diff tab is closed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::outcome::{ToolError, ToolOutcome, parse};
use super::shapes;
use crate::editor::{EditorAccess, Origin, Terms, Verdict};

/// How the agent closed a diff the user had not decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closed {
    /// The agent is told the diff was rejected.
    Told,
    /// The agent asked not to be told (it settled the diff itself).
    Quietly,
}

/// What became of one diff, shared with the call waiting for its verdict.
#[derive(Debug, Default)]
struct Fate {
    /// Set once the agent closed the diff undecided; unset while it is open.
    closed: OnceLock<Closed>,
    /// Cancelled when the diff is closed: the wait for its verdict ends, which withdraws the
    /// review (or keeps it from opening, if it is still being diffed).
    closing: CancellationToken,
}

impl Fate {
    /// The user's verdict on `review`, unless the diff is closed first.
    async fn verdict_unless_closed(
        &self,
        review: impl Future<Output = Result<Verdict, crate::editor::FileError>>,
    ) -> Result<Verdict, crate::editor::FileError> {
        tokio::select! {
            // A verdict that is in counts, even when the close came at the same time.
            biased;
            verdict = review => verdict,
            () = self.closing.cancelled() => Ok(Verdict::Cancelled),
        }
    }
}

/// One diff: its file and proposal, and whether the user still has to decide.
#[derive(Debug)]
struct Tab {
    proposal: String,
    pending: bool,
    fate: Arc<Fate>,
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
    /// The diffs, locked (a panic elsewhere while holding the lock leaves them usable).
    fn locked(&self) -> MutexGuard<'_, HashMap<String, Tab>> {
        self.tabs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a new pending diff under `name`, closing a pending one of that name first.
    fn open(&self, name: &str, proposal: &str) -> Arc<Fate> {
        let fate = Arc::new(Fate::default());
        let mut tabs = self.locked();
        if let Some(old) = tabs.remove(name) {
            Self::close(&old, Closed::Told);
        }
        tabs.insert(
            name.to_owned(),
            Tab {
                proposal: proposal.to_owned(),
                pending: true,
                fate: Arc::clone(&fate),
            },
        );
        fate
    }

    /// The review of `name` was decided (if `name` still means that review).
    fn settle(&self, name: &str, fate: &Arc<Fate>) {
        let mut tabs = self.locked();
        if let Some(tab) = tabs.get_mut(name)
            && Arc::ptr_eq(&tab.fate, fate)
        {
            tab.pending = false;
        }
    }

    /// Withdraws a tab's review if the user has not decided it yet.
    fn close(tab: &Tab, how: Closed) {
        if !tab.pending {
            return;
        }
        let _ = tab.fate.closed.set(how);
        tab.fate.closing.cancel();
    }

    /// `openDiff {old_file_path, new_file_path, new_file_contents, tab_name}`: waits for the
    /// user's verdict.
    pub async fn open_blocking(
        self: &Arc<Self>,
        editor: &EditorAccess,
        origin: &Origin,
        args: Value,
    ) -> ToolOutcome {
        let args: OpenDiffArgs = parse(args)?;
        let path = shapes::path_of(&args.new_file_path);
        let fate = self.open(&args.tab_name, &args.new_file_contents);
        let title = format!("{}: {}", origin.label, args.tab_name);
        let review = editor.review_diff(
            origin,
            &path,
            &args.new_file_contents,
            &title,
            Terms::APPLIED_BY_EDITOR,
        );
        let verdict = fate.verdict_unless_closed(review).await;
        self.settle(&args.tab_name, &fate);
        match verdict {
            Ok(Verdict::Accepted { text, .. }) => Ok(vec!["FILE_SAVED".into(), text]),
            Ok(Verdict::Rejected { .. }) => Ok(vec!["DIFF_REJECTED".into(), args.tab_name]),
            Ok(Verdict::Cancelled) if fate.closed.get().is_some() => {
                Ok(vec!["DIFF_REJECTED".into(), args.tab_name])
            }
            Ok(Verdict::Cancelled) => Ok(vec!["TAB_CLOSED".into()]),
            Err(e) => Err(ToolError::Failed(e.to_string())),
        }
    }

    /// `close_tab {tab_name}`.
    pub fn close_tab(&self, args: Value) -> ToolOutcome {
        let args: TabArgs = parse(args)?;
        let removed = self.locked().remove(&args.tab_name);
        if let Some(tab) = removed {
            Self::close(&tab, Closed::Told);
        }
        Ok(vec!["TAB_CLOSED".into()])
    }

    /// `closeAllDiffTabs`: every diff of this connection, pending or decided.
    pub fn close_all(&self) -> ToolOutcome {
        let tabs: Vec<Tab> = self.locked().drain().map(|(_, tab)| tab).collect();
        for tab in &tabs {
            Self::close(tab, Closed::Told);
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
        let fate = self.open(&args.file_path, &args.new_content);
        let (me, editor, origin) = (Arc::clone(self), editor.clone(), origin.clone());
        tokio::spawn(async move {
            let title = format!("{}: {}", origin.label, crate::editor::file_name(&path));
            let review = editor.review_diff(
                &origin,
                &path,
                &args.new_content,
                &title,
                Terms::APPLIED_BY_EDITOR,
            );
            let verdict = fate.verdict_unless_closed(review).await;
            me.settle(&args.file_path, &fate);
            match verdict {
                Ok(Verdict::Accepted { text, .. }) => notify(
                    "ide/diffAccepted",
                    json!({"filePath": args.file_path, "content": text}),
                ),
                Ok(Verdict::Cancelled) if fate.closed.get() == Some(&Closed::Quietly) => {}
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
    pub fn close_notified(&self, args: Value) -> ToolOutcome {
        let args: NotifiedCloseArgs = parse(args)?;
        let removed = self.locked().remove(&args.file_path);
        let how = if args.suppress_notification {
            Closed::Quietly
        } else {
            Closed::Told
        };
        let content = removed.map(|tab| {
            Self::close(&tab, how);
            tab.proposal
        });
        Ok(vec![json!({ "content": content }).to_string()])
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn args(path: &std::path::Path, contents: &str, tab: &str) -> Value {
        json!({"old_file_path": path, "new_file_path": path, "new_file_contents": contents,
               "tab_name": tab})
    }

    /// `openDiff` of `contents` for `path` in tab `tab`, waiting for the verdict in a task.
    fn spawn_open(
        tabs: &Arc<DiffTabs>,
        editor: &EditorAccess,
        origin: &Origin,
        path: &std::path::Path,
        contents: &str,
        tab: &str,
    ) -> tokio::task::JoinHandle<ToolOutcome> {
        let (tabs, editor, origin) = (Arc::clone(tabs), editor.clone(), origin.clone());
        let args = args(path, contents, tab);
        tokio::spawn(async move { tabs.open_blocking(&editor, &origin, args).await })
    }

    /// A fresh editor whose one workspace folder is a new temporary directory.
    fn workspace() -> (
        EditorAccess,
        crate::editor::EditorFeed,
        crate::editor::EffectReceiver,
        tempfile::TempDir,
    ) {
        let (editor, feed, effects) = crate::editor::start();
        let dir = tempfile::tempdir().unwrap();
        feed.folders_changed(vec![dir.path().to_path_buf()], Vec::new());
        (editor, feed, effects, dir)
    }

    /// Waits until the state has `count` open reviews.
    async fn reviews_open(feed: &crate::editor::EditorFeed, count: usize) {
        for _ in 0..200 {
            if feed.query(|s| s.reviews().len()).await.unwrap() == count {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("never {count} open reviews");
    }

    #[tokio::test]
    async fn closing_and_reusing_tab_names_withdraw_pending_reviews_as_rejected() {
        let (editor, feed, _effects, dir) = workspace();
        let (a, b) = (dir.path().join("a.txt"), dir.path().join("b.txt"));
        let origin = Origin::new("test:1", "tester");
        let tabs = Arc::new(DiffTabs::default());

        // close_tab on a pending diff.
        let pending = spawn_open(&tabs, &editor, &origin, &a, "x\n", "t");
        reviews_open(&feed, 1).await;
        let closed = tabs.close_tab(json!({"tab_name": "t"}));
        assert_eq!(closed.unwrap(), ["TAB_CLOSED"]);
        assert_eq!(pending.await.unwrap().unwrap(), ["DIFF_REJECTED", "t"]);
        reviews_open(&feed, 0).await;

        // A new diff under the same name, for another file, replaces the old one.
        let first = spawn_open(&tabs, &editor, &origin, &a, "1\n", "same");
        reviews_open(&feed, 1).await;
        let second = spawn_open(&tabs, &editor, &origin, &b, "2\n", "same");
        assert_eq!(first.await.unwrap().unwrap(), ["DIFF_REJECTED", "same"]);
        reviews_open(&feed, 1).await;
        let all = tabs.close_all().unwrap();
        assert_eq!(all, ["CLOSED_1_DIFF_TABS"]);
        assert_eq!(second.await.unwrap().unwrap(), ["DIFF_REJECTED", "same"]);

        // The origin going away (the socket closed) is TAB_CLOSED: nobody closed it on purpose.
        let orphan = spawn_open(&tabs, &editor, &origin, &a, "3\n", "o");
        reviews_open(&feed, 1).await;
        editor.close_origin(&origin, crate::editor::Withdrawal::Announced);
        assert_eq!(orphan.await.unwrap().unwrap(), ["TAB_CLOSED"]);
    }

    #[tokio::test]
    async fn a_diff_closed_before_its_review_reached_the_editor_is_still_withdrawn() {
        let (editor, feed, _effects, dir) = workspace();
        let a = dir.path().join("a.txt");
        let origin = Origin::new("test:3", "tester");
        let tabs = Arc::new(DiffTabs::default());
        for round in 0..20 {
            let tab = format!("t{round}");
            let pending = spawn_open(&tabs, &editor, &origin, &a, "x\n", &tab);
            // Close at once: the review may not be open yet.
            tokio::task::yield_now().await;
            tabs.close_tab(json!({"tab_name": tab})).unwrap();
            let answer = tokio::time::timeout(Duration::from_secs(5), pending).await;
            let answer = answer.expect("the closed diff answered").unwrap().unwrap();
            assert_eq!(answer[0], "DIFF_REJECTED", "round {round}");
        }
        reviews_open(&feed, 0).await;

        // A newer diff of the same file under the same name replaces the older one.
        let first = spawn_open(&tabs, &editor, &origin, &a, "1\n", "same");
        reviews_open(&feed, 1).await;
        let second = spawn_open(&tabs, &editor, &origin, &a, "2\n", "same");
        assert_eq!(first.await.unwrap().unwrap(), ["DIFF_REJECTED", "same"]);
        reviews_open(&feed, 1).await;
        let proposal = feed
            .query(|s| {
                s.reviews()
                    .iter()
                    .next()
                    .map(|r| r.proposal.clone())
                    .unwrap_or_default()
            })
            .await
            .unwrap();
        assert_eq!(proposal, "2\n");
        tabs.close_all().unwrap();
        assert_eq!(second.await.unwrap().unwrap(), ["DIFF_REJECTED", "same"]);

        // A big diff still being computed when a small one replaces it never reaches the
        // editor: it cannot arrive late and take the small one's place.
        let big: String = (0..200_000).map(|i| format!("line {i}\n")).collect();
        let slow = spawn_open(&tabs, &editor, &origin, &a, &big, "race");
        tokio::task::yield_now().await;
        let quick = spawn_open(&tabs, &editor, &origin, &a, "small\n", "race");
        assert_eq!(slow.await.unwrap().unwrap(), ["DIFF_REJECTED", "race"]);
        reviews_open(&feed, 1).await;
        // Longer than diffing the big proposal takes.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let proposals = feed
            .query(|s| {
                s.reviews()
                    .iter()
                    .map(|r| r.proposal.len())
                    .collect::<Vec<_>>()
            })
            .await
            .unwrap();
        assert_eq!(proposals, ["small\n".len()]);
        tabs.close_all().unwrap();
        assert_eq!(quick.await.unwrap().unwrap(), ["DIFF_REJECTED", "race"]);
    }

    #[tokio::test]
    async fn notified_diffs_tell_their_verdict_unless_closed_quietly() {
        let (editor, feed, _effects, dir) = workspace();
        let path = dir.path().join("a.txt");
        let origin = Origin::new("test:2", "tester");
        let tabs = Arc::new(DiffTabs::default());
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let notify = |tx: tokio::sync::mpsc::UnboundedSender<(&'static str, Value)>| -> Notify {
            Box::new(move |method, params| {
                let _ = tx.send((method, params));
            })
        };
        let open = json!({"filePath": path, "newContent": "new\n"});
        let answer = tabs.open_notified(&editor, &origin, open.clone(), notify(tx.clone()));
        assert_eq!(answer.unwrap(), Vec::<String>::new());
        reviews_open(&feed, 1).await;
        let closed = tabs.close_notified(json!({"filePath": path}));
        assert_eq!(closed.unwrap(), [json!({"content": "new\n"}).to_string()]);
        let (method, params) = rx.recv().await.unwrap();
        assert_eq!(
            (method, params),
            ("ide/diffRejected", json!({"filePath": path}))
        );

        let answer = tabs.open_notified(&editor, &origin, open, notify(tx));
        assert!(answer.is_ok());
        reviews_open(&feed, 1).await;
        let quiet = json!({"filePath": path, "suppressNotification": true});
        tabs.close_notified(quiet).unwrap();
        reviews_open(&feed, 0).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(rx.try_recv().is_err(), "a quiet close tells nothing");
        let missing = tabs.close_notified(json!({"filePath": "/nope"}));
        assert_eq!(missing.unwrap(), [json!({"content": null}).to_string()]);
    }
}
