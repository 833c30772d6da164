//! [`ConfinedLauncher`]: starts every stdio server inside `warden-sandbox`, unless its
//! configuration says `confine = false`.
//!
//! # What a confined server gets
//!
//! The sandbox's default profile for the resolved program ([`Profile::default_for`]: system
//! directories read-only, the program's install prefix, a private scratch directory as
//! `HOME`, `TMPDIR` and working directory, no network), plus:
//!
//! - the configured `read` and `write` paths and `network`;
//! - for a program inside a virtualenv (`pyvenv.cfg` above its `bin/`), the venv root and
//!   the interpreter installation it was made from (`home =` in `pyvenv.cfg`);
//! - for a script whose first line is `#!/absolute/interpreter`, that interpreter's prefix
//!   (and its venv, as above);
//! - for every argument that is an absolute path to an existing **file**, read access to the
//!   file's *package directory*:
//!   1. under a `node_modules` directory: the outermost `node_modules` directory (so the
//!      package's hoisted dependencies come with it);
//!   2. else inside a virtualenv (an ancestor holding `pyvenv.cfg`): the venv root;
//!   3. else the nearest ancestor holding `package.json`;
//!   4. else the file's own directory.
//!
//!   A candidate that is `/`, `/tmp`, `/var/tmp`, the user's home or one of its ancestors is
//!   skipped for the next rule; when every rule gives such a directory, the file alone is
//!   granted. Directories named as arguments are never granted automatically: name them in
//!   `read` or `write`;
//! - the configured working directory (`cwd`), read-only;
//! - the environment: `PATH`, `LANG`, `TZ`, `TERM` from Warden's, the variables named in
//!   `sandbox.env` (when Warden has them), and the server's own `env` table.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::Command;
use warden_config::NetworkSpec;
use warden_sandbox::{Network, Profile, Scratch, confine, home_dirs, scrubbed_env};

use crate::error::LaunchError;
use crate::launcher::{DirectLauncher, LaunchRequest, Launched, Launcher, resolve_program};

/// Starts servers confined; a request with `confine = false` goes to a [`DirectLauncher`]
/// with a warning each time.
#[derive(Debug, Clone)]
pub struct ConfinedLauncher {
    search_path: OsString,
    scratch_base: PathBuf,
    direct: DirectLauncher,
}

impl ConfinedLauncher {
    /// A launcher that resolves bare names through this process's `PATH` and creates each
    /// server's scratch directory under `scratch_base` (absolute).
    pub fn from_env(scratch_base: impl Into<PathBuf>) -> Self {
        let search_path = std::env::var_os("PATH").unwrap_or_default();
        Self::with_search_path(search_path, scratch_base)
    }

    /// A launcher with an explicit `PATH` value for resolving bare command names.
    pub fn with_search_path(
        search_path: impl Into<OsString>,
        scratch_base: impl Into<PathBuf>,
    ) -> Self {
        let search_path = search_path.into();
        Self {
            direct: DirectLauncher::with_search_path(search_path.clone()),
            search_path,
            scratch_base: scratch_base.into(),
        }
    }

    /// Fingerprints the server `request` describes, resolving its program exactly as
    /// [`launch`](Launcher::launch) will.
    pub fn fingerprint(
        &self,
        request: &LaunchRequest,
    ) -> Result<crate::Fingerprint, crate::FingerprintError> {
        crate::fingerprint(request, &self.search_path)
    }

    /// The profile `request` would run under, with its scratch directory (kept alive by the
    /// caller for as long as the server runs).
    pub fn profile(
        &self,
        request: &LaunchRequest,
        program: &Path,
    ) -> Result<(Profile, Scratch), LaunchError> {
        let failed = |source| LaunchError::Confinement {
            program: program.to_path_buf(),
            source,
        };
        let scratch = Scratch::create(&self.scratch_base, &request.server).map_err(failed)?;
        let mut profile = Profile::default_for(program, scratch.path()).map_err(failed)?;
        let homes = home_dirs();

        for interpreter in interpreters(program) {
            for prefix in install_prefixes(&interpreter, &homes) {
                profile.read.push(prefix.clone());
                profile.exec.push(prefix);
            }
        }
        for arg in &request.args {
            let path = Path::new(arg);
            if path.is_absolute() && path.is_file() {
                profile.read.push(package_dir(path, &homes));
            }
        }
        if let Some(cwd) = &request.cwd {
            profile.read.push(cwd.clone());
        }
        profile.read.extend(request.sandbox.read.iter().cloned());
        profile.write.extend(request.sandbox.write.iter().cloned());
        profile.network = match request.sandbox.network {
            NetworkSpec::None => Network::None,
            NetworkSpec::Host => Network::Host,
        };
        profile.limits.memory = request.sandbox.memory_limit();
        profile.limits.processes = request.sandbox.process_limit();
        profile.limits.disk = request.sandbox.disk_limit();
        dedup(&mut profile.read);
        dedup(&mut profile.write);
        dedup(&mut profile.exec);

        let mut extra = BTreeMap::new();
        for name in &request.sandbox.env {
            if let Ok(value) = std::env::var(name) {
                extra.insert(name.clone(), value);
            }
        }
        extra.extend(request.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        profile.set_env(scrubbed_env(std::env::vars(), &extra));
        Ok((profile, scratch))
    }
}

/// What [`ConfinedLauncher::launch_substitute`] ran, and under which grants.
#[derive(Debug)]
pub struct Substituted {
    /// The started substitute.
    pub launched: Launched,
    /// The server's own program (resolved), whose profile was applied.
    pub server_program: PathBuf,
    /// Whether the substitute ran confined (`false` for `confine = false`).
    pub confined: bool,
    /// The paths the substitute may write (the server's write grants; empty when
    /// unconfined, where nothing is granted because nothing is withheld).
    pub write_grants: Vec<PathBuf>,
    /// Where the substitute ran from when the server's grants do not cover it: a copy in
    /// the server's own private scratch directory (which every confined server may read,
    /// write and execute in; the copy is made inside the sandbox's scratch tmpfs), so that
    /// no grant has to be added for it. `None` when it ran in place.
    pub substitute_copy: Option<PathBuf>,
}

impl ConfinedLauncher {
    /// Starts `program` with `args` **instead of** the server `request` describes, under
    /// exactly the confinement the server would get: the profile (grants, network,
    /// environment, working directory) is computed from the server's own command and
    /// arguments, then the program is swapped. When the server's grants do not already let
    /// it read and execute `program`, a copy of `program` is placed in the server's private
    /// scratch directory and run from there: the sandbox needs the program's directory
    /// granted, and granting Warden's install directory would give the substitute more
    /// reach than the server has. For `confine = false` the substitute starts directly, like
    /// the server would.
    ///
    /// This is what `warden probe` uses to run its privilege probe as the server would run.
    pub fn launch_substitute(
        &self,
        request: &LaunchRequest,
        program: &Path,
        args: &[String],
    ) -> Result<Substituted, LaunchError> {
        let server_program = resolve_program(&request.command, &self.search_path)?;
        let mut swapped = request.clone();
        swapped.command = program.to_string_lossy().into_owned();
        swapped.args = args.to_vec();
        if !request.sandbox.confine {
            let launched = self.launch(&swapped)?;
            return Ok(Substituted {
                launched,
                server_program,
                confined: false,
                write_grants: Vec::new(),
                substitute_copy: None,
            });
        }
        if let Some(cwd) = &request.cwd
            && !cwd.is_dir()
        {
            return Err(LaunchError::BadWorkingDirectory { cwd: cwd.clone() });
        }
        let mut program = resolve_program(&swapped.command, &self.search_path)?;
        let (profile, scratch) = self.profile(request, &server_program)?;
        let resolved = std::fs::canonicalize(&program).unwrap_or_else(|_| program.clone());
        let covered = |grants: &[PathBuf]| {
            grants.iter().any(|grant| {
                let grant = std::fs::canonicalize(grant).unwrap_or_else(|_| grant.clone());
                resolved.starts_with(grant)
            })
        };
        let in_place = covered(&profile.read) && covered(&profile.exec);
        let mut substitute_copy = None;
        let mut profile = profile;
        if !in_place {
            let name = program.file_name().map_or_else(
                || "substitute".to_owned(),
                |n| n.to_string_lossy().into_owned(),
            );
            let copy = scratch.path().join(&name);
            profile.scratch_files.push((name, resolved.clone()));
            substitute_copy = Some(copy.clone());
            program = copy;
        }
        let write_grants = profile.write.clone();
        let launched = self.spawn_confined(&swapped, program, profile, scratch)?;
        Ok(Substituted {
            launched,
            server_program,
            confined: true,
            write_grants,
            substitute_copy,
        })
    }

    /// Starts `program` with the request's arguments and working directory under `profile`.
    fn spawn_confined(
        &self,
        request: &LaunchRequest,
        program: PathBuf,
        profile: Profile,
        scratch: Scratch,
    ) -> Result<Launched, LaunchError> {
        check_reachable(&program, &profile)?;
        let mut command = std::process::Command::new(&program);
        command
            .args(&request.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(cwd) = &request.cwd {
            command.current_dir(cwd);
        }
        let failed = |source| LaunchError::Confinement {
            program: program.clone(),
            source,
        };
        let confinement = confine(&mut command, &profile).map_err(failed)?;
        let mut command = Command::from(command);
        command.kill_on_drop(false);
        let child = command
            .spawn()
            .map_err(|error| failed(confinement.spawn_error(error)))?;
        tracing::debug!(server = %request.server, program = %program.display(), "started confined");
        let keep = Sandboxed {
            confinement,
            _scratch: scratch,
        };
        Launched::from_child(program, child, Some(Box::new(keep)))
    }
}

/// What a confined server keeps alive: its confinement (the cgroup leaf, and what tells
/// which limit it reached) and its scratch directory.
#[derive(Debug)]
struct Sandboxed {
    confinement: warden_sandbox::Confinement,
    _scratch: Scratch,
}

impl crate::launcher::Keep for Sandboxed {
    fn exit_note(&self) -> Option<String> {
        let notes: Vec<String> = self
            .confinement
            .limits_reached()
            .iter()
            .map(|reached| {
                format!(
                    "{reached}; raise `sandbox.{}` if it needs more",
                    reached.name()
                )
            })
            .collect();
        (!notes.is_empty()).then(|| notes.join("; "))
    }
}

impl Launcher for ConfinedLauncher {
    fn launch(&self, request: &LaunchRequest) -> Result<Launched, LaunchError> {
        if !request.sandbox.confine {
            tracing::warn!(
                server = %request.server,
                "starting UNCONFINED (confine = false): the server can read and do everything Warden can"
            );
            return self.direct.launch(request);
        }
        if let Some(cwd) = &request.cwd
            && !cwd.is_dir()
        {
            return Err(LaunchError::BadWorkingDirectory { cwd: cwd.clone() });
        }
        let program = resolve_program(&request.command, &self.search_path)?;
        let (profile, scratch) = self.profile(request, &program)?;
        self.spawn_confined(request, program, profile, scratch)
    }
}

/// When Warden runs as root, the server runs as uid 65534 and the sandbox binds every
/// granted path with that uid, so each path's ancestors must be searchable by others. Checked
/// here to name the directory instead of reporting a bare "permission denied".
fn check_reachable(program: &Path, profile: &Profile) -> Result<(), LaunchError> {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid cannot fail and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(());
    }
    for path in profile
        .read
        .iter()
        .chain(&profile.write)
        .chain(&profile.exec)
        // The scratch directory is a tmpfs of the sandbox's own, not the host's directory.
        .filter(|path| **path != profile.scratch)
    {
        let Ok(resolved) = std::fs::canonicalize(path) else {
            continue; // the sandbox reports a missing path itself
        };
        for dir in resolved.ancestors().skip(1) {
            let Ok(meta) = std::fs::metadata(dir) else {
                continue;
            };
            let mode = meta.permissions().mode() & 0o7777;
            if mode & 0o001 == 0 {
                return Err(LaunchError::Unreachable {
                    program: program.to_path_buf(),
                    path: path.clone(),
                    dir: dir.to_path_buf(),
                    mode,
                });
            }
        }
    }
    Ok(())
}

/// The programs that will actually interpret `program`: itself, and the interpreter its
/// `#!` line names when that is an absolute path.
fn interpreters(program: &Path) -> Vec<PathBuf> {
    use std::io::Read;
    let mut found = vec![program.to_path_buf()];
    let mut head = [0u8; 256];
    let read = std::fs::File::open(program)
        .and_then(|mut file| file.read(&mut head))
        .unwrap_or(0);
    if let Some(line) = head[..read].strip_prefix(b"#!") {
        let line = line.split(|&b| b == b'\n').next().unwrap_or_default();
        let line = String::from_utf8_lossy(line);
        if let Some(interpreter) = line.split_whitespace().next()
            && interpreter.starts_with('/')
            && Path::new(interpreter).exists()
        {
            found.push(PathBuf::from(interpreter));
        }
    }
    found
}

/// Install prefixes to grant for an interpreter (read and exec): the directory above its
/// `bin/` (as named and resolved), and for a virtualenv the installation named by
/// `home =` in `pyvenv.cfg`.
fn install_prefixes(interpreter: &Path, homes: &[PathBuf]) -> Vec<PathBuf> {
    let mut prefixes = Vec::new();
    let mut bins = Vec::new();
    if let Some(dir) = interpreter.parent() {
        bins.push(dir.to_path_buf());
    }
    if let Ok(resolved) = std::fs::canonicalize(interpreter)
        && let Some(dir) = resolved.parent()
    {
        bins.push(dir.to_path_buf());
    }
    for bin in bins {
        let prefix = if bin.file_name().is_some_and(|n| n == "bin" || n == "sbin") {
            bin.parent().map(Path::to_path_buf).unwrap_or(bin)
        } else {
            bin
        };
        if !too_broad(&prefix, homes) {
            prefixes.push(prefix.clone());
        }
        if let Some(home) = venv_home(&prefix) {
            let base = if home.file_name().is_some_and(|n| n == "bin") {
                home.parent().map(Path::to_path_buf).unwrap_or(home)
            } else {
                home
            };
            if base.exists() && !too_broad(&base, homes) {
                prefixes.push(base);
            }
        }
    }
    prefixes
}

/// `home =` from `ROOT/pyvenv.cfg`, when `root` is a virtualenv.
fn venv_home(root: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(root.join("pyvenv.cfg")).ok()?;
    text.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key.trim() == "home").then(|| PathBuf::from(value.trim()))
    })
}

/// The directory to grant (read-only) for a file named as an argument; see the module docs.
pub fn package_dir(file: &Path, homes: &[PathBuf]) -> PathBuf {
    let file = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    let ancestors: Vec<&Path> = file.ancestors().skip(1).collect();
    let outermost_node_modules = ancestors
        .iter()
        .rev()
        .find(|dir| dir.file_name().is_some_and(|n| n == "node_modules"));
    let venv = ancestors
        .iter()
        .find(|dir| dir.join("pyvenv.cfg").is_file());
    let package = ancestors
        .iter()
        .find(|dir| dir.join("package.json").is_file());
    let parent = ancestors.first();
    [outermost_node_modules, venv, package, parent]
        .into_iter()
        .flatten()
        .find(|dir| !too_broad(dir, homes))
        .map_or(file.clone(), |dir| dir.to_path_buf())
}

/// Directories never granted as a whole: `/`, shared temporary directories, and the home
/// directories and their ancestors.
fn too_broad(dir: &Path, homes: &[PathBuf]) -> bool {
    dir.parent().is_none()
        || dir == Path::new("/tmp")
        || dir == Path::new("/var/tmp")
        || homes.iter().any(|home| home.starts_with(dir))
}

fn dedup(paths: &mut Vec<PathBuf>) {
    let mut seen = Vec::with_capacity(paths.len());
    for path in paths.drain(..) {
        if !seen.contains(&path) {
            seen.push(path);
        }
    }
    *paths = seen;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn homes() -> Vec<PathBuf> {
        vec![PathBuf::from("/home/dana"), PathBuf::from("/root")]
    }

    #[test]
    fn a_node_script_grants_the_outermost_node_modules() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let package = root.join("app/node_modules/@scope/server");
        std::fs::create_dir_all(package.join("dist")).unwrap();
        std::fs::write(package.join("package.json"), "{}").unwrap();
        std::fs::write(package.join("dist/index.js"), "").unwrap();
        assert_eq!(
            package_dir(&package.join("dist/index.js"), &homes()),
            root.join("app/node_modules")
        );
    }

    #[test]
    fn a_file_in_a_venv_grants_the_venv_and_a_package_json_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let venv = root.join("venv");
        let site = venv.join("lib/python3.11/site-packages/pkg");
        std::fs::create_dir_all(&site).unwrap();
        std::fs::write(venv.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        std::fs::write(site.join("main.py"), "").unwrap();
        assert_eq!(package_dir(&site.join("main.py"), &homes()), venv);

        let project = root.join("project");
        std::fs::create_dir_all(project.join("src")).unwrap();
        std::fs::write(project.join("package.json"), "{}").unwrap();
        std::fs::write(project.join("src/server.js"), "").unwrap();
        assert_eq!(
            package_dir(&project.join("src/server.js"), &homes()),
            project
        );

        let loose = root.join("loose");
        std::fs::create_dir_all(&loose).unwrap();
        std::fs::write(loose.join("server.py"), "").unwrap();
        assert_eq!(package_dir(&loose.join("server.py"), &homes()), loose);
    }

    #[test]
    fn home_and_root_are_never_granted_whole() {
        assert!(too_broad(Path::new("/"), &homes()));
        assert!(too_broad(Path::new("/home"), &homes()));
        assert!(too_broad(Path::new("/home/dana"), &homes()));
        assert!(too_broad(Path::new("/tmp"), &homes()));
        assert!(!too_broad(Path::new("/home/dana/project"), &homes()));
    }

    #[test]
    fn a_venv_interpreter_brings_its_base_installation() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let base = root.join("python-3.11");
        std::fs::create_dir_all(base.join("bin")).unwrap();
        let venv = root.join("venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::write(
            venv.join("pyvenv.cfg"),
            format!("home = {}\n", base.join("bin").display()),
        )
        .unwrap();
        std::fs::write(venv.join("bin/python"), "").unwrap();
        let prefixes = install_prefixes(&venv.join("bin/python"), &homes());
        assert!(prefixes.contains(&venv), "{prefixes:?}");
        assert!(prefixes.contains(&base), "{prefixes:?}");
    }
}
