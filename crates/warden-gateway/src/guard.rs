//! The gate every HTTP request passes before anything runs: `Host`, `Origin`, and the
//! bearer token.
//!
//! - `Host` must name an allowed host: the loopback names (`localhost`, `127.0.0.1`,
//!   `[::1]`), the address bound, and hosts configured. A DNS-rebinding attack reaches the
//!   loopback socket under the attacker's own name, so its `Host` names that domain: 403.
//! - `Origin`, when a browser sends one, must be a loopback origin or one configured: a
//!   page on another site gets 403. Clients that are not browsers send none.
//! - With tokens configured (required when the address is not loopback), the request
//!   must carry `Authorization: Bearer TOKEN` for one of them; every token is compared in
//!   constant time. The token that matched is the request's [`Principal`]: sessions belong
//!   to it, and modern clients' policy contexts are kept per principal.
//! - With `[serve.auth]` instead ([`Guard::with_resource_server`]), the gate checks `Host`
//!   and `Origin` only; [`crate::oauth`] then admits a request with an OAuth access token
//!   meant for Warden, whose caller is the principal.

use std::net::SocketAddr;
use std::sync::Arc;

use http::{HeaderMap, StatusCode};
use sha2::Digest as _;

use crate::secret::constant_time_eq;

/// Who a request speaks for.
#[derive(Debug, Clone)]
pub enum Principal {
    /// No tokens are configured (loopback only).
    Anonymous,
    /// The request carried the token configured under this name.
    Token(String),
    /// The request carried an OAuth access token for Warden, issued to this caller
    /// ([`crate::oauth`]).
    Caller(Arc<warden_policy::Caller>),
}

/// Two callers are one principal when issuer, subject and client agree: a caller's next
/// token (refreshed, other scopes) keeps its sessions.
impl PartialEq for Principal {
    fn eq(&self, other: &Principal) -> bool {
        match (self, other) {
            (Principal::Anonymous, Principal::Anonymous) => true,
            (Principal::Token(a), Principal::Token(b)) => a == b,
            (Principal::Caller(a), Principal::Caller(b)) => a.same_identity(b),
            _ => false,
        }
    }
}

impl Eq for Principal {}

impl Principal {
    /// The key of this principal's entries in maps (policy contexts, rate buckets): equal
    /// exactly when the principals are. A caller's is a SHA-256 of its issuer, subject and
    /// client, each length-prefixed, so two callers whose shortened labels coincide still
    /// get keys of their own.
    pub fn key(&self) -> String {
        match self {
            Principal::Anonymous => "loopback".into(),
            Principal::Token(name) => format!("token:{name}"),
            Principal::Caller(caller) => {
                let mut hasher = sha2::Sha256::new();
                let mut part = |bytes: Option<&[u8]>| match bytes {
                    Some(bytes) => {
                        hasher.update([1]);
                        hasher.update((bytes.len() as u64).to_be_bytes());
                        hasher.update(bytes);
                    }
                    None => hasher.update([0]),
                };
                part(Some(caller.issuer.as_bytes()));
                part(caller.subject.as_deref().map(str::as_bytes));
                part(caller.client_id.as_deref().map(str::as_bytes));
                let digest = hasher.finalize();
                let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
                format!("caller:{hex}")
            }
        }
    }

    /// A one-line name for logs, audit rows and client names (not unique: callers' labels
    /// are shortened).
    pub fn label(&self) -> String {
        match self {
            Principal::Caller(caller) => caller.label(),
            other => other.key(),
        }
    }

    /// The authenticated caller, if the request has one.
    pub fn caller(&self) -> Option<&Arc<warden_policy::Caller>> {
        match self {
            Principal::Caller(caller) => Some(caller),
            _ => None,
        }
    }
}

/// A refused request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// 400, 401 or 403.
    pub status: StatusCode,
    /// Why, for the client and the log.
    pub reason: String,
}

/// What the gate allows.
pub struct Guard {
    hosts: Vec<String>,
    origins: Vec<String>,
    tokens: Vec<(String, Vec<u8>)>,
    resource: Option<Arc<crate::oauth::ResourceServer>>,
}

/// Why a gate cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    /// A non-loopback address without tokens.
    #[error(
        "{addr} is not a loopback address: serving it needs bearer tokens ([serve] tokens in \
         the configuration, or --token-env VAR), or bind 127.0.0.1"
    )]
    NeedsTokens {
        /// The address.
        addr: SocketAddr,
    },
    /// A token is empty or too short to resist guessing.
    #[error("the token `{name}` is shorter than 16 characters")]
    WeakToken {
        /// Its name.
        name: String,
    },
}

const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// The host part of a `Host` value or an origin's authority, lowercased, without port.
fn host_part(authority: &str) -> Option<String> {
    let authority = authority.trim().to_ascii_lowercase();
    if authority.is_empty() || authority.contains(['/', '@', ' ']) {
        return None;
    }
    if authority.starts_with('[') {
        let end = authority.find(']')?;
        let rest = &authority[end + 1..];
        if !(rest.is_empty() || rest.strip_prefix(':').is_some_and(is_port)) {
            return None;
        }
        return Some(authority[..=end].to_owned());
    }
    match authority.split_once(':') {
        Some((host, port)) if is_port(port) && !host.is_empty() => Some(host.to_owned()),
        Some(_) => None,
        None => Some(authority),
    }
}

fn is_port(text: &str) -> bool {
    !text.is_empty() && text.len() <= 5 && text.bytes().all(|b| b.is_ascii_digit())
}

impl Guard {
    /// The gate for a server bound to `addr`, also allowing `hosts` and `origins`, and
    /// requiring one of `tokens` (name, value) when any are given.
    pub fn new(
        addr: SocketAddr,
        hosts: &[String],
        origins: &[String],
        tokens: Vec<(String, String)>,
    ) -> Result<Guard, GuardError> {
        if !addr.ip().is_loopback() && tokens.is_empty() {
            return Err(GuardError::NeedsTokens { addr });
        }
        for (name, value) in &tokens {
            if value.chars().count() < 16 {
                return Err(GuardError::WeakToken { name: name.clone() });
            }
        }
        Ok(Guard::open(addr, hosts, origins, tokens))
    }

    /// The gate for a server bound to `addr` whose every request (but the metadata) needs
    /// an OAuth access token `server` accepts; `hosts` and `origins` as in [`Guard::new`].
    /// Any address may be bound: every caller is authenticated.
    pub fn with_resource_server(
        addr: SocketAddr,
        hosts: &[String],
        origins: &[String],
        server: Arc<crate::oauth::ResourceServer>,
    ) -> Guard {
        let mut guard = Guard::open(addr, hosts, origins, Vec::new());
        guard.resource = Some(server);
        guard
    }

    /// The resource server, when `[serve.auth]` is configured.
    pub fn resource_server(&self) -> Option<&crate::oauth::ResourceServer> {
        self.resource.as_deref()
    }

    fn open(
        addr: SocketAddr,
        hosts: &[String],
        origins: &[String],
        tokens: Vec<(String, String)>,
    ) -> Guard {
        let mut allowed: Vec<String> = LOOPBACK_HOSTS.iter().map(|h| (*h).to_owned()).collect();
        if !addr.ip().is_unspecified() {
            let ip = match addr {
                SocketAddr::V4(v4) => v4.ip().to_string(),
                SocketAddr::V6(v6) => format!("[{}]", v6.ip()),
            };
            allowed.push(ip);
        }
        allowed.extend(hosts.iter().filter_map(|host| host_part(host)));
        Guard {
            hosts: allowed,
            origins: origins
                .iter()
                .map(|origin| origin.trim_end_matches('/').to_ascii_lowercase())
                .collect(),
            tokens: tokens
                .into_iter()
                .map(|(name, value)| (name, value.into_bytes()))
                .collect(),
            resource: None,
        }
    }

    /// Checks one request's headers.
    pub fn check(&self, headers: &HeaderMap) -> Result<Principal, Refusal> {
        let refuse = |status: StatusCode, reason: String| Refusal { status, reason };
        let host = headers
            .get(http::header::HOST)
            .and_then(|v| v.to_str().ok());
        let Some(host) = host else {
            return Err(refuse(StatusCode::BAD_REQUEST, "no Host header".into()));
        };
        match host_part(host) {
            Some(name) if self.hosts.contains(&name) => {}
            _ => {
                return Err(refuse(
                    StatusCode::FORBIDDEN,
                    format!(
                        "Host `{}` is not allowed (DNS rebinding protection)",
                        shown(host)
                    ),
                ));
            }
        }
        if let Some(origin) = headers.get(http::header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("").trim_end_matches('/');
            if !self.origin_allowed(origin) {
                return Err(refuse(
                    StatusCode::FORBIDDEN,
                    format!("Origin `{}` is not allowed", shown(origin)),
                ));
            }
        }
        if self.tokens.is_empty() {
            return Ok(Principal::Anonymous);
        }
        let presented = headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|value| {
                let (scheme, token) = value.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            });
        let Some(presented) = presented else {
            return Err(refuse(
                StatusCode::UNAUTHORIZED,
                "a bearer token is required".into(),
            ));
        };
        // Every token is compared, whichever matches, so timing tells nothing.
        let mut matched = None;
        for (name, value) in &self.tokens {
            if constant_time_eq(presented.as_bytes(), value) && matched.is_none() {
                matched = Some(name.clone());
            }
        }
        matched.map(Principal::Token).ok_or_else(|| {
            refuse(
                StatusCode::UNAUTHORIZED,
                "the bearer token is not valid".into(),
            )
        })
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        let lowered = origin.to_ascii_lowercase();
        if self.origins.contains(&lowered) {
            return true;
        }
        let Some((scheme, authority)) = lowered.split_once("://") else {
            return false;
        };
        matches!(scheme, "http" | "https")
            && host_part(authority).is_some_and(|host| LOOPBACK_HOSTS.contains(&host.as_str()))
    }
}

/// A header value as shown in a message: printable, short.
fn shown(value: &str) -> String {
    value
        .chars()
        .filter(|c| c.is_ascii_graphic())
        .take(80)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn callers_whose_labels_coincide_have_keys_of_their_own() {
        let caller = |subject: &str, client: Option<&str>| {
            Principal::Caller(Arc::new(warden_policy::Caller {
                issuer: "https://as.example".into(),
                subject: Some(subject.into()),
                client_id: client.map(str::to_owned),
                scopes: Vec::new(),
            }))
        };
        let long = "a".repeat(200);
        let pairs = [
            // Shortened to the same 128 characters.
            (
                caller(&format!("{long}x"), None),
                caller(&format!("{long}y"), None),
            ),
            // Control characters are removed from labels.
            (caller("alice\n", None), caller("alice", None)),
            // " via " joins subject and client.
            (caller("alice via app", None), caller("alice", Some("app"))),
        ];
        for (a, b) in &pairs {
            assert_eq!(a.label(), b.label(), "the labels should coincide");
            assert_ne!(a, b);
            assert_ne!(a.key(), b.key(), "{}", a.label());
        }
        // An empty client is not no client; no subject is not a subject.
        assert_ne!(caller("alice", Some("")).key(), caller("alice", None).key());
        let subjectless = Principal::Caller(Arc::new(warden_policy::Caller {
            issuer: "https://as.example".into(),
            subject: None,
            client_id: Some("alice".into()),
            scopes: Vec::new(),
        }));
        assert_ne!(subjectless.key(), caller("alice", Some("alice")).key());
        assert_ne!(subjectless.key(), caller("", Some("alice")).key());
        // Control: one caller with other scopes keeps its key.
        let same = Principal::Caller(Arc::new(warden_policy::Caller {
            issuer: "https://as.example".into(),
            subject: Some("alice".into()),
            client_id: Some("app".into()),
            scopes: vec!["mcp:read".into()],
        }));
        assert_eq!(same.key(), caller("alice", Some("app")).key());
        assert_eq!(same, caller("alice", Some("app")));
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    fn loopback() -> Guard {
        Guard::new("127.0.0.1:8080".parse().unwrap(), &[], &[], Vec::new()).unwrap()
    }

    #[test]
    fn rebinding_hosts_and_hostile_origins_get_403_and_loopback_passes() {
        let guard = loopback();
        for host in [
            "localhost:8080",
            "127.0.0.1:8080",
            "[::1]:8080",
            "LOCALHOST",
        ] {
            assert_eq!(
                guard.check(&headers(&[("host", host)])),
                Ok(Principal::Anonymous),
                "{host}"
            );
        }
        for host in [
            "evil.example:8080",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
            "localhost:80x",
        ] {
            let refusal = guard.check(&headers(&[("host", host)])).unwrap_err();
            assert_eq!(refusal.status, StatusCode::FORBIDDEN, "{host}");
        }
        for origin in [
            "https://evil.example",
            "null",
            "http://localhost.evil.example",
            "file://",
        ] {
            let refusal = guard
                .check(&headers(&[("host", "localhost:8080"), ("origin", origin)]))
                .unwrap_err();
            assert_eq!(refusal.status, StatusCode::FORBIDDEN, "{origin}");
        }
        assert!(
            guard
                .check(&headers(&[
                    ("host", "localhost:8080"),
                    ("origin", "http://localhost:3000")
                ]))
                .is_ok()
        );
        assert_eq!(
            guard.check(&headers(&[])).unwrap_err().status,
            StatusCode::BAD_REQUEST
        );
    }

    #[test]
    fn configured_origins_and_hosts_are_allowed() {
        let guard = Guard::new(
            "127.0.0.1:1".parse().unwrap(),
            &["mcp.internal:443".into()],
            &["https://app.example/".into()],
            Vec::new(),
        )
        .unwrap();
        assert!(
            guard
                .check(&headers(&[
                    ("host", "mcp.internal"),
                    ("origin", "https://app.example")
                ]))
                .is_ok()
        );
    }

    #[test]
    fn non_loopback_needs_tokens_and_tokens_are_checked() {
        let wild: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        assert!(matches!(
            Guard::new(wild, &[], &[], Vec::new()),
            Err(GuardError::NeedsTokens { .. })
        ));
        assert!(matches!(
            Guard::new(wild, &[], &[], vec![("a".into(), "short".into())]),
            Err(GuardError::WeakToken { .. })
        ));
        let guard = Guard::new(
            wild,
            &["gateway.lan".into()],
            &[],
            vec![
                ("alice".into(), "alice-token-0123456789".into()),
                ("bob".into(), "bob-token-0123456789ab".into()),
            ],
        )
        .unwrap();
        let with = |auth: &str| {
            guard.check(&headers(&[
                ("host", "gateway.lan:8080"),
                ("authorization", auth),
            ]))
        };
        assert_eq!(
            with("Bearer bob-token-0123456789ab"),
            Ok(Principal::Token("bob".into()))
        );
        assert_eq!(
            with("bearer alice-token-0123456789"),
            Ok(Principal::Token("alice".into()))
        );
        assert_eq!(
            with("Bearer alice-token-012345678").unwrap_err().status,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            with("Basic YTpi").unwrap_err().status,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            guard
                .check(&headers(&[("host", "gateway.lan")]))
                .unwrap_err()
                .status,
            StatusCode::UNAUTHORIZED
        );
    }
}
