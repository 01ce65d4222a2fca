//! How agentls's heap gives memory back. A streamed reply allocates and frees millions of small
//! pieces across the runtime's threads; glibc gives each thread that allocates an arena of its
//! own (up to eight per core) and keeps what is freed in them, so a flood used to leave its peak
//! resident long after. Two arenas serve agentls's few threads, and after a turn the free memory
//! at the top of each goes back to the system.

use std::time::Duration;

/// How long after a turn the heap is trimmed (its last pieces reach the chat and the editor).
const TRIM_AFTER: Duration = Duration::from_secs(1);

/// Caps the heap's arenas; call it first thing, before any thread starts.
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a tunable of the allocator; called before other threads run.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Gives the heap's free memory back to the system, a moment from now (after a turn).
pub fn give_back_soon() {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(async {
            tokio::time::sleep(TRIM_AFTER).await;
            give_back();
        });
    }
}

/// Gives the heap's free memory back to the system now.
pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator.
    unsafe {
        libc::malloc_trim(0);
    }
}
