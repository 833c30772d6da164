//! The [`Connection`] implementation over rmcp. Everything rmcp-specific lives here.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
// Logging, sampling and roots are deprecated in 2026-07-28 and still sent by 2025-11-25
// servers; a gateway relays them.
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotification,
    CancelledNotificationParam, ClientCapabilities, ClientNotification, ClientRequest,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
    FormElicitationCapability, Implementation, InitializeRequestParams, InputRequest,
    InputResponses, PaginatedRequestParams, ProgressToken, ProtocolVersion, RequestId,
    ServerResult, UrlElicitationCapability,
};
#[allow(deprecated)]
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ListRootsResult,
    LoggingMessageNotificationParam,
};
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt, NotificationContext, Peer,
    PeerRequestOptions, RequestContext, RunningService, ServiceError,
};
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Map, Value};
use warden_config::{EraPreference, ServerSpec};

use crate::connection::{
    CallOutcome, ConnectOptions, Connection, DEFAULT_MAX_PAGES, DEFAULT_MAX_TOOLS, Era, ServerInfo,
    ToolDef,
};
use crate::downstream::{CallContext, Downstream, InputRequired, Routes};
use crate::elicit::{ElicitationAnswer, ElicitationRequest, Elicitor};
use crate::error::{CallError, ConnectError, ConnectFailure, LaunchError};
use crate::launcher::{LaunchRequest, Launcher, ProcessGroup, StopGrace, StopReport};
use crate::notices::ServerNotices;
use crate::probe::{Verdict, probe, probe_limit};
use crate::stderr_log::StderrLog;
use crate::stdio::{StdinCloser, StdioLimits, StdioTransport, TransportHealth};

/// The 2026-07-28 error for a request whose client did not declare a capability it needs.
const MISSING_CAPABILITY: i32 = -32021;
/// How long connecting waits for a 2026-07-28 server to acknowledge the listen for its list
/// changes, at most.
const LISTEN_AT_CONNECT: Duration = Duration::from_secs(2);
/// Lines of stderr attached to an error.
const STDERR_TAIL_LINES: usize = 20;
/// How long to wait for a failing server's last stderr lines to arrive.
const STDERR_SETTLE: Duration = Duration::from_millis(300);
/// After a call timed out, how long writing its `notifications/cancelled` may take (a
/// server that stopped reading its stdin would block it for ever).
const CANCEL_WRITE_LIMIT: Duration = Duration::from_millis(500);
/// Stop timings for a server that failed to connect: it gets less patience.
const FAILED_STOP: StopGrace = StopGrace {
    after_close: Duration::from_millis(300),
    after_term: Duration::from_millis(500),
};

/// Warden's side of the conversation: answers the requests a server may send.
#[derive(Debug, Clone)]
struct WardenClient {
    server: String,
    /// Who answers elicitation requests; `None`: every request is declined (the
    /// capability is declared all the same, see [`capabilities`]).
    elicitor: Option<Arc<dyn Elicitor>>,
    /// Set when the server says its tool list changed; taken by
    /// [`Connection::take_tools_changed`].
    tools_changed: Arc<AtomicBool>,
    /// The calls running, with the clients behind them ([`crate::downstream`]).
    routes: Arc<Routes>,
}

impl ClientHandler for WardenClient {
    fn get_info(&self) -> InitializeRequestParams {
        let mut params = InitializeRequestParams::new(
            capabilities(),
            Implementation::new("warden", env!("CARGO_PKG_VERSION")),
        );
        params.protocol_version = ProtocolVersion::V_2025_11_25;
        params
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        if let Some(downstream) = self.routes.sole() {
            return Ok(relay_elicitation(downstream.as_ref(), &request).await);
        }
        Ok(self.elicit(request).await)
    }

    #[allow(deprecated)]
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, rmcp::ErrorData> {
        // Never declared by Warden itself; relayed to the one client behind the one call
        // running, when it declared sampling.
        let Some(downstream) = self.routes.sole() else {
            return Err(rmcp::ErrorData::method_not_found::<
                rmcp::model::CreateMessageRequestMethod,
            >());
        };
        let params = serde_json::to_value(&params).unwrap_or(Value::Null);
        let answer = downstream
            .ask("sampling/createMessage", params)
            .await
            .map_err(|reason| rmcp::ErrorData::internal_error(reason, None))?;
        serde_json::from_value(answer).map_err(|error| {
            rmcp::ErrorData::internal_error(
                format!("the client's sampling answer could not be read: {error}"),
                None,
            )
        })
    }

    #[allow(deprecated)]
    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, rmcp::ErrorData> {
        // Warden has no roots of its own to give (none declared): an empty list, unless the
        // one client behind the one call running declared roots and answers.
        let Some(downstream) = self.routes.sole() else {
            return Ok(ListRootsResult::default());
        };
        match downstream.ask("roots/list", serde_json::json!({})).await {
            Ok(answer) => serde_json::from_value(answer).map_err(|error| {
                rmcp::ErrorData::internal_error(
                    format!("the client's roots could not be read: {error}"),
                    None,
                )
            }),
            Err(_) => Ok(ListRootsResult::default()),
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        // The mark itself is set by [`Watched`], in order with the other messages.
        tracing::info!(server = %self.server, "the server's tool list changed");
        self.tools_changed.store(true, Ordering::SeqCst);
    }

    #[allow(deprecated)] // Logging is deprecated in 2026-07-28, still sent by legacy servers.
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        // Relayed to the client of the call running by [`Watched`], in order.
        tracing::debug!(server = %self.server, level = ?params.level, "server log: {}", params.data);
    }
}

/// A progress token as text (a string as it is, a number in decimal), the key the calls'
/// routes are kept under.
fn progress_token_text(token: &ProgressToken) -> String {
    match &token.0 {
        rmcp::model::NumberOrString::String(text) => text.to_string(),
        rmcp::model::NumberOrString::Number(number) => number.to_string(),
    }
}

/// Relays a 2025-11-25 server's `elicitation/create` to the client behind the call; an
/// answer that cannot be had or read is a decline (the server goes on without the input).
async fn relay_elicitation(
    downstream: &dyn Downstream,
    request: &ElicitRequestParams,
) -> ElicitResult {
    let Ok(params) = serde_json::to_value(request) else {
        return ElicitResult::new(ElicitationAction::Decline);
    };
    match downstream.ask("elicitation/create", params).await {
        Ok(answer) => serde_json::from_value(answer)
            .unwrap_or_else(|_| ElicitResult::new(ElicitationAction::Decline)),
        Err(reason) => {
            tracing::info!("a server's elicitation was declined: {reason}");
            ElicitResult::new(ElicitationAction::Decline)
        }
    }
}

/// How a call ended on the wire.
enum Answered {
    /// The tool's result.
    Complete(CallToolResult),
    /// A 2026-07-28 server's questions, for the client behind the call to answer.
    Input(InputRequired),
}

/// [`crate::downstream::ask_input`] for an input request in rmcp's type.
async fn ask_downstream(
    downstream: &dyn Downstream,
    key: &str,
    request: InputRequest,
) -> Result<Value, CallError> {
    let request = serde_json::to_value(&request).map_err(|error| CallError::Protocol {
        reason: format!("input request `{key}` could not be read: {error}"),
    })?;
    crate::downstream::ask_input(downstream, key, &request)
        .await
        .map_err(|reason| CallError::Protocol { reason })
}

/// What Warden declares, [`crate::client_capabilities`] in rmcp's types: elicitation
/// (form and URL) on every connection, whether or not a front end can answer it (a server
/// must list the same tools to `warden tools` as to `warden run`), and never sampling or
/// roots (deprecated in 2026-07-28; Warden offers neither in any era).
fn capabilities() -> ClientCapabilities {
    let mut capabilities = ClientCapabilities::default();
    capabilities.elicitation = Some(
        ElicitationCapability::new()
            .with_form(FormElicitationCapability::new())
            .with_url(UrlElicitationCapability::new()),
    );
    capabilities
}

impl WardenClient {
    /// Puts one elicitation request to the front end (declines when there is none).
    async fn elicit(&self, request: ElicitRequestParams) -> ElicitResult {
        let Some(elicitor) = &self.elicitor else {
            return ElicitResult::new(ElicitationAction::Decline);
        };
        let request = match request {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => ElicitationRequest::Form {
                message,
                schema: serde_json::to_value(&requested_schema).unwrap_or(Value::Null),
            },
            ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
                ElicitationRequest::Url { message, url }
            }
            _ => return ElicitResult::new(ElicitationAction::Decline),
        };
        match elicitor.elicit(&self.server, request).await {
            ElicitationAnswer::Accept(content) => {
                let result = ElicitResult::new(ElicitationAction::Accept);
                match content {
                    Some(values) => result.with_content(Value::Object(values)),
                    None => result,
                }
            }
            ElicitationAnswer::Decline => ElicitResult::new(ElicitationAction::Decline),
            ElicitationAnswer::Cancel => ElicitResult::new(ElicitationAction::Cancel),
        }
    }
}

/// The writing end a connection sends messages through (a child's stdin, or a relayed
/// server's stream).
pub type BoxWriter = Box<dyn tokio::io::AsyncWrite + Send + Unpin>;
/// A reading end (a child's stdout or stderr, or a relayed server's stream).
pub type BoxReader = Box<dyn tokio::io::AsyncRead + Send + Unpin>;

/// The byte streams of a server that something else started: for a stdio server, its
/// process's pipes; for a relayed server, its stream over the relay's channel.
pub struct Pipes {
    /// What runs (shown in `ServerInfo::program`).
    pub program: std::path::PathBuf,
    /// Where requests are written, one JSON message per line.
    pub stdin: BoxWriter,
    /// Where the server's messages are read, one per line.
    pub stdout: BoxReader,
    /// Free-form log lines.
    pub stderr: BoxReader,
    /// The process group to stop on close, when there is a local process.
    pub group: Option<ProcessGroup>,
}

/// `input_required` rounds (2026-07-28 MRTR) followed for one call before giving up.
const MAX_INPUT_ROUNDS: usize = 4;

/// A transport that marks `notifications/tools/list_changed` as it is received.
///
/// rmcp runs notification handlers in tasks of their own, so a handler may run after the
/// response that followed the notification on the wire has been delivered. Marking here,
/// in the sequential receive loop, means a server that says its list changed before it
/// answers a call has its mark set before the caller sees the answer.
struct Watched<T> {
    inner: T,
    tools_changed: Arc<AtomicBool>,
    /// Resource and prompt list changes and resource updates, for a gateway to relay.
    notices: Arc<ServerNotices>,
    /// The calls running: their clients get the progress and log messages sent during
    /// them, relayed here, before the answer that follows them on the wire.
    routes: Arc<Routes>,
}

impl<T: rmcp::transport::Transport<RoleClient>> rmcp::transport::Transport<RoleClient>
    for Watched<T>
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<rmcp::service::RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await?;
        if let rmcp::model::JsonRpcMessage::Notification(notification) = &message {
            use rmcp::model::ServerNotification as Notice;
            match &notification.notification {
                Notice::ToolListChangedNotification(_) => {
                    self.tools_changed.store(true, Ordering::SeqCst);
                }
                Notice::ResourceListChangedNotification(_) => {
                    self.notices
                        .note("notifications/resources/list_changed", None);
                }
                Notice::PromptListChangedNotification(_) => {
                    self.notices
                        .note("notifications/prompts/list_changed", None);
                }
                Notice::ResourceUpdatedNotification(updated) => {
                    self.notices.updated(&updated.params.uri);
                }
                Notice::ProgressNotification(progress) => {
                    let token = progress_token_text(&progress.params.progress_token);
                    if let Some(downstream) = self.routes.by_progress_token(&token) {
                        downstream.notify(
                            "notifications/progress",
                            serde_json::to_value(&progress.params).unwrap_or(Value::Null),
                        );
                    }
                }
                #[allow(deprecated)]
                Notice::LoggingMessageNotification(logged) => {
                    if let Some(downstream) = self.routes.sole() {
                        downstream.notify(
                            "notifications/message",
                            serde_json::to_value(&logged.params).unwrap_or(Value::Null),
                        );
                    }
                }
                _ => {}
            }
        }
        Some(message)
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await
    }
}

/// The rmcp lifecycle for a decided era (`Auto` is decided by [`probe`] first).
fn lifecycle(era: EraPreference) -> ClientLifecycleMode {
    match era {
        EraPreference::Modern | EraPreference::Auto => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
        EraPreference::Legacy => ClientLifecycleMode::Initialize,
    }
}

/// Everything that explains why a server stopped talking.
struct Diagnostics {
    health: TransportHealth,
    stderr: StderrLog,
    group: Mutex<Option<ProcessGroup>>,
}

impl Diagnostics {
    /// Why the connection ended, in words, after giving the process a moment to exit.
    async fn reason(&self) -> String {
        if let Some(fatal) = self.health.fatal() {
            return fatal;
        }
        for _ in 0..20 {
            if let Some(status) = self.exit_status() {
                return format!("the server process exited ({status})");
            }
            tokio::time::sleep(Duration::from_millis(15)).await;
        }
        "the server closed the connection".to_owned()
    }

    fn exit_status(&self) -> Option<String> {
        let mut group = match self.group.lock() {
            Ok(group) => group,
            Err(poisoned) => poisoned.into_inner(),
        };
        group.as_mut().and_then(ProcessGroup::try_status)
    }

    async fn stderr_tail(&self) -> Vec<String> {
        self.stderr.wait_closed(STDERR_SETTLE).await;
        self.stderr.tail(STDERR_TAIL_LINES)
    }

    fn take_group(&self) -> Option<ProcessGroup> {
        match self.group.lock() {
            Ok(mut group) => group.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        }
    }
}

struct RmcpConnection {
    name: String,
    client: WardenClient,
    info: ServerInfo,
    peer: Peer<RoleClient>,
    running: Mutex<Option<RunningService<RoleClient, WardenClient>>>,
    closer: StdinCloser<BoxWriter>,
    diagnostics: Diagnostics,
    max_tools: usize,
    max_pages: usize,
    tools_changed: Arc<AtomicBool>,
    /// See [`Connection::notices`].
    notices: Arc<ServerNotices>,
    /// See [`Connection::retried_at`].
    retried_at: Option<std::time::Instant>,
    /// The `subscriptions/listen` carrying the subscriptions (2026-07-28).
    listen: crate::rmcp_listen::Listen,
}

/// Connects a stdio server: starts it, decides its era (`auto`: the [`probe`]) and runs the
/// handshake, all within the connect timeout.
///
/// One case gets a second attempt: the probe heard nothing within its limit (a slow start,
/// typically a Python interpreter on a loaded machine), `initialize` followed, and the server
/// refused it with an error only a 2026-07-28 server sends, because the probe's late
/// `server/discover` had put it in the modern era. The server has then said which era it
/// speaks, so it is started once more with `era = "modern"` and a connect timeout of its own
/// (logged). This is not a fallback to an older era, and it happens at most once.
pub(crate) async fn connect(
    spec: &ServerSpec,
    launcher: &Arc<dyn Launcher>,
    options: &ConnectOptions,
) -> Result<Box<dyn Connection>, ConnectFailure> {
    match connect_once(spec, launcher, options).await {
        Err(Attempt::LateModern(failure)) => {
            tracing::info!(
                server = %spec.name,
                "the server answered the era probe late and refused initialize as a 2026-07-28 \
                 server ({}); starting it again in the modern era",
                failure.error
            );
            let mut modern = spec.clone();
            modern.era = EraPreference::Modern;
            // Its budget begins with this attempt (`Connection::retried_at`).
            let connection = connect_once(&modern, launcher, options)
                .await
                .map_err(Attempt::into_failure)?;
            Ok(connection)
        }
        other => other
            .map(|connection| connection as Box<dyn Connection>)
            .map_err(Attempt::into_failure),
    }
}

/// How one connection attempt failed.
enum Attempt {
    /// For good.
    Failed(ConnectFailure),
    /// The server turned out to be modern after a silent probe (see [`connect`]).
    LateModern(ConnectFailure),
}

impl Attempt {
    fn into_failure(self) -> ConnectFailure {
        match self {
            Self::Failed(failure) | Self::LateModern(failure) => failure,
        }
    }
}

/// The turn of one start. Starts run on blocking threads; taking turns keeps one server's
/// start (hashing a large interpreter, say) from eating into another's connect timeout
/// when many start at once, as they did when starts ran inline one after the other. A turn
/// lasts at most its server's connect timeout (`launch_within`), so a wait is bounded.
fn start_turn() -> &'static tokio::sync::Mutex<()> {
    static TURN: std::sync::OnceLock<tokio::sync::Mutex<()>> = std::sync::OnceLock::new();
    TURN.get_or_init(|| tokio::sync::Mutex::new(()))
}

/// Starts `request` through `launcher` on a blocking thread (resolving and hashing what it
/// runs, checking and recording its pin, and the fork are blocking work that must not hold
/// an async worker), by `deadline`. A start still running at the deadline is given up: the
/// thread finishes on its own and drops what it started, which kills its process group.
async fn launch_within(
    launcher: Arc<dyn Launcher>,
    request: LaunchRequest,
    deadline: tokio::time::Instant,
    budget: std::time::Duration,
) -> Result<crate::launcher::Launched, ConnectError> {
    let start = tokio::task::spawn_blocking(move || launcher.launch(&request));
    match tokio::time::timeout_at(deadline, start).await {
        Ok(Ok(launched)) => launched.map_err(ConnectError::from),
        Ok(Err(ended)) => Err(ConnectError::Launch(LaunchError::Refused(format!(
            "the start ended without a result ({ended})"
        )))),
        Err(_) => Err(ConnectError::Timeout { after: budget }),
    }
}

async fn connect_once(
    spec: &ServerSpec,
    launcher: &Arc<dyn Launcher>,
    options: &ConnectOptions,
) -> Result<Box<RmcpConnection>, Attempt> {
    // Starts take turns, process-wide (see `start_turn`); the wait for this one's turn is
    // not charged to its connect timeout, as when starts ran one after the other inline.
    let turn = start_turn().lock().await;
    let began = std::time::Instant::now();
    // One budget for the whole connection: start, era probe and handshake.
    let deadline = tokio::time::Instant::now() + spec.timeouts.connect;
    let Some(request) = LaunchRequest::for_spec(spec) else {
        return Err(Attempt::Failed(ConnectFailure {
            error: ConnectError::Unsupported(
                "remote (HTTP) servers are not supported by this version of Warden yet".into(),
            ),
            stderr_tail: Vec::new(),
        }));
    };
    let launched = launch_within(
        Arc::clone(launcher),
        request,
        deadline,
        spec.timeouts.connect,
    )
    .await
    .map_err(|error| {
        Attempt::Failed(ConnectFailure {
            error,
            stderr_tail: Vec::new(),
        })
    })?;
    drop(turn);
    tracing::debug!(server = %spec.name, program = %launched.program.display(), pid = launched.group.pid(), "started");
    let pipes = Pipes {
        program: launched.program,
        stdin: Box::new(launched.stdin),
        stdout: Box::new(launched.stdout),
        stderr: Box::new(launched.stderr),
        group: Some(launched.group),
    };
    handshake(spec, pipes, options, deadline, began).await
}

/// Runs the handshake over `pipes` (the era probe when `era = "auto"`), within the
/// server's connect timeout, and returns the connection. For servers whose byte streams
/// come from elsewhere than [`Launcher`] (a relayed server's stream): the handshake and
/// everything after it is the same as for a local stdio server.
///
/// On failure, `late_modern` is the case [`connect`] retries for a local server: the era
/// probe went unanswered in time, and the server then refused `initialize` as a 2026-07-28
/// server. The caller may start the server afresh and connect with `era = "modern"`.
pub async fn connect_pipes(
    spec: &ServerSpec,
    pipes: Pipes,
    options: &ConnectOptions,
) -> Result<Box<dyn Connection>, PipesFailure> {
    let deadline = tokio::time::Instant::now() + spec.timeouts.connect;
    handshake(spec, pipes, options, deadline, std::time::Instant::now())
        .await
        .map(|connection| connection as Box<dyn Connection>)
        .map_err(|attempt| match attempt {
            Attempt::Failed(failure) => PipesFailure {
                failure,
                late_modern: false,
            },
            Attempt::LateModern(failure) => PipesFailure {
                failure,
                late_modern: true,
            },
        })
}

/// Why [`connect_pipes`] failed.
#[derive(Debug)]
pub struct PipesFailure {
    /// The failure, as for any connection.
    pub failure: ConnectFailure,
    /// The server answered the era probe late and refused `initialize` as a 2026-07-28
    /// server: started afresh, it should be connected with `era = "modern"`.
    pub late_modern: bool,
}

async fn handshake(
    spec: &ServerSpec,
    pipes: Pipes,
    options: &ConnectOptions,
    deadline: tokio::time::Instant,
    began: std::time::Instant,
) -> Result<Box<RmcpConnection>, Attempt> {
    let program = pipes.program.clone();
    let log_file = options
        .log_dir
        .as_ref()
        .map(|dir| dir.join(format!("{}.log", spec.name)));
    let stderr = StderrLog::drain(pipes.stderr, spec.name.clone(), log_file);
    let limits = StdioLimits {
        max_message_bytes: spec.max_message_bytes,
        ..StdioLimits::default()
    };
    let (transport, closer, health) =
        StdioTransport::new(spec.name.clone(), pipes.stdin, pipes.stdout, limits);
    let diagnostics = Diagnostics {
        health,
        stderr,
        group: Mutex::new(pipes.group),
    };
    let tools_changed = Arc::new(AtomicBool::new(false));
    let client = WardenClient {
        server: spec.name.clone(),
        elicitor: options.elicitor.clone(),
        tools_changed: Arc::clone(&tools_changed),
        routes: Arc::default(),
    };
    let handler = client.clone();
    let mut transport = transport;
    let mut probe_was_silent = false;
    let mode = match spec.era {
        EraPreference::Auto => {
            match probe(&mut transport, probe_limit(spec.timeouts.connect)).await {
                Verdict::Modern => lifecycle(EraPreference::Modern),
                Verdict::Legacy { why, silent } => {
                    tracing::info!(server = %spec.name, "{why}: falling back to initialize (2025-11-25)");
                    probe_was_silent = silent;
                    lifecycle(EraPreference::Legacy)
                }
            }
        }
        pinned => lifecycle(pinned),
    };
    let notices = Arc::new(ServerNotices::default());
    let transport = Watched {
        inner: transport,
        tools_changed: Arc::clone(&tools_changed),
        notices: Arc::clone(&notices),
        routes: Arc::clone(&client.routes),
    };
    let handshake = client.serve_with_lifecycle(transport, mode);
    let running = match tokio::time::timeout_at(deadline, handshake).await {
        Ok(Ok(running)) => running,
        Ok(Err(error)) => {
            let late_modern = probe_was_silent
                && matches!(&error, ClientInitializeError::JsonRpcError(data)
                    if crate::probe::MODERN_ERRORS.contains(&data.code.0));
            let error = classify_handshake_error(&diagnostics, error, spec.era).await;
            let failure = fail(error, &closer, &diagnostics).await;
            return Err(if late_modern {
                Attempt::LateModern(failure)
            } else {
                Attempt::Failed(failure)
            });
        }
        Err(_) => {
            let error = ConnectError::Timeout {
                after: spec.timeouts.connect,
            };
            return Err(Attempt::Failed(fail(error, &closer, &diagnostics).await));
        }
    };
    let peer = running.peer().clone();
    let info = server_info(&peer, program);
    tracing::info!(
        server = %spec.name,
        era = ?info.era,
        protocol = %info.protocol_version,
        "connected ({} era, protocol {})",
        match info.era { Era::Modern => "modern", Era::Legacy => "legacy" },
        info.protocol_version
    );
    let connection = Box::new(RmcpConnection {
        name: spec.name.clone(),
        client: handler,
        info,
        peer,
        running: Mutex::new(Some(running)),
        closer,
        diagnostics,
        max_tools: options.max_tools.unwrap_or(DEFAULT_MAX_TOOLS),
        max_pages: options.max_pages.unwrap_or(DEFAULT_MAX_PAGES),
        tools_changed,
        notices,
        retried_at: Some(began),
        listen: crate::rmcp_listen::Listen::default(),
    });
    connection.listen_for_list_changes(deadline).await;
    Ok(connection)
}

async fn classify_handshake_error(
    diagnostics: &Diagnostics,
    error: ClientInitializeError,
    era: EraPreference,
) -> ConnectError {
    if let Some(reason) = diagnostics.health.fatal() {
        return ConnectError::Fault { reason };
    }
    let closed = matches!(
        error,
        ClientInitializeError::ConnectionClosed(_) | ClientInitializeError::TransportError { .. }
    );
    if closed {
        for _ in 0..20 {
            if let Some(status) = diagnostics.exit_status() {
                return ConnectError::Exited { status };
            }
            tokio::time::sleep(Duration::from_millis(15)).await;
        }
    }
    let mut reason = describe_init_error(&error);
    if era == EraPreference::Modern && matches!(error, ClientInitializeError::JsonRpcError(_)) {
        reason = format!(
            "the server does not speak the 2026-07-28 revision (server/discover: {reason}), \
             and era = \"modern\" allows no fallback to initialize"
        );
    }
    ConnectError::Handshake { reason }
}

fn describe_init_error(error: &ClientInitializeError) -> String {
    match error {
        ClientInitializeError::JsonRpcError(data) => {
            format!(
                "the server answered with error {}: {}",
                data.code.0, data.message
            )
        }
        ClientInitializeError::ConnectionClosed(_) => "the server closed the connection".into(),
        other => {
            let mut text = other.to_string();
            if text.len() > 400 {
                let mut cut = 400;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text.truncate(cut);
                text.push('…');
            }
            text
        }
    }
}

async fn fail(
    error: ConnectError,
    closer: &StdinCloser<BoxWriter>,
    diagnostics: &Diagnostics,
) -> ConnectFailure {
    closer.close().await;
    if let Some(group) = diagnostics.take_group() {
        group.stop(FAILED_STOP).await;
    }
    ConnectFailure {
        error,
        stderr_tail: diagnostics.stderr_tail().await,
    }
}

fn server_info(peer: &Peer<RoleClient>, program: std::path::PathBuf) -> ServerInfo {
    let peer_info = peer.peer_info();
    let protocol_version = peer_info
        .as_ref()
        .map(|info| info.protocol_version.to_string())
        .unwrap_or_else(|| "unknown".to_owned());
    // Revision identifiers are dates, so they order as strings.
    let era = if protocol_version.as_str() >= "2026-07-28" {
        Era::Modern
    } else {
        Era::Legacy
    };
    let implementation = peer_info.as_ref().and_then(|info| info.server_info.clone());
    ServerInfo {
        era,
        protocol_version,
        name: implementation.as_ref().map(|i| i.name.clone()),
        version: implementation.as_ref().map(|i| i.version.clone()),
        title: implementation.as_ref().and_then(|i| i.title.clone()),
        capabilities: peer_info
            .as_ref()
            .and_then(|info| serde_json::to_value(&info.capabilities).ok())
            .unwrap_or(Value::Null),
        instructions: peer_info
            .as_ref()
            .and_then(|info| info.instructions.clone()),
        program: Some(program),
        connect_attempts: 1,
    }
}

fn tool_def(tool: &rmcp::model::Tool) -> Result<ToolDef, CallError> {
    let value = serde_json::to_value(tool).map_err(|error| CallError::Protocol {
        reason: format!("a tool definition could not be read: {error}"),
    })?;
    let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    Ok(ToolDef {
        name: tool.name.to_string(),
        title: text("title"),
        description: text("description"),
        input_schema: value.get("inputSchema").cloned().unwrap_or(Value::Null),
        output_schema: value.get("outputSchema").cloned(),
        annotations: value.get("annotations").cloned(),
    })
}

impl RmcpConnection {
    async fn map_error(&self, error: ServiceError, timeout: Duration) -> CallError {
        match error {
            ServiceError::McpError(data) => {
                let required = data
                    .data
                    .as_ref()
                    .and_then(|data| data.get("requiredCapabilities"))
                    .filter(|required| required.is_object());
                match required {
                    Some(required) if data.code.0 == MISSING_CAPABILITY => {
                        CallError::MissingCapability {
                            required: required.clone(),
                            message: data.message.to_string(),
                        }
                    }
                    _ => CallError::Rejected {
                        code: data.code.0,
                        message: data.message.to_string(),
                    },
                }
            }
            ServiceError::Timeout { .. } => CallError::Timeout { after: timeout },
            ServiceError::UnexpectedResponse => CallError::Protocol {
                reason: "the answer did not match the request".into(),
            },
            ServiceError::InputRequiredRoundsExceeded { max_rounds } => CallError::Protocol {
                reason: format!("the server kept asking for input after {max_rounds} rounds"),
            },
            _ => CallError::ServerGone {
                reason: self.diagnostics.reason().await,
                stderr_tail: self.diagnostics.stderr_tail().await,
            },
        }
    }

    /// Sends `tools/call` and waits up to `timeout` for the answer.
    ///
    /// On timeout rmcp writes `notifications/cancelled` to the server before this returns,
    /// so the server has been told before the caller closes the connection. (Dropping the
    /// future of rmcp's `call_tool` only queues that notification, and closing stdin right
    /// after could lose it.) If this future is dropped instead, on Ctrl-C for instance,
    /// [`CancelOnDrop`] sends it as best effort.
    async fn send_call(
        &self,
        mut params: CallToolRequestParams,
        timeout: Duration,
        context: &CallContext,
    ) -> Result<Answered, CallError> {
        if let Some(retry) = &context.retry {
            params.input_responses = retry
                .responses
                .as_ref()
                .map(|responses| responses.clone().into_iter().collect());
            params.request_state = retry.state.clone();
        }
        let downstream = context.downstream.as_ref();
        for _round in 0..MAX_INPUT_ROUNDS {
            let asked = match self.send_once(params.clone(), timeout, downstream).await? {
                ServerResult::CallToolResult(result) => return Ok(Answered::Complete(result)),
                // Accepted by rmcp's own `call_tool` too: a result without content.
                ServerResult::EmptyResult(_) => {
                    let mut result = CallToolResult::default();
                    result.result_type = None;
                    return Ok(Answered::Complete(result));
                }
                ServerResult::InputRequiredResult(asked) => asked,
                _ => {
                    return Err(CallError::Protocol {
                        reason: "the answer to tools/call was not a tool result".into(),
                    });
                }
            };
            // MRTR (2026-07-28): answer every input request, then send the call again (a
            // new request id) with the answers and the server's state echoed unchanged.
            let requests = asked.input_requests.unwrap_or_default();
            crate::downstream::check_input_count(requests.len())
                .map_err(|reason| CallError::Protocol { reason })?;
            if requests.is_empty() && asked.request_state.is_none() {
                return Err(CallError::Protocol {
                    reason: "the server asked for input without saying what (input_required \
                             with neither inputRequests nor requestState)"
                        .into(),
                });
            }
            if downstream.is_some_and(|downstream| downstream.passes_input_through()) {
                let mut passed = Map::new();
                for (key, request) in requests {
                    let value =
                        serde_json::to_value(request).map_err(|error| CallError::Protocol {
                            reason: format!("an input request could not be read: {error}"),
                        })?;
                    passed.insert(key, value);
                }
                return Ok(Answered::Input(InputRequired {
                    requests: passed,
                    state: asked.request_state,
                }));
            }
            let mut responses = InputResponses::new();
            for (key, request) in requests {
                let value = match downstream {
                    Some(downstream) => ask_downstream(downstream.as_ref(), &key, request).await?,
                    None => self.answer_here(&key, request).await?,
                };
                responses.insert(key, value);
            }
            params.input_responses = (!responses.is_empty()).then_some(responses);
            params.request_state = asked.request_state;
        }
        Err(CallError::Protocol {
            reason: format!("the server kept asking for input after {MAX_INPUT_ROUNDS} rounds"),
        })
    }

    /// Answers one input request with Warden's own front end: only elicitation, and only
    /// when a front end can answer it.
    async fn answer_here(&self, key: &str, request: InputRequest) -> Result<Value, CallError> {
        let answer = match request {
            InputRequest::Elicitation(request) if self.client.elicitor.is_some() => {
                self.client.elicit(request.params).await
            }
            _ => {
                return Err(CallError::Protocol {
                    reason: format!(
                        "the server asked for input Warden did not offer (input request \
                         `{key}`: only elicitation is offered, and only when a front \
                         end can answer it)"
                    ),
                });
            }
        };
        serde_json::to_value(answer).map_err(|error| CallError::Protocol {
            reason: format!("an elicitation answer could not be written: {error}"),
        })
    }

    /// Sends `tools/call` once and waits up to `timeout` for the answer.
    ///
    /// On timeout rmcp writes `notifications/cancelled` to the server before this returns,
    /// so the server has been told before the caller closes the connection. (Dropping the
    /// future of rmcp's `call_tool` only queues that notification, and closing stdin right
    /// after could lose it.) If this future is dropped instead, on Ctrl-C for instance,
    /// [`CancelOnDrop`] sends it as best effort.
    async fn send_once(
        &self,
        params: CallToolRequestParams,
        timeout: Duration,
        downstream: Option<&Arc<dyn Downstream>>,
    ) -> Result<ServerResult, CallError> {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let mut options = PeerRequestOptions::with_timeout(timeout);
        // A 2026-07-28 server asks only for what the client behind the call declared.
        if let Some(downstream) = downstream
            && self.info.era == Era::Modern
        {
            let mut meta = rmcp::model::RequestMetaObject::default();
            if let Ok(capabilities) = serde_json::from_value(downstream.capabilities()) {
                meta.set_client_capabilities(capabilities);
            }
            if let Some(level) = downstream
                .log_level()
                .and_then(|level| serde_json::from_value(Value::from(level)).ok())
            {
                meta.set_log_level(level);
            }
            if !meta.0.is_empty() {
                options.meta = Some(meta);
            }
        }
        let route = self.client.routes.enter(downstream.cloned());
        self.send_with(request, options, Some(&route), timeout)
            .await
    }

    /// Sends one request and waits up to `timeout` for its answer; dropped first, the
    /// server is told the request is cancelled ([`CancelOnDrop`]).
    async fn send_request(
        &self,
        request: ClientRequest,
        timeout: Duration,
    ) -> Result<ServerResult, CallError> {
        self.send_with(
            request,
            PeerRequestOptions::with_timeout(timeout),
            None,
            timeout,
        )
        .await
    }

    /// [`RmcpConnection::send_request`] with `options`; a call's `route` learns the
    /// progress token the request went out with.
    async fn send_with(
        &self,
        request: ClientRequest,
        options: PeerRequestOptions,
        route: Option<&crate::downstream::RouteGuard<'_>>,
        timeout: Duration,
    ) -> Result<ServerResult, CallError> {
        let handle = match self.peer.send_cancellable_request(request, options).await {
            Ok(handle) => handle,
            // rmcp did not take the request: its connection had ended, so nothing was
            // written (the server never got it; the audit log must not say it ran).
            Err(error) => {
                return Err(match self.map_error(error, timeout).await {
                    CallError::ServerGone {
                        reason,
                        stderr_tail,
                    } => CallError::NotSent {
                        reason,
                        stderr_tail,
                    },
                    other => other,
                });
            }
        };
        if let Some(route) = route {
            self.client
                .routes
                .set_progress_token(route, progress_token_text(&handle.progress_token));
        }
        let mut guard = CancelOnDrop {
            peer: self.peer.clone(),
            id: Some(handle.id.clone()),
        };
        let response = handle.await_response().await;
        guard.id = None;
        match response {
            Ok(response) => Ok(response),
            Err(error) => Err(self.map_error(error, timeout).await),
        }
    }

    /// 2026-07-28: a server announces its list changes only on a `subscriptions/listen`
    /// stream, so one is opened at connect when the server says it announces any
    /// (`listChanged`), whether or not anything is subscribed: its changes are then heard
    /// (and reviewed) as a 2025-11-25 server's are. Best effort within [`LISTEN_AT_CONNECT`]
    /// and the connect deadline: a server that does not offer it is connected all the same
    /// (logged), its list read again only when Warden reads it.
    async fn listen_for_list_changes(&self, deadline: tokio::time::Instant) {
        if self.info.era != Era::Modern {
            return;
        }
        let lists =
            crate::subscription::ListenFilter::upstream(&self.info.capabilities, Vec::new());
        if lists.is_empty() {
            return;
        }
        let limit = deadline
            .saturating_duration_since(tokio::time::Instant::now())
            .min(LISTEN_AT_CONNECT);
        if limit.is_zero() {
            return;
        }
        if let Err(error) = self
            .listen
            .replace(&self.peer, Some(lists), &self.notices, limit)
            .await
        {
            tracing::info!(server = %self.name, "its list changes will not be heard: {error}");
        }
    }

    /// 2026-07-28: the connection's one `subscriptions/listen` is replaced by one carrying
    /// its subscriptions now (`uri` added or taken out: the caller recorded it already);
    /// a subscription counts as made only when the acknowledgement honours its URI.
    async fn relisten(&self, uri: &str, on: bool, timeout: Duration) -> Result<(), CallError> {
        let filter = crate::subscription::ListenFilter::upstream(
            &self.info.capabilities,
            self.notices.subscribed(),
        );
        // The list changes the server announces are listened to whatever is subscribed.
        let filter = (!filter.is_empty()).then_some(filter);
        let honoured = self
            .listen
            .replace(&self.peer, filter, &self.notices, timeout)
            .await?;
        crate::subscription::honoured(&honoured, uri, on)
    }

    async fn list_all(&self) -> Result<Vec<ToolDef>, CallError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _page in 0..self.max_pages {
            let params = PaginatedRequestParams::default().with_cursor(cursor.take());
            let page = match self.peer.list_tools(Some(params)).await {
                Ok(page) => page,
                Err(error) => return Err(self.map_error(error, Duration::ZERO).await),
            };
            for tool in &page.tools {
                if tools.len() == self.max_tools {
                    return Err(CallError::TooMany {
                        limit: self.max_tools,
                        what: "tools",
                    });
                }
                tools.push(tool_def(tool)?);
            }
            match page.next_cursor {
                Some(next) if !next.is_empty() => cursor = Some(next),
                _ => return Ok(tools),
            }
        }
        Err(CallError::TooMany {
            limit: self.max_pages,
            what: "pages of tools",
        })
    }
}

/// The typed request for one of [`crate::connection::FORWARDED_METHODS`]; anything else,
/// or params the method does not take, is refused without being sent.
/// Whether `capabilities` (as a server sent them) declare `resources.subscribe`.
pub(crate) fn declares_subscribe(capabilities: &Value) -> bool {
    capabilities.pointer("/resources/subscribe") == Some(&Value::Bool(true))
}

/// `resources/subscribe` (`on`) or `resources/unsubscribe` for `uri`, in rmcp's types.
#[allow(deprecated)] // Legacy-only methods: sent only to a 2025-11-25 server.
fn subscription_request(uri: &str, on: bool) -> ClientRequest {
    if on {
        ClientRequest::SubscribeRequest(rmcp::model::SubscribeRequest::new(
            rmcp::model::SubscribeRequestParams::new(uri),
        ))
    } else {
        ClientRequest::UnsubscribeRequest(rmcp::model::UnsubscribeRequest::new(
            rmcp::model::UnsubscribeRequestParams::new(uri),
        ))
    }
}

fn forwarded_request(method: &str, params: Map<String, Value>) -> Result<ClientRequest, CallError> {
    if !crate::connection::FORWARDED_METHODS.contains(&method) {
        return Err(crate::connection::not_forwarded(method));
    }
    let request: ClientRequest = serde_json::from_value(
        serde_json::json!({"method": method, "params": params}),
    )
    .map_err(|error| CallError::Rejected {
        code: -32602,
        message: format!("invalid params for {method}: {error}"),
    })?;
    // The untagged union falls back to a custom request: only the typed one is sent.
    if matches!(request, ClientRequest::CustomRequest(_)) || request.method() != method {
        return Err(CallError::Rejected {
            code: -32602,
            message: format!("invalid params for {method}"),
        });
    }
    Ok(request)
}

/// Sends `notifications/cancelled` for a request when dropped while still armed (`id` set):
/// the caller stopped waiting, and the server should stop working on it.
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.peer.clone();
        let notification = ClientNotification::CancelledNotification(CancelledNotification::new(
            CancelledNotificationParam::new(Some(id), Some("the caller stopped waiting".into())),
        ));
        runtime.spawn(async move {
            let _ = peer.send_notification(notification).await;
        });
    }
}

impl Connection for RmcpConnection {
    fn name(&self) -> &str {
        &self.name
    }

    fn retried_at(&self) -> Option<std::time::Instant> {
        self.retried_at
    }

    fn info(&self) -> &ServerInfo {
        &self.info
    }

    fn list_tools(&self, timeout: Duration) -> BoxFuture<'_, Result<Vec<ToolDef>, CallError>> {
        Box::pin(crate::connection::within(timeout, self.list_all()))
    }

    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        arguments: Option<Map<String, Value>>,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<CallOutcome, CallError>> {
        self.call_tool_in(name, arguments, timeout, CallContext::default())
    }

    fn call_tool_in<'a>(
        &'a self,
        name: &'a str,
        arguments: Option<Map<String, Value>>,
        timeout: Duration,
        context: CallContext,
    ) -> BoxFuture<'a, Result<CallOutcome, CallError>> {
        Box::pin(async move {
            let mut params = CallToolRequestParams::new(name.to_owned());
            params.arguments = arguments;
            let limit = timeout + CANCEL_WRITE_LIMIT;
            let sent = self.send_call(params, timeout, &context);
            let result = match tokio::time::timeout(limit, sent).await {
                Ok(Ok(Answered::Complete(result))) => result,
                Ok(Ok(Answered::Input(asked))) => {
                    let raw = serde_json::json!({
                        "resultType": "input_required",
                        "inputRequests": asked.requests,
                        "requestState": asked.state,
                    });
                    return Ok(CallOutcome {
                        content: Vec::new(),
                        structured: None,
                        is_error: false,
                        raw,
                        input_required: Some(asked),
                    });
                }
                Ok(Err(error)) => return Err(error),
                Err(_) => return Err(CallError::Timeout { after: timeout }),
            };
            let raw = serde_json::to_value(&result).map_err(|error| CallError::Protocol {
                reason: format!("the result could not be read: {error}"),
            })?;
            Ok(CallOutcome {
                content: raw
                    .get("content")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
                structured: raw.get("structuredContent").cloned(),
                is_error: raw.get("isError").and_then(Value::as_bool).unwrap_or(false),
                raw,
                input_required: None,
            })
        })
    }

    fn forwards(&self) -> bool {
        true
    }

    fn request<'a>(
        &'a self,
        method: &'a str,
        params: Map<String, Value>,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Value, CallError>> {
        Box::pin(async move {
            let request = forwarded_request(method, params)?;
            let limit = timeout + CANCEL_WRITE_LIMIT;
            let sent = self.send_request(request, timeout);
            let result = match tokio::time::timeout(limit, sent).await {
                Ok(result) => result?,
                Err(_) => return Err(CallError::Timeout { after: timeout }),
            };
            serde_json::to_value(&result).map_err(|error| CallError::Protocol {
                reason: format!("the answer to {method} could not be read: {error}"),
            })
        })
    }

    fn take_tools_changed(&self) -> bool {
        self.tools_changed.swap(false, Ordering::SeqCst)
    }

    fn notices(&self) -> Option<Arc<ServerNotices>> {
        Some(Arc::clone(&self.notices))
    }

    fn subscribes(&self) -> bool {
        declares_subscribe(&self.info.capabilities)
    }

    fn subscribe<'a>(
        &'a self,
        uri: &'a str,
        on: bool,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<(), CallError>> {
        Box::pin(async move {
            if !self.subscribes() {
                return Err(crate::connection::not_forwarded(if on {
                    "resources/subscribe"
                } else {
                    "resources/unsubscribe"
                }));
            }
            let send = async {
                if self.info.era == Era::Modern {
                    self.relisten(uri, on, timeout).await
                } else {
                    let request = subscription_request(uri, on);
                    let limit = timeout + CANCEL_WRITE_LIMIT;
                    match tokio::time::timeout(limit, self.send_request(request, timeout)).await {
                        Ok(sent) => sent.map(|_| ()),
                        Err(_) => Err(CallError::Timeout { after: timeout }),
                    }
                }
            };
            crate::subscription::change(&self.notices, uri, on, send).await
        })
    }

    fn stderr_tail(&self, count: usize) -> Vec<String> {
        self.diagnostics.stderr.tail(count)
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, StopReport> {
        Box::pin(async move {
            self.listen.end().await;
            let running = match self.running.lock() {
                Ok(mut running) => running.take(),
                Err(poisoned) => poisoned.into_inner().take(),
            };
            self.closer.close().await;
            if let Some(running) = running {
                let _ = running.cancel().await;
            }
            match self.diagnostics.take_group() {
                Some(group) => {
                    let report = group.stop(StopGrace::default()).await;
                    tracing::debug!(server = %self.name, status = %report.status, signals = ?report.signals, "stopped");
                    report
                }
                None => StopReport {
                    status: "already stopped".into(),
                    signals: Vec::new(),
                },
            }
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn params(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    /// Only the six read-only methods are forwarded, each as rmcp's typed request (so a
    /// malformed one is refused here, before anything is sent); a method that changes
    /// state (a subscription, a call) is refused whatever its params.
    #[test]
    fn forwarded_requests_are_typed_and_limited() {
        let read = forwarded_request("resources/read", params(json!({"uri": "demo://a"})));
        assert!(matches!(read, Ok(ClientRequest::ReadResourceRequest(_))));
        let listed = forwarded_request("prompts/list", Map::new());
        assert!(matches!(listed, Ok(ClientRequest::ListPromptsRequest(_))));
        let paged = forwarded_request("resources/list", params(json!({"cursor": "2"})));
        assert!(matches!(paged, Ok(ClientRequest::ListResourcesRequest(_))));
        let prompt = forwarded_request(
            "prompts/get",
            params(json!({"name": "p", "arguments": {"a": "b"}})),
        );
        assert!(matches!(prompt, Ok(ClientRequest::GetPromptRequest(_))));
        let complete = forwarded_request(
            "completion/complete",
            params(json!({"ref": {"type": "ref/prompt", "name": "p"},
                          "argument": {"name": "a", "value": "x"}})),
        );
        assert!(matches!(complete, Ok(ClientRequest::CompleteRequest(_))));
        for (method, given) in [
            ("resources/subscribe", json!({"uri": "demo://a"})),
            ("tools/call", json!({"name": "echo"})),
            ("logging/setLevel", json!({"level": "debug"})),
            ("made/up", json!({})),
        ] {
            assert!(
                matches!(
                    forwarded_request(method, params(given)),
                    Err(CallError::Rejected { code: -32601, .. })
                ),
                "{method} was not refused"
            );
        }
        // A read without its URI is not sent.
        assert!(matches!(
            forwarded_request("resources/read", Map::new()),
            Err(CallError::Rejected { code: -32602, .. })
        ));
    }

    /// A launcher whose start blocks its thread for `0`, then refuses.
    struct Blocking(std::time::Duration);

    impl Launcher for Blocking {
        fn launch(
            &self,
            _request: &LaunchRequest,
        ) -> Result<crate::launcher::Launched, LaunchError> {
            std::thread::sleep(self.0);
            Err(LaunchError::Refused("done".into()))
        }
    }

    fn request() -> LaunchRequest {
        LaunchRequest {
            server: "s".into(),
            command: "/bin/true".into(),
            args: Vec::new(),
            env: Default::default(),
            cwd: None,
            sandbox: Default::default(),
        }
    }

    /// The start's blocking work runs off the async worker (a single-threaded runtime keeps
    /// running other tasks meanwhile) and is given up at the connect deadline.
    #[tokio::test(flavor = "current_thread")]
    async fn a_start_blocks_no_worker_and_ends_at_the_deadline() {
        let ticks = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let ticker = {
            let ticks = Arc::clone(&ticks);
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    ticks.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        let slow: Arc<dyn Launcher> = Arc::new(Blocking(Duration::from_millis(1500)));
        let budget = Duration::from_millis(300);
        let started = std::time::Instant::now();
        let deadline = tokio::time::Instant::now() + budget;
        let result = launch_within(slow, request(), deadline, budget).await;
        assert!(
            matches!(result, Err(ConnectError::Timeout { after }) if after == budget),
            "{result:?}"
        );
        assert!(
            started.elapsed() < Duration::from_millis(1200),
            "{:?}",
            started.elapsed()
        );
        assert!(ticks.load(Ordering::Relaxed) >= 5, "the worker was blocked");
        ticker.abort();

        // A start within the deadline gives its own answer.
        let quick: Arc<dyn Launcher> = Arc::new(Blocking(Duration::from_millis(1)));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let result = launch_within(quick, request(), deadline, budget).await;
        assert!(
            matches!(&result, Err(ConnectError::Launch(LaunchError::Refused(why))) if why == "done"),
            "{result:?}"
        );
    }

    fn declared(elicitor: Option<Arc<dyn Elicitor>>) -> Value {
        let client = WardenClient {
            server: "s".into(),
            elicitor,
            tools_changed: Arc::new(AtomicBool::new(false)),
            routes: Arc::default(),
        };
        serde_json::to_value(client.get_info().capabilities).unwrap()
    }

    #[test]
    fn the_same_capabilities_are_declared_with_or_without_an_elicitor() {
        // The same capabilities go into `initialize` (legacy) and into every request's
        // `_meta` clientCapabilities (2026-07-28), on every connection: elicitation, and
        // neither sampling nor roots in any era.
        let without = declared(None);
        let with = declared(Some(Arc::new(crate::DeclineAll)));
        assert_eq!(without, json!({"elicitation": {"form": {}, "url": {}}}));
        assert_eq!(with, without);
        assert_eq!(without, crate::client_capabilities());
    }

    #[tokio::test]
    async fn without_an_elicitor_every_request_is_declined() {
        let client = WardenClient {
            server: "srv".into(),
            elicitor: None,
            tools_changed: Arc::new(AtomicBool::new(false)),
            routes: Arc::default(),
        };
        let form: ElicitRequestParams = serde_json::from_value(json!({
            "mode": "form", "message": "Who?",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}
        }))
        .unwrap();
        let answer = serde_json::to_value(client.elicit(form).await).unwrap();
        assert_eq!(answer["action"], "decline", "{answer}");
    }

    #[tokio::test]
    async fn requests_go_to_the_elicitor_and_answers_keep_their_action() {
        #[derive(Debug)]
        struct Fill;
        impl Elicitor for Fill {
            fn elicit<'a>(
                &'a self,
                server: &'a str,
                request: ElicitationRequest,
            ) -> BoxFuture<'a, ElicitationAnswer> {
                let answer = match request {
                    ElicitationRequest::Form { schema, .. } => {
                        assert_eq!(schema["properties"]["name"]["type"], "string");
                        let mut values = Map::new();
                        values.insert("name".into(), json!(server));
                        ElicitationAnswer::Accept(Some(values))
                    }
                    ElicitationRequest::Url { .. } => ElicitationAnswer::Cancel,
                };
                Box::pin(std::future::ready(answer))
            }
        }
        let client = WardenClient {
            server: "srv".into(),
            elicitor: Some(Arc::new(Fill)),
            tools_changed: Arc::new(AtomicBool::new(false)),
            routes: Arc::default(),
        };
        let form: ElicitRequestParams = serde_json::from_value(json!({
            "mode": "form", "message": "Who?",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}
        }))
        .unwrap();
        let answer = serde_json::to_value(client.elicit(form).await).unwrap();
        assert_eq!(
            answer,
            json!({"action": "accept", "content": {"name": "srv"}})
        );
        let url: ElicitRequestParams = serde_json::from_value(json!({
            "mode": "url", "message": "Sign in", "url": "https://example.com/a",
            "elicitationId": "e1"
        }))
        .unwrap();
        let answer = serde_json::to_value(client.elicit(url).await).unwrap();
        assert_eq!(answer, json!({"action": "cancel"}));
        let declined = WardenClient {
            elicitor: None,
            ..client
        };
        let form: ElicitRequestParams = serde_json::from_value(json!({
            "message": "Who?", "requestedSchema": {"type": "object", "properties": {}}
        }))
        .unwrap();
        let answer = serde_json::to_value(declined.elicit(form).await).unwrap();
        assert_eq!(answer, json!({"action": "decline"}));
    }

    /// A server over in-memory pipes that answers `initialize` and `tools/list`, runs each
    /// `tools/call` (counting it) and answers it unless it is named `hang_up`, on which it
    /// closes the connection instead.
    async fn pipe_server() -> (Box<dyn Connection>, Arc<std::sync::atomic::AtomicUsize>) {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        let (to_server, server_in) = tokio::io::duplex(1 << 16);
        let (mut server_out, from_server) = tokio::io::duplex(1 << 16);
        let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = Arc::clone(&ran);
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(server_in).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let message: Value = serde_json::from_str(&line).unwrap();
                let id = message.get("id").cloned();
                let result = match message["method"].as_str() {
                    Some("initialize") => json!({"protocolVersion": "2025-11-25",
                        "capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "1"}}),
                    Some("tools/list") => json!({"tools": [
                        {"name": "echo", "inputSchema": {"type": "object"}},
                        {"name": "hang_up", "inputSchema": {"type": "object"}}]}),
                    Some("tools/call") => {
                        counted.fetch_add(1, Ordering::SeqCst);
                        if message["params"]["name"] == "hang_up" {
                            return;
                        }
                        json!({"content": [{"type": "text", "text": "done"}]})
                    }
                    _ => continue,
                };
                let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
                let line = format!("{answer}\n");
                server_out.write_all(line.as_bytes()).await.unwrap();
            }
        });
        let spec = ServerSpec {
            name: "s".into(),
            transport: warden_config::TransportSpec::Stdio {
                command: "/sim/s".into(),
                args: Vec::new(),
                env: Default::default(),
                cwd: None,
            },
            timeouts: Default::default(),
            era: EraPreference::Legacy,
            max_message_bytes: 1 << 20,
            origin: warden_config::Origin {
                scope: warden_config::Scope::Explicit,
                format: warden_config::Format::WardenToml,
                path: "/test/warden.toml".into(),
            },
            sandbox: Default::default(),
            env_references: Vec::new(),
            lifecycle: Default::default(),
        };
        let pipes = Pipes {
            program: "/sim/s".into(),
            stdin: Box::new(to_server),
            stdout: Box::new(from_server),
            stderr: Box::new(tokio::io::empty()),
            group: None,
        };
        let connection = connect_pipes(&spec, pipes, &ConnectOptions::default())
            .await
            .unwrap();
        (connection, ran)
    }

    /// Found by the gateway and host simulation (warden-sim, host seed 98): a call to a
    /// server whose connection had already ended failed as "the server is gone", which the
    /// audit log recorded as executed although nothing was written. Such a call is now
    /// `NotSent`; one in flight when the connection breaks may have run, and stays
    /// `ServerGone`.
    #[tokio::test]
    async fn a_call_after_the_connection_ended_is_known_not_sent() {
        let (connection, ran) = pipe_server().await;
        let timeout = Duration::from_secs(5);
        // Positive control: an honest call runs and is answered.
        let answered = connection.call_tool("echo", None, timeout).await.unwrap();
        assert_eq!(answered.content[0]["text"], "done");
        // In flight when the server hangs up: it ran, so it may have had effects.
        let broken = connection.call_tool("hang_up", None, timeout).await;
        assert!(
            matches!(&broken, Err(e @ CallError::ServerGone { .. }) if e.may_have_reached_server()),
            "{broken:?}"
        );
        assert_eq!(ran.load(Ordering::SeqCst), 2);
        // After the end: never written, and said so.
        let unsent = connection.call_tool("echo", None, timeout).await;
        assert!(
            matches!(&unsent, Err(e @ CallError::NotSent { .. }) if !e.may_have_reached_server()),
            "{unsent:?}"
        );
        assert_eq!(ran.load(Ordering::SeqCst), 2);
    }
}
