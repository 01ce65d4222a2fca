//! The README's Neovim one-liner for terminal agents, run by a real Neovim 0.11: it asks
//! agentls for `agentls.terminalEnv` and opens a terminal with that environment (a shell command
//! stands in for `claude` and records what it got).
//!
//! Neovim comes from `AGENTLS_TEST_NVIM`. The test is ignored without the feature `real-peers`
//! (scripts/test.sh turns it on); with it, a missing Neovim fails it.

mod support;

use std::path::PathBuf;
use std::process::Command;

use support::peers::{self, Sandbox};

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn the_readme_one_liner_gives_the_terminal_the_env() {
    let nvim = peers::binary("AGENTLS_TEST_NVIM", "Neovim");
    let sandbox = Sandbox::create();
    let (root, workspace) = (&sandbox.root, &sandbox.workspace);
    let file = workspace.join("a.txt");
    std::fs::write(&file, "hello\n").unwrap();
    let output = root.join("env.out");
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut command = Command::new(nvim);
    command
        .args(["--headless", "--clean", "-l"])
        .arg(manifest.join("tests/nvim/terminal_env.lua"))
        .arg(env!("CARGO_BIN_EXE_agentls"))
        .arg(&file)
        .arg(&output);
    let run = sandbox
        .isolate(&mut command)
        .env("TMPDIR", root.join("tmp"))
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CLAUDE_CODE_SSE_PORT")
        .env_remove("AGENTLS_CONFIG")
        .env_remove("NVIM")
        .env_remove("VIMRUNTIME")
        .output()
        .expect("run nvim");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "nvim failed: {}\n{stderr}",
        run.status
    );
    let env = std::fs::read_to_string(&output).unwrap();
    // Neovim does not wait for its servers to exit; agentls follows within moments.
    let locks = || {
        std::fs::read_dir(root.join("home/.claude/ide"))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while locks() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(locks(), 0, "the lockfile is gone once Neovim quit");
    let port = env
        .lines()
        .find_map(|l| l.strip_prefix("CLAUDE_CODE_SSE_PORT="))
        .unwrap_or_else(|| panic!("no CLAUDE_CODE_SSE_PORT in {env:?}"));
    assert!(port.parse::<u16>().is_ok(), "{env}");
    assert!(env.contains("GEMINI_CLI_IDE_SERVER_PORT="), "{env}");
    let workspace_line = format!("GEMINI_CLI_IDE_WORKSPACE_PATH={}", workspace.display());
    assert!(env.lines().any(|l| l == workspace_line), "{env}");
}
