//! Discovery files: how a terminal agent finds this server. Both protocols use one JSON file per
//! server process in a well-known directory, readable only by the user (0600 in a 0700
//! directory), written atomically (a temp file of random name created with `O_EXCL`, then
//! renamed) and removed when the server stops. Files of ours whose process died are cleaned at
//! start; `agentls doctor` lists them all.
//!
//! The companion protocol's directory lives in the shared temp dir, where another user may have
//! made it (or a parent) first. A directory we do not own, one others may write to, or one under
//! a parent another user controls is refused: no discovery file is written there, and the reason
//! is logged. Scans read only small regular files of our own user, never following symlinks.

use std::io::Read as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::private_files::{PrivateDir, PrivateError, our_uid};

/// The `ideName` / `ideInfo.name` we write, and how we recognise our own files.
pub const IDE_NAME: &str = "agentls";

/// Discovery files are a few hundred bytes; anything bigger than this is not one and is not read.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;

/// Why a discovery file was not written.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// The directory (or a parent) is not safe to put a token in.
    #[error("refusing {dir} for discovery files: {why}")]
    UnsafeDir {
        /// The directory we meant to write in.
        dir: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// Creating, writing or renaming failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// One discovery file this process owns; removed on [`DiscoveryFile::remove`] or drop.
#[derive(Debug)]
pub struct DiscoveryFile {
    path: PathBuf,
    removed: bool,
}

impl DiscoveryFile {
    /// Writes `contents` to `path` (creating its directory 0700, refusing an unsafe one).
    pub fn create(path: PathBuf, contents: &Value) -> Result<Self, DiscoveryError> {
        write_private(&path, contents)?;
        crate::guard::watch_file(&path);
        Ok(Self {
            path,
            removed: false,
        })
    }

    /// Replaces the contents (e.g. the workspace folders changed).
    pub fn rewrite(&self, contents: &Value) -> Result<(), DiscoveryError> {
        if self.removed {
            return Ok(());
        }
        write_private(&self.path, contents)
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Deletes it (idempotent).
    pub fn remove(&mut self) {
        if !self.removed {
            self.removed = true;
            if let Err(e) = std::fs::remove_file(&self.path)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(path = %self.path.display(), "cannot remove discovery file: {e}");
            }
        }
    }
}

impl Drop for DiscoveryFile {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Removes the files of ours among `found` whose process is gone (logging each as a stale
/// `kind`), then writes `contents` to `path` as [`DiscoveryFile::create`] does.
pub fn create_replacing_stale(
    found: &[Found],
    kind: &str,
    path: PathBuf,
    contents: &Value,
) -> Result<DiscoveryFile, DiscoveryError> {
    for stale in clean_stale(found) {
        tracing::info!(path = %stale.display(), "removed a stale {kind} of a dead agentls");
    }
    DiscoveryFile::create(path, contents)
}

impl From<PrivateError> for DiscoveryError {
    fn from(e: PrivateError) -> Self {
        match e {
            PrivateError::Unsafe { path, why } => Self::UnsafeDir { dir: path, why },
            e @ PrivateError::Exists { .. } => Self::Io(std::io::Error::other(e.to_string())),
            PrivateError::Io { source, .. } => Self::Io(source),
        }
    }
}

/// Writes JSON to `path` atomically with mode 0600 in a private directory (see
/// [`PrivateDir`]): readers see the old file or the new one, and nothing planted in the
/// directory (a file, a symlink) receives the contents.
fn write_private(path: &Path, contents: &Value) -> Result<(), DiscoveryError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let bytes = serde_json::to_vec(contents).map_err(std::io::Error::other)?;
    PrivateDir::open(dir)?.replace(&name, &bytes, true)?;
    Ok(())
}

/// Whether a process with this id exists (a process of another user counts).
pub fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let result = unsafe { libc::kill(pid, 0) };
    result == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// A discovery file found on disk.
#[derive(Debug, Clone)]
pub struct Found {
    /// Where.
    pub path: PathBuf,
    /// Its JSON (`Null` when it does not parse).
    pub contents: Value,
    /// The process that wrote it, when it says.
    pub pid: Option<u32>,
    /// Whether that process is alive.
    pub alive: bool,
    /// Whether agentls wrote it.
    pub ours: bool,
}

/// Discovery files in `dir` whose name starts with `prefix` and ends with `suffix`, sorted by
/// path. Only regular files of our own user up to [`MAX_FILE_BYTES`] are read (no symlink is
/// followed, no FIFO or device opened); others are left out. `pid_of` reads the writer's pid
/// from the contents or the file name; `name_of` the IDE's name. Blocking: call it off the
/// async workers.
pub fn scan(
    dir: &Path,
    prefix: &str,
    suffix: &str,
    pid_of: impl Fn(&Path, &Value) -> Option<u32>,
    name_of: impl Fn(&Value) -> Option<&str>,
) -> Vec<Found> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<Found> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with(prefix) && n.ends_with(suffix) && !n.starts_with('.')
            })
        })
        .filter_map(|path| {
            let bytes = read_small_own_file(&path)?;
            let contents = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let pid = pid_of(&path, &contents);
            let ours = name_of(&contents) == Some(IDE_NAME);
            Some(Found {
                alive: pid.is_some_and(pid_alive),
                path,
                contents,
                pid,
                ours,
            })
        })
        .collect();
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found
}

/// The bytes of `path` if it is a regular file (not a symlink) of our user of at most
/// [`MAX_FILE_BYTES`]. Checked before opening, and again on the opened file (it may have been
/// swapped in between); opened without following symlinks and without blocking on a FIFO.
fn read_small_own_file(path: &Path) -> Option<Vec<u8>> {
    let uid = our_uid();
    let acceptable = |meta: &std::fs::Metadata| {
        meta.file_type().is_file() && meta.uid() == uid && meta.len() <= MAX_FILE_BYTES
    };
    let before = std::fs::symlink_metadata(path).ok()?;
    if !acceptable(&before) {
        tracing::debug!(path = %path.display(), "skipped: not a small regular file of ours");
        return None;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let opened = file.metadata().ok()?;
    if !acceptable(&opened) || opened.ino() != before.ino() || opened.dev() != before.dev() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= MAX_FILE_BYTES).then_some(bytes)
}

/// Removes files of ours whose process is gone; returns their paths.
pub fn clean_stale(found: &[Found]) -> Vec<PathBuf> {
    found
        .iter()
        .filter(|f| f.ours && f.pid.is_some() && !f.alive)
        .filter(|f| std::fs::remove_file(&f.path).is_ok())
        .map(|f| f.path.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use serde_json::json;

    use super::*;

    #[test]
    fn files_are_private_atomic_and_removed_on_drop() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("a/ide");
        let path = dir.join("123.lock");
        let file = DiscoveryFile::create(path.clone(), &json!({"x": 1})).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir), 0o700);
        file.rewrite(&json!({"x": 2})).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), r#"{"x":2}"#);
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temp file left"
        );
        drop(file);
        assert!(!path.exists());
    }

    #[test]
    fn stale_files_of_ours_are_cleaned_and_others_kept() {
        let dir = tempfile::tempdir().unwrap();
        let write =
            |name: &str, v: Value| std::fs::write(dir.path().join(name), v.to_string()).unwrap();
        // A pid far above any pid_max is never alive.
        write(
            "1.lock",
            json!({"pid": 2_000_000_000u32, "ideName": IDE_NAME}),
        );
        write(
            "2.lock",
            json!({"pid": 2_000_000_000u32, "ideName": "other"}),
        );
        write(
            "3.lock",
            json!({"pid": std::process::id(), "ideName": IDE_NAME}),
        );
        write("4.txt", json!({}));
        let found = scan(
            dir.path(),
            "",
            ".lock",
            |_, v| v["pid"].as_u64().map(|p| p as u32),
            |v| v["ideName"].as_str(),
        );
        assert_eq!(found.len(), 3);
        assert!(found[2].alive && found[2].ours);
        let cleaned = clean_stale(&found);
        assert_eq!(cleaned, vec![dir.path().join("1.lock")]);
        assert!(dir.path().join("2.lock").exists());
        assert!(dir.path().join("3.lock").exists());
    }

    fn set_mode(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn refused(result: Result<DiscoveryFile, DiscoveryError>) -> String {
        match result {
            Err(e @ DiscoveryError::UnsafeDir { .. }) => e.to_string(),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn directories_others_control_are_refused() {
        let base = tempfile::tempdir().unwrap();
        let shared = base.path().join("tmp");
        std::fs::create_dir(&shared).unwrap();

        // A parent anyone may write to (not sticky): the directory could be swapped.
        set_mode(&shared, 0o777);
        let path = shared.join("gemini/ide/f.json");
        let why = refused(DiscoveryFile::create(path.clone(), &json!({})));
        assert!(why.contains("every user may write"), "{why}");
        assert!(!path.exists());

        // Sticky, like /tmp: fine; a directory of ours others may write to is made private.
        set_mode(&shared, 0o1777);
        std::fs::create_dir_all(shared.join("gemini/ide")).unwrap();
        set_mode(&shared.join("gemini/ide"), 0o777);
        let file = DiscoveryFile::create(path.clone(), &json!({})).unwrap();
        let mode = std::fs::metadata(shared.join("gemini/ide")).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        drop(file);

        // The directory itself a symlink (to a private directory of ours, even).
        let real = base.path().join("real");
        std::fs::create_dir(&real).unwrap();
        set_mode(&real, 0o700);
        let link = base.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let why = refused(DiscoveryFile::create(link.join("f.json"), &json!({})));
        assert!(why.contains("symlink"), "{why}");
        assert_eq!(std::fs::read_dir(&real).unwrap().count(), 0);

        // Another user's directory (only root can make one to test with).
        if our_uid() == 0 {
            let theirs = base.path().join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            set_mode(&theirs, 0o755);
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            let why = refused(DiscoveryFile::create(theirs.join("f.json"), &json!({})));
            assert!(why.contains("belongs to uid 65534"), "{why}");
            assert_eq!(std::fs::read_dir(&theirs).unwrap().count(), 0);
            let mode = std::fs::metadata(&theirs).unwrap().mode() & 0o777;
            assert_eq!(mode, 0o755, "not ours to change");
        }
    }

    #[test]
    fn a_file_planted_under_a_predictable_temp_name_receives_nothing() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("ide");
        std::fs::create_dir(&dir).unwrap();
        set_mode(&dir, 0o700);
        let victim = base.path().join("victim");
        std::fs::write(&victim, "").unwrap();
        let path = dir.join("1.lock");
        // The names a writer using `.{name}.{pid}.tmp` would open.
        let planted = dir.join(format!(".1.lock.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, &planted).unwrap();

        let _file = DiscoveryFile::create(path.clone(), &json!({"authToken": "t"})).unwrap();
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "",
            "token leaked"
        );
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(
            meta.file_type().is_file(),
            "the discovery file is a regular file"
        );
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            r#"{"authToken":"t"}"#
        );
        assert!(
            std::fs::symlink_metadata(&planted)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn scans_read_only_small_regular_files_of_ours() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("ide");
        std::fs::create_dir(&dir).unwrap();
        let entry = |pid: u32| json!({"pid": pid, "ideInfo": {"name": IDE_NAME}});
        let write = |name: &str, v: &Value| std::fs::write(dir.join(name), v.to_string()).unwrap();
        write("p-1.json", &entry(1));
        // FIFOs: opening one to read blocks until a writer comes.
        mkfifo(&dir.join("p-2.json"));
        mkfifo(&dir.join("other.json"));
        // A symlink to a file of ours elsewhere.
        let elsewhere = base.path().join("elsewhere.json");
        std::fs::write(&elsewhere, entry(3).to_string()).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.join("p-3.json")).unwrap();
        // Too big to be a discovery file.
        let mut big = entry(4);
        big["pad"] = json!("x".repeat(MAX_FILE_BYTES as usize));
        write("p-4.json", &big);
        // Another user's file (only root can make one to test with).
        if our_uid() == 0 {
            write("p-5.json", &entry(5));
            std::os::unix::fs::chown(dir.join("p-5.json"), Some(65534), None).unwrap();
        }

        let (done, result) = std::sync::mpsc::channel();
        let scanned = dir.clone();
        std::thread::spawn(move || {
            let found = scan(
                &scanned,
                "p-",
                ".json",
                |_, v| v["pid"].as_u64().map(|p| p as u32),
                |v| v["ideInfo"]["name"].as_str(),
            );
            let _ = done.send(found);
        });
        let found = result.recv_timeout(std::time::Duration::from_secs(5));
        if found.is_err() {
            // Let a reader stuck on a FIFO go before failing.
            for fifo in ["p-2.json", "other.json"] {
                let _ = std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(dir.join(fifo));
            }
        }
        let found = found.expect("the scan hung on a FIFO");
        let paths: Vec<_> = found.iter().map(|f| f.path.clone()).collect();
        assert_eq!(paths, vec![dir.join("p-1.json")]);
        assert!(found[0].ours);
    }

    #[test]
    fn pid_alive_knows_ourselves() {
        assert!(pid_alive(std::process::id()));
        assert!(!pid_alive(0));
        assert!(!pid_alive(2_000_000_000));
    }
}
