//! Discovery files: how a terminal agent finds this server. Both protocols use one JSON file per
//! server process in a well-known directory, readable only by the user (0600 in a 0700
//! directory), written atomically (temp file + rename) and removed when the server stops. Files
//! of ours whose process died are cleaned at start; `agentls doctor` lists them all.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The `ideName` / `ideInfo.name` we write, and how we recognise our own files.
pub const IDE_NAME: &str = "agentls";

/// One discovery file this process owns; removed on [`DiscoveryFile::remove`] or drop.
#[derive(Debug)]
pub struct DiscoveryFile {
    path: PathBuf,
    removed: bool,
}

impl DiscoveryFile {
    /// Writes `contents` to `path` (creating its directory 0700).
    pub fn create(path: PathBuf, contents: &Value) -> std::io::Result<Self> {
        if let Some(dir) = path.parent() {
            private_dir(dir)?;
        }
        write_private(&path, contents)?;
        Ok(Self {
            path,
            removed: false,
        })
    }

    /// Replaces the contents (e.g. the workspace folders changed).
    pub fn rewrite(&self, contents: &Value) -> std::io::Result<()> {
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
) -> std::io::Result<DiscoveryFile> {
    for stale in clean_stale(found) {
        tracing::info!(path = %stale.display(), "removed a stale {kind} of a dead agentls");
    }
    DiscoveryFile::create(path, contents)
}

/// Creates `dir` (and parents) and makes it private to the user.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    // A directory another tool made earlier keeps its owner; we only tighten the mode. A shared
    // one we do not own (under /tmp) stays as it is: our file in it is 0600 all the same, and
    // agents read only files owned by their own user.
    if let Err(e) = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)) {
        tracing::warn!(dir = %dir.display(), "cannot make the directory private: {e}");
    }
    Ok(())
}

/// Writes JSON to `path` atomically with mode 0600: readers see the old file or the new one.
fn write_private(path: &Path, contents: &Value) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temp)?;
        file.write_all(&serde_json::to_vec(contents).map_err(std::io::Error::other)?)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
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

/// Discovery files in `dir` whose name ends with `suffix`, sorted by path. `pid_of` reads the
/// writer's pid from the contents or the file name; `name_of` the IDE's name.
pub fn scan(
    dir: &Path,
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
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(suffix) && !n.starts_with('.'))
        })
        .map(|path| {
            let contents = std::fs::read(&path)
                .ok()
                .and_then(|bytes| serde_json::from_slice(&bytes).ok())
                .unwrap_or(Value::Null);
            let pid = pid_of(&path, &contents);
            let ours = name_of(&contents) == Some(IDE_NAME);
            Found {
                alive: pid.is_some_and(pid_alive),
                path,
                contents,
                pid,
                ours,
            }
        })
        .collect();
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found
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

    #[test]
    fn pid_alive_knows_ourselves() {
        assert!(pid_alive(std::process::id()));
        assert!(!pid_alive(0));
        assert!(!pid_alive(2_000_000_000));
    }
}
