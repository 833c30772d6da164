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
    /// Shared with calls detached from a step ([`Session::detach`]); closed at shutdown.
    connection: Option<Arc<Box<dyn Connection>>>,
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
    guard: Guard,
}

/// What the catalogue was last built from.
#[derive(Default)]
struct Lists {
    /// Each connected server's reviewed tools, as the catalogue was last built from them.
    reviewed: BTreeMap<String, Vec<warden_mcp::ToolDef>>,
    /// Each connected server's raw tool names the review held back at the last reading.
    held: BTreeMap<String, HashSet<String>>,
}

/// What a host built with a state store keeps of it.
#[derive(Default)]
pub(crate) struct Guard {
    /// The audit writer every session of this host writes to.
    pub(crate) audit: Option<Arc<AuditLog>>,
    /// The approvals, definition pins and quarantine, for reports.
    pub(crate) reviewer: Option<Arc<Reviewer>>,
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
        policy: Arc<Policy>,
        launcher: Arc<dyn Launcher>,
        options: &ConnectOptions,
        review: Arc<dyn Review>,
        guard: Guard,
    ) -> Self {
        let attempts = specs
            .into_iter()
            .map(|spec| connect_one(spec, &launcher, options, &review));
        let results = join_all(attempts).await;
        // The review reads and writes the store (pins) and scans every description: blocking
        // work, done on a blocking thread, one server after the other in the order they
        // answered (the scan compares each server's names with those reviewed before it).
        let reviewing = Arc::clone(&review);
        let reviewed = tokio::task::spawn_blocking(move || {
            let mut entries = Vec::with_capacity(results.len());
            let mut lists = BTreeMap::new();
            let mut held = BTreeMap::new();
            for (entry, tools) in results {
                if let Some(tools) = tools {
                    let listed: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
                    let tools = reviewing.tools(&entry.spec, tools);
                    held.insert(entry.spec.name.clone(), held_back(&listed, &tools));
                    lists.insert(entry.spec.name.clone(), tools);
                }
                entries.push(entry);
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
        Self {
            entries,
            catalogue: RwLock::new(Arc::new(catalogue)),
            policy,
            review,
            lists: tokio::sync::Mutex::new(Lists {
                reviewed: lists,
                held,
            }),
            guard,
        }
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
    /// list was read.
    pub async fn refresh_tools(&self) -> Vec<ToolsChange> {
        let mut lists = self.lists.lock().await;
        let marked: Vec<&ServerEntry> = self
            .entries
            .iter()
            .filter(|entry| {
                entry
                    .connection
                    .as_ref()
                    .is_some_and(|connection| connection.take_tools_changed())
            })
            .collect();
        if marked.is_empty() {
            return Vec::new();
        }
        let reads = marked.into_iter().map(|entry| async move {
            let listed = match entry.connection.as_ref() {
                Some(connection) => connection.list_tools(entry.spec.timeouts.connect).await,
                None => Err(CallError::Protocol {
                    reason: "not connected".into(),
                }),
            };
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
                        (names, review.tools(&spec, tools))
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
            Err(_) => return Vec::new(),
        };
        let mut changes = Vec::new();
        let mut rebuilt = false;
        for (name, listed) in reviewed {
            let mut change = ToolsChange {
                server: name.clone(),
                ..ToolsChange::default()
            };
            match listed {
                Ok((listed_names, offered)) => {
                    let before = lists.reviewed.get(&name).cloned().unwrap_or_default();
                    let held = held_back(&listed_names, &offered);
                    let already = lists.held.insert(name.clone(), held).unwrap_or_default();
                    describe_change(&mut change, &before, &offered, &listed_names, &already);
                    lists.reviewed.insert(name, offered);
                    rebuilt = true;
                }
                Err(error) => {
                    tracing::warn!(server = %name, "the changed tool list could not be read: {error}");
                    change.error = Some(error.to_string());
                }
            }
            changes.push(change);
        }
        if rebuilt {
            let catalogue = Arc::new(build_catalogue(&lists.reviewed, &self.policy));
            *self
                .catalogue
                .write()
                .unwrap_or_else(PoisonError::into_inner) = catalogue;
        }
        changes
    }

    /// The policy calls are decided with.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Decides a call of `tool` with `arguments` in a context whose provenance is
    /// `context` (`Provenance::new()` for a clean one: only the user's own words). Pure and
    /// fast; [`prepare`](Host::prepare) calls it.
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
        let verdict = self.decide(&tool, &arguments, context);
        Ok((tool, arguments, verdict))
    }

    /// The connection `tool`'s calls go to, and its call timeout.
    pub(crate) fn connection_for(
        &self,
        tool: &CatalogueTool,
    ) -> Result<(Arc<Box<dyn Connection>>, Duration), HostError> {
        let Some(entry) = self.entries.iter().find(|e| e.spec.name == tool.server) else {
            return Err(HostError::UnknownTool {
                target: tool.qualified.clone(),
                suggestions: Vec::new(),
            });
        };
        let Some(connection) = entry.connection.as_ref() else {
            return Err(HostError::ServerUnavailable {
                server: tool.server.clone(),
                reason: "not connected".into(),
                stderr_tail: Vec::new(),
            });
        };
        Ok((Arc::clone(connection), entry.spec.timeouts.call))
    }

    /// The connected servers that declared `capability` (`resources`, `prompts`,
    /// `completions`: a key of the capabilities they sent), in name order. What they offer
    /// besides tools is read with [`Host::forward`].
    pub fn servers_offering(&self, capability: &str) -> Vec<&str> {
        self.entries
            .iter()
            .filter(|entry| entry.connection.is_some())
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
        let Some(entry) = self.entries.iter().find(|e| e.spec.name == server) else {
            return Err(HostError::ServerUnavailable {
                server: server.to_owned(),
                reason: "not configured".into(),
                stderr_tail: Vec::new(),
            });
        };
        let Some(connection) = entry.connection.as_ref().map(Arc::clone) else {
            return Err(HostError::ServerUnavailable {
                server: server.to_owned(),
                reason: "not connected".into(),
                stderr_tail: Vec::new(),
            });
        };
        connection
            .request(method, params, entry.spec.timeouts.call)
            .await
            .map_err(|source| HostError::Call {
                tool: format!("{server} {method}"),
                source,
            })
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
            .filter_map(|entry| entry.connection)
            .map(|connection| async move {
                if let Some(connection) = sole_owner(connection).await {
                    connection.close().await;
                }
            });
        join_all(closing).await;
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

async fn connect_one(
    spec: ServerSpec,
    launcher: &Arc<dyn Launcher>,
    options: &ConnectOptions,
    review: &Arc<dyn Review>,
) -> (ServerEntry, Option<Vec<warden_mcp::ToolDef>>) {
    let failed = |spec: ServerSpec, reason: String, stderr_tail: Vec<String>| ServerEntry {
        spec,
        status: ServerStatus::Failed {
            reason,
            stderr_tail,
        },
        connection: None,
    };
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
        return (failed(spec, reason, Vec::new()), None);
    }
    // The connect timeout covers starting, the handshake and the first tool list together.
    let started = std::time::Instant::now();
    let connection = match warden_mcp::connect(&spec, launcher, options).await {
        Ok(connection) => connection,
        Err(failure) => {
            tracing::info!(server = %spec.name, "not connected: {}", failure.error);
            let reason = failure.error.to_string();
            let tail = last_lines(failure.stderr_tail);
            return (failed(spec, reason, tail), None);
        }
    };
    let started = connection.retried_at().unwrap_or(started);
    let left = spec.timeouts.connect.saturating_sub(started.elapsed());
    let listed = connection.list_tools(left).await;
    match listed {
        Ok(tools) => {
            let info = connection.info().clone();
            let entry = ServerEntry {
                spec,
                status: ServerStatus::Connected { info },
                connection: Some(Arc::new(connection)),
            };
            (entry, Some(tools))
        }
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
            (failed(spec, reason, tail), None)
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
        entries.push(ServerEntry {
            status: ServerStatus::Connected {
                info: connection.info().clone(),
            },
            spec,
            connection: Some(Arc::new(connection)),
        });
    }
    let catalogue = build_catalogue(&lists, &policy);
    Host {
        entries,
        catalogue: RwLock::new(Arc::new(catalogue)),
        policy,
        review,
        lists: tokio::sync::Mutex::new(Lists {
            reviewed: lists,
            held: BTreeMap::new(),
        }),
        guard: Guard {
            audit,
            reviewer: None,
        },
    }
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
            guard: Guard::default(),
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
