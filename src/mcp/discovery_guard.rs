//! Discovery files outlive a server that is killed (an editor that ends its server with
//! SIGKILL, as Helix does when it quits: 3 of 4 quits left a lockfile). The `agentls` binary
//! starts a small watcher, `agentls discovery-guard`, holding the write end of a pipe to its
//! stdin; the server writes there the path of every discovery file it makes. However the server
//! ends, the kernel closes that pipe: the watcher reads the end of its input and removes the
//! files still there that name the server's pid, then exits. A server that stops normally has
//! removed them itself already.
//!
//! Only the binary arranges this ([`start`]); the library alone (tests, benches) does not.

use std::io::{BufRead as _, Write as _};
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// The watcher's stdin, once [`start`] ran.
static WATCHER: OnceLock<Mutex<ChildStdin>> = OnceLock::new();

/// Starts the watcher (`<this executable> discovery-guard`), in a process group of its own so
/// that a signal to the server's group leaves it to clean up. A failure is logged: the files
/// are then removed only by the server or by the next agentls that finds them stale.
pub fn start() {
    let started = std::env::current_exe().and_then(|me| {
        use std::os::unix::process::CommandExt as _;
        Command::new(me)
            .arg("discovery-guard")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
    });
    match started {
        Ok(mut child) => {
            if let Some(stdin) = child.stdin.take() {
                let _ = WATCHER.set(Mutex::new(stdin));
            }
        }
        Err(e) => tracing::warn!("no discovery-file watcher: {e}"),
    }
}

/// Tells the watcher about a discovery file just written (nothing when there is none).
pub fn watch(path: &Path) {
    if let Some(watcher) = WATCHER.get() {
        let mut stdin = watcher.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(stdin, "{}", path.display());
    }
}

/// The watcher itself: reads paths until its input ends (the server is gone), then removes
/// those files that still name the server (their name or contents hold its pid).
pub fn run() {
    let server = std::os::unix::process::parent_id().to_string();
    let paths: Vec<String> = std::io::stdin()
        .lock()
        .lines()
        .map_while(Result::ok)
        .collect();
    for path in paths {
        let path = Path::new(&path);
        let named = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().contains(&server));
        let holds = std::fs::read_to_string(path).is_ok_and(|text| {
            text.contains(&format!("\"pid\":{server}"))
                || text.contains(&format!("\"pid\": {server}"))
        });
        if named || holds {
            let _ = std::fs::remove_file(path);
        }
    }
}
