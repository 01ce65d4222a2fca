//! The LSP handlers. Each notification feeds the port synchronously, before any `.await`, so
//! the port sees changes in the order the editor sent them even though tower-lsp-server runs
//! handlers concurrently. No handler awaits the client or an agent: such work is spawned.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use tokio::sync::watch;
use tower_lsp_server::LanguageServer;
use tower_lsp_server::jsonrpc::Result;
use tower_lsp_server::ls_types::{
    CodeActionKind, CodeActionOptions, CodeActionParams, CodeActionProviderCapability,
    CodeActionResponse, CompletionOptions, CompletionParams, CompletionResponse,
    DidChangeConfigurationParams, DidChangeTextDocumentParams, DidChangeWorkspaceFoldersParams,
    DidCloseTextDocumentParams, DidOpenTextDocumentParams, DidSaveTextDocumentParams,
    ExecuteCommandOptions, ExecuteCommandParams, GotoDefinitionParams, GotoDefinitionResponse,
    InitializeParams, InitializeResult, InitializedParams, InlayHint, InlayHintParams, LSPAny,
    Location, OneOf, Range as LspRange, SaveOptions, ServerCapabilities, ServerInfo,
    TextDocumentIdentifier, TextDocumentSyncCapability, TextDocumentSyncKind,
    TextDocumentSyncOptions, TextDocumentSyncSaveOptions, WorkspaceFoldersServerCapabilities,
    WorkspaceServerCapabilities, WorkspaceSymbolParams, WorkspaceSymbolResponse,
};

use super::capabilities::ClientFeatures;
use super::commands;
use super::convert;
use crate::config::{self, Layers};
use crate::editor::{AccessPolicy, EditorAccess, EditorFeed, Level};

/// The language server: the editor's view of agentls.
pub struct Backend {
    pub(super) editor: EditorAccess,
    pub(super) feed: EditorFeed,
    pub(super) features: std::sync::OnceLock<ClientFeatures>,
    pub(super) ready: watch::Sender<Option<ClientFeatures>>,
    pub(super) config: Mutex<Layers>,
    pub(super) shutdown_requested: Arc<AtomicBool>,
    pub(super) agents: crate::acp::Agents,
    pub(super) agent_config: watch::Sender<config::Config>,
    pub(super) mcp: Arc<super::mcp_commands::McpSlot>,
    pub(super) pacing: super::transport::Pacing,
    /// The agents whose next prompt from elsewhere (`agentls.prompt`) starts a new chat, to
    /// talk to the session the user opened (`agentls.newSession`) instead of the latest chat's.
    pub(super) new_conversations: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// Takes `key` out of the client's `initializationOptions`: an option to the server itself, not
/// a setting of agentls's config.
fn take_option(params: &mut InitializeParams, key: &str) -> Option<LSPAny> {
    params
        .initialization_options
        .as_mut()
        .and_then(|options| options.as_object_mut())
        .and_then(|options| options.remove(key))
}

/// Parameters of the client notification `agentls/didChangeSelection`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SelectionParams {
    /// The document.
    pub text_document: TextDocumentIdentifier,
    /// What is selected (empty for a cursor).
    pub selection: LspRange,
    /// The selected text, when the client sends it.
    pub text: Option<String>,
}

/// Parameters of the client notification `agentls/didChangeDiagnostics`: what the editor's
/// other language servers say about a file, forwarded by a plugin.
#[derive(Debug, Deserialize)]
pub struct ForwardedDiagnostics {
    /// The file.
    pub uri: tower_lsp_server::ls_types::Uri,
    /// All its diagnostics (replacing earlier ones).
    pub diagnostics: Vec<tower_lsp_server::ls_types::Diagnostic>,
}

impl Backend {
    /// `agent`'s next prompt from elsewhere starts a new chat (the user opened a new session).
    pub(super) fn start_new_conversation(&self, agent: &str) {
        let agents = self.new_conversations.lock();
        agents
            .unwrap_or_else(|e| e.into_inner())
            .insert(agent.to_owned());
    }

    /// Whether `agent`'s prompt is to start a new chat; from now on it is not.
    pub(super) fn takes_new_conversation(&self, agent: &str) -> bool {
        let agents = self.new_conversations.lock();
        agents.unwrap_or_else(|e| e.into_inner()).remove(agent)
    }

    /// Handles `agentls/didChangeDiagnostics`.
    pub async fn did_change_diagnostics(&self, params: ForwardedDiagnostics) {
        if let Some(path) = convert::path_of(&params.uri) {
            let diagnostics = params
                .diagnostics
                .into_iter()
                .map(convert::editor_diagnostic);
            self.feed.diagnostics_forwarded(path, diagnostics.collect());
        }
    }

    /// Handles `agentls/didChangeSelection`.
    pub async fn did_change_selection(&self, params: SelectionParams) {
        if let Some(path) = convert::path_of(&params.text_document.uri) {
            self.feed.selected(
                path,
                convert::range(params.selection).ordered(),
                params.text,
            );
        }
    }

    /// Merges the config layers again and applies the result; problems go to the user.
    fn reload_config(&self, change: impl FnOnce(&mut Layers)) {
        let loaded = {
            let mut layers = self.config.lock().unwrap_or_else(|e| e.into_inner());
            change(&mut layers);
            layers.load()
        };
        for problem in &loaded.problems {
            self.editor.tell_user(Level::Warning, problem.to_string());
        }
        let config = &loaded.config;
        self.feed.set_policy(AccessPolicy {
            allow_outside_workspace: config.fs.allow_outside_workspace,
            auto_accept: config.review.auto_accept,
            auto_accept_for: config
                .review
                .agents
                .iter()
                .filter_map(|(name, o)| Some((name.clone(), o.auto_accept?)))
                .collect(),
            max_preview_lines: config.review.max_preview_lines,
            keep_turns: config.review.keep_turns,
        });
        self.feed
            .set_comment_marker(config.chat.comment_marker.clone());
        self.feed.set_watch_ignore(config.watch.ignore.clone());
        self.agent_config.send_replace(loaded.config);
    }
}

impl LanguageServer for Backend {
    async fn initialize(&self, mut params: InitializeParams) -> Result<InitializeResult> {
        // Decided before this reply goes out: it is the first one paced, or not. The option is
        // the client's, not a setting of agentls's config.
        let asked = take_option(&mut params, "paceReplies").and_then(|asked| asked.as_bool());
        self.pacing.set_for(params.client_info.is_some(), asked);
        let (plugin_events, unknown) =
            super::capabilities::plugin_events(take_option(&mut params, "pluginEvents").as_ref());
        self.feed.set_plugin_events(plugin_events);
        if !unknown.is_empty() {
            self.editor.log(
                Level::Warning,
                format!(
                    "initializationOptions.pluginEvents: not a list of event names: {}",
                    unknown.join(", ")
                ),
            );
        }
        let features = ClientFeatures::from_capabilities(&params.capabilities);
        self.feed.set_encoding(features.encoding);
        let folders = initial_folders(&params);
        // The config first: the workspace watcher then walks the folders once, with the
        // user's `watch.ignore`.
        self.reload_config(|layers| {
            layers.set_initialization_options(params.initialization_options)
        });
        self.feed.folders_changed(folders, Vec::new());
        if self
            .config
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .load()
            .config
            .mcp
            .enabled
        {
            self.mcp.start(self.editor.clone());
        }
        // The effect runner starts once `initialized` arrives; keep the features until then.
        let _ = self.features.set(features);
        Ok(InitializeResult {
            capabilities: server_capabilities(&features),
            server_info: Some(ServerInfo {
                name: "agentls".into(),
                version: Some(env!("CARGO_PKG_VERSION").into()),
            }),
            ..Default::default()
        })
    }

    async fn initialized(&self, _: InitializedParams) {
        let features = self.features.get().copied().unwrap_or_default();
        self.ready.send_replace(Some(features));
        tracing::info!(?features, "client initialized");
        // What starting up ran need not stay resident while the user reads.
        crate::memory::give_back_soon();
    }

    async fn shutdown(&self) -> Result<()> {
        self.shutdown_requested.store(true, Ordering::SeqCst);
        // An editor may kill its servers soon after asking this (Helix does, once its wait
        // is over): the chats' records get what their documents have not got yet, first.
        self.feed.keep_chats().await;
        self.mcp.stop();
        self.agents.shutdown().await;
        Ok(())
    }

    async fn did_open(&self, params: DidOpenTextDocumentParams) {
        let doc = params.text_document;
        if let Some(path) = convert::path_of(&doc.uri) {
            super::chat_commands::follow_open(self, &path, &doc.text);
            self.feed
                .opened(path, doc.text, doc.version, doc.language_id);
        }
    }

    async fn did_change(&self, params: DidChangeTextDocumentParams) {
        let doc = params.text_document;
        if let Some(path) = convert::path_of(&doc.uri) {
            let changes = params.content_changes.into_iter().map(convert::text_change);
            self.feed.changed(path, doc.version, changes.collect());
        }
    }

    async fn did_save(&self, params: DidSaveTextDocumentParams) {
        if let Some(path) = convert::path_of(&params.text_document.uri) {
            self.feed.saved(path);
        }
    }

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        if let Some(path) = convert::path_of(&params.text_document.uri) {
            self.feed.closed(path);
        }
    }

    async fn did_change_configuration(&self, params: DidChangeConfigurationParams) {
        self.reload_config(|layers| layers.set_editor_settings(params.settings));
    }

    async fn did_change_workspace_folders(&self, params: DidChangeWorkspaceFoldersParams) {
        let paths = |folders: Vec<tower_lsp_server::ls_types::WorkspaceFolder>| {
            folders
                .iter()
                .filter_map(|f| convert::path_of(&f.uri))
                .collect::<Vec<_>>()
        };
        self.feed
            .folders_changed(paths(params.event.added), paths(params.event.removed));
    }

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        let Some(path) = convert::path_of(&params.text_document.uri) else {
            return Ok(None);
        };
        let range = convert::range(params.range);
        // Helix tells a server the selection only through this range.
        self.feed.selected(path.clone(), range, None);
        let agent = self.agents.name_of(None).ok();
        let (actions, chat) = self
            .feed
            .code_actions(&path, range, agent)
            .await
            .unwrap_or_default();
        let mut actions: CodeActionResponse =
            actions.into_iter().map(commands::code_action).collect();
        // The chat's header line picks the agent's mode and options.
        if let Some(agent) = chat.filter(|_| range.start.line == 0) {
            actions.extend(super::chat_commands::setting_actions(
                &self.agents.current_session(&agent),
                &agent,
            ));
        }
        Ok((!actions.is_empty()).then_some(actions))
    }

    async fn completion(&self, params: CompletionParams) -> Result<Option<CompletionResponse>> {
        let place = params.text_document_position;
        let Some(path) = convert::path_of(&place.text_document.uri) else {
            return Ok(None);
        };
        Ok(super::chat_completion::complete(self, path, place.position).await)
    }

    async fn goto_definition(
        &self,
        params: GotoDefinitionParams,
    ) -> Result<Option<GotoDefinitionResponse>> {
        let place = params.text_document_position_params;
        let Some(path) = convert::path_of(&place.text_document.uri) else {
            return Ok(None);
        };
        let at = convert::position(place.position);
        let target = self.feed.chat_link(&path, at).await;
        Ok(target.and_then(|(file, line)| {
            let start = convert::lsp_position(crate::editor::Position::new(line, 0));
            let uri = convert::uri_of(&file)?;
            Some(GotoDefinitionResponse::Scalar(Location::new(
                uri,
                LspRange::new(start, start),
            )))
        }))
    }

    async fn symbol(
        &self,
        params: WorkspaceSymbolParams,
    ) -> Result<Option<WorkspaceSymbolResponse>> {
        Ok(Some(super::chat_list::symbols(self, &params.query).await))
    }

    async fn inlay_hint(&self, params: InlayHintParams) -> Result<Option<Vec<InlayHint>>> {
        let Some(path) = convert::path_of(&params.text_document.uri) else {
            return Ok(None);
        };
        let range = convert::range(params.range);
        let hints = self.feed.review_hints(&path, range).await;
        Ok(Some(hints.into_iter().map(convert::inlay_hint).collect()))
    }

    async fn execute_command(&self, params: ExecuteCommandParams) -> Result<Option<LSPAny>> {
        let result = commands::execute(self, &params.command, params.arguments).await;
        if let Err(e) = &result {
            // Said where the user looks: Helix and eglot drop command errors quietly, and a
            // command run from a picker with no arguments must say what it needs.
            let said = if e.message.starts_with("agentls") {
                e.message.to_string()
            } else {
                format!("agentls: {}: {}", params.command, e.message)
            };
            self.editor.tell_user(Level::Warning, said);
        }
        result
    }
}

/// The workspace folders from `initialize`: `workspaceFolders`, else the deprecated `rootUri`.
fn initial_folders(params: &InitializeParams) -> Vec<std::path::PathBuf> {
    if let Some(folders) = &params.workspace_folders {
        return folders
            .iter()
            .filter_map(|f| convert::path_of(&f.uri))
            .collect();
    }
    #[allow(deprecated)]
    let root = params.root_uri.as_ref().and_then(convert::path_of);
    root.into_iter().collect()
}

fn server_capabilities(features: &ClientFeatures) -> ServerCapabilities {
    ServerCapabilities {
        position_encoding: Some(features.encoding_kind()),
        text_document_sync: Some(TextDocumentSyncCapability::Options(
            TextDocumentSyncOptions {
                open_close: Some(true),
                change: Some(TextDocumentSyncKind::INCREMENTAL),
                save: Some(TextDocumentSyncSaveOptions::SaveOptions(SaveOptions {
                    include_text: Some(false),
                })),
                ..Default::default()
            },
        )),
        code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
            code_action_kinds: Some(vec![CodeActionKind::QUICKFIX]),
            ..Default::default()
        })),
        inlay_hint_provider: features.inlay_hints.then_some(OneOf::Left(true)),
        // In chat documents: a proposal's hunks, each a link to its file and line.
        definition_provider: Some(OneOf::Left(true)),
        // In chat documents: the agent's slash commands and `@` file mentions.
        completion_provider: Some(CompletionOptions {
            trigger_characters: Some(vec!["/".into(), "@".into()]),
            ..Default::default()
        }),
        // The workspace's chats, by their first message.
        workspace_symbol_provider: Some(OneOf::Left(true)),
        execute_command_provider: Some(ExecuteCommandOptions {
            commands: super::command_table::CommandId::advertised(),
            ..Default::default()
        }),
        workspace: Some(WorkspaceServerCapabilities {
            workspace_folders: Some(WorkspaceFoldersServerCapabilities {
                supported: Some(true),
                change_notifications: Some(OneOf::Left(true)),
            }),
            file_operations: None,
        }),
        ..Default::default()
    }
}

/// Reads the user's config file for a new server.
pub fn initial_layers() -> Layers {
    Layers::user()
}
