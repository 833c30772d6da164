//! The `[policy]` table of `warden.toml`: read per file, restricted in the project scope,
//! checked at load time, and merged across scopes into one [`PolicyConfig`].
//!
//! The shapes are `warden-policy`'s own ([`ServerPolicy`], [`RuleConfig`]); this module
//! only adds where each part was written and the scope rules:
//!
//! - **user, local and `--config` files** may say anything;
//! - **project files** (the working tree, possibly a cloned repository) may only make the
//!   policy stricter: rules whose effect is `deny`, `ask` or `hide`, without opt-ins.
//!   Anything else (`[policy.servers]` trust, labels or declarations, an `allow` rule, an
//!   opt-in) is an error: a repository must never approve its own tool calls;
//! - server settings from the **user** scope are not applied to a server whose definition
//!   comes from the project scope: the user trusted a name, and the repository chose to
//!   give that name to a program of its own. The local scope (the user's per-project file)
//!   can repeat them.

use std::collections::BTreeMap;

use serde::Serialize;
use warden_policy::{Effect, Mode, Policy, PolicyConfig, PolicyError, RuleConfig, ServerPolicy};

use crate::error::{ConfigError, LineCol};
use crate::spec::{Origin, Scope, ServerSpec};

/// The `[policy]` of one file, with the position of each part.
#[derive(Debug, Default)]
pub(crate) struct FilePolicy {
    /// `[policy] mode`, with its position.
    pub mode: Option<(Option<LineCol>, Mode)>,
    /// `[policy.servers.NAME]`, in file order, with the position of the name.
    pub servers: Vec<(String, Option<LineCol>, ServerPolicy)>,
    /// `[[policy.rules]]`, in file order, with the position of each rule.
    pub rules: Vec<(Option<LineCol>, RuleConfig)>,
}

impl FilePolicy {
    /// Applies the scope restriction and compiles the file's rules on their own, so that a
    /// broken rule is reported against its file and position.
    pub(crate) fn check(&self, origin: &Origin) -> Result<(), ConfigError> {
        if origin.scope == Scope::Project {
            self.check_project(origin)?;
        }
        let config = PolicyConfig {
            mode: None,
            servers: BTreeMap::new(),
            rules: self.rules.iter().map(|(_, rule)| rule.clone()).collect(),
        };
        Policy::compile(&config).map(drop).map_err(|error| {
            let at = match &error {
                PolicyError::Rule { index, .. } => self.rules.get(*index).and_then(|r| r.0),
                _ => None,
            };
            ConfigError::InvalidPolicy {
                path: origin.path.clone(),
                at,
                message: error.to_string(),
            }
        })
    }

    fn check_project(&self, origin: &Origin) -> Result<(), ConfigError> {
        let refuse = |at: Option<LineCol>, what: String| ConfigError::ProjectPolicy {
            path: origin.path.clone(),
            at,
            what,
        };
        if let Some((at, mode)) = self.mode
            && mode != Mode::Cautious
        {
            return Err(refuse(
                at,
                format!(
                    "`[policy] mode = \"{}\"` lets calls run without asking",
                    mode.as_str()
                ),
            ));
        }
        if let Some((name, at, _)) = self.servers.first() {
            return Err(refuse(
                *at,
                format!("`[policy.servers.{name}]` sets trust, labels or declared hints"),
            ));
        }
        for (index, (at, rule)) in self.rules.iter().enumerate() {
            if rule.effect == Effect::Allow {
                return Err(refuse(
                    *at,
                    format!("policy.rules[{index}] is an allow rule"),
                ));
            }
            for (flag, set) in [
                ("even_if_tainted", rule.even_if_tainted),
                ("even_if_private", rule.even_if_private),
            ] {
                if set {
                    return Err(refuse(
                        *at,
                        format!("policy.rules[{index}] sets the opt-in `{flag}`"),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Where one part of the merged policy was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PolicySource {
    /// The file (and its scope and format).
    #[serde(flatten)]
    pub origin: Origin,
    /// Where in the file: the rule, or the server's name.
    pub at: Option<LineCol>,
}

impl std::fmt::Display for PolicySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.at {
            Some(at) => write!(f, "{}:{at}", self.origin.path.display()),
            None => write!(f, "{}", self.origin.path.display()),
        }
    }
}

/// Server settings that were written but are not applied, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotApplied {
    /// The server the settings are for.
    pub server: String,
    /// Where they were written.
    pub source: PolicySource,
    /// Why they are not applied, in a sentence.
    pub reason: String,
}

/// The policy of every file read, merged.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ResolvedPolicy {
    /// What `warden_policy::Policy::compile` takes. Rules are those of every file, lowest
    /// precedence first (their order never changes a decision); a server's settings come
    /// whole from the highest-precedence file that has them.
    pub config: PolicyConfig,
    /// Where `config.rules[i]` was written, for every `i`.
    pub rule_sources: Vec<PolicySource>,
    /// Where each entry of `config.servers` was written.
    pub server_sources: BTreeMap<String, PolicySource>,
    /// Where `config.mode` was written (the highest-precedence file that sets it).
    pub mode_source: Option<PolicySource>,
    /// Server settings left out of `config`.
    pub not_applied: Vec<NotApplied>,
}

impl ResolvedPolicy {
    /// Where `policy.rules[index]` (an index into the merged list, as decisions name it)
    /// was written.
    pub fn rule_source(&self, index: usize) -> Option<&PolicySource> {
        self.rule_sources.get(index)
    }

    /// Merges the files' policies, given lowest precedence first, for the winning server
    /// definitions `servers`.
    pub(crate) fn merge(layers: Vec<(Origin, FilePolicy)>, servers: &[ServerSpec]) -> Self {
        let mut merged = ResolvedPolicy::default();
        for (origin, file) in layers {
            if let Some((at, mode)) = file.mode {
                // The highest-precedence file that says it wins; a project file can only
                // say `cautious` (checked when it is read).
                merged.config.mode = Some(mode);
                merged.mode_source = Some(PolicySource {
                    origin: origin.clone(),
                    at,
                });
            }
            for (at, rule) in file.rules {
                merged.config.rules.push(rule);
                merged.rule_sources.push(PolicySource {
                    origin: origin.clone(),
                    at,
                });
            }
            for (name, at, settings) in file.servers {
                merged.config.servers.insert(name.clone(), settings);
                merged.server_sources.insert(
                    name,
                    PolicySource {
                        origin: origin.clone(),
                        at,
                    },
                );
            }
        }
        // Trust given to a name in the user scope is not inherited by a program a project
        // file puts under that name.
        let project_defined: Vec<(&str, &Origin)> = servers
            .iter()
            .filter(|spec| spec.origin.scope == Scope::Project)
            .map(|spec| (spec.name.as_str(), &spec.origin))
            .collect();
        for (name, definition) in project_defined {
            let from_user = merged
                .server_sources
                .get(name)
                .is_some_and(|source| source.origin.scope == Scope::User);
            if !from_user {
                continue;
            }
            merged.config.servers.remove(name);
            if let Some(source) = merged.server_sources.remove(name) {
                merged.not_applied.push(NotApplied {
                    server: name.to_owned(),
                    source,
                    reason: format!(
                        "server `{name}` is defined by the project file {}, and settings \
                         from the user scope are not applied to a server a project defines \
                         (a repository could otherwise take over the trust given to a \
                         name); repeat them in this project's local file to apply them",
                        definition.path.display()
                    ),
                });
            }
        }
        merged
    }
}
