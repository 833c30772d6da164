//! Variable references inside configuration values.
//!
//! Two syntaxes exist in the wild:
//! - `${VAR}` and `${VAR:-default}` (Claude Code, and Warden's own TOML);
//! - VS Code's `${workspaceFolder}`, `${env:VAR}`, `${input:ID}` and friends.
//!
//! Claude Desktop performs no substitution, so its values are taken literally.

use std::collections::BTreeMap;
use std::path::Path;

/// Why a value could not be expanded. The caller adds the file and server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ExpandError {
    /// `${VAR}` (or `${env:VAR}`) with `VAR` unset and no default.
    Unset(String),
    /// `${input:ID}`: a value VS Code would prompt for.
    Input(String),
    /// A reference Warden cannot interpret; the string explains.
    Invalid(String),
}

/// Which syntax a file uses, with what it needs to resolve references.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Expander<'a> {
    /// No substitution at all (Claude Desktop).
    Literal,
    /// `${VAR}` / `${VAR:-default}`. With `escape`, `$${` stands for a literal `${`.
    Shell {
        vars: &'a BTreeMap<String, String>,
        escape: bool,
    },
    /// VS Code's predefined variables.
    VsCode {
        vars: &'a BTreeMap<String, String>,
        workspace: &'a Path,
        home: Option<&'a Path>,
    },
}

impl Expander<'_> {
    /// Replaces every reference in `input`.
    #[cfg(test)]
    pub(crate) fn expand(&self, input: &str) -> Result<String, ExpandError> {
        self.expand_noting(input, &mut Vec::new())
    }

    /// Replaces every reference in `input`, adding to `used` the name of every variable of
    /// Warden's environment a reference reads (`${userHome}` reads `HOME`), whether it was
    /// set or a default was taken: the value depends on the environment either way.
    pub(crate) fn expand_noting(
        &self,
        input: &str,
        used: &mut Vec<String>,
    ) -> Result<String, ExpandError> {
        if matches!(self, Self::Literal) {
            return Ok(input.to_owned());
        }
        let escape = matches!(self, Self::Shell { escape: true, .. });
        let mut out = String::with_capacity(input.len());
        let mut rest = input;
        while let Some(dollar) = rest.find('$') {
            out.push_str(&rest[..dollar]);
            let after = &rest[dollar + 1..];
            if escape && after.starts_with("${") {
                out.push_str("${");
                rest = &after[2..];
            } else if let Some(body_and_rest) = after.strip_prefix('{') {
                let close = body_and_rest.find('}').ok_or_else(|| {
                    // The value itself is not echoed: it may be a header holding a secret.
                    ExpandError::Invalid("a `${` has no closing `}`".to_owned())
                })?;
                out.push_str(&self.resolve(&body_and_rest[..close], used)?);
                rest = &body_and_rest[close + 1..];
            } else {
                out.push('$');
                rest = after;
            }
        }
        out.push_str(rest);
        Ok(out)
    }

    fn resolve(&self, body: &str, used: &mut Vec<String>) -> Result<String, ExpandError> {
        match *self {
            Self::Literal => Ok(format!("${{{body}}}")),
            Self::Shell { vars, .. } => resolve_shell(body, vars, used),
            Self::VsCode {
                vars,
                workspace,
                home,
            } => resolve_vscode(body, vars, workspace, home, used),
        }
    }
}

fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn resolve_shell(
    body: &str,
    vars: &BTreeMap<String, String>,
    used: &mut Vec<String>,
) -> Result<String, ExpandError> {
    let (name, default) = match body.split_once(":-") {
        Some((name, default)) => (name, Some(default)),
        None => (body, None),
    };
    if !is_var_name(name) {
        return Err(ExpandError::Invalid(format!(
            "`${{{body}}}` is not a variable reference; expected `${{NAME}}` or `${{NAME:-default}}`"
        )));
    }
    if default.is_some_and(|d| d.contains("${")) {
        return Err(ExpandError::Invalid(format!(
            "`${{{body}}}`: a default cannot contain another reference"
        )));
    }
    used.push(name.to_owned());
    // As in a POSIX shell, `:-` also replaces a variable that is set but empty.
    match (vars.get(name), default) {
        (Some(value), Some(default)) if value.is_empty() => Ok(default.to_owned()),
        (Some(value), _) => Ok(value.clone()),
        (None, Some(default)) => Ok(default.to_owned()),
        (None, None) => Err(ExpandError::Unset(name.to_owned())),
    }
}

fn resolve_vscode(
    body: &str,
    vars: &BTreeMap<String, String>,
    workspace: &Path,
    home: Option<&Path>,
    used: &mut Vec<String>,
) -> Result<String, ExpandError> {
    if let Some(name) = body.strip_prefix("env:") {
        used.push(name.to_owned());
        return vars
            .get(name)
            .cloned()
            .ok_or_else(|| ExpandError::Unset(name.to_owned()));
    }
    if let Some(id) = body.strip_prefix("input:") {
        return Err(ExpandError::Input(id.to_owned()));
    }
    match body {
        "workspaceFolder" => Ok(workspace.display().to_string()),
        "workspaceFolderBasename" => Ok(workspace
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()),
        "userHome" => {
            used.push("HOME".to_owned());
            home.map(|h| h.display().to_string()).ok_or_else(|| {
                ExpandError::Invalid("`${userHome}` is used but HOME is not set".to_owned())
            })
        }
        "pathSeparator" | "/" => Ok(std::path::MAIN_SEPARATOR.to_string()),
        _ => Err(ExpandError::Invalid(format!(
            "`${{{body}}}` is not supported; Warden understands `${{workspaceFolder}}`, `${{workspaceFolderBasename}}`, `${{userHome}}`, `${{pathSeparator}}` and `${{env:NAME}}`"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> BTreeMap<String, String> {
        BTreeMap::from([
            ("TOKEN".to_owned(), "s3cret".to_owned()),
            ("EMPTY".to_owned(), String::new()),
        ])
    }

    #[test]
    fn shell_references() {
        let vars = vars();
        let x = Expander::Shell {
            vars: &vars,
            escape: false,
        };
        assert_eq!(x.expand("Bearer ${TOKEN}").as_deref(), Ok("Bearer s3cret"));
        assert_eq!(x.expand("${MISSING:-dflt}/x").as_deref(), Ok("dflt/x"));
        assert_eq!(x.expand("${TOKEN:-dflt}").as_deref(), Ok("s3cret"));
        assert_eq!(x.expand("${EMPTY:-dflt}").as_deref(), Ok("dflt"));
        assert_eq!(x.expand("${EMPTY}").as_deref(), Ok(""));
        assert_eq!(x.expand("${MISSING:-}").as_deref(), Ok(""));
        assert_eq!(
            x.expand("$TOKEN costs $5").as_deref(),
            Ok("$TOKEN costs $5")
        );
        assert_eq!(x.expand("a$${TOKEN}").as_deref(), Ok("a$s3cret"));
        assert_eq!(
            x.expand("${MISSING}"),
            Err(ExpandError::Unset("MISSING".to_owned()))
        );
        assert!(matches!(x.expand("${TOKEN"), Err(ExpandError::Invalid(_))));
        assert!(matches!(x.expand("${1A}"), Err(ExpandError::Invalid(_))));
        assert!(matches!(
            x.expand("${A:-${B}}"),
            Err(ExpandError::Invalid(_))
        ));
    }

    #[test]
    fn escape_only_when_asked() {
        let vars = vars();
        let x = Expander::Shell {
            vars: &vars,
            escape: true,
        };
        assert_eq!(
            x.expand("$${TOKEN} ${TOKEN}").as_deref(),
            Ok("${TOKEN} s3cret")
        );
    }

    #[test]
    fn references_to_the_environment_are_noted() {
        let vars = vars();
        let shell = Expander::Shell {
            vars: &vars,
            escape: true,
        };
        let mut used = Vec::new();
        let value = shell
            .expand_noting("${TOKEN} ${MISSING:-x} $${LITERAL} $PLAIN", &mut used)
            .unwrap();
        assert_eq!(value, "s3cret x ${LITERAL} $PLAIN");
        assert_eq!(used, ["TOKEN", "MISSING"]);
        let vscode = Expander::VsCode {
            vars: &vars,
            workspace: Path::new("/src/proj"),
            home: Some(Path::new("/home/me")),
        };
        let mut used = Vec::new();
        vscode
            .expand_noting("${workspaceFolder} ${userHome} ${env:TOKEN}", &mut used)
            .unwrap();
        assert_eq!(used, ["HOME", "TOKEN"]);
        let mut used = Vec::new();
        Expander::Literal
            .expand_noting("${TOKEN}", &mut used)
            .unwrap();
        assert!(used.is_empty());
    }

    #[test]
    fn literal_keeps_everything() {
        assert_eq!(
            Expander::Literal.expand("${TOKEN} ${input:x}").as_deref(),
            Ok("${TOKEN} ${input:x}")
        );
    }

    #[test]
    fn vscode_references() {
        let vars = vars();
        let x = Expander::VsCode {
            vars: &vars,
            workspace: Path::new("/src/proj"),
            home: Some(Path::new("/home/me")),
        };
        assert_eq!(
            x.expand("${workspaceFolder}/bin:${workspaceFolderBasename}")
                .as_deref(),
            Ok("/src/proj/bin:proj")
        );
        assert_eq!(x.expand("${userHome}${/}x").as_deref(), Ok("/home/me/x"));
        assert_eq!(x.expand("${env:TOKEN}").as_deref(), Ok("s3cret"));
        assert_eq!(
            x.expand("${env:NOPE}"),
            Err(ExpandError::Unset("NOPE".to_owned()))
        );
        assert_eq!(
            x.expand("${input:api-key}"),
            Err(ExpandError::Input("api-key".to_owned()))
        );
        assert!(matches!(
            x.expand("${config:editor.fontSize}"),
            Err(ExpandError::Invalid(_))
        ));
        // VS Code has no `${VAR}` form: a bare name is an unknown variable, not an env lookup.
        assert!(matches!(x.expand("${TOKEN}"), Err(ExpandError::Invalid(_))));
    }
}
