//! `warden serve`: Warden's second face, an MCP server that any MCP client connects to.
//!
//! It serves the aggregate of every configured server (or one, transparently) under the
//! one policy, so a client such as Claude Code or an SDK gets Warden's confinement, pins,
//! policy with provenance, approvals and audit log without Warden's own agent loop.
//!
//! - [`backend`]: the only module that uses the host core: the tool list, and a call made
//!   for one client in that client's own policy context.
//! - [`aggregate`]: resources, templates and prompts of every upstream as one list each,
//!   and the routes back to the server each belongs to.
//! - [`dispatch`]: the protocol, both eras (2025-11-25 sessions, 2026-07-28 stateless),
//!   independent of the transport.
//! - [`stdio`]: one client over stdin and stdout.
//! - [`http`]: many clients over Streamable HTTP, with the hardening a listening socket
//!   needs (Host and Origin checks, bearer tokens, caps and timeouts).
//! - [`oauth`]: `[serve.auth]`, the HTTP face as an OAuth 2.1 resource server
//!   (protected-resource metadata, bearer tokens validated for Warden, the caller).
//! - [`secret`]: session ids, constant-time comparison, the signed approval state.
//! - [`jsonrpc`]: the message layer.
//! - [`rate`]: per-client request rates (a token bucket per client).
//! - [`metrics`]: counters of requests, upstream calls and refusals, for `/metrics`.
//! - [`listener`]: what one client hears of changes (list changes, resource updates).
//! - [`subscriptions`]: the clients' resource subscriptions over the shared upstreams.

pub mod aggregate;
pub mod backend;
pub mod dispatch;
pub mod generations;
pub mod guard;
pub mod http;
pub mod listener;
/// The message layer (in warden-mcp, with every other decoder of protocol bytes).
pub use warden_mcp::jsonrpc;
pub mod metrics;
pub mod oauth;
mod outstanding;
pub mod parked;
pub mod rate;
pub mod relayed;
pub mod secret;
pub mod stdio;
pub mod subscriptions;

pub use backend::{Backend, BackendError, ClientContext, Offers};
pub use dispatch::{Gateway, ProtocolOptions};
pub use guard::{Guard, Principal};
pub use http::HttpLimits;
pub use oauth::ResourceServer;
pub use stdio::StdioLimits;
