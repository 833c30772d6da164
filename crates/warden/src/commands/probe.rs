//! `warden probe SERVER`: what a server could reach, measured rather than argued.
//!
//! Warden runs its own binary in probe mode (`warden __probe-report`, see
//! [`crate::probe_report`]) in place of the server, under exactly the confinement the server
//! gets: the launch request is the server's, the profile is computed from the server's own
//! command and arguments, and only then is the program swapped. No grant is added: when the
//! server's grants do not cover Warden's binary, a copy of it runs from the server's private
//! scratch directory; the report says which. With `confine = false` the probe starts
//! directly, as the server would, so the two reports show what confinement takes away.
//!
//! The host side decides what to try: credential files under the real user's home (the probe
//! sees a private `HOME`), TCP addresses (the loopback ports listening on the host and one
//! outside address, or the `--connect` ones), the SSH agent socket, and places to try
//! writing in.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};
use warden_mcp::{ConfinedLauncher, LaunchRequest, launcher::StopGrace};

use crate::cli::{GlobalArgs, ProbeArgs};
use crate::exit::{Code, Failure};
use crate::probe_report::{PathCheck, ProbeInput, ProbeReport};
use crate::render;
use crate::untrusted::{Shape, inert};

/// The hidden subcommand that runs the probe.
pub const PROBE_SUBCOMMAND: &str = "__probe-report";
/// How long the probe may take in all.
const PROBE_LIMIT: Duration = Duration::from_secs(10);
/// How long each TCP connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// The largest report read from the probe.
const MAX_REPORT_BYTES: u64 = 1024 * 1024;
/// The most stderr kept from the probe (for errors).
const MAX_STDERR_BYTES: u64 = 16 * 1024;
/// The outside address tried by default (one connection attempt, 1 s at most).
const OUTSIDE_ADDRESS: &str = "1.1.1.1:443";
/// At most this many host loopback ports are tried by default.
const MAX_DEFAULT_PORTS: usize = 64;

/// Runs `warden probe`.
pub async fn run(global: &GlobalArgs, args: ProbeArgs) -> Result<Code, Failure> {
    let (config, env) = super::load_config(global)?;
    let Some(spec) = config.servers.iter().find(|spec| spec.name == args.server) else {
        let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
        return Err(Failure::usage(anyhow::anyhow!(
            "no server named `{}` is configured (configured: {})",
            args.server,
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        )));
    };
    let Some(request) = LaunchRequest::for_spec(spec) else {
        return Err(Failure::usage(anyhow::anyhow!(
            "`{}` is a remote server: Warden does not start it, so there is nothing to probe",
            spec.name
        )));
    };
    // A package server (`npx -y PKG`) runs its installed entry point: probe that.
    let request = match super::open_store(&env) {
        Ok(store) => warden_host::packages::installed_request(
            &store,
            &warden_host::pins::key_for(spec),
            &request,
        ),
        Err(_) => request,
    };
    let config_dir = spec.origin.path.parent().map(Path::to_path_buf);
    let input = probe_input(&env, &request, config_dir.as_deref(), &args.connect);
    let unavailable = |error: anyhow::Error| Failure {
        code: Code::Unavailable,
        error,
    };
    let input_json = serde_json::to_string(&input).map_err(|e| unavailable(e.into()))?;
    let exe = std::env::current_exe()
        .map_err(|e| unavailable(anyhow::anyhow!("cannot find Warden's own binary: {e}")))?;
    let launcher = ConfinedLauncher::from_env(super::scratch_dir(&env));
    let probe_args = vec![
        PROBE_SUBCOMMAND.to_owned(),
        "--input".to_owned(),
        input_json,
    ];
    let substituted = launcher
        .launch_substitute(&request, &exe, &probe_args)
        .map_err(|error| {
            unavailable(anyhow::anyhow!(
                "cannot start the probe for `{}`: {error}",
                spec.name
            ))
        })?;
    let mut launched = substituted.launched;
    drop(launched.stdin);
    let stdout = read_capped(launched.stdout, MAX_REPORT_BYTES);
    let stderr = read_capped(launched.stderr, MAX_STDERR_BYTES);
    let outcome = tokio::time::timeout(PROBE_LIMIT, async { tokio::join!(stdout, stderr) }).await;
    let status = launched.group.wait_exit(Duration::from_secs(2)).await;
    launched.group.stop(StopGrace::default()).await;
    let Ok((stdout, stderr)) = outcome else {
        return Err(unavailable(anyhow::anyhow!(
            "the probe for `{}` did not finish within {PROBE_LIMIT:?}",
            spec.name
        )));
    };
    let mut report: ProbeReport = serde_json::from_slice(&stdout).map_err(|error| {
        unavailable(anyhow::anyhow!(
            "the probe for `{}` gave no report ({error}; exit: {}){}",
            spec.name,
            status.unwrap_or_else(|| "still running".to_owned()),
            stderr_tail(&stderr)
        ))
    })?;
    let mut grants = substituted.write_grants.clone();
    if substituted.confined {
        // The sandbox's `/dev/shm` is a tmpfs of its own (not the host's), writable on purpose.
        grants.push(PathBuf::from("/dev/shm"));
    }
    mark_granted(&mut report.writable, &grants);

    let summary = Summary::of(&report);
    let pins = pin_report(&config.servers, &launcher, &request);
    let probe_binary = json!({
        "path": exe,
        "copied_into_scratch": substituted.substitute_copy,
    });
    if args.json {
        let value = json!({
            "server": spec.name,
            "confined": substituted.confined,
            "server_program": substituted.server_program,
            "probe_binary": probe_binary,
            "write_grants": substituted.write_grants,
            "grants": substituted.grants,
            "report": report,
            "summary": summary.json(),
            "pins": pins,
        });
        println!("{}", render::pretty(&value));
    } else {
        print!(
            "{}",
            text(
                &spec.name,
                substituted.confined,
                &substituted.server_program,
                &exe,
                substituted.substitute_copy.as_deref(),
                substituted.grants.as_ref(),
                &report,
            )
        );
        print!("{}", pin_text(&pins));
        println!("{}", summary.line());
    }
    Ok(Code::Ok)
}

/// What the server's pin covers, and each pinned file someone other than the user could
/// change (the server is refused at start for that): `{"files": [...], "exposed": [...]}`,
/// or `{"error": ...}` when the files cannot be hashed.
fn pin_report(
    configured: &[warden_config::ServerSpec],
    launcher: &ConfinedLauncher,
    request: &LaunchRequest,
) -> Value {
    match launcher.fingerprint(request) {
        Ok(fingerprint) => {
            let grants = warden_host::pins::write_grants(configured, launcher.scratch_base());
            json!({
                "files": warden_host::pins::describe(&fingerprint),
                "exposed": warden_host::pins::exposed(&fingerprint, &grants),
            })
        }
        Err(error) => json!({ "error": error.to_string() }),
    }
}

fn pin_text(pins: &Value) -> String {
    let lines = |key: &str| -> Vec<String> {
        pins[key]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|item| inert(item, Shape::Line).into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    if let Some(error) = pins["error"].as_str() {
        return format!(
            "pinned files: cannot hash them: {}\n",
            inert(error, Shape::Line)
        );
    }
    let mut out = String::from("pinned files (what its pin covers):\n");
    for line in lines("files") {
        out.push_str(&format!("  {line}\n"));
    }
    let exposed = lines("exposed");
    if exposed.is_empty() {
        out.push_str("  none of them can be changed by anyone but you\n");
    } else {
        out.push_str(
            "  EXPOSED: someone other than you can change these, so the server is refused at \
             start:\n",
        );
        for line in exposed {
            out.push_str(&format!("    {line}\n"));
        }
    }
    out
}

/// Everything the probe is asked to try, computed on the host.
fn probe_input(
    env: &warden_config::Environment,
    request: &LaunchRequest,
    config_dir: Option<&Path>,
    connect: &[String],
) -> ProbeInput {
    let connect = if connect.is_empty() {
        let mut addresses = listening_loopback_ports();
        addresses.truncate(MAX_DEFAULT_PORTS);
        addresses.push(OUTSIDE_ADDRESS.to_owned());
        addresses
    } else {
        connect.to_vec()
    };
    let mut writable: Vec<PathBuf> = Vec::new();
    writable.extend(env.home.clone());
    for dir in ["/tmp", "/var/tmp", "/dev/shm"] {
        writable.push(PathBuf::from(dir));
    }
    writable.push(env.cwd.clone());
    writable.extend(request.cwd.clone());
    writable.extend(config_dir.map(Path::to_path_buf));
    let mut seen = Vec::new();
    let writable_candidates = writable
        .into_iter()
        .filter(|dir| dir.is_absolute())
        .filter_map(|dir| {
            let key = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
            if seen.contains(&key) {
                None
            } else {
                seen.push(key);
                Some(dir.display().to_string())
            }
        })
        .collect();
    ProbeInput {
        credential_paths: credential_paths(env.home.as_deref()),
        connect,
        connect_timeout_ms: u64::try_from(CONNECT_TIMEOUT.as_millis()).unwrap_or(1000),
        ssh_auth_sock: env.vars.get("SSH_AUTH_SOCK").cloned(),
        writable_candidates,
        host_processes: crate::probe_report::count_pids(),
        warden_pid: std::process::id(),
    }
}

/// Well-known credential files under `home` (every entry of `~/.ssh`, or the usual key names
/// when it cannot be listed) and a few system ones.
fn credential_paths(home: Option<&Path>) -> Vec<String> {
    const IN_HOME: [&str; 12] = [
        ".aws/credentials",
        ".aws/config",
        ".config/gh/hosts.yml",
        ".netrc",
        ".docker/config.json",
        ".kube/config",
        ".git-credentials",
        ".npmrc",
        ".pypirc",
        ".config/gcloud/application_default_credentials.json",
        ".azure/msal_token_cache.json",
        ".gnupg/private-keys-v1.d",
    ];
    const SSH_DEFAULTS: [&str; 4] = ["id_rsa", "id_ed25519", "id_ecdsa", "config"];
    const SYSTEM: [&str; 4] = [
        "/etc/shadow",
        "/etc/ssh/ssh_host_ed25519_key",
        "/etc/ssh/ssh_host_rsa_key",
        "/etc/sudoers",
    ];
    let mut paths = Vec::new();
    if let Some(home) = home {
        let ssh = home.join(".ssh");
        let mut listed: Vec<PathBuf> = std::fs::read_dir(&ssh)
            .map(|entries| entries.flatten().map(|entry| entry.path()).collect())
            .unwrap_or_default();
        listed.sort();
        listed.truncate(32);
        if listed.is_empty() {
            listed = SSH_DEFAULTS.iter().map(|name| ssh.join(name)).collect();
        }
        paths.extend(listed);
        paths.extend(IN_HOME.iter().map(|rel| home.join(rel)));
    }
    paths.extend(SYSTEM.iter().map(PathBuf::from));
    paths.iter().map(|p| p.display().to_string()).collect()
}

/// `127.0.0.1:PORT` / `[::1]:PORT` for every TCP port listening on the host's loopback (or on
/// every address), from `/proc/net/tcp` and `/proc/net/tcp6`.
fn listening_loopback_ports() -> Vec<String> {
    let mut found = Vec::new();
    for (file, loopback, any, format) in [
        ("/proc/net/tcp", "0100007F", "00000000", "127.0.0.1"),
        (
            "/proc/net/tcp6",
            "00000000000000000000000001000000",
            "00000000000000000000000000000000",
            "[::1]",
        ),
    ] {
        let Ok(table) = std::fs::read_to_string(file) else {
            continue;
        };
        for line in table.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state)) = (fields.get(1), fields.get(3)) else {
                continue;
            };
            if *state != "0A" {
                continue; // not LISTEN
            }
            let Some((address, port)) = local.split_once(':') else {
                continue;
            };
            if address != loopback && address != any {
                continue;
            }
            let Ok(port) = u16::from_str_radix(port, 16) else {
                continue;
            };
            let entry = format!("{format}:{port}");
            if !found.contains(&entry) {
                found.push(entry);
            }
        }
    }
    found
}

/// Marks the candidates that lie inside one of the write grants: writing there is allowed
/// on purpose and is not counted.
fn mark_granted(checks: &mut [PathCheck], grants: &[PathBuf]) {
    let grants: Vec<PathBuf> = grants
        .iter()
        .map(|g| std::fs::canonicalize(g).unwrap_or_else(|_| g.clone()))
        .collect();
    for check in checks {
        let path =
            std::fs::canonicalize(&check.path).unwrap_or_else(|_| PathBuf::from(&check.path));
        check.granted = grants.iter().any(|grant| path.starts_with(grant));
    }
}

async fn read_capped<R: AsyncRead + Unpin>(reader: R, cap: u64) -> Vec<u8> {
    let mut out = Vec::new();
    // A read error ends the report; what arrived is still parsed (and fails if cut short).
    let _ = reader.take(cap).read_to_end(&mut out).await;
    out
}

fn stderr_tail(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.lines().rev().take(10).collect();
    if lines.is_empty() {
        return String::new();
    }
    let mut out = String::from("\nits stderr ended with:");
    for line in lines.into_iter().rev() {
        out.push_str("\n  | ");
        out.push_str(line);
    }
    out
}

/// The counts of the one-line summary.
struct Summary {
    credential_files: usize,
    secret_variables: usize,
    ports: usize,
    host_processes: usize,
    writable: usize,
}

impl Summary {
    fn of(report: &ProbeReport) -> Self {
        Self {
            credential_files: report.credential_files.iter().filter(|c| c.ok).count(),
            secret_variables: report.secret_variables.len(),
            ports: report.connect.iter().filter(|r| r.reachable).count(),
            host_processes: if report.processes.sees_host {
                report.processes.visible
            } else {
                0
            },
            writable: report
                .writable
                .iter()
                .filter(|c| c.ok && !c.granted)
                .count(),
        }
    }

    fn json(&self) -> Value {
        json!({
            "credential_files_readable": self.credential_files,
            "secret_variables": self.secret_variables,
            "ports_reachable": self.ports,
            "host_processes_visible": self.host_processes,
            "writable_outside_grant": self.writable,
        })
    }

    fn line(&self) -> String {
        format!(
            "{} credential files readable, {} secret-looking variables, {} ports reachable, \
             {} host processes visible, {} writable places outside the grant",
            self.credential_files,
            self.secret_variables,
            self.ports,
            self.host_processes,
            self.writable
        )
    }
}

fn text(
    server: &str,
    confined: bool,
    server_program: &Path,
    exe: &Path,
    copy: Option<&Path>,
    grants: Option<&warden_mcp::Grants>,
    report: &ProbeReport,
) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "probe of `{server}` ({}), with the grants of {}\n",
        if confined { "confined" } else { "UNCONFINED" },
        server_program.display()
    ));
    if confined {
        out.push_str(&format!(
            "  the probe is Warden's binary {}: {}\n",
            exe.display(),
            match copy {
                Some(copy) => format!(
                    "not covered by the server's grants, so a copy ran from the server's \
                     private scratch directory ({}); no grant was added",
                    copy.display()
                ),
                None => "already covered by the server's grants; no grant was added".to_owned(),
            }
        ));
    }
    if let Some(grants) = grants {
        out.push_str("granted (the server's profile, which the probe ran under):\n");
        for line in grants.lines() {
            out.push_str(&format!("  {line}\n"));
        }
    }
    out.push_str(&format!(
        "identity: uid {} ({}), gid {}, HOME {}, cwd {}\n",
        report.uid,
        report.user.as_deref().unwrap_or("no name"),
        report.gid,
        report.home.as_deref().unwrap_or("unset"),
        report.cwd.as_deref().unwrap_or("unknown"),
    ));
    out.push_str("credential files:\n");
    for check in &report.credential_files {
        out.push_str(&format!("  {:9} {}\n", check.detail, check.path));
    }
    out.push_str(&format!(
        "secret-looking variables: {}\n",
        if report.secret_variables.is_empty() {
            "none".to_owned()
        } else {
            report.secret_variables.join(", ")
        }
    ));
    let agent = &report.ssh_agent;
    match &agent.socket {
        None => out.push_str("ssh agent: the host has none\n"),
        Some(socket) => out.push_str(&format!(
            "ssh agent: {socket}: {}{}\n",
            if agent.reachable {
                "REACHABLE"
            } else {
                "not reachable"
            },
            if agent.reachable {
                String::new()
            } else {
                format!(" ({})", agent.detail)
            }
        )),
    }
    out.push_str("tcp:\n");
    for reach in &report.connect {
        out.push_str(&format!(
            "  {}  {}\n",
            reach.address,
            if reach.reachable {
                "REACHABLE".to_owned()
            } else {
                format!("not reachable ({})", reach.detail)
            }
        ));
    }
    let processes = &report.processes;
    out.push_str(&format!(
        "processes: {} visible, {} (the host has {})\n",
        processes.visible,
        if processes.sees_host {
            "the host's"
        } else {
            "none of the host's (own pid namespace)"
        },
        processes.host
    ));
    out.push_str("writable places:\n");
    for check in &report.writable {
        let note = if check.granted {
            " (inside the grant, not counted)"
        } else {
            ""
        };
        let state = if check.ok {
            "WRITABLE".to_owned()
        } else {
            format!("not writable ({})", check.detail)
        };
        out.push_str(&format!("  {}  {state}{note}\n", check.path));
    }
    out
}
