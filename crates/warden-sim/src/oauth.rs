//! The OAuth world (decision 0041, revision 3): re-authorisation under the simulator.
//! Warden's real OAuth client (`warden_oauth::OAuthClient`: discovery, refresh, step-up,
//! sign-in through a user agent, one refresh in flight) inside its real Streamable HTTP
//! client and a real `warden_host::Host`, against scripted remote servers and scripted
//! authorization servers, all answering in memory through the one `warden_net::Transport`
//! (the connection's `ConnectOptions::http_transport` and the fetcher's
//! `Fetcher::with_transport`), on the paused clock, a pure function of its seed.
//!
//! Scripted, per seed:
//! - 1-2 remote servers (`upN.sim.invalid`, either era), each a protected resource with its
//!   metadata (RFC 9728) naming its authorization server; it answers 401 (`invalid_token`,
//!   with `resource_metadata`) to a missing, unknown, revoked or other-audience token; it
//!   revokes every token it accepted at planned moments (a 401 mid-session); it may refuse
//!   every token for a few seconds (a server that keeps saying 401); a `write` call needs
//!   scope `mcp:write`, else 403 `insufficient_scope` (a step-up);
//! - 1-2 authorization servers (`asN.sim.invalid`; two servers may share one, which then
//!   issues tokens per resource): metadata (RFC 8414), an authorization endpoint that
//!   approves (or denies) at once and redirects back with `code`, `state` and `iss`, a
//!   token endpoint checking PKCE, the redirect URI and the resource; refresh tokens
//!   rotated or not, a reused rotated token revoking its whole grant or not; access tokens
//!   long-lived, or so short-lived that they are always due; each token request answered
//!   as the seed says: tokens, `invalid_grant`, 503, a refused connection, a stall (the
//!   fetcher's 15 s limit ends it), late (processed, rotated, answered after the client
//!   gave up), or "twice" (the access token it issued before, again); the whole server
//!   down (refused) for a while;
//! - each server's stored grant at the start: fresh, due for refresh, without a refresh
//!   token, already revoked by the server, or none; and who is there to consent: a
//!   headless agent (approves), one the server denies, or nobody (`NoUserAgent`: the call
//!   fails "needs sign-in");
//! - 1-10 calls through the host, `read` or `write`, at random moments.
//!
//! Checked on every run:
//! 1. a token never goes to another origin than the one it was issued for: an access token
//!    only to its own resource's server, a refresh token and a code only to the token
//!    endpoint of the authorization server that issued them, no token in a URL, nothing but
//!    the client's own identity to an authorization server;
//! 2. no call is sent twice with a token the server rejected for it (401 or 403), nor twice
//!    without one;
//! 3. a call is sent at most once plus `MAX_AUTH_ROUNDS` (3) times;
//! 4. refreshes of one client never overlap (one in flight), and never use a refresh token
//!    the authorization server refused, nor one whose successor it delivered (rotation);
//! 5. a refresh that failed for a reason that was not a refusal (503, no connection, no
//!    answer in time) loses nothing and asks nobody: no consent is asked right after it
//!    (unless to step up), the next refresh waits at least `REFRESH_PAUSE_START`, and at
//!    the end a client holds a refresh token whenever its authorization server has a live
//!    one of the newest grant it delivered;
//! 6. every call ends by its deadline (the server's call timeout);
//! 7. the audit log holds one row per call made, with the outcome its caller saw, and
//!    `executed` whenever the server ran it;
//! 8. nothing leaks: no task is left once the host shut down;
//! 9. the same seed gives the same trace.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::time::Instant;
use warden_config::{
    EraPreference, HttpSettings, OAuthSpec, ReconnectSpec, RemoteTransport, TransportSpec,
};
use warden_mcp::ConnectOptions;
use warden_mcp::http::reconnect::{Backoff, SeededRng};
use warden_net::reqwest;
use warden_net::{NetError, Transport};
use warden_oauth::store::{AuthMethod, Grant, ServerRecord};
use warden_oauth::{OAuthClient, Secret, Store, UserAgent};

use crate::remote::{Outcome, Waits, json_body, refused, respond, status, timed_out};
use crate::{Log, driver, pick};

/// Sends of one request at most: the first and `MAX_AUTH_ROUNDS` (warden-mcp's exchange)
/// more after a sign-in, refresh or step-up.
const MAX_SENDS: usize = 4;
/// Scripted token-endpoint answers per authorization server (cycled).
const TOKEN_SCRIPT: usize = 16;
/// The redirect URI the agents register and the authorization servers redirect to.
const REDIRECT: &str = "http://127.0.0.1/callback";
/// The margin within which the client refreshes a token before it expires (its
/// `REFRESH_MARGIN`): an access token living less is always due.
const SHORT_LIFE: u64 = 30;

/// A stored grant at the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Start {
    Fresh,
    /// Expired by the client's clock: refreshed before it is sent.
    Due,
    /// No refresh token.
    NoRefresh,
    /// The server already revoked the access token; the refresh token works.
    Revoked,
    /// Nothing stored.
    Absent,
}

/// Who takes the user to consent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Agent {
    /// A headless agent: the authorization server approves at once.
    Consent,
    /// A headless agent, but the authorization server answers `access_denied`.
    Denied,
    /// Nobody: `NoUserAgent`.
    Nobody,
}

/// What the token endpoint does with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum TokenFault {
    Ok,
    /// 400 `invalid_grant`: the refresh token (or code) is refused for good.
    InvalidGrant,
    /// 503: not processed.
    Unavailable,
    /// The connection is refused: not processed.
    Refused,
    /// No answer: the fetcher's limit ends it; not processed.
    Stall,
    /// Processed (a rotated refresh token is retired), answered after the client gave up.
    Late,
    /// Answered with the access token it issued last for this grant, again.
    Twice,
}

#[derive(Debug, Clone)]
struct ServerPlan {
    modern: bool,
    /// Its authorization server.
    issuer: usize,
    start: Start,
    /// The stored grant's scopes include `mcp:write`.
    writes: bool,
    agent: Agent,
    /// When it revokes every token it accepted so far.
    revocations: Vec<Duration>,
    /// A window in which it refuses every token.
    refuses: Option<(Duration, Duration)>,
    /// Its call timeout: every call to it through the host ends by then, sign-in,
    /// refresh and step-up included (a refresh may be cut short by it).
    call_timeout: Duration,
}

#[derive(Debug, Clone)]
struct IssuerPlan {
    rotates: bool,
    /// A rotated refresh token used again revokes its whole grant.
    reuse_detection: bool,
    short_lived: bool,
    faults: Vec<TokenFault>,
    /// When it is down (every request refused).
    down: Option<(Duration, Duration)>,
}

#[derive(Debug, Clone)]
struct CallPlan {
    server: usize,
    write: bool,
    start: Duration,
}

#[derive(Debug, Clone)]
struct Plan {
    servers: Vec<ServerPlan>,
    issuers: Vec<IssuerPlan>,
    calls: Vec<CallPlan>,
    jitter_seed: u64,
}

fn plan(seed: u64) -> Plan {
    let mut rng = SeededRng::new(seed ^ 0x6f61_7574_6821); // "oauth!": a stream of its own
    let servers_count = 1 + rng.below(2) as usize;
    let issuers_count = if servers_count == 2 && rng.below(2) == 0 {
        1 // a shared authorization server, audiences told apart by `resource`
    } else {
        servers_count
    };
    let faults = [
        (10, TokenFault::Ok),
        (1, TokenFault::InvalidGrant),
        (2, TokenFault::Unavailable),
        (1, TokenFault::Refused),
        (1, TokenFault::Stall),
        (1, TokenFault::Late),
        (1, TokenFault::Twice),
    ];
    let issuers = (0..issuers_count)
        .map(|_| IssuerPlan {
            rotates: rng.below(3) != 0,
            reuse_detection: rng.below(2) == 0,
            short_lived: rng.below(4) == 0,
            faults: (0..TOKEN_SCRIPT).map(|_| pick(&mut rng, &faults)).collect(),
            down: (rng.below(4) == 0).then(|| {
                let from = Duration::from_millis(rng.below(30_000));
                (
                    from,
                    from + Duration::from_millis(1_000 + rng.below(30_000)),
                )
            }),
        })
        .collect();
    let servers = (0..servers_count)
        .map(|index| ServerPlan {
            modern: rng.below(3) == 0,
            issuer: index.min(issuers_count - 1),
            start: pick(
                &mut rng,
                &[
                    (4, Start::Fresh),
                    (2, Start::Due),
                    (1, Start::NoRefresh),
                    (2, Start::Revoked),
                    (1, Start::Absent),
                ],
            ),
            writes: rng.below(3) == 0,
            agent: pick(
                &mut rng,
                &[(2, Agent::Consent), (1, Agent::Denied), (2, Agent::Nobody)],
            ),
            revocations: (0..rng.below(3))
                .map(|_| Duration::from_millis(rng.below(40_000)))
                .collect(),
            refuses: (rng.below(6) == 0).then(|| {
                let from = Duration::from_millis(rng.below(30_000));
                (from, from + Duration::from_millis(500 + rng.below(5_000)))
            }),
            call_timeout: Duration::from_millis(5_000 + rng.below(35_000)),
        })
        .collect::<Vec<_>>();
    let calls = (0..1 + rng.below(10))
        .map(|_| CallPlan {
            server: rng.below(servers_count as u64) as usize,
            write: rng.below(3) == 0,
            start: Duration::from_millis(rng.below(40_000)),
        })
        .collect();
    Plan {
        servers,
        issuers,
        calls,
        jitter_seed: rng.next_u64(),
    }
}

/// What a run found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Calls made.
    pub calls: usize,
    /// Calls answered.
    pub answered: usize,
    /// Calls that failed for want of authorization.
    pub unauthorized: usize,
    /// Calls that hit their deadline.
    pub timeouts: usize,
    /// 401s and 403s the servers answered.
    pub rejections: usize,
    /// Refresh-token grants the authorization servers received.
    pub refreshes: usize,
    /// Authorizations (consent) asked for.
    pub sign_ins: usize,
    /// Step-ups (403 `insufficient_scope`) answered.
    pub step_ups: usize,
    /// Rows of the host's audit log.
    pub audit_rows: usize,
    /// Property violations; empty when the run passed.
    pub violations: Vec<String>,
    /// A digest of the run's trace.
    pub digest: u64,
}

/// One token an authorization server issued.
#[derive(Debug, Clone)]
struct Issued {
    access: bool,
    issuer: usize,
    server: usize,
    /// The grant it belongs to (a rotation or a refresh stays in it).
    family: usize,
    scopes: Vec<String>,
    /// Revoked: by its server (access), or with its whole grant.
    revoked: bool,
    /// Its answer reached the client.
    delivered: bool,
    /// A refresh token answered `invalid_grant`.
    refused: bool,
    /// A rotated refresh token: whether its successor was delivered.
    retired: Option<bool>,
}

/// A code an authorization server handed out, and what its exchange must match.
#[derive(Debug, Clone)]
struct Code {
    issuer: usize,
    server: usize,
    challenge: String,
    redirect: String,
    resource: String,
    scopes: Vec<String>,
}

/// One refresh request as its authorization server saw it.
#[derive(Debug, Clone)]
struct Refresh {
    server: usize,
    arrived: Duration,
    /// Its place among rejections and refreshes.
    sequence: usize,
    ended: Option<Duration>,
    /// It failed without a refusal: no answer, 503, the server down, or an answer the
    /// client must not use (the refused token again).
    soft: bool,
}

/// One send of a call as its server saw it.
#[derive(Debug, Clone)]
struct Delivery {
    call: usize,
    token: Option<String>,
    status: u16,
}

#[derive(Default)]
struct State {
    tokens: HashMap<String, Issued>,
    /// Tokens issued per server so far: every count and script below is kept per server,
    /// so the servers' concurrent connects (whose order at one instant may come from
    /// the host's blocking tasks) cannot change what either meets.
    next_token: HashMap<usize, usize>,
    next_family: usize,
    /// Codes handed out: code to (issuer, server, PKCE challenge, redirect, resource, scopes).
    codes: HashMap<String, Code>,
    /// Token-endpoint requests per authorization server so far.
    token_requests: HashMap<usize, usize>,
    /// Codes handed out per server.
    next_code: HashMap<usize, usize>,
    /// Sessions opened per server.
    next_session: HashMap<usize, usize>,
    refreshes: Vec<Refresh>,
    deliveries: Vec<Delivery>,
    /// Calls each server ran.
    runs: HashMap<usize, usize>,
    sessions: BTreeMap<String, bool>,
    sign_ins: usize,
    step_ups: usize,
    rejections: usize,
    /// When each server last answered 401 or 403, as a place in `sequence`
    /// (events at one instant are told apart by `sequence`).
    last_rejection: HashMap<usize, usize>,
    /// Rejections and refreshes in the order they happened.
    sequence: usize,
}

/// Every scripted server, behind the one transport.
struct Net {
    plan: Plan,
    state: Mutex<State>,
    log: Arc<Log>,
}

impl std::fmt::Debug for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Net")
    }
}

fn server_url(index: usize) -> String {
    format!("https://up{index}.sim.invalid/mcp")
}

fn issuer_url(index: usize) -> String {
    format!("https://as{index}.sim.invalid")
}

/// Records when a refresh request ended: its answer, or the client dropping it.
struct Ends<'a> {
    net: &'a Net,
    index: Option<usize>,
}

impl Drop for Ends<'_> {
    fn drop(&mut self) {
        if let Some(index) = self.index {
            let now = self.net.log.now();
            if let Some(refresh) = self.net.lock().refreshes.get_mut(index) {
                refresh.ended.get_or_insert(now);
            }
        }
    }
}

/// The transport every request of the world goes through: to the server its host names.
struct Wire(Arc<Net>);

impl std::fmt::Debug for Wire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Wire")
    }
}

impl Transport for Wire {
    fn send(
        &self,
        request: reqwest::Request,
    ) -> BoxFuture<'static, Result<reqwest::Response, NetError>> {
        let net = Arc::clone(&self.0);
        Box::pin(async move { net.route(request).await })
    }
}

impl Net {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn event(&self, text: String) {
        self.log.event(text);
    }

    /// Issues a token of `family` and records it.
    fn issue(
        &self,
        state: &mut State,
        access: bool,
        issuer: usize,
        server: usize,
        family: usize,
        scopes: &[String],
    ) -> String {
        let n = {
            let next = state.next_token.entry(server).or_default();
            *next += 1;
            *next
        };
        let token = format!(
            "{}{issuer}.{server}-{}",
            if access { "at" } else { "rt" },
            n
        );
        state.tokens.insert(
            token.clone(),
            Issued {
                access,
                issuer,
                server,
                family,
                scopes: scopes.to_vec(),
                revoked: false,
                delivered: false,
                refused: false,
                retired: None,
            },
        );
        token
    }

    /// Property 4's pause: after a refresh of `server`'s client that failed without a
    /// refusal, the next one waits at least `REFRESH_PAUSE_START`.
    fn check_pause(&self, state: &State, server: usize, now: Duration) {
        let last = state.refreshes.iter().rev().find(|r| r.server == server);
        if let Some(last) = last.filter(|r| r.soft) {
            let ended = last.ended.unwrap_or(now);
            let start = warden_oauth::client::REFRESH_PAUSE_START;
            if now < ended + start {
                self.log.violation(format!(
                    "up{server}: a refresh at {now:?}, {:?} after one that failed at {ended:?} \
                     (the pause is at least {start:?})",
                    now.saturating_sub(ended)
                ));
            }
        }
    }

    /// The server whose refresh token a token-endpoint form carries, if any.
    fn refresh_of(&self, body: &str) -> Option<usize> {
        let token = url::form_urlencoded::parse(body.as_bytes())
            .find(|(name, _)| name == "refresh_token")?
            .1
            .into_owned();
        self.lock().tokens.get(&token).map(|issued| issued.server)
    }

    /// Property 1, for every request: where each token it carries may go.
    fn check_origins(&self, request: &reqwest::Request, body: &str) {
        let url = request.url().as_str().to_owned();
        let host = request.url().host_str().unwrap_or("").to_owned();
        let bearer = request
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::to_owned);
        let state = self.lock();
        for (token, issued) in &state.tokens {
            if url.contains(token.as_str()) {
                self.log
                    .violation(format!("a token is in the URL of a request to {host}"));
            }
            if issued.access && body.contains(token.as_str()) {
                self.log.violation(format!(
                    "access token {token} in the body of a request to {host}"
                ));
            }
        }
        if let Some(bearer) = bearer {
            match state.tokens.get(&bearer) {
                Some(issued)
                    if issued.access && host == format!("up{}.sim.invalid", issued.server) => {}
                Some(issued) => self.log.violation(format!(
                    "token {bearer} (issued for up{}, {}) sent to {host}",
                    issued.server,
                    if issued.access { "access" } else { "refresh" }
                )),
                None => self
                    .log
                    .violation(format!("a bearer token nobody issued sent to {host}")),
            }
        }
    }

    async fn route(
        self: Arc<Self>,
        request: reqwest::Request,
    ) -> Result<reqwest::Response, NetError> {
        let host = request.url().host_str().unwrap_or("").to_owned();
        let body = request
            .body()
            .and_then(reqwest::Body::as_bytes)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default();
        self.check_origins(&request, &body);
        let index = |prefix: &str| {
            host.strip_prefix(prefix)
                .and_then(|rest| rest.split('.').next())
                .and_then(|n| n.parse::<usize>().ok())
        };
        if let Some(server) = index("up").filter(|i| *i < self.plan.servers.len()) {
            return Ok(self.resource(server, &request, &body).await);
        }
        if let Some(issuer) = index("as").filter(|i| *i < self.plan.issuers.len()) {
            let now = self.log.now();
            if self.plan.issuers[issuer]
                .down
                .is_some_and(|(from, to)| from <= now && now < to)
            {
                self.event(format!(
                    "as{issuer} is down: {} refused",
                    request.url().path()
                ));
                if let Some(server) = self.refresh_of(&body) {
                    let mut state = self.lock();
                    self.check_pause(&state, server, now);
                    state.sequence += 1;
                    let sequence = state.sequence;
                    state.refreshes.push(Refresh {
                        server,
                        arrived: now,
                        sequence,
                        ended: Some(now),
                        soft: true,
                    });
                }
                return Err(refused());
            }
            return self.authorization(issuer, &request, &body).await;
        }
        Err(refused())
    }

    /// A remote server: its metadata, and MCP behind its tokens.
    async fn resource(
        &self,
        server: usize,
        request: &reqwest::Request,
        body: &str,
    ) -> reqwest::Response {
        let plan = &self.plan.servers[server];
        let path = request.url().path().to_owned();
        if path.starts_with("/.well-known/oauth-protected-resource") {
            return json_body(&json!({
                "resource": server_url(server),
                "authorization_servers": [issuer_url(plan.issuer)],
                "scopes_supported": ["mcp:read", "mcp:write"],
            }));
        }
        if path != "/mcp" {
            return status(404, "");
        }
        let method = request.method().as_str().to_owned();
        let header = |name: &str| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let session = header("mcp-session-id");
        if method == "DELETE" {
            if let Some(session) = session {
                self.lock().sessions.insert(session, false);
            }
            return status(200, "");
        }
        if method == "GET" {
            return status(405, "");
        }
        let message: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        let rpc = message
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let id = message.get("id").cloned();
        let call = (rpc == "tools/call")
            .then(|| call_number(&message))
            .flatten();
        let tool = message["params"]["name"].as_str().unwrap_or("").to_owned();
        let token =
            header("authorization").and_then(|v| v.strip_prefix("Bearer ").map(str::to_owned));
        let now = self.log.now();
        let refusing = plan
            .refuses
            .is_some_and(|(from, to)| from <= now && now < to);
        let verdict = {
            let mut state = self.lock();
            let issued = token.as_ref().and_then(|t| state.tokens.get(t)).cloned();
            let verdict = match issued {
                Some(issued)
                    if issued.access && issued.server == server && !issued.revoked && !refusing =>
                {
                    if tool == "write" && !issued.scopes.iter().any(|s| s == "mcp:write") {
                        state.step_ups += 1;
                        403
                    } else {
                        200
                    }
                }
                _ => 401,
            };
            if verdict != 200 {
                state.rejections += 1;
                state.sequence += 1;
                let at = state.sequence;
                state.last_rejection.insert(server, at);
            }
            if let Some(call) = call {
                state.deliveries.push(Delivery {
                    call,
                    token: token.clone(),
                    status: verdict,
                });
            }
            verdict
        };
        let shown = token.as_deref().unwrap_or("no token");
        let metadata =
            format!("https://up{server}.sim.invalid/.well-known/oauth-protected-resource/mcp");
        match verdict {
            401 => {
                self.event(format!("up{server}: {rpc} with {shown}: 401"));
                let challenge = if token.is_some() {
                    format!("Bearer resource_metadata=\"{metadata}\", error=\"invalid_token\"")
                } else {
                    format!("Bearer resource_metadata=\"{metadata}\"")
                };
                return respond(401, &[("www-authenticate", &challenge)], Bytes::new());
            }
            403 => {
                self.event(format!(
                    "up{server}: {rpc} with {shown}: 403 insufficient_scope"
                ));
                let challenge = format!(
                    "Bearer error=\"insufficient_scope\", scope=\"mcp:read mcp:write\", resource_metadata=\"{metadata}\""
                );
                return respond(403, &[("www-authenticate", &challenge)], Bytes::new());
            }
            _ => {}
        }
        self.event(format!("up{server}: {rpc} with {shown}"));
        let Some(id) = id else {
            return status(202, "");
        };
        let info = json!({"name": format!("up{server}"), "version": "1"});
        match rpc.as_str() {
            "initialize" => {
                let session = {
                    let mut state = self.lock();
                    let n = {
                        let next = state.next_session.entry(server).or_default();
                        *next += 1;
                        *next
                    };
                    let session = format!("up{server}-s{n}");
                    state.sessions.insert(session.clone(), true);
                    session
                };
                let result = json!({"jsonrpc": "2.0", "id": id, "result": {
                    "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                    "serverInfo": info}});
                respond(
                    200,
                    &[
                        ("content-type", "application/json"),
                        ("mcp-session-id", &session),
                    ],
                    Bytes::from(result.to_string()),
                )
            }
            "server/discover" => json_body(&json!({"jsonrpc": "2.0", "id": id, "result": {
                "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                "serverInfo": info}})),
            "tools/list" => {
                let tool = |name: &str| {
                    json!({"name": name, "inputSchema": {
                    "type": "object", "properties": {"text": {"type": "string"}}}})
                };
                json_body(&json!({"jsonrpc": "2.0", "id": id,
                    "result": {"tools": [tool("read"), tool("write")]}}))
            }
            "tools/call" => {
                let Some(call) = call else {
                    self.log
                        .violation(format!("up{server}: a call without its token"));
                    return status(400, "");
                };
                *self.lock().runs.entry(call).or_default() += 1;
                json_body(&json!({"jsonrpc": "2.0", "id": id, "result": {
                    "content": [{"type": "text", "text": format!("answer to c{call}")}],
                    "isError": false}}))
            }
            other => json_body(&json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": format!("no {other} here")}})),
        }
    }

    /// An authorization server: metadata, the authorization endpoint, the token endpoint.
    async fn authorization(
        &self,
        issuer: usize,
        request: &reqwest::Request,
        body: &str,
    ) -> Result<reqwest::Response, NetError> {
        let base = issuer_url(issuer);
        let url = request.url().clone();
        match (request.method().as_str(), url.path()) {
            ("GET", "/.well-known/oauth-authorization-server") => Ok(json_body(&json!({
                "issuer": base,
                "authorization_endpoint": format!("{base}/authorize"),
                "token_endpoint": format!("{base}/token"),
                "scopes_supported": ["mcp:read", "mcp:write", "offline_access"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "authorization_response_iss_parameter_supported": true,
            }))),
            ("GET", "/authorize") => Ok(self.authorize(issuer, &url)),
            ("POST", "/token") => self.token(issuer, body).await,
            _ => Ok(status(404, "")),
        }
    }

    fn authorize(&self, issuer: usize, url: &reqwest::Url) -> reqwest::Response {
        let query: HashMap<String, String> = url.query_pairs().into_owned().collect();
        let get = |name: &str| query.get(name).cloned().unwrap_or_default();
        let resource = get("resource");
        let server = (0..self.plan.servers.len()).find(|s| server_url(*s) == resource);
        let mut state = self.lock();
        state.sign_ins += 1;
        let mut back = match reqwest::Url::parse(&get("redirect_uri")) {
            Ok(back) => back,
            Err(_) => return status(400, "bad redirect_uri"),
        };
        let Some(server) = server else {
            self.log.violation(format!(
                "as{issuer}: an authorization for an unknown resource"
            ));
            return status(400, "");
        };
        let denied = self.plan.servers[server].agent == Agent::Denied;
        let scopes = warden_oauth::challenge::split_scopes(&get("scope"));
        // Property 5: no consent asked for the authorization server's trouble: not right
        // after a refresh that failed without a refusal, unless it is a step-up (it asks
        // for a scope the newest grant lacks).
        let newest = newest_family(&state, server);
        let step_up = scopes.iter().any(|scope| {
            scope != "offline_access"
                && !newest.is_some_and(|(_, issued)| issued.scopes.contains(scope))
        });
        // The refresh tried for the server's last refusal (a second refusal in one request
        // goes to a sign-in without one: that is the client's bound, not this case).
        let rejected = state.last_rejection.get(&server).copied();
        let last = state
            .refreshes
            .iter()
            .rev()
            .find(|r| r.server == server)
            .filter(|r| rejected.is_none_or(|at| r.sequence > at));
        if !step_up && last.is_some_and(|r| r.soft) && newest_live_refresh(&state, server).is_some()
        {
            self.log.violation(format!(
                "up{server}: consent asked after a refresh that failed without a refusal, \
                 while the authorization server still honours the refresh token"
            ));
        }
        self.log.event(format!(
            "as{issuer}: authorization for up{server} ({}){}",
            scopes.join(" "),
            if denied { ": denied" } else { "" }
        ));
        {
            let mut pairs = back.query_pairs_mut();
            if denied {
                pairs.append_pair("error", "access_denied");
            } else {
                let n = {
                    let next = state.next_code.entry(server).or_default();
                    *next += 1;
                    *next
                };
                let code = format!("code{issuer}.{server}-{n}");
                state.codes.insert(
                    code.clone(),
                    Code {
                        issuer,
                        server,
                        challenge: get("code_challenge"),
                        redirect: get("redirect_uri"),
                        resource,
                        scopes,
                    },
                );
                pairs.append_pair("code", &code);
            }
            pairs.append_pair("state", &get("state"));
            pairs.append_pair("iss", &issuer_url(issuer));
        }
        respond(302, &[("location", back.as_str())], Bytes::new())
    }

    async fn token(&self, issuer: usize, body: &str) -> Result<reqwest::Response, NetError> {
        let form: HashMap<String, String> = url::form_urlencoded::parse(body.as_bytes())
            .into_owned()
            .collect();
        let get = |name: &str| form.get(name).cloned().unwrap_or_default();
        let plan = &self.plan.issuers[issuer];
        // Each server's requests meet the issuer's script from its own place in it.
        let fault = {
            let mut state = self.lock();
            let server = match form.get("refresh_token") {
                Some(token) => state.tokens.get(token).map(|i| i.server),
                None => form
                    .get("code")
                    .and_then(|code| state.codes.get(code))
                    .map(|c| c.server),
            }
            .unwrap_or(0);
            let n = state.token_requests.entry(server).or_default();
            let fault = plan.faults[(*n + 5 * server) % plan.faults.len()];
            *n += 1;
            fault
        };
        let grant_type = get("grant_type");
        let mut ends = Ends {
            net: self,
            index: None,
        };
        if grant_type == "refresh_token" {
            let token = get("refresh_token");
            let mut state = self.lock();
            let issued = state.tokens.get(&token).cloned();
            let Some(issued) = issued.filter(|i| !i.access && i.issuer == issuer) else {
                self.log.violation(format!(
                    "as{issuer}: a refresh with a token it did not issue"
                ));
                return Ok(oauth_error(400, "invalid_grant"));
            };
            if issued.refused {
                self.log.violation(format!(
                    "as{issuer}: refresh token {token} sent again after it was refused"
                ));
            }
            if issued.retired == Some(true) {
                self.log.violation(format!(
                    "as{issuer}: refresh token {token} sent again after its successor was delivered"
                ));
            }
            let now = self.log.now();
            // Property 4: one refresh in flight per client.
            for other in state.refreshes.iter().filter(|r| r.server == issued.server) {
                let ended = other
                    .ended
                    .unwrap_or(other.arrived + warden_oauth::EXCHANGE_LIMIT);
                if now < ended {
                    self.log.violation(format!(
                        "as{issuer}: a refresh for up{} while another (from {:?}) was in flight",
                        issued.server, other.arrived
                    ));
                }
            }
            self.check_pause(&state, issued.server, now);
            state.sequence += 1;
            let sequence = state.sequence;
            state.refreshes.push(Refresh {
                server: issued.server,
                arrived: now,
                sequence,
                ended: None,
                soft: matches!(
                    fault,
                    TokenFault::Unavailable
                        | TokenFault::Refused
                        | TokenFault::Stall
                        | TokenFault::Late
                ),
            });
            ends.index = Some(state.refreshes.len() - 1);
            self.log.event(format!(
                "as{issuer}: refresh of up{} with {token}: {fault:?}",
                issued.server
            ));
        } else {
            self.log
                .event(format!("as{issuer}: {grant_type}: {fault:?}"));
        }
        match fault {
            TokenFault::Unavailable => return Ok(status(503, "")),
            TokenFault::Refused => return Err(refused()),
            TokenFault::Stall => {
                tokio::time::sleep(warden_oauth::EXCHANGE_LIMIT + Duration::from_secs(1)).await;
                return Err(timed_out());
            }
            _ => {}
        }
        let answer = match grant_type.as_str() {
            "refresh_token" => {
                self.refresh_grant(issuer, &get("refresh_token"), &get("resource"), fault)
            }
            "authorization_code" => self.code_grant(issuer, &form),
            _ => Err("unsupported_grant_type"),
        };
        let answer = match answer {
            Ok(answer) => answer,
            Err(refusal) => return Ok(oauth_error(400, refusal)),
        };
        if fault == TokenFault::Late {
            tokio::time::sleep(warden_oauth::EXCHANGE_LIMIT + Duration::from_secs(1)).await;
        }
        // The answer is handed over: what it issued was delivered, what it replaced retired.
        let mut state = self.lock();
        for token in &answer.delivered {
            if let Some(issued) = state.tokens.get_mut(token) {
                issued.delivered = true;
            }
        }
        if let Some(old) = answer
            .retires
            .as_ref()
            .and_then(|t| state.tokens.get_mut(t))
        {
            old.retired = Some(true);
        }
        drop(state);
        drop(ends);
        Ok(json_body(&answer.body))
    }

    /// A refresh: new tokens (`Ok` with the body and the tokens it delivers), or the
    /// refusal.
    fn refresh_grant(
        &self,
        issuer: usize,
        token: &str,
        resource: &str,
        fault: TokenFault,
    ) -> Result<Answer, &'static str> {
        let plan = &self.plan.issuers[issuer];
        let mut state = self.lock();
        let Some(issued) = state.tokens.get(token).cloned() else {
            return Err("invalid_grant");
        };
        let refuse = |state: &mut State| {
            if let Some(issued) = state.tokens.get_mut(token) {
                issued.refused = true;
            }
            if let Some(last) = state.refreshes.last_mut() {
                last.soft = false;
            }
            Err("invalid_grant")
        };
        if fault == TokenFault::InvalidGrant || issued.revoked || issued.refused {
            return refuse(&mut state);
        }
        if issued.retired.is_some() {
            if plan.reuse_detection {
                self.log
                    .event(format!("as{issuer}: {token} reused: the grant is revoked"));
                for other in state
                    .tokens
                    .values_mut()
                    .filter(|i| i.family == issued.family)
                {
                    other.revoked = true;
                }
            }
            return refuse(&mut state);
        }
        if resource != server_url(issued.server) {
            self.log.violation(format!(
                "as{issuer}: a refresh of up{}'s grant for resource {resource}",
                issued.server
            ));
            return Err("invalid_target");
        }
        if fault == TokenFault::Twice {
            // The access token it issued last for this grant, again (no new refresh token).
            let last = state
                .tokens
                .iter()
                .filter(|(_, i)| i.access && i.family == issued.family && i.delivered)
                .max_by_key(|(t, _)| token_number(t))
                .map(|(t, _)| t.clone());
            if let Some(last) = last {
                return Ok(Answer {
                    body: token_body(&last, None, &issued.scopes, plan.short_lived),
                    delivered: Vec::new(),
                    retires: None,
                });
            }
        }
        let access = self.issue(
            &mut state,
            true,
            issuer,
            issued.server,
            issued.family,
            &issued.scopes,
        );
        let mut delivered = vec![access.clone()];
        let fresh = if plan.rotates {
            let fresh = self.issue(
                &mut state,
                false,
                issuer,
                issued.server,
                issued.family,
                &issued.scopes,
            );
            if let Some(old) = state.tokens.get_mut(token) {
                old.retired = Some(false);
            }
            delivered.push(fresh.clone());
            Some(fresh)
        } else {
            None
        };
        Ok(Answer {
            body: token_body(&access, fresh.as_deref(), &issued.scopes, plan.short_lived),
            delivered,
            // Delivering the successor retires the old token for good.
            retires: fresh.map(|_| token.to_owned()),
        })
    }

    fn code_grant(
        &self,
        issuer: usize,
        form: &HashMap<String, String>,
    ) -> Result<Answer, &'static str> {
        let get = |name: &str| form.get(name).cloned().unwrap_or_default();
        let plan = &self.plan.issuers[issuer];
        let mut state = self.lock();
        let Some(Code {
            issuer: code_issuer,
            server,
            challenge,
            redirect,
            resource,
            scopes,
        }) = state.codes.remove(&get("code"))
        else {
            self.log.violation(format!(
                "as{issuer}: a code it did not give, or given twice"
            ));
            return Err("invalid_grant");
        };
        if code_issuer != issuer {
            self.log
                .violation(format!("as{issuer}: as{code_issuer}'s code"));
        }
        if warden_oauth::pkce::s256(&get("code_verifier")) != challenge {
            self.log
                .violation(format!("as{issuer}: a code_verifier that does not match"));
        }
        if get("redirect_uri") != redirect || get("resource") != resource {
            self.log.violation(format!(
                "as{issuer}: a code exchanged with another redirect URI or resource"
            ));
        }
        state.next_family += 1;
        let family = state.next_family;
        let access = self.issue(&mut state, true, issuer, server, family, &scopes);
        let refresh = self.issue(&mut state, false, issuer, server, family, &scopes);
        Ok(Answer {
            body: token_body(&access, Some(&refresh), &scopes, plan.short_lived),
            delivered: vec![access.clone(), refresh.clone()],
            retires: None,
        })
    }
}

/// The newest grant (family) delivered to `server`'s client: one of its tokens.
fn newest_family(state: &State, server: usize) -> Option<(&String, &Issued)> {
    state
        .tokens
        .iter()
        .filter(|(_, i)| i.server == server && i.delivered)
        .max_by_key(|(_, i)| i.family)
}

/// The refresh token of the newest grant delivered to `server`'s client that its
/// authorization server still honours, if any.
fn newest_live_refresh(state: &State, server: usize) -> Option<(&String, &Issued)> {
    let (_, newest) = newest_family(state, server)?;
    state.tokens.iter().find(|(_, i)| {
        !i.access
            && i.family == newest.family
            && i.delivered
            && !i.refused
            && !i.revoked
            && i.retired.is_none()
    })
}

/// A token endpoint's answer: the body, the tokens it hands over, the refresh token it
/// retires once handed over (rotation).
struct Answer {
    body: Value,
    delivered: Vec<String>,
    retires: Option<String>,
}

fn token_number(token: &str) -> usize {
    token
        .rsplit('-')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn token_body(access: &str, refresh: Option<&str>, scopes: &[String], short: bool) -> Value {
    let mut body = json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": if short { SHORT_LIFE } else { 3600 },
        "scope": scopes.join(" "),
    });
    if let Some(refresh) = refresh {
        body["refresh_token"] = json!(refresh);
    }
    body
}

fn oauth_error(code: u16, error: &str) -> reqwest::Response {
    respond(
        code,
        &[("content-type", "application/json")],
        Bytes::from(json!({"error": error}).to_string()),
    )
}

/// The call number a `tools/call` carries (`cN` in its `text` argument).
fn call_number(message: &Value) -> Option<usize> {
    message["params"]["arguments"]["text"]
        .as_str()?
        .strip_prefix('c')?
        .parse()
        .ok()
}

/// Builds each remote server's OAuth client, as the binary's provider does, with the
/// fetcher on the world's transport, and keeps them for the end-of-run checks.
struct Provider {
    plan: Plan,
    wire: Arc<dyn Transport>,
    store: Arc<warden_oauth::MemoryStore>,
    clients: Mutex<BTreeMap<usize, Arc<OAuthClient>>>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Provider")
    }
}

impl warden_mcp::http::OAuthProvider for Provider {
    fn client(&self, remote: &warden_mcp::http::Remote) -> Option<Arc<OAuthClient>> {
        let index: usize = remote.name.strip_prefix("up")?.parse().ok()?;
        let plan = self.plan.servers.get(index)?;
        let url = warden_oauth::Url::parse(&remote.url).ok()?;
        let fetcher = warden_oauth::Fetcher::for_server(false, &url)
            .ok()?
            .with_transport(Arc::clone(&self.wire));
        let agent: Arc<dyn UserAgent> = match plan.agent {
            Agent::Consent | Agent::Denied => {
                Arc::new(warden_oauth::Headless::new(fetcher.clone(), REDIRECT))
            }
            Agent::Nobody => Arc::new(warden_oauth::NoUserAgent),
        };
        let settings = warden_oauth::ClientSettings {
            client_name: "Warden".into(),
            metadata_url: None,
            preregistered: Some(warden_oauth::Preregistered {
                client_id: "warden-sim".into(),
                client_secret: None,
                issuer: Some(issuer_url(plan.issuer)),
                auth_method: Some(AuthMethod::None),
            }),
        };
        let store: Arc<dyn Store> = self.store.clone();
        let client = Arc::new(
            OAuthClient::with_fetcher(&remote.name, url, fetcher, settings, store, agent).ok()?,
        );
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        clients.insert(index, Arc::clone(&client));
        Some(client)
    }
}

/// The stored grants at the start, issued by the world's authorization servers.
fn seed_store(net: &Net, store: &warden_oauth::MemoryStore) {
    for (server, plan) in net.plan.servers.iter().enumerate() {
        if plan.start == Start::Absent {
            continue;
        }
        let mut scopes = vec!["mcp:read".to_owned()];
        if plan.writes {
            scopes.push("mcp:write".into());
        }
        let (access, refresh) = {
            let mut state = net.lock();
            state.next_family += 1;
            let family = state.next_family;
            let access = net.issue(&mut state, true, plan.issuer, server, family, &scopes);
            let refresh = (plan.start != Start::NoRefresh)
                .then(|| net.issue(&mut state, false, plan.issuer, server, family, &scopes));
            for token in std::iter::once(&access).chain(refresh.as_ref()) {
                if let Some(issued) = state.tokens.get_mut(token) {
                    issued.delivered = true;
                    issued.revoked = plan.start == Start::Revoked && issued.access;
                }
            }
            (access, refresh)
        };
        let mut record = ServerRecord::default();
        record.put_grant(Grant {
            issuer: issuer_url(plan.issuer),
            resource: server_url(server),
            access_token: Secret::new(access),
            refresh_token: refresh.map(Secret::new),
            // Long past: due for a refresh whatever the wall clock says.
            expires_at: (plan.start == Start::Due).then_some(1),
            scopes,
        });
        let _ = store.save(&format!("up{server}"), &record);
    }
}

fn spec_of(index: usize, plan: &Plan) -> warden_config::ServerSpec {
    let mut spec = crate::upstream::spec(&format!("up{index}"), plan.servers[index].call_timeout);
    spec.transport = TransportSpec::Http {
        url: server_url(index),
        headers: BTreeMap::new(),
        settings: HttpSettings {
            allow_http: false,
            reconnect: ReconnectSpec {
                connect_attempts: 1,
                attempts: 1,
                initial_delay: Duration::from_millis(100),
                max_delay: Duration::from_secs(1),
            },
            transport: RemoteTransport::Http,
            oauth: OAuthSpec::default(),
        },
    };
    spec.era = if plan.servers[index].modern {
        EraPreference::Modern
    } else {
        EraPreference::Legacy
    };
    spec.timeouts.connect = Duration::from_secs(60);
    spec
}

/// Runs one seed with every check, twice, the traces compared (a difference names the
/// first event that differs).
pub fn run(seed: u64) -> Report {
    let (mut report, first) = run_once(seed);
    let (second, again) = run_once(seed);
    driver::same_digest(
        "oauth",
        seed,
        report.digest,
        second.digest,
        &mut report.violations,
    );
    if report.digest != second.digest
        && let Some((a, b)) = first.iter().zip(&again).find(|(a, b)| a != b)
    {
        report
            .violations
            .push(format!("first difference: {a:?} then {b:?}"));
    }
    report
}

/// The trace of one seed, for replaying a failure.
pub fn trace(seed: u64) -> Vec<String> {
    let log = Arc::new(Log::default());
    let _ = simulate(seed, &log);
    let trace = log.trace.lock().unwrap_or_else(PoisonError::into_inner);
    trace.clone()
}

fn run_once(seed: u64) -> (Report, Vec<String>) {
    let log = Arc::new(Log::default());
    let mut report = simulate(seed, &log);
    let trace = log.trace.lock().unwrap_or_else(PoisonError::into_inner);
    let canonical = crate::upstream::canonical(&trace);
    report.digest = driver::digest(&canonical);
    (report, canonical.into_iter().cloned().collect())
}

fn simulate(seed: u64, log: &Arc<Log>) -> Report {
    let plan = plan(seed);
    let dir = crate::upstream::store_dir(seed);
    let mut report =
        driver::execute(log, world(seed, plan, Arc::clone(log), dir.clone())).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    report.violations = log
        .violations
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    report
}

async fn world(seed: u64, plan: Plan, log: Arc<Log>, dir: std::path::PathBuf) -> Report {
    let start = Instant::now();
    *log.start.lock().unwrap_or_else(PoisonError::into_inner) = Some(start);
    log.event(format!(
        "oauth seed {seed}: servers {:?}, issuers {:?}, {} call(s)",
        plan.servers,
        plan.issuers,
        plan.calls.len()
    ));
    let net = Arc::new(Net {
        plan: plan.clone(),
        state: Mutex::new(State::default()),
        log: Arc::clone(&log),
    });
    let wire: Arc<dyn Transport> = Arc::new(Wire(Arc::clone(&net)));
    let store = Arc::new(warden_oauth::MemoryStore::default());
    seed_store(&net, &store);
    let provider = Arc::new(Provider {
        plan: plan.clone(),
        wire: Arc::clone(&wire),
        store,
        clients: Mutex::new(BTreeMap::new()),
    });
    // Each server revokes every token it accepted so far at its planned moments.
    let revocations: Vec<_> = plan
        .servers
        .iter()
        .enumerate()
        .flat_map(|(server, p)| p.revocations.iter().map(move |at| (server, *at)))
        .map(|(server, at)| {
            let net = Arc::clone(&net);
            tokio::spawn(async move {
                tokio::time::sleep_until(start + at).await;
                net.event(format!("up{server} revokes every token it accepted"));
                for issued in net.lock().tokens.values_mut() {
                    if issued.access && issued.server == server {
                        issued.revoked = true;
                    }
                }
            })
        })
        .collect();
    let waits = Arc::new(Waits {
        ceiling: Duration::from_secs(30),
        log: Arc::clone(&log),
        count: AtomicUsize::new(0),
    });
    let backoff = Backoff::new(waits, SeededRng::new(plan.jitter_seed));
    let store_path = dir.join("state.db");
    let outcomes = calls(&plan, &provider, wire, backoff, &store_path, &log).await;
    for task in revocations {
        let _ = task.await;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let alive = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    if alive != 0 {
        log.violation(format!(
            "{alive} task(s) left on the runtime after shutdown"
        ));
    }
    let mut report = Report {
        calls: outcomes.len(),
        answered: outcomes
            .iter()
            .filter(|(_, o)| matches!(o, Outcome::Answered(_)))
            .count(),
        unauthorized: outcomes
            .iter()
            .filter(|(_, o)| matches!(o, Outcome::Failed(why) if why.contains("authoriz")))
            .count(),
        timeouts: outcomes
            .iter()
            .filter(|(_, o)| *o == Outcome::TimedOut)
            .count(),
        ..Report::default()
    };
    report.audit_rows = check_audit(&plan, &net, &outcomes, &store_path, &log);
    check(&plan, &net, &provider, &outcomes, &log);
    let state = net.lock();
    report.rejections = state.rejections;
    report.refreshes = state.refreshes.len();
    report.sign_ins = state.sign_ins;
    report.step_ups = state.step_ups;
    drop(state);
    // The clients (and the fetchers in them) go with the provider.
    provider
        .clients
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
    report
}

/// The calls, made through a host with a state store and one audited session; the host
/// shut down after them. Each call's time and outcome.
async fn calls(
    plan: &Plan,
    provider: &Arc<Provider>,
    wire: Arc<dyn Transport>,
    backoff: Backoff,
    store_path: &std::path::Path,
    log: &Arc<Log>,
) -> Vec<(Duration, Outcome)> {
    let store = match warden_store::Store::open(store_path) {
        Ok(store) => store,
        Err(error) => {
            log.violation(format!("no state store: {error}"));
            return Vec::new();
        }
    };
    let policy = crate::upstream::policy(json!({
        "rules": [{"tools": "up*__*", "effect": "allow",
                   "even_if_tainted": true, "even_if_private": true}]
    }));
    let oauth: Arc<dyn warden_mcp::http::OAuthProvider> = provider.clone();
    let options = ConnectOptions {
        http_transport: Some(wire),
        backoff: Some(backoff),
        oauth: Some(oauth),
        ..ConnectOptions::default()
    };
    let specs: Vec<_> = (0..plan.servers.len()).map(|i| spec_of(i, plan)).collect();
    let host = Arc::new(
        warden_host::Host::builder(Arc::new(policy))
            .store(store)
            .review(Arc::new(warden_host::NoReview))
            .launcher(Arc::new(warden_mcp::DirectLauncher::from_env()))
            .options(options)
            .connect(specs)
            .await,
    );
    for entry in host.servers() {
        log.event(format!(
            "{}: {}",
            entry.spec.name,
            if entry.ready() {
                "connected"
            } else {
                "not connected"
            }
        ));
    }
    let session = Arc::new(host.session("sim"));
    let tasks: Vec<_> = plan
        .calls
        .iter()
        .enumerate()
        .map(|(number, call)| {
            let (host, session, log) = (Arc::clone(&host), Arc::clone(&session), Arc::clone(log));
            let call = call.clone();
            tokio::spawn(async move {
                tokio::time::sleep(call.start).await;
                let target = format!(
                    "up{}__{}",
                    call.server,
                    if call.write { "write" } else { "read" }
                );
                let prepared =
                    match session.prepare(&host, &target, json!({"text": format!("c{number}")})) {
                        Ok(prepared) => prepared,
                        Err(error) => {
                            log.event(format!("c{number} not made: {error}"));
                            return (Duration::ZERO, Outcome::NotConnected);
                        }
                    };
                let started = Instant::now();
                log.event(format!("c{number} starts ({target})"));
                let outcome =
                    crate::remote::outcome_through_host(session.send(&host, prepared).await);
                let took = started.elapsed();
                log.event(format!("c{number} ends after {took:?}: {outcome:?}"));
                (took, outcome)
            })
        })
        .collect();
    let outcomes = crate::remote::gather(tasks, log).await;
    // Late answers and stalls run out.
    tokio::time::sleep(Duration::from_secs(30)).await;
    drop(session);
    match Arc::try_unwrap(host) {
        Ok(host) => host.shutdown().await,
        Err(_) => log.violation("the host is still held".into()),
    }
    outcomes
}

/// Property 7: one audit row per call made, with the outcome its caller saw, and
/// `executed` whenever the server ran it.
fn check_audit(
    plan: &Plan,
    net: &Net,
    outcomes: &[(Duration, Outcome)],
    store_path: &std::path::Path,
    log: &Log,
) -> usize {
    crate::remote::check_audit_rows(plan.calls.len(), outcomes, store_path, log, |number| {
        net.lock().runs.get(&number).is_some_and(|runs| *runs > 0)
    })
}

/// Properties 2, 3, 5 and 6 (1 and 4 are checked as the requests arrive).
fn check(plan: &Plan, net: &Net, provider: &Provider, outcomes: &[(Duration, Outcome)], log: &Log) {
    let state = net.lock();
    for (number, (took, outcome)) in outcomes.iter().enumerate() {
        let deadline = plan.servers[plan.calls[number].server].call_timeout;
        if *took > deadline {
            log.violation(format!(
                "c{number} ended after {took:?}, past its deadline {deadline:?}"
            ));
        }
        if let Outcome::Answered(text) = outcome
            && !text.contains(&format!("answer to c{number}\""))
        {
            log.violation(format!("c{number} got an answer not its own: {text}"));
        }
        let sends: Vec<&Delivery> = state
            .deliveries
            .iter()
            .filter(|d| d.call == number)
            .collect();
        if sends.len() > MAX_SENDS {
            log.violation(format!(
                "c{number} was sent {} times, over {MAX_SENDS}",
                sends.len()
            ));
        }
        let mut rejected: Vec<&Option<String>> = Vec::new();
        for send in &sends {
            if rejected.contains(&&send.token) {
                log.violation(format!(
                    "c{number} was sent again with {}, which the server had rejected for it",
                    send.token.as_deref().unwrap_or("no token")
                ));
            }
            if send.status != 200 {
                rejected.push(&send.token);
            }
        }
    }
    // 5: a refresh token the authorization server still honours is not lost.
    let clients = provider
        .clients
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    for (server, client) in clients.iter() {
        let live = newest_live_refresh(&state, *server);
        if let Some((token, _)) = live
            && !client.refreshable()
        {
            log.violation(format!(
                "up{server}: the client holds no refresh token, but {token} was delivered and \
                 never refused (its grant: {:?}, {:?})",
                plan.servers[*server].start,
                client.state()
            ));
        }
    }
}
