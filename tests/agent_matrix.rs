//! The real-agent edit matrix (issue 8): real ACP agents from npm and PyPI, run offline against the
//! mock LLM (`support::mock_llm`), make real edits through the real binary and the test LSP
//! client, and every cell checks the buffer, the disk, what the agent reported (its tool calls'
//! statuses, the turn's summary) and, above all, that the tool result the agent sent back to the
//! model is its SUCCESS text, with none of the failure texts its edit tool gives when agentls got
//! in its way ("could not find", "Failed to find expected lines", "modified since you last read
//! it", …).
//!
//! Agents are data ([`Recipe`]: how to start it, which wire its model speaks, the tool calls
//! that make it edit, the texts it sends back), as in agentls's own config. The scenarios, for
//! each agent: its edit tool on an open file, accepted; the same on a closed file; a two-hunk
//! change partly accepted (its whole-file write tool where the edit tool makes one change a
//! call); a rejected edit; a new file, removed again by undoing its turn; and, in its mode that edits without asking, changes to
//! two files shown after the fact, one undone there, the other kept and then undone with the
//! whole turn (`agentls.undoTurn`); a conversation of two messages in a chat document, sent as a
//! Helix user sends them, whose second request to the model must carry the first exchange; and
//! the editor's tools: the model calls `getDiagnostics` of the MCP server agentls offered the
//! session, and the tool result it gets back must hold the diagnostic the editor forwarded. An
//! open file's disk is checked before and after the test
//! client saves it: an agent writing through `fs/write_text_file` leaves it untouched until then.
//!
//! Built only with `--features real-peers` (scripts/test.sh turns it on); the agents come from
//! scripts/test-tools.sh (`AGENTLS_TEST_*`), and a missing one FAILS its tests. Its own harness
//! (libtest-mimic) runs each agent's scenarios in [`Group`]s: one agentls and one agent process
//! a group, each scenario in a session of its own (a new chat for the chats), with its own files
//! and a tag in every message that tells its requests to the model from the others'. A test is
//! `<agent>: <its scenarios>` (filter with `-- claude`); every group has its own HOME, workspace
//! and mock, each scenario a deadline of [`DEADLINE`]; the matrix is printed with each cell's
//! time at the end. `AGENTLS_TEST_WIRE=<dir>` copies each agent's stdin and stdout to
//! `<dir>/<agent>-<group>.{in,out}.ndjson`.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::json;
use support::agents::{agent_toml, capabilities_without_dialogs};
use support::mock_llm::{
    Anthropic, Gemini, LateScript, MockLlm, OpenAi, Request, Responses, ToolTurn,
};
use support::{Options, TestClient, file_uri, range};

/// How long one scenario may take, the agent's start included.
const DEADLINE: Duration = Duration::from_secs(150);

/// What the model says once its tools are done.
const DONE: &str = "Done: the change is made.";

/// Failure texts of the agents' edit tools (lower case): none may reach the model when the user
/// accepted. Each is what an agent says when its file is not what it proposed against.
const FAILURES: &[&str] = &[
    "could not find",                   // Gemini CLI replace, OpenCode edit
    "failed to find expected lines",    // codex apply_patch
    "verification failed",              // codex apply_patch
    "modified since you last read it",  // Qwen Code
    "0 occurrences",                    // Qwen Code
    "has not been read",                // Qwen Code, claude-agent-acp
    "changed since it was last read",   // claude-agent-acp
    "old_str not found",                // Mistral Vibe
    "string to replace not found",      // Mistral Vibe (legacy harness)
    "already exists",                   // Mistral Vibe (legacy harness)
    "no replacements were made",        // kimi-cli
    "not the change the user accepted", // agentls refusing a write
    "refused",                          // agentls refusing; a rejection
    "canceled by the user",             // Gemini CLI rejection
    "rejected permission",              // OpenCode rejection
];

// ---- The agents, as data ----

/// The wire format of an agent's model, and so the mock's script for it.
#[derive(Debug, Clone, Copy)]
enum Wire {
    /// `POST /v1/messages`.
    Messages,
    /// `POST /v1beta/models/<model>:streamGenerateContent`.
    GenerateContent,
    /// `POST /v1/chat/completions`.
    ChatCompletions,
    /// `POST /v1/responses`.
    Responses,
}

impl Wire {
    /// From now on the mock plays `turn` in this wire format.
    fn play(self, script: &LateScript, turn: ToolTurn) {
        match self {
            Self::Messages => script.set(Anthropic(turn)),
            Self::GenerateContent => script.set(Gemini::new(turn)),
            Self::ChatCompletions => script.set(OpenAi(turn)),
            Self::Responses => script.set(Responses(turn)),
        }
    }
}

/// What the model is to do, with the agent's own tools.
#[derive(Debug)]
enum Task<'a> {
    /// Replace the line `old` with `new` in the existing file `path` (the edit tool).
    Replace {
        path: &'a Path,
        old: &'a str,
        new: &'a str,
    },
    /// Two changes at once in the existing file `path`: it is to hold `text`, which is its text
    /// with each `(old line, new line)` of `changes` replaced.
    TwoChanges {
        path: &'a Path,
        text: &'a str,
        changes: [(&'a str, &'a str); 2],
    },
    /// Create `path` with `text`.
    Create { path: &'a Path, text: &'a str },
}

/// Where an agent runs, for its launcher.
struct Launch<'a> {
    /// The installed paths, by `AGENTLS_TEST_*` variable.
    installed: &'a BTreeMap<&'static str, String>,
    /// Its own HOME (empty), for its config files.
    home: &'a Path,
    /// The mock LLM, `http://127.0.0.1:<port>`.
    mock: &'a str,
    /// Whether it runs in its mode that edits without asking.
    auto: bool,
    /// Whether it is to use the MCP servers agentls offers its sessions (the editor tools).
    tools: bool,
}

impl Launch<'_> {
    fn installed(&self, var: &str) -> String {
        self.installed[var].clone()
    }

    fn home(&self, relative: &str) -> String {
        self.home.join(relative).display().to_string()
    }

    /// Writes `text` to `relative` in its HOME.
    fn write(&self, relative: &str, text: &str) {
        let path = self.home.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// How agentls is to start an agent.
#[derive(Default)]
struct Launched {
    /// Program and arguments.
    argv: Vec<String>,
    /// Environment, over the HOME and XDG dirs every agent gets.
    env: Vec<(String, String)>,
    /// Files to write into the workspace before it starts (relative path, text).
    workspace: Vec<(&'static str, String)>,
}

/// Strings to owned pairs, for [`Launched::env`].
fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The texts an agent's tools send the model.
struct Told {
    /// Its edit tool succeeded.
    replaced: &'static str,
    /// Its whole-file write (or multi-change edit) over an existing file succeeded.
    rewritten: &'static str,
    /// It created a file.
    created: &'static str,
    /// The user rejected the edit; `None`: it tells the model nothing (it ends the turn).
    rejected: Option<&'static str>,
}

/// One agent of the matrix.
struct Recipe {
    /// Its name in agentls (`[agents.<name>]`), in the test names, and in agentls's messages.
    name: &'static str,
    /// What is installed, at which version.
    package: &'static str,
    /// The `AGENTLS_TEST_*` variables it needs (paths that scripts/test-tools.sh exports).
    needs: &'static [&'static str],
    /// Its model's wire.
    wire: Wire,
    /// Its entry in agentls's table of known agents (`use = "<id>"`): the mode that asks
    /// before editing, the env the editor tools need, its own files. The matrix starts it
    /// from where the test installed it, so only `command` and `args` are its own.
    known: &'static str,
    /// The lines that instead select its mode that edits without asking (`None`: it has none).
    /// Its launch sees [`Launch::auto`] too, for agents whose config file says it.
    auto: Option<&'static str>,
    /// How to start it.
    launch: fn(&Launch) -> Launched,
    /// The tool calls that make it do a task.
    script: fn(&Task) -> ToolTurn,
    /// What its tools tell the model.
    told: Told,
    /// How its turn ends after a rejected edit.
    stop_after_reject: &'static str,
    /// Whether a later agentls goes on in its sessions (`session/load` of them works), so it
    /// is not told a resumed chat's transcript; `None`: either may happen.
    resumes: Option<bool>,
    /// Whether its model is offered the tools of the MCP servers a session is given as tools
    /// of their own (the editor tools scenario); `false`: it offers them only through a tool
    /// search of its own, which the mock does not script.
    offers_mcp_tools: bool,
}

/// A path as a JSON string argument.
fn p(path: &Path) -> String {
    path.display().to_string()
}

fn recipes() -> Vec<Recipe> {
    vec![
        Recipe {
            name: "claude",
            package: "@agentclientprotocol/claude-agent-acp 0.101.0",
            needs: &["AGENTLS_TEST_NODE", "AGENTLS_TEST_CLAUDE_ACP"],
            wire: Wire::Messages,
            // It starts in `auto`, which edits without asking.
            known: "claude-acp",
            auto: Some("mode = \"acceptEdits\"\n"),
            launch: |l| Launched {
                argv: vec![
                    l.installed("AGENTLS_TEST_NODE"),
                    l.installed("AGENTLS_TEST_CLAUDE_ACP"),
                ],
                env: env(&[
                    ("ANTHROPIC_BASE_URL", l.mock),
                    ("ANTHROPIC_API_KEY", "dummy"),
                    ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
                    ("DISABLE_AUTOUPDATER", "1"),
                    ("DISABLE_TELEMETRY", "1"),
                    // As root it refuses to run without this.
                    ("IS_SANDBOX", "1"),
                    // (ENABLE_TOOL_SEARCH=false, for the editor tools, is its table entry's.)
                ]),
                ..Launched::default()
            },
            // Edit and Write of an existing file need a Read in the session first. Write's
            // permission diff says `oldText: null` even for an existing file.
            script: |task| match task {
                Task::Replace { path, old, new } => ToolTurn::say(DONE)
                    .then("Read", json!({"file_path": p(path)}))
                    .then(
                        "Edit",
                        json!({"file_path": p(path), "old_string": old, "new_string": new,
                               "replace_all": false}),
                    ),
                Task::TwoChanges { path, text, .. } => ToolTurn::say(DONE)
                    .then("Read", json!({"file_path": p(path)}))
                    .then("Write", json!({"file_path": p(path), "content": text})),
                Task::Create { path, text } => ToolTurn::say(DONE)
                    .then("Write", json!({"file_path": p(path), "content": text})),
            },
            told: Told {
                replaced: "has been updated successfully",
                rewritten: "has been updated successfully",
                created: "File created successfully",
                rejected: Some("User refused permission"),
            },
            resumes: Some(true),
            offers_mcp_tools: true,
            stop_after_reject: "end_turn",
        },
        Recipe {
            name: "gemini",
            package: "@google/gemini-cli 0.61.0",
            needs: &["AGENTLS_TEST_NODE", "AGENTLS_TEST_GEMINI"],
            wire: Wire::GenerateContent,
            // Its initial mode, `default`, asks.
            known: "gemini",
            auto: Some("mode = \"autoEdit\"\n"),
            launch: |l| {
                l.write(
                    ".gemini/settings.json",
                    r#"{"privacy": {"usageStatisticsEnabled": false}}"#,
                );
                Launched {
                    argv: vec![
                        l.installed("AGENTLS_TEST_NODE"),
                        l.installed("AGENTLS_TEST_GEMINI"),
                        "--acp".into(),
                        "-m".into(),
                        "gemini-2.5-flash".into(),
                    ],
                    env: env(&[
                        ("GEMINI_API_KEY", "dummy"),
                        ("GOOGLE_GEMINI_BASE_URL", l.mock),
                        ("GEMINI_CLI_NO_RELAUNCH", "true"),
                        // Its modes that edit without asking, and MCP servers, need a trusted
                        // folder.
                        (
                            "GEMINI_CLI_TRUST_WORKSPACE",
                            if l.auto || l.tools { "true" } else { "false" },
                        ),
                    ]),
                    ..Launched::default()
                }
            },
            // `replace` makes one change a call; the two-hunk change is a `write_file`.
            script: |task| match task {
                Task::Replace { path, old, new } => ToolTurn::say(DONE).then(
                    "replace",
                    json!({"file_path": p(path), "instruction": "Edit the line.",
                           "old_string": old, "new_string": new}),
                ),
                Task::TwoChanges { path, text, .. } | Task::Create { path, text } => {
                    ToolTurn::say(DONE)
                        .then("write_file", json!({"file_path": p(path), "content": text}))
                }
            },
            told: Told {
                replaced: "Successfully modified file",
                rewritten: "Successfully overwrote file",
                // "overwrote": agentls serves a missing file as empty (its read of one that is
                // missing must not fail, or Gemini CLI 0.61 cannot create it).
                created: "Successfully overwrote file",
                rejected: Some("was canceled by the user"),
            },
            // Gemini CLI 0.61 names a session's file by the minute it began, and a load in
            // that minute starts the file anew: the conversation is gone, and agentls tells the
            // new session the transcript. A load in a later minute goes on in the session.
            resumes: None,
            offers_mcp_tools: true,
            stop_after_reject: "end_turn",
        },
        Recipe {
            name: "opencode",
            package: "opencode-ai 1.18.33",
            needs: &["AGENTLS_TEST_OPENCODE"],
            wire: Wire::ChatCompletions,
            // Its `build` mode asks when the project config says `"edit": "ask"`.
            known: "opencode",
            auto: Some(""),
            launch: |l| {
                let config = json!({
                    "$schema": "https://opencode.ai/config.json",
                    "provider": {"mock": {
                        "npm": "@ai-sdk/openai-compatible", "name": "Mock",
                        "options": {"baseURL": format!("{}/v1", l.mock), "apiKey": "dummy"},
                        "models": {"mock-model": {"name": "Mock model", "tool_call": true}}}},
                    "model": "mock/mock-model",
                    "small_model": "mock/mock-model",
                    "permission": {"edit": if l.auto { "allow" } else { "ask" }},
                    "autoupdate": false,
                    "share": "disabled"
                });
                Launched {
                    argv: vec![l.installed("AGENTLS_TEST_OPENCODE"), "acp".into()],
                    env: env(&[
                        ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
                        ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
                        ("OPENCODE_DISABLE_SHARE", "1"),
                        ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1"),
                    ]),
                    workspace: vec![("opencode.json", config.to_string())],
                }
            },
            // `edit` needs a `read` of the file first; `write` makes the two-hunk change.
            script: |task| match task {
                Task::Replace { path, old, new } => ToolTurn::say(DONE)
                    .then("read", json!({"filePath": p(path)}))
                    .then(
                        "edit",
                        json!({"filePath": p(path), "oldString": old, "newString": new}),
                    ),
                Task::TwoChanges { path, text, .. } => ToolTurn::say(DONE)
                    .then("read", json!({"filePath": p(path)}))
                    .then("write", json!({"filePath": p(path), "content": text})),
                Task::Create { path, text } => {
                    ToolTurn::say(DONE).then("write", json!({"filePath": p(path), "content": text}))
                }
            },
            told: Told {
                replaced: "Edit applied successfully.",
                rewritten: "Wrote file successfully.",
                created: "Wrote file successfully.",
                // A rejection ends its loop: the model hears nothing more.
                rejected: None,
            },
            resumes: Some(true),
            offers_mcp_tools: true,
            stop_after_reject: "end_turn",
        },
        Recipe {
            name: "codex",
            package: "@zed-industries/codex-acp 0.16.0 (model gpt-5.3-codex)",
            needs: &["AGENTLS_TEST_CODEX_ACP", "AGENTLS_TEST_BWRAP"],
            wire: Wire::Responses,
            // Its initial mode, `read-only`, asks before editing.
            known: "codex-acp",
            auto: Some("mode = \"auto\"\n"),
            launch: |l| {
                let codex_home = l.home(".codex");
                // gpt-5-codex gets no apply_patch tool; gpt-5.3-codex does.
                l.write(
                    ".codex/config.toml",
                    &format!(
                        "model = \"gpt-5.3-codex\"\nmodel_provider = \"mock\"\n\
                         approval_policy = \"on-request\"\n\
                         [model_providers.mock]\nname = \"mock\"\nbase_url = \"{}/v1\"\n\
                         env_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n\
                         request_max_retries = 0\nstream_max_retries = 0\n\
                         [analytics]\nenabled = false\n\
                         [notice]\nhide_full_access_warning = true\n",
                        l.mock
                    ),
                );
                // Its patch tool runs under bubblewrap, which it looks for on PATH.
                let bwrap = l.installed("AGENTLS_TEST_BWRAP");
                let path = format!(
                    "{}:{}",
                    Path::new(&bwrap).parent().unwrap().display(),
                    std::env::var("PATH").unwrap_or_default()
                );
                Launched {
                    argv: vec![l.installed("AGENTLS_TEST_CODEX_ACP")],
                    env: env(&[
                        ("CODEX_HOME", &codex_home),
                        ("OPENAI_API_KEY", "dummy"),
                        ("PATH", &path),
                    ]),
                    ..Launched::default()
                }
            },
            // `apply_patch` (a free-form tool) makes several changes a call: the two-hunk change
            // is one patch with two hunks, which it proposes as two fragment diffs.
            script: |task| {
                let patch = match task {
                    Task::Replace { path, old, new } => format!(
                        "*** Begin Patch\n*** Update File: {}\n@@\n-{old}\n+{new}\n*** End Patch\n",
                        p(path)
                    ),
                    Task::TwoChanges { path, changes, .. } => {
                        let hunks: String = changes
                            .iter()
                            .map(|(old, new)| format!("@@\n-{old}\n+{new}\n"))
                            .collect();
                        format!(
                            "*** Begin Patch\n*** Update File: {}\n{hunks}*** End Patch\n",
                            p(path)
                        )
                    }
                    Task::Create { path, text } => {
                        let lines: String = text.lines().map(|l| format!("+{l}\n")).collect();
                        format!(
                            "*** Begin Patch\n*** Add File: {}\n{lines}*** End Patch\n",
                            p(path)
                        )
                    }
                };
                ToolTurn::say(DONE).then_freeform("apply_patch", &patch)
            },
            told: Told {
                replaced: "Success. Updated the following files:",
                rewritten: "Success. Updated the following files:",
                created: "Success. Updated the following files:",
                // Its reject option is "abort": the turn ends cancelled, the model hears nothing.
                rejected: None,
            },
            resumes: Some(true),
            offers_mcp_tools: true,
            stop_after_reject: "cancelled",
        },
        Recipe {
            name: "qwen",
            package: "@qwen-code/qwen-code 0.24.4 (Node.js 22.23.5)",
            needs: &["AGENTLS_TEST_NODE22", "AGENTLS_TEST_QWEN"],
            wire: Wire::ChatCompletions,
            // It starts in `auto`, which edits without asking.
            known: "qwen",
            auto: Some("mode = \"auto-edit\"\n"),
            launch: |l| {
                let node = l.installed("AGENTLS_TEST_NODE22");
                let path = format!(
                    "{}:{}",
                    Path::new(&node).parent().unwrap().display(),
                    std::env::var("PATH").unwrap_or_default()
                );
                Launched {
                    argv: vec![
                        node,
                        l.installed("AGENTLS_TEST_QWEN"),
                        "--acp".into(),
                        "--auth-type".into(),
                        "openai".into(),
                        "-m".into(),
                        "mock-model".into(),
                    ],
                    env: env(&[
                        ("OPENAI_API_KEY", "dummy"),
                        ("OPENAI_BASE_URL", &format!("{}/v1", l.mock)),
                        ("OPENAI_MODEL", "mock-model"),
                        ("QWEN_CODE_NO_RELAUNCH", "true"),
                        ("QWEN_TELEMETRY_ENABLED", "false"),
                        ("PATH", &path),
                    ]),
                    ..Launched::default()
                }
            },
            // `edit` and `write_file` of an existing file need a `read_file` first.
            script: |task| match task {
                Task::Replace { path, old, new } => ToolTurn::say(DONE)
                    .then("read_file", json!({"file_path": p(path)}))
                    .then(
                        "edit",
                        json!({"file_path": p(path), "old_string": old, "new_string": new}),
                    ),
                Task::TwoChanges { path, text, .. } => ToolTurn::say(DONE)
                    .then("read_file", json!({"file_path": p(path)}))
                    .then("write_file", json!({"file_path": p(path), "content": text})),
                Task::Create { path, text } => ToolTurn::say(DONE)
                    .then("write_file", json!({"file_path": p(path), "content": text})),
            },
            told: Told {
                replaced: "has been updated",
                rewritten: "Successfully overwrote file",
                created: "Successfully created and wrote to new file",
                // A rejection ends its loop: the model hears nothing more.
                rejected: None,
            },
            resumes: Some(true),
            // It connects and lists agentls's tools, but its model reaches MCP tools only
            // through its `tool_search` and `tool_call`, announced after startup.
            offers_mcp_tools: false,
            stop_after_reject: "end_turn",
        },
        Recipe {
            name: "fast-agent",
            package: "fast-agent-mcp 0.10.48 (PyPI)",
            needs: &["AGENTLS_TEST_FAST_AGENT"],
            wire: Wire::ChatCompletions,
            // One mode, `agent`, which asks for every tool, reads included (answered "Allow").
            known: "fast-agent",
            auto: Some("ownFiles = [\".fast-agent\"]\n"),
            launch: |l| Launched {
                argv: [
                    l.installed("AGENTLS_TEST_FAST_AGENT"),
                    "--model".into(),
                    "generic.mock-model".into(),
                ]
                .into_iter()
                .chain(l.auto.then(|| "--no-permissions".into()))
                .collect(),
                env: env(&[
                    ("GENERIC_BASE_URL", &format!("{}/v1", l.mock)),
                    ("GENERIC_API_KEY", "dummy"),
                ]),
                ..Launched::default()
            },
            // With a client that serves files it offers only `read_text_file` and
            // `write_text_file`: it has no edit tool, so an edit is a read, then a whole-file
            // write of the changed text (as the model would write it).
            script: |task| match task {
                Task::Replace { path, old, new } => {
                    let text = std::fs::read_to_string(path).unwrap().replace(old, new);
                    ToolTurn::say(DONE)
                        .then("read_text_file", json!({"path": p(path)}))
                        .then("write_text_file", json!({"path": p(path), "content": text}))
                }
                Task::TwoChanges { path, text, .. } => ToolTurn::say(DONE)
                    .then("read_text_file", json!({"path": p(path)}))
                    .then("write_text_file", json!({"path": p(path), "content": text})),
                Task::Create { path, text } => ToolTurn::say(DONE)
                    .then("write_text_file", json!({"path": p(path), "content": text})),
            },
            told: Told {
                replaced: "Successfully wrote",
                rewritten: "Successfully wrote",
                created: "Successfully wrote",
                rejected: Some("The user has declined permission to use this tool"),
            },
            resumes: Some(true),
            offers_mcp_tools: true,
            // A second `session/new` offered the editor tools in one process fails ("Runtime
            // MCP server 'agentls' is already registered with different settings": each
            // session's tools have a token of their own): agentls opens it without them.
            stop_after_reject: "end_turn",
        },
        Recipe {
            name: "vibe",
            package: "mistral-vibe 2.26.1 (PyPI)",
            needs: &["AGENTLS_TEST_VIBE"],
            wire: Wire::ChatCompletions,
            // It starts in `accept-edits`, which edits without asking.
            known: "vibe",
            auto: Some("mode = \"accept-edits\"\n"),
            launch: |l| {
                let vibe_home = l.home(".vibe");
                l.write(
                    ".vibe/config.toml",
                    &format!(
                        "active_model = \"mock\"\nenable_telemetry = false\n\
                         enable_update_checks = false\n\n\
                         [[providers]]\nname = \"mock\"\napi_base = \"{}/v1\"\n\
                         api_key_env_var = \"MOCK_API_KEY\"\nbackend = \"generic\"\n\n\
                         [[models]]\nname = \"mock-model\"\nprovider = \"mock\"\nalias = \"mock\"\n",
                        l.mock
                    ),
                );
                Launched {
                    argv: vec![l.installed("AGENTLS_TEST_VIBE")],
                    env: env(&[("VIBE_HOME", &vibe_home), ("MOCK_API_KEY", "dummy")]),
                    ..Launched::default()
                }
            },
            // Its default (Rust) harness reads and writes the disk itself; `edit` makes one
            // change a call, `write_file` the two-hunk change.
            script: |task| match task {
                Task::Replace { path, old, new } => ToolTurn::say(DONE)
                    .then("read_file", json!({"path": p(path)}))
                    .then(
                        "edit",
                        json!({"file_path": p(path), "old_string": old, "new_string": new}),
                    ),
                Task::TwoChanges { path, text, .. } => ToolTurn::say(DONE)
                    .then("read_file", json!({"path": p(path)}))
                    .then("write_file", json!({"path": p(path), "content": text})),
                Task::Create { path, text } => ToolTurn::say(DONE)
                    .then("write_file", json!({"path": p(path), "content": text})),
            },
            told: Told {
                replaced: "\"lines_changed\":1",
                rewritten: "\"file_existed\":true",
                created: "\"file_existed\":false",
                rejected: Some("Tool execution denied by approval callback"),
            },
            resumes: Some(true),
            // It takes MCP servers over stdio only (agentls's bridge: it lists the tools), and
            // its model reaches them through its `search_tool_functions` only.
            offers_mcp_tools: false,
            stop_after_reject: "end_turn",
        },
        Recipe {
            name: "kimi",
            package: "kimi-cli 1.52.0 (PyPI)",
            needs: &["AGENTLS_TEST_KIMI_PYTHON"],
            wire: Wire::ChatCompletions,
            // One mode, `default`, which asks before every edit or write.
            known: "kimi",
            auto: None,
            launch: |l| {
                let share = l.home(".kimi");
                l.write(
                    ".kimi/config.toml",
                    &format!(
                        "default_model = \"mock\"\ntelemetry = false\n\n\
                         [providers.mock]\ntype = \"openai_legacy\"\nbase_url = \"{}/v1\"\n\
                         api_key = \"dummy\"\n\n\
                         [models.mock]\nprovider = \"mock\"\nmodel = \"mock-model\"\n\
                         max_context_size = 100000\n",
                        l.mock
                    ),
                );
                // Without a login token its session/new fails "Authentication required"; a
                // far-future fake one is never refreshed (the mock provider has no OAuth).
                l.write(
                    ".kimi/credentials/kimi-code.json",
                    &json!({"access_token": "dummy", "refresh_token": "dummy",
                            "expires_at": 4102444800.0, "scope": "", "token_type": "Bearer",
                            "expires_in": 315360000.0})
                    .to_string(),
                );
                // Never its `kimi` entry point (bare, it downloads and runs an installer).
                Launched {
                    argv: vec![
                        l.installed("AGENTLS_TEST_KIMI_PYTHON"),
                        "-m".into(),
                        "kimi_cli.cli".into(),
                        "acp".into(),
                    ],
                    env: env(&[("KIMI_SHARE_DIR", &share)]),
                    ..Launched::default()
                }
            },
            // `StrReplaceFile` takes one edit or a list: the two-hunk change is one call.
            script: |task| match task {
                Task::Replace { path, old, new } => ToolTurn::say(DONE)
                    .then("ReadFile", json!({"path": p(path)}))
                    .then(
                        "StrReplaceFile",
                        json!({"path": p(path), "edit": {"old": old, "new": new}}),
                    ),
                Task::TwoChanges { path, changes, .. } => {
                    let edits: Vec<_> = changes
                        .iter()
                        .map(|(old, new)| json!({"old": old, "new": new}))
                        .collect();
                    ToolTurn::say(DONE)
                        .then("ReadFile", json!({"path": p(path)}))
                        .then("StrReplaceFile", json!({"path": p(path), "edit": edits}))
                }
                Task::Create { path, text } => {
                    ToolTurn::say(DONE).then("WriteFile", json!({"path": p(path), "content": text}))
                }
            },
            told: Told {
                replaced: "File successfully edited",
                rewritten: "File successfully edited",
                created: "File successfully overwritten",
                // A rejection ends its loop: the model hears nothing more.
                rejected: None,
            },
            resumes: Some(true),
            offers_mcp_tools: true,
            stop_after_reject: "end_turn",
        },
    ]
}

// ---- The scenarios ----

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Scenario {
    OpenFileAccepted,
    ClosedFileAccepted,
    PartlyAccepted,
    Rejected,
    NewFile,
    EditsWithoutAsking,
    Conversation,
    Resumed,
    EditorTools,
}

/// The editor the test client plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Shape {
    /// Helix-like: code actions only, no dialogs.
    CodeActions,
    /// Neovim-like: dialogs (`window/showMessageRequest`, answered with the first action),
    /// `showDocument`, progress; reviews still through code actions.
    Dialogs,
}

/// Scenarios that share one agentls and one agent process, one after the other, each in a
/// session of its own, as a user's sessions share their agent: the agent starts once a group
/// (and again after the restart of [`Scenario::Resumed`], which comes last), not once a
/// scenario, and starting is most of what a scenario costs.
struct Group {
    /// Its name in the test's name and in the wire copies.
    slug: &'static str,
    scenarios: &'static [Scenario],
    shape: Shape,
}

/// The groups each agent runs, skipping the scenarios it has no way to do.
const GROUPS: [Group; 4] = [
    Group {
        slug: "asking",
        scenarios: &[
            Scenario::OpenFileAccepted,
            Scenario::ClosedFileAccepted,
            Scenario::PartlyAccepted,
            Scenario::Rejected,
            Scenario::NewFile,
            Scenario::Conversation,
            Scenario::Resumed,
        ],
        shape: Shape::CodeActions,
    },
    // Its own agentls config (the agent's mode that edits without asking).
    Group {
        slug: "auto",
        scenarios: &[Scenario::EditsWithoutAsking],
        shape: Shape::CodeActions,
    },
    // Its own launch (an agent may need its workspace trusted to take MCP servers).
    Group {
        slug: "tools",
        scenarios: &[Scenario::EditorTools],
        shape: Shape::CodeActions,
    },
    Group {
        slug: "dialogs",
        scenarios: &[Scenario::OpenFileAccepted, Scenario::PartlyAccepted],
        shape: Shape::Dialogs,
    },
];

impl Scenario {
    fn title(self) -> &'static str {
        match self {
            Self::OpenFileAccepted => "edit tool, open file, accepted",
            Self::ClosedFileAccepted => "edit tool, closed file, accepted",
            Self::PartlyAccepted => "two hunks, one accepted, one rejected",
            Self::Rejected => "edit tool, rejected",
            Self::NewFile => "new file, accepted, its turn undone",
            Self::EditsWithoutAsking => "auto mode, two open files, undone after the fact",
            Self::Conversation => "two messages in a chat document",
            Self::Resumed => "a chat opened again after a restart",
            Self::EditorTools => "editor tools: the model calls getDiagnostics",
        }
    }

    /// The column of the printed matrix.
    fn column(self) -> &'static str {
        match self {
            Self::OpenFileAccepted => "open edit",
            Self::ClosedFileAccepted => "closed edit",
            Self::PartlyAccepted => "partial",
            Self::Rejected => "reject",
            Self::NewFile => "new file",
            Self::EditsWithoutAsking => "auto mode",
            Self::Conversation => "chat",
            Self::Resumed => "resumed",
            Self::EditorTools => "editor tools",
        }
    }

    /// The file it edits in the workspace.
    fn file_name(self) -> String {
        format!("{}.txt", self.slug())
    }

    /// What every message of the scenario carries, so that its requests to the model are told
    /// from the run's other scenarios'.
    fn tag(self) -> String {
        format!("(matrix {})", self.slug())
    }

    fn slug(self) -> &'static str {
        match self {
            Self::OpenFileAccepted => "open",
            Self::ClosedFileAccepted => "closed",
            Self::PartlyAccepted => "partial",
            Self::Rejected => "reject",
            Self::NewFile => "new",
            Self::EditsWithoutAsking => "auto",
            Self::Conversation => "chat",
            Self::Resumed => "resumed",
            Self::EditorTools => "tools",
        }
    }
}

const NOTES: &str = "first line\nsecond line\nthird line\n";
/// The conversation of the chat scenario: two messages, two answers.
const ASKED: [&str; 2] = ["What is two plus two?", "And three more?"];
const ANSWERED: [&str; 2] = ["Two plus two is four.", "Four and three are seven."];
const OLD_LINE: &str = "second line";
const NEW_LINE: &str = "second line, edited by the model";
const TODOS: &str = "// TODO a\nx\nx\nx\nx\nx\nx\n// TODO b\n";
const CREATED: &str = "created by the model\nsecond line\n";
/// The diagnostic the editor forwards for the model to read through agentls's MCP server.
const DIAGNOSED: &str = "mock-analyzer: `second` is never used";

/// One agent's run of a [`Group`]: agentls with the agent configured, its mock LLM, its own
/// HOME; its scenarios one after the other, each in a session of its own.
struct Run<'r> {
    recipe: &'r Recipe,
    client: TestClient,
    mock: MockLlm,
    script: LateScript,
    /// agentls's config, for a restart.
    toml: String,
    shape: Shape,
    /// Clients stopped by a restart, kept for their homes (the chat documents live there).
    retired: Vec<TestClient>,
    home: tempfile::TempDir,
    /// The scenario under way.
    scenario: Scenario,
    /// The `workspace/applyEdit`s the client had been sent when the scenario began.
    edits_applied: usize,
}

impl<'r> Run<'r> {
    /// Starts agentls (not the agent yet) with `recipe` as its default agent, configured as
    /// `group` needs.
    async fn start(recipe: &'r Recipe, group: &Group) -> Self {
        let installed = installed(recipe);
        let home = tempfile::tempdir().unwrap();
        let script = LateScript::default();
        let mock = MockLlm::start(script.clone()).await;
        let url = mock.url();
        let auto = group.scenarios.contains(&Scenario::EditsWithoutAsking);
        let launch = Launch {
            installed: &installed,
            home: home.path(),
            mock: &url,
            auto,
            tools: group.scenarios.contains(&Scenario::EditorTools),
        };
        let launched = (recipe.launch)(&launch);
        let mut all_env = env(&[
            ("HOME", &launch.home("")),
            ("XDG_CONFIG_HOME", &launch.home(".config")),
            ("XDG_DATA_HOME", &launch.home(".local/share")),
            ("XDG_STATE_HOME", &launch.home(".local/state")),
            ("XDG_CACHE_HOME", &launch.home(".cache")),
        ]);
        all_env.extend(launched.env);
        let env_refs: Vec<(&str, &str)> = all_env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let argv_refs: Vec<&str> = launched.argv.iter().map(String::as_str).collect();
        let wire_name = format!("{}-{}", recipe.name, group.slug);
        let table = format!(
            "use = {:?}\n{}",
            recipe.known,
            recipe.auto.filter(|_| auto).unwrap_or_default()
        );
        let toml = agent_toml(recipe.name, &wire_name, &argv_refs, &env_refs, &table);
        let shape = group.shape;
        let client = agentls(&toml, shape, None, &home.path().join("agentls-state")).await;
        for (relative, text) in &launched.workspace {
            std::fs::write(client.workspace.join(relative), text).unwrap();
        }
        Self {
            recipe,
            client,
            mock,
            script,
            toml,
            shape,
            retired: Vec::new(),
            home,
            scenario: group.scenarios[0],
            edits_applied: 0,
        }
    }

    /// `scenario` begins: what the client was told so far is dropped (a turn of the scenario
    /// before may still be logging its end), and the model's requests that count are those
    /// carrying its [`Scenario::tag`].
    fn begin(&mut self, scenario: Scenario) {
        self.scenario = scenario;
        self.client.forget_received();
        self.edits_applied = self.client.count(Some("workspace/applyEdit"));
    }

    /// `text`, tagged with the scenario.
    fn tagged(&self, text: &str) -> String {
        format!("{text} {}", self.scenario.tag())
    }

    /// `agentls.prompt` with `text`, tagged.
    async fn prompt(&self, text: &str) {
        self.client.prompt(&self.tagged(text)).await;
    }

    /// The scenario's requests to the model: those that carry its tag (the run's other
    /// sessions, and an agent's requests of its own, such as a title, do not).
    fn requests(&self) -> Vec<Request> {
        let tag = self.scenario.tag();
        let mut requests = self.mock.requests();
        requests.retain(|r| String::from_utf8_lossy(&r.body).contains(&tag));
        requests
    }

    /// What the agent told the model about its tools in the scenario's requests.
    fn tool_results(&self) -> Vec<String> {
        self.mock.tool_results_of(self.requests())
    }

    /// Stops agentls and starts it again in the same workspace, as after an editor restart.
    async fn restart(&mut self) {
        assert!(self.client.stop().await.success());
        let workspace = Some(self.client.workspace.clone());
        let state = self.home.path().join("agentls-state");
        let next = agentls(&self.toml, self.shape, workspace, &state).await;
        self.retired.push(std::mem::replace(&mut self.client, next));
    }

    /// The whole turn undone (`agentls.undoTurn`, its review accepted): the closed file it
    /// created at `path` goes.
    async fn undo_turn_removes(&self, path: &Path) {
        let told = self
            .client
            .execute("agentls.undoTurn", serde_json::Value::Null)
            .await
            .expect("agentls.undoTurn");
        let told = told.as_str().unwrap_or_default();
        assert!(
            told.contains("1 file to review (hello.txt)") && told.contains("removes it"),
            "{told}: {}",
            self.client.server_state().await
        );
        let state = self.client.server_state().await;
        let undo = state["reviews"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["kind"] == "turnUndo"))
            .unwrap_or_else(|| panic!("no undo review: {state}"));
        self.client
            .execute("agentls.accept", json!({"review": undo["id"]}))
            .await
            .expect("agentls.accept");
        support::eventually(|| !path.exists())
            .await
            .expect("the file the turn created is removed");
    }

    /// The model will carry out `task`.
    fn model_does(&self, task: &Task) {
        self.model_does_all(std::slice::from_ref(task));
    }

    /// The model will carry out `tasks`, one after the other, in one turn.
    fn model_does_all(&self, tasks: &[Task]) {
        let mut turns = tasks.iter().map(|task| (self.recipe.script)(task));
        let mut turn = turns.next().expect("a task");
        for next in turns {
            turn.calls.extend(next.calls);
        }
        self.recipe.wire.play(&self.script, turn);
    }

    /// Two messages in a chat document, as a Helix user sends them (the code action, then the
    /// command alone): both answers stream into the chat, and the model heard the first
    /// exchange with the second message (the agent keeps the conversation).
    async fn converse(&self) {
        let (_, uri) = self.open_chat().await;
        self.say_in_chat(&uri, 0, Send::CodeAction).await;
        self.say_in_chat(&uri, 1, Send::Command).await;
        self.the_model_heard_the_first_exchange();
        eprintln!(
            "matrix chat: {}: {:?}",
            self.recipe.name,
            self.client.document(&uri).text
        );
    }

    /// One message in a chat, agentls restarted, the chat opened again, a second message:
    /// the model heard the first exchange with it, through the agent's own session
    /// (`session/load`) or, where the agent cannot load it, the transcript agentls told.
    /// Returns the seconds from opening the chat again to the second answer.
    async fn resume(&mut self) -> f64 {
        let (path, uri) = self.open_chat().await;
        self.say_in_chat(&uri, 0, Send::CodeAction).await;
        self.client.save(&uri).await;
        self.restart().await;
        let began = Instant::now();
        let text = std::fs::read_to_string(&path).unwrap();
        let uri = self.client.open_unsaved(&path, "markdown", &text).await;
        self.say_in_chat(&uri, 1, Send::CodeAction).await;
        let seconds = began.elapsed().as_secs_f64();
        self.the_model_heard_the_first_exchange();
        let told = self
            .requests()
            .iter()
            .any(|r| String::from_utf8_lossy(&r.body).contains("goes on from an earlier session"));
        let how = if told {
            "told the transcript"
        } else {
            "loaded its session"
        };
        eprintln!("matrix resume: {}: {how}", self.recipe.name);
        assert!(
            self.recipe.resumes.is_none_or(|resumes| resumes != told),
            "{}: {how}; the model was sent:\n{}",
            self.recipe.name,
            self.mock.summary()
        );
        seconds
    }

    /// Opens a new chat with the agent in the editor: its path and URI.
    async fn open_chat(&self) -> (std::path::PathBuf, String) {
        let opened = self
            .client
            .execute(
                "agentls.openChat",
                json!({"agent": self.recipe.name, "new": true}),
            )
            .await
            .expect("agentls.openChat");
        let path = std::path::PathBuf::from(opened["path"].as_str().unwrap());
        let text = std::fs::read_to_string(&path).unwrap();
        let uri = self.client.open_unsaved(&path, "markdown", &text).await;
        (path, uri)
    }

    /// The user writes message `turn` of [`ASKED`] at the end of the chat at `uri` and sends
    /// it `how`; waits until its answer and the turn's end are in the chat.
    async fn say_in_chat(&self, uri: &str, turn: usize, how: Send) {
        let (client, name) = (&self.client, self.recipe.name);
        let (asked, answered) = (ASKED[turn], ANSWERED[turn]);
        self.recipe.wire.play(&self.script, ToolTurn::say(answered));
        let now = client.document(uri).text;
        let line = now.matches('\n').count() as u32;
        client
            .edit(uri, range(line, 0, line, 0), &self.tagged(asked))
            .await;
        match how {
            Send::CodeAction => {
                client
                    .run_code_action(uri, &format!("Send to {name}"))
                    .await;
            }
            Send::Command => {
                client
                    .execute("agentls.send", serde_json::Value::Null)
                    .await
                    .expect("agentls.send");
            }
        }
        let ended = format!("_{name}: end_turn");
        let done = || {
            let text = client.document(uri).text;
            text.contains(answered) && text.matches(&ended).count() == turn + 1
        };
        support::eventually(done).await.unwrap_or_else(|| {
            panic!(
                "no answer {answered:?} in the chat:\n{}\nthe model was sent:\n{}",
                client.document(uri).text,
                self.mock.summary()
            )
        });
    }

    /// Some request to the model carried the first exchange and the second message.
    fn the_model_heard_the_first_exchange(&self) {
        let heard_all = self.requests().iter().any(|r| {
            let body = String::from_utf8_lossy(&r.body);
            [ASKED[0], ANSWERED[0], ASKED[1]]
                .iter()
                .all(|said| body.contains(said))
        });
        assert!(
            heard_all,
            "the second request lacks the first exchange:\n{}",
            self.mock.summary()
        );
    }

    /// Starts the agent (spawn, `initialize`, `session/new`, its mode); returns the seconds.
    async fn start_agent(&self) -> f64 {
        let started = Instant::now();
        let name = self.recipe.name;
        self.client
            .execute("agentls.newSession", json!({"agent": name}))
            .await
            .expect("agentls.newSession");
        self.client
            .take_logged(&format!("{name}: new session"))
            .await;
        started.elapsed().as_secs_f64()
    }

    /// Prompts, waits until the review of `uri` is offered (answering the agent's other
    /// questions, such as permission to read, with "Allow"), then decides it with `decide`.
    async fn prompt_and_review(&self, text: &str, uri: &str, decide: Decision) {
        self.prompt(text).await;
        let deadline = Instant::now() + support::WAIT;
        loop {
            let titles: Vec<String> = self
                .client
                .code_actions(uri)
                .await
                .iter()
                .map(|a| a["title"].as_str().unwrap_or_default().to_owned())
                .collect();
            if titles.iter().any(|t| t.starts_with("Accept all")) {
                break;
            }
            if titles.iter().any(|t| t.starts_with("Allow (")) {
                self.client.run_code_action(uri, "Allow (").await;
                continue;
            }
            assert!(
                Instant::now() < deadline,
                "no review of {uri} within {:?}; code actions: {titles:?}; the model was sent:\n{}",
                support::WAIT,
                self.mock.summary()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        match decide {
            Decision::AcceptAll => self.client.run_code_action(uri, "Accept all changes").await,
            Decision::RejectAll => self.client.run_code_action(uri, "Reject all changes").await,
            Decision::AcceptFirstOfTwo => {
                self.client
                    .run_code_action_at(uri, range(0, 0, 0, 1), "Accept change 1/2")
                    .await;
                self.client
                    .run_code_action(uri, "Reject all changes (1)")
                    .await;
            }
        }
    }

    /// The names of the tools the agent offered the model, over every request.
    fn offered_tools(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for request in self.mock.requests() {
            let body = request.json();
            for tool in body["tools"].as_array().into_iter().flatten() {
                let declared = tool["functionDeclarations"].as_array();
                let named = declared.map_or_else(|| vec![tool], |d| d.iter().collect());
                for t in named {
                    let name = t["name"].as_str().or(t["function"]["name"].as_str());
                    if let Some(name) = name.filter(|n| !names.iter().any(|m| m == n)) {
                        names.push(name.to_owned());
                    }
                }
            }
        }
        names
    }

    /// Waits for the turn's summary, ending with `stop`, answering the agent's questions (such
    /// as permission to call a tool) with "Allow" on the way.
    async fn allowing_until(&self, uri: &str, stop: &str) -> (String, usize) {
        let summary = self.summary(stop);
        tokio::pin!(summary);
        let mut allowed = 0;
        loop {
            tokio::select! {
                summary = &mut summary => return (summary, allowed),
                () = tokio::time::sleep(Duration::from_millis(50)) => {
                    let allow = self.client.code_actions(uri).await.iter().any(|a| {
                        a["title"].as_str().unwrap_or_default().starts_with("Allow (")
                    });
                    if allow {
                        self.client.run_code_action(uri, "Allow (").await;
                        allowed += 1;
                    }
                }
            }
        }
    }

    /// Waits for the turn's summary, ending with `stop`.
    async fn summary(&self, stop: &str) -> String {
        // From the log, where it is written at once: the popup may wait for agentls's
        // allowance of a few a second, which a cell's earlier popups used up.
        self.client
            .take_logged(&format!("{}: {stop}", self.recipe.name))
            .await
    }

    /// The last status of each tool call that carried a diff or is an edit, by id, from the
    /// `session/update`s agentls forwarded.
    fn edit_statuses(&self) -> BTreeMap<String, String> {
        let mut edits = BTreeMap::new();
        for message in self.client.received("agentls/sessionUpdate") {
            let update = &message["params"]["update"];
            let Some(id) = update["toolCallId"].as_str() else {
                continue;
            };
            let has_diff = update["content"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["type"] == "diff"));
            if has_diff || update["kind"] == "edit" {
                edits.entry(id.to_owned()).or_insert_with(String::new);
            }
            if let (Some(status), Some(last)) = (update["status"].as_str(), edits.get_mut(id)) {
                *last = status.to_owned();
            }
        }
        edits
    }

    /// What the agent told the model about its tools, checked: `success` is among it, and no
    /// failure text is.
    fn the_model_heard(&self, success: &str) {
        let results = self.tool_results();
        assert!(
            results.iter().any(|r| r.contains(success)),
            "{} did not tell the model {success:?}; its tool results: {results:#?}",
            self.recipe.name
        );
        for result in &results {
            let lower = result.to_lowercase();
            if let Some(failure) = FAILURES.iter().find(|f| lower.contains(*f)) {
                panic!(
                    "{} told the model a failure ({failure:?}): {result}",
                    self.recipe.name
                );
            }
        }
    }

    /// After an accepted edit of `file`: every edit tool call completed, and the summary names
    /// the file and no failure.
    fn the_agent_completed(&self, summary: &str, file: &str) {
        let edits = self.edit_statuses();
        assert!(
            edits.values().all(|s| s == "completed"),
            "edit tool calls did not all complete: {edits:?}"
        );
        assert!(!summary.contains("failed ("), "{summary}");
        assert!(summary.contains(&format!("files: {file}")), "{summary}");
    }

    /// The next prompt tells the model what the user turned down (`needle`, in its request).
    async fn the_next_prompt_tells(&self, needle: &str) {
        self.recipe.wire.play(&self.script, ToolTurn::say("Noted."));
        self.prompt("thanks").await;
        // The turn's summary, taken so that no later scenario of the run takes it for its own.
        self.client.take_logged("“Noted.”").await;
        let told = self
            .requests()
            .iter()
            .any(|r| String::from_utf8_lossy(&r.body).contains(needle));
        assert!(
            told,
            "no request to the model says {needle:?}:\n{}",
            self.mock.summary()
        );
    }

    /// Prints the turn's summary and what the model heard, for the record.
    fn record(&self, scenario: Scenario, summary: &str) {
        let name = self.recipe.name;
        let heard: Vec<String> = self
            .mock
            .tool_results()
            .iter()
            .map(|r| r.chars().take(120).collect::<String>())
            .collect();
        eprintln!("matrix summary: {name}: {}: {summary}", scenario.title());
        eprintln!("matrix heard: {name}: {}: {heard:?}", scenario.title());
    }

    /// After the turn, the open file at `uri` (`path`) says `before` when the agent wrote through
    /// `fs/write_text_file` (agentls leaves an open file to the editor's save, so no editor finds
    /// it changed under it) or `expected` when the agent wrote the disk itself; the editor's save
    /// then writes `expected`.
    async fn saved_by_the_editor(
        &self,
        scenario: Scenario,
        (uri, path): (&str, &Path),
        before: &str,
        expected: &str,
    ) {
        buffer_holds(&self.client, uri, expected).await;
        // An agent's own disk write of more than was accepted is being corrected meanwhile.
        let read = || std::fs::read_to_string(path).unwrap_or_default();
        let _ = support::eventually(|| [before, expected].contains(&read().as_str())).await;
        let disk = read();
        let how = match disk.as_str() {
            d if d == before => "untouched until the save",
            d if d == expected => "written by the agent itself",
            other => panic!("before the save the file holds {other:?}"),
        };
        eprintln!(
            "matrix file: {}: {}: {how}",
            self.recipe.name,
            scenario.title()
        );
        self.client.save(uri).await;
        disk_holds(path, expected).await;
    }

    async fn finish(self) {
        assert!(self.client.shutdown().await.success());
    }
}

/// How the user sends a chat message.
#[derive(Debug, Clone, Copy)]
enum Send {
    /// The code action *Send to <agent>*.
    CodeAction,
    /// `agentls.send` with no arguments (the focused chat).
    Command,
}

/// agentls with `toml` as its config, initialized as a `shape` editor, in `workspace` (a new
/// one when `None`).
/// agentls with `toml` as its config, initialized as `shape` says, keeping its state (its chats)
/// in `state`: a restart passes the same, as the same user's editor would.
async fn agentls(
    toml: &str,
    shape: Shape,
    workspace: Option<std::path::PathBuf>,
    state: &std::path::Path,
) -> TestClient {
    let client = TestClient::start(Options {
        config_toml: Some(toml.to_owned()),
        env: vec![("XDG_STATE_HOME".into(), state.display().to_string())],
        workspace,
        ..Options::default()
    })
    .await;
    match shape {
        Shape::CodeActions => {
            client
                .initialize(capabilities_without_dialogs(), None)
                .await;
        }
        Shape::Dialogs => {
            client
                .initialize(TestClient::rich_capabilities(false), None)
                .await;
            client.answer("window/showMessageRequest", support::Answer::FirstAction);
        }
    }
    client
}

/// How the test decides a review.
#[derive(Debug, Clone, Copy)]
enum Decision {
    AcceptAll,
    RejectAll,
    AcceptFirstOfTwo,
}

/// The paths `recipe` needs, from the environment; a missing one fails the test.
fn installed(recipe: &Recipe) -> BTreeMap<&'static str, String> {
    let mut out = BTreeMap::new();
    for var in recipe.needs {
        match std::env::var(var) {
            Ok(path) if Path::new(&path).exists() => {
                out.insert(*var, path);
            }
            found => panic!(
                "{} ({}) is not installed: {var} is {found:?}; run `eval \"$(scripts/test-tools.sh)\"`",
                recipe.name, recipe.package
            ),
        }
    }
    out
}

/// Eventually the file at `path` holds `expected` (agentls may apply a change at the end of the
/// turn, just after the summary).
async fn disk_holds(path: &Path, expected: &str) {
    let read = || std::fs::read_to_string(path).unwrap_or_default();
    support::eventually(|| read() == expected)
        .await
        .unwrap_or_else(|| panic!("{} holds {:?}, not {expected:?}", path.display(), read()));
}

/// Eventually the test client's copy of `uri` holds `expected`.
async fn buffer_holds(client: &TestClient, uri: &str, expected: &str) {
    support::eventually(|| client.document(uri).text == expected)
        .await
        .unwrap_or_else(|| {
            panic!(
                "the buffer holds {:?}, not {expected:?}",
                client.document(uri).text
            )
        });
}

/// One cell: `recipe` in `scenario`; returns what it took (start, turn) in seconds.
async fn cell(run: &mut Run<'_>, scenario: Scenario) -> (f64, f64) {
    run.begin(scenario);
    let recipe = run.recipe;
    let client = &run.client;
    let file = scenario.file_name();
    let notes = client.workspace.join(&file);
    let (start, turn) = match scenario {
        Scenario::OpenFileAccepted | Scenario::ClosedFileAccepted => {
            let open = scenario == Scenario::OpenFileAccepted;
            let uri = if open {
                client.open(&file, "text", NOTES).await
            } else {
                std::fs::write(&notes, NOTES).unwrap();
                file_uri(&notes)
            };
            run.model_does(&Task::Replace {
                path: &notes,
                old: OLD_LINE,
                new: NEW_LINE,
            });
            let start = run.start_agent().await;
            let began = Instant::now();
            run.prompt_and_review("edit the file", &uri, Decision::AcceptAll)
                .await;
            let summary = run.summary("end_turn").await;
            let turn = began.elapsed().as_secs_f64();
            let expected = NOTES.replace(OLD_LINE, NEW_LINE);
            if open {
                run.saved_by_the_editor(scenario, (&uri, &notes), NOTES, &expected)
                    .await;
            } else {
                disk_holds(&notes, &expected).await;
            }
            run.the_model_heard(recipe.told.replaced);
            run.the_agent_completed(&summary, &file);
            assert!(summary.contains(DONE), "{summary}");
            run.record(scenario, &summary);
            (start, turn)
        }
        Scenario::PartlyAccepted => {
            let uri = client.open(&file, "text", TODOS).await;
            let proposal = TODOS
                .replace("TODO a", "TODO A")
                .replace("TODO b", "TODO B");
            run.model_does(&Task::TwoChanges {
                path: &notes,
                text: &proposal,
                changes: [("// TODO a", "// TODO A"), ("// TODO b", "// TODO B")],
            });
            let start = run.start_agent().await;
            let began = Instant::now();
            run.prompt_and_review("uppercase the TODOs", &uri, Decision::AcceptFirstOfTwo)
                .await;
            let summary = run.summary("end_turn").await;
            let turn = began.elapsed().as_secs_f64();
            let expected = TODOS.replace("TODO a", "TODO A");
            run.saved_by_the_editor(scenario, (&uri, &notes), TODOS, &expected)
                .await;
            run.the_model_heard(recipe.told.rewritten);
            run.the_agent_completed(&summary, &file);
            run.record(scenario, &summary);
            // It wrote (or was told it wrote) both changes: agentls tells it which one was not
            // applied.
            run.the_next_prompt_tells("The user rejected part of your change to")
                .await;
            (start, turn)
        }
        Scenario::Rejected => {
            let uri = client.open(&file, "text", NOTES).await;
            run.model_does(&Task::Replace {
                path: &notes,
                old: OLD_LINE,
                new: NEW_LINE,
            });
            let start = run.start_agent().await;
            let began = Instant::now();
            run.prompt_and_review("edit the file", &uri, Decision::RejectAll)
                .await;
            let summary = run.summary(recipe.stop_after_reject).await;
            let turn = began.elapsed().as_secs_f64();
            // The agent told the model of the rejection after its tool ran, so a stray write by
            // the tool came before the summary; a status request then passes behind whatever
            // the verdict queued in agentls, an edit to the buffer included.
            client.agent_status().await;
            assert_eq!(std::fs::read_to_string(&notes).unwrap(), NOTES);
            assert_eq!(client.document(&uri).text, NOTES);
            assert_eq!(client.count(Some("workspace/applyEdit")), run.edits_applied);
            let results = run.tool_results();
            assert!(
                !results.iter().any(|r| r.contains(recipe.told.replaced)),
                "the model heard of a success: {results:#?}"
            );
            if let Some(rejected) = recipe.told.rejected {
                assert!(
                    results.iter().any(|r| r.contains(rejected)),
                    "the model was not told {rejected:?}: {results:#?}"
                );
            }
            let edits = run.edit_statuses();
            assert!(
                !edits.values().any(|s| s == "completed"),
                "a rejected edit completed: {edits:?}"
            );
            run.record(scenario, &summary);
            (start, turn)
        }
        Scenario::EditsWithoutAsking => {
            let uri = client.open(&file, "text", NOTES).await;
            let other = client.workspace.join("other.txt");
            let other_uri = client.open("other.txt", "text", NOTES).await;
            run.model_does_all(&[
                Task::Replace {
                    path: &notes,
                    old: OLD_LINE,
                    new: NEW_LINE,
                },
                Task::Replace {
                    path: &other,
                    old: OLD_LINE,
                    new: NEW_LINE,
                },
            ]);
            let start = run.start_agent().await;
            let began = Instant::now();
            let name = recipe.name;
            run.prompt("edit the file").await;
            // Nobody is asked; the change is then shown for Keep/Undo, after the fact.
            let undo = format!("Undo all changes (1) by {name}");
            let deadline = Instant::now() + support::WAIT;
            loop {
                let titles: Vec<String> = client
                    .code_actions(&uri)
                    .await
                    .iter()
                    .map(|a| a["title"].as_str().unwrap_or_default().to_owned())
                    .collect();
                assert!(
                    !titles.iter().any(|t| t.starts_with("Accept all")),
                    "{name} asked in its auto mode: {titles:?}"
                );
                if titles.contains(&undo) {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "no after-the-fact review of {file} within {:?}; code actions: \
                     {titles:?}; the model was sent:\n{}",
                    support::WAIT,
                    run.mock.summary()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let summary = run.summary("end_turn").await;
            let turn = began.elapsed().as_secs_f64();
            assert!(
                summary.contains(&format!("changed without asking: {file}")),
                "{summary}"
            );
            let changed = NOTES.replace(OLD_LINE, NEW_LINE);
            buffer_holds(client, &uri, &changed).await;
            buffer_holds(client, &other_uri, &changed).await;
            run.the_model_heard(recipe.told.replaced);
            run.record(scenario, &summary);
            // Undo brings the old text back to the buffer; the editor's save writes it.
            client.run_code_action(&uri, &undo).await;
            buffer_holds(client, &uri, NOTES).await;
            client.save(&uri).await;
            disk_holds(&notes, NOTES).await;
            // The other file's change is kept, then the whole turn is undone after the fact:
            // its change comes back as a review, and Undo puts the old text back.
            let keep = format!("Keep all changes (1) by {name}");
            client.run_code_action(&other_uri, &keep).await;
            let told = client
                .execute("agentls.undoTurn", serde_json::Value::Null)
                .await
                .expect("agentls.undoTurn");
            assert!(
                told.as_str()
                    .is_some_and(|t| t.contains("1 file to review (other.txt)")),
                "{told}"
            );
            let undo_turn = format!("Undo all changes (1) by {name}'s turn");
            client.run_code_action(&other_uri, &undo_turn).await;
            buffer_holds(client, &other_uri, NOTES).await;
            client.save(&other_uri).await;
            disk_holds(&other, NOTES).await;
            (start, turn)
        }
        Scenario::Conversation => {
            let start = run.start_agent().await;
            let began = Instant::now();
            run.converse().await;
            (start, began.elapsed().as_secs_f64())
        }
        Scenario::Resumed => {
            let start = run.start_agent().await;
            (start, run.resume().await)
        }
        Scenario::EditorTools => {
            // The editor forwards another language server's diagnostic; the model asks for the
            // diagnostics through the MCP server agentls offered the session.
            let uri = client.open(&file, "text", NOTES).await;
            let diagnostic = json!({"range": range(1, 0, 1, 6), "severity": 2,
                                    "message": DIAGNOSED, "source": "mock-analyzer"});
            client
                .notify(
                    "agentls/didChangeDiagnostics",
                    json!({"uri": uri, "diagnostics": [diagnostic]}),
                )
                .await;
            let turn = ToolTurn::say(DONE).then("*getDiagnostics", json!({}));
            recipe.wire.play(&run.script, turn);
            let start = run.start_agent().await;
            let began = Instant::now();
            run.prompt("what does the editor say about the file?").await;
            let (summary, asked) = run.allowing_until(&uri, "end_turn").await;
            let turn = began.elapsed().as_secs_f64();
            eprintln!(
                "matrix tools: {}: asked permission {asked} times",
                recipe.name
            );
            let results = run.tool_results();
            assert!(
                results.iter().any(|r| r.contains(DIAGNOSED)),
                "{} did not hand the model the editor's diagnostics: {results:#?}\n{}\n\
                 tools offered to the model: {:?}",
                recipe.name,
                run.mock.summary(),
                run.offered_tools()
            );
            assert!(
                summary.contains("editor tools: getDiagnostics ×1"),
                "{summary}"
            );
            run.record(scenario, &summary);
            (start, turn)
        }
        Scenario::NewFile => {
            let path = client.workspace.join("hello.txt");
            let uri = file_uri(&path);
            run.model_does(&Task::Create {
                path: &path,
                text: CREATED,
            });
            let start = run.start_agent().await;
            let began = Instant::now();
            run.prompt_and_review("create hello.txt", &uri, Decision::AcceptAll)
                .await;
            let summary = run.summary("end_turn").await;
            let turn = began.elapsed().as_secs_f64();
            disk_holds(&path, CREATED).await;
            run.the_model_heard(recipe.told.created);
            run.the_agent_completed(&summary, "hello.txt");
            run.record(scenario, &summary);
            run.undo_turn_removes(&path).await;
            (start, turn)
        }
    };
    (start, turn)
}

// ---- The harness ----

/// A finished scenario, for the printed matrix.
struct Outcome {
    agent: &'static str,
    scenario: Scenario,
    shape: Shape,
    passed: bool,
    seconds: f64,
}

static OUTCOMES: Mutex<Vec<Outcome>> = Mutex::new(Vec::new());

/// Records a scenario's outcome, `seconds` from its start.
fn record_outcome(recipe: &Recipe, scenario: Scenario, shape: Shape, passed: bool, seconds: f64) {
    OUTCOMES.lock().unwrap().push(Outcome {
        agent: recipe.name,
        scenario,
        shape,
        passed,
        seconds,
    });
}

/// Runs `scenarios` of `group` with `recipe` on a runtime of its own, each within the deadline,
/// and records each one's outcome; the first that fails ends the group.
fn run_group(recipe: &Recipe, group: &Group, scenarios: &[Scenario]) -> Result<(), Failed> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // The scenario under way and when it began (the group's start counts to its first).
    let current = std::cell::Cell::new((scenarios[0], Instant::now()));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(async {
            let mut run = tokio::time::timeout(DEADLINE, Run::start(recipe, group))
                .await
                .expect("agentls started");
            for &scenario in scenarios {
                if scenario != scenarios[0] {
                    current.set((scenario, Instant::now()));
                }
                let (start, turn) = tokio::time::timeout(DEADLINE, cell(&mut run, scenario))
                    .await
                    .unwrap_or_else(|_| panic!("the scenario took longer than {DEADLINE:?}"));
                let seconds = current.get().1.elapsed().as_secs_f64();
                record_outcome(recipe, scenario, group.shape, true, seconds);
                eprintln!(
                    "matrix timing: {}: {}: start {start:.2} s, turn {turn:.2} s, all {seconds:.2} s",
                    recipe.name,
                    scenario.title()
                );
            }
            run.finish().await;
        })
    }));
    drop(runtime);
    let Err(panic) = result else {
        return Ok(());
    };
    let (scenario, began) = current.get();
    let passed = OUTCOMES
        .lock()
        .unwrap()
        .iter()
        .any(|o| o.agent == recipe.name && o.scenario == scenario && o.shape == group.shape);
    if !passed {
        record_outcome(
            recipe,
            scenario,
            group.shape,
            false,
            began.elapsed().as_secs_f64(),
        );
    }
    let message = panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panicked".to_owned());
    Err(Failed::from(format!("{}: {message}", scenario.title())))
}

/// The matrix as a table: one row per agent of `agents` that ran, in that order, a cell per
/// scenario (`ok 12.3 s` / `FAIL 20.0 s`).
fn matrix_table(agents: &[&str], outcomes: &[Outcome]) -> String {
    let mut rows: BTreeMap<&str, BTreeMap<(Scenario, Shape), String>> = BTreeMap::new();
    for o in outcomes {
        let mark = if o.passed { "ok" } else { "FAIL" };
        rows.entry(o.agent)
            .or_default()
            .insert((o.scenario, o.shape), format!("{mark} {:.1} s", o.seconds));
    }
    let mut columns: Vec<(Scenario, Shape)> = GROUPS
        .iter()
        .flat_map(|g| g.scenarios.iter().map(|&s| (s, g.shape)))
        .collect();
    columns.sort_by_key(|&(scenario, shape)| (shape, scenario));
    let mut table = String::from("| agent |");
    for (s, shape) in &columns {
        let with = if *shape == Shape::Dialogs {
            " (dialogs)"
        } else {
            ""
        };
        table.push_str(&format!(" {}{with} |", s.column()));
    }
    table.push_str("\n|---|");
    table.push_str(&"---|".repeat(columns.len()));
    for agent in agents {
        let Some(cells) = rows.get(agent) else {
            continue;
        };
        table.push_str(&format!("\n| {agent} |"));
        for column in &columns {
            let cell = cells.get(column).map(String::as_str).unwrap_or("-");
            table.push_str(&format!(" {cell} |"));
        }
    }
    table
}

fn main() {
    let mut args = Arguments::from_args();
    // Two groups at a time unless told otherwise: the agents are mostly starting or waiting, and
    // on two cores more at once only queue for the CPU.
    args.test_threads.get_or_insert(2);
    let recipes: &'static [Recipe] = Vec::leak(recipes());
    let mut trials = Vec::new();
    for recipe in recipes {
        for group in &GROUPS {
            let scenarios: Vec<Scenario> = (group.scenarios.iter().copied())
                .filter(|&s| s != Scenario::EditsWithoutAsking || recipe.auto.is_some())
                .filter(|&s| s != Scenario::EditorTools || recipe.offers_mcp_tools)
                .collect();
            if scenarios.is_empty() {
                continue; // the printed matrix shows "-"
            }
            let titles: Vec<&str> = scenarios.iter().map(|s| s.title()).collect();
            let client = match group.shape {
                Shape::CodeActions => "",
                Shape::Dialogs => "dialogs client: ",
            };
            let name = format!("{}: {client}{}", recipe.name, titles.join("; "));
            trials.push(Trial::test(name, move || {
                run_group(recipe, group, &scenarios)
            }));
        }
    }
    let conclusion = libtest_mimic::run(&args, trials);
    let outcomes = OUTCOMES.lock().unwrap();
    if !outcomes.is_empty() {
        let agents: Vec<&str> = recipes.iter().map(|r| r.name).collect();
        eprintln!("\nagent matrix:\n{}\n", matrix_table(&agents, &outcomes));
    }
    drop(outcomes);
    conclusion.exit();
}
