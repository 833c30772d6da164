//! [`ConfinedLauncher`]: starts every stdio server inside `warden-sandbox`, unless its
//! configuration says `confine = false`.
//!
//! # What a confined server gets
//!
//! The sandbox's default profile for the resolved program ([`Profile::default_for`]: system
//! directories read-only, the program's installation, a private scratch directory as
//! `HOME`, `TMPDIR` and working directory, no network), plus what [`Grants::compute`]
//! decides (the configured `read`, `write` and `network`, the `#!` interpreter's
//! installation, the package directories of file arguments, the working directory), and
//! the environment: `PATH`, `LANG`, `TZ`, `TERM` from Warden's, the variables named in
//! `sandbox.env` (when Warden has them), and the server's own `env` table.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use std::sync::Arc;
use std::time::Duration;

use tokio::process::Command;
use warden_config::NetworkSpec;
use warden_egress::{EgressLimits, EgressProxy, EgressSink, ProxyTask, Resolver, SystemResolver};
use warden_sandbox::{Network, Profile, Scratch, confine, scrubbed_env};

use crate::error::LaunchError;
use crate::grants::{Access, Grants, Reason};
use crate::launcher::{DirectLauncher, LaunchRequest, Launched, Launcher, resolve_program};

/// Starts servers confined; a request with `confine = false` goes to a [`DirectLauncher`]
/// with a warning each time.
#[derive(Debug, Clone)]
pub struct ConfinedLauncher {
    search_path: OsString,
    scratch_base: PathBuf,
    direct: DirectLauncher,
    egress: Egress,
}

/// How the egress proxy of a server with `network = { allow = [...] }` runs: who resolves
/// names, where its events go, its limits.
#[derive(Clone)]
struct Egress {
    resolver: Arc<dyn Resolver>,
    sink: EgressSink,
    limits: EgressLimits,
}

impl std::fmt::Debug for Egress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Egress")
            .field("resolver", &self.resolver)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Default for Egress {
    fn default() -> Self {
        Self {
            resolver: Arc::new(SystemResolver),
            sink: Arc::new(log_egress),
            limits: EgressLimits::default(),
        }
    }
}

/// The default egress sink: one line in Warden's log per attempt.
fn log_egress(event: &warden_egress::EgressEvent) {
    tracing::info!(
        server = %event.server,
        method = %event.method,
        host = %event.host,
        port = event.port,
        decision = event.decision.as_str(),
        bytes_up = event.bytes_up,
        bytes_down = event.bytes_down,
        error = event.error.as_deref().unwrap_or(""),
        "egress"
    );
}

/// How long the sandbox may take to hand over the proxy listener after the spawn (it sends
/// it before the server starts, so this is only ever reached when something is broken).
const PROXY_HANDOVER: Duration = Duration::from_secs(5);

impl ConfinedLauncher {
    /// A launcher that resolves bare names through this process's `PATH` and creates each
    /// server's scratch directory under `scratch_base` (absolute).
    pub fn from_env(scratch_base: impl Into<PathBuf>) -> Self {
        let search_path = std::env::var_os("PATH").unwrap_or_default();
        Self::with_search_path(search_path, scratch_base)
    }

    /// A launcher with an explicit `PATH` value for resolving bare command names.
    pub fn with_search_path(
        search_path: impl Into<OsString>,
        scratch_base: impl Into<PathBuf>,
    ) -> Self {
        let search_path = search_path.into();
        Self {
            direct: DirectLauncher::with_search_path(search_path.clone()),
            search_path,
            scratch_base: scratch_base.into(),
            egress: Egress::default(),
        }
    }

    /// Sends the egress proxy's events (every connection attempt of a server with a
    /// network allowlist) to `sink` instead of Warden's log: Warden's host writes them to
    /// the audit log.
    pub fn with_egress_sink(mut self, sink: EgressSink) -> Self {
        self.egress.sink = sink;
        self
    }

    /// Resolves the names servers ask the egress proxy for with `resolver` instead of the
    /// system's (tests map names to addresses they control).
    pub fn with_egress_resolver(mut self, resolver: Arc<dyn Resolver>) -> Self {
        self.egress.resolver = resolver;
        self
    }

    /// Replaces the egress proxy's per-server limits.
    pub fn with_egress_limits(mut self, limits: EgressLimits) -> Self {
        self.egress.limits = limits;
        self
    }

    /// Fingerprints the server `request` describes, resolving its program exactly as
    /// [`launch`](Launcher::launch) will.
    pub fn fingerprint(
        &self,
        request: &LaunchRequest,
    ) -> Result<crate::Fingerprint, crate::FingerprintError> {
        crate::fingerprint(request, &self.search_path)
    }

    /// What `request` would be granted: its effective profile, without the scratch
    /// directory (see [`Grants`]). Computed exactly as [`launch`](Launcher::launch) does.
    pub fn grants(&self, request: &LaunchRequest) -> Result<Grants, LaunchError> {
        let program = resolve_program(&request.command, &self.search_path)?;
        Grants::compute(request, &program, None)
    }

    /// The profile `request` would run under, with its scratch directory (kept alive by the
    /// caller for as long as the server runs), and the grants it was built from.
    pub fn profile(
        &self,
        request: &LaunchRequest,
        program: &Path,
    ) -> Result<(Profile, Scratch, Grants), LaunchError> {
        let failed = |source| LaunchError::Confinement {
            program: program.to_path_buf(),
            source,
        };
        let scratch = Scratch::create(&self.scratch_base, &request.server).map_err(failed)?;
        let grants = Grants::compute(request, program, Some(scratch.path()))?;
        // The system directories and the program's installation come with the default.
        let mut profile = Profile::default_for(program, scratch.path()).map_err(failed)?;
        for grant in &grants.paths {
            if matches!(grant.reason, Reason::System | Reason::Program { .. }) {
                continue;
            }
            match grant.access {
                Access::Read => profile.read.push(grant.path.clone()),
                Access::Execute => {
                    profile.read.push(grant.path.clone());
                    profile.exec.push(grant.path.clone());
                }
                Access::Write => profile.write.push(grant.path.clone()),
            }
        }
        profile.network = match &grants.network {
            NetworkSpec::None => Network::None,
            NetworkSpec::Host => Network::Host,
            NetworkSpec::Allow(_) => Network::Proxy {
                port: Network::DEFAULT_PROXY_PORT,
            },
        };
        profile.limits.memory = request.sandbox.memory_limit();
        profile.limits.processes = request.sandbox.process_limit();
        profile.limits.disk = request.sandbox.disk_limit();
        dedup(&mut profile.read);
        dedup(&mut profile.write);
        dedup(&mut profile.exec);

        let mut extra = BTreeMap::new();
        for name in &request.sandbox.env {
            if let Ok(value) = std::env::var(name) {
                extra.insert(name.clone(), value);
            }
        }
        extra.extend(request.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        profile.set_env(scrubbed_env(std::env::vars(), &extra));
        Ok((profile, scratch, grants))
    }
}

/// What [`ConfinedLauncher::launch_substitute`] ran, and under which grants.
#[derive(Debug)]
pub struct Substituted {
    /// The started substitute.
    pub launched: Launched,
    /// The server's own program (resolved), whose profile was applied.
    pub server_program: PathBuf,
    /// Whether the substitute ran confined (`false` for `confine = false`).
    pub confined: bool,
    /// The paths the substitute may write (the server's write grants; empty when
    /// unconfined, where nothing is granted because nothing is withheld).
    pub write_grants: Vec<PathBuf>,
    /// Everything the substitute (and so the server) was granted.
    pub grants: Option<Grants>,
    /// Where the substitute ran from when the server's grants do not cover it: a copy in
    /// the server's own private scratch directory (which every confined server may read,
    /// write and execute in; the copy is made inside the sandbox's scratch tmpfs), so that
    /// no grant has to be added for it. `None` when it ran in place.
    pub substitute_copy: Option<PathBuf>,
}

impl ConfinedLauncher {
    /// Starts `program` with `args` **instead of** the server `request` describes, under
    /// exactly the confinement the server would get: the profile (grants, network,
    /// environment, working directory) is computed from the server's own command and
    /// arguments, then the program is swapped. When the server's grants do not already let
    /// it read and execute `program`, a copy of `program` is placed in the server's private
    /// scratch directory and run from there: the sandbox needs the program's directory
    /// granted, and granting Warden's install directory would give the substitute more
    /// reach than the server has. For `confine = false` the substitute starts directly, like
    /// the server would.
    ///
    /// This is what `warden probe` uses to run its privilege probe as the server would run.
    pub fn launch_substitute(
        &self,
        request: &LaunchRequest,
        program: &Path,
        args: &[String],
    ) -> Result<Substituted, LaunchError> {
        let server_program = resolve_program(&request.command, &self.search_path)?;
        let mut swapped = request.clone();
        swapped.command = program.to_string_lossy().into_owned();
        swapped.args = args.to_vec();
        if !request.sandbox.confine {
            let launched = self.launch(&swapped)?;
            return Ok(Substituted {
                launched,
                server_program,
                confined: false,
                write_grants: Vec::new(),
                grants: None,
                substitute_copy: None,
            });
        }
        if let Some(cwd) = &request.cwd
            && !cwd.is_dir()
        {
            return Err(LaunchError::BadWorkingDirectory { cwd: cwd.clone() });
        }
        let mut program = resolve_program(&swapped.command, &self.search_path)?;
        let (profile, scratch, grants) = self.profile(request, &server_program)?;
        let resolved = std::fs::canonicalize(&program).unwrap_or_else(|_| program.clone());
        let covered = |grants: &[PathBuf]| {
            grants.iter().any(|grant| {
                let grant = std::fs::canonicalize(grant).unwrap_or_else(|_| grant.clone());
                resolved.starts_with(grant)
            })
        };
        let in_place = covered(&profile.read) && covered(&profile.exec);
        let mut substitute_copy = None;
        let mut profile = profile;
        if !in_place {
            let name = program.file_name().map_or_else(
                || "substitute".to_owned(),
                |n| n.to_string_lossy().into_owned(),
            );
            let copy = scratch.path().join(&name);
            profile.scratch_files.push((name, resolved.clone()));
            substitute_copy = Some(copy.clone());
            program = copy;
        }
        let write_grants = profile.write.clone();
        let launched = self.spawn_confined(&swapped, program, profile, scratch)?;
        Ok(Substituted {
            launched,
            server_program,
            confined: true,
            write_grants,
            grants: Some(grants),
            substitute_copy,
        })
    }

    /// Starts `program` with the request's arguments and working directory under `profile`.
    fn spawn_confined(
        &self,
        request: &LaunchRequest,
        program: PathBuf,
        profile: Profile,
        scratch: Scratch,
    ) -> Result<Launched, LaunchError> {
        check_reachable(&program, &profile)?;
        let mut command = std::process::Command::new(&program);
        command
            .args(&request.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(cwd) = &request.cwd {
            command.current_dir(cwd);
        }
        let failed = |source| LaunchError::Confinement {
            program: program.clone(),
            source,
        };
        let confinement = confine(&mut command, &profile).map_err(failed)?;
        let mut command = Command::from(command);
        command.kill_on_drop(false);
        let mut child = command
            .spawn()
            .map_err(|error| failed(confinement.spawn_error(error)))?;
        tracing::debug!(server = %request.server, program = %program.display(), "started confined");
        // Network `proxy`: the listener the sandbox made inside the server's namespace is
        // served here, for as long as the server runs.
        let proxy = match &request.sandbox.network {
            NetworkSpec::Allow(allowlist) => {
                match self.serve_proxy(&request.server, allowlist, &confinement, &program) {
                    Ok(task) => Some(task),
                    Err(error) => {
                        // The server must not run without its proxy: stopping the waiter
                        // takes the whole sandbox down.
                        let _ = child.start_kill();
                        return Err(error);
                    }
                }
            }
            _ => None,
        };
        let keep = Sandboxed {
            confinement,
            _scratch: scratch,
            _proxy: proxy,
        };
        Launched::from_child(program, child, Some(Box::new(keep)))
    }

    /// Serves the proxy listener the sandbox handed over for `server`.
    fn serve_proxy(
        &self,
        server: &str,
        allowlist: &warden_config::egress::EgressAllowlist,
        confinement: &warden_sandbox::Confinement,
        program: &Path,
    ) -> Result<ProxyTask, LaunchError> {
        let failed = |source| LaunchError::Confinement {
            program: program.to_path_buf(),
            source,
        };
        let listener = confinement
            .take_proxy_listener(PROXY_HANDOVER)
            .map_err(failed)?
            .ok_or_else(|| {
                failed(warden_sandbox::SandboxError::InvalidProfile {
                    reason: "the sandbox handed over no proxy listener".to_owned(),
                })
            })?;
        let proxy = EgressProxy::new(
            server,
            allowlist.clone(),
            self.egress.limits,
            Arc::clone(&self.egress.resolver),
            Arc::clone(&self.egress.sink),
        );
        proxy.serve(listener).map_err(|source| {
            failed(warden_sandbox::SandboxError::Setup {
                step: warden_sandbox::Step::ProxyListener,
                source,
            })
        })
    }
}

/// What a confined server keeps alive: its confinement (the cgroup leaf, and what tells
/// which limit it reached) and its scratch directory.
#[derive(Debug)]
struct Sandboxed {
    confinement: warden_sandbox::Confinement,
    _scratch: Scratch,
    /// The egress proxy of a server with a network allowlist.
    _proxy: Option<ProxyTask>,
}

impl crate::launcher::Keep for Sandboxed {
    fn exit_note(&self) -> Option<String> {
        let notes: Vec<String> = self
            .confinement
            .limits_reached()
            .iter()
            .map(|reached| {
                format!(
                    "{reached}; raise `sandbox.{}` if it needs more",
                    reached.name()
                )
            })
            .collect();
        (!notes.is_empty()).then(|| notes.join("; "))
    }
}

impl Launcher for ConfinedLauncher {
    fn launch(&self, request: &LaunchRequest) -> Result<Launched, LaunchError> {
        let program = resolve_program(&request.command, &self.search_path)?;
        self.start(request, program, Vec::new())
    }
}

impl ConfinedLauncher {
    /// Starts the server `request` describes as [`launch`](Launcher::launch) does, running
    /// exactly the program `fingerprint` hashed, and refuses the start
    /// ([`LaunchError::PinnedFileChanged`], or the sandbox's
    /// [`warden_sandbox::SandboxError::PinnedFileChanged`]) when any file it hashed is no
    /// longer that file right before the server is executed: inside the sandbox as its last
    /// step for a confined server, in this process right before the spawn for an unconfined
    /// one.
    pub fn launch_pinned(
        &self,
        request: &LaunchRequest,
        fingerprint: &crate::Fingerprint,
    ) -> Result<Launched, LaunchError> {
        self.start(
            request,
            fingerprint.program.clone(),
            fingerprint.pinned_files(),
        )
    }

    fn start(
        &self,
        request: &LaunchRequest,
        program: PathBuf,
        pinned: Vec<warden_sandbox::PinnedFile>,
    ) -> Result<Launched, LaunchError> {
        if !request.sandbox.confine {
            tracing::warn!(
                server = %request.server,
                "starting UNCONFINED (confine = false): the server can read and do everything Warden can"
            );
            crate::fingerprint::check_unchanged(&pinned)
                .map_err(|path| LaunchError::PinnedFileChanged { path })?;
            return self.direct.launch_program(request, program);
        }
        if let Some(cwd) = &request.cwd
            && !cwd.is_dir()
        {
            return Err(LaunchError::BadWorkingDirectory { cwd: cwd.clone() });
        }
        let (mut profile, scratch, _) = self.profile(request, &program)?;
        profile.pinned = pinned;
        self.spawn_confined(request, program, profile, scratch)
    }

    /// Where every server's private scratch directory is created (servers may write there).
    pub fn scratch_base(&self) -> &Path {
        &self.scratch_base
    }
}

/// When Warden runs as root, the server runs as uid 65534 and the sandbox binds every
/// granted path with that uid, so each path's ancestors must be searchable by others. Checked
/// here to name the directory instead of reporting a bare "permission denied".
fn check_reachable(program: &Path, profile: &Profile) -> Result<(), LaunchError> {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid cannot fail and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(());
    }
    for path in profile
        .read
        .iter()
        .chain(&profile.write)
        .chain(&profile.exec)
        // The scratch directory is a tmpfs of the sandbox's own, not the host's directory.
        .filter(|path| **path != profile.scratch)
    {
        let Ok(resolved) = std::fs::canonicalize(path) else {
            continue; // the sandbox reports a missing path itself
        };
        for dir in resolved.ancestors().skip(1) {
            let Ok(meta) = std::fs::metadata(dir) else {
                continue;
            };
            let mode = meta.permissions().mode() & 0o7777;
            if mode & 0o001 == 0 {
                return Err(LaunchError::Unreachable {
                    program: program.to_path_buf(),
                    path: path.clone(),
                    dir: dir.to_path_buf(),
                    mode,
                });
            }
        }
    }
    Ok(())
}

fn dedup(paths: &mut Vec<PathBuf>) {
    let mut seen = Vec::with_capacity(paths.len());
    for path in paths.drain(..) {
        if !seen.contains(&path) {
            seen.push(path);
        }
    }
    *paths = seen;
}
