//! The scripted upstream MCP servers both the gateway world and the host world use, and
//! how the host reaches them: through its relay seam ([`RelayDialer`]), as in-memory pipes
//! to a task that speaks MCP's stdio framing, so the real stdio client (rmcp, through
//! [`warden_mcp::connect_pipes`]) runs against them and no process is started.
//!
//! An upstream answers `initialize`, `tools/list` (a list that changes with each
//! `list_changed` it announces, in an order that changes too) and `tools/call`, each call
//! as the script of its token says ([`UpFault`]); it records what it received, answered,
//! and had cancelled, and every list it served, for the properties to be checked against.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use warden_config::{
    EraPreference, Format, Lifecycle, Origin, RelayChannel, Scope, ServerSpec, StartMode, Timeouts,
    TransportSpec,
};
use warden_mcp::{ConnectFailure, ConnectOptions, Connection, Pipes, RelayDialer};

use crate::Log;

/// What an upstream does with one call.
/// How soon a cancellation must reach the upstream once it is due.
pub const CANCEL_BOUND: Duration = Duration::from_secs(1);
/// Bytes of an in-memory pipe.
pub(crate) const PIPE: usize = 1 << 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum UpFault {
    Answer,
    ToolError,
    RpcError,
    /// The answer comes after the call timeout.
    Late,
    /// No answer at all.
    Stall,
    /// The answer, then the same id again with other text.
    AnswerTwice,
    /// First an answer under an id that is not waiting (answered already, or never sent).
    StaleId,
    /// The connection breaks before the answer.
    Drop,
    /// `tools/list_changed` (with a changed list) just before the answer.
    ListChangedFirst,
}

/// What the upstream does with the call that carries token `number`.
#[derive(Debug, Clone)]
pub(crate) struct Script {
    pub(crate) number: usize,
    pub(crate) fault: UpFault,
    pub(crate) latency: Duration,
}

impl Script {
    pub(crate) fn token(&self) -> String {
        token(self.number)
    }
}

/// The text every call carries as its `text` argument and its upstream echoes back: no
/// token is a prefix of another.
pub(crate) fn token(number: usize) -> String {
    format!("tok-{number}-end")
}

#[derive(Debug, Clone)]
pub(crate) struct UpPlan {
    pub(crate) call_timeout: Duration,
    /// Reached over Streamable HTTP (a 2025-11-25 session through `http_upstream`'s
    /// front), not as a stdio server through the relay seam.
    pub(crate) remote: bool,
    pub(crate) honours_cancel: bool,
    /// When it announces `list_changed` unprompted, and how many times in a row.
    pub(crate) storms: Vec<(Duration, u32)>,
}

/// One call as its upstream saw it.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub(crate) token: String,
    pub(crate) generation: u64,
    pub(crate) id: String,
    pub(crate) at: Duration,
    pub(crate) answered: Option<Duration>,
    pub(crate) cancelled: Option<Duration>,
    pub(crate) dropped: Option<Duration>,
    /// When the host closed the connection with the call still unanswered and not
    /// cancelled (a request pending when its connection closes is cancelled by the close).
    pub(crate) closed: Option<Duration>,
}

/// One tool list an upstream served.
#[derive(Debug, Clone)]
pub(crate) struct Served {
    pub(crate) at: Duration,
    pub(crate) names: Vec<String>,
    generation: u64,
    id: String,
    /// The request was cancelled (its reader went away): the list may never have been read.
    pub(crate) cancelled: bool,
}

/// A scripted upstream server: its plan, and what it saw over all its connections.
pub(crate) struct Upstream {
    pub(crate) index: usize,
    pub(crate) plan: UpPlan,
    pub(crate) calls: HashMap<String, Script>,
    pub(crate) log: Arc<Log>,
    pub(crate) generations: AtomicU64,
    pub(crate) version: AtomicU64,
    pub(crate) list_changes: AtomicUsize,
    pub(crate) received: Mutex<Vec<Received>>,
    pub(crate) tasks: Mutex<Vec<JoinHandle<()>>>,
    /// Every tool list it served: when, and the names in order.
    pub(crate) lists: Mutex<Vec<Served>>,
    /// When it announced `list_changed`.
    pub(crate) announced: Mutex<Vec<Duration>>,
}

pub(crate) enum Out {
    Line(String),
    Close,
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn id_key(id: &Value) -> String {
    id.to_string()
}

impl Upstream {
    pub(crate) fn name(&self) -> String {
        format!("up{}", self.index)
    }

    pub(crate) fn new(
        index: usize,
        plan: UpPlan,
        calls: HashMap<String, Script>,
        log: Arc<Log>,
    ) -> Upstream {
        Upstream {
            index,
            plan,
            calls,
            log,
            generations: AtomicU64::new(0),
            version: AtomicU64::new(0),
            list_changes: AtomicUsize::new(0),
            received: Mutex::new(Vec::new()),
            tasks: Mutex::new(Vec::new()),
            lists: Mutex::new(Vec::new()),
            announced: Mutex::new(Vec::new()),
        }
    }

    /// The tool names of list version `version`: `echo` always, and a changing set beside
    /// it, in an order that changes too (odd versions list theirs backwards).
    pub(crate) fn tool_names(version: u64) -> Vec<String> {
        let mut names = vec!["echo".to_owned()];
        for n in 0..version % 3 {
            names.push(format!("aux{n}"));
        }
        if version % 2 == 1 {
            names.reverse();
        }
        names
    }

    pub(crate) fn spawn(&self, task: JoinHandle<()>) {
        lock(&self.tasks).push(task);
    }

    fn mark(&self, generation: u64, id: &str, what: impl Fn(&mut Received)) {
        let mut received = lock(&self.received);
        if let Some(entry) = received
            .iter_mut()
            .find(|r| r.generation == generation && r.id == id)
        {
            what(entry);
        }
    }

    /// Serves one connection: reads the client's lines from `input`, answers on `output`.
    pub(crate) async fn serve(
        self: Arc<Self>,
        generation: u64,
        start: Instant,
        input: DuplexStream,
        output: DuplexStream,
    ) {
        let (out, mut queue) = mpsc::unbounded_channel::<Out>();
        let closed = Arc::new(tokio::sync::Notify::new());
        let writer = {
            let closed = Arc::clone(&closed);
            tokio::spawn(async move {
                let mut output = output;
                while let Some(message) = queue.recv().await {
                    match message {
                        Out::Line(mut line) => {
                            line.push('\n');
                            if output.write_all(line.as_bytes()).await.is_err() {
                                break;
                            }
                        }
                        Out::Close => break,
                    }
                }
                closed.notify_one();
            })
        };
        self.spawn(writer);
        // Unprompted list changes at their planned times.
        for &(at, times) in &self.plan.storms {
            let this = Arc::clone(&self);
            let out = out.clone();
            self.spawn(tokio::spawn(async move {
                tokio::time::sleep_until(start + at).await;
                this.announce(generation, &out, times);
            }));
        }
        let pending: Arc<Mutex<HashMap<String, tokio::task::AbortHandle>>> = Arc::default();
        let last_answered: Arc<Mutex<Option<Value>>> = Arc::default();
        let mut lines = BufReader::new(input).lines();
        loop {
            let line = tokio::select! {
                biased;
                () = closed.notified() => break,
                line = lines.next_line() => match line {
                    Ok(Some(line)) => line,
                    _ => break,
                },
            };
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let method = message.get("method").and_then(Value::as_str).unwrap_or("");
            let id = message.get("id").cloned();
            let params = message.get("params").cloned().unwrap_or(Value::Null);
            match (method, id) {
                ("initialize", Some(id)) => {
                    let result = json!({
                        "protocolVersion": "2025-11-25",
                        "capabilities": {"tools": {"listChanged": true}},
                        "serverInfo": {"name": self.name(), "version": "1"},
                    });
                    let _ = out.send(Out::Line(response(&id, result)));
                }
                ("tools/list", Some(id)) => {
                    let version = self.version.load(Ordering::SeqCst);
                    let names = Upstream::tool_names(version);
                    let tools: Vec<Value> = names.iter().map(|name| tool(name)).collect();
                    self.log.event(format!(
                        "{}#{generation} lists {}",
                        self.name(),
                        names.join(",")
                    ));
                    lock(&self.lists).push(Served {
                        at: start.elapsed(),
                        names,
                        generation,
                        id: id_key(&id),
                        cancelled: false,
                    });
                    let result = json!({"tools": tools});
                    let _ = out.send(Out::Line(response(&id, result)));
                }
                ("ping", Some(id)) => {
                    let _ = out.send(Out::Line(response(&id, json!({}))));
                }
                ("tools/call", Some(id)) => {
                    let token = params
                        .get("arguments")
                        .and_then(|a| a.get("text"))
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned();
                    let Some(call) = self.calls.get(&token).cloned() else {
                        self.log.violation(format!(
                            "{}: a call nobody made reached it: {line}",
                            self.name()
                        ));
                        continue;
                    };
                    let key = id_key(&id);
                    let now = start.elapsed();
                    self.log.event(format!(
                        "{}#{generation} got {token} as id {key}: {:?}",
                        self.name(),
                        call.fault
                    ));
                    lock(&self.received).push(Received {
                        token: token.clone(),
                        generation,
                        id: key.clone(),
                        at: now,
                        answered: None,
                        cancelled: None,
                        dropped: None,
                        closed: None,
                    });
                    let this = Arc::clone(&self);
                    let out = out.clone();
                    let pending_for_task = Arc::clone(&pending);
                    let last = Arc::clone(&last_answered);
                    let task_key = key.clone();
                    let task = tokio::spawn(async move {
                        this.answer(generation, start, &out, &id, &call, &last)
                            .await;
                        lock(&pending_for_task).remove(&task_key);
                    });
                    lock(&pending).insert(key, task.abort_handle());
                    self.spawn(task);
                }
                ("notifications/cancelled", None) => {
                    let Some(id) = params.get("requestId") else {
                        continue;
                    };
                    let key = id_key(id);
                    let now = start.elapsed();
                    self.log.event(format!(
                        "{}#{generation} got a cancellation of id {key}",
                        self.name()
                    ));
                    self.mark(generation, &key, |r| {
                        r.cancelled.get_or_insert(now);
                    });
                    for served in lock(&self.lists)
                        .iter_mut()
                        .filter(|s| s.generation == generation && s.id == key)
                    {
                        served.cancelled = true;
                    }
                    if self.plan.honours_cancel
                        && let Some(task) = lock(&pending).remove(&key)
                    {
                        task.abort();
                    }
                }
                _ => {}
            }
        }
        // Closed by the client (its stdin ended) or by a drop: what is pending never ends.
        for (_, task) in lock(&pending).drain() {
            task.abort();
        }
        let now = start.elapsed();
        for r in lock(&self.received).iter_mut().filter(|r| {
            r.generation == generation
                && r.answered.is_none()
                && r.cancelled.is_none()
                && r.dropped.is_none()
        }) {
            r.closed = Some(now);
        }
        let _ = out.send(Out::Close);
        self.log
            .event(format!("{}#{generation} connection ends", self.name()));
    }

    fn announce(&self, generation: u64, out: &mpsc::UnboundedSender<Out>, times: u32) {
        for _ in 0..times {
            let version = self.version.fetch_add(1, Ordering::SeqCst) + 1;
            let note = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
            if out.send(Out::Line(note.to_string())).is_err() {
                return;
            }
            self.list_changes.fetch_add(1, Ordering::SeqCst);
            lock(&self.announced).push(self.log.now());
            self.log.event(format!(
                "{}#{generation} list_changed (version {version})",
                self.name()
            ));
        }
    }

    async fn answer(
        &self,
        generation: u64,
        start: Instant,
        out: &mpsc::UnboundedSender<Out>,
        id: &Value,
        call: &Script,
        last: &Mutex<Option<Value>>,
    ) {
        let key = id_key(id);
        if call.fault == UpFault::Stall {
            return;
        }
        tokio::time::sleep(call.latency).await;
        let token = call.token();
        let text = |text: &str| json!({"content": [{"type": "text", "text": text}]});
        let message = match call.fault {
            UpFault::Drop => {
                let now = start.elapsed();
                self.log.event(format!(
                    "{}#{generation} drops the connection during {token}",
                    self.name()
                ));
                {
                    let mut received = lock(&self.received);
                    for r in received
                        .iter_mut()
                        .filter(|r| r.generation == generation && r.answered.is_none())
                    {
                        r.dropped.get_or_insert(now);
                    }
                }
                let _ = out.send(Out::Close);
                return;
            }
            UpFault::RpcError => json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32000, "message": "the sim upstream failed this call"}})
            .to_string(),
            UpFault::ToolError => {
                let mut result = text(&token);
                result["isError"] = Value::Bool(true);
                response(id, result)
            }
            _ => response(id, text(&token)),
        };
        if call.fault == UpFault::StaleId {
            let stale = lock(last)
                .clone()
                .unwrap_or_else(|| json!(1_000_000 + call.number));
            let _ = out.send(Out::Line(response(&stale, text("stale-answer"))));
        }
        if call.fault == UpFault::ListChangedFirst {
            self.announce(generation, out, 1);
        }
        let now = start.elapsed();
        self.mark(generation, &key, |r| {
            r.answered.get_or_insert(now);
        });
        self.log.event(format!(
            "{}#{generation} answers id {key} ({token})",
            self.name()
        ));
        let _ = out.send(Out::Line(message));
        if call.fault == UpFault::AnswerTwice {
            let _ = out.send(Out::Line(response(id, text(&format!("{token}-again")))));
        }
        *lock(last) = Some(id.clone());
    }
}

pub(crate) fn tool(name: &str) -> Value {
    json!({"name": name, "description": format!("Returns its token ({name})."),
           "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}})
}

pub(crate) fn response(id: &Value, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

/// Dials the scripted upstreams for the host, as in-memory pipes.
pub(crate) struct Dialer {
    pub(crate) upstreams: Vec<Arc<Upstream>>,
    pub(crate) start: Instant,
}

impl RelayDialer for Dialer {
    fn connect<'a>(
        &'a self,
        spec: &'a ServerSpec,
        options: &'a ConnectOptions,
    ) -> BoxFuture<'a, Result<Box<dyn Connection>, ConnectFailure>> {
        Box::pin(async move {
            let upstream = self
                .upstreams
                .iter()
                .find(|u| u.name() == spec.name)
                .cloned();
            let Some(upstream) = upstream else {
                return Err(ConnectFailure {
                    error: warden_mcp::ConnectError::Remote {
                        reason: format!("no upstream {}", spec.name),
                    },
                    stderr_tail: Vec::new(),
                });
            };
            let generation = upstream.generations.fetch_add(1, Ordering::SeqCst);
            upstream
                .log
                .event(format!("{} dialled (#{generation})", spec.name));
            let (to_server, server_in) = tokio::io::duplex(PIPE);
            let (server_out, from_server) = tokio::io::duplex(PIPE);
            let task = tokio::spawn(
                Arc::clone(&upstream).serve(generation, self.start, server_in, server_out),
            );
            upstream.spawn(task);
            let pipes = Pipes {
                program: PathBuf::from(format!("/sim/{}", spec.name)),
                stdin: Box::new(to_server),
                stdout: Box::new(from_server),
                stderr: Box::new(tokio::io::empty()),
                group: None,
            };
            warden_mcp::connect_pipes(spec, pipes, options)
                .await
                .map_err(|failure| failure.failure)
        })
    }
}

pub(crate) fn spec(name: &str, call_timeout: Duration) -> ServerSpec {
    ServerSpec {
        name: name.into(),
        transport: TransportSpec::Relay {
            relay: "sim".into(),
            channel: RelayChannel {
                command: vec!["/sim/relay".into()],
                secrets: BTreeMap::new(),
                reconnect: Default::default(),
            },
        },
        timeouts: Timeouts {
            connect: Duration::from_secs(10),
            call: call_timeout,
        },
        era: EraPreference::Legacy,
        max_message_bytes: 1 << 20,
        origin: Origin {
            scope: Scope::Explicit,
            format: Format::WardenToml,
            path: PathBuf::from("/sim/warden.toml"),
        },
        sandbox: Default::default(),
        env_references: Vec::new(),
        lifecycle: Lifecycle {
            start: StartMode::Eager,
            idle_stop: None,
        },
    }
}

/// The trace with the events of each instant in a fixed order. Events at the same virtual
/// instant may be logged in either order (several calls failing together when their
/// connection drops are failed in the order of a hash map inside the MCP client, and
/// `select!` polls ready branches in a random order); what happened, and when, is the
/// same. Anything that moves an event to another instant, or changes it, changes the
/// digest.
pub(crate) fn canonical(trace: &[String]) -> Vec<&String> {
    let mut lines: Vec<&String> = trace.iter().collect();
    let at = |line: &str| -> u64 {
        line.trim_start()
            .split("ms ")
            .next()
            .and_then(|ms| ms.parse().ok())
            .unwrap_or(0)
    };
    lines.sort_by(|a, b| at(a).cmp(&at(b)).then_with(|| a.cmp(b)));
    lines
}

/// A fresh directory for one run's state store (tmpfs when there is one: the store syncs
/// every audit row).
pub(crate) fn store_dir(seed: u64) -> PathBuf {
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    base.join(format!(
        "warden-sim-{}-{seed}-{}",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::SeqCst)
    ))
}

/// A host over `upstreams` (dialled through the relay seam, or for a remote one through
/// `front`, with a back-off on the paused clock seeded by `jitter`), under `policy`, with
/// `store` for its audit log; every tool offered (no review), no process started. A
/// server that did not connect is a violation.
pub(crate) async fn host(
    upstreams: &[Arc<Upstream>],
    start: Instant,
    store: warden_store::Store,
    policy: warden_policy::Policy,
    log: &Arc<Log>,
    front: Option<(Arc<dyn warden_net::Transport>, u64)>,
) -> warden_host::Host {
    let dialer = Arc::new(Dialer {
        upstreams: upstreams.to_vec(),
        start,
    });
    let mut options = ConnectOptions {
        relay: Some(dialer),
        ..ConnectOptions::default()
    };
    if let Some((transport, jitter)) = front {
        let waits = Arc::new(crate::remote::Waits {
            ceiling: REMOTE_RECONNECT.max_delay,
            log: Arc::clone(log),
            count: AtomicUsize::new(0),
        });
        options.http_transport = Some(transport);
        options.backoff = Some(warden_mcp::http::reconnect::Backoff::new(
            waits,
            warden_mcp::http::reconnect::SeededRng::new(jitter),
        ));
    }
    let specs = upstreams
        .iter()
        .map(|u| {
            let mut spec = spec(&u.name(), u.plan.call_timeout);
            if u.plan.remote {
                spec.transport = TransportSpec::Http {
                    url: format!("https://{}.sim.invalid/mcp", u.name()),
                    headers: BTreeMap::new(),
                    settings: warden_config::HttpSettings {
                        allow_http: false,
                        reconnect: REMOTE_RECONNECT,
                        transport: warden_config::RemoteTransport::Http,
                        oauth: warden_config::OAuthSpec::default(),
                    },
                };
            }
            spec
        })
        .collect();
    let host = warden_host::Host::builder(Arc::new(policy))
        .store(store)
        .review(Arc::new(warden_host::NoReview))
        .launcher(Arc::new(warden_mcp::DirectLauncher::from_env()))
        .options(options)
        .connect(specs)
        .await;
    for entry in host.servers() {
        if !entry.ready() {
            log.violation(format!(
                "{} did not connect: {:?}",
                entry.spec.name,
                entry.start_failure().map(|f| f.reason)
            ));
        }
    }
    host
}

/// The reconnect policy of a remote upstream.
const REMOTE_RECONNECT: warden_config::ReconnectSpec = warden_config::ReconnectSpec {
    connect_attempts: 2,
    attempts: 2,
    initial_delay: Duration::from_millis(100),
    max_delay: Duration::from_secs(2),
};

/// A policy from its JSON form (what `[policy]` reads to). One that does not read or
/// compile is a mistake in the simulator: the world stops there (a panic, which the run
/// reports as a violation), never runs under the default policy instead.
pub(crate) fn policy(config: Value) -> warden_policy::Policy {
    let config: warden_policy::PolicyConfig = match serde_json::from_value(config) {
        Ok(config) => config,
        Err(error) => panic!("the simulated world's policy does not read: {error}"),
    };
    match warden_policy::Policy::compile(&config) {
        Ok(policy) => policy,
        Err(error) => panic!("the simulated world's policy does not compile: {error}"),
    }
}

/// Every call that reached an upstream, on every connection of each.
pub(crate) fn all_received(upstreams: &[Arc<Upstream>]) -> Vec<Received> {
    upstreams
        .iter()
        .flat_map(|u| lock(&u.received).clone())
        .collect()
}

/// Property 3 of both worlds: every upstream request still unanswered when it was due to
/// end (`due` says when: its call timeout, or earlier when its caller gave up) got
/// `notifications/cancelled` within [`CANCEL_BOUND`], unless its connection dropped first
/// or the host closed it within that bound (shutting down right after a turn timed out:
/// the close ends every request on it, and a cancellation queued an instant before may
/// not be written).
pub(crate) fn check_cancelled(
    received: &[Received],
    due: impl Fn(&Received) -> Option<Duration>,
    log: &Log,
) {
    for r in received {
        let Some(due) = due(r) else {
            continue;
        };
        if r.answered.is_some_and(|a| a <= due) || r.dropped.is_some_and(|d| d <= due) {
            continue;
        }
        // The host closed the connection in time: every request on it ends with it.
        if r.closed.is_some_and(|c| c <= due + CANCEL_BOUND) {
            continue;
        }
        match r.cancelled {
            Some(at) if at <= due + CANCEL_BOUND => {}
            Some(at) => log.violation(format!(
                "{} (upstream id {}): cancelled at {at:?}, due by {:?}",
                r.token,
                r.id,
                due + CANCEL_BOUND
            )),
            None => log.violation(format!(
                "{} (upstream id {}): never cancelled (due by {:?})",
                r.token,
                r.id,
                due + CANCEL_BOUND
            )),
        }
    }
}

/// The end of a world: waits out stragglers, then every task of every upstream connection
/// must have ended and no task be left on the runtime.
pub(crate) async fn check_no_leaks(upstreams: &[Arc<Upstream>], log: &Log) {
    tokio::time::sleep(Duration::from_secs(120)).await;
    for upstream in upstreams {
        let tasks: Vec<_> = std::mem::take(&mut *lock(&upstream.tasks));
        for task in tasks {
            if !task.is_finished() {
                log.violation(format!(
                    "{}: a task of its connection still runs after shutdown",
                    upstream.name()
                ));
                task.abort();
            }
        }
    }
    let alive = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    if alive != 0 {
        log.violation(format!(
            "{alive} task(s) left on the runtime after shutdown"
        ));
    }
}
