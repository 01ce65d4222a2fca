//! The command line: `--version`, `--help`, `doctor` and `agents` against a real config file.

use std::process::Command;

fn agentls(home: &std::path::Path, args: &[&str]) -> (bool, String) {
    agentls_with(home, args, None)
}

/// Runs agentls with `HOME` and `XDG_CONFIG_HOME` in `home` and `AGENTLS_CONFIG` as given.
fn agentls_with(
    home: &std::path::Path,
    args: &[&str],
    config: Option<&std::path::Path>,
) -> (bool, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentls"));
    command
        .args(args)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env_remove("XDG_STATE_HOME")
        .env_remove("AGENTLS_CONFIG");
    if let Some(config) = config {
        command.env("AGENTLS_CONFIG", config);
    }
    let out = command.output().expect("run agentls");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn version_and_help() {
    let home = tempfile::tempdir().unwrap();
    let (ok, out) = agentls(home.path(), &["--version"]);
    assert!(ok);
    assert_eq!(out.trim(), format!("agentls {}", env!("CARGO_PKG_VERSION")));
    let (ok, out) = agentls(home.path(), &["--help"]);
    assert!(ok);
    for word in ["serve", "doctor", "--log-file"] {
        assert!(out.contains(word), "help lacks {word}: {out}");
    }
}

#[test]
fn doctor_reports_the_file_agents_on_path_and_problems() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("config/agentls");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        "defaultAgent = \"ghost\"\n\
         [agents.shell]\ncommand = \"sh\"\nargs = [\"-c\", \"true\"]\nenv = { API_TOKEN = \"s3cret\" }\n\
         [agents.ghost]\ncommand = \"agentls-no-such-agent\"\n",
    )
    .unwrap();
    let (ok, out) = agentls(home.path(), &["doctor"]);
    assert!(
        !ok,
        "a default agent that cannot be found is a problem:\n{out}"
    );
    assert!(
        out.contains(&format!(
            "config file: {} (read)",
            dir.join("config.toml").display()
        )),
        "{out}"
    );
    assert!(
        out.contains("agent shell: sh [\"-c\", \"true\"] (found at "),
        "{out}"
    );
    assert!(
        out.contains(
            "agent ghost: agentls-no-such-agent [] (NOT FOUND on PATH: commands that name no agent will fail)"
        ),
        "{out}"
    );
    assert!(out.ends_with("1 problem found\n"), "{out}");
    assert!(
        out.contains("env API_TOKEN=<redacted>") && !out.contains("s3cret"),
        "{out}"
    );
    assert!(out.contains("default agent: ghost"), "{out}");
}

/// An agent by name: `use` takes the known agent's command, arguments, mode that asks and
/// environment, the file's own keys over them; `agentls agents` lists it as configured, and an
/// unknown id is a problem naming the known ones.
#[test]
fn an_agent_taken_by_name_runs_as_the_table_says() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("config/agentls");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        "defaultAgent = \"claude\"\n\
         [agents.claude]\nuse = \"claude-acp\"\nenv = { ANTHROPIC_API_KEY = \"s3cret\" }\n\
         [agents.typo]\nuse = \"claude\"\n",
    )
    .unwrap();
    let (_, out) = agentls(home.path(), &["doctor"]);
    assert!(
        out.contains("agent claude: npx [\"-y\", \"@agentclientprotocol/claude-agent-acp\"]"),
        "{out}"
    );
    assert!(out.contains("env ENABLE_TOOL_SEARCH=false"), "{out}");
    assert!(out.contains("env ANTHROPIC_API_KEY=<redacted>"), "{out}");
    assert!(
        out.contains("problem: ") && out.contains("agents.typo.use") && out.contains("claude-acp"),
        "{out}"
    );
    assert!(!out.contains("agent typo"), "{out}");
    let (ok, listed) = agentls(home.path(), &["agents"]);
    assert!(ok, "{listed}");
    assert!(
        listed.contains("claude-acp: Claude (claude-agent-acp) — configured as claude;"),
        "{listed}"
    );
    assert!(
        listed.contains("gemini: Gemini CLI — not configured;"),
        "{listed}"
    );
    assert!(listed.contains("trusts"), "{listed}");
}

#[test]
fn doctor_without_a_config_file_says_so() {
    let home = tempfile::tempdir().unwrap();
    let (ok, out) = agentls(home.path(), &["doctor"]);
    assert!(ok, "{out}");
    assert!(out.ends_with("no problems found\n"), "{out}");
    assert!(out.contains("(not found; using defaults)"), "{out}");
    assert!(out.contains("default agent: demo"), "{out}");
    assert!(out.contains("agent demo (built in): "), "{out}");
    assert!(out.contains("[\"demo-agent\"] (found at "), "{out}");
}

/// `doctor` starts each agent as agentls would and says what it answered: the built-in demo
/// agent opens a session with its modes; an agent configured with a mode it does not have is
/// told so (and, being the default, is a problem); a program that is no ACP agent is told
/// apart.
#[test]
fn doctor_starts_each_agent_and_checks_its_mode() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("config/agentls");
    std::fs::create_dir_all(&dir).unwrap();
    let demo = env!("CARGO_BIN_EXE_agentls");
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "defaultAgent = \"careful\"\n\
             [agents.careful]\ncommand = {demo:?}\nargs = [\"demo-agent\"]\nmode = \"cautious\"\n\
             [agents.mute]\ncommand = \"sh\"\nargs = [\"-c\", \"sleep 0\"]\n"
        ),
    )
    .unwrap();
    let (ok, out) = agentls(home.path(), &["doctor"]);
    assert!(!ok, "the default agent's mode does not exist:\n{out}");
    assert!(
        out.contains(&format!(
            "started: agentls-demo {} opens a session with modes ask, read-only (starts in ask)\n",
            env!("CARGO_PKG_VERSION")
        )),
        "{out}"
    );
    assert!(
        out.contains("the configured mode \"cautious\" is NOT one of them"),
        "{out}"
    );
    assert!(
        out.contains("started, but NO ANSWER to initialize"),
        "{out}"
    );
    assert!(out.ends_with("1 problem found\n"), "{out}");
}

#[test]
fn a_broken_config_is_a_problem_not_a_crash() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("config/agentls");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        "[review]\nmaxPreviewLines = \"many\"\n",
    )
    .unwrap();
    let (ok, out) = agentls(home.path(), &["doctor"]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("problem: agentls config") && out.contains("review.maxPreviewLines"),
        "{out}"
    );
}

/// `AGENTLS_CONFIG` naming a file that is not there is a mistake to point out, not a quiet
/// fallback to the defaults.
#[test]
fn a_missing_file_named_by_agentls_config_is_a_problem() {
    let home = tempfile::tempdir().unwrap();
    let named = home.path().join("typo.toml");
    let (ok, out) = agentls_with(home.path(), &["doctor"], Some(&named));
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!(
            "problem: agentls config ({}): AGENTLS_CONFIG names this file, which does not exist",
            named.display()
        )),
        "{out}"
    );
}

/// `agentls demo` runs the whole loop with the built-in agent: the file ends up changed, and
/// the chat the answer went to reads the whole turn in order.
#[test]
fn demo_walks_through_prompt_review_and_accept() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("demo");
    let (ok, out) = agentls(home.path(), &["demo", dir.to_str().unwrap()]);
    assert!(ok, "{out}");
    assert_in_order(
        &out,
        &[
            "2. Prompting demo",
            "3. The proposal is a review",
            "Accept all changes (2) from demo",
            "4. The editor applied 2 edit(s) as one undo step",
            "5. The turn ended: demo: end_turn",
            "6. The chat document now reads:",
            "│ uppercase notes.txt",
            "│ Hello from the demo agent.",
            "│ ✓ Read notes.txt",
            "│ _demo: end_turn",
            "7. The editor saves notes.txt",
        ],
    );
    let notes = std::fs::read_to_string(dir.join("notes.txt")).unwrap();
    assert_eq!(
        notes,
        "Shopping\nTODO: BUY MILK\neggs and bread\nTODO: CALL THE PLUMBER\n"
    );
}

/// Without a folder, the demo leaves nothing behind: not its temporary folder, not a chat or a
/// session in the user's state folder.
#[test]
fn demo_in_a_temporary_folder_leaves_nothing_behind() {
    let home = tempfile::tempdir().unwrap();
    let (ok, out) = agentls(home.path(), &["demo"]);
    assert!(ok, "{out}");
    let first = out.lines().next().unwrap();
    let file = first.rsplit(" edits ").next().unwrap();
    let folder = std::path::Path::new(file)
        .parent()
        .unwrap()
        .parent()
        .unwrap();
    assert!(folder.starts_with(std::env::temp_dir()), "{first}");
    assert!(!folder.exists(), "{} is left behind", folder.display());
    assert!(out.contains("│ _demo: end_turn"), "{out}");
    assert!(
        !home.path().join(".local/state/agentls").exists(),
        "the demo wrote to the user's state folder"
    );
}

/// Panics unless every piece occurs in `text`, each after the one before.
fn assert_in_order(text: &str, pieces: &[&str]) {
    let mut rest = text;
    for piece in pieces {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => panic!("missing {piece:?}, or out of order, in:\n{text}"),
        }
    }
}

/// Editors log every stderr line of a server as an error: on a pipe, stderr carries warnings and
/// errors only, while the log file keeps the routine `info` lines.
#[test]
fn routine_logs_stay_off_a_piped_stderr_and_go_to_the_log_file() {
    let home = tempfile::tempdir().unwrap();
    let log = home.path().join("agentls.log");
    let out = Command::new(env!("CARGO_BIN_EXE_agentls"))
        .arg("--log-file")
        .arg(&log)
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env_remove("AGENTLS_LOG")
        .env_remove("AGENTLS_CONFIG")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run agentls");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains(" INFO "), "{stderr}");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains(" INFO ") && logged.contains("exiting"),
        "{logged}"
    );
}
