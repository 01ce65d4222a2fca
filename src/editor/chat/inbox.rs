//! What goes to chat documents, on its way to the state task. A streamed reply is thousands of
//! small pieces a second; one state job each would queue the user's keystrokes behind all of
//! them. The pieces wait here in arrival order (adjacent text for one chat merged), and one job
//! takes all that arrived before it ran.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{PlanStep, ToolCallLine};

/// One thing for a chat document.
#[derive(Debug)]
pub enum ChatItem {
    /// It is a chat with this agent (`chat_opened`).
    Opened(String),
    /// It is a chat with this agent, maybe from an earlier run (`chat_reopened`).
    Reopened(String),
    /// Text at its end (`append_to_chat`).
    Text(String),
    /// Text at its end after a blank line (`append_paragraph_to_chat`).
    Paragraph(String),
    /// The agent's thought, quoted (`append_thought_to_chat`).
    Thought(String),
    /// Where a tool call stands (`chat_tool_call`).
    Call(ToolCallLine),
    /// The agent's plan, whole (`chat_plan`).
    Plan(Vec<PlanStep>),
    /// The user sent this message from it (`chat_sent`).
    Sent(String),
    /// agentls put this message of the user's in it (`chat_said`).
    Said(String),
    /// A message from it went to its agent (`true`), or its answer ended (`chat_turn`).
    Turn(bool),
}

/// The items waiting for the state task; clones share them.
#[derive(Debug, Default, Clone)]
pub struct ChatInbox {
    items: Arc<Mutex<Vec<(PathBuf, ChatItem)>>>,
}

impl ChatInbox {
    /// Adds `item` for the chat at `path`; `true` when the inbox was empty, so that a job must
    /// be queued to take it.
    pub fn put(&self, path: &Path, item: ChatItem) -> bool {
        let mut items = self.lock();
        let was_empty = items.is_empty();
        if let (ChatItem::Text(more), Some((last, ChatItem::Text(text)))) =
            (&item, items.last_mut())
            && last == path
        {
            text.push_str(more);
        } else {
            items.push((path.to_owned(), item));
        }
        was_empty
    }

    /// Takes everything waiting, in arrival order.
    pub(in crate::editor) fn take(&self) -> Vec<(PathBuf, ChatItem)> {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(PathBuf, ChatItem)>> {
        self.items.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_for_one_chat_merges_and_the_order_holds() {
        let inbox = ChatInbox::default();
        let (a, b) = (Path::new("/a.md"), Path::new("/b.md"));
        assert!(inbox.put(a, ChatItem::Turn(true)));
        assert!(!inbox.put(a, ChatItem::Text("Hel".into())));
        assert!(!inbox.put(a, ChatItem::Text("lo".into())));
        assert!(!inbox.put(b, ChatItem::Text("other".into())));
        assert!(!inbox.put(a, ChatItem::Text("!".into())));
        assert!(!inbox.put(a, ChatItem::Turn(false)));
        let taken: Vec<String> = inbox
            .take()
            .into_iter()
            .map(|(path, item)| format!("{} {item:?}", path.display()))
            .collect();
        assert_eq!(
            taken,
            [
                "/a.md Turn(true)",
                "/a.md Text(\"Hello\")",
                "/b.md Text(\"other\")",
                "/a.md Text(\"!\")",
                "/a.md Turn(false)",
            ]
        );
        // Empty again: the next item needs a job.
        assert!(inbox.put(a, ChatItem::Text("x".into())));
    }
}
