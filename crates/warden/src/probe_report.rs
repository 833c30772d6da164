//! `warden __probe-report`: the privilege probe itself, the half of `warden probe` that runs
//! *inside* a server's confinement (see `commands::probe` for the host half).
//!
//! It speaks no MCP: it reads one JSON [`ProbeInput`] from its `--input` argument (never
//! from the environment, which confinement scrubs), checks what it can reach, prints one
//! JSON [`ProbeReport`] on stdout and exits. Every path and address it tries comes from the
//! host side, because inside a sandbox `HOME` is a private scratch directory and the real
//! user's files are not even named.
//!
//! It only looks: files are opened for reading and closed, sockets are connected and closed,
//! and the single write it makes in each candidate directory is a uniquely named file that is
//! removed at once. Secret-looking variables are reported by name, never by value.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What the host side asks the probe to try.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ProbeInput {
    /// Credential files (absolute, computed from the real user's home).
    pub credential_paths: Vec<String>,
    /// `host:port` addresses to connect to over TCP.
    pub connect: Vec<String>,
    /// How long each TCP connection may take, in milliseconds.
    pub connect_timeout_ms: u64,
    /// The host's `SSH_AUTH_SOCK`, if set.
    pub ssh_auth_sock: Option<String>,
    /// Directories to try creating a file in.
    pub writable_candidates: Vec<String>,
    /// How many processes the host's `/proc` lists.
    pub host_processes: usize,
    /// Warden's pid on the host: when the probe sees it, it sees the host's processes.
    pub warden_pid: u32,
}

/// What the probe found. Field names are part of `warden probe --json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ProbeReport {
    /// The probe's uid, gid and user name (from its `/etc/passwd`).
    pub uid: u32,
    /// The probe's gid.
    pub gid: u32,
    /// The user name of `uid`, when `/etc/passwd` names it.
    pub user: Option<String>,
    /// The probe's `HOME`.
    pub home: Option<String>,
    /// The probe's working directory.
    pub cwd: Option<String>,
    /// Each credential path and what happened when it was opened.
    pub credential_files: Vec<PathCheck>,
    /// Names (never values) of variables that look like secrets.
    pub secret_variables: Vec<String>,
    /// Whether the host's SSH agent socket could be connected to.
    pub ssh_agent: SshAgent,
    /// Each TCP address tried.
    pub connect: Vec<Reach>,
    /// Processes the probe can see.
    pub processes: Processes,
    /// Each writable-place candidate.
    pub writable: Vec<PathCheck>,
}

/// One path and the outcome of trying it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PathCheck {
    /// The path tried.
    pub path: String,
    /// `true` when it could be read (credential files) or written (writable places).
    pub ok: bool,
    /// `readable`, `writable`, `absent`, `denied`, or another error in words.
    pub detail: String,
    /// Host side only: the path is inside the server's write grants (not counted).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub granted: bool,
}

/// The SSH agent check.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SshAgent {
    /// The host's socket path (`None` when the host has no agent).
    pub socket: Option<String>,
    /// Whether `SSH_AUTH_SOCK` is set inside.
    pub variable_set: bool,
    /// Whether the socket accepted a connection.
    pub reachable: bool,
    /// What happened.
    pub detail: String,
}

/// One TCP address and whether it could be reached.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Reach {
    /// `host:port` as given.
    pub address: String,
    /// Whether a connection was established.
    pub reachable: bool,
    /// `connected`, or the error in words.
    pub detail: String,
}

/// Process visibility.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Processes {
    /// Numeric entries in the probe's `/proc`.
    pub visible: usize,
    /// Numeric entries in the host's `/proc` (from the host side).
    pub host: usize,
    /// Whether Warden's own process is among them (the host's processes are visible).
    pub sees_host: bool,
}

/// Runs the probe: parses `input`, prints the report, exits 0 (2 on unreadable input).
pub fn run(input: &str) -> ExitCode {
    let input: ProbeInput = match serde_json::from_str(input) {
        Ok(input) => input,
        Err(error) => {
            eprintln!("warden __probe-report: bad --input: {error}");
            return ExitCode::from(2);
        }
    };
    let report = probe(&input);
    match serde_json::to_string(&report) {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("warden __probe-report: {error}");
            ExitCode::from(1)
        }
    }
}

/// Checks everything `input` names.
pub fn probe(input: &ProbeInput) -> ProbeReport {
    // SAFETY: getuid and getgid cannot fail and touch no memory.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let timeout = Duration::from_millis(input.connect_timeout_ms.max(1));
    ProbeReport {
        uid,
        gid,
        user: user_name(uid),
        home: std::env::var("HOME").ok(),
        cwd: std::env::current_dir()
            .ok()
            .map(|dir| dir.display().to_string()),
        credential_files: input
            .credential_paths
            .iter()
            .map(|path| check_readable(path))
            .collect(),
        secret_variables: std::env::vars_os()
            .filter_map(|(name, _)| name.into_string().ok())
            .filter(|name| looks_secret(name))
            .collect(),
        ssh_agent: ssh_agent(input.ssh_auth_sock.as_deref()),
        connect: input
            .connect
            .iter()
            .map(|address| connect(address, timeout))
            .collect(),
        processes: Processes {
            visible: count_pids(),
            host: input.host_processes,
            sees_host: input.warden_pid > 1
                && Path::new(&format!("/proc/{}", input.warden_pid)).exists(),
        },
        writable: input
            .writable_candidates
            .iter()
            .map(|dir| check_writable(dir))
            .collect(),
    }
}

/// The name `/etc/passwd` gives `uid`.
fn user_name(uid: u32) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let id: u32 = fields.nth(1)?.parse().ok()?;
        (id == uid).then(|| name.to_owned())
    })
}

/// Words that make a variable name look like it holds a secret.
const SECRET_WORDS: [&str; 9] = [
    "TOKEN",
    "SECRET",
    "KEY",
    "PASSWORD",
    "PASS",
    "CREDENTIAL",
    "AUTH",
    "SESSION",
    "COOKIE",
];

/// Common spellings that glue a secret word to another (`PGPASSWORD`, `APIKEY`).
const SECRET_COMPOUNDS: [&str; 10] = [
    "PASSWD",
    "PGPASS",
    "PGPASSWORD",
    "APIKEY",
    "PRIVATEKEY",
    "ACCESSKEY",
    "SECRETKEY",
    "AUTHTOKEN",
    "ACCESSTOKEN",
    "SESSIONID",
];

/// Whether a variable name looks like a secret's: one of its words (split at anything but
/// letters and digits, case-insensitive) is a secret word, its plural, or a known compound.
pub fn looks_secret(name: &str) -> bool {
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .map(str::to_ascii_uppercase)
        .any(|word| {
            SECRET_COMPOUNDS.contains(&word.as_str())
                || SECRET_WORDS.iter().any(|secret| {
                    word == *secret || word.strip_suffix('S').is_some_and(|w| w == *secret)
                })
        })
}

fn describe(error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::NotFound => "absent".to_owned(),
        std::io::ErrorKind::PermissionDenied => "denied".to_owned(),
        _ => error.to_string(),
    }
}

/// Opens `path` and reads one byte (or lists it, for a directory).
fn check_readable(path: &str) -> PathCheck {
    let outcome = if Path::new(path).is_dir() {
        std::fs::read_dir(path).map(|_| ())
    } else {
        std::fs::File::open(path).and_then(|mut file| {
            let mut byte = [0u8; 1];
            file.read(&mut byte).map(|_| ())
        })
    };
    let (ok, detail) = match outcome {
        Ok(()) => (true, "readable".to_owned()),
        Err(error) => (false, describe(&error)),
    };
    PathCheck {
        path: path.to_owned(),
        ok,
        detail,
        granted: false,
    }
}

/// Creates a uniquely named file in `dir` and removes it again.
fn check_writable(dir: &str) -> PathCheck {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let file = Path::new(dir).join(format!(".warden-probe-{}-{nanos}", std::process::id()));
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&file);
    let (ok, detail) = match created {
        Ok(handle) => {
            drop(handle);
            match std::fs::remove_file(&file) {
                Ok(()) => (true, "writable".to_owned()),
                Err(error) => (
                    true,
                    format!("writable (and the test file could not be removed: {error})"),
                ),
            }
        }
        Err(error) => (false, describe(&error)),
    };
    PathCheck {
        path: dir.to_owned(),
        ok,
        detail,
        granted: false,
    }
}

fn ssh_agent(socket: Option<&str>) -> SshAgent {
    let variable_set = std::env::var_os("SSH_AUTH_SOCK").is_some();
    let Some(socket) = socket else {
        return SshAgent {
            socket: None,
            variable_set,
            reachable: false,
            detail: "the host has no SSH agent".to_owned(),
        };
    };
    let (reachable, detail) = match std::os::unix::net::UnixStream::connect(socket) {
        Ok(_) => (true, "connected".to_owned()),
        Err(error) => (false, describe(&error)),
    };
    SshAgent {
        socket: Some(socket.to_owned()),
        variable_set,
        reachable,
        detail,
    }
}

fn connect(address: &str, timeout: Duration) -> Reach {
    use std::net::ToSocketAddrs;
    let outcome = address
        .to_socket_addrs()
        .and_then(|mut addrs| {
            addrs
                .next()
                .ok_or_else(|| std::io::Error::other("the address resolves to nothing"))
        })
        .and_then(|addr| std::net::TcpStream::connect_timeout(&addr, timeout));
    let (reachable, detail) = match outcome {
        Ok(_) => (true, "connected".to_owned()),
        Err(error) if error.kind() == std::io::ErrorKind::PermissionDenied => {
            (false, "denied (no network)".to_owned())
        }
        Err(error) => (false, error.to_string()),
    };
    Reach {
        address: address.to_owned(),
        reachable,
        detail,
    }
}

/// Numeric entries in `/proc`.
pub fn count_pids() -> usize {
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .flatten()
                .filter(|entry| {
                    entry
                        .file_name()
                        .to_str()
                        .is_some_and(|name| name.bytes().all(|b| b.is_ascii_digit()))
                })
                .count()
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_looking_names() {
        for name in [
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "OPENAI_API_KEY",
            "PGPASSWORD",
            "PGPASS",
            "NPM_TOKEN",
            "db_password",
            "SSH_AUTH_SOCK",
            "SESSION_COOKIE",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ] {
            assert!(looks_secret(name), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "LANG",
            "MONKEY_BUSINESS",
            "COMPASS",
            "AUTHOR",
        ] {
            assert!(!looks_secret(name), "{name}");
        }
    }

    #[test]
    fn a_writable_check_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let check = check_writable(dir.path().to_str().unwrap());
        assert!(check.ok, "{check:?}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let missing = check_readable(dir.path().join("nope").to_str().unwrap());
        assert_eq!(missing.detail, "absent");
    }
}
