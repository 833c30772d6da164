//! Serving many clients over Streamable HTTP, both eras, on one endpoint (`/mcp`).
//!
//! Every request passes the same gate before anything runs ([`crate::guard`]): the `Host`
//! header must name an allowed host and a present `Origin` an allowed origin (loopback
//! only by default: a page on another site, or a DNS-rebound name, gets 403), and when
//! tokens are configured (required on a non-loopback address) a matching bearer token,
//! compared in constant time. Then:
//!
//! - 2025-11-25: `initialize` without a session opens one and answers with a random
//!   `Mcp-Session-Id`; later requests must carry it (a missing id is 400, an unknown,
//!   expired, deleted or another token's id is 404 so the client re-initialises). A
//!   `tools/call` is answered on an SSE stream, so an approval elicitation can go out on
//!   it; the client's answer arrives as a POSTed response. DELETE ends a session. A GET
//!   with the session's id opens the session's stream (one at a time: a new GET replaces
//!   the old), which carries `notifications/tools/list_changed`; each event's id is the
//!   catalogue generation, so a client that reconnects with `Last-Event-ID` behind the
//!   current generation is told at once (changes coalesce, so that is the whole replay).
//! - 2026-07-28: a request whose `_meta` carries the modern version is stateless: the
//!   `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers must agree with the body
//!   (-32020), the version must be served (-32022), and a `tools/call` is answered on a
//!   request-scoped SSE stream: closing it cancels the call. `subscriptions/listen` is
//!   answered the same way, with a stream that stays open and carries tool list changes.
//!
//! Bounded everywhere: header read time (slow clients), header count and size, body size
//! and read time, sessions, requests in flight per client, and idle session lifetime.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::BoxFuture;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming as IncomingBody};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::AbortHandle;

use crate::backend::ClientContext;
use crate::dispatch::{self, Era, Gateway, LegacySession, Peer, era_of};
use crate::guard::{Guard, Principal};
use crate::jsonrpc::{
    self, HEADER_MISMATCH, INVALID_PARAMS, INVALID_REQUEST, Incoming, METHOD_NOT_FOUND,
    PARSE_ERROR, RpcError,
};
use crate::listener::{Generations, Want};
use crate::metrics::Refusal;
use crate::outstanding::Outstanding;
use crate::parked::{self, AnswerSlot, CallStream, CallTask};
use warden_mcp::http::headers::{check_modern_headers, check_param_headers};

/// The endpoint's path.
pub const ENDPOINT: &str = "/mcp";

/// Bounds of the HTTP face.
#[derive(Debug, Clone)]
pub struct HttpLimits {
    /// Largest request body.
    pub max_body_bytes: usize,
    /// Most headers in one request.
    pub max_headers: usize,
    /// Time to read a request's headers (slow-loris clients are dropped after it).
    pub header_timeout: Duration,
    /// Time to read a request's body.
    pub body_timeout: Duration,
    /// Open legacy sessions at once.
    pub max_sessions: usize,
    /// A legacy session unused this long expires.
    pub session_idle: Duration,
    /// Requests in flight per client (a legacy session, or a modern client's principal).
    pub max_in_flight_per_client: usize,
    /// Connections open at once.
    pub max_connections: usize,
    /// Gap between SSE keep-alive comments (they also reveal a closed stream).
    pub keepalive: Duration,
    /// How long a stop waits for requests in flight to finish before it gives up on them.
    pub drain: Duration,
    /// How fast each client may send requests ([`crate::rate`]).
    pub rate: crate::rate::Rate,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_body_bytes: 4 << 20,
            max_headers: 64,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_sessions: 1024,
            session_idle: Duration::from_secs(30 * 60),
            max_in_flight_per_client: 16,
            max_connections: 512,
            keepalive: Duration::from_secs(2),
            drain: Duration::from_secs(10),
            rate: crate::rate::Rate::default(),
        }
    }
}

pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// A stateless client's policy context and its request slots.
type ModernClient = (Arc<ClientContext>, Arc<Semaphore>);

/// A response that ends a request early (boxed: responses are large).
pub(crate) type Early = Box<Response<Body>>;

/// One legacy session.
struct Session {
    legacy: LegacySession,
    principal: Principal,
    last_used: Mutex<Instant>,
    slots: Arc<Semaphore>,
    outstanding: Outstanding,
    running: Mutex<HashMap<String, AbortHandle>>,
    /// The session's GET stream, if open.
    stream: Mutex<Option<AbortHandle>>,
}

/// The server's shared state.
struct State {
    gateway: Arc<Gateway>,
    guard: Guard,
    limits: HttpLimits,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// Per-principal policy contexts and slots of modern (stateless) clients.
    modern: Mutex<HashMap<String, ModernClient>>,
    connections: Arc<Semaphore>,
    /// Turns true when the server stops: connections finish what they are answering and
    /// close, and the streams that never end by themselves (GET streams, listens) end.
    draining: tokio::sync::watch::Sender<bool>,
    /// Each client's request rate.
    rates: crate::rate::Limiter,
}

impl State {
    fn metrics(&self) -> &crate::metrics::Metrics {
        self.gateway.backend().metrics()
    }
}

/// Health paths, answered after the same gate as the endpoint.
const LIVENESS: &str = "/healthz";
const READINESS: &str = "/readyz";
/// The counters, in Prometheus text; behind the same gate.
const METRICS: &str = "/metrics";

/// Serves `gateway` on `listener` until `stop` completes; then stops accepting.
pub async fn serve(
    gateway: Arc<Gateway>,
    listener: TcpListener,
    guard: Guard,
    limits: HttpLimits,
    stop: impl std::future::Future<Output = ()>,
) {
    let state = new_state(gateway, guard, limits);
    let mut stop = std::pin::pin!(stop);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stop => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!("accepting a connection failed: {error}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Answers are small writes (a response head, then an SSE event): without this,
        // Nagle's algorithm holds the second one until the client's delayed ACK, about
        // 40 ms a call (bench/gateways measured 44 ms p50 at one client before).
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%peer, "TCP_NODELAY could not be set: {error}");
        }
        serve_connection(&state, stream, peer);
    }
    drop(listener);
    drain(&state).await;
}

/// Serves `gateway` on the connections `incoming` yields (any byte stream: the simulator
/// hands in in-memory pipes, so the HTTP face runs under its paused clock) until `stop`
/// completes or `incoming` ends; then stops as [`serve`] does. Each connection is
/// served exactly as an accepted TCP connection is.
pub async fn serve_connections<I>(
    gateway: Arc<Gateway>,
    mut incoming: mpsc::Receiver<(I, SocketAddr)>,
    guard: Guard,
    limits: HttpLimits,
    stop: impl std::future::Future<Output = ()>,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let state = new_state(gateway, guard, limits);
    let mut stop = std::pin::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = incoming.recv() => match accepted {
                Some(accepted) => accepted,
                None => break,
            },
            () = &mut stop => break,
        };
        serve_connection(&state, stream, peer);
    }
    drop(incoming);
    drain(&state).await;
}

fn new_state(gateway: Arc<Gateway>, guard: Guard, limits: HttpLimits) -> Arc<State> {
    Arc::new(State {
        gateway,
        guard,
        connections: Arc::new(Semaphore::new(limits.max_connections.max(1))),
        sessions: Mutex::new(HashMap::new()),
        modern: Mutex::new(HashMap::new()),
        draining: tokio::sync::watch::channel(false).0,
        rates: crate::rate::Limiter::new(limits.rate, limits.max_sessions.saturating_add(64)),
        limits,
    })
}

/// Serves one accepted connection on its own task, within the connection limit (over
/// it, the connection is closed at once).
fn serve_connection<I>(state: &Arc<State>, stream: I, peer: SocketAddr)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let Ok(permit) = Arc::clone(&state.connections).try_acquire_owned() else {
        tracing::warn!(%peer, "connection refused: {} already open", state.limits.max_connections);
        drop(stream);
        return;
    };
    let state = Arc::clone(state);
    tokio::spawn(async move {
        let service_state = Arc::clone(&state);
        let service = service_fn(move |request| {
            let state = Arc::clone(&service_state);
            async move { Ok::<_, Infallible>(handle(&state, request, peer).await) }
        });
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(state.limits.header_timeout)
            .max_headers(state.limits.max_headers)
            .max_buf_size(64 * 1024);
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        let mut connection = std::pin::pin!(connection);
        let mut draining = state.draining.subscribe();
        let ended = tokio::select! {
            ended = connection.as_mut() => ended,
            () = until_draining(&mut draining) => {
                // Finish the request being answered, then close.
                connection.as_mut().graceful_shutdown();
                connection.await
            }
        };
        if let Err(error) = ended {
            tracing::debug!(%peer, "connection ended: {error}");
        }
        drop(permit);
    });
}

/// Returns once the server is stopping (at once if it already is).
async fn until_draining(draining: &mut tokio::sync::watch::Receiver<bool>) {
    // The guard the wait returns is dropped here, never held across an await.
    let _ = draining.wait_for(|draining| *draining).await;
}

/// Stops the served requests in order: nothing new is accepted (the listener is closed),
/// requests being answered finish (a call runs to its result), open GET and listen
/// streams end, and whatever is still running after [`HttpLimits::drain`] is given up.
async fn drain(state: &State) {
    state.draining.send_replace(true);
    let all = u32::try_from(state.limits.max_connections.max(1)).unwrap_or(u32::MAX);
    let finished = tokio::time::timeout(
        state.limits.drain,
        Arc::clone(&state.connections).acquire_many_owned(all),
    )
    .await;
    match finished {
        Ok(_) => tracing::info!("drained: every request finished"),
        Err(_) => tracing::warn!(
            "requests still running after the {} drain were given up",
            warden_mcp::error::humanize(state.limits.drain)
        ),
    }
}

fn full(status: StatusCode, body: impl Into<Bytes>, content_type: &str) -> Response<Body> {
    let mut response = Response::new(Full::new(body.into()).map_err(|e| match e {}).boxed());
    *response.status_mut() = status;
    if let Ok(value) = HeaderValue::from_str(content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
}

pub(crate) fn text(status: StatusCode, message: &str) -> Response<Body> {
    let mut body = message.to_owned();
    body.push('\n');
    full(status, body, "text/plain; charset=utf-8")
}

pub(crate) fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    full(status, value.to_string(), "application/json")
}

fn rpc_error(status: StatusCode, id: &Value, error: &RpcError) -> Response<Body> {
    json_response(status, &jsonrpc::error_response(id, error))
}

fn header_str<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

async fn handle(state: &State, request: Request<IncomingBody>, peer: SocketAddr) -> Response<Body> {
    // The gate: nothing below runs for a hostile Host or Origin, or without a token.
    let principal = match state.guard.check(request.headers()) {
        Ok(principal) => principal,
        Err(refusal) => {
            tracing::info!(%peer, "refused: {}", refusal.reason);
            state.metrics().refused(match refusal.status {
                StatusCode::FORBIDDEN => Refusal::Forbidden,
                StatusCode::UNAUTHORIZED => Refusal::Unauthorized,
                _ => Refusal::BadRequest,
            });
            let mut response = text(refusal.status, &refusal.reason);
            if refusal.status == StatusCode::UNAUTHORIZED {
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"warden\""),
                );
            }
            return response;
        }
    };
    // OAuth (`[serve.auth]`): the metadata documents, then a token meant for Warden.
    let principal =
        match crate::oauth::admit(state.guard.resource_server(), &request, principal).await {
            Ok(principal) => principal,
            Err(response) => return *response,
        };
    match (request.method(), request.uri().path()) {
        (&Method::GET, LIVENESS) => return text(StatusCode::OK, "ok"),
        (&Method::GET, READINESS) => return readiness(state),
        (&Method::GET, METRICS) => return metrics(state),
        _ => {}
    }
    if request.uri().path() != ENDPOINT {
        return text(
            StatusCode::NOT_FOUND,
            &format!("not found: the MCP endpoint is {ENDPOINT}"),
        );
    }
    match *request.method() {
        Method::POST => post(state, request, principal).await,
        Method::DELETE => delete(state, request.headers(), &principal),
        Method::GET if request.headers().contains_key("mcp-session-id") => {
            session_stream(state, request.headers(), &principal)
        }
        Method::GET => {
            // Without a session (a 2026-07-28 client) change notifications come on a
            // `subscriptions/listen` stream instead.
            let mut response = text(
                StatusCode::METHOD_NOT_ALLOWED,
                "a GET stream belongs to a 2025-11-25 session (send its Mcp-Session-Id); \
                 2026-07-28 clients use subscriptions/listen",
            );
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
            response
        }
        _ => {
            let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "use POST");
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
            response
        }
    }
}

/// The counters in Prometheus text, with the open sessions and stateless clients.
fn metrics(state: &State) -> Response<Body> {
    let sessions = state.sessions.lock().map(|s| s.len()).unwrap_or_default();
    let stateless = state.modern.lock().map(|m| m.len()).unwrap_or_default();
    full(
        StatusCode::OK,
        state.metrics().render(sessions, stateless),
        "text/plain; version=0.0.4; charset=utf-8",
    )
}

/// Ready: not stopping, and at least one upstream server connected (each server's state
/// is in the body). 503 otherwise, with the same body.
fn readiness(state: &State) -> Response<Body> {
    let draining = *state.draining.borrow();
    let (connected, servers) = state.gateway.backend().server_states();
    let ready = !draining && connected > 0;
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    json_response(
        status,
        &serde_json::json!({"ready": ready, "draining": draining, "servers": servers}),
    )
}

fn delete(state: &State, headers: &HeaderMap, principal: &Principal) -> Response<Body> {
    let Some(id) = header_str(headers, "mcp-session-id") else {
        return text(StatusCode::BAD_REQUEST, "DELETE needs an Mcp-Session-Id");
    };
    let Ok(mut sessions) = state.sessions.lock() else {
        return text(StatusCode::INTERNAL_SERVER_ERROR, "state lost");
    };
    match sessions.get(id) {
        Some(session) if session.principal == *principal => {
            if let Some(session) = sessions.remove(id) {
                cancel_all(&session);
            }
            text(StatusCode::OK, "session ended")
        }
        _ => text(StatusCode::NOT_FOUND, "no such session"),
    }
}

fn cancel_all(session: &Session) {
    if let Ok(mut running) = session.running.lock() {
        for (_, handle) in running.drain() {
            handle.abort();
        }
    }
    if let Some(stream) = session.stream.lock().ok().and_then(|mut s| s.take()) {
        stream.abort();
    }
    // Its resource subscriptions end with it (the upstream ones at the next tick).
    session.legacy.subscriber.end();
}

fn accepts(headers: &HeaderMap) -> bool {
    let accept = header_str(headers, "accept").unwrap_or("");
    let has = |kind: &str| {
        accept
            .split(',')
            .map(|part| part.split(';').next().unwrap_or("").trim())
            .any(|part| part == kind || part == "*/*")
    };
    has("application/json") && has("text/event-stream")
}

async fn read_body(state: &State, request: Request<IncomingBody>) -> Result<Bytes, Early> {
    let max = state.limits.max_body_bytes;
    let too_large = || {
        state.metrics().refused(Refusal::BodyTooLarge);
        Box::new(text(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("the body is larger than {max} bytes"),
        ))
    };
    if let Some(length) = header_str(request.headers(), "content-length")
        .and_then(|length| length.parse::<u64>().ok())
        && length > max as u64
    {
        return Err(too_large());
    }
    let limited = Limited::new(request.into_body(), max);
    match tokio::time::timeout(state.limits.body_timeout, limited.collect()).await {
        Err(_) => {
            let seconds = state.limits.body_timeout.as_secs();
            Err(Box::new(text(
                StatusCode::REQUEST_TIMEOUT,
                &format!("the body did not arrive within {seconds}s"),
            )))
        }
        Ok(Err(error)) if error.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Ok(Err(_)) => Err(Box::new(text(
            StatusCode::BAD_REQUEST,
            "the body could not be read",
        ))),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
    }
}

async fn post(
    state: &State,
    request: Request<IncomingBody>,
    principal: Principal,
) -> Response<Body> {
    let headers = request.headers().clone();
    let content_type = header_str(&headers, "content-type").unwrap_or("");
    if content_type.split(';').next().map(str::trim) != Some("application/json") {
        return text(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the body must be application/json",
        );
    }
    if !accepts(&headers) {
        return text(
            StatusCode::NOT_ACCEPTABLE,
            "Accept must list application/json and text/event-stream",
        );
    }
    let body = match read_body(state, request).await {
        Ok(body) => body,
        Err(response) => return *response,
    };
    let message: Value = match serde_json::from_slice(&body) {
        Ok(message) => message,
        Err(error) => {
            let error = RpcError::new(PARSE_ERROR, format!("not JSON: {error}"));
            return rpc_error(StatusCode::BAD_REQUEST, &Value::Null, &error);
        }
    };
    let message = match jsonrpc::parse(message) {
        Ok(message) => message,
        Err((id, error)) => return rpc_error(StatusCode::BAD_REQUEST, &id, &error),
    };
    let (method, params) = match &message {
        Incoming::Request { method, params, .. } | Incoming::Notification { method, params } => {
            (method.as_str(), params)
        }
        Incoming::Response { .. } => ("", &Value::Null),
    };
    // Requests count against the client's rate; answers to Warden's own requests
    // (elicitations) do not.
    if let Incoming::Request { id, .. } = &message
        && let Err(refused) = take_rate(state, &headers, &principal)
    {
        state.metrics().refused(Refusal::Rate);
        return rate_refusal(state, id, refused);
    }
    let modern = era_of(method, params) == Some(Era::Modern)
        || header_str(&headers, "mcp-protocol-version") == Some(dispatch::MODERN_VERSION);
    if modern {
        return modern_post(state, &headers, message, principal).await;
    }
    legacy_post(state, &headers, message, principal).await
}

// ---- 2025-11-25 ----

fn find_session(
    state: &State,
    headers: &HeaderMap,
    principal: &Principal,
) -> Result<Arc<Session>, Early> {
    let Some(id) = header_str(headers, "mcp-session-id") else {
        return Err(Box::new(rpc_error(
            StatusCode::BAD_REQUEST,
            &Value::Null,
            &RpcError::new(
                INVALID_REQUEST,
                "missing Mcp-Session-Id: send initialize first (2025-11-25), or a request with \
                 the 2026-07-28 `_meta`",
            ),
        )));
    };
    let Ok(mut sessions) = state.sessions.lock() else {
        return Err(Box::new(text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "state lost",
        )));
    };
    let now = Instant::now();
    let found = sessions.get(id).cloned();
    match found {
        // Another token's session is as unknown as one that never existed.
        Some(session) if session.principal == *principal => {
            let idle = session
                .last_used
                .lock()
                .map(|last| now.duration_since(*last))
                .unwrap_or_default();
            if idle > state.limits.session_idle {
                sessions.remove(id);
                cancel_all(&session);
                state.metrics().refused(Refusal::UnknownSession);
                return Err(Box::new(session_gone()));
            }
            if let Ok(mut last) = session.last_used.lock() {
                *last = now;
            }
            Ok(session)
        }
        _ => {
            state.metrics().refused(Refusal::UnknownSession);
            Err(Box::new(session_gone()))
        }
    }
}

fn session_gone() -> Response<Body> {
    rpc_error(
        StatusCode::NOT_FOUND,
        &Value::Null,
        &RpcError::new(
            INVALID_REQUEST,
            "no such session (it expired, was deleted, or never existed): initialize again",
        ),
    )
}

async fn legacy_post(
    state: &State,
    headers: &HeaderMap,
    message: Incoming,
    principal: Principal,
) -> Response<Body> {
    if let Incoming::Request { id, method, params } = &message
        && method == "initialize"
    {
        if headers.contains_key("mcp-session-id") {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                id,
                &RpcError::new(
                    INVALID_REQUEST,
                    "initialize opens a session; send it without Mcp-Session-Id",
                ),
            );
        }
        return initialize(state, id, params, principal);
    }
    let session = match find_session(state, headers, &principal) {
        Ok(session) => session,
        Err(response) => return *response,
    };
    // A version this session could have negotiated is accepted (clients differ in what
    // they send after `initialize`); anything else is refused.
    if let Some(version) = header_str(headers, "mcp-protocol-version")
        && !dispatch::LEGACY_VERSIONS.contains(&version)
    {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            &Value::Null,
            &RpcError::new(
                INVALID_REQUEST,
                format!(
                    "MCP-Protocol-Version {version} is not served in a session (this session \
                     negotiated {})",
                    session.legacy.version
                ),
            ),
        );
    }
    match message {
        Incoming::Response { id, outcome } => {
            session.outstanding.answer(&id, outcome);
            full(StatusCode::ACCEPTED, Bytes::new(), "application/json")
        }
        Incoming::Notification { method, params } => {
            if method == "notifications/cancelled" {
                if let Some(id) = params.get("requestId") {
                    let handle = session
                        .running
                        .lock()
                        .ok()
                        .and_then(|mut running| running.remove(&jsonrpc::id_key(id)));
                    if let Some(handle) = handle {
                        handle.abort();
                    }
                }
            } else {
                state.gateway.legacy_notification(&session.legacy, &method);
            }
            full(StatusCode::ACCEPTED, Bytes::new(), "application/json")
        }
        Incoming::Request { id, method, params } => {
            let Ok(permit) = Arc::clone(&session.slots).try_acquire_owned() else {
                state.metrics().refused(Refusal::InFlight);
                return too_many(&id, state.limits.max_in_flight_per_client);
            };
            if method == "tools/call" {
                legacy_stream(state, session, id, method, params, permit).await
            } else {
                let answer = state
                    .gateway
                    .legacy(&session.legacy, &method, params, Arc::new(dispatch::NoPeer))
                    .await;
                drop(permit);
                answer_json(&id, answer)
            }
        }
    }
}

/// Takes one request from the client's bucket: the session's, when the request names a
/// session that exists, else the principal's.
fn take_rate(
    state: &State,
    headers: &HeaderMap,
    principal: &Principal,
) -> Result<(), crate::rate::Refused> {
    let session = header_str(headers, "mcp-session-id").filter(|id| {
        state
            .sessions
            .lock()
            .is_ok_and(|sessions| sessions.get(*id).is_some_and(|s| s.principal == *principal))
    });
    let key = match session {
        Some(id) => format!("s:{id}"),
        None => format!("p:{}", principal.key()),
    };
    state.rates.take(&key, Instant::now(), |key| {
        key.strip_prefix("s:").is_none_or(|id| {
            state
                .sessions
                .lock()
                .is_ok_and(|sessions| sessions.contains_key(id))
        })
    })
}

fn rate_refusal(state: &State, id: &Value, refused: crate::rate::Refused) -> Response<Body> {
    let rate = state.rates.rate();
    let seconds = refused.retry_after.as_secs_f64().ceil().max(1.0);
    let mut response = rpc_error(
        StatusCode::TOO_MANY_REQUESTS,
        id,
        &RpcError::new(
            INVALID_REQUEST,
            format!(
                "rate limit: this client sent more than {} requests per second (bursts of {}); \
                 retry in {seconds:.0} s ([serve] requests_per_second, request_burst)",
                rate.per_second, rate.burst
            ),
        ),
    );
    if let Ok(value) = HeaderValue::from_str(&format!("{seconds:.0}")) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

fn too_many(id: &Value, limit: usize) -> Response<Body> {
    rpc_error(
        StatusCode::TOO_MANY_REQUESTS,
        id,
        &RpcError::new(
            INVALID_REQUEST,
            format!("this client already has {limit} requests in flight"),
        ),
    )
}

fn answer_json(id: &Value, answer: Result<Value, RpcError>) -> Response<Body> {
    match answer {
        Ok(result) => json_response(StatusCode::OK, &jsonrpc::response(id, result)),
        Err(error) => json_response(StatusCode::OK, &jsonrpc::error_response(id, &error)),
    }
}

fn initialize(state: &State, id: &Value, params: &Value, principal: Principal) -> Response<Body> {
    let session_id = match crate::secret::session_id() {
        Ok(session_id) => session_id,
        Err(error) => {
            return rpc_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                id,
                &RpcError::new(
                    jsonrpc::INTERNAL_ERROR,
                    format!("no random source: {error}"),
                ),
            );
        }
    };
    let (mut legacy, result) = match state.gateway.initialize(params, &session_id) {
        Ok(opened) => opened,
        Err(error) => return rpc_error(StatusCode::BAD_REQUEST, id, &error),
    };
    if let Some(caller) = principal.caller() {
        // An OAuth caller: its calls are decided for it and audited under its name.
        let name = format!("{} {}", legacy.client.name(), principal.label());
        legacy.client = state
            .gateway
            .backend()
            .client(name)
            .with_caller(Arc::clone(caller));
    }
    {
        let Ok(mut sessions) = state.sessions.lock() else {
            return text(StatusCode::INTERNAL_SERVER_ERROR, "state lost");
        };
        if sessions.len() >= state.limits.max_sessions {
            let now = Instant::now();
            let idle = state.limits.session_idle;
            sessions.retain(|_, session| {
                let alive = session
                    .last_used
                    .lock()
                    .map(|last| now.duration_since(*last) <= idle)
                    .unwrap_or(false);
                if !alive {
                    cancel_all(session);
                }
                alive
            });
        }
        if sessions.len() >= state.limits.max_sessions {
            state.metrics().refused(Refusal::Sessions);
            return rpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                id,
                &RpcError::new(
                    INVALID_REQUEST,
                    format!(
                        "{} sessions are open, the most allowed; try again later",
                        state.limits.max_sessions
                    ),
                ),
            );
        }
        sessions.insert(
            session_id.clone(),
            Arc::new(Session {
                legacy,
                principal,
                last_used: Mutex::new(Instant::now()),
                slots: Arc::new(Semaphore::new(state.limits.max_in_flight_per_client.max(1))),
                outstanding: Outstanding::new(),
                running: Mutex::new(HashMap::new()),
                stream: Mutex::new(None),
            }),
        );
    }
    let mut response = json_response(StatusCode::OK, &jsonrpc::response(id, result));
    if let Ok(value) = HeaderValue::from_str(&session_id) {
        response.headers_mut().insert("mcp-session-id", value);
    }
    response
}

/// The peer of a legacy tools/call: requests go out on the call's SSE stream.
struct StreamPeer {
    session: Arc<Session>,
    events: mpsc::Sender<Value>,
    max_outbound: usize,
}

impl Peer for StreamPeer {
    fn request<'a>(
        &'a self,
        method: &'a str,
        params: Value,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(self.session.outstanding.request(
            method,
            params,
            timeout,
            self.max_outbound,
            move |message| async move { self.events.send(message).await.is_ok() },
        ))
    }

    fn notify(&self, message: Value) {
        let _ = self.events.try_send(message);
    }
}

/// One SSE event's text.
trait SseEvent: Send + 'static {
    fn render(&self) -> String;
}

impl SseEvent for Value {
    fn render(&self) -> String {
        format!("event: message\ndata: {self}\n\n")
    }
}

/// An event with an id (the session stream's: the list generations).
struct Identified(String, Value);

impl SseEvent for Identified {
    fn render(&self) -> String {
        format!("id: {}\nevent: message\ndata: {}\n\n", self.0, self.1)
    }
}

fn sse_response<E: SseEvent>(events: mpsc::Receiver<E>, keepalive: Duration) -> Response<Body> {
    sse_response_after(None, events, keepalive)
}

/// [`sse_response`] whose stream starts with `first`, when there is one.
fn sse_response_after<E: SseEvent>(
    first: Option<E>,
    mut events: mpsc::Receiver<E>,
    keepalive: Duration,
) -> Response<Body> {
    let (frames, body_rx) = mpsc::channel::<Result<Frame<Bytes>, Infallible>>(16);
    tokio::spawn(async move {
        if let Some(first) = first
            && frames
                .send(Ok(Frame::data(Bytes::from(first.render()))))
                .await
                .is_err()
        {
            return;
        }
        loop {
            // A client that closes the stream is noticed at once, not at the next
            // keep-alive: for a 2026-07-28 call the close is its cancellation, and a call
            // that ended within that gap ran on and was audited as answered (the
            // simulator's gateway world, seed 4).
            let next = tokio::select! {
                next = tokio::time::timeout(keepalive, events.recv()) => next,
                () = frames.closed() => break,
            };
            let chunk = match next {
                Ok(Some(message)) => message.render(),
                Ok(None) => break,
                Err(_) => ": keep-alive\n\n".to_owned(),
            };
            if frames
                .send(Ok(Frame::data(Bytes::from(chunk))))
                .await
                .is_err()
            {
                // The client closed the stream: dropping `events` tells the producer.
                break;
            }
        }
    });
    let stream = futures::stream::unfold(body_rx, |mut rx| async move {
        rx.recv().await.map(|frame| (frame, rx))
    });
    let mut response = Response::new(StreamBody::new(stream).boxed());
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// A 2025-11-25 session's GET stream: `notifications/…/list_changed` each time the tools,
/// resources or prompts offered change, and `notifications/resources/updated` for each
/// update of a resource the session subscribed to (once the session is initialized). Each
/// event's id names the three list generations; a `Last-Event-ID` behind any of them gets
/// that list's notification at once (updates that arrived while no stream was open wait
/// for the next one). One stream per session: a new GET replaces the old.
fn session_stream(state: &State, headers: &HeaderMap, principal: &Principal) -> Response<Body> {
    let session = match find_session(state, headers, principal) {
        Ok(session) => session,
        Err(early) => return *early,
    };
    let mut listener = state.gateway.backend().listener(Want::ALL);
    let current = listener.generations();
    let missed = header_str(headers, "last-event-id")
        .and_then(Generations::parse)
        .map(|last| last.missed(&current))
        .unwrap_or_default();
    let (events, events_rx) = mpsc::channel::<Identified>(4);
    let weak = Arc::downgrade(&session);
    let mut draining = state.draining.subscribe();
    let task = tokio::spawn(async move {
        let initialized = || weak.upgrade().is_some_and(|s| s.legacy.initialized());
        if initialized() {
            for notice in missed {
                if events
                    .send(Identified(current.event_id(), notice.message()))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
        loop {
            let Some(session) = weak.upgrade() else {
                return;
            };
            let notices = tokio::select! {
                notices = listener.next(Some(&session.legacy.subscriber)) => match notices {
                    Some(notices) => notices,
                    None => return,
                },
                () = events.closed() => return,
                () = until_draining(&mut draining) => return,
            };
            if !session.legacy.initialized() {
                continue;
            }
            drop(session);
            let id = listener.generations().event_id();
            for notice in notices {
                if events
                    .send(Identified(id.clone(), notice.message()))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    });
    if let Ok(mut stream) = session.stream.lock()
        && let Some(old) = stream.replace(task.abort_handle())
    {
        old.abort();
    }
    sse_response(events_rx, state.limits.keepalive)
}

async fn legacy_stream(
    state: &State,
    session: Arc<Session>,
    id: Value,
    method: String,
    params: Value,
    permit: OwnedSemaphorePermit,
) -> Response<Body> {
    let (events, mut events_rx) = mpsc::channel::<Value>(16);
    let gateway = Arc::clone(&state.gateway);
    let key = jsonrpc::id_key(&id);
    let task_session = Arc::clone(&session);
    let task_key = key.clone();
    // The map's lock is held until the call is in it (the call removes itself when done),
    // and let go before this handler waits.
    {
        let Ok(mut running) = session.running.lock() else {
            return text(StatusCode::INTERNAL_SERVER_ERROR, "state lost");
        };
        let task = tokio::spawn(async move {
            let peer = Arc::new(StreamPeer {
                session: Arc::clone(&task_session),
                events: events.clone(),
                max_outbound: 4,
            });
            // 2025-11-25: a closed stream is not a cancellation; the call runs to its end.
            let answer = gateway
                .legacy(&task_session.legacy, &method, params, peer)
                .await;
            if let Ok(mut running) = task_session.running.lock() {
                running.remove(&task_key);
            }
            let message = match answer {
                Ok(result) => jsonrpc::response(&id, result),
                Err(error) => jsonrpc::error_response(&id, &error),
            };
            let _ = events.send(message).await;
            drop(permit);
        });
        running.insert(key, task.abort_handle());
    }
    // The answer's form waits for the call's first message, for up to one keep-alive
    // interval: the answer itself, with nothing said before it, goes as JSON (the client
    // accepts both; one write, no stream to keep). Anything else (progress, a log message,
    // a server's question) opens the stream and the answer follows on it, as does a call
    // still running after the interval (it gets the stream's keep-alives). The call runs
    // in its own task either way: a client that hangs up meanwhile does not cancel it.
    let first = match tokio::time::timeout(state.limits.keepalive, events_rx.recv()).await {
        Ok(Some(first)) if is_answer(&first) => {
            return json_response(StatusCode::OK, &first);
        }
        Ok(Some(first)) => Some(first),
        // Cancelled (`notifications/cancelled`): no answer, an empty stream as before.
        Ok(None) => None,
        Err(_) => None,
    };
    sse_response_after(first, events_rx, state.limits.keepalive)
}

/// Whether `message` is a JSON-RPC response (a result or an error), not a request or a
/// notification.
fn is_answer(message: &Value) -> bool {
    message.get("method").is_none()
        && message.get("id").is_some()
        && (message.get("result").is_some() || message.get("error").is_some())
}

// ---- 2026-07-28 ----

fn modern_status(error: &RpcError) -> StatusCode {
    match error.code {
        METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        HEADER_MISMATCH
        | jsonrpc::UNSUPPORTED_VERSION
        | jsonrpc::MISSING_CAPABILITY
        | INVALID_REQUEST
        | PARSE_ERROR => StatusCode::BAD_REQUEST,
        INVALID_PARAMS => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

fn modern_client(state: &State, principal: &Principal) -> Option<ModernClient> {
    let key = principal.key();
    let fresh = || {
        let client = state
            .gateway
            .backend()
            .client(format!("http:{}", principal.label()));
        // An OAuth caller's calls are decided for it (the policy's caller rules).
        match principal.caller() {
            Some(caller) => client.with_caller(Arc::clone(caller)),
            None => client,
        }
    };
    let Ok(mut clients) = state.modern.lock() else {
        return Some((Arc::new(fresh()), Arc::new(Semaphore::new(1))));
    };
    // Bounded by the principals configured (one per token, or the one loopback principal),
    // or with `[serve.auth]`, by the callers the trusted issuers authenticate, at most as
    // many as sessions: a context is never dropped (that would drop its taint).
    if !clients.contains_key(&key) && clients.len() >= state.limits.max_sessions.max(1) {
        return None;
    }
    Some(
        clients
            .entry(key.clone())
            .or_insert_with(|| {
                (
                    Arc::new(fresh()),
                    Arc::new(Semaphore::new(state.limits.max_in_flight_per_client.max(1))),
                )
            })
            .clone(),
    )
}

async fn modern_post(
    state: &State,
    headers: &HeaderMap,
    message: Incoming,
    principal: Principal,
) -> Response<Body> {
    let (id, method, params) = match message {
        // No client-to-server notification is defined over HTTP in 2026-07-28.
        Incoming::Notification { .. } => {
            return full(StatusCode::ACCEPTED, Bytes::new(), "application/json");
        }
        Incoming::Response { id, .. } => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                &id,
                &RpcError::new(
                    INVALID_REQUEST,
                    "2026-07-28 clients send no responses: answers go in inputResponses",
                ),
            );
        }
        Incoming::Request { id, method, params } => (id, method, params),
    };
    if method == "initialize" {
        // Removed in 2026-07-28: an unknown method there.
        return rpc_error(
            StatusCode::NOT_FOUND,
            &id,
            &RpcError::new(
                METHOD_NOT_FOUND,
                "Method not found: initialize (not part of 2026-07-28)",
            ),
        );
    }
    // Headers that disagree with a body naming its version are a mismatch (-32020) before
    // the version itself is judged; a body without its `_meta` is -32602.
    let body_has_version = params
        .get("_meta")
        .and_then(|meta| meta.get(dispatch::META_VERSION))
        .is_some();
    if body_has_version && let Err(error) = check_modern_headers(headers, &method, &params) {
        state.metrics().refused(Refusal::HeaderMismatch);
        return rpc_error(StatusCode::BAD_REQUEST, &id, &error);
    }
    let checked = match state.gateway.modern_check(&params) {
        Ok(checked) => checked,
        Err(error) => return rpc_error(modern_status(&error), &id, &error),
    };
    if method == "tools/call"
        && let Some(name) = params.get("name").and_then(Value::as_str)
        && let Some(schema) = state.gateway.backend().input_schema(name)
        && let Err(error) = check_param_headers(
            headers,
            &schema,
            params.get("arguments").unwrap_or(&Value::Null),
        )
    {
        state.metrics().refused(Refusal::HeaderMismatch);
        return rpc_error(StatusCode::BAD_REQUEST, &id, &error);
    }
    let Some((client, slots)) = modern_client(state, &principal) else {
        state.metrics().refused(Refusal::Sessions);
        return rpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            &id,
            &RpcError::new(
                INVALID_REQUEST,
                format!(
                    "{} stateless clients are known, the most allowed ([serve] max_sessions)",
                    state.limits.max_sessions
                ),
            ),
        );
    };
    let Ok(permit) = slots.try_acquire_owned() else {
        state.metrics().refused(Refusal::InFlight);
        return too_many(&id, state.limits.max_in_flight_per_client);
    };
    if method == "subscriptions/listen" {
        // A stream that stays open and carries tool list changes; closing it ends the
        // subscription. It holds one of the client's request slots while open.
        let (events, events_rx) = mpsc::channel::<Value>(4);
        let gateway = Arc::clone(&state.gateway);
        let mut draining = state.draining.subscribe();
        let task = tokio::spawn(async move {
            let sender = events.clone();
            let listening = dispatch::listen(&gateway, &client, &id, &params, move |message| {
                let sender = sender.clone();
                async move { sender.send(message).await.is_ok() }
            });
            tokio::select! {
                () = listening => {}
                // A graceful end of the subscription: its request is answered.
                () = until_draining(&mut draining) => {
                    let done = serde_json::json!({
                        "resultType": "complete",
                        "_meta": {dispatch::META_SUBSCRIPTION_ID: id.clone()},
                    });
                    let _ = events.send(jsonrpc::response(&id, done)).await;
                }
            }
            drop(permit);
        });
        let (watch_tx, watch_rx) = mpsc::channel::<Value>(4);
        tokio::spawn(relay_until_closed(
            events_rx,
            watch_tx,
            CallTask::new(task.abort_handle()),
            None,
        ));
        return sse_response(watch_rx, state.limits.keepalive);
    }
    if method != "tools/call" {
        let answer = state
            .gateway
            .modern(
                &client,
                &checked,
                &method,
                params,
                Arc::new(dispatch::NoPeer),
            )
            .await;
        drop(permit);
        return match answer {
            Ok(result) => json_response(StatusCode::OK, &jsonrpc::response(&id, result)),
            Err(error) => rpc_error(modern_status(&error), &id, &error),
        };
    }
    // A request-scoped stream: closing it cancels the call (the task is aborted, which
    // sends the cancellation upstream). The answer's form waits for the call's first
    // message: the answer itself (nothing was said before it) goes as JSON with the status
    // its error calls for (a server's -32021 is 400); anything else (progress, log
    // messages) opens the stream, and the answer follows on it. Until then, a client that
    // hangs up drops this handler, which aborts the call.
    let (events, mut events_rx) = mpsc::channel::<Value>(4);
    let gateway = Arc::clone(&state.gateway);
    let slot = AnswerSlot::default();
    let stream = Arc::new(CallStream {
        events: events.clone(),
        notifications: events.clone(),
        slot: Arc::clone(&slot),
    });
    let parking = Parked {
        id: id.clone(),
        name: params
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        arguments: params.get("arguments").cloned().unwrap_or(Value::Null),
        client: client.name().to_owned(),
        slot,
    };
    let task = tokio::spawn(async move {
        let answer = gateway
            .modern(&client, &checked, &method, params, stream)
            .await;
        let message = match answer {
            Ok(result) => jsonrpc::response(&id, result),
            Err(error) => jsonrpc::error_response(&id, &error),
        };
        let _ = events.send(message).await;
        drop(permit);
    });
    let call = CallTask::new(task.abort_handle());
    let Some(first) = events_rx.recv().await else {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the call ended without an answer",
        );
    };
    if parked::is_question(&first) {
        let message = parking.park(&state.gateway, &first, events_rx, call);
        return json_response(answer_status(&message), &message);
    }
    if first.get("id").is_some() {
        let _ = call.disarm();
        return json_response(answer_status(&first), &first);
    }
    let (watch_tx, watch_rx) = mpsc::channel::<Value>(4);
    let _ = watch_tx.try_send(first);
    let gateway = Arc::clone(&state.gateway);
    tokio::spawn(relay_until_closed(
        events_rx,
        watch_tx,
        call,
        Some((gateway, parking)),
    ));
    sse_response(watch_rx, state.limits.keepalive)
}

/// The HTTP status of a 2026-07-28 answer: its error's, or 200.
fn answer_status(message: &Value) -> StatusCode {
    message
        .pointer("/error/code")
        .and_then(Value::as_i64)
        .map_or(StatusCode::OK, |code| {
            modern_status(&RpcError::new(code, ""))
        })
}

/// What a 2026-07-28 call's request needs to park its call on a server's question.
struct Parked {
    id: Value,
    name: String,
    arguments: Value,
    client: String,
    slot: AnswerSlot,
}

impl Parked {
    /// The message that ends this request: the question as an input-required result (the
    /// call parked), or why it could not be asked.
    fn park(
        self,
        gateway: &Gateway,
        question: &Value,
        rest: mpsc::Receiver<Value>,
        call: CallTask,
    ) -> Value {
        match gateway.park_question(
            question,
            rest,
            self.slot,
            call,
            &self.name,
            &self.arguments,
            &self.client,
        ) {
            Ok(result) => jsonrpc::response(&self.id, result),
            Err(error) => jsonrpc::error_response(&self.id, &error),
        }
    }
}

/// Passes messages from `from` to `to`; if `to` closes first (the client hung up), aborts
/// the call. A server's question on a 2026-07-28 call's stream ends the stream with the
/// question as an input-required result, the call parked (`parking`).
async fn relay_until_closed(
    mut from: mpsc::Receiver<Value>,
    to: mpsc::Sender<Value>,
    call: CallTask,
    parking: Option<(Arc<Gateway>, Parked)>,
) {
    let mut parking = parking;
    loop {
        tokio::select! {
            message = from.recv() => match message {
                Some(message) if parked::is_question(&message) => {
                    let Some((gateway, parked)) = parking.take() else {
                        return;
                    };
                    let answer = parked.park(&gateway, &message, from, call);
                    let _ = to.send(answer).await;
                    return;
                }
                Some(message) => {
                    if to.send(message).await.is_err() {
                        return;
                    }
                }
                None => {
                    let _ = call.disarm();
                    return;
                }
            },
            () = to.closed() => {
                tracing::info!("the client closed a request's stream: the call is cancelled");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// A client that closes an SSE answer is noticed at once: the producer's channel
    /// closes (for a 2026-07-28 call that aborts the call, the cancellation) without
    /// waiting for the next keep-alive to fail to send. Found by the simulator's gateway
    /// world (seed 4): the close reached the upstream up to the keep-alive gap late, and a
    /// call that ended within that gap ran on and was audited `ok` although its client had
    /// cancelled it. Control: while the stream is open, a message reaches the client.
    #[tokio::test(start_paused = true)]
    async fn a_closed_stream_is_noticed_at_once_not_at_the_next_keepalive() {
        let keepalive = Duration::from_secs(2);
        // Control: an open stream carries what is sent.
        let (events, events_rx) = mpsc::channel::<Value>(4);
        let response = sse_response(events_rx, keepalive);
        events.send(serde_json::json!({"n": 1})).await.unwrap();
        let mut body = response.into_body();
        let frame = body.frame().await.unwrap().unwrap();
        let data = frame.into_data().unwrap();
        assert_eq!(&data[..], b"event: message\ndata: {\"n\":1}\n\n");
        assert!(!events.is_closed());

        // The client goes away: the producer hears it at once.
        let started = tokio::time::Instant::now();
        drop(body);
        tokio::time::timeout(Duration::from_secs(10), events.closed())
            .await
            .expect("the closed stream was never noticed");
        assert!(
            started.elapsed() < Duration::from_millis(100),
            "noticed after {:?}, not at once",
            started.elapsed()
        );
    }
}
