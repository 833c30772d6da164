//! `warden-auth-testserver MODE`: an MCP server behind OAuth and its own authorization
//! server, on one loopback port, speaking the real protocol (RFC 9728 protected-resource
//! metadata, RFC 8414 metadata, RFC 7591 registration, authorization code with PKCE S256
//! checked, RFC 8707 `resource` checked, RFC 9207 `iss`, refresh tokens). Each mode but
//! `good` plays one attack on the client, which the client must refuse.
//!
//! It prints its base URL (`http://127.0.0.1:PORT`) on the first stdout line; the MCP
//! endpoint is `/mcp` (a 2025-11-25 server: `initialize`, `tools/list`, `tools/call`).
//! `POST /admin/expire` invalidates every access token issued so far; `GET /admin/stats`
//! says what happened (token requests by grant, authorizations, registrations, requests
//! with a valid, a foreign or no token). A refresh grant takes 300 ms, so refusals that
//! arrive together overlap.
//!
//! Modes: `good`, `mixup` (the metadata names another issuer), `iss-wrong` (the redirect
//! names another issuer), `resource-mismatch` (the protected-resource metadata is for
//! another server), `token-redirect` (the token endpoint redirects to another host),
//! `authorize-elsewhere` (the authorization endpoint redirects to another host, not to the
//! client), `state` (the redirect carries another `state`), `plain-pkce` (only `plain` is
//! advertised), `private-as` (the protected-resource metadata names an authorization
//! server on another loopback address, 127.0.0.2), `private-token` (the token endpoint is on
//! 127.0.0.2): a client that judges this server public must refuse both before any request
//! (nothing listens there); `short-lived` is `good` with access tokens that expire in 30 s
//! (a client refreshes them before they do).
//!
//! As the authorization server of `warden serve` (a resource server, decision 0033) it
//! also publishes a key set (`/jwks`: an RS256 key from a checked-in test key, ring cannot
//! generate RSA keys, and an ES256 key generated at start) and introspection
//! (`/introspect`, HTTP Basic `warden-rs:introspect-secret`). `POST /admin/mint` with
//! `{"claims": {...}, "sign": "rs256"|"es256"|"none"|"hs256-pubkey"|"other-key"|"opaque"}`
//! returns `{"token": ...}`: a JWT signed as asked (`none` unsigned, `hs256-pubkey` HMAC
//! with the RSA public key as the secret, `other-key` by an ES256 key not in the set), or an
//! opaque token that introspection describes with the claims. `iss` defaults to this
//! server. `/admin/stats` also counts key-set reads (`jwks`) and introspections.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

mod keys;

const MODES: [&str; 11] = [
    "good",
    "short-lived",
    "mixup",
    "iss-wrong",
    "resource-mismatch",
    "token-redirect",
    "authorize-elsewhere",
    "state",
    "plain-pkce",
    "private-as",
    "private-token",
];

#[derive(Default)]
struct Stats {
    jwks: u64,
    introspections: u64,
    authorizations: u64,
    registrations: u64,
    code_grants: u64,
    refresh_grants: u64,
    valid: u64,
    foreign: u64,
    missing: u64,
}

struct Code {
    challenge: String,
    resource: String,
    redirect_uri: String,
    scope: String,
}

#[derive(Default)]
struct State {
    stats: Stats,
    generation: u64,
    next: u64,
    codes: HashMap<String, Code>,
    /// access token -> (generation, audience)
    access: HashMap<String, (u64, String)>,
    refresh: HashMap<String, String>,
    clients: HashSet<String>,
    /// Opaque tokens minted for introspection, with their claims.
    opaque: HashMap<String, Value>,
}

struct Server {
    mode: &'static str,
    base: String,
    state: Mutex<State>,
    keys: keys::Keys,
}

fn main() {
    let arg = std::env::args().nth(1).unwrap_or_else(|| "good".into());
    let Some(mode) = MODES.iter().copied().find(|m| *m == arg) else {
        eprintln!("unknown mode {arg:?}; modes: {}", MODES.join(", "));
        std::process::exit(2);
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("no runtime: {error}");
            std::process::exit(1);
        }
    };
    if let Err(error) = runtime.block_on(serve(mode)) {
        eprintln!("warden-auth-testserver: {error}");
        std::process::exit(1);
    }
}

async fn serve(mode: &'static str) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{base}")?;
        stdout.flush()?;
    }
    let keys = keys::Keys::new().map_err(std::io::Error::other)?;
    let server = Arc::new(Server {
        mode,
        base,
        state: Mutex::new(State::default()),
        keys,
    });
    loop {
        let (stream, _) = listener.accept().await?;
        let server = server.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let server = server.clone();
                async move { Ok::<_, Infallible>(server.handle(request).await) }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn respond(status: StatusCode, body: Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

fn redirect(location: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::FOUND;
    if let Ok(value) = http::HeaderValue::from_str(location) {
        response.headers_mut().insert(http::header::LOCATION, value);
    }
    response
}

fn form(text: &str) -> HashMap<String, String> {
    url::form_urlencoded::parse(text.as_bytes())
        .into_owned()
        .collect()
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Server {
    fn resource(&self) -> String {
        format!("{}/mcp", self.base)
    }

    async fn handle(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let method = request.method().clone();
        let path = request.uri().path().to_owned();
        let query = request.uri().query().unwrap_or_default().to_owned();
        let authorization = request
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = match request.into_body().collect().await {
            Ok(collected) => String::from_utf8_lossy(&collected.to_bytes()).into_owned(),
            Err(_) => String::new(),
        };
        eprintln!("{method} {path}");
        match (method, path.as_str()) {
            (Method::GET, "/.well-known/oauth-protected-resource/mcp") => {
                let resource = if self.mode == "resource-mismatch" {
                    "http://evil.example/mcp".to_owned()
                } else {
                    self.resource()
                };
                let issuer = if self.mode == "private-as" {
                    self.base.replace("127.0.0.1", "127.0.0.2")
                } else {
                    self.base.clone()
                };
                respond(
                    StatusCode::OK,
                    json!({"resource": resource, "authorization_servers": [issuer], "scopes_supported": ["mcp:read"]}),
                )
            }
            (Method::GET, "/.well-known/oauth-authorization-server") => {
                let issuer = if self.mode == "mixup" {
                    "http://127.0.0.1:1".to_owned()
                } else {
                    self.base.clone()
                };
                let pkce = if self.mode == "plain-pkce" {
                    "plain"
                } else {
                    "S256"
                };
                respond(
                    StatusCode::OK,
                    json!({
                        "issuer": issuer,
                        "authorization_endpoint": format!("{}/authorize", self.base),
                        "token_endpoint": if self.mode == "private-token" {
                            format!("{}/token", self.base.replace("127.0.0.1", "127.0.0.2"))
                        } else {
                            format!("{}/token", self.base)
                        },
                        "registration_endpoint": format!("{}/register", self.base),
                        "response_types_supported": ["code"],
                        "grant_types_supported": ["authorization_code", "refresh_token"],
                        "code_challenge_methods_supported": [pkce],
                        "token_endpoint_auth_methods_supported": ["none"],
                        "scopes_supported": ["mcp:read", "offline_access"],
                        "authorization_response_iss_parameter_supported": true,
                        "jwks_uri": format!("{}/jwks", self.base),
                        "introspection_endpoint": format!("{}/introspect", self.base),
                    }),
                )
            }
            (Method::GET, "/jwks") => {
                lock(&self.state).stats.jwks += 1;
                respond(StatusCode::OK, self.keys.jwks())
            }
            (Method::POST, "/admin/mint") => self.mint(&body),
            (Method::POST, "/introspect") => self.introspect(authorization.as_deref(), &body),
            (Method::POST, "/register") => self.register(&body),
            (Method::GET, "/authorize") => self.authorize(&query),
            (Method::POST, "/token") => self.token(&body).await,
            (Method::POST, "/admin/expire") => {
                lock(&self.state).generation += 1;
                respond(StatusCode::OK, json!({}))
            }
            (Method::GET, "/admin/stats") => {
                let state = lock(&self.state);
                let s = &state.stats;
                respond(
                    StatusCode::OK,
                    json!({
                        "authorizations": s.authorizations, "registrations": s.registrations,
                        "code_grants": s.code_grants, "refresh_grants": s.refresh_grants,
                        "valid": s.valid, "foreign": s.foreign, "missing": s.missing,
                        "jwks": s.jwks, "introspections": s.introspections,
                    }),
                )
            }
            (Method::POST, "/mcp") => self.mcp(authorization.as_deref(), &body),
            (Method::GET | Method::DELETE, "/mcp") => {
                respond(StatusCode::METHOD_NOT_ALLOWED, json!({}))
            }
            _ => respond(StatusCode::NOT_FOUND, json!({"error": "not_found"})),
        }
    }

    /// Mints a token for the tests of `warden serve` as a resource server.
    fn mint(&self, body: &str) -> Response<Full<Bytes>> {
        let request: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        let mut claims = request.get("claims").cloned().unwrap_or_else(|| json!({}));
        if let Some(map) = claims.as_object_mut() {
            map.entry("iss")
                .or_insert_with(|| Value::String(self.base.clone()));
        }
        let sign = request
            .get("sign")
            .and_then(Value::as_str)
            .unwrap_or("rs256");
        let token = if sign == "opaque" {
            let mut state = lock(&self.state);
            state.next += 1;
            let token = format!("opaque-{}", state.next);
            state.opaque.insert(token.clone(), claims);
            token
        } else {
            match self.keys.sign(sign, &claims) {
                Some(token) => token,
                None => {
                    return respond(
                        StatusCode::BAD_REQUEST,
                        json!({"error": format!("unknown sign {sign:?}")}),
                    );
                }
            }
        };
        respond(StatusCode::OK, json!({"token": token}))
    }

    /// RFC 7662 for the opaque tokens minted, with HTTP Basic client authentication.
    fn introspect(&self, authorization: Option<&str>, body: &str) -> Response<Full<Bytes>> {
        let expected = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("warden-rs:introspect-secret")
        );
        if authorization != Some(expected.as_str()) {
            return respond(StatusCode::UNAUTHORIZED, json!({"error": "invalid_client"}));
        }
        let params = form(body);
        let mut state = lock(&self.state);
        state.stats.introspections += 1;
        let token = params.get("token").cloned().unwrap_or_default();
        match state.opaque.get(&token) {
            Some(claims) => {
                let mut answer = claims.clone();
                if let Some(map) = answer.as_object_mut() {
                    map.insert("active".into(), Value::Bool(true));
                }
                respond(StatusCode::OK, answer)
            }
            None => respond(StatusCode::OK, json!({"active": false})),
        }
    }

    fn register(&self, body: &str) -> Response<Full<Bytes>> {
        let request: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        let mut state = lock(&self.state);
        state.stats.registrations += 1;
        state.next += 1;
        let id = format!("client-{}", state.next);
        state.clients.insert(id.clone());
        respond(
            StatusCode::CREATED,
            json!({"client_id": id, "token_endpoint_auth_method": "none", "redirect_uris": request.get("redirect_uris")}),
        )
    }

    fn authorize(&self, query: &str) -> Response<Full<Bytes>> {
        let params = form(query);
        let get = |key: &str| params.get(key).cloned().unwrap_or_default();
        let mut state = lock(&self.state);
        state.stats.authorizations += 1;
        if !state.clients.contains(&get("client_id"))
            || get("code_challenge_method") != "S256"
            || get("response_type") != "code"
        {
            return respond(StatusCode::BAD_REQUEST, json!({"error": "invalid_request"}));
        }
        state.next += 1;
        let code = format!("code-{}", state.next);
        state.codes.insert(
            code.clone(),
            Code {
                challenge: get("code_challenge"),
                resource: get("resource"),
                redirect_uri: get("redirect_uri"),
                scope: get("scope"),
            },
        );
        let target = if self.mode == "authorize-elsewhere" {
            "http://evil.example/callback".to_owned()
        } else {
            get("redirect_uri")
        };
        let state_param = if self.mode == "state" {
            "forged".to_owned()
        } else {
            get("state")
        };
        let iss = if self.mode == "iss-wrong" {
            "http://evil.example".to_owned()
        } else {
            self.base.clone()
        };
        let mut location = format!("{target}?");
        location.push_str(
            &url::form_urlencoded::Serializer::new(String::new())
                .append_pair("code", &code)
                .append_pair("state", &state_param)
                .append_pair("iss", &iss)
                .finish(),
        );
        redirect(&location)
    }

    async fn token(&self, body: &str) -> Response<Full<Bytes>> {
        if self.mode == "token-redirect" {
            let mut response = redirect("http://evil.example/token");
            *response.status_mut() = StatusCode::TEMPORARY_REDIRECT;
            return response;
        }
        let params = form(body);
        let get = |key: &str| params.get(key).cloned().unwrap_or_default();
        let refuse = |error: &str| respond(StatusCode::BAD_REQUEST, json!({"error": error}));
        if get("resource") != self.resource() {
            return refuse("invalid_target");
        }
        let scope = match get("grant_type").as_str() {
            "authorization_code" => {
                let mut state = lock(&self.state);
                state.stats.code_grants += 1;
                let Some(code) = state.codes.remove(&get("code")) else {
                    return refuse("invalid_grant");
                };
                let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .encode(Sha256::digest(get("code_verifier").as_bytes()));
                if challenge != code.challenge
                    || code.resource != get("resource")
                    || code.redirect_uri != get("redirect_uri")
                {
                    return refuse("invalid_grant");
                }
                code.scope
            }
            "refresh_token" => {
                tokio::time::sleep(Duration::from_millis(300)).await;
                let mut state = lock(&self.state);
                state.stats.refresh_grants += 1;
                let Some(scope) = state.refresh.remove(&get("refresh_token")) else {
                    return refuse("invalid_grant");
                };
                scope
            }
            _ => return refuse("unsupported_grant_type"),
        };
        let mut state = lock(&self.state);
        state.next += 1;
        let access = format!("at-{}", state.next);
        let refresh = format!("rt-{}", state.next);
        let generation = state.generation;
        state
            .access
            .insert(access.clone(), (generation, self.resource()));
        state.refresh.insert(refresh.clone(), scope.clone());
        respond(
            StatusCode::OK,
            json!({
                "access_token": access, "token_type": "Bearer",
                "expires_in": if self.mode == "short-lived" { 30 } else { 3600 },
                "refresh_token": refresh, "scope": scope,
            }),
        )
    }

    fn mcp(&self, authorization: Option<&str>, body: &str) -> Response<Full<Bytes>> {
        let challenge = format!(
            "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"",
            self.base
        );
        let unauthorized = || {
            let mut response = respond(StatusCode::UNAUTHORIZED, json!({"error": "invalid_token"}));
            if let Ok(value) = http::HeaderValue::from_str(&challenge) {
                response
                    .headers_mut()
                    .insert(http::header::WWW_AUTHENTICATE, value);
            }
            response
        };
        {
            let mut state = lock(&self.state);
            let token = authorization.and_then(|value| value.strip_prefix("Bearer "));
            match token {
                None => {
                    state.stats.missing += 1;
                    return unauthorized();
                }
                Some(token) => match state.access.get(token).cloned() {
                    Some((generation, audience))
                        if audience == self.resource() && generation == state.generation =>
                    {
                        state.stats.valid += 1;
                    }
                    Some(_) => return unauthorized(), // expired by /admin/expire
                    None => {
                        state.stats.foreign += 1;
                        return unauthorized();
                    }
                },
            }
        }
        let message: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        let id = message.get("id").cloned();
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(id) = id else {
            let mut response = Response::new(Full::new(Bytes::new()));
            *response.status_mut() = StatusCode::ACCEPTED;
            return response;
        };
        let result = match method {
            "initialize" => json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "auth-testserver", "version": "1"},
            }),
            "tools/list" => json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}),
            "tools/call" => json!({"content": [{"type": "text", "text": "ok"}]}),
            _ => {
                return respond(
                    StatusCode::OK,
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no such method"}}),
                );
            }
        };
        respond(
            StatusCode::OK,
            json!({"jsonrpc": "2.0", "id": id, "result": result}),
        )
    }
}
