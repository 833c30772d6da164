//! A scripted upstream behind a Streamable HTTP front (2025-11-25 sessions), for the
//! gateway world (decision 0041, revision 3): the host reaches it with Warden's real HTTP
//! client through the `warden_net::Transport` seam, so many gateway clients share one
//! remote upstream, with faults on both sides.
//!
//! Each session (`initialize` with `Mcp-Session-Id`) is one connection of the scripted
//! [`Upstream`]: the front writes each request and notification the client POSTs as a line
//! to it, and answers each request's POST with the line the upstream answers under its id
//! (a second answer, or a stale id, finds nobody waiting and is dropped, as a server would
//! never send it on that request's stream). The upstream's own faults (late, never, twice,
//! a stale id first, a tool error, a dropped connection) are its script's; the front adds
//! the remote world's, per delivery of each call: the session expired (404: the session's
//! connection closes, the client initialises again and sends the call again), 503 (not
//! delivered), a 500 after it ran, and a reset after it was delivered (the answer lost).
//! A dropped upstream connection ends the session: its requests in flight break, later
//! ones get 404. `GET` (the session's own stream) is not offered (405), and `DELETE`
//! closes the session's connection.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use warden_net::reqwest;
use warden_net::{NetError, Transport};

use crate::remote::{respond, status};
use crate::upstream::{PIPE, Upstream, id_key, lock};

/// What the front does with one delivery of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Front {
    /// Delivered; its answer returned.
    Pass,
    /// 404: the session expired before it was delivered.
    Expired,
    /// 503: not delivered.
    Unavailable,
    /// Delivered, then 500 without the answer.
    ServerError,
    /// Delivered, then the connection reset before the answer.
    Reset,
}

/// Deliveries of one call with a scripted front fault (later ones pass).
pub(crate) const DELIVERIES: usize = 3;

/// The requests of a session waiting for their answers, by id. Ordered: when the
/// connection ends they are failed in this order, and a hash map's order (which depends
/// on what the thread ran before) would make a seed's run depend on the seeds before it.
type Waiting = BTreeMap<String, oneshot::Sender<String>>;

/// One session: the connection to the upstream it is.
struct Session {
    lines: mpsc::UnboundedSender<String>,
    waiting: Arc<Mutex<Waiting>>,
    /// The upstream ended the connection (a drop): the session is gone.
    closed: Arc<AtomicBool>,
}

impl Session {
    /// Ends the session's connection, with whatever is still running on it (an expired
    /// or deleted session's requests end with it).
    fn close(&self) {
        let _ = self.lines.send(String::new());
    }
}

/// The front of every remote upstream of a world, by host name `upN.sim.invalid`.
pub(crate) struct HttpFront {
    upstreams: Vec<Arc<Upstream>>,
    /// Each call's front faults, by token.
    faults: HashMap<String, [Front; DELIVERIES]>,
    start: Instant,
    state: Mutex<FrontState>,
}

#[derive(Default)]
struct FrontState {
    sessions: HashMap<String, Session>,
    /// Sessions opened, per upstream (two upstreams opening at one instant may do so in
    /// either order: a count shared by them would name their sessions by that order).
    next_session: HashMap<usize, usize>,
    deliveries: HashMap<String, usize>,
    /// Requests naming a session the front does not have (each answered 404).
    unknown: usize,
    expired: usize,
}

impl std::fmt::Debug for HttpFront {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HttpFront")
    }
}

/// The transport a host is given: every request to the front.
pub(crate) struct Wire(pub(crate) Arc<HttpFront>);

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
        let front = Arc::clone(&self.0);
        Box::pin(async move { front.handle(request).await })
    }
}

fn reset() -> NetError {
    NetError::Request("error sending request: connection reset by peer".into())
}

impl HttpFront {
    pub(crate) fn new(
        upstreams: Vec<Arc<Upstream>>,
        faults: HashMap<String, [Front; DELIVERIES]>,
        start: Instant,
    ) -> HttpFront {
        HttpFront {
            upstreams,
            faults,
            start,
            state: Mutex::new(FrontState::default()),
        }
    }

    /// Sessions expired under a call, and requests naming an unknown session.
    pub(crate) fn counts(&self) -> (usize, usize) {
        let state = lock(&self.state);
        (state.expired, state.unknown)
    }

    async fn handle(&self, request: reqwest::Request) -> Result<reqwest::Response, NetError> {
        let upstream = request
            .url()
            .host_str()
            .and_then(|host| host.strip_prefix("up"))
            .and_then(|rest| rest.split('.').next())
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| self.upstreams.iter().find(|u| u.index == n))
            .cloned();
        let Some(upstream) = upstream else {
            return Err(NetError::Request(
                "connection refused: error sending request (simulated)".into(),
            ));
        };
        let session = request
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = request
            .body()
            .and_then(reqwest::Body::as_bytes)
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        match request.method().as_str() {
            "POST" => self.post(&upstream, session, &body).await,
            "DELETE" => {
                let closed = session.and_then(|id| lock(&self.state).sessions.remove(&id));
                if let Some(closed) = &closed {
                    closed.close();
                }
                Ok(status(if closed.is_some() { 200 } else { 404 }, ""))
            }
            _ => Ok(status(405, "")),
        }
    }

    async fn post(
        &self,
        upstream: &Arc<Upstream>,
        session: Option<String>,
        body: &[u8],
    ) -> Result<reqwest::Response, NetError> {
        let Ok(message) = serde_json::from_slice::<Value>(body) else {
            return Ok(status(400, "not JSON"));
        };
        let method = message.get("method").and_then(Value::as_str).unwrap_or("");
        if method == "initialize" {
            return self.open(upstream, &message).await;
        }
        let Some(id) = session else {
            return Ok(status(400, "no session"));
        };
        let found = {
            let mut state = lock(&self.state);
            if state
                .sessions
                .get(&id)
                .is_some_and(|s| s.closed.load(Ordering::SeqCst))
            {
                state.sessions.remove(&id);
            }
            state
                .sessions
                .get(&id)
                .map(|s| (s.lines.clone(), Arc::clone(&s.waiting)))
        };
        let Some((lines, waiting)) = found else {
            lock(&self.state).unknown += 1;
            return Ok(status(404, "no such session"));
        };
        let Some(request_id) = message.get("id") else {
            // A notification (`initialized`, `cancelled`): passed on.
            let _ = lines.send(message.to_string());
            return Ok(status(202, ""));
        };
        let fault = if method == "tools/call" {
            let token = message["params"]["arguments"]["text"]
                .as_str()
                .unwrap_or("")
                .to_owned();
            let mut state = lock(&self.state);
            let delivery = state.deliveries.entry(token.clone()).or_default();
            let fault = self
                .faults
                .get(&token)
                .and_then(|faults| faults.get(*delivery))
                .copied()
                .unwrap_or(Front::Pass);
            *delivery += 1;
            fault
        } else {
            Front::Pass
        };
        match fault {
            Front::Expired => {
                // The session ends: its connection closes (the upstream ends what is
                // pending on it), and the client must initialise again.
                let mut state = lock(&self.state);
                if let Some(expired) = state.sessions.remove(&id) {
                    expired.close();
                }
                state.expired += 1;
                upstream
                    .log
                    .event(format!("{} expires session {id}", upstream.name()));
                return Ok(status(404, "session expired"));
            }
            Front::Unavailable => return Ok(status(503, "try again later")),
            _ => {}
        }
        let key = id_key(request_id);
        let (answer_tx, answer) = oneshot::channel();
        lock(&waiting).insert(key.clone(), answer_tx);
        if lines.send(message.to_string()).is_err() {
            lock(&waiting).remove(&key);
            return Err(reset());
        }
        match fault {
            Front::ServerError => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                lock(&waiting).remove(&key);
                return Ok(status(500, "it broke"));
            }
            Front::Reset => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                lock(&waiting).remove(&key);
                return Err(reset());
            }
            _ => {}
        }
        // The answer, or the connection ending under it (a dropped upstream connection,
        // or the session closed): the stream breaks.
        let guard = Forget {
            waiting: Arc::clone(&waiting),
            key: key.clone(),
        };
        let answered = answer.await;
        drop(guard);
        match answered {
            Ok(line) => Ok(respond(
                200,
                &[("content-type", "application/json")],
                bytes::Bytes::from(line),
            )),
            Err(_) => Err(reset()),
        }
    }

    /// `initialize`: a new session, a new connection of the upstream.
    async fn open(
        &self,
        upstream: &Arc<Upstream>,
        message: &Value,
    ) -> Result<reqwest::Response, NetError> {
        let generation = upstream.generations.fetch_add(1, Ordering::SeqCst);
        upstream.log.event(format!(
            "{} opened over HTTP (#{generation})",
            upstream.name()
        ));
        let (to_server, server_in) = tokio::io::duplex(PIPE);
        let (server_out, from_server) = tokio::io::duplex(PIPE);
        upstream.spawn(tokio::spawn(
            Arc::clone(upstream).serve(generation, self.start, server_in, server_out),
        ));
        let (lines_tx, mut lines) = mpsc::unbounded_channel::<String>();
        // The writer: the client's lines into the connection, until the session closes.
        upstream.spawn(tokio::spawn(async move {
            let mut input = to_server;
            while let Some(mut line) = lines.recv().await {
                if line.is_empty() {
                    break; // the session ended: its connection closes
                }
                line.push('\n');
                if input.write_all(line.as_bytes()).await.is_err() {
                    break;
                }
            }
        }));
        // The reader: each answer to whoever waits for its id; the end of the connection
        // breaks every request still waiting.
        let waiting: Arc<Mutex<Waiting>> = Arc::default();
        let closed = Arc::new(AtomicBool::new(false));
        {
            let waiting = Arc::clone(&waiting);
            let closed = Arc::clone(&closed);
            upstream.spawn(tokio::spawn(async move {
                let mut lines = BufReader::new(from_server).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let Ok(message) = serde_json::from_str::<Value>(&line) else {
                        continue;
                    };
                    if message.get("method").is_some() {
                        continue; // notifications: no session stream is offered
                    }
                    let key = message.get("id").map(id_key).unwrap_or_default();
                    if let Some(waiter) = lock(&waiting).remove(&key) {
                        let _ = waiter.send(line);
                    }
                }
                closed.store(true, Ordering::SeqCst);
                lock(&waiting).clear();
            }));
        }
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        let (answer_tx, answer) = oneshot::channel();
        lock(&waiting).insert(id_key(&id), answer_tx);
        let _ = lines_tx.send(message.to_string());
        let Ok(line) = answer.await else {
            return Err(reset());
        };
        let session = {
            let mut state = lock(&self.state);
            let n = {
                let next = state.next_session.entry(upstream.index).or_default();
                *next += 1;
                *next
            };
            let session = format!("{}-s{n}", upstream.name());
            state.sessions.insert(
                session.clone(),
                Session {
                    lines: lines_tx,
                    waiting,
                    closed,
                },
            );
            session
        };
        Ok(respond(
            200,
            &[
                ("content-type", "application/json"),
                ("mcp-session-id", &session),
            ],
            bytes::Bytes::from(line),
        ))
    }
}

/// Forgets a request's waiter when its POST ends (answered, or dropped by the client).
struct Forget {
    waiting: Arc<Mutex<Waiting>>,
    key: String,
}

impl Drop for Forget {
    fn drop(&mut self) {
        lock(&self.waiting).remove(&self.key);
    }
}
