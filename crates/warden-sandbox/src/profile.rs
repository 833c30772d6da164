//! What a confined server may touch: the [`Profile`] and its defaults.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use crate::SandboxError;

/// The uid a server runs as (inside and outside its user namespace) when Warden is root.
pub const SANDBOX_UID: u32 = 65534;
/// The gid a server runs as when Warden is root.
pub const SANDBOX_GID: u32 = 65534;

/// Variables taken from Warden's own environment; everything else is dropped.
///
/// `HOME` and `TMPDIR` are never taken from Warden: they point at the server's scratch
/// directory. Variables a server needs beyond these are named in its configuration and passed
/// as `extra` to [`scrubbed_env`].
pub const ENV_ALLOWLIST: [&str; 4] = ["PATH", "LANG", "TZ", "TERM"];

/// `PATH` for a server when Warden's own has no usable entry.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// System directories an interpreter needs to read (those that exist are granted).
const SYSTEM_READ: [&str; 9] = [
    "/usr",
    "/lib",
    "/lib64",
    "/lib32",
    "/libx32",
    "/bin",
    "/sbin",
    "/etc",
    // The CPU count (`sysconf(_SC_NPROCESSORS_ONLN)`, Node's `os.cpus()`).
    "/sys/devices/system/cpu",
];

/// System directories programs are executed from (those that exist are granted).
const SYSTEM_EXEC: [&str; 7] = [
    "/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin",
];

/// Whether the server may use the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Network {
    /// No network: a fresh network namespace (no interfaces but a downed loopback), and a
    /// seccomp rule that refuses every socket family but `AF_UNIX`.
    #[default]
    None,
    /// The host's network, unfiltered. An explicit opt-out, logged at `warn` each time a
    /// server is confined with it.
    Host,
}

/// Resource limits for the server and everything it starts.
///
/// `memory` and `processes` bind the whole sandbox through a cgroup leaf of its own where
/// the machine lets Warden create one (cgroup v2 where delegated, or a v1 hierarchy as
/// root); where it does not, they fall back to per-process rlimits (`RLIMIT_DATA` for
/// memory, `RLIMIT_NPROC` for processes), which a server that forks can multiply.
/// `disk` is the size of the scratch tmpfs and holds either way. `RLIMIT_CORE` is always 0
/// and is not configurable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most memory the sandbox may use, in bytes (default 2 GiB): anonymous memory,
    /// page cache and what it keeps in its scratch tmpfs, which is memory too. In a cgroup,
    /// the server is OOM-killed when it cannot stay below it; without one, every process
    /// gets `RLIMIT_DATA` of this size (its writable private mappings: heap, stacks,
    /// anonymous `mmap`; address space merely reserved, as V8 does, does not count), so an
    /// allocation beyond it fails.
    pub memory: u64,
    /// The size of the scratch tmpfs in bytes (default 1 GiB); also bounds its inodes (one
    /// per 16 KiB, at least 4096). Writes and `fallocate` beyond it fail with `ENOSPC`.
    pub disk: u64,
    /// Processes and threads (default 512): `pids.max` of the server's cgroup leaf, else
    /// `RLIMIT_NPROC` of the server's uid in its user namespace, which is per sandbox (and
    /// also counts the sandbox's waiter and init).
    pub processes: u64,
    /// `RLIMIT_AS` in bytes; `None` leaves it unlimited (the default). V8 reserves address
    /// space far beyond what it uses: Node 20 alone maps about 0.7 GiB, and one WebAssembly
    /// memory (Node's own `fetch` instantiates one) reserves about 10 GiB of guard regions,
    /// so any cap low enough to matter breaks Node. Memory is bounded by `memory` instead.
    pub address_space: Option<u64>,
    /// `RLIMIT_NOFILE`: open descriptors (default 4096, lowered to Warden's own hard limit
    /// when that is smaller).
    pub open_files: u64,
    /// `RLIMIT_CPU` in seconds; `None` (the default) leaves it unlimited, because the limit
    /// is cumulative over a process's life and a long-running server would be killed for
    /// having been useful for hours.
    pub cpu_seconds: Option<u64>,
    /// Whether `memory` and `processes` may use a cgroup (the default). `false` applies the
    /// per-process rlimits only, as on a machine without a usable cgroup.
    pub cgroup: bool,
}

impl Limits {
    /// Default for [`Limits::memory`]: 2 GiB.
    pub const DEFAULT_MEMORY: u64 = 2 << 30;
    /// Default for [`Limits::disk`]: 1 GiB.
    pub const DEFAULT_DISK: u64 = 1 << 30;
    /// Default for [`Limits::open_files`].
    pub const DEFAULT_OPEN_FILES: u64 = 4096;
    /// Default for [`Limits::processes`].
    pub const DEFAULT_PROCESSES: u64 = 512;
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory: Self::DEFAULT_MEMORY,
            disk: Self::DEFAULT_DISK,
            processes: Self::DEFAULT_PROCESSES,
            address_space: None,
            open_files: Self::DEFAULT_OPEN_FILES,
            cpu_seconds: None,
            cgroup: true,
        }
    }
}

/// What one confined server may touch.
///
/// Every path is resolved (symlinks, `..`) when the profile is applied, and must exist.
/// Landlock grants apply to the resolved directory and everything beneath it; a file may be
/// granted on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// Paths the server may read (files, and listing directories).
    pub read: Vec<PathBuf>,
    /// Paths the server may read, create, write, rename and remove in.
    pub write: Vec<PathBuf>,
    /// Paths the server may execute programs from. Executing also needs `read` for scripts
    /// (the interpreter reads them) but not for binaries.
    pub exec: Vec<PathBuf>,
    /// Network access.
    pub network: Network,
    /// The server's whole environment. Nothing is inherited from Warden: build it with
    /// [`scrubbed_env`] and [`Profile::set_env`].
    pub env: BTreeMap<String, String>,
    /// Resource limits.
    pub limits: Limits,
    /// The server's private scratch directory: its `HOME`, its `TMPDIR`, and its working
    /// directory unless the command sets one. Inside the sandbox this path is a fresh tmpfs
    /// of [`Limits::disk`] bytes that lives as long as the sandbox (nothing of the host
    /// directory is visible there). Its rights come from whether it is listed in `read`,
    /// `write` and `exec` ([`Profile::default_for`] lists it in `write` and `exec`); a path
    /// inside it cannot be granted separately.
    pub scratch: PathBuf,
    /// Files copied into the scratch tmpfs before the program starts: name in the scratch
    /// directory, and the host file (opened by Warden, read by the sandbox through that
    /// descriptor). Copies are mode 0700 and count towards [`Limits::disk`].
    pub scratch_files: Vec<(String, PathBuf)>,
}

impl Profile {
    /// The default profile for running `program` with `scratch` as its private directory.
    ///
    /// - `read`: the system directories an interpreter needs (`/usr`, `/lib*`, `/bin`,
    ///   `/sbin`, `/etc`, `/sys/devices/system/cpu`), the target of `/etc/resolv.conf`,
    ///   and the program's install prefix; nothing under the user's home unless the program
    ///   itself is installed there.
    /// - `exec`: the system binary and library directories, the program's prefix, scratch.
    /// - `write`: `scratch` only.
    /// - network `none`; `env` = `PATH`, `HOME` and `TMPDIR` (the latter two = `scratch`);
    ///   default [`Limits`].
    ///
    /// The program's prefix is the directory above `bin/` or `sbin/` when the program lives
    /// in one (so an interpreter's libraries come with it), else the program's directory;
    /// both the path as given (a virtualenv's `bin/python` is a symlink, and Python finds
    /// its packages from the unresolved path) and the resolved one are granted. A prefix
    /// that is `/`, or the home directory or one of its ancestors, is never granted: the
    /// program file alone is.
    ///
    /// `/etc` is granted whole. Landlock cannot carve one file out of a granted directory,
    /// so secrets there (`/etc/shadow`, host keys) stay protected by ordinary permissions:
    /// when Warden runs as root the server runs as uid 65534, which cannot read them.
    pub fn default_for(program: &Path, scratch: &Path) -> Result<Self, SandboxError> {
        let program = absolute(program)?;
        let resolved = canonical(&program)?;
        let scratch = canonical(&absolute(scratch)?)?;
        let homes = home_dirs();

        let mut prefixes = Vec::new();
        // The unresolved location's directory, resolved (a venv's bin/ is a real dir).
        if let Some(dir) = program.parent() {
            let dir = canonical(dir)?;
            prefixes.push(program_prefix(&dir, &resolved, &homes));
        }
        if let Some(dir) = resolved.parent() {
            prefixes.push(program_prefix(dir, &resolved, &homes));
        }

        let mut read = existing(&SYSTEM_READ);
        if let Ok(target) = std::fs::canonicalize("/etc/resolv.conf")
            && !target.starts_with("/etc")
        {
            read.push(target);
        }
        read.extend(prefixes.iter().cloned());

        let mut exec = existing(&SYSTEM_EXEC);
        exec.extend(prefixes);
        exec.push(scratch.clone());

        let mut profile = Self {
            read: dedup(read),
            write: vec![scratch.clone()],
            exec: dedup(exec),
            network: Network::None,
            env: BTreeMap::new(),
            limits: Limits::default(),
            scratch,
            scratch_files: Vec::new(),
        };
        profile.set_env(BTreeMap::from([(
            "PATH".to_owned(),
            DEFAULT_PATH.to_owned(),
        )]));
        Ok(profile)
    }

    /// Replaces the environment with `vars`, then points `HOME` and `TMPDIR` at the scratch
    /// directory unless `vars` names them explicitly.
    pub fn set_env(&mut self, vars: BTreeMap<String, String>) {
        self.env = vars;
        let scratch = self.scratch.to_string_lossy().into_owned();
        for name in ["HOME", "TMPDIR"] {
            self.env
                .entry(name.to_owned())
                .or_insert_with(|| scratch.clone());
        }
    }
}

/// Builds a server's environment from scratch: the [`ENV_ALLOWLIST`] variables taken from
/// `parent` (Warden's environment), then `extra` (the variables configured for this server),
/// which win on a clash.
///
/// `PATH` keeps only its absolute entries (an empty or relative entry would mean the working
/// directory); `HOME` and `TMPDIR` are not taken from `parent` (see [`Profile::set_env`]).
pub fn scrubbed_env<I>(parent: I, extra: &BTreeMap<String, String>) -> BTreeMap<String, String>
where
    I: IntoIterator<Item = (String, String)>,
{
    let mut env = BTreeMap::new();
    for (name, value) in parent {
        if !ENV_ALLOWLIST.contains(&name.as_str()) {
            continue;
        }
        if name == "PATH" {
            let kept: Vec<&str> = value
                .split(':')
                .filter(|entry| entry.starts_with('/'))
                .collect();
            if !kept.is_empty() {
                env.insert(name, kept.join(":"));
            }
            continue;
        }
        env.insert(name, value);
    }
    env.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

/// Chooses what to grant for a program living in `dir`.
fn program_prefix(dir: &Path, program: &Path, homes: &[PathBuf]) -> PathBuf {
    let in_bin = matches!(
        dir.file_name().and_then(|n| n.to_str()),
        Some("bin" | "sbin")
    );
    let candidates = if in_bin {
        vec![dir.parent().map(Path::to_path_buf), Some(dir.to_path_buf())]
    } else {
        vec![Some(dir.to_path_buf())]
    };
    for candidate in candidates.into_iter().flatten() {
        let too_broad =
            candidate.parent().is_none() || homes.iter().any(|home| home.starts_with(&candidate));
        if !too_broad {
            return candidate;
        }
    }
    program.to_path_buf()
}

/// The user's home directories, resolved: `$HOME`, and `/root` for root. No grant made
/// automatically may cover one of them whole.
pub fn home_dirs() -> Vec<PathBuf> {
    let mut homes: Vec<PathBuf> = std::env::var_os("HOME")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    homes.push(PathBuf::from("/root"));
    homes
        .into_iter()
        .filter(|home| home.is_absolute())
        .map(|home| std::fs::canonicalize(&home).unwrap_or(home))
        .collect()
}

fn existing(paths: &[&str]) -> Vec<PathBuf> {
    paths
        .iter()
        .filter_map(|path| std::fs::canonicalize(path).ok())
        .collect()
}

fn dedup(paths: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut seen = Vec::with_capacity(paths.len());
    for path in paths {
        if !seen.contains(&path) {
            seen.push(path);
        }
    }
    seen
}

/// Refuses relative paths: a profile must not depend on Warden's working directory.
pub(crate) fn absolute(path: &Path) -> Result<PathBuf, SandboxError> {
    if !path.is_absolute() {
        return Err(SandboxError::Path {
            path: path.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "paths in a sandbox profile must be absolute",
            ),
        });
    }
    Ok(path.to_path_buf())
}

/// Resolves symlinks and `..`; a path that does not exist is an error naming it.
pub(crate) fn canonical(path: &Path) -> Result<PathBuf, SandboxError> {
    std::fs::canonicalize(path).map_err(|source| SandboxError::Path {
        path: path.to_path_buf(),
        source,
    })
}

/// Whether `path` (resolved) is `root` or lies beneath it.
pub(crate) fn is_within(path: &Path, root: &Path) -> bool {
    path.starts_with(root)
}

/// Checks an environment for what `execve` cannot carry.
pub(crate) fn check_env(env: &BTreeMap<String, String>) -> Result<(), SandboxError> {
    for (name, value) in env {
        if name.is_empty() || name.contains('=') || name.contains('\0') || value.contains('\0') {
            return Err(SandboxError::InvalidProfile {
                reason: format!("environment variable {name:?} cannot be passed to a program"),
            });
        }
    }
    Ok(())
}

/// Refuses a scratch name that could escape its base directory.
pub(crate) fn safe_component(name: &str) -> Option<OsString> {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut components = Path::new(&cleaned).components();
    match (components.next(), components.next()) {
        (Some(Component::Normal(part)), None) => Some(part.to_os_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrubbed_env_keeps_the_allowlist_and_the_named_variables_only() {
        let parent = [
            ("PATH", "/usr/bin::relative/bin:/bin"),
            ("LANG", "C.UTF-8"),
            ("HOME", "/home/dana"),
            ("TMPDIR", "/tmp/dana"),
            ("GITHUB_TOKEN", "ghp_secret"),
            ("SSH_AUTH_SOCK", "/run/user/1000/ssh"),
            ("TERM", "xterm"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let extra = BTreeMap::from([
            ("API_BASE".to_owned(), "http://localhost".to_owned()),
            ("LANG".to_owned(), "en_GB.UTF-8".to_owned()),
        ]);
        let env = scrubbed_env(parent, &extra);
        let names: Vec<&str> = env.keys().map(String::as_str).collect();
        assert_eq!(names, ["API_BASE", "LANG", "PATH", "TERM"]);
        assert_eq!(env["PATH"], "/usr/bin:/bin");
        assert_eq!(env["LANG"], "en_GB.UTF-8", "the server's own variables win");
    }

    #[test]
    fn a_path_with_only_relative_entries_is_dropped() {
        let env = scrubbed_env([("PATH".to_owned(), ".:bin:".to_owned())], &BTreeMap::new());
        assert!(!env.contains_key("PATH"));
    }

    #[test]
    fn default_profile_grants_system_dirs_and_scratch_but_not_home() {
        let scratch = tempfile::tempdir().unwrap();
        let profile = Profile::default_for(Path::new("/bin/sh"), scratch.path()).unwrap();
        let scratch = std::fs::canonicalize(scratch.path()).unwrap();
        assert!(profile.read.contains(&PathBuf::from("/usr")));
        assert!(profile.read.contains(&PathBuf::from("/etc")));
        assert_eq!(profile.write, std::slice::from_ref(&scratch));
        assert!(profile.exec.contains(&scratch));
        assert_eq!(profile.env["HOME"], scratch.to_str().unwrap());
        assert_eq!(profile.env["TMPDIR"], scratch.to_str().unwrap());
        assert_eq!(profile.network, Network::None);
        for home in home_dirs() {
            for path in profile.read.iter().chain(&profile.exec) {
                assert!(
                    !path.starts_with(&home) || path.starts_with(&scratch),
                    "{} is under {}",
                    path.display(),
                    home.display()
                );
            }
        }
    }

    #[test]
    fn a_program_in_home_is_granted_alone_not_the_home() {
        let home = home_dirs();
        let dir = Path::new("/root");
        let program = Path::new("/root/server");
        assert_eq!(program_prefix(dir, program, &home), program);
        // In a bin/ directory, the prefix above it is granted.
        let bin = Path::new("/opt/node/bin");
        assert_eq!(
            program_prefix(bin, &bin.join("node"), &home),
            Path::new("/opt/node")
        );
        // Never `/`.
        assert_eq!(
            program_prefix(Path::new("/"), Path::new("/init"), &home),
            Path::new("/init")
        );
    }

    #[test]
    fn paths_must_be_absolute_and_exist() {
        let err = absolute(Path::new("relative/dir")).unwrap_err();
        assert!(err.to_string().contains("relative/dir"), "{err}");
        let err = canonical(Path::new("/nonexistent/warden-test")).unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent/warden-test"),
            "{err}"
        );
    }

    #[test]
    fn scratch_names_cannot_escape() {
        assert_eq!(safe_component("git").unwrap(), "git");
        assert_eq!(safe_component("a/b").unwrap(), "a_b");
        assert!(safe_component("..").is_none());
        assert!(safe_component("").is_none());
    }
}
