//! The log of what the loopback ports turn away, bounded: anyone on the machine can knock, and
//! a line per attempt would let them fill the editor's LSP log (a reconnect loop made 14.6 MB
//! in 75 s). Each kind of refusal is logged as a warning the first time, then at most once per
//! [`WINDOW`], with how many were left unsaid since; the others only at the `debug` level.

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use tokio::time::Instant;

/// The shortest time between two lines of one kind.
pub const WINDOW: Duration = Duration::from_secs(60);

/// One kind's last line and what came after it unsaid.
#[derive(Debug)]
struct Said {
    at: Instant,
    unsaid: u64,
}

fn said() -> &'static Mutex<HashMap<&'static str, Said>> {
    static SAID: OnceLock<Mutex<HashMap<&'static str, Said>>> = OnceLock::new();
    SAID.get_or_init(Mutex::default)
}

/// A refusal of `kind` happened (on `port`, for `detail`): logged as a warning unless one of its
/// kind was within the last [`WINDOW`], in which case it is only counted for the next line.
pub fn refused(kind: &'static str, port: u16, detail: impl Display) {
    let now = Instant::now();
    let unsaid = {
        let mut said = said().lock().unwrap_or_else(|e| e.into_inner());
        match said.get_mut(kind) {
            Some(last) if now.duration_since(last.at) < WINDOW => {
                last.unsaid += 1;
                tracing::debug!(port, "{kind}: {detail}");
                return;
            }
            Some(last) => {
                let unsaid = last.unsaid;
                *last = Said { at: now, unsaid: 0 };
                unsaid
            }
            None => {
                said.insert(kind, Said { at: now, unsaid: 0 });
                0
            }
        }
    };
    if unsaid == 0 {
        tracing::warn!(port, "{kind}: {detail}");
    } else {
        tracing::warn!(
            port,
            "{kind}: {detail} (and {unsaid} more like it since this was last logged)"
        );
    }
}

/// How many of `kind` went unsaid since its last line (for tests).
#[cfg(test)]
fn unsaid(kind: &str) -> u64 {
    said()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(kind)
        .map_or(0, |s| s.unsaid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_kind_is_said_once_a_window_with_a_count() {
        const KIND: &str = "test refusal";
        for _ in 0..1000 {
            refused(KIND, 1, "knock");
        }
        assert_eq!(unsaid(KIND), 999, "only the first was logged");
        tokio::time::advance(WINDOW).await;
        refused(KIND, 1, "knock");
        assert_eq!(
            unsaid(KIND),
            0,
            "the next window logged again, with the count"
        );
        refused("another kind", 1, "knock");
        assert_eq!(unsaid("another kind"), 0, "kinds are counted apart");
    }
}
