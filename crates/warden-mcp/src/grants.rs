//! What a confined server is granted, and why: its effective profile.
//!
//! [`Grants::compute`] is the one place that decides every path a confined server may read,
//! write or execute and every variable it gets from Warden's environment. The launcher
//! builds the sandbox profile from it ([`crate::ConfinedLauncher`]), and the binary shows it
//! (`warden approve`, `warden tools -v`, `warden probe`) and approves it with a project
//! server, so what is shown is what runs, and a change of anything that decides it (a `#!`
//! line, a symlink, a file argument moved) is a change of the approved definition.
//!
//! Granted, besides the configured `read` and `write` paths:
//! - the system directories every server reads ([`warden_sandbox::system_read_dirs`]);
//! - the program's installation ([`warden_sandbox::program_grants`]), and that of the
//!   interpreter its `#!` line names. A virtualenv's base installation comes from where the
//!   venv's `python` resolves to, never from `pyvenv.cfg` (a file a repository controls);
//! - for every argument that is an absolute path to an existing **file**, read access to
//!   its *package directory* ([`package_dir`]);
//! - the working directory, read-only.
//!
//! Every path Warden finds on its own is resolved without following a symlink that lies
//! inside the server's write grants and points out of them
//! ([`warden_sandbox::resolve_grant`]): the server could have planted it. (The program and
//! its interpreter may themselves be such a link, a virtualenv's `bin/python`: they only
//! run what they point to; their directories may not.) For a server from a project file, the working directory and the package
//! directories must lie inside the project or the system directories
//! ([`LaunchError::ProjectGrant`]).

use std::path::{Path, PathBuf};

use serde::Serialize;
use warden_config::NetworkSpec;
use warden_sandbox::{
    ENV_ALLOWLIST, home_dirs, program_grants, resolve_grant, system_exec_dirs, system_read_dirs,
};

use crate::error::LaunchError;
use crate::launcher::LaunchRequest;

/// What a grant allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// Read files and list directories.
    Read,
    /// Read, and execute programs.
    Execute,
    /// Read, create, write, rename and remove.
    Write,
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Read => "read",
            Self::Execute => "read, execute",
            Self::Write => "read, write",
        })
    }
}

/// Why a path is granted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Reason {
    /// A system directory every confined server gets.
    System,
    /// The installation of the program (as named or as resolved).
    Program {
        /// The program, as resolved from the command.
        program: PathBuf,
    },
    /// The installation of the interpreter the program's `#!` line names.
    Interpreter {
        /// The interpreter.
        interpreter: PathBuf,
    },
    /// The package directory of a file named in the arguments.
    Argument {
        /// The argument's index (0 is the first argument after the command).
        index: usize,
        /// The file.
        file: PathBuf,
    },
    /// The configured working directory.
    WorkingDirectory,
    /// `sandbox.read` of the configuration.
    ConfiguredRead,
    /// `sandbox.write` of the configuration.
    ConfiguredWrite,
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::System => f.write_str("system directory"),
            Self::Program { program } => {
                write!(f, "installation of the program {}", program.display())
            }
            Self::Interpreter { interpreter } => write!(
                f,
                "installation of {}, the program's #! interpreter",
                interpreter.display()
            ),
            Self::Argument { index, file } => write!(
                f,
                "package directory of argument {index} ({})",
                file.display()
            ),
            Self::WorkingDirectory => f.write_str("working directory"),
            Self::ConfiguredRead => f.write_str("sandbox.read"),
            Self::ConfiguredWrite => f.write_str("sandbox.write"),
        }
    }
}

/// One granted path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Grant {
    /// The path (resolved, except configured ones, which the sandbox resolves).
    pub path: PathBuf,
    /// What it allows.
    pub access: Access,
    /// Why it is granted.
    pub reason: Reason,
}

/// A confined server's effective profile, without its private scratch directory (which is
/// new at every start, and always its `HOME`, `TMPDIR` and default working directory).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Grants {
    /// The program that runs, as resolved from the command.
    pub program: PathBuf,
    /// Every granted path, system directories first.
    pub paths: Vec<Grant>,
    /// Network access.
    pub network: NetworkSpec,
    /// Variables taken from Warden's environment, by name: the ones every server gets
    /// (`PATH`, `LANG`, `TZ`, `TERM`) and those of `sandbox.env`, when Warden has them.
    pub passed: Vec<String>,
    /// Variables the definition sets (its `env` table), by name.
    pub set: Vec<String>,
}

impl Grants {
    /// The effective profile of `request` for its resolved `program`. `scratch` is the
    /// server's private directory when known (it is writable, like the write grants).
    pub fn compute(
        request: &LaunchRequest,
        program: &Path,
        scratch: Option<&Path>,
    ) -> Result<Self, LaunchError> {
        let confinement = |source| LaunchError::Confinement {
            program: program.to_path_buf(),
            source,
        };
        let mut writable: Vec<PathBuf> = request
            .sandbox
            .write
            .iter()
            .filter_map(|path| std::fs::canonicalize(path).ok())
            .collect();
        writable.extend(scratch.and_then(|s| std::fs::canonicalize(s).ok()));
        let homes = home_dirs();
        let system_read = system_read_dirs();
        let system_exec = system_exec_dirs();

        let mut paths = Vec::new();
        for dir in &system_read {
            let access = if system_exec.contains(dir) {
                Access::Execute
            } else {
                Access::Read
            };
            paths.push(grant(dir, access, Reason::System));
        }
        for dir in system_exec.iter().filter(|d| !system_read.contains(d)) {
            paths.push(grant(dir, Access::Execute, Reason::System));
        }
        // The program is checked against planted symlinks by the sandbox itself.
        for path in program_grants(program).map_err(confinement)? {
            paths.push(grant(
                &path,
                Access::Execute,
                Reason::Program {
                    program: program.to_path_buf(),
                },
            ));
        }
        if let Some(interpreter) = interpreter(program) {
            // Its directory is resolved like a grant, so a planted link is refused; the
            // interpreter itself may be a link (a virtualenv's `bin/python`), as the
            // program may.
            if let Some(dir) = interpreter.parent() {
                resolve_grant(dir, &writable).map_err(confinement)?;
            }
            for path in program_grants(&interpreter).map_err(confinement)? {
                paths.push(grant(
                    &path,
                    Access::Execute,
                    Reason::Interpreter {
                        interpreter: interpreter.clone(),
                    },
                ));
            }
        }
        let outside_project = |path: &Path| match &request.sandbox.project {
            Some(project) => {
                !path.starts_with(project) && !system_read.iter().any(|dir| path.starts_with(dir))
            }
            None => false,
        };
        for (index, arg) in request.args.iter().enumerate() {
            let file = Path::new(arg);
            if !(file.is_absolute() && file.is_file()) {
                continue;
            }
            let resolved = resolve_grant(file, &writable).map_err(confinement)?;
            let dir = package_dir(&resolved, &homes);
            if outside_project(&dir) {
                return Err(project_grant(
                    request,
                    program,
                    format!("argument {index} ({arg})"),
                    dir,
                ));
            }
            paths.push(grant(
                &dir,
                Access::Read,
                Reason::Argument {
                    index,
                    file: file.to_path_buf(),
                },
            ));
        }
        if let Some(cwd) = &request.cwd {
            let resolved = resolve_grant(cwd, &writable).map_err(confinement)?;
            if outside_project(&resolved) {
                return Err(project_grant(
                    request,
                    program,
                    "its working directory".to_owned(),
                    resolved,
                ));
            }
            paths.push(grant(&resolved, Access::Read, Reason::WorkingDirectory));
        }
        for path in &request.sandbox.read {
            paths.push(grant(path, Access::Read, Reason::ConfiguredRead));
        }
        for path in &request.sandbox.write {
            paths.push(grant(path, Access::Write, Reason::ConfiguredWrite));
        }
        let mut seen: Vec<Grant> = Vec::with_capacity(paths.len());
        paths.retain(|g: &Grant| {
            let new = !seen.contains(g);
            seen.push(g.clone());
            new
        });

        let mut passed: Vec<String> = ENV_ALLOWLIST
            .iter()
            .map(|name| (*name).to_owned())
            .chain(request.sandbox.env.iter().cloned())
            .filter(|name| std::env::var_os(name).is_some() && !request.env.contains_key(name))
            .collect();
        passed.sort();
        passed.dedup();
        Ok(Self {
            program: program.to_path_buf(),
            paths,
            network: request.sandbox.network.clone(),
            passed,
            set: request.env.keys().cloned().collect(),
        })
    }

    /// The paths with `access`.
    pub fn with_access(&self, access: Access) -> impl Iterator<Item = &Grant> {
        self.paths.iter().filter(move |g| g.access == access)
    }

    /// One line per granted path, `ACCESS  PATH  (why)`, system directories folded into
    /// one line, for the text of `warden approve`, `warden tools -v` and `warden probe`.
    pub fn lines(&self) -> Vec<String> {
        let system: Vec<String> = self
            .paths
            .iter()
            .filter(|g| g.reason == Reason::System)
            .map(|g| g.path.display().to_string())
            .collect();
        let mut out = Vec::new();
        if !system.is_empty() {
            out.push(format!("read, execute  {}  (system)", system.join(", ")));
        }
        for grant in self.paths.iter().filter(|g| g.reason != Reason::System) {
            out.push(format!(
                "{}  {}  ({})",
                grant.access,
                grant.path.display(),
                grant.reason
            ));
        }
        out.push(
            "read, write  a private scratch directory, new at every start (HOME, TMPDIR)"
                .to_owned(),
        );
        out.push(match &self.network {
            NetworkSpec::None => "network  none".to_owned(),
            NetworkSpec::Host => "network  the host's network, unfiltered".to_owned(),
            NetworkSpec::Allow(list) => format!(
                "network  only through Warden's egress proxy (HTTPS_PROXY), to: {}",
                list.rules
                    .iter()
                    .map(|rule| format!("{} [{}]", rule, rule.kind.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
        out
    }
}

fn grant(path: &Path, access: Access, reason: Reason) -> Grant {
    Grant {
        path: path.to_path_buf(),
        access,
        reason,
    }
}

fn project_grant(
    request: &LaunchRequest,
    program: &Path,
    what: String,
    path: PathBuf,
) -> LaunchError {
    LaunchError::ProjectGrant {
        program: program.to_path_buf(),
        what,
        path,
        project: request.sandbox.project.clone().unwrap_or_default(),
    }
}

/// The interpreter the `#!` line of `program` names, when that is an absolute path to an
/// existing file.
pub fn interpreter(program: &Path) -> Option<PathBuf> {
    crate::executed::shebang(program)
        .map(|(interpreter, _)| interpreter)
        .filter(|path| path.is_file())
}

/// The directory to grant (read-only) for a file (resolved) named as an argument:
/// 1. under a `node_modules` directory: the outermost `node_modules` directory (so the
///    package's hoisted dependencies come with it);
/// 2. else inside a virtualenv (an ancestor holding `pyvenv.cfg`): the venv root;
/// 3. else the nearest ancestor holding `package.json`;
/// 4. else the file's own directory.
///
/// A candidate that is too broad ([`too_broad`]) is skipped for the next rule; when every
/// rule gives such a directory, the file alone is granted.
pub fn package_dir(file: &Path, homes: &[PathBuf]) -> PathBuf {
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
        .map_or(file.to_path_buf(), |dir| dir.to_path_buf())
}

/// Directories never granted whole as a package directory: `/`, the shared temporary
/// directories, a home directory or one of its ancestors, a hidden directory right in a
/// home (`~/.aws`, `~/.cargo`, `~/.ssh`: settings and credentials, not packages), and
/// `~/.config`, `~/.cache`, `~/.local/share`, `~/.local/state` or anything above them.
pub fn too_broad(dir: &Path, homes: &[PathBuf]) -> bool {
    const DATA: [&str; 4] = [".config", ".cache", ".local/share", ".local/state"];
    dir.parent().is_none()
        || dir == Path::new("/tmp")
        || dir == Path::new("/var/tmp")
        || homes.iter().any(|home| {
            home.starts_with(dir)
                || (dir.parent() == Some(home.as_path())
                    && dir
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with('.')))
                || DATA.iter().any(|data| home.join(data).starts_with(dir))
        })
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
        let homes = homes();
        assert!(too_broad(Path::new("/"), &homes));
        assert!(too_broad(Path::new("/home"), &homes));
        assert!(too_broad(Path::new("/home/dana"), &homes));
        assert!(too_broad(Path::new("/tmp"), &homes));
        assert!(too_broad(Path::new("/home/dana/.aws"), &homes));
        assert!(too_broad(Path::new("/home/dana/.cargo"), &homes));
        assert!(too_broad(Path::new("/home/dana/.local"), &homes));
        assert!(too_broad(Path::new("/home/dana/.local/share"), &homes));
        assert!(too_broad(Path::new("/home/dana/.config"), &homes));
        assert!(!too_broad(Path::new("/home/dana/project"), &homes));
        assert!(!too_broad(Path::new("/home/dana/.config/app"), &homes));
        // A credentials file named as an argument is granted alone, not its directory.
        assert_eq!(
            package_dir(Path::new("/home/dana/.aws/credentials"), &homes),
            Path::new("/home/dana/.aws/credentials")
        );
    }
}
