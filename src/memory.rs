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

/// Gives the heap's free memory back to the system now, and the pages of code that ran.
pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator.
    unsafe {
        libc::malloc_trim(0);
    }
    page_out_code();
}

/// Hands the pages of agentls's own code and read-only data back to the page cache
/// (`MADV_PAGEOUT`): what start-up or a turn ran stays resident otherwise, 64 KB around each
/// function it touched. Clean pages of the binary: the kernel reads them again when they run,
/// and skips those another process maps too (a second editor window's agentls).
fn page_out_code() {
    #[cfg(target_os = "linux")]
    {
        let (Ok(exe), Ok(maps)) = (
            std::fs::read_link("/proc/self/exe"),
            std::fs::read_to_string("/proc/self/maps"),
        ) else {
            return;
        };
        for (start, end) in read_only_mappings_of(&maps, &exe) {
            // SAFETY: the range is a mapping of this process that nothing writes (read-only
            // pages of its own file); paging it out only drops pages the kernel can read again.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_PAGEOUT);
            }
        }
    }
}

/// The address ranges of the read-only mappings of `file` in `maps` (`/proc/self/maps`).
fn read_only_mappings_of(maps: &str, file: &std::path::Path) -> Vec<(usize, usize)> {
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (range, perms) = (fields.next()?, fields.next()?);
            let path = fields.nth(3)?;
            if std::path::Path::new(path) != file || perms.contains('w') {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            Some((start, end))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_read_only_mappings_of_the_binary_are_named() {
        let maps = "\
5600-5700 r--p 00000000 fd:01 12 /usr/bin/agentls
5700-5900 r-xp 00100000 fd:01 12 /usr/bin/agentls
5900-5a00 rw-p 00300000 fd:01 12 /usr/bin/agentls
7f00-7f10 r-xp 00000000 fd:01 99 /usr/lib/libc.so.6
7f20-7f30 rw-p 00000000 00:00 0
";
        assert_eq!(
            read_only_mappings_of(maps, std::path::Path::new("/usr/bin/agentls")),
            vec![(0x5600, 0x5700), (0x5700, 0x5900)]
        );
    }
}
