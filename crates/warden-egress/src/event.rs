//! What the proxy reports about each connection attempt, for the audit log.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The decision on one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Allowed and connected (the attempt may still have failed later: see `error`).
    Allowed,
    /// Refused by the proxy: nothing was forwarded to the destination.
    Refused,
}

impl Decision {
    /// `allow` or `deny`, as the audit log's decision column says it.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allowed => "allow",
            Decision::Refused => "deny",
        }
    }
}

/// One connection attempt through the proxy, allowed or refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressEvent {
    /// The server the proxy serves.
    pub server: Arc<str>,
    /// `CONNECT`, or the HTTP method of a forwarded request; empty when the request could
    /// not be read.
    pub method: String,
    /// The host as the server named it (empty when the request could not be read).
    pub host: String,
    /// The port it asked for (0 when unknown).
    pub port: u16,
    /// The allowlist entry that matched, if one did.
    pub rule: Option<String>,
    /// The address Warden connected to (or refused), once resolved.
    pub address: Option<SocketAddr>,
    /// Allowed or refused.
    pub decision: Decision,
    /// Why it was refused, or what went wrong after it was allowed.
    pub error: Option<String>,
    /// Bytes from the server to the destination.
    pub bytes_up: u64,
    /// Bytes from the destination to the server.
    pub bytes_down: u64,
    /// How long the connection lasted.
    pub duration: Duration,
    /// When the attempt was made, in milliseconds since the Unix epoch.
    pub time_ms: i64,
}

impl EgressEvent {
    /// An attempt of `server` not read yet: refused, nothing known, stamped `time_ms`.
    pub(crate) fn unread(server: Arc<str>, time_ms: i64) -> EgressEvent {
        EgressEvent {
            server,
            method: String::new(),
            host: String::new(),
            port: 0,
            rule: None,
            address: None,
            decision: Decision::Refused,
            error: None,
            bytes_up: 0,
            bytes_down: 0,
            duration: Duration::ZERO,
            time_ms,
        }
    }
}

/// Where events go (the audit log, in Warden).
pub type EgressSink = Arc<dyn Fn(&EgressEvent) + Send + Sync>;
