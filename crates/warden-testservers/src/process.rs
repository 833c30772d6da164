//! Process-level misbehaviour for `grandchild` mode: ignoring termination signals and leaving
//! a descendant behind, so only a SIGKILL to the whole process group cleans up.

use std::io;
use std::thread;
use std::time::Duration;

/// How long the grandchild, and the server after stdin EOF, stay alive: long enough to
/// outlive any test, short enough that a leak does not last forever.
pub(crate) const LINGER: Duration = Duration::from_secs(600);

/// Makes this process (and children forked afterwards) ignore SIGTERM and SIGHUP.
pub(crate) fn ignore_termination_signals() -> io::Result<()> {
    for signal in [libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: installing SIG_IGN has no handler code to run, so there is nothing that
        // could be async-signal-unsafe.
        let previous = unsafe { libc::signal(signal, libc::SIG_IGN) };
        if previous == libc::SIG_ERR {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Forks a child that sleeps for [`LINGER`] and exits; returns its pid. It keeps this
/// process's group, signal dispositions and open descriptors (so it holds the stdio pipes).
///
/// Must be called while the process has a single thread.
pub(crate) fn fork_sleeper() -> io::Result<u32> {
    // SAFETY: called at start-up, before any thread exists, so the child inherits no lock
    // held by another thread; the child only sleeps and leaves through `_exit`, which runs
    // no destructors and flushes no buffers shared with the parent.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            thread::sleep(LINGER);
            // SAFETY: `_exit` is always safe to call; it ends the child immediately.
            unsafe { libc::_exit(0) }
        }
        child => u32::try_from(child).map_err(|e| io::Error::other(e.to_string())),
    }
}
