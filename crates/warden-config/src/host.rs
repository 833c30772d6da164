//! The `[host]` table of `warden.toml`: how the host core starts servers (docs/config.md).
//!
//! Only the user's own files (user, local, `--config`) may set it, like `[serve]`: how many
//! servers start at once is a property of the user's machine, not of a repository. Files
//! are merged key by key, a later file winning; unset means the host's default.

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::error::{ConfigError, LineCol};
use crate::spec::{Origin, Scope};

/// The most servers `max_parallel_starts` may let start at once.
pub const MAX_PARALLEL_STARTS: u64 = 1024;

/// `[host]`, merged across files.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HostConfig {
    /// The most servers starting at once (spawn, handshake, first tool list); the others
    /// wait their turn in order. `None`: the machine's available parallelism.
    pub max_parallel_starts: Option<u64>,
    /// `idle_stop` for servers that set none: a server unused this long is stopped.
    /// `None`: servers keep running until the command ends.
    #[serde(serialize_with = "crate::spec::optional_ms")]
    pub idle_stop: Option<std::time::Duration>,
}

/// `[host]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a host table")]
pub(crate) struct HostTable {
    max_parallel_starts: Option<Spanned<u64>>,
    idle_stop: Option<crate::duration::TimeoutValue>,
}

/// Reads one file's `[host]`.
pub(crate) fn read(
    table: Option<Spanned<HostTable>>,
    text: &str,
    origin: &Origin,
) -> Result<Option<HostConfig>, ConfigError> {
    let Some(table) = table else {
        return Ok(None);
    };
    if origin.scope == Scope::Project {
        return Err(ConfigError::ProjectSetting {
            path: origin.path.clone(),
            at: Some(LineCol::at_offset(text, table.span().start)),
            key: "host".into(),
            reason: "a project file may not configure how Warden starts servers (set `[host]` \
                     in your own warden.toml)"
                .into(),
        });
    }
    let table = table.into_inner();
    let max_parallel_starts = match table.max_parallel_starts {
        Some(value) if !(1..=MAX_PARALLEL_STARTS).contains(value.get_ref()) => {
            return Err(ConfigError::InvalidSetting {
                path: origin.path.clone(),
                at: Some(LineCol::at_offset(text, value.span().start)),
                key: "host.max_parallel_starts".into(),
                message: format!("must be between 1 and {MAX_PARALLEL_STARTS}"),
            });
        }
        other => other.map(Spanned::into_inner),
    };
    Ok(Some(HostConfig {
        max_parallel_starts,
        idle_stop: table.idle_stop.map(|t| t.0),
    }))
}

/// Merges files given lowest precedence first: a later file's keys win, one by one.
pub(crate) fn merge(layers: Vec<HostConfig>) -> HostConfig {
    let mut merged = HostConfig::default();
    for layer in layers {
        merged.max_parallel_starts = layer.max_parallel_starts.or(merged.max_parallel_starts);
        merged.idle_stop = layer.idle_stop.or(merged.idle_stop);
    }
    merged
}
