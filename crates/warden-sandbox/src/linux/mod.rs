//! The Linux implementation: preparation in the parent, system calls in the child.

mod cgroup;
mod helpers;
pub(crate) mod landlock;
mod root;
mod seccomp;
mod sys;

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use crate::error::{Namespace, SandboxError, Step};
use crate::profile::{absolute, canonical, check_env, is_within};
use crate::resolve::resolve_grant;
use crate::{Confinement, LimitReached, Limits, Network, Profile, SANDBOX_GID, SANDBOX_UID};

pub(crate) use self::helpers::ExitFacts;
use self::helpers::{FACTS_CODE, InitArgs, RECORD, WaiterArgs};
use self::landlock::fs;
use self::sys::{check, close_all_except, errno, exit, fork_raw, sigset, write_file};

/// Device nodes of the minimal `/dev` (bound from the host's), with their paths.
const DEVICES: [(&str, &CStr); 5] = [
    ("null", c"/dev/null"),
    ("zero", c"/dev/zero"),
    ("full", c"/dev/full"),
    ("random", c"/dev/random"),
    ("urandom", c"/dev/urandom"),
];

/// Symlinks of the minimal `/dev`: (target, link).
const DEV_LINKS: [(&CStr, &CStr); 4] = [
    (c"/proc/self/fd", c"/dev/fd"),
    (c"/proc/self/fd/0", c"/dev/stdin"),
    (c"/proc/self/fd/1", c"/dev/stdout"),
    (c"/proc/self/fd/2", c"/dev/stderr"),
];

/// Landlock rules for what the child mounts itself: (path, rights, name for errors).
const INNER_RULES: [(&CStr, u64, &str); 3] = [
    (c"/proc", fs::READ, "/proc"),
    (c"/dev", fs::READ | fs::WRITE_FILE, "/dev"),
    (c"/dev/shm", fs::WRITE, "/dev/shm"),
];

/// Names of the Landlock rules the child adds itself, for error reports.
const INNER_RULE_NAMES: [&str; 4] = ["/proc", "/dev", "/dev/shm", "scratch"];

/// The tmpfs behind `/dev` (its only sizeable content is `/dev/shm`).
const DEV_TMPFS_OPTIONS: &CStr = c"mode=0755,size=64m";

/// The tmpfs that becomes `/`: directories, mount points and symlinks only.
const ROOT_TMPFS_OPTIONS: &CStr = c"mode=0755,size=1m";

/// The host name inside the sandbox.
const HOSTNAME: &[u8] = b"warden-sandbox";

/// Exit status of a helper that could not do its job.
const HELPER_FAILED: libc::c_int = 125;

/// Signals the waiter and init keep blocked. Termination signals sent to the process group
/// reach the server directly; the helpers must not die of them first (their death kills the
/// server at once). SIGCHLD is read through a signalfd; SIGPIPE, from the waiter's report
/// to a Warden that stopped listening, stays pending.
const HELPER_BLOCKED: [libc::c_int; 8] = [
    libc::SIGPIPE,
    libc::SIGCHLD,
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

// Mount API constants (linux/mount.h, linux/fcntl.h), not in every libc.
const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;

/// `struct mount_attr`, for `mount_setattr`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}
const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;

/// `struct rlimit64`, for `prlimit64`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct Rlimit64 {
    cur: u64,
    max: u64,
}

/// One `setrlimit` the child performs.
#[derive(Debug, Clone, Copy)]
struct RlimitSet {
    resource: u32,
    limit: Rlimit64,
    name: &'static str,
}

/// Everything the child needs, allocated in the parent.
#[derive(Debug)]
struct Prepared {
    /// uid/gid to switch to before creating the user namespace (Warden is root).
    drop_to: Option<(libc::uid_t, libc::gid_t)>,
    namespaces: Vec<Namespace>,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    lifeline: RawFd,
    report: Arc<Report>,
    layout: root::Layout,
    landlock: landlock::Plan,
    rules: Vec<landlock::Rule>,
    rlimits: Vec<RlimitSet>,
    seccomp: Vec<seccomp::SockFilter>,
    helper_blocked: libc::sigset_t,
    sigchld: libc::sigset_t,
    pinned: Vec<PreparedPin>,
    /// The cgroup leaf the waiter joins (its `cgroup.procs` descriptors), kept open for as
    /// long as the command can be spawned.
    _cgroup: Option<Arc<cgroup::Cgroup>>,
    cgroup_procs: Vec<RawFd>,
    scratch: ScratchMount,
    /// Network `proxy`: the listener's port, and the end of a socket pair on which the
    /// waiter sends it to Warden.
    proxy: Option<(u16, OwnedFd)>,
    /// Warden's argument and environment strings, which init (a fork that never execs, and
    /// the one helper a server can see in its `/proc`) overwrites.
    wipe: [(usize, usize); 2],
}

/// The scratch tmpfs, as the child mounts it.
#[derive(Debug)]
struct ScratchMount {
    path: CString,
    options: CString,
    /// Landlock rights on it (read, write, execute, as the profile lists it).
    rights: u64,
    /// Below this many free bytes at the server's exit, the scratch counts as full.
    full_below: u64,
    /// Files copied in: (path inside, source descriptor, size).
    files: Vec<(CString, OwnedFd)>,
}

/// A [`crate::PinnedFile`] as the child checks it.
#[derive(Debug)]
struct PreparedPin {
    paths: Vec<CString>,
    search: bool,
    dev: u64,
    ino: u64,
    size: u64,
    ctime: i64,
    ctime_nsec: i64,
}

/// Most pinned files one sandbox checks, and most candidate paths of one.
const MAX_PINNED: usize = 64;
const MAX_PIN_CANDIDATES: usize = 255;

fn prepare_pins(pinned: &[crate::PinnedFile]) -> Result<Vec<PreparedPin>, SandboxError> {
    if pinned.len() > MAX_PINNED {
        return Err(SandboxError::InvalidProfile {
            reason: format!(
                "{} pinned files; at most {MAX_PINNED} are checked",
                pinned.len()
            ),
        });
    }
    let mut out = Vec::with_capacity(pinned.len());
    for pin in pinned {
        if pin.paths.len() > MAX_PIN_CANDIDATES {
            return Err(SandboxError::InvalidProfile {
                reason: format!(
                    "a pinned file has {} candidate paths; at most {MAX_PIN_CANDIDATES}",
                    pin.paths.len()
                ),
            });
        }
        let mut paths = Vec::with_capacity(pin.paths.len());
        for path in &pin.paths {
            let path = absolute(path)?;
            paths.push(
                CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| {
                    SandboxError::Path {
                        path: path.clone(),
                        source: io::Error::new(
                            io::ErrorKind::InvalidInput,
                            "the path contains a NUL byte",
                        ),
                    }
                })?,
            );
        }
        out.push(PreparedPin {
            paths,
            search: pin.search,
            dev: pin.dev,
            ino: pin.ino,
            size: pin.size,
            ctime: pin.ctime,
            ctime_nsec: pin.ctime_nsec,
        });
    }
    Ok(out)
}

pub(crate) fn confine(
    command: &mut Command,
    profile: &Profile,
) -> Result<Confinement, SandboxError> {
    let network_off = profile.network == Network::None;
    let seccomp = seccomp::build(network_off).map_err(|e| SandboxError::Unavailable {
        reason: e.to_string(),
    })?;

    // Every path is resolved without following a symlink inside a writable path: the
    // server could have planted it there to redirect a grant (see `resolve_grant`).
    let scratch = canonical(&absolute(&profile.scratch)?)?;
    let mut writable = profile
        .write
        .iter()
        .map(|p| canonical(&absolute(p)?))
        .collect::<Result<Vec<_>, _>>()?;
    writable.push(scratch.clone());
    let resolve = |list: &[PathBuf]| -> Result<Vec<PathBuf>, SandboxError> {
        list.iter().map(|p| resolve_grant(p, &writable)).collect()
    };
    let read = resolve(&profile.read)?;
    let write = resolve(&profile.write)?;
    let exec = resolve(&profile.exec)?;
    let plan = landlock::plan(!write.is_empty(), network_off)?;
    // The scratch path is a tmpfs of its own inside the sandbox: it is not bound from the
    // host, and its rights come from the lists that name it.
    let mut scratch_rights = 0;
    for (list, rights) in [(&read, fs::READ), (&write, fs::WRITE), (&exec, fs::EXECUTE)] {
        if list.contains(&scratch) {
            scratch_rights |= rights;
        }
        if let Some(inside) = list
            .iter()
            .find(|p| **p != scratch && is_within(p, &scratch))
        {
            return Err(SandboxError::InvalidProfile {
                reason: format!(
                    "{} is inside the scratch directory {}, which the sandbox replaces with a \
                     private tmpfs; it cannot be granted on its own",
                    inside.display(),
                    scratch.display()
                ),
            });
        }
    }
    let without_scratch = |list: Vec<PathBuf>| -> Vec<PathBuf> {
        list.into_iter().filter(|p| *p != scratch).collect()
    };
    let (read, write, exec) = (
        without_scratch(read),
        without_scratch(write),
        without_scratch(exec),
    );
    let limits = &profile.limits;
    if limits.memory == 0 || limits.disk == 0 || limits.processes == 0 {
        return Err(SandboxError::InvalidProfile {
            reason: "the memory, disk and process limits must be greater than zero".to_owned(),
        });
    }
    let files = scratch_files(&profile.scratch_files, &scratch)?;

    let given = Path::new(command.get_program());
    if !given.is_absolute() {
        return Err(SandboxError::InvalidProfile {
            reason: format!("the program {} must be an absolute path", given.display()),
        });
    }
    let copied = given.parent() == Some(scratch.as_path())
        && profile
            .scratch_files
            .iter()
            .any(|(name, _)| given.file_name() == Some(std::ffi::OsStr::new(name)));
    let mut program_link = None;
    let program = if copied {
        // A file copied into the scratch tmpfs: it exists only inside the sandbox.
        if scratch_rights & fs::EXECUTE == 0 {
            return Err(SandboxError::InvalidProfile {
                reason: format!(
                    "the program {} is in the scratch directory, which is not an exec path",
                    given.display()
                ),
            });
        }
        given.to_path_buf()
    } else {
        // The program's directory must not be reached through a planted link; the program
        // itself may be a link out of a write grant (a virtualenv's `bin/python`): it only
        // runs what it points to, whose installation the profile had to grant.
        let program_dir = given
            .parent()
            .map(|dir| resolve_grant(dir, &writable))
            .transpose()?;
        let program = canonical(given)?;
        if !exec.iter().any(|root| is_within(&program, root)) {
            return Err(SandboxError::InvalidProfile {
                reason: format!(
                    "the program {} is not inside any exec path of the profile",
                    program.display()
                ),
            });
        }
        // The path as given must exist in the new root too (a virtualenv's bin/python is
        // executed by that name, and its directory must be granted).
        root::check_reachable(given)?;
        // A program granted alone (`~/.cargo/bin/NAME`, whose directory is not granted) gets
        // a mount point at its own path; one named through a symlink there
        // (`~/.local/bin/NAME` of a `uv tool`) gets that symlink recreated in the new root.
        if let Some(dir) = program_dir
            && !read
                .iter()
                .chain(&write)
                .chain(&exec)
                .any(|root| is_within(&dir, root))
        {
            let named = dir.join(given.file_name().unwrap_or_default());
            if named != program {
                program_link = Some((program.clone(), named));
            } else if !exec.contains(&program) {
                return Err(SandboxError::InvalidProfile {
                    reason: format!(
                        "the program's directory {} is not granted, so {} would not exist in \
                         the sandbox",
                        dir.display(),
                        given.display()
                    ),
                });
            }
        }
        program
    };
    // The working directory: the command's, else the scratch directory; either way it must
    // exist inside the new root.
    let cwd = match command.get_current_dir() {
        None => scratch.clone(),
        Some(cwd) => resolve_grant(&absolute(cwd)?, &writable)?,
    };
    if !is_within(&cwd, &scratch) && !read.iter().chain(&write).any(|root| is_within(&cwd, root)) {
        return Err(SandboxError::InvalidProfile {
            reason: format!(
                "the working directory {} is not inside a read or write path",
                cwd.display()
            ),
        });
    }
    let mut layout = root::plan(&read, &write, &exec, &cwd, &scratch)?;
    if let Some((target, link)) = &program_link {
        root::add_link(&mut layout, target, link)?;
    }
    check_env(&profile.env)?;
    let cgroup = if limits.cgroup {
        cgroup::Cgroup::create(limits.memory, limits.processes).map(Arc::new)
    } else {
        None
    };
    let by_cgroup = Enforced {
        memory: cgroup.as_ref().is_some_and(|c| c.has_memory()),
        processes: cgroup.as_ref().is_some_and(|c| c.has_pids()),
    };
    let rlimits = rlimits(limits, by_cgroup)?;

    let (drop_to, uid, gid) = if crate::running_as_root() {
        (Some((SANDBOX_UID, SANDBOX_GID)), SANDBOX_UID, SANDBOX_GID)
    } else {
        // SAFETY: geteuid/getegid cannot fail.
        unsafe { (None, libc::geteuid(), libc::getegid()) }
    };
    // Every namespace the sandbox knows, the network one unless the network is the host's.
    let own_network = profile.network != Network::Host;
    let namespaces: Vec<Namespace> = ALL_NAMESPACES
        .iter()
        .copied()
        .filter(|ns| own_network || *ns != Namespace::Net)
        .collect();
    let (proxy, proxy_receiver) = match profile.network {
        Network::Proxy { port } => {
            if port == 0 {
                return Err(SandboxError::InvalidProfile {
                    reason: "the egress proxy's port inside the sandbox must not be 0".to_owned(),
                });
            }
            let (receiver, sender) = socket_pair().map_err(|source| SandboxError::Setup {
                step: Step::ProxyListener,
                source,
            })?;
            (Some((port, sender)), Some(receiver))
        }
        _ => (None, None),
    };

    let mut grants = Vec::new();
    grants.extend(read.into_iter().map(|p| (p, fs::READ)));
    grants.extend(write.into_iter().map(|p| (p, fs::WRITE)));
    grants.extend(exec.into_iter().map(|p| (p, fs::EXECUTE)));
    let (rules, paths) = landlock::open_rules(&grants, plan.attr_fs())?;
    landlock::validate(&plan, &rules, &paths)?;

    let pinned = prepare_pins(&profile.pinned)?;
    let pinned_paths = profile.pinned.iter().map(|p| p.paths.clone()).collect();
    let scratch_mount = ScratchMount {
        path: root::c_path(&scratch)?,
        options: tmpfs_options(limits.disk),
        rights: scratch_rights & plan.attr_fs(),
        full_below: (limits.disk / 100).max(64 * 1024),
        files,
    };
    let report = Arc::new(Report::new(paths, layout.bind_paths.clone(), pinned_paths)?);
    let prepared = Arc::new(Prepared {
        drop_to,
        namespaces,
        uid_map: format!("{uid} {uid} 1\n").into_bytes(),
        gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        lifeline: lifeline()?,
        report: Arc::clone(&report),
        layout,
        landlock: plan,
        rules,
        rlimits,
        seccomp,
        helper_blocked: sigset(&HELPER_BLOCKED),
        sigchld: sigset(&[libc::SIGCHLD]),
        pinned,
        cgroup_procs: cgroup.as_ref().map(|c| c.procs_fds()).unwrap_or_default(),
        _cgroup: cgroup.clone(),
        scratch: scratch_mount,
        proxy,
        wipe: argument_areas(),
    });

    tracing::debug!(
        program = %program.display(),
        landlock_abi = prepared.landlock.abi,
        rules = prepared.rules.len(),
        cgroup_memory = by_cgroup.memory,
        cgroup_pids = by_cgroup.processes,
        "confining a server"
    );
    if profile.network == Network::Host {
        tracing::warn!(
            program = %program.display(),
            "confining a server WITHOUT network isolation (network = host)"
        );
    }

    command.env_clear();
    command.envs(&profile.env);
    if let Network::Proxy { port } = profile.network {
        command.envs(Network::proxy_env(port));
    }
    command.current_dir(&cwd);
    command.process_group(0);
    let hook = Arc::clone(&prepared);
    // SAFETY: the hook performs only async-signal-safe system calls on data allocated
    // here; it allocates nothing, takes no lock, and never returns into std in the two
    // helper processes (they `_exit`).
    unsafe {
        command.pre_exec(move || child_main(&hook));
    }
    Ok(Confinement {
        program,
        proxy: proxy_receiver,
        report,
        watch: Watch {
            cgroup,
            limits: *limits,
            by_cgroup,
        },
    })
}

/// Which limits the cgroup enforces (the others are rlimits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Enforced {
    pub memory: bool,
    pub processes: bool,
}

/// What tells, after a server ended, which limit it reached.
#[derive(Debug)]
pub(crate) struct Watch {
    cgroup: Option<Arc<cgroup::Cgroup>>,
    limits: Limits,
    by_cgroup: Enforced,
}

impl Watch {
    /// The limits reached, from the cgroup's counters and what init saw at the server's
    /// exit (`facts`, when it could tell).
    pub(crate) fn reached(&self, facts: Option<ExitFacts>) -> Vec<LimitReached> {
        let mut reached = Vec::new();
        let events = self.cgroup.as_ref().map(|c| c.events()).unwrap_or_default();
        let limits = &self.limits;
        if self.by_cgroup.memory && events.oom_kills > 0 {
            reached.push(LimitReached::Memory {
                limit: limits.memory,
                peak: None,
            });
        }
        if self.by_cgroup.processes && events.pids_refused > 0 {
            reached.push(LimitReached::Processes {
                limit: limits.processes,
            });
        }
        if let Some(facts) = facts {
            // Without a cgroup, RLIMIT_DATA makes allocations fail near the limit; a peak
            // resident size within a tenth of it is the sign.
            let peak = facts.max_rss_kib.saturating_mul(1024);
            if !self.by_cgroup.memory && peak >= limits.memory / 10 * 9 {
                reached.push(LimitReached::Memory {
                    limit: limits.memory,
                    peak: Some(peak),
                });
            }
            // RLIMIT_NPROC counts the waiter and init too, and threads: within three.
            if !self.by_cgroup.processes && facts.processes.saturating_add(3) >= limits.processes {
                reached.push(LimitReached::Processes {
                    limit: limits.processes,
                });
            }
            if facts.scratch_full {
                reached.push(LimitReached::Disk { limit: limits.disk });
            }
        }
        reached
    }
}

/// `mount(2)` data for the scratch tmpfs: its size, an inode cap (one per 16 KiB, 4096 at
/// least, a million at most: empty files cost memory but no blocks) and mode 0700.
fn tmpfs_options(disk: u64) -> CString {
    let inodes = (disk / (16 * 1024)).clamp(4096, 1 << 20);
    let text = format!("size={disk},nr_inodes={inodes},mode=0700");
    // Digits and ASCII letters only: no NUL possible.
    CString::new(text).unwrap_or_default()
}

/// Opens the files to copy into the scratch tmpfs, and names their copies.
fn scratch_files(
    files: &[(String, PathBuf)],
    scratch: &Path,
) -> Result<Vec<(CString, OwnedFd)>, SandboxError> {
    let mut out = Vec::with_capacity(files.len());
    for (name, source) in files {
        let single = matches!(
            Path::new(name).components().collect::<Vec<_>>().as_slice(),
            [std::path::Component::Normal(_)]
        );
        if !single {
            return Err(SandboxError::InvalidProfile {
                reason: format!("{name:?} cannot name a file in the scratch directory"),
            });
        }
        let path_error = |source_error| SandboxError::Path {
            path: source.clone(),
            source: source_error,
        };
        let file = std::fs::File::open(source).map_err(path_error)?;
        let meta = file.metadata().map_err(path_error)?;
        if !meta.is_file() {
            return Err(path_error(io::Error::other("not a regular file")));
        }
        out.push((root::c_path(&scratch.join(name))?, OwnedFd::from(file)));
    }
    Ok(out)
}

/// The bounds of this process's argument and environment strings (fields 48 to 51 of
/// `/proc/self/stat`), or empty ranges when they cannot be read.
fn argument_areas() -> [(usize, usize); 2] {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The command name (field 2) may hold spaces; fields are counted after its `)`.
    let fields: Vec<usize> = stat
        .rsplit_once(") ")
        .map(|(_, rest)| {
            rest.split_whitespace()
                .map(|f| f.parse().unwrap_or(0))
                .collect()
        })
        .unwrap_or_default();
    // Field 3 is rest[0], so field N is rest[N - 3].
    let field = |n: usize| fields.get(n - 3).copied().unwrap_or(0);
    let area = |start: usize, end: usize| {
        if start != 0 && end > start && end - start <= MAX_WIPE {
            (start, end)
        } else {
            (0, 0)
        }
    };
    [area(field(48), field(49)), area(field(50), field(51))]
}

/// The largest argument or environment area init overwrites (the kernel caps `execve`'s
/// strings at a quarter of the stack limit; this is a sanity bound).
const MAX_WIPE: usize = 64 << 20;

/// Resource limits for the child, checked against Warden's own hard limits. Memory and
/// processes become rlimits only where the cgroup does not enforce them (`by_cgroup`).
// The RLIMIT_* constants are `u32` on glibc and `i32` on musl.
#[allow(clippy::unnecessary_cast)]
fn rlimits(limits: &Limits, by_cgroup: Enforced) -> Result<Vec<RlimitSet>, SandboxError> {
    let defaults = Limits::default();
    let mut out = vec![RlimitSet {
        resource: libc::RLIMIT_CORE as u32,
        limit: Rlimit64 { cur: 0, max: 0 },
        name: "RLIMIT_CORE",
    }];
    let entries = [
        (
            libc::RLIMIT_NOFILE as u32,
            "RLIMIT_NOFILE",
            Some(limits.open_files),
            Some(defaults.open_files),
        ),
        (
            libc::RLIMIT_NPROC as u32,
            "RLIMIT_NPROC",
            (!by_cgroup.processes).then_some(limits.processes),
            Some(defaults.processes),
        ),
        (
            libc::RLIMIT_DATA as u32,
            "RLIMIT_DATA",
            (!by_cgroup.memory).then_some(limits.memory),
            Some(defaults.memory),
        ),
        (
            libc::RLIMIT_AS as u32,
            "RLIMIT_AS",
            limits.address_space,
            defaults.address_space,
        ),
        (
            libc::RLIMIT_CPU as u32,
            "RLIMIT_CPU",
            limits.cpu_seconds,
            defaults.cpu_seconds,
        ),
    ];
    for (resource, name, wanted, default) in entries {
        // `None`: keep what Warden has (normally unlimited).
        let Some(wanted) = wanted else { continue };
        let hard = current_hard(resource);
        let value = if wanted <= hard {
            wanted
        } else if Some(wanted) == default {
            hard
        } else {
            return Err(SandboxError::LimitAboveHard {
                limit: name,
                requested: wanted,
                hard,
            });
        };
        out.push(RlimitSet {
            resource,
            limit: Rlimit64 {
                cur: value,
                max: value,
            },
            name,
        });
    }
    Ok(out)
}

fn current_hard(resource: u32) -> u64 {
    let mut current = Rlimit64 {
        cur: u64::MAX,
        max: u64::MAX,
    };
    // SAFETY: prlimit64 on ourselves with a null new limit only writes `current`.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_prlimit64,
            0,
            resource,
            std::ptr::null::<Rlimit64>(),
            &mut current as *mut Rlimit64,
        )
    };
    if ret < 0 { u64::MAX } else { current.max }
}

/// The read end of a pipe whose write end only this process holds (close-on-exec, never
/// closed): when the process dies, however it dies, every waiter sees end-of-file.
fn lifeline() -> Result<RawFd, SandboxError> {
    static LIFELINE: OnceLock<(OwnedFd, OwnedFd)> = OnceLock::new();
    if let Some((read, _)) = LIFELINE.get() {
        return Ok(read.as_raw_fd());
    }
    let pair = pipe().map_err(|source| SandboxError::Setup {
        step: Step::Channel,
        source,
    })?;
    // A concurrent caller may have won; its pipe is then used and this one closed.
    let _ = LIFELINE.set(pair);
    LIFELINE
        .get()
        .map(|(read, _)| read.as_raw_fd())
        .ok_or_else(|| SandboxError::Unavailable {
            reason: "the lifeline pipe vanished".to_owned(),
        })
}

/// A connected pair of UNIX stream sockets, close-on-exec.
fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1; 2];
    // SAFETY: fds has room for the two descriptors socketpair writes.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    } < 0
    {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: socketpair returned two fresh descriptors nothing else owns.
    unsafe { Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))) }
}

/// Receives the proxy listener the waiter sent on `receiver`, waiting at most `timeout`.
pub(crate) fn receive_listener(
    receiver: &OwnedFd,
    timeout: std::time::Duration,
) -> io::Result<OwnedFd> {
    let mut poll = libc::pollfd {
        fd: receiver.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let millis = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: poll on one live pollfd.
    let ready = unsafe { libc::poll(&mut poll, 1, millis) };
    if ready < 0 {
        return Err(io::Error::last_os_error());
    }
    if ready == 0 {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the sandbox did not hand over the proxy listener in time",
        ));
    }
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = FdMessage::zeroed();
    // SAFETY: a zeroed msghdr is valid; its pointers are set to live buffers below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = (&mut control as *mut FdMessage).cast();
    msg.msg_controllen = std::mem::size_of::<FdMessage>() as _;
    // SAFETY: recvmsg writes into the buffers msg points at, all alive and sized.
    let got = unsafe {
        libc::recvmsg(
            receiver.as_raw_fd(),
            &mut msg,
            libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT,
        )
    };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    if got == 0
        || msg.msg_controllen < FdMessage::len() as _
        || control.header.cmsg_level != libc::SOL_SOCKET
        || control.header.cmsg_type != libc::SCM_RIGHTS
        || control.fd < 0
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the sandbox closed without handing over the proxy listener",
        ));
    }
    // SAFETY: the kernel installed this descriptor for us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(control.fd) })
}

/// A control message carrying one descriptor (`SCM_RIGHTS`).
#[repr(C)]
struct FdMessage {
    header: libc::cmsghdr,
    fd: libc::c_int,
    _pad: libc::c_int,
}

impl FdMessage {
    fn zeroed() -> Self {
        // SAFETY: all fields are plain integers.
        unsafe { std::mem::zeroed() }
    }

    /// `CMSG_LEN(sizeof(int))`.
    fn len() -> usize {
        std::mem::size_of::<libc::cmsghdr>() + std::mem::size_of::<libc::c_int>()
    }
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 returned two fresh descriptors nothing else owns.
    unsafe { Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))) }
}

/// A failure in the child: what failed and the kernel's errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    Step(Step),
    Namespace(Namespace),
    Rule(u32),
    Bind(u32),
    /// A pinned file differs: `entry << 8 | candidate`.
    Pinned(u32),
}

impl Failure {
    fn encode(self) -> (u32, u32) {
        let index =
            |names: &[&str], name: &str| names.iter().position(|n| *n == name).unwrap_or(0) as u32;
        match self {
            Self::Step(step) => match step {
                Step::BlockSignals => (1, 0),
                Step::DropGroups => (2, 0),
                Step::SetGid => (3, 0),
                Step::SetUid => (4, 0),
                Step::Dumpable => (5, 0),
                Step::WriteSetgroups => (6, 0),
                Step::WriteUidMap => (7, 0),
                Step::WriteGidMap => (8, 0),
                Step::SetHostname => (9, 0),
                Step::Channel => (10, 0),
                Step::ForkInit => (11, 0),
                Step::ForkServer => (12, 0),
                Step::MountPrivate => (13, 0),
                Step::MountProc => (14, 0),
                Step::MountDev => (15, 0),
                Step::BindDevice(name) => (16, index(&DEVICES.map(|d| d.0), name)),
                Step::PopulateDev => (17, 0),
                Step::NoNewPrivs => (18, 0),
                Step::Rlimit(name) => (19, index(&RLIMIT_NAMES, name)),
                Step::CloseDescriptors => (20, 0),
                Step::LandlockRuleset => (21, 0),
                Step::LandlockInnerRule(name) => (22, index(&INNER_RULE_NAMES, name)),
                Step::LandlockRestrict => (23, 0),
                Step::Seccomp => (24, 0),
                Step::RestoreSignals => (25, 0),
                Step::NewRoot => (26, 0),
                Step::Chdir => (27, 0),
                Step::JoinCgroup => (28, 0),
                Step::MountScratch => (29, 0),
                Step::CopyIntoScratch => (30, 0),
                Step::Loopback => (31, 0),
                Step::ProxyListener => (32, 0),
            },
            Self::Namespace(ns) => (
                100,
                ALL_NAMESPACES.iter().position(|n| *n == ns).unwrap_or(0) as u32,
            ),
            Self::Rule(index) => (101, index),
            Self::Bind(index) => (102, index),
            Self::Pinned(index) => (103, index),
        }
    }

    fn decode(code: u32, detail: u32) -> Option<Self> {
        let at = |i: u32| i as usize;
        let step = match code {
            1 => Step::BlockSignals,
            2 => Step::DropGroups,
            3 => Step::SetGid,
            4 => Step::SetUid,
            5 => Step::Dumpable,
            6 => Step::WriteSetgroups,
            7 => Step::WriteUidMap,
            8 => Step::WriteGidMap,
            9 => Step::SetHostname,
            10 => Step::Channel,
            11 => Step::ForkInit,
            12 => Step::ForkServer,
            13 => Step::MountPrivate,
            14 => Step::MountProc,
            15 => Step::MountDev,
            16 => Step::BindDevice(DEVICES.get(at(detail))?.0),
            17 => Step::PopulateDev,
            18 => Step::NoNewPrivs,
            19 => Step::Rlimit(RLIMIT_NAMES.get(at(detail))?),
            20 => Step::CloseDescriptors,
            21 => Step::LandlockRuleset,
            22 => Step::LandlockInnerRule(INNER_RULE_NAMES.get(at(detail))?),
            23 => Step::LandlockRestrict,
            24 => Step::Seccomp,
            25 => Step::RestoreSignals,
            26 => Step::NewRoot,
            27 => Step::Chdir,
            28 => Step::JoinCgroup,
            29 => Step::MountScratch,
            30 => Step::CopyIntoScratch,
            31 => Step::Loopback,
            32 => Step::ProxyListener,
            100 => {
                return ALL_NAMESPACES
                    .get(at(detail))
                    .map(|ns| Self::Namespace(*ns));
            }
            101 => return Some(Self::Rule(detail)),
            102 => return Some(Self::Bind(detail)),
            103 => return Some(Self::Pinned(detail)),
            _ => return None,
        };
        Some(Self::Step(step))
    }
}

const RLIMIT_NAMES: [&str; 6] = [
    "RLIMIT_CORE",
    "RLIMIT_NOFILE",
    "RLIMIT_NPROC",
    "RLIMIT_DATA",
    "RLIMIT_AS",
    "RLIMIT_CPU",
];

const ALL_NAMESPACES: [Namespace; 7] = [
    Namespace::User,
    Namespace::Mount,
    Namespace::Pid,
    Namespace::Ipc,
    Namespace::Uts,
    Namespace::Cgroup,
    Namespace::Net,
];

/// A failure with its errno, as the child records it.
#[derive(Debug, Clone, Copy)]
struct Fail {
    what: Failure,
    errno: i32,
}

fn fail(what: Failure) -> impl FnOnce(i32) -> Fail {
    move |errno| Fail { what, errno }
}

fn step(step: Step) -> impl FnOnce(i32) -> Fail {
    fail(Failure::Step(step))
}

/// The channel on which the child records which step failed (std only carries an errno),
/// and on which the waiter passes on what init saw when the server exited.
#[derive(Debug)]
pub(crate) struct Report {
    read: OwnedFd,
    write: OwnedFd,
    /// The path of each Landlock rule, by index.
    paths: Vec<PathBuf>,
    /// The path of each bind into the new root, by index.
    binds: Vec<PathBuf>,
    /// The candidate paths of each pinned file, by index.
    pinned: Vec<Vec<PathBuf>>,
    /// What was read from the channel and not yet taken: the newest failure (with its
    /// errno) and the newest exit facts.
    seen: std::sync::Mutex<Seen>,
}

/// See [`Report::seen`].
#[derive(Debug, Default)]
struct Seen {
    failure: Option<(Failure, i32)>,
    facts: Option<ExitFacts>,
}

// A record (`RECORD` bytes): code, errno, detail (u32 each), then a u32 and a u64 of extra
// data; `helpers::ExitFacts` is the record with `FACTS_CODE`.
impl Report {
    fn new(
        paths: Vec<PathBuf>,
        binds: Vec<PathBuf>,
        pinned: Vec<Vec<PathBuf>>,
    ) -> Result<Self, SandboxError> {
        let (read, write) = pipe().map_err(|source| SandboxError::Setup {
            step: Step::Channel,
            source,
        })?;
        // SAFETY: F_SETFL on a descriptor we own.
        unsafe { libc::fcntl(read.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        // The waiter writes with MSG_DONTWAIT semantics: never block on a full pipe.
        // SAFETY: F_SETFL on a descriptor we own.
        unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        Ok(Self {
            read,
            write,
            paths,
            binds,
            pinned,
            seen: std::sync::Mutex::new(Seen::default()),
        })
    }

    /// Records a failure. Async-signal-safe; a write of 24 bytes to a pipe is atomic.
    fn record(&self, fail: Fail) {
        let (code, detail) = fail.what.encode();
        let mut record = [0u8; RECORD];
        record[0..4].copy_from_slice(&code.to_ne_bytes());
        record[4..8].copy_from_slice(&fail.errno.to_ne_bytes());
        record[8..12].copy_from_slice(&detail.to_ne_bytes());
        self.send(&record);
    }

    /// Writes one record. Async-signal-safe; a failed write is ignored (best effort).
    fn send(&self, record: &[u8; RECORD]) {
        // SAFETY: record is a live buffer of RECORD bytes.
        unsafe { libc::write(self.write.as_raw_fd(), record.as_ptr().cast(), RECORD) };
    }

    /// Reads every record waiting into [`Report::seen`] (newest failure, newest facts).
    fn drain(&self) -> std::sync::MutexGuard<'_, Seen> {
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut record = [0u8; RECORD];
        loop {
            // SAFETY: record is a live buffer of RECORD bytes; the descriptor is non-blocking.
            let n =
                unsafe { libc::read(self.read.as_raw_fd(), record.as_mut_ptr().cast(), RECORD) };
            if n != RECORD as isize {
                break;
            }
            let word = |i: usize| [record[i], record[i + 1], record[i + 2], record[i + 3]];
            let code = u32::from_ne_bytes(word(0));
            if code == FACTS_CODE {
                let mut rss = [0u8; 8];
                rss.copy_from_slice(&record[16..24]);
                seen.facts = Some(ExitFacts {
                    scratch_full: u32::from_ne_bytes(word(4)) != 0,
                    processes: u64::from(u32::from_ne_bytes(word(8))),
                    max_rss_kib: u64::from_ne_bytes(rss),
                });
                continue;
            }
            let errno = i32::from_ne_bytes(word(4));
            let detail = u32::from_ne_bytes(word(8));
            if let Some(what) = Failure::decode(code, detail) {
                seen.failure = Some((what, errno));
            }
        }
        seen
    }

    /// What init saw when the server last exited, if it told.
    pub(crate) fn facts(&self) -> Option<ExitFacts> {
        self.drain().facts
    }

    /// The most recent failure recorded, if any, consuming the records.
    pub(crate) fn take(&self) -> Option<SandboxError> {
        let (what, errno) = self.drain().failure.take()?;
        let source = io::Error::from_raw_os_error(errno);
        Some(match what {
            Failure::Step(step) => SandboxError::Setup { step, source },
            Failure::Namespace(namespace) => SandboxError::Namespace {
                namespace,
                hint: namespace_hint(namespace, errno),
                source,
            },
            Failure::Bind(index) => SandboxError::Bind {
                path: self.binds.get(index as usize).cloned().unwrap_or_default(),
                source,
            },
            Failure::Rule(index) => SandboxError::LandlockRule {
                path: self.paths.get(index as usize).cloned().unwrap_or_default(),
                source,
            },
            Failure::Pinned(detail) => SandboxError::PinnedFileChanged {
                path: self
                    .pinned
                    .get((detail >> 8) as usize)
                    .and_then(|paths| paths.get((detail & 0xff) as usize))
                    .cloned()
                    .unwrap_or_default(),
            },
        })
    }
}

fn namespace_hint(namespace: Namespace, errno: i32) -> &'static str {
    match (namespace, errno) {
        (Namespace::User, libc::EPERM | libc::EACCES) => {
            " (unprivileged user namespaces are disabled here: kernel.unprivileged_userns_clone, \
             AppArmor's restrict_unprivileged_userns, or a container's seccomp profile)"
        }
        (Namespace::User, libc::ENOSPC) => " (user.max_user_namespaces is exhausted)",
        _ => "",
    }
}

/// Runs in std's child between `fork` and `exec`.
fn child_main(p: &Prepared) -> io::Result<()> {
    // SAFETY: we are in a freshly forked child of std's spawn, which is the context this
    // function is written for: system calls only.
    match unsafe { child(p) } {
        Ok(()) => Ok(()),
        Err(fail) => {
            p.report.record(fail);
            Err(io::Error::from_raw_os_error(fail.errno))
        }
    }
}

/// The set-up. Returns only in the server process (to let std exec) or on a failure before
/// the first fork; the waiter and init never return.
///
/// # Safety
/// Must run in a child forked by std's `spawn`, before `exec`.
unsafe fn child(p: &Prepared) -> Result<(), Fail> {
    // ---- The waiter: std's child, the process group leader, outside the pid namespace.
    let mut original = sigset(&[]);
    // SAFETY: each call below is a system call on live, parent-prepared buffers or on stack
    // values; no allocation happens.
    unsafe {
        check(libc::sigprocmask(
            libc::SIG_BLOCK,
            &p.helper_blocked,
            &mut original,
        ))
        .map_err(step(Step::BlockSignals))?;
        // A SIGCHLD left ignored by Warden would make the kernel reap children for us.
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        check(libc::sigaction(
            libc::SIGCHLD,
            &default,
            std::ptr::null_mut(),
        ))
        .map_err(step(Step::BlockSignals))?;
        if let Some(core) = p.rlimits.first() {
            set_rlimit(core)?;
        }

        if let Some((uid, gid)) = p.drop_to {
            check(libc::setgroups(0, std::ptr::null())).map_err(step(Step::DropGroups))?;
            check(libc::setresgid(gid, gid, gid)).map_err(step(Step::SetGid))?;
            check(libc::setresuid(uid, uid, uid)).map_err(step(Step::SetUid))?;
            // Changing uid made us non-dumpable, which makes /proc/self/*_map root's.
            check(libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0)).map_err(step(Step::Dumpable))?;
        }
        for &namespace in &p.namespaces {
            check(libc::unshare(namespace.flag())).map_err(fail(Failure::Namespace(namespace)))?;
        }
        write_file(c"/proc/self/setgroups", b"deny").map_err(step(Step::WriteSetgroups))?;
        write_file(c"/proc/self/uid_map", &p.uid_map).map_err(step(Step::WriteUidMap))?;
        write_file(c"/proc/self/gid_map", &p.gid_map).map_err(step(Step::WriteGidMap))?;
        // The waiter and init hold a copy of Warden's memory until they let go of it once
        // forked (and its code and loaded data after), and never exec: nothing running as
        // the same uid may read it.
        check(libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0)).map_err(step(Step::Dumpable))?;
        check(libc::sethostname(HOSTNAME.as_ptr().cast(), HOSTNAME.len()))
            .map_err(step(Step::SetHostname))?;
        if let Some((port, sender)) = &p.proxy {
            proxy_listener(*port, sender.as_raw_fd())?;
        }

        let mut link = [-1; 2];
        check(libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            link.as_mut_ptr(),
        ))
        .map_err(step(Step::Channel))?;
        let sigchld = check(libc::signalfd(
            -1,
            &p.sigchld,
            libc::SFD_CLOEXEC | libc::SFD_NONBLOCK,
        ))
        .map_err(step(Step::Channel))?;

        // Each helper reads its own mappings to let go of Warden's memory (decision 0054);
        // opened before the server can change what `/proc` names (pivot_root moves the
        // root of every process in the mount namespace). Without it, the memory is kept.
        let maps = helpers::open(c"/proc/self/maps", libc::O_RDONLY | libc::O_CLOEXEC);
        let init = fork_raw().map_err(step(Step::ForkInit))?;
        if init > 0 {
            run_waiter(p, init, link[0], sigchld, maps.ok());
        }

        // ---- init: pid 1 of the new pid namespace.
        libc::close(link[0]);
        if let Ok(fd) = maps {
            libc::close(fd);
        }
        let maps = helpers::open(c"/proc/self/maps", libc::O_RDONLY | libc::O_CLOEXEC).ok();
        // The server can read init's /proc/1/cmdline (a non-dumpable process hides its
        // environ, exe and memory, not its command line): init holds Warden's argument and
        // environment strings, as a fork that never execs. Overwrite them, and the name.
        wipe_arguments(&p.wipe);
        libc::prctl(libc::PR_SET_NAME, c"warden-init".as_ptr(), 0, 0, 0);
        let server = match fork_raw() {
            Ok(pid) => pid,
            Err(errno) => {
                p.report.record(Fail {
                    what: Failure::Step(Step::ForkServer),
                    errno,
                });
                exit(HELPER_FAILED);
            }
        };
        if server > 0 {
            run_init(p, link[1], sigchld, server, maps);
        }

        // ---- The server: pid 2. Into its cgroup leaf before anything else, so that all it
        // starts is born inside; the waiter and init stay outside (the limits are the
        // server's, and init outlives an OOM kill to report it).
        libc::close(link[1]);
        libc::close(sigchld);
        if let Some(fd) = maps {
            libc::close(fd);
        }
        join_cgroup(p)?;
        server_setup(p, &original)
    }
}

/// Moves the calling process (the server, single-threaded) into its cgroup leaf by writing
/// `0` to the descriptors the parent opened: `tasks` on cgroup v1, which moves only the
/// calling thread and so skips the global lock whose writer waits for an RCU grace period
/// (about 10 ms on a busy machine); `cgroup.procs` on v2, where that wait is paid.
///
/// # Safety
/// Child context, single-threaded.
unsafe fn join_cgroup(p: &Prepared) -> Result<(), Fail> {
    for &procs in &p.cgroup_procs {
        // SAFETY: a write of a constant to an inherited descriptor.
        if unsafe { libc::write(procs, b"0".as_ptr().cast(), 1) } != 1 {
            return Err(step(Step::JoinCgroup)(errno()));
        }
    }
    Ok(())
}

/// The waiter, once init is forked: keeps only what its loop needs (on the stack), lets go of
/// Warden's memory, then waits for init, kills it if Warden dies, and mirrors the server's
/// status ([`helpers::waiter_loop`]).
///
/// # Safety
/// Child context; `init` is our child, `link` and `sigchld` are open.
unsafe fn run_waiter(
    p: &Prepared,
    init: libc::pid_t,
    link: RawFd,
    sigchld: RawFd,
    maps: Option<RawFd>,
) -> ! {
    let args = WaiterArgs {
        lifeline: p.lifeline,
        link,
        sigchld,
        report: p.report.write.as_raw_fd(),
        init,
    };
    let (args_at, page) = (p.wipe[0].0, page_size());
    // SAFETY: system calls on stack values and inherited descriptors; `p` is not read after
    // `args` was made, and nothing but `args` is read after the release.
    unsafe {
        // Nothing but these: in particular not Warden's end of the stdio pipes (so Warden
        // sees end-of-file when the server closes them) nor std's error channel.
        close_all_except(&mut [
            args.lifeline,
            args.link,
            args.sigchld,
            args.report,
            maps.unwrap_or(-1),
        ]);
        helpers::reset_dispositions();
        if let Some(maps) = maps {
            helpers::release_inherited(maps, args_at, page);
        }
        helpers::waiter_loop(args)
    }
}

/// Network `proxy`: brings up the loopback of the new network namespace, listens on
/// `127.0.0.1:port` there and sends the listener to Warden over `sender`, keeping no copy.
///
/// # Safety
/// Child context (the waiter), in the new user and network namespaces.
unsafe fn proxy_listener(port: u16, sender: RawFd) -> Result<(), Fail> {
    // SAFETY: system calls on stack buffers and descriptors opened here.
    unsafe {
        // struct ifreq: the name, then the flags (a short) at offset 16; 40 bytes in all.
        let mut ifr = [0u8; 40];
        ifr[..3].copy_from_slice(b"lo\0");
        let control = check(libc::socket(
            libc::AF_INET,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            0,
        ))
        .map_err(step(Step::Loopback))?;
        let up = (|| {
            check(libc::ioctl(control, libc::SIOCGIFFLAGS, ifr.as_mut_ptr()))?;
            let flags = i16::from_ne_bytes([ifr[16], ifr[17]]) | libc::IFF_UP as i16;
            ifr[16..18].copy_from_slice(&flags.to_ne_bytes());
            check(libc::ioctl(control, libc::SIOCSIFFLAGS, ifr.as_mut_ptr()))
        })();
        libc::close(control);
        up.map_err(step(Step::Loopback))?;

        let listener = check(libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
        ))
        .map_err(step(Step::ProxyListener))?;
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_port = port.to_be();
        addr.sin_addr.s_addr = u32::from_be_bytes([127, 0, 0, 1]).to_be();
        let sent = (|| {
            check(libc::bind(
                listener,
                (&addr as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            ))?;
            check(libc::listen(listener, 128))?;
            let mut byte = [b'L'];
            let mut iov = libc::iovec {
                iov_base: byte.as_mut_ptr().cast(),
                iov_len: 1,
            };
            let mut control = FdMessage::zeroed();
            control.header.cmsg_len = FdMessage::len() as _;
            control.header.cmsg_level = libc::SOL_SOCKET;
            control.header.cmsg_type = libc::SCM_RIGHTS;
            control.fd = listener;
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = (&mut control as *mut FdMessage).cast();
            msg.msg_controllen = std::mem::size_of::<FdMessage>() as _;
            if libc::sendmsg(sender, &msg, libc::MSG_NOSIGNAL) != 1 {
                return Err(errno());
            }
            Ok(())
        })();
        libc::close(listener);
        sent.map_err(step(Step::ProxyListener))?;
    }
    Ok(())
}

/// The page size (4 KiB when it cannot be told).
fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions; it reads what the loader recorded.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

/// Init, once the server is forked: keeps only what its loop needs (on the stack), lets go of
/// Warden's memory, then reaps the namespace until the server exits
/// ([`helpers::init_loop`]).
///
/// # Safety
/// Child context; `server` is our child.
unsafe fn run_init(
    p: &Prepared,
    link: RawFd,
    sigchld: RawFd,
    server: libc::pid_t,
    maps: Option<RawFd>,
) -> ! {
    let args = InitArgs::new(link, sigchld, server, &p.scratch.path, p.scratch.full_below);
    let (args_at, page) = (p.wipe[0].0, page_size());
    // SAFETY: as in `run_waiter`: `p` is not read after `args` was made.
    unsafe {
        close_all_except(&mut [args.link, args.sigchld, maps.unwrap_or(-1)]);
        helpers::reset_dispositions();
        if let Some(maps) = maps {
            helpers::release_inherited(maps, args_at, page);
        }
        helpers::init_loop(&args)
    }
}

/// Overwrites Warden's argument and environment strings in this process's memory: the
/// arguments with a short name, zeros, and a non-zero last byte (so the kernel shows
/// `/proc/1/cmdline` up to the name's NUL only, as after `setproctitle`, and not even the
/// length of Warden's command line is left), the environment with zeros.
///
/// # Safety
/// Child context (init), which never reads its arguments or environment again; the areas
/// come from this process's `/proc/self/stat`, inherited through `fork`.
unsafe fn wipe_arguments(areas: &[(usize, usize); 2]) {
    const NAME: &[u8] = b"warden-init\0";
    for (index, &(start, end)) in areas.iter().enumerate() {
        if start == 0 || end <= start {
            continue;
        }
        let len = end - start;
        let area = start as *mut u8;
        // SAFETY: the range is this process's own argument or environment area (on the
        // initial stack, writable), inherited from Warden through fork.
        unsafe {
            std::ptr::write_bytes(area, 0, len);
            if index == 0 && len > NAME.len() {
                std::ptr::copy_nonoverlapping(NAME.as_ptr(), area, NAME.len());
                *area.add(len - 1) = b' ';
            }
        }
    }
}

fn set_rlimit(set: &RlimitSet) -> Result<(), Fail> {
    // SAFETY: prlimit64 on ourselves reads the new limit from a live struct.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_prlimit64,
            0,
            set.resource,
            &set.limit as *const Rlimit64,
            std::ptr::null_mut::<Rlimit64>(),
        )
    };
    if ret < 0 {
        Err(Fail {
            what: Failure::Step(Step::Rlimit(set.name)),
            errno: errno(),
        })
    } else {
        Ok(())
    }
}

/// Builds the server's root: clones of the granted paths and of the device nodes are taken
/// while the host's tree is still visible, an empty tmpfs becomes `/` (`pivot_root`, the old
/// root detached), and the clones are attached at their own paths, with a fresh `/proc`
/// and a minimal `/dev`.
///
/// # Safety
/// Child context, in the new user and mount namespaces, inside the new pid namespace.
unsafe fn build_root(p: &Prepared) -> Result<(), Fail> {
    let layout = &p.layout;
    let null = std::ptr::null::<libc::c_char>();
    let new_root = step(Step::NewRoot);
    // SAFETY: system calls on NUL-terminated constants, parent-prepared strings and stack
    // values; descriptors are the ones opened here.
    unsafe {
        check(libc::mount(
            null,
            c"/".as_ptr(),
            null,
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ))
        .map_err(step(Step::MountPrivate))?;

        // 1. Detached copies of what the server may see.
        let mut devices = [-1; DEVICES.len()];
        for (tree, (name, path)) in devices.iter_mut().zip(DEVICES) {
            *tree = clone_tree(path, false).map_err(step(Step::BindDevice(name)))?;
        }
        let mut binds = [-1; root::MAX_BINDS];
        for (index, (tree, bind)) in binds.iter_mut().zip(&layout.binds).enumerate() {
            let failed = fail(Failure::Bind(index as u32));
            *tree = clone_tree(&bind.path, true).map_err(failed)?;
            let mut set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
            if !bind.writable {
                set |= MOUNT_ATTR_RDONLY;
            }
            let attr = MountAttr {
                attr_set: set,
                attr_clr: 0,
                propagation: 0,
                userns_fd: 0,
            };
            let ret = libc::syscall(
                libc::SYS_mount_setattr,
                *tree,
                c"".as_ptr(),
                libc::AT_EMPTY_PATH as libc::c_uint | AT_RECURSIVE,
                &attr as *const MountAttr,
                std::mem::size_of::<MountAttr>(),
            );
            if ret < 0 {
                return Err(fail(Failure::Bind(index as u32))(errno()));
            }
        }

        // 2. An empty tmpfs, staged on the old /dev, with a fresh proc in it (proc can only
        //    be mounted while a full view of the old one is still in this namespace).
        check(libc::mount(
            c"tmpfs".as_ptr(),
            c"/dev".as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            ROOT_TMPFS_OPTIONS.as_ptr().cast(),
        ))
        .map_err(new_root)?;
        check(libc::mkdir(c"/dev/proc".as_ptr(), 0o555)).map_err(step(Step::NewRoot))?;
        check(libc::mount(
            c"proc".as_ptr(),
            c"/dev/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        ))
        .map_err(step(Step::MountProc))?;

        // 3. Make it the root and let go of the old one.
        check(libc::chdir(c"/dev".as_ptr())).map_err(step(Step::NewRoot))?;
        if libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()) < 0 {
            return Err(step(Step::NewRoot)(errno()));
        }
        check(libc::umount2(c".".as_ptr(), libc::MNT_DETACH)).map_err(step(Step::NewRoot))?;
        check(libc::chdir(c"/".as_ptr())).map_err(step(Step::NewRoot))?;

        // 4. The skeleton, then the granted paths at their own locations.
        for dir in &layout.dirs {
            if libc::mkdir(dir.as_ptr(), 0o755) < 0 && errno() != libc::EEXIST {
                return Err(step(Step::NewRoot)(errno()));
            }
        }
        for file in &layout.files {
            let fd = check(libc::open(
                file.as_ptr(),
                libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                0o644,
            ))
            .map_err(step(Step::NewRoot))?;
            libc::close(fd);
        }
        for (target, link) in &layout.links {
            check(libc::symlink(target.as_ptr(), link.as_ptr())).map_err(step(Step::NewRoot))?;
        }
        for (index, (tree, bind)) in binds.iter().zip(&layout.binds).enumerate() {
            attach(*tree, &bind.path).map_err(fail(Failure::Bind(index as u32)))?;
            libc::close(*tree);
        }

        // 4b. The scratch directory: a private tmpfs of bounded size, on top of whatever
        //     is at that path, with the files copied in that the profile names.
        mount_scratch(&p.scratch)?;

        // 5. A minimal /dev: a small tmpfs with the host's harmless nodes bound in.
        check(libc::mkdir(c"/dev".as_ptr(), 0o755)).map_err(step(Step::MountDev))?;
        check(libc::mount(
            c"tmpfs".as_ptr(),
            c"/dev".as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            DEV_TMPFS_OPTIONS.as_ptr().cast(),
        ))
        .map_err(step(Step::MountDev))?;
        for (tree, (name, path)) in devices.into_iter().zip(DEVICES) {
            let bind = step(Step::BindDevice(name));
            let fd = check(libc::open(
                path.as_ptr(),
                libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
                0o666,
            ))
            .map_err(bind)?;
            libc::close(fd);
            attach(tree, path).map_err(step(Step::BindDevice(name)))?;
            libc::close(tree);
        }
        check(libc::mkdir(c"/dev/shm".as_ptr(), 0o1777)).map_err(step(Step::PopulateDev))?;
        check(libc::chmod(c"/dev/shm".as_ptr(), 0o1777)).map_err(step(Step::PopulateDev))?;
        for (target, link) in DEV_LINKS {
            check(libc::symlink(target.as_ptr(), link.as_ptr()))
                .map_err(step(Step::PopulateDev))?;
        }

        // 6. The skeleton itself becomes read-only; then the working directory.
        check(libc::mount(
            null,
            c"/".as_ptr(),
            null,
            libc::MS_REMOUNT
                | libc::MS_BIND
                | libc::MS_RDONLY
                | libc::MS_NOSUID
                | libc::MS_NODEV
                | libc::MS_NOEXEC,
            std::ptr::null(),
        ))
        .map_err(step(Step::NewRoot))?;
        check(libc::chdir(layout.cwd.as_ptr())).map_err(step(Step::Chdir))?;
    }
    Ok(())
}

/// Mounts the scratch tmpfs and copies the profile's files into it.
///
/// # Safety
/// Child context, in the new root, with the capabilities of the new user namespace.
unsafe fn mount_scratch(scratch: &ScratchMount) -> Result<(), Fail> {
    // SAFETY: system calls on parent-prepared NUL-terminated strings, inherited
    // descriptors and stack values.
    unsafe {
        check(libc::mount(
            c"tmpfs".as_ptr(),
            scratch.path.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            scratch.options.as_ptr().cast(),
        ))
        .map_err(step(Step::MountScratch))?;
        for (path, source) in &scratch.files {
            let copy = step(Step::CopyIntoScratch);
            let target = check(libc::open(
                path.as_ptr(),
                libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
                0o700,
            ))
            .map_err(copy)?;
            let mut offset: libc::off_t = 0;
            let result = loop {
                let sent = libc::sendfile(target, source.as_raw_fd(), &mut offset, 1 << 30);
                if sent == 0 {
                    break Ok(());
                }
                if sent < 0 {
                    let error = errno();
                    if error == libc::EINTR {
                        continue;
                    }
                    break Err(error);
                }
            };
            libc::close(target);
            result.map_err(step(Step::CopyIntoScratch))?;
        }
    }
    Ok(())
}

/// `open_tree(OPEN_TREE_CLONE)`: a detached copy of the mount at `path`.
///
/// # Safety
/// Child context.
unsafe fn clone_tree(path: &CStr, recursive: bool) -> Result<RawFd, i32> {
    let mut flags = OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint;
    if recursive {
        flags |= AT_RECURSIVE;
    }
    // SAFETY: path is NUL-terminated.
    let fd = unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, path.as_ptr(), flags) };
    if fd < 0 {
        Err(errno())
    } else {
        RawFd::try_from(fd).map_err(|_| libc::EBADF)
    }
}

/// `move_mount` of a detached tree onto `path`.
///
/// # Safety
/// Child context; `tree` comes from [`clone_tree`].
unsafe fn attach(tree: RawFd, path: &CStr) -> Result<(), i32> {
    // SAFETY: both strings are NUL-terminated.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree,
            c"".as_ptr(),
            libc::AT_FDCWD,
            path.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    if ret < 0 { Err(errno()) } else { Ok(()) }
}

/// The server's own set-up, in the order each step still has the rights it needs:
/// the new root (mounts need the capabilities this process holds in its new user
/// namespace, and are refused under Landlock and seccomp), `no_new_privs` (required by
/// Landlock and seccomp), limits, descriptors, Landlock, the signal mask, and seccomp last
/// (it refuses `mount`).
///
/// # Safety
/// Child context, in the new namespaces.
unsafe fn server_setup(p: &Prepared, original: &libc::sigset_t) -> Result<(), Fail> {
    // SAFETY: system calls on NUL-terminated constants, parent-prepared buffers and stack
    // values, nothing else.
    unsafe {
        build_root(p)?;
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
            .map_err(step(Step::NoNewPrivs))?;
        for set in &p.rlimits {
            set_rlimit(set)?;
        }
        // Every descriptor above 2 is closed at exec. Marking rather than closing keeps
        // std's error channel working until then (and the Landlock descriptors below).
        if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC) < 0 {
            return Err(step(Step::CloseDescriptors)(errno()));
        }

        let ruleset =
            landlock::create_ruleset(&p.landlock.attr).map_err(step(Step::LandlockRuleset))?;
        for (index, rule) in p.rules.iter().enumerate() {
            landlock::add_rule(ruleset, rule.fd.as_raw_fd(), rule.access)
                .map_err(fail(Failure::Rule(index as u32)))?;
        }
        let handled = p.landlock.attr_fs();
        if p.scratch.rights != 0 {
            let inner = step(Step::LandlockInnerRule("scratch"));
            let fd = check(libc::open(
                p.scratch.path.as_ptr(),
                libc::O_PATH | libc::O_CLOEXEC,
            ))
            .map_err(inner)?;
            let added = landlock::add_rule(ruleset, fd, p.scratch.rights & handled);
            libc::close(fd);
            added.map_err(step(Step::LandlockInnerRule("scratch")))?;
        }
        for (path, access, name) in INNER_RULES {
            let inner = step(Step::LandlockInnerRule(name));
            let fd =
                check(libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC)).map_err(inner)?;
            let added = landlock::add_rule(ruleset, fd, access & handled);
            libc::close(fd);
            added.map_err(step(Step::LandlockInnerRule(name)))?;
        }
        landlock::restrict_self(ruleset).map_err(step(Step::LandlockRestrict))?;
        libc::close(ruleset);

        check(libc::sigprocmask(
            libc::SIG_SETMASK,
            original,
            std::ptr::null_mut(),
        ))
        .map_err(step(Step::RestoreSignals))?;
        seccomp::install(&p.seccomp).map_err(step(Step::Seccomp))?;
        // Last, as close to the exec as this code gets: what the server will run from a
        // pinned path is still the file that was hashed.
        check_pinned(&p.pinned)?;
    }
    Ok(())
}

/// Checks each pinned file against its recorded identity (see [`crate::PinnedFile`]).
///
/// # Safety
/// Child context: `stat` on parent-prepared strings and a stack buffer only.
unsafe fn check_pinned(pinned: &[PreparedPin]) -> Result<(), Fail> {
    for (entry, pin) in pinned.iter().enumerate() {
        for (candidate, path) in pin.paths.iter().enumerate() {
            // SAFETY: a zeroed `stat` is a valid buffer; the path is NUL-terminated.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            if unsafe { libc::stat(path.as_ptr(), &mut st) } < 0 {
                continue;
            }
            if st.st_mode & libc::S_IFMT != libc::S_IFREG {
                continue;
            }
            if pin.search && st.st_mode & 0o111 == 0 {
                continue;
            }
            #[allow(clippy::unnecessary_cast)]
            let same = st.st_dev as u64 == pin.dev
                && st.st_ino as u64 == pin.ino
                && st.st_size as u64 == pin.size
                && st.st_ctime as i64 == pin.ctime
                && st.st_ctime_nsec as i64 == pin.ctime_nsec;
            if !same {
                let detail = ((entry as u32) << 8) | candidate as u32;
                return Err(fail(Failure::Pinned(detail))(libc::ESTALE));
            }
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_survive_the_round_trip() {
        let all = [
            Failure::Step(Step::MountProc),
            Failure::Step(Step::BindDevice("urandom")),
            Failure::Step(Step::Rlimit("RLIMIT_NPROC")),
            Failure::Step(Step::LandlockInnerRule("/dev/shm")),
            Failure::Step(Step::Seccomp),
            Failure::Namespace(Namespace::Net),
            Failure::Rule(3),
            Failure::Pinned(2 << 8 | 1),
        ];
        for failure in all {
            let (code, detail) = failure.encode();
            assert_eq!(Failure::decode(code, detail), Some(failure));
        }
    }

    #[test]
    fn default_limits_fit_under_the_hard_limits() {
        let sets = rlimits(&Limits::default(), Enforced::default()).unwrap();
        assert_eq!(sets[0].name, "RLIMIT_CORE");
        assert_eq!(sets[0].limit.max, 0);
        let names: Vec<&str> = sets.iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            [
                "RLIMIT_CORE",
                "RLIMIT_NOFILE",
                "RLIMIT_NPROC",
                "RLIMIT_DATA"
            ]
        );
        // What the cgroup enforces is not also an rlimit.
        let both = Enforced {
            memory: true,
            processes: true,
        };
        let names: Vec<&str> = rlimits(&Limits::default(), both)
            .unwrap()
            .iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, ["RLIMIT_CORE", "RLIMIT_NOFILE"]);
    }

    #[test]
    fn the_argument_areas_are_found_in_proc_self_stat() {
        let [args, env] = argument_areas();
        assert!(args.0 != 0 && args.1 > args.0, "{args:?}");
        assert!(env.0 != 0 && env.1 > env.0, "{env:?}");
        // The first argument (this test binary's path) is at the start of the area.
        let first = std::env::args_os().next().unwrap();
        // SAFETY: the area is this process's own argument strings, alive and readable.
        let bytes = unsafe { std::slice::from_raw_parts(args.0 as *const u8, args.1 - args.0) };
        use std::os::unix::ffi::OsStrExt;
        assert!(bytes.starts_with(first.as_bytes()));
    }
}
