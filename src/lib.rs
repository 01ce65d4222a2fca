//! agentls: a language server that brings coding agents into any LSP editor.
//!
//! `lsp` is the host (the editor's side), `editor` the port every agent adapter goes through,
//! `mcp` serves terminal agents, `config` the user's settings. See `docs/architecture.md` in the
//! repository for the shape and its reasons.

pub mod acp;
pub mod agent_probe;
pub mod config;
pub mod demo_agent;
pub mod doctor;
pub mod editor;
pub mod file_uri;
pub mod guard;
pub mod known_agents;
pub mod lsp;
pub mod mcp;
pub mod memory;
pub mod private_files;
pub mod walkthrough;
