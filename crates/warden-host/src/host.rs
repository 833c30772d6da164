//! The host core: connects every configured server at once and routes calls to them.

use std::time::Duration;

use futures::future::join_all;
use serde::Serialize;
use serde_json::Value;
use warden_config::ServerSpec;
use warden_mcp::{CallError, CallOutcome, ConnectOptions, Connection, Launcher, ServerInfo};

use crate::catalogue::{Catalogue, CatalogueTool};
use crate::schema::{SchemaLimits, Violation};

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
    connection: Option<Box<dyn Connection>>,
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

/// Connected servers and the catalogue of their tools.
pub struct Host {
    entries: Vec<ServerEntry>,
    catalogue: Catalogue,
}

impl Host {
    /// Connects to every server in `specs` at once. A server that fails, or is slow, costs
    /// only itself: the others are connected as soon as they answer, and every wait is
    /// bounded by that server's connect timeout.
    pub async fn connect(
        specs: Vec<ServerSpec>,
        launcher: &dyn Launcher,
        options: &ConnectOptions,
    ) -> Self {
        let attempts = specs
            .into_iter()
            .map(|spec| connect_one(spec, launcher, options));
        let results = join_all(attempts).await;
        let mut entries = Vec::with_capacity(results.len());
        let mut lists = Vec::new();
        for (entry, tools) in results {
            if let Some(tools) = tools {
                lists.push((entry.spec.name.clone(), tools));
            }
            entries.push(entry);
        }
        entries.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
        Self {
            entries,
            catalogue: Catalogue::build(lists, SchemaLimits::default()),
        }
    }

    /// Every configured server, by name.
    pub fn servers(&self) -> &[ServerEntry] {
        &self.entries
    }

    /// The tools of all connected servers.
    pub fn catalogue(&self) -> &Catalogue {
        &self.catalogue
    }

    /// Finds the tool `target` names (`server/tool` or a qualified name).
    pub fn resolve(&self, target: &str) -> Result<&CatalogueTool, HostError> {
        if let Some(tool) = self.catalogue.resolve(target) {
            return Ok(tool);
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
            suggestions: self
                .catalogue
                .suggest(target, 3)
                .into_iter()
                .map(str::to_owned)
                .collect(),
        })
    }

    /// Calls a tool: resolves the name, validates the arguments against the tool's schema
    /// (nothing is sent when they do not match), then sends the call with the server's
    /// call timeout.
    pub async fn call(&self, target: &str, arguments: Value) -> Result<CallOutcome, HostError> {
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
        let Some(entry) = self.entries.iter().find(|e| e.spec.name == tool.server) else {
            return Err(HostError::UnknownTool {
                target: target.to_owned(),
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
        let Value::Object(arguments) = arguments else {
            return Err(HostError::ArgumentsNotObject {
                tool: tool.qualified.clone(),
                got: "a non-object",
            });
        };
        connection
            .call_tool(&tool.def.name, Some(arguments), entry.spec.timeouts.call)
            .await
            .map_err(|source| HostError::Call {
                tool: tool.qualified.clone(),
                source,
            })
    }

    /// Closes every connection and stops every server process, all at once.
    pub async fn shutdown(self) {
        let closing = self
            .entries
            .into_iter()
            .filter_map(|entry| entry.connection)
            .map(|connection| connection.close());
        join_all(closing).await;
    }
}

async fn connect_one(
    spec: ServerSpec,
    launcher: &dyn Launcher,
    options: &ConnectOptions,
) -> (ServerEntry, Option<Vec<warden_mcp::ToolDef>>) {
    let failed = |spec: ServerSpec, reason: String, stderr_tail: Vec<String>| ServerEntry {
        spec,
        status: ServerStatus::Failed {
            reason,
            stderr_tail,
        },
        connection: None,
    };
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
    let left = spec.timeouts.connect.saturating_sub(started.elapsed());
    let listed = connection.list_tools(left).await;
    match listed {
        Ok(tools) => {
            let info = connection.info().clone();
            let entry = ServerEntry {
                spec,
                status: ServerStatus::Connected { info },
                connection: Some(connection),
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
