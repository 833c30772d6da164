//! What can go wrong, named precisely enough to act on.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// A Linux namespace the sandbox creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Namespace {
    /// `CLONE_NEWUSER`: the server's ids and capabilities.
    User,
    /// `CLONE_NEWNS`: a private mount table (fresh `/proc`, minimal `/dev`).
    Mount,
    /// `CLONE_NEWPID`: the server sees only its own processes and dies with its init.
    Pid,
    /// `CLONE_NEWIPC`: System V IPC and POSIX message queues.
    Ipc,
    /// `CLONE_NEWUTS`: host name.
    Uts,
    /// `CLONE_NEWCGROUP`: hides the host's cgroup paths.
    Cgroup,
    /// `CLONE_NEWNET`: no interfaces but a loopback (network `none` and `proxy`).
    Net,
}

impl Namespace {
    /// The flag `unshare(2)` takes for this namespace.
    #[cfg(target_os = "linux")]
    pub(crate) fn flag(self) -> libc::c_int {
        match self {
            Self::User => libc::CLONE_NEWUSER,
            Self::Mount => libc::CLONE_NEWNS,
            Self::Pid => libc::CLONE_NEWPID,
            Self::Ipc => libc::CLONE_NEWIPC,
            Self::Uts => libc::CLONE_NEWUTS,
            Self::Cgroup => libc::CLONE_NEWCGROUP,
            Self::Net => libc::CLONE_NEWNET,
        }
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::User => "user",
            Self::Mount => "mount",
            Self::Pid => "pid",
            Self::Ipc => "ipc",
            Self::Uts => "uts",
            Self::Cgroup => "cgroup",
            Self::Net => "network",
        })
    }
}

/// A step of the set-up that runs in the child, between `fork` and `exec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// Blocking signals in the sandbox's helper processes.
    BlockSignals,
    /// `setgroups([])` before dropping root.
    DropGroups,
    /// `setresgid` to the unprivileged gid.
    SetGid,
    /// `setresuid` to the unprivileged uid.
    SetUid,
    /// `prctl(PR_SET_DUMPABLE)`.
    Dumpable,
    /// Writing `deny` to `/proc/self/setgroups`.
    WriteSetgroups,
    /// Writing `/proc/self/uid_map`.
    WriteUidMap,
    /// Writing `/proc/self/gid_map`.
    WriteGidMap,
    /// `sethostname` in the new UTS namespace.
    SetHostname,
    /// Creating the channel between the waiter and the namespace's init.
    Channel,
    /// Forking the namespace's init (pid 1).
    ForkInit,
    /// Forking the server from the namespace's init.
    ForkServer,
    /// Making every mount private.
    MountPrivate,
    /// Mounting a fresh `/proc`.
    MountProc,
    /// Mounting the tmpfs that becomes `/dev`.
    MountDev,
    /// Putting one device node into the new `/dev`.
    BindDevice(&'static str),
    /// Creating `/dev/shm` or a `/dev` symlink.
    PopulateDev,
    /// `prctl(PR_SET_NO_NEW_PRIVS)`.
    NoNewPrivs,
    /// `setrlimit` of one resource.
    Rlimit(&'static str),
    /// `close_range` of every descriptor above 2.
    CloseDescriptors,
    /// `landlock_create_ruleset`.
    LandlockRuleset,
    /// `landlock_add_rule` for a path set up inside the sandbox (`/proc`, `/dev`).
    LandlockInnerRule(&'static str),
    /// `landlock_restrict_self`.
    LandlockRestrict,
    /// Installing the seccomp filter.
    Seccomp,
    /// Restoring the server's signal mask.
    RestoreSignals,
    /// Building the new root (the tmpfs, `pivot_root`, its directories and symlinks).
    NewRoot,
    /// Entering the working directory inside the new root.
    Chdir,
    /// Moving the sandbox into its cgroup leaf.
    JoinCgroup,
    /// Mounting the scratch tmpfs.
    MountScratch,
    /// Copying a file into the scratch tmpfs.
    CopyIntoScratch,
    /// Bringing up the loopback interface of the sandbox's network namespace (network
    /// `proxy`).
    Loopback,
    /// Creating the egress proxy's listener inside the sandbox's network namespace and
    /// passing it to Warden.
    ProxyListener,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BlockSignals => f.write_str("blocking signals in the helper processes"),
            Self::DropGroups => f.write_str("clearing supplementary groups"),
            Self::SetGid => f.write_str("switching to the unprivileged gid"),
            Self::SetUid => f.write_str("switching to the unprivileged uid"),
            Self::Dumpable => f.write_str("setting PR_SET_DUMPABLE"),
            Self::WriteSetgroups => f.write_str("writing /proc/self/setgroups"),
            Self::WriteUidMap => f.write_str("writing /proc/self/uid_map"),
            Self::WriteGidMap => f.write_str("writing /proc/self/gid_map"),
            Self::SetHostname => f.write_str("setting the host name"),
            Self::Channel => f.write_str("creating the waiter/init channel"),
            Self::ForkInit => f.write_str("forking the namespace's init"),
            Self::ForkServer => f.write_str("forking the server"),
            Self::MountPrivate => f.write_str("making mounts private"),
            Self::MountProc => f.write_str("mounting a fresh /proc"),
            Self::MountDev => f.write_str("mounting a tmpfs on /dev"),
            Self::BindDevice(name) => write!(f, "binding /dev/{name} into the new /dev"),
            Self::PopulateDev => f.write_str("populating the new /dev"),
            Self::NoNewPrivs => f.write_str("setting PR_SET_NO_NEW_PRIVS"),
            Self::Rlimit(name) => write!(f, "setting {name}"),
            Self::CloseDescriptors => f.write_str("closing descriptors above 2"),
            Self::LandlockRuleset => f.write_str("creating the Landlock ruleset"),
            Self::LandlockInnerRule(path) => write!(f, "adding the Landlock rule for {path}"),
            Self::LandlockRestrict => f.write_str("enforcing the Landlock ruleset"),
            Self::Seccomp => f.write_str("installing the seccomp filter"),
            Self::RestoreSignals => f.write_str("restoring the signal mask"),
            Self::NewRoot => f.write_str("building the sandbox's root directory"),
            Self::Chdir => f.write_str("entering the working directory"),
            Self::JoinCgroup => f.write_str("moving into the sandbox's cgroup"),
            Self::MountScratch => f.write_str("mounting the scratch tmpfs"),
            Self::CopyIntoScratch => f.write_str("copying a file into the scratch directory"),
            Self::Loopback => f.write_str("bringing up the sandbox's loopback interface"),
            Self::ProxyListener => {
                f.write_str("creating the egress proxy's listener inside the sandbox")
            }
        }
    }
}

/// Why a process could not be confined or started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// This platform or kernel cannot confine processes at all.
    #[error("confinement is unavailable: {reason}")]
    Unavailable {
        /// What is missing.
        reason: String,
    },
    /// The kernel's Landlock lacks an access right that the profile relies on. Warden does
    /// not run the server with a weaker policy than the profile describes.
    #[error(
        "this kernel's Landlock (ABI {available}) cannot enforce {right}, which the profile needs; \
         that takes Landlock ABI {needed} (Linux {kernel} or later)"
    )]
    LandlockTooOld {
        /// The ABI version the kernel reports.
        available: u32,
        /// The access right that cannot be handled.
        right: &'static str,
        /// The ABI version that introduced it.
        needed: u32,
        /// The first Linux release with that ABI.
        kernel: &'static str,
    },
    /// A path in the profile could not be resolved or opened.
    #[error("path {path} in the sandbox profile: {source}")]
    Path {
        /// The path as given in the profile.
        path: PathBuf,
        /// Why it could not be used (it does not exist, most often).
        source: io::Error,
    },
    /// A granted path (or the program, or the working directory) goes through a symlink
    /// that lies inside one of the profile's write grants and points out of it: the server
    /// could have planted it there to point the grant at something else (`~/.ssh`).
    #[error(
        "path {path} in the sandbox profile goes through the symlink {link}, which lies \
         inside the writable path {grant} and points out of it: the server could have \
         planted it to redirect the grant, so it is not followed (remove the symlink, or \
         grant its target by its own path)"
    )]
    PlantedSymlink {
        /// The path as given.
        path: PathBuf,
        /// The symlink on its way.
        link: PathBuf,
        /// The write grant (resolved) the symlink lies in.
        grant: PathBuf,
    },
    /// The profile is inconsistent.
    #[error("sandbox profile: {reason}")]
    InvalidProfile {
        /// What is wrong with it.
        reason: String,
    },
    /// A resource limit asks for more than Warden itself may have.
    #[error("limit {limit} = {requested} exceeds Warden's own hard limit {hard}")]
    LimitAboveHard {
        /// The rlimit's name.
        limit: &'static str,
        /// What the profile asked for.
        requested: u64,
        /// Warden's hard limit, which an unprivileged child cannot raise.
        hard: u64,
    },
    /// A namespace could not be created.
    #[error("could not create the {namespace} namespace: {source}{hint}")]
    Namespace {
        /// Which namespace.
        namespace: Namespace,
        /// The kernel's answer.
        source: io::Error,
        /// A likely cause, or empty.
        hint: &'static str,
    },
    /// The kernel refused a Landlock rule for a path of the profile.
    #[error("Landlock rule for {path}: {source}")]
    LandlockRule {
        /// The canonical path the rule was for.
        path: PathBuf,
        /// The kernel's answer.
        source: io::Error,
    },
    /// A granted path could not be bound into the sandbox's root.
    #[error("could not bind {path} into the sandbox: {source}")]
    Bind {
        /// The canonical path.
        path: PathBuf,
        /// The kernel's answer.
        source: io::Error,
    },
    /// A step of the in-child set-up failed.
    #[error("sandbox set-up failed while {step}: {source}")]
    Setup {
        /// Which step.
        step: Step,
        /// The kernel's answer.
        source: io::Error,
    },
    /// The private scratch directory could not be prepared.
    #[error("scratch directory {path}: {reason}")]
    Scratch {
        /// The directory (or its base).
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// A file the caller hashed before the start ([`crate::Profile::pinned`]) is not the
    /// same file any more when the server is about to run: it was replaced or written
    /// since it was hashed. Nothing was executed.
    #[error(
        "{path} changed between the check of its hash and the start (replaced or written \
         since it was hashed); nothing was run"
    )]
    PinnedFileChanged {
        /// The path the server would have used.
        path: PathBuf,
    },
    /// Spawning failed for a reason the sandbox did not record (the program could not be
    /// executed, most often).
    #[error("could not start {program}: {source}")]
    Spawn {
        /// The program.
        program: PathBuf,
        /// The error from `spawn`.
        source: io::Error,
    },
}
