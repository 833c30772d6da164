//! Warden's Streamable HTTP client, for remote servers of both protocol eras.
//!
//! Written here rather than taken from rmcp (see docs/decisions/0013) so that every rule a
//! careful client keeps is in one place Warden controls:
//! - [`exchange`]: one POST and its answer, JSON or an event stream; redirects, odd
//!   statuses and content types refused; bodies and single events size-capped; legacy
//!   streams resumed with `Last-Event-ID`, honouring `retry`;
//! - [`headers`]: the 2026-07-28 headers mirroring the body, and the `x-mcp-header` rules;
//! - [`session`]: the conversation in one era (`initialize` + session, or stateless `_meta`);
//! - [`detect`]: which era a server speaks, cached per origin, or pinned by configuration;
//! - [`reconnect`]: back-off for retries of transient failures;
//! - [`connection`]: the [`crate::Connection`] over all of it, with the reconnect policy;
//! - `sse_legacy`: the deprecated HTTP+SSE transport (2024-11-05), only when configured.
//!
//! The server is never started by Warden: a URL is somebody else's process.

mod connection;
mod detect;
mod error;
mod exchange;
pub mod headers;
pub mod reconnect;
mod session;
mod sse_legacy;

pub use connection::{connect, list_tools};
pub use detect::{Remote, open};
pub use error::HttpError;
pub use exchange::{DeclineRequests, ServerRequests};
pub use session::{ClientProfile, LEGACY_VERSIONS, MODERN_VERSION, Session};

/// Builds the OAuth client of a remote server: the binary decides where tokens are kept
/// and who takes the user to consent. `None` leaves the server without sign-in.
pub trait OAuthProvider: Send + Sync + std::fmt::Debug {
    /// The client for `remote` (called once per connection).
    fn client(&self, remote: &Remote) -> Option<std::sync::Arc<warden_oauth::OAuthClient>>;
}
