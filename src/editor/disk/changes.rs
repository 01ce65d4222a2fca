//! What a path the watcher reported says now: its text, a symbolic link (never followed), or
//! nothing, read without following links or waiting on a FIFO.

use std::path::PathBuf;
use std::time::SystemTime;

/// What a changed path on disk says now.
#[derive(Debug)]
pub enum DiskChange {
    /// A regular file holding `disk`, last modified at `modified`.
    Text {
        path: PathBuf,
        disk: String,
        modified: Option<SystemTime>,
    },
    /// A symbolic link (never followed), made at `modified`.
    Link {
        path: PathBuf,
        modified: Option<SystemTime>,
    },
    /// Nothing is there any more.
    Removed { path: PathBuf },
}

impl DiskChange {
    /// How many bytes of text it carries.
    pub fn text_bytes(&self) -> usize {
        match self {
            Self::Text { disk, .. } => disk.len(),
            Self::Link { .. } | Self::Removed { .. } => 0,
        }
    }
}

/// What a changed path says now, read on the calling (blocking) thread: its text, or that it
/// is now a symbolic link (never followed); `None` when it is gone or is not a text file.
pub fn read_changed(path: PathBuf) -> Option<DiskChange> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    // Not following a link, and not waiting on a FIFO: what is opened is what is looked at.
    let opened = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path);
    let mut file = match opened {
        Ok(file) => file,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            let modified = std::fs::symlink_metadata(&path).and_then(|m| m.modified());
            return Some(DiskChange::Link {
                path,
                modified: modified.ok(),
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Some(DiskChange::Removed { path });
        }
        Err(_) => return None,
    };
    let meta = file.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    let modified = meta.modified().ok();
    let mut disk = String::new();
    file.read_to_string(&mut disk).ok()?;
    Some(DiskChange::Text {
        path,
        disk,
        modified,
    })
}
