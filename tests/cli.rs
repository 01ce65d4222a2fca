//! The command line: `--version`, `--help`, and `doctor` against a real config file.

use std::process::Command;

fn agentls(home: &std::path::Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_agentls"))
        .args(args)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env_remove("AGENTLS_CONFIG")
        .output()
        .expect("run agentls");
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
    assert!(ok);
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
        out.contains("agent ghost: agentls-no-such-agent [] (NOT FOUND on PATH)"),
        "{out}"
    );
    assert!(
        out.contains("env API_TOKEN=<redacted>") && !out.contains("s3cret"),
        "{out}"
    );
    assert!(out.contains("default agent: ghost"), "{out}");
}

#[test]
fn doctor_without_a_config_file_says_so() {
    let home = tempfile::tempdir().unwrap();
    let (ok, out) = agentls(home.path(), &["doctor"]);
    assert!(ok);
    assert!(out.contains("(not found; using defaults)"), "{out}");
    assert!(out.contains("default agent: demo"), "{out}");
    assert!(out.contains("agent demo (built in): "), "{out}");
    assert!(out.contains("[\"demo-agent\"] (found at "), "{out}");
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
    assert!(ok);
    assert!(
        out.contains("problem: agentls config") && out.contains("review.maxPreviewLines"),
        "{out}"
    );
}

/// `agentls demo` runs the whole loop with the built-in agent: the file ends up changed.
#[test]
fn demo_walks_through_prompt_review_and_accept() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("demo");
    let (ok, out) = agentls(home.path(), &["demo", dir.to_str().unwrap()]);
    assert!(ok, "{out}");
    for step in [
        "4. The proposal is a review",
        "Accept all changes (2) from demo",
        "5. The editor applied 2 edit(s) as one undo step",
        "6. The turn ended: demo: end_turn",
        "7. The editor saves notes.txt",
    ] {
        assert!(out.contains(step), "missing {step:?} in:\n{out}");
    }
    let notes = std::fs::read_to_string(dir.join("notes.txt")).unwrap();
    assert_eq!(
        notes,
        "Shopping\nTODO: BUY MILK\neggs and bread\nTODO: CALL THE PLUMBER\n"
    );
}
