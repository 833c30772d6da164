//! The one module of the gateway that uses the host core ([`warden_host::Host`]).
//!
//! Everything the gateway needs from the host goes through [`Backend`]: the tools it
//! offers (under the names `warden tools` shows, or the server's own names in the
//! single-server mode), and a tool call made for one client, decided by the policy in that
//! client's own context ([`ClientContext`], which owns the client's [`Provenance`]),
//! approved or refused as the policy says, sent, labelled into the provenance, and
//! audited. The protocol code above never sees a `Host`, so moving the host to another API
//! changes this file alone.
//!
//! One `Host` (one connection per upstream server) serves every client at once: the host's
//! calling path takes `&self`, so the backend holds it in an [`Arc`] and calls run
//! concurrently. Nothing here holds a lock across an await.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use warden_host::{Approval, Host, HostError};
use warden_policy::{Decision, Provenance, Verdict};
use warden_store::AuditEntry;

use crate::jsonrpc::{INVALID_PARAMS, RpcError};

/// Where audit rows go (the binary writes them to the state store).
pub trait AuditSink: Send + Sync {
    /// Records one attempt. Must not block for long: it is called on the request's path.
    fn record(&self, entry: AuditEntry);
}

/// An [`AuditSink`] that drops every row (tests).
pub struct NoAudit;

impl AuditSink for NoAudit {
    fn record(&self, _entry: AuditEntry) {}
}

/// One client's conversation as the policy sees it: who it is (for audit rows) and the
/// provenance of everything its calls have returned to it so far. A result from one server
/// taints this client's later calls to another; it never touches another client's.
pub struct ClientContext {
    name: String,
    provenance: Mutex<Provenance>,
    turn: AtomicU32,
}

impl ClientContext {
    /// A clean context for the client named `name` (as audit rows show it).
    pub fn new(name: impl Into<String>) -> ClientContext {
        ClientContext {
            name: name.into(),
            provenance: Mutex::new(Provenance::new()),
            turn: AtomicU32::new(0),
        }
    }

    /// The client's name in audit rows.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether anything untrusted has entered this client's context (for tests and logs).
    pub fn is_tainted(&self) -> bool {
        self.provenance
            .lock()
            .map(|provenance| provenance.label().is_untrusted())
            .unwrap_or(true)
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

/// The host, as the gateway uses it.
pub struct Backend {
    host: Arc<Host>,
    only: Option<String>,
    audit: Arc<dyn AuditSink>,
}

impl Backend {
    /// A backend over `host`. With `only`, the gateway fronts that one server under its
    /// tools' own names (no prefixes); it must be configured (it may have failed to start:
    /// its tools are then absent and calls say why).
    pub fn new(
        host: Arc<Host>,
        only: Option<String>,
        audit: Arc<dyn AuditSink>,
    ) -> Result<Backend, BackendError> {
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
        Ok(Backend { host, only, audit })
    }

    /// The single server fronted with `--only`, if any.
    pub fn only(&self) -> Option<&str> {
        self.only.as_deref()
    }

    /// The host, to shut it down at exit (only when nothing else holds it).
    pub fn into_host(self) -> Arc<Host> {
        self.host
    }

    /// Every tool offered, as `tools/list` entries, in the catalogue's stable order
    /// (servers by name, each server's tools in its own order).
    pub fn tools(&self) -> Vec<Value> {
        let catalogue = self.host.catalogue();
        let tools: Box<dyn Iterator<Item = &warden_host::CatalogueTool>> = match &self.only {
            Some(server) => Box::new(catalogue.tools_of(server)),
            None => Box::new(catalogue.tools().iter()),
        };
        tools
            .map(|tool| {
                let def = &tool.def;
                let name = match &self.only {
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
        let given = arguments.clone();
        let prepared = {
            let provenance = client
                .provenance
                .lock()
                .map_err(|_| RpcError::new(crate::jsonrpc::INTERNAL_ERROR, "context lost"))?;
            self.host.prepare(&target, arguments, &provenance)
        };
        let call = match prepared {
            Ok(call) => call,
            Err(HostError::UnknownTool { .. }) => {
                return Err(RpcError::new(
                    INVALID_PARAMS,
                    format!("Unknown tool: {name}"),
                ));
            }
            Err(error) => {
                if let Ok(tool) = self.host.resolve(&target) {
                    let mut entry = audit_entry(client, tool, &given, None);
                    entry.outcome = match &error {
                        HostError::InvalidArguments { .. }
                        | HostError::ArgumentsNotObject { .. } => "invalid_arguments",
                        _ => "failed",
                    }
                    .into();
                    entry.error = Some(first_line(&error.to_string()));
                    self.audit.record(entry);
                }
                return Ok(CallReply::Result(error_result(&error.to_string())));
            }
        };
        let tool = call.tool();
        let mut entry = audit_entry(client, tool, call.arguments(), Some(call.verdict()));
        let approval = match call.verdict().decision {
            Decision::Allow => {
                entry.approved_by = Some("policy".into());
                Approval::NotAsked
            }
            Decision::Deny => {
                entry.outcome = "denied".into();
                self.audit.record(entry);
                return Ok(CallReply::Result(error_result(&format!(
                    "Warden's policy denies `{name}` (server `{}`); nothing was sent.\nWhy:\n{}",
                    tool.server,
                    reason_list(call.verdict())
                ))));
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
                    AskAnswer::Approved { by } => {
                        entry.approved_by = Some(by);
                        Approval::Approved
                    }
                    AskAnswer::Refused { text } => {
                        entry.outcome = "not_approved".into();
                        self.audit.record(entry);
                        return Ok(CallReply::Result(error_result(&text)));
                    }
                    // Nothing is recorded yet: the client answers with a new request.
                    AskAnswer::Input(result) => return Ok(CallReply::Input(result)),
                }
            }
        };
        let facts = tool.facts.clone();
        entry.executed = true;
        let started = Instant::now();
        let detached = self.host.detach(call, approval);
        let outcome = match detached {
            Ok(detached) => detached.run().await,
            Err(error) => Err(error),
        };
        entry.latency_ms = Some(i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX));
        let turn = client.turn.fetch_add(1, Ordering::Relaxed);
        let reply = match outcome {
            Ok(outcome) => {
                let text = warden_agent::result_text::result_text(&outcome);
                if let Ok(mut provenance) = client.provenance.lock() {
                    provenance.add_result(&facts, turn, &text);
                }
                entry.outcome = if outcome.is_error { "tool_error" } else { "ok" }.into();
                entry.result_bytes = serde_json::to_vec(&outcome.raw)
                    .ok()
                    .and_then(|bytes| i64::try_from(bytes.len()).ok());
                let mut result = json!({"content": outcome.content});
                if let Some(structured) = outcome.structured {
                    result["structuredContent"] = structured;
                }
                if outcome.is_error {
                    result["isError"] = Value::Bool(true);
                }
                result
            }
            Err(error) => {
                let message = format!("The call failed: {error}");
                // What the server may have said on the way counts as its output.
                if let Ok(mut provenance) = client.provenance.lock() {
                    provenance.add_result(&facts, turn, &message);
                }
                entry.outcome = "failed".into();
                entry.executed = matches!(error, HostError::Call { .. });
                entry.error = Some(first_line(&error.to_string()));
                error_result(&message)
            }
        };
        self.audit.record(entry);
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

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_owned()
}

/// A tool result with `isError` and one text block.
pub fn error_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn audit_entry(
    client: &ClientContext,
    tool: &warden_host::CatalogueTool,
    arguments: &Value,
    verdict: Option<&Verdict>,
) -> AuditEntry {
    AuditEntry {
        time_ms: now_ms(),
        front_end: format!("serve:{}", client.name()),
        server: tool.server.clone(),
        tool: tool.qualified.clone(),
        arguments: arguments.clone(),
        decision: verdict.map(|v| v.decision.as_str().to_owned()),
        reasons: Value::Array(
            verdict
                .map(|v| v.reasons.as_slice())
                .unwrap_or_default()
                .iter()
                .map(|reason| json!({"kind": reason.kind.tag(), "text": &*reason.text}))
                .collect(),
        ),
        approved_by: None,
        executed: false,
        outcome: String::new(),
        error: None,
        latency_ms: None,
        result_bytes: None,
    }
}
