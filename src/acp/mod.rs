//! The ACP adapter: agentls as an Agent Client Protocol client. It starts agents from the
//! config, drives their sessions and turns, and serves their requests over the port
//! (`EditorAccess`). It never imports `lsp` or `mcp`: the host wires it in.

mod agent;
pub mod command_memory;
mod connection;
mod context;
pub mod error;
mod fs;
mod link;
pub mod orphans;
mod permission;
mod plugin_updates;
pub mod process;
mod review;
mod session;
mod session_defaults;
mod supervisor;
mod terminal;
mod text_chunks;
pub mod transport;
mod turn;
mod updates;

pub use context::{AnsweredComment, Prompt, PromptContext};
pub use error::AgentFailure;
pub use supervisor::Agents;
pub use turn::busy_message;
