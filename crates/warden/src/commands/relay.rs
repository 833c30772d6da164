//! `warden relay supervise`: the supervisor inside a sandbox (crate `warden-relay`).

use std::collections::BTreeMap;
use std::sync::Arc;

use warden_mcp::{ConfinedLauncher, Launcher};
use warden_relay::{RestartPolicy, Supervisor};

use crate::cli::{GlobalArgs, SuperviseArgs};
use crate::exit::{Code, Failure};

/// Serves the channel on stdin and stdout until it ends, or until SIGINT or SIGTERM; every
/// child is stopped either way.
pub async fn supervise(global: &GlobalArgs, args: SuperviseArgs) -> Result<Code, Failure> {
    if global.config.is_none() {
        return Err(Failure::usage(anyhow::anyhow!(
            "`warden relay supervise` needs --config FILE: the servers' real definitions \
             inside the sandbox"
        )));
    }
    let env = warden_config::Environment::from_process().map_err(Failure::usage)?;
    let path = global.config.clone().unwrap_or_default();
    // Taken before the read, so a change made during it is seen by the next check.
    let read_as = file_identity(&path);
    let servers =
        read_servers(&path, &env).map_err(|error| Failure::usage(anyhow::anyhow!(error)))?;
    let reload: warden_relay::supervisor::Reload = {
        let env = env.clone();
        let last = std::sync::Mutex::new(read_as);
        Arc::new(move || {
            let now = file_identity(&path);
            let mut last = last
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if now.is_some() && *last == now {
                return Ok(None);
            }
            let servers = read_servers(&path, &env)?;
            *last = now;
            Ok(Some(servers))
        })
    };
    let scratch = args.scratch.unwrap_or_else(|| super::scratch_dir(&env));
    let confined = ConfinedLauncher::from_env(scratch);
    let launcher: Arc<dyn Launcher> = Arc::new(confined.clone());
    let supervisor = Supervisor {
        servers,
        reload: Some(reload),
        launcher,
        // What it starts is hashed with the host's own fingerprint code and reported to
        // the brain before each start (when the brain asks): the brain keeps the pins.
        executables: Some(Arc::new(confined)),
        restart: RestartPolicy::default(),
        max_payload: warden_relay::frame::DEFAULT_MAX_PAYLOAD,
    };
    let (input, output) = std_streams().map_err(|error| Failure {
        code: Code::Unavailable,
        error: anyhow::anyhow!("cannot use stdin and stdout: {error}"),
    })?;
    let session = supervisor.run(input, output);
    tokio::pin!(session);
    let result = tokio::select! {
        result = &mut session => result,
        () = crate::signals::interrupted() => {
            // The runtime's shutdown drops every server task, and with it each child's
            // process group, which kills it.
            tracing::info!("interrupted: stopping every server of the session");
            return Ok(Code::Interrupted);
        }
    };
    match result {
        Ok(()) => Ok(Code::Ok),
        Err(error) => Err(Failure {
            code: Code::Unavailable,
            error: anyhow::anyhow!("the relay channel failed: {error}"),
        }),
    }
}

/// Stdin and stdout as async files (copies of the descriptors).
fn std_streams() -> std::io::Result<(tokio::fs::File, tokio::fs::File)> {
    use std::os::fd::AsFd;
    let input = std::io::stdin().as_fd().try_clone_to_owned()?;
    let output = std::io::stdout().as_fd().try_clone_to_owned()?;
    Ok((
        tokio::fs::File::from_std(std::fs::File::from(input)),
        tokio::fs::File::from_std(std::fs::File::from(output)),
    ))
}

/// The local servers of the sandbox's configuration; any other kind is refused.
/// What tells a changed file from an unchanged one without reading it: device, inode, size,
/// modification and change times (`None` when it cannot be read: then it is read again).
fn file_identity(path: &std::path::Path) -> Option<(u64, u64, u64, i64, i64, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    Some((
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec(),
    ))
}

fn read_servers(
    path: &std::path::Path,
    env: &warden_config::Environment,
) -> Result<BTreeMap<String, warden_config::ServerSpec>, String> {
    let config = warden_config::load_file(path, env).map_err(|error| error.to_string())?;
    let mut servers = BTreeMap::new();
    for spec in config.servers {
        if !matches!(spec.transport, warden_config::TransportSpec::Stdio { .. }) {
            return Err(format!(
                "{}: server `{}` is not a local (command) server; inside a sandbox the \
                 supervisor starts local servers only",
                spec.origin.path.display(),
                spec.name
            ));
        }
        servers.insert(spec.name.clone(), spec);
    }
    Ok(servers)
}
