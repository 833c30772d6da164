//! Warden's HTTP client stack, shared by remote MCP servers and model APIs.
//!
//! Everything Warden sends over HTTP goes through a [`reqwest::Client`] built by
//! [`client`], so the same rules hold everywhere:
//! - TLS is rustls with the `ring` provider and the platform's trust store; a name mismatch
//!   is an error that says so ([`NetError::describe`] spells it out);
//! - no proxy is taken from the environment (`HTTPS_PROXY` and friends are ignored) unless
//!   [`HttpOptions::proxy`] names one: a variable set for some other tool must not silently
//!   route a user's keys through a third party;
//! - redirects are never followed: the caller sees the 3xx and decides;
//! - a connect timeout, and an idle-read timeout, always.
//!
//! Bodies are read with [`read_capped`], never whole and unbounded; event streams are decoded
//! by [`SseDecoder`], which caps a single event's size.
//!
//! ```no_run
//! # async fn demo() -> Result<(), warden_net::NetError> {
//! let http = warden_net::client(&warden_net::HttpOptions::default())?;
//! let response = http.get("https://example.invalid/").send().await.map_err(warden_net::NetError::from_reqwest)?;
//! let body = warden_net::read_capped(response, 1 << 20).await?;
//! # let _ = body; Ok(()) }
//! ```

pub mod addr;
mod body;
mod error;
mod options;
mod sse;
pub mod transport;

pub use addr::special_range;
pub use body::{EXCERPT_CHARS, excerpt, read_capped, sse_events};
pub use error::NetError;
pub use options::{HttpOptions, client, is_loopback_url, public_client};
pub use sse::{SseDecoder, SseEvent};
pub use transport::Transport;

pub use reqwest;
