//! Connections from Warden to MCP servers.
//!
//! This crate owns everything between a [`warden_config::ServerSpec`] and a live, typed
//! conversation with the server behind it:
//!
//! - [`launcher`]: the only place that creates processes. Connection code asks a
//!   [`Launcher`] for a child and gets its pipes back; confinement plugs in there.
//! - [`stdio`]: a transport over the child's pipes with a size cap on every message and a
//!   bound on protocol faults (non-JSON lines on stdout).
//! - [`stderr_log`]: the child's stderr, drained into a bounded ring and a per-server file.
//! - [`http`]: the Streamable HTTP client for remote servers, both eras, Warden's own.
//! - [`jsonrpc`]: JSON-RPC messages as the gateway receives them (the header checks of
//!   2026-07-28 are in [`http::headers`], beside their encoder).
//! - [`connection`]: Warden's own [`Connection`] trait, and its implementation over `rmcp`,
//!   which is pinned to one exact version and never leaks out of this crate.
//!
//! Why our own trait: the SDK is young and moves fast; everything above this crate speaks
//! in Warden's types ([`ToolDef`], [`CallOutcome`], [`ServerInfo`]) so an SDK upgrade, or a
//! second transport, touches this crate alone.

pub mod confined;
pub mod connection;
pub mod downstream;
pub mod elicit;
pub mod error;
pub mod executed;
pub mod exposure;
pub mod fingerprint;
pub mod grants;
pub mod http;
pub mod jsonrpc;
pub mod launcher;
pub mod lines;
pub mod notices;
mod probe;
mod rmcp_client;
mod rmcp_listen;
pub mod stderr_log;
pub mod stdio;
pub mod subscription;

pub use confined::{ConfinedLauncher, Substituted};
pub use connection::{
    CacheScope, CallOutcome, ConnectOptions, Connection, Era, FORWARDED_METHODS, ListFreshness,
    RelayDialer, ServerInfo, ToolDef, connect, transport_forwards, transport_subscribes,
    transport_withholds,
};
pub use downstream::{CallContext, Downstream, InputRequired, InputRetry};
pub use elicit::{
    DeclineAll, ElicitationAnswer, ElicitationRequest, Elicitor, client_capabilities,
};
pub use error::{CallError, ConnectError, ConnectFailure, LaunchError};
pub use executed::Role;
pub use exposure::{WriteGrant, exposure};
pub use fingerprint::{Fingerprint, FingerprintError, HashedFile, fingerprint};
pub use grants::{Access, Grant, Grants, Reason};
pub use launcher::{DirectLauncher, LaunchRequest, Launched, Launcher, ProcessGroup};
pub use notices::ServerNotices;
pub use rmcp_client::{Pipes, PipesFailure, connect_pipes};
pub use stderr_log::StderrLog;
pub use subscription::ListenFilter;
