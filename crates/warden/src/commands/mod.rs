//! One module per command.

pub mod approve;
pub mod audit;
pub mod call;
pub mod chat;
pub mod config;
pub mod conformance;
pub mod login;
pub mod pin;
pub mod probe;
pub mod run;
pub mod scan;
pub mod serve;
pub mod tools;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use warden_config::{Environment, ResolvedConfig, ResolvedPolicy};
use warden_host::Host;
use warden_mcp::{ConfinedLauncher, ConnectOptions};
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
    Store::open(crate::pins::state_db(env)).map_err(|error| Failure {
        code: crate::exit::Code::Unavailable,
        error: error.into(),
    })
}

/// Connects to `specs` (some of the `configured` servers) under `policy`, giving up (and
/// stopping every server) if the user interrupts. Unapproved project servers are not
/// started, and tools whose definitions drifted from their pins are held back (see
/// [`connect_reviewed`]).
pub async fn connect(
    specs: Vec<warden_config::ServerSpec>,
    configured: &[warden_config::ServerSpec],
    policy: Arc<Policy>,
    env: &Environment,
) -> Result<Host, Failure> {
    let reviewer = Arc::new(crate::approvals::Reviewer::new(open_store(env)?));
    connect_with(specs, configured, policy, env, reviewer).await
}

/// [`connect`] for an agent session: `elicitor` answers the servers' elicitation requests
/// (and its presence declares the capability; see docs/decisions/0016-elicitation.md).
pub async fn connect_session(
    specs: Vec<warden_config::ServerSpec>,
    policy: Arc<Policy>,
    env: &Environment,
    elicitor: Arc<dyn warden_mcp::Elicitor>,
) -> Result<Host, Failure> {
    let reviewer = Arc::new(crate::approvals::Reviewer::new(open_store(env)?));
    let configured = specs.clone();
    connect_inner(specs, &configured, policy, env, reviewer, Some(elicitor)).await
}

/// [`connect`], also returning the tools held back or removed, and the description scan
/// of every listed tool, by server.
pub async fn connect_reviewed(
    specs: Vec<warden_config::ServerSpec>,
    policy: Arc<Policy>,
    env: &Environment,
) -> Result<(Host, DriftByServer, ScansByServer), Failure> {
    let reviewer = Arc::new(crate::approvals::Reviewer::new(open_store(env)?));
    let configured = specs.clone();
    let host = connect_with(specs, &configured, policy, env, Arc::clone(&reviewer) as _).await?;
    let scans = reviewer.scans();
    Ok((host, reviewer.drift(), scans))
}

/// The description scan of every listed tool, by server name.
pub type ScansByServer = std::collections::BTreeMap<String, Vec<crate::approvals::ToolScan>>;

/// Tool definitions that differ from their pins, by server name.
pub type DriftByServer = std::collections::BTreeMap<String, Vec<crate::approvals::Drift>>;

/// Connects to `specs` (some of the `configured` servers, whose write grants decide which
/// pinned files are exposed) under `policy` with `review` deciding which servers start and
/// which tools are offered, giving up (and stopping every server) if the user interrupts.
pub async fn connect_with(
    specs: Vec<warden_config::ServerSpec>,
    configured: &[warden_config::ServerSpec],
    policy: Arc<Policy>,
    env: &Environment,
    review: Arc<dyn warden_host::Review>,
) -> Result<Host, Failure> {
    connect_inner(specs, configured, policy, env, review, None).await
}

async fn connect_inner(
    specs: Vec<warden_config::ServerSpec>,
    configured: &[warden_config::ServerSpec],
    policy: Arc<Policy>,
    env: &Environment,
    review: Arc<dyn warden_host::Review>,
    elicitor: Option<Arc<dyn warden_mcp::Elicitor>>,
) -> Result<Host, Failure> {
    crate::signals::watch();
    // Every stdio server starts confined; `confine = false` servers are started directly by
    // the same launcher, with a warning each time.
    // Each stdio server is checked against its pin right before it is spawned.
    let store = open_store(env)?;
    let launcher = crate::pins::PinningLauncher::new(
        ConfinedLauncher::from_env(scratch_dir(env)),
        store,
        &specs,
        configured,
    );
    let options = ConnectOptions {
        log_dir: Some(log_dir(env)),
        elicitor,
        oauth: Some(login::provider(env)),
        ..ConnectOptions::default()
    };
    tokio::select! {
        host = Host::connect_reviewed(specs, policy, &launcher, &options, review) => Ok(host),
        () = crate::signals::interrupted() => Err(Failure {
            code: crate::exit::Code::Interrupted,
            error: anyhow::anyhow!("interrupted while connecting; servers stopped"),
        }),
    }
}
