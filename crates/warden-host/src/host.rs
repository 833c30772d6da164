//! The host core: connects every configured server at once, and decides and routes calls.
//!
//! Every front end calls a tool the same way, through a [`Session`] of this host, so none
//! can skip a step:
//!
//! 1. [`Session::prepare`]: resolve the name, check the arguments against the tool's
//!    schema, and let the policy decide the call in the session's context;
//! 2. the front end acts on the verdict: an `ask` is put to a person (a terminal prompt, a
//!    client's elicitation) and a yes recorded with `PreparedCall::approve`; a `deny`
//!    ends here;
//! 3. [`Session::send`]: it sends an allowed call, an asked call only when approved, and a
//!    denied call never; the result enters the session's context with the tool's labels,
//!    and the attempt's audit row is written.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use futures::future::join_all;
use serde::Serialize;
use serde_json::Value;
use warden_config::ServerSpec;
use warden_mcp::{CallError, CallOutcome, ConnectOptions, Connection, Launcher, ServerInfo};
use warden_policy::{Policy, Provenance, Verdict};

use crate::approvals::{Drift, Reviewer, ToolScan};
use crate::audit::{ApprovedBy, AuditLog};
use crate::builder::HostBuilder;
use crate::catalogue::{Catalogue, CatalogueTool, ToolRef};
use crate::schema::{SchemaLimits, Violation};
use crate::session::Session;
use crate::starts::StartGate;

/// Lines of a failed server's stderr shown with its reason.
pub const STDERR_LINES_SHOWN: usize = 10;

/// The state of one configured server.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum ServerStatus {
    /// Connected; its tools are in the catalogue.
    Connected {
        /// What the server said about itself.
        info: ServerInfo,
    },
    /// Not connected, and why.
    Failed {
        /// The reason, in words.
        reason: String,
        /// The server's last stderr lines.
        stderr_tail: Vec<String>,
    },
}

/// One configured server and its state.
pub struct ServerEntry {
    /// Its definition.
    pub spec: ServerSpec,
    /// Its state.
    pub status: ServerStatus,
    /// Its connection while it runs: shared with calls detached from a step
    /// ([`Session::detach`]), filled by a lazy start, emptied by an idle stop, closed at
    /// shutdown. Locked while the server starts, so concurrent calls start it once.
    slot: Arc<tokio::sync::Mutex<Slot>>,
    /// When its status and tools come from the catalogue cache (it was not started): when
    /// they were read from the server.
    cached: Option<std::time::SystemTime>,
    /// Whether its transport forwards resources, prompts and completion
    /// ([`Connection::forwards`]; for a server not started, what its transport would).
    forwards: bool,
}

/// A server's connection, if it runs now.
struct Slot {
    connection: Option<Arc<Box<dyn Connection>>>,
    /// When a call last asked for it or ended, shared with the calls that hold it.
    used: Arc<LastUse>,
    /// Stops it once it has been idle for its `idle_stop`.
    watcher: Option<tokio::task::JoinHandle<()>>,
    /// Its last start's failure (on a call), until a start succeeds: calls fail fast
    /// with it until its back-off ends.
    failed: Option<StartFailed>,
}

/// A failed start on a call, remembered in the server's slot: calls queued behind that
/// start, and calls until its back-off ends, fail at once naming it instead of each
/// starting the server again and waiting a connect timeout of their own.
#[derive(Debug, Clone)]
pub struct StartFailed {
    /// Why it did not start.
    pub reason: String,
    /// Its last stderr lines.
    pub stderr_tail: Vec<String>,
    /// When the start failed.
    pub at: std::time::SystemTime,
    /// The failed starts in a row (1 after the first).
    pub failures: u32,
    /// The back-off after it: no call starts the server again before it ends.
    pub retry_after: Duration,
    /// `at` on the runtime's clock.
    failed_at: tokio::time::Instant,
}

impl StartFailed {
    /// Whether a call that asked for the server at `asked` fails with this failure at
    /// `now`: it was queued behind the start that failed, or the back-off runs.
    fn holds(&self, asked: tokio::time::Instant, now: tokio::time::Instant) -> bool {
        asked <= self.failed_at || now < self.failed_at + self.retry_after
    }
}

/// The back-off after `failures` failed starts in a row: the reconnect policy's (1 s,
/// doubling, at most 30 s; without jitter: a local start hammers no one else).
fn start_back_off(failures: u32) -> Duration {
    warden_mcp::http::reconnect::ceiling(
        &warden_config::ReconnectSpec::default(),
        failures.saturating_sub(1),
    )
}

/// When a server was last used: a call asked for it, or a call ended. What `idle_stop`
/// counts from, so a long call does not make its server look idle when it ends.
#[derive(Debug)]
pub(crate) struct LastUse(std::sync::Mutex<tokio::time::Instant>);

impl LastUse {
    fn new() -> LastUse {
        LastUse(std::sync::Mutex::new(tokio::time::Instant::now()))
    }

    fn touch(&self) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = tokio::time::Instant::now();
    }

    fn at(&self) -> tokio::time::Instant {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A server's connection lent to one call (or forwarded read): when it ends, or is
/// dropped unfinished, that counts as a use of the server.
pub(crate) struct InUse(Arc<LastUse>);

impl Drop for InUse {
    fn drop(&mut self) {
        self.0.touch();
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(watcher) = self.watcher.take() {
            watcher.abort();
        }
    }
}

impl ServerEntry {
    fn new(
        spec: ServerSpec,
        status: ServerStatus,
        connection: Option<Box<dyn Connection>>,
        cached: Option<std::time::SystemTime>,
    ) -> ServerEntry {
        let forwards = connection.as_ref().map_or_else(
            || warden_mcp::transport_forwards(&spec),
            |connection| connection.forwards(),
        );
        ServerEntry {
            forwards,
            spec,
            status,
            slot: Arc::new(tokio::sync::Mutex::new(Slot {
                connection: connection.map(Arc::new),
                used: Arc::new(LastUse::new()),
                watcher: None,
                failed: None,
            })),
            cached,
        }
    }

    /// Its last start on a call that failed, while no start has succeeded since (calls
    /// fail at once with it until [`StartFailed::retry_after`] has passed); `None` also
    /// while it is being started.
    pub fn start_failure(&self) -> Option<StartFailed> {
        self.slot.try_lock().ok()?.failed.clone()
    }

    /// Whether it can serve a call now, as a readiness probe reports it: connected (or
    /// answered from the catalogue cache, to be started on its first call), and its last
    /// start on a call did not fail. A start in progress counts as ready.
    pub fn ready(&self) -> bool {
        matches!(self.status, ServerStatus::Connected { .. }) && self.start_failure().is_none()
    }

    /// Its connection now, if it runs and is not being started.
    pub(crate) fn running(&self) -> Option<Arc<Box<dyn Connection>>> {
        self.slot
            .try_lock()
            .ok()
            .and_then(|slot| slot.connection.clone())
    }

    /// When the server's status and tools come from the catalogue cache (the server was
    /// not started): when they were read from it; `None` for a server started now.
    pub fn cached_at(&self) -> Option<std::time::SystemTime> {
        self.cached
    }
}

/// A call that did not produce a tool result.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// No tool by that name.
    #[error("no tool `{target}`{}", did_you_mean(suggestions))]
    UnknownTool {
        /// The name asked for.
        target: String,
        /// Similar qualified names.
        suggestions: Vec<String>,
    },
    /// The arguments are not a JSON object.
    #[error("arguments for `{tool}` must be a JSON object, got {got}")]
    ArgumentsNotObject {
        /// The qualified tool name.
        tool: String,
        /// The JSON type given.
        got: &'static str,
    },
    /// The arguments break the tool's input schema; nothing was sent.
    #[error(
        "arguments for `{tool}` do not match its input schema (nothing was sent):\n{}",
        list(violations)
    )]
    InvalidArguments {
        /// The qualified tool name.
        tool: String,
        /// Every violation found.
        violations: Vec<Violation>,
    },
    /// The tool's definition changed, or it was withdrawn, between the decision and the
    /// send (its server's list was read again); nothing was sent. Deciding it again
    /// decides it on the definition now offered.
    #[error(
        "`{tool}` changed or was withdrawn after the call was decided (its server's tool list was read again); nothing was sent"
    )]
    Withdrawn {
        /// The qualified tool name.
        tool: String,
    },
    /// The tool's server is not connected.
    #[error("server `{server}` is not available: {reason}")]
    ServerUnavailable {
        /// The server's name.
        server: String,
        /// Why.
        reason: String,
        /// Its last stderr lines.
        stderr_tail: Vec<String>,
    },
    /// The call reached the server but failed there or on the way.
    #[error("calling `{tool}` failed: {source}")]
    Call {
        /// The qualified tool name.
        tool: String,
        /// What went wrong.
        #[source]
        source: CallError,
    },
    /// The policy denies the call; nothing was sent.
    #[error(
        "`{tool}` is denied by policy (nothing was sent):\n{}",
        reasons(verdict)
    )]
    Denied {
        /// The qualified tool name.
        tool: String,
        /// The decision and its reasons.
        verdict: Verdict,
    },
    /// The policy asks about the call and nobody approved it; nothing was sent.
    #[error(
        "`{tool}` needs approval and was not approved (nothing was sent):\n{}",
        reasons(verdict)
    )]
    NotApproved {
        /// The qualified tool name.
        tool: String,
        /// The decision and its reasons.
        verdict: Verdict,
    },
}

impl HostError {
    /// Whether the call this error ended may have run on its server (it was written to
    /// the connection): what the audit row and the agent's event both record as executed.
    pub fn may_have_run(&self) -> bool {
        matches!(self, HostError::Call { source, .. } if source.may_have_reached_server())
    }
}

fn reasons(verdict: &Verdict) -> String {
    verdict
        .reasons
        .iter()
        .map(|reason| format!("  - {}", reason.text))
        .collect::<Vec<_>>()
        .join("\n")
}

fn did_you_mean(suggestions: &[String]) -> String {
    if suggestions.is_empty() {
        String::new()
    } else {
        format!(" (did you mean {}?)", suggestions.join(", "))
    }
}

fn list(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|violation| format!("  - {violation}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// What the front end checks around connecting, beyond the policy: whether a server may be
/// started at all, and which of the tools it lists may be offered. The host calls it for
/// every server, so no front end can connect around it, and keeps it to review every tool
/// list a server sends later ([`Host::refresh_tools`]).
pub trait Review: Send + Sync {
    /// Called before `spec` is started; `Err(reason)` leaves it unstarted, failed with
    /// that reason.
    fn admit(&self, spec: &ServerSpec) -> Result<(), String>;
    /// Called with the tools a connected server listed; what it returns is what the
    /// catalogue is built from (tools left out are neither listed nor callable).
    fn tools(&self, spec: &ServerSpec, tools: Vec<warden_mcp::ToolDef>)
    -> Vec<warden_mcp::ToolDef>;
    /// Told the tools a server answered from the catalogue cache offers (it was reviewed in
    /// an earlier process), so that the servers reviewed in this one are compared with its
    /// names too (a description that directs the use of its tools, a look-alike name).
    fn known(&self, _spec: &ServerSpec, _tools: &[warden_mcp::ToolDef]) {}
}

/// A [`Review`] that admits every server and offers every tool.
pub struct NoReview;

impl Review for NoReview {
    fn admit(&self, _spec: &ServerSpec) -> Result<(), String> {
        Ok(())
    }

    fn tools(
        &self,
        _spec: &ServerSpec,
        tools: Vec<warden_mcp::ToolDef>,
    ) -> Vec<warden_mcp::ToolDef> {
        tools
    }
}

/// How one server's offered tools changed when its list was read again.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ToolsChange {
    /// The server.
    pub server: String,
    /// Raw names now offered that were not before, in the server's order.
    pub added: Vec<String>,
    /// Raw names offered before and no longer.
    pub removed: Vec<String>,
    /// Raw names the server lists that the review holds back (new or changed definitions
    /// of a pinned server, quarantined ones), and did not hold back at the last reading:
    /// what was held back before has been said already.
    pub held_back: Vec<String>,
    /// Offered before and after, with a different definition (only when the review lets
    /// a changed definition through).
    pub changed: Vec<String>,
    /// Why the list could not be read again; the old list is kept.
    pub error: Option<String>,
}

/// Connected servers, the catalogue of their tools, and the policy that decides calls.
///
/// The catalogue sits behind a swap: [`Host::catalogue`] hands out the current one as an
/// `Arc` (a snapshot that never changes), and [`Host::refresh_tools`] builds a new one from
/// reviewed lists and replaces it, taking `&self`, so a host shared by many sessions
/// (`Arc<Host>`, the gateway) applies a server's changed list while calls run. The lock
/// around the pointer is held only to clone or replace it.
pub struct Host {
    entries: Vec<ServerEntry>,
    catalogue: RwLock<Arc<Catalogue>>,
    policy: Arc<Policy>,
    /// The review applied at connect, kept for later tool lists.
    review: Arc<dyn Review>,
    /// What the catalogue was last built from; locked for a whole refresh, so refreshes
    /// take turns and never build from each other's half-read lists.
    lists: tokio::sync::Mutex<Lists>,
    /// The state-store guards the host was built with (audit log, approvals and pins).
    guard: Arc<Guard>,
    /// What it takes to start a server later (a lazy start on its first call, or again
    /// after an idle stop); `None`: servers are only started when the host is built.
    starter: Option<Starter>,
}

/// What it takes to start a server: the launcher, the connection options and the turns.
pub(crate) struct Starter {
    pub(crate) launcher: Arc<dyn Launcher>,
    pub(crate) options: ConnectOptions,
    pub(crate) starts: Arc<StartGate>,
    /// `idle_stop` for servers that set none.
    pub(crate) idle_stop: Option<Duration>,
}

/// What the catalogue was last built from.
#[derive(Default)]
struct Lists {
    /// Each connected server's reviewed tools, as the catalogue was last built from them.
    reviewed: BTreeMap<String, Vec<warden_mcp::ToolDef>>,
    /// Each connected server's raw tool names the review held back at the last reading.
    held: BTreeMap<String, HashSet<String>>,
    /// What lazy starts changed in the catalogue (a cached list that differs from the
    /// live one: drift, a tool added or gone) since the last [`Host::refresh_tools`], which
    /// returns them with its own, so whoever announces a refresh (the gateway's
    /// `tools/list_changed`, the agent's notice to the model) announces these too; and the
    /// changes of a refresh that was dropped after it rebuilt the catalogue.
    started: Vec<ToolsChange>,
    /// Servers whose changed list a refresh began to read and did not finish (it was
    /// dropped: a turn ran out, a client went away). Their connection's mark was taken
    /// already, so the next refresh reads them again: a change is never lost.
    unread: std::collections::BTreeSet<String>,
}

impl Lists {
    /// Makes `offered` the reviewed list of `server`, which listed `listed` of which the
    /// review held back `held`; returns how its offered tools changed.
    fn apply(
        &mut self,
        server: &str,
        listed: &[String],
        offered: Vec<warden_mcp::ToolDef>,
        held: HashSet<String>,
    ) -> ToolsChange {
        let mut change = ToolsChange {
            server: server.to_owned(),
            ..ToolsChange::default()
        };
        let before = self.reviewed.remove(server).unwrap_or_default();
        let already = self
            .held
            .insert(server.to_owned(), held)
            .unwrap_or_default();
        describe_change(&mut change, &before, &offered, listed, &already);
        self.reviewed.insert(server.to_owned(), offered);
        change
    }
}

/// What a host built with a state store keeps of it.
#[derive(Default)]
pub(crate) struct Guard {
    /// The audit writer every session of this host writes to.
    pub(crate) audit: Option<Arc<AuditLog>>,
    /// The approvals, definition pins and quarantine, for reports.
    pub(crate) reviewer: Option<Arc<Reviewer>>,
    /// The store the catalogue cache is written to, after every review by the store's own
    /// reviewer (not when a front end replaced the review: `warden approve` offers tools
    /// that are not pinned yet).
    pub(crate) cache: Option<Arc<std::sync::Mutex<warden_store::Store>>>,
}

impl Guard {
    /// Records what `servers` offered in the catalogue cache, on the calling (blocking)
    /// thread.
    /// A server whose review found drift (a tool changed, added or removed since its pins)
    /// counts as holding something back: it gets no row, so every listing reports it.
    fn save_catalogues(&self, servers: &[crate::cache::Reviewed<'_>]) {
        if servers.is_empty() {
            return;
        }
        let Some(store) = &self.cache else {
            return;
        };
        let drift = self
            .reviewer
            .as_ref()
            .map(|reviewer| reviewer.drift())
            .unwrap_or_default();
        let servers: Vec<crate::cache::Reviewed<'_>> = servers
            .iter()
            .map(|&server| {
                let drifted = drift
                    .get(&server.spec.name)
                    .is_some_and(|found| !found.is_empty());
                crate::cache::Reviewed {
                    held: server.held || drifted,
                    ..server
                }
            })
            .collect();
        let mut store = store.lock().unwrap_or_else(PoisonError::into_inner);
        crate::cache::save(&mut store, &servers);
    }
}

impl Host {
    /// A builder: the one way every front end makes a host (see [`HostBuilder`]).
    pub fn builder(policy: Arc<Policy>) -> HostBuilder {
        HostBuilder::new(policy)
    }

    /// Connects to every server in `specs` at once. A server that fails, or is slow, costs
    /// only itself: the others are connected as soon as they answer, and every wait is
    /// bounded by that server's connect timeout. The catalogue is built under `policy`:
    /// each tool's facts are computed once, and hidden tools are left out; `review`
    /// decides which servers start and which of their tools are offered, now and whenever
    /// a server's tool list is read again.
    pub(crate) async fn connect_all(
        specs: Vec<ServerSpec>,
        cached: Vec<(ServerSpec, crate::cache::Cached)>,
        policy: Arc<Policy>,
        review: Arc<dyn Review>,
        guard: Guard,
        starter: Starter,
    ) -> Self {
        let attempts = specs.into_iter().map(|spec| {
            connect_one(
                spec,
                &starter.launcher,
                &starter.options,
                &review,
                &starter.starts,
            )
        });
        let results = join_all(attempts).await;
        let guard = Arc::new(guard);
        let saving = Arc::clone(&guard);
        // The review reads and writes the store (pins) and scans every description: blocking
        // work, done on a blocking thread, one server after the other in the order they
        // answered (the scan compares each server's names with those reviewed before it).
        let reviewing = Arc::clone(&review);
        let reviewed = tokio::task::spawn_blocking(move || {
            let mut entries = Vec::with_capacity(results.len());
            let mut lists = BTreeMap::new();
            let mut held = BTreeMap::new();
            // The cached servers' names first: a server reviewed now is scanned against
            // every server of the catalogue, not only those started in this process.
            for (spec, cached) in &cached {
                reviewing.known(spec, &cached.tools);
            }
            let mut freshness = BTreeMap::new();
            for (entry, tools, hints) in results {
                if let Some(hints) = hints {
                    freshness.insert(entry.spec.name.clone(), hints);
                }
                if let Some(tools) = tools {
                    let listed: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
                    let tools = reviewing.tools(&entry.spec, tools);
                    held.insert(entry.spec.name.clone(), held_back(&listed, &tools));
                    lists.insert(entry.spec.name.clone(), tools);
                }
                entries.push(entry);
            }
            let started: Vec<crate::cache::Reviewed<'_>> = entries
                .iter()
                .filter_map(|entry: &ServerEntry| match &entry.status {
                    ServerStatus::Connected { info } => {
                        let held = held
                            .get(&entry.spec.name)
                            .is_some_and(|held: &HashSet<String>| !held.is_empty());
                        lists
                            .get(&entry.spec.name)
                            .map(|tools: &Vec<warden_mcp::ToolDef>| crate::cache::Reviewed {
                                spec: &entry.spec,
                                info,
                                offered: tools.as_slice(),
                                held,
                                freshness: freshness.get(&entry.spec.name).copied(),
                            })
                    }
                    ServerStatus::Failed { .. } => None,
                })
                .collect();
            saving.save_catalogues(&started);
            // Servers answered from the cache: their cached tools are pinned definitions
            // the review offered when they were cached (see `cache`).
            for (spec, cached) in cached {
                lists.insert(spec.name.clone(), cached.tools);
                entries.push(ServerEntry::new(
                    spec,
                    ServerStatus::Connected { info: cached.info },
                    None,
                    Some(cached.fetched),
                ));
            }
            (entries, lists, held)
        })
        .await;
        let (mut entries, lists, held) = match reviewed {
            Ok(reviewed) => reviewed,
            Err(ended) if ended.is_panic() => std::panic::resume_unwind(ended.into_panic()),
            // Only when the runtime shuts down: nothing is offered.
            Err(_) => (Vec::new(), BTreeMap::new(), BTreeMap::new()),
        };
        entries.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
        let catalogue = build_catalogue(&lists, &policy);
        let host = Self {
            entries,
            catalogue: RwLock::new(Arc::new(catalogue)),
            policy,
            review,
            lists: tokio::sync::Mutex::new(Lists {
                reviewed: lists,
                held,
                started: Vec::new(),
                unread: Default::default(),
            }),
            guard,
            starter: Some(starter),
        };
        // Servers started now stop when idle too.
        for entry in &host.entries {
            let mut slot = entry.slot.lock().await;
            if slot.connection.is_some() {
                host.watch_idle(entry, &mut slot);
            }
        }
        host
    }

    /// Starts the idle watcher of `entry`'s running server, if it has an `idle_stop`.
    fn watch_idle(&self, entry: &ServerEntry, slot: &mut Slot) {
        let idle = entry
            .spec
            .lifecycle
            .idle_stop
            .or(self.starter.as_ref().and_then(|starter| starter.idle_stop));
        if let Some(idle) = idle {
            slot.watcher = Some(tokio::spawn(stop_when_idle(
                Arc::downgrade(&entry.slot),
                idle,
                entry.spec.name.clone(),
            )));
        }
    }

    /// `entry`'s connection, started now if it does not run (its first call, or its first
    /// after an idle stop). A failed start is recorded in the slot: the calls that were
    /// queued behind it fail at once with its reason, and so does every call until its
    /// back-off ([`start_back_off`]) ends; the next call after that starts it again.
    async fn ensure_running(
        &self,
        entry: &ServerEntry,
    ) -> Result<(Arc<Box<dyn Connection>>, InUse), HostError> {
        let asked = tokio::time::Instant::now();
        let mut slot = entry.slot.lock().await;
        let now = tokio::time::Instant::now();
        slot.used.touch();
        let in_use = InUse(Arc::clone(&slot.used));
        if let Some(connection) = &slot.connection {
            return Ok((Arc::clone(connection), in_use));
        }
        if let Some(failed) = slot
            .failed
            .as_ref()
            .filter(|failed| failed.holds(asked, now))
        {
            let retry = (failed.failed_at + failed.retry_after).saturating_duration_since(now);
            return Err(HostError::ServerUnavailable {
                server: entry.spec.name.clone(),
                reason: format!(
                    "{} (its start failed {} ago; the next call after {} starts it again)",
                    failed.reason,
                    warden_mcp::error::humanize(now.saturating_duration_since(failed.failed_at)),
                    warden_mcp::error::humanize(retry),
                ),
                stderr_tail: failed.stderr_tail.clone(),
            });
        }
        // Boxed: a start is rare and its future large (spawn, handshake, review), and every
        // call's future would otherwise embed it (the gateway's per-request tasks too).
        match Box::pin(self.start_lazily(entry, &mut slot)).await {
            Ok(connection) => {
                slot.failed = None;
                Ok((connection, in_use))
            }
            Err(error) => {
                if let HostError::ServerUnavailable {
                    reason,
                    stderr_tail,
                    ..
                } = &error
                {
                    let failures = slot.failed.as_ref().map_or(0, |f| f.failures) + 1;
                    let retry_after = start_back_off(failures);
                    tracing::warn!(
                        server = %entry.spec.name,
                        "its start failed ({failures} in a row); calls fail at once for {}: {reason}",
                        warden_mcp::error::humanize(retry_after)
                    );
                    slot.failed = Some(StartFailed {
                        reason: reason.clone(),
                        stderr_tail: stderr_tail.clone(),
                        at: std::time::SystemTime::now(),
                        failures,
                        retry_after,
                        failed_at: tokio::time::Instant::now(),
                    });
                }
                Err(error)
            }
        }
    }

    /// Starts `entry`'s server (its first call, or its first after an idle stop) in its
    /// turn, passes its tool list through the review exactly as at connect (a definition
    /// that differs from its pin is drift, held back, whatever the catalogue cache showed),
    /// rebuilds the catalogue and updates the cache. `slot` is the entry's, locked.
    async fn start_lazily(
        &self,
        entry: &ServerEntry,
        slot: &mut Slot,
    ) -> Result<Arc<Box<dyn Connection>>, HostError> {
        let Some(starter) = &self.starter else {
            return Err(HostError::ServerUnavailable {
                server: entry.spec.name.clone(),
                reason: "not connected".into(),
                stderr_tail: Vec::new(),
            });
        };
        tracing::info!(server = %entry.spec.name, "starting on first use");
        let started = start_server(
            entry.spec.clone(),
            &starter.launcher,
            &starter.options,
            &self.review,
            &starter.starts,
        )
        .await;
        let (connection, tools) =
            started.map_err(|(reason, stderr_tail)| HostError::ServerUnavailable {
                server: entry.spec.name.clone(),
                reason,
                stderr_tail,
            })?;
        let info = connection.info().clone();
        let freshness = connection.list_freshness();
        self.apply_list(&entry.spec, info, tools, freshness).await;
        let connection = Arc::new(connection);
        slot.connection = Some(Arc::clone(&connection));
        slot.used.touch();
        self.watch_idle(entry, slot);
        Ok(connection)
    }

    /// Connects the server `name` that did not connect at first (a remote server the
    /// person has just signed in to, `warden chat`): started as a lazy start is (its tool
    /// list reviewed, the catalogue rebuilt with its tools), then shown as connected.
    /// Nothing happens to a server that runs already.
    pub async fn connect_again(&mut self, name: &str) -> Result<(), HostError> {
        let unavailable = |reason: String| HostError::ServerUnavailable {
            server: name.to_owned(),
            reason,
            stderr_tail: Vec::new(),
        };
        let index = self
            .entries
            .iter()
            .position(|entry| entry.spec.name == name)
            .ok_or_else(|| unavailable("no server by that name".to_owned()))?;
        let info = {
            let entry = &self.entries[index];
            let mut slot = entry.slot.lock().await;
            let connection = match &slot.connection {
                Some(connection) => Arc::clone(connection),
                None => {
                    let started = Box::pin(self.start_lazily(entry, &mut slot)).await?;
                    slot.failed = None;
                    started
                }
            };
            connection.info().clone()
        };
        self.entries[index].status = ServerStatus::Connected { info };
        Ok(())
    }

    /// Starts the server `name` anew: a running connection is stopped first (closed once
    /// the calls holding it have let go, within half a second; otherwise left to them and
    /// dropped with the last), then the server is started as by [`Host::connect_again`].
    /// For a remote server the person has just signed in to again: its running
    /// connection still holds the token that lapsed.
    pub async fn restart(&mut self, name: &str) -> Result<(), HostError> {
        if let Some(entry) = self.entries.iter().find(|entry| entry.spec.name == name)
            && stop_slot(&entry.slot).await
        {
            tracing::info!(server = %name, "stopped, to be started again");
        }
        self.connect_again(name).await
    }

    /// Reviews the tool list a server just sent at its start, makes it the server's list
    /// in the catalogue, and records it in the catalogue cache.
    pub(crate) async fn apply_list(
        &self,
        spec: &ServerSpec,
        info: ServerInfo,
        tools: Vec<warden_mcp::ToolDef>,
        freshness: Option<warden_mcp::ListFreshness>,
    ) {
        let mut lists = self.lists.lock().await;
        let review = Arc::clone(&self.review);
        let guard = Arc::clone(&self.guard);
        let reviewing = spec.clone();
        let reviewed = tokio::task::spawn_blocking(move || {
            let names: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
            let offered = review.tools(&reviewing, tools);
            let held = held_back(&names, &offered);
            guard.save_catalogues(&[crate::cache::Reviewed {
                spec: &reviewing,
                info: &info,
                offered: offered.as_slice(),
                held: !held.is_empty(),
                freshness,
            }]);
            (names, offered, held)
        })
        .await;
        let (names, offered, held) = match reviewed {
            Ok(reviewed) => reviewed,
            Err(ended) if ended.is_panic() => std::panic::resume_unwind(ended.into_panic()),
            // Only when the runtime shuts down: nothing of it is offered.
            Err(_) => (Vec::new(), Vec::new(), HashSet::new()),
        };
        let change = lists.apply(&spec.name, &names, offered, held);
        if change
            != (ToolsChange {
                server: spec.name.clone(),
                ..ToolsChange::default()
            })
        {
            tracing::warn!(
                server = %spec.name,
                held_back = ?change.held_back,
                changed = ?change.changed,
                removed = ?change.removed,
                added = ?change.added,
                "its tools differ from the catalogue cache's"
            );
            // Announced with the next refresh, like a list the server said had changed.
            lists.started.push(change);
        }
        self.rebuild(&lists);
    }

    /// Replaces the catalogue with one built from `lists`.
    fn rebuild(&self, lists: &Lists) {
        let catalogue = Arc::new(build_catalogue(&lists.reviewed, &self.policy));
        *self
            .catalogue
            .write()
            .unwrap_or_else(PoisonError::into_inner) = catalogue;
    }

    /// A new session of `front_end` (`cli`, `run`, `chat`, `serve`) on this host: a clean
    /// context, whose calls are recorded in this host's audit log. Cheap: a gateway makes
    /// one per client.
    pub fn session(&self, front_end: &str) -> Session {
        Session::new(front_end, self.guard.audit.clone())
    }

    /// The tool definitions that differ from their pins, by server name (empty without a
    /// state store).
    pub fn drift(&self) -> BTreeMap<String, Vec<Drift>> {
        self.guard
            .reviewer
            .as_ref()
            .map(|reviewer| reviewer.drift())
            .unwrap_or_default()
    }

    /// The description scan of every listed tool, by server name (empty without a state
    /// store).
    pub fn scans(&self) -> BTreeMap<String, Vec<ToolScan>> {
        self.guard
            .reviewer
            .as_ref()
            .map(|reviewer| reviewer.scans())
            .unwrap_or_default()
    }

    /// Reads again the tool list of every connected server that said its list changed
    /// since the last time (`notifications/tools/list_changed`), all at once, each bounded
    /// by the server's connect timeout; passes each list through the same review as at
    /// connect, on a blocking thread (a new or changed tool of a pinned server is held back
    /// exactly as it would be at connect: drift is caught, never served), and replaces the
    /// catalogue with one rebuilt in its stable order: servers by name, each server's tools
    /// in its own order, so the tools that did not change keep their order.
    ///
    /// Takes `&self`: a shared host applies a changed list while sessions call tools. A
    /// call already prepared keeps the catalogue it was decided on (its [`ToolRef`]), and
    /// is refused at send if its tool is no longer offered with that same definition
    /// ([`HostError::Withdrawn`]). Refreshes take turns. Returns one entry per server whose
    /// list was read, after those of the servers started lazily since the last refresh
    /// whose live list differed from the cached one (their catalogue was applied at the
    /// start; they are returned here so that they are announced as a refresh is).
    pub async fn refresh_tools(&self) -> Vec<ToolsChange> {
        let mut lists = self.lists.lock().await;
        // A server being started now is skipped: its start reads its list anyway.
        let marked: Vec<(&ServerEntry, Arc<Box<dyn Connection>>)> = self
            .entries
            .iter()
            .filter_map(|entry| entry.running().map(|connection| (entry, connection)))
            .filter(|(entry, connection)| {
                // The mark is taken either way; a list left unread is read too.
                connection.take_tools_changed() | lists.unread.contains(&entry.spec.name)
            })
            .collect();
        if marked.is_empty() {
            return std::mem::take(&mut lists.started);
        }
        // Until their lists are read (or fail to be), even if this refresh is dropped.
        for (entry, _) in &marked {
            lists.unread.insert(entry.spec.name.clone());
        }
        let reads = marked.into_iter().map(|(entry, connection)| async move {
            let listed = connection.list_tools(entry.spec.timeouts.connect).await;
            (entry, listed)
        });
        let read: Vec<(ServerSpec, Result<Vec<warden_mcp::ToolDef>, CallError>)> = join_all(reads)
            .await
            .into_iter()
            .map(|(entry, listed)| (entry.spec.clone(), listed))
            .collect();
        // The review reads and writes the store and scans descriptions: blocking work.
        let review = Arc::clone(&self.review);
        let reviewed = tokio::task::spawn_blocking(move || {
            read.into_iter()
                .map(|(spec, listed)| {
                    let listed = listed.map(|tools| {
                        let names: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
                        let offered = review.tools(&spec, tools);
                        let held = held_back(&names, &offered);
                        (names, offered, held)
                    });
                    (spec.name, listed)
                })
                .collect::<Vec<_>>()
        })
        .await;
        let reviewed = match reviewed {
            Ok(reviewed) => reviewed,
            Err(ended) if ended.is_panic() => std::panic::resume_unwind(ended.into_panic()),
            // Only when the runtime shuts down: the old catalogue stays.
            Err(_) => return std::mem::take(&mut lists.started),
        };
        let mut changes = Vec::new();
        let mut rebuilt = false;
        for (name, listed) in reviewed {
            lists.unread.remove(&name);
            match listed {
                Ok((listed_names, offered, held)) => {
                    changes.push(lists.apply(&name, &listed_names, offered, held));
                    rebuilt = true;
                }
                Err(error) => {
                    tracing::warn!(server = %name, "the changed tool list could not be read: {error}");
                    changes.push(ToolsChange {
                        server: name,
                        error: Some(error.to_string()),
                        ..ToolsChange::default()
                    });
                }
            }
        }
        if rebuilt {
            self.rebuild(&lists);
        }
        // Returned by this refresh or, if it is dropped before it returns, by the next one:
        // a catalogue that changed is always announced.
        lists.started.extend(changes.iter().cloned());
        if rebuilt {
            self.save_refreshed(&changes, &lists).await;
        }
        std::mem::take(&mut lists.started)
    }

    /// Records the re-read lists of the servers in `changes` in the catalogue cache, on a
    /// blocking thread.
    async fn save_refreshed(&self, changes: &[ToolsChange], lists: &Lists) {
        if self.guard.cache.is_none() {
            return;
        }
        let cache = Arc::clone(&self.guard);
        type Saved = (
            ServerSpec,
            ServerInfo,
            Vec<warden_mcp::ToolDef>,
            bool,
            Option<warden_mcp::ListFreshness>,
        );
        let servers: Vec<Saved> = changes
            .iter()
            .filter(|change| change.error.is_none())
            .filter_map(|change| {
                let entry = self.entries.iter().find(|e| e.spec.name == change.server)?;
                let ServerStatus::Connected { info } = &entry.status else {
                    return None;
                };
                let tools = lists.reviewed.get(&change.server)?.clone();
                let held = lists
                    .held
                    .get(&change.server)
                    .is_some_and(|held| !held.is_empty());
                let freshness = entry
                    .running()
                    .and_then(|connection| connection.list_freshness());
                Some((entry.spec.clone(), info.clone(), tools, held, freshness))
            })
            .collect();
        let saved = tokio::task::spawn_blocking(move || {
            let borrowed: Vec<crate::cache::Reviewed<'_>> = servers
                .iter()
                .map(
                    |(spec, info, tools, held, freshness)| crate::cache::Reviewed {
                        spec,
                        info,
                        offered: tools.as_slice(),
                        held: *held,
                        freshness: *freshness,
                    },
                )
                .collect();
            cache.save_catalogues(&borrowed);
        })
        .await;
        if let Err(ended) = saved
            && ended.is_panic()
        {
            std::panic::resume_unwind(ended.into_panic());
        }
    }

    /// The policy calls are decided with.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Decides a call of `tool` with `arguments` in a context whose provenance is
    /// `context` (`Provenance::new()` for a clean one: only the user's own words), for no
    /// particular caller. Pure and fast; [`prepare`](Host::prepare) decides the same way,
    /// with the session's caller, if it has one.
    pub fn decide(&self, tool: &CatalogueTool, arguments: &Value, context: &Provenance) -> Verdict {
        self.policy.decide(&tool.facts, arguments, context)
    }

    /// Every configured server, by name.
    pub fn servers(&self) -> &[ServerEntry] {
        &self.entries
    }

    /// The tools of all connected servers: the current catalogue, a snapshot that does
    /// not change (a refresh replaces it with a new one).
    pub fn catalogue(&self) -> Arc<Catalogue> {
        Arc::clone(
            &self
                .catalogue
                .read()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// Whether `tool`, decided on some catalogue, is still offered with the same
    /// definition by the current one (always, when it was decided on the current one).
    pub(crate) fn still_offers(&self, tool: &ToolRef) -> bool {
        let current = self.catalogue();
        Arc::ptr_eq(&current, tool.catalogue()) || current.still_offers(&tool.qualified, &tool.def)
    }

    /// Finds the tool `target` names (`server/tool` or a qualified name).
    ///
    /// A tool the policy hides is reported exactly like a tool that does not exist (no
    /// suggestion names it either), so that no front end can tell a model about it; the
    /// hiding rule is logged, for the operator.
    pub fn resolve(&self, target: &str) -> Result<ToolRef, HostError> {
        let catalogue = self.catalogue();
        if let Some(tool) = catalogue.resolve_shared(target) {
            return Ok(tool);
        }
        if let Some(hidden) = catalogue.hidden_tool(target) {
            tracing::info!(tool = %hidden.qualified, "refused as unknown: {}", hidden.reason);
        }
        let names: Vec<&str> = self.entries.iter().map(|e| e.spec.name.as_str()).collect();
        for server in crate::catalogue::candidate_servers(target, &names) {
            if let Some(entry) = self.entries.iter().find(|e| e.spec.name == server)
                && let ServerStatus::Failed {
                    reason,
                    stderr_tail,
                } = &entry.status
            {
                return Err(HostError::ServerUnavailable {
                    server: server.to_owned(),
                    reason: reason.clone(),
                    stderr_tail: stderr_tail.clone(),
                });
            }
        }
        Err(HostError::UnknownTool {
            target: target.to_owned(),
            suggestions: catalogue
                .suggest(target, 3)
                .into_iter()
                .map(str::to_owned)
                .collect(),
        })
    }

    /// Calls a tool on the user's own say-so, in a clean context and a session of its own
    /// that is not audited: what the policy asks about is sent (approved as `caller`),
    /// what it denies is not. For callers that speak for the user (tests, benchmarks); a
    /// front end makes a [`Session`] and asks its user.
    pub async fn call(&self, target: &str, arguments: Value) -> Result<CallOutcome, HostError> {
        let session = Session::new("caller", None);
        let mut call = session.prepare(self, target, arguments)?;
        call.approve(ApprovedBy::named("caller"));
        session.send(self, call).await
    }

    /// Resolves `target`, checks that the arguments are an object (`null` counts as `{}`)
    /// that matches the tool's input schema, and decides the call with the policy in
    /// `context`. Sessions call this ([`Session::prepare`]).
    pub(crate) fn prepare(
        &self,
        target: &str,
        arguments: Value,
        context: &Provenance,
        caller: Option<&warden_policy::Caller>,
    ) -> Result<(ToolRef, Value, Verdict), HostError> {
        let tool = self.resolve(target)?;
        let arguments = match arguments {
            Value::Null => Value::Object(serde_json::Map::new()),
            Value::Object(map) => Value::Object(map),
            other => {
                return Err(HostError::ArgumentsNotObject {
                    tool: tool.qualified.clone(),
                    got: json_type(&other),
                });
            }
        };
        tool.check(&arguments)
            .map_err(|violations| HostError::InvalidArguments {
                tool: tool.qualified.clone(),
                violations,
            })?;
        let verdict = self
            .policy
            .decide_as(&tool.facts, &arguments, context, caller);
        Ok((tool, arguments, verdict))
    }

    /// The connection `tool`'s calls go to, and its call timeout. A server that does not
    /// run (answered from the catalogue cache, or stopped when idle) is started here, in its
    /// turn, and its tool list reviewed and applied before this returns: the caller checks
    /// afterwards that the tool is still offered as decided. The call holds the returned
    /// [`InUse`] until it ends: its end counts as a use (for `idle_stop`).
    pub(crate) async fn connection_for(
        &self,
        tool: &CatalogueTool,
    ) -> Result<(Arc<Box<dyn Connection>>, Duration, InUse), HostError> {
        let Some(entry) = self.entries.iter().find(|e| e.spec.name == tool.server) else {
            return Err(HostError::UnknownTool {
                target: tool.qualified.clone(),
                suggestions: Vec::new(),
            });
        };
        let (connection, in_use) = self.ensure_running(entry).await?;
        Ok((connection, entry.spec.timeouts.call, in_use))
    }

    /// The servers (running, or known from the catalogue cache) that declared `capability` (`resources`, `prompts`,
    /// `completions`: a key of the capabilities they sent), in name order, leaving out those
    /// whose transport does not forward ([`Connection::forwards`]: the deprecated HTTP+SSE
    /// transport), whatever they declared. What they offer besides tools is
    /// read with [`Host::forward`].
    pub fn servers_offering(&self, capability: &str) -> Vec<&str> {
        self.entries
            .iter()
            .filter(|entry| entry.forwards)
            .filter(|entry| match &entry.status {
                ServerStatus::Connected { info } => info
                    .capabilities
                    .get(capability)
                    .is_some_and(|declared| !declared.is_null()),
                ServerStatus::Failed { .. } => false,
            })
            .map(|entry| entry.spec.name.as_str())
            .collect()
    }

    /// The servers that declared `capability` (resources, prompts, completions) whose
    /// transport cannot forward it ([`warden_mcp::transport_withholds`]), each with why:
    /// what a client asking for their resources or prompts is told.
    pub fn servers_withholding(&self, capability: &str) -> Vec<(&str, &'static str)> {
        self.entries
            .iter()
            .filter_map(|entry| {
                let why = warden_mcp::transport_withholds(&entry.spec)?;
                let ServerStatus::Connected { info } = &entry.status else {
                    return None;
                };
                info.capabilities
                    .get(capability)
                    .is_some_and(|declared| !declared.is_null())
                    .then_some((entry.spec.name.as_str(), why))
            })
            .collect()
    }

    /// Sends `server` one read of what it offers besides tools (a method of
    /// [`warden_mcp::FORWARDED_METHODS`]: resources, prompts, completion) within its call
    /// timeout, and returns the result as sent. What comes back is the server's text,
    /// untrusted like a tool result: a front end that shows it to a model records it with
    /// [`Session::receive`], which labels it.
    pub async fn forward(
        &self,
        server: &str,
        method: &str,
        params: serde_json::Map<String, Value>,
    ) -> Result<Value, HostError> {
        // Checked here, once, before anything starts: only reads are forwarded.
        if !warden_mcp::FORWARDED_METHODS.contains(&method) {
            return Err(not_forwarded(
                server,
                method,
                "Warden forwards only reads of resources, prompts and completion",
            ));
        }
        let Some(entry) = self.entries.iter().find(|e| e.spec.name == server) else {
            return Err(HostError::ServerUnavailable {
                server: server.to_owned(),
                reason: "not configured".into(),
                stderr_tail: Vec::new(),
            });
        };
        if !entry.forwards {
            return Err(not_forwarded(
                server,
                method,
                "its transport (HTTP+SSE) does not forward them",
            ));
        }
        // A server known from the catalogue cache but not started yet starts now, as on
        // its first tool call. Its end counts as a use, as a call's does.
        let (connection, _in_use) = self.ensure_running(entry).await?;
        connection
            .request(method, params, entry.spec.timeouts.call)
            .await
            .map_err(|source| HostError::Call {
                tool: format!("{server} {method}"),
                source,
            })
    }

    /// The servers served that keep resource subscriptions: [`Host::servers_offering`]
    /// `resources`, whose capabilities declare `resources.subscribe` on a transport that
    /// relays them ([`warden_mcp::transport_subscribes`]: stdio in the 2025-11-25 era,
    /// Streamable HTTP in both). Known from the catalogue cache as well as from a running
    /// connection, like the capabilities themselves.
    pub fn servers_subscribing(&self) -> Vec<&str> {
        self.entries
            .iter()
            .filter(|entry| entry.forwards)
            .filter(|entry| match &entry.status {
                ServerStatus::Connected { info } => {
                    warden_mcp::transport_subscribes(&entry.spec, info)
                }
                ServerStatus::Failed { .. } => false,
            })
            .map(|entry| entry.spec.name.as_str())
            .collect()
    }

    /// Subscribes Warden's connection to `server` to updates of the resource `uri` (`on`),
    /// or ends that subscription, within the server's call timeout; a server not running
    /// is started first (as for a read). The updates then arrive in the connection's
    /// [`notices`](Host::notices). Only servers of
    /// [`servers_subscribing`](Host::servers_subscribing) accept.
    pub async fn subscribe(&self, server: &str, uri: &str, on: bool) -> Result<(), HostError> {
        let method = if on {
            "resources/subscribe"
        } else {
            "resources/unsubscribe"
        };
        let Some(entry) = self.entries.iter().find(|e| e.spec.name == server) else {
            return Err(HostError::ServerUnavailable {
                server: server.to_owned(),
                reason: "not configured".into(),
                stderr_tail: Vec::new(),
            });
        };
        if !on && entry.running().is_none() {
            // Nothing to end: a connection that is gone took its subscriptions with it.
            return Ok(());
        }
        let (connection, _in_use) = self.ensure_running(entry).await?;
        connection
            .subscribe(uri, on, entry.spec.timeouts.call)
            .await
            .map_err(|source| HostError::Call {
                tool: format!("{server} {method}"),
                source,
            })
    }

    /// What `server`'s running connection noted of its announcements (resource and prompt
    /// list changes, updates of subscribed resources); `None` while it does not run. A
    /// new connection (a restart) has new notices, without the old one's subscriptions.
    pub fn notices(&self, server: &str) -> Option<Arc<warden_mcp::ServerNotices>> {
        self.entries
            .iter()
            .find(|e| e.spec.name == server)?
            .running()?
            .notices()
    }

    /// Closes every connection and stops every server process, all at once.
    ///
    /// A connection still shared with a detached call is waited for briefly (the caller
    /// aborts its detached calls first); if it stays shared, it is dropped instead, which
    /// kills its server's process group when the call lets go.
    pub async fn shutdown(self) {
        let closing = self
            .entries
            .into_iter()
            .map(|entry| async move { stop_slot(&entry.slot).await });
        join_all(closing).await;
    }
}

/// Stops the server of `slot` if it runs: its idle watcher aborted, its connection taken
/// and closed once the calls holding it have let go (within half a second; otherwise the
/// last of them drops it). Whether one was running.
async fn stop_slot(slot: &tokio::sync::Mutex<Slot>) -> bool {
    let running = {
        let mut slot = slot.lock().await;
        if let Some(watcher) = slot.watcher.take() {
            watcher.abort();
        }
        slot.connection.take()
    };
    let Some(running) = running else {
        return false;
    };
    if let Some(connection) = sole_owner(running).await {
        connection.close().await;
    }
    true
}

/// Stops the server of `slot` once no call has asked for it for `idle`, none is in flight
/// (a call holds the connection) and its connection keeps no resource subscription; ends
/// with the slot, or once it stopped it.
async fn stop_when_idle(
    slot: std::sync::Weak<tokio::sync::Mutex<Slot>>,
    idle: Duration,
    server: String,
) {
    // A busy server is looked at again this often.
    let again = idle.min(Duration::from_secs(1));
    loop {
        let due = match slot.upgrade() {
            Some(shared) => shared.lock().await.used.at() + idle,
            None => return,
        };
        tokio::time::sleep_until(due).await;
        let Some(shared) = slot.upgrade() else {
            return;
        };
        let mut locked = shared.lock().await;
        if locked.used.at() + idle > tokio::time::Instant::now() {
            continue;
        }
        // A server some client is subscribed to through it is in use however long
        // nothing calls it: stopping it would end the subscriptions without a word, and
        // nothing would start it again to announce an update (decision 0039, revision).
        // Ending the last subscription counts as a use, so the idle time starts then.
        let idle_now = |c: &Arc<Box<dyn Connection>>| {
            Arc::strong_count(c) == 1
                && c.notices()
                    .is_none_or(|notices| notices.subscribed().is_empty())
        };
        let Some(connection) = locked.connection.take_if(|c| idle_now(c)) else {
            if locked.connection.is_none() {
                return;
            }
            drop(locked);
            tokio::time::sleep(again).await;
            continue;
        };
        // This task is the watcher: forget its handle without aborting it.
        drop(locked.watcher.take());
        drop(locked);
        tracing::info!(
            server = %server,
            "stopped after {} unused (idle_stop); its next call starts it again",
            warden_mcp::error::humanize(idle)
        );
        if let Ok(connection) = Arc::try_unwrap(connection) {
            connection.close().await;
        }
        return;
    }
}

/// The connection, once nothing else holds it (at most half a second).
async fn sole_owner(mut shared: Arc<Box<dyn Connection>>) -> Option<Box<dyn Connection>> {
    for _ in 0..50 {
        match Arc::try_unwrap(shared) {
            Ok(connection) => return Some(connection),
            Err(still_shared) => shared = still_shared,
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

fn build_catalogue(
    lists: &BTreeMap<String, Vec<warden_mcp::ToolDef>>,
    policy: &Policy,
) -> Catalogue {
    let lists = lists
        .iter()
        .map(|(server, tools)| (server.clone(), tools.clone()))
        .collect();
    Catalogue::build_with_policy(lists, SchemaLimits::default(), policy)
}

/// The names in `listed` that are not `offered`: held back by the review.
/// The refusal of a request [`Host::forward`] does not send to `server`: `-32601`, as a
/// server that does not know the method would answer, saying why.
fn not_forwarded(server: &str, method: &str, why: &str) -> HostError {
    HostError::Call {
        tool: format!("{server} {method}"),
        source: warden_mcp::CallError::Rejected {
            code: -32601,
            message: format!("`{method}` is not forwarded to `{server}`: {why}"),
        },
    }
}

fn held_back(listed: &[String], offered: &[warden_mcp::ToolDef]) -> HashSet<String> {
    listed
        .iter()
        .filter(|name| !offered.iter().any(|tool| &tool.name == *name))
        .cloned()
        .collect()
}

/// Fills `change` with what differs between the tools offered `before` and `after`;
/// `listed` are the names the server listed, before the review, `already` those held back
/// at the last reading (not named again).
fn describe_change(
    change: &mut ToolsChange,
    before: &[warden_mcp::ToolDef],
    after: &[warden_mcp::ToolDef],
    listed: &[String],
    already: &HashSet<String>,
) {
    let after_names: HashSet<&str> = after.iter().map(|t| t.name.as_str()).collect();
    let mut seen = HashSet::new();
    for def in after {
        if !seen.insert(def.name.as_str()) {
            continue;
        }
        match before.iter().find(|old| old.name == def.name) {
            None => change.added.push(def.name.clone()),
            Some(old) if old != def => change.changed.push(def.name.clone()),
            Some(_) => {}
        }
    }
    let mut gone = HashSet::new();
    for def in before {
        if !after_names.contains(def.name.as_str()) && gone.insert(def.name.as_str()) {
            change.removed.push(def.name.clone());
        }
    }
    let mut held = HashSet::new();
    for name in listed {
        if !after_names.contains(name.as_str())
            && !already.contains(name)
            && held.insert(name.as_str())
        {
            change.held_back.push(name.clone());
        }
    }
}

/// Starts one server in its turn ([`StartGate`]): the turn is held from the approval check
/// to the first tool list, and the connect timeout begins after the wait for it.
async fn connect_one(
    spec: ServerSpec,
    launcher: &Arc<dyn Launcher>,
    options: &ConnectOptions,
    review: &Arc<dyn Review>,
    starts: &StartGate,
) -> (
    ServerEntry,
    Option<Vec<warden_mcp::ToolDef>>,
    Option<warden_mcp::ListFreshness>,
) {
    match start_server(spec.clone(), launcher, options, review, starts).await {
        Ok((connection, tools)) => {
            let info = connection.info().clone();
            let freshness = connection.list_freshness();
            let status = ServerStatus::Connected { info };
            (
                ServerEntry::new(spec, status, Some(connection), None),
                Some(tools),
                freshness,
            )
        }
        Err((reason, stderr_tail)) => {
            let status = ServerStatus::Failed {
                reason,
                stderr_tail,
            };
            (ServerEntry::new(spec, status, None, None), None, None)
        }
    }
}

/// Why a server did not start: the reason and its last stderr lines.
type StartFailure = (String, Vec<String>);

/// Starts one server in its turn and reads its tool list (not reviewed yet).
async fn start_server(
    spec: ServerSpec,
    launcher: &Arc<dyn Launcher>,
    options: &ConnectOptions,
    review: &Arc<dyn Review>,
    starts: &StartGate,
) -> Result<(Box<dyn Connection>, Vec<warden_mcp::ToolDef>), StartFailure> {
    let turn = starts.turn(&spec.name).await;
    let started = connect_started(spec, launcher, options, review).await;
    turn.finish(started.is_ok());
    started
}

async fn connect_started(
    spec: ServerSpec,
    launcher: &Arc<dyn Launcher>,
    options: &ConnectOptions,
    review: &Arc<dyn Review>,
) -> Result<(Box<dyn Connection>, Vec<warden_mcp::ToolDef>), StartFailure> {
    // Whether it may start (a project server's approval: its grants are computed from the
    // files it names, and the store read): blocking work, on a blocking thread.
    let admitted = {
        let (review, checked) = (Arc::clone(review), spec.clone());
        tokio::task::spawn_blocking(move || review.admit(&checked))
            .await
            .unwrap_or_else(|ended| {
                Err(format!(
                    "not started: its approval could not be checked ({ended})"
                ))
            })
    };
    if let Err(reason) = admitted {
        tracing::info!(server = %spec.name, "not started: {reason}");
        return Err((reason, Vec::new()));
    }
    // The connect timeout covers starting, the handshake and the first tool list together.
    let started = std::time::Instant::now();
    let connection = match warden_mcp::connect(&spec, launcher, options).await {
        Ok(connection) => connection,
        Err(failure) => {
            tracing::info!(server = %spec.name, "not connected: {}", failure.error);
            let reason = failure.error.to_string();
            let tail = last_lines(failure.stderr_tail);
            return Err((reason, tail));
        }
    };
    let started = connection.retried_at().unwrap_or(started);
    let left = spec.timeouts.connect.saturating_sub(started.elapsed());
    let listed = connection.list_tools(left).await;
    match listed {
        Ok(tools) => Ok((connection, tools)),
        Err(error) => {
            let reason = match error {
                CallError::Timeout { .. } => format!(
                    "no tool list within the {} connect timeout",
                    warden_mcp::error::humanize(spec.timeouts.connect)
                ),
                error => format!("listing tools failed: {error}"),
            };
            tracing::info!(server = %spec.name, "{reason}");
            let tail = last_lines(connection.stderr_tail(STDERR_LINES_SHOWN));
            connection.close().await;
            Err((reason, tail))
        }
    }
}

fn last_lines(mut lines: Vec<String>) -> Vec<String> {
    let skip = lines.len().saturating_sub(STDERR_LINES_SHOWN);
    lines.drain(..skip);
    lines
}

/// The default time budget for stopping all servers at exit.
pub const SHUTDOWN_BUDGET: Duration = Duration::from_secs(5);

/// A host over given connections, for tests of what is built on it (sessions).
#[cfg(test)]
pub(crate) fn test_host(
    policy: Arc<Policy>,
    servers: Vec<(ServerSpec, Box<dyn Connection>, Vec<warden_mcp::ToolDef>)>,
    audit: Option<Arc<AuditLog>>,
) -> Host {
    test_host_reviewed(policy, servers, audit, Arc::new(NoReview))
}

/// [`test_host`] whose later tool lists go through `review`.
#[cfg(test)]
pub(crate) fn test_host_reviewed(
    policy: Arc<Policy>,
    servers: Vec<(ServerSpec, Box<dyn Connection>, Vec<warden_mcp::ToolDef>)>,
    audit: Option<Arc<AuditLog>>,
    review: Arc<dyn Review>,
) -> Host {
    let mut entries = Vec::new();
    let mut lists = BTreeMap::new();
    for (spec, connection, tools) in servers {
        lists.insert(spec.name.clone(), tools);
        let status = ServerStatus::Connected {
            info: connection.info().clone(),
        };
        entries.push(ServerEntry::new(spec, status, Some(connection), None));
    }
    let catalogue = build_catalogue(&lists, &policy);
    let host = Host {
        entries,
        catalogue: RwLock::new(Arc::new(catalogue)),
        policy,
        review,
        lists: tokio::sync::Mutex::new(Lists {
            reviewed: lists,
            ..Lists::default()
        }),
        guard: Arc::new(Guard {
            audit,
            reviewer: None,
            cache: None,
        }),
        starter: None,
    };
    // Servers with an `idle_stop` stop when idle, as in a built host.
    for entry in &host.entries {
        if let Ok(mut slot) = entry.slot.try_lock() {
            host.watch_idle(entry, &mut slot);
        }
    }
    host
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use warden_mcp::ToolDef;
    use warden_policy::Decision;

    /// A host without connections: a call that gets past the policy fails when its server
    /// is looked up (`UnknownTool`), which tells it apart from one the policy stopped.
    fn host(policy: serde_json::Value) -> Host {
        let config: warden_policy::PolicyConfig = serde_json::from_value(policy).unwrap();
        let policy = Arc::new(Policy::compile(&config).unwrap());
        let tool = |name: &str| ToolDef {
            name: name.into(),
            title: None,
            description: None,
            input_schema: json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
            output_schema: None,
            annotations: Some(json!({"readOnlyHint": true, "openWorldHint": false})),
        };
        let lists = vec![(
            "s".to_owned(),
            vec![tool("read"), tool("write"), tool("gone")],
        )];
        Host {
            entries: Vec::new(),
            catalogue: RwLock::new(Arc::new(Catalogue::build_with_policy(
                lists,
                SchemaLimits::default(),
                &policy,
            ))),
            policy,
            review: Arc::new(NoReview),
            lists: tokio::sync::Mutex::new(Lists::default()),
            guard: Arc::default(),
            starter: None,
        }
    }

    fn gated(result: Result<CallOutcome, HostError>) -> Option<Decision> {
        match result {
            Err(HostError::Denied { verdict, .. } | HostError::NotApproved { verdict, .. }) => {
                Some(verdict.decision)
            }
            Err(HostError::UnknownTool { .. }) => None,
            other => panic!("unexpected: {other:?}"),
        }
    }

    /// Admits every server and counts the starts it was asked about.
    #[derive(Default)]
    struct CountingStarts(std::sync::atomic::AtomicUsize);

    impl Review for CountingStarts {
        fn admit(&self, _spec: &ServerSpec) -> Result<(), String> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        }

        fn tools(&self, _spec: &ServerSpec, tools: Vec<ToolDef>) -> Vec<ToolDef> {
            tools
        }
    }

    /// A lazy start that fails is remembered: callers queued behind it, and the next
    /// call, fail at once naming that failure and when it is retried, instead of each
    /// starting the server again (and waiting its connect timeout); after the back-off the
    /// next call tries again.
    #[tokio::test]
    async fn a_failed_lazy_start_fails_the_next_calls_fast_until_its_back_off_ends() {
        let mut spec = crate::refresh_tests::spec();
        spec.transport = warden_config::TransportSpec::Stdio {
            command: "/nonexistent/warden-test-missing-server".into(),
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
        };
        let review = Arc::new(CountingStarts::default());
        let policy = Arc::new(Policy::compile(&warden_policy::PolicyConfig::default()).unwrap());
        let host = Host {
            entries: vec![ServerEntry::new(
                spec,
                ServerStatus::Connected {
                    info: ServerInfo {
                        era: warden_mcp::Era::Legacy,
                        protocol_version: "2025-11-25".into(),
                        name: None,
                        version: None,
                        title: None,
                        capabilities: json!({"tools": {}}),
                        instructions: None,
                        program: None,
                        connect_attempts: 1,
                    },
                },
                None,
                Some(std::time::SystemTime::now()),
            )],
            catalogue: RwLock::new(Arc::new(Catalogue::build_with_policy(
                Vec::new(),
                SchemaLimits::default(),
                &policy,
            ))),
            policy,
            review: Arc::clone(&review) as Arc<dyn Review>,
            lists: tokio::sync::Mutex::new(Lists::default()),
            guard: Arc::default(),
            starter: Some(Starter {
                launcher: Arc::new(warden_mcp::DirectLauncher::from_env()),
                options: ConnectOptions::default(),
                starts: Arc::new(StartGate::new(2)),
                idle_stop: None,
            }),
        };
        let entry = &host.entries[0];
        let starts = || review.0.load(std::sync::atomic::Ordering::SeqCst);
        let reason = |result: Result<(Arc<Box<dyn Connection>>, InUse), HostError>| match result {
            Err(HostError::ServerUnavailable { server, reason, .. }) => {
                assert_eq!(server, "s");
                reason
            }
            Err(other) => panic!("unexpected: {other}"),
            Ok(_) => panic!("a missing program started"),
        };
        assert!(entry.start_failure().is_none());
        assert!(
            entry.ready(),
            "answered from the cache, not started yet: ready"
        );
        // Two calls at once: the first starts it and fails, the queued one fails at once
        // with the same failure (its back-off is not what lets it fail: it was queued).
        let (first, queued) = tokio::join!(host.ensure_running(entry), host.ensure_running(entry));
        let first = reason(first);
        assert!(first.contains("warden-test-missing-server"), "{first}");
        assert_eq!(starts(), 1);
        let queued = reason(queued);
        assert!(
            queued.starts_with(&first) && queued.contains("its start failed"),
            "{queued}"
        );
        let failed = entry.start_failure().unwrap();
        assert_eq!(
            (failed.reason.as_str(), failed.failures),
            (first.as_str(), 1)
        );
        assert!(!entry.ready(), "a failed start is not ready (/readyz)");
        assert_eq!(failed.retry_after, Duration::from_secs(1));
        // During the back-off, a later call fails at once too.
        let later = reason(host.ensure_running(entry).await);
        assert!(later.starts_with(&first), "{later}");
        assert_eq!(starts(), 1);
        // The back-off over, the next call starts it again; a second failure in a row
        // doubles the back-off.
        let expire = |entry: &ServerEntry| {
            let mut slot = entry.slot.try_lock().unwrap();
            let failed = slot.failed.as_mut().unwrap();
            failed.failed_at = tokio::time::Instant::now() - failed.retry_after;
        };
        expire(entry);
        assert_eq!(reason(host.ensure_running(entry).await), first);
        assert_eq!(starts(), 2);
        let failed = entry.start_failure().unwrap();
        assert_eq!(
            (failed.failures, failed.retry_after),
            (2, Duration::from_secs(2))
        );
        expire(entry);
        reason(host.ensure_running(entry).await);
        assert_eq!(starts(), 3);
        assert_eq!(
            entry.start_failure().unwrap().retry_after,
            Duration::from_secs(4)
        );
    }

    #[test]
    fn a_change_names_added_removed_changed_and_held_back_tools() {
        let def = |name: &str, description: &str| ToolDef {
            name: name.into(),
            title: None,
            description: Some(description.into()),
            input_schema: json!({"type": "object"}),
            output_schema: None,
            annotations: None,
        };
        let before = vec![def("a", "A"), def("b", "B"), def("c", "C")];
        let after = vec![def("a", "A"), def("c", "C2"), def("d", "D")];
        let listed: Vec<String> = ["a", "c", "d", "e", "f"].map(String::from).to_vec();
        let mut change = ToolsChange::default();
        // `f` was held back at the last reading already: not named again.
        let already: HashSet<String> = ["f".to_owned()].into();
        describe_change(&mut change, &before, &after, &listed, &already);
        assert_eq!(change.added, ["d"]);
        assert_eq!(change.removed, ["b"]);
        assert_eq!(change.changed, ["c"]);
        assert_eq!(change.held_back, ["e"]);
        assert_eq!(
            held_back(&listed, &after),
            ["e", "f"].map(String::from).into()
        );
    }

    #[tokio::test]
    async fn send_obeys_the_verdict_and_the_approval() {
        let host = host(json!({
            "servers": {"s": {"trust": "trusted"}},
            "rules": [
                {"tools": "s__write", "effect": "ask"},
                {"tools": "s__*", "effect": "deny", "when": [{"arg": "/n", "equals": 13}]},
                {"tools": "s__gone", "effect": "hide"}
            ]
        }));
        let session = host.session("test");
        let prepare = |target: &str, args: Value| session.prepare(&host, target, args).unwrap();

        // Allowed (trusted read-only): past the gate without approval.
        let call = prepare("s/read", Value::Null);
        assert_eq!(call.verdict().decision, Decision::Allow);
        assert_eq!(call.arguments(), &json!({}));
        assert_eq!(call.tool().qualified, "s__read");
        assert_eq!(call.approved_by(), Some(&ApprovedBy::Policy));
        assert_eq!(gated(session.send(&host, call).await), None);

        // Asked: only with approval.
        let call = prepare("s__write", json!({"n": 1}));
        assert_eq!(gated(session.send(&host, call).await), Some(Decision::Ask));
        let mut call = prepare("s__write", json!({"n": 1}));
        call.approve(ApprovedBy::named("user"));
        assert_eq!(gated(session.send(&host, call).await), None);

        // Denied: never, approved or not.
        let mut call = prepare("s__read", json!({"n": 13}));
        call.approve(ApprovedBy::named("user"));
        let error = session.send(&host, call).await.unwrap_err();
        assert_eq!(
            error.to_string(),
            "`s__read` is denied by policy (nothing was sent):\n  - policy.rules[1] (s__*) denies"
        );
        // `call` is approved on the user's behalf, but still refuses a denial.
        assert_eq!(gated(host.call("s__write", json!({"n": 1})).await), None);
        assert_eq!(
            gated(host.call("s__write", json!({"n": 13})).await),
            Some(Decision::Deny)
        );

        // Hidden: unknown, like a tool that does not exist.
        let error = session.prepare(&host, "s__gone", Value::Null).unwrap_err();
        assert_eq!(error.to_string(), "no tool `s__gone`");
        // Schema checks come before the decision.
        let error = session
            .prepare(&host, "s__read", json!({"n": "x"}))
            .unwrap_err();
        assert!(
            matches!(error, HostError::InvalidArguments { .. }),
            "{error}"
        );
    }
}
