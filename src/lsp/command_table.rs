//! Every `workspace/executeCommand` command agentls runs, named once: the one table here feeds
//! both what `executeCommandProvider` advertises and what `commands::execute` dispatches on,
//! and every code action that runs a command is built from it.

use serde_json::Value;
use tower_lsp_server::ls_types::{CodeAction, CodeActionKind, CodeActionOrCommand, Command};

/// Declares [`CommandId`] and its table from one list, so that a command cannot be added
/// without its name and listing, nor the table fall out of the enum's order.
macro_rules! commands {
    ($($(#[doc = $doc:literal])* $id:ident = $name:literal, $listing:ident;)*) => {
        /// A command agentls runs. Its arguments are in the doc of each variant (README →
        /// Commands).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum CommandId {
            $($(#[doc = $doc])* $id,)*
        }

        /// Each command with its wire name, in the order of [`CommandId`]'s variants.
        const TABLE: &[(CommandId, &str, Listing)] =
            &[$((CommandId::$id, $name, Listing::$listing),)*];
    };
}

/// Whether clients are told of a command (and may offer it to the user).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Listing {
    Advertised,
    Unlisted,
}

commands! {
    /// Accept review changes: `[{"review": id, "hunk"?: index}]` (no hunk: all open ones).
    Accept = "agentls.accept", Advertised;
    /// Reject review changes: `[{"review": id, "hunk"?: index, "rerequest"?: bool}]`.
    Reject = "agentls.reject", Advertised;
    /// Show a review's file at its first open change: `[{"review": id}]`.
    ShowReview = "agentls.showReview", Advertised;
    /// Answer a question an agent asked: `[{"question": id, "choice": id}]`.
    Answer = "agentls.answer", Advertised;
    /// Point connected agents at the current selection (`[{"uri"?, "range"?}]` for another).
    Mention = "agentls.mention", Advertised;
    /// Start a turn: `[{"agent"?, "text", "uri"?, "range"?}]`.
    Prompt = "agentls.prompt", Advertised;
    /// Send the comment prompt on a line: `[{"agent"?, "uri", "line"}]` (what the code action
    /// *Send to <agent>: …* on it runs).
    PromptComment = "agentls.promptComment", Advertised;
    /// Open a new chat with an agent: `[{"agent"?}]` or none.
    OpenChat = "agentls.openChat", Advertised;
    /// Send what the user wrote in a chat: `[{"uri"?}]`, `[{"path"?}]` or none (the focused
    /// chat).
    Send = "agentls.send", Advertised;
    /// Quote lines of a file in the agent's latest chat (a new one if none) and show it:
    /// `[{"agent"?, "uri" or "path", "range" or "lines"}]`.
    AskAbout = "agentls.askAbout", Advertised;
    /// Cancel the running turn: `[{"agent"?}]`.
    Cancel = "agentls.cancel", Advertised;
    /// Open a new session: `[{"agent"?}]`.
    NewSession = "agentls.newSession", Advertised;
    /// Set the session mode: `[{"agent"?, "mode"}]`.
    SetMode = "agentls.setMode", Advertised;
    /// Set a session config option (a model, say): `[{"agent"?, "option", "value"}]`.
    SetOption = "agentls.setOption", Advertised;
    /// Agents, sessions, pending permissions, plans, modes, usage, last errors, as JSON.
    Status = "agentls.status", Advertised;
    /// Undo every file change of an agent's turn, as a review: `[{"turn"?: number}]` (none:
    /// the newest turn that changed a file). Answers what the user is told.
    UndoTurn = "agentls.undoTurn", Advertised;
    /// Put back what an undo of a turn took away, as a review: `[{"turn"?: number}]` (none:
    /// the newest undo).
    RedoTurn = "agentls.redoTurn", Advertised;
    /// The env a terminal needs for agents started in it to find this server: `{NAME: value}`.
    TerminalEnv = "agentls.terminalEnv", Advertised;
    /// Everything the server believes about the editor (documents with their text,
    /// selections, folders), for tests and for debugging a client.
    DebugState = "agentls.debug.state", Unlisted;
    /// Write a file through the editor exactly as an agent would: `[{"uri", "text"}]`.
    DebugWrite = "agentls.debug.write", Unlisted;
    /// Propose `text` for a file as a review from a test origin, exactly as an agent would;
    /// the verdict is logged as `agentls.debug.review verdict: <json>`.
    DebugReview = "agentls.debug.review", Unlisted;
    /// Make a test origin go away (its reviews and questions are withdrawn).
    DebugCloseOrigin = "agentls.debug.closeOrigin", Unlisted;
}

impl CommandId {
    /// The command's name on the wire.
    pub fn name(self) -> &'static str {
        TABLE[self as usize].1
    }

    /// The command called `name`, if agentls has one.
    pub fn parse(name: &str) -> Option<Self> {
        TABLE
            .iter()
            .find(|(_, n, _)| *n == name)
            .map(|(id, ..)| *id)
    }

    /// The names listed in `executeCommandProvider`.
    pub fn advertised() -> Vec<String> {
        TABLE
            .iter()
            .filter(|(.., listing)| *listing == Listing::Advertised)
            .map(|(_, name, _)| (*name).to_owned())
            .collect()
    }

    /// A quick-fix code action titled `title` that runs this command with `argument`.
    pub fn action(self, title: String, argument: Value) -> CodeActionOrCommand {
        CodeActionOrCommand::CodeAction(CodeAction {
            title: title.clone(),
            kind: Some(CodeActionKind::QUICKFIX),
            command: Some(Command {
                title,
                command: self.name().to_owned(),
                arguments: Some(vec![argument]),
            }),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_parses_back_from_its_name() {
        for (place, (id, name, _)) in TABLE.iter().enumerate() {
            assert_eq!(*id as usize, place);
            assert_eq!(CommandId::parse(name), Some(*id));
            assert_eq!(id.name(), *name);
        }
        assert_eq!(CommandId::parse("agentls.nothing"), None);
    }

    #[test]
    fn debug_commands_are_not_advertised() {
        let advertised = CommandId::advertised();
        assert!(advertised.contains(&"agentls.accept".to_owned()));
        assert!(advertised.iter().all(|name| !name.contains(".debug.")));
        assert_eq!(advertised.len(), 18);
    }
}
