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
    /// Egress through a proxy only: a fresh network namespace whose loopback is up and
    /// holds one listener, `127.0.0.1:port`, created inside the namespace before the server
    /// starts and handed to Warden ([`crate::Confinement::take_proxy_listener`]); nothing
    /// else is routed, so a connection the server opens anywhere else fails. The server's
    /// environment gets `HTTP_PROXY`, `HTTPS_PROXY` (and their lower-case forms) pointing at
    /// the listener, `NO_PROXY` for loopback names, and `NODE_USE_ENV_PROXY=1`.
    /// Sockets are not filtered by family (the namespace is the boundary).
    Proxy {
        /// The listener's port inside the namespace (the namespace is new, so it is free).
        port: u16,
    },
}

impl Network {
    /// The default port of the proxy listener inside a sandbox.
    pub const DEFAULT_PROXY_PORT: u16 = 3128;

    /// The variables that point a server at the proxy listener on `port`.
    pub fn proxy_env(port: u16) -> Vec<(&'static str, String)> {
        let url = format!("http://127.0.0.1:{port}");
        let local = "localhost,127.0.0.1,::1".to_owned();
        vec![
            ("HTTP_PROXY", url.clone()),
            ("HTTPS_PROXY", url.clone()),
            ("http_proxy", url.clone()),
            ("https_proxy", url),
            ("NO_PROXY", local.clone()),
            ("no_proxy", local),
            ("NODE_USE_ENV_PROXY", "1".to_owned()),
        ]
    }
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
    /// Files the caller hashed before the start (a pinned program, interpreter or script):
    /// each is checked again inside the sandbox, as the last step before the program is
    /// executed, and the start fails with [`SandboxError::PinnedFileChanged`] when the file
    /// the server would find there is no longer the one that was hashed. Empty by default.
    pub pinned: Vec<PinnedFile>,
    /// Files copied into the scratch tmpfs before the program starts: name in the scratch
    /// directory, and the host file (opened by Warden, read by the sandbox through that
    /// descriptor). Copies are mode 0700 and count towards [`Limits::disk`].
    pub scratch_files: Vec<(String, PathBuf)>,
}

/// A file whose identity was recorded when its bytes were hashed, to be checked again
/// right before the server is executed (see [`Profile::pinned`]).
///
/// The identity is what `fstat` gave on the descriptor the bytes were read from: device,
/// inode, size and change time. A file replaced by another (a rename over it, a new
/// symlink) has another device or inode; one written in place has a new change time, which
/// no unprivileged process can set back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedFile {
    /// Where the server will find the file, as absolute paths inside the sandbox (the same
    /// paths as outside). The first that names a regular file is checked; with
    /// [`search`](PinnedFile::search) only one with an execute bit counts (a `PATH` search,
    /// as `env NAME` does it). When none exists the entry is skipped: nothing can be run
    /// from a path the sandbox does not show.
    pub paths: Vec<PathBuf>,
    /// Whether `paths` are the candidates of a `PATH` search.
    pub search: bool,
    /// `st_dev` of the hashed file.
    pub dev: u64,
    /// `st_ino` of the hashed file.
    pub ino: u64,
    /// `st_size` of the hashed file.
    pub size: u64,
    /// `st_ctime` (seconds) of the hashed file.
    pub ctime: i64,
    /// `st_ctime_nsec` of the hashed file.
    pub ctime_nsec: i64,
}

impl Profile {
    /// The default profile for running `program` with `scratch` as its private directory.
    ///
    /// - `read`: the system directories an interpreter needs ([`system_read_dirs`]: `/usr`,
    ///   `/lib*`, `/bin`, `/sbin`, `/etc`, `/sys/devices/system/cpu`, the target of
    ///   `/etc/resolv.conf`), and the program's installation ([`program_grants`]); nothing
    ///   under the user's home unless the program itself is installed there.
    /// - `exec`: the system binary and library directories, the program's installation,
    ///   scratch.
    /// - `write`: `scratch` only.
    /// - network `none`; `env` = `PATH`, `HOME` and `TMPDIR` (the latter two = `scratch`);
    ///   default [`Limits`].
    ///
    /// `/etc` is granted whole. Landlock cannot carve one file out of a granted directory,
    /// so secrets there (`/etc/shadow`, host keys) stay protected by ordinary permissions:
    /// when Warden runs as root the server runs as uid 65534, which cannot read them.
    pub fn default_for(program: &Path, scratch: &Path) -> Result<Self, SandboxError> {
        let prefixes = program_grants(program)?;
        let scratch = canonical(&absolute(scratch)?)?;

        let mut read = system_read_dirs();
        read.extend(prefixes.iter().cloned());

        let mut exec = system_exec_dirs();
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
            pinned: Vec::new(),
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

/// The system directories every confined server may read (those that exist, resolved),
/// and the target of `/etc/resolv.conf` when it lies outside `/etc`.
pub fn system_read_dirs() -> Vec<PathBuf> {
    let mut read = existing(&SYSTEM_READ);
    if let Ok(target) = std::fs::canonicalize("/etc/resolv.conf")
        && !target.starts_with("/etc")
    {
        read.push(target);
    }
    read
}

/// The system directories every confined server may execute from (those that exist).
pub fn system_exec_dirs() -> Vec<PathBuf> {
    existing(&SYSTEM_EXEC)
}

/// What to grant (read and execute) so that `program` (absolute) can run: its
/// installation, judged both where it is named (its directory resolved: a virtualenv's
/// `bin/python` is a symlink, and Python finds its packages from the unresolved path) and
/// where it resolves to.
///
/// The installation is the directory above `bin/` or `sbin/` when the program lives in
/// one (so an interpreter's libraries come with it), else the program's directory. Never
/// granted whole: `/`, `/tmp`, `/var/tmp`, a home directory or one of its ancestors. Under
/// a home directory only a directory that is clearly one program's installation is
/// granted whole: a virtualenv (`pyvenv.cfg`: a `uv tool` or `pipx` venv, a project's
/// `.venv`), or, at least two levels down and not holding data or settings (`~/.config`,
/// `~/.cache`, `~/.local/share`, `~/.local/state`), a directory with both `bin/` and `lib/`
/// (`~/.nvm/versions/node/v20`, `~/.pyenv/versions/3.12.4`, a rustup toolchain, uv's
/// Pythons) or a `package.json`. Otherwise only the program file is granted, plus, for a
/// program in `~/.X/bin/` (`~/.local/bin`, a conda base), that layout's library directory
/// `~/.X/lib`: never all of `~/.local` (shell history, keyrings) or `~/.cargo`
/// (`credentials.toml`).
pub fn program_grants(program: &Path) -> Result<Vec<PathBuf>, SandboxError> {
    let program = absolute(program)?;
    let resolved = canonical(&program)?;
    let homes = home_dirs();
    let mut grants = Vec::new();
    if let Some(dir) = program.parent() {
        grants.extend(install_grants(&canonical(dir)?, &resolved, &homes));
    }
    if let Some(dir) = resolved.parent() {
        grants.extend(install_grants(dir, &resolved, &homes));
    }
    Ok(dedup(grants))
}

/// Directories under a home that hold data or settings: never an installation, nor is any
/// directory above them.
const HOME_DATA: [&str; 6] = [
    ".config",
    ".cache",
    ".local/share",
    ".local/state",
    ".local/lib",
    ".local/bin",
];

/// What to grant for a program (resolved: `program`) that lives in `dir`; see
/// [`program_grants`].
pub(crate) fn install_grants(dir: &Path, program: &Path, homes: &[PathBuf]) -> Vec<PathBuf> {
    let in_bin = matches!(
        dir.file_name().and_then(|n| n.to_str()),
        Some("bin" | "sbin")
    );
    let prefix = if in_bin { dir.parent() } else { Some(dir) };
    let candidates = if in_bin {
        vec![prefix, Some(dir)]
    } else {
        vec![Some(dir)]
    };
    for candidate in candidates.into_iter().flatten() {
        if too_broad(candidate, homes) {
            continue;
        }
        match home_of(candidate, homes) {
            None => return vec![candidate.to_path_buf()],
            Some(home) if is_installation(candidate, home) => return vec![candidate.to_path_buf()],
            Some(_) => {}
        }
    }
    let mut grants = vec![program.to_path_buf()];
    // `~/.X/bin/NAME`: the layout's libraries (`~/.local/lib`: Python's user site and
    // npm's global packages; a conda base's `lib`), not the rest of `~/.X`.
    if in_bin
        && let Some(prefix) = prefix
        && let Some(home) = home_of(prefix, homes)
        && prefix.parent() == Some(home)
        && prefix.join("lib").is_dir()
    {
        grants.push(prefix.join("lib"));
    }
    grants
}

/// Never granted whole: `/`, the shared temporary directories, a home directory or one of
/// its ancestors.
fn too_broad(dir: &Path, homes: &[PathBuf]) -> bool {
    dir.parent().is_none()
        || dir == Path::new("/tmp")
        || dir == Path::new("/var/tmp")
        || homes.iter().any(|home| home.starts_with(dir))
}

/// The home directory `dir` lies strictly inside, if any.
fn home_of<'a>(dir: &Path, homes: &'a [PathBuf]) -> Option<&'a Path> {
    homes
        .iter()
        .find(|home| dir.starts_with(home) && dir != home.as_path())
        .map(PathBuf::as_path)
}

/// Whether `dir`, strictly inside `home`, is clearly one program's installation; see
/// [`program_grants`].
fn is_installation(dir: &Path, home: &Path) -> bool {
    if dir.join("pyvenv.cfg").is_file() {
        return true;
    }
    let named_bin = matches!(
        dir.file_name().and_then(|n| n.to_str()),
        Some("bin" | "sbin")
    );
    let depth = dir
        .strip_prefix(home)
        .map_or(0, |rest| rest.components().count());
    let holds_data = HOME_DATA
        .iter()
        .any(|data| home.join(data).starts_with(dir));
    if named_bin || depth < 2 || holds_data {
        return false;
    }
    (dir.join("bin").is_dir() && dir.join("lib").is_dir()) || dir.join("package.json").is_file()
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
        let home = vec![PathBuf::from("/root"), PathBuf::from("/home/dana")];
        let dir = Path::new("/root");
        let program = Path::new("/root/server");
        assert_eq!(install_grants(dir, program, &home), [program]);
        // In a bin/ directory, the prefix above it is granted.
        let bin = Path::new("/opt/node/bin");
        assert_eq!(
            install_grants(bin, &bin.join("node"), &home),
            [Path::new("/opt/node")]
        );
        // Never `/`, nor /tmp.
        assert_eq!(
            install_grants(Path::new("/"), Path::new("/init"), &home),
            [Path::new("/init")]
        );
        assert_eq!(
            install_grants(Path::new("/tmp"), Path::new("/tmp/x"), &home),
            [Path::new("/tmp/x")]
        );
        // `~/bin/x`: neither the home nor `~/bin`.
        assert_eq!(
            install_grants(
                Path::new("/home/dana/bin"),
                Path::new("/home/dana/bin/x"),
                &home
            ),
            [Path::new("/home/dana/bin/x")]
        );
    }

    /// Issue 10, section 5: the `uv tool`, `pipx` and `cargo install` layouts under a home
    /// directory grant the tool, never `~/.local` or `~/.cargo`.
    #[test]
    fn home_layouts_grant_the_tool_not_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(dir.path()).unwrap();
        let homes = vec![home.clone()];
        let mkdir = |rel: &str| {
            std::fs::create_dir_all(home.join(rel)).unwrap();
            home.join(rel)
        };
        let touch = |rel: &str| {
            std::fs::write(home.join(rel), "").unwrap();
            home.join(rel)
        };
        mkdir(".local/bin");
        mkdir(".local/lib/python3.12/site-packages");
        mkdir(".local/share/fish");
        touch(".local/share/fish/fish_history");
        mkdir(".cargo/bin");
        touch(".cargo/credentials.toml");
        // uv: ~/.local/bin/NAME -> ~/.local/share/uv/tools/NAME/bin/NAME, a venv.
        let tool = mkdir(".local/share/uv/tools/mcp-x");
        mkdir(".local/share/uv/tools/mcp-x/bin");
        touch(".local/share/uv/tools/mcp-x/pyvenv.cfg");
        let entry = touch(".local/share/uv/tools/mcp-x/bin/mcp-x");
        // pipx: ~/.local/pipx/venvs/NAME.
        let pipx = mkdir(".local/pipx/venvs/mcp-y/bin");
        touch(".local/pipx/venvs/mcp-y/pyvenv.cfg");
        let pipx_entry = touch(".local/pipx/venvs/mcp-y/bin/mcp-y");
        // uv's own Python: an installation with bin/ and lib/.
        let python = mkdir(".local/share/uv/python/cpython-3.12.4-linux/bin");
        mkdir(".local/share/uv/python/cpython-3.12.4-linux/lib");
        let cargo_tool = touch(".cargo/bin/mcp-z");

        let local_bin = home.join(".local/bin");
        // As named (~/.local/bin): the program and the layout's libraries, not ~/.local.
        let named = install_grants(&local_bin, &entry, &homes);
        assert_eq!(named, [entry.clone(), home.join(".local/lib")]);
        // As resolved: the tool's own venv.
        assert_eq!(
            install_grants(entry.parent().unwrap(), &entry, &homes),
            std::slice::from_ref(&tool)
        );
        assert_eq!(
            install_grants(pipx_entry.parent().unwrap(), &pipx_entry, &homes),
            [pipx.parent().unwrap().to_path_buf()]
        );
        assert_eq!(
            install_grants(&python, &python.join("python3.12"), &homes),
            [python.parent().unwrap().to_path_buf()]
        );
        // ~/.cargo/bin/NAME: the program alone.
        assert_eq!(
            install_grants(cargo_tool.parent().unwrap(), &cargo_tool, &homes),
            std::slice::from_ref(&cargo_tool)
        );
        // Nothing granted reaches the history or the credentials.
        for grants in [
            named,
            install_grants(cargo_tool.parent().unwrap(), &cargo_tool, &homes),
        ] {
            for grant in grants {
                for secret in [
                    home.join(".local/share/fish/fish_history"),
                    home.join(".cargo/credentials.toml"),
                ] {
                    assert!(!secret.starts_with(&grant), "{grant:?} covers {secret:?}");
                }
            }
        }
        // A directory holding data is not an installation even with bin/ and lib/.
        mkdir(".local/share/bin");
        mkdir(".local/share/lib");
        assert!(!is_installation(&home.join(".local/share"), &home));
        assert!(!is_installation(&home.join(".local"), &home));
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
