//! A terminal program driven the way a user drives it: run in its own tmux server (its own
//! socket, so nothing is shared with other tests or the user's tmux), typed into with
//! `send-keys`, read with `capture-pane -p`, waited on with a deadline, and its screens saved as
//! evidence.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long any one screen may take to appear.
pub const SCREEN_WAIT: Duration = Duration::from_secs(20);

/// One program in a tmux server of its own; the server is killed when this is dropped.
pub struct Tmux {
    tmux: PathBuf,
    socket: String,
}

impl Tmux {
    /// Runs `shell` (a `sh -c` command line) on a `width`×`height` terminal.
    pub fn start(tmux: &Path, shell: &str, width: u16, height: u16) -> Self {
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, Ordering::SeqCst);
        let socket = format!("agentls-test-{}-{n}", std::process::id());
        let started = Command::new(tmux)
            .args(["-L", &socket, "-f", "/dev/null", "new-session", "-d"])
            .args(["-x", &width.to_string(), "-y", &height.to_string()])
            .arg(shell)
            .status()
            .unwrap();
        assert!(started.success(), "tmux new-session");
        Self {
            tmux: tmux.to_owned(),
            socket,
        }
    }

    /// Types `keys` (tmux key names: `Enter`, `Escape`, `C-w`, or plain text).
    pub fn keys(&self, keys: &[&str]) {
        let mut command = Command::new(&self.tmux);
        command.args(["-L", &self.socket, "send-keys"]).args(keys);
        assert!(command.status().unwrap().success(), "send-keys {keys:?}");
    }

    /// Types `text` literally, all at once.
    pub fn type_text(&self, text: &str) {
        self.keys(&["-l", text]);
    }

    /// Types `text` one character at a time, `every` apart, as a person does.
    pub fn type_slowly(&self, text: &str, every: Duration) {
        for c in text.chars() {
            self.type_text(&c.to_string());
            std::thread::sleep(every);
        }
    }

    /// The screen as text.
    pub fn screen(&self) -> String {
        let out = Command::new(&self.tmux)
            .args(["-L", &self.socket, "capture-pane", "-p"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the screen shows `needle`; returns the screen.
    pub fn wait_for(&self, needle: &str) -> String {
        self.wait_until(&format!("{needle:?}"), |screen| screen.contains(needle))
    }

    /// Waits until the screen is as `wanted` says (`what`, for the failure); returns it.
    pub fn wait_until(&self, what: &str, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + SCREEN_WAIT;
        loop {
            let screen = self.screen();
            if wanted(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "no {what} on the screen within {SCREEN_WAIT:?}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether the program has exited (the tmux server goes with its only pane).
    pub fn exited(&self) -> bool {
        !Command::new(&self.tmux)
            .args(["-L", &self.socket, "has-session"])
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap()
            .success()
    }

    /// Waits until the program has exited; panics with the screen after [`SCREEN_WAIT`].
    pub fn wait_exit(&self) {
        let deadline = Instant::now() + SCREEN_WAIT;
        while !self.exited() {
            assert!(
                Instant::now() < deadline,
                "still running after {SCREEN_WAIT:?}:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Saves `screen` as `<dir>/<name>.txt` when `dir` is given (evidence of a session; a
    /// failure to save is reported, not fatal).
    pub fn save(dir: Option<&Path>, name: &str, screen: &str) {
        let Some(dir) = dir else { return };
        if let Err(e) = std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(dir.join(format!("{name}.txt")), screen))
        {
            eprintln!("could not save the screen {name} in {}: {e}", dir.display());
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new(&self.tmux)
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}
