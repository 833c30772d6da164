//! Warden signing in to remote MCP servers: the client half of the MCP authorization
//! specification (2025-11-25 and 2026-07-28), OAuth 2.1 authorization code with PKCE.
//!
//! One job per module:
//! - [`challenge`]: the `Bearer` challenge of a 401 / 403 (`resource_metadata`, `scope`,
//!   `error`);
//! - [`discovery`]: protected-resource metadata (RFC 9728) and authorization-server
//!   metadata (RFC 8414, OpenID Connect discovery), with the resource and issuer checks;
//! - [`identity`]: who Warden is to an authorization server (configured credentials,
//!   Client ID Metadata Document, dynamic registration), bound to its issuer;
//! - [`pkce`]: PKCE S256 and `state`;
//! - [`flow`]: the authorization request, the checks on the response (`state`, RFC 9207
//!   `iss`), the token requests (with RFC 8707 `resource`);
//! - [`agent`]: who takes the user to consent ([`agent::Headless`] for tests and the
//!   conformance client, [`agent::NoUserAgent`] without a terminal);
//! - [`loopback`]: `warden login`'s agent, a loopback redirect on an ephemeral port with
//!   a paste-back fallback;
//! - [`store`]: grants keyed by issuer and resource, registrations keyed by issuer;
//!   memory or an opt-in 0600 file;
//! - [`os_store`]: the operating system's credential store (`keyring`), every call timed;
//! - [`client`]: [`OAuthClient`], one server's credentials, refresh and step-up with one
//!   refresh in flight per credential;
//! - `fetch`: the HTTP exchanges, capped, timed out, never following a redirect;
//! - [`jwt`] and [`resource`]: the other direction, Warden as a resource server
//!   (`warden serve --http` with `[serve.auth]`): JWT access tokens checked with the
//!   issuer's keys, or opaque tokens introspected; issuer, audience, time and scopes.
//!
//! Tokens and secrets are [`store::Secret`]s: their `Debug` shows nothing, and no error
//! message carries one.

pub mod agent;
pub mod challenge;
pub mod client;
pub mod discovery;
mod error;
mod fetch;
pub mod flow;
pub mod identity;
pub mod jwt;
pub mod loopback;
pub mod os_store;
pub mod pkce;
pub mod resource;
pub mod store;

pub use agent::{Headless, NoUserAgent, UserAgent};
pub use challenge::{Challenge, parse as parse_challenge};
pub use client::{AuthState, OAuthClient};
pub use error::OAuthError;
pub use fetch::{EXCHANGE_LIMIT, Fetcher, check_url};
pub use identity::{ClientSettings, Preregistered};
pub use loopback::Loopback;
pub use os_store::OsStore;
pub use store::{AuthMethod, FileStore, MemoryStore, Secret, Store};
pub use url::Url;
