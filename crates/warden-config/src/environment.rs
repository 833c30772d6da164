//! The parts of the process environment configuration depends on, gathered once so that
//! discovery is a pure function of them (and tests can fake them).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::error::ConfigError;

/// Where Warden runs and what it can see: the inputs of discovery and `${VAR}` expansion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Environment {
    /// The working directory, where the project search starts. Must be absolute.
    pub cwd: PathBuf,
    /// The user's home directory (`$HOME`), if known. The project search never goes above it.
    pub home: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME`, or `~/.config`: holds the user-scope files.
    pub config_home: PathBuf,
    /// `$XDG_STATE_HOME`, or `~/.local/state`: holds the local-scope files.
    pub state_home: PathBuf,
    /// Environment variables, for `${VAR}` references (variables that are not UTF-8 are left out).
    pub vars: BTreeMap<String, String>,
}

impl Environment {
    /// Reads the real process environment.
    pub fn from_process() -> Result<Self, ConfigError> {
        let cwd = std::env::current_dir().map_err(|e| {
            ConfigError::Environment(format!("cannot read the working directory: {e}"))
        })?;
        let vars = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        Self::from_vars(cwd, vars)
    }

    /// Derives the directories from `vars` the way [`Environment::from_process`] does:
    /// `HOME`, then `XDG_CONFIG_HOME` / `XDG_STATE_HOME` when set to absolute paths (the XDG
    /// specification says relative ones are to be ignored), else `~/.config` / `~/.local/state`.
    pub fn from_vars(cwd: PathBuf, vars: BTreeMap<String, String>) -> Result<Self, ConfigError> {
        let absolute = |name: &str| {
            vars.get(name)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        let home = absolute("HOME").or_else(|| absolute("USERPROFILE"));
        let xdg = |name: &str, fallback: &[&str]| {
            absolute(name)
                .or_else(|| {
                    home.as_ref()
                        .map(|h| fallback.iter().fold(h.clone(), |dir, part| dir.join(part)))
                })
                .ok_or_else(|| {
                    ConfigError::Environment(format!(
                        "neither {name} nor HOME is set to an absolute path"
                    ))
                })
        };
        let config_home = xdg("XDG_CONFIG_HOME", &[".config"])?;
        let state_home = xdg("XDG_STATE_HOME", &[".local", "state"])?;
        Ok(Self {
            cwd,
            home,
            config_home,
            state_home,
            vars,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn directories_from_home() {
        let env = Environment::from_vars("/w".into(), vars(&[("HOME", "/home/me")])).unwrap();
        assert_eq!(env.home, Some(PathBuf::from("/home/me")));
        assert_eq!(env.config_home, PathBuf::from("/home/me/.config"));
        assert_eq!(env.state_home, PathBuf::from("/home/me/.local/state"));
    }

    #[test]
    fn xdg_wins_when_absolute() {
        let env = Environment::from_vars(
            "/w".into(),
            vars(&[
                ("HOME", "/home/me"),
                ("XDG_CONFIG_HOME", "/cfg"),
                ("XDG_STATE_HOME", "relative/ignored"),
            ]),
        )
        .unwrap();
        assert_eq!(env.config_home, PathBuf::from("/cfg"));
        assert_eq!(env.state_home, PathBuf::from("/home/me/.local/state"));
    }

    #[test]
    fn no_home_and_no_xdg_is_an_error() {
        let err =
            Environment::from_vars("/w".into(), vars(&[("XDG_CONFIG_HOME", "/cfg")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot determine Warden's environment: neither XDG_STATE_HOME nor HOME is set to an absolute path"
        );
    }
}
