//! What the benches share to report timings and memory: nearest-rank quantiles, a one-line
//! summary of samples, milliseconds, and a memory line of `/proc/<pid>/status`.

// Each bench includes this file and uses what it needs of it.
#![allow(dead_code)]

use std::time::Duration;

/// Milliseconds, fractional.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The `q` quantile of `samples` (nearest rank).
pub fn quantile(samples: &[Duration], q: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// "median 1.2 ms, p95 3.4 ms, p99 4.5 ms, max 5.6 ms (n = 50)".
pub fn describe(samples: &[Duration]) -> String {
    format!(
        "median {:.2} ms, p95 {:.2} ms, p99 {:.2} ms, max {:.2} ms (n = {})",
        ms(quantile(samples, 0.5)),
        ms(quantile(samples, 0.95)),
        ms(quantile(samples, 0.99)),
        ms(quantile(samples, 1.0)),
        samples.len()
    )
}

/// A memory line of `/proc/pid/status` (`VmRSS:`, `VmHWM:`, `RssAnon:`), in bytes.
pub fn memory(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(key)).unwrap();
    let kb: u64 = line[key.len()..]
        .trim()
        .trim_end_matches(" kB")
        .parse()
        .unwrap();
    kb * 1024
}
