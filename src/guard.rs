//! What outlives the server: a small watcher, `agentls guard`, that cleans up after it however
//! it ends. An editor may end its server with SIGKILL (Helix does when it quits), and then
//! nothing of the server's own cleanup runs: its discovery files stay, and the agents it
//! started, with every process they started (daemons detached with `setsid` or a double fork
//! among them), live on with init as their parent.
//!
//! The server starts the watcher first thing ([`start`]), holding the write end of a pipe to
//! its stdin, and writes there the path of every discovery file it makes ([`watch_file`]).
//! Every process the server starts carries the run's mark in its environment ([`mark`]), and
//! so does everything those start, unless it clears its environment. However the server ends,
//! the kernel closes the pipe: the watcher reads the end of its input, removes the files still
//! there that name the server's pid, and ends every process carrying the mark (SIGTERM, then
//! SIGKILL for those left after 300 ms), within a second. A server that stops
//! normally has done all that itself already.
//!
//! Only the binary arranges this; the library alone (tests, benches) does not.

use std::io::{BufRead as _, Write as _};
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The environment variable that marks the processes of one server's run.
pub const MARK_VAR: &str = "AGENTLS_RUN";

/// How long the processes of a run get to end on SIGTERM before SIGKILL.
const TERM_GRACE: Duration = Duration::from_millis(300);
/// The longest the watcher goes on ending them.
const END_WITHIN: Duration = Duration::from_secs(1);
/// How often it looks again whether they are gone.
const POLL: Duration = Duration::from_millis(20);

/// The watcher's stdin and the run's mark, once [`start`] ran.
struct Watcher {
    stdin: Mutex<ChildStdin>,
    mark: String,
}

static WATCHER: OnceLock<Watcher> = OnceLock::new();

/// Starts the watcher (`<this executable> guard <mark>`), in a process group of its own so that
/// a signal to the server's group leaves it to clean up. A failure is logged: the files are
/// then removed only by the server or by the next agentls that finds them stale, and only the
/// server ends what agents started.
pub fn start() {
    let mark = format!("{}-{:016x}", std::process::id(), random());
    let started = std::env::current_exe().and_then(|me| {
        use std::os::unix::process::CommandExt as _;
        Command::new(me)
            .args(["guard", &mark])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
    });
    match started {
        Ok(mut child) => {
            if let Some(stdin) = child.stdin.take() {
                let stdin = Mutex::new(stdin);
                let _ = WATCHER.set(Watcher { stdin, mark });
            }
        }
        Err(e) => tracing::warn!("no watcher to clean up after a killed server: {e}"),
    }
}

/// The run's mark (`(MARK_VAR, value)`) for the environment of a process the server starts;
/// `None` when there is no watcher.
pub fn mark() -> Option<(&'static str, &'static str)> {
    WATCHER.get().map(|w| (MARK_VAR, w.mark.as_str()))
}

/// Tells the watcher about a discovery file just written (nothing when there is none).
pub fn watch_file(path: &Path) {
    if let Some(watcher) = WATCHER.get() {
        let mut stdin = watcher.stdin.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(stdin, "{}", path.display());
    }
}

/// The watcher itself: reads paths until its input ends (the server is gone), then removes
/// those files that still name the server (their name or contents hold its pid) and ends every
/// process carrying `mark`.
pub fn run(mark: &str) {
    let server = std::os::unix::process::parent_id().to_string();
    let paths: Vec<String> = std::io::stdin()
        .lock()
        .lines()
        .map_while(Result::ok)
        .collect();
    end_marked(mark);
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

/// Ends every process whose environment holds `MARK_VAR=mark`: SIGTERM, then SIGKILL after
/// [`TERM_GRACE`], until none is left or [`END_WITHIN`] has passed.
fn end_marked(mark: &str) {
    let wanted = format!("{MARK_VAR}={mark}");
    let start = Instant::now();
    loop {
        let marked = marked_processes(&wanted);
        if marked.is_empty() || start.elapsed() >= END_WITHIN {
            return;
        }
        let signal = if start.elapsed() < TERM_GRACE {
            libc::SIGTERM
        } else {
            libc::SIGKILL
        };
        for pid in marked {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe {
                libc::kill(pid, signal);
            }
        }
        std::thread::sleep(POLL);
    }
}

/// The pids of the living (not zombie) processes whose environment holds `wanted`, a whole
/// `NAME=value` entry.
fn marked_processes(wanted: &str) -> Vec<libc::pid_t> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                environ
                    .split(|b| *b == 0)
                    .any(|entry| entry == wanted.as_bytes())
            })
        })
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
            })
        })
        .collect()
}

/// A random number for the run's mark.
fn random() -> u64 {
    let mut bytes = [0u8; 8];
    let _ = getrandom::fill(&mut bytes);
    u64::from_ne_bytes(bytes) ^ u64::from(std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marked_processes_are_found_by_their_whole_environment_entry() {
        let mark = format!("test-{:016x}", random());
        let mut marked = Command::new("sleep")
            .arg("30")
            .env(MARK_VAR, &mark)
            .spawn()
            .unwrap();
        let mut other = Command::new("sleep")
            .arg("30")
            .env(MARK_VAR, format!("{mark}x"))
            .spawn()
            .unwrap();
        let found = marked_processes(&format!("{MARK_VAR}={mark}"));
        assert_eq!(found, vec![marked.id() as libc::pid_t]);
        end_marked(&mark);
        assert!(marked.wait().unwrap().code().is_none(), "ended by a signal");
        assert!(
            other.try_wait().unwrap().is_none(),
            "another run's process lives on"
        );
        other.kill().unwrap();
        other.wait().unwrap();
    }
}
