//! Processes as the tests see them through `/proc`: whether one still runs.

/// Whether `pid` runs (a zombie waiting to be reaped by its parent does not).
pub fn runs(pid: impl std::fmt::Display) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|s| !s.trim_start().starts_with('Z'))
    })
}

/// The state letter of `pid` (`R`, `S`, `T` stopped, `Z` zombie …), `None` when it is gone.
pub fn state(pid: impl std::fmt::Display) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')').next()?.trim_start().chars().next()
}

/// The direct children of `pid` (of all its threads), from `/proc/<pid>/task/*/children`.
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut children: Vec<u32> = tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect();
    children.sort_unstable();
    children.dedup();
    children
}

/// The command line of `pid`, its arguments joined by spaces (empty when it is gone).
pub fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|raw| {
            raw.split(|b| *b == 0)
                .map(|arg| String::from_utf8_lossy(arg).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
                .trim_end()
                .to_owned()
        })
        .unwrap_or_default()
}

/// What `/proc/<pid>/` says about a process's use of resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Resident set size, in KiB (`VmRSS`).
    pub rss_kib: u64,
    /// Open file descriptors (entries of `fd/`).
    pub fds: usize,
    /// Threads (`Threads`).
    pub threads: usize,
}

/// The resources `pid` uses now; `None` when it is gone.
pub fn usage(pid: u32) -> Option<Usage> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        line[name.len()..].split_whitespace().next()?.parse().ok()
    };
    Some(Usage {
        rss_kib: field("VmRSS:")?,
        threads: field("Threads:")? as usize,
        fds: std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count(),
    })
}
