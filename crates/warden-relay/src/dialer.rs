//! The brain's [`RelayDialer`]: a relayed server appears as a normal [`Connection`].
//!
//! [`RelayConnection`] holds the server's current session over its relay's channel. When
//! the channel breaks, the next call finds the session gone and opens a new one (which
//! re-opens the channel, subject to its back-off); while the channel is down, calls fail
//! at once with a message that says the relay is reconnecting, and the server stays in
//! the catalogue.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value};
use warden_config::{EraPreference, ServerSpec, TransportSpec};
use warden_mcp::launcher::StopReport;
use warden_mcp::{
    CallError, CallOutcome, ConnectError, ConnectFailure, ConnectOptions, Connection, RelayDialer,
    ServerInfo, ToolDef,
};

use crate::channel::{Channel, Deadlines, StreamPins};
use crate::pins::{PinCheck, Report};

/// The relay dialer: one [`Channel`] per relay name, shared by every relayed server.
#[derive(Default)]
pub struct Dialer {
    channels: Mutex<HashMap<String, Arc<Channel>>>,
}

impl Dialer {
    /// The process's dialer (every host of the process shares the channels).
    pub fn global() -> Arc<Dialer> {
        static GLOBAL: OnceLock<Arc<Dialer>> = OnceLock::new();
        Arc::clone(GLOBAL.get_or_init(|| Arc::new(Dialer::default())))
    }

    fn channel(&self, spec: &ServerSpec) -> Option<Arc<Channel>> {
        let TransportSpec::Relay { relay, channel } = &spec.transport else {
            return None;
        };
        let mut channels = match self.channels.lock() {
            Ok(channels) => channels,
            Err(poisoned) => poisoned.into_inner(),
        };
        // Keyed by the whole definition: two configurations that name different channels
        // `box` (two hosts in one process, tests) never share one.
        let key = format!("{relay}\0{}", channel.command.join("\0"));
        Some(Arc::clone(channels.entry(key).or_insert_with(|| {
            Arc::new(Channel::new(relay, channel.clone(), spec.max_message_bytes))
        })))
    }
}

impl RelayDialer for Dialer {
    fn connect<'a>(
        &'a self,
        spec: &'a ServerSpec,
        options: &'a ConnectOptions,
    ) -> BoxFuture<'a, Result<Box<dyn Connection>, ConnectFailure>> {
        self.dial(spec, options, None)
    }
}

/// A [`Dialer`] whose streams ask for executable pins: every start of a relayed server
/// inside the sandbox is reported and runs only if `pins` allows it ([`crate::pins`]).
/// The host installs one over its state store.
pub struct PinnedDialer {
    dialer: Arc<Dialer>,
    pins: Arc<dyn PinCheck>,
}

impl PinnedDialer {
    /// `dialer`'s channels, with `pins` checking every start.
    pub fn new(dialer: Arc<Dialer>, pins: Arc<dyn PinCheck>) -> Self {
        Self { dialer, pins }
    }
}

impl RelayDialer for PinnedDialer {
    fn connect<'a>(
        &'a self,
        spec: &'a ServerSpec,
        options: &'a ConnectOptions,
    ) -> BoxFuture<'a, Result<Box<dyn Connection>, ConnectFailure>> {
        self.dialer
            .dial(spec, options, Some(Arc::clone(&self.pins)))
    }
}

impl Dialer {
    fn dial<'a>(
        &'a self,
        spec: &'a ServerSpec,
        options: &'a ConnectOptions,
        pins: Option<Arc<dyn PinCheck>>,
    ) -> BoxFuture<'a, Result<Box<dyn Connection>, ConnectFailure>> {
        Box::pin(async move {
            let Some(channel) = self.channel(spec) else {
                return Err(failure(format!("`{}` is not a relayed server", spec.name)));
            };
            let connection = RelayConnection {
                spec: spec.clone(),
                options: options.clone(),
                channel,
                deadlines: Arc::new(Deadlines::default()),
                pins,
                session: tokio::sync::Mutex::new(None),
                info: OnceLock::new(),
            };
            connection.channel.acquire();
            match connection.session().await {
                Ok(session) => {
                    let _ = connection.info.set(session.info().clone());
                    Ok(Box::new(connection) as Box<dyn Connection>)
                }
                Err(unavailable) => {
                    connection.channel.release().await;
                    Err(ConnectFailure {
                        error: ConnectError::Remote {
                            reason: unavailable.reason,
                        },
                        stderr_tail: unavailable.stderr_tail,
                    })
                }
            }
        })
    }
}

fn failure(reason: String) -> ConnectFailure {
    ConnectFailure {
        error: ConnectError::Remote { reason },
        stderr_tail: Vec::new(),
    }
}

/// Why a relayed server's session could not be opened, with the last lines its process
/// inside wrote to stderr (forwarded over the channel), as a local server's failure has.
struct Unavailable {
    reason: String,
    stderr_tail: Vec<String>,
}

impl From<String> for Unavailable {
    fn from(reason: String) -> Self {
        Unavailable {
            reason,
            stderr_tail: Vec::new(),
        }
    }
}

struct Session {
    epoch: u64,
    connection: Arc<Box<dyn Connection>>,
}

/// A relayed server, seen from the brain.
pub struct RelayConnection {
    spec: ServerSpec,
    options: ConnectOptions,
    channel: Arc<Channel>,
    deadlines: Arc<Deadlines>,
    /// Checks every start of the server inside (`None`: starts are not reported).
    pins: Option<Arc<dyn PinCheck>>,
    session: tokio::sync::Mutex<Option<Session>>,
    info: OnceLock<ServerInfo>,
}

impl RelayConnection {
    /// The current session, or a new one when the channel changed under the last.
    async fn session(&self) -> Result<Arc<Box<dyn Connection>>, Unavailable> {
        let mut session = self.session.lock().await;
        let live = self.channel.live_epoch().await;
        if let Some(current) = session.as_ref()
            && Some(current.epoch) == live
        {
            return Ok(Arc::clone(&current.connection));
        }
        if let Some(old) = session.take() {
            close_shared(old.connection).await;
        }
        let connect = self.spec.timeouts.connect;
        self.deadlines.other_ms.store(
            u64::try_from(connect.as_millis()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        let mut spec = self.spec.clone();
        let pins: Option<StreamPins> = self.pins.as_ref().map(|check| {
            let check = Arc::clone(check);
            let stub = self.spec.clone();
            let relay = self.channel.name().to_owned();
            Arc::new(move |report: &Report| check.check(&relay, &stub, report)) as StreamPins
        });
        let connection = loop {
            let stream = self
                .channel
                .open(
                    &spec.name,
                    Arc::clone(&self.deadlines),
                    connect,
                    pins.clone(),
                )
                .await
                .map_err(|error| error.to_string())?;
            let epoch = stream.epoch;
            let pipes = warden_mcp::Pipes {
                program: std::path::PathBuf::from(format!("relay:{}", self.channel.name())),
                stdin: Box::new(stream.stdin),
                stdout: Box::new(stream.stdout),
                stderr: Box::new(stream.stderr),
                group: None,
            };
            match warden_mcp::connect_pipes(&spec, pipes, &self.options).await {
                Ok(connection) => break (epoch, connection),
                // As for a local server: the server said which era it speaks, so its
                // stream is opened afresh (a new child) in that era, once.
                Err(failure) if failure.late_modern && spec.era != EraPreference::Modern => {
                    tracing::info!(
                        server = %spec.name,
                        "the server answered the era probe late and refused initialize as a \
                         2026-07-28 server; opening its stream again in the modern era"
                    );
                    spec.era = EraPreference::Modern;
                }
                Err(failure) => {
                    return Err(Unavailable {
                        reason: format!(
                            "through relay `{}`: {}",
                            self.channel.name(),
                            failure.failure.error
                        ),
                        stderr_tail: failure.failure.stderr_tail,
                    });
                }
            }
        };
        let (epoch, connection) = connection;
        let connection = Arc::new(connection);
        *session = Some(Session {
            epoch,
            connection: Arc::clone(&connection),
        });
        Ok(connection)
    }

    fn gone(&self, unavailable: Unavailable) -> CallError {
        CallError::ServerGone {
            reason: unavailable.reason,
            stderr_tail: unavailable.stderr_tail,
        }
    }
}

async fn close_shared(connection: Arc<Box<dyn Connection>>) {
    // Calls in flight hold clones; the last one out closes it.
    if let Some(connection) = Arc::into_inner(connection) {
        connection.close().await;
    }
}

impl Connection for RelayConnection {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn info(&self) -> &ServerInfo {
        self.info.get_or_init(|| ServerInfo {
            era: warden_mcp::Era::Legacy,
            protocol_version: "unknown".into(),
            name: None,
            version: None,
            title: None,
            capabilities: Value::Null,
            instructions: None,
            program: None,
            connect_attempts: 1,
        })
    }

    fn list_tools(&self, timeout: Duration) -> BoxFuture<'_, Result<Vec<ToolDef>, CallError>> {
        Box::pin(async move {
            let connection = self
                .session()
                .await
                .map_err(|unavailable| self.gone(unavailable))?;
            connection.list_tools(timeout).await
        })
    }

    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        arguments: Option<Map<String, Value>>,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<CallOutcome, CallError>> {
        Box::pin(async move {
            let connection = self
                .session()
                .await
                .map_err(|unavailable| self.gone(unavailable))?;
            // The deadline travels with the request; the supervisor takes its margin off.
            self.deadlines.call_ms.store(
                u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                Ordering::Relaxed,
            );
            connection.call_tool(name, arguments, timeout).await
        })
    }

    /// Resources, prompts and completion are read through the relay like tools: the
    /// stream carries MCP unchanged, so the brain's client forwards them to the child.
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
            if !warden_mcp::FORWARDED_METHODS.contains(&method) {
                return Err(warden_mcp::connection::not_forwarded(method));
            }
            let connection = self
                .session()
                .await
                .map_err(|unavailable| self.gone(unavailable))?;
            // The read's own timeout travels with it, as a tool call's does.
            self.deadlines.call_ms.store(
                u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                Ordering::Relaxed,
            );
            connection.request(method, params, timeout).await
        })
    }

    /// The current session's notices (resource and prompt list changes): a session opened
    /// again after the channel broke has new ones, as a restarted local server has.
    fn notices(&self) -> Option<Arc<warden_mcp::ServerNotices>> {
        match self.session.try_lock() {
            Ok(session) => session
                .as_ref()
                .and_then(|session| session.connection.notices()),
            Err(_) => None,
        }
    }

    fn take_tools_changed(&self) -> bool {
        match self.session.try_lock() {
            Ok(session) => session
                .as_ref()
                .is_some_and(|session| session.connection.take_tools_changed()),
            Err(_) => false,
        }
    }

    fn stderr_tail(&self, count: usize) -> Vec<String> {
        match self.session.try_lock() {
            Ok(session) => session
                .as_ref()
                .map(|session| session.connection.stderr_tail(count))
                .unwrap_or_default(),
            Err(_) => Vec::new(),
        }
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, StopReport> {
        Box::pin(async move {
            let session = self.session.lock().await.take();
            if let Some(session) = session {
                close_shared(session.connection).await;
            }
            self.channel.close_stream(&self.spec.name).await;
            self.channel.release().await;
            StopReport {
                status: format!("stream through relay `{}` closed", self.channel.name()),
                signals: Vec::new(),
            }
        })
    }
}
