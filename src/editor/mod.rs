//! The port: everything an agent may ask of the editor, with no ACP, MCP or LSP wire types.
//!
//! [`EditorAccess`] is the agents' side (read a buffer, write a file, ask for the selection);
//! [`EditorFeed`] is the host's side (the editor opened, changed, selected). Both are cheap handles
//! to the one task that owns [`State`].

pub mod access;
pub mod access_policy;
pub mod actions;
pub mod chat;
pub mod diff;
pub mod disk;
pub mod documents;
pub mod feed;
pub mod file_names;
pub mod host_queries;
pub mod origin;
pub mod questions;
pub mod review;
pub mod state;
pub mod token;
pub mod tool_grants;

pub use access::{
    EditorAccess, OpenDocument, PendingVerdict, ShowError, WriteError, Written, select_lines, start,
};
pub use access_policy::AccessPolicy;
pub use disk::files::FileError;
pub use documents::TextChange;
pub use documents::effects::{
    Effect, EffectError, EffectReceiver, EffectSender, Level, PluginEvent, PluginEvents,
};
pub use documents::position::{Position, PositionEncoding, Range};
pub use documents::selection::Selection;
pub use feed::EditorFeed;
pub use file_names::{NAMED_IN_A_MESSAGE, file_name, some_file_names};
pub use origin::{Origin, Withdrawal};
pub use questions::{Choice, ChoiceKind};
pub use review::{Applier, Terms, Verdict};
pub use state::WritePlan;
pub use state::{State, StateGone, StateHandle};
