//! One module per command.

pub mod call;
pub mod config;
pub mod tools;

use std::path::PathBuf;

use warden_config::{Environment, ResolvedConfig};
use warden_host::Host;
use warden_mcp::{ConnectOptions, DirectLauncher};

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

/// Where per-server stderr logs go.
pub fn log_dir(env: &Environment) -> PathBuf {
    env.state_home.join("warden").join("logs")
}

/// Connects to `specs`, giving up (and stopping every server) if the user interrupts.
pub async fn connect(
    specs: Vec<warden_config::ServerSpec>,
    env: &Environment,
) -> Result<Host, Failure> {
    crate::signals::watch();
    let launcher = DirectLauncher::from_env();
    let options = ConnectOptions {
        log_dir: Some(log_dir(env)),
        ..ConnectOptions::default()
    };
    tokio::select! {
        host = Host::connect(specs, &launcher, &options) => Ok(host),
        () = crate::signals::interrupted() => Err(Failure {
            code: crate::exit::Code::Interrupted,
            error: anyhow::anyhow!("interrupted while connecting; servers stopped"),
        }),
    }
}
