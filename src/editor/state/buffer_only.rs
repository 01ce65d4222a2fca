//! Agents' changes to open files live in the buffer until the editor saves them. agentls edits
//! an open document through the editor only and leaves its file to the editor's own save, so no
//! editor finds the file changed under it after a turn (Helix refuses `:w`, Neovim warns W12,
//! Emacs asks "changed since visited", VS Code keeps a tab dirty). The disk gets such a buffer
//! only when an agent needs it there: before one of its commands runs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::State;
use crate::editor::documents::effects::Level;
use crate::editor::file_names::file_name;

/// Open documents whose buffer holds an agent's change that the disk has not, by the label of
/// the agent that made the last one.
#[derive(Debug, Default)]
pub struct BufferOnlyChanges {
    by_path: HashMap<PathBuf, String>,
}

impl State {
    /// `label`'s change reached the open buffer at `path`, not its file.
    pub(in crate::editor) fn changed_in_buffer_only(&mut self, path: &Path, label: &str) {
        if self.documents.get(path).is_some() && self.chats.agent_of(path).is_none() {
            self.buffer_only
                .by_path
                .insert(path.to_owned(), label.to_owned());
        }
    }

    /// The editor saved `path`: its file has what its buffer had.
    pub(in crate::editor) fn buffer_saved(&mut self, path: &Path) {
        self.buffer_only.by_path.remove(path);
    }

    /// The editor closed `path`, whose buffer held `text`. Closing a modified buffer without
    /// saving it is the user's decision, but an agent's change goes with it: the user is told,
    /// unless the file holds that text after all (the agent wrote it to disk itself, and the
    /// editor closed the buffer to reload it from there, as Neovim does).
    pub(in crate::editor) fn buffer_closed(&mut self, path: &Path, text: Option<String>) {
        let Some(label) = self.buffer_only.by_path.remove(path) else {
            return;
        };
        let effects = self.effects.clone();
        let path = path.to_owned();
        tokio::spawn(async move {
            let on_disk = crate::editor::disk::files::read(&path).await.ok();
            if text.is_some() && on_disk == text {
                return;
            }
            effects.message(
                Level::Warning,
                format!(
                    "agentls: {} was closed without saving; the change {label} made to it is \
                     not in the file",
                    file_name(&path)
                ),
            );
        });
    }

    /// The open buffers holding agents' changes their files lack, with their text; forgotten
    /// here, since the caller writes them.
    pub(in crate::editor) fn take_buffer_only(&mut self) -> Vec<(PathBuf, String)> {
        let paths: Vec<PathBuf> = self.buffer_only.by_path.drain().map(|(p, _)| p).collect();
        paths
            .into_iter()
            .filter_map(|path| {
                let text = self.documents.get(&path)?.text();
                Some((path, text))
            })
            .collect()
    }
}
