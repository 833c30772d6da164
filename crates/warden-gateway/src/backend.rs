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
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use warden_host::{ApprovedBy, Catalogue, Host, HostError, Session, ToolsChange};
use warden_policy::{Decision, Verdict};

use crate::jsonrpc::{INVALID_PARAMS, RpcError};

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
    /// An `InputRequiredResult` (2026-07-28).
    Input(Value),
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
}

struct Listed {
    from: Arc<Catalogue>,
    entries: Arc<Vec<Value>>,
}

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
    /// ([`refresh`](Backend::refresh)); `warden serve` runs it beside its transports.
    pub async fn follow_upstreams(&self, interval: Duration) {
        let mut ticks = tokio::time::interval(interval.max(Duration::from_millis(10)));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            self.refresh().await;
        }
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
            let state = match entry.status {
                warden_host::ServerStatus::Connected { .. } => {
                    connected += 1;
                    "connected"
                }
                warden_host::ServerStatus::Failed { .. } => "failed",
            };
            states.insert(entry.spec.name.clone(), Value::String(state.into()));
        }
        (connected, states)
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
                        return Ok(CallReply::Result(error_result(&text)));
                    }
                    // This request is recorded as not approved (dropped unsent); the client
                    // answers with a new request, which is a new attempt.
                    AskAnswer::Input(result) => return Ok(CallReply::Input(result)),
                }
            }
        }
        let reply = match session.send(&self.host, call).await {
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
            Err(error) => error_result(&format!("The call failed: {error}")),
        };
        Ok(CallReply::Result(reply))
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
