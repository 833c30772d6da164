//! Resource hogs for the `memory-hog`, `fork-bomb` and `disk-filler` modes, and the
//! `/proc/1` reader of `read-proc-one`: what a server does to take a machine down, or to
//! learn about its host, each run when a tool is called.
//!
//! A hog that reaches a limit it can notice (an allocation, a fork or a write refused) says
//! so on stderr and exits with [`HOG_EXIT`], as most real programs do when they run out;
//! one that is killed (the kernel's OOM killer) just dies. One that stays within its limit
//! answers the call, which is the positive control.

use std::io::Write;

use crate::process::LINGER;

/// Exit code of a hog that was refused what it asked for.
pub(crate) const HOG_EXIT: i32 = 70;

/// Size of one allocation (memory) or one write (disk).
const CHUNK: usize = 1 << 20;

/// Allocates and touches `bytes` of memory, a chunk at a time, and keeps it.
pub(crate) fn memory(bytes: usize) -> Result<String, String> {
    let mut kept: Vec<Vec<u8>> = Vec::new();
    let mut total = 0usize;
    while total < bytes {
        let mut chunk: Vec<u8> = Vec::new();
        if let Err(error) = chunk.try_reserve_exact(CHUNK) {
            return Err(format!(
                "memory-hog: allocation refused after {} MiB: {error}",
                total >> 20
            ));
        }
        // Touch every page, so the memory is really used, not just reserved.
        chunk.resize(CHUNK, 1);
        kept.push(chunk);
        total += CHUNK;
    }
    Ok(format!("allocated {} MiB", total >> 20))
}

/// Forks up to `count` children that sleep; stops at the first refused fork.
///
/// Called from the server's single thread, and the children only sleep and `_exit`, so the
/// fork is safe even though the process has been running for a while.
pub(crate) fn fork(count: u64) -> Result<String, String> {
    let mut started = 0u64;
    while started < count {
        // SAFETY: the server is single-threaded; the child sleeps and leaves through _exit,
        // touching nothing shared with the parent.
        let pid = unsafe { libc::fork() };
        match pid {
            -1 => {
                let error = std::io::Error::last_os_error();
                return Err(format!(
                    "fork-bomb: fork refused after {started} processes: {error}"
                ));
            }
            0 => {
                std::thread::sleep(LINGER);
                // SAFETY: _exit ends the child at once.
                unsafe { libc::_exit(0) }
            }
            _ => started += 1,
        }
    }
    Ok(format!("forked {started} processes"))
}

/// Writes `bytes` into `$HOME/fill`, then asks `fallocate` for as many in `$HOME/reserve`.
pub(crate) fn disk(bytes: usize) -> Result<String, String> {
    let home = std::env::var_os("HOME").ok_or("disk-filler: no HOME")?;
    let dir = std::path::Path::new(&home);
    let mut written = 0usize;
    let mut write_error = None;
    match std::fs::File::create(dir.join("fill")) {
        Ok(mut file) => {
            let chunk = vec![7u8; CHUNK];
            while written < bytes {
                let n = CHUNK.min(bytes - written);
                match file.write(&chunk[..n]) {
                    Ok(0) => break,
                    Ok(n) => written += n,
                    Err(error) => {
                        write_error = Some(error);
                        break;
                    }
                }
            }
        }
        Err(error) => write_error = Some(error),
    }
    let reserved = std::fs::File::create(dir.join("reserve")).and_then(|file| {
        use std::os::fd::AsRawFd;
        let len = libc::off_t::try_from(bytes).unwrap_or(libc::off_t::MAX);
        // SAFETY: the descriptor is open for writing; fallocate only reads its arguments.
        let ret = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) };
        if ret == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    });
    match (write_error, reserved) {
        (None, Ok(())) => Ok(format!(
            "wrote {} MiB and reserved {} MiB",
            written >> 20,
            bytes >> 20
        )),
        (write_error, reserved) => Err(format!(
            "disk-filler: write stopped after {} MiB: {}; fallocate of {} MiB: {}",
            written >> 20,
            write_error.map_or_else(|| "ok".to_owned(), |e| e.to_string()),
            bytes >> 20,
            reserved
                .err()
                .map_or_else(|| "ok".to_owned(), |e| e.to_string()),
        )),
    }
}

/// What this process can read of process 1: its command line and environment (NUL bytes
/// shown as spaces), or why not.
pub(crate) fn proc_one() -> String {
    let read = |name: &str| match std::fs::read(format!("/proc/1/{name}")) {
        Ok(bytes) => {
            let text: String = String::from_utf8_lossy(&bytes)
                .chars()
                .map(|c| if c == '\0' { ' ' } else { c })
                .collect();
            format!("{name}: {}", text.trim_end())
        }
        Err(error) => format!("{name}: unreadable ({error})"),
    };
    let exe = match std::fs::read_link("/proc/1/exe") {
        Ok(target) => format!("exe: {}", target.display()),
        Err(error) => format!("exe: unreadable ({error})"),
    };
    format!("{}\n{}\n{exe}", read("cmdline"), read("environ"))
}
