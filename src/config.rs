//! The configuration: one schema (camelCase keys), read from the user's config file and then
//! overridden by the editor's `initializationOptions` and `workspace/didChangeConfiguration`.
//!
//! Agents are data (`agents.<name> = {command, args, env}`). Because editor settings can come from
//! a file inside a workspace (Helix's `.helix/languages.toml`, a project `.nvim.lua`), only the
//! user's own config file may declare what agentls executes: agent definitions sent by the editor
//! are refused with a message. Nor may they loosen a guard rail the file set, whatever the
//! spelling: an editor layer whose result would be looser than the file alone is left out. A
//! layer that does not fit the schema is reported (naming the key) and left out; the server keeps
//! running on the rest.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// How to start one agent.
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentSpec {
    /// The program: a name looked up on PATH, or a path.
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The mode every new session is put in before its first prompt (one of the agent's mode
    /// ids, e.g. the one that asks before editing).
    #[serde(default)]
    pub mode: Option<String>,
    /// Session config options set on every new session, by the agent's ids (e.g. `model`).
    #[serde(default)]
    pub config_options: BTreeMap<String, String>,
    /// Folders, relative to the workspace, where the agent keeps its own state (sessions,
    /// history): what it writes there is not shown as a change made without asking.
    #[serde(default)]
    pub own_files: Vec<PathBuf>,
    /// Offer the agent agentls's MCP server in each session (`editorTools`; default true):
    /// the editor's diagnostics, open files, selection, folders, and opening a file.
    #[serde(default)]
    pub editor_tools: Option<bool>,
    /// Why it may not connect to the editor tools, said once when a turn of it ends without it
    /// having connected (`toolsHint`; a known agent's comes from agentls's table).
    #[serde(default)]
    pub tools_hint: Option<String>,
}

impl AgentSpec {
    /// Whether its sessions are offered the editor's tools (`editorTools`, on unless `false`).
    pub fn offers_editor_tools(&self) -> bool {
        self.editor_tools != Some(false)
    }

    /// The environment with secret-looking values replaced, for logs and `doctor`.
    pub fn redacted_env(&self) -> BTreeMap<String, String> {
        self.env
            .iter()
            .map(|(k, v)| {
                let upper = k.to_ascii_uppercase();
                let secret = ["KEY", "TOKEN", "SECRET", "PASSWORD", "AUTH"]
                    .iter()
                    .any(|word| upper.contains(word));
                (
                    k.clone(),
                    if secret {
                        "<redacted>".into()
                    } else {
                        v.clone()
                    },
                )
            })
            .collect()
    }
}

impl fmt::Debug for AgentSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentSpec")
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &self.redacted_env())
            .field("mode", &self.mode)
            .field("config_options", &self.config_options)
            .field("own_files", &self.own_files)
            .field("editor_tools", &self.editor_tools)
            .finish()
    }
}

/// File access rules for agents.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct FsConfig {
    /// Let agents read and write outside the workspace folders, and run commands there.
    pub allow_outside_workspace: bool,
}

/// Per-agent review settings.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ReviewOverride {
    /// Overrides `review.autoAccept` for this agent.
    pub auto_accept: Option<bool>,
}

/// How agents' proposals are reviewed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ReviewConfig {
    /// Apply every proposal without asking (default false).
    pub auto_accept: bool,
    /// Lines of each side shown in a change's preview (default 8).
    pub max_preview_lines: usize,
    /// How many of the newest turns' file changes are kept for undoing them (default 50; 0:
    /// none).
    pub keep_turns: usize,
    /// Overrides by agent name (for terminal agents: the name they connect as).
    pub agents: BTreeMap<String, ReviewOverride>,
}

impl ReviewConfig {
    /// Whether proposals of the agent `name` are applied without asking: its override, else
    /// `autoAccept`.
    pub fn auto_accepts(&self, name: &str) -> bool {
        self.agents
            .get(name)
            .and_then(|o| o.auto_accept)
            .unwrap_or(self.auto_accept)
    }
}

impl Default for ReviewConfig {
    fn default() -> Self {
        Self {
            auto_accept: false,
            max_preview_lines: 8,
            keep_turns: crate::editor::review::checkpoints::KEEP_TURNS,
            agents: BTreeMap::new(),
        }
    }
}

/// Conversations with agents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ChatConfig {
    /// What makes a line comment a comment prompt (default `agent:`; empty: none are).
    pub comment_marker: String,
    /// Where chat documents live, a folder per workspace in it (default
    /// `$XDG_STATE_HOME/agentls/chats`, outside every repository). Only the user's config file
    /// may set it: agentls writes there.
    pub directory: Option<PathBuf>,
    /// The editor's keys for sending and stopping, which a new chat's header names (one line;
    /// the shipped Helix `languages.toml` sets it; empty: the header names the code action).
    pub keys: String,
}

impl Default for ChatConfig {
    fn default() -> Self {
        Self {
            comment_marker: crate::editor::chat::comment_prompt::DEFAULT_MARKER.to_owned(),
            directory: None,
            keys: String::new(),
        }
    }
}

/// Serving terminal agents (their IDE protocol over MCP on a loopback socket).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct McpConfig {
    /// Listen for terminal agents and write their discovery files (default true).
    pub enabled: bool,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self { enabled: true }
    }
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Config {
    /// The agent used when a command names none.
    pub default_agent: Option<String>,
    /// The agents agentls may start, by name.
    pub agents: BTreeMap<String, AgentSpec>,
    /// File access rules.
    pub fs: FsConfig,
    /// How proposals are reviewed.
    pub review: ReviewConfig,
    /// Serving terminal agents.
    pub mcp: McpConfig,
    /// Conversations with agents.
    pub chat: ChatConfig,
    /// How much of the editor's files goes along with a prompt.
    pub context: ContextConfig,
    /// What the workspace watcher leaves out.
    pub watch: WatchConfig,
}

/// What the workspace watcher leaves out beside the built-in folders and the repository's
/// ignore files: the user's own patterns (gitignore syntax, relative to each workspace folder).
/// Only the user's config file may set them: what is not watched is an agent's change nobody
/// reviews.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct WatchConfig {
    /// Patterns of folders and files not to watch (`generated/`, `*.snap`).
    pub ignore: Vec<String>,
}

/// How much of the editor's files goes along with a prompt (mentioned files, the selection or
/// file a prompt is about): past a limit the agent gets the start and a note that it was cut,
/// and the user is told. Only the user's config file may set these.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ContextConfig {
    /// The most of one file (default 2 MiB).
    pub max_file_bytes: u64,
    /// The most of all the files of one message together (default 4 MiB).
    pub max_message_bytes: u64,
}

impl Default for ContextConfig {
    fn default() -> Self {
        Self {
            max_file_bytes: 2 * 1024 * 1024,
            max_message_bytes: 4 * 1024 * 1024,
        }
    }
}

/// The name of the built-in demo agent, used when no agent is configured.
pub const DEMO_AGENT: &str = "demo";

impl Config {
    /// The agents in force: the configured ones, or, when there are none, the built-in demo
    /// agent `demo` (this executable with `demo-agent`).
    pub fn effective_agents(&self) -> BTreeMap<String, AgentSpec> {
        let mut agents = self.agents.clone();
        agents.entry(DEMO_AGENT.to_owned()).or_insert_with(|| {
            let command = std::env::current_exe()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|_| "agentls".into());
            AgentSpec {
                command,
                args: vec!["demo-agent".into()],
                ..AgentSpec::default()
            }
        });
        agents
    }

    /// The agent a command that names none goes to: `defaultAgent`, else the first configured
    /// agent in name order, else the built-in demo agent.
    pub fn effective_default_agent(&self) -> String {
        self.default_agent
            .clone()
            .or_else(|| self.agents.keys().next().cloned())
            .unwrap_or_else(|| DEMO_AGENT.to_owned())
    }
}

/// Where a piece of configuration came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The user's config file.
    File(PathBuf),
    /// The editor's `initializationOptions`.
    InitializationOptions,
    /// The editor's `workspace/didChangeConfiguration`.
    EditorSettings,
    /// All sources together (a check that spans them, like `defaultAgent` naming an agent).
    Merged,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(path) => write!(f, "{}", path.display()),
            Self::InitializationOptions => f.write_str("initializationOptions"),
            Self::EditorSettings => f.write_str("workspace/didChangeConfiguration"),
            Self::Merged => f.write_str("all sources"),
        }
    }
}

/// One thing wrong with the configuration, naming the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Where the bad value came from.
    pub source: Source,
    /// The dotted key, e.g. `agents.claude.args` (empty: the whole source).
    pub key: String,
    /// What is wrong and what agentls did about it.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.key.as_str() {
            "" => write!(f, "agentls config ({}): {}", self.source, self.message),
            key => write!(
                f,
                "agentls config ({}): `{key}`: {}",
                self.source, self.message
            ),
        }
    }
}

/// The raw layers, kept so that a later layer can be replaced and everything merged again.
#[derive(Debug, Clone, Default)]
pub struct Layers {
    file: Option<(PathBuf, Value)>,
    file_problem: Option<Problem>,
    initialization_options: Option<Value>,
    editor_settings: Option<Value>,
}

/// A merged configuration and what was wrong on the way.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// The configuration in force.
    pub config: Config,
    /// Everything that was refused.
    pub problems: Vec<Problem>,
}

/// The user's config file: `$AGENTLS_CONFIG`, else `$XDG_CONFIG_HOME/agentls/config.toml`, else
/// `~/.config/agentls/config.toml`.
pub fn file_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("AGENTLS_CONFIG") {
        return Some(PathBuf::from(path));
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(base.join("agentls").join("config.toml"))
}

impl Layers {
    /// Reads the user's config file ([`file_path`]). A missing file is no problem, unless
    /// `AGENTLS_CONFIG` named it: then the user meant a file that is not there.
    pub fn user() -> Self {
        let path = file_path();
        let mut layers = Self::with_file(path.as_deref());
        if let Some(path) = path.filter(|_| std::env::var_os("AGENTLS_CONFIG").is_some())
            && layers.file.is_none()
            && layers.file_problem.is_none()
        {
            let message = "AGENTLS_CONFIG names this file, which does not exist; using defaults";
            layers.file_problem = Some(problem(Source::File(path), "", message.to_owned()));
        }
        layers
    }

    /// Reads the config file at `path` (a missing file is no problem).
    pub fn with_file(path: Option<&Path>) -> Self {
        let mut layers = Self::default();
        let Some(path) = path else { return layers };
        let source = Source::File(path.to_owned());
        match std::fs::read_to_string(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => layers.file_problem = Some(problem(source, "", format!("cannot read: {e}"))),
            Ok(text) => match toml::from_str::<Value>(&text) {
                Ok(value) => layers.file = Some((path.to_owned(), value)),
                Err(e) => {
                    let message = format!("not valid TOML: {}", e.message());
                    layers.file_problem = Some(problem(source, "", message));
                }
            },
        }
        layers
    }

    /// The config file that was read, if any.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_ref().map(|(path, _)| path.as_path())
    }

    /// Sets the editor's `initializationOptions`.
    pub fn set_initialization_options(&mut self, value: Option<Value>) {
        self.initialization_options = value.filter(|v| !v.is_null());
    }

    /// Sets the editor's settings from `workspace/didChangeConfiguration`; settings nested under
    /// an `agentls` key (as most editors send them) are unwrapped.
    pub fn set_editor_settings(&mut self, value: Value) {
        let value = match value {
            Value::Object(mut map) if map.contains_key("agentls") => map.remove("agentls"),
            other => Some(other),
        };
        self.editor_settings = value.filter(|v| !v.is_null());
    }

    /// Merges the layers, leaving out what does not fit and saying why.
    pub fn load(&self) -> Loaded {
        let mut problems: Vec<Problem> = self.file_problem.iter().cloned().collect();
        let mut merged = Value::Object(Map::new());
        let mut config = Config::default();
        let editor_layers = [
            (Source::InitializationOptions, &self.initialization_options),
            (Source::EditorSettings, &self.editor_settings),
        ];
        let file_layer = self
            .file
            .as_ref()
            .map(|(p, v)| (Source::File(p.clone()), v));
        let layers = file_layer.into_iter().chain(
            editor_layers
                .iter()
                .filter_map(|(source, value)| Some((source.clone(), value.as_ref()?))),
        );
        // The user's file turned the terminal-agent server off: a workspace may not turn it on.
        let mcp_off_by_file = self.file.as_ref().is_some_and(|(_, v)| {
            v.get("mcp")
                .and_then(|m| serde_json::from_value::<McpConfig>(m.clone()).ok())
                .is_some_and(|m| !m.enabled)
        });
        // What the user's file alone allows; no editor layer may end up allowing more.
        let mut file_alone: Option<Config> = None;
        for (source, value) in layers {
            let from_file = matches!(source, Source::File(_));
            let mut value = value.clone();
            if from_file {
                for (key, message) in expand_uses(&mut value) {
                    problems.push(problem(source.clone(), &key, message));
                }
            } else {
                if !value.is_object() {
                    let message = "the settings must be an object; this source is ignored".into();
                    problems.push(problem(source, "", message));
                    continue;
                }
                drop_client_owned(&mut value);
                refuse_from_editor(&source, &mut value, mcp_off_by_file, &mut problems);
                // Whatever the encoding (serde also reads a struct from an array), what is left
                // must not define agents or loosen a guard rail.
                if let Some(key) = still_loosens(&value) {
                    problems.push(problem(source, &key, only_the_file_may()));
                    continue;
                }
            }
            if let Err((key, message)) = check_layer(&value) {
                let message =
                    format!("{message}; this source is ignored, defaults and other sources apply");
                problems.push(problem(source, &key, message));
                continue;
            }
            let mut candidate = merged.clone();
            merge(&mut candidate, value);
            let merged_config = match serde_json::from_value::<Config>(candidate.clone()) {
                Ok(merged_config) => merged_config,
                Err(e) => {
                    let message = format!("{e}; this source is ignored");
                    problems.push(problem(source, "", message));
                    continue;
                }
            };
            if from_file {
                file_alone = Some(merged_config.clone());
            } else {
                // The file's own limits: what it says, or the defaults when it says nothing
                // (or could not be read); `mcp.enabled = false` counts even from a broken file.
                let mut limits = file_alone.clone().unwrap_or_default();
                limits.mcp.enabled &= !mcp_off_by_file;
                // A value the refusal above does not see (a `null` that erases the file's
                // per-agent `false`, an array standing for a whole table) may still leave the
                // result looser than the file: judged on the result, not on the spelling.
                if let Some(key) = looser_than(&merged_config, &limits) {
                    problems.push(problem(source, &key, only_the_file_may()));
                    continue;
                }
            }
            merged = candidate;
            config = merged_config;
        }
        validate(&mut config, &mut problems);
        Loaded { config, problems }
    }
}

/// Why a layer that still loosens a guard rail is ignored.
fn only_the_file_may() -> String {
    "only your config file may set this (editor settings may come from a workspace); this \
     source is ignored"
        .into()
}

/// The key of the first guard rail `config` holds looser than `limits` does: an agent it runs
/// that `limits` does not, access outside the workspace, reviews turned off (for all agents or
/// one), or the terminal-agent server on. `None` when it is as strict or stricter everywhere.
fn looser_than(config: &Config, limits: &Config) -> Option<String> {
    if config
        .agents
        .keys()
        .any(|name| !limits.agents.contains_key(name))
    {
        return Some("agents".into());
    }
    if config.fs.allow_outside_workspace && !limits.fs.allow_outside_workspace {
        return Some("fs.allowOutsideWorkspace".into());
    }
    if config.review.auto_accept && !limits.review.auto_accept {
        return Some("review.autoAccept".into());
    }
    // Agents named in neither follow `autoAccept`, checked above.
    let named = config
        .review
        .agents
        .keys()
        .chain(limits.review.agents.keys());
    for name in named {
        if config.review.auto_accepts(name) && !limits.review.auto_accepts(name) {
            return Some(format!("review.agents.{name}.autoAccept"));
        }
    }
    if config.mcp.enabled && !limits.mcp.enabled {
        return Some("mcp.enabled".into());
    }
    if config.context.max_file_bytes > limits.context.max_file_bytes {
        return Some("context.maxFileBytes".into());
    }
    if config.context.max_message_bytes > limits.context.max_message_bytes {
        return Some("context.maxMessageBytes".into());
    }
    None
}

/// Removes from a layer the editor sent what only the user's file may say: what agentls runs
/// (`agents`), where it writes its own files (`chat.directory`), and anything that loosens the
/// guard rails (`fs.allowOutsideWorkspace`, `review.autoAccept`,
/// `review.agents.<name>.autoAccept` set to true). Editor settings can come
/// from a workspace file, and a workspace must not be able to turn reviews or the workspace
/// boundary off; nor turn the terminal-agent server on when the file turned it off
/// (`mcp_off_by_file`). Tightening (setting them false) is fine.
/// Settings under the `agentls` section that belong to the editor's client, not to agentls
/// (`agentls.trace.server`, which VS Code's language client reads): left out of the layer, so
/// that the rest of it still counts.
const CLIENT_OWNED: [&str; 1] = ["trace"];

/// Leaves out of an editor layer what its client owns ([`CLIENT_OWNED`]).
fn drop_client_owned(value: &mut Value) {
    if let Some(map) = value.as_object_mut() {
        for key in CLIENT_OWNED {
            map.remove(key);
        }
    }
}

fn refuse_from_editor(
    source: &Source,
    value: &mut Value,
    mcp_off_by_file: bool,
    problems: &mut Vec<Problem>,
) {
    let Some(map) = value.as_object_mut() else {
        return;
    };
    let mut refuse = |key: String, what: &str| {
        problems.push(problem(
            source.clone(),
            &key,
            format!(
                "{what} only in your config file (editor settings may come from a workspace, \
                 and a workspace must not decide this); ignored"
            ),
        ));
    };
    if map.remove("agents").is_some() {
        refuse("agents".into(), "agents can be defined");
    }
    let turns_mcp_on = map
        .get("mcp")
        .and_then(|m| serde_json::from_value::<McpConfig>(m.clone()).ok())
        .is_some_and(|m| m.enabled);
    if mcp_off_by_file && turns_mcp_on {
        map.remove("mcp");
        refuse(
            "mcp.enabled".into(),
            "the terminal-agent server can be turned on when your file turned it off",
        );
    }
    let loosening = |v: Option<&Value>| v == Some(&Value::Bool(true));
    if let Some(fs) = map.get_mut("fs").and_then(Value::as_object_mut)
        && loosening(fs.get("allowOutsideWorkspace"))
    {
        fs.remove("allowOutsideWorkspace");
        refuse(
            "fs.allowOutsideWorkspace".into(),
            "access outside the workspace can be allowed",
        );
    }
    if map.remove("context").is_some() {
        refuse(
            "context".into(),
            "how much of your files goes to agents can be set",
        );
    }
    if map.remove("watch").is_some() {
        refuse(
            "watch".into(),
            "what agentls watches for agents' changes can be set",
        );
    }
    if let Some(chat) = map.get_mut("chat").and_then(Value::as_object_mut)
        && chat.remove("directory").is_some()
    {
        refuse(
            "chat.directory".into(),
            "where agentls keeps its chats can be set",
        );
    }
    if let Some(review) = map.get_mut("review").and_then(Value::as_object_mut) {
        if loosening(review.get("autoAccept")) {
            review.remove("autoAccept");
            refuse("review.autoAccept".into(), "reviews can be turned off");
        }
        if let Some(agents) = review.get_mut("agents").and_then(Value::as_object_mut) {
            for (name, agent) in agents.iter_mut() {
                if let Some(agent) = agent.as_object_mut()
                    && loosening(agent.get("autoAccept"))
                {
                    agent.remove("autoAccept");
                    refuse(
                        format!("review.agents.{name}.autoAccept"),
                        "reviews can be turned off",
                    );
                }
            }
        }
    }
}

/// The key of what an editor layer still sets that only the user's file may: an agent, or a
/// guard rail turned off. `None` when it sets none (or does not fit the schema at all, which
/// [`check_layer`] reports).
fn still_loosens(value: &Value) -> Option<String> {
    let config: Config = serde_json::from_value(value.clone()).ok()?;
    if !config.agents.is_empty() {
        return Some("agents".into());
    }
    if config.fs.allow_outside_workspace {
        return Some("fs.allowOutsideWorkspace".into());
    }
    if config.review.auto_accept {
        return Some("review.autoAccept".into());
    }
    if config.chat.directory.is_some() {
        return Some("chat.directory".into());
    }
    if config.context != ContextConfig::default() {
        return Some("context".into());
    }
    if config.watch != WatchConfig::default() {
        return Some("watch".into());
    }
    config
        .review
        .agents
        .iter()
        .find(|(_, o)| o.auto_accept == Some(true))
        .map(|(name, _)| format!("review.agents.{name}.autoAccept"))
}

/// Whether a layer fits the schema; on failure the dotted key and the reason.
fn check_layer(value: &Value) -> Result<(), (String, String)> {
    serde_path_to_error::deserialize::<_, Config>(value)
        .map(drop)
        .map_err(|e| {
            let key = e.path().to_string();
            (key, e.into_inner().to_string())
        })
}

/// Checks what the types cannot: the default agent exists, commands are not empty.
fn validate(config: &mut Config, problems: &mut Vec<Problem>) {
    let source = Source::Merged;
    config.agents.retain(|name, spec| {
        let ok = !spec.command.trim().is_empty();
        if !ok {
            let key = format!("agents.{name}.command");
            problems.push(problem(
                source.clone(),
                &key,
                "is empty; agent ignored".into(),
            ));
        }
        ok
    });
    if let Some(name) = &config.default_agent
        && !config.agents.contains_key(name)
        && name != DEMO_AGENT
    {
        let message = format!("names agent `{name}`, which is not configured; ignored");
        problems.push(problem(source, "defaultAgent", message));
        config.default_agent = None;
    }
}

/// Deep merge: objects merge key by key, anything else replaces.
fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                merge(base.entry(key).or_insert(Value::Null), value);
            }
        }
        (base, over) => *base = over,
    }
}

/// Replaces each `agents.<name>.use` in a config layer by the known agent it names
/// (`known_agents`), the layer's own keys over it (`env` key by key). Returns the problems, as
/// (key, message): an id not in the table (that agent is left out).
fn expand_uses(layer: &mut Value) -> Vec<(String, String)> {
    let Some(agents) = layer.get_mut("agents").and_then(Value::as_object_mut) else {
        return Vec::new();
    };
    let known = crate::known_agents::all();
    let mut problems = Vec::new();
    let mut unknown = Vec::new();
    for (name, spec) in agents.iter_mut() {
        let Some(id) = spec.as_object_mut().and_then(|s| s.remove("use")) else {
            continue;
        };
        match id.as_str().and_then(|id| known.get(id)) {
            Some(entry) => {
                let mut expanded = entry.as_config();
                merge(&mut expanded, std::mem::take(spec));
                *spec = expanded;
            }
            None => {
                let ids: Vec<&str> = known.keys().map(String::as_str).collect();
                let message = format!(
                    "{id} is not a known agent (known: {}; `agentls agents` lists them); this \
                     agent is left out",
                    ids.join(", ")
                );
                problems.push((format!("agents.{name}.use"), message));
                unknown.push(name.clone());
            }
        }
    }
    for name in unknown {
        agents.remove(&name);
    }
    problems
}

fn problem(source: Source, key: &str, message: String) -> Problem {
    Problem {
        source,
        key: key.to_owned(),
        message,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn use_takes_a_known_agent_and_the_files_own_keys_win() {
        let mut layer = serde_json::json!({"agents": {
            "claude": {"use": "claude-acp", "env": {"ANTHROPIC_API_KEY": "k"}, "mode": "plan"},
            "mine": {"command": "my-agent"},
            "typo": {"use": "no-such-agent"},
        }});
        let problems = expand_uses(&mut layer);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].0, "agents.typo.use");
        assert!(problems[0].1.contains("claude-acp"), "{problems:?}");
        let claude: AgentSpec = serde_json::from_value(layer["agents"]["claude"].clone()).unwrap();
        assert_eq!(claude.command, "npx");
        assert_eq!(claude.args, ["-y", "@agentclientprotocol/claude-agent-acp"]);
        assert_eq!(claude.mode.as_deref(), Some("plan"));
        assert_eq!(
            claude.env.keys().collect::<Vec<_>>(),
            ["ANTHROPIC_API_KEY", "ENABLE_TOOL_SEARCH"]
        );
        assert_eq!(
            layer["agents"]["mine"],
            serde_json::json!({"command": "my-agent"})
        );
        assert!(layer["agents"].get("typo").is_none());
    }

    use serde_json::json;

    use super::*;

    fn layers_with_file(toml: &str) -> (tempfile::TempDir, Layers) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, toml).unwrap();
        let layers = Layers::with_file(Some(&path));
        (dir, layers)
    }

    #[test]
    fn editor_layers_override_the_file() {
        let (_dir, mut layers) = layers_with_file(
            "defaultAgent = \"a\"\n[agents.a]\ncommand = \"x\"\n[agents.b]\ncommand = \"y\"\n\
             [fs]\nallowOutsideWorkspace = true\n",
        );
        layers.set_initialization_options(Some(json!({"review": {"maxPreviewLines": 3}})));
        layers.set_editor_settings(json!({"agentls": {"defaultAgent": "b",
                                                      "fs": {"allowOutsideWorkspace": false}}}));
        let loaded = layers.load();
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
        assert_eq!(loaded.config.default_agent.as_deref(), Some("b"));
        assert_eq!(loaded.config.review.max_preview_lines, 3);
        assert!(
            !loaded.config.fs.allow_outside_workspace,
            "tightening is allowed"
        );
        assert_eq!(loaded.config.agents.len(), 2);
    }

    #[test]
    fn settings_the_client_owns_leave_the_rest_in_force() {
        let mut layers = Layers::default();
        layers.set_editor_settings(json!({"agentls": {"trace": {"server": "verbose"},
                                                      "review": {"maxPreviewLines": 3}}}));
        let loaded = layers.load();
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
        assert_eq!(loaded.config.review.max_preview_lines, 3);
    }

    #[test]
    fn editor_cannot_loosen_the_guard_rails() {
        let mut layers = Layers::default();
        layers.set_initialization_options(Some(json!({
            "fs": {"allowOutsideWorkspace": true},
            "review": {"autoAccept": true, "maxPreviewLines": 4,
                       "agents": {"x": {"autoAccept": true}}},
        })));
        let loaded = layers.load();
        let keys: Vec<&str> = loaded.problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "fs.allowOutsideWorkspace",
                "review.autoAccept",
                "review.agents.x.autoAccept"
            ]
        );
        assert!(!loaded.config.fs.allow_outside_workspace);
        assert!(!loaded.config.review.auto_accept);
        assert_eq!(loaded.config.review.agents["x"].auto_accept, None);
        assert_eq!(
            loaded.config.review.max_preview_lines, 4,
            "the rest of the layer applies"
        );
    }

    /// Where agentls writes its chats, how much of the user's files goes to agents and what
    /// the watcher leaves out are the user's file's to say: from the editor they are refused,
    /// the rest of the layer applies.
    #[test]
    fn editor_cannot_say_where_chats_go_or_how_much_context_goes() {
        let (_dir, mut layers) = layers_with_file(
            "[context]\nmaxFileBytes = 1000\n[chat]\ndirectory = \"/mine\"\n\
             [watch]\nignore = [\"generated/\"]\n",
        );
        layers.set_initialization_options(Some(json!({
            "chat": {"directory": "/tmp/shared", "commentMarker": "ai:"},
            "context": {"maxFileBytes": 100000000},
            "watch": {"ignore": ["src/"]},
        })));
        let loaded = layers.load();
        let keys: Vec<&str> = loaded.problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["context", "watch", "chat.directory"]);
        assert_eq!(loaded.config.watch.ignore, ["generated/"]);
        assert_eq!(
            loaded.config.chat.directory.as_deref(),
            Some(Path::new("/mine"))
        );
        assert_eq!(loaded.config.context.max_file_bytes, 1000);
        assert_eq!(loaded.config.chat.comment_marker, "ai:");
    }

    /// serde reads a struct from an array too: no encoding gets past the guard rails.
    #[test]
    fn editor_layers_in_array_form_are_refused() {
        let (_dir, mut layers) = layers_with_file("[agents.mine]\ncommand = \"x\"\n");
        let evil = json!(["evil", {"evil": {"command": "sh"}}, [true], [true], [true]]);
        layers.set_initialization_options(Some(evil.clone()));
        layers.set_editor_settings(json!({"agentls": evil}));
        let loaded = layers.load();
        assert_eq!(loaded.problems.len(), 2, "{:?}", loaded.problems);
        assert_eq!(loaded.config.agents.keys().collect::<Vec<_>>(), ["mine"]);
        assert_eq!(loaded.config.default_agent, None);
        assert!(!loaded.config.fs.allow_outside_workspace);
        assert!(!loaded.config.review.auto_accept);
        for nested in [
            json!({"fs": [true]}),
            json!({"review": [true]}),
            json!({"review": {"agents": {"x": [true]}}}),
        ] {
            let mut layers = Layers::default();
            layers.set_initialization_options(Some(nested.clone()));
            let loaded = layers.load();
            assert!(!loaded.config.fs.allow_outside_workspace, "{nested}");
            assert!(!loaded.config.review.auto_accept, "{nested}");
            assert!(loaded.config.review.agents.is_empty(), "{nested}");
            assert_eq!(loaded.problems.len(), 1, "{nested}: {:?}", loaded.problems);
        }
    }

    /// The user's file auto-accepts everyone but `demo`; a workspace's `null` (or an array
    /// standing for the table) must not erase that `false` and let `demo`'s edits through
    /// without a review.
    #[test]
    fn editor_cannot_erase_a_per_agent_false_of_the_file() {
        let (_dir, mut layers) = layers_with_file(
            "[review]\nautoAccept = true\n[review.agents.demo]\nautoAccept = false\n",
        );
        let erasers = [
            json!({"review": {"agents": {"demo": {"autoAccept": null}}}}),
            json!({"review": {"agents": {"demo": [null]}}}),
            json!({"review": {"agents": {"demo": []}}}),
        ];
        for eraser in erasers {
            for from_settings in [false, true] {
                let mut layers = layers.clone();
                if from_settings {
                    layers.set_editor_settings(json!({"agentls": eraser.clone()}));
                } else {
                    layers.set_initialization_options(Some(eraser.clone()));
                }
                let loaded = layers.load();
                assert!(!loaded.config.review.auto_accepts("demo"), "{eraser}");
                assert!(loaded.config.review.auto_accepts("other"), "{eraser}");
                let keys: Vec<&str> = loaded.problems.iter().map(|p| p.key.as_str()).collect();
                assert_eq!(keys, ["review.agents.demo.autoAccept"], "{eraser}");
            }
        }
        // Tightening the others is still the editor's to decide.
        layers.set_initialization_options(Some(json!({"review": {"autoAccept": false}})));
        let loaded = layers.load();
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
        assert!(!loaded.config.review.auto_accepts("other"));
        assert!(!loaded.config.review.auto_accepts("demo"));
    }

    #[test]
    fn editor_cannot_turn_on_what_the_file_turned_off() {
        let (_dir, mut layers) = layers_with_file("[mcp]\nenabled = false\n");
        for on in [json!({"mcp": {"enabled": true}}), json!({"mcp": [true]})] {
            layers.set_initialization_options(Some(on.clone()));
            let loaded = layers.load();
            assert!(!loaded.config.mcp.enabled, "{on}");
            assert_eq!(loaded.problems[0].key, "mcp.enabled", "{on}");
        }
        // Without the file saying so, the editor decides.
        let mut layers = Layers::default();
        layers.set_initialization_options(Some(json!({"mcp": {"enabled": false}})));
        assert!(!layers.load().config.mcp.enabled);
    }

    #[test]
    fn editor_cannot_define_agents() {
        let mut layers = Layers::default();
        layers.set_initialization_options(Some(json!({"agents": {"evil": {"command": "sh"}}})));
        let loaded = layers.load();
        assert!(loaded.config.agents.is_empty());
        assert_eq!(loaded.problems[0].key, "agents");
    }

    #[test]
    fn a_bad_value_names_its_key_and_the_layer_is_left_out() {
        let (_dir, mut layers) = layers_with_file("[agents.a]\ncommand = \"x\"\n");
        layers.set_initialization_options(Some(json!({"fs": {"allowOutsideWorkspace": "yes"}})));
        let loaded = layers.load();
        assert_eq!(loaded.problems.len(), 1);
        assert_eq!(loaded.problems[0].key, "fs.allowOutsideWorkspace");
        assert!(!loaded.config.fs.allow_outside_workspace);
        assert_eq!(loaded.config.agents.len(), 1);
    }

    #[test]
    fn unknown_keys_and_bad_toml_are_reported() {
        let (_dir, layers) = layers_with_file("[agents.a]\ncommand = \"x\"\nargz = []\n");
        let loaded = layers.load();
        assert_eq!(loaded.problems[0].key, "agents.a.argz");
        assert!(loaded.problems[0].message.contains("argz"));
        let (_dir, layers) = layers_with_file("defaultAgent = ");
        assert!(layers.load().problems[0].message.contains("not valid TOML"));
    }

    #[test]
    fn mcp_is_on_unless_turned_off() {
        assert!(Layers::default().load().config.mcp.enabled);
        let mut layers = Layers::default();
        layers.set_initialization_options(Some(json!({"mcp": {"enabled": false}})));
        assert!(!layers.load().config.mcp.enabled);
    }

    #[test]
    fn the_demo_agent_is_always_there_and_the_default_only_when_alone() {
        let config = Config::default();
        let agents = config.effective_agents();
        assert_eq!(agents.keys().collect::<Vec<_>>(), vec![DEMO_AGENT]);
        assert_eq!(agents[DEMO_AGENT].args, vec!["demo-agent"]);
        assert_eq!(config.effective_default_agent(), DEMO_AGENT);
        let (_dir, layers) =
            layers_with_file("[agents.b]\ncommand = \"x\"\n[agents.a]\ncommand = \"y\"\n");
        let config = layers.load().config;
        assert!(config.effective_agents().contains_key(DEMO_AGENT));
        assert_eq!(config.effective_default_agent(), "a");
        let (_dir, layers) =
            layers_with_file("defaultAgent = \"demo\"\n[agents.a]\ncommand = \"y\"\n");
        let loaded = layers.load();
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
        assert_eq!(loaded.config.effective_default_agent(), DEMO_AGENT);
    }

    #[test]
    fn secrets_are_redacted_in_debug_output() {
        let spec = AgentSpec {
            command: "x".into(),
            args: vec![],
            env: [
                ("API_KEY".into(), "s3cret".into()),
                ("MODE".into(), "fast".into()),
            ]
            .into(),
            ..AgentSpec::default()
        };
        let shown = format!("{spec:?}");
        assert!(!shown.contains("s3cret") && shown.contains("fast"));
    }
}
