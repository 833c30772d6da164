//! The seccomp filter: a small classic-BPF program built in the parent.
//!
//! It is a deny list over a default of "allow", because an MCP server is an arbitrary
//! interpreter and an allow list would have to anticipate every runtime. What it refuses:
//!
//! | calls | answer |
//! |---|---|
//! | another architecture's calling convention (i386 `int 0x80`, x32) | kill the process |
//! | numbers above the newest one reviewed ([`HIGHEST_REVIEWED`]) | `ENOSYS` |
//! | `ptrace`, `process_vm_readv`, `process_vm_writev` | `EPERM` |
//! | `io_uring_setup`, `io_uring_enter`, `io_uring_register` | `EPERM` |
//! | `init_module`, `finit_module`, `delete_module` | `EPERM` |
//! | `mount`, `umount2`, `pivot_root`, `open_tree`, `open_tree_attr`, `move_mount`, `fsopen`, `fsconfig`, `fsmount`, `fspick`, `mount_setattr` | `EPERM` |
//! | `add_key`, `request_key`, `keyctl` | `EPERM` |
//! | `setns`; `unshare` and `clone` with any `CLONE_NEW*` flag | `EPERM` |
//! | `clone3` (its flags are behind a pointer BPF cannot follow) | `ENOSYS`, so libc falls back to `clone` |
//! | `bpf`, `perf_event_open`, `userfaultfd` | `EPERM` |
//! | network `none`: `socket`, `socketpair` with a family other than `AF_UNIX` | `EACCES` |
//!
//! Unknown future system calls get `ENOSYS`, which programs already handle as "older
//! kernel"; a new mount-like call therefore cannot slip past the list.

use std::io;

/// `struct sock_filter`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SockFilter {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

/// `struct sock_fprog`.
#[repr(C)]
pub(crate) struct SockFprog {
    len: libc::c_ushort,
    filter: *const SockFilter,
}

// Classic BPF opcodes (linux/bpf_common.h).
const BPF_LD: u16 = 0x00;
const BPF_W: u16 = 0x00;
const BPF_ABS: u16 = 0x20;
const BPF_JMP: u16 = 0x05;
const BPF_JEQ: u16 = 0x10;
const BPF_JGT: u16 = 0x20;
const BPF_JSET: u16 = 0x40;
const BPF_K: u16 = 0x00;
const BPF_RET: u16 = 0x06;

const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_ALLOW: u32 = 0x7fff_0000;

// struct seccomp_data offsets.
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
/// Low 32 bits of `args[0]` (little-endian; the kernel reads these as `int` or the low word).
const OFFSET_ARG0_LOW: u32 = 16;

/// The highest system call number reviewed for this list (Linux 6.18: `file_setattr`).
/// From 424 on, x86_64 and aarch64 share numbers.
pub(crate) const HIGHEST_REVIEWED: u32 = 469;
/// `open_tree_attr` (Linux 6.15), not yet in every libc.
const SYS_OPEN_TREE_ATTR: u32 = 467;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

const NAMESPACE_FLAGS: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u32;

/// Where a jump goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Next,
    Allow,
    Eperm,
    Enosys,
    Kill,
    NamespaceCheck,
    FamilyCheck,
}

/// One instruction before jump resolution.
#[derive(Debug, Clone, Copy)]
enum Insn {
    Load(u32),
    JumpIf {
        op: u16,
        k: u32,
        then: Target,
        otherwise: Target,
    },
    Ret(u32),
    Label(Target),
}

/// Builds the filter for this architecture.
pub(crate) fn build(network_off: bool) -> io::Result<Vec<SockFilter>> {
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = network_off;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the seccomp filter is built for x86_64 and aarch64 only",
        ))
    }
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        assemble(&program(network_off))
    }
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn nr(call: libc::c_long) -> u32 {
    // System call numbers are small and non-negative on these architectures.
    call as u32
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn program(network_off: bool) -> Vec<Insn> {
    use Target::*;
    let denied = [
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_open_tree,
        libc::SYS_move_mount,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_keyctl,
        libc::SYS_setns,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
    ];
    let mut p = vec![
        Insn::Load(OFFSET_ARCH),
        Insn::JumpIf {
            op: BPF_JEQ,
            k: AUDIT_ARCH,
            then: Next,
            otherwise: Kill,
        },
        Insn::Load(OFFSET_NR),
        // Also catches x32 numbers (bit 30 set).
        Insn::JumpIf {
            op: BPF_JGT,
            k: HIGHEST_REVIEWED,
            then: Enosys,
            otherwise: Next,
        },
    ];
    let eq = |k: u32, then: Target| Insn::JumpIf {
        op: BPF_JEQ,
        k,
        then,
        otherwise: Next,
    };
    p.extend(denied.iter().map(|&call| eq(nr(call), Eperm)));
    p.push(eq(SYS_OPEN_TREE_ATTR, Eperm));
    p.push(eq(nr(libc::SYS_clone3), Enosys));
    p.push(eq(nr(libc::SYS_clone), NamespaceCheck));
    p.push(eq(nr(libc::SYS_unshare), NamespaceCheck));
    if network_off {
        p.push(eq(nr(libc::SYS_socket), FamilyCheck));
        p.push(eq(nr(libc::SYS_socketpair), FamilyCheck));
    }
    p.push(Insn::Ret(RET_ALLOW));

    p.push(Insn::Label(NamespaceCheck));
    p.push(Insn::Load(OFFSET_ARG0_LOW));
    p.push(Insn::JumpIf {
        op: BPF_JSET,
        k: NAMESPACE_FLAGS,
        then: Eperm,
        otherwise: Allow,
    });
    if network_off {
        p.push(Insn::Label(FamilyCheck));
        p.push(Insn::Load(OFFSET_ARG0_LOW));
        p.push(Insn::JumpIf {
            op: BPF_JEQ,
            k: libc::AF_UNIX as u32,
            then: Allow,
            otherwise: Next,
        });
        p.push(Insn::Ret(RET_ERRNO | libc::EACCES as u32));
    }
    p.push(Insn::Label(Allow));
    p.push(Insn::Ret(RET_ALLOW));
    p.push(Insn::Label(Eperm));
    p.push(Insn::Ret(RET_ERRNO | libc::EPERM as u32));
    p.push(Insn::Label(Enosys));
    p.push(Insn::Ret(RET_ERRNO | libc::ENOSYS as u32));
    p.push(Insn::Label(Kill));
    p.push(Insn::Ret(RET_KILL_PROCESS));
    p
}

/// Resolves labels into relative jump offsets.
fn assemble(program: &[Insn]) -> io::Result<Vec<SockFilter>> {
    // Index of each real instruction, and where each label points.
    let mut labels: Vec<(Target, usize)> = Vec::new();
    let mut count = 0usize;
    for insn in program {
        match insn {
            Insn::Label(target) => labels.push((*target, count)),
            _ => count += 1,
        }
    }
    let offset = |from: usize, target: Target| -> io::Result<u8> {
        let to = if target == Target::Next {
            from + 1
        } else {
            labels
                .iter()
                .find(|(t, _)| *t == target)
                .map(|(_, at)| *at)
                .ok_or_else(|| io::Error::other(format!("seccomp label {target:?} missing")))?
        };
        to.checked_sub(from + 1)
            .and_then(|delta| u8::try_from(delta).ok())
            .ok_or_else(|| io::Error::other("seccomp jump out of range"))
    };
    let mut out = Vec::with_capacity(count);
    for insn in program {
        let at = out.len();
        match *insn {
            Insn::Label(_) => {}
            Insn::Load(offset) => out.push(SockFilter {
                code: BPF_LD | BPF_W | BPF_ABS,
                jt: 0,
                jf: 0,
                k: offset,
            }),
            Insn::Ret(value) => out.push(SockFilter {
                code: BPF_RET | BPF_K,
                jt: 0,
                jf: 0,
                k: value,
            }),
            Insn::JumpIf {
                op,
                k,
                then,
                otherwise,
            } => out.push(SockFilter {
                code: BPF_JMP | op | BPF_K,
                jt: offset(at, then)?,
                jf: offset(at, otherwise)?,
                k,
            }),
        }
    }
    Ok(out)
}

/// Installs `filter` on the calling thread. Async-signal-safe; `no_new_privs` must be set.
///
/// # Safety
/// `filter` must be a program produced by [`build`].
pub(crate) unsafe fn install(filter: &[SockFilter]) -> Result<(), i32> {
    let prog = SockFprog {
        len: filter.len() as libc::c_ushort,
        filter: filter.as_ptr(),
    };
    // SAFETY: prog points at a live program for the duration of the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0u32,
            &prog as *const SockFprog,
        )
    };
    if ret < 0 {
        Err(super::sys::errno())
    } else {
        Ok(())
    }
}

#[cfg(test)]
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod tests {
    use super::*;

    /// A tiny classic-BPF interpreter, enough for the instructions [`build`] emits.
    fn run(filter: &[SockFilter], arch: u32, nr: u32, arg0: u64) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_ne_bytes());
        data[4..8].copy_from_slice(&arch.to_ne_bytes());
        data[16..24].copy_from_slice(&arg0.to_ne_bytes());
        let mut acc = 0u32;
        let mut pc = 0usize;
        loop {
            let insn = filter[pc];
            match insn.code {
                c if c == BPF_LD | BPF_W | BPF_ABS => {
                    let at = insn.k as usize;
                    acc = u32::from_ne_bytes(data[at..at + 4].try_into().unwrap());
                    pc += 1;
                }
                c if c == BPF_RET | BPF_K => return insn.k,
                c => {
                    let taken = match c & 0xf0 {
                        BPF_JEQ => acc == insn.k,
                        BPF_JGT => acc > insn.k,
                        BPF_JSET => acc & insn.k != 0,
                        other => panic!("unexpected op {other:#x}"),
                    };
                    pc += 1 + usize::from(if taken { insn.jt } else { insn.jf });
                }
            }
        }
    }

    fn errno(e: i32) -> u32 {
        RET_ERRNO | e as u32
    }

    #[test]
    fn the_filter_refuses_what_it_lists_and_allows_the_rest() {
        let f = build(true).unwrap();
        let call = |c: libc::c_long, arg0: u64| run(&f, AUDIT_ARCH, nr(c), arg0);
        assert_eq!(call(libc::SYS_read, 0), RET_ALLOW);
        assert_eq!(call(libc::SYS_ptrace, 0), errno(libc::EPERM));
        assert_eq!(call(libc::SYS_io_uring_setup, 0), errno(libc::EPERM));
        assert_eq!(call(libc::SYS_mount, 0), errno(libc::EPERM));
        assert_eq!(call(libc::SYS_keyctl, 0), errno(libc::EPERM));
        assert_eq!(call(libc::SYS_clone3, 0), errno(libc::ENOSYS));
        let fork_flags = libc::SIGCHLD as u64;
        assert_eq!(call(libc::SYS_clone, fork_flags), RET_ALLOW);
        let new_user = (libc::CLONE_NEWUSER as u64) | fork_flags;
        assert_eq!(call(libc::SYS_clone, new_user), errno(libc::EPERM));
        assert_eq!(call(libc::SYS_unshare, libc::CLONE_FILES as u64), RET_ALLOW);
        assert_eq!(
            call(libc::SYS_unshare, libc::CLONE_NEWNET as u64),
            errno(libc::EPERM)
        );
        assert_eq!(call(libc::SYS_socket, libc::AF_UNIX as u64), RET_ALLOW);
        assert_eq!(
            call(libc::SYS_socket, libc::AF_INET as u64),
            errno(libc::EACCES)
        );
        assert_eq!(
            call(libc::SYS_socket, libc::AF_NETLINK as u64),
            errno(libc::EACCES)
        );
        assert_eq!(run(&f, AUDIT_ARCH, 0x4000_0000, 0), errno(libc::ENOSYS));
        assert_eq!(
            run(&f, AUDIT_ARCH, HIGHEST_REVIEWED + 1, 0),
            errno(libc::ENOSYS)
        );
        assert_eq!(
            run(&f, AUDIT_ARCH, SYS_OPEN_TREE_ATTR, 0),
            errno(libc::EPERM)
        );
        assert_eq!(
            run(&f, 0x4000_0003, nr(libc::SYS_read), 0),
            RET_KILL_PROCESS
        );
    }

    #[test]
    fn the_program_is_small() {
        let len = build(true).unwrap().len();
        assert!(len < 50, "{len} instructions");
    }

    #[test]
    fn with_the_host_network_sockets_are_not_filtered() {
        let f = build(false).unwrap();
        let inet = run(&f, AUDIT_ARCH, nr(libc::SYS_socket), libc::AF_INET as u64);
        assert_eq!(inet, RET_ALLOW);
        assert_eq!(
            run(&f, AUDIT_ARCH, nr(libc::SYS_ptrace), 0),
            errno(libc::EPERM)
        );
    }
}
