//! One install at a time per server: an advisory lock (`flock(2)`) on a file of the package
//! cache, `<cache>/<slot>.lock`, where `<slot>` is the directory that server's installs go
//! in. Two Warden processes that both find a server's package missing (two `warden call`s,
//! `warden update` beside a start) take turns: the second waits, then reads the pin the
//! first recorded and verifies that install instead of installing again. `warden packages
//! gc` takes the same lock (without waiting) before it removes anything of a slot, so it
//! never removes an install being made.
//!
//! `flock` locks belong to the open file, so they also exclude threads of one process that
//! open the file separately, and the kernel drops them when the holder dies: a crashed
//! install never leaves the lock held. The holder writes who it is into the file (process,
//! what it does, since when), so a waiter that gives up can name it. The waits are bounded
//! ([`LOCK_WAIT`] by default); lock files are never removed (removing a lock file someone
//! may have open would let two holders in), and are a few bytes each.

use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::PackageError;

/// How long a start or `warden update` waits for another process's install of the same
/// server by default: longer than one install step may take ([`crate::STEP_LIMIT`]).
pub const LOCK_WAIT: Duration = Duration::from_secs(15 * 60);

/// How often a waiter tries the lock again.
const POLL: Duration = Duration::from_millis(100);

/// Most bytes of the holder's description read back.
const MAX_HOLDER: u64 = 512;

/// `wait` as read in a message: whole seconds, or milliseconds below one.
pub(crate) fn duration_text(wait: Duration) -> String {
    if wait >= Duration::from_secs(1) {
        format!("{} s", wait.as_secs())
    } else {
        format!("{} ms", wait.as_millis())
    }
}

/// The lock of one slot of the package cache, held until dropped.
#[derive(Debug)]
pub struct InstallLock {
    file: std::fs::File,
    path: PathBuf,
    /// The directory of the slot's installs.
    pub(crate) slot: PathBuf,
}

impl InstallLock {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for InstallLock {
    fn drop(&mut self) {
        // Closing the file releases the lock; said explicitly so a descriptor kept by a
        // child (none is: the file is close-on-exec) could not keep it.
        // SAFETY: flock on the descriptor this value owns.
        unsafe {
            libc::flock(self.file.as_raw_fd(), libc::LOCK_UN);
        }
    }
}

/// What happened when the lock was asked for without waiting.
#[derive(Debug)]
pub enum TryLock {
    /// Taken.
    Held(InstallLock),
    /// Someone holds it: who, as they described themselves.
    Busy(String),
}

/// Opens (creating it) the lock file at `path`, never through a link, and only if it is a
/// regular file; `opening` and `what` name it in errors ("open the install lock", "the
/// install lock").
pub(crate) fn open_lock_file(
    path: &Path,
    opening: &'static str,
    what: &str,
) -> Result<std::fs::File, PackageError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        // A link planted in the cache's place of a lock file is not followed.
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|source| PackageError::io(opening, path, source))?;
    let meta = file
        .metadata()
        .map_err(|source| PackageError::io("read", path, source))?;
    if !meta.is_file() {
        return Err(PackageError::Unsafe {
            path: path.to_path_buf(),
            reason: format!("{what} is not a regular file"),
        });
    }
    Ok(file)
}

/// `flock(file, how | LOCK_NB)` (`how`: `LOCK_EX` or `LOCK_SH`): whether it was taken.
pub(crate) fn try_flock(file: &std::fs::File, path: &Path, how: i32) -> Result<bool, PackageError> {
    // SAFETY: flock on a descriptor `file` owns and keeps open.
    if unsafe { libc::flock(file.as_raw_fd(), how | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let error = std::io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EWOULDBLOCK) | Some(libc::EINTR) => Ok(false),
        _ => Err(PackageError::io("lock", path, error)),
    }
}

/// Who holds the lock in `file`, as they wrote it.
fn holder(file: &mut std::fs::File) -> String {
    let mut text = String::new();
    let _ = file.rewind();
    let _ = file.take(MAX_HOLDER).read_to_string(&mut text);
    let text = text.trim();
    if text.is_empty() {
        "another process (it did not say which)".to_owned()
    } else {
        // Written by a Warden process, but a file others could have placed: one line,
        // control characters dropped.
        text.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect()
    }
}

/// Writes who holds the lock now.
fn describe_holder(file: &mut std::fs::File, what: &str) {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let text = format!(
        "process {} ({what}), holding it since {since} (seconds since 1970)",
        std::process::id()
    );
    let _ = file.set_len(0);
    let _ = file.rewind();
    let _ = file.write_all(text.as_bytes());
    let _ = file.flush();
}

/// Takes the lock at `path` for `what` (said to whoever waits), waiting at most `wait` for
/// its holder; `server` names the server in the error when the wait runs out.
pub(crate) fn acquire(
    path: &Path,
    slot: &Path,
    server: &str,
    what: &str,
    wait: Duration,
) -> Result<InstallLock, PackageError> {
    let mut file = open_lock_file(path, "open the install lock", "the install lock")?;
    let started = Instant::now();
    let mut said = false;
    loop {
        if try_flock(&file, path, libc::LOCK_EX)? {
            describe_holder(&mut file, what);
            return Ok(InstallLock {
                file,
                path: path.to_path_buf(),
                slot: slot.to_path_buf(),
            });
        }
        if !said {
            tracing::info!(
                server,
                holder = %holder(&mut file),
                "waiting for another install of this server's package to finish"
            );
            said = true;
        }
        if started.elapsed() >= wait {
            return Err(PackageError::LockTimeout {
                server: server.to_owned(),
                holder: holder(&mut file),
                waited: wait,
                path: path.to_path_buf(),
            });
        }
        std::thread::sleep(POLL.min(wait.saturating_sub(started.elapsed())));
    }
}

/// Takes the lock at `path` for `what` if nobody holds it; never waits.
pub(crate) fn try_acquire(path: &Path, slot: &Path, what: &str) -> Result<TryLock, PackageError> {
    let mut file = open_lock_file(path, "open the install lock", "the install lock")?;
    if try_flock(&file, path, libc::LOCK_EX)? {
        describe_holder(&mut file, what);
        Ok(TryLock::Held(InstallLock {
            file,
            path: path.to_path_buf(),
            slot: slot.to_path_buf(),
        }))
    } else {
        Ok(TryLock::Busy(holder(&mut file)))
    }
}
