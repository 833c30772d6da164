//! System-call helpers for the child side: no allocation, no locks, no libc state.

use std::ffi::CStr;
use std::os::fd::RawFd;

/// The calling thread's `errno`.
pub(crate) fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Turns a -1 return into `Err(errno)`.
pub(crate) fn check(ret: libc::c_int) -> Result<libc::c_int, i32> {
    if ret < 0 { Err(errno()) } else { Ok(ret) }
}

/// `fork` by the raw system call: no `pthread_atfork` handlers run (they may take locks that
/// another thread of Warden held when std forked), and libc's cached thread id is left stale,
/// which only matters to libc functions this code does not call (`raise`, `pthread_*`).
///
/// # Safety
/// Only system-call wrappers may be used in the child afterwards.
pub(crate) unsafe fn fork_raw() -> Result<libc::pid_t, i32> {
    // SAFETY: clone with only SIGCHLD and no new stack behaves as fork.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone,
            libc::SIGCHLD as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    if ret < 0 {
        Err(errno())
    } else {
        libc::pid_t::try_from(ret).map_err(|_| libc::EINVAL)
    }
}

/// Writes `data` to a file opened by path (`/proc/self/uid_map` and friends), whole.
///
/// # Safety
/// Async-signal-safe; no preconditions.
pub(crate) unsafe fn write_file(path: &CStr, data: &[u8]) -> Result<(), i32> {
    // SAFETY: path is NUL-terminated.
    let fd = check(unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) })?;
    // SAFETY: data is a live buffer of the given length.
    let written = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
    let result = if written < 0 {
        Err(errno())
    } else if written as usize != data.len() {
        Err(libc::EIO)
    } else {
        Ok(())
    };
    // SAFETY: fd was opened above.
    unsafe { libc::close(fd) };
    result
}

/// Closes every descriptor except those in `keep` (at most a few).
///
/// # Safety
/// The caller must not use any other descriptor afterwards.
pub(crate) unsafe fn close_all_except(keep: &mut [RawFd]) {
    keep.sort_unstable();
    let mut from: u32 = 0;
    for &fd in keep.iter() {
        let Ok(fd) = u32::try_from(fd) else { continue };
        if fd > from {
            // SAFETY: closing a range of descriptors has no memory effects.
            unsafe { libc::syscall(libc::SYS_close_range, from, fd - 1, 0u32) };
        }
        from = fd.saturating_add(1);
    }
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_close_range, from, u32::MAX, 0u32) };
}

/// A signal set built from a list.
pub(crate) fn sigset(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &signal in signals {
            libc::sigaddset(&mut set, signal);
        }
        set
    }
}

/// Exits immediately, running nothing of Rust's or libc's.
pub(crate) fn exit(code: libc::c_int) -> ! {
    // SAFETY: _exit never returns and has no preconditions.
    unsafe { libc::_exit(code) }
}
