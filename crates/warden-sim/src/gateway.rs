//! The gateway under the simulator: many clients, a few upstream servers, faults on both
//! sides (issue 18).
//!
//! What is real: `warden serve`'s two faces, stdio ([`warden_gateway::stdio::serve`], one
//! per client, over in-memory pipes) and Streamable HTTP
//! ([`warden_gateway::http::serve_connections`], hyper's server fed in-memory connections:
//! see `http_face`; each client is a stdio one, a 2025-11-25 HTTP session or a 2026-07-28
//! stateless HTTP client, drawn from the seed), the protocol and backend above them, the host core (its
//! sessions, policy, catalogue refreshes and the audit log in a real state store), and the
//! stdio MCP client underneath (rmcp, through [`warden_mcp::connect_pipes`]: request ids,
//! timeouts, `notifications/cancelled` on timeout and on drop). The upstreams are reached
//! through the host's relay seam ([`RelayDialer`]): the simulator dials them as in-memory
//! pipes to scripted servers, so no process is started and nothing in the gateway or host
//! was changed to allow it. A third of them (drawn from a stream of their own) are remote
//! instead: the same scripted server behind a Streamable HTTP front (`http_upstream`),
//! reached by Warden's real HTTP client through the transport seam, with the remote
//! world's faults on the front (the session expired, 503, 500, a reset after delivery) on
//! top of the upstream's own, under every client at once.
//!
//! What is scripted, from the seed: upstream servers that answer, answer with a tool
//! error or a JSON-RPC error, answer late (after the call timeout), never answer, answer
//! twice, send an answer with a stale id first, drop the connection mid-call, or announce
//! `tools/list_changed` (and change their tools) just before answering, besides storms of
//! `list_changed` at random moments; some honour cancellations, some answer anyway. Clients
//! that wait, cancel (`notifications/cancelled`; a 2026-07-28 HTTP client closes the call's
//! stream instead), give up at their own timeout (a cancellation too), or disconnect with
//! calls in flight (stdio: the input ends; an HTTP session: `DELETE`; a stateless HTTP
//! client: every stream closes).
//!
//! Properties checked in every run:
//! 1. a client never gets an answer to a call of its own twice, nor any text of another
//!    call's answer (every call carries a token its upstream echoes);
//! 2. every call a client waits for is answered by the upstream's call timeout (plus the
//!    bound on writing the cancellation and a slack of [`SLACK`]);
//! 3. every upstream request that was still unanswered when its client cancelled it, its
//!    client went away, or its call timeout passed, gets `notifications/cancelled` for its
//!    id within [`CANCEL_BOUND`] (unless its connection dropped first);
//! 4. the audit log holds exactly one row per call attempt: one row for every call that
//!    reached an upstream or was answered, none twice, none for a call never made, each
//!    with the outcome the client saw (`ok`, `tool_error`, `failed`) and `executed` true
//!    when the upstream got it;
//! 5. nothing leaks: every client's session ends when its input ends, the HTTP face stops
//!    within 30 s of being told once its clients are gone (its drain bound is 10 s), the
//!    gateway and the host are released by everything that held them, every upstream
//!    connection is closed at shutdown, and no task is left on the runtime;
//! 6. the same seed gives the same trace;
//! 7. over HTTP: a session is opened by `initialize` and ended by `DELETE` (200), and a
//!    request naming a session that never existed or was deleted is answered 404; every
//!    other request of a client still connected is answered 200 (202 for a notification),
//!    and a call's stream carries no answer to another id.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use warden_gateway::{Backend, Gateway, ProtocolOptions, StdioLimits};
use warden_mcp::http::reconnect::SeededRng;

use crate::http_face::{self, Dial, Events, Face};
use crate::http_upstream::{DELIVERIES, Front, HttpFront, Wire};
use crate::upstream::{
    Out, PIPE, Script, UpFault, UpPlan, Upstream, all_received, canonical, check_cancelled,
    check_no_leaks, lock, store_dir, token,
};
use crate::{Log, driver, pick};

/// What a waited-for call may take beyond its upstream's call timeout: the bound on
/// writing the cancellation (rmcp_client's `CANCEL_WRITE_LIMIT`, 500 ms) and the rest.
pub const SLACK: Duration = Duration::from_secs(2);
/// What the client does with one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Act {
    Wait,
    /// `notifications/cancelled` after this long, if unanswered by then.
    Cancel(Duration),
    /// The client's own timeout: a cancellation too.
    GiveUp(Duration),
}

#[derive(Debug, Clone)]
struct CallPlan {
    number: usize,
    client: usize,
    upstream: usize,
    at: Duration,
    latency: Duration,
    fault: UpFault,
    act: Act,
}

impl CallPlan {
    fn token(&self) -> String {
        token(self.number)
    }
}

#[derive(Debug, Clone)]
struct Plan {
    upstreams: Vec<UpPlan>,
    /// The front faults of each call to a remote upstream, by call number.
    fronts: HashMap<usize, [Front; DELIVERIES]>,
    /// The remote upstreams' back-off jitter.
    jitter: u64,
    /// When each client disconnects, if it does before it is done.
    disconnects: Vec<Option<Duration>>,
    /// How each client reaches the gateway.
    faces: Vec<Face>,
    calls: Vec<CallPlan>,
}

fn plan(seed: u64) -> Plan {
    // Another stream than the connection world's, from the same seed.
    let mut rng = SeededRng::new(seed ^ 0x6761_7465_7761_7921);
    let upstreams = (0..1 + rng.below(2))
        .map(|_| UpPlan {
            remote: false,
            call_timeout: Duration::from_millis(1_000 + rng.below(9_000)),
            honours_cancel: rng.below(2) == 0,
            storms: (0..rng.below(4))
                .map(|_| {
                    (
                        Duration::from_millis(rng.below(30_000)),
                        1 + rng.below(5) as u32,
                    )
                })
                .collect(),
        })
        .collect::<Vec<_>>();
    let clients = 1 + rng.below(6) as usize;
    let disconnects = (0..clients)
        .map(|_| (rng.below(5) == 0).then(|| Duration::from_millis(rng.below(30_000))))
        .collect();
    let faults = [
        (8, UpFault::Answer),
        (1, UpFault::ToolError),
        (1, UpFault::RpcError),
        (1, UpFault::Late),
        (1, UpFault::Stall),
        (2, UpFault::AnswerTwice),
        (2, UpFault::StaleId),
        (1, UpFault::Drop),
        (2, UpFault::ListChangedFirst),
    ];
    let count = 1 + rng.below(16) as usize;
    let calls: Vec<CallPlan> = (0..count)
        .map(|number| {
            let upstream = rng.below(upstreams.len() as u64) as usize;
            let timeout = upstreams[upstream].call_timeout;
            let fault = pick(&mut rng, &faults);
            let latency = match fault {
                UpFault::Late => timeout + Duration::from_millis(1 + rng.below(3_000)),
                _ => Duration::from_millis(rng.below(timeout.as_millis() as u64 - 1)),
            };
            let act = match rng.below(6) {
                0 => Act::Cancel(Duration::from_millis(rng.below(4_000))),
                1 => Act::GiveUp(Duration::from_millis(500 + rng.below(8_000))),
                _ => Act::Wait,
            };
            CallPlan {
                number,
                client: rng.below(clients as u64) as usize,
                upstream,
                at: Duration::from_millis(200 + rng.below(25_000)),
                latency,
                fault,
                act,
            }
        })
        .collect();
    // The faces from a stream of their own, so the rest of a seed's plan is what it was
    // before the HTTP face joined the world.
    let mut faces = SeededRng::new(seed ^ 0x6874_7470_6661_6365);
    let faces = (0..clients)
        .map(|_| {
            pick(
                &mut faces,
                &[(1, Face::Stdio), (1, Face::Session), (1, Face::Stateless)],
            )
        })
        .collect();
    // Which upstreams are remote, and the faults of their HTTP front, from a stream of
    // their own too (decision 0041, revision 3).
    let mut remote = SeededRng::new(seed ^ 0x7265_6d6f_7465_7570);
    let mut upstreams = upstreams;
    for upstream in &mut upstreams {
        upstream.remote = remote.below(3) == 0;
    }
    let front = [
        (10, Front::Pass),
        (3, Front::Expired),
        (2, Front::Unavailable),
        (1, Front::ServerError),
        (1, Front::Reset),
    ];
    let fronts = calls
        .iter()
        .filter(|c: &&CallPlan| upstreams[c.upstream].remote)
        .map(|c| {
            let faults = [(); DELIVERIES].map(|()| pick(&mut remote, &front));
            (c.number, faults)
        })
        .collect();
    Plan {
        upstreams,
        fronts,
        jitter: remote.next_u64(),
        disconnects,
        faces,
        calls,
    }
}

/// What a gateway run found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The seed.
    pub seed: u64,
    /// Upstream servers.
    pub upstreams: usize,
    /// Clients over the HTTP face: 2025-11-25 sessions, 2026-07-28 stateless.
    pub http_sessions: usize,
    /// Clients over the HTTP face without a session (2026-07-28).
    pub http_stateless: usize,
    /// Requests naming an unknown or deleted session (each must get 404).
    pub unknown_sessions: usize,
    /// Upstreams reached over Streamable HTTP.
    pub remote_upstreams: usize,
    /// Sessions of remote upstreams that expired under a call (404) and were opened again.
    pub remote_expired: usize,
    /// Calls planned.
    pub calls: usize,
    /// Calls the upstreams received.
    pub received: usize,
    /// Answers clients got.
    pub answered: usize,
    /// Cancellations the upstreams received.
    pub cancellations: usize,
    /// Upstream connections made (the host does not dial a dropped stdio server again).
    pub connections: usize,
    /// Calls in flight when their upstream connection dropped.
    pub dropped: usize,
    /// `list_changed` the upstreams sent.
    pub list_changes: usize,
    /// Audit rows written.
    pub audit_rows: usize,
    /// Property violations; empty when the run passed.
    pub violations: Vec<String>,
    /// A digest of the trace.
    pub digest: u64,
}

/// Every call of the upstreams allowed, in any context: the properties here are about
/// calls that run (the host world has refusals and approvals).
fn policy() -> warden_policy::Policy {
    crate::upstream::policy(json!({
        "rules": [{"tools": "up*__*", "effect": "allow",
                   "even_if_tainted": true, "even_if_private": true}]
    }))
}

/// One call as its client saw it.
#[derive(Debug, Clone, Default)]
struct Seen {
    sent: Option<Duration>,
    cancelled: Option<Duration>,
    responses: Vec<(Duration, Value)>,
}

/// One client of the gateway: what it saw, by call number.
struct ClientState {
    index: usize,
    seen: Mutex<BTreeMap<usize, Seen>>,
    /// Request id (the call number + 1; `initialize` is 0) to the call waiting for it.
    waiting: Mutex<HashMap<u64, oneshot::Sender<()>>>,
    disconnected: Mutex<Option<Duration>>,
    list_changes: AtomicUsize,
}

/// Runs one seed of the gateway world twice and checks every property (a trace that
/// differs names its first differing event).
pub fn run(seed: u64) -> Report {
    let (mut report, first) = run_once(seed);
    let (second, again) = run_once(seed);
    driver::same_digest(
        "gateway",
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

/// The trace of one gateway seed.
pub fn trace(seed: u64) -> Vec<String> {
    let log = Arc::new(Log::default());
    let _ = simulate(seed, log.clone());
    lock(&log.trace).clone()
}

fn run_once(seed: u64) -> (Report, Vec<String>) {
    let log = Arc::new(Log::default());
    let mut report = simulate(seed, log.clone());
    let trace = lock(&log.trace);
    let canonical = canonical(&trace);
    report.digest = driver::digest(&canonical);
    (report, canonical.into_iter().cloned().collect())
}

fn simulate(seed: u64, log: Arc<Log>) -> Report {
    let plan = plan(seed);
    let dir = store_dir(seed);
    let outcome = driver::execute(&log, world(seed, plan, log.clone(), dir.clone()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut report = outcome.unwrap_or(Report {
        seed,
        ..Report::default()
    });
    report.violations = lock(&log.violations).clone();
    report
}

async fn world(seed: u64, plan: Plan, log: Arc<Log>, dir: PathBuf) -> Report {
    let start = Instant::now();
    *lock(&log.start) = Some(start);
    log.event(format!(
        "gateway seed {seed}: {} upstream(s), {} client(s), {} call(s)",
        plan.upstreams.len(),
        plan.disconnects.len(),
        plan.calls.len()
    ));
    let mut report = Report {
        seed,
        upstreams: plan.upstreams.len(),
        http_sessions: plan.faces.iter().filter(|f| **f == Face::Session).count(),
        http_stateless: plan.faces.iter().filter(|f| **f == Face::Stateless).count(),
        calls: plan.calls.len(),
        ..Report::default()
    };
    log.event(format!("faces {:?}", plan.faces));
    let upstreams: Vec<Arc<Upstream>> = plan
        .upstreams
        .iter()
        .enumerate()
        .map(|(index, up)| {
            let calls = plan
                .calls
                .iter()
                .filter(|c| c.upstream == index)
                .map(|c| {
                    let script = Script {
                        number: c.number,
                        fault: c.fault,
                        latency: c.latency,
                    };
                    (c.token(), script)
                })
                .collect();
            Arc::new(Upstream::new(index, up.clone(), calls, log.clone()))
        })
        .collect();
    let store_path = dir.join("state.db");
    let store = match warden_store::Store::open(&store_path) {
        Ok(store) => store,
        Err(error) => {
            log.violation(format!("no state store: {error}"));
            return report;
        }
    };
    // The remote upstreams' HTTP front (one for all of them), if there are any.
    let front = plan.upstreams.iter().any(|u| u.remote).then(|| {
        let faults = plan
            .fronts
            .iter()
            .map(|(number, faults)| (token(*number), *faults))
            .collect();
        Arc::new(HttpFront::new(upstreams.clone(), faults, start))
    });
    let wire = front.as_ref().map(|front| {
        let wire: Arc<dyn warden_net::Transport> = Arc::new(Wire(Arc::clone(front)));
        (wire, plan.jitter)
    });
    let host = crate::upstream::host(&upstreams, start, store, policy(), &log, wire).await;
    let backend = match Backend::new(Arc::new(host), None) {
        Ok(backend) => backend,
        Err(error) => {
            log.violation(format!("no backend: {error}"));
            return report;
        }
    };
    let gateway = match Gateway::new(backend, ProtocolOptions::default()) {
        Ok(gateway) => Arc::new(gateway),
        Err(error) => {
            log.violation(format!("no gateway: {error}"));
            return report;
        }
    };
    let follower = {
        let gateway = Arc::clone(&gateway);
        tokio::spawn(async move {
            gateway
                .backend()
                .follow_upstreams(warden_gateway::backend::DEFAULT_REFRESH_INTERVAL)
                .await;
        })
    };

    // The clients, each on its own stdio session.
    let clients: Vec<Arc<ClientState>> = (0..plan.disconnects.len())
        .map(|index| {
            Arc::new(ClientState {
                index,
                seen: Mutex::new(BTreeMap::new()),
                waiting: Mutex::new(HashMap::new()),
                disconnected: Mutex::new(None),
                list_changes: AtomicUsize::new(0),
            })
        })
        .collect();
    // The HTTP face, as `warden serve --http` runs it, fed in-memory connections.
    let (dial, incoming) = mpsc::channel(64);
    let (stop_http, http_stopped) = oneshot::channel::<()>();
    let http = {
        let guard = warden_gateway::Guard::new(
            std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 8420)),
            &[],
            &[],
            Vec::new(),
        );
        let gateway = Arc::clone(&gateway);
        tokio::spawn(async move {
            match guard {
                Ok(guard) => {
                    warden_gateway::http::serve_connections(
                        gateway,
                        incoming,
                        guard,
                        warden_gateway::HttpLimits::default(),
                        async {
                            let _ = http_stopped.await;
                        },
                    )
                    .await;
                    true
                }
                Err(_) => false,
            }
        })
    };
    let unknown = Arc::new(AtomicUsize::new(0));
    let mut sessions = Vec::new();
    let mut drivers = Vec::new();
    for client in &clients {
        let calls: Vec<CallPlan> = plan
            .calls
            .iter()
            .filter(|c| c.client == client.index)
            .cloned()
            .collect();
        let timeouts: Vec<Duration> = plan.upstreams.iter().map(|u| u.call_timeout).collect();
        let disconnect = plan.disconnects[client.index];
        let face = plan.faces[client.index];
        if face != Face::Stdio {
            drivers.push(tokio::spawn(drive_http(
                Arc::clone(client),
                face,
                calls,
                timeouts,
                disconnect,
                start,
                dial.clone(),
                Arc::clone(&unknown),
                log.clone(),
            )));
            continue;
        }
        let (to_gateway, gateway_in) = tokio::io::duplex(PIPE);
        let (gateway_out, from_gateway) = tokio::io::duplex(PIPE);
        sessions.push((
            client.index,
            tokio::spawn(warden_gateway::stdio::serve(
                Arc::clone(&gateway),
                BufReader::new(gateway_in),
                gateway_out,
                StdioLimits::default(),
            )),
        ));
        drivers.push(tokio::spawn(drive(
            Arc::clone(client),
            calls,
            timeouts,
            disconnect,
            start,
            to_gateway,
            from_gateway,
            log.clone(),
        )));
    }
    drop(dial);
    for driver in drivers {
        if driver.await.is_err() {
            log.violation("a client task panicked".into());
        }
    }
    // Every client's input has ended: its session must end, and with it every call.
    for (index, session) in sessions {
        match tokio::time::timeout(Duration::from_secs(30), session).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => log.violation(format!("client {index}'s session panicked")),
            Err(_) => log.violation(format!(
                "client {index}'s session did not end within 30 s of its input ending"
            )),
        }
    }
    // Every HTTP client is done: the face stops (it drains what is left within its bound).
    let _ = stop_http.send(());
    match tokio::time::timeout(Duration::from_secs(30), http).await {
        Ok(Ok(true)) => {}
        Ok(Ok(false)) => log.violation("the HTTP face's gate could not be built".into()),
        Ok(Err(_)) => log.violation("the HTTP face panicked".into()),
        Err(_) => log.violation("the HTTP face did not stop within 30 s".into()),
    }
    report.unknown_sessions = unknown.load(Ordering::SeqCst);
    follower.abort();
    let _ = follower.await;
    log.event("every client gone; shutting down".into());
    match Arc::try_unwrap(gateway) {
        Ok(gateway) => match Arc::try_unwrap(gateway.into_backend().into_host()) {
            Ok(host) => host.shutdown().await,
            Err(_) => log.violation("the host is still held after every client left".into()),
        },
        Err(_) => log.violation("the gateway is still held after every client left".into()),
    }
    check_no_leaks(&upstreams, &log).await;
    report.remote_upstreams = plan.upstreams.iter().filter(|u| u.remote).count();
    if let Some(front) = &front {
        report.remote_expired = front.counts().0;
    }

    check(&plan, &upstreams, &clients, &store_path, &log, &mut report);
    log.event(format!(
        "end: {} received, {} answered, {} cancellations, {} connections, {} list changes, \
         {} audit rows",
        report.received,
        report.answered,
        report.cancellations,
        report.connections,
        report.list_changes,
        report.audit_rows
    ));
    report
}

/// One client: `initialize`, its calls at their times (each waited for, cancelled, or
/// given up on), a disconnect if planned, and the end of its input once every call settled.
#[allow(clippy::too_many_arguments)]
async fn drive(
    client: Arc<ClientState>,
    calls: Vec<CallPlan>,
    timeouts: Vec<Duration>,
    disconnect: Option<Duration>,
    start: Instant,
    to_gateway: DuplexStream,
    from_gateway: DuplexStream,
    log: Arc<Log>,
) {
    let index = client.index;
    let (out, mut queue) = mpsc::unbounded_channel::<Out>();
    let writer = tokio::spawn(async move {
        let mut input = to_gateway;
        while let Some(message) = queue.recv().await {
            match message {
                Out::Line(mut line) => {
                    line.push('\n');
                    if input.write_all(line.as_bytes()).await.is_err() {
                        break;
                    }
                }
                Out::Close => break,
            }
        }
    });
    let reader = {
        let client = Arc::clone(&client);
        let log = log.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(from_gateway).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(message) = serde_json::from_str::<Value>(&line) else {
                    log.violation(format!(
                        "client {}: the gateway sent non-JSON",
                        client.index
                    ));
                    continue;
                };
                let now = start.elapsed();
                if let Some(method) = message.get("method").and_then(Value::as_str) {
                    if method == "notifications/tools/list_changed" {
                        client.list_changes.fetch_add(1, Ordering::SeqCst);
                    }
                    continue;
                }
                let Some(id) = message.get("id").and_then(Value::as_u64) else {
                    log.violation(format!(
                        "client {}: an answer without a usable id: {line}",
                        client.index
                    ));
                    continue;
                };
                if id > 0 {
                    let number = (id - 1) as usize;
                    log.event(format!(
                        "client {} gets an answer for call {number}: {}",
                        client.index,
                        summary(&message)
                    ));
                    lock(&client.seen)
                        .entry(number)
                        .or_default()
                        .responses
                        .push((now, message));
                }
                if let Some(waiting) = lock(&client.waiting).remove(&id) {
                    let _ = waiting.send(());
                }
            }
        })
    };
    let (ready_tx, ready) = oneshot::channel();
    lock(&client.waiting).insert(0, ready_tx);
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": format!("sim-client-{index}"), "version": "1"}}});
    let _ = out.send(Out::Line(initialize.to_string()));
    if tokio::time::timeout(Duration::from_secs(10), ready)
        .await
        .is_err()
    {
        log.violation(format!("client {index}: initialize not answered in 10 s"));
    }
    let _ = out.send(Out::Line(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
    ));
    if let Some(at) = disconnect {
        let out = out.clone();
        let client = Arc::clone(&client);
        let log = log.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(start + at).await;
            *lock(&client.disconnected) = Some(start.elapsed());
            log.event(format!("client {} disconnects", client.index));
            let _ = out.send(Out::Close);
        });
    }
    let mut tasks = Vec::new();
    for call in calls {
        let out = out.clone();
        let client = Arc::clone(&client);
        let log = log.clone();
        let timeout = timeouts[call.upstream];
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(start + call.at).await;
            if lock(&client.disconnected).is_some() {
                return;
            }
            let id = call.number as u64 + 1;
            let (answered_tx, answered) = oneshot::channel();
            lock(&client.waiting).insert(id, answered_tx);
            let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": format!("up{}__echo", call.upstream),
                           "arguments": {"text": call.token()}}});
            lock(&client.seen).entry(call.number).or_default().sent = Some(start.elapsed());
            log.event(format!(
                "client {} sends call {} to up{} ({:?})",
                client.index, call.number, call.upstream, call.act
            ));
            let _ = out.send(Out::Line(request.to_string()));
            let wait = match call.act {
                Act::Wait => timeout + SLACK,
                Act::Cancel(after) | Act::GiveUp(after) => after,
            };
            if tokio::time::timeout(wait, answered).await.is_ok() {
                return;
            }
            if call.act == Act::Wait {
                // Property 2 is checked at the end; keep the session open for stragglers.
                return;
            }
            lock(&client.seen).entry(call.number).or_default().cancelled = Some(start.elapsed());
            log.event(format!(
                "client {} cancels call {}",
                client.index, call.number
            ));
            let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": id, "reason": "sim"}});
            let _ = out.send(Out::Line(cancel.to_string()));
            lock(&client.waiting).remove(&id);
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    // Room for answers still on their way, then the end of the input.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let _ = out.send(Out::Close);
    drop(out);
    let _ = writer.await;
    let _ = reader.await;
}

/// One client over the HTTP face (`face` is [`Face::Session`] or [`Face::Stateless`]): a
/// session opened with `initialize` when it has one (and a request naming an unknown
/// session, which must get 404), its calls at their times, each on its own SSE stream
/// (waited for, cancelled or given up on: a POSTed `notifications/cancelled` in a
/// session, the stream closed without one), a disconnect if planned (`DELETE` of the
/// session, after which the session must be unknown; every stream closed), and the end:
/// `DELETE` of a session still open.
#[allow(clippy::too_many_arguments)]
async fn drive_http(
    client: Arc<ClientState>,
    face: Face,
    calls: Vec<CallPlan>,
    timeouts: Vec<Duration>,
    disconnect: Option<Duration>,
    start: Instant,
    dial: Dial,
    unknown: Arc<AtomicUsize>,
    log: Arc<Log>,
) {
    let index = client.index;
    let session = if face == Face::Session {
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": format!("sim-client-{index}"), "version": "1"}}});
        let opened = match http_face::send(&dial, index, Method::POST, &[], Some(&initialize)).await
        {
            Ok(response) => response,
            Err(error) => {
                log.violation(format!(
                    "client {index}: initialize over HTTP failed: {error}"
                ));
                return;
            }
        };
        let id = opened
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let (status, body) = http_face::json(opened).await;
        let Some(id) = id.filter(|_| status == StatusCode::OK) else {
            log.violation(format!(
                "client {index}: initialize over HTTP got {status} without a session: {body:?}"
            ));
            return;
        };
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let headers = session_headers(&id);
        match http_face::send(&dial, index, Method::POST, &headers, Some(&initialized)).await {
            Ok(response) if response.status() == StatusCode::ACCEPTED => {}
            Ok(response) => log.violation(format!(
                "client {index}: notifications/initialized got {}",
                response.status()
            )),
            Err(error) => log.violation(format!("client {index}: initialized: {error}")),
        }
        // A session nobody opened is unknown: 404, so a client re-initialises.
        expect_unknown(&dial, index, "sim-no-such-session", &unknown, &log).await;
        log.event(format!("client {index} opened an HTTP session"));
        Some(id)
    } else {
        None
    };
    let headers_for = |call: &CallPlan| -> Vec<(&'static str, String)> {
        match &session {
            Some(id) => session_headers(id),
            None => vec![
                ("mcp-protocol-version", MODERN.to_owned()),
                ("mcp-method", "tools/call".to_owned()),
                ("mcp-name", format!("up{}__echo", call.upstream)),
            ],
        }
    };
    let (gone_tx, gone) = tokio::sync::watch::channel(false);
    let mut leaving = None;
    if let Some(at) = disconnect {
        let client = Arc::clone(&client);
        let log = log.clone();
        let dial = dial.clone();
        let session = session.clone();
        let unknown = Arc::clone(&unknown);
        let gone_tx = gone_tx.clone();
        leaving = Some(tokio::spawn(async move {
            tokio::time::sleep_until(start + at).await;
            *lock(&client.disconnected) = Some(start.elapsed());
            log.event(format!("client {index} disconnects"));
            if let Some(id) = &session {
                end_session(&dial, index, id, &log).await;
                expect_unknown(&dial, index, id, &unknown, &log).await;
            }
            gone_tx.send_replace(true);
        }));
    }
    let mut tasks = Vec::new();
    for call in calls {
        let client = Arc::clone(&client);
        let log = log.clone();
        let dial = dial.clone();
        let headers = headers_for(&call);
        let modern = session.is_none();
        let mut gone = gone.clone();
        let timeout = timeouts[call.upstream];
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(start + call.at).await;
            if lock(&client.disconnected).is_some() {
                return;
            }
            let id = call.number as u64 + 1;
            let mut params = json!({"name": format!("up{}__echo", call.upstream),
                                    "arguments": {"text": call.token()}});
            if modern {
                params["_meta"] = json!({
                    warden_gateway::dispatch::META_VERSION: MODERN,
                    warden_gateway::dispatch::META_CAPABILITIES: {},
                    warden_gateway::dispatch::META_CLIENT_INFO:
                        {"name": format!("sim-client-{}", client.index), "version": "1"},
                });
            }
            let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                                 "params": params});
            lock(&client.seen).entry(call.number).or_default().sent = Some(start.elapsed());
            log.event(format!(
                "client {} sends call {} to up{} over HTTP ({:?})",
                client.index, call.number, call.upstream, call.act
            ));
            let reader_client = Arc::clone(&client);
            let reader_log = log.clone();
            let reader_dial = dial.clone();
            let reader_headers = headers.clone();
            // Owns the exchange: dropping it closes the connection (2026-07-28: the
            // cancellation), whether the answer had begun or not.
            let answered = async move {
                let (client, log, dial, headers) =
                    (reader_client, reader_log, reader_dial, reader_headers);
                let response = match http_face::send(
                    &dial,
                    client.index,
                    Method::POST,
                    &headers,
                    Some(&request),
                )
                .await
                {
                    Ok(response) => response,
                    Err(error) => {
                        log.violation(format!("call {}: {error}", call.number));
                        return;
                    }
                };
                if response.status() != StatusCode::OK {
                    let status = response.status();
                    let (_, body) = http_face::json(response).await;
                    // After a DELETE, the session is unknown: that is the right answer.
                    if lock(&client.disconnected).is_none() {
                        log.violation(format!("call {}: HTTP {status}: {body:?}", call.number));
                    }
                    return;
                }
                let mut events = Events::new(response);
                while let Some(message) = events.next().await {
                    if message.get("id").and_then(Value::as_u64) == Some(id) {
                        log.event(format!(
                            "client {} gets an answer for call {}: {}",
                            client.index,
                            call.number,
                            summary(&message)
                        ));
                        lock(&client.seen)
                            .entry(call.number)
                            .or_default()
                            .responses
                            .push((start.elapsed(), message));
                        // The stream carries one answer; a second would be read here.
                    } else if message.get("id").is_some() {
                        log.violation(format!(
                            "call {}: an answer for another id on its stream: {message}",
                            call.number
                        ));
                    }
                }
            };
            let wait = match call.act {
                Act::Wait => timeout + SLACK,
                Act::Cancel(after) | Act::GiveUp(after) => after,
            };
            let mut answered = Box::pin(answered);
            let ended = tokio::select! {
                ended = tokio::time::timeout(wait, answered.as_mut()) => ended.is_ok(),
                // Gone: every stream closes with the client.
                _ = gone.wait_for(|gone| *gone) => return,
            };
            if ended || call.act == Act::Wait {
                if !ended {
                    // Property 2 is checked at the end; read what still comes, within bounds.
                    let _ = tokio::time::timeout(Duration::from_secs(60), answered).await;
                }
                return;
            }
            lock(&client.seen).entry(call.number).or_default().cancelled = Some(start.elapsed());
            log.event(format!(
                "client {} cancels call {}",
                client.index, call.number
            ));
            if !modern {
                let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": id, "reason": "sim"}});
                match http_face::send(&dial, client.index, Method::POST, &headers, Some(&cancel))
                    .await
                {
                    Ok(response) if response.status() == StatusCode::ACCEPTED => {}
                    Ok(response) if lock(&client.disconnected).is_some() => drop(response),
                    Ok(response) => log.violation(format!(
                        "call {}: its cancellation got HTTP {}",
                        call.number,
                        response.status()
                    )),
                    Err(error) => log.violation(format!("call {}: {error}", call.number)),
                }
            }
            // 2026-07-28: closing the request's stream is the cancellation.
            drop(answered);
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    tokio::time::sleep(Duration::from_secs(15)).await;
    // A disconnect planned for later than the end does not happen; one under way finishes.
    if let Some(task) = leaving {
        if disconnect.is_some_and(|at| start + at > Instant::now()) {
            task.abort();
        }
        let _ = task.await;
    }
    if let Some(id) = &session
        && lock(&client.disconnected).is_none()
    {
        end_session(&dial, index, id, &log).await;
    }
    drop(gone_tx);
}

/// The version a 2026-07-28 client names.
const MODERN: &str = warden_gateway::dispatch::MODERN_VERSION;

fn session_headers(id: &str) -> Vec<(&'static str, String)> {
    vec![
        ("mcp-session-id", id.to_owned()),
        ("mcp-protocol-version", "2025-11-25".to_owned()),
    ]
}

/// `DELETE` of a session: 200.
async fn end_session(dial: &Dial, index: usize, id: &str, log: &Log) {
    match http_face::send(dial, index, Method::DELETE, &session_headers(id), None).await {
        Ok(response) if response.status() == StatusCode::OK => {}
        Ok(response) => log.violation(format!(
            "client {index}: DELETE of its session got {}",
            response.status()
        )),
        Err(error) => log.violation(format!("client {index}: DELETE: {error}")),
    }
}

/// A request naming session `id` must be answered 404 (it never existed, or was deleted).
async fn expect_unknown(dial: &Dial, index: usize, id: &str, unknown: &AtomicUsize, log: &Log) {
    unknown.fetch_add(1, Ordering::SeqCst);
    let list = json!({"jsonrpc": "2.0", "id": 1_000_000, "method": "tools/list"});
    match http_face::send(dial, index, Method::POST, &session_headers(id), Some(&list)).await {
        Ok(response) if response.status() == StatusCode::NOT_FOUND => {}
        Ok(response) => log.violation(format!(
            "client {index}: a request naming an unknown session got {}, not 404",
            response.status()
        )),
        Err(error) => log.violation(format!("client {index}: {error}")),
    }
}

/// The part of an answer a trace shows.
fn summary(message: &Value) -> String {
    if let Some(error) = message.get("error") {
        return format!(
            "error {}",
            error.get("code").cloned().unwrap_or(Value::Null)
        );
    }
    let result = message.get("result").cloned().unwrap_or(Value::Null);
    let text = result
        .get("content")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .and_then(|c| c.get("text"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let short: String = text.chars().take(60).collect();
    format!(
        "{}{short}",
        if result.get("isError") == Some(&Value::Bool(true)) {
            "isError "
        } else {
            ""
        }
    )
}

/// What the client saw of one answer: the outcome the audit row must carry.
fn expected_outcome(message: &Value, token: &str) -> Option<&'static str> {
    if message.get("error").is_some() {
        // A protocol error: the call never became an attempt of a known tool.
        return None;
    }
    let result = message.get("result")?;
    let text = result
        .get("content")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .and_then(|c| c.get("text"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let is_error = result.get("isError") == Some(&Value::Bool(true));
    Some(match (text == token, is_error) {
        (true, false) => "ok",
        (true, true) => "tool_error",
        (false, _) => "failed",
    })
}

fn check(
    plan: &Plan,
    upstreams: &[Arc<Upstream>],
    clients: &[Arc<ClientState>],
    store_path: &std::path::Path,
    log: &Log,
    report: &mut Report,
) {
    let tokens: Vec<String> = plan.calls.iter().map(CallPlan::token).collect();
    let received = all_received(upstreams);
    report.received = received.len();
    report.cancellations = received.iter().filter(|r| r.cancelled.is_some()).count();
    report.dropped = received.iter().filter(|r| r.dropped.is_some()).count();
    report.connections = upstreams
        .iter()
        .map(|u| u.generations.load(Ordering::SeqCst) as usize)
        .sum();
    report.list_changes = upstreams
        .iter()
        .map(|u| u.list_changes.load(Ordering::SeqCst))
        .sum();

    // 1 and 2: each client's answers.
    for call in &plan.calls {
        let client = &clients[call.client];
        let seen = lock(&client.seen)
            .get(&call.number)
            .cloned()
            .unwrap_or_default();
        let disconnected = *lock(&client.disconnected);
        if seen.responses.len() > 1 {
            log.violation(format!(
                "call {} was answered {} times",
                call.number,
                seen.responses.len()
            ));
        }
        if !seen.responses.is_empty() {
            report.answered += 1;
        }
        for (_, message) in &seen.responses {
            let text = message.to_string();
            for (other, other_token) in tokens.iter().enumerate() {
                if other != call.number && text.contains(other_token.as_str()) {
                    log.violation(format!(
                        "call {} of client {} got call {other}'s answer: {text}",
                        call.number, call.client
                    ));
                }
            }
        }
        let Some(sent) = seen.sent else {
            if !seen.responses.is_empty() {
                log.violation(format!("call {} was answered but never sent", call.number));
            }
            continue;
        };
        let limit = sent + plan.upstreams[call.upstream].call_timeout + SLACK;
        let gone_before = disconnected.is_some_and(|at| at <= limit);
        if call.act == Act::Wait && !gone_before {
            match seen.responses.first() {
                Some((at, _)) if *at <= limit => {}
                Some((at, _)) => log.violation(format!(
                    "call {} answered at {at:?}, past its bound {limit:?}",
                    call.number
                )),
                None => log.violation(format!(
                    "call {} was never answered (bound {limit:?})",
                    call.number
                )),
            }
        }
    }

    // 3: cancellations reach the upstream.
    check_cancelled(
        &received,
        |r| {
            let call = plan.calls.iter().find(|c| c.token() == r.token)?;
            let client = &clients[call.client];
            let seen = lock(&client.seen)
                .get(&call.number)
                .cloned()
                .unwrap_or_default();
            let disconnected = *lock(&client.disconnected);
            let mut due = r.at + plan.upstreams[call.upstream].call_timeout;
            for at in [seen.cancelled, disconnected].into_iter().flatten() {
                due = due.min(at.max(r.at));
            }
            Some(due)
        },
        log,
    );

    // 4: the audit log.
    let Some((count, mut by_token)) = crate::driver::audit_rows_by_call(
        store_path,
        |arguments| tokens.iter().position(|t| arguments.contains(t.as_str())),
        log,
    ) else {
        return;
    };
    report.audit_rows = count;
    let mut audit_trace = Vec::new();
    for call in &plan.calls {
        let token = call.token();
        let rows = by_token.remove(&call.number).unwrap_or_default();
        let reached = received.iter().any(|r| r.token == token);
        let seen = lock(&clients[call.client].seen)
            .get(&call.number)
            .cloned()
            .unwrap_or_default();
        let answer = seen
            .responses
            .first()
            .and_then(|(_, message)| expected_outcome(message, &token));
        audit_trace.push(format!(
            "call {}: {:?}",
            call.number,
            rows.iter()
                .map(|r| (r.outcome.as_str(), r.executed))
                .collect::<Vec<_>>()
        ));
        match rows.as_slice() {
            [] => {
                if reached || answer.is_some() {
                    log.violation(format!(
                        "call {} ({}) has no audit row",
                        call.number,
                        if reached {
                            "it reached its upstream"
                        } else {
                            "it was answered"
                        }
                    ));
                }
            }
            [row] => {
                if reached && !row.executed {
                    log.violation(format!(
                        "call {} reached its upstream, but its audit row says not executed",
                        call.number
                    ));
                }
                // Sent the moment its upstream dropped the connection: written, never read.
                let unread = seen.sent.is_some_and(|sent| {
                    received
                        .iter()
                        .any(|r| r.token != token && r.dropped == Some(sent))
                });
                // A call cut short while it was being sent is recorded as maybe executed
                // (the safe side); one answered as never sent must not be.
                if !reached && row.executed && !unread && answer.is_some() {
                    log.violation(format!(
                        "call {} never reached its upstream, but its audit row says executed \
                         ({:?})",
                        call.number, row.error
                    ));
                }
                if let Some(expected) = answer
                    && row.outcome != expected
                {
                    log.violation(format!(
                        "call {}: the client saw `{expected}`, the audit row says `{}` ({:?})",
                        call.number, row.outcome, row.error
                    ));
                }
                if answer.is_none() && reached && row.outcome != "failed" {
                    log.violation(format!(
                        "call {} was cut short, but its audit row says `{}`",
                        call.number, row.outcome
                    ));
                }
            }
            more => log.violation(format!(
                "call {} has {} audit rows: {more:?}",
                call.number,
                more.len()
            )),
        }
    }
    for line in audit_trace {
        log.event(line);
    }
}
