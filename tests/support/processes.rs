//! Processes as the tests see them through `/proc`: whether one still runs.

/// Whether `pid` runs (a zombie waiting to be reaped by its parent does not).
pub fn runs(pid: impl std::fmt::Display) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|s| !s.trim_start().starts_with('Z'))
    })
}
