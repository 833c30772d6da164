//! The `[serve]` table of `warden.toml`: how `warden serve` listens (docs/gateway.md).
//!
//! Only the user's own files (user, local, `--config`) may set it: a project file (a cloned
//! repository) must not open a listening socket, name the tokens that guard it, or widen the
//! origins a browser may call it from. Files are merged key by key, a later file winning;
//! every value is an `Option` (or an empty list): unset means the gateway's default.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::duration::TimeoutValue;
use crate::error::{ConfigError, LineCol};
use crate::spec::{Origin, Scope};

/// `[serve]`, merged across files.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ServeConfig {
    /// The address `warden serve --http` listens on when `--http` gives none.
    pub listen: Option<String>,
    /// Names of environment variables holding bearer tokens (never the tokens).
    pub token_env: Vec<String>,
    /// Origins allowed besides the loopback ones (`https://app.example`).
    pub allowed_origins: Vec<String>,
    /// `Host` names allowed besides the loopback names and the bound address.
    pub allowed_hosts: Vec<String>,
    /// Largest request body (HTTP) or message (stdio), bytes.
    pub max_body_bytes: Option<u64>,
    /// Open 2025-11-25 sessions at once.
    pub max_sessions: Option<u64>,
    /// Requests in flight per client.
    pub max_in_flight_per_client: Option<u64>,
    /// A session unused this long expires (milliseconds in JSON).
    #[serde(serialize_with = "ms")]
    pub session_idle: Option<Duration>,
    /// Time allowed to send a request's headers (milliseconds in JSON).
    #[serde(serialize_with = "ms")]
    pub header_timeout: Option<Duration>,
    /// Tools per `tools/list` page.
    pub page_size: Option<usize>,
    /// Requests per second each client may send, sustained (HTTP).
    pub requests_per_second: Option<u64>,
    /// Requests a client may send at once after a quiet time (HTTP).
    pub request_burst: Option<u64>,
    /// `[serve.auth]`: OAuth 2.1 resource-server settings; `None` keeps the loopback and
    /// static-token rules.
    pub auth: Option<ServeAuth>,
}

/// `[serve.auth]`: `warden serve --http` as an OAuth 2.1 resource server (decision 0033).
///
/// ```toml
/// [serve.auth]
/// resource = "https://warden.example/mcp"
/// required_scopes = ["mcp:tools"]
///
/// [[serve.auth.issuers]]
/// issuer = "https://auth.example"
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ServeAuth {
    /// Warden's own resource URL (the MCP endpoint as clients reach it); tokens must name
    /// it as their audience.
    pub resource: String,
    /// The authorization servers whose tokens are accepted.
    pub issuers: Vec<ServeIssuer>,
    /// Scopes every token must carry.
    pub required_scopes: Vec<String>,
    /// Scopes listed in the protected-resource metadata (default: the required ones).
    pub scopes_supported: Vec<String>,
    /// Allowance for clock differences on `exp` and `nbf` (milliseconds in JSON).
    #[serde(serialize_with = "ms")]
    pub leeway: Option<Duration>,
    /// Shortest gap between two reads of an issuer's key set (milliseconds in JSON).
    #[serde(serialize_with = "ms")]
    pub jwks_refresh: Option<Duration>,
    /// Lifetime of a cached introspection answer (milliseconds in JSON).
    #[serde(serialize_with = "ms")]
    pub introspection_ttl: Option<Duration>,
}

/// One `[[serve.auth.issuers]]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeIssuer {
    /// The issuer identifier, exactly as its tokens and metadata say it.
    pub issuer: String,
    /// Its key set; when unset, the `jwks_uri` of its metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_uri: Option<String>,
    /// Its introspection endpoint, for opaque tokens; when unset but
    /// `introspection_client_id` is set, the one of its metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub introspection_endpoint: Option<String>,
    /// Warden's client id at the introspection endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub introspection_client_id: Option<String>,
    /// The environment variable holding that client's secret (never the secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub introspection_secret_env: Option<String>,
}

/// The longest `leeway` accepted: 5 minutes.
pub const MAX_LEEWAY: Duration = Duration::from_secs(300);
/// The shortest `jwks_refresh` accepted: 10 seconds.
pub const MIN_JWKS_REFRESH: Duration = Duration::from_secs(10);

/// `[serve.auth]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a serve.auth table")]
pub(crate) struct AuthTable {
    resource: Spanned<String>,
    #[serde(default)]
    issuers: Vec<ServeIssuer>,
    required_scopes: Option<Vec<String>>,
    scopes_supported: Option<Vec<String>>,
    leeway: Option<TimeoutValue>,
    jwks_refresh: Option<TimeoutValue>,
    introspection_ttl: Option<TimeoutValue>,
}

fn ms<S: serde::Serializer>(value: &Option<Duration>, serializer: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(d) => serializer.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        None => serializer.serialize_none(),
    }
}

/// `[serve]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a serve table")]
pub(crate) struct ServeTable {
    listen: Option<Spanned<String>>,
    token_env: Option<Vec<String>>,
    allowed_origins: Option<Vec<String>>,
    allowed_hosts: Option<Vec<String>>,
    max_body_bytes: Option<Spanned<u64>>,
    max_sessions: Option<Spanned<u64>>,
    max_in_flight_per_client: Option<Spanned<u64>>,
    session_idle: Option<TimeoutValue>,
    header_timeout: Option<TimeoutValue>,
    page_size: Option<Spanned<usize>>,
    requests_per_second: Option<Spanned<u64>>,
    request_burst: Option<Spanned<u64>>,
    auth: Option<Spanned<AuthTable>>,
}

/// Reads one file's `[serve]`; `start` is where the table begins in `text`.
pub(crate) fn read(
    table: Option<Spanned<ServeTable>>,
    text: &str,
    origin: &Origin,
) -> Result<Option<ServeConfig>, ConfigError> {
    let Some(table) = table else {
        return Ok(None);
    };
    let start = table.span().start;
    let at = Some(LineCol::at_offset(text, start));
    if origin.scope == Scope::Project {
        return Err(ConfigError::ProjectSetting {
            path: origin.path.clone(),
            at,
            key: "serve".into(),
            reason: "a project file may not configure `warden serve` (a cloned repository must \
                     not open a listening socket, choose its tokens or widen its origins)"
                .into(),
        });
    }
    let table = table.into_inner();
    let invalid = |key: &str, offset: usize, message: String| ConfigError::InvalidSetting {
        path: origin.path.clone(),
        at: Some(LineCol::at_offset(text, offset)),
        key: format!("serve.{key}"),
        message,
    };
    let positive = |key: &str, value: Option<Spanned<u64>>| -> Result<Option<u64>, ConfigError> {
        match value {
            Some(value) if *value.get_ref() == 0 => Err(invalid(
                key,
                value.span().start,
                "must be at least 1".into(),
            )),
            other => Ok(other.map(Spanned::into_inner)),
        }
    };
    let listen = match table.listen {
        Some(listen) => {
            let value = listen.get_ref().trim().to_owned();
            if value.parse::<std::net::SocketAddr>().is_err() {
                return Err(invalid(
                    "listen",
                    listen.span().start,
                    format!("{value:?} is not an address like \"127.0.0.1:8765\""),
                ));
            }
            Some(value)
        }
        None => None,
    };
    let token_env = table.token_env.unwrap_or_default();
    if let Some(bad) = token_env.iter().find(|name| !is_var_name(name)) {
        return Err(invalid(
            "token_env",
            start,
            format!(
                "{bad:?} is not an environment variable name (write the variable's name, never \
                 the token itself)"
            ),
        ));
    }
    let page_size = match table.page_size {
        Some(size) if *size.get_ref() == 0 || *size.get_ref() > 10_000 => {
            return Err(invalid(
                "page_size",
                size.span().start,
                "must be between 1 and 10000".into(),
            ));
        }
        other => other.map(Spanned::into_inner),
    };
    let auth = match table.auth {
        Some(auth) => Some(read_auth(auth, &invalid)?),
        None => None,
    };
    Ok(Some(ServeConfig {
        auth,
        listen,
        token_env,
        allowed_origins: table.allowed_origins.unwrap_or_default(),
        allowed_hosts: table.allowed_hosts.unwrap_or_default(),
        max_body_bytes: positive("max_body_bytes", table.max_body_bytes)?,
        max_sessions: positive("max_sessions", table.max_sessions)?,
        max_in_flight_per_client: positive(
            "max_in_flight_per_client",
            table.max_in_flight_per_client,
        )?,
        session_idle: table.session_idle.map(|t| t.0),
        header_timeout: table.header_timeout.map(|t| t.0),
        page_size,
        requests_per_second: positive("requests_per_second", table.requests_per_second)?,
        request_burst: positive("request_burst", table.request_burst)?,
    }))
}

/// Checks `[serve.auth]` (URLs are checked again, fully, when `warden serve` starts).
fn read_auth(
    table: Spanned<AuthTable>,
    invalid: &dyn Fn(&str, usize, String) -> ConfigError,
) -> Result<ServeAuth, ConfigError> {
    let start = table.span().start;
    let table = table.into_inner();
    let web_url = |value: &str| {
        (value.starts_with("https://") || value.starts_with("http://")) && !value.contains('#')
    };
    let resource = table.resource.get_ref().trim().to_owned();
    if !web_url(&resource) {
        return Err(invalid(
            "auth.resource",
            table.resource.span().start,
            format!(
                "{resource:?} is not Warden's URL (write the MCP endpoint as clients reach it, \
                 like \"https://warden.example/mcp\")"
            ),
        ));
    }
    if table.issuers.is_empty() {
        return Err(invalid(
            "auth.issuers",
            start,
            "names no authorization server: add [[serve.auth.issuers]] with `issuer`".into(),
        ));
    }
    for (index, issuer) in table.issuers.iter().enumerate() {
        let key = format!("auth.issuers[{index}]");
        for (what, value) in [
            ("issuer", Some(&issuer.issuer)),
            ("jwks_uri", issuer.jwks_uri.as_ref()),
            (
                "introspection_endpoint",
                issuer.introspection_endpoint.as_ref(),
            ),
        ] {
            if let Some(value) = value
                && !web_url(value)
            {
                return Err(invalid(
                    &format!("{key}.{what}"),
                    start,
                    format!("{value:?} is not an http(s) URL"),
                ));
            }
        }
        match (
            &issuer.introspection_client_id,
            &issuer.introspection_secret_env,
        ) {
            (Some(_), Some(var)) if !is_var_name(var) => {
                return Err(invalid(
                    &format!("{key}.introspection_secret_env"),
                    start,
                    format!(
                        "{var:?} is not an environment variable name (write the variable's \
                         name, never the secret itself)"
                    ),
                ));
            }
            (Some(_), Some(_)) | (None, None) => {}
            _ => {
                return Err(invalid(
                    &key,
                    start,
                    "introspection needs both `introspection_client_id` and \
                     `introspection_secret_env`"
                        .into(),
                ));
            }
        }
        if issuer.introspection_endpoint.is_some() && issuer.introspection_client_id.is_none() {
            return Err(invalid(
                &key,
                start,
                "`introspection_endpoint` needs `introspection_client_id` and \
                 `introspection_secret_env` (Warden authenticates its introspection requests)"
                    .into(),
            ));
        }
    }
    // A long leeway accepts tokens long expired; a short refresh interval lets made-up key
    // ids make Warden read the issuer's key set again and again.
    if let Some(leeway) = &table.leeway
        && leeway.0 > MAX_LEEWAY
    {
        return Err(invalid(
            "auth.leeway",
            start,
            format!(
                "{}s is more than the {}s allowed (a leeway accepts expired tokens for that \
                 long; fix the clocks instead)",
                leeway.0.as_secs(),
                MAX_LEEWAY.as_secs()
            ),
        ));
    }
    if let Some(refresh) = &table.jwks_refresh
        && refresh.0 < MIN_JWKS_REFRESH
    {
        return Err(invalid(
            "auth.jwks_refresh",
            start,
            format!(
                "{}ms is less than the {}s allowed (it is the shortest gap between two reads \
                 of an issuer's key set, which tokens with made-up key ids can trigger)",
                refresh.0.as_millis(),
                MIN_JWKS_REFRESH.as_secs()
            ),
        ));
    }
    let required_scopes = table.required_scopes.unwrap_or_default();
    if let Some(bad) = required_scopes
        .iter()
        .chain(table.scopes_supported.iter().flatten())
        .find(|scope| scope.is_empty() || scope.contains([' ', '"', '\\']))
    {
        return Err(invalid(
            "auth.required_scopes",
            start,
            format!("{bad:?} is not a scope (no spaces, quotes or backslashes)"),
        ));
    }
    Ok(ServeAuth {
        resource,
        issuers: table.issuers,
        scopes_supported: table
            .scopes_supported
            .unwrap_or_else(|| required_scopes.clone()),
        required_scopes,
        leeway: table.leeway.map(|t| t.0),
        jwks_refresh: table.jwks_refresh.map(|t| t.0),
        introspection_ttl: table.introspection_ttl.map(|t| t.0),
    })
}

fn is_var_name(value: &str) -> bool {
    !value.is_empty()
        && !value.starts_with(|c: char| c.is_ascii_digit())
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Merges files given lowest precedence first: a later file's keys win, one by one.
pub(crate) fn merge(layers: Vec<ServeConfig>) -> ServeConfig {
    let mut merged = ServeConfig::default();
    for layer in layers {
        merged.listen = layer.listen.or(merged.listen);
        if !layer.token_env.is_empty() {
            merged.token_env = layer.token_env;
        }
        if !layer.allowed_origins.is_empty() {
            merged.allowed_origins = layer.allowed_origins;
        }
        if !layer.allowed_hosts.is_empty() {
            merged.allowed_hosts = layer.allowed_hosts;
        }
        merged.max_body_bytes = layer.max_body_bytes.or(merged.max_body_bytes);
        merged.max_sessions = layer.max_sessions.or(merged.max_sessions);
        merged.max_in_flight_per_client = layer
            .max_in_flight_per_client
            .or(merged.max_in_flight_per_client);
        merged.session_idle = layer.session_idle.or(merged.session_idle);
        merged.header_timeout = layer.header_timeout.or(merged.header_timeout);
        merged.page_size = layer.page_size.or(merged.page_size);
        merged.requests_per_second = layer.requests_per_second.or(merged.requests_per_second);
        merged.request_burst = layer.request_burst.or(merged.request_burst);
        // `[serve.auth]` is replaced whole: issuers and the resource belong together.
        merged.auth = layer.auth.or(merged.auth);
    }
    merged
}
