//! The disk: reading and writing workspace files (never through a symlink agentls did not
//! expect), the workspace watcher and which folders it leaves out, and one writer per path.

pub mod changes;
pub mod files;
pub mod path_locks;
pub mod tree;
pub mod watch;
