//! `warden serve`: Warden as an MCP server, for any MCP client.
//!
//! Connects the configured servers (or the one `--only` names) exactly as the other
//! commands do (approvals, pins, confinement, policy), then serves them over stdio, or over
//! Streamable HTTP with `--http ADDR`. The protocol, the HTTP hardening and the per-client
//! policy contexts live in `warden-gateway`; this module wires configuration, the state
//! store (audit rows) and signals to it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use warden_gateway::{Backend, Gateway, Guard, HttpLimits, ProtocolOptions, StdioLimits};
use warden_host::ServerStatus;

use crate::cli::{ClientKind, GlobalArgs, ServeArgs};
use crate::exit::{Code, Failure};

/// Runs `warden serve`.
pub async fn run(global: &GlobalArgs, args: ServeArgs) -> Result<Code, Failure> {
    if let Some(kind) = args.print_client_config {
        println!("{}", client_config(kind, global, &args)?);
        return Ok(Code::Ok);
    }
    let (config, env) = super::load_config(global)?;
    let settings = &config.serve;
    let specs: Vec<_> = match &args.only {
        Some(name) => {
            let found: Vec<_> = config
                .servers
                .iter()
                .filter(|spec| &spec.name == name)
                .cloned()
                .collect();
            if found.is_empty() {
                let known: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
                return Err(Failure::usage(anyhow::anyhow!(
                    "--only {name}: no server `{name}` is configured (configured: {})",
                    known.join(", ")
                )));
            }
            found
        }
        None => config.servers.clone(),
    };
    if specs.is_empty() {
        return Err(Failure::usage(anyhow::anyhow!(
            "no servers are configured (see `warden config` for the files searched)"
        )));
    }
    let policy = super::compile_policy(&config.policy)?;
    // The address and tokens are checked before any server starts.
    // `--http` without a value takes `[serve] listen`; without `--http`, stdio.
    let address = match args.http.as_deref() {
        None => None,
        Some("") => Some(settings.listen.clone().ok_or_else(|| {
            Failure::usage(anyhow::anyhow!(
                "--http without an address needs `listen` in [serve] (docs/gateway.md)"
            ))
        })?),
        Some(address) => Some(address.to_owned()),
    };
    let listening = match &address {
        Some(address) => {
            let addr: SocketAddr = resolve_address(address).map_err(Failure::usage)?;
            let mut token_vars = settings.token_env.clone();
            token_vars.extend(args.token_env.iter().cloned());
            let mut tokens = Vec::new();
            for var in &token_vars {
                let value = env.vars.get(var).cloned().ok_or_else(|| {
                    Failure::usage(anyhow::anyhow!(
                        "the token variable {var} (named in [serve] token_env or --token-env) is not set"
                    ))
                })?;
                tokens.push((var.clone(), value));
            }
            let mut origins = settings.allowed_origins.clone();
            origins.extend(args.allow_origin.iter().cloned());
            let mut hosts = settings.allowed_hosts.clone();
            hosts.extend(args.allow_host.iter().cloned());
            let guard = match &settings.auth {
                Some(auth) => {
                    if !tokens.is_empty() {
                        return Err(Failure::usage(anyhow::anyhow!(
                            "[serve.auth] and bearer tokens ([serve] token_env, --token-env) \
                             cannot be combined: with [serve.auth] every caller presents an \
                             OAuth access token issued for Warden"
                        )));
                    }
                    check_caller_rules(auth, &config.policy)?;
                    let server = resource_server(auth, &env)?;
                    Guard::with_resource_server(addr, &hosts, &origins, Arc::new(server))
                }
                None => Guard::new(addr, &hosts, &origins, tokens).map_err(Failure::usage)?,
            };
            let listener = tokio::net::TcpListener::bind(addr).await.map_err(|error| {
                Failure::usage(anyhow::anyhow!("cannot listen on {addr}: {error}"))
            })?;
            let bound = listener.local_addr().unwrap_or(addr);
            Some((listener, guard, bound))
        }
        None => None,
    };
    let builder = super::host_builder(policy, &config, &env)?;
    let host = super::connect(builder, specs).await?;
    for entry in host.servers() {
        if let ServerStatus::Failed { reason, .. } = &entry.status {
            eprintln!(
                "warden: server `{}` is not available, its tools are not served: {}",
                entry.spec.name,
                crate::untrusted::inert(reason, crate::untrusted::Shape::Line)
            );
        }
    }
    let backend = Backend::new(Arc::new(host), args.only.clone()).map_err(Failure::usage)?;
    let options = ProtocolOptions {
        page_size: settings
            .page_size
            .unwrap_or(warden_gateway::dispatch::DEFAULT_PAGE_SIZE),
    };
    let gateway = Arc::new(Gateway::new(backend, options).map_err(|error| Failure {
        code: Code::Unavailable,
        error: anyhow::anyhow!("cannot start the gateway: {error}"),
    })?);
    // Upstream tool list changes are reviewed and applied while clients are served, at
    // most once per interval, and announced to the clients.
    let follower = {
        let gateway = Arc::clone(&gateway);
        tokio::spawn(async move {
            gateway
                .backend()
                .follow_upstreams(warden_gateway::backend::DEFAULT_REFRESH_INTERVAL)
                .await;
        })
    };
    match listening {
        None => {
            let limits = StdioLimits {
                max_message_bytes: settings
                    .max_body_bytes
                    .map_or(StdioLimits::default().max_message_bytes, to_usize),
                ..StdioLimits::default()
            };
            let (input, output) = std_streams().map_err(|error| Failure {
                code: Code::Unavailable,
                error: anyhow::anyhow!("cannot use stdin and stdout: {error}"),
            })?;
            let input = tokio::io::BufReader::new(input);
            tokio::select! {
                () = warden_gateway::stdio::serve(Arc::clone(&gateway), input, output, limits) => {}
                () = crate::signals::interrupted() => {}
            }
        }
        Some((listener, guard, bound)) => {
            let limits = http_limits(settings);
            eprintln!(
                "warden: serving MCP on http://{bound}{}",
                warden_gateway::http::ENDPOINT
            );
            if let Some(server) = guard.resource_server() {
                eprintln!(
                    "warden: OAuth resource server for {} (metadata: {})",
                    server.document()["resource"].as_str().unwrap_or_default(),
                    server.metadata_url()
                );
            }
            warden_gateway::http::serve(
                Arc::clone(&gateway),
                listener,
                guard,
                limits,
                crate::signals::interrupted(),
            )
            .await;
        }
    }
    follower.abort();
    let _ = follower.await;
    shutdown(gateway).await;
    Ok(Code::Ok)
}

/// Refuses caller rules that could match someone they do not mean (decision 0033): a
/// `caller_issuer` naming no configured issuer (a deny rule that never matches would let
/// the caller through), and, with several issuers, a `caller` or `caller_client` rule
/// without `caller_issuer` (one subject or client id at two issuers is two identities).
fn check_caller_rules(
    auth: &warden_config::ServeAuth,
    policy: &warden_config::ResolvedPolicy,
) -> Result<(), Failure> {
    let place = |index: usize| {
        policy.rule_source(index).map_or_else(
            || format!("policy.rules[{index}]"),
            |source| source.to_string(),
        )
    };
    for (index, rule) in policy.config.rules.iter().enumerate() {
        let issuers = rule.caller_issuer.as_ref().map(|i| i.as_slice());
        if let Some(unknown) = issuers
            .unwrap_or_default()
            .iter()
            .find(|named| !auth.issuers.iter().any(|i| &i.issuer == *named))
        {
            return Err(Failure::usage(anyhow::anyhow!(
                "{}: `caller_issuer` names {unknown:?}, which is not an issuer of \
                 [[serve.auth.issuers]] (issuers are compared exactly)",
                place(index)
            )));
        }
        let names_caller = rule.caller.is_some() || rule.caller_client.is_some();
        if names_caller && issuers.is_none() && auth.issuers.len() > 1 {
            return Err(Failure::usage(anyhow::anyhow!(
                "{}: a rule with `caller` or `caller_client` needs `caller_issuer` when \
                 [serve.auth] trusts several issuers (the same name at two issuers is two \
                 identities)",
                place(index)
            )));
        }
    }
    Ok(())
}

/// The OAuth resource server of `[serve.auth]` (decision 0033); secrets are read from the
/// environment variables named.
fn resource_server(
    auth: &warden_config::ServeAuth,
    env: &warden_config::Environment,
) -> Result<warden_gateway::ResourceServer, Failure> {
    use warden_oauth::resource::{Introspection, IssuerSettings, ResourceSettings};
    let mut issuers = Vec::new();
    for issuer in &auth.issuers {
        let introspection = match (
            &issuer.introspection_client_id,
            &issuer.introspection_secret_env,
        ) {
            (Some(client_id), Some(var)) => {
                let secret = env.vars.get(var).cloned().ok_or_else(|| {
                    Failure::usage(anyhow::anyhow!(
                        "the introspection secret variable {var} (named in [serve.auth] for \
                         {}) is not set",
                        issuer.issuer
                    ))
                })?;
                Some(Introspection {
                    endpoint: issuer.introspection_endpoint.clone(),
                    client_id: client_id.clone(),
                    client_secret: warden_oauth::Secret::new(secret),
                })
            }
            _ => None,
        };
        issuers.push(IssuerSettings {
            issuer: issuer.issuer.clone(),
            jwks_uri: issuer.jwks_uri.clone(),
            introspection,
        });
    }
    let mut settings = ResourceSettings::new(auth.resource.clone(), issuers);
    settings.required_scopes = auth.required_scopes.clone();
    if let Some(leeway) = auth.leeway {
        settings.leeway = leeway;
    }
    if let Some(refresh) = auth.jwks_refresh {
        settings.jwks_refresh = refresh;
    }
    if let Some(ttl) = auth.introspection_ttl {
        settings.introspection_ttl = ttl;
    }
    warden_gateway::ResourceServer::new(settings, auth.scopes_supported.clone())
        .map_err(|error| Failure::usage(anyhow::anyhow!("[serve.auth]: {error}")))
}

/// Stdin and stdout as async files (copies of the descriptors; reads and writes run on
/// tokio's blocking threads).
fn std_streams() -> std::io::Result<(tokio::fs::File, tokio::fs::File)> {
    use std::os::fd::AsFd;
    let input = std::io::stdin().as_fd().try_clone_to_owned()?;
    let output = std::io::stdout().as_fd().try_clone_to_owned()?;
    Ok((
        tokio::fs::File::from_std(std::fs::File::from(input)),
        tokio::fs::File::from_std(std::fs::File::from(output)),
    ))
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

fn http_limits(settings: &warden_config::ServeConfig) -> HttpLimits {
    let defaults = HttpLimits::default();
    HttpLimits {
        max_body_bytes: settings
            .max_body_bytes
            .map_or(defaults.max_body_bytes, to_usize),
        max_sessions: settings
            .max_sessions
            .map_or(defaults.max_sessions, to_usize),
        max_in_flight_per_client: settings
            .max_in_flight_per_client
            .map_or(defaults.max_in_flight_per_client, to_usize),
        session_idle: settings.session_idle.unwrap_or(defaults.session_idle),
        header_timeout: settings.header_timeout.unwrap_or(defaults.header_timeout),
        rate: warden_gateway::rate::Rate {
            per_second: settings
                .requests_per_second
                .map_or(defaults.rate.per_second, |n| n as f64),
            burst: settings
                .request_burst
                .map_or(defaults.rate.burst, |n| n as f64),
        },
        ..defaults
    }
}

/// `127.0.0.1:8765`, `localhost:8765` or `:8765` (loopback).
fn resolve_address(text: &str) -> anyhow::Result<SocketAddr> {
    let text = text.trim();
    let text = if let Some(port) = text.strip_prefix(':') {
        format!("127.0.0.1:{port}")
    } else if let Some(port) = text.strip_prefix("localhost:") {
        format!("127.0.0.1:{port}")
    } else {
        text.to_owned()
    };
    text.parse().map_err(|error| {
        anyhow::anyhow!("--http {text}: not an address like 127.0.0.1:8765 ({error})")
    })
}

/// Stops every server once the last request let go of the host (at most 2 seconds).
async fn shutdown(gateway: Arc<Gateway>) {
    let mut gateway = gateway;
    for _ in 0..200 {
        match Arc::try_unwrap(gateway) {
            Ok(owned) => {
                let mut host = owned.into_backend().into_host();
                for _ in 0..200 {
                    match Arc::try_unwrap(host) {
                        Ok(host) => {
                            host.shutdown().await;
                            return;
                        }
                        Err(shared) => host = shared,
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                // Still shared by a call that did not stop: dropping the last handle kills
                // each server's process group.
                return;
            }
            Err(shared) => gateway = shared,
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The snippet a user pastes into their client's configuration.
fn client_config(
    kind: ClientKind,
    global: &GlobalArgs,
    args: &ServeArgs,
) -> Result<String, Failure> {
    let program = std::env::current_exe().map_err(|error| {
        Failure::usage(anyhow::anyhow!("cannot find Warden's own path: {error}"))
    })?;
    let mut serve_args = vec!["serve".to_owned()];
    if let Some(config) = &global.config {
        let absolute = std::path::absolute(config).unwrap_or_else(|_| config.clone());
        serve_args.push("--config".into());
        serve_args.push(absolute.display().to_string());
    }
    if let Some(only) = &args.only {
        serve_args.push("--only".into());
        serve_args.push(only.clone());
    }
    let command = program.display().to_string();
    let url = match args.http.as_deref().filter(|a| !a.is_empty()) {
        Some(address) => Some(format!(
            "http://{}{}",
            resolve_address(address).map_err(Failure::usage)?,
            warden_gateway::http::ENDPOINT
        )),
        None => None,
    };
    let value = match (kind, &url) {
        (ClientKind::ClaudeCode, Some(url)) => serde_json::json!({
            "mcpServers": {"warden": {"type": "http", "url": url}}
        }),
        (ClientKind::Vscode, Some(url)) => serde_json::json!({
            "servers": {"warden": {"type": "http", "url": url}}
        }),
        (ClientKind::ClaudeDesktop, Some(_)) => {
            return Err(Failure::usage(anyhow::anyhow!(
                "Claude Desktop starts its servers over stdio: leave out --http"
            )));
        }
        (ClientKind::ClaudeCode | ClientKind::ClaudeDesktop, None) => serde_json::json!({
            "mcpServers": {"warden": {"command": command, "args": serve_args}}
        }),
        (ClientKind::Vscode, None) => serde_json::json!({
            "servers": {"warden": {"type": "stdio", "command": command, "args": serve_args}}
        }),
    };
    let file = match kind {
        ClientKind::ClaudeCode => {
            ".mcp.json in your project (or `claude mcp add-json warden '<the inner object>'`)"
        }
        ClientKind::Vscode => ".vscode/mcp.json in your workspace",
        ClientKind::ClaudeDesktop => "claude_desktop_config.json",
    };
    eprintln!("warden: paste this into {file}:");
    Ok(serde_json::to_string_pretty(&value).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(
            resolve_address(":8765").unwrap().to_string(),
            "127.0.0.1:8765"
        );
        assert_eq!(
            resolve_address("localhost:1").unwrap().to_string(),
            "127.0.0.1:1"
        );
        assert_eq!(resolve_address("[::1]:2").unwrap().to_string(), "[::1]:2");
        assert!(resolve_address("example.com:80").is_err());
    }
}
