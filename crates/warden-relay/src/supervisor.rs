//! `warden relay supervise`: the supervisor inside the sandbox.
//!
//! It reads frames from its stdin (the channel the brain's Warden opened) and writes frames
//! to its stdout. It owns every server process of the session:
//!
//! - a server is started on the first message of its stream and kept across calls (the
//!   2025-11-25 handshake is stateful), through the same [`Launcher`] and confinement
//!   profiles as a local server;
//! - a child that exits is started again on the next message, after a delay that grows
//!   with quick exits, at most [`RestartPolicy::burst`] times within
//!   [`RestartPolicy::window`]; the brain's `initialize` is replayed to the new child, so the
//!   brain's session of the server goes on;
//! - requests and answers are correlated by [`Correlator`]; list changes are passed on,
//!   progress, log messages and resource updates too within a rate budget (64 at once, 32
//!   a second), never waiting for the channel; other notifications are read and dropped;
//! - each request has a deadline: the tool's own timeout, or the brain's deadline less a
//!   margin, whichever is first; past it the child is sent `notifications/cancelled` and the
//!   brain an error naming the level that fired;
//! - stderr lines are capped and sent as log frames; they never wait for the channel;
//! - a changed configuration applies between calls (see [`Supervisor::reload`]);
//! - the session's secrets arrive in the first frame and go only into the environment of
//!   the server they are for;
//! - when the brain's stream asks for pins, every start is hashed and reported to the brain
//!   first, and runs only on its verdict, exactly the files that were hashed
//!   ([`crate::pins`]); a start whose files another user or a server could change is
//!   refused before it is reported; a refused start is reported again without hashing
//!   while its files are unchanged, and a changed one is hashed at most every
//!   [`RestartPolicy::rehash`];
//! - when the channel ends (or the brain says `Bye`), every child is stopped: stdin closed,
//!   then SIGTERM, then SIGKILL.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::process::ChildStdin;
use tokio::sync::{mpsc, watch};
use warden_config::ServerSpec;
use warden_mcp::launcher::StopGrace;
use warden_mcp::lines::{LineRead, read_capped_line};
use warden_mcp::{Fingerprint, LaunchRequest, Launcher, ProcessGroup};

use crate::correlate::{Correlator, Deadline, FromChild};
use crate::frame::{Frame, FrameError, Kind, read_frame, write_frame};
use crate::hello::{Hello, Ready, VERSION};
use crate::pins::{Executables, OpenOptions, Report, Verdict, still_hashed};

/// Frames queued for the channel before senders wait (answers) or drop (log lines).
const OUT_QUEUE: usize = 256;
/// Messages queued for one server before the brain's next one is refused.
const MAILBOX: usize = 256;
/// Lines from one child queued for its server's task.
const CHILD_QUEUE: usize = 1024;
/// Longest stderr line forwarded (the rest is cut).
const MAX_LOG_LINE: usize = 8 * 1024;
/// How long writing one message to a child's stdin may take.
const WRITE_LIMIT: Duration = Duration::from_secs(5);
/// How long stopping every child at the end of a session may take in all.
const STOP_LIMIT: Duration = Duration::from_secs(10);
/// How often the sandbox's configuration is looked at (a `stat`) while no frame arrives.
const RELOAD_EVERY: Duration = Duration::from_secs(1);
/// Verdicts queued for one server (one is awaited at a time; more are stale or forged).
const VERDICTS: usize = 4;
/// The default of [`RestartPolicy::rehash`].
pub const REHASH_EVERY: Duration = Duration::from_secs(2);
/// How long a refused start's fingerprint is reported again (while its files are
/// unchanged) before what the start would run is worked out afresh (a program found
/// earlier in `PATH` since, say); files unchanged then are not read again either (the
/// fingerprint code remembers their hashes by identity).
pub const REUSE_FOR: Duration = Duration::from_secs(30);

/// JSON-RPC error codes the supervisor answers with.
pub mod codes {
    /// The request timed out inside the sandbox.
    pub const TIMEOUT: i32 = -32001;
    /// The server process ended (or could not be started) while the request was pending.
    pub const SERVER_EXITED: i32 = -32002;
    /// Too many requests pending or queued for the server.
    pub const BUSY: i32 = -32003;
    /// The brain refused the start: what the server runs is not what it pinned.
    pub const REFUSED: i32 = -32004;
}

/// When a child that exited is started again.
#[derive(Debug, Clone, Copy)]
pub struct RestartPolicy {
    /// Delay before the first restart; doubled for each further restart in the window.
    pub delay: Duration,
    /// The longest delay.
    pub max_delay: Duration,
    /// Starts allowed within [`RestartPolicy::window`] (the first start included).
    pub burst: usize,
    /// The window of the burst limit.
    pub window: Duration,
    /// After a refused pinned start, what it runs is hashed again at most this often when
    /// one of its files changed (or could not be hashed): a task that keeps rewriting a
    /// large binary, or a brain that keeps calling a refused server, cannot make the
    /// supervisor hash per request. Unchanged files are never hashed again for a retry.
    pub rehash: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        Self {
            delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
            burst: 5,
            window: Duration::from_secs(60),
            rehash: REHASH_EVERY,
        }
    }
}

/// Reads the server definitions again (the sandbox's configuration file): `Ok(None)` when
/// the file is unchanged since the last read (a `stat`, no parsing), so that it can be asked
/// before every request.
pub type Reload =
    Arc<dyn Fn() -> Result<Option<BTreeMap<String, ServerSpec>>, String> + Send + Sync>;

/// How the supervisor runs.
#[derive(Clone)]
pub struct Supervisor {
    /// The real server definitions (the sandbox's configuration).
    pub servers: BTreeMap<String, ServerSpec>,
    /// When set, the definitions are read again when a stream is opened, before each
    /// message from the brain and every second in between (each time only when the file
    /// changed), so a changed server set applies without restarting the sandbox: a server
    /// whose definition changed is restarted under the new one between calls (at once when
    /// idle, and the brain is sent `notifications/tools/list_changed` so its next turn reads
    /// the list again; the brain's handshake is replayed to the new child), a server no
    /// longer defined is stopped and its stream closed. A file that no longer reads keeps
    /// the definitions in force (logged).
    pub reload: Option<Reload>,
    /// Starts (and confines) the children.
    pub launcher: Arc<dyn Launcher>,
    /// Hashes and starts the children of streams that ask for pins (the same confinement
    /// as `launcher`); without it, such a stream's starts are refused.
    pub executables: Option<Arc<dyn Executables>>,
    /// Restarts.
    pub restart: RestartPolicy,
    /// Cap on one frame's payload.
    pub max_payload: usize,
}

/// The margin taken off the brain's deadline at this hop: a tenth, at least 50 ms and at
/// most 1 s, so the supervisor's timeout fires (and its error travels back) before the
/// brain's own.
pub fn margin(deadline: Duration) -> Duration {
    (deadline / 10).clamp(Duration::from_millis(50), Duration::from_secs(1))
}

impl Supervisor {
    /// Serves one session over `input` and `output` until the channel ends or the brain
    /// says `Bye`; then stops every child.
    pub async fn run<R, W>(self, input: R, output: W) -> Result<(), FrameError>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let max_payload = self.max_payload;
        let (out_tx, mut out_rx) = mpsc::channel::<Frame>(OUT_QUEUE);
        let writer = tokio::spawn(async move {
            let mut output = BufWriter::new(output);
            while let Some(frame) = out_rx.recv().await {
                if write_frame(&mut output, &frame, max_payload).await.is_err() {
                    break;
                }
                if out_rx.is_empty() && output.flush().await.is_err() {
                    break;
                }
            }
            let _ = output.flush().await;
        });
        // Frames are read by a task of their own, so that the loop below can also look at
        // the configuration between frames (reading a frame cannot be interrupted safely).
        // One frame ahead at most: frames may be 16 MiB each, and the loop may be busy
        // stopping or restarting a child.
        let (frames_tx, mut frames) = mpsc::channel::<Result<Frame, FrameError>>(1);
        let reader = tokio::spawn(async move {
            let mut input = BufReader::new(input);
            loop {
                let read = read_frame(&mut input, max_payload).await;
                let end = read.is_err();
                if frames_tx.send(read).await.is_err() || end {
                    break;
                }
            }
        });
        let mut tick = tokio::time::interval(RELOAD_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut secrets: HashMap<String, BTreeMap<String, String>> = HashMap::new();
        let mut tasks: HashMap<String, ServerHandle> = HashMap::new();
        let mut servers = self.servers.clone();
        // Every server's definition, for the exposure check of pinned starts (another
        // server's write grant can expose what this one runs).
        let (configured_tx, configured) = watch::channel(servers.values().cloned().collect());
        let result = loop {
            let frame = tokio::select! {
                read = frames.recv() => match read {
                    Some(Ok(frame)) => frame,
                    Some(Err(FrameError::Closed)) | None => break Ok(()),
                    Some(Err(error)) => break Err(error),
                },
                // A changed configuration applies between calls even while the brain is
                // quiet: a changed idle server is restarted (and the brain told its list
                // may have changed), a removed one is stopped and its stream closed.
                _ = tick.tick(), if self.reload.is_some() => {
                    if self.reload_into(&mut servers) {
                        configured_tx.send_replace(servers.values().cloned().collect());
                        redefine(&mut tasks, &servers, &out_tx).await;
                    }
                    continue;
                }
            };
            match frame.kind {
                Kind::Hello => {
                    let hello: Hello = serde_json::from_slice(&frame.payload).unwrap_or_default();
                    secrets = hello.secrets.into_iter().collect();
                    // A change seen here applies to what runs, as at every other check.
                    if self.reload_into(&mut servers) {
                        configured_tx.send_replace(servers.values().cloned().collect());
                        redefine(&mut tasks, &servers, &out_tx).await;
                    }
                    let ready = Ready {
                        servers: servers.keys().cloned().collect(),
                        version: VERSION,
                    };
                    let payload = serde_json::to_vec(&ready).unwrap_or_default();
                    let _ = out_tx.send(Frame::new(Kind::Ready, "", payload)).await;
                }
                Kind::Open => {
                    if let Some(old) = tasks.remove(&frame.server) {
                        old.stop().await;
                    }
                    if self.reload_into(&mut servers) {
                        configured_tx.send_replace(servers.values().cloned().collect());
                        redefine(&mut tasks, &servers, &out_tx).await;
                    }
                    let Some(spec) = servers.get(&frame.server) else {
                        let why = format!(
                            "no server `{}` is defined in the sandbox's configuration",
                            frame.server
                        );
                        let _ = out_tx
                            .send(Frame::new(Kind::Closed, &frame.server, why.into_bytes()))
                            .await;
                        continue;
                    };
                    let env = secrets.get(&frame.server).cloned().unwrap_or_default();
                    let open: OpenOptions = if frame.payload.is_empty() {
                        OpenOptions::default()
                    } else {
                        serde_json::from_slice(&frame.payload).unwrap_or_default()
                    };
                    let handle = ServerTask::start(
                        spec.clone(),
                        env,
                        Launchers {
                            plain: Arc::clone(&self.launcher),
                            pinned: open.pins.then(|| self.executables.clone()),
                            configured: configured.clone(),
                        },
                        self.restart,
                        out_tx.clone(),
                    );
                    tasks.insert(frame.server.clone(), handle);
                }
                Kind::Data => {
                    if self.reload_into(&mut servers) {
                        configured_tx.send_replace(servers.values().cloned().collect());
                        redefine(&mut tasks, &servers, &out_tx).await;
                    }
                    match tasks.get(&frame.server) {
                        Some(handle) => {
                            let deadline = (frame.deadline_ms > 0).then(|| {
                                Instant::now() + Duration::from_millis(u64::from(frame.deadline_ms))
                            });
                            let message = Inbound::Brain {
                                payload: frame.payload,
                                deadline,
                            };
                            if let Err(mpsc::error::TrySendError::Full(Inbound::Brain {
                                payload,
                                ..
                            })) = handle.mailbox.try_send(message)
                            {
                                // Refused at once rather than blocking every other server.
                                if let Some(reply) = busy_reply(&payload) {
                                    let _ = out_tx
                                        .send(Frame::new(Kind::Data, &frame.server, reply))
                                        .await;
                                }
                            }
                        }
                        None => {
                            let why = format!("the stream of `{}` is not open", frame.server);
                            let _ = out_tx
                                .send(Frame::new(Kind::Closed, &frame.server, why.into_bytes()))
                                .await;
                        }
                    }
                }
                Kind::Closed => {
                    if let Some(old) = tasks.remove(&frame.server) {
                        old.stop().await;
                    }
                }
                Kind::Verdict => match serde_json::from_slice::<Verdict>(&frame.payload) {
                    Ok(verdict) => {
                        if let Some(handle) = tasks.get(&frame.server) {
                            let _ = handle.verdicts.try_send(verdict);
                        }
                    }
                    Err(error) => {
                        tracing::warn!(server = %frame.server, "a verdict that does not parse: {error}");
                    }
                },
                Kind::Bye => break Ok(()),
                Kind::Ready | Kind::Log | Kind::Pin => {}
            }
        };
        reader.abort();
        // The session is over: every child goes, whatever ended it.
        let stops = tasks.into_values().map(ServerHandle::stop);
        let _ = tokio::time::timeout(STOP_LIMIT, futures::future::join_all(stops)).await;
        drop(out_tx);
        let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
        result
    }
}

impl Supervisor {
    /// Reads the definitions again if the file changed; whether they did.
    fn reload_into(&self, servers: &mut BTreeMap<String, ServerSpec>) -> bool {
        let Some(reload) = &self.reload else {
            return false;
        };
        match reload() {
            Ok(Some(fresh)) => {
                let changed = *servers != fresh;
                *servers = fresh;
                changed
            }
            Ok(None) => false,
            Err(error) => {
                tracing::warn!(
                    "the sandbox's configuration could not be read again; the definitions \
                     in force are kept: {error}"
                );
                false
            }
        }
    }
}

/// Applies changed definitions to the running servers: a server whose definition changed is
/// told so (it restarts under the new one before its next request, once nothing is pending),
/// a server no longer defined is stopped and its stream closed with the reason.
async fn redefine(
    tasks: &mut HashMap<String, ServerHandle>,
    servers: &BTreeMap<String, ServerSpec>,
    out: &mpsc::Sender<Frame>,
) {
    let gone: Vec<String> = tasks
        .keys()
        .filter(|name| !servers.contains_key(*name))
        .cloned()
        .collect();
    for name in gone {
        if let Some(handle) = tasks.remove(&name) {
            handle.stop().await;
        }
        let why = format!("`{name}` is no longer defined in the sandbox's configuration");
        let _ = out
            .send(Frame::new(Kind::Closed, &name, why.into_bytes()))
            .await;
    }
    for (name, handle) in tasks.iter_mut() {
        let Some(spec) = servers.get(name) else {
            continue;
        };
        // Never waits on a full mailbox (that would hold every other server's messages):
        // the definition is then offered again with the next message.
        if *spec != handle.spec
            && handle
                .mailbox
                .try_send(Inbound::Redefine(Box::new(spec.clone())))
                .is_ok()
        {
            handle.spec = spec.clone();
        }
    }
}

/// An error answer to `payload` if it is a request (`BUSY`).
fn busy_reply(payload: &[u8]) -> Option<Vec<u8>> {
    let message: Map<String, Value> = serde_json::from_slice(payload).ok()?;
    let id = message.get("id")?.clone();
    message.get("method")?;
    serde_json::to_vec(&error_answer(
        id,
        codes::BUSY,
        "too many requests queued for this server inside the sandbox".into(),
    ))
    .ok()
}

fn error_answer(id: Value, code: i32, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

enum Inbound {
    Brain {
        payload: Vec<u8>,
        deadline: Option<Instant>,
    },
    Stop(tokio::sync::oneshot::Sender<()>),
    /// The server's definition changed in the sandbox's configuration.
    Redefine(Box<ServerSpec>),
}

struct ServerHandle {
    mailbox: mpsc::Sender<Inbound>,
    /// The brain's verdicts on the server's reported starts.
    verdicts: mpsc::Sender<Verdict>,
    task: tokio::task::JoinHandle<()>,
    /// The definition the task was last given.
    spec: ServerSpec,
}

impl ServerHandle {
    async fn stop(self) {
        let (done, wait) = tokio::sync::oneshot::channel();
        if self.mailbox.send(Inbound::Stop(done)).await.is_ok() {
            let _ = tokio::time::timeout(STOP_LIMIT, wait).await;
        }
        self.task.abort();
    }
}

/// What a child's reader tasks report.
enum ChildEvent {
    Line { generation: u64, bytes: Vec<u8> },
    Exited { generation: u64 },
}

struct Running {
    generation: u64,
    stdin: ChildStdin,
    group: ProcessGroup,
}

/// The outcome of a start run on a blocking thread.
type Started =
    Result<Result<warden_mcp::Launched, warden_mcp::LaunchError>, tokio::task::JoinError>;

/// How one server's children are started.
struct Launchers {
    /// Without pins.
    plain: Arc<dyn Launcher>,
    /// When the stream asks for pins: what hashes and starts (`Some(None)`: the supervisor
    /// cannot pin, so every start is refused).
    pinned: Option<Option<Arc<dyn Executables>>>,
    /// Every server's definition as last read (for the exposure check).
    configured: watch::Receiver<Vec<ServerSpec>>,
}

/// A pinned start that was refused (by the brain, by the exposure check, or because what
/// it runs could not be hashed): the next start reports the same fingerprint again
/// without reading a file while nothing changed, and hashes anew at most every
/// [`RestartPolicy::rehash`] when something did.
struct Refused {
    /// The start it was (a changed definition, or other secrets, is another start).
    request: LaunchRequest,
    /// What it hashed; `None` when hashing failed.
    fingerprint: Option<Fingerprint>,
    /// When it was hashed.
    hashed_at: Instant,
    /// Why it was refused.
    reason: String,
}

/// The task that owns one server's child.
struct ServerTask {
    spec: ServerSpec,
    secrets: BTreeMap<String, String>,
    launcher: Launchers,
    /// The brain's verdicts on reported starts.
    verdicts: mpsc::Receiver<Verdict>,
    /// Starts reported so far (each verdict names the one it answers).
    reported: u64,
    /// The last pinned start, if it was refused.
    refused: Option<Refused>,
    restart: RestartPolicy,
    out: mpsc::Sender<Frame>,
    corr: Correlator,
    child: Option<Running>,
    /// The brain's `initialize` and whether `notifications/initialized` followed, replayed
    /// to a restarted child.
    initialize: Option<Map<String, Value>>,
    initialized: bool,
    starts: VecDeque<Instant>,
    next_start: Instant,
    events_tx: mpsc::Sender<ChildEvent>,
    /// Set once the burst limit was reached: the stream is closed.
    given_up: bool,
    /// A changed definition, applied before the next request once nothing is pending.
    redefined: Option<ServerSpec>,
    /// The budget of notices passed on to the brain.
    notices: Budget,
    notices_dropped: u64,
}

/// Notices a server may send in a burst, and per second after it.
const NOTICE_BURST: f64 = 64.0;
const NOTICE_RATE: f64 = 32.0;

/// A token bucket: [`NOTICE_BURST`] at once, refilled at [`NOTICE_RATE`] a second.
struct Budget {
    tokens: f64,
    at: Instant,
}

impl Budget {
    fn new() -> Self {
        Self {
            tokens: NOTICE_BURST,
            at: Instant::now(),
        }
    }

    fn take(&mut self, now: Instant) -> bool {
        let refill = now.saturating_duration_since(self.at).as_secs_f64() * NOTICE_RATE;
        self.tokens = (self.tokens + refill).min(NOTICE_BURST);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

impl ServerTask {
    fn start(
        spec: ServerSpec,
        secrets: BTreeMap<String, String>,
        launcher: Launchers,
        restart: RestartPolicy,
        out: mpsc::Sender<Frame>,
    ) -> ServerHandle {
        let (mailbox, inbox) = mpsc::channel(MAILBOX);
        let (events_tx, events) = mpsc::channel(CHILD_QUEUE);
        let (verdicts_tx, verdicts) = mpsc::channel(VERDICTS);
        let handle_spec = spec.clone();
        let task = ServerTask {
            spec,
            secrets,
            launcher,
            verdicts,
            reported: 0,
            refused: None,
            restart,
            out,
            corr: Correlator::default(),
            child: None,
            initialize: None,
            initialized: false,
            starts: VecDeque::new(),
            next_start: Instant::now(),
            events_tx,
            given_up: false,
            redefined: None,
            notices: Budget::new(),
            notices_dropped: 0,
        };
        let task = tokio::spawn(task.run(inbox, events));
        ServerHandle {
            mailbox,
            verdicts: verdicts_tx,
            task,
            spec: handle_spec,
        }
    }

    async fn run(
        mut self,
        mut inbox: mpsc::Receiver<Inbound>,
        mut events: mpsc::Receiver<ChildEvent>,
    ) {
        loop {
            let deadline = self.corr.next_deadline();
            let sleep = async {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => futures::future::pending().await,
                }
            };
            tokio::select! {
                message = inbox.recv() => match message {
                    Some(Inbound::Brain { payload, deadline }) => {
                        self.on_brain(payload, deadline, &mut events).await;
                    }
                    Some(Inbound::Redefine(spec)) => {
                        self.redefined = Some(*spec);
                        // Idle: restarted now, so the brain's next turn sees the new list.
                        if self.corr.pending() == 0 {
                            self.apply_definition().await;
                        }
                    }
                    Some(Inbound::Stop(done)) => {
                        self.stop_child("the session ended").await;
                        let _ = done.send(());
                        return;
                    }
                    None => {
                        self.stop_child("the session ended").await;
                        return;
                    }
                },
                Some(event) = events.recv() => self.on_child(event).await,
                () = sleep => self.expire().await,
            }
        }
    }

    /// Passes a notice on if the budget allows, never waiting for the channel: a server
    /// that floods loses notices, not calls.
    fn notice(&mut self, message: &Map<String, Value>) {
        if !self.notices.take(Instant::now()) {
            self.notices_dropped += 1;
            if self.notices_dropped.is_power_of_two() {
                tracing::debug!(server = %self.spec.name, dropped = self.notices_dropped, "notifications over the budget dropped");
            }
            return;
        }
        if let Ok(payload) = serde_json::to_vec(message)
            && self
                .out
                .try_send(Frame::new(Kind::Data, &self.spec.name, payload))
                .is_err()
        {
            self.notices_dropped += 1;
        }
    }

    async fn send(&self, message: &Value) {
        if let Ok(payload) = serde_json::to_vec(message) {
            let _ = self
                .out
                .send(Frame::new(Kind::Data, &self.spec.name, payload))
                .await;
        }
    }

    async fn on_brain(
        &mut self,
        payload: Vec<u8>,
        deadline: Option<Instant>,
        events: &mut mpsc::Receiver<ChildEvent>,
    ) {
        let Ok(mut message) = serde_json::from_slice::<Map<String, Value>>(&payload) else {
            tracing::warn!(server = %self.spec.name, "dropped a message from the brain that is not a JSON object");
            return;
        };
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let is_request = method.is_some() && message.get("id").is_some_and(|id| !id.is_null());
        if is_request && self.corr.pending() == 0 {
            self.apply_definition().await;
        }
        if self.given_up {
            if is_request {
                let id = message.get("id").cloned().unwrap_or(Value::Null);
                self.send(&error_answer(
                    id,
                    codes::SERVER_EXITED,
                    self.given_up_reason(),
                ))
                .await;
            }
            return;
        }
        match method.as_deref() {
            Some("initialize") if is_request => {
                self.initialize = Some(message.clone());
                self.initialized = false;
            }
            Some("notifications/initialized") => self.initialized = true,
            _ => {}
        }
        if let Err((code, reason)) = self.ensure_child(method.as_deref(), events).await {
            if is_request {
                let id = message.get("id").cloned().unwrap_or(Value::Null);
                self.send(&error_answer(id, code, reason)).await;
            }
            return;
        }
        if is_request {
            let deadline = self.deadline_for(method.as_deref(), deadline);
            if self.corr.request(&mut message, deadline).is_none() {
                let id = message.get("id").cloned().unwrap_or(Value::Null);
                self.send(&error_answer(
                    id,
                    codes::BUSY,
                    format!(
                        "{} requests are already pending for this server inside the sandbox",
                        crate::correlate::MAX_PENDING
                    ),
                ))
                .await;
                return;
            }
        } else if method.as_deref() == Some("notifications/cancelled") {
            if !self.corr.cancellation(&mut message) {
                return;
            }
        } else if method.is_none() && !self.corr.answer_to_child(&mut message) {
            tracing::debug!(server = %self.spec.name, "dropped an answer to a request of a replaced child");
            return;
        }
        self.write_child(&Value::Object(message)).await;
    }

    /// The innermost deadline of a request: the tool's own timeout (for `tools/call`) or
    /// the brain's deadline less the margin, whichever comes first.
    fn deadline_for(
        &self,
        method: Option<&str>,
        brain: Option<Instant>,
    ) -> Option<(Instant, Deadline)> {
        let now = Instant::now();
        let supervisor = brain.map(|at| {
            let left = at.saturating_duration_since(now);
            let budget = left.saturating_sub(margin(left));
            (now + budget, Deadline::Supervisor(budget))
        });
        let tool = (method == Some("tools/call")).then(|| {
            let limit = self.spec.timeouts.call;
            (now + limit, Deadline::Tool(limit))
        });
        match (tool, supervisor) {
            (Some(tool), Some(sup)) => Some(if tool.0 <= sup.0 { tool } else { sup }),
            (one, other) => one.or(other),
        }
    }

    fn given_up_reason(&self) -> String {
        format!(
            "`{}` exited {} times within {:?} inside the sandbox and is not started again \
             in this session",
            self.spec.name, self.restart.burst, self.restart.window
        )
    }

    /// Starts the child if none runs (after the restart delay, within the burst limit),
    /// replaying the brain's handshake to a restarted one.
    async fn ensure_child(
        &mut self,
        method: Option<&str>,
        events: &mut mpsc::Receiver<ChildEvent>,
    ) -> Result<(), (i32, String)> {
        if self.child.is_some() {
            return Ok(());
        }
        let now = Instant::now();
        while self
            .starts
            .front()
            .is_some_and(|at| now.duration_since(*at) > self.restart.window)
        {
            self.starts.pop_front();
        }
        if self.starts.len() >= self.restart.burst {
            self.given_up = true;
            let reason = self.given_up_reason();
            let _ = self
                .out
                .send(Frame::new(
                    Kind::Closed,
                    &self.spec.name,
                    reason.clone().into_bytes(),
                ))
                .await;
            return Err((codes::SERVER_EXITED, reason));
        }
        if self.next_start > now {
            tokio::time::sleep_until(self.next_start.into()).await;
        }
        self.starts.push_back(Instant::now());
        let mut request = LaunchRequest::for_spec(&self.spec).ok_or_else(|| {
            (
                codes::SERVER_EXITED,
                format!(
                    "`{}` is not a local (command) server inside the sandbox",
                    self.spec.name
                ),
            )
        })?;
        // The session's secrets for this server only, over the base the launcher builds.
        request.env.extend(self.secrets.clone());
        let launched = match self.launcher.pinned.clone() {
            None => {
                let launcher = Arc::clone(&self.launcher.plain);
                tokio::task::spawn_blocking(move || launcher.launch(&request)).await
            }
            Some(executables) => match self.start_pinned(executables, request).await {
                Ok(launched) => launched,
                Err(refused) => {
                    // A refused start is not a crash: it does not count against the burst.
                    self.starts.pop_back();
                    return Err((codes::REFUSED, refused));
                }
            },
        };
        let launched = match launched {
            Ok(Ok(launched)) => launched,
            Ok(Err(error)) => {
                return Err((
                    codes::SERVER_EXITED,
                    format!("`{}` could not be started: {error}", self.spec.name),
                ));
            }
            Err(error) => {
                return Err((
                    codes::SERVER_EXITED,
                    format!("the start ended without a result ({error})"),
                ));
            }
        };
        let generation = self.corr.generation();
        tracing::info!(server = %self.spec.name, pid = launched.group.pid(), generation, "started");
        let max_line = self.spec.max_message_bytes;
        let events_tx = self.events_tx.clone();
        let mut stdout = BufReader::new(launched.stdout);
        tokio::spawn(async move {
            let mut line = Vec::new();
            loop {
                match read_capped_line(&mut stdout, &mut line, max_line, true).await {
                    Ok(LineRead::Line) => {
                        let bytes = std::mem::take(&mut line);
                        if events_tx
                            .send(ChildEvent::Line { generation, bytes })
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                    Ok(LineRead::TooLong) => {
                        tracing::warn!("a message over {max_line} bytes from a child was dropped");
                    }
                    Ok(LineRead::Eof) | Err(_) => break,
                }
            }
            let _ = events_tx.send(ChildEvent::Exited { generation }).await;
        });
        let out = self.out.clone();
        let name = self.spec.name.clone();
        let mut stderr = BufReader::new(launched.stderr);
        tokio::spawn(async move {
            let mut line = Vec::new();
            let mut dropped = 0u64;
            loop {
                match read_capped_line(&mut stderr, &mut line, MAX_LOG_LINE, true).await {
                    Ok(LineRead::Eof) | Err(_) => break,
                    Ok(read) => {
                        let mut text = std::mem::take(&mut line);
                        if read == LineRead::TooLong {
                            text.extend_from_slice(b" [line cut]");
                        }
                        // Never waits for the channel: a chatty server loses log lines,
                        // not calls.
                        if out.try_send(Frame::new(Kind::Log, &name, text)).is_err() {
                            dropped += 1;
                        }
                    }
                }
            }
            if dropped > 0 {
                tracing::warn!(server = %name, dropped, "stderr lines dropped while the channel was full");
            }
        });
        self.child = Some(Running {
            generation,
            stdin: launched.stdin,
            group: launched.group,
        });
        // A restarted child gets the brain's handshake again (unless this message is it).
        if method != Some("initialize")
            && let Some(initialize) = self.initialize.clone()
        {
            self.replay(initialize, events)
                .await
                .map_err(|reason| (codes::SERVER_EXITED, reason))?;
        }
        Ok(())
    }

    /// Hashes what `request` would execute ([`ServerTask::fingerprint_for`]), refuses it
    /// if someone other than the supervisor's user could change one of its files, reports
    /// it to the brain and waits (within the server's connect timeout) for its verdict; on
    /// a yes, starts exactly the files that were hashed (the start's own outcome, as a
    /// plain launch's). `Err` is the refusal: the brain's reason, or why nothing could be
    /// reported; it is remembered ([`Refused`]).
    async fn start_pinned(
        &mut self,
        executables: Option<Arc<dyn Executables>>,
        request: LaunchRequest,
    ) -> Result<Started, String> {
        let Some(executables) = executables else {
            return Err(format!(
                "`{}` is not started: the brain asks for executable pins and this \
                 supervisor cannot hash what it starts",
                self.spec.name
            ));
        };
        let (fingerprint, hashed_at) = self.fingerprint_for(&executables, &request).await?;
        match self.ask_brain(executables.as_ref(), &fingerprint).await {
            Ok(()) => {
                self.refused = None;
                Ok(tokio::task::spawn_blocking(move || {
                    executables.launch_pinned(&request, &fingerprint)
                })
                .await)
            }
            Err(reason) => {
                self.refused = Some(Refused {
                    request,
                    fingerprint: Some(fingerprint),
                    hashed_at,
                    reason: reason.clone(),
                });
                Err(reason)
            }
        }
    }

    /// What `request` would execute, hashed, and when. After a refused start of the same
    /// request, its fingerprint is used again without reading a file while every file is
    /// unchanged ([`still_hashed`]; at most [`REUSE_FOR`]), so the brain is asked again at
    /// once and a pin the user just accepted is honoured at the next request; when a file
    /// changed (or could not be hashed), it is hashed again only once [`RestartPolicy::rehash`] has
    /// passed since the last time, and until then the start is refused naming when.
    async fn fingerprint_for(
        &mut self,
        executables: &Arc<dyn Executables>,
        request: &LaunchRequest,
    ) -> Result<(Fingerprint, Instant), String> {
        let now = Instant::now();
        if let Some(last) = self
            .refused
            .as_ref()
            .filter(|last| last.request == *request)
        {
            let age = now.saturating_duration_since(last.hashed_at);
            if let Some(fingerprint) = &last.fingerprint
                && age < REUSE_FOR
                && still_hashed(fingerprint)
            {
                return Ok((fingerprint.clone(), last.hashed_at));
            }
            let every = self.restart.rehash;
            if age < every {
                return Err(format!(
                    "{}\n  (what it runs is hashed again in {} ms: after a refusal, a changed \
                     or unreadable file is hashed at most once every {} ms)",
                    last.reason,
                    (every - age).as_millis().max(1),
                    every.as_millis()
                ));
            }
        }
        let name = self.spec.name.clone();
        let hashing = Arc::clone(executables);
        let hashed = request.clone();
        let fingerprint = tokio::task::spawn_blocking(move || hashing.fingerprint(&hashed))
            .await
            .map_err(|error| format!("hashing `{name}` ended without a result ({error})"))?;
        let hashed_at = Instant::now();
        fingerprint.map(|fingerprint| (fingerprint, hashed_at)).map_err(|error| {
            let reason = format!(
                "`{name}` is not started: what it runs cannot be hashed inside the sandbox: {error}"
            );
            self.refused = Some(Refused {
                request: request.clone(),
                fingerprint: None,
                hashed_at,
                reason: reason.clone(),
            });
            reason
        })
    }

    /// Refuses `fingerprint` if one of its files is exposed, else reports it to the brain
    /// and waits (within the server's connect timeout) for the verdict on it.
    async fn ask_brain(
        &mut self,
        executables: &dyn Executables,
        fingerprint: &Fingerprint,
    ) -> Result<(), String> {
        let name = self.spec.name.clone();
        let exposed = executables.exposed(fingerprint, &self.launcher.configured.borrow());
        if !exposed.is_empty() {
            tracing::warn!(server = %name, exposed = ?exposed, "refused a start: what it runs can be changed by another user or a server");
            return Err(format!(
                "`{name}` is {}\n  (inside the sandbox, \"you\" is the user the relay's supervisor \
                 runs as)",
                warden_mcp::exposure::exposed_refusal(&exposed)
            ));
        }
        // A verdict queued before this report answers nothing: dropped unread.
        while self.verdicts.try_recv().is_ok() {}
        self.reported += 1;
        let start = self.reported;
        let report = Report::of(start, fingerprint);
        let payload = serde_json::to_vec(&report).map_err(|error| error.to_string())?;
        let _ = self.out.send(Frame::new(Kind::Pin, &name, payload)).await;
        let limit = self.spec.timeouts.connect;
        let verdict = tokio::time::timeout(limit, async {
            while let Some(verdict) = self.verdicts.recv().await {
                if verdict.start == start {
                    return Some(verdict);
                }
            }
            None
        })
        .await;
        let verdict = match verdict {
            Ok(Some(verdict)) => verdict,
            Ok(None) => return Err(format!("`{name}` is not started: the stream ended")),
            Err(_) => {
                return Err(format!(
                    "`{name}` is not started: the brain did not answer its executable pin \
                     within {} ms",
                    limit.as_millis()
                ));
            }
        };
        if !verdict.allow {
            tracing::warn!(server = %name, "the brain refused the start: {}", verdict.reason);
            return Err(verdict.reason);
        }
        Ok(())
    }

    /// Sends the remembered `initialize` to a new child, waits for its answer (swallowed)
    /// within the connect timeout, then `notifications/initialized`.
    async fn replay(
        &mut self,
        mut initialize: Map<String, Value>,
        events: &mut mpsc::Receiver<ChildEvent>,
    ) -> Result<(), String> {
        let id = self.corr.internal_request("initialize");
        initialize.insert("id".into(), Value::from(id));
        self.write_child(&Value::Object(initialize)).await;
        let limit = self.spec.timeouts.connect;
        let answered = tokio::time::timeout(limit, async {
            while let Some(event) = events.recv().await {
                match event {
                    ChildEvent::Line { generation, bytes } => {
                        if let Ok(message) = serde_json::from_slice::<Map<String, Value>>(&bytes)
                            && let FromChild::Internal(_) =
                                self.corr.child_message(generation, message)
                        {
                            return true;
                        }
                    }
                    ChildEvent::Exited { generation } if generation == self.corr.generation() => {
                        return false;
                    }
                    ChildEvent::Exited { .. } => {}
                }
            }
            false
        })
        .await
        .unwrap_or(false);
        if !answered {
            self.corr.forget(id);
            self.child_gone("did not answer the replayed initialize")
                .await;
            return Err(format!(
                "`{}` was restarted inside the sandbox and did not complete the handshake",
                self.spec.name
            ));
        }
        if self.initialized {
            self.write_child(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
                .await;
        }
        Ok(())
    }

    async fn write_child(&mut self, message: &Value) {
        let Some(child) = self.child.as_mut() else {
            return;
        };
        let Ok(mut bytes) = serde_json::to_vec(message) else {
            return;
        };
        bytes.push(b'\n');
        let write = async {
            child.stdin.write_all(&bytes).await?;
            child.stdin.flush().await
        };
        match tokio::time::timeout(WRITE_LIMIT, write).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => self.child_gone("its stdin closed").await,
            Err(_) => self.child_gone("it stopped reading its stdin").await,
        }
    }

    async fn on_child(&mut self, event: ChildEvent) {
        match event {
            ChildEvent::Line { generation, bytes } => {
                let Ok(message) = serde_json::from_slice::<Map<String, Value>>(&bytes) else {
                    tracing::debug!(server = %self.spec.name, "a line from the child that is not a JSON object");
                    return;
                };
                match self.corr.child_message(generation, message) {
                    FromChild::Forward(message) => self.send(&Value::Object(message)).await,
                    FromChild::Notice(message) => self.notice(&message),
                    FromChild::Internal(_) => {}
                    FromChild::Drop(why) => {
                        tracing::trace!(server = %self.spec.name, "dropped: {why}");
                    }
                }
            }
            ChildEvent::Exited { generation } => {
                if self
                    .child
                    .as_ref()
                    .is_some_and(|child| child.generation == generation)
                {
                    self.child_gone("it exited").await;
                }
            }
        }
    }

    /// The child is gone (or is being replaced): it is stopped, every pending request is
    /// answered with an error, and the next start waits for the restart delay.
    async fn child_gone(&mut self, why: &str) {
        let status = match self.child.take() {
            Some(Running {
                stdin, mut group, ..
            }) => {
                drop(stdin);
                match group.wait_exit(Duration::from_millis(200)).await {
                    Some(status) => {
                        // Already reaped; stopping sweeps anything left in its group.
                        group.stop(quick_stop()).await;
                        status
                    }
                    None => group.stop(quick_stop()).await.status,
                }
            }
            None => return,
        };
        tracing::info!(server = %self.spec.name, %status, "the server process ended: {why}");
        let message = format!(
            "the server process inside the sandbox ended ({why}; {status}); it is started \
             again on the next request"
        );
        for pending in self.corr.new_generation() {
            if !pending.internal {
                self.send(&error_answer(
                    pending.origin,
                    codes::SERVER_EXITED,
                    message.clone(),
                ))
                .await;
            }
        }
        let restarts = u32::try_from(self.starts.len().saturating_sub(1)).unwrap_or(u32::MAX);
        let delay = self
            .restart
            .delay
            .saturating_mul(2u32.saturating_pow(restarts.min(16)))
            .min(self.restart.max_delay);
        self.next_start = Instant::now() + delay;
    }

    async fn expire(&mut self) {
        for (id, pending) in self.corr.expired(Instant::now()) {
            let level = match pending.deadline.map(|(_, level)| level) {
                Some(Deadline::Tool(limit)) => format!(
                    "the tool's own timeout ({} ms, `timeout.call` in the sandbox's configuration)",
                    limit.as_millis()
                ),
                Some(Deadline::Supervisor(limit)) => format!(
                    "the supervisor's deadline ({} ms: the brain's deadline less the relay's margin)",
                    limit.as_millis()
                ),
                None => "a deadline".to_owned(),
            };
            tracing::info!(server = %self.spec.name, method = %pending.method, "timed out: {level}");
            self.write_child(&json!({
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": id, "reason": "timed out inside the sandbox"},
            }))
            .await;
            if !pending.internal {
                self.send(&error_answer(
                    pending.origin,
                    codes::TIMEOUT,
                    format!(
                        "timed out inside the sandbox: {level} fired; the request was cancelled"
                    ),
                ))
                .await;
            }
        }
    }

    /// Restarts under a changed definition, if there is one: the child is stopped, and the
    /// next start uses the new definition with a fresh restart budget (the brain's handshake
    /// is replayed as after a crash).
    async fn apply_definition(&mut self) {
        let Some(spec) = self.redefined.take() else {
            return;
        };
        self.stop_child("its definition changed in the sandbox's configuration")
            .await;
        self.spec = spec;
        self.refused = None;
        self.given_up = false;
        self.starts.clear();
        self.next_start = Instant::now();
        // What it offers may differ under the new definition: the brain reads its lists
        // again (its next request starts the new child, with the handshake replayed).
        if self.initialized {
            for list in ["tools", "resources", "prompts"] {
                let method = format!("notifications/{list}/list_changed");
                self.send(&json!({"jsonrpc": "2.0", "method": method}))
                    .await;
            }
        }
    }

    async fn stop_child(&mut self, why: &str) {
        let Some(Running { stdin, group, .. }) = self.child.take() else {
            return;
        };
        drop(stdin);
        let report = group.stop(StopGrace::default()).await;
        tracing::info!(server = %self.spec.name, status = %report.status, signals = ?report.signals, "stopped: {why}");
        for pending in self.corr.new_generation() {
            if !pending.internal {
                self.send(&error_answer(
                    pending.origin,
                    codes::SERVER_EXITED,
                    format!("the server was stopped: {why}"),
                ))
                .await;
            }
        }
    }
}

fn quick_stop() -> StopGrace {
    StopGrace {
        after_close: Duration::from_millis(100),
        after_term: Duration::from_millis(500),
    }
}
