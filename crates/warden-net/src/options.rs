//! How Warden's HTTP client is configured.

use std::sync::Once;
use std::time::Duration;

use crate::NetError;

/// Settings of one HTTP client.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpOptions {
    /// Time allowed to open a TCP connection and finish the TLS handshake.
    pub connect_timeout: Duration,
    /// Longest gap between two reads of a response (headers or body chunks).
    pub read_idle_timeout: Duration,
    /// Whole-request limit; `None` for streams that may legitimately run long (each read
    /// is still bounded by the idle timeout).
    pub request_timeout: Option<Duration>,
    /// A proxy URL; `None` means a direct connection, whatever the environment says.
    pub proxy: Option<String>,
    /// The `User-Agent` sent.
    pub user_agent: String,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            connect_timeout: Duration::from_secs(10),
            read_idle_timeout: Duration::from_secs(300),
            request_timeout: None,
            proxy: None,
            user_agent: format!("warden/{}", env!("CARGO_PKG_VERSION")),
        }
    }
}

static CRYPTO: Once = Once::new();

/// Builds a client under Warden's rules (see the crate docs).
pub fn client(options: &HttpOptions) -> Result<reqwest::Client, NetError> {
    builder(options)?
        .build()
        .map_err(|error| NetError::Setup(error.to_string()))
}

/// Builds a client like [`client`] that reaches public addresses only: a name is resolved
/// by Warden and its special-range addresses ([`crate::special_range`]: loopback, private,
/// link-local and the cloud metadata service, ...) are dropped, so a name that has only
/// such addresses fails to connect, saying which. The connection goes to an address that
/// was checked (no second lookup to rebind). IP-literal hosts are not resolved: callers
/// check them with [`crate::special_range`] before sending.
pub fn public_client(options: &HttpOptions) -> Result<reqwest::Client, NetError> {
    builder(options)?
        .dns_resolver(std::sync::Arc::new(PublicOnly))
        .build()
        .map_err(|error| NetError::Setup(error.to_string()))
}

/// Name lookups that keep only public addresses.
struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        Box::pin(lookup_public(name.as_str().to_owned()))
    }
}

/// The public addresses of `host`; an error naming the first special one when it has no
/// other.
async fn lookup_public(
    host: String,
) -> Result<reqwest::dns::Addrs, Box<dyn std::error::Error + Send + Sync>> {
    let found: Vec<std::net::SocketAddr> =
        tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
    let (public, special): (Vec<_>, Vec<_>) = found
        .into_iter()
        .partition(|address| crate::special_range(address.ip()).is_none());
    if public.is_empty() {
        let reason = match special.first() {
            Some(address) => format!(
                "{host} resolves to {} ({}), not to a public address: refused",
                address.ip(),
                crate::special_range(address.ip()).unwrap_or("special range")
            ),
            None => format!("{host} has no address"),
        };
        return Err(reason.into());
    }
    Ok(Box::new(public.into_iter()))
}

fn builder(options: &HttpOptions) -> Result<reqwest::ClientBuilder, NetError> {
    CRYPTO.call_once(|| {
        // Fails only if another provider was installed first, which is then used instead.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    let mut builder = reqwest::Client::builder()
        .user_agent(options.user_agent.clone())
        .connect_timeout(options.connect_timeout)
        .read_timeout(options.read_idle_timeout)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .https_only(false);
    if let Some(timeout) = options.request_timeout {
        builder = builder.timeout(timeout);
    }
    if let Some(proxy) = &options.proxy {
        let proxy = reqwest::Proxy::all(proxy)
            .map_err(|error| NetError::Setup(format!("proxy {proxy:?}: {error}")))?;
        builder = builder.proxy(proxy);
    }
    Ok(builder)
}

/// True when `url` names a loopback host (`localhost` and names under it, with or without
/// the final dot; `127.0.0.0/8`, `::1`), where plain `http://` is acceptable.
pub fn is_loopback_url(url: &reqwest::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(name)) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            name == "localhost" || name.ends_with(".localhost")
        }
        Some(url::Host::Ipv4(address)) => address.is_loopback(),
        Some(url::Host::Ipv6(address)) => address.is_loopback(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_recognised() {
        for (url, loopback) in [
            ("http://localhost:8080/mcp", true),
            ("http://127.0.0.1/mcp", true),
            ("http://127.9.9.9/", true),
            ("http://[::1]:3000/", true),
            ("http://app.localhost/", true),
            ("http://localhost./", true),
            ("http://A.LocalHost./", true),
            ("http://example.com/", false),
            ("http://10.0.0.1/", false),
            ("http://localhost.example.com/", false),
        ] {
            let parsed = reqwest::Url::parse(url).unwrap();
            assert_eq!(is_loopback_url(&parsed), loopback, "{url}");
        }
    }

    #[tokio::test]
    async fn the_public_resolver_drops_special_addresses() {
        use reqwest::dns::Resolve as _;
        // `localhost` (and /etc/hosts names like it) resolve to loopback only: refused,
        // with the address and its range named.
        let error = PublicOnly
            .resolve("localhost".parse().unwrap())
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(
            error.contains("localhost resolves to") && error.contains("loopback"),
            "{error}"
        );
        public_client(&HttpOptions::default()).unwrap();
    }

    #[test]
    fn the_client_builds_with_and_without_a_proxy() {
        client(&HttpOptions::default()).unwrap();
        let options = HttpOptions {
            proxy: Some("http://127.0.0.1:3128".into()),
            ..HttpOptions::default()
        };
        client(&options).unwrap();
        let bad = HttpOptions {
            proxy: Some("::not a url".into()),
            ..HttpOptions::default()
        };
        assert!(matches!(client(&bad), Err(NetError::Setup(_))));
    }
}
