//! Packages installed and pinned by Warden: a server written as `npx -y PKG[@VERSION]` or
//! `uvx PKG[==VERSION]` (also `uv tool run`, `pipx run`) is not left to download and run
//! whatever the registry serves at each start. Warden installs the package once, outside
//! the server's sandbox but confined itself ([`install`]), into its own directory under
//! the package cache, records the resolved version and the hashes of the lockfile and of
//! the installed tree ([`warden_store::packages::PackagePin`]), and every later start runs
//! the installed entry point ([`Entry`]) under the server's own confinement (no network
//! unless it has an allowlist), after checking that nothing installed changed
//! ([`Packages::verify`]). `warden update SERVER` installs again and shows the difference
//! before the pin moves (decision 0037).

pub mod gc;
pub mod in_use;
pub mod install;
pub mod lock;
pub mod spec;
pub mod tree;

use std::collections::BTreeMap;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use warden_mcp::LaunchRequest;
use warden_store::packages::PackagePin;

pub use in_use::InUse;
pub use install::{ConfinedRunner, Runner, Step};
pub use lock::{InstallLock, LOCK_WAIT};
pub use spec::{Ecosystem, PackageSpec, parse};
pub use tree::Manifest;

/// How long one install step may run.
pub const STEP_LIMIT: Duration = Duration::from_secs(600);

/// Most bytes of an installed package's `package.json` read (its `bin` and `version`).
pub const MAX_PACKAGE_JSON: u64 = 1024 * 1024;

/// The lockfile of an npm install (written by npm).
pub const NPM_LOCK: &str = "package-lock.json";
/// The lockfile of a PyPI install (written by Warden: `name==version --hash=sha256:…`).
pub const PYPI_LOCK: &str = "requirements.lock";

/// What went wrong with a package.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    /// A file operation failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// On what.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// An install step failed.
    #[error("installing the package failed at `{step}`: {detail}")]
    Install {
        /// The step.
        step: String,
        /// What happened.
        detail: String,
    },
    /// The installed package is not what a server can run.
    #[error("package {package}: {reason}")]
    Invalid {
        /// The package.
        package: String,
        /// What is wrong.
        reason: String,
    },
    /// The package directory could be changed by someone other than the user.
    #[error(
        "the package directory {} is not safe to run from: {reason}; it must be owned by you \
         and not writable by its group or others (`warden update SERVER` installs it again)",
        path.display()
    )]
    Unsafe {
        /// The installation directory.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The installed tree or its lockfile changed since it was pinned.
    #[error(
        "the installed package {package} changed since it was pinned:\n{}\n  \
         `warden update {server}` installs it again and shows what the registry serves",
        lines.iter().map(|l| format!("  - {l}")).collect::<Vec<_>>().join("\n")
    )]
    Changed {
        /// The server.
        server: String,
        /// `name@version`.
        package: String,
        /// What changed.
        lines: Vec<String>,
    },
    /// Another process held the server's install lock for longer than the wait.
    #[error(
        "server `{server}`: another install of its package did not finish within {} (the \
         lock {} is held by {holder}); try again once it is done",
        lock::duration_text(*waited),
        path.display()
    )]
    LockTimeout {
        /// The server.
        server: String,
        /// Who holds the lock, as it described itself.
        holder: String,
        /// How long was waited.
        waited: Duration,
        /// The lock file.
        path: PathBuf,
    },
    /// An install a running server holds ([`in_use`]) is not removed.
    #[error(
        "{} is in use by a running server: it is left for a later `warden packages gc`",
        path.display()
    )]
    InUse {
        /// The installation directory.
        path: PathBuf,
    },
    /// A tree over a limit.
    #[error("the package directory {} is too large: {limit}", path.display())]
    TooLarge {
        /// The installation directory.
        path: PathBuf,
        /// Which limit.
        limit: String,
    },
}

impl PackageError {
    pub(crate) fn io(action: &'static str, path: &Path, source: std::io::Error) -> Self {
        PackageError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// A fresh install: its pin, and the manifest the pin's hash was taken of.
#[derive(Debug, Clone)]
pub struct Installed {
    /// What to record.
    pub pin: PackagePin,
    /// Every installed file.
    pub manifest: Manifest,
}

/// How the installed package is run: the program, the arguments before the server's own,
/// and variables added to its environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The program (`node`, or the console script's absolute path).
    pub command: String,
    /// Arguments placed before the server's own (npm: the `bin` script's absolute path).
    pub args: Vec<String>,
    /// Added to the server's environment.
    pub env: BTreeMap<String, String>,
}

impl Entry {
    /// `request` (a server written with a package launcher) rewritten to run the entry
    /// point: the launcher and the package spec are replaced; the server's own arguments,
    /// environment, working directory and sandbox stay.
    pub fn rewrite(&self, request: &LaunchRequest, spec: &PackageSpec) -> LaunchRequest {
        let mut out = request.clone();
        out.command = self.command.clone();
        out.args = self.args.iter().chain(&spec.args).cloned().collect();
        for (name, value) in &self.env {
            out.env.entry(name.clone()).or_insert_with(|| value.clone());
        }
        out
    }
}

/// Where Warden keeps installed packages: `$XDG_STATE_HOME/warden-packages`, beside (not
/// inside) Warden's private state directory, which holds the audit log and stays closed.
/// When Warden runs as root its confined servers run as uid 65534, which must be able to
/// reach the package; if a directory above the state home is closed to others (root's
/// home is mode 700), `/var/lib/warden/packages` is used instead.
pub fn packages_dir(state_home: &Path) -> PathBuf {
    let preferred = state_home.join("warden-packages");
    // SAFETY: geteuid cannot fail and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        return preferred;
    }
    let open = state_home.ancestors().all(|dir| {
        std::fs::metadata(dir)
            .map(|meta| !meta.is_dir() || meta.permissions().mode() & 0o001 != 0)
            .unwrap_or(true)
    });
    if open {
        preferred
    } else {
        PathBuf::from("/var/lib/warden/packages")
    }
}

/// The package cache: installs, verifies and locates installed packages.
#[derive(Clone)]
pub struct Packages {
    base: PathBuf,
    runner: Arc<dyn Runner>,
    step_limit: Duration,
    lock_wait: Duration,
}

impl std::fmt::Debug for Packages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packages")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl Packages {
    /// A cache under `base` whose installs run through `runner`.
    pub fn new(base: impl Into<PathBuf>, runner: Arc<dyn Runner>) -> Self {
        Self {
            base: base.into(),
            runner,
            step_limit: STEP_LIMIT,
            lock_wait: LOCK_WAIT,
        }
    }

    /// The same cache, waiting at most `wait` for another process's install of a server.
    pub fn with_lock_wait(mut self, wait: Duration) -> Self {
        self.lock_wait = wait;
        self
    }

    /// The directory the installs of the server stored under `key` go in: the first 16 hex
    /// digits of the key's sha256, so a server's installs are found by its key alone.
    pub fn slot(&self, key: &str) -> PathBuf {
        self.base
            .join(&tree::hex(&Sha256::digest(key.as_bytes()))[..16])
    }

    /// Takes the install lock of the server stored under `key` (named `server` in
    /// messages), for `what` (`installing`, `warden update`: said to whoever waits),
    /// waiting at most the cache's lock wait ([`LOCK_WAIT`]) for another process that holds
    /// it. Held until dropped. Whoever holds it may install ([`Packages::install`]) and
    /// record a pin; a process that waited must read the pin again: the holder may have
    /// installed what it needs.
    pub fn lock(&self, key: &str, server: &str, what: &str) -> Result<InstallLock, PackageError> {
        make_dir(&self.base)?;
        let slot = self.slot(key);
        lock::acquire(&lock_file(&slot), &slot, server, what, self.lock_wait)
    }

    /// The cache's directory.
    pub fn base(&self) -> &Path {
        &self.base
    }

    /// Installs `spec` for the server whose install lock is `held` ([`Packages::lock`])
    /// into a new directory of its own and returns what to pin. Nothing is recorded here; a
    /// failed install leaves nothing behind. The new directory is referenced by nothing
    /// until its caller records the pin (while still holding the lock): no start ever runs
    /// a half-made install, and one left by a killed process is removed by
    /// [`Packages::collect`].
    pub fn install(
        &self,
        held: &InstallLock,
        spec: &PackageSpec,
    ) -> Result<Installed, PackageError> {
        let parent = held.slot.clone();
        make_dir(&self.base)?;
        make_dir(&parent)?;
        let dir = unique_dir(&parent)?;
        let result = self.install_into(spec, &dir);
        if result.is_err() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        result
    }

    fn install_into(&self, spec: &PackageSpec, dir: &Path) -> Result<Installed, PackageError> {
        // SAFETY: geteuid cannot fail and touches no memory.
        if unsafe { libc::geteuid() } == 0 {
            // The install runs as the sandbox's uid; given back to root afterwards.
            std::os::unix::fs::chown(
                dir,
                Some(warden_sandbox::SANDBOX_UID),
                Some(warden_sandbox::SANDBOX_GID),
            )
            .map_err(|source| PackageError::io("change the owner of", dir, source))?;
        }
        let version = match spec.ecosystem {
            Ecosystem::Npm => self.install_npm(spec, dir)?,
            Ecosystem::PyPi => self.install_pypi(spec, dir)?,
        };
        tree::normalise(dir)?;
        let manifest = tree::scan(dir)?;
        // The lockfile is part of the tree: its hash is the manifest's, not hashed again.
        let lock_sha256 =
            lock_sha256(&manifest, spec.ecosystem).ok_or_else(|| PackageError::Invalid {
                package: spec.name.clone(),
                reason: format!(
                    "the install wrote no lockfile {}",
                    dir.join(lock_name(spec.ecosystem)).display()
                ),
            })?;
        // The entry point must exist before anything is pinned.
        entry(spec, dir)?;
        Ok(Installed {
            pin: PackagePin {
                ecosystem: spec.ecosystem.as_str().to_owned(),
                name: spec.name.clone(),
                requested: spec.requested.clone(),
                version,
                dir: dir.to_string_lossy().into_owned(),
                lock_sha256,
                tree_sha256: manifest.sha256(),
                manifest: manifest.to_json(),
            },
            manifest,
        })
    }

    fn install_npm(&self, spec: &PackageSpec, dir: &Path) -> Result<String, PackageError> {
        let manifest = dir.join("package.json");
        write_file(
            &manifest,
            "{\n  \"name\": \"warden-package\",\n  \"version\": \"0.0.0\",\n  \"private\": true\n}\n",
        )?;
        let env: BTreeMap<String, String> = [
            ("npm_config_globalconfig", "/dev/null"),
            ("npm_config_update_notifier", "false"),
            ("npm_config_fund", "false"),
            ("npm_config_audit", "false"),
            ("npm_config_ignore_scripts", "true"),
            ("npm_config_loglevel", "warn"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let step = Step {
            what: format!("npm install {}", spec.requirement()),
            program: "npm".to_owned(),
            args: vec![
                "install".to_owned(),
                "--ignore-scripts".to_owned(),
                "--no-audit".to_owned(),
                "--no-fund".to_owned(),
                "--save-exact".to_owned(),
                "--registry=https://registry.npmjs.org/".to_owned(),
                spec.requirement(),
            ],
            env,
            cwd: dir.to_path_buf(),
            hosts: hosts(spec.ecosystem),
        };
        self.runner.run(&step, dir, self.step_limit)?;
        let installed = npm_package_json(spec, dir)?;
        installed
            .get("version")
            .and_then(|v| v.as_str())
            .map(str::to_owned)
            .ok_or_else(|| PackageError::Invalid {
                package: spec.name.clone(),
                reason: "its package.json has no version".to_owned(),
            })
    }

    fn install_pypi(&self, spec: &PackageSpec, dir: &Path) -> Result<String, PackageError> {
        let python = if Path::new("/usr/bin/python3").exists() {
            "/usr/bin/python3".to_owned()
        } else {
            "python3".to_owned()
        };
        let venv = dir.join("venv");
        let wheels = dir.join("wheels");
        let venv_python = venv
            .join("bin")
            .join("python")
            .to_string_lossy()
            .into_owned();
        let env: BTreeMap<String, String> = [
            ("PIP_CONFIG_FILE", "/dev/null"),
            ("PIP_DISABLE_PIP_VERSION_CHECK", "1"),
            ("PIP_NO_CACHE_DIR", "1"),
            ("PIP_NO_INPUT", "1"),
            ("PYTHONDONTWRITEBYTECODE", "1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let step = |what: &str, program: &str, args: &[&str], hosts: Vec<String>| Step {
            what: what.to_owned(),
            program: program.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: env.clone(),
            cwd: dir.to_path_buf(),
            hosts,
        };
        let venv_text = venv.to_string_lossy().into_owned();
        self.runner.run(
            &step(
                "python3 -m venv",
                &python,
                &["-m", "venv", &venv_text],
                Vec::new(),
            ),
            dir,
            self.step_limit,
        )?;
        let wheels_text = wheels.to_string_lossy().into_owned();
        let requirement = spec.requirement();
        self.runner.run(
            &step(
                &format!("pip download {requirement}"),
                &venv_python,
                &[
                    "-m",
                    "pip",
                    "download",
                    "--only-binary=:all:",
                    "--index-url",
                    "https://pypi.org/simple",
                    "--dest",
                    &wheels_text,
                    &requirement,
                ],
                hosts(spec.ecosystem),
            ),
            dir,
            self.step_limit,
        )?;
        let (lock, version) = pypi_lock(spec, &wheels)?;
        let lock_path = dir.join(PYPI_LOCK);
        write_file(&lock_path, &lock)?;
        let lock_text = lock_path.to_string_lossy().into_owned();
        self.runner.run(
            &step(
                "pip install --require-hashes",
                &venv_python,
                &[
                    "-m",
                    "pip",
                    "install",
                    "--no-index",
                    "--find-links",
                    &wheels_text,
                    "--require-hashes",
                    "--no-deps",
                    "-r",
                    &lock_text,
                ],
                Vec::new(),
            ),
            dir,
            self.step_limit,
        )?;
        std::fs::remove_dir_all(&wheels)
            .map_err(|source| PackageError::io("remove", &wheels, source))?;
        Ok(version)
    }

    /// Removes the installation directory `dir` (one no longer pinned, or a fresh one the
    /// user declined). Refused ([`PackageError::Unsafe`], nothing removed) unless `dir` is
    /// absolute, has no `.` or `..` component, and lies strictly below the cache both as
    /// written and once every link on the way is resolved: a pin read from the store must
    /// not be able to send a recursive delete anywhere else. An install a running server
    /// holds ([`Packages::hold`]) is left ([`PackageError::InUse`]).
    pub fn remove(&self, dir: &Path) -> Result<(), PackageError> {
        let refuse = |reason: &str| PackageError::Unsafe {
            path: dir.to_path_buf(),
            reason: format!("it is not removed: {reason}"),
        };
        if !dir.is_absolute()
            || dir.components().any(|c| {
                matches!(
                    c,
                    std::path::Component::ParentDir | std::path::Component::CurDir
                )
            })
        {
            return Err(refuse("it is not a plain absolute path"));
        }
        let strictly_under = |path: &Path, base: &Path| {
            path.strip_prefix(base)
                .is_ok_and(|rest| rest.components().next().is_some())
        };
        if !strictly_under(dir, &self.base) {
            return Err(refuse(&format!(
                "it is not inside the package cache {}",
                self.base.display()
            )));
        }
        let meta = match std::fs::symlink_metadata(dir) {
            Ok(meta) => meta,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(source) => return Err(PackageError::io("read", dir, source)),
        };
        if !meta.is_dir() {
            return Err(refuse("it is not a directory"));
        }
        let base = std::fs::canonicalize(&self.base)
            .map_err(|source| PackageError::io("read", &self.base, source))?;
        let resolved =
            std::fs::canonicalize(dir).map_err(|source| PackageError::io("read", dir, source))?;
        if !strictly_under(&resolved, &base) {
            return Err(refuse(&format!(
                "it resolves to {}, outside the package cache {}",
                resolved.display(),
                base.display()
            )));
        }
        // Not while a server runs from it; the hold is kept until its `.use` file is gone.
        let Some(removing) = in_use::try_removing(dir)? else {
            return Err(PackageError::InUse {
                path: dir.to_path_buf(),
            });
        };
        std::fs::remove_dir_all(&resolved)
            .map_err(|source| PackageError::io("remove", &resolved, source))?;
        removing.finish();
        Ok(())
    }

    /// Holds the install `dir` for the server `server` while it runs from it
    /// ([`in_use::hold`]): [`Packages::remove`] leaves it alone until the hold is dropped.
    pub fn hold(&self, server: &str, dir: &Path) -> Result<InUse, PackageError> {
        in_use::hold(server, dir)
    }

    /// Checks the installation `pin` records, for the server `server`: the directory is
    /// safe (owned by the user, not writable by others), the lockfile and every installed
    /// file are as pinned. [`PackageError::Changed`] names every difference.
    pub fn verify(&self, server: &str, pin: &PackagePin) -> Result<(), PackageError> {
        let dir = PathBuf::from(&pin.dir);
        let ecosystem = match pin.ecosystem.as_str() {
            "npm" => Ecosystem::Npm,
            _ => Ecosystem::PyPi,
        };
        let package = format!("{}@{}", pin.name, pin.version);
        if !dir.is_dir() {
            return Err(PackageError::Changed {
                server: server.to_owned(),
                package,
                lines: vec![format!("{} is missing", dir.display())],
            });
        }
        let manifest = tree::scan(&dir)?;
        let mut lines = Vec::new();
        let lock = dir.join(lock_name(ecosystem));
        match lock_sha256(&manifest, ecosystem) {
            Some(hash) if hash == pin.lock_sha256 => {}
            Some(hash) => lines.push(format!(
                "lockfile {} changed: sha256 {}… -> {}…",
                lock.display(),
                &pin.lock_sha256.get(..12).unwrap_or(""),
                hash.get(..12).unwrap_or("")
            )),
            None => lines.push(format!("lockfile {} is missing", lock.display())),
        }
        if manifest.sha256() != pin.tree_sha256 {
            let pinned = Manifest::from_json(&pin.manifest);
            lines.extend(tree::diff(&pinned, &manifest, 20));
            if pinned.sha256() != pin.tree_sha256 {
                lines.push("the stored manifest does not match its pin".to_owned());
            }
        }
        if lines.is_empty() {
            Ok(())
        } else {
            Err(PackageError::Changed {
                server: server.to_owned(),
                package,
                lines,
            })
        }
    }
}

fn hosts(ecosystem: Ecosystem) -> Vec<String> {
    ecosystem
        .registry_hosts()
        .iter()
        .map(|h| (*h).to_owned())
        .collect()
}

/// The sha256 of the lockfile of an `ecosystem` install, as its manifest records it (the
/// lockfile is a regular file at the top of the tree); `None` when there is none.
pub fn lock_sha256(manifest: &Manifest, ecosystem: Ecosystem) -> Option<String> {
    match manifest.items.get(lock_name(ecosystem)) {
        Some(tree::Item::File { sha256, .. }) => Some(sha256.clone()),
        _ => None,
    }
}

/// The lockfile's name for `ecosystem`.
pub fn lock_name(ecosystem: Ecosystem) -> &'static str {
    match ecosystem {
        Ecosystem::Npm => NPM_LOCK,
        Ecosystem::PyPi => PYPI_LOCK,
    }
}

/// How to run `spec` installed in `dir`: npm runs `node` on the `bin` script the package
/// names for `spec.bin` (or its only one); PyPI runs the venv's console script.
pub fn entry(spec: &PackageSpec, dir: &Path) -> Result<Entry, PackageError> {
    let invalid = |reason: String| PackageError::Invalid {
        package: spec.name.clone(),
        reason,
    };
    match spec.ecosystem {
        Ecosystem::Npm => {
            let package_dir = dir.join("node_modules").join(&spec.name);
            let json = npm_package_json(spec, dir)?;
            let script = match json.get("bin") {
                Some(serde_json::Value::String(path)) => path.clone(),
                Some(serde_json::Value::Object(map)) => {
                    let chosen = map
                        .get(&spec.bin)
                        .or_else(|| (map.len() == 1).then(|| map.values().next()).flatten());
                    match chosen.and_then(|v| v.as_str()) {
                        Some(path) => path.to_owned(),
                        None => {
                            return Err(invalid(format!(
                                "it has no command `{}` (it has: {})",
                                spec.bin,
                                map.keys().cloned().collect::<Vec<_>>().join(", ")
                            )));
                        }
                    }
                }
                _ => {
                    return Err(invalid(
                        "its package.json names no command (`bin`)".to_owned(),
                    ));
                }
            };
            let path = package_dir.join(&script);
            let resolved = std::fs::canonicalize(&path)
                .map_err(|source| PackageError::io("find the command", &path, source))?;
            let root = std::fs::canonicalize(dir)
                .map_err(|source| PackageError::io("read", dir, source))?;
            if !resolved.starts_with(&root) || !resolved.is_file() {
                return Err(invalid(format!(
                    "its command {script} is not a file inside the installation"
                )));
            }
            Ok(Entry {
                command: "node".to_owned(),
                args: vec![resolved.to_string_lossy().into_owned()],
                env: BTreeMap::new(),
            })
        }
        Ecosystem::PyPi => {
            let script = dir.join("venv").join("bin").join(&spec.bin);
            let meta = std::fs::symlink_metadata(&script).map_err(|_| {
                invalid(format!(
                    "it installed no command `{}` (looked for {})",
                    spec.bin,
                    script.display()
                ))
            })?;
            if !meta.is_file() {
                return Err(invalid(format!("{} is not a file", script.display())));
            }
            Ok(Entry {
                command: script.to_string_lossy().into_owned(),
                args: Vec::new(),
                env: [("PYTHONDONTWRITEBYTECODE".to_owned(), "1".to_owned())]
                    .into_iter()
                    .collect(),
            })
        }
    }
}

fn npm_package_json(spec: &PackageSpec, dir: &Path) -> Result<serde_json::Value, PackageError> {
    use std::io::Read;
    let path = dir
        .join("node_modules")
        .join(&spec.name)
        .join("package.json");
    // Never waits on a FIFO placed there by the install; only a regular file is read.
    let (file, _) = warden_mcp::fingerprint::open_regular(&path, true).map_err(|source| {
        if source.kind() == std::io::ErrorKind::InvalidInput {
            PackageError::Invalid {
                package: spec.name.clone(),
                reason: format!("{} is not a regular file", path.display()),
            }
        } else {
            PackageError::io("read", &path, source)
        }
    })?;
    // The read itself is bounded: a size checked before reading could change after.
    let mut bytes = Vec::new();
    file.take(MAX_PACKAGE_JSON + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| PackageError::io("read", &path, source))?;
    if bytes.len() as u64 > MAX_PACKAGE_JSON {
        return Err(PackageError::Invalid {
            package: spec.name.clone(),
            reason: format!(
                "{} is larger than {} KiB",
                path.display(),
                MAX_PACKAGE_JSON >> 10
            ),
        });
    }
    serde_json::from_slice(&bytes).map_err(|error| PackageError::Invalid {
        package: spec.name.clone(),
        reason: format!("{}: {error}", path.display()),
    })
}

/// The lockfile for the wheels pip downloaded into `wheels` (one line per wheel,
/// `name==version --hash=sha256:…`, sorted), and the version of `spec`'s own package.
fn pypi_lock(spec: &PackageSpec, wheels: &Path) -> Result<(String, String), PackageError> {
    let mut lines = Vec::new();
    let mut version = None;
    let wanted = spec::normalize_python_name(&spec.name);
    let entries =
        std::fs::read_dir(wheels).map_err(|source| PackageError::io("list", wheels, source))?;
    for entry in entries {
        let entry = entry.map_err(|source| PackageError::io("list", wheels, source))?;
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(stem) = file.strip_suffix(".whl") else {
            return Err(PackageError::Invalid {
                package: spec.name.clone(),
                reason: format!("pip downloaded {file}, which is not a wheel"),
            });
        };
        let mut parts = stem.split('-');
        let (Some(name), Some(ver)) = (parts.next(), parts.next()) else {
            return Err(PackageError::Invalid {
                package: spec.name.clone(),
                reason: format!("unreadable wheel name {file}"),
            });
        };
        let name = spec::normalize_python_name(name);
        if name == wanted {
            version = Some(ver.to_owned());
        }
        let sha256 = tree::file_sha256(&entry.path())?;
        lines.push(format!("{name}=={ver} --hash=sha256:{sha256}"));
    }
    lines.sort();
    let version = version.ok_or_else(|| PackageError::Invalid {
        package: spec.name.clone(),
        reason: "pip did not download it".to_owned(),
    })?;
    let mut text = String::from("# written by Warden: every wheel installed, with its sha256\n");
    for line in lines {
        text.push_str(&line);
        text.push('\n');
    }
    Ok((text, version))
}

/// The install lock of the slot `slot`: beside it, `<slot>.lock`.
pub(crate) fn lock_file(slot: &Path) -> PathBuf {
    let mut name = slot.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    slot.with_file_name(name)
}

fn make_dir(dir: &Path) -> Result<(), PackageError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
        .map_err(|source| PackageError::io("create", dir, source))?;
    let meta =
        std::fs::symlink_metadata(dir).map_err(|source| PackageError::io("read", dir, source))?;
    if let Some(reason) = tree::unsafe_entry(dir, &meta) {
        return Err(PackageError::Unsafe {
            path: dir.to_path_buf(),
            reason,
        });
    }
    Ok(())
}

/// A new directory under `parent` for one install. A name is never used twice by one
/// process, even once its directory was removed: an executable pin naming files under an
/// earlier install's directory must not pass for a pin of a later install in the same place.
fn unique_dir(parent: &Path) -> Result<PathBuf, PackageError> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    for _ in 0..100u32 {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = parent.join(format!("{secs}-{}-{n}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o755).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(source) => return Err(PackageError::io("create", &dir, source)),
        }
    }
    Err(PackageError::io(
        "create",
        parent,
        std::io::Error::other("no free name after 100 attempts"),
    ))
}

/// Writes a file into an installation directory being filled: when Warden runs as root it
/// is given to the sandbox's uid, like the directory, so the install may change it.
fn write_file(path: &Path, text: &str) -> Result<(), PackageError> {
    std::fs::write(path, text).map_err(|source| PackageError::io("write", path, source))?;
    // SAFETY: geteuid cannot fail and touches no memory.
    if unsafe { libc::geteuid() } == 0 {
        std::os::unix::fs::chown(
            path,
            Some(warden_sandbox::SANDBOX_UID),
            Some(warden_sandbox::SANDBOX_GID),
        )
        .map_err(|source| PackageError::io("change the owner of", path, source))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::Mutex;

    /// Plays the registry's client: writes what a given install would have written.
    struct Fake {
        bin: String,
        steps: Mutex<Vec<Step>>,
    }

    impl Runner for Fake {
        fn run(&self, step: &Step, dir: &Path, _limit: Duration) -> Result<(), PackageError> {
            self.steps.lock().unwrap().push(step.clone());
            let package = dir.join("node_modules/@s/pkg");
            std::fs::create_dir_all(package.join("dist")).unwrap();
            std::fs::write(
                package.join("package.json"),
                format!(
                    r#"{{"name":"@s/pkg","version":"1.4.0","bin":{{"pkg":"{}"}}}}"#,
                    self.bin
                ),
            )
            .unwrap();
            std::fs::write(package.join("dist/index.js"), "console.log(1)").unwrap();
            std::fs::write(dir.join(NPM_LOCK), "{}").unwrap();
            Ok(())
        }
    }

    fn cache(bin: &str) -> (tempfile::TempDir, Packages, Arc<Fake>) {
        let dir = tempfile::tempdir().unwrap();
        let fake = Arc::new(Fake {
            bin: bin.to_owned(),
            steps: Mutex::new(Vec::new()),
        });
        let packages = Packages::new(dir.path().join("packages"), Arc::clone(&fake) as _);
        (dir, packages, fake)
    }

    fn npx(list: &[&str]) -> PackageSpec {
        let args: Vec<String> = list.iter().map(|s| (*s).to_owned()).collect();
        parse("npx", &args).unwrap()
    }

    #[test]
    fn an_npm_install_is_confined_to_the_registry_without_scripts_and_pinned() {
        let (_dir, packages, fake) = cache("dist/index.js");
        let spec = npx(&["-y", "@s/pkg", "--flag"]);
        let held = packages.lock("key", "s", "test").unwrap();
        let installed = packages.install(&held, &spec).unwrap();
        let steps = fake.steps.lock().unwrap().clone();
        assert_eq!(steps.len(), 1);
        assert!(steps[0].args.contains(&"--ignore-scripts".to_owned()));
        assert!(steps[0].args.contains(&"@s/pkg@latest".to_owned()));
        assert_eq!(steps[0].hosts, ["registry.npmjs.org"]);
        assert_eq!(steps[0].env["npm_config_ignore_scripts"], "true");
        assert_eq!(installed.pin.version, "1.4.0");
        assert_eq!(installed.pin.requested, "");
        packages.verify("s", &installed.pin).unwrap();

        // The request now runs node on the installed script, with the server's arguments.
        let dir = PathBuf::from(&installed.pin.dir);
        let request = LaunchRequest {
            server: "s".into(),
            command: "npx".into(),
            args: vec!["-y".into(), "@s/pkg".into(), "--flag".into()],
            env: BTreeMap::new(),
            cwd: None,
            sandbox: warden_config::SandboxSpec::default(),
        };
        let rewritten = entry(&spec, &dir).unwrap().rewrite(&request, &spec);
        assert_eq!(rewritten.command, "node");
        assert!(rewritten.args[0].ends_with("node_modules/@s/pkg/dist/index.js"));
        assert_eq!(rewritten.args[1], "--flag");

        // A changed lockfile and a new file are both named.
        std::fs::write(dir.join(NPM_LOCK), "{\"x\":1}").unwrap();
        std::fs::write(dir.join("node_modules/@s/pkg/dist/extra.js"), "evil").unwrap();
        let error = packages
            .verify("s", &installed.pin)
            .unwrap_err()
            .to_string();
        assert!(error.contains("lockfile"), "{error}");
        assert!(
            error.contains("added    node_modules/@s/pkg/dist/extra.js"),
            "{error}"
        );
        assert!(error.contains("warden update s"), "{error}");
    }

    #[test]
    fn a_bin_outside_the_installation_is_refused_and_leaves_nothing() {
        let (_dir, packages, _fake) = cache("../../../../../../../../etc/hostname");
        let held = packages.lock("key", "s", "test").unwrap();
        let error = packages
            .install(&held, &npx(&["-y", "@s/pkg"]))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("not a file inside the installation")
                || error.contains("find the command"),
            "{error}"
        );
        assert_eq!(
            std::fs::read_dir(packages.slot("key")).unwrap().count(),
            0,
            "removed"
        );
    }

    #[test]
    fn an_oversized_package_json_is_refused_naming_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let package = dir.path().join("node_modules/srv");
        std::fs::create_dir_all(&package).unwrap();
        let spec = npx(&["-y", "srv"]);
        // Replay: a package.json padded past the limit (a valid JSON string of 2 MiB).
        let padding = " ".repeat(2 * 1024 * 1024);
        std::fs::write(
            package.join("package.json"),
            format!(r#"{{"name":"srv","version":"1.0.0","bin":"x.js"}}{padding}"#),
        )
        .unwrap();
        let error = npm_package_json(&spec, dir.path()).unwrap_err().to_string();
        assert!(
            error.contains("package.json is larger than 1024 KiB"),
            "{error}"
        );
        // Control: the same manifest without the padding is read.
        std::fs::write(
            package.join("package.json"),
            r#"{"name":"srv","version":"1.0.0","bin":"x.js"}"#,
        )
        .unwrap();
        assert_eq!(
            npm_package_json(&spec, dir.path()).unwrap()["version"],
            "1.0.0"
        );
        // Replay: a FIFO in its place is refused at once instead of waiting for a writer.
        std::fs::remove_file(package.join("package.json")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(package.join("package.json"))
            .status()
            .unwrap();
        assert!(made.success());
        let (send, receive) = std::sync::mpsc::channel();
        let root = dir.path().to_path_buf();
        std::thread::spawn(move || send.send(npm_package_json(&spec, &root).map(|_| ())));
        let error = receive
            .recv_timeout(Duration::from_secs(20))
            .unwrap() // a timeout: it waited on the FIFO
            .unwrap_err()
            .to_string();
        assert!(error.contains("is not a regular file"), "{error}");
    }

    #[test]
    fn only_a_directory_strictly_inside_the_cache_is_removed() {
        let (dir, packages, _) = cache("srv");
        let victim = dir.path().join("victim");
        std::fs::create_dir_all(&victim).unwrap();
        std::fs::write(victim.join("keep"), "precious").unwrap();
        let base = packages.base().to_path_buf();
        std::fs::create_dir_all(base.join("abc")).unwrap();
        std::os::unix::fs::symlink(&victim, base.join("abc/link")).unwrap();
        std::os::unix::fs::symlink(dir.path(), base.join("up")).unwrap();
        // Replays: a pin whose directory climbs out, is the cache itself, lies elsewhere,
        // or reaches outside through a link inside the cache.
        for attack in [
            base.join("abc/../../victim"),
            base.join("./abc/../.."),
            base.clone(),
            victim.clone(),
            PathBuf::from("victim"),
            base.join("abc/link"),
            base.join("up/victim"),
        ] {
            let error = packages.remove(&attack).unwrap_err().to_string();
            assert!(error.contains("it is not removed"), "{attack:?}: {error}");
            assert!(victim.join("keep").exists(), "{attack:?}");
        }
        // Control: an install inside the cache is removed.
        let install = base.join("abc/1-2-3");
        std::fs::create_dir_all(install.join("node_modules")).unwrap();
        packages.remove(&install).unwrap();
        assert!(!install.exists());
        assert!(base.join("abc").exists());
    }

    #[test]
    fn a_pypi_lockfile_lists_every_wheel_with_its_hash() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path()
                .join("mcp_server_time-2026.10.19-py3-none-any.whl"),
            "a",
        )
        .unwrap();
        std::fs::write(dir.path().join("tzdata-2025.1-py2.py3-none-any.whl"), "b").unwrap();
        let spec = parse("uvx", &["mcp-server-time".to_owned()]).unwrap();
        let (lock, version) = pypi_lock(&spec, dir.path()).unwrap();
        assert_eq!(version, "2026.10.19");
        let lines: Vec<&str> = lock.lines().skip(1).collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("mcp-server-time==2026.10.19 --hash=sha256:ca978112"));
        assert!(lines[1].starts_with("tzdata==2025.1 --hash=sha256:"));
        std::fs::write(dir.path().join("pkg-1.0.tar.gz"), "sdist").unwrap();
        assert!(pypi_lock(&spec, dir.path()).is_err(), "only wheels");
    }
}
