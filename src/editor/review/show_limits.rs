//! How often an origin may put a file in front of the user (`openFile`): a burst, then a steady
//! rate. A client that opens files faster than anyone reads them gets a refusal, not thousands
//! of `window/showDocument` requests in the editor; the user is told once while it lasts.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// Files an origin may show at once.
pub const BURST: f64 = 10.0;
/// And after that, how many per second.
pub const PER_SECOND: f64 = 2.0;

/// Each origin's allowance, by origin key.
#[derive(Debug, Default)]
pub struct ShowLimits {
    buckets: HashMap<String, Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
    /// Whether the user was told of a refusal since the origin last showed a file.
    told: bool,
}

/// Whether a file may be shown, and whether the user should now hear that one was not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowance {
    /// Show it.
    Granted,
    /// Refused; `tell` the first time in a run of refusals.
    Refused {
        /// Whether this is the first refusal since the last file shown.
        tell: bool,
    },
}

impl ShowLimits {
    /// Takes one file from `origin`'s allowance at `now`.
    pub fn take(&mut self, origin: &str, now: Instant) -> Allowance {
        let bucket = self.buckets.entry(origin.to_owned()).or_insert(Bucket {
            tokens: BURST,
            at: now,
            told: false,
        });
        let refill = now.saturating_duration_since(bucket.at).as_secs_f64() * PER_SECOND;
        bucket.tokens = (bucket.tokens + refill).min(BURST);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            bucket.told = false;
            return Allowance::Granted;
        }
        let tell = !bucket.told;
        bucket.told = true;
        Allowance::Refused { tell }
    }

    /// Forgets `origin` (it went away).
    pub fn forget(&mut self, origin: &str) {
        self.buckets.remove(origin);
    }

    /// How long until `origin` may show a file again (zero: now).
    pub fn wait(&self, origin: &str) -> Duration {
        self.buckets.get(origin).map_or(Duration::ZERO, |b| {
            Duration::from_secs_f64(((1.0 - b.tokens) / PER_SECOND).max(0.0))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_steady_rate_and_one_word_per_run_of_refusals() {
        let mut limits = ShowLimits::default();
        let start = Instant::now();
        for _ in 0..10 {
            assert_eq!(limits.take("a", start), Allowance::Granted);
        }
        assert_eq!(limits.take("a", start), Allowance::Refused { tell: true });
        assert_eq!(limits.take("a", start), Allowance::Refused { tell: false });
        assert_eq!(limits.wait("a"), Duration::from_millis(500));
        // Another origin has its own allowance.
        assert_eq!(limits.take("b", start), Allowance::Granted);
        let later = start + Duration::from_millis(500);
        assert_eq!(limits.take("a", later), Allowance::Granted);
        assert_eq!(limits.take("a", later), Allowance::Refused { tell: true });
        // Ten seconds later the whole burst is back, no more.
        let much_later = later + Duration::from_secs(10);
        for _ in 0..10 {
            assert_eq!(limits.take("a", much_later), Allowance::Granted);
        }
        assert!(matches!(
            limits.take("a", much_later),
            Allowance::Refused { .. }
        ));
        limits.forget("a");
        assert_eq!(limits.take("a", much_later), Allowance::Granted);
    }
}
