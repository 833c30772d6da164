//! Warden's egress proxy: the only way out for a server confined with a network allowlist
//! (`network = { allow = [...] }`, docs/decisions/0029-egress-proxy.md).
//!
//! The sandbox (`warden_sandbox::Network::Proxy`) gives such a server a network namespace
//! of its own in which nothing is routed and one listener exists, on `127.0.0.1:PORT`,
//! created inside the namespace and handed to Warden; the server's environment points
//! `HTTPS_PROXY` and `HTTP_PROXY` at it. [`EgressProxy::serve`] accepts on that listener in
//! Warden's process and, per connection:
//! - checks the destination against the server's allowlist ([`warden_config::egress`]);
//! - resolves names itself ([`Resolver`]) and refuses addresses in loopback, private,
//!   link-local (cloud metadata), CGNAT, multicast and the other special ranges
//!   ([`special_range`]) unless the entry names an IP literal or says `private = true`, and
//!   connects to the very address it checked (no second lookup to rebind);
//! - for `CONNECT`, reads the TLS ClientHello and requires its SNI to equal the `CONNECT`
//!   host before a byte reaches the destination ([`sni`]);
//! - for plain HTTP, forwards one request per connection with its `Host` header set to the
//!   URL's authority;
//! - bounds connections, bytes and time ([`EgressLimits`]);
//! - reports every attempt, allowed or refused, as an [`EgressEvent`] (Warden writes it to
//!   the audit log).
//!
//! A server that ignores the proxy variables reaches nothing: there is no route out of its
//! namespace.

mod event;
mod proxy;
mod resolve;
pub mod sni;

pub use event::{Decision, EgressEvent, EgressSink};
pub use proxy::{EgressLimits, EgressProxy, MAX_HEAD, MAX_REFUSALS_REPORTED_PER_SECOND, ProxyTask};
pub use resolve::{Resolution, Resolver, StaticResolver, SystemResolver};
pub use warden_net::special_range;

/// Locks `mutex`, taking over a poisoned one (its data stays consistent: counters).
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}
