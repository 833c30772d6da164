//! Running the registry's client to install a package, confined: each step is started
//! through [`ConfinedLauncher`] like a server would be, with write access to the new
//! installation directory only, a private scratch directory as `HOME` (the client's cache
//! goes there and vanishes with it), and either no network or the egress proxy limited to
//! the registry's hosts (decision 0029). npm runs with `--ignore-scripts`; pip downloads
//! wheels only (`--only-binary=:all:`: no `setup.py` is ever run) and installs them
//! offline with `--require-hashes` from a lockfile Warden writes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use warden_config::SandboxSpec;
use warden_config::egress::{EgressAllowlist, NetworkSpec};
use warden_mcp::{ConfinedLauncher, LaunchRequest, Launcher};

use crate::PackageError;

/// The most output of one step kept for an error message, in bytes (the tail).
const OUTPUT_TAIL: usize = 4 * 1024;

/// Variables naming the certificate authorities to trust, passed on from Warden's
/// environment to the registry's client when set (a machine whose registry traffic goes
/// through a TLS-inspecting gateway trusts its CA this way).
const TRUST_VARIABLES: &[&str] = &[
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "PIP_CERT",
    "REQUESTS_CA_BUNDLE",
];

/// One program run during an install.
#[derive(Debug, Clone)]
pub struct Step {
    /// What it does, for messages (`npm install`).
    pub what: String,
    /// The program (a bare name is looked up in `PATH`).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables added to its environment.
    pub env: BTreeMap<String, String>,
    /// Its working directory (the installation directory).
    pub cwd: PathBuf,
    /// The hosts it may reach through the egress proxy; empty for no network.
    pub hosts: Vec<String>,
}

/// Runs install steps.
pub trait Runner: Send + Sync {
    /// Runs `step`, which may write in `dir` only, to completion within `limit`.
    fn run(&self, step: &Step, dir: &Path, limit: Duration) -> Result<(), PackageError>;
}

/// Runs each step confined by `warden-sandbox` ([`ConfinedLauncher`]).
#[derive(Debug, Clone)]
pub struct ConfinedRunner {
    launcher: ConfinedLauncher,
}

impl ConfinedRunner {
    /// Runs steps with `launcher` (its scratch base and egress settings apply).
    pub fn new(launcher: ConfinedLauncher) -> Self {
        Self { launcher }
    }
}

impl Runner for ConfinedRunner {
    fn run(&self, step: &Step, dir: &Path, limit: Duration) -> Result<(), PackageError> {
        let network = if step.hosts.is_empty() {
            NetworkSpec::None
        } else {
            // `private = true`: a registry reached through a mirror or an intercepting
            // gateway may resolve to a private address; the client still checks TLS.
            let allow = EgressAllowlist::parse(step.hosts.iter().map(|h| (h.as_str(), true)))
                .map_err(|reason| PackageError::Install {
                    step: step.what.clone(),
                    detail: format!("bad registry host: {reason}"),
                })?;
            NetworkSpec::Allow(allow)
        };
        let request = LaunchRequest {
            server: "package-install".to_owned(),
            command: step.program.clone(),
            args: step.args.clone(),
            env: step.env.clone(),
            cwd: Some(step.cwd.clone()),
            sandbox: SandboxSpec {
                confine: true,
                write: vec![dir.to_path_buf()],
                network,
                env: TRUST_VARIABLES.iter().map(|v| (*v).to_owned()).collect(),
                ..SandboxSpec::default()
            },
        };
        let launcher = self.launcher.clone();
        let what = step.what.clone();
        block_on(async move {
            let mut launched =
                launcher
                    .launch(&request)
                    .map_err(|error| PackageError::Install {
                        step: what.clone(),
                        detail: format!("could not start it: {error}"),
                    })?;
            drop(launched.stdin);
            let mut stdout = launched.stdout;
            let mut stderr = launched.stderr;
            let read_out = async move { tail(&mut stdout).await };
            let read_err = async move { tail(&mut stderr).await };
            let outcome = tokio::time::timeout(limit, async {
                let (out, err) = tokio::join!(read_out, read_err);
                let status = launched.group.wait_exit(limit).await;
                (out, err, status)
            })
            .await;
            let Ok((out, err, status)) = outcome else {
                return Err(PackageError::Install {
                    step: what,
                    detail: format!("it did not finish within {} s", limit.as_secs()),
                });
            };
            match status.as_deref() {
                Some("exit code 0") => Ok(()),
                other => Err(PackageError::Install {
                    step: what,
                    detail: format!(
                        "{}; its output ended with:\n{}{}",
                        other.unwrap_or("it did not exit"),
                        out,
                        err
                    ),
                }),
            }
        })?
    }
}

/// Reads `reader` to its end, keeping the last [`OUTPUT_TAIL`] bytes.
async fn tail(reader: &mut (impl tokio::io::AsyncRead + Unpin)) -> String {
    let mut kept: Vec<u8> = Vec::new();
    let mut buffer = vec![0u8; 16 * 1024];
    while let Ok(read) = reader.read(&mut buffer).await {
        if read == 0 {
            break;
        }
        kept.extend_from_slice(&buffer[..read]);
        if kept.len() > 2 * OUTPUT_TAIL {
            kept.drain(..kept.len() - OUTPUT_TAIL);
        }
    }
    if kept.len() > OUTPUT_TAIL {
        kept.drain(..kept.len() - OUTPUT_TAIL);
    }
    String::from_utf8_lossy(&kept).into_owned()
}

/// Runs `future` to completion from synchronous code: on the current runtime when called
/// from one of its blocking threads (a launcher's `spawn_blocking`), else on a runtime of
/// its own.
fn block_on<T>(future: impl std::future::Future<Output = T>) -> Result<T, PackageError> {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => Ok(handle.block_on(future)),
        Err(_) => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .map_err(|source| {
                    PackageError::io("start a runtime for", Path::new("install"), source)
                })?;
            Ok(runtime.block_on(future))
        }
    }
}
