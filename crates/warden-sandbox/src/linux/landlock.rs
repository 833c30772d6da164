//! Landlock, through its three system calls.
//!
//! The parent checks the ABI, opens every granted path (`O_PATH`) and validates the rules
//! against a throw-away ruleset, so that a bad path is reported with its name. The child
//! builds the real ruleset from the same descriptors, plus rules for the `/proc` and `/dev`
//! it has just mounted, and enforces it: system calls only.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use crate::SandboxError;

/// Filesystem access rights (`LANDLOCK_ACCESS_FS_*`).
pub(crate) mod fs {
    pub const EXECUTE: u64 = 1 << 0;
    pub const WRITE_FILE: u64 = 1 << 1;
    pub const READ_FILE: u64 = 1 << 2;
    pub const READ_DIR: u64 = 1 << 3;
    pub const REMOVE_DIR: u64 = 1 << 4;
    pub const REMOVE_FILE: u64 = 1 << 5;
    pub const MAKE_CHAR: u64 = 1 << 6;
    pub const MAKE_DIR: u64 = 1 << 7;
    pub const MAKE_REG: u64 = 1 << 8;
    pub const MAKE_SOCK: u64 = 1 << 9;
    pub const MAKE_FIFO: u64 = 1 << 10;
    pub const MAKE_BLOCK: u64 = 1 << 11;
    pub const MAKE_SYM: u64 = 1 << 12;
    /// ABI 2.
    pub const REFER: u64 = 1 << 13;
    /// ABI 3.
    pub const TRUNCATE: u64 = 1 << 14;
    /// ABI 5.
    pub const IOCTL_DEV: u64 = 1 << 15;

    /// Rights that make sense on a file (the kernel refuses directory rights there).
    pub const FILE: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;
    pub const READ: u64 = READ_FILE | READ_DIR;
    /// Everything a private writable directory needs; never device nodes.
    pub const WRITE: u64 = READ
        | WRITE_FILE
        | REMOVE_DIR
        | REMOVE_FILE
        | MAKE_DIR
        | MAKE_REG
        | MAKE_SOCK
        | MAKE_FIFO
        | MAKE_SYM
        | REFER
        | TRUNCATE;

    /// Every right an ABI version knows.
    pub fn all(abi: u32) -> u64 {
        let mut all = EXECUTE
            | WRITE_FILE
            | READ_FILE
            | READ_DIR
            | REMOVE_DIR
            | REMOVE_FILE
            | MAKE_CHAR
            | MAKE_DIR
            | MAKE_REG
            | MAKE_SOCK
            | MAKE_FIFO
            | MAKE_BLOCK
            | MAKE_SYM;
        if abi >= 2 {
            all |= REFER;
        }
        if abi >= 3 {
            all |= TRUNCATE;
        }
        if abi >= 5 {
            all |= IOCTL_DEV;
        }
        all
    }
}

/// Network rights (`LANDLOCK_ACCESS_NET_*`, ABI 4).
mod net {
    pub const BIND_TCP: u64 = 1 << 0;
    pub const CONNECT_TCP: u64 = 1 << 1;
}

/// Scopes (`LANDLOCK_SCOPE_*`, ABI 6).
mod scope {
    pub const ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
    pub const SIGNAL: u64 = 1 << 1;
}

const CREATE_RULESET_VERSION: libc::c_uint = 1 << 0;
const RULE_PATH_BENEATH: libc::c_int = 1;
/// The newest ABI this code knows the rights of.
const KNOWN_ABI: u32 = 7;

/// `struct landlock_ruleset_attr`. Older kernels accept the larger struct as long as the
/// fields they do not know are zero.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// `struct landlock_path_beneath_attr` (packed in the kernel's UAPI).
#[repr(C, packed)]
struct PathBeneath {
    allowed_access: u64,
    parent_fd: i32,
}

/// The kernel's Landlock ABI version.
pub(crate) fn abi() -> io::Result<u32> {
    // SAFETY: with a null attribute and the VERSION flag the call reads no memory.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    if version < 0 {
        return Err(io::Error::last_os_error());
    }
    u32::try_from(version).map_err(|_| io::Error::other("implausible Landlock ABI version"))
}

/// What the ruleset handles, decided in the parent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    pub attr: RulesetAttr,
    pub abi: u32,
}

impl Plan {
    /// The filesystem rights the ruleset handles (every one the kernel knows).
    pub(crate) fn attr_fs(&self) -> u64 {
        self.attr.handled_access_fs
    }
}

/// Checks the kernel against what the profile needs and decides what to handle.
///
/// Needed, or the profile would not mean what it says:
/// - ABI 1: read, write and execute distinctions.
/// - ABI 2 (`REFER`) when something is writable: without it Landlock refuses every rename
///   or link across directories, even inside the scratch directory.
/// - ABI 3 (`TRUNCATE`): without it a read-only file could still be truncated.
///
/// Used when present: ABI 4 network rights (refusing TCP when the network is off, under the
/// network namespace and seccomp), ABI 5 `IOCTL_DEV`, ABI 6 scopes (no abstract UNIX socket
/// or signal outside the sandbox).
pub(crate) fn plan(has_write: bool, network_off: bool) -> Result<Plan, SandboxError> {
    let abi = abi().map_err(|e| SandboxError::Unavailable {
        reason: match e.raw_os_error() {
            Some(libc::ENOSYS) => "the kernel has no Landlock (Linux 5.13 or later, built with \
                                   CONFIG_SECURITY_LANDLOCK)"
                .to_owned(),
            Some(libc::EOPNOTSUPP) => "Landlock is disabled on this kernel (add `landlock` to \
                                       the `lsm=` boot parameter)"
                .to_owned(),
            _ => format!("could not query Landlock: {e}"),
        },
    })?;
    plan_for(abi, has_write, network_off)
}

/// [`plan`] for a given kernel ABI.
fn plan_for(abi: u32, has_write: bool, network_off: bool) -> Result<Plan, SandboxError> {
    let too_old = |right, needed, kernel| SandboxError::LandlockTooOld {
        available: abi,
        right,
        needed,
        kernel,
    };
    if has_write && abi < 2 {
        return Err(too_old(
            "LANDLOCK_ACCESS_FS_REFER (renames within writable paths)",
            2,
            "5.19",
        ));
    }
    if abi < 3 {
        return Err(too_old(
            "LANDLOCK_ACCESS_FS_TRUNCATE (read-only files stay untruncated)",
            3,
            "6.2",
        ));
    }
    let known = abi.min(KNOWN_ABI);
    let mut attr = RulesetAttr {
        handled_access_fs: fs::all(known),
        handled_access_net: 0,
        scoped: 0,
    };
    if known >= 4 && network_off {
        attr.handled_access_net = net::BIND_TCP | net::CONNECT_TCP;
    }
    if known >= 6 {
        attr.scoped = scope::ABSTRACT_UNIX_SOCKET | scope::SIGNAL;
    }
    Ok(Plan { attr, abi })
}

/// One granted path, opened in the parent.
#[derive(Debug)]
pub(crate) struct Rule {
    pub fd: OwnedFd,
    pub access: u64,
}

/// Opens each path with `O_PATH`, checks that the descriptor is the resolved path (nothing
/// was swapped in between), and merges the rights of duplicates. Returns the rules and the
/// path of each, for error messages.
pub(crate) fn open_rules(
    grants: &[(PathBuf, u64)],
    handled: u64,
) -> Result<(Vec<Rule>, Vec<PathBuf>), SandboxError> {
    let mut merged: Vec<(PathBuf, u64)> = Vec::new();
    for (path, access) in grants {
        match merged.iter_mut().find(|(p, _)| p == path) {
            Some((_, rights)) => *rights |= access,
            None => merged.push((path.clone(), *access)),
        }
    }
    let mut rules = Vec::with_capacity(merged.len());
    let mut paths = Vec::with_capacity(merged.len());
    for (path, access) in merged {
        let fd = open_path(&path)?;
        let meta = std::fs::metadata(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .map_err(|source| path_error(&path, source))?;
        let mut access = access & handled;
        if !meta.is_dir() {
            access &= fs::FILE;
        }
        if access == 0 {
            continue;
        }
        rules.push(Rule { fd, access });
        paths.push(path);
    }
    Ok((rules, paths))
}

fn path_error(path: &Path, source: io::Error) -> SandboxError {
    SandboxError::Path {
        path: path.to_path_buf(),
        source,
    }
}

fn open_path(path: &Path) -> Result<OwnedFd, SandboxError> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        path_error(
            path,
            io::Error::new(io::ErrorKind::InvalidInput, "the path contains a NUL byte"),
        )
    })?;
    // SAFETY: c_path is a valid NUL-terminated string for the duration of the call.
    let fd = unsafe { libc::open(c_path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(path_error(path, io::Error::last_os_error()));
    }
    // SAFETY: open returned a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let opened = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map_err(|source| path_error(path, source))?;
    if opened != path {
        return Err(path_error(
            path,
            io::Error::other(format!(
                "it changed while being granted (now {})",
                opened.display()
            )),
        ));
    }
    Ok(fd)
}

/// Builds a ruleset from `rules` in the parent, to report a refused rule with its path.
pub(crate) fn validate(plan: &Plan, rules: &[Rule], paths: &[PathBuf]) -> Result<(), SandboxError> {
    // SAFETY: the attribute lives across the call; the result is checked.
    let ruleset = unsafe { create_ruleset(&plan.attr) };
    let ruleset = match ruleset {
        // SAFETY: a fresh descriptor owned by nothing else.
        Ok(fd) => unsafe { OwnedFd::from_raw_fd(fd) },
        Err(errno) => {
            return Err(SandboxError::Setup {
                step: crate::Step::LandlockRuleset,
                source: io::Error::from_raw_os_error(errno),
            });
        }
    };
    for (rule, path) in rules.iter().zip(paths) {
        // SAFETY: both descriptors are open for the duration of the call.
        let added = unsafe { add_rule(ruleset.as_raw_fd(), rule.fd.as_raw_fd(), rule.access) };
        if let Err(errno) = added {
            return Err(SandboxError::LandlockRule {
                path: path.clone(),
                source: io::Error::from_raw_os_error(errno),
            });
        }
    }
    Ok(())
}

/// `landlock_create_ruleset`. Async-signal-safe.
///
/// # Safety
/// None beyond the system call's; the attribute is read by the kernel only.
pub(crate) unsafe fn create_ruleset(attr: &RulesetAttr) -> Result<RawFd, i32> {
    // SAFETY: attr points to a live struct of the size passed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            attr as *const RulesetAttr,
            std::mem::size_of::<RulesetAttr>(),
            0u32,
        )
    };
    if fd < 0 {
        return Err(super::sys::errno());
    }
    RawFd::try_from(fd).map_err(|_| libc::EBADF)
}

/// `landlock_add_rule` for a path beneath `parent_fd`. Async-signal-safe.
///
/// # Safety
/// `ruleset` and `parent_fd` must be open descriptors.
pub(crate) unsafe fn add_rule(ruleset: RawFd, parent_fd: RawFd, access: u64) -> Result<(), i32> {
    let attr = PathBeneath {
        allowed_access: access,
        parent_fd,
    };
    // SAFETY: attr is a live packed struct matching the UAPI layout.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            RULE_PATH_BENEATH,
            &attr as *const PathBeneath,
            0u32,
        )
    };
    if ret < 0 {
        Err(super::sys::errno())
    } else {
        Ok(())
    }
}

/// `landlock_restrict_self`. Async-signal-safe.
///
/// # Safety
/// `ruleset` must be an open Landlock ruleset descriptor; `no_new_privs` must be set.
pub(crate) unsafe fn restrict_self(ruleset: RawFd) -> Result<(), i32> {
    // SAFETY: plain system call on a descriptor.
    let ret = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) };
    if ret < 0 {
        Err(super::sys::errno())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rights_per_abi() {
        assert_eq!(fs::all(1), (1 << 13) - 1);
        assert_eq!(fs::all(3) & fs::TRUNCATE, fs::TRUNCATE);
        assert_eq!(fs::all(4), fs::all(3));
        assert_eq!(fs::all(7), (1 << 16) - 1);
        assert_eq!(fs::WRITE & (fs::MAKE_CHAR | fs::MAKE_BLOCK), 0);
    }

    #[test]
    fn an_old_abi_is_an_error_naming_the_missing_right() {
        let err = plan_for(1, true, true).unwrap_err();
        assert!(
            matches!(
                err,
                SandboxError::LandlockTooOld {
                    available: 1,
                    needed: 2,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("REFER"), "{err}");
        let err = plan_for(2, false, true).unwrap_err();
        assert!(err.to_string().contains("TRUNCATE"), "{err}");
        assert!(err.to_string().contains("Linux 6.2"), "{err}");
        let plan = plan_for(3, true, true).unwrap();
        assert_eq!(
            plan.attr.handled_access_net, 0,
            "no network rights before ABI 4"
        );
        assert_eq!(plan.attr.scoped, 0, "no scopes before ABI 6");
        let plan = plan_for(9, true, false).unwrap();
        assert_eq!(
            plan.attr.handled_access_fs,
            fs::all(7),
            "unknown ABIs use what we know"
        );
        assert_eq!(
            plan.attr.handled_access_net, 0,
            "host network: TCP not handled"
        );
        assert_ne!(plan.attr.scoped, 0);
    }

    #[test]
    fn this_kernel_has_what_the_default_profile_needs() {
        let plan = plan(true, true).unwrap();
        assert!(plan.abi >= 3);
        assert_ne!(plan.attr.handled_access_fs & fs::TRUNCATE, 0);
    }

    #[test]
    fn rules_for_files_carry_file_rights_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let dir = std::fs::canonicalize(dir.path()).unwrap();
        let file = std::fs::canonicalize(&file).unwrap();
        let grants = [
            (dir.clone(), fs::WRITE),
            (file.clone(), fs::READ),
            (dir, fs::EXECUTE),
        ];
        let (rules, paths) = open_rules(&grants, fs::all(7)).unwrap();
        assert_eq!(paths.len(), 2, "duplicates merge");
        assert_eq!(rules[0].access, fs::WRITE | fs::EXECUTE);
        assert_eq!(rules[1].access, fs::READ_FILE);
        assert_eq!(paths[1], file);
        let plan = plan(true, true).unwrap();
        validate(&plan, &rules, &paths).unwrap();
    }
}
