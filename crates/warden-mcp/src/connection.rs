//! Warden's own view of a connected server, independent of the SDK underneath.

use std::path::PathBuf;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::{Map, Value};
use warden_config::ServerSpec;

use crate::error::{CallError, ConnectFailure};
use crate::launcher::{Launcher, StopReport};

/// The protocol era a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Era {
    /// 2026-07-28 and later: stateless, `server/discover`, metadata on every request.
    Modern,
    /// 2025-11-25 and earlier: the `initialize` handshake.
    Legacy,
}

/// What a server told us about itself. Self-reported: for display and logs, never for a
/// trust decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerInfo {
    /// The protocol era in use.
    pub era: Era,
    /// The negotiated protocol revision, e.g. `2025-11-25`.
    pub protocol_version: String,
    /// The implementation name the server reported, if any.
    pub name: Option<String>,
    /// Its version, if reported.
    pub version: Option<String>,
    /// Its display title, if reported.
    pub title: Option<String>,
    /// The server's capabilities, as sent.
    pub capabilities: Value,
    /// Instructions for the model, if the server gave any.
    pub instructions: Option<String>,
    /// The executable that was started (stdio servers).
    pub program: Option<PathBuf>,
    /// Attempts the connection took (remote servers retry transient failures; 1 otherwise).
    pub connect_attempts: u32,
}

/// One tool as the server defined it. All fields are untrusted text from the server.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDef {
    /// The tool's name on the wire.
    pub name: String,
    /// Display title, if any.
    pub title: Option<String>,
    /// Description, if any.
    pub description: Option<String>,
    /// The JSON Schema of its arguments.
    pub input_schema: Value,
    /// The JSON Schema of its structured output, if declared.
    pub output_schema: Option<Value>,
    /// Behaviour hints (`readOnlyHint`, ...), only as trustworthy as the server.
    pub annotations: Option<Value>,
}

/// The result of a tool call that reached the server and came back.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallOutcome {
    /// Content blocks (`text`, `image`, `resource`, ...), as sent.
    pub content: Vec<Value>,
    /// Structured content, if the tool returned any.
    pub structured: Option<Value>,
    /// Whether the tool reported an error.
    pub is_error: bool,
    /// The whole result as received, for `--json` output.
    pub raw: Value,
    /// A 2026-07-28 server asked for input instead of answering, and the call's
    /// [`Downstream`](crate::downstream::Downstream) answers such requests itself: nothing
    /// ran to its end yet (`content` is empty), the client retries with its answers.
    pub input_required: Option<crate::downstream::InputRequired>,
}

/// Limits and places a connection needs beyond the server's own definition.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// Directory for per-server stderr logs (`NAME.log`); `None` keeps them in memory only.
    pub log_dir: Option<PathBuf>,
    /// Tools accepted from one server, across all pages.
    pub max_tools: Option<usize>,
    /// Pages of `tools/list` followed before giving up.
    pub max_pages: Option<usize>,
    /// Who answers a server's elicitation requests; without one, every request is
    /// declined. The capability is declared either way ([`crate::client_capabilities`]),
    /// so a server lists the same tools to every front end. Only stdio connections over
    /// rmcp use it so far; remote servers' requests are declined.
    pub elicitor: Option<std::sync::Arc<dyn crate::elicit::Elicitor>>,
    /// Gives a remote server its OAuth client (store, user agent); without one a 401 ends
    /// the connection with "needs authorization".
    pub oauth: Option<std::sync::Arc<dyn crate::http::OAuthProvider>>,
    /// Reaches relayed servers (`relay = "NAME"`): the channel into a sandbox and the
    /// supervisor there (crate `warden-relay`). Without one, a relayed server fails to
    /// connect with a message that says so.
    pub relay: Option<std::sync::Arc<dyn RelayDialer>>,
    /// Where remote servers' HTTP requests go instead of the network: `None` (reqwest's
    /// own connections) except in the simulator, which answers them in memory
    /// ([`warden_net::Transport`], decision 0041 revision 2).
    pub http_transport: Option<std::sync::Arc<dyn warden_net::Transport>>,
    /// The clock and jitter of remote servers' retries (first connect, reconnect, reopened
    /// event streams): `None` for tokio's clock and a generator seeded from entropy; the
    /// simulator's is seeded from its run.
    pub backoff: Option<crate::http::reconnect::Backoff>,
}

/// Connects relayed servers (`relay = "NAME"`, docs/relay.md). Implemented by
/// `warden-relay`, which depends on this crate; the trait lives here so [`connect`] can
/// route a relayed server without a dependency cycle.
pub trait RelayDialer: Send + Sync {
    /// Opens `spec`'s stream over its relay's channel (starting the channel if needed) and
    /// runs the handshake through it.
    fn connect<'a>(
        &'a self,
        spec: &'a ServerSpec,
        options: &'a ConnectOptions,
    ) -> BoxFuture<'a, Result<Box<dyn Connection>, ConnectFailure>>;
}

impl std::fmt::Debug for dyn RelayDialer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RelayDialer")
    }
}

/// Tools accepted from one server by default.
pub const DEFAULT_MAX_TOOLS: usize = 4096;
/// Pages of `tools/list` followed by default.
pub const DEFAULT_MAX_PAGES: usize = 64;

/// The requests [`Connection::request`] forwards: reads of what a server offers besides
/// tools. Nothing here changes a server's state (a subscription would: not forwarded).
pub const FORWARDED_METHODS: [&str; 6] = [
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
];

/// Whether the transport `spec` names forwards [`FORWARDED_METHODS`] (stdio, Streamable
/// HTTP and relays do; the deprecated HTTP+SSE transport does not): what
/// [`Connection::forwards`] answers once connected, known before the server starts (a
/// server answered from the catalogue cache is not started until it is used).
pub fn transport_forwards(spec: &ServerSpec) -> bool {
    transport_withholds(spec).is_none()
}

/// Why the transport `spec` names forwards nothing but tool calls, when it does not (the
/// end of a sentence naming the server: "is reached over ..."), for errors a client
/// reads. Warden's client of the deprecated HTTP+SSE transport carries tool calls only
/// (no resource, prompt or subscription requests); relays forward reads (decision 0030,
/// revision 2).
pub fn transport_withholds(spec: &ServerSpec) -> Option<&'static str> {
    match &spec.transport {
        warden_config::TransportSpec::Stdio { .. } => None,
        warden_config::TransportSpec::Http { settings, .. } => (settings.transport
            == warden_config::RemoteTransport::Sse)
            .then_some("is reached over the deprecated HTTP+SSE transport"),
        // Relays forward reads (decision 0030, revision 2); not subscriptions.
        warden_config::TransportSpec::Relay { .. } => None,
    }
}

/// Whether a server on the transport `spec` names, which said `info` about itself, keeps
/// resource subscriptions through Warden ([`Connection::subscribes`]), known without a
/// running connection (from the catalogue cache too): it declared `resources.subscribe`,
/// and its transport relays them: stdio and Streamable HTTP, in both eras (2025-11-25:
/// `resources/subscribe`, over HTTP with the updates on the session's GET stream;
/// 2026-07-28: the URIs in the connection's one `subscriptions/listen`). The deprecated
/// HTTP+SSE transport and relayed servers do not (yet).
pub fn transport_subscribes(spec: &ServerSpec, info: &ServerInfo) -> bool {
    if !crate::rmcp_client::declares_subscribe(&info.capabilities) {
        return false;
    }
    match &spec.transport {
        warden_config::TransportSpec::Stdio { .. } => true,
        warden_config::TransportSpec::Http { settings, .. } => {
            settings.transport != warden_config::RemoteTransport::Sse
        }
        warden_config::TransportSpec::Relay { .. } => false,
    }
}

/// The error for a method [`Connection::request`] does not forward.
pub fn not_forwarded(method: &str) -> CallError {
    CallError::Rejected {
        code: -32601,
        message: format!("`{method}` is not forwarded to this server by Warden"),
    }
}

/// Runs `work` within `timeout`; past it, [`CallError::Timeout`] (the work is dropped).
pub(crate) async fn within<T>(
    timeout: Duration,
    work: impl std::future::Future<Output = Result<T, CallError>>,
) -> Result<T, CallError> {
    tokio::time::timeout(timeout, work)
        .await
        .unwrap_or(Err(CallError::Timeout { after: timeout }))
}

/// How long a server said its tool list may be reused (the 2026-07-28 list hints `ttlMs`
/// and `cacheScope`), read from every page of the last complete `tools/list` walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListFreshness {
    /// The shortest `ttlMs` of the pages (absent, negative or not a number: zero).
    pub ttl: Duration,
    /// `Public` only when every page said `"public"`; anything else is `Private`.
    pub scope: CacheScope,
}

/// Who may reuse a listed result (`cacheScope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheScope {
    /// The same for every user: reusable whoever is signed in.
    Public,
    /// Reusable only within the authorization context it was read in.
    Private,
}

impl ListFreshness {
    /// The hints of one page of a list `result` read in `era`; a 2025-11-25 result has
    /// none (zero, private), whatever fields it carries.
    pub fn of_page(result: &serde_json::Value, era: Era) -> ListFreshness {
        if era != Era::Modern {
            return ListFreshness::NONE;
        }
        let ttl = result
            .get("ttlMs")
            .and_then(serde_json::Value::as_u64)
            .map_or(Duration::ZERO, Duration::from_millis);
        let scope = match result.get("cacheScope").and_then(serde_json::Value::as_str) {
            Some("public") => CacheScope::Public,
            _ => CacheScope::Private,
        };
        ListFreshness { ttl, scope }
    }

    /// Not reusable: what a result without hints means.
    pub const NONE: ListFreshness = ListFreshness {
        ttl: Duration::ZERO,
        scope: CacheScope::Private,
    };

    /// The hints of a list made of this page and `other`: the shorter lifetime, and
    /// public only when both are.
    pub fn and(self, other: ListFreshness) -> ListFreshness {
        ListFreshness {
            ttl: self.ttl.min(other.ttl),
            scope: if self.scope == CacheScope::Public && other.scope == CacheScope::Public {
                CacheScope::Public
            } else {
                CacheScope::Private
            },
        }
    }
}

/// A task aborted when this is dropped: a listen stream nobody keeps, or one whose
/// opening was abandoned (its caller timed out) before it was put in place.
pub(crate) struct AbortOnDrop(Option<tokio::task::JoinHandle<()>>);

impl AbortOnDrop {
    /// Guards `task`.
    pub(crate) fn new(task: tokio::task::JoinHandle<()>) -> Self {
        AbortOnDrop(Some(task))
    }

    /// The task, no longer guarded (its new owner aborts it).
    pub(crate) fn keep(mut self) -> Option<tokio::task::JoinHandle<()>> {
        self.0.take()
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

/// A live connection to one server.
///
/// Implementations own the server's process (if any) and stop it in [`Connection::close`];
/// dropping a connection without closing it kills the process group.
pub trait Connection: Send + Sync {
    /// The server's name in Warden's configuration.
    fn name(&self) -> &str;
    /// What the server said about itself during the handshake.
    fn info(&self) -> &ServerInfo;
    /// When the budget of the connection attempt that succeeded began, when that was after
    /// connecting began (a stdio server's start waited for its turn; a stdio server started
    /// again in the modern era after a late answer to the era probe): that attempt had a
    /// connect timeout of its own, and so has the first tool list after it. `None`: the
    /// budget began when connecting began.
    fn retried_at(&self) -> Option<std::time::Instant> {
        None
    }
    /// Lists every tool, following cursors within the configured bounds.
    fn list_tools(&self, timeout: Duration) -> BoxFuture<'_, Result<Vec<ToolDef>, CallError>>;
    /// Calls one tool by its wire name. On timeout, `notifications/cancelled` is sent.
    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        arguments: Option<Map<String, Value>>,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<CallOutcome, CallError>>;
    /// Calls one tool on behalf of the client `context` names, which gets the server's
    /// requests, progress and log messages during the call (see [`crate::downstream`]), or
    /// with the answers of an earlier round. A transport that cannot relay keeps the
    /// default: an ordinary [`Connection::call_tool`], refusing a retry it could not carry
    /// (its answers would be lost without a word).
    fn call_tool_in<'a>(
        &'a self,
        name: &'a str,
        arguments: Option<Map<String, Value>>,
        timeout: Duration,
        context: crate::downstream::CallContext,
    ) -> BoxFuture<'a, Result<CallOutcome, CallError>> {
        if context.retry.is_some() {
            return Box::pin(async move {
                Err(CallError::Protocol {
                    reason: format!(
                        "`{name}` was retried with answers to a server's questions, and this \
                         server's transport does not carry them"
                    ),
                })
            });
        }
        self.call_tool(name, arguments, timeout)
    }
    /// True once after the server said its tool list changed
    /// (`notifications/tools/list_changed`), clearing the mark. The host re-lists the tools
    /// of a marked server at the next turn boundary. A transport that cannot receive the
    /// notification keeps the default: never marked.
    fn take_tools_changed(&self) -> bool {
        false
    }
    /// Whether [`Connection::request`] forwards [`FORWARDED_METHODS`] to the server. A
    /// transport that does not keeps the default, `false` (and the default `request`,
    /// which refuses): a server on it offers nothing but its tools through a gateway,
    /// whatever capabilities it declared. Agrees with [`transport_forwards`].
    fn forwards(&self) -> bool {
        false
    }
    /// Sends one request of the resources, prompts or completion families
    /// ([`FORWARDED_METHODS`]) and returns its result as the server sent it, within
    /// `timeout`. The answer is bounded by the same per-message cap as a tool result (the
    /// server's `max_message_bytes`: it travels on the same transport). A method outside
    /// that list is refused without being sent. A transport that cannot forward keeps the
    /// default: refused, so the gateway offers nothing of that server but its tools.
    fn request<'a>(
        &'a self,
        method: &'a str,
        params: Map<String, Value>,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Value, CallError>> {
        let _ = (params, timeout);
        Box::pin(async move { Err(not_forwarded(method)) })
    }
    /// What the server announced besides its tool list (resource and prompt list changes,
    /// updates of subscribed resources), for a gateway to relay. A transport that does not
    /// keep them keeps the default: `None`.
    fn notices(&self) -> Option<std::sync::Arc<crate::notices::ServerNotices>> {
        None
    }
    /// Whether [`Connection::subscribe`] is offered: the transport keeps subscriptions and
    /// the server declared `resources.subscribe` (agrees with [`transport_subscribes`]).
    /// The default: no.
    fn subscribes(&self) -> bool {
        false
    }
    /// Subscribes this connection to updates of the resource `uri` (`on`), or ends that
    /// subscription (`resources/subscribe`, `resources/unsubscribe`), within `timeout`. Its
    /// updates then appear in [`Connection::notices`]. A transport that does not keep
    /// subscriptions keeps the default: refused without sending anything.
    fn subscribe<'a>(
        &'a self,
        uri: &'a str,
        on: bool,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<(), CallError>> {
        let _ = (uri, timeout);
        let method = if on {
            "resources/subscribe"
        } else {
            "resources/unsubscribe"
        };
        Box::pin(async move { Err(not_forwarded(method)) })
    }
    /// The list hints of the last complete [`Connection::list_tools`], for a host that
    /// caches lists. A transport that does not read them keeps the default: `None`.
    fn list_freshness(&self) -> Option<ListFreshness> {
        None
    }
    /// The last `count` lines the server wrote to stderr.
    fn stderr_tail(&self, count: usize) -> Vec<String>;
    /// Closes the connection and stops the process: close stdin, wait, SIGTERM, SIGKILL.
    fn close(self: Box<Self>) -> BoxFuture<'static, StopReport>;
}

/// Connects to the server `spec` describes, starting it through `launcher` if it is local.
///
/// The whole handshake is bounded by the server's connect timeout, and so is the start:
/// the launcher's blocking work (resolving and hashing what the server runs, recording its
/// pin, forking) runs on a blocking thread, never on an async worker, and a start that
/// outlasts the deadline is given up (its process is killed when it appears).
pub async fn connect(
    spec: &ServerSpec,
    launcher: &std::sync::Arc<dyn Launcher>,
    options: &ConnectOptions,
) -> Result<Box<dyn Connection>, ConnectFailure> {
    match spec.transport {
        warden_config::TransportSpec::Http { .. } => crate::http::connect(spec, options).await,
        warden_config::TransportSpec::Stdio { .. } => {
            crate::rmcp_client::connect(spec, launcher, options).await
        }
        warden_config::TransportSpec::Relay { ref relay, .. } => match &options.relay {
            Some(dialer) => dialer.connect(spec, options).await,
            None => Err(ConnectFailure {
                error: crate::error::ConnectError::Unsupported(format!(
                    "`{}` is relayed through `{relay}`, and this front end has no relay \
                     dialer",
                    spec.name
                )),
                stderr_tail: Vec::new(),
            }),
        },
    }
}
