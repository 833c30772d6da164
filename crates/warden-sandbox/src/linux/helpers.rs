//! The waiter and init once their set-up is done: what they run for the server's lifetime,
//! after they have let go of the memory they inherited from Warden (decision 0054).
//!
//! Both helpers are forks of Warden that never exec. A fork shares Warden's pages
//! copy-on-write, so every page Warden writes afterwards leaves its old copy to the helpers:
//! a pair held about 1.15 MiB of Warden's heap per confined server. Here each helper first
//! copies the handful of values its loop reads onto its stack ([`WaiterArgs`],
//! [`InitArgs`]), then unmaps every private anonymous mapping it inherited (Warden's heap,
//! the other threads' stacks, the allocator's arenas) except the ones its own thread runs
//! on ([`release_inherited`]).
//!
//! From that point on, the code of this module touches only its stack, its thread's TLS
//! block, constants and the loaded objects' file-backed mappings (their code, `.rodata`, the
//! relocated GOT): every system call is made through `libc::syscall` (an assembly stub that
//! touches no libc state but `errno`, in the TLS block), never through a libc wrapper
//! (which may read libc's global state), and nothing is allocated. A read of anything else
//! faults at once (the mapping is gone, not zeroed), so a mistake here shows as a helper
//! killed by SIGSEGV in the tests, never as a wrong value.
//!
//! One assumption of the toolchain: every libc symbol called after the release is already
//! bound (Rust's default on Linux links with full RELRO, `-z now`). With lazy binding the
//! first `libc::syscall` afterwards could go through the dynamic loader's resolver, whose
//! data may lie in a released mapping.

use std::ffi::CStr;
use std::os::fd::RawFd;

use super::sys::errno;

/// Signals are numbered 1 to 64 on Linux.
const NSIG: libc::c_int = 65;

use super::HELPER_FAILED;

/// The longest scratch path init checks for free space (with its NUL); longer paths cannot
/// be passed to `statfs` anyway.
const MAX_PATH: usize = 4096;

/// One report record (as `mod.rs`'s `RECORD`).
pub(crate) const RECORD: usize = 24;

/// What the waiter's loop reads, on its stack.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WaiterArgs {
    /// Read end of the pipe only Warden holds the write end of.
    pub lifeline: RawFd,
    /// init's end of the socket pair on which init sends the server's status.
    pub link: RawFd,
    /// A non-blocking signalfd for SIGCHLD.
    pub sigchld: RawFd,
    /// The report channel's write end (non-blocking).
    pub report: RawFd,
    /// init, our child.
    pub init: libc::pid_t,
}

/// What init's loop reads, on its stack.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InitArgs {
    /// The waiter's end of the socket pair.
    pub link: RawFd,
    /// A non-blocking signalfd for SIGCHLD.
    pub sigchld: RawFd,
    /// The server, our child.
    pub server: libc::pid_t,
    /// The scratch tmpfs's path, NUL-terminated; empty when it did not fit.
    pub scratch: [u8; MAX_PATH],
    /// Below this many free bytes at the server's exit, the scratch counts as full.
    pub full_below: u64,
}

impl InitArgs {
    /// The args with `scratch` copied in (left empty when it does not fit).
    pub(crate) fn new(
        link: RawFd,
        sigchld: RawFd,
        server: libc::pid_t,
        scratch: &CStr,
        full_below: u64,
    ) -> Self {
        let mut path = [0u8; MAX_PATH];
        let bytes = scratch.to_bytes_with_nul();
        if let Some(room) = path.get_mut(..bytes.len()) {
            room.copy_from_slice(bytes);
        }
        Self {
            link,
            sigchld,
            server,
            scratch: path,
            full_below,
        }
    }
}

/// What init saw when the server exited, as the record `mod.rs`'s `ExitFacts` decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ExitFacts {
    /// The server's peak resident size (with the descendants it waited for), in KiB.
    pub max_rss_kib: u64,
    /// Processes left in the sandbox besides init.
    pub processes: u64,
    /// Whether the scratch tmpfs was (nearly) full.
    pub scratch_full: bool,
}

/// The record code of [`ExitFacts`] (failures use codes below 200).
pub(crate) const FACTS_CODE: u32 = 200;

impl ExitFacts {
    pub(crate) fn encode(self) -> [u8; RECORD] {
        let mut record = [0u8; RECORD];
        record[0..4].copy_from_slice(&FACTS_CODE.to_ne_bytes());
        record[4..8].copy_from_slice(&u32::from(self.scratch_full).to_ne_bytes());
        let processes = u32::try_from(self.processes).unwrap_or(u32::MAX);
        record[8..12].copy_from_slice(&processes.to_ne_bytes());
        record[16..24].copy_from_slice(&self.max_rss_kib.to_ne_bytes());
        record
    }
}

// ---- Raw system calls: `libc::syscall` only (see the module's docs).

fn raw(ret: libc::c_long) -> Result<libc::c_long, i32> {
    if ret < 0 { Err(errno()) } else { Ok(ret) }
}

/// `ppoll` without a timeout or a signal mask (there is no `poll` on every architecture).
///
/// # Safety
/// System call on a live slice.
unsafe fn poll(fds: &mut [libc::pollfd]) -> Result<libc::c_long, i32> {
    // SAFETY: the slice is live and its length is passed.
    raw(unsafe {
        libc::syscall(
            libc::SYS_ppoll,
            fds.as_mut_ptr(),
            fds.len() as libc::c_ulong,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<libc::c_void>(),
            0usize,
        )
    })
}

/// `wait4`, with the child's resource usage written to `usage` when it is given.
///
/// # Safety
/// System call on stack values.
unsafe fn wait4(
    pid: libc::pid_t,
    status: &mut libc::c_int,
    options: libc::c_int,
    usage: Option<&mut libc::rusage>,
) -> Result<libc::pid_t, i32> {
    let usage = usage.map_or(std::ptr::null_mut(), |u| u as *mut libc::rusage);
    // SAFETY: status and usage are live or null.
    let ret = raw(unsafe {
        libc::syscall(
            libc::SYS_wait4,
            pid,
            status as *mut libc::c_int,
            options,
            usage,
        )
    })?;
    libc::pid_t::try_from(ret).map_err(|_| libc::EINVAL)
}

/// Reads into `buf`; the count read.
///
/// # Safety
/// System call on a live buffer.
pub(crate) unsafe fn read(fd: RawFd, buf: &mut [u8]) -> Result<usize, i32> {
    // SAFETY: the buffer is live and its length is passed.
    let n = raw(unsafe { libc::syscall(libc::SYS_read, fd, buf.as_mut_ptr(), buf.len()) })?;
    usize::try_from(n).map_err(|_| libc::EINVAL)
}

/// # Safety
/// System call on a live buffer.
unsafe fn write(fd: RawFd, buf: &[u8]) -> Result<libc::c_long, i32> {
    // SAFETY: the buffer is live and its length is passed.
    raw(unsafe { libc::syscall(libc::SYS_write, fd, buf.as_ptr(), buf.len()) })
}

/// # Safety
/// System call on a live buffer.
unsafe fn recv(fd: RawFd, buf: &mut [u8], flags: libc::c_int) -> Result<usize, i32> {
    // SAFETY: the buffer is live; no address is asked for.
    let n = raw(unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            fd,
            buf.as_mut_ptr(),
            buf.len(),
            flags,
            std::ptr::null_mut::<libc::sockaddr>(),
            std::ptr::null_mut::<libc::socklen_t>(),
        )
    })?;
    usize::try_from(n).map_err(|_| libc::EINVAL)
}

/// # Safety
/// System call on a live buffer.
unsafe fn send(fd: RawFd, buf: &[u8], flags: libc::c_int) -> Result<libc::c_long, i32> {
    // SAFETY: the buffer is live; no address is given.
    raw(unsafe {
        libc::syscall(
            libc::SYS_sendto,
            fd,
            buf.as_ptr(),
            buf.len(),
            flags,
            std::ptr::null::<libc::sockaddr>(),
            0 as libc::socklen_t,
        )
    })
}

/// # Safety
/// Closes a descriptor this process owns.
pub(crate) unsafe fn close(fd: RawFd) {
    // SAFETY: closing has no memory effects.
    unsafe { libc::syscall(libc::SYS_close, fd) };
}

/// `openat(AT_FDCWD, path, flags)`.
///
/// # Safety
/// System call on a NUL-terminated path.
pub(crate) unsafe fn open(path: &CStr, flags: libc::c_int) -> Result<RawFd, i32> {
    // SAFETY: the path is NUL-terminated.
    let fd = raw(unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags,
            0 as libc::mode_t,
        )
    })?;
    RawFd::try_from(fd).map_err(|_| libc::EBADF)
}

/// # Safety
/// Signals a process.
unsafe fn kill(pid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: no memory effects.
    unsafe { libc::syscall(libc::SYS_kill, pid, signal) };
}

/// Unblocks one signal (the kernel's signal set: 64 bits, in words of `c_ulong`).
///
/// # Safety
/// Changes the signal mask.
unsafe fn unblock(signal: libc::c_int) {
    const BITS: usize = libc::c_ulong::BITS as usize;
    let mut set: [libc::c_ulong; 64 / BITS] = [0; 64 / BITS];
    let Ok(index) = usize::try_from(signal - 1) else {
        return;
    };
    if let Some(word) = set.get_mut(index / BITS) {
        *word |= 1 << (index % BITS);
    }
    // SAFETY: the set is a live stack value of the kernel's size (8 bytes).
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_UNBLOCK,
            set.as_ptr(),
            std::ptr::null_mut::<libc::c_ulong>(),
            8usize,
        )
    };
}

/// Exits at once (`exit_group`).
fn exit(code: libc::c_int) -> ! {
    loop {
        // SAFETY: exit_group does not return.
        unsafe { libc::syscall(libc::SYS_exit_group, code) };
    }
}

// ---- Letting go of Warden's memory.

/// One line of `/proc/self/maps`, as far as [`release_inherited`] needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mapping {
    pub start: usize,
    pub end: usize,
    pub private: bool,
    /// Backed by a file (a non-zero inode).
    pub file: bool,
    /// What the kernel names an anonymous mapping: `[heap]`, `[stack]`, `[anon:NAME]`, or
    /// nothing. Other names (`[vdso]`, `[vvar]`, a shared memory file) are never released.
    pub anonymous: bool,
}

/// Parses one line of `/proc/self/maps` (`start-end perms offset dev inode [name]`).
pub(crate) fn parse_mapping(line: &[u8]) -> Option<Mapping> {
    let mut fields = line.splitn(6, |&b| b == b' ');
    let range = fields.next()?;
    let perms = fields.next()?;
    let _offset = fields.next()?;
    let _device = fields.next()?;
    let inode = fields.next()?;
    let name = fields.next().unwrap_or_default().trim_ascii_start();
    let dash = range.iter().position(|&b| b == b'-')?;
    let start = hex(range.get(..dash)?)?;
    let end = hex(range.get(dash + 1..)?)?;
    if end <= start || perms.len() != 4 || inode.is_empty() {
        return None;
    }
    let file = inode.iter().any(|&b| b != b'0');
    let anonymous = !file
        && (name.is_empty()
            || name == b"[heap]"
            || name == b"[stack]"
            || name.starts_with(b"[anon:"));
    Some(Mapping {
        start,
        end,
        private: perms[3] == b'p',
        file,
        anonymous,
    })
}

fn hex(digits: &[u8]) -> Option<usize> {
    if digits.is_empty() || digits.len() > 2 * std::mem::size_of::<usize>() {
        return None;
    }
    let mut value = 0usize;
    for &d in digits {
        let nibble = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => d - b'A' + 10,
            _ => return None,
        };
        value = (value << 4) | usize::from(nibble);
    }
    Some(value)
}

/// Whether a mapping is one of Warden's that this helper lets go of: private and anonymous,
/// holding none of the `keep` addresses, and not the zero-filled tail of a loaded object's
/// data segment (its `.bss`, which begins where a file mapping ends: libc's own state lives
/// there, and a mapping that merely happens to follow a file is kept too, which costs
/// memory but is never unsafe).
pub(crate) fn releasable(mapping: &Mapping, after_file: bool, keep: &[usize]) -> bool {
    mapping.private
        && mapping.anonymous
        && !after_file
        && !keep
            .iter()
            .any(|&at| mapping.start <= at && at < mapping.end)
}

/// Unmaps what [`releasable`] allows, reading the mappings from `maps` (this process's own
/// `/proc/self/maps`, opened before the pid and mount namespaces could change what `/proc`
/// names). The thread's stack and TLS block are kept, found from a local's address, the
/// thread pointer and `errno`'s address. Of the mapping that holds the argument strings
/// (`args_at`, the initial stack's top; 0 when unknown), the pages from those strings up are
/// kept, so that `/proc/PID/cmdline` still reads them (init's, overwritten with its name).
/// Best effort: a line that cannot be read keeps its mapping. Closes `maps`.
///
/// # Safety
/// Child context, single-threaded, after every fork this helper makes: nothing that lives
/// in an anonymous mapping other than this thread's stack and TLS block may be read
/// afterwards. `page` is the page size.
pub(crate) unsafe fn release_inherited(maps: RawFd, args_at: usize, page: usize) {
    let here = 0u8;
    // SAFETY: pthread_self reads the thread pointer; __errno_location computes an address
    // in the TLS block. Neither reads anything else.
    let keep = unsafe {
        [
            std::ptr::addr_of!(here) as usize,
            libc::pthread_self() as usize,
            libc::__errno_location() as usize,
        ]
    };
    let mut buf = [0u8; 8192];
    let mut filled = 0;
    // Whether the next mapping begins where a file mapping ends (or follows a line that
    // could not be read), and where the last mapping read ended.
    let mut after_file = false;
    let mut last_end = 0usize;
    let mut last_file = false;
    // A line longer than the buffer is skipped up to its end (its mapping kept).
    let mut skipping = false;
    loop {
        // SAFETY: a read into the stack buffer's free part.
        let n = match unsafe { read(maps, &mut buf[filled..]) } {
            Ok(0) => break,
            Ok(n) => n,
            Err(libc::EINTR) => continue,
            Err(_) => break,
        };
        filled += n;
        let mut begin = 0;
        while let Some(newline) = buf[begin..filled].iter().position(|&b| b == b'\n') {
            let line = &buf[begin..begin + newline];
            begin += newline + 1;
            // After a line that could not be read, the next mapping is kept too (it may
            // be that one's `.bss`).
            if std::mem::take(&mut skipping) {
                after_file = true;
                continue;
            }
            let Some(mapping) = parse_mapping(line) else {
                after_file = true;
                continue;
            };
            after_file |= last_file && last_end == mapping.start;
            if releasable(&mapping, after_file, &keep) {
                let mut len = mapping.end - mapping.start;
                if mapping.start <= args_at && args_at < mapping.end && page.is_power_of_two() {
                    len = (args_at & !(page - 1)) - mapping.start;
                }
                // SAFETY: the range is a whole mapping of this process that nothing running
                // from here on reads (see the function's contract).
                if len > 0 {
                    unsafe { libc::syscall(libc::SYS_munmap, mapping.start, len) };
                }
            }
            after_file = false;
            last_end = mapping.end;
            last_file = mapping.file;
        }
        buf.copy_within(begin..filled, 0);
        filled -= begin;
        if filled == buf.len() {
            filled = 0;
            skipping = true;
        }
    }
    // SAFETY: maps is ours.
    unsafe { close(maps) };
}

// ---- The loops.

/// The waiter: waits for init, kills it if Warden dies, then mirrors the server's status.
///
/// # Safety
/// Child context, after [`release_inherited`] or instead of it; `args.init` is our child.
pub(crate) unsafe fn waiter_loop(args: WaiterArgs) -> ! {
    let mut lifeline_open = true;
    let mut init_status = 0;
    // SAFETY: system calls on stack buffers and inherited descriptors, nothing else.
    unsafe {
        loop {
            let mut fds = [
                libc::pollfd {
                    fd: args.sigchld,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: args.lifeline,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            let count = if lifeline_open { 2 } else { 1 };
            if let Err(error) = poll(&mut fds[..count])
                && error != libc::EINTR
            {
                // Cannot watch; fall back to a plain wait.
                while wait4(args.init, &mut init_status, 0, None) == Err(libc::EINTR) {}
                break;
            }
            if lifeline_open && fds[1].revents != 0 {
                // Warden is gone. Killing init ends the whole namespace.
                kill(args.init, libc::SIGKILL);
                lifeline_open = false;
            }
            drain(args.sigchld);
            match wait4(args.init, &mut init_status, libc::WNOHANG, None) {
                Ok(pid) if pid == args.init => break,
                Err(error) if error != libc::EINTR => exit(HELPER_FAILED),
                _ => {}
            }
        }
        // init's message: the server's status, then the exit facts as a report record.
        let mut buf = [0u8; 4 + RECORD];
        let got = recv(args.link, &mut buf, libc::MSG_DONTWAIT).unwrap_or(0);
        let status = if got >= 4 {
            libc::c_int::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]])
        } else {
            init_status
        };
        if got == buf.len() {
            // Whoever confined may have dropped the read end already: SIGPIPE is blocked
            // in the helpers, so that is an EPIPE (and a pending SIGPIPE that stays blocked).
            let _ = write(args.report, &buf[4..]);
        }
        mirror(status)
    }
}

/// Ends the waiter the way the server ended: same exit code, or death by the same signal
/// (every disposition is the default since [`reset_dispositions`]).
///
/// # Safety
/// Child context.
unsafe fn mirror(status: libc::c_int) -> ! {
    if libc::WIFEXITED(status) {
        exit(libc::WEXITSTATUS(status));
    }
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        // SAFETY: system calls on stack values.
        unsafe {
            let pid = libc::syscall(libc::SYS_getpid) as libc::pid_t;
            kill(pid, signal);
            unblock(signal);
        }
        exit(128 + signal);
    }
    exit(HELPER_FAILED)
}

/// Sets every signal's disposition to the default: the helpers run none of Warden's
/// handlers (whose state they no longer hold), and the waiter can die by the server's
/// signal. Called before [`release_inherited`] (it uses libc's `sigaction`).
///
/// A disposition that is already the default is left alone, and so is SIGCHLD's (made the
/// default before the helpers forked): setting the default action of a signal whose default
/// is to be ignored discards it when it is pending, even blocked, and a SIGCHLD lost that
/// way is a child's exit never noticed.
///
/// # Safety
/// Child context.
pub(crate) unsafe fn reset_dispositions() {
    // SAFETY: sigaction on zeroed stack values (SIG_DFL, empty mask); failures (SIGKILL,
    // SIGSTOP, libc's internal signals) are harmless.
    unsafe {
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        for signal in 1..NSIG {
            if signal == libc::SIGCHLD {
                continue;
            }
            let mut current: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut current) != 0
                || current.sa_sigaction == libc::SIG_DFL
            {
                continue;
            }
            libc::sigaction(signal, &default, std::ptr::null_mut());
        }
    }
}

/// Init: reaps every process of the namespace; when the server exits, passes its status and
/// what it can see of the limits (peak memory, processes left, scratch space) to the waiter
/// and exits, which makes the kernel kill whatever is left in the namespace.
///
/// # Safety
/// Child context, after [`release_inherited`] or instead of it; `args.server` is our child.
pub(crate) unsafe fn init_loop(args: &InitArgs) -> ! {
    // SAFETY: system calls on stack buffers and inherited descriptors, nothing else.
    unsafe {
        loop {
            let mut fds = [
                libc::pollfd {
                    fd: args.link,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: args.sigchld,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            match poll(&mut fds) {
                Ok(_) => {}
                Err(libc::EINTR) => continue,
                Err(_) => exit(HELPER_FAILED),
            }
            if fds[0].revents != 0 {
                // The waiter died (it never writes): take the namespace down.
                exit(HELPER_FAILED);
            }
            drain(args.sigchld);
            loop {
                let mut status = 0;
                let mut usage: libc::rusage = std::mem::zeroed();
                let pid = wait4(-1, &mut status, libc::WNOHANG, Some(&mut usage)).unwrap_or(0);
                if pid == args.server {
                    let facts = ExitFacts {
                        max_rss_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
                        processes: count_processes(),
                        scratch_full: scratch_full(args),
                    };
                    let mut message = [0u8; 4 + RECORD];
                    message[..4].copy_from_slice(&status.to_ne_bytes());
                    message[4..].copy_from_slice(&facts.encode());
                    let _ = send(args.link, &message, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT);
                    exit(0);
                }
                if pid <= 0 {
                    break;
                }
            }
        }
    }
}

/// Processes in the sandbox's pid namespace besides init (entries of its `/proc`).
///
/// # Safety
/// Child context (init), after the server built the root (its `/proc` is the sandbox's).
unsafe fn count_processes() -> u64 {
    let mut count = 0u64;
    // SAFETY: system calls on a constant path and a stack buffer.
    unsafe {
        let Ok(fd) = open(
            c"/proc",
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        ) else {
            return 0;
        };
        let mut buf = [0u8; 4096];
        loop {
            let n = libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len());
            let Ok(n) = usize::try_from(n) else { break };
            if n == 0 {
                break;
            }
            // struct linux_dirent64: u64 ino, i64 off, u16 reclen, u8 type, name.
            let mut at = 0;
            while at + 19 < n {
                let reclen = usize::from(u16::from_ne_bytes([buf[at + 16], buf[at + 17]]));
                if reclen == 0 || at + reclen > n {
                    break;
                }
                let name = &buf[at + 19..at + reclen];
                let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
                let name = &name[..end];
                if !name.is_empty() && name != b"1" && name.iter().all(u8::is_ascii_digit) {
                    count += 1;
                }
                at += reclen;
            }
        }
        close(fd);
    }
    count
}

/// Whether the scratch tmpfs has (nearly) no space left.
///
/// # Safety
/// Child context (init), in the sandbox's mount namespace and root.
unsafe fn scratch_full(args: &InitArgs) -> bool {
    if args.scratch[0] == 0 {
        return false;
    }
    // SAFETY: statfs writes into a stack value; the path is NUL-terminated (InitArgs::new).
    unsafe {
        let mut stat: libc::statfs = std::mem::zeroed();
        if libc::syscall(
            libc::SYS_statfs,
            args.scratch.as_ptr(),
            &mut stat as *mut libc::statfs,
        ) != 0
        {
            return false;
        }
        let free = (stat.f_bavail as u64).saturating_mul(stat.f_bsize as u64);
        free < args.full_below
    }
}

/// Empties a non-blocking signalfd.
///
/// # Safety
/// `fd` must be a non-blocking signalfd.
unsafe fn drain(fd: RawFd) {
    let mut buf = [0u8; 4 * 128];
    // SAFETY: buf is a live stack buffer.
    while unsafe { read(fd, &mut buf) }.is_ok_and(|n| n > 0) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> Mapping {
        parse_mapping(text.as_bytes()).unwrap()
    }

    #[test]
    fn maps_lines_are_parsed() {
        let heap =
            line("5581c8a1e000-5581c8b3f000 rw-p 00000000 00:00 0                          [heap]");
        assert_eq!((heap.start, heap.end), (0x5581c8a1e000, 0x5581c8b3f000));
        assert!(heap.private && heap.anonymous && !heap.file);
        let lib = line(
            "7f3a1c000000-7f3a1c028000 r--p 00000000 fe:01 1835057                    /usr/lib/x86_64-linux-gnu/libc.so.6",
        );
        assert!(lib.file && !lib.anonymous);
        let plain = line("7f3a1c200000-7f3a1c210000 rw-p 00000000 00:00 0 ");
        assert!(plain.anonymous);
        let unnamed = line("7f3a1c200000-7f3a1c210000 rw-p 00000000 00:00 0");
        assert!(unnamed.anonymous);
        let vdso =
            line("7ffd8a5f1000-7ffd8a5f3000 r-xp 00000000 00:00 0                          [vdso]");
        assert!(!vdso.anonymous, "the vDSO is not Warden's memory");
        let shared = line(
            "7f3a1c300000-7f3a1c310000 rw-s 00000000 00:01 4242                       /memfd:x (deleted)",
        );
        assert!(!shared.private && shared.file);
        assert!(parse_mapping(b"not a mapping").is_none());
        assert!(parse_mapping(b"").is_none());
        assert!(parse_mapping(b"10-5 rw-p 0 0:0 0").is_none());
    }

    #[test]
    fn the_stack_the_tls_and_data_segment_tails_are_kept() {
        let anon = line("1000-5000 rw-p 00000000 00:00 0");
        assert!(releasable(&anon, false, &[0x9000]));
        assert!(!releasable(&anon, false, &[0x1000]), "holds a kept address");
        assert!(!releasable(&anon, false, &[0x4fff]));
        assert!(releasable(&anon, false, &[0x5000]), "the end is not inside");
        assert!(
            !releasable(&anon, true, &[]),
            "a .bss right after a file mapping"
        );
        let file = line("1000-5000 rw-p 00000000 fe:01 77 /usr/bin/warden");
        assert!(!releasable(&file, false, &[]));
        let shared = line("1000-5000 rw-s 00000000 00:00 0");
        assert!(!releasable(&shared, false, &[]));
    }
}
