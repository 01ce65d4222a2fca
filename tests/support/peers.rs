//! Real peers the tests drive (editors, agent CLIs): where their binaries are, and for an
//! editor's batch session a sandbox (a workspace and empty home/XDG dirs) and a run with a
//! deadline whose last JSON line on stdout is the result.

use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The binary named by the environment variable `var` (`what` in messages). A test that needs
/// one is ignored without the feature `real-peers`; with it, a missing peer fails the test here,
/// saying how to install it.
pub fn binary(var: &str, what: &str) -> PathBuf {
    let Some(path) = std::env::var_os(var).filter(|p| !p.is_empty()) else {
        panic!(
            "{what} is missing: {var} is not set; run `eval \"$(scripts/test-tools.sh)\"` to \
             install {what} and set it (scripts/test.sh does both)"
        );
    };
    let path = PathBuf::from(path);
    assert!(
        path.is_file(),
        "{var}={} is not a file; run `eval \"$(scripts/test-tools.sh)\"` to install {what}",
        path.display()
    );
    path
}

/// A fresh temp dir (`root`) with a workspace (a `.git` root) and empty home, XDG and tmp dirs.
pub struct Sandbox {
    /// Removes it all when dropped.
    pub dir: tempfile::TempDir,
    /// The temp dir's canonical path.
    pub root: PathBuf,
    /// `root/workspace`.
    pub workspace: PathBuf,
}

impl Sandbox {
    /// Creates it.
    pub fn create() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let workspace = root.join("workspace");
        std::fs::create_dir_all(workspace.join(".git")).unwrap();
        for sub in ["home", "config", "state", "data", "cache", "tmp"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        Self {
            dir,
            root,
            workspace,
        }
    }

    /// Points `command`'s home and XDG dirs into the sandbox and runs it in the workspace.
    pub fn isolate<'c>(&self, command: &'c mut Command) -> &'c mut Command {
        command
            .current_dir(&self.workspace)
            .env("HOME", self.root.join("home"))
            .env("XDG_CONFIG_HOME", self.root.join("config"))
            .env("XDG_STATE_HOME", self.root.join("state"))
            .env("XDG_DATA_HOME", self.root.join("data"))
            .env("XDG_CACHE_HOME", self.root.join("cache"))
    }

    /// Runs `command` (the editor `name`) with no stdin and its output in `root/<name>.stdout`
    /// and `.stderr`; kills it and fails when it takes longer than `timeout`.
    pub fn run(self, command: &mut Command, name: &str, timeout: Duration) -> Session {
        let stdout_path = self.root.join(format!("{name}.stdout"));
        let stderr_path = self.root.join(format!("{name}.stderr"));
        let mut child = command
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout_path).unwrap())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = child
                .try_wait()
                .unwrap_or_else(|e| panic!("wait for {name}: {e}"))
            {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                panic!("{name} took longer than {timeout:?} (killed); stderr:\n{stderr}");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let stdout = std::fs::read_to_string(&stdout_path).unwrap_or_default();
        let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        let result = stdout
            .lines()
            .rev()
            .find_map(|line| serde_json::from_str::<Value>(line).ok())
            .unwrap_or(Value::Null);
        Session {
            status,
            result,
            stderr,
            dir: self.dir,
        }
    }
}

/// One finished editor session and everything needed to explain a failure.
pub struct Session {
    /// How the editor exited.
    pub status: ExitStatus,
    /// The last JSON line it printed (`Null` without one).
    pub result: Value,
    /// Its stderr.
    pub stderr: String,
    /// The sandbox, kept for its log files.
    pub dir: tempfile::TempDir,
}

impl Session {
    /// The editor's stderr, headed `name`, and the last `bytes` of each log file in `logs`
    /// (relative to the sandbox).
    pub fn context(&self, name: &str, logs: &[&str], bytes: usize) -> String {
        let mut context = format!("--- {name} stderr ---\n{}", self.stderr);
        for log in logs {
            let path = self.dir.path().join(log);
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let start = text.len().saturating_sub(bytes);
            let start = (start..text.len())
                .find(|i| text.is_char_boundary(*i))
                .unwrap_or(0);
            context.push_str(&format!(
                "\n--- {} (tail) ---\n{}",
                path.display(),
                &text[start..]
            ));
        }
        context
    }
}
