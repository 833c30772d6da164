//! The one module of the gateway that uses the host core ([`warden_host::Host`]).
//!
//! Everything the gateway needs from the host goes through [`Backend`]: the tools it
//! offers (under the names `warden tools` shows, or the server's own names in the
//! single-server mode), and a tool call made for one client, decided by the policy in that
//! client's own context ([`ClientContext`], which wraps the host's [`Session`] for that
//! client: the session owns the provenance and writes the audit row), approved or refused
//! as the policy says, sent, and labelled into the session. The protocol code above never
//! sees a `Host`, so moving the host to another API changes this file alone.
//!
//! One `Host` (one connection per upstream server) serves every client at once: the host's
//! calling path takes `&self`, so the backend holds it in an [`Arc`] and calls run
//! concurrently. Nothing here holds a lock across an await.
//!
//! An upstream's changed tool list is applied by [`Backend::refresh`] (the host re-reads
//! it and reviews it as at connect: pins, scan, quarantine); the `tools/list` entries
//! follow the host's current catalogue, and a change of what is offered is announced to
//! the transports through [`Backend::changes`], which they relay to their clients.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use warden_host::{ApprovedBy, Catalogue, Host, HostError, Session, ToolsChange};
use warden_policy::{Decision, Verdict};

use crate::aggregate::{
    Aggregate, Kind, MAX_ITEMS_PER_SERVER, MAX_PAGES_PER_SERVER, ServerItems, text_of,
    uri_claimants,
};
use crate::generations::{Generations, REUSE_FOR};
use crate::jsonrpc::{INTERNAL_ERROR, INVALID_PARAMS, RpcError};
use crate::listener::{Listener, Want};
use crate::metrics::{CallOutcome, Metrics, Refusal};
use crate::relayed::RelayTo;
use crate::subscriptions::{Registry, Subscriber};

/// The front end named in audit rows.
const FRONT_END: &str = "serve";

/// One client's conversation as the policy sees it: the host's [`Session`] for it, which
/// names the client in audit rows and owns the provenance of everything its calls have
/// returned to it so far. A result from one server taints this client's later calls to
/// another; it never touches another client's. Made by [`Backend::client`].
pub struct ClientContext {
    session: Session,
}

impl ClientContext {
    /// The client's name in audit rows.
    pub fn name(&self) -> &str {
        self.session.client().unwrap_or(FRONT_END)
    }

    /// Makes this client's calls for `caller` (an authenticated OAuth caller): the
    /// policy's caller rules match on it. The audit rows name it through the client name.
    pub fn with_caller(self, caller: Arc<warden_policy::Caller>) -> ClientContext {
        ClientContext {
            session: self.session.with_caller(caller),
        }
    }

    /// Whether anything untrusted has entered this client's context (for tests and logs).
    pub fn is_tainted(&self) -> bool {
        self.session.label().is_untrusted()
    }
}

/// What a person is asked about a call the policy asks about.
#[derive(Debug, Clone)]
pub struct AskInfo {
    /// The tool as the client named it.
    pub tool: String,
    /// The tool's qualified name (`server__tool`).
    pub qualified: String,
    /// Its server.
    pub server: String,
    /// The arguments (an object).
    pub arguments: Value,
    /// Why the policy asks, one sentence each.
    pub reasons: Vec<String>,
}

/// The answer to an [`AskInfo`].
#[derive(Debug, Clone)]
pub enum AskAnswer {
    /// A person approved this call; `by` says who, for the audit row.
    Approved {
        /// Who approved (`client-elicitation`).
        by: String,
    },
    /// Nobody approved it: the call is refused with this text for the model.
    Refused {
        /// What was asked, why, and how a human can allow it.
        text: String,
    },
    /// The client must answer first (2026-07-28: an `InputRequiredResult` to return).
    Input(Value),
}

/// Who answers when the policy asks about a call: the transport and era decide (an
/// elicitation to the client, an input-required result, or a refusal).
pub trait Asker: Send + Sync {
    /// Asks about one call.
    fn ask<'a>(&'a self, info: &'a AskInfo) -> BoxFuture<'a, AskAnswer>;
}

/// What a call produced for the client.
#[derive(Debug, Clone, PartialEq)]
pub enum CallReply {
    /// A `CallToolResult` (`content`, `structuredContent`, `isError`).
    Result(Value),
    /// An `InputRequiredResult` of Warden's own (2026-07-28: an approval question).
    Input(Value),
    /// The upstream server asked the client for input (2026-07-28): the caller returns it
    /// as an `InputRequiredResult` whose state continues the call.
    Asked(UpstreamAsked),
}

/// An upstream server's questions to the client behind a call, as [`CallReply::Asked`].
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamAsked {
    /// The server that asks.
    pub server: String,
    /// What it asks, and its state.
    pub asked: warden_mcp::InputRequired,
}

/// Why a backend could not be made.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// `--only` names a server that is not configured.
    #[error("--only {server}: no server `{server}` is configured (configured: {known})")]
    UnknownServer {
        /// The name given.
        server: String,
        /// The configured names.
        known: String,
    },
}

/// How often upstream list changes are looked for and applied, at most: a burst of
/// `notifications/tools/list_changed` within one interval is one refresh and one
/// announcement to clients.
pub const DEFAULT_REFRESH_INTERVAL: Duration = Duration::from_millis(500);

/// The host, as the gateway uses it.
pub struct Backend {
    host: Arc<Host>,
    only: Option<String>,
    /// The `tools/list` entries and the catalogue they were built from: rebuilt only when
    /// the host's catalogue was replaced, so every page is a slice of these rather than a
    /// rebuild of every entry per request.
    listed: Mutex<Listed>,
    /// Bumped each time what clients are offered changed.
    changes: watch::Sender<u64>,
    /// Bumped each time the resources or templates offered changed (an upstream said its
    /// list changed, and reading it again showed a difference).
    resources_changes: watch::Sender<u64>,
    /// Bumped each time the prompts offered changed.
    prompts_changes: watch::Sender<u64>,
    /// The clients' resource subscriptions.
    subscriptions: Arc<Registry>,
    /// Held while an upstream subscription is made or ended: the registry and the
    /// upstream connections' subscriptions change together.
    subscribing: tokio::sync::Mutex<()>,
    /// The lists of resources, templates and prompts read from the upstream servers, by
    /// generation ([`crate::generations`]): first pages reuse a fresh one, later pages
    /// come from their cursor's, and reads are routed by the newest.
    aggregates: Mutex<Generations>,
    /// Held while a first page reads the upstream servers: one such read at a time, and
    /// first pages that waited for it take its generation instead of reading again.
    reading: tokio::sync::Mutex<()>,
    /// What was done, for `/metrics`.
    metrics: Metrics,
}

struct Listed {
    from: Arc<Catalogue>,
    entries: Arc<Vec<Value>>,
}

/// What some upstream server the gateway serves offers besides tools (a server the policy
/// hides does not count): the capabilities to declare.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offers {
    /// Resources (and templates).
    pub resources: bool,
    /// Prompts.
    pub prompts: bool,
    /// Argument completion.
    pub completions: bool,
    /// Resource subscriptions (some server offering resources keeps them).
    pub subscribe: bool,
}

/// The error code of a resource that is not found: invalid params, with the URI in
/// `data` (SEP-2164; earlier revisions used -32002).
pub const RESOURCE_NOT_FOUND: i64 = INVALID_PARAMS;

impl Backend {
    /// A backend over `host`. With `only`, the gateway fronts that one server under its
    /// tools' own names (no prefixes); it must be configured (it may have failed to start:
    /// its tools are then absent and calls say why).
    pub fn new(host: Arc<Host>, only: Option<String>) -> Result<Backend, BackendError> {
        if let Some(server) = &only
            && !host
                .servers()
                .iter()
                .any(|entry| &entry.spec.name == server)
        {
            let known: Vec<&str> = host
                .servers()
                .iter()
                .map(|entry| entry.spec.name.as_str())
                .collect();
            return Err(BackendError::UnknownServer {
                server: server.clone(),
                known: known.join(", "),
            });
        }
        let from = host.catalogue();
        let entries = Arc::new(listed_tools(&from, only.as_deref()));
        Ok(Backend {
            host,
            only,
            listed: Mutex::new(Listed { from, entries }),
            changes: watch::channel(0).0,
            resources_changes: watch::channel(0).0,
            prompts_changes: watch::channel(0).0,
            subscriptions: Arc::new(Registry::default()),
            subscribing: tokio::sync::Mutex::new(()),
            aggregates: Mutex::new(Generations::new(generation_base())),
            reading: tokio::sync::Mutex::new(()),
            metrics: Metrics::default(),
        })
    }

    /// Applies the tool lists of the upstream servers that said theirs changed: the host
    /// reads each again and reviews it as at connect (a new or changed definition of a
    /// pinned server is held back, a flagged one quarantined: never served unreviewed).
    /// When what this gateway offers changed, clients are told ([`changes`](Backend::changes)).
    /// Returns what changed, per server read.
    pub async fn refresh(&self) -> Vec<ToolsChange> {
        let changes = self.host.refresh_tools().await;
        let offered_changed = changes.iter().any(|change| {
            self.only.as_ref().is_none_or(|only| &change.server == only)
                && !(change.added.is_empty()
                    && change.removed.is_empty()
                    && change.changed.is_empty())
        });
        for change in &changes {
            if !change.held_back.is_empty() {
                tracing::warn!(
                    server = %change.server,
                    tools = ?change.held_back,
                    "changed tool definitions held back until reviewed (`warden approve {}`)",
                    change.server
                );
            }
        }
        if offered_changed {
            self.changes.send_modify(|generation| *generation += 1);
        }
        changes
    }

    /// Applies upstream list changes for as long as it runs, at most once per `interval`
    /// ([`refresh`](Backend::refresh)), and relays the other announcements of the upstream
    /// servers ([`relay_notices`](Backend::relay_notices)); `warden serve` runs it beside
    /// its transports.
    pub async fn follow_upstreams(&self, interval: Duration) {
        let mut ticks = tokio::time::interval(interval.max(Duration::from_millis(10)));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            self.refresh().await;
            self.relay_notices().await;
        }
    }

    /// A listener of the changes a client hears ([`crate::listener`]), from now on.
    pub fn listener(&self, want: Want) -> Listener {
        Listener::new(
            self.changes.subscribe(),
            self.resources_changes.subscribe(),
            self.prompts_changes.subscribe(),
            want,
        )
    }

    /// A client's handle for resource subscriptions: they end when it is dropped.
    pub fn subscriber(&self) -> Subscriber {
        self.subscriptions.subscriber()
    }

    /// A receiver that sees a new value each time the tools offered changed: transports
    /// relay it as `notifications/tools/list_changed`. Changes in quick succession
    /// coalesce (a receiver sees the latest), so no queue grows.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// A clean context for the client named `name` (as audit rows show it), whose calls
    /// are audited by the host's one audit writer.
    pub fn client(&self, name: impl Into<Arc<str>>) -> ClientContext {
        ClientContext {
            session: self.host.session(FRONT_END).with_client(name),
        }
    }

    /// How many of the servers served are connected, and each one's state by name
    /// (`connected` or `failed`), for the readiness endpoint.
    pub fn server_states(&self) -> (usize, Map<String, Value>) {
        let mut connected = 0;
        let mut states = Map::new();
        for entry in self.host.servers() {
            if self
                .only
                .as_ref()
                .is_some_and(|only| &entry.spec.name != only)
            {
                continue;
            }
            // A server whose last start on a call failed is not ready, though the cache
            // still lists it.
            let state = if entry.ready() {
                connected += 1;
                "connected"
            } else {
                "failed"
            };
            states.insert(entry.spec.name.clone(), Value::String(state.into()));
        }
        (connected, states)
    }

    /// The counters of what this gateway did.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The single server fronted with `--only`, if any.
    pub fn only(&self) -> Option<&str> {
        self.only.as_deref()
    }

    /// The host, to shut it down at exit (only when nothing else holds it).
    pub fn into_host(self) -> Arc<Host> {
        self.host
    }

    /// Every tool offered now, as `tools/list` entries, in the catalogue's stable order
    /// (servers by name, each server's tools in its own order): one snapshot, so the
    /// pages a client reads are consistent unless the list changed in between (it is then
    /// told, and reads again).
    pub fn tools(&self) -> Arc<Vec<Value>> {
        let current = self.host.catalogue();
        let mut listed = self.listed.lock().unwrap_or_else(PoisonError::into_inner);
        if !Arc::ptr_eq(&listed.from, &current) {
            listed.entries = Arc::new(listed_tools(&current, self.only.as_deref()));
            listed.from = current;
        }
        Arc::clone(&listed.entries)
    }

    /// The input schema of the tool the client calls `name`, if it is offered (to check
    /// `Mcp-Param-*` headers against `x-mcp-header` marks).
    pub fn input_schema(&self, name: &str) -> Option<Value> {
        self.host
            .resolve(&self.target(name))
            .ok()
            .map(|tool| tool.def.input_schema.clone())
    }

    fn target(&self, name: &str) -> String {
        match &self.only {
            Some(server) => format!("{server}/{name}"),
            None => name.to_owned(),
        }
    }

    /// Calls the tool the client calls `name` for `client`: checked against its schema,
    /// decided by the policy in the client's context, put to `asker` if the policy asks
    /// (never sent without an approval), sent, its result labelled into the client's
    /// provenance, and audited. An unknown tool is a protocol error; everything else the
    /// model should read (a refusal, bad arguments, a failed server) is a result with
    /// `isError`.
    pub async fn call(
        &self,
        client: &ClientContext,
        name: &str,
        arguments: Value,
        asker: &dyn Asker,
        relay: Option<RelayTo>,
    ) -> Result<CallReply, RpcError> {
        let target = self.target(name);
        let session = &client.session;
        let mut call = match session.prepare(&self.host, &target, arguments) {
            Ok(call) => call,
            Err(HostError::UnknownTool { .. }) => {
                return Err(RpcError::new(
                    INVALID_PARAMS,
                    format!("Unknown tool: {name}"),
                ));
            }
            // Bad arguments are recorded by the session; the model reads why.
            Err(error) => return Ok(CallReply::Result(error_result(&error.to_string()))),
        };
        let tool = call.tool();
        let server = tool.server.clone();
        match call.verdict().decision {
            Decision::Allow => {}
            Decision::Deny => {
                let text = format!(
                    "Warden's policy denies `{name}` (server `{}`); nothing was sent.\nWhy:\n{}",
                    tool.server,
                    reason_list(call.verdict())
                );
                // Dropped unsent: recorded as denied.
                drop(call);
                self.metrics.refused(Refusal::PolicyDenied);
                return Ok(CallReply::Result(error_result(&text)));
            }
            Decision::Ask => {
                let info = AskInfo {
                    tool: name.to_owned(),
                    qualified: tool.qualified.clone(),
                    server: tool.server.clone(),
                    arguments: call.arguments().clone(),
                    reasons: call
                        .verdict()
                        .reasons
                        .iter()
                        .map(|reason| reason.text.to_string())
                        .collect(),
                };
                match asker.ask(&info).await {
                    AskAnswer::Approved { by } => call.approve(ApprovedBy::named(by)),
                    AskAnswer::Refused { text } => {
                        // Dropped unsent: recorded as not approved.
                        drop(call);
                        self.metrics.refused(Refusal::NotApproved);
                        return Ok(CallReply::Result(error_result(&text)));
                    }
                    // This request is recorded as not approved (dropped unsent); the client
                    // answers with a new request, which is a new attempt.
                    AskAnswer::Input(result) => return Ok(CallReply::Input(result)),
                }
            }
        }
        let modern = relay.as_ref().is_some_and(|relay| relay.modern);
        if let Some(relay) = relay {
            call.relay_to(relay.to_server(&server));
        }
        let started = std::time::Instant::now();
        let sent = session.send(&self.host, call).await;
        let outcome = match &sent {
            Ok(outcome) if outcome.is_error => CallOutcome::ToolError,
            Ok(_) => CallOutcome::Ok,
            Err(_) => CallOutcome::Failed,
        };
        self.metrics.upstream(&server, outcome, started.elapsed());
        let reply = match sent {
            Ok(warden_mcp::CallOutcome {
                input_required: Some(asked),
                ..
            }) => {
                return Ok(CallReply::Asked(UpstreamAsked { server, asked }));
            }
            Ok(outcome) => {
                let mut result = json!({"content": outcome.content});
                if let Some(structured) = outcome.structured {
                    result["structuredContent"] = structured;
                }
                if outcome.is_error {
                    result["isError"] = Value::Bool(true);
                }
                result
            }
            // The server needs a capability this 2026-07-28 client did not declare: the
            // client is told which, as the server would have told it.
            Err(HostError::Call {
                source: warden_mcp::CallError::MissingCapability { required, message },
                ..
            }) if modern => {
                return Err(RpcError::new(crate::jsonrpc::MISSING_CAPABILITY, message)
                    .with_data(json!({"requiredCapabilities": required})));
            }
            Err(error) => error_result(&format!("The call failed: {error}")),
        };
        Ok(CallReply::Result(reply))
    }
}

/// Resources, prompts and completion: read from the upstream servers that offer them,
/// aggregated ([`crate::aggregate`]), and labelled into the client's context when their
/// text reaches it.
impl Backend {
    /// Whether the policy hides every tool of `server` (a `hide` rule matching
    /// `server__*`): its resources and prompts are not shown either.
    fn server_hidden(&self, server: &str) -> bool {
        self.host.policy().is_hidden(&format!("{server}__*"))
    }

    /// The servers served here that declared `capability` and are not hidden, by name.
    fn offering(&self, capability: &str) -> Vec<String> {
        self.host
            .servers_offering(capability)
            .into_iter()
            .filter(|server| self.only.as_deref().is_none_or(|only| only == *server))
            .filter(|server| !self.server_hidden(server))
            .map(str::to_owned)
            .collect()
    }

    /// What the upstream servers served here offer besides tools.
    pub fn offers(&self) -> Offers {
        Offers {
            resources: !self.offering("resources").is_empty(),
            prompts: !self.offering("prompts").is_empty(),
            completions: !self.offering("completions").is_empty(),
            subscribe: !self.subscribing().is_empty(),
        }
    }

    /// The servers served here, not hidden, that keep resource subscriptions.
    fn subscribing(&self) -> Vec<String> {
        self.host
            .servers_subscribing()
            .into_iter()
            .filter(|server| self.only.as_deref().is_none_or(|only| only == *server))
            .filter(|server| !self.server_hidden(server))
            .map(str::to_owned)
            .collect()
    }

    /// Reads one list from every server that offers it, all at once (each server's whole
    /// read, every page of it, bounded by one deadline: its call timeout from the start of
    /// the read; and by [`MAX_PAGES_PER_SERVER`] pages and [`MAX_ITEMS_PER_SERVER`] items;
    /// a server that fails or passes its deadline is left out, logged and named in the
    /// aggregate, never failing or holding up the list), aggregates it, and keeps it as
    /// the latest.
    pub async fn aggregate(&self, kind: Kind) -> Arc<Aggregate> {
        self.read_generation(kind).await.1
    }

    /// [`Backend::aggregate`], with the number of the generation it was kept as.
    async fn read_generation(&self, kind: Kind) -> (u64, Arc<Aggregate>) {
        let servers = self.offering(kind.capability());
        let reads = servers.iter().map(|server| async move {
            let deadline = self.call_timeout(server);
            match tokio::time::timeout(deadline, self.read_list(server, kind)).await {
                Ok(read) => read,
                Err(_) => {
                    let why = format!(
                        "its {} did not finish within {} (its call timeout)",
                        kind.method(),
                        warden_mcp::error::humanize(deadline)
                    );
                    tracing::warn!(server = %server, "{} left out: {why}", kind.method());
                    Err(why)
                }
            }
        });
        let mut lists = Vec::new();
        let mut left_out = Vec::new();
        for (server, read) in servers.iter().zip(futures::future::join_all(reads).await) {
            match read {
                Ok(items) => lists.push(items),
                Err(why) => left_out.push((server.clone(), why)),
            }
        }
        let policy = self.host.policy();
        let mut aggregate = Aggregate::build(kind, lists, self.only.is_some(), &|name| {
            policy.is_hidden(name)
        });
        aggregate.left_out = left_out;
        let aggregate = Arc::new(aggregate);
        let generation = self
            .aggregates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keep(kind, Arc::clone(&aggregate), Instant::now());
        (generation, aggregate)
    }

    /// The latest aggregate of `kind`, read now if there is none yet.
    pub async fn latest(&self, kind: Kind) -> Arc<Aggregate> {
        let kept = self
            .aggregates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .newest(kind);
        match kept {
            Some(aggregate) => aggregate,
            // Read once however many ask at once (unknown URIs at start, say).
            None => self.first_page(kind).await.1,
        }
    }

    /// The list a first page of `kind` is served from, and its generation: the newest
    /// one while it is younger than [`REUSE_FOR`], else one read now.
    pub async fn first_page(&self, kind: Kind) -> (u64, Arc<Aggregate>) {
        if let Some(kept) = self.fresh(kind) {
            return kept;
        }
        // The wait is bounded by the read it waits for (every upstream request has its
        // timeout).
        let _reading = self.reading.lock().await;
        match self.fresh(kind) {
            // Read by the first page this one waited behind.
            Some(kept) => kept,
            None => self.read_generation(kind).await,
        }
    }

    fn fresh(&self, kind: Kind) -> Option<(u64, Arc<Aggregate>)> {
        self.aggregates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .fresh(kind, Instant::now(), REUSE_FOR)
    }

    /// Generation `generation` of `kind`, if it is still kept (a cursor's list).
    pub fn generation(&self, kind: Kind, generation: u64) -> Option<Arc<Aggregate>> {
        self.aggregates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(kind, generation)
    }

    /// Sends one forwarded request to `server`, counted as an upstream call.
    async fn forward(
        &self,
        server: &str,
        method: &str,
        params: Map<String, Value>,
    ) -> Result<Value, HostError> {
        let started = std::time::Instant::now();
        let result = self.host.forward(server, method, params).await;
        let outcome = if result.is_ok() {
            CallOutcome::Ok
        } else {
            CallOutcome::Failed
        };
        self.metrics.upstream(server, outcome, started.elapsed());
        result
    }

    /// `server`'s call timeout (the deadline of one aggregated list read).
    fn call_timeout(&self, server: &str) -> Duration {
        self.host
            .servers()
            .iter()
            .find(|entry| entry.spec.name == server)
            .map_or(Duration::from_secs(30), |entry| entry.spec.timeouts.call)
    }

    /// Every item of one list from one server, following its cursors within bounds; why
    /// not, when its read failed.
    async fn read_list(&self, server: &str, kind: Kind) -> Result<ServerItems, String> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        for _page in 0..MAX_PAGES_PER_SERVER {
            let mut params = Map::new();
            if let Some(cursor) = cursor.take() {
                params.insert("cursor".into(), Value::String(cursor));
            }
            let page = match self.forward(server, kind.method(), params).await {
                Ok(page) => page,
                Err(error) => {
                    tracing::warn!(server = %server, "{} left out: {error}", kind.method());
                    return Err(error.to_string());
                }
            };
            for item in page
                .get(kind.key())
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if items.len() == MAX_ITEMS_PER_SERVER {
                    tracing::warn!(server = %server, "{} cut at {MAX_ITEMS_PER_SERVER} items", kind.method());
                    return Ok(ServerItems {
                        server: server.to_owned(),
                        items,
                    });
                }
                items.push(item.clone());
            }
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(next) if !next.is_empty() => cursor = Some(next.to_owned()),
                _ => break,
            }
        }
        Ok(ServerItems {
            server: server.to_owned(),
            items,
        })
    }

    /// The one server a resource `uri` belongs to: the server that lists it or whose
    /// template matches it (listings and templates weigh the same), else the only server
    /// offering resources. A URI two servers claim, either way, is refused, naming them.
    async fn resource_server(&self, uri: &str) -> Result<String, RpcError> {
        // What was read last, then (a URI listed since?) a fresh generation: read again
        // at most once per `REUSE_FOR`, so reads of unknown URIs cannot make the gateway
        // re-read every server (or start generation after generation) at a client's pace.
        for fresh in [false, true] {
            let (resources, templates) = if fresh {
                (
                    self.first_page(Kind::Resources).await.1,
                    self.first_page(Kind::Templates).await.1,
                )
            } else {
                (
                    self.latest(Kind::Resources).await,
                    self.latest(Kind::Templates).await,
                )
            };
            let mut servers = uri_claimants(&resources, &templates, uri);
            match servers.len() {
                0 => continue,
                1 => return Ok(servers.remove(0)),
                _ => {
                    return Err(RpcError::new(
                        INVALID_PARAMS,
                        format!(
                            "the resource `{uri}` is claimed by more than one server ({}); \
                             Warden does not guess which one to read it from",
                            servers.join(", ")
                        ),
                    ));
                }
            }
        }
        let mut offering = self.offering("resources");
        if offering.len() == 1 {
            return Ok(offering.remove(0));
        }
        Err(RpcError::new(
            RESOURCE_NOT_FOUND,
            format!(
                "Resource not found: no server served here lists `{uri}`{}",
                self.withheld("resources")
            ),
        )
        .with_data(json!({"uri": uri})))
    }

    /// The end of a "not found" for `capability`: the servers served here that declared
    /// it but whose transport Warden forwards only tool calls from, and why (their
    /// resources, prompts and subscriptions are not relayed; decision 0039). Empty when
    /// there are none. Hidden servers are never named.
    fn withheld(&self, capability: &str) -> String {
        let named: Vec<String> = self
            .host
            .servers_withholding(capability)
            .into_iter()
            .filter(|(server, _)| self.only.as_deref().is_none_or(|only| only == *server))
            .filter(|(server, _)| !self.server_hidden(server))
            .map(|(server, why)| format!("`{server}` {why}"))
            .collect();
        if named.is_empty() {
            return String::new();
        }
        format!(
            ". Warden relays only tool calls from servers on those transports, not their \
             {capability}, reads or subscriptions: {}",
            named.join("; ")
        )
    }

    /// `resources/read` for `client`: routed to the server the URI belongs to, its
    /// contents labelled into the client's context (untrusted server text, as a tool
    /// result), then returned. The answer is bounded as a tool result is (the server's
    /// `max_message_bytes`).
    pub async fn read_resource(
        &self,
        client: &ClientContext,
        params: &Value,
    ) -> Result<Value, RpcError> {
        let uri = params
            .get("uri")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::new(INVALID_PARAMS, "resources/read needs a string `uri`"))?;
        let started = Instant::now();
        let audited = Audited {
            what: format!("resources/read {uri}"),
            arguments: json!({"uri": uri}),
            started,
        };
        let server = match self.resource_server(uri).await {
            Ok(server) => server,
            Err(error) => return Err(audited.refused(client, error)),
        };
        let mut forwarded = Map::new();
        forwarded.insert("uri".into(), Value::String(uri.to_owned()));
        pass_input_round(params, &mut forwarded);
        let result = self
            .forward(&server, "resources/read", forwarded)
            .await
            .map_err(|error| {
                let error = self.labelled_error(client, &server, uri, error);
                // A resource that is not found names its URI (SEP-2164).
                if error.data.is_none() && matches!(error.code, INVALID_PARAMS | -32002) {
                    error.with_data(json!({"uri": uri}))
                } else {
                    error
                }
            });
        audited.sent(client, &server, result.as_ref());
        let result = result?;
        client
            .session
            .receive(&self.host, &server, uri, &text_of(&result));
        Ok(result)
    }

    /// `prompts/get` for `client`: the prompt resolved by its name here, asked of its
    /// server under its own name, its messages labelled into the client's context, then
    /// returned.
    pub async fn get_prompt(
        &self,
        client: &ClientContext,
        params: &Value,
    ) -> Result<Value, RpcError> {
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::new(INVALID_PARAMS, "prompts/get needs a string `name`"))?;
        let arguments = params.get("arguments").filter(|a| !a.is_null());
        let audited = Audited {
            what: format!("prompts/get {name}"),
            arguments: json!({"name": name, "arguments": arguments}),
            started: Instant::now(),
        };
        let (server, raw) = match self.prompt_origin(name).await {
            Ok(origin) => origin,
            Err(error) => return Err(audited.refused(client, error)),
        };
        let mut forwarded = Map::new();
        forwarded.insert("name".into(), Value::String(raw));
        if let Some(arguments) = arguments {
            forwarded.insert("arguments".into(), arguments.clone());
        }
        pass_input_round(params, &mut forwarded);
        let result = self
            .forward(&server, "prompts/get", forwarded)
            .await
            .map_err(|error| self.labelled_error(client, &server, name, error));
        audited.sent(client, &server, result.as_ref());
        let result = result?;
        client
            .session
            .receive(&self.host, &server, name, &text_of(&result));
        Ok(result)
    }

    async fn prompt_origin(&self, name: &str) -> Result<(String, String), RpcError> {
        if let Some((server, raw)) = self.latest(Kind::Prompts).await.prompt(name) {
            return Ok((server.to_owned(), raw.to_owned()));
        }
        match self.first_page(Kind::Prompts).await.1.prompt(name) {
            Some((server, raw)) => Ok((server.to_owned(), raw.to_owned())),
            None => Err(RpcError::new(
                INVALID_PARAMS,
                format!("Unknown prompt: {name}{}", self.withheld("prompts")),
            )),
        }
    }

    /// `completion/complete`: a prompt argument's completion is asked of the prompt's
    /// server (under the prompt's own name), a resource template's of the server whose
    /// template it is. A server that does not complete answers nothing (no values). The
    /// values (server text the client may show or pass on) and an upstream error's text
    /// are labelled into `client`'s context, as a resource's contents are.
    pub async fn complete(
        &self,
        client: &ClientContext,
        params: &Value,
    ) -> Result<Value, RpcError> {
        let reference = params
            .get("ref")
            .and_then(Value::as_object)
            .ok_or_else(|| RpcError::new(INVALID_PARAMS, "completion/complete needs a `ref`"))?;
        let mut forwarded = match params {
            Value::Object(params) => params.clone(),
            _ => Map::new(),
        };
        forwarded.remove("_meta");
        let (server, source) = match reference.get("type").and_then(Value::as_str) {
            Some("ref/prompt") => {
                let name = reference
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        RpcError::new(INVALID_PARAMS, "a prompt reference needs a `name`")
                    })?;
                let (server, raw) = self.prompt_origin(name).await?;
                forwarded.insert("ref".into(), json!({"type": "ref/prompt", "name": raw}));
                (server, name)
            }
            Some("ref/resource") => {
                let uri = reference
                    .get("uri")
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        RpcError::new(INVALID_PARAMS, "a resource reference needs a `uri`")
                    })?;
                (self.resource_server(uri).await?, uri)
            }
            _ => {
                return Err(RpcError::new(
                    INVALID_PARAMS,
                    "`ref.type` must be `ref/prompt` or `ref/resource`",
                ));
            }
        };
        if !self.offering("completions").contains(&server) {
            return Ok(json!({"completion": {"values": [], "hasMore": false}}));
        }
        let result = self
            .forward(&server, "completion/complete", forwarded)
            .await
            .map_err(|error| self.labelled_error(client, &server, source, error))?;
        let values = completion_text(&result);
        if !values.is_empty() {
            client.session.receive(&self.host, &server, source, &values);
        }
        Ok(result)
    }

    /// `resources/subscribe` for `client` on behalf of `subscriber` (the client's session,
    /// or its listen stream): the URI is routed as a read is (a hidden server's resource
    /// is not found), its server must keep subscriptions, the caps must allow it
    /// ([`crate::subscriptions`]), and the upstream connection is subscribed when nobody
    /// was yet. An upstream's refusal is the client's error (its text labelled into the
    /// client's context, as a failed read's is).
    pub async fn subscribe(
        &self,
        client: &ClientContext,
        subscriber: &Subscriber,
        uri: &str,
    ) -> Result<(), RpcError> {
        let server = self.resource_server(uri).await?;
        if !self.subscribing().contains(&server) {
            return Err(RpcError::new(
                crate::jsonrpc::METHOD_NOT_FOUND,
                format!(
                    "the resource `{uri}` is served by `{server}`, which does not offer \
                     subscriptions through Warden"
                ),
            ));
        }
        let _subscribing = self.subscribing.lock().await;
        let first = self
            .subscriptions
            .admit(subscriber, &server, uri)
            .map_err(|refused| RpcError::new(INVALID_PARAMS, refused.to_string()))?;
        let upstream = self
            .host
            .notices(&server)
            .is_some_and(|notices| notices.is_subscribed(uri));
        if first || !upstream {
            self.host
                .subscribe(&server, uri, true)
                .await
                .map_err(|error| self.labelled_error(client, &server, uri, error))?;
        }
        self.subscriptions.add(subscriber, &server, uri);
        Ok(())
    }

    /// `resources/unsubscribe` on behalf of `subscriber`: its subscription to `uri` ends
    /// (nothing to end is not an error), and the upstream one with it when it was the
    /// last.
    pub async fn unsubscribe(&self, subscriber: &Subscriber, uri: &str) {
        let _subscribing = self.subscribing.lock().await;
        if let Some((server, true)) = self.subscriptions.remove(subscriber, uri)
            && let Err(error) = self.host.subscribe(&server, uri, false).await
        {
            tracing::info!(server = %server, "ending the subscription to {uri} failed: {error}");
        }
    }

    /// Relays what the upstream servers announced besides their tools, once per tick of
    /// [`follow_upstreams`](Backend::follow_upstreams):
    ///
    /// - a changed resource or prompt list of a server served here is read again (every
    ///   server's, aggregated as for a first page) and announced to clients only when what
    ///   they are offered differs;
    /// - the upstream subscriptions follow the clients' (a subscription nobody wants any
    ///   more, because its session ended, is ended; one a restarted server lost is made
    ///   again), and each update of a subscribed resource goes to exactly its subscribers.
    pub async fn relay_notices(&self) {
        let mut resources = false;
        let mut prompts = false;
        for server in self.offering("resources") {
            if let Some(notices) = self.host.notices(&server) {
                resources |= notices.take_resources_changed();
            }
        }
        for server in self.offering("prompts") {
            if let Some(notices) = self.host.notices(&server) {
                prompts |= notices.take_prompts_changed();
            }
        }
        if resources {
            let before = self.newest_entries(&[Kind::Resources, Kind::Templates]);
            let after = {
                let _reading = self.reading.lock().await;
                vec![
                    self.read_generation(Kind::Resources)
                        .await
                        .1
                        .entries
                        .clone(),
                    self.read_generation(Kind::Templates)
                        .await
                        .1
                        .entries
                        .clone(),
                ]
            };
            if before.as_ref() != Some(&after) {
                self.resources_changes
                    .send_modify(|generation| *generation += 1);
            }
        }
        if prompts {
            let before = self.newest_entries(&[Kind::Prompts]);
            let after = {
                let _reading = self.reading.lock().await;
                vec![self.read_generation(Kind::Prompts).await.1.entries.clone()]
            };
            if before.as_ref() != Some(&after) {
                self.prompts_changes
                    .send_modify(|generation| *generation += 1);
            }
        }
        self.follow_subscriptions().await;
    }

    /// The newest kept entries of each of `kinds`, if every one has been read.
    fn newest_entries(&self, kinds: &[Kind]) -> Option<Vec<Vec<Value>>> {
        let aggregates = self
            .aggregates
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        kinds
            .iter()
            .map(|kind| aggregates.newest(*kind).map(|kept| kept.entries.clone()))
            .collect()
    }

    /// Brings the upstream subscriptions in line with the clients' and hands out updates.
    async fn follow_subscriptions(&self) {
        let servers = self.host.servers_subscribing();
        if servers.is_empty() {
            return;
        }
        let _subscribing = self.subscribing.lock().await;
        for server in servers {
            // A server that does not run has no subscriptions to follow; its next start
            // (a call, a read) brings them back here.
            let Some(notices) = self.host.notices(server) else {
                continue;
            };
            let wanted = self.subscriptions.wanted(server);
            for uri in notices.subscribed() {
                if !wanted.contains(&uri)
                    && let Err(error) = self.host.subscribe(server, &uri, false).await
                {
                    tracing::info!(server = %server, "ending the subscription to {uri} failed: {error}");
                }
            }
            for uri in &wanted {
                if !notices.is_subscribed(uri)
                    && let Err(error) = self.host.subscribe(server, uri, true).await
                {
                    tracing::warn!(server = %server, "subscribing again to {uri} failed: {error}");
                }
            }
            for uri in notices.take_updated() {
                self.subscriptions.deliver(server, &uri);
            }
        }
    }

    /// An upstream's failure of a request made for `client` (about `name` of `server`),
    /// as the client's error, its text labelled into the client's context first: the
    /// message is the server's own text and reaches the client as a tool call's failure
    /// does (`The call failed: ...`), so it counts as one.
    fn labelled_error(
        &self,
        client: &ClientContext,
        server: &str,
        name: &str,
        error: HostError,
    ) -> RpcError {
        let error = upstream_error(error);
        client.session.receive(
            &self.host,
            server,
            name,
            &format!("The call failed: {}", error.message),
        );
        error
    }
}

/// The audit row of one resource read or prompt fetch, written through the host's one
/// audit writer (the session's): `tool` names what was asked (`resources/read URI`,
/// `prompts/get server__prompt`), `server` the server it went to. Neither is decided by
/// the policy's rules (a hidden server's are not found), so the decision is empty; the
/// outcome is `ok` (answered), `failed` (sent, and the server answered with an error or
/// did not answer) or `invalid_arguments` (nothing was sent: no server serves it here, or
/// two claim it).
struct Audited {
    what: String,
    arguments: Value,
    started: Instant,
}

impl Audited {
    /// Records a request refused before any server was asked, and returns its error.
    fn refused(self, client: &ClientContext, error: RpcError) -> RpcError {
        let mut attempt = client.session.attempt("", &self.what, self.arguments);
        attempt.outcome = warden_host::Outcome::InvalidArguments;
        attempt.error = Some(error.message.clone());
        client.session.record(attempt);
        error
    }

    /// Records a request sent to `server`, with its answer.
    fn sent(self, client: &ClientContext, server: &str, answer: Result<&Value, &RpcError>) {
        let mut attempt = client.session.attempt(server, &self.what, self.arguments);
        attempt.executed = true;
        attempt.latency = Some(self.started.elapsed());
        match answer {
            Ok(result) => {
                attempt.outcome = warden_host::Outcome::Ok;
                attempt.result_bytes = serde_json::to_vec(result).ok().map(|bytes| bytes.len());
            }
            Err(error) => {
                attempt.outcome = warden_host::Outcome::Failed;
                attempt.error = Some(error.message.clone());
            }
        }
        client.session.record(attempt);
    }
}

/// The completion values of a `completion/complete` answer, one a line.
fn completion_text(result: &Value) -> String {
    result
        .pointer("/completion/values")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first generation number of this run: its start time in nanoseconds, so that a
/// cursor from an earlier run does not name a generation of this one.
fn generation_base() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64)
}

/// An upstream's answer to a forwarded request, as the client's error: the server's own
/// JSON-RPC error passes through (code and message); anything else says what failed.
fn upstream_error(error: HostError) -> RpcError {
    match error {
        HostError::Call {
            source: warden_mcp::CallError::Rejected { code, message },
            ..
        } => RpcError::new(i64::from(code), message),
        other => RpcError::new(INTERNAL_ERROR, other.to_string()),
    }
}

fn reason_list(verdict: &Verdict) -> String {
    verdict
        .reasons
        .iter()
        .map(|reason| format!("  - {}", reason.text))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A 2026-07-28 retry of a read or a prompt after its server asked for input: the client's
/// answers and the server's own state go back to it as sent (decision 0051: not wrapped,
/// unlike a tool call's; the server checks its own state).
fn pass_input_round(params: &Value, forwarded: &mut Map<String, Value>) {
    if let Some(responses) = params.get("inputResponses").filter(|r| r.is_object()) {
        forwarded.insert("inputResponses".into(), responses.clone());
    }
    if let Some(state) = params.get("requestState").filter(|s| s.is_string()) {
        forwarded.insert("requestState".into(), state.clone());
    }
}

/// A tool result with `isError` and one text block.
pub fn error_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

/// The `tools/list` entries of `host`'s catalogue: every tool under its qualified name, or
/// with `only`, that server's tools under their own names.
fn listed_tools(catalogue: &Catalogue, only: Option<&str>) -> Vec<Value> {
    let tools: Box<dyn Iterator<Item = &warden_host::CatalogueTool>> = match only {
        Some(server) => Box::new(catalogue.tools_of(server)),
        None => Box::new(catalogue.tools().iter()),
    };
    tools
        .map(|tool| {
            let def = &tool.def;
            let name = match only {
                Some(_) => def.name.clone(),
                None => tool.qualified.clone(),
            };
            let mut entry = Map::new();
            entry.insert("name".into(), Value::String(name));
            if let Some(title) = &def.title {
                entry.insert("title".into(), Value::String(title.clone()));
            }
            if let Some(description) = &def.description {
                entry.insert("description".into(), Value::String(description.clone()));
            }
            entry.insert("inputSchema".into(), def.input_schema.clone());
            if let Some(schema) = &def.output_schema {
                entry.insert("outputSchema".into(), schema.clone());
            }
            if let Some(annotations) = &def.annotations {
                entry.insert("annotations".into(), annotations.clone());
            }
            Value::Object(entry)
        })
        .collect()
}
