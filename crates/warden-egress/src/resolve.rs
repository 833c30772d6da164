//! Name resolution for the proxy: done by Warden, never by the server.
//!
//! [`SystemResolver`] asks the host's resolver (`getaddrinfo` on a blocking thread, through
//! tokio); [`StaticResolver`] answers from a fixed map, for tests that must not depend on
//! (or send anything to) a real DNS server.

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;

/// A boxed future of a resolution.
pub type Resolution<'a> = Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send + 'a>>;

/// Turns a DNS name into addresses.
pub trait Resolver: Send + Sync + std::fmt::Debug {
    /// The addresses of `name` (lower case, no trailing dot), in preference order.
    fn resolve<'a>(&'a self, name: &'a str) -> Resolution<'a>;
}

/// The host's resolver.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn resolve<'a>(&'a self, name: &'a str) -> Resolution<'a> {
        Box::pin(async move {
            let addresses = tokio::net::lookup_host((name, 0)).await?;
            let mut out: Vec<IpAddr> = Vec::new();
            for address in addresses {
                if !out.contains(&address.ip()) {
                    out.push(address.ip());
                }
            }
            Ok(out)
        })
    }
}

/// Answers from a fixed map; a name it does not hold does not exist.
#[derive(Debug, Clone, Default)]
pub struct StaticResolver {
    names: BTreeMap<String, Vec<IpAddr>>,
}

impl StaticResolver {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Maps `name` to `addresses`.
    pub fn with(mut self, name: &str, addresses: &[IpAddr]) -> Self {
        self.names
            .insert(name.to_ascii_lowercase(), addresses.to_vec());
        self
    }
}

impl Resolver for StaticResolver {
    fn resolve<'a>(&'a self, name: &'a str) -> Resolution<'a> {
        let found = self.names.get(name).cloned();
        Box::pin(async move {
            found.ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, format!("no address for {name}"))
            })
        })
    }
}
