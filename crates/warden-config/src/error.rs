//! The one error type of this crate, and the positions it reports.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// A position in a text file: 1-based line and 1-based column (counted in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LineCol {
    /// Line number, starting at 1.
    pub line: usize,
    /// Column number, starting at 1.
    pub column: usize,
}

impl LineCol {
    /// The position of byte `offset` in `text` (clamped to the text's end).
    pub(crate) fn at_offset(text: &str, offset: usize) -> Self {
        let mut end = offset.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let before = &text[..end];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Self {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }
}

impl fmt::Display for LineCol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// Renders `path` or `path:line:column`, the prefix of every file error.
struct Place<'a>(&'a Path, &'a Option<LineCol>);

impl fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1 {
            Some(at) => write!(f, "{}:{at}", self.0.display()),
            None => write!(f, "{}", self.0.display()),
        }
    }
}

fn place<'a>(path: &'a Path, at: &'a Option<LineCol>) -> Place<'a> {
    Place(path, at)
}

/// Everything that can go wrong while finding, reading and interpreting configuration.
///
/// Every variant about a file names it, and gives `line:column` when the position is known,
/// so the message alone is enough to fix the problem.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The process environment cannot be used (no working directory, or no way to find the
    /// configuration and state directories).
    #[error("cannot determine Warden's environment: {0}")]
    Environment(String),

    /// A file exists (or was named explicitly) but could not be read.
    #[error("{}: cannot read the file: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },

    /// A file is larger than Warden is willing to read.
    #[error("{}: the file is larger than the {limit}-byte limit for configuration files", .path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit, in bytes.
        limit: u64,
    },

    /// A file is not UTF-8 text.
    #[error("{}: the file is not valid UTF-8 text", place(.path, .at))]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// Where the first invalid byte is.
        at: Option<LineCol>,
    },

    /// A file is not valid TOML/JSON, or does not have the expected shape (unknown key,
    /// wrong type, zero timeout, ...).
    #[error("{}: {message}", place(.path, .at))]
    Parse {
        /// The file.
        path: PathBuf,
        /// Where the problem is.
        at: Option<LineCol>,
        /// What is wrong.
        message: String,
    },

    /// A server name does not follow the naming rule.
    #[error("{}: invalid server name {name:?}: {reason}", place(.path, .at))]
    InvalidName {
        /// The file.
        path: PathBuf,
        /// Where the name is.
        at: Option<LineCol>,
        /// The offending name.
        name: String,
        /// Which rule it breaks.
        reason: String,
    },

    /// The same server name appears twice in one file.
    #[error("{}: server `{name}` is defined more than once in this file", place(.path, .at))]
    DuplicateServer {
        /// The file.
        path: PathBuf,
        /// Where the second definition is.
        at: Option<LineCol>,
        /// The repeated name.
        name: String,
    },

    /// A server definition is incomplete or contradictory.
    #[error("{}: server `{server}`: {message}", place(.path, .at))]
    InvalidServer {
        /// The file.
        path: PathBuf,
        /// Where the server is defined.
        at: Option<LineCol>,
        /// The server's name.
        server: String,
        /// What is wrong.
        message: String,
    },

    /// A `${VAR}` reference names a variable that is not set, and gives no default.
    #[error(
        "{}: server `{server}`: environment variable `{variable}` is not set and the reference gives no default (write `${{{variable}:-default}}` to provide one)",
        place(.path, .at)
    )]
    UnsetVariable {
        /// The file.
        path: PathBuf,
        /// Where the server is defined.
        at: Option<LineCol>,
        /// The server's name.
        server: String,
        /// The missing variable.
        variable: String,
    },

    /// A VS Code `${input:ID}` reference: VS Code prompts the user for these, Warden cannot.
    #[error(
        "{}: server `{server}`: `${{input:{id}}}` is a VS Code prompted input, which Warden does not support; put the value in an environment variable and write `${{env:NAME}}` instead",
        place(.path, .at)
    )]
    PromptedInput {
        /// The file.
        path: PathBuf,
        /// Where the server is defined.
        at: Option<LineCol>,
        /// The server's name.
        server: String,
        /// The input's id.
        id: String,
    },

    /// A `[policy]` rule that cannot be compiled (a bad glob, pointer, regex or path).
    #[error("{}: {message}", place(.path, .at))]
    InvalidPolicy {
        /// The file.
        path: PathBuf,
        /// Where the rule is.
        at: Option<LineCol>,
        /// What is wrong, naming the rule (`policy.rules[2]: ...`, numbered in this file).
        message: String,
    },

    /// A project-scope file tries to loosen the policy.
    #[error(
        "{}: {what}, but project files cannot loosen policy: a cloned repository must not approve its own tool calls. A project file may only add rules whose effect is \"deny\", \"ask\" or \"hide\"; write this in your user or local configuration instead (docs/policy.md)",
        place(.path, .at)
    )]
    ProjectPolicy {
        /// The file.
        path: PathBuf,
        /// Where the offending part is.
        at: Option<LineCol>,
        /// What the file tries to do.
        what: String,
    },

    /// A project-scope file tries to widen a server's confinement.
    #[error(
        "{}: server `{server}`: {what}, but project files cannot loosen confinement beyond the project: a cloned repository must not grant its own servers more; write this in your user or local configuration instead (docs/config.md)",
        .path.display()
    )]
    ProjectSandbox {
        /// The file.
        path: PathBuf,
        /// The server.
        server: String,
        /// What the file tries to do.
        what: String,
    },

    /// A project-scope server reads variables of the user's environment that the user's own
    /// files do not allow it (`[project_servers.NAME] env`).
    #[error("{}", project_environment(.path, .server, .references, .files))]
    ProjectEnvironment {
        /// The project file.
        path: PathBuf,
        /// The server.
        server: String,
        /// Every variable it reads without permission, and where.
        references: Vec<crate::spec::EnvReference>,
        /// The local and the user file that could allow them, when known.
        files: Option<(PathBuf, PathBuf)>,
    },

    /// A `[model]` or `[agent]` value that is out of range or malformed.
    #[error("{}: `{key}`: {message}", place(.path, .at))]
    InvalidSetting {
        /// The file.
        path: PathBuf,
        /// Where the value is.
        at: Option<LineCol>,
        /// The key, with its table (`agent.max_turns`).
        key: String,
        /// What is wrong.
        message: String,
    },

    /// A project-scope file sets a `[model]` or `[agent]` key only the user may set.
    #[error(
        "{}: `{key}`: {reason}; set it in your user or local configuration instead (docs/config.md)",
        place(.path, .at)
    )]
    ProjectSetting {
        /// The file.
        path: PathBuf,
        /// Where the value is.
        at: Option<LineCol>,
        /// The key, with its table (`model.base_url`).
        key: String,
        /// Why a project file may not set it.
        reason: String,
    },

    /// A file given with `--config` whose format cannot be recognised.
    #[error("{}: cannot tell which configuration format this is: {reason}", .path.display())]
    UnknownFormat {
        /// The file.
        path: PathBuf,
        /// Why detection failed.
        reason: String,
    },
}

impl ConfigError {
    /// The file this error is about, if it is about one.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Self::Environment(_) => None,
            Self::Read { path, .. }
            | Self::TooLarge { path, .. }
            | Self::NotUtf8 { path, .. }
            | Self::Parse { path, .. }
            | Self::InvalidName { path, .. }
            | Self::DuplicateServer { path, .. }
            | Self::InvalidServer { path, .. }
            | Self::UnsetVariable { path, .. }
            | Self::PromptedInput { path, .. }
            | Self::InvalidPolicy { path, .. }
            | Self::ProjectPolicy { path, .. }
            | Self::ProjectSandbox { path, .. }
            | Self::ProjectEnvironment { path, .. }
            | Self::InvalidSetting { path, .. }
            | Self::ProjectSetting { path, .. }
            | Self::UnknownFormat { path, .. } => Some(path),
        }
    }
}

/// The message of [`ConfigError::ProjectEnvironment`]: what is read, why that is refused,
/// and the exact table that allows it.
fn project_environment(
    path: &Path,
    server: &str,
    references: &[crate::spec::EnvReference],
    files: &Option<(PathBuf, PathBuf)>,
) -> String {
    let uses: Vec<String> = references
        .iter()
        .map(|r| {
            if r.field == "sandbox.env" {
                format!("`sandbox.env` passes `{}`", r.variable)
            } else {
                format!("`${{{}}}` in `{}`", r.variable, r.field)
            }
        })
        .collect();
    let mut names: Vec<&str> = references.iter().map(|r| r.variable.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    let place = match files {
        Some((local, user)) => format!(
            "to your local file for this project, {} (or to your user file, {}, for every \
             project)",
            local.display(),
            user.display()
        ),
        None => "to your local or user `warden.toml`".to_owned(),
    };
    format!(
        "{}: server `{server}` reads your environment: {}. A server a project file defines \
         (perhaps a cloned repository's) gets no variable of your environment unless you \
         allow it by name. If you trust this server with {}, add this {place}:\n\n    \
         [project_servers.{server}]\n    env = [{}]\n\nand approve it with `warden approve \
         {server}` (docs/config.md, \"Project files\")",
        path.display(),
        uses.join(", "),
        names.join(", "),
        quoted.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_become_line_and_column() {
        let text = "ab\ncdé\nf";
        assert_eq!(LineCol::at_offset(text, 0), LineCol { line: 1, column: 1 });
        assert_eq!(LineCol::at_offset(text, 3), LineCol { line: 2, column: 1 });
        // 'é' is two bytes but one column.
        assert_eq!(LineCol::at_offset(text, 7), LineCol { line: 2, column: 4 });
        assert_eq!(LineCol::at_offset(text, 99), LineCol { line: 3, column: 2 });
    }

    #[test]
    fn messages_start_with_the_place() {
        let err = ConfigError::Parse {
            path: PathBuf::from("/x/warden.toml"),
            at: Some(LineCol { line: 3, column: 7 }),
            message: "bad".into(),
        };
        assert_eq!(err.to_string(), "/x/warden.toml:3:7: bad");
        let err = ConfigError::UnsetVariable {
            path: PathBuf::from("/p/.mcp.json"),
            at: None,
            server: "gh".into(),
            variable: "TOKEN".into(),
        };
        assert_eq!(
            err.to_string(),
            "/p/.mcp.json: server `gh`: environment variable `TOKEN` is not set and the reference gives no default (write `${TOKEN:-default}` to provide one)"
        );
    }
}
