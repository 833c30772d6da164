//! The private scratch directory each confined server gets as `HOME`, `TMPDIR` and working
//! directory.
//!
//! Two halves:
//!
//! - **Inside the sandbox** the scratch path is a fresh tmpfs of bounded size
//!   ([`crate::Limits::disk`]), mounted in the sandbox's own mount namespace. What a server
//!   writes there never reaches the host's disk, cannot outgrow its cap (`write` and
//!   `fallocate` get `ENOSPC`), and is gone when the sandbox's last process is, whether
//!   Warden stopped it or died.
//! - **On the host** the same path is an empty directory, `BASE/warden-SERVER-PID-RANDOM`
//!   (mode 0700, Warden's own uid): it reserves the name and is where the tmpfs goes when a
//!   grant shows its parent. Nothing is ever written into it, and it is never handed to the
//!   server's uid.
//!
//! Warden may run as root, and the base directory may sit below directories other users
//! can write to, so the host half is handled as an attacker would want it not to be:
//!
//! - the base is reached one component at a time with `openat(O_NOFOLLOW)` from `/`, and
//!   each directory is checked with `fstat` *on the opened descriptor*: owned by root or by
//!   Warden's user, and not writable by group or others unless sticky (so nobody else can
//!   rename or replace what lies below it). The base itself must be owned by Warden's user,
//!   must not be writable by group or others, and must not be a symlink. A symlink on the
//!   way is followed only when root or Warden's user owns it. Anything else is refused with
//!   an error that names the directory and what is wrong with it;
//! - every later operation (create, open, remove) is relative to the opened base descriptor,
//!   never by path; the scratch directory is opened with `O_NOFOLLOW` right after `mkdirat`,
//!   and removed through its own descriptor, one `unlinkat` at a time, never following a
//!   symlink; it is only unlinked from the base if the entry is still the directory that
//!   was created;
//! - no `chown` or `chmod` ever follows a name.
//!
//! Directories left by a Warden that died (its pid no longer runs) are removed by the next
//! [`Scratch::create`] in the same base.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

use crate::SandboxError;
use crate::profile::safe_component;

/// Prefix of every scratch directory's name.
const PREFIX: &str = "warden-";

/// How many symlinks the walk to the base follows at most.
const MAX_SYMLINKS: u32 = 40;

/// How deep the removal of a scratch directory's contents goes at most.
const MAX_DEPTH: u32 = 64;

/// How many entries one removal (or one stale clean-up) deletes at most.
const MAX_ENTRIES: usize = 100_000;

/// How many stale directories one [`Scratch::create`] looks at at most.
const MAX_STALE_SCAN: usize = 4096;

/// Flags for opening a directory on the walk: no reading needed, only a handle.
#[cfg(target_os = "linux")]
const WALK_FLAGS: libc::c_int =
    libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
#[cfg(not(target_os = "linux"))]
const WALK_FLAGS: libc::c_int =
    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;

/// Flags for opening a directory whose entries are read.
const LIST_FLAGS: libc::c_int =
    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;

/// A private directory for one server run; see the module docs. Removed on drop.
#[derive(Debug)]
pub struct Scratch {
    base: OwnedFd,
    name: CString,
    dir: OwnedFd,
    identity: (u64, u64),
    path: PathBuf,
    removed: bool,
}

impl Scratch {
    /// Creates `BASE/warden-SERVER-PID-RANDOM`, creating `base` (and missing parents) first
    /// if needed, after checking that no other user can control it (see the module docs).
    pub fn create(base: &Path, server: &str) -> Result<Self, SandboxError> {
        let Some(server_name) = safe_component(server) else {
            return Err(fail(base, format!("unusable server name {server:?}")));
        };
        let (base_fd, base_path) = open_base(base)?;
        clean_stale(&base_fd, &base_path);

        let mut prefix = OsString::from(PREFIX);
        prefix.push(&server_name);
        let mut attempt = 0;
        let name = loop {
            let mut name = prefix.clone();
            name.push(format!("-{}-{:012x}", std::process::id(), random_u48()));
            let c_name = c_string(&base_path, name.as_bytes())?;
            // SAFETY: c_name is NUL-terminated; base_fd is an open directory.
            let made = unsafe { libc::mkdirat(base_fd.as_raw_fd(), c_name.as_ptr(), 0o700) };
            if made == 0 {
                break c_name;
            }
            let error = io::Error::last_os_error();
            attempt += 1;
            if error.raw_os_error() != Some(libc::EEXIST) || attempt >= 16 {
                return Err(fail(
                    &base_path,
                    format!("creating a directory in it: {error}"),
                ));
            }
        };
        let path = base_path.join(OsStr::from_bytes(name.as_bytes()));
        #[cfg(test)]
        tests::after_mkdir(&path);
        let dir = match openat(&base_fd, &name, LIST_FLAGS) {
            Ok(dir) => dir,
            Err(error) => {
                return Err(fail(
                    &path,
                    format!("it was replaced while being created ({error}); refusing to use it"),
                ));
            }
        };
        let stat = fstat(&dir).map_err(|e| fail(&path, e.to_string()))?;
        if stat.st_uid != euid() {
            return Err(fail(
                &path,
                format!(
                    "it was replaced while being created (now owned by uid {}); refusing to use it",
                    stat.st_uid
                ),
            ));
        }
        // Whatever the umask made of the mode, through the descriptor.
        // SAFETY: dir is an open directory descriptor.
        if unsafe { libc::fchmod(dir.as_raw_fd(), 0o700) } != 0 {
            let error = io::Error::last_os_error();
            return Err(fail(&path, format!("setting its mode: {error}")));
        }
        Ok(Self {
            base: base_fd,
            name,
            dir,
            identity: (stat.st_dev, stat.st_ino),
            path,
            removed: false,
        })
    }

    /// The directory's path (as reached from `/`, symlinks on the way resolved).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the directory now, reporting failure (dropping removes it too, silently).
    pub fn remove(mut self) -> Result<(), SandboxError> {
        self.removed = true;
        self.remove_now().map_err(|e| SandboxError::Scratch {
            path: self.path.clone(),
            reason: format!("removing it: {e}"),
        })
    }

    fn remove_now(&self) -> io::Result<()> {
        let mut budget = MAX_ENTRIES;
        empty_dir(&self.dir, 0, &mut budget)?;
        // Unlink the name only if it is still the directory that was created.
        match fstatat_nofollow(&self.base, &self.name) {
            Ok(stat) if (stat.st_dev, stat.st_ino) == self.identity => {}
            Ok(_) => {
                return Err(io::Error::other(
                    "its name now refers to something else, which was left alone",
                ));
            }
            Err(error) if error.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
            Err(error) => return Err(error),
        }
        unlinkat(&self.base, &self.name, libc::AT_REMOVEDIR)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !self.removed
            && let Err(error) = self.remove_now()
        {
            tracing::debug!(path = %self.path.display(), %error, "scratch directory not removed");
        }
    }
}

fn fail(path: &Path, reason: String) -> SandboxError {
    SandboxError::Scratch {
        path: path.to_path_buf(),
        reason,
    }
}

fn euid() -> libc::uid_t {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

fn c_string(context: &Path, bytes: &[u8]) -> Result<CString, SandboxError> {
    CString::new(bytes).map_err(|_| fail(context, "a path component contains a NUL byte".into()))
}

/// Opens and checks the base directory, creating what is missing; returns its descriptor and
/// the path it was reached by (symlinks resolved).
fn open_base(base: &Path) -> Result<(OwnedFd, PathBuf), SandboxError> {
    if !base.is_absolute() {
        return Err(fail(base, "the base directory must be absolute".into()));
    }
    let mut pending: Vec<OsString> = Vec::new();
    for component in base.components() {
        match component {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(part) => pending.push(part.to_os_string()),
            Component::ParentDir => {
                return Err(fail(
                    base,
                    "the base directory must not contain `..`".into(),
                ));
            }
            Component::Prefix(_) => return Err(fail(base, "unsupported path".into())),
        }
    }
    pending.reverse(); // popped from the end, in order
    let root = open_root().map_err(|e| fail(Path::new("/"), e.to_string()))?;
    check_dir(&root, Path::new("/"), false)?;
    let mut stack: Vec<(OwnedFd, PathBuf)> = vec![(root, PathBuf::from("/"))];
    let mut links = 0;
    while let Some(part) = pending.pop() {
        if part == "." {
            continue;
        }
        if part == ".." {
            if stack.len() > 1 {
                stack.pop();
            }
            continue;
        }
        let last = pending.is_empty();
        let Some((dir, dir_path)) = stack.last() else {
            return Err(fail(base, "the walk lost its place".into()));
        };
        let here = dir_path.join(&part);
        let c_part = c_string(&here, part.as_bytes())?;
        let stat = match fstatat_nofollow(dir, &c_part) {
            Ok(stat) => stat,
            Err(error) if error.raw_os_error() == Some(libc::ENOENT) => {
                let mode = if last { 0o700 } else { 0o755 };
                // SAFETY: c_part is NUL-terminated; dir is an open directory.
                if unsafe { libc::mkdirat(dir.as_raw_fd(), c_part.as_ptr(), mode) } != 0 {
                    let error = io::Error::last_os_error();
                    if error.raw_os_error() != Some(libc::EEXIST) {
                        return Err(fail(&here, format!("creating it: {error}")));
                    }
                }
                fstatat_nofollow(dir, &c_part).map_err(|e| fail(&here, e.to_string()))?
            }
            Err(error) => return Err(fail(&here, error.to_string())),
        };
        if stat.st_mode & libc::S_IFMT == libc::S_IFLNK {
            if last {
                return Err(fail(
                    &here,
                    "the scratch base is a symlink; it must be a real directory".into(),
                ));
            }
            if stat.st_uid != 0 && stat.st_uid != euid() {
                return Err(fail(
                    &here,
                    format!(
                        "a symlink owned by uid {}, who could point it anywhere; refusing to \
                         follow it to the scratch base",
                        stat.st_uid
                    ),
                ));
            }
            links += 1;
            if links > MAX_SYMLINKS {
                return Err(fail(base, "too many symlinks on the way".into()));
            }
            let target = readlinkat(dir, &c_part).map_err(|e| fail(&here, e.to_string()))?;
            let target = Path::new(&target);
            if target.is_absolute() {
                stack.truncate(1);
            }
            let mut parts: Vec<OsString> = target
                .components()
                .filter_map(|c| match c {
                    Component::Normal(part) => Some(part.to_os_string()),
                    Component::ParentDir => Some(OsString::from("..")),
                    _ => None,
                })
                .collect();
            parts.reverse();
            pending.extend(parts);
            continue;
        }
        let opened = match openat(dir, &c_part, WALK_FLAGS) {
            Ok(fd) => fd,
            Err(error) => {
                let reason = match error.raw_os_error() {
                    Some(libc::ELOOP) => "it became a symlink while being checked".to_owned(),
                    Some(libc::ENOTDIR) => "it is not a directory".to_owned(),
                    _ => error.to_string(),
                };
                return Err(fail(&here, reason));
            }
        };
        check_dir(&opened, &here, last)?;
        stack.push((opened, here));
    }
    let Some((fd, path)) = stack.pop() else {
        return Err(fail(base, "the walk lost its place".into()));
    };
    if stack.is_empty() {
        return Err(fail(&path, "`/` cannot be the scratch base".into()));
    }
    Ok((fd, path))
}

fn open_root() -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated constant.
    let fd = unsafe { libc::open(c"/".as_ptr(), WALK_FLAGS) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The checks on one opened directory of the walk (see the module docs).
fn check_dir(fd: &OwnedFd, path: &Path, is_base: bool) -> Result<(), SandboxError> {
    let stat = fstat(fd).map_err(|e| fail(path, e.to_string()))?;
    if stat.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return Err(fail(path, "it is not a directory".into()));
    }
    let me = euid();
    let owner_ok = if is_base {
        stat.st_uid == me
    } else {
        stat.st_uid == 0 || stat.st_uid == me
    };
    if !owner_ok {
        let whom = if is_base && me == 0 {
            "root".to_owned()
        } else if is_base {
            format!("uid {me} (Warden's user)")
        } else {
            format!("root or uid {me} (Warden's user)")
        };
        return Err(fail(
            path,
            format!(
                "it is owned by uid {}, not by {whom}; another user could control the \
                 scratch directories (remove it, or choose another base)",
                stat.st_uid
            ),
        ));
    }
    let mode = stat.st_mode & 0o7777;
    if mode & 0o022 != 0 {
        if is_base {
            return Err(fail(
                path,
                format!(
                    "it is writable by group or others (mode {mode:o}); the scratch base must \
                     be writable by its owner only"
                ),
            ));
        }
        if mode & libc::S_ISVTX == 0 {
            return Err(fail(
                path,
                format!(
                    "it is writable by group or others and not sticky (mode {mode:o}), so \
                     another user could replace what lies below it"
                ),
            ));
        }
    }
    Ok(())
}

fn fstat(fd: &OwnedFd) -> io::Result<libc::stat> {
    // SAFETY: stat is plain data, written by fstat.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open; stat is a live buffer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(stat)
}

fn fstatat_nofollow(dir: &OwnedFd, name: &CStr) -> io::Result<libc::stat> {
    // SAFETY: stat is plain data, written by fstatat.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: dir is open; name is NUL-terminated; stat is a live buffer.
    let ret = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut stat,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if ret != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(stat)
}

fn openat(dir: &OwnedFd, name: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: dir is open; name is NUL-terminated.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn unlinkat(dir: &OwnedFd, name: &CStr, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: dir is open; name is NUL-terminated.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn readlinkat(dir: &OwnedFd, name: &CStr) -> io::Result<OsString> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: dir is open; name is NUL-terminated; buf has the given length.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
    if n >= buf.len() {
        return Err(io::Error::other("symlink target too long"));
    }
    buf.truncate(n);
    Ok(OsString::from_vec(buf))
}

/// The names in a directory (without `.` and `..`), with their types when the kernel says.
fn list(dir: &OwnedFd, budget: usize) -> io::Result<Vec<(CString, u8)>> {
    // fdopendir takes the descriptor over, so it gets a duplicate opened for reading.
    // SAFETY: dir is open; "." is NUL-terminated.
    let fd: RawFd = unsafe { libc::openat(dir.as_raw_fd(), c".".as_ptr(), LIST_FLAGS) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh directory descriptor, owned by the stream from here on.
    let stream = unsafe { libc::fdopendir(fd) };
    if stream.is_null() {
        let error = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so fd is still ours to close.
        unsafe { libc::close(fd) };
        return Err(error);
    }
    let mut names = Vec::new();
    loop {
        // SAFETY: stream is a live directory stream used by this thread only.
        let entry = unsafe { libc::readdir(stream) };
        if entry.is_null() {
            break;
        }
        // SAFETY: readdir returned a valid entry whose name is NUL-terminated.
        let (name, kind) = unsafe { (CStr::from_ptr((*entry).d_name.as_ptr()), (*entry).d_type) };
        if name == c"." || name == c".." {
            continue;
        }
        if names.len() >= budget {
            break;
        }
        names.push((name.to_owned(), kind));
    }
    // SAFETY: stream is live and not used afterwards.
    unsafe { libc::closedir(stream) };
    Ok(names)
}

/// Removes everything inside `dir`, never following a symlink: directories are opened with
/// `O_NOFOLLOW` relative to their parent's descriptor, everything else is unlinked by name.
fn empty_dir(dir: &OwnedFd, depth: u32, budget: &mut usize) -> io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(io::Error::other(format!(
            "nested deeper than {MAX_DEPTH} directories"
        )));
    }
    loop {
        let names = list(dir, *budget)?;
        if names.is_empty() {
            return Ok(());
        }
        for (name, kind) in names {
            if *budget == 0 {
                return Err(io::Error::other(format!("more than {MAX_ENTRIES} entries")));
            }
            *budget -= 1;
            let is_dir = match kind {
                libc::DT_DIR => true,
                libc::DT_UNKNOWN => fstatat_nofollow(dir, &name)
                    .is_ok_and(|s| s.st_mode & libc::S_IFMT == libc::S_IFDIR),
                _ => false,
            };
            if is_dir {
                match openat(dir, &name, LIST_FLAGS) {
                    Ok(sub) => {
                        empty_dir(&sub, depth + 1, budget)?;
                        unlinkat(dir, &name, libc::AT_REMOVEDIR)?;
                    }
                    // Replaced by something else since it was listed: unlink that.
                    Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
                        unlinkat(dir, &name, 0)?;
                    }
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                    Err(e) => return Err(e),
                }
            } else {
                match unlinkat(dir, &name, 0) {
                    Err(e) if e.raw_os_error() == Some(libc::EISDIR) => {
                        // Became a directory since it was listed: the next pass sees it.
                    }
                    Err(e) if e.raw_os_error() != Some(libc::ENOENT) => return Err(e),
                    _ => {}
                }
            }
        }
    }
}

/// Removes the scratch directories of Warden processes that are gone (best effort).
fn clean_stale(base: &OwnedFd, base_path: &Path) {
    let Ok(names) = list(base, MAX_STALE_SCAN) else {
        return;
    };
    for (name, _) in names {
        let Some(pid) = name.to_str().ok().and_then(owner_pid) else {
            continue;
        };
        if pid == std::process::id() || !process_gone(pid) {
            continue;
        }
        let Ok(dir) = openat(base, &name, LIST_FLAGS) else {
            continue;
        };
        if fstat(&dir).map_or(true, |s| s.st_uid != euid()) {
            continue;
        }
        let mut budget = MAX_ENTRIES;
        let removed = empty_dir(&dir, 0, &mut budget)
            .and_then(|()| unlinkat(base, &name, libc::AT_REMOVEDIR));
        if let Err(error) = removed {
            tracing::debug!(
                base = %base_path.display(),
                name = %name.to_string_lossy(),
                %error,
                "stale scratch directory not removed"
            );
        }
    }
}

/// The Warden pid in a scratch name `warden-SERVER-PID-RANDOM`.
fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    let (rest, random) = rest.rsplit_once('-')?;
    let (_, pid) = rest.rsplit_once('-')?;
    if random.len() != 12 || !random.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    pid.parse().ok()
}

/// Whether no process with this pid exists (in Warden's pid namespace).
pub(crate) fn process_gone(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks for existence.
    let ret = unsafe { libc::kill(pid, 0) };
    ret != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// 48 random bits, for names nobody can predict.
pub(crate) fn random_u48() -> u64 {
    let mut bytes = [0u8; 8];
    #[cfg(target_os = "linux")]
    {
        // SAFETY: bytes is a live buffer of the given length.
        let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), 6, 0) };
        if got == 6 {
            return u64::from_le_bytes(bytes);
        }
    }
    // Fallback: the clock and a counter (names are also checked with O_EXCL semantics).
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    bytes = (nanos ^ COUNTER.fetch_add(0x9e37_79b9, std::sync::atomic::Ordering::Relaxed))
        .to_le_bytes();
    u64::from_le_bytes(bytes) & 0xffff_ffff_ffff
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    type Hook = Box<dyn Fn(&Path)>;

    thread_local! {
        /// What "another user" does right after `mkdirat`, in this thread's creations.
        static AFTER_MKDIR: RefCell<Option<Hook>> = const { RefCell::new(None) };
    }

    pub(super) fn after_mkdir(path: &Path) {
        AFTER_MKDIR.with(|hook| {
            if let Some(hook) = hook.borrow().as_ref() {
                hook(path);
            }
        });
    }

    /// The attack of issue 10, made deterministic: the directory just created is replaced
    /// by a symlink to a root-owned 0600 file and to a directory before Warden opens it.
    #[test]
    fn a_symlink_swapped_in_right_after_mkdir_is_refused_and_followed_by_nothing() {
        let base = tempfile::tempdir().unwrap();
        let canary_dir = tempfile::tempdir().unwrap();
        let file = canary_dir.path().join("shadow");
        std::fs::write(&file, "secret").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::set_permissions(canary_dir.path(), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        for target in [file.clone(), canary_dir.path().to_path_buf()] {
            let swap_to = target.clone();
            AFTER_MKDIR.with(|hook| {
                *hook.borrow_mut() = Some(Box::new(move |path: &Path| {
                    std::fs::remove_dir(path).unwrap();
                    std::os::unix::fs::symlink(&swap_to, path).unwrap();
                }));
            });
            let err = Scratch::create(base.path(), "srv").unwrap_err().to_string();
            AFTER_MKDIR.with(|hook| *hook.borrow_mut() = None);
            assert!(err.contains("replaced while being created"), "{err}");
            let meta = std::fs::metadata(&file).unwrap();
            assert_eq!((meta.uid(), meta.mode() & 0o7777), (euid(), 0o600));
            let meta = std::fs::metadata(canary_dir.path()).unwrap();
            assert_eq!((meta.uid(), meta.mode() & 0o7777), (euid(), 0o755));
            assert_eq!(std::fs::read_dir(canary_dir.path()).unwrap().count(), 1);
        }
        // Positive control: without the swap, the same call succeeds.
        Scratch::create(base.path(), "srv").unwrap();
    }

    #[test]
    fn scratch_is_private_and_removed_on_drop() {
        let base = tempfile::tempdir().unwrap();
        let scratch = Scratch::create(base.path(), "my/server").unwrap();
        let path = scratch.path().to_path_buf();
        assert!(path.is_dir());
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("warden-my_server-"), "{name}");
        assert_eq!(owner_pid(name), Some(std::process::id()));
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o700);
        assert_eq!(meta.uid(), euid(), "never handed to another uid");
        std::fs::create_dir_all(path.join("a/b")).unwrap();
        std::fs::write(path.join("a/b/file"), "x").unwrap();
        drop(scratch);
        assert!(!path.exists());
    }

    #[test]
    fn removal_unlinks_symlinks_without_following_them() {
        let base = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), "keep").unwrap();
        let scratch = Scratch::create(base.path(), "srv").unwrap();
        std::os::unix::fs::symlink(outside.path(), scratch.path().join("dir-link")).unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("keep"),
            scratch.path().join("file-link"),
        )
        .unwrap();
        scratch.remove().unwrap();
        assert_eq!(
            std::fs::read_to_string(outside.path().join("keep")).unwrap(),
            "keep"
        );
    }

    #[test]
    fn a_missing_base_is_created_private() {
        let parent = tempfile::tempdir().unwrap();
        let base = parent.path().join("a/b/scratch");
        let scratch = Scratch::create(&base, "srv").unwrap();
        assert!(
            scratch
                .path()
                .starts_with(std::fs::canonicalize(parent.path()).unwrap())
        );
        let mode = std::fs::metadata(&base).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn a_group_writable_base_or_one_below_a_writable_directory_is_refused() {
        let parent = tempfile::tempdir().unwrap();
        let base = parent.path().join("base");
        std::fs::create_dir(&base).unwrap();
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o770)).unwrap();
        let err = Scratch::create(&base, "srv").unwrap_err().to_string();
        assert!(err.contains("writable by group or others"), "{err}");

        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::set_permissions(parent.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = Scratch::create(&base, "srv").unwrap_err().to_string();
        assert!(err.contains("not sticky"), "{err}");
        // Sticky, like /tmp: nobody else can replace what is below it.
        std::fs::set_permissions(parent.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        Scratch::create(&base, "srv").unwrap();
    }

    #[test]
    fn a_symlink_on_the_way_is_followed_only_when_trusted_and_never_as_the_base() {
        let parent = tempfile::tempdir().unwrap();
        let real = parent.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, parent.path().join("link")).unwrap();
        // A symlinked ancestor owned by this user: followed (like /home -> /var/home).
        let scratch = Scratch::create(&parent.path().join("link/base"), "srv").unwrap();
        let real = std::fs::canonicalize(&real).unwrap();
        assert!(
            scratch.path().starts_with(&real),
            "{}",
            scratch.path().display()
        );
        // The base itself a symlink: refused.
        let err = Scratch::create(&parent.path().join("link"), "srv")
            .unwrap_err()
            .to_string();
        assert!(err.contains("is a symlink"), "{err}");
    }

    #[test]
    fn stale_directories_of_dead_wardens_are_removed() {
        let base = tempfile::tempdir().unwrap();
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        // A pid that cannot exist (above pid_max's ceiling).
        let stale = base.path().join("warden-old-4999999-0123456789ab");
        std::fs::create_dir_all(stale.join("inner")).unwrap();
        std::fs::write(stale.join("inner/f"), "x").unwrap();
        // A live Warden's (our parent's pid) and an unrelated directory stay.
        let live = base.path().join(format!(
            "warden-other-{}-0123456789ab",
            std::os::unix::process::parent_id()
        ));
        std::fs::create_dir(&live).unwrap();
        let unrelated = base.path().join("not-warden");
        std::fs::create_dir(&unrelated).unwrap();
        let _scratch = Scratch::create(base.path(), "srv").unwrap();
        assert!(!stale.exists());
        assert!(live.exists());
        assert!(unrelated.exists());
    }

    #[test]
    fn names_parse_back_to_their_owner() {
        assert_eq!(owner_pid("warden-a-b-42-0123456789ab"), Some(42));
        assert_eq!(owner_pid("warden-a-42-0123"), None);
        assert_eq!(owner_pid("other-a-42-0123456789ab"), None);
    }
}
