//! The outcome of loading configuration, and the merge that produces it.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::agent::{AgentConfig, ModelConfig};
use crate::error::ConfigError;
use crate::formats::Parsed;
use crate::host::HostConfig;
use crate::policy::ResolvedPolicy;
use crate::spec::{EnvAllowance, Origin, Scope, ServerSpec};

/// Every server Warden will know about, and where each came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResolvedConfig {
    /// The winning definition of each server, sorted by name.
    pub servers: Vec<ServerSpec>,
    /// Every file that was read, in precedence order: lowest first, so a server in a later
    /// file replaces one of the same name in an earlier file.
    pub files: Vec<Origin>,
    /// Definitions replaced by a higher-precedence one, sorted by name.
    pub shadowed: Vec<Shadowed>,
    /// The `[policy]` of every file, merged (see [`ResolvedPolicy`]).
    pub policy: ResolvedPolicy,
    /// The `[model]` of every file, merged key by key (see [`ModelConfig`]).
    pub model: ModelConfig,
    /// The `[agent]` of every file, merged key by key (see [`AgentConfig`]).
    pub agent: AgentConfig,
    /// The variables of your environment that servers from project files may read, from
    /// `[project_servers.NAME] env` in your user, local or `--config` file.
    pub project_env: Vec<EnvAllowance>,
    /// The `[serve]` of the user's own files, merged key by key (see [`ServeConfig`]).
    pub serve: crate::serve::ServeConfig,
    /// The `[host]` of the user's own files, merged key by key (see [`HostConfig`]).
    pub host: HostConfig,
}

/// A server definition hidden by another of the same name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shadowed {
    /// The server name both definitions use.
    pub name: String,
    /// Where the hidden (unused) definition is.
    pub hidden: Origin,
    /// Where the definition actually used is.
    pub winner: Origin,
}

/// Merges files given lowest precedence first. A later definition replaces an earlier one
/// entirely (fields are never combined), and every replaced one is reported against the
/// definition that is finally used. Policies are merged by [`ResolvedPolicy::merge`], the
/// `[model]` and `[agent]` tables by `agent::merge` (which can refuse the merged result).
///
/// A server from a project file that reads a variable of the user's environment not
/// allowed by `[project_servers.NAME] env` in a user, local or `--config` file is an error
/// (see [`crate::project::check_environment`]); `suggest` are the local and user files the
/// message names.
pub(crate) fn merge(
    layers: Vec<(Origin, Parsed)>,
    suggest: Option<(&std::path::Path, &std::path::Path)>,
) -> Result<ResolvedConfig, ConfigError> {
    let mut winners: BTreeMap<String, ServerSpec> = BTreeMap::new();
    let mut hidden: BTreeMap<String, Vec<Origin>> = BTreeMap::new();
    let mut files = Vec::with_capacity(layers.len());
    let mut policies = Vec::with_capacity(layers.len());
    let mut settings = Vec::with_capacity(layers.len());
    let mut project_env = Vec::new();
    let mut serve = Vec::new();
    let mut host = Vec::new();
    for (origin, parsed) in layers {
        serve.extend(parsed.serve);
        host.extend(parsed.host);
        if origin.scope != Scope::Project {
            project_env.extend(parsed.project_env);
        }
        policies.push((origin.clone(), parsed.policy));
        settings.push((origin.clone(), parsed.settings));
        files.push(origin);
        for server in parsed.servers {
            if let Some(previous) = winners.insert(server.name.clone(), server) {
                hidden
                    .entry(previous.name)
                    .or_default()
                    .push(previous.origin);
            }
        }
    }
    let shadowed = hidden
        .into_iter()
        .flat_map(|(name, origins)| {
            let winner = winners.get(&name).map(|s| s.origin.clone());
            origins.into_iter().filter_map(move |hidden| {
                Some(Shadowed {
                    name: name.clone(),
                    hidden,
                    winner: winner.clone()?,
                })
            })
        })
        .collect();
    let servers: Vec<ServerSpec> = winners.into_values().collect();
    crate::project::check_environment(&servers, &project_env, suggest)?;
    let policy = ResolvedPolicy::merge(policies, &servers);
    let (model, agent) = crate::agent::merge(settings)?;
    Ok(ResolvedConfig {
        servers,
        files,
        shadowed,
        policy,
        model,
        agent,
        project_env,
        serve: crate::serve::merge(serve),
        host: crate::host::merge(host),
    })
}
