//! Warden's own format, `warden.toml`: strict (unknown keys are errors) and the only one
//! carrying Warden-specific settings (timeouts, protocol era, message size cap).

use std::collections::BTreeMap;
use std::num::NonZeroUsize;

use serde::Deserialize;
use toml::Spanned;

use super::{Context, Draft, Entries, build_all, directory_of};
use crate::Environment;
use crate::duration::TimeoutValue;
use crate::error::{ConfigError, LineCol};
use crate::expand::Expander;
use crate::spec::{EraPreference, Origin, ServerSpec, Timeouts};

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a Warden configuration table")]
struct WardenFile {
    #[serde(default)]
    servers: Entries<Spanned<String>, WardenServer>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a server table")]
struct WardenServer {
    command: Option<String>,
    args: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
    cwd: Option<String>,
    url: Option<String>,
    headers: Option<BTreeMap<String, String>>,
    era: Option<EraPreference>,
    max_message_bytes: Option<NonZeroUsize>,
    timeout: Option<WardenTimeouts>,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table with `connect` and/or `call`"
)]
struct WardenTimeouts {
    connect: Option<TimeoutValue>,
    call: Option<TimeoutValue>,
}

/// Parses one Warden TOML file.
pub(crate) fn parse(
    text: &str,
    origin: &Origin,
    env: &Environment,
) -> Result<Vec<ServerSpec>, ConfigError> {
    let file: WardenFile = toml::from_str(text).map_err(|e| ConfigError::Parse {
        path: origin.path.clone(),
        at: e.span().map(|span| LineCol::at_offset(text, span.start)),
        message: e.message().to_owned(),
    })?;
    let cx = Context {
        origin,
        expander: Expander::Shell {
            vars: &env.vars,
            escape: true,
        },
        base_dir: directory_of(&origin.path),
    };
    let drafts = file
        .servers
        .0
        .into_iter()
        .map(|(name, server)| {
            let at = Some(LineCol::at_offset(text, name.span().start));
            let defaults = Timeouts::default();
            let timeouts = server.timeout.map(|t| Timeouts {
                connect: t.connect.map_or(defaults.connect, |v| v.0),
                call: t.call.map_or(defaults.call, |v| v.0),
            });
            Draft {
                name: name.into_inner(),
                at,
                command: server.command,
                args: server.args,
                env: server.env,
                cwd: server.cwd,
                url: server.url,
                headers: server.headers,
                timeouts,
                era: server.era,
                max_message_bytes: server.max_message_bytes.map(NonZeroUsize::get),
                ..Draft::default()
            }
        })
        .collect();
    build_all(drafts, &cx)
}
