//! What a project file (the working tree, perhaps a cloned repository) may not do to the
//! servers it defines: loosen their confinement beyond the project, or hand them the
//! user's environment.
//!
//! - [`check_server`] and [`check_env_file`] run while the file is read: no
//!   `confine = false`, no host network, `read`/`write` grants, the working directory and a
//!   VS Code `envFile` only inside the project (symlinks and `..` resolved first);
//! - [`check_environment`] runs once every file is read, because the user's permission to
//!   pass a variable (`[project_servers.NAME] env` in the user or local file) may come from
//!   the local file, which is read after the project's. A `${VAR}` in any value of a
//!   project server (`env`, `args`, `cwd`, `headers`, `command`, `url`, grants, `envFile`)
//!   and a name in its `sandbox.env` pass `VAR` from the user's environment to a program
//!   the repository chose, so each needs that permission.

use std::path::{Path, PathBuf};

use crate::error::ConfigError;
use crate::size::format_size;
use crate::spec::{
    DEFAULT_DISK, DEFAULT_MEMORY, DEFAULT_PROCESSES, EnvAllowance, EnvReference, NetworkSpec,
    Origin, SandboxSpec, Scope, ServerSpec, TransportSpec,
};

/// The path with symlinks resolved where it exists, and `.`/`..` removed lexically where it
/// does not (as far as it does not: an existing ancestor is resolved).
pub(crate) fn resolve(path: &Path) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(path) {
        return real;
    }
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    // The longest existing ancestor, resolved, with the rest appended.
    let mut rest = Vec::new();
    let mut existing = out.as_path();
    while std::fs::symlink_metadata(existing).is_err() {
        let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else {
            return out;
        };
        rest.push(name.to_os_string());
        existing = parent;
    }
    let mut resolved = std::fs::canonicalize(existing).unwrap_or_else(|_| existing.to_owned());
    for name in rest.into_iter().rev() {
        resolved.push(name);
    }
    resolved
}

/// A variable name as a shell writes it: letters, digits and `_`, not starting with a digit.
pub(crate) fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A project file may confine its servers more, never less: no `confine = false`, no host
/// network, and grants and the working directory only inside `project` (resolved).
pub(crate) fn check_server(
    server: &str,
    transport: &TransportSpec,
    sandbox: &SandboxSpec,
    project: &Path,
    origin: &Origin,
) -> Result<(), ConfigError> {
    let refuse = |what: String| ConfigError::ProjectSandbox {
        path: origin.path.clone(),
        server: server.to_owned(),
        what,
    };
    if !sandbox.confine {
        return Err(refuse("it sets `confine = false`".into()));
    }
    match &sandbox.network {
        NetworkSpec::None => {}
        NetworkSpec::Host => return Err(refuse("it grants the host network".into())),
        // A cloned repository does not choose where its servers may send data.
        NetworkSpec::Allow(_) => {
            return Err(refuse(
                "it grants network access (`network.allow`); allowlists belong in your own \
                 configuration"
                    .into(),
            ));
        }
    }
    // Resource limits: lower than the defaults, never higher.
    for (key, value, default, size) in [
        ("memory", sandbox.memory, DEFAULT_MEMORY, true),
        ("disk", sandbox.disk, DEFAULT_DISK, true),
        ("processes", sandbox.processes, DEFAULT_PROCESSES, false),
    ] {
        if let Some(value) = value.filter(|v| *v > default) {
            let shown = |v| if size { format_size(v) } else { v.to_string() };
            return Err(refuse(format!(
                "it raises `sandbox.{key}` to {} (above the default, {})",
                shown(value),
                shown(default)
            )));
        }
    }
    for path in sandbox.read.iter().chain(&sandbox.write) {
        if !resolve(path).starts_with(project) {
            return Err(refuse(format!(
                "it grants `{}`, which is outside the project `{}`",
                path.display(),
                project.display()
            )));
        }
    }
    if let TransportSpec::Stdio { cwd: Some(cwd), .. } = transport
        && !resolve(cwd).starts_with(project)
    {
        return Err(refuse(format!(
            "its working directory `{}` is outside the project `{}` (a server may read its \
             working directory)",
            cwd.display(),
            project.display()
        )));
    }
    Ok(())
}

/// A VS Code `envFile` named by a project file must lie inside the project: one outside it
/// (your `~/.aws`, another project's `.env`) would hand its contents to the server.
pub(crate) fn check_env_file(
    server: &str,
    path: &Path,
    project: &Path,
    origin: &Origin,
) -> Result<(), ConfigError> {
    let project = resolve(project);
    if resolve(path).starts_with(&project) {
        return Ok(());
    }
    Err(ConfigError::ProjectSandbox {
        path: origin.path.clone(),
        server: server.to_owned(),
        what: format!(
            "its `envFile` `{}` is outside the project `{}` (its variables would reach the \
             server)",
            path.display(),
            project.display()
        ),
    })
}

/// Refuses a project server that reads a variable of the user's environment the user's own
/// files do not allow it (`allowed`), naming every such variable, where it is used, and the
/// table that would allow them. `files` are the local and user files to suggest.
pub(crate) fn check_environment(
    servers: &[ServerSpec],
    allowed: &[EnvAllowance],
    files: Option<(&Path, &Path)>,
) -> Result<(), ConfigError> {
    for server in servers {
        if server.origin.scope != Scope::Project {
            continue;
        }
        let is_allowed = |variable: &str| {
            allowed
                .iter()
                .any(|a| a.server == server.name && a.variable == variable)
        };
        let mut refused: Vec<EnvReference> = server
            .env_references
            .iter()
            .filter(|r| !is_allowed(&r.variable))
            .cloned()
            .collect();
        refused.extend(
            server
                .sandbox
                .env
                .iter()
                .filter(|name| !is_allowed(name))
                .map(|name| EnvReference {
                    variable: name.clone(),
                    field: "sandbox.env".to_owned(),
                }),
        );
        if refused.is_empty() {
            continue;
        }
        return Err(ConfigError::ProjectEnvironment {
            path: server.origin.path.clone(),
            server: server.name.clone(),
            references: refused,
            files: files.map(|(local, user)| (local.to_owned(), user.to_owned())),
        });
    }
    Ok(())
}
