//! The launcher seam: the one place in Warden that creates server processes.
//!
//! Connection code describes what to run ([`LaunchRequest`]) and a [`Launcher`] decides how:
//! [`DirectLauncher`] starts the program as it is, [`crate::ConfinedLauncher`] (what the binary
//! uses) wraps it in `warden-sandbox` unless the request says `confine = false`. Either way
//! the caller gets back the child's three pipes and a [`ProcessGroup`], which is the only
//! handle that can stop it.
//!
//! Rules every launcher keeps:
//! - never a shell: the program and its arguments go to `execve` as they are;
//! - a bare command name is looked up in the absolute entries of `PATH` only (an empty or
//!   relative entry, which would mean the working directory, is skipped);
//! - the child leads its own process group, so stopping it stops everything it started;
//! - the group is killed when its handle is dropped, and [`kill_all_live_groups`] kills every
//!   group still alive (for a panic hook or a signal handler).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use crate::error::LaunchError;

/// What to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchRequest {
    /// The server's name, for logs and for launchers that keep per-server state.
    pub server: String,
    /// The command as configured: an absolute path or a bare name.
    pub command: String,
    /// Arguments, passed without any shell interpretation.
    pub args: Vec<String>,
    /// Variables added to the child's environment.
    pub env: BTreeMap<String, String>,
    /// Working directory; `None` keeps Warden's.
    pub cwd: Option<PathBuf>,
    /// How to confine it (launchers that do not confine ignore this).
    pub sandbox: warden_config::SandboxSpec,
}

impl LaunchRequest {
    /// The request that starts the local server `spec` describes; `None` for a remote
    /// server. Every caller that starts a server (or runs something in its place, like
    /// `warden probe`) builds its request here, so they cannot drift apart.
    pub fn for_spec(spec: &warden_config::ServerSpec) -> Option<Self> {
        let warden_config::TransportSpec::Stdio {
            command,
            args,
            env,
            cwd,
        } = &spec.transport
        else {
            return None;
        };
        Some(Self {
            server: spec.name.clone(),
            command: command.clone(),
            args: args.clone(),
            env: env.clone(),
            cwd: cwd.clone(),
            sandbox: spec.sandbox.clone(),
        })
    }
}

/// A started server: its pipes and the handle that stops it.
#[derive(Debug)]
pub struct Launched {
    /// The absolute program that was executed.
    pub program: PathBuf,
    /// The child's standard input (Warden writes requests here).
    pub stdin: ChildStdin,
    /// The child's standard output (the server's messages).
    pub stdout: ChildStdout,
    /// The child's standard error (free-form logs).
    pub stderr: ChildStderr,
    /// The child's process group.
    pub group: ProcessGroup,
}

/// What a launcher keeps alive for as long as the process runs (a scratch directory, say),
/// and what it can add to the description of how the process ended.
pub trait Keep: std::fmt::Debug + Send + Sync {
    /// What is known about the end beyond the exit status (a resource limit the process
    /// reached), in words; `None` by default.
    fn exit_note(&self) -> Option<String> {
        None
    }
}

/// A boxed [`Keep`].
pub type KeepAlive = Box<dyn Keep>;

/// Two things kept alive together ([`ProcessGroup::keep_also`]); the first's note on the
/// end, else the second's.
#[derive(Debug)]
struct KeptBoth(KeepAlive, KeepAlive);

impl Keep for KeptBoth {
    fn exit_note(&self) -> Option<String> {
        self.0.exit_note().or_else(|| self.1.exit_note())
    }
}

impl Launched {
    /// Wraps a child spawned with piped stdio in its own process group; `keep` is dropped
    /// only once the group has been stopped.
    pub fn from_child(
        program: PathBuf,
        mut child: Child,
        keep: Option<KeepAlive>,
    ) -> Result<Self, LaunchError> {
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            // Unreachable with piped stdio; stop the child rather than leak it.
            drop(ProcessGroup::adopt(child));
            return Err(LaunchError::Spawn {
                program,
                source: std::io::Error::other("the child's pipes were not created"),
            });
        };
        let mut group = ProcessGroup::adopt(child);
        group.guard = keep;
        Ok(Self {
            program,
            stdin,
            stdout,
            stderr,
            group,
        })
    }
}

/// Creates server processes. Implementations decide confinement; callers never spawn.
pub trait Launcher: Send + Sync {
    /// Starts the program described by `request`.
    fn launch(&self, request: &LaunchRequest) -> Result<Launched, LaunchError>;
}

/// Starts programs without confinement, in their own process group.
#[derive(Debug, Clone)]
pub struct DirectLauncher {
    search_path: OsString,
}

impl DirectLauncher {
    /// A launcher that resolves bare command names through this process's `PATH`.
    pub fn from_env() -> Self {
        Self {
            search_path: std::env::var_os("PATH").unwrap_or_default(),
        }
    }

    /// A launcher that resolves bare command names through the given `PATH` value.
    pub fn with_search_path(search_path: impl Into<OsString>) -> Self {
        Self {
            search_path: search_path.into(),
        }
    }
}

impl Launcher for DirectLauncher {
    fn launch(&self, request: &LaunchRequest) -> Result<Launched, LaunchError> {
        let program = resolve_program(&request.command, &self.search_path)?;
        self.launch_program(request, program)
    }
}

impl DirectLauncher {
    /// Starts `program` (already resolved) with the request's arguments, environment and
    /// working directory.
    pub fn launch_program(
        &self,
        request: &LaunchRequest,
        program: PathBuf,
    ) -> Result<Launched, LaunchError> {
        if let Some(cwd) = &request.cwd
            && !cwd.is_dir()
        {
            return Err(LaunchError::BadWorkingDirectory { cwd: cwd.clone() });
        }
        let mut command = Command::new(&program);
        command
            .args(&request.args)
            .envs(&request.env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(false);
        if let Some(cwd) = &request.cwd {
            command.current_dir(cwd);
        }
        let child = command.spawn().map_err(|source| LaunchError::Spawn {
            program: program.clone(),
            source,
        })?;
        Launched::from_child(program, child, None)
    }
}

/// Resolves a configured command to an absolute executable.
///
/// An absolute path is taken as it is; a bare name is searched in the absolute entries of
/// `search_path`; anything else (a relative path with a `/`) is refused, because it would
/// mean the working directory, which may be a cloned repository.
pub fn resolve_program(command: &str, search_path: &OsStr) -> Result<PathBuf, LaunchError> {
    let as_path = Path::new(command);
    if command.contains('/') {
        if !as_path.is_absolute() {
            return Err(LaunchError::RelativePath {
                command: command.to_owned(),
            });
        }
        return if is_executable_file(as_path) {
            Ok(as_path.to_path_buf())
        } else {
            Err(LaunchError::NotExecutable {
                program: as_path.to_path_buf(),
            })
        };
    }
    let mut searched = Vec::new();
    for dir in std::env::split_paths(search_path) {
        if !dir.is_absolute() {
            continue;
        }
        let candidate = dir.join(command);
        if is_executable_file(&candidate) {
            return Ok(candidate);
        }
        searched.push(dir.display().to_string());
    }
    Err(LaunchError::NotFound {
        command: command.to_owned(),
        searched: searched.join(":"),
    })
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// How long each step of a stop may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopGrace {
    /// After stdin is closed, how long the server may take to exit on its own.
    pub after_close: Duration,
    /// After SIGTERM, how long before SIGKILL.
    pub after_term: Duration,
}

impl Default for StopGrace {
    fn default() -> Self {
        Self {
            after_close: Duration::from_secs(2),
            after_term: Duration::from_secs(2),
        }
    }
}

/// How a stop went, for logs and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopReport {
    /// The leader's exit, in words (`exit code 0`, `killed by signal 9`).
    pub status: String,
    /// Signals Warden had to send to the group, in order.
    pub signals: Vec<&'static str>,
}

/// Process ids of groups that are alive, so a panic hook can kill them all.
static LIVE_GROUPS: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// Sends SIGKILL to every process group Warden started that has not been stopped yet.
///
/// For a panic hook or a last-resort signal handler: it takes no async runtime and does not
/// wait.
pub fn kill_all_live_groups() {
    let groups: Vec<i32> = match LIVE_GROUPS.lock() {
        Ok(groups) => groups.iter().copied().collect(),
        Err(poisoned) => poisoned.into_inner().iter().copied().collect(),
    };
    for pgid in groups {
        signal_group(pgid, libc::SIGKILL);
    }
}

fn register(pgid: i32) {
    match LIVE_GROUPS.lock() {
        Ok(mut groups) => groups.insert(pgid),
        Err(poisoned) => poisoned.into_inner().insert(pgid),
    };
}

fn unregister(pgid: i32) {
    match LIVE_GROUPS.lock() {
        Ok(mut groups) => groups.remove(&pgid),
        Err(poisoned) => poisoned.into_inner().remove(&pgid),
    };
}

fn signal_group(pgid: i32, signal: i32) -> bool {
    if pgid <= 1 {
        return false;
    }
    // SAFETY: killpg has no memory effects; a stale or foreign pgid yields an error code.
    unsafe { libc::killpg(pgid, signal) == 0 }
}

fn group_exists(pgid: i32) -> bool {
    signal_group(pgid, 0)
}

/// A child that leads its own process group. Dropping it kills the whole group.
#[derive(Debug)]
pub struct ProcessGroup {
    child: Child,
    pgid: i32,
    stopped: bool,
    /// Something that must live exactly as long as the process (a confined server's scratch
    /// directory); dropped after the group has been stopped or killed.
    guard: Option<KeepAlive>,
}

impl ProcessGroup {
    /// Takes ownership of a child started with `process_group(0)`.
    pub fn adopt(child: Child) -> Self {
        let pgid = child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .unwrap_or(0);
        register(pgid);
        Self {
            child,
            pgid,
            stopped: false,
            guard: None,
        }
    }

    /// Keeps `keep` alive as long as the process too (dropped after the group stopped,
    /// with what the launcher keeps already): a package install the process runs from,
    /// held so that nothing removes it meanwhile.
    pub fn keep_also(&mut self, keep: KeepAlive) {
        self.guard = Some(match self.guard.take() {
            Some(first) => Box::new(KeptBoth(first, keep)),
            None => keep,
        });
    }

    /// The leader's process id (also the group id).
    pub fn pid(&self) -> i32 {
        self.pgid
    }

    /// The leader's exit status, if it has exited, with what the launcher knows about the
    /// end (a resource limit reached).
    pub fn try_status(&mut self) -> Option<String> {
        let status = self.child.try_wait().ok().flatten()?;
        Some(self.describe(status))
    }

    /// Waits up to `limit` for the leader to exit.
    pub async fn wait_exit(&mut self, limit: Duration) -> Option<String> {
        match tokio::time::timeout(limit, self.child.wait()).await {
            Ok(Ok(status)) => Some(self.describe(status)),
            Ok(Err(_)) | Err(_) => None,
        }
    }

    fn describe(&self, status: ExitStatus) -> String {
        let mut text = describe_status(status);
        if let Some(note) = self.guard.as_ref().and_then(|guard| guard.exit_note()) {
            text.push_str("; ");
            text.push_str(&note);
        }
        text
    }

    /// Stops the group the way the MCP specification asks, assuming the caller has already
    /// closed the child's stdin: wait, SIGTERM, wait, SIGKILL. Members of the group that
    /// outlive the leader get SIGTERM then SIGKILL too.
    pub async fn stop(mut self, grace: StopGrace) -> StopReport {
        let mut signals = Vec::new();
        let mut status = self.wait_exit(grace.after_close).await;
        if status.is_none() {
            signal_group(self.pgid, libc::SIGTERM);
            signals.push("SIGTERM");
            status = self.wait_exit(grace.after_term).await;
        }
        if status.is_none() {
            signal_group(self.pgid, libc::SIGKILL);
            signals.push("SIGKILL");
            status = self.wait_exit(grace.after_term).await;
        }
        if group_exists(self.pgid) && !signals.contains(&"SIGKILL") {
            // The leader is gone but something it started is still in the group.
            if !signals.contains(&"SIGTERM") {
                signal_group(self.pgid, libc::SIGTERM);
                signals.push("SIGTERM");
                self.wait_group_gone(grace.after_term).await;
            }
            if group_exists(self.pgid) {
                signal_group(self.pgid, libc::SIGKILL);
                signals.push("SIGKILL");
            }
        }
        self.stopped = true;
        unregister(self.pgid);
        self.guard = None;
        StopReport {
            status: status.unwrap_or_else(|| "did not exit after SIGKILL".to_owned()),
            signals,
        }
    }

    async fn wait_group_gone(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        while group_exists(self.pgid) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if !self.stopped {
            signal_group(self.pgid, libc::SIGKILL);
            // Reap the leader if it is already gone; tokio reaps it later otherwise.
            let _ = self.child.try_wait();
            unregister(self.pgid);
        }
    }
}

/// Describes an exit status in words.
pub fn describe_status(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "exited".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_names_resolve_through_absolute_path_entries_only() {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("fake-server");
        std::fs::write(&program, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();

        let path = std::env::join_paths([dir.path()]).unwrap();
        assert_eq!(resolve_program("fake-server", &path).unwrap(), program);

        // The same directory named relative to the working directory: such an entry
        // would make resolution depend on where Warden runs, so it is skipped.
        let cwd = std::env::current_dir().unwrap();
        let ups = "../".repeat(cwd.components().count() - 1);
        let relative = format!("{ups}{}", dir.path().strip_prefix("/").unwrap().display());
        assert!(Path::new(&relative).join("fake-server").exists());
        let result = resolve_program("fake-server", OsStr::new(&relative));
        assert!(matches!(result, Err(LaunchError::NotFound { .. })));
    }

    #[test]
    fn relative_paths_and_non_executables_are_refused() {
        assert!(matches!(
            resolve_program("./server", OsStr::new("/usr/bin")),
            Err(LaunchError::RelativePath { .. })
        ));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("data.txt");
        std::fs::write(&file, "x").unwrap();
        assert!(matches!(
            resolve_program(file.to_str().unwrap(), OsStr::new("")),
            Err(LaunchError::NotExecutable { .. })
        ));
    }

    #[test]
    fn not_found_names_the_command_and_the_search() {
        let error =
            resolve_program("no-such-mcp-server", OsStr::new("/nonexistent-a:rel")).unwrap_err();
        let message = error.to_string();
        assert!(message.contains("no-such-mcp-server"), "{message}");
        assert!(message.contains("/nonexistent-a"), "{message}");
        assert!(
            !message.contains("rel"),
            "relative entries are not searched: {message}"
        );
    }

    fn alive(pid: i32) -> bool {
        // A zombie has exited; only a running or sleeping process counts.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| stat.rsplit_once(") ").map(|(_, rest)| rest.to_owned()))
            .is_some_and(|rest| !rest.starts_with('Z') && !rest.starts_with('X'))
    }

    fn sleeper() -> LaunchRequest {
        LaunchRequest {
            server: "sleeper".into(),
            command: "sleep".into(),
            args: vec!["600".into()],
            env: BTreeMap::new(),
            cwd: None,
            sandbox: warden_config::SandboxSpec::default(),
        }
    }

    #[tokio::test]
    async fn arguments_reach_the_program_verbatim_never_through_a_shell() {
        use tokio::io::AsyncReadExt;
        let marker = tempfile::tempdir().unwrap();
        let pwned = marker.path().join("pwned");
        let hostile = [
            format!("; touch {}", pwned.display()),
            format!("$(touch {})", pwned.display()),
            format!("`touch {}`", pwned.display()),
            "a\nb".to_owned(),
            "../../etc/passwd".to_owned(),
            "*".to_owned(),
        ];
        let mut args = vec!["%s|".to_owned()];
        args.extend(hostile.iter().cloned());
        let request = LaunchRequest {
            server: "printf".into(),
            command: "printf".into(),
            args,
            env: BTreeMap::new(),
            cwd: Some(marker.path().to_path_buf()),
            sandbox: warden_config::SandboxSpec::default(),
        };
        let mut launched = DirectLauncher::from_env().launch(&request).unwrap();
        let mut out = String::new();
        launched.stdout.read_to_string(&mut out).await.unwrap();
        let expected: String = hostile.iter().map(|arg| format!("{arg}|")).collect();
        assert_eq!(out, expected);
        assert!(!pwned.exists(), "a shell interpreted an argument");
        launched.group.stop(StopGrace::default()).await;
    }

    #[tokio::test]
    async fn dropping_the_handle_kills_the_process() {
        let launched = DirectLauncher::from_env().launch(&sleeper()).unwrap();
        let pid = launched.group.pid();
        assert!(alive(pid));
        drop(launched);
        for _ in 0..100 {
            if !alive(pid) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("process {pid} survived its handle");
    }

    #[tokio::test]
    async fn stop_escalates_to_sigterm_for_a_server_that_ignores_eof() {
        // `sleep` does not read stdin, so closing it does nothing: SIGTERM is needed.
        let launched = DirectLauncher::from_env().launch(&sleeper()).unwrap();
        drop(launched.stdin);
        let grace = StopGrace {
            after_close: Duration::from_millis(100),
            after_term: Duration::from_secs(2),
        };
        let report = launched.group.stop(grace).await;
        assert_eq!(report.signals, vec!["SIGTERM"]);
        assert_eq!(report.status, format!("killed by signal {}", libc::SIGTERM));
    }
}
