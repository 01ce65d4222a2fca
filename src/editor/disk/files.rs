//! The disk and the workspace boundary: which paths an agent may touch, reading files, and
//! writing them atomically (never over a read-only one). Buffers are not this module's business.

use std::io::Write;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Component, Path, PathBuf};

use thiserror::Error;

/// Why a file could not be read or written.
#[derive(Debug, Error)]
pub enum FileError {
    /// Agents must name files by absolute, normalised paths.
    #[error("{0}: paths must be absolute and must not contain `..`")]
    NotAbsolute(PathBuf),
    /// The path (or a symlink on it) leads outside every workspace folder.
    #[error(
        "{0}: outside the workspace folders (set `fs.allowOutsideWorkspace = true` to permit this)"
    )]
    OutsideWorkspace(PathBuf),
    /// The file is read-only (for everyone, or for us): it is not replaced.
    #[error("{0}: the file is read-only; nothing was written (make it writable to let changes in)")]
    ReadOnly(PathBuf),
    /// Reading or writing the disk failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
}

impl FileError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_owned(),
            source,
        }
    }

    /// Whether the file simply does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

/// Refuses paths that are relative or contain `..`.
pub fn check_shape(path: &Path) -> Result<(), FileError> {
    if !path.is_absolute() || path.components().any(|c| c == Component::ParentDir) {
        return Err(FileError::NotAbsolute(path.to_owned()));
    }
    Ok(())
}

/// Refuses paths that are relative, contain `..`, or resolve (through symlinks) outside every
/// folder in `folders` — with no folders, every path is outside. A file that does not exist
/// yet is judged by its nearest existing ancestor. A folder that no longer exists (removed
/// while agentls runs) holds nothing: reading there fails, and a write would bring the folder
/// back for one file, so it is refused too.
pub fn check_inside(path: &Path, folders: &[PathBuf]) -> Result<(), FileError> {
    check_shape(path)?;
    let resolved = resolve_existing_prefix(path);
    let inside = folders.iter().find(|folder| {
        let folder = std::fs::canonicalize(folder).unwrap_or_else(|_| folder.to_path_buf());
        resolved.starts_with(&folder)
    });
    match inside {
        Some(folder) if !folder.is_dir() => Err(FileError::io(
            folder,
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the workspace folder no longer exists; nothing was read or written there",
            ),
        )),
        Some(_) => Ok(()),
        None => Err(FileError::OutsideWorkspace(path.to_owned())),
    }
}

/// `path` with its longest existing prefix canonicalised (symlinks resolved) and the rest kept.
fn resolve_existing_prefix(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(canonical) = std::fs::canonicalize(&existing) {
            return rest
                .iter()
                .rev()
                .fold(canonical, |acc, part| acc.join(part));
        }
        match (
            existing.file_name().map(ToOwned::to_owned),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Reads a UTF-8 text file.
pub async fn read(path: &Path) -> Result<String, FileError> {
    // One trip to a blocking thread for both steps (each trip is two thread switches).
    let owned = path.to_path_buf();
    let read = tokio::task::spawn_blocking(move || read_now(&owned)).await;
    read.unwrap_or_else(|e| Err(FileError::io(path, std::io::Error::other(e))))
}

/// `Ok` when `path` is a regular file: a FIFO (or a device) would block a read, and its
/// caller, until someone writes to it.
fn regular_file(path: &Path) -> Result<(), FileError> {
    let meta = std::fs::metadata(path).map_err(|e| FileError::io(path, e))?;
    if !meta.is_file() {
        let not_a_file = std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file (a directory, FIFO, socket or device)",
        );
        return Err(FileError::io(path, not_a_file));
    }
    Ok(())
}

/// [`read`], on the calling thread.
fn read_now(path: &Path) -> Result<String, FileError> {
    regular_file(path)?;
    std::fs::read_to_string(path).map_err(|e| FileError::io(path, e))
}

/// At most some bytes of a text, and whether the rest was left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bounded {
    /// The text kept (whole characters).
    pub text: String,
    /// Whether more followed it.
    pub cut: bool,
}

impl Bounded {
    /// The first `most` bytes of `text` (cut at a character).
    pub fn of(mut text: String, most: usize) -> Self {
        if text.len() <= most {
            return Self { text, cut: false };
        }
        let mut end = most;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        Self { text, cut: true }
    }
}

/// Lines `line..line+limit` (1-based, line breaks kept, as [`crate::editor::access::select_lines`] takes them)
/// of the file at `path`, at most `most` bytes of them: however big the file, no more than that
/// is held (lines before `line` are read and dropped).
pub async fn read_bounded(
    path: &Path,
    line: Option<u32>,
    limit: Option<u32>,
    most: usize,
) -> Result<Bounded, FileError> {
    let owned = path.to_path_buf();
    let read = tokio::task::spawn_blocking(move || read_bounded_now(&owned, line, limit, most));
    read.await
        .unwrap_or_else(|e| Err(FileError::io(path, std::io::Error::other(e))))
}

fn read_bounded_now(
    path: &Path,
    line: Option<u32>,
    limit: Option<u32>,
    most: usize,
) -> Result<Bounded, FileError> {
    use std::io::BufRead as _;
    regular_file(path)?;
    let file = std::fs::File::open(path).map_err(|e| FileError::io(path, e))?;
    let mut reader = std::io::BufReader::new(file);
    let mut skipped = Vec::new();
    for _ in 1..line.unwrap_or(1) {
        skipped.clear();
        if reader
            .read_until(b'\n', &mut skipped)
            .map_err(|e| FileError::io(path, e))?
            == 0
        {
            break;
        }
    }
    let mut kept = Vec::new();
    let mut lines = 0;
    let mut cut = false;
    while limit.is_none_or(|limit| lines < limit) {
        // Never more than one byte past the limit: enough to know that something was cut.
        let room = most.saturating_add(1).saturating_sub(kept.len()) as u64;
        let read = std::io::Read::take(&mut reader, room)
            .read_until(b'\n', &mut kept)
            .map_err(|e| FileError::io(path, e))?;
        if read == 0 {
            break;
        }
        if kept.len() > most {
            kept.truncate(most);
            cut = true;
            break;
        }
        lines += 1;
    }
    let text = match String::from_utf8(kept) {
        Ok(text) => text,
        // A character the limit cut in two: the whole ones before it.
        Err(e) if cut && e.utf8_error().error_len().is_none() => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).unwrap_or_default()
        }
        Err(e) => {
            let invalid = std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error());
            return Err(FileError::io(path, invalid));
        }
    };
    Ok(Bounded { text, cut })
}

/// Refuses `path` when it names an existing file that is read-only: one nobody may write (mode
/// 0444 — root too, who could), or that we may not. Renaming a new file over it would succeed
/// all the same, so [`write_atomic`] asks this first; a file that does not exist passes.
pub fn check_replaceable(path: &Path) -> Result<(), FileError> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    let no_write_bit = meta.permissions().mode() & 0o222 == 0;
    let denied = rustix::fs::accessat(
        rustix::fs::CWD,
        path,
        rustix::fs::Access::WRITE_OK,
        rustix::fs::AtFlags::EACCESS,
    )
    .is_err();
    if meta.is_file() && (no_write_bit || denied) {
        return Err(FileError::ReadOnly(path.to_owned()));
    }
    Ok(())
}

/// Removes the file at `path` (a symlink itself, never what it points to).
pub async fn remove(path: &Path) -> Result<(), FileError> {
    tokio::fs::remove_file(path)
        .await
        .map_err(|e| FileError::io(path, e))
}

/// Writes `content` to `path` atomically: a temporary file in the same directory, flushed, given
/// the old file's permissions (a new file gets 0666 less the umask), then renamed over it.
/// Readers see the old or the new file, never half of one. A symlink is written through: the
/// file it names changes, the link stays. A read-only file is never replaced
/// ([`FileError::ReadOnly`]).
pub async fn write_atomic(path: &Path, content: &str) -> Result<(), FileError> {
    let path_buf = path.to_owned();
    let content = content.to_owned();
    tokio::task::spawn_blocking(move || write_atomic_blocking(&path_buf, &content))
        .await
        .map_err(|e| FileError::io(path, std::io::Error::other(e)))?
}

fn write_atomic_blocking(path: &Path, content: &str) -> Result<(), FileError> {
    let io = |e| FileError::io(path, e);
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    let resolved;
    let path = if is_link {
        resolved = std::fs::canonicalize(path).map_err(io)?;
        resolved.as_path()
    } else {
        path
    };
    check_replaceable(path)?;
    let dir = path
        .parent()
        .ok_or_else(|| FileError::NotAbsolute(path.to_owned()))?;
    std::fs::create_dir_all(dir).map_err(io)?;
    let permissions = std::fs::metadata(path).ok().map(|m| m.permissions());
    let mut builder = tempfile::Builder::new();
    builder.prefix(".agentls-");
    if permissions.is_none() {
        // What any new file gets (the umask applies), not a temp file's private 0600.
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut temp = builder.tempfile_in(dir).map_err(io)?;
    // Through the file itself: an error names the file being replaced, not the temporary one.
    temp.as_file_mut()
        .write_all(content.as_bytes())
        .map_err(io)?;
    temp.as_file().sync_all().map_err(io)?;
    if let Some(permissions) = permissions {
        temp.as_file().set_permissions(permissions).map_err(io)?;
    }
    temp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlink_that_escapes_is_outside() {
        let ws = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(other.path(), ws.path().join("link")).unwrap();
        let folders = vec![ws.path().to_path_buf()];
        assert!(check_inside(&ws.path().join("src/new.rs"), &folders).is_ok());
        assert!(matches!(
            check_inside(&ws.path().join("link/secret"), &folders),
            Err(FileError::OutsideWorkspace(_))
        ));
        assert!(matches!(
            check_inside(&ws.path().join("../x"), &folders),
            Err(FileError::NotAbsolute(_))
        ));
        assert!(matches!(
            check_inside(Path::new("/etc/passwd"), &folders),
            Err(FileError::OutsideWorkspace(_))
        ));
        assert!(matches!(
            check_inside(&ws.path().join("a.rs"), &[]),
            Err(FileError::OutsideWorkspace(_))
        ));
    }

    #[tokio::test]
    async fn atomic_write_keeps_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("script.sh");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o751)).unwrap();
        write_atomic(&path, "new").await.unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o751);
    }

    #[tokio::test]
    async fn a_read_only_file_is_not_replaced() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("locked.txt");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
        let inode = std::fs::metadata(&path).unwrap().ino();
        let refused = write_atomic(&path, "new").await.unwrap_err();
        assert!(matches!(refused, FileError::ReadOnly(_)), "{refused}");
        let link = dir.path().join("link.txt");
        std::os::unix::fs::symlink("locked.txt", &link).unwrap();
        assert!(matches!(
            write_atomic(&link, "new").await,
            Err(FileError::ReadOnly(_))
        ));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode);
        assert!(check_replaceable(&dir.path().join("new.txt")).is_ok());
    }

    /// The process's umask, from `/proc/self/status`.
    fn umask() -> u32 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("Umask:")).unwrap();
        u32::from_str_radix(line["Umask:".len()..].trim(), 8).unwrap()
    }

    #[tokio::test]
    async fn a_new_file_gets_the_usual_mode_and_a_symlink_is_written_through() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("new.txt");
        write_atomic(&new, "x").await.unwrap();
        let mode = std::fs::metadata(&new).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666 & !umask());

        let real = dir.path().join("AGENTS.md");
        std::fs::write(&real, "old").unwrap();
        let link = dir.path().join("CLAUDE.md");
        std::os::unix::fs::symlink("AGENTS.md", &link).unwrap();
        write_atomic(&link, "new").await.unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
    }

    #[tokio::test]
    async fn reading_a_fifo_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let read = tokio::time::timeout(std::time::Duration::from_secs(5), read(&fifo)).await;
        let error = read.expect("no hang").unwrap_err();
        assert!(error.to_string().contains("not a regular file"), "{error}");
    }
}
