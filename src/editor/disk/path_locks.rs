//! One writer per file at a time. A write reads the file, decides what to write (merging with
//! what changed since the writer read it) and writes; two writes of one file that interleave
//! would both decide from the same old text, and the first one's change would be lost.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A lock per path (a handful of files an agent writes; entries are kept, they are small).
#[derive(Debug, Default, Clone)]
pub struct PathLocks {
    locks: Arc<Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>>,
}

impl PathLocks {
    /// Waits until no one else writes `path`; the file is ours until the guard drops.
    pub async fn lock(&self, path: &Path) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(locks.entry(path.to_owned()).or_default())
        };
        lock.lock_owned().await
    }
}
