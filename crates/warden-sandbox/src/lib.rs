//! Starts an MCP server confined, and hands back its pipes.
//!
//! A server started the ordinary way inherits everything its parent has: the user's uid and
//! so every file the user can read (`~/.ssh`, cloud credentials), the environment (tokens),
//! open descriptors, the working directory and the network. None of that is asked for by the
//! server's code, and all of it is reachable by whoever can steer the model that composes the
//! server's tool calls. This crate removes that inheritance: [`confine`] takes a
//! [`std::process::Command`] and a [`Profile`] and arranges for the program to start
//!
//! - in new user, mount, pid, ipc, uts and cgroup namespaces, and a new network namespace
//!   unless the profile asks for the host's network;
//! - as uid/gid 65534 when Warden itself runs as root (its own uid otherwise), with no
//!   capabilities once it has executed;
//! - under Landlock rules built from the profile's read, write and exec lists (the best ABI
//!   the kernel has, and an error, not a quiet downgrade, when the profile needs more);
//! - under a seccomp filter that refuses `ptrace`, `process_vm_*`, `io_uring`, kernel
//!   modules, mounts, keyrings, new namespaces, and (network `none`) every socket family but
//!   `AF_UNIX`;
//! - in a root directory that holds nothing but the granted paths (bound read-only unless
//!   writable), a fresh `/proc` and a minimal `/dev`: what is not granted does not exist,
//!   which also covers what Landlock does not mediate (connecting to a UNIX socket by path,
//!   `stat`, `chmod`);
//! - with `no_new_privs`, core dumps off, every descriptor above 2 closed, and an
//!   environment built from scratch;
//! - under memory and process limits for the whole sandbox (a cgroup leaf of its own where
//!   the machine offers one, per-process rlimits otherwise), with a private scratch
//!   directory that is a size-capped tmpfs and vanishes with the sandbox ([`Limits`],
//!   [`Scratch`]);
//! - inside a process tree that dies with Warden, even when Warden is killed with SIGKILL.
//!
//! # Process tree
//!
//! `unshare(CLONE_NEWPID)` puts only the caller's *children* in the new pid namespace, so
//! three processes come out of one spawn:
//!
//! ```text
//! Warden ── waiter (the child std spawned; leads the process group; outside the pid ns)
//!             └── init (pid 1 of the new pid namespace; reaps, reports the server's status)
//!                   └── server (pid 2; confined, then exec'd)
//! ```
//!
//! The waiter exits with the server's status (or dies by the same signal), so the `Child`
//! the caller holds behaves like the server. The server is not pid 1, because pid 1 drops
//! every signal it has no handler for (a server would ignore SIGTERM) and must reap orphans.
//! All three share the process group, so signalling the group reaches the server directly.
//! When init exits the kernel kills everything left in the namespace, double-forked
//! daemons included. The waiter holds the read end of a pipe whose write end only Warden
//! holds; when Warden dies, however it dies, the waiter sees the hang-up and kills init.
//!
//! The waiter and init are forks of Warden that never exec. Once each has forked its child,
//! it copies the few values its loop reads onto its stack and unmaps every private
//! anonymous mapping it inherited (Warden's heap, its other threads' stacks) but its own
//! stack and TLS block, so a helper pair costs about 270 KiB instead of a copy of Warden's
//! heap as it was at the fork (decision 0054). What they still map of Warden (its code and
//! the loaded objects' data) is not readable by the server: both are non-dumpable, and
//! init, the one of the two the server can see (as its `/proc/1`), also overwrites Warden's
//! argument and environment strings, which `/proc/1/cmdline` would show to anyone.
//!
//! # Use
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::process::{Command, Stdio};
//! use warden_sandbox::{Profile, Scratch, confine, scrubbed_env};
//!
//! let scratch = Scratch::create(std::path::Path::new("/run/warden/scratch"), "time")?;
//! let mut profile = Profile::default_for("/usr/bin/python3".as_ref(), scratch.path())?;
//! profile.set_env(scrubbed_env(std::env::vars(), &Default::default()));
//!
//! let mut command = Command::new("/usr/bin/python3");
//! command.args(["-m", "mcp_server_time"]);
//! command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
//! let confinement = confine(&mut command, &profile)?;
//! let child = command.spawn().map_err(|e| confinement.spawn_error(e))?;
//! # drop(child); Ok(()) }
//! ```
//!
//! A `tokio::process::Command` can be made from the confined `std` command with `From`.
//!
//! On platforms other than Linux, [`confine`] returns [`SandboxError::Unavailable`].

mod error;
#[cfg(target_os = "linux")]
mod linux;
mod profile;
mod resolve;
mod scratch;

use std::path::PathBuf;
use std::process::Command;

pub use error::{Namespace, SandboxError, Step};
pub use profile::{
    DEFAULT_PATH, ENV_ALLOWLIST, Limits, Network, PinnedFile, Profile, SANDBOX_GID, SANDBOX_UID,
    home_dirs, program_grants, scrubbed_env, system_exec_dirs, system_read_dirs,
};
pub use resolve::resolve_grant;
pub use scratch::Scratch;

/// Prepares `command` to start confined by `profile`.
///
/// Everything that can be checked or allocated is done here, in the parent: paths are
/// resolved and opened, the kernel's Landlock ABI is checked against what the profile needs,
/// the seccomp program is built, the id maps are written out. The command then gets a
/// `pre_exec` hook that performs only system calls, a new process group (`process_group(0)`),
/// the profile's environment and nothing else (`env_clear`), and the scratch directory as
/// its working directory unless it has one (which must then be inside a granted path).
///
/// The program must be an absolute path inside an `exec` path of the profile, named by a
/// path that exists inside the sandbox (its directory granted, no symlinked directory below
/// the top level). Call this once per command: a second hook would run inside the first
/// sandbox and fail.
///
/// Keep the returned [`Confinement`] until the spawn has been checked: when the set-up
/// fails inside the child, [`Confinement::spawn_error`] turns the bare OS error that
/// `spawn` returns into one that names the failed step.
pub fn confine(command: &mut Command, profile: &Profile) -> Result<Confinement, SandboxError> {
    #[cfg(target_os = "linux")]
    {
        linux::confine(command, profile)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (command, profile);
        Err(SandboxError::Unavailable {
            reason: format!(
                "confinement is implemented for Linux only, and this is {}",
                std::env::consts::OS
            ),
        })
    }
}

/// The kernel's Landlock ABI version, or `None` when Landlock is absent or disabled.
pub fn landlock_abi() -> Option<u32> {
    #[cfg(target_os = "linux")]
    {
        linux::landlock::abi().ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// What [`confine`] set up; explains a failed spawn, and which limit a server that ended
/// had reached.
///
/// Keep it for as long as the process runs: it holds the sandbox's cgroup leaf, which is
/// removed when both this and the command are dropped and the sandbox is empty.
#[derive(Debug)]
pub struct Confinement {
    program: PathBuf,
    /// Network `proxy`: where the proxy listener arrives from the sandbox.
    #[cfg(target_os = "linux")]
    proxy: Option<std::os::fd::OwnedFd>,
    #[cfg(target_os = "linux")]
    report: std::sync::Arc<linux::Report>,
    #[cfg(target_os = "linux")]
    watch: linux::Watch,
}

/// A resource limit a confined server reached, as far as the sandbox can tell once it
/// ended ([`Confinement::limits_reached`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LimitReached {
    /// [`Limits::memory`], in bytes. `peak` is the server's peak resident size where the
    /// limit was a per-process rlimit (without a cgroup, that is the evidence); `None` when
    /// the cgroup's OOM killer acted.
    Memory {
        /// The limit.
        limit: u64,
        /// The peak resident size, in bytes.
        peak: Option<u64>,
    },
    /// [`Limits::processes`]: a fork was refused (cgroup), or the sandbox held about that
    /// many processes when the server ended (rlimit).
    Processes {
        /// The limit.
        limit: u64,
    },
    /// [`Limits::disk`]: the scratch tmpfs was full when the server ended.
    Disk {
        /// The limit, in bytes.
        limit: u64,
    },
}

impl LimitReached {
    /// The name of the limit, as in [`Limits`] and in Warden's configuration
    /// (`memory`, `processes`, `disk`).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Memory { .. } => "memory",
            Self::Processes { .. } => "processes",
            Self::Disk { .. } => "disk",
        }
    }
}

impl std::fmt::Display for LimitReached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Memory { limit, peak: None } => write!(
                f,
                "it reached its memory limit of {}, and the kernel's OOM killer stopped it",
                format_bytes(*limit)
            ),
            Self::Memory {
                limit,
                peak: Some(peak),
            } => write!(
                f,
                "it reached its memory limit of {} per process (peak {})",
                format_bytes(*limit),
                format_bytes(*peak)
            ),
            Self::Processes { limit } => write!(
                f,
                "it reached its process limit of {limit} processes and threads, so forks were \
                 refused"
            ),
            Self::Disk { limit } => write!(
                f,
                "it filled its scratch directory to its disk limit of {}",
                format_bytes(*limit)
            ),
        }
    }
}

/// `512M`, `2G`, `1536K`: the largest exact binary unit, as Warden's configuration writes
/// sizes; otherwise MiB with one decimal.
fn format_bytes(bytes: u64) -> String {
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    if bytes >= 1 << 20 {
        // Display only: one decimal of MiB.
        return format!("{:.1}M", bytes as f64 / f64::from(1u32 << 20));
    }
    format!("{bytes} bytes")
}

impl Confinement {
    /// The error the sandbox set-up recorded for the most recent spawn, if any.
    ///
    /// Set-up failures are almost always reported through `spawn` itself; one (init failing
    /// to fork the server) surfaces only as the child exiting with status 125, and this
    /// names it.
    pub fn take_error(&self) -> Option<SandboxError> {
        #[cfg(target_os = "linux")]
        {
            self.report.take()
        }
        #[cfg(not(target_os = "linux"))]
        {
            None
        }
    }

    /// The resource limits the server had reached when it ended: from the cgroup's counters
    /// (a memory OOM kill, a refused fork) and from what the sandbox's init saw at the
    /// server's exit (a full scratch tmpfs; without a cgroup, a peak resident size at the
    /// memory rlimit, or as many processes as the limit). Empty while it runs, and when
    /// nothing points at a limit.
    pub fn limits_reached(&self) -> Vec<LimitReached> {
        #[cfg(target_os = "linux")]
        {
            self.watch.reached(self.report.facts())
        }
        #[cfg(not(target_os = "linux"))]
        {
            Vec::new()
        }
    }

    /// Network `proxy`: the listener the sandbox created on `127.0.0.1:PORT` inside its
    /// network namespace, for Warden to accept the server's proxy connections on. Call it
    /// once after a successful spawn (the sandbox hands it over before the server starts);
    /// `Ok(None)` for the other network settings. Waits at most `timeout`.
    pub fn take_proxy_listener(
        &self,
        timeout: std::time::Duration,
    ) -> Result<Option<std::net::TcpListener>, SandboxError> {
        #[cfg(target_os = "linux")]
        {
            let Some(receiver) = &self.proxy else {
                return Ok(None);
            };
            let fd = linux::receive_listener(receiver, timeout).map_err(|source| {
                self.take_error().unwrap_or(SandboxError::Setup {
                    step: Step::ProxyListener,
                    source,
                })
            })?;
            Ok(Some(std::net::TcpListener::from(fd)))
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = timeout;
            Ok(None)
        }
    }

    /// Turns the error `spawn` returned into one naming the failed set-up step, or into
    /// [`SandboxError::Spawn`] when the sandbox recorded none (the program itself could not
    /// be executed).
    pub fn spawn_error(&self, error: std::io::Error) -> SandboxError {
        self.take_error().unwrap_or_else(|| SandboxError::Spawn {
            program: self.program.clone(),
            source: error,
        })
    }
}

/// Whether Warden runs with effective uid 0.
#[cfg(target_os = "linux")]
pub(crate) fn running_as_root() -> bool {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() == 0 }
}
