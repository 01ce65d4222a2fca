//! Processes agents leave behind. A daemon an agent's command detaches (`setsid … &`, a double
//! fork) is in no process group agentls signals; on Linux agentls is therefore a child
//! subreaper ([`adopt`]): such orphans are reparented to agentls instead of init, adopted ones
//! that exit are reaped, and at the end every descendant still running is ended, within a time
//! limit ([`end_descendants`]). agentls's own children are tokio's to reap, never waited for
//! here: every child agentls starts goes through [`spawn`], which registers it.

use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::process::{Child, Command};

/// Pids of the children agentls started itself (tokio reaps those).
static OWN: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

/// How often the end looks again whether descendants are gone.
const POLL: Duration = Duration::from_millis(20);

fn own() -> MutexGuard<'static, BTreeSet<u32>> {
    OWN.lock().unwrap_or_else(|e| e.into_inner())
}

/// A child of agentls's own, registered until it is dropped (after it was reaped).
#[derive(Debug)]
pub struct OwnChild(u32);

impl Drop for OwnChild {
    fn drop(&mut self) {
        own().remove(&self.0);
    }
}

/// Starts `command` as a child of agentls's own: registered before the reaper could see it
/// exit, so that only tokio waits for it. It carries the run's mark ([`crate::guard::mark`]),
/// so that it and everything it starts end with a server that is killed.
pub fn spawn(command: &mut Command) -> std::io::Result<(Child, OwnChild)> {
    if let Some((var, mark)) = crate::guard::mark() {
        command.env(var, mark);
    }
    let mut own = own();
    let child = command.spawn()?;
    let pid = child.id().unwrap_or(0);
    own.insert(pid);
    Ok((child, OwnChild(pid)))
}

/// Makes this process the reaper of its descendants' orphans (Linux; elsewhere a no-op) and
/// reaps adopted ones as they exit. Call once, from within the runtime, before agents start.
pub fn adopt() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl(2) with PR_SET_CHILD_SUBREAPER takes an integer and touches no memory.
        if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
            let e = std::io::Error::last_os_error();
            tracing::warn!(
                "cannot adopt orphaned processes; daemons agents detach may outlive agentls: {e}"
            );
            return;
        }
        let mut exits = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child())
        {
            Ok(exits) => exits,
            Err(e) => {
                tracing::warn!("cannot watch for exited orphans: {e}");
                return;
            }
        };
        tokio::spawn(async move {
            while exits.recv().await.is_some() {
                let _ = tokio::task::spawn_blocking(reap_adopted).await;
            }
        });
    }
}

/// Ends every descendant still running: SIGTERM, then SIGKILL after half of `limit`; returns
/// when none is left or `limit` has passed (then logs how many are left).
pub async fn end_descendants(limit: Duration) {
    let start = tokio::time::Instant::now();
    loop {
        let living = tokio::task::spawn_blocking(|| {
            reap_adopted();
            descendants()
        })
        .await
        .unwrap_or_default();
        if living.is_empty() {
            return;
        }
        let elapsed = start.elapsed();
        if elapsed >= limit {
            tracing::warn!(pids = ?living, "processes agents started outlive agentls");
            return;
        }
        let signal = if elapsed < limit / 2 {
            libc::SIGTERM
        } else {
            libc::SIGKILL
        };
        tracing::info!(pids = ?living, signal, "ending what agents left running");
        for pid in living {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe {
                libc::kill(pid as i32, signal);
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

/// A process as `/proc/<pid>/stat` tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Process {
    pid: u32,
    parent: u32,
    zombie: bool,
}

/// Parses a `/proc/<pid>/stat` line: `pid (comm) state ppid …` (`comm` may hold spaces and
/// parentheses, so the fields after it are found from the last `)`).
fn parse_stat(stat: &str) -> Option<Process> {
    let pid = stat.split_once(' ')?.0.parse().ok()?;
    let mut rest = stat.rsplit_once(')')?.1.split_whitespace();
    let state = rest.next()?;
    let parent = rest.next()?.parse().ok()?;
    Some(Process {
        pid,
        parent,
        zombie: state == "Z",
    })
}

/// Every process on the machine (none where there is no `/proc`).
fn processes() -> Vec<Process> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?))
        .collect()
}

/// The pids under `root` in `all` that still run (zombies do not).
fn living_under(root: u32, all: &[Process]) -> Vec<u32> {
    let mut found = Vec::new();
    let mut seen = BTreeSet::from([root]);
    let mut parents = vec![root];
    while let Some(parent) = parents.pop() {
        // A pid reused while /proc was read must not send the walk round in circles.
        for p in all
            .iter()
            .filter(|p| p.parent == parent && seen.insert(p.pid))
        {
            parents.push(p.pid);
            if !p.zombie {
                found.push(p.pid);
            }
        }
    }
    found.sort_unstable();
    found
}

/// This process's descendants that still run.
fn descendants() -> Vec<u32> {
    living_under(std::process::id(), &processes())
}

/// Reaps the exited children of this process that it adopted (not its own: tokio reaps those).
fn reap_adopted() {
    let me = std::process::id();
    let exited: Vec<u32> = processes()
        .into_iter()
        .filter(|p| p.parent == me && p.zombie)
        .map(|p| p.pid)
        .collect();
    if exited.is_empty() {
        return;
    }
    // Held while reaping, so that no child of our own is spawned, exits and is taken for an
    // orphan before it is registered.
    let own = own();
    for pid in exited.into_iter().filter(|pid| !own.contains(pid)) {
        let mut status = 0;
        // SAFETY: waitpid(2) writes only to `status`, a valid integer.
        unsafe {
            libc::waitpid(pid as i32, &mut status, libc::WNOHANG);
        }
        tracing::debug!(pid, "reaped an orphan an agent left");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_whatever_the_command_is_called() {
        let odd = "4242 (we ird) (name) Z 17 4242 4242 0 -1 4194560";
        assert_eq!(
            parse_stat(odd),
            Some(Process {
                pid: 4242,
                parent: 17,
                zombie: true
            })
        );
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn descendants_are_found_down_the_parent_chain_zombies_left_out() {
        let p = |pid, parent, zombie| Process {
            pid,
            parent,
            zombie,
        };
        let all = [
            p(10, 1, false),
            p(11, 10, false),
            p(12, 11, true),
            p(13, 12, false),
            p(20, 1, false),
        ];
        assert_eq!(living_under(10, &all), vec![11, 13]);
        assert!(living_under(20, &all).is_empty());
    }
}
