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
//! - with `no_new_privs`, resource limits, core dumps off, every descriptor above 2 closed,
//!   and an environment built from scratch;
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
//! holds; when Warden dies, however it dies, the waiter sees the hang-up and kills init. The
//! waiter and init keep a copy of Warden's memory (they never exec), so both are made
//! non-dumpable and the server cannot read them.
//!
//! # Use
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::process::{Command, Stdio};
//! use warden_sandbox::{Profile, Scratch, confine, scrubbed_env};
//!
//! let scratch = Scratch::create(std::path::Path::new("/tmp"), "time")?;
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

/// What [`confine`] set up; explains a failed spawn.
#[derive(Debug)]
pub struct Confinement {
    program: PathBuf,
    #[cfg(target_os = "linux")]
    report: std::sync::Arc<linux::Report>,
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
