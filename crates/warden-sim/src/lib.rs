//! Deterministic simulation of Warden (issue 18; decisions 0031 and 0041), in five worlds:
//! the remote-connection state machine (this module), the gateway under many clients (over
//! its stdio and Streamable HTTP faces) and faulty upstreams ([`gateway`]), the agent
//! loop over the host ([`host`]) (the last two share the scripted upstreams of `upstream`),
//! Warden's real Streamable HTTP client against scripted remote servers answering in
//! memory ([`remote`]), and its OAuth client re-authorising against scripted remote and
//! authorization servers through the same transport ([`oauth`]).
//! What every world shares (the paused runtime, digests, the list of worlds, replay
//! hints) is in [`driver`]: a new world is added there.
//!
//! The connection world:
//!
//! One run is a pure function of its seed: every fault is drawn from a [`SeededRng`]
//! before anything starts, the whole world runs on one thread in a tokio runtime whose
//! clock is paused (time jumps to the next timer only when every task waits), and the
//! reconnect policy gets a recording [`Clock`] and a generator seeded from the run.
//!
//! What is real and what is scripted:
//! - real: Warden's retry loops and budget (`warden_mcp::http::reconnect::first_connect`,
//!   `reconnect`, `Health`), its back-off and jitter (`Backoff`, with `debug_assert!`s on
//!   the ceiling and the budget), and its rule for re-sending a request after a reconnect
//!   (`resend_after_reconnect`);
//! - scripted: the servers (each `open` and each call answers as the seed says: accept,
//!   stall, drop mid-response, answer twice, answer with a stale id, answer late,
//!   503/5xx/401/404), and a small client that correlates answers with calls by id the way
//!   a session does, and that follows the same steps as `HttpConnection::request`.
//!
//! Properties checked in every run (a violation names the seed):
//! 1. every call ends exactly once (answer, error or timeout), no later than its deadline;
//! 2. no call gets another call's answer, however the server misbehaves;
//! 3. a `tools/call` that may have run is never run a second time by a retry;
//! 4. the first connect tries at most `connect_attempts` times; one reconnect makes at most
//!    `attempts` tries; nothing is tried after a 401 or 404 in the same loop, nor at all
//!    once a server is marked failed, and a failed server fails calls at once;
//! 5. every back-off is within `[0, max_delay]` (and, by the policy's own assertion,
//!    within its attempt's ceiling);
//! 6. nothing leaks: every task ends, and at the end of a run no session is left open
//!    but each server's current one;
//! 7. the same seed gives the same trace (the run is replayed and the digests compared).
//!
//! The catalogue at turn boundaries, the audit log, cancellation, the gateway and the real
//! HTTP client are the other worlds'. Not simulated (decision 0041's revisions say why):
//! child processes, 2026-07-28 remote upstreams under the gateway, and OAuth's dynamic
//! registration.

pub mod driver;
pub mod gateway;
pub mod host;
mod http_face;
mod http_upstream;
pub mod oauth;
pub mod remote;
mod upstream;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::oneshot;
use tokio::time::Instant;
use warden_config::ReconnectSpec;
use warden_mcp::http::reconnect::{self, Backoff, Clock, Link, SeededRng, resend_after_reconnect};

/// How long a request waits for an answer before the transport gives up (a stall).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Scripted outcomes per server for `open` (cycled).
const OPEN_SCRIPT: usize = 32;

/// What one `open` of a server does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum OpenPlan {
    Accept,
    /// 5xx or a refused connection: worth another try.
    Transient(u16),
    /// Never answers: the transport's timeout ends it as a transient failure.
    Stall,
    /// 401 or 404: a configuration matter, never retried.
    Permanent(u16),
}

/// What the server does with one delivery of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Fault {
    Answer,
    AnswerTwice,
    /// An answer carrying another call's id arrives first.
    StaleId,
    /// The answer comes after the call's deadline.
    Late,
    /// No answer at all: the transport times out (transient, the call may have run).
    Stall,
    /// Runs the call, then the connection breaks before the answer.
    DropMidResponse,
    /// 503: not processed, so safe to send again.
    Unavailable,
    /// 500/502: processed or not, nobody knows.
    ServerError,
    Unauthorized,
}

#[derive(Debug, Clone)]
struct CallPlan {
    server: usize,
    method: &'static str,
    start: Duration,
    deadline: Duration,
    latency: Duration,
    /// The fault of the first delivery, and of the one after a reconnect.
    faults: [Fault; 2],
}

#[derive(Debug, Clone)]
struct Plan {
    spec: ReconnectSpec,
    connect_timeout: Duration,
    opens: Vec<Vec<(OpenPlan, Duration)>>,
    calls: Vec<CallPlan>,
    backoff_seeds: Vec<u64>,
}

pub(crate) fn pick<T: Copy>(rng: &mut SeededRng, items: &[(u64, T)]) -> T {
    let total: u64 = items.iter().map(|(w, _)| w).sum();
    let mut roll = rng.below(total);
    for &(weight, item) in items {
        if roll < weight {
            return item;
        }
        roll -= weight;
    }
    items[items.len() - 1].1
}

fn plan(seed: u64) -> Plan {
    let mut rng = SeededRng::new(seed);
    let spec = ReconnectSpec {
        connect_attempts: rng.below(4) as u32 + 1,
        attempts: rng.below(6) as u32,
        initial_delay: Duration::from_millis(10 + rng.below(990)),
        max_delay: Duration::from_millis(500 + rng.below(9500)),
    };
    let servers = 1 + rng.below(3) as usize;
    let healthy = rng.below(4) == 0;
    let opens = (0..servers)
        .map(|_| {
            (0..OPEN_SCRIPT)
                .map(|_| {
                    let open = if healthy {
                        OpenPlan::Accept
                    } else {
                        pick(
                            &mut rng,
                            &[
                                (10, OpenPlan::Accept),
                                (3, OpenPlan::Transient(503)),
                                (2, OpenPlan::Transient(502)),
                                (1, OpenPlan::Stall),
                                (1, OpenPlan::Permanent(401)),
                                (1, OpenPlan::Permanent(404)),
                            ],
                        )
                    };
                    (open, Duration::from_millis(rng.below(200)))
                })
                .collect()
        })
        .collect();
    let faults = [
        (8, Fault::Answer),
        (2, Fault::AnswerTwice),
        (2, Fault::StaleId),
        (1, Fault::Late),
        (1, Fault::Stall),
        (2, Fault::DropMidResponse),
        (2, Fault::Unavailable),
        (2, Fault::ServerError),
        (1, Fault::Unauthorized),
    ];
    let count = 1 + rng.below(12) as usize;
    let calls = (0..count)
        .map(|_| CallPlan {
            server: rng.below(servers as u64) as usize,
            method: if rng.below(3) == 0 {
                "tools/list"
            } else {
                "tools/call"
            },
            start: Duration::from_millis(rng.below(20_000)),
            deadline: Duration::from_millis(500 + rng.below(60_000)),
            latency: Duration::from_millis(rng.below(3_000)),
            faults: [pick(&mut rng, &faults), pick(&mut rng, &faults)],
        })
        .collect();
    let backoff_seeds = (0..count + servers).map(|_| rng.next_u64()).collect();
    Plan {
        spec,
        connect_timeout: Duration::from_millis(1_000 + rng.below(30_000)),
        opens,
        calls,
        backoff_seeds,
    }
}

/// What a run found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The seed.
    pub seed: u64,
    /// Calls made, and how they ended.
    pub calls: usize,
    /// Calls answered.
    pub answered: usize,
    /// Calls that ended in an error.
    pub errors: usize,
    /// Calls that hit their deadline.
    pub timeouts: usize,
    /// `open`s made (first connects and reconnects).
    pub opens: usize,
    /// Servers marked failed.
    pub failed_servers: usize,
    /// Answers dropped because no call was waiting for them (twice, stale, late).
    pub strays: usize,
    /// Property violations; empty when the run passed.
    pub violations: Vec<String>,
    /// A digest of the run's trace (the same seed must give the same digest).
    pub digest: u64,
}

/// Everything the world shares: the trace, the checks' findings.
#[derive(Default)]
pub(crate) struct Log {
    pub(crate) start: Mutex<Option<Instant>>,
    pub(crate) trace: Mutex<Vec<String>>,
    pub(crate) violations: Mutex<Vec<String>>,
    opens: AtomicUsize,
    strays: AtomicUsize,
    live_sessions: AtomicU64,
}

impl Log {
    pub(crate) fn now(&self) -> Duration {
        let start = self.start.lock().unwrap_or_else(PoisonError::into_inner);
        start.map_or(Duration::ZERO, |s| s.elapsed())
    }

    pub(crate) fn event(&self, text: String) {
        let at = self.now().as_millis();
        self.trace
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(format!("{at:>7}ms {text}"));
    }

    pub(crate) fn violation(&self, text: String) {
        self.event(format!("VIOLATION {text}"));
        self.violations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(text);
    }
}

/// The reconnect policy's clock: tokio's (paused) timer, each wait checked and traced.
#[derive(Debug)]
struct RecordingClock {
    server: usize,
    max_delay: Duration,
    log: Arc<LogHandle>,
}

/// `Log` behind a `Debug` impl, for the clock.
struct LogHandle(Arc<Log>);

impl std::fmt::Debug for LogHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Log")
    }
}

impl Clock for RecordingClock {
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        let log = &self.log.0;
        log.event(format!("server {} backs off {duration:?}", self.server));
        if duration > self.max_delay {
            log.violation(format!(
                "server {}: a back-off of {duration:?} is over max_delay {:?}",
                self.server, self.max_delay
            ));
        }
        Box::pin(tokio::time::sleep(duration))
    }
}

#[derive(Debug, Clone)]
struct SimError {
    transient: bool,
    /// It never reached the server (503, refused): safe to send again.
    undelivered: bool,
    text: String,
}

impl std::fmt::Display for SimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

type Answer = String;

/// One open session with a scripted server, correlating answers with calls by id.
struct Session {
    server: usize,
    generation: u64,
    next_id: AtomicU64,
    waiting: Mutex<HashMap<u64, oneshot::Sender<Answer>>>,
    log: Arc<Log>,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.log.live_sessions.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Session {
    /// Hands an answer to the call waiting on `id`; an answer nobody waits for (a second
    /// answer, a stale or unknown id, a late one) is dropped.
    fn deliver(&self, id: u64, answer: Answer) {
        let waiter = self
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        match waiter {
            Some(sender) => {
                let _ = sender.send(answer);
            }
            None => {
                self.log.strays.fetch_add(1, Ordering::SeqCst);
                self.log.event(format!(
                    "server {} gen {}: answer for id {id} dropped (nobody waits)",
                    self.server, self.generation
                ));
            }
        }
    }
}

struct Server {
    index: usize,
    opens: Vec<(OpenPlan, Duration)>,
    next_open: AtomicUsize,
    generation: AtomicU64,
    /// Runs of each `tools/call` by call number.
    runs: Mutex<HashMap<usize, u32>>,
    failed_seen: AtomicBool,
    log: Arc<Log>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Server {
    async fn open(self: &Arc<Self>) -> Result<Session, SimError> {
        let n = self.next_open.fetch_add(1, Ordering::SeqCst);
        self.log.opens.fetch_add(1, Ordering::SeqCst);
        let (plan, latency) = self.opens[n % self.opens.len()];
        self.log
            .event(format!("server {} open #{n}: {plan:?}", self.index));
        if plan == OpenPlan::Stall {
            tokio::time::sleep(REQUEST_TIMEOUT).await;
            return Err(SimError {
                transient: true,
                undelivered: false,
                text: format!("server {} open timed out", self.index),
            });
        }
        tokio::time::sleep(latency).await;
        match plan {
            OpenPlan::Accept => {
                let generation = self.generation.fetch_add(1, Ordering::SeqCst);
                self.log.live_sessions.fetch_add(1, Ordering::SeqCst);
                Ok(Session {
                    server: self.index,
                    generation,
                    next_id: AtomicU64::new(1),
                    waiting: Mutex::new(HashMap::new()),
                    log: self.log.clone(),
                })
            }
            OpenPlan::Transient(status) => Err(SimError {
                transient: true,
                undelivered: status == 503,
                text: format!("HTTP {status}"),
            }),
            OpenPlan::Permanent(status) => Err(SimError {
                transient: false,
                undelivered: true,
                text: format!("HTTP {status}"),
            }),
            OpenPlan::Stall => unreachable!("handled above"),
        }
    }

    /// Sends call `number` on `session` with `fault`; its answer is `answer-{number}`.
    async fn send(
        self: &Arc<Self>,
        session: &Arc<Session>,
        number: usize,
        call: &CallPlan,
        fault: Fault,
    ) -> Result<Answer, SimError> {
        let id = session.next_id.fetch_add(1, Ordering::SeqCst);
        let (sender, receiver) = oneshot::channel();
        session
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, sender);
        self.log.event(format!(
            "server {} gen {}: call {number} ({}) as id {id}: {fault:?}",
            self.index, session.generation, call.method
        ));
        let forget = |session: &Session| {
            session
                .waiting
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
        };
        let error = |transient, undelivered, text: &str| SimError {
            transient,
            undelivered,
            text: format!("server {}: {text}", self.index),
        };
        let runs = |server: &Server| {
            if call.method == "tools/call" {
                *server
                    .runs
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .entry(number)
                    .or_default() += 1;
            }
        };
        let answer = format!("answer-{number}");
        match fault {
            Fault::Unavailable => {
                forget(session);
                return Err(error(true, true, "HTTP 503"));
            }
            Fault::Unauthorized => {
                forget(session);
                return Err(error(false, true, "HTTP 401"));
            }
            Fault::ServerError => {
                runs(self);
                forget(session);
                return Err(error(true, false, "HTTP 500"));
            }
            Fault::DropMidResponse => {
                runs(self);
                tokio::time::sleep(call.latency / 2).await;
                forget(session);
                return Err(error(true, false, "connection reset mid-response"));
            }
            Fault::Stall => {
                runs(self);
            }
            Fault::Answer | Fault::AnswerTwice | Fault::StaleId | Fault::Late => {
                runs(self);
                let delay = if fault == Fault::Late {
                    call.deadline + Duration::from_millis(1)
                } else {
                    call.latency
                };
                let session = session.clone();
                let task = tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    if fault == Fault::StaleId {
                        // The id of an earlier request that was answered already, or one
                        // never sent (an id still waiting would be a server answering a
                        // live request wrongly, which no client can tell apart).
                        let earlier = id.saturating_sub(1);
                        let answered = earlier >= 1
                            && !session
                                .waiting
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .contains_key(&earlier);
                        let stale = if answered { earlier } else { id + 1_000_000 };
                        session.deliver(stale, format!("stale-for-{stale}"));
                    }
                    session.deliver(id, answer.clone());
                    if fault == Fault::AnswerTwice {
                        session.deliver(id, answer);
                    }
                });
                self.tasks
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(task);
            }
        }
        match tokio::time::timeout(REQUEST_TIMEOUT, receiver).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(_)) => Err(error(true, false, "answer channel closed")),
            Err(_) => {
                forget(session);
                Err(error(true, false, "no answer within the request timeout"))
            }
        }
    }
}

/// A connection to one scripted server, taking the steps `HttpConnection::request` takes.
struct Connection {
    server: Arc<Server>,
    spec: ReconnectSpec,
    link: Link<Session>,
    backoff: Backoff,
}

impl Connection {
    /// One `open` as the retry loops see it, with the per-loop checks.
    async fn checked_open(
        &self,
        tries: &AtomicU32,
        stopped: &AtomicBool,
        budget: u32,
        what: &str,
    ) -> Result<Session, SimError> {
        let log = &self.server.log;
        let n = tries.fetch_add(1, Ordering::SeqCst) + 1;
        if n > budget {
            log.violation(format!(
                "server {}: {what} try {n} over its budget of {budget}",
                self.server.index
            ));
        }
        if stopped.load(Ordering::SeqCst) {
            log.violation(format!(
                "server {}: {what} tried again after a 401/404",
                self.server.index
            ));
        }
        if self.link.health().failed.is_some() {
            log.violation(format!(
                "server {}: {what} tried after the server was marked failed",
                self.server.index
            ));
        }
        let opened = self.server.open().await;
        if let Err(error) = &opened
            && !error.transient
        {
            stopped.store(true, Ordering::SeqCst);
        }
        opened
    }

    async fn request(&self, number: usize, call: &CallPlan) -> Result<Answer, SimError> {
        if let Some(reason) = self.link.health().failed {
            return Err(SimError {
                transient: false,
                undelivered: true,
                text: reason,
            });
        }
        let session = self.link.current();
        let error = match self
            .server
            .send(&session, number, call, call.faults[0])
            .await
        {
            Ok(answer) => return Ok(answer),
            Err(error) if error.transient => error,
            Err(error) => return Err(error),
        };
        let tries = AtomicU32::new(0);
        let stopped = AtomicBool::new(false);
        let opened = self
            .link
            .reconnect(
                "sim",
                &self.spec,
                &self.backoff,
                &session,
                error.to_string(),
                || self.checked_open(&tries, &stopped, self.spec.attempts, "reconnect"),
                |e: &SimError| e.transient,
            )
            .await;
        let fresh = match opened {
            Ok(fresh) => fresh,
            Err(reason) => {
                if !self.server.failed_seen.swap(true, Ordering::SeqCst) {
                    self.server
                        .log
                        .event(format!("server {} marked failed", self.server.index));
                }
                return Err(SimError {
                    transient: false,
                    undelivered: false,
                    text: reason,
                });
            }
        };
        if resend_after_reconnect(call.method, error.undelivered) {
            self.server.send(&fresh, number, call, call.faults[1]).await
        } else {
            Err(SimError {
                transient: false,
                undelivered: false,
                text: format!("{error}; reconnected, but the call was not repeated"),
            })
        }
    }
}

/// Runs one seed and checks every property; the report's `violations` say what failed.
pub fn run(seed: u64) -> Report {
    let first = run_once(seed);
    let second = run_once(seed);
    let mut report = first;
    driver::same_digest(
        "connection",
        seed,
        report.digest,
        second.digest,
        &mut report.violations,
    );
    report
}

/// The trace of one seed, for replaying a failure.
pub fn trace(seed: u64) -> Vec<String> {
    let log = Arc::new(Log::default());
    let _ = simulate(seed, log.clone());
    let trace = log.trace.lock().unwrap_or_else(PoisonError::into_inner);
    trace.clone()
}

fn run_once(seed: u64) -> Report {
    let log = Arc::new(Log::default());
    let mut report = simulate(seed, log.clone());
    let trace = log.trace.lock().unwrap_or_else(PoisonError::into_inner);
    report.digest = driver::digest(&trace);
    report
}

fn simulate(seed: u64, log: Arc<Log>) -> Report {
    let plan = plan(seed);
    let mut report = driver::execute(&log, world(seed, plan, log.clone())).unwrap_or(Report {
        seed,
        ..Report::default()
    });
    report.violations = log
        .violations
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    report
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Answered(String),
    Error(String),
    TimedOut,
}

async fn world(seed: u64, plan: Plan, log: Arc<Log>) -> Report {
    *log.start.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
    let spec = plan.spec;
    log.event(format!(
        "seed {seed}: {spec:?}, {} call(s)",
        plan.calls.len()
    ));
    let servers: Vec<Arc<Server>> = plan
        .opens
        .iter()
        .enumerate()
        .map(|(index, opens)| {
            Arc::new(Server {
                index,
                opens: opens.clone(),
                next_open: AtomicUsize::new(0),
                generation: AtomicU64::new(0),
                runs: Mutex::new(HashMap::new()),
                failed_seen: AtomicBool::new(false),
                log: log.clone(),
                tasks: Mutex::new(Vec::new()),
            })
        })
        .collect();
    let backoff_for = |server: usize, k: usize| {
        Backoff::new(
            Arc::new(RecordingClock {
                server,
                max_delay: spec.max_delay,
                log: Arc::new(LogHandle(log.clone())),
            }),
            SeededRng::new(plan.backoff_seeds[k]),
        )
    };

    // First connects, all at once; one failing must not hold up the others.
    let mut connects = Vec::new();
    for server in &servers {
        let server = server.clone();
        let backoff = backoff_for(server.index, plan.calls.len() + server.index);
        let log = log.clone();
        let timeout = plan.connect_timeout;
        connects.push(tokio::spawn(async move {
            let tries = AtomicU32::new(0);
            let budget = spec.connect_attempts.max(1);
            let probe = Connection {
                server: server.clone(),
                spec,
                link: Link::new(placeholder(&server)),
                backoff: backoff.clone(),
            };
            let stopped = AtomicBool::new(false);
            let started = Instant::now();
            let connected = tokio::time::timeout(
                timeout,
                reconnect::first_connect(
                    "sim",
                    &spec,
                    &backoff,
                    || probe.checked_open(&tries, &stopped, budget, "first connect"),
                    |e: &SimError| e.transient,
                ),
            )
            .await;
            if started.elapsed() > timeout {
                log.violation(format!(
                    "server {}: first connect took {:?}, over its timeout {timeout:?}",
                    server.index,
                    started.elapsed()
                ));
            }
            drop(probe);
            match connected {
                Ok((Ok(session), tries)) => {
                    log.event(format!(
                        "server {} connected after {tries} try(s)",
                        server.index
                    ));
                    Some(Arc::new(Connection {
                        server,
                        spec,
                        link: Link::new(session),
                        backoff,
                    }))
                }
                Ok((Err(error), tries)) => {
                    log.event(format!(
                        "server {} not connected after {tries} try(s): {error}",
                        server.index
                    ));
                    None
                }
                Err(_) => {
                    log.event(format!("server {} connect timed out", server.index));
                    None
                }
            }
        }));
    }
    let mut connections = Vec::new();
    for connect in connects {
        connections.push(connect.await.ok().flatten());
    }

    // Calls, each at its time, each under its deadline.
    let outcomes: Arc<Mutex<Vec<Vec<Outcome>>>> =
        Arc::new(Mutex::new(vec![Vec::new(); plan.calls.len()]));
    let mut calls = Vec::new();
    for (number, call) in plan.calls.iter().cloned().enumerate() {
        let connection = connections[call.server].clone();
        let outcomes = outcomes.clone();
        let log = log.clone();
        calls.push(tokio::spawn(async move {
            tokio::time::sleep(call.start).await;
            let started = Instant::now();
            let outcome = match &connection {
                None => Outcome::Error("server not connected".into()),
                Some(connection) => {
                    if let Some(reason) = connection.link.health().failed {
                        // A failed server must answer at once, without trying.
                        let before = connection.server.next_open.load(Ordering::SeqCst);
                        let result = connection.request(number, &call).await;
                        let after = connection.server.next_open.load(Ordering::SeqCst);
                        if result.is_ok() || after != before {
                            log.violation(format!(
                                "call {number}: server {} was failed ({reason}) but was tried",
                                call.server
                            ));
                        }
                    }
                    match tokio::time::timeout(call.deadline, connection.request(number, &call))
                        .await
                    {
                        Ok(Ok(answer)) => Outcome::Answered(answer),
                        Ok(Err(error)) => Outcome::Error(error.text),
                        Err(_) => Outcome::TimedOut,
                    }
                }
            };
            let took = started.elapsed();
            if took > call.deadline {
                log.violation(format!(
                    "call {number} ended after {took:?}, past its deadline {:?}",
                    call.deadline
                ));
            }
            if let Outcome::Answered(answer) = &outcome
                && *answer != format!("answer-{number}")
            {
                log.violation(format!("call {number} got another call's answer: {answer}"));
            }
            log.event(format!("call {number} ended: {outcome:?}"));
            outcomes.lock().unwrap_or_else(PoisonError::into_inner)[number].push(outcome);
        }));
    }
    for call in calls {
        if call.await.is_err() {
            log.violation("a call task panicked".into());
        }
    }
    // Late answers and second answers still in flight: let them land (and be dropped).
    for server in &servers {
        let tasks: Vec<_> =
            std::mem::take(&mut *server.tasks.lock().unwrap_or_else(PoisonError::into_inner));
        for task in tasks {
            if task.await.is_err() {
                log.violation("a server task panicked".into());
            }
        }
    }

    let outcomes = outcomes
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let mut report = Report {
        seed,
        calls: outcomes.len(),
        opens: log.opens.load(Ordering::SeqCst),
        strays: log.strays.load(Ordering::SeqCst),
        ..Report::default()
    };
    for (number, ends) in outcomes.iter().enumerate() {
        match ends.as_slice() {
            [Outcome::Answered(_)] => report.answered += 1,
            [Outcome::Error(_)] => report.errors += 1,
            [Outcome::TimedOut] => report.timeouts += 1,
            other => log.violation(format!(
                "call {number} ended {} times: {other:?}",
                other.len()
            )),
        }
    }
    for server in &servers {
        let runs = server.runs.lock().unwrap_or_else(PoisonError::into_inner);
        for (number, count) in runs.iter() {
            if *count > 1 {
                log.violation(format!(
                    "tools/call {number} ran {count} times on server {}",
                    server.index
                ));
            }
        }
        if server.failed_seen.load(Ordering::SeqCst) {
            report.failed_servers += 1;
        }
    }
    let open_sessions = connections.iter().flatten().count() as u64;
    let live = log.live_sessions.load(Ordering::SeqCst);
    if live > open_sessions {
        log.violation(format!(
            "{live} sessions alive at the end, but only {open_sessions} connection(s) hold one"
        ));
    }
    drop(connections);
    let live = log.live_sessions.load(Ordering::SeqCst);
    if live != 0 {
        log.violation(format!(
            "{live} session(s) leaked after every connection closed"
        ));
    }
    let mut summary = String::new();
    let _ = write!(
        summary,
        "end: {} answered, {} errors, {} timeouts, {} opens, {} strays",
        report.answered, report.errors, report.timeouts, report.opens, report.strays
    );
    log.event(summary);
    report
}

/// A session no call uses, for the connection the first connect's checks run on.
fn placeholder(server: &Arc<Server>) -> Session {
    server.log.live_sessions.fetch_add(1, Ordering::SeqCst);
    Session {
        server: server.index,
        generation: u64::MAX,
        next_id: AtomicU64::new(1),
        waiting: Mutex::new(HashMap::new()),
        log: server.log.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many seeds the test run checks: `WARDEN_SIM_SEEDS` (scripts/test sets 500), or
    /// 100 for a quick `cargo test -p warden-sim`. The CI's seeds run here, inside the
    /// workspace's one test build: `cargo run -p warden-sim` alone would resolve other
    /// features of the shared dependencies and compile most of them a second time.
    fn seed_count() -> u64 {
        std::env::var("WARDEN_SIM_SEEDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(100)
    }

    /// Every world of `driver::WORLDS`, each seed with every check, the worlds side by
    /// side (each on a thread of its own, each run on a runtime of its own); each world
    /// checks its share of the seed count (`World::ci_share`).
    #[test]
    fn every_seed_keeps_every_property() {
        let count = seed_count();
        std::thread::scope(|scope| {
            let runs: Vec<_> = driver::WORLDS
                .iter()
                .map(|world| {
                    scope.spawn(move || {
                        for seed in 0..count * world.ci_share / 100 {
                            let summary = (world.run)(seed);
                            assert!(
                                summary.violations.is_empty(),
                                "{} seed {seed} (replay: {}): {:?}",
                                world.name,
                                driver::replay(world.name, seed, &summary.violations),
                                summary.violations
                            );
                        }
                    })
                })
                .collect();
            for run in runs {
                if let Err(panic) = run.join() {
                    std::panic::resume_unwind(panic);
                }
            }
        });
    }

    #[test]
    fn the_host_faults_are_exercised() {
        let reports: Vec<host::Report> = (0..60).map(host::run).collect();
        let total = |f: fn(&host::Report) -> usize| reports.iter().map(f).sum::<usize>();
        assert!(total(|r| r.received) > 0, "no call reached an upstream");
        assert!(total(|r| r.asked) > 0, "no call was asked about");
        assert!(total(|r| r.timed_out) > 0, "no turn ran out");
        assert!(
            total(|r| r.background) > 0,
            "no call went to the background"
        );
        assert!(
            total(|r| r.cancellations) > 0,
            "no cancellation reached an upstream"
        );
        assert!(
            total(|r| r.catalogue_changes) > 0,
            "the catalogue never changed between steps"
        );
        assert!(
            total(|r| r.compared) > 0,
            "no decision compared across timings"
        );
        assert!(total(|r| r.audit_rows) > 0, "no audit row");
    }

    /// The seeds that found the bugs the host world found, kept (decision 0041): each
    /// failed before its fix. 98: a call to a server already gone was audited as executed
    /// (warden-mcp `NotSent`); 104: a refresh dropped mid-read lost the change (warden-host
    /// `Lists::unread`); 77: a decision's reasons named sources in the order servers
    /// answered (warden-agent, results in call order); 91: a call its turn left behind ran
    /// on, never cancelled (warden-agent `CallTask`).
    #[test]
    fn the_host_seeds_that_found_bugs_keep_every_property() {
        for seed in [77, 91, 98, 104] {
            let report = host::run(seed);
            assert!(
                report.violations.is_empty(),
                "host seed {seed}: {:?}",
                report.violations
            );
        }
    }

    #[test]
    fn the_gateway_faults_are_exercised() {
        let reports: Vec<gateway::Report> = (0..60).map(gateway::run).collect();
        let total = |f: fn(&gateway::Report) -> usize| reports.iter().map(f).sum::<usize>();
        assert!(total(|r| r.received) > 0, "no call reached an upstream");
        assert!(
            total(|r| r.cancellations) > 0,
            "no cancellation reached an upstream"
        );
        assert!(total(|r| r.list_changes) > 0, "no list_changed");
        assert!(total(|r| r.audit_rows) > 0, "no audit row");
        assert!(total(|r| r.dropped) > 0, "no connection dropped mid-call");
        assert!(total(|r| r.http_sessions) > 0, "no 2025-11-25 HTTP client");
        assert!(total(|r| r.http_stateless) > 0, "no 2026-07-28 HTTP client");
        assert!(
            total(|r| r.unknown_sessions) > 0,
            "no request named an unknown session"
        );
        assert!(total(|r| r.remote_upstreams) > 0, "no remote upstream");
        assert!(
            total(|r| r.remote_expired) > 0,
            "no remote upstream's session expired"
        );
    }

    /// The gateway seeds whose HTTP clients found that closing a 2026-07-28 call's stream
    /// was heard only at the next keep-alive (decision 0041's revision): each failed before
    /// the fix (the call ran on, was audited `ok`, its cancellation late or never sent).
    /// And those whose remote upstreams found (revision 3) that a call a gateway client
    /// cancelled was never cancelled on the remote server (36, 53), and that a call the
    /// remote server would not take (503, 404 twice) was audited as executed (5, 37), and
    /// that a cancellation after a reconnect named its id on the new session, where it is
    /// another request (263, 340), and that a request went out without a session while
    /// another initialised the expired one again (9999).
    #[test]
    fn the_gateway_seeds_that_found_bugs_keep_every_property() {
        for seed in [4, 5, 10, 13, 15, 18, 36, 37, 53, 263, 340, 9999] {
            let report = gateway::run(seed);
            assert!(
                report.violations.is_empty(),
                "gateway seed {seed}: {:?}",
                report.violations
            );
        }
    }

    #[test]
    fn the_remote_faults_are_exercised() {
        let reports: Vec<remote::Report> = (0..60).map(remote::run).collect();
        let total = |f: fn(&remote::Report) -> usize| reports.iter().map(f).sum::<usize>();
        assert!(total(|r| r.answered) > 0, "no call answered");
        assert!(total(|r| r.timeouts) > 0, "no call timed out");
        assert!(total(|r| r.expired) > 0, "no session expired");
        assert!(total(|r| r.resumed) > 0, "no stream resumed");
        assert!(total(|r| r.unauthorized) > 0, "no call refused 401");
        assert!(total(|r| r.cancellations) > 0, "no cancellation upstream");
        assert!(total(|r| r.waits) > 0, "no back-off");
        assert!(total(|r| r.audit_rows) > 0, "no call through a host");
    }

    /// The remote seeds that found bugs (decision 0041, revision 2), each failing before
    /// its fix: 2 and 28, a call returned 2 s past its deadline while its cancellation was
    /// accepted; 178, a refused `server/discover` sent again at once beyond
    /// `connect_attempts`; 184 and 195, a 404 to a stream's resumption taken for an
    /// expired session, the `tools/call` sent again.
    #[test]
    fn the_remote_seeds_that_found_bugs_keep_every_property() {
        for seed in [2, 28, 178, 184, 195] {
            let report = remote::run(seed);
            assert!(
                report.violations.is_empty(),
                "remote seed {seed}: {:?}",
                report.violations
            );
        }
    }

    #[test]
    fn the_oauth_faults_are_exercised() {
        let reports: Vec<oauth::Report> = (0..60).map(oauth::run).collect();
        let total = |f: fn(&oauth::Report) -> usize| reports.iter().map(f).sum::<usize>();
        assert!(total(|r| r.answered) > 0, "no call answered");
        assert!(total(|r| r.refreshes) > 0, "no refresh");
        assert!(total(|r| r.sign_ins) > 0, "no sign-in");
        assert!(total(|r| r.step_ups) > 0, "no step-up");
        assert!(
            total(|r| r.unauthorized) > 0,
            "no call failed for want of authorization"
        );
        assert!(total(|r| r.timeouts) > 0, "no call timed out");
        assert!(total(|r| r.audit_rows) > 0, "no audit row");
    }

    /// The OAuth seeds that found bugs (decision 0041, revision 3), each failing with its
    /// fix undone: 1 and 12, a refresh that met a 503 or no answer dropped the refresh
    /// token (and asked for a sign-in); 4 and 23, a refresh giving back the token the
    /// server had just refused, the call sent again with it; 12, 14 and 17, a refresh at
    /// once after one that failed without a refusal (no pause); 14 and 97, a call's
    /// deadline cut a refresh short after the authorization server had rotated the token.
    #[test]
    fn the_oauth_seeds_that_found_bugs_keep_every_property() {
        for seed in [1, 4, 12, 14, 17, 23, 97] {
            let report = oauth::run(seed);
            assert!(
                report.violations.is_empty(),
                "oauth seed {seed}: {:?}",
                report.violations
            );
        }
    }

    #[test]
    fn the_faults_are_exercised() {
        let reports: Vec<Report> = (0..100).map(run).collect();
        assert!(reports.iter().any(|r| r.strays > 0), "no stray answer");
        assert!(reports.iter().any(|r| r.timeouts > 0), "no timeout");
        assert!(
            reports.iter().any(|r| r.failed_servers > 0),
            "no failed server"
        );
        assert!(reports.iter().any(|r| r.answered > 0), "no answer");
    }
}
