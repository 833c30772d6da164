//! The remote world (decision 0041, revision 2): Warden's real Streamable HTTP client
//! against scripted remote servers, on the paused clock, a pure function of its seed.
//!
//! Real: `warden_mcp::connect` for `url` servers and everything under it (the
//! `HttpConnection` with its `Link`, budget and re-send rule, the first-connect and
//! reconnect loops, the session of either era, with `initialize`, `Mcp-Session-Id`, the
//! 404 re-initialisation, `Last-Event-ID` resumption, the session's event stream and its
//! reopening, `notifications/cancelled`, `DELETE`; the exchange with its status, content
//! type, id and size checks; the SSE decoder), with the back-off's clock and jitter given
//! through `ConnectOptions::backoff`. Scripted: the servers, answering in memory through
//! the `warden_net::Transport` seam (`ConnectOptions::http_transport`): each `initialize`
//! (or `server/discover`) is accepted, refused with 5xx or 401, refused at the connection,
//! or stalls; each delivery of a call is answered (JSON, or an event stream with a
//! notification and another request's answer first, or twice), answered late, stalled,
//! broken mid-stream, refused with 503/500/502/401, answered 404 because the session
//! expired, refused or reset at the connection. A stall ends as reqwest's idle timeout
//! would end it (the server's call timeout plus 1 s, `Remote::from_spec`); reqwest's
//! connector (TLS, name lookups, its own timeouts) is what the seam leaves out.
//!
//! Every seed runs twice over: the calls made on the connections themselves, each with
//! its own timeout; then the same servers and faults with every call a `tools/call` made
//! through a real `warden_host::Host` (connected with the same transport and back-off, a
//! state store, one audited session, a policy that allows the servers' tools), under the
//! server's call timeout, and its audit log checked (property 9).
//!
//! Checked on every run:
//! 1. every call ends, answered, failed or timed out, by its deadline;
//! 2. a call's answer is its own (never another call's, never a stale or doubled one);
//! 3. a `tools/call` the server may have run is never run again by a retry (reads may be);
//! 4. the first connect opens at most `connect_attempts` times; once a call was told the
//!    server is marked failed, the opens after the first connect are at most `attempts`
//!    reconnects plus one re-initialisation per call (the budget itself, and no reconnect
//!    of a failed server, are the policy's own `debug_assert!`s, which fail the run);
//! 5. every back-off waits at most its ceiling (`max_delay`, or the event stream's 30 s);
//! 6. a call cut short by its deadline on a 2025-11-25 session is cancelled: the server
//!    gets `notifications/cancelled` for its id;
//! 7. nothing leaks: no task is left on the runtime once the connections are closed, and
//!    no session the server gave out is left open (each was deleted, or expired by the
//!    server): the one in use at close, and the ones reconnects replaced;
//! 8. the same seed gives the same trace;
//! 9. through a host: one audit row per call made (none for a call never made), with the
//!    outcome its caller saw (`ok`, or `failed` for an error or a timeout), and `executed`
//!    whenever the server ran it.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use tokio::time::Instant;
use warden_config::{
    EraPreference, HttpSettings, OAuthSpec, ReconnectSpec, RemoteTransport, TransportSpec,
};
use warden_mcp::http::reconnect::{Backoff, Clock, SeededRng};
use warden_mcp::{CallError, ConnectOptions, Connection};
use warden_net::reqwest;
use warden_net::{NetError, Transport};

use crate::{Log, driver, pick};

/// A server's call timeout (the idle timeout of its exchanges is this plus 1 s).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long reqwest waits on a silent exchange before it fails it (`Remote::from_spec`).
const IDLE: Duration = Duration::from_secs(31);
/// Longest wait the event stream's reopening may take (`LISTEN_RETRY`'s ceiling).
const LISTEN_MAX_DELAY: Duration = Duration::from_secs(30);
/// Scripted opens per server (cycled).
const OPENS: usize = 24;
/// Deliveries of one call with a scripted fault (later ones are answered).
const DELIVERIES: usize = 4;

/// What one open (`initialize`, `server/discover`) meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Open {
    Accept,
    Status(u16),
    Refused,
    Stall,
    Unauthorized,
}

/// What the session's own event stream (a 2025-11-25 `GET`) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Listen {
    /// 405: not offered.
    NotOffered,
    /// Open, silent, until the session ends.
    Idle,
    /// Ends after a few seconds, so it is reopened with back-off.
    Ends,
}

/// What the server does with one delivery of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Fault {
    Json,
    /// An event stream: a notification, another request's answer, then the answer.
    Stream,
    /// An event stream with the answer twice.
    Twice,
    /// The answer after the call's deadline.
    Late,
    /// Nothing: the idle timeout ends the exchange.
    Stall,
    /// Runs it, and the stream breaks after its first event (which has an id: a
    /// 2025-11-25 client resumes with `Last-Event-ID`).
    Drop,
    /// 503: not run.
    Unavailable,
    /// 500 or 502: run.
    ServerError(u16),
    /// 401: not run.
    Unauthorized,
    /// 404: the session expired (forgotten); not run.
    Expired,
    /// The connection is refused: not run.
    Refused,
    /// The connection is reset before a response: run.
    Reset,
}

#[derive(Debug, Clone)]
struct CallPlan {
    server: usize,
    /// `resources/read` (a read, safe to send again) rather than `tools/call`.
    read: bool,
    start: Duration,
    timeout: Duration,
    latency: Duration,
    faults: [Fault; DELIVERIES],
}

#[derive(Debug, Clone)]
struct ServerPlan {
    modern: bool,
    opens: Vec<(Open, Duration)>,
    listen: Listen,
    /// A resumed stream (`GET` with `Last-Event-ID`) carries the answer; else 404.
    resumes: bool,
    /// `notifications/cancelled` is taken, but its POST is answered only after the idle
    /// timeout (a server too busy to answer the call is often too busy for this too).
    slow_cancels: bool,
}

#[derive(Debug, Clone)]
struct Plan {
    spec: ReconnectSpec,
    connect_timeout: Duration,
    servers: Vec<ServerPlan>,
    calls: Vec<CallPlan>,
    jitter_seed: u64,
    /// The calls go through a host (`warden_host::Host` with a state store, an audited
    /// session, its policy allowing every tool): every call is a `tools/call` with the
    /// server's call timeout, and the audit log is checked.
    via_host: bool,
}

fn plan(seed: u64, via_host: bool) -> Plan {
    let mut rng = SeededRng::new(seed ^ 0x7265_6d6f_7465); // "remote": a stream of its own
    let initial = Duration::from_millis(10 + rng.below(500));
    let spec = ReconnectSpec {
        connect_attempts: 1 + rng.below(3) as u32,
        attempts: rng.below(5) as u32,
        initial_delay: initial,
        max_delay: initial * (1 + rng.below(16) as u32),
    };
    let healthy = rng.below(4) == 0;
    let servers = (0..1 + rng.below(2))
        .map(|_| ServerPlan {
            modern: rng.below(3) == 0,
            opens: (0..OPENS)
                .map(|_| {
                    let open = if healthy {
                        Open::Accept
                    } else {
                        pick(
                            &mut rng,
                            &[
                                (12, Open::Accept),
                                (3, Open::Status(503)),
                                (2, Open::Status(502)),
                                (1, Open::Status(500)),
                                (2, Open::Refused),
                                (1, Open::Stall),
                                (1, Open::Unauthorized),
                            ],
                        )
                    };
                    (open, Duration::from_millis(rng.below(300)))
                })
                .collect(),
            listen: pick(
                &mut rng,
                &[
                    (2, Listen::NotOffered),
                    (1, Listen::Idle),
                    (1, Listen::Ends),
                ],
            ),
            resumes: rng.below(2) == 0,
            slow_cancels: rng.below(3) == 0,
        })
        .collect::<Vec<_>>();
    let faults = [
        (10, Fault::Json),
        (3, Fault::Stream),
        (2, Fault::Twice),
        (1, Fault::Late),
        (1, Fault::Stall),
        (2, Fault::Drop),
        (2, Fault::Unavailable),
        (1, Fault::ServerError(500)),
        (1, Fault::ServerError(502)),
        (1, Fault::Unauthorized),
        (3, Fault::Expired),
        (1, Fault::Refused),
        (1, Fault::Reset),
    ];
    let count = 1 + rng.below(10) as usize;
    let calls = (0..count)
        .map(|_| CallPlan {
            server: rng.below(servers.len() as u64) as usize,
            read: rng.below(3) == 0,
            start: Duration::from_millis(rng.below(20_000)),
            timeout: Duration::from_millis(500 + rng.below(29_500)),
            latency: Duration::from_millis(rng.below(2_000)),
            faults: [
                pick(&mut rng, &faults),
                pick(&mut rng, &faults),
                pick(&mut rng, &faults),
                pick(&mut rng, &faults),
            ],
        })
        .collect();
    Plan {
        spec,
        connect_timeout: Duration::from_millis(2_000 + rng.below(20_000)),
        servers,
        calls,
        jitter_seed: rng.next_u64(),
        via_host,
    }
}

/// What a run found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Calls made.
    pub calls: usize,
    /// Calls answered.
    pub answered: usize,
    /// Calls that hit their deadline.
    pub timeouts: usize,
    /// Opens the servers saw (first connects, reconnects, re-initialisations).
    pub opens: usize,
    /// Sessions that expired under a call (404) and were opened again.
    pub expired: usize,
    /// Streams resumed with `Last-Event-ID`.
    pub resumed: usize,
    /// Calls refused with 401 (needs authorisation).
    pub unauthorized: usize,
    /// Cancellations the servers received.
    pub cancellations: usize,
    /// Sessions Warden deleted (at close, and the ones it replaced).
    pub deleted: usize,
    /// Back-off waits taken.
    pub waits: usize,
    /// Rows of the host's audit log (the seeds whose calls go through a host).
    pub audit_rows: usize,
    /// Property violations; empty when the run passed.
    pub violations: Vec<String>,
    /// A digest of the run's trace.
    pub digest: u64,
}

/// One open as the server saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opened {
    Ok,
    Failed,
    Unauthorized,
}

#[derive(Default)]
struct ServerState {
    next_open: usize,
    /// Every open, in order, with its instant.
    opens: Vec<(Duration, Opened)>,
    next_session: usize,
    /// Session id to whether it is still open.
    sessions: BTreeMap<String, bool>,
    /// Deliveries of each call so far.
    deliveries: HashMap<usize, usize>,
    /// Times each call was run.
    runs: HashMap<usize, usize>,
    /// A broken stream's last event id to (call, request id), for its resumption.
    broken: HashMap<String, (usize, Value)>,
    /// Request ids cancelled (with the session they came on).
    cancelled: Vec<Value>,
    /// Request ids of each call's deliveries.
    ids: HashMap<usize, Vec<Value>>,
    resumed: usize,
    expired: usize,
    deleted: usize,
}

/// One scripted remote server behind the in-memory transport.
struct Upstream {
    index: usize,
    plan: ServerPlan,
    calls: Vec<CallPlan>,
    state: Mutex<ServerState>,
    log: Arc<Log>,
}

/// The transport Warden's client is given: each request goes to the `Upstream` its URL's
/// host names (`upN.sim.invalid`), in memory.
struct Wire(Vec<Arc<Upstream>>);

impl std::fmt::Debug for Wire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Wire({} upstreams)", self.0.len())
    }
}

impl Transport for Wire {
    fn send(
        &self,
        request: reqwest::Request,
    ) -> BoxFuture<'static, Result<reqwest::Response, NetError>> {
        let index = request
            .url()
            .host_str()
            .and_then(|host| host.strip_prefix("up"))
            .and_then(|rest| rest.split('.').next())
            .and_then(|n| n.parse::<usize>().ok());
        let Some(upstream) = index.and_then(|i| self.0.get(i)).map(Arc::clone) else {
            return Box::pin(async { Err(refused()) });
        };
        let method = request.method().clone();
        let header = |name: &str| {
            request
                .headers()
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned)
        };
        let session = header("mcp-session-id");
        let last_event = header("last-event-id");
        let body = request
            .body()
            .and_then(reqwest::Body::as_bytes)
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        Box::pin(async move {
            match method.as_str() {
                "POST" => upstream.post(&body, session).await,
                "GET" => Ok(upstream.get(session, last_event).await),
                "DELETE" => Ok(upstream.delete(session)),
                _ => Ok(status(405, "")),
            }
        })
    }
}

/// The errors a real exchange meets before a response head, worded as reqwest's are.
pub(crate) fn refused() -> NetError {
    NetError::Request("connection refused: error sending request (simulated)".into())
}

pub(crate) fn timed_out() -> NetError {
    NetError::Request("error sending request: operation timed out (timed out)".into())
}

fn reset() -> NetError {
    NetError::Request("error sending request: connection reset by peer".into())
}

pub(crate) fn status(code: u16, text: &str) -> reqwest::Response {
    respond(code, &[], Bytes::from(text.to_owned()))
}

pub(crate) fn respond(code: u16, headers: &[(&str, &str)], body: Bytes) -> reqwest::Response {
    let mut builder = http::Response::builder().status(code);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let response = builder
        .body(reqwest::Body::from(body))
        .unwrap_or_else(|_| http::Response::new(reqwest::Body::from(Bytes::new())));
    reqwest::Response::from(response)
}

pub(crate) fn json_body(message: &Value) -> reqwest::Response {
    respond(
        200,
        &[("content-type", "application/json")],
        Bytes::from(message.to_string()),
    )
}

/// One piece of a streamed body: after `delay`, these bytes, or a failure.
enum Piece {
    Bytes(Duration, String),
    Fail(Duration, std::io::ErrorKind, &'static str),
    /// Nothing more, ever (the body stays open).
    Hang,
}

/// A `text/event-stream` response whose body arrives piece by piece on the paused clock.
fn event_stream(pieces: Vec<Piece>, headers: &[(&str, &str)]) -> reqwest::Response {
    let stream = futures::stream::unfold(pieces.into_iter(), |mut pieces| async move {
        match pieces.next()? {
            Piece::Bytes(delay, text) => {
                tokio::time::sleep(delay).await;
                Some((Ok(Bytes::from(text)), pieces))
            }
            Piece::Fail(delay, kind, why) => {
                tokio::time::sleep(delay).await;
                Some((Err(std::io::Error::new(kind, why)), pieces))
            }
            Piece::Hang => {
                futures::future::pending::<()>().await;
                None
            }
        }
    });
    let mut builder = http::Response::builder()
        .status(200)
        .header("content-type", "text/event-stream");
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let response = builder
        .body(reqwest::Body::wrap_stream(stream))
        .unwrap_or_else(|_| http::Response::new(reqwest::Body::from(Bytes::new())));
    reqwest::Response::from(response)
}

fn event(id: Option<&str>, message: &Value) -> String {
    match id {
        Some(id) => format!("id: {id}\nevent: message\ndata: {message}\n\n"),
        None => format!("event: message\ndata: {message}\n\n"),
    }
}

fn answer(id: &Value, number: usize, read: bool) -> Value {
    let text = format!("answer to c{number}");
    let result = if read {
        json!({"contents": [{"uri": format!("sim://c{number}"), "text": text}]})
    } else {
        json!({"content": [{"type": "text", "text": text}], "isError": false})
    };
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

impl Upstream {
    fn lock(&self) -> std::sync::MutexGuard<'_, ServerState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn event(&self, text: String) {
        self.log.event(format!("up{} {text}", self.index));
    }

    async fn post(
        &self,
        body: &[u8],
        session: Option<String>,
    ) -> Result<reqwest::Response, NetError> {
        let Ok(message) = serde_json::from_slice::<Value>(body) else {
            self.log
                .violation(format!("up{}: a POST body that is not JSON", self.index));
            return Ok(status(400, "not JSON"));
        };
        let id = message.get("id").cloned();
        let method = message.get("method").and_then(Value::as_str).unwrap_or("");
        match (method, id) {
            ("initialize" | "server/discover", Some(id)) => self.open(&id).await,
            ("notifications/cancelled", None) => {
                let request = message["params"]["requestId"].clone();
                self.event(format!("cancelled {request}"));
                self.lock().cancelled.push(request);
                if self.plan.slow_cancels {
                    tokio::time::sleep(IDLE).await;
                }
                Ok(status(202, ""))
            }
            ("tools/call" | "resources/read", Some(id)) => {
                let number = token(&message);
                let Some(number) = number else {
                    self.log
                        .violation(format!("up{}: a call without its token", self.index));
                    return Ok(status(400, "no token"));
                };
                if !self.plan.modern && !self.session_open(session.as_deref()) {
                    self.event(format!("c{number}: unknown session {session:?}: 404"));
                    return Ok(status(404, "no such session"));
                }
                self.call(number, id, method == "resources/read").await
            }
            ("tools/list", Some(id)) => Ok(json_body(&json!({
                "jsonrpc": "2.0", "id": id,
                "result": {"tools": [{"name": "echo", "inputSchema": {
                    "type": "object", "properties": {"text": {"type": "string"}}}}]},
            }))),
            (_, None) => Ok(status(202, "")),
            (other, Some(id)) => Ok(json_body(&json!({
                "jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": format!("no {other} here")},
            }))),
        }
    }

    fn session_open(&self, session: Option<&str>) -> bool {
        session.is_some_and(|id| self.lock().sessions.get(id) == Some(&true))
    }

    async fn open(&self, id: &Value) -> Result<reqwest::Response, NetError> {
        let (plan, latency) = {
            let mut state = self.lock();
            let next = state.next_open;
            state.next_open += 1;
            self.plan.opens[next % self.plan.opens.len()]
        };
        tokio::time::sleep(latency).await;
        let at = self.log.now();
        let record = |opened| self.lock().opens.push((at, opened));
        self.event(format!("open: {plan:?}"));
        match plan {
            Open::Accept => {
                record(Opened::Ok);
                let info = json!({"name": format!("up{}", self.index), "version": "1"});
                if self.plan.modern {
                    return Ok(json_body(&json!({
                        "jsonrpc": "2.0", "id": id,
                        "result": {"supportedVersions": ["2026-07-28"],
                                   "capabilities": {"tools": {}, "resources": {}},
                                   "serverInfo": info},
                    })));
                }
                let session = {
                    let mut state = self.lock();
                    state.next_session += 1;
                    let session = format!("up{}-s{}", self.index, state.next_session);
                    state.sessions.insert(session.clone(), true);
                    session
                };
                let body = json!({
                    "jsonrpc": "2.0", "id": id,
                    "result": {"protocolVersion": "2025-11-25",
                               "capabilities": {"tools": {}, "resources": {}},
                               "serverInfo": info},
                });
                Ok(respond(
                    200,
                    &[
                        ("content-type", "application/json"),
                        ("mcp-session-id", &session),
                    ],
                    Bytes::from(body.to_string()),
                ))
            }
            Open::Status(code) => {
                record(Opened::Failed);
                Ok(status(code, "the server is unwell"))
            }
            Open::Refused => {
                record(Opened::Failed);
                Err(refused())
            }
            Open::Stall => {
                record(Opened::Failed);
                tokio::time::sleep(IDLE).await;
                Err(timed_out())
            }
            Open::Unauthorized => {
                record(Opened::Unauthorized);
                Ok(respond(
                    401,
                    &[("www-authenticate", "Bearer realm=\"sim\"")],
                    Bytes::new(),
                ))
            }
        }
    }

    async fn call(
        &self,
        number: usize,
        id: Value,
        read: bool,
    ) -> Result<reqwest::Response, NetError> {
        let plan = &self.calls[number];
        let fault = {
            let mut state = self.lock();
            let delivery = state.deliveries.entry(number).or_default();
            let fault = plan.faults.get(*delivery).copied().unwrap_or(Fault::Json);
            *delivery += 1;
            state.ids.entry(number).or_default().push(id.clone());
            fault
        };
        self.event(format!("c{number} ({id}): {fault:?}"));
        let run = || {
            *self.lock().runs.entry(number).or_default() += 1;
        };
        let latency = plan.latency;
        match fault {
            Fault::Json => {
                tokio::time::sleep(latency).await;
                run();
                Ok(json_body(&answer(&id, number, read)))
            }
            Fault::Stream => {
                run();
                let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
                                  "params": {"level": "info", "data": "working"}});
                let stale = answer(&json!(900_000 + number), 900_000 + number, read);
                Ok(event_stream(
                    vec![
                        Piece::Bytes(latency / 2, event(None, &note)),
                        Piece::Bytes(Duration::ZERO, event(None, &stale)),
                        Piece::Bytes(latency / 2, event(None, &answer(&id, number, read))),
                    ],
                    &[],
                ))
            }
            Fault::Twice => {
                run();
                let once = event(None, &answer(&id, number, read));
                Ok(event_stream(
                    vec![
                        Piece::Bytes(latency, once.clone()),
                        Piece::Bytes(Duration::from_millis(10), once),
                    ],
                    &[],
                ))
            }
            Fault::Late => {
                tokio::time::sleep(plan.timeout + latency + Duration::from_millis(500)).await;
                run();
                Ok(json_body(&answer(&id, number, read)))
            }
            Fault::Stall => {
                run();
                tokio::time::sleep(IDLE).await;
                Err(timed_out())
            }
            Fault::Drop => {
                run();
                let event_id = format!("c{number}-{}", self.lock().ids[&number].len());
                self.lock()
                    .broken
                    .insert(event_id.clone(), (number, id.clone()));
                Ok(event_stream(
                    vec![
                        Piece::Bytes(latency, format!("id: {event_id}\ndata: \n\n")),
                        Piece::Fail(
                            Duration::ZERO,
                            std::io::ErrorKind::ConnectionReset,
                            "connection reset by peer",
                        ),
                    ],
                    &[],
                ))
            }
            Fault::Unavailable => Ok(status(503, "try again later")),
            Fault::ServerError(code) => {
                tokio::time::sleep(latency).await;
                run();
                Ok(status(code, "it broke"))
            }
            Fault::Unauthorized => Ok(respond(
                401,
                &[(
                    "www-authenticate",
                    "Bearer realm=\"sim\", error=\"invalid_token\"",
                )],
                Bytes::new(),
            )),
            Fault::Expired => {
                if !self.plan.modern {
                    let mut state = self.lock();
                    state.expired += 1;
                    for open in state.sessions.values_mut() {
                        *open = false;
                    }
                }
                Ok(status(404, "session expired"))
            }
            Fault::Refused => Err(refused()),
            Fault::Reset => {
                run();
                Err(reset())
            }
        }
    }

    async fn get(&self, session: Option<String>, last_event: Option<String>) -> reqwest::Response {
        if let Some(last) = last_event {
            let broken = self.lock().broken.remove(&last);
            return match broken {
                Some((number, id)) if self.plan.resumes => {
                    self.lock().resumed += 1;
                    self.event(format!("c{number}: resumed after {last}"));
                    let read = self.calls[number].read;
                    event_stream(
                        vec![Piece::Bytes(
                            Duration::from_millis(100),
                            event(None, &answer(&id, number, read)),
                        )],
                        &[],
                    )
                }
                _ => status(404, "no such stream"),
            };
        }
        if !self.session_open(session.as_deref()) {
            return status(404, "no such session");
        }
        match self.plan.listen {
            Listen::NotOffered => status(405, ""),
            Listen::Idle => event_stream(vec![Piece::Hang], &[]),
            Listen::Ends => event_stream(
                vec![Piece::Bytes(
                    Duration::from_millis(1_000 + 500 * self.index as u64),
                    ": a comment\n\n".into(),
                )],
                &[],
            ),
        }
    }

    fn delete(&self, session: Option<String>) -> reqwest::Response {
        let Some(session) = session else {
            return status(400, "no session named");
        };
        self.event(format!("DELETE {session}"));
        let mut state = self.lock();
        match state.sessions.get_mut(&session) {
            Some(open) if *open => {
                *open = false;
                state.deleted += 1;
                status(200, "")
            }
            _ => status(404, ""),
        }
    }
}

/// The call number a request carries (its `text` argument, or the `sim://cN` URI).
fn token(message: &Value) -> Option<usize> {
    let params = message.get("params")?;
    let text = params
        .get("arguments")
        .and_then(|a| a.get("text"))
        .or_else(|| params.get("uri"))
        .and_then(Value::as_str)?;
    text.rsplit('c').next()?.parse().ok()
}

/// The back-off's clock: the paused timer, every wait traced and checked.
pub(crate) struct Waits {
    pub(crate) ceiling: Duration,
    pub(crate) log: Arc<Log>,
    pub(crate) count: AtomicUsize,
}

impl std::fmt::Debug for Waits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Waits")
    }
}

impl Clock for Waits {
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        self.count.fetch_add(1, Ordering::SeqCst);
        self.log.event(format!("back-off {duration:?}"));
        if duration > self.ceiling {
            self.log.violation(format!(
                "a back-off of {duration:?} is over its ceiling {:?}",
                self.ceiling
            ));
        }
        Box::pin(tokio::time::sleep(duration))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    Answered(String),
    Failed(String),
    TimedOut,
    NotConnected,
}

/// Runs one seed with every check, twice, the traces compared.
///
/// Each seed runs its plan twice over: the calls made on the connections themselves (each
/// with its own timeout), and the same servers and faults with the calls made through a
/// host (its audit log checked). A violation of the second is marked `(through a host)`
/// and replays with `--timing 1`.
pub fn run(seed: u64) -> Report {
    let mut report = run_twice(seed, false);
    let host = run_twice(seed, true);
    report.violations.extend(
        host.violations
            .into_iter()
            .map(|v| format!("{THROUGH_A_HOST} {v}")),
    );
    report.calls += host.calls;
    report.answered += host.answered;
    report.timeouts += host.timeouts;
    report.opens += host.opens;
    report.expired += host.expired;
    report.resumed += host.resumed;
    report.unauthorized += host.unauthorized;
    report.cancellations += host.cancellations;
    report.deleted += host.deleted;
    report.waits += host.waits;
    report.audit_rows += host.audit_rows;
    report
}

/// The mark of a violation found with the calls made through a host.
pub const THROUGH_A_HOST: &str = "(through a host)";

fn run_twice(seed: u64, via_host: bool) -> Report {
    let first = run_once(seed, via_host);
    let second = run_once(seed, via_host);
    let mut report = first;
    driver::same_digest(
        "remote",
        seed,
        report.digest,
        second.digest,
        &mut report.violations,
    );
    report
}

/// The trace of one seed, for replaying a failure: `variant` 1 makes the calls through a
/// host.
pub fn trace(seed: u64, variant: u64) -> Vec<String> {
    let log = Arc::new(Log::default());
    let _ = simulate(seed, variant == 1, &log);
    let trace = log.trace.lock().unwrap_or_else(PoisonError::into_inner);
    trace.clone()
}

fn run_once(seed: u64, via_host: bool) -> Report {
    let log = Arc::new(Log::default());
    let mut report = simulate(seed, via_host, &log);
    let trace = log.trace.lock().unwrap_or_else(PoisonError::into_inner);
    report.digest = driver::digest(&crate::upstream::canonical(&trace));
    report
}

fn simulate(seed: u64, via_host: bool, log: &Arc<Log>) -> Report {
    let plan = plan(seed, via_host);
    let mut report = driver::execute(log, world(seed, plan, Arc::clone(log))).unwrap_or_default();
    report.violations = log
        .violations
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    report
}

fn spec_of(index: usize, plan: &Plan) -> warden_config::ServerSpec {
    let mut spec = crate::upstream::spec(&format!("up{index}"), CALL_TIMEOUT);
    spec.transport = TransportSpec::Http {
        url: format!("https://up{index}.sim.invalid/mcp"),
        headers: BTreeMap::new(),
        settings: HttpSettings {
            allow_http: false,
            reconnect: plan.spec,
            transport: RemoteTransport::Http,
            oauth: OAuthSpec::default(),
        },
    };
    spec.era = if plan.servers[index].modern {
        EraPreference::Modern
    } else {
        EraPreference::Legacy
    };
    spec.timeouts.connect = plan.connect_timeout;
    spec
}

async fn world(seed: u64, plan: Plan, log: Arc<Log>) -> Report {
    *log.start.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
    log.event(format!(
        "seed {seed}: {:?}, {} server(s), {} call(s)",
        plan.spec,
        plan.servers.len(),
        plan.calls.len()
    ));
    let waits = Arc::new(Waits {
        ceiling: plan.spec.max_delay.max(LISTEN_MAX_DELAY),
        log: Arc::clone(&log),
        count: AtomicUsize::new(0),
    });
    let backoff = Backoff::new(waits.clone(), SeededRng::new(plan.jitter_seed));
    let upstreams: Vec<Arc<Upstream>> = plan
        .servers
        .iter()
        .enumerate()
        .map(|(index, server)| {
            Arc::new(Upstream {
                index,
                plan: server.clone(),
                calls: plan.calls.clone(),
                state: Mutex::new(ServerState::default()),
                log: Arc::clone(&log),
            })
        })
        .collect();

    let wire: Arc<dyn Transport> = Arc::new(Wire(upstreams.clone()));
    let (outcomes, first_connect_opens, audit_rows) = if plan.via_host {
        through_host(seed, &plan, &upstreams, wire, &backoff, &log).await
    } else {
        let (outcomes, opens) = direct(&plan, &upstreams, wire, &backoff, &log).await;
        (outcomes, opens, 0)
    };
    tokio::time::sleep(Duration::from_secs(5)).await;
    let alive = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    if alive != 0 {
        log.violation(format!("{alive} task(s) left on the runtime after closing"));
    }

    check(&plan, &upstreams, &outcomes, &first_connect_opens, &log);
    let total = |f: fn(&ServerState) -> usize| upstreams.iter().map(|u| f(&u.lock())).sum();
    Report {
        calls: outcomes.len(),
        answered: count(&outcomes, |o| matches!(o, Outcome::Answered(_))),
        timeouts: count(&outcomes, |o| *o == Outcome::TimedOut),
        unauthorized: count(
            &outcomes,
            |o| matches!(o, Outcome::Failed(why) if why.contains("needs authorization")),
        ),
        opens: total(|s| s.opens.len()),
        expired: total(|s| s.expired),
        resumed: total(|s| s.resumed),
        cancellations: total(|s| s.cancelled.len()),
        deleted: total(|s| s.deleted),
        waits: waits.count.load(Ordering::SeqCst),
        audit_rows,
        violations: Vec::new(),
        digest: 0,
    }
}

fn count(outcomes: &[(Duration, Outcome)], f: impl Fn(&Outcome) -> bool) -> usize {
    outcomes.iter().filter(|(_, outcome)| f(outcome)).count()
}

/// The calls made on the connections themselves (`warden_mcp::http::connect`), each with
/// its own timeout; returns each call's time and outcome, and each server's opens during
/// the first connect.
async fn direct(
    plan: &Plan,
    upstreams: &[Arc<Upstream>],
    wire: Arc<dyn Transport>,
    backoff: &Backoff,
    log: &Arc<Log>,
) -> (Vec<(Duration, Outcome)>, Vec<usize>) {
    // Connect every server (in parallel, each within its connect timeout).
    let connects = upstreams.iter().map(|upstream| {
        let spec = spec_of(upstream.index, plan);
        let options = ConnectOptions {
            http_transport: Some(Arc::clone(&wire)),
            backoff: Some(backoff.clone()),
            ..ConnectOptions::default()
        };
        let log = Arc::clone(log);
        async move {
            let started = Instant::now();
            let connected = warden_mcp::http::connect(&spec, &options).await;
            let took = started.elapsed();
            if took > spec.timeouts.connect + Duration::from_millis(1) {
                log.violation(format!(
                    "{}: the connect took {took:?}, over its timeout {:?}",
                    spec.name, spec.timeouts.connect
                ));
            }
            match connected {
                Ok(connection) => {
                    log.event(format!("{} connected", spec.name));
                    Some(Arc::new(connection))
                }
                Err(failure) => {
                    log.event(format!("{} did not connect: {}", spec.name, failure.error));
                    None
                }
            }
        }
    });
    let connections: Vec<Option<Arc<Box<dyn Connection>>>> =
        futures::future::join_all(connects).await;
    let first_connect_opens: Vec<usize> = upstreams.iter().map(|u| u.lock().opens.len()).collect();

    // The calls, each at its moment, each bounded by its own timeout.
    let tasks: Vec<_> = plan
        .calls
        .iter()
        .enumerate()
        .map(|(number, call)| {
            let connection = connections[call.server].clone();
            let call = call.clone();
            let log = Arc::clone(log);
            tokio::spawn(async move {
                tokio::time::sleep(call.start).await;
                let Some(connection) = connection else {
                    return (Duration::ZERO, Outcome::NotConnected);
                };
                let started = Instant::now();
                log.event(format!("c{number} starts ({:?})", call.timeout));
                let outcome = if call.read {
                    let mut params = Map::new();
                    params.insert("uri".into(), json!(format!("sim://c{number}")));
                    connection
                        .request("resources/read", params, call.timeout)
                        .await
                        .map(|result| result.to_string())
                } else {
                    let mut arguments = Map::new();
                    arguments.insert("text".into(), json!(format!("c{number}")));
                    connection
                        .call_tool("echo", Some(arguments), call.timeout)
                        .await
                        .map(|outcome| outcome.raw.to_string())
                };
                let took = started.elapsed();
                let outcome = match outcome {
                    Ok(text) => Outcome::Answered(text),
                    Err(CallError::Timeout { .. }) => Outcome::TimedOut,
                    Err(error) => Outcome::Failed(error.to_string()),
                };
                log.event(format!("c{number} ends after {took:?}: {outcome:?}"));
                (took, outcome)
            })
        })
        .collect();
    let outcomes = gather(tasks, log).await;
    // Late answers, stalls and event streams run out; then every connection is closed.
    tokio::time::sleep(IDLE + Duration::from_secs(5)).await;
    for (index, connection) in connections.into_iter().enumerate() {
        let Some(connection) = connection else {
            continue;
        };
        match Arc::try_unwrap(connection) {
            Ok(connection) => {
                let _ = connection.close().await;
            }
            Err(_) => log.violation(format!("up{index}: the connection is still held")),
        }
    }
    (outcomes, first_connect_opens)
}

/// The calls made through a host: a real `warden_host::Host` over the servers (connected
/// with the same transport and back-off), each call a `tools/call` in one audited session
/// with the server's call timeout. After the host shut down, its audit log must hold one
/// row per call made, with the outcome the caller saw and `executed` set whenever the
/// server may have run it.
async fn through_host(
    seed: u64,
    plan: &Plan,
    upstreams: &[Arc<Upstream>],
    wire: Arc<dyn Transport>,
    backoff: &Backoff,
    log: &Arc<Log>,
) -> (Vec<(Duration, Outcome)>, Vec<usize>, usize) {
    let dir = crate::upstream::store_dir(seed);
    let store_path = dir.join("state.db");
    let outcomes = async {
        let store = match warden_store::Store::open(&store_path) {
            Ok(store) => store,
            Err(error) => {
                log.violation(format!("no state store: {error}"));
                return None;
            }
        };
        let policy = crate::upstream::policy(json!({
            "rules": [{"tools": "up*__*", "effect": "allow",
                       "even_if_tainted": true, "even_if_private": true}]
        }));
        let options = ConnectOptions {
            http_transport: Some(wire),
            backoff: Some(backoff.clone()),
            ..ConnectOptions::default()
        };
        let specs: Vec<_> = upstreams.iter().map(|u| spec_of(u.index, plan)).collect();
        let host = Arc::new(
            warden_host::Host::builder(Arc::new(policy))
                .store(store)
                .review(Arc::new(warden_host::NoReview))
                .launcher(Arc::new(warden_mcp::DirectLauncher::from_env()))
                .options(options)
                .connect(specs)
                .await,
        );
        let first_connect_opens: Vec<usize> =
            upstreams.iter().map(|u| u.lock().opens.len()).collect();
        let session = Arc::new(host.session("sim"));
        let tasks: Vec<_> = plan
            .calls
            .iter()
            .enumerate()
            .map(|(number, call)| {
                let (host, session, log) =
                    (Arc::clone(&host), Arc::clone(&session), Arc::clone(log));
                let call = call.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(call.start).await;
                    let started = Instant::now();
                    let target = format!("up{}__echo", call.server);
                    let prepared =
                        session.prepare(&host, &target, json!({"text": format!("c{number}")}));
                    let prepared = match prepared {
                        Ok(prepared) => prepared,
                        Err(error) => {
                            log.event(format!("c{number} not made: {error}"));
                            return (Duration::ZERO, Outcome::NotConnected);
                        }
                    };
                    log.event(format!("c{number} starts"));
                    let outcome = outcome_through_host(session.send(&host, prepared).await);
                    let took = started.elapsed();
                    log.event(format!("c{number} ends after {took:?}: {outcome:?}"));
                    (took, outcome)
                })
            })
            .collect();
        let outcomes = gather(tasks, log).await;
        tokio::time::sleep(IDLE + Duration::from_secs(5)).await;
        drop(session);
        match Arc::try_unwrap(host) {
            Ok(host) => host.shutdown().await,
            Err(_) => log.violation("the host is still held".into()),
        }
        let rows = check_audit(plan, upstreams, &outcomes, &store_path, log);
        Some((outcomes, first_connect_opens, rows))
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    outcomes.unwrap_or_default()
}

/// What a call made through a host came to, as its caller saw it.
pub(crate) fn outcome_through_host(
    sent: Result<warden_mcp::CallOutcome, warden_host::HostError>,
) -> Outcome {
    match sent {
        Ok(outcome) => Outcome::Answered(outcome.raw.to_string()),
        Err(warden_host::HostError::Call {
            source: CallError::Timeout { .. },
            ..
        }) => Outcome::TimedOut,
        Err(error) => Outcome::Failed(error.to_string()),
    }
}

/// Waits for every call's task, in order; a task that failed is a violation (and a failed
/// call, so the checks that follow still see one outcome per call).
pub(crate) async fn gather(
    tasks: Vec<tokio::task::JoinHandle<(Duration, Outcome)>>,
    log: &Log,
) -> Vec<(Duration, Outcome)> {
    let mut outcomes = Vec::with_capacity(tasks.len());
    for task in tasks {
        outcomes.push(task.await.unwrap_or_else(|error| {
            log.violation(format!("a call's task failed: {error}"));
            (Duration::ZERO, Outcome::Failed("task failed".into()))
        }));
    }
    outcomes
}

/// One audit row per call made (none for a call never made), with the outcome its caller
/// saw (`ok` for an answer, `failed` for an error or a timeout), and `executed` whenever
/// the server ran it (a row saying a call that ran was never sent would mislead an
/// auditor; the other way round is the safe side).
fn check_audit(
    plan: &Plan,
    upstreams: &[Arc<Upstream>],
    outcomes: &[(Duration, Outcome)],
    store_path: &std::path::Path,
    log: &Log,
) -> usize {
    check_audit_rows(plan.calls.len(), outcomes, store_path, log, |number| {
        plan.calls.get(number).is_some_and(|call| {
            upstreams[call.server]
                .lock()
                .runs
                .get(&number)
                .is_some_and(|runs| *runs > 0)
        })
    })
}

/// The audit property of the remote and OAuth worlds: calls `c0` ... `c{calls - 1}` (their
/// arguments name them), each with one row whose outcome is the one its caller saw and
/// which says `executed` whenever `ran` says the server ran it; none for a call never made.
/// The rows read.
pub(crate) fn check_audit_rows(
    calls: usize,
    outcomes: &[(Duration, Outcome)],
    store_path: &std::path::Path,
    log: &Log,
    ran: impl Fn(usize) -> bool,
) -> usize {
    let keys: Vec<String> = (0..calls).map(|n| format!("\"c{n}\"")).collect();
    let Some((count, mut by_call)) = driver::audit_rows_by_call(
        store_path,
        |arguments| keys.iter().position(|key| arguments.contains(key.as_str())),
        log,
    ) else {
        return 0;
    };
    for (number, (_, outcome)) in outcomes.iter().enumerate() {
        let rows = by_call.remove(&number).unwrap_or_default();
        let expected = match outcome {
            Outcome::NotConnected => {
                if !rows.is_empty() {
                    log.violation(format!(
                        "c{number} was never made but has {} row(s)",
                        rows.len()
                    ));
                }
                continue;
            }
            Outcome::Answered(_) => "ok",
            Outcome::Failed(_) | Outcome::TimedOut => "failed",
        };
        let [row] = rows.as_slice() else {
            log.violation(format!("c{number}: {} audit row(s), not one", rows.len()));
            continue;
        };
        if row.outcome != expected {
            log.violation(format!(
                "c{number}: audited `{}`, its caller saw {outcome:?}",
                row.outcome
            ));
        }
        if ran(number) && !row.executed {
            log.violation(format!(
                "c{number} ran, but its audit row says it was not sent"
            ));
        }
    }
    count
}

/// The properties of a finished run (the back-off ceilings and the runtime's tasks are
/// checked as they happen).
fn check(
    plan: &Plan,
    upstreams: &[Arc<Upstream>],
    outcomes: &[(Duration, Outcome)],
    first_connect_opens: &[usize],
    log: &Log,
) {
    for (number, ((took, outcome), call)) in outcomes.iter().zip(&plan.calls).enumerate() {
        let upstream = &upstreams[call.server];
        let state = upstream.lock();
        let deadline = if plan.via_host {
            CALL_TIMEOUT
        } else {
            call.timeout
        };
        if *took > deadline {
            log.violation(format!(
                "c{number} ended after {took:?}, past its deadline {deadline:?}"
            ));
        }
        if let Outcome::Answered(text) = outcome {
            let own = format!("answer to c{number}\"");
            if !text.contains(&own) || text.matches("answer to c").count() != 1 {
                log.violation(format!("c{number} got an answer not its own: {text}"));
            }
        }
        let runs = state.runs.get(&number).copied().unwrap_or(0);
        if (plan.via_host || !call.read) && runs > 1 {
            log.violation(format!("tools/call c{number} was run {runs} times"));
        }
        if *outcome == Outcome::TimedOut
            && !upstream.plan.modern
            && let Some(last) = state.ids.get(&number).and_then(|ids| ids.last())
            && !state.cancelled.contains(last)
        {
            log.violation(format!(
                "c{number} timed out, but its request {last} was never cancelled"
            ));
        }
    }
    for (index, upstream) in upstreams.iter().enumerate() {
        let state = upstream.lock();
        if first_connect_opens[index] > plan.spec.connect_attempts.max(1) as usize {
            log.violation(format!(
                "up{index}: the first connect opened {} times, over connect_attempts {}",
                first_connect_opens[index], plan.spec.connect_attempts
            ));
        }
        let told_failed = outcomes
            .iter()
            .zip(&plan.calls)
            .filter(|(_, call)| call.server == index)
            .filter(|((_, outcome), _)| {
                matches!(outcome, Outcome::Failed(why) if why.contains("marked failed"))
            })
            .count();
        if told_failed > 0 {
            // Once the verdict is given, nothing is opened any more: the opens after the
            // first connect are the reconnects that led to it.
            let calls = plan.calls.iter().filter(|c| c.server == index).count();
            let after = state.opens.len() - first_connect_opens[index];
            let bound = calls * (plan.spec.attempts as usize + 1);
            if after > bound {
                log.violation(format!(
                    "up{index}: {after} opens after the first connect, over {bound} for {calls} calls"
                ));
            }
        }
        let open: Vec<&String> = state
            .sessions
            .iter()
            .filter(|(_, open)| **open)
            .map(|(id, _)| id)
            .collect();
        if !open.is_empty() {
            log.violation(format!(
                "up{index}: session(s) {open:?} left open on the server after close"
            ));
        }
    }
}
