//! VS Code end to end: code-server (VS Code in a browser, from npm) driven by headless Chromium
//! through puppeteer-core loads the extension built from `editors/vscode` in this run by the
//! commands its README gives, and starts the real `agentls` from the sandbox's `~/.cargo/bin`.
//! A user's session (`tests/vscode/review.js`): the chat from the palette, a prompt in an input
//! box, the demo agent's streamed reply, its two changes listed and in the diff editor, Keep on
//! one and Undo on the other through CodeLens, Undo on a change made without asking, a mode
//! picked, the status read, a turn cancelled from its progress notification, the chat back from
//! the status bar, a message typed in an input box, a prompt about selected lines, save and
//! close without a dialog. Without agentls (`tests/vscode/missing.js`): a clear message whose
//! button opens the setting, where its full path makes it start. Screenshots go to
//! `AGENTLS_TEST_CAPTURES`.
//!
//! Node.js 24, code-server, puppeteer-core and Chromium come from `AGENTLS_TEST_NODE24`,
//! `AGENTLS_TEST_CODE_SERVER`, `AGENTLS_TEST_PUPPETEER` and `AGENTLS_TEST_CHROMIUM`
//! (`eval "$(scripts/test-tools.sh)"`). The browser tests are ignored without the feature
//! `real-peers` (scripts/test.sh turns it on); with it, a missing peer fails them. Building the
//! extension needs npm (Node.js 20+).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};
use support::peers::{self, Sandbox, Session};

/// A whole session in the browser, code-server's start to its exit.
const TIMEOUT: Duration = Duration::from_secs(300);

/// The file the demo agent is asked to change: two TODO lines far enough apart to be two changes.
const NOTES: &str = "fn main() {\n    // TODO one\n    let a = 1;\n    let b = 2;\n    let c = 3;\n    // TODO two\n}\n";
/// `NOTES` with the first change kept and the second undone.
const KEPT: &str = "fn main() {\n    // TODO ONE\n    let a = 1;\n    let b = 2;\n    let c = 3;\n    // TODO two\n}\n";

/// The settings this extension reads itself (never sent to agentls).
const CLIENT_SETTINGS: [&str; 3] = ["agentls.path", "agentls.logFile", "agentls.trace.server"];

/// The programs the browser session needs.
struct Tools {
    node24: PathBuf,
    code_server: PathBuf,
    puppeteer: PathBuf,
    chromium: PathBuf,
}

fn tools() -> Tools {
    Tools {
        node24: peers::binary("AGENTLS_TEST_NODE24", "Node.js 24"),
        code_server: peers::binary("AGENTLS_TEST_CODE_SERVER", "code-server"),
        puppeteer: peers::binary("AGENTLS_TEST_PUPPETEER", "puppeteer-core"),
        chromium: peers::binary("AGENTLS_TEST_CHROMIUM", "Chromium"),
    }
}

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The first ```sh block of `editors/vscode/README.md` that builds the extension.
fn readme_install_block() -> String {
    let readme = std::fs::read_to_string(manifest().join("editors/vscode/README.md")).unwrap();
    let mut blocks = readme.split("```sh\n").skip(1).map(|rest| {
        let end = rest.find("```").expect("a closed code block");
        // The block is indented in a list item.
        rest[..end]
            .lines()
            .map(str::trim)
            .collect::<Vec<_>>()
            .join("\n")
    });
    blocks
        .find(|block| block.starts_with("cd editors/vscode"))
        .expect("README's install block")
}

/// Copies the tree `from` into `to`, leaving out what a build makes.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if ["node_modules", "dist"].contains(&name.as_ref()) || name.ends_with(".vsix") {
            continue;
        }
        let (source, target) = (entry.path(), to.join(&*name));
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&source, &target);
        } else {
            std::fs::copy(&source, &target).unwrap();
        }
    }
}

/// Builds the extension once per test run exactly as the README says, in a copy of
/// `editors/vscode` under the target dir, with `code` standing for code-server; returns the
/// `.vsix` (which the README's last command installed there).
fn built_extension(tools: &Tools) -> &'static Path {
    static VSIX: OnceLock<PathBuf> = OnceLock::new();
    VSIX.get_or_init(|| {
        let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("vscode-extension");
        let _ = std::fs::remove_dir_all(&root);
        copy_tree(
            &manifest().join("editors/vscode"),
            &root.join("repo/editors/vscode"),
        );
        let extensions = root.join("extensions");
        let script = format!(
            "code() {{ \"$AGENTLS_NODE24\" \"$AGENTLS_CODE_SERVER\" --user-data-dir \"$AGENTLS_ROOT/user-data\" \
             --extensions-dir \"$AGENTLS_ROOT/extensions\" \"$@\"; }}\n{}",
            readme_install_block()
        );
        let output = Command::new("sh")
            .args(["-ec", &script])
            .current_dir(root.join("repo"))
            .env("AGENTLS_NODE24", &tools.node24)
            .env("AGENTLS_CODE_SERVER", &tools.code_server)
            .env("AGENTLS_ROOT", &root)
            .env("npm_config_update_notifier", "false")
            .output()
            .expect("run the README's install commands");
        assert!(
            output.status.success(),
            "the README's install commands failed ({}):\n{script}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            extensions.join("agentls.agentls-0.1.0/package.json").is_file(),
            "the extension is not installed in {}",
            extensions.display()
        );
        root.join("repo/editors/vscode/agentls.vsix")
    })
}

/// One browser session: runs `tests/vscode/<scenario>.js` against a fresh code-server (own
/// user-data dir, extensions, workspace with `notes.rs`), with agentls in the sandbox's
/// `~/.cargo/bin` when `installed`.
fn run(tools: &Tools, scenario: &str, installed: bool, viewport: [u32; 2]) -> (Session, PathBuf) {
    let vsix = built_extension(tools);
    let sandbox = Sandbox::create();
    let root = sandbox.root.clone();
    let notes = sandbox.workspace.join("notes.rs");
    std::fs::write(&notes, NOTES).unwrap();
    // As the README's `code --install-extension`, into this session's own extensions dir.
    let mut install = Command::new(&tools.node24);
    install
        .arg(&tools.code_server)
        .arg("--user-data-dir")
        .arg(root.join("user-data"))
        .arg("--extensions-dir")
        .arg(root.join("extensions"))
        .arg("--install-extension")
        .arg(vsix);
    let output = sandbox.isolate(&mut install).output().unwrap();
    assert!(
        output.status.success(),
        "install the extension: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let user = root.join("user-data/User");
    std::fs::create_dir_all(&user).unwrap();
    // A fresh profile: no trust prompt, no AI chat, no hot exit or auto-save (a save is the
    // user's), nothing restored, no port forwarding of agentls's loopback ports.
    let settings = json!({
        "security.workspace.trust.enabled": false,
        "chat.disableAIFeatures": true,
        "files.hotExit": "off",
        "files.autoSave": "off",
        "workbench.startupEditor": "none",
        "workbench.secondarySideBar.defaultVisibility": "hidden",
        "workbench.tips.enabled": false,
        "telemetry.telemetryLevel": "off",
        "remote.autoForwardPorts": false,
        "extensions.autoCheckUpdates": false,
        "extensions.autoUpdate": false,
        "workbench.reduceMotion": "on",
        "editor.cursorBlinking": "solid",
        "agentls.logFile": root.join("agentls.log"),
    });
    std::fs::write(user.join("settings.json"), settings.to_string()).unwrap();
    if installed {
        // Where `cargo install` puts it, as the README says.
        let bin = root.join("home/.cargo/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_agentls"), bin.join("agentls")).unwrap();
    }
    let captures = std::env::var_os("AGENTLS_TEST_CAPTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("captures"));
    let config = json!({
        "codeServer": tools.code_server,
        "chromium": tools.chromium,
        "puppeteer": tools.puppeteer,
        "workspace": sandbox.workspace,
        "userData": root.join("user-data"),
        "extensions": root.join("extensions"),
        "captures": captures,
        "viewport": viewport,
        "file": notes,
        "prompt": "uppercase the TODO lines in notes.rs",
        "expectVisible": ["// TODO ONE", "// TODO two"],
        "agentls": env!("CARGO_BIN_EXE_agentls"),
    });
    let mut command = Command::new(&tools.node24);
    command
        .arg(
            manifest()
                .join("tests/vscode")
                .join(format!("{scenario}.js")),
        )
        .arg(config.to_string());
    // Only Node.js 24 and the system on PATH: agentls is found in ~/.cargo/bin, or not at all.
    let node_dir = tools.node24.parent().unwrap();
    sandbox
        .isolate(&mut command)
        .env("PATH", format!("{}:/usr/bin:/bin", node_dir.display()))
        .env("TMPDIR", root.join("tmp"))
        .env_remove("AGENTLS_CONFIG")
        .env_remove("AGENTLS_LOG")
        .env_remove("VSCODE_IPC_HOOK_CLI");
    let session = sandbox.run(&mut command, scenario, TIMEOUT);
    (session, notes)
}

/// Files under `dir` (recursively) whose name ends with `suffix`.
fn find_files(dir: &Path, suffix: &str, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            find_files(&path, suffix, out);
        } else if path.to_string_lossy().ends_with(suffix) {
            out.push(path);
        }
    }
}

/// The driver's steps and error, its stderr, the tail of agentls's log, and the extension
/// host's logs (its own and the agentls output channel).
fn context(session: &Session, scenario: &str) -> String {
    let steps = session.result["steps"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut logs = Vec::new();
    let root = session.dir.path();
    find_files(&root.join("user-data/logs"), "-agentls.log", &mut logs);
    find_files(&root.join("user-data/logs"), "remoteexthost.log", &mut logs);
    let logs: Vec<String> = logs
        .iter()
        .map(|path| {
            path.strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let mut names = vec!["agentls.log"];
    names.extend(logs.iter().map(String::as_str));
    format!(
        "--- error ---\n{}\n--- steps ---\n{}\n--- code-server ---\n{}\n{}",
        session.result["error"].as_str().unwrap_or("(none)"),
        steps
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("\n"),
        session.result["codeServer"].as_str().unwrap_or(""),
        session.context(scenario, &names, 6000)
    )
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn vscode_keeps_one_change_and_undoes_the_other_through_codelens() {
    let tools = tools();
    let (session, notes) = run(&tools, "review", true, [1400, 900]);
    let context = context(&session, "review");
    assert_eq!(session.result["ok"], json!(true), "{context}");
    assert!(session.status.success(), "{context}");
    assert_eq!(session.result["dialog"], Value::Null, "{context}");
    assert_eq!(session.result["onDisk"], json!(KEPT), "{context}");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), KEPT, "{context}");
    // The chat was saved as the reply came in: closing it asked nothing, and it is all on disk.
    // (The other chat is the new one it opened and left empty.)
    let chats = session.dir.path().join("state/agentls/chats");
    let chat = std::fs::read_dir(&chats)
        .unwrap()
        .flat_map(|dir| std::fs::read_dir(dir.unwrap().path()).unwrap())
        .map(|file| file.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .max_by_key(|path| std::fs::metadata(path).unwrap().len())
        .unwrap_or_else(|| panic!("no chat in {}\n{context}", chats.display()));
    let chat = std::fs::read_to_string(chat).unwrap();
    for expected in [
        "# Chat with demo",
        "uppercase the TODO lines in notes.rs",
        "Hello from the demo agent.",
        "demo: end_turn",
        "Waiting until you cancel",
        "demo: cancelled",
        "_about notes.rs lines 1–3_",
        "notes.rs: 3 lines",
        "chunk 79",
    ] {
        assert!(
            chat.contains(expected),
            "{expected:?} not in the chat:\n{chat}\n{context}"
        );
    }
    let shots = session.result["screenshots"].as_array().unwrap();
    assert_eq!(shots.len(), 10, "{context}");
    // A turn leaves no notification of its own; its summary went to the status bar.
    assert_eq!(session.result["turnNotifications"], json!([]), "{context}");
    let status_bar = session.result["statusBar"].as_array().unwrap();
    assert!(
        status_bar
            .iter()
            .any(|item| item.as_str().unwrap_or_default().contains("demo: end_turn")),
        "{status_bar:?}\n{context}"
    );
    assert!(
        session.result["status"]
            .as_str()
            .unwrap()
            .contains("mode read-only"),
        "{context}"
    );
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn vscode_says_clearly_when_agentls_is_missing_and_lists_every_setting() {
    let tools = tools();
    let (session, _) = run(&tools, "missing", false, [1400, 1000]);
    let context = context(&session, "missing");
    assert_eq!(session.result["ok"], json!(true), "{context}");
    let message = session.result["message"].as_str().unwrap();
    assert!(
        message.contains("the agentls executable was not found")
            && message.contains("~/.cargo/bin")
            && message.contains("agentls.path")
            && message.contains("Open Settings")
            && !message.contains("ENOENT"),
        "{message}\n{context}"
    );
    let shown = |list: &Value| -> BTreeMap<String, String> {
        list.as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let key = s["key"].as_str().unwrap().to_owned();
                (key, s["description"].as_str().unwrap().to_owned())
            })
            .collect()
    };
    let at_path = shown(&session.result["pathSettings"]);
    assert!(
        at_path.contains_key("agentls.path"),
        "{at_path:?}\n{context}"
    );
    // Every setting but the machine ones (those on the Remote tab in code-server) is listed
    // with its description.
    let listed = shown(&session.result["settings"]);
    let expected: BTreeSet<String> = contributed_settings()
        .into_keys()
        .filter(|key| key != "agentls.path" && key != "agentls.logFile")
        .collect();
    assert_eq!(
        listed.keys().cloned().collect::<BTreeSet<_>>(),
        expected,
        "{context}"
    );
    for (key, description) in &listed {
        assert!(
            description.len() > 20,
            "{key} has no description\n{context}"
        );
    }
}

/// The settings `editors/vscode/package.json` contributes, with their defaults.
fn contributed_settings() -> BTreeMap<String, Value> {
    let text = std::fs::read_to_string(manifest().join("editors/vscode/package.json")).unwrap();
    let package: Value = serde_json::from_str(&text).unwrap();
    let properties = package["contributes"]["configuration"]["properties"]
        .as_object()
        .unwrap();
    for (key, schema) in properties {
        let description = schema["markdownDescription"]
            .as_str()
            .or(schema["description"].as_str());
        assert!(
            description.is_some_and(|d| d.len() > 20),
            "{key} has no description"
        );
    }
    properties
        .iter()
        .map(|(key, schema)| (key.clone(), schema["default"].clone()))
        .collect()
}

/// Every leaf key of a JSON object, dotted (an empty object counts as a leaf: a map of names).
fn leaves(prefix: &str, value: &Value, out: &mut BTreeMap<String, Value>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, value) in map {
                leaves(&format!("{prefix}.{key}"), value, out);
            }
        }
        other => {
            out.insert(prefix.to_owned(), other.clone());
        }
    }
}

/// The Settings UI lists exactly agentls's config schema (but what only the config file may
/// set: `agents`, `chat.directory`, `context` and `watch`) and the extension's own settings, with
/// agentls's defaults (an empty string standing for "not set").
#[test]
fn contributed_settings_match_the_config_schema() {
    let mut schema = BTreeMap::new();
    leaves(
        "agentls",
        &serde_json::to_value(agentls::config::Config::default()).unwrap(),
        &mut schema,
    );
    schema.retain(|key, _| {
        ![
            "agentls.agents",
            "agentls.chat.directory",
            "agentls.context.",
            "agentls.watch.",
        ]
        .iter()
        .any(|file_only| key.starts_with(file_only))
    });
    let mut contributed = contributed_settings();
    for key in CLIENT_SETTINGS {
        assert!(
            contributed.remove(key).is_some(),
            "{key} is not contributed"
        );
    }
    assert_eq!(
        contributed.keys().collect::<Vec<_>>(),
        schema.keys().collect::<Vec<_>>()
    );
    for (key, default) in &schema {
        let expected = if default.is_null() {
            &json!("")
        } else {
            default
        };
        assert_eq!(&contributed[key], expected, "the default of {key}");
    }
}
