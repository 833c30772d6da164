//! Warden's own format, `warden.toml`: strict (unknown keys are errors) and the only one
//! carrying Warden-specific settings (timeouts, protocol era, message size cap), the
//! `[policy]` table and the `[model]` and `[agent]` tables.

use std::collections::BTreeMap;
use std::num::{NonZeroU32, NonZeroUsize};

use serde::Deserialize;
use toml::Spanned;
use warden_policy::{Mode, RuleConfig, ServerPolicy};

use super::{Context, Draft, Entries, Parsed, SandboxDraft, build_all, directory_of};
use crate::Environment;
use crate::agent::{AgentTable, ModelTable};
use crate::duration::TimeoutValue;
use crate::error::{ConfigError, LineCol};
use crate::expand::Expander;
use crate::name::validate_server_name;
use crate::policy::FilePolicy;
use crate::size::SizeText;
use crate::spec::{
    EnvAllowance, EraPreference, HttpSettings, NetworkSpec, OAuthSpec, Origin, ReconnectSpec,
    Scope, Timeouts, TokenStoreChoice,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a Warden configuration table")]
struct WardenFile {
    #[serde(default)]
    servers: Entries<Spanned<String>, WardenServer>,
    #[serde(default)]
    policy: Option<PolicyTable>,
    #[serde(default)]
    model: Option<ModelTable>,
    #[serde(default)]
    agent: Option<AgentTable>,
    #[serde(default)]
    serve: Option<Spanned<crate::serve::ServeTable>>,
    #[serde(default)]
    host: Option<Spanned<crate::host::HostTable>>,
    #[serde(default)]
    project_servers: Entries<Spanned<String>, ProjectServerTable>,
    #[serde(default)]
    relays: Entries<Spanned<String>, RelayTable>,
}

/// `[relays.NAME]`: the channel into a sandbox (docs/relay.md).
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table with `command`, `secrets` and/or `reconnect`"
)]
struct RelayTable {
    command: Vec<String>,
    /// Server name to a file of `NAME=value` lines.
    #[serde(default)]
    secrets: BTreeMap<String, String>,
    reconnect: Option<WardenReconnect>,
}

/// `[project_servers.NAME]` (user, local and `--config` files only).
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table with `env`")]
struct ProjectServerTable {
    #[serde(default)]
    env: Vec<Spanned<String>>,
}

/// `[policy]`: `warden_policy::PolicyConfig`'s shape, with positions kept for messages.
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a policy table with `mode`, `servers` and/or `rules`"
)]
struct PolicyTable {
    #[serde(default)]
    mode: Option<Spanned<Mode>>,
    #[serde(default)]
    servers: Entries<Spanned<String>, ServerPolicy>,
    #[serde(default)]
    rules: Vec<Spanned<RuleConfig>>,
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
    /// `"http"` (the default for a `url`) or `"sse"` (the deprecated HTTP+SSE transport).
    transport: Option<String>,
    allow_http: Option<bool>,
    reconnect: Option<WardenReconnect>,
    oauth: Option<WardenOAuth>,
    era: Option<EraPreference>,
    max_message_bytes: Option<NonZeroUsize>,
    timeout: Option<WardenTimeouts>,
    confine: Option<bool>,
    sandbox: Option<WardenSandbox>,
    /// `relay = "NAME"`: the server runs inside the sandbox `[relays.NAME]` reaches.
    relay: Option<String>,
    /// `start = "lazy" | "eager"`.
    start: Option<crate::spec::StartMode>,
    /// `idle_stop = "10m"`.
    idle_stop: Option<TimeoutValue>,
}

/// `[servers.NAME.sandbox]`.
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table with `read`, `write`, `network`, `env`, `memory`, `processes` and/or `disk`"
)]
struct WardenSandbox {
    #[serde(default)]
    read: Vec<String>,
    #[serde(default)]
    write: Vec<String>,
    network: Option<NetworkSpec>,
    #[serde(default)]
    env: Vec<String>,
    memory: Option<SizeText>,
    processes: Option<u64>,
    disk: Option<SizeText>,
}

/// `[servers.NAME.oauth]`.
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table with `client_id`, `client_secret`, `issuer`, `client_metadata_url` and/or `token_store`"
)]
struct WardenOAuth {
    client_id: Option<String>,
    client_secret: Option<String>,
    issuer: Option<String>,
    client_metadata_url: Option<String>,
    token_store: Option<TokenStoreChoice>,
}

/// `[servers.NAME.reconnect]`.
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table with `connect_attempts`, `attempts`, `initial_delay` and/or `max_delay`"
)]
struct WardenReconnect {
    connect_attempts: Option<NonZeroU32>,
    attempts: Option<u32>,
    initial_delay: Option<TimeoutValue>,
    max_delay: Option<TimeoutValue>,
}

impl WardenReconnect {
    fn resolve(self) -> ReconnectSpec {
        let defaults = ReconnectSpec::default();
        ReconnectSpec {
            connect_attempts: self
                .connect_attempts
                .map_or(defaults.connect_attempts, NonZeroU32::get),
            attempts: self.attempts.unwrap_or(defaults.attempts),
            initial_delay: self.initial_delay.map_or(defaults.initial_delay, |v| v.0),
            max_delay: self.max_delay.map_or(defaults.max_delay, |v| v.0),
        }
    }
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
pub(crate) fn parse(text: &str, origin: &Origin, env: &Environment) -> Result<Parsed, ConfigError> {
    let file: WardenFile = toml::from_str(text).map_err(|e| ConfigError::Parse {
        path: origin.path.clone(),
        at: e.span().map(|span| LineCol::at_offset(text, span.start)),
        message: e.message().to_owned(),
    })?;
    let cx = Context::new(
        origin,
        Expander::Shell {
            vars: &env.vars,
            escape: true,
        },
        directory_of(&origin.path),
    );
    let relays = relays(file.relays, text, origin, &cx)?;
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
            let sandbox = match (server.confine, server.sandbox) {
                (None, None) => None,
                (confine, table) => {
                    let table = table.unwrap_or(WardenSandbox {
                        read: Vec::new(),
                        write: Vec::new(),
                        network: None,
                        env: Vec::new(),
                        memory: None,
                        processes: None,
                        disk: None,
                    });
                    Some(SandboxDraft {
                        confine,
                        read: table.read,
                        write: table.write,
                        network: table.network,
                        env: table.env,
                        memory: table.memory,
                        processes: table.processes,
                        disk: table.disk,
                    })
                }
            };
            let http_settings = match (server.allow_http, server.reconnect, server.oauth) {
                (None, None, None) => None,
                (allow_http, reconnect, oauth) => Some(HttpSettings {
                    allow_http: allow_http.unwrap_or(false),
                    reconnect: reconnect.map(WardenReconnect::resolve).unwrap_or_default(),
                    oauth: oauth
                        .map(|o| OAuthSpec {
                            client_id: o.client_id,
                            client_secret: o.client_secret,
                            issuer: o.issuer,
                            client_metadata_url: o.client_metadata_url,
                            token_store: o.token_store.unwrap_or_default(),
                        })
                        .unwrap_or_default(),
                    ..HttpSettings::default()
                }),
            };
            Draft {
                name: name.into_inner(),
                at,
                kind: server.transport,
                http_settings,
                command: server.command,
                args: server.args,
                env: server.env,
                cwd: server.cwd,
                url: server.url,
                headers: server.headers,
                timeouts,
                era: server.era,
                max_message_bytes: server.max_message_bytes.map(NonZeroUsize::get),
                sandbox,
                lifecycle: crate::spec::Lifecycle {
                    start: server.start.unwrap_or_default(),
                    idle_stop: server.idle_stop.map(|t| t.0),
                },
                relay: server.relay.map(|name| {
                    let channel = relays.get(&name).cloned();
                    (name, channel)
                }),
                ..Draft::default()
            }
        })
        .collect();
    let servers = build_all(drafts, &cx)?;
    let project_env = project_servers(file.project_servers, text, origin)?;
    let policy = file.policy.map_or_else(
        || Ok(FilePolicy::default()),
        |table| policy(table, text, origin),
    )?;
    let settings = crate::agent::read(file.model, file.agent, text, origin)?;
    let serve = crate::serve::read(file.serve, text, origin)?;
    let host = crate::host::read(file.host, text, origin)?;
    Ok(Parsed {
        servers,
        policy,
        settings,
        project_env,
        serve,
        host,
    })
}

/// Reads `[relays.NAME]`: names validated like server names, a non-empty command,
/// secret files as absolute paths (relative ones joined to the file's directory).
fn relays(
    tables: Entries<Spanned<String>, RelayTable>,
    text: &str,
    origin: &Origin,
    cx: &Context<'_>,
) -> Result<BTreeMap<String, crate::spec::RelayChannel>, ConfigError> {
    let mut out = BTreeMap::new();
    for (name, table) in tables.0 {
        let at = Some(LineCol::at_offset(text, name.span().start));
        let name = name.into_inner();
        let invalid = |message: String| ConfigError::InvalidServer {
            path: origin.path.clone(),
            at,
            server: format!("relays.{name}"),
            message,
        };
        validate_server_name(&name).map_err(invalid)?;
        if origin.scope == Scope::Project {
            return Err(invalid(
                "relays are set up in your own configuration (user, local or --config), \
                 never in a project file: the channel command runs unconfined"
                    .into(),
            ));
        }
        if table
            .command
            .first()
            .is_none_or(|program| program.trim().is_empty())
        {
            return Err(invalid("`command` is empty".into()));
        }
        let mut secrets = BTreeMap::new();
        for (server, file) in table.secrets {
            validate_server_name(&server)
                .map_err(|reason| invalid(format!("secrets.{server}: {reason}")))?;
            let path = std::path::Path::new(&file);
            let path = if path.is_absolute() {
                path.to_path_buf()
            } else {
                cx.base_dir.join(path)
            };
            secrets.insert(server, path);
        }
        out.insert(
            name,
            crate::spec::RelayChannel {
                command: table.command,
                secrets,
                reconnect: table
                    .reconnect
                    .map(WardenReconnect::resolve)
                    .unwrap_or_default(),
            },
        );
    }
    Ok(out)
}

/// Reads `[project_servers.NAME]`: the variables of the user's environment a server from a
/// project file may read. Only the user's own files (user, local, `--config`) may say so.
fn project_servers(
    table: Entries<Spanned<String>, ProjectServerTable>,
    text: &str,
    origin: &Origin,
) -> Result<Vec<EnvAllowance>, ConfigError> {
    let mut out = Vec::new();
    for (name, settings) in table.0 {
        let at = Some(LineCol::at_offset(text, name.span().start));
        let name = name.into_inner();
        if origin.scope == Scope::Project {
            return Err(ConfigError::ProjectSetting {
                path: origin.path.clone(),
                at,
                key: format!("project_servers.{name}"),
                reason: "a project file cannot let servers read your environment".to_owned(),
            });
        }
        validate_server_name(&name).map_err(|reason| ConfigError::InvalidName {
            path: origin.path.clone(),
            at,
            name: name.clone(),
            reason,
        })?;
        for variable in settings.env {
            let at = Some(LineCol::at_offset(text, variable.span().start));
            let variable = variable.into_inner();
            if !crate::project::is_variable_name(&variable) {
                return Err(ConfigError::Parse {
                    path: origin.path.clone(),
                    at,
                    message: format!(
                        "`project_servers.{name}.env`: {variable:?} is not a variable name \
                         (letters, digits and `_`, not starting with a digit)"
                    ),
                });
            }
            out.push(EnvAllowance {
                server: name.clone(),
                variable,
                path: origin.path.clone(),
                at,
            });
        }
    }
    Ok(out)
}

/// Reads `[policy]` with positions, then checks it (scope restriction, rule compilation).
fn policy(table: PolicyTable, text: &str, origin: &Origin) -> Result<FilePolicy, ConfigError> {
    let at = |offset: usize| Some(LineCol::at_offset(text, offset));
    let mut servers = Vec::with_capacity(table.servers.0.len());
    for (name, settings) in table.servers.0 {
        let position = at(name.span().start);
        let name = name.into_inner();
        validate_server_name(&name).map_err(|reason| ConfigError::InvalidName {
            path: origin.path.clone(),
            at: position,
            name: name.clone(),
            reason,
        })?;
        servers.push((name, position, settings));
    }
    let rules = table
        .rules
        .into_iter()
        .map(|rule| (at(rule.span().start), rule.into_inner()))
        .collect();
    let mode = table
        .mode
        .map(|mode| (at(mode.span().start), mode.into_inner()));
    let policy = FilePolicy {
        mode,
        servers,
        rules,
    };
    policy.check(origin)?;
    Ok(policy)
}
