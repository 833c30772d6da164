//! Installs in use: a running server holds a shared lock (`flock(2)`, `LOCK_SH`) on
//! `<install>.use`, a file beside its install directory, for as long as its process lives;
//! removing an install ([`crate::Packages::remove`]: `warden update` dropping the install it
//! replaced, `warden packages gc`) first takes that lock exclusively without waiting, and
//! leaves an install someone runs from for a later `gc`. Without it, an update in one
//! terminal deleted the files a long-running `warden serve` was running a server from.
//!
//! The remover unlinks the `.use` file with the install, while it holds the lock. A start
//! that opened the file just before waits for the lock, then finds its install gone and
//! says so (the pin has moved: the next start runs the new install). The lock is the open
//! file's: the kernel drops it when the holder dies, so a crashed host never pins an
//! install for ever.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::PackageError;
use crate::lock::{open_lock_file, try_flock};

/// How long a start waits for a removal of its install to finish (a removal holds the
/// lock only while it deletes).
const WAIT: Duration = Duration::from_secs(30);

/// How often the lock is tried again.
const POLL: Duration = Duration::from_millis(20);

/// The file whose lock says `dir` is in use.
pub(crate) fn use_file(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".use");
    dir.with_file_name(name)
}

/// A shared hold on an install: while it lives, the install is not removed.
#[derive(Debug)]
pub struct InUse {
    _file: std::fs::File,
    dir: PathBuf,
}

impl InUse {
    /// The install it holds.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Holds the install `dir` for `server` ([`InUse`]): waits (briefly) for a removal in
/// progress, then checks the install is still there.
pub fn hold(server: &str, dir: &Path) -> Result<InUse, PackageError> {
    let path = use_file(dir);
    let file = open_lock_file(&path, "open the in-use lock", "the in-use lock")?;
    let started = Instant::now();
    while !try_flock(&file, &path, libc::LOCK_SH)? {
        if started.elapsed() >= WAIT {
            return Err(PackageError::Io {
                action: "wait for a removal of",
                path: dir.to_path_buf(),
                source: std::io::Error::other(format!(
                    "still being removed after {} s (server {server})",
                    WAIT.as_secs()
                )),
            });
        }
        std::thread::sleep(POLL);
    }
    if !dir.is_dir() {
        return Err(PackageError::Io {
            action: "run from",
            path: dir.to_path_buf(),
            source: std::io::Error::other(
                "it was removed meanwhile (replaced by `warden update`?): start it again",
            ),
        });
    }
    Ok(InUse {
        _file: file,
        dir: dir.to_path_buf(),
    })
}

/// An exclusive hold on an install about to be removed: taken only if nobody runs from it.
#[derive(Debug)]
pub(crate) struct Removing {
    file: std::fs::File,
    path: PathBuf,
}

impl Removing {
    /// Unlinks the `.use` file (the install is gone), still holding its lock.
    pub(crate) fn finish(self) {
        let _ = std::fs::remove_file(&self.path);
        drop(self.file);
    }
}

/// Takes `dir`'s in-use lock exclusively if nobody holds it; `None` when a running server
/// does.
pub(crate) fn try_removing(dir: &Path) -> Result<Option<Removing>, PackageError> {
    let path = use_file(dir);
    let file = open_lock_file(&path, "open the in-use lock", "the in-use lock")?;
    if try_flock(&file, &path, libc::LOCK_EX)? {
        Ok(Some(Removing { file, path }))
    } else {
        Ok(None)
    }
}
