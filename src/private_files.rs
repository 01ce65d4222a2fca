//! agentls's own files outside the editor (chats and their records, discovery files, the
//! editor-tools records, logs): folders 0700, files 0600, and nothing written through a trap.
//! A folder is opened once ([`PrivateDir::open`]) after checking that nobody else could have
//! put or swapped anything on the way to it, and every file is then created or opened relative
//! to that open folder without following a symlink (`O_NOFOLLOW`; `O_EXCL` for a new file; a
//! file replaced whole is written under a fresh name and renamed over the old one). Whatever
//! is in the way (a symlink, another user's file or folder, a folder others may write to) is
//! refused with a [`PrivateError::Unsafe`] that says what and why. Blocking: call it off the
//! async workers.

use std::fs::File;
use std::io::{Read as _, Write as _};
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags};

/// Why a private file or folder could not be had.
#[derive(Debug, thiserror::Error)]
pub enum PrivateError {
    /// Something is in the way that agentls must not write through or into.
    #[error("{} is not safe to write to: {why}", path.display())]
    Unsafe {
        /// Where.
        path: PathBuf,
        /// What is wrong there.
        why: String,
    },
    /// A new file's name is taken already (by a file, a folder or a symlink).
    #[error("{} exists already", path.display())]
    Exists {
        /// Where.
        path: PathBuf,
    },
    /// The file system said no.
    #[error("{}: {source}", path.display())]
    Io {
        /// Where.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl PrivateError {
    fn io(path: &Path, source: impl Into<std::io::Error>) -> Self {
        Self::Io {
            path: path.to_owned(),
            source: source.into(),
        }
    }

    fn refused(path: &Path, why: impl Into<String>) -> Self {
        Self::Unsafe {
            path: path.to_owned(),
            why: why.into(),
        }
    }
}

/// Our effective user id.
pub fn our_uid() -> u32 {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Where agentls keeps its own state (chats, records): `$XDG_STATE_HOME/agentls`, else
/// `$HOME/.local/state/agentls`; each only when set to an absolute path. `None` when neither
/// is: agentls then keeps nothing rather than put it in a folder others share.
pub fn state_home() -> Option<PathBuf> {
    let absolute = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let state =
        absolute("XDG_STATE_HOME").or_else(|| Some(absolute("HOME")?.join(".local/state")))?;
    Some(state.join("agentls"))
}

/// What a user without a home is told when agentls would keep a file for them.
pub const NO_STATE_HOME: &str = "neither HOME nor XDG_STATE_HOME is set to an absolute path, \
    and agentls keeps its files only under your own home (or where your config file says)";

/// A folder of agentls's own, open: only we may write in it.
#[derive(Debug)]
pub struct PrivateDir {
    fd: OwnedFd,
    path: PathBuf,
}

/// Opens `name` in `dir` as a folder without following a symlink, making it 0700 first when
/// it is not there; it must be ours, and is made 0700 when others may read it.
fn own_subdir(dir: &OwnedFd, dir_path: &Path, name: &str) -> Result<OwnedFd, PrivateError> {
    let path = dir_path.join(name);
    match rustix::fs::mkdirat(dir, name, Mode::RWXU) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
        Err(e) => return Err(PrivateError::io(&path, e)),
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, name, flags, Mode::empty()).map_err(|e| match e {
        rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => {
            PrivateError::refused(&path, "it is a symlink or a file, not a folder")
        }
        e => PrivateError::io(&path, e),
    })?;
    let stat = rustix::fs::fstat(&fd).map_err(|e| PrivateError::io(&path, e))?;
    if stat.st_uid != our_uid() {
        let why = format!(
            "it belongs to uid {}, not to us (uid {})",
            stat.st_uid,
            our_uid()
        );
        return Err(PrivateError::refused(&path, why));
    }
    if stat.st_mode & 0o077 != 0 {
        rustix::fs::fchmod(&fd, Mode::RWXU).map_err(|e| PrivateError::io(&path, e))?;
    }
    Ok(fd)
}

/// Checks an existing folder on the way to a private one: it and what it points to (when it is
/// a symlink) belong to us or root, and when anyone may write to it, it is sticky (like
/// `/tmp`), so that nobody else can swap what is in it.
fn check_on_the_way(path: &Path) -> Result<(), PrivateError> {
    let uid = our_uid();
    let link = std::fs::symlink_metadata(path).map_err(|e| PrivateError::io(path, e))?;
    if link.file_type().is_symlink() && link.uid() != uid && link.uid() != 0 {
        let why = format!("it is a symlink of uid {}", link.uid());
        return Err(PrivateError::refused(path, why));
    }
    let meta = std::fs::metadata(path).map_err(|e| PrivateError::io(path, e))?;
    if !meta.is_dir() {
        return Err(PrivateError::refused(path, "it is not a folder"));
    }
    if meta.uid() != uid && meta.uid() != 0 {
        let why = format!("it belongs to uid {}, not to us (uid {uid})", meta.uid());
        return Err(PrivateError::refused(path, why));
    }
    if meta.mode() & 0o002 != 0 && meta.mode() & 0o1000 == 0 {
        return Err(PrivateError::refused(
            path,
            "every user may write to it and it is not sticky",
        ));
    }
    Ok(())
}

impl PrivateDir {
    /// Opens the folder at `path` (absolute, or taken from the current folder), making it and
    /// its missing parents 0700. Each existing folder above it must belong to us or root and,
    /// when anyone may write to it, be sticky (like `/tmp`), and a symlink on the way must too;
    /// from the last of them on, every step is taken relative to the
    /// one before without following a symlink. The folder itself is never a symlink; it must
    /// be ours, and is made 0700 when others may read it.
    pub fn open(path: &Path) -> Result<Self, PrivateError> {
        let path = std::path::absolute(path).map_err(|e| PrivateError::io(path, e))?;
        let names: Vec<&str> = path
            .components()
            .filter_map(|c| match c {
                Component::Normal(name) => name.to_str(),
                _ => None,
            })
            .collect();
        if names.is_empty() || names.len() + 1 != path.components().count() {
            return Err(PrivateError::refused(
                &path,
                "a plain absolute path is needed",
            ));
        }
        let mut above = PathBuf::from("/");
        check_on_the_way(&above)?;
        let mut depth = 0;
        while depth + 1 < names.len() && above.join(names[depth]).exists() {
            above.push(names[depth]);
            depth += 1;
            check_on_the_way(&above)?;
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let mut fd = rustix::fs::openat(rustix::fs::CWD, &above, flags, Mode::empty())
            .map_err(|e| PrivateError::io(&above, e))?;
        for name in &names[depth..] {
            fd = own_subdir(&fd, &above, name)?;
            above.push(name);
        }
        Ok(Self { fd, path })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its subfolder `name` (one component), made 0700 when missing.
    pub fn subdir(&self, name: &str) -> Result<Self, PrivateError> {
        let fd = own_subdir(&self.fd, &self.path, one_name(&self.path, name)?)?;
        Ok(Self {
            fd,
            path: self.path.join(name),
        })
    }

    fn open_file(&self, name: &str, flags: OFlags) -> Result<File, PrivateError> {
        let path = self.path.join(name);
        let name = one_name(&self.path, name)?;
        let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd = rustix::fs::openat(&self.fd, name, flags, Mode::RUSR | Mode::WUSR).map_err(
            |e| match e {
                rustix::io::Errno::LOOP => PrivateError::refused(&path, "it is a symlink"),
                rustix::io::Errno::EXIST => PrivateError::Exists { path: path.clone() },
                e => PrivateError::io(&path, e),
            },
        )?;
        let stat = rustix::fs::fstat(&fd).map_err(|e| PrivateError::io(&path, e))?;
        if !rustix::fs::FileType::from_raw_mode(stat.st_mode).is_file() {
            return Err(PrivateError::refused(&path, "it is not a regular file"));
        }
        if stat.st_uid != our_uid() {
            let why = format!("it belongs to uid {}, not to us", stat.st_uid);
            return Err(PrivateError::refused(&path, why));
        }
        // Blocking reads and writes from here on (it is a regular file).
        let file = File::from(fd);
        let _ = rustix::fs::fcntl_setfl(file.as_fd(), flags & OFlags::APPEND);
        Ok(file)
    }

    /// Creates the file `name` (0600) holding `bytes`; refused when anything is there already.
    pub fn create_new(&self, name: &str, bytes: &[u8]) -> Result<(), PrivateError> {
        let mut file = self.open_file(name, OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL)?;
        file.write_all(bytes)
            .map_err(|e| PrivateError::io(&self.path.join(name), e))
    }

    /// Replaces the file `name` with one holding `bytes`, atomically: readers see the old file
    /// or the new one. The new one is written under a fresh random name (created exclusively)
    /// and renamed over `name`, so a symlink there is replaced, never followed. With `sync`,
    /// it is on disk before the rename.
    pub fn replace(&self, name: &str, bytes: &[u8], sync: bool) -> Result<(), PrivateError> {
        let target = one_name(&self.path, name)?;
        let temp = format!(".{target}.{:016x}{TEMP_SUFFIX}", random_u64());
        let path = self.path.join(&temp);
        let mut file = self.open_file(&temp, OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL)?;
        let written = file
            .write_all(bytes)
            .and_then(|()| if sync { file.sync_all() } else { Ok(()) });
        let renamed = written
            .map_err(|e| PrivateError::io(&path, e))
            .and_then(|()| {
                rustix::fs::renameat(&self.fd, temp.as_str(), &self.fd, target)
                    .map_err(|e| PrivateError::io(&self.path.join(target), e))
            });
        if renamed.is_err() {
            let _ = rustix::fs::unlinkat(&self.fd, temp.as_str(), rustix::fs::AtFlags::empty());
        }
        renamed
    }

    /// Appends `bytes` to the file `name` (made 0600 when missing); with `sync`, they are on
    /// disk when it returns. Refused when `name` is not a regular file of ours.
    pub fn append(&self, name: &str, bytes: &[u8], sync: bool) -> Result<(), PrivateError> {
        let flags = OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE;
        let mut file = self.open_file(name, flags)?;
        file.write_all(bytes)
            .and_then(|()| if sync { file.sync_data() } else { Ok(()) })
            .map_err(|e| PrivateError::io(&self.path.join(name), e))
    }

    /// The bytes of the file `name`, at most `most` of them (its start); `None` when there is
    /// no such file. Refused when it is not a regular file of ours.
    pub fn read(&self, name: &str, most: u64) -> Result<Option<Vec<u8>>, PrivateError> {
        let file = match self.open_file(name, OFlags::RDONLY) {
            Err(PrivateError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                return Ok(None);
            }
            opened => opened?,
        };
        let mut bytes = Vec::new();
        file.take(most)
            .read_to_end(&mut bytes)
            .map_err(|e| PrivateError::io(&self.path.join(name), e))?;
        Ok(Some(bytes))
    }

    /// Whether the file `name` is a regular file of ours (a symlink is not).
    pub fn holds(&self, name: &str) -> bool {
        let Ok(name) = one_name(&self.path, name) else {
            return false;
        };
        rustix::fs::statat(&self.fd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).is_ok_and(
            |stat| {
                rustix::fs::FileType::from_raw_mode(stat.st_mode).is_file()
                    && stat.st_uid == our_uid()
            },
        )
    }
}

/// How the name of a file being written by [`PrivateDir::replace`] ends.
const TEMP_SUFFIX: &str = ".tmp";

/// The file a name of [`PrivateDir::replace`]'s temporary files is written for
/// (`.<name>.<16 hex digits>.tmp` → `<name>`); `None` for any other name.
pub fn being_written(temp: &str) -> Option<&str> {
    let rest = temp.strip_prefix('.')?.strip_suffix(TEMP_SUFFIX)?;
    let (name, random) = rest.rsplit_once('.')?;
    (random.len() == 16 && random.bytes().all(|b| b.is_ascii_hexdigit())).then_some(name)
}

/// `name` when it is one plain component (no `/`, not `.` or `..`, not empty).
fn one_name<'n>(dir: &Path, name: &'n str) -> Result<&'n str, PrivateError> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(PrivateError::refused(
            &dir.join(name),
            "a file name of one component is needed",
        ));
    }
    Ok(name)
}

/// A random number for temporary names (not a secret: the file is created exclusively).
fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_err() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        return now ^ u64::from(std::process::id());
    }
    u64::from_ne_bytes(bytes)
}

/// Opens the file at `path` to append to it (made 0600 when missing), for a log the user named:
/// its folder is theirs to choose, but the file itself is never a symlink and must be a regular
/// file of ours.
pub fn open_to_append(path: &Path) -> std::io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() || meta.uid() != our_uid() {
        return Err(std::io::Error::other(
            "not a regular file of ours (a symlink, a device, or another user's file)",
        ));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    }

    #[test]
    fn folders_are_0700_and_files_0600_whatever_the_umask() {
        let base = tempfile::tempdir().unwrap();
        let deep = base.path().join("state/agentls/chats");
        let dir = PrivateDir::open(&deep).unwrap();
        for made in ["state", "state/agentls", "state/agentls/chats"] {
            assert_eq!(mode(&base.path().join(made)), 0o700, "{made}");
        }
        let sub = dir.subdir("ws-1").unwrap();
        sub.create_new("a.md", b"hello").unwrap();
        sub.replace(".rec", b"one", true).unwrap();
        assert_eq!(being_written(".x.md.0123456789abcdef.tmp"), Some("x.md"));
        assert_eq!(being_written(".x.md.tmp"), None);
        sub.append("log", b"x", true).unwrap();
        for file in ["a.md", ".rec", "log"] {
            assert_eq!(mode(&deep.join("ws-1").join(file)), 0o600, "{file}");
        }
        assert_eq!(sub.read("a.md", 3).unwrap().unwrap(), b"hel");
        assert_eq!(sub.read("none", 3).unwrap(), None);
        assert!(sub.holds("a.md") && !sub.holds("none"));
        // An existing folder others may read is made private.
        std::fs::set_permissions(&deep, std::fs::Permissions::from_mode(0o755)).unwrap();
        PrivateDir::open(&deep).unwrap();
        assert_eq!(mode(&deep), 0o700);
    }

    #[test]
    fn nothing_is_written_through_a_symlink() {
        let base = tempfile::tempdir().unwrap();
        let victim = base.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let dir = PrivateDir::open(&base.path().join("chats")).unwrap();
        let link = base.path().join("chats/trap");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let refused = dir.append("trap", b"reply", false);
        assert!(
            matches!(refused, Err(PrivateError::Unsafe { .. })),
            "{refused:?}"
        );
        let taken = dir.create_new("trap", b"x");
        assert!(
            matches!(taken, Err(PrivateError::Exists { .. })),
            "{taken:?}"
        );
        assert!(matches!(
            dir.read("trap", 9),
            Err(PrivateError::Unsafe { .. })
        ));
        assert!(!dir.holds("trap"));
        // Replacing swaps the link for a file; what it pointed to stays as it was.
        dir.replace("trap", b"ours", false).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(std::fs::read_to_string(&link).unwrap(), "ours");
        // A folder that is a symlink is refused, at the end of the path or as a subfolder.
        let elsewhere = base.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, base.path().join("chats/ws")).unwrap();
        assert!(matches!(dir.subdir("ws"), Err(PrivateError::Unsafe { .. })));
        let linked = base.path().join("linked");
        std::os::unix::fs::symlink(&elsewhere, &linked).unwrap();
        assert!(matches!(
            PrivateDir::open(&linked),
            Err(PrivateError::Unsafe { .. })
        ));
        assert!(std::fs::read_dir(&elsewhere).unwrap().next().is_none());
        // Names of more than one component are refused.
        assert!(dir.create_new("../escape", b"x").is_err());
        assert!(!base.path().join("escape").exists());
    }

    #[test]
    fn a_folder_anyone_may_write_to_is_no_way_to_a_private_one() {
        let base = tempfile::tempdir().unwrap();
        let shared = base.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        let refused = PrivateDir::open(&shared.join("chats"));
        assert!(
            matches!(refused, Err(PrivateError::Unsafe { .. })),
            "{refused:?}"
        );
        assert!(!shared.join("chats").exists());
        // Sticky, like /tmp: nobody can swap what is ours in it.
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        PrivateDir::open(&shared.join("chats")).unwrap();
    }

    /// Another account's symlink or folder on the way to the chats: refused. Only root can
    /// make a file of another account, so this runs as root (in CI).
    #[cfg_attr(not(feature = "real-peers"), ignore = "needs root (CI runs it)")]
    #[test]
    fn another_accounts_symlink_or_folder_is_refused() {
        assert_eq!(our_uid(), 0, "this test runs as root");
        let nobody = Some(65534);
        let base = tempfile::tempdir().unwrap();
        let target = base.path().join("target");
        std::fs::create_dir(&target).unwrap();
        let planted = base.path().join("planted");
        std::os::unix::fs::symlink(&target, &planted).unwrap();
        std::os::unix::fs::lchown(&planted, nobody, nobody).unwrap();
        let refused = PrivateDir::open(&planted.join("chats"));
        assert!(
            matches!(refused, Err(PrivateError::Unsafe { .. })),
            "{refused:?}"
        );
        assert!(!target.join("chats").exists());
        let theirs = base.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::lchown(&theirs, nobody, nobody).unwrap();
        for path in [theirs.clone(), theirs.join("chats")] {
            let refused = PrivateDir::open(&path);
            assert!(
                matches!(refused, Err(PrivateError::Unsafe { .. })),
                "{refused:?}"
            );
        }
        assert!(!theirs.join("chats").exists());
    }

    #[test]
    fn a_log_file_is_never_a_symlink() {
        let base = tempfile::tempdir().unwrap();
        let victim = base.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let log = base.path().join("agentls.log");
        std::os::unix::fs::symlink(&victim, &log).unwrap();
        assert!(open_to_append(&log).is_err());
        std::fs::remove_file(&log).unwrap();
        open_to_append(&log).unwrap().write_all(b"line\n").unwrap();
        assert_eq!(mode(&log), 0o600);
    }
}
