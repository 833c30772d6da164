//! One module per command.

pub mod approve;
pub mod audit;
pub mod call;
pub mod chat;
pub mod config;
pub mod conformance;
pub mod login;
pub mod packages;
pub mod pin;
pub mod probe;
pub mod relay;
pub mod run;
pub mod scan;
pub mod serve;
pub mod sign_ins;
pub mod tools;
pub mod update;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use warden_config::{Environment, ResolvedConfig, ResolvedPolicy};
use warden_host::{Host, HostBuilder, StartCounts};
use warden_policy::{Policy, PolicyError, Reason, ReasonKind};
use warden_store::Store;

use crate::cli::GlobalArgs;
use crate::exit::Failure;

/// Loads the configuration: the `--config` file alone, or every discovered scope.
pub fn load_config(global: &GlobalArgs) -> Result<(ResolvedConfig, Environment), Failure> {
    let env = Environment::from_process().map_err(Failure::usage)?;
    let config = match &global.config {
        Some(path) => warden_config::load_file(path, &env),
        None => warden_config::discover(&env),
    }
    .map_err(Failure::usage)?;
    Ok((config, env))
}

/// The configured server named `name`, or a usage error naming it.
pub fn configured_server<'a>(
    config: &'a ResolvedConfig,
    name: &str,
) -> Result<&'a warden_config::ServerSpec, Failure> {
    config
        .servers
        .iter()
        .find(|spec| spec.name == name)
        .ok_or_else(|| {
            Failure::usage(anyhow::anyhow!(
                "no server `{name}` is configured (see `warden config`)"
            ))
        })
}

/// Compiles the merged policy, after warning about server settings that are not applied.
/// Every file's rules were compiled when it was read, so an error here is unexpected; it is
/// still placed in its file.
pub fn compile_policy(policy: &ResolvedPolicy) -> Result<Arc<Policy>, Failure> {
    for note in &policy.not_applied {
        eprintln!(
            "warden: warning: the policy settings for server `{}` at {} are not applied: {}",
            note.server, note.source, note.reason
        );
    }
    Policy::compile(&policy.config)
        .map(Arc::new)
        .map_err(|error| {
            let place = match &error {
                PolicyError::Rule { index, .. } => policy.rule_source(*index),
                _ => None,
            };
            match place {
                Some(place) => Failure::usage(anyhow::anyhow!("{place}: {error}")),
                None => Failure::usage(error),
            }
        })
}

/// Reasons as an indented list, each rule followed by the place it was written.
pub fn reason_lines(reasons: &[Reason], policy: &ResolvedPolicy) -> String {
    let mut out = String::new();
    for reason in reasons {
        out.push_str("\n  - ");
        // A reason may quote a tool's name or a flagged description: made inert.
        out.push_str(&crate::untrusted::inert(
            &reason.text,
            crate::untrusted::Shape::Line,
        ));
        let rule = match reason.kind {
            ReasonKind::Rule { index } | ReasonKind::HiddenTool { rule: index } => Some(index),
            _ => None,
        };
        if let Some(source) = rule.and_then(|index| policy.rule_source(index)) {
            out.push_str(&format!("\n    (written at {source})"));
        }
    }
    out
}

/// Where per-server stderr logs go.
pub fn log_dir(env: &Environment) -> PathBuf {
    env.state_home.join("warden").join("logs")
}

/// Where confined servers get their private scratch directories (the base; each server's
/// is `BASE/warden-SERVER-PID-RANDOM`, see `warden_sandbox::Scratch`).
///
/// The base must be a directory no other user can control: `warden_sandbox::Scratch`
/// checks that, and refuses one that is not. So it is never a shared temporary directory:
/// - root: `/run/warden/scratch` (`/var/lib/warden/scratch` where there is no `/run`);
/// - anyone else: `$XDG_RUNTIME_DIR/warden/scratch` (a private per-user directory), else
///   `$XDG_STATE_HOME/warden/scratch`.
///
/// On the host each one stays an empty directory: inside the sandbox a size-capped tmpfs
/// covers it, and what the server writes vanishes with the sandbox.
pub fn scratch_dir(env: &Environment) -> PathBuf {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        if Path::new("/run").is_dir() {
            PathBuf::from("/run/warden/scratch")
        } else {
            PathBuf::from("/var/lib/warden/scratch")
        }
    } else if let Some(runtime) = env
        .vars
        .get("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute() && dir.is_dir())
    {
        runtime.join("warden").join("scratch")
    } else {
        env.state_home.join("warden").join("scratch")
    }
}

/// Opens the state store (`$XDG_STATE_HOME/warden/state.db`).
pub fn open_store(env: &Environment) -> Result<Store, Failure> {
    Store::open(warden_host::pins::state_db(env)).map_err(|error| Failure {
        code: crate::exit::Code::Unavailable,
        error: error.into(),
    })
}

/// The host every command builds on: `policy`, the state store (so project servers need
/// their approval, tool definitions and executables are checked against their pins, and
/// every call is audited), where logs and scratch directories go, the OAuth client, and a
/// warning on stderr when an audit row cannot be written, how many servers start at once
/// (`[host] max_parallel_starts`; on a terminal, the queue's progress is shown on stderr),
/// lazy starts (a server the catalogue cache knows starts on its first call) and
/// `[host] idle_stop`. Every server of `config` is `configured` (their write grants decide which
/// pinned files are exposed). A command adds its own hooks (an elicitor, a review) and
/// [`connect`]s.
pub fn host_builder(
    policy: Arc<Policy>,
    config: &ResolvedConfig,
    env: &Environment,
) -> Result<HostBuilder, Failure> {
    let limit = config
        .host
        .max_parallel_starts
        .and_then(|limit| usize::try_from(limit).ok())
        .unwrap_or_else(warden_host::default_parallel_starts);
    let starts = Arc::new(warden_host::StartGate::new(limit));
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        let shown = std::sync::atomic::AtomicBool::new(false);
        starts.on_progress(Arc::new(move |_server, _state, counts| {
            show_start_progress(&shown, limit, counts);
        }));
    }
    Ok(Host::builder(policy)
        .store(open_store(env)?)
        .configured(&config.servers)
        .start_gate(starts)
        // Servers whose tools the catalogue cache knows start on their first call.
        .from_cache(true)
        .idle_stop(config.host.idle_stop)
        .scratch_dir(scratch_dir(env))
        .packages_dir(warden_packages::packages_dir(&env.state_home))
        .log_dir(log_dir(env))
        .oauth(login::provider(env))
        .on_audit_failure(|error| eprintln!("warden: warning: {error}")))
}

/// One line on stderr, rewritten in place, once servers really queue (every turn is
/// taken); cleared when none is left. Nothing is shown when no server had to wait.
fn show_start_progress(shown: &std::sync::atomic::AtomicBool, limit: usize, counts: StartCounts) {
    use std::io::Write;
    use std::sync::atomic::Ordering;
    let queueing = counts.queued > 0 && counts.starting >= limit;
    if !queueing && !shown.load(Ordering::Relaxed) {
        return;
    }
    shown.store(true, Ordering::Relaxed);
    let mut err = std::io::stderr().lock();
    let _ = if counts.queued == 0 && counts.starting == 0 {
        shown.store(false, Ordering::Relaxed);
        write!(err, "\r\x1b[K")
    } else {
        write!(
            err,
            "\r\x1b[Kwarden: servers: {} starting, {} queued, {} connected, {} failed",
            counts.starting, counts.queued, counts.connected, counts.failed
        )
    };
    let _ = err.flush();
}

/// Starts the servers in `specs` with `builder`, giving up (and stopping every server) if
/// the user interrupts.
pub async fn connect(
    builder: HostBuilder,
    specs: Vec<warden_config::ServerSpec>,
) -> Result<Host, Failure> {
    crate::signals::watch();
    tokio::select! {
        host = builder.connect(specs) => Ok(host),
        () = crate::signals::interrupted() => Err(Failure {
            code: crate::exit::Code::Interrupted,
            error: anyhow::anyhow!("interrupted while connecting; servers stopped"),
        }),
    }
}

/// The description scan of every listed tool, by server name.
pub type ScansByServer = std::collections::BTreeMap<String, Vec<warden_host::ToolScan>>;

/// Tool definitions that differ from their pins, by server name.
pub type DriftByServer = std::collections::BTreeMap<String, Vec<warden_host::approvals::Drift>>;
