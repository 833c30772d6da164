//! What can go wrong signing in, each case in words a user can act on. No variant ever
//! carries a token, a client secret or an authorization code.

use warden_net::NetError;

/// One failed step of discovery, registration, authorization or token exchange.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    /// A URL the flow would use is not acceptable (scheme, plain http to a remote host).
    #[error("refusing {what} {url}: {reason}")]
    BadUrl {
        /// Which URL (e.g. "the token endpoint").
        what: &'static str,
        /// The URL, as received.
        url: String,
        /// Why it was refused.
        reason: String,
    },
    /// An HTTP exchange failed (connect, TLS, timeout, size cap).
    #[error("{what}: {source}")]
    Net {
        /// Which exchange.
        what: &'static str,
        /// The cause.
        source: NetError,
    },
    /// A server answered a metadata, registration or token request with a redirect.
    #[error(
        "{what} redirected (HTTP {status}) to {location}; Warden never follows redirects in a \
         sign-in (a redirect could carry credentials to another host)"
    )]
    Redirect {
        /// Which exchange.
        what: &'static str,
        /// The status code.
        status: u16,
        /// The `Location` header.
        location: String,
    },
    /// An unexpected status (with the start of the body, sanitised).
    #[error("{what} answered HTTP {status}{}", detail_text(.detail))]
    Status {
        /// Which exchange.
        what: &'static str,
        /// The status code.
        status: u16,
        /// OAuth `error` / `error_description`, or the start of the body.
        detail: String,
    },
    /// A document that is not what the protocol calls for.
    #[error("{what} is not valid: {reason}")]
    Malformed {
        /// Which document.
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// No protected-resource metadata at any of the places the specification names.
    #[error("no protected-resource metadata for {server}: tried {tried}")]
    NoResourceMetadata {
        /// The server URL.
        server: String,
        /// The URLs tried, with what each answered.
        tried: String,
    },
    /// The protected-resource metadata names another resource than the server.
    #[error(
        "the protected-resource metadata is for {resource}, not for {server}; Warden will not \
         obtain (or send) a token for another resource"
    )]
    ResourceMismatch {
        /// The `resource` of the metadata.
        resource: String,
        /// The server URL.
        server: String,
    },
    /// No authorization-server metadata at any of the places the specification names.
    #[error("no authorization-server metadata for issuer {issuer}: tried {tried}")]
    NoServerMetadata {
        /// The issuer.
        issuer: String,
        /// The URLs tried, with what each answered.
        tried: String,
    },
    /// The metadata's `issuer` is not the issuer it was fetched for (a mix-up).
    #[error(
        "the authorization-server metadata fetched for issuer {expected} says its issuer is \
         {found}; discarded (issuer mix-up)"
    )]
    IssuerMismatch {
        /// The issuer the URL was built from.
        expected: String,
        /// The `issuer` in the document.
        found: String,
    },
    /// The authorization server does not advertise PKCE with S256.
    #[error(
        "the authorization server {issuer} does not advertise PKCE with S256 \
         (code_challenge_methods_supported: {advertised}); Warden refuses to sign in without it"
    )]
    NoPkce {
        /// The issuer.
        issuer: String,
        /// What it advertised.
        advertised: String,
    },
    /// No way to identify Warden to the authorization server.
    #[error(
        "the authorization server {issuer} offers no way for Warden to register (no client ID \
         metadata document support, no registration endpoint) and no client_id is configured \
         for it; set [servers.NAME.oauth] client_id (and client_secret) for this server"
    )]
    NoClientIdentity {
        /// The issuer.
        issuer: String,
    },
    /// Pre-registered credentials are bound to another authorization server.
    #[error(
        "the configured client_id is for issuer {configured}, but the server now names \
         {current}; Warden does not send credentials to another authorization server"
    )]
    WrongIssuerForCredentials {
        /// The issuer the configuration names.
        configured: String,
        /// The issuer the server now uses.
        current: String,
    },
    /// No supported token endpoint authentication method.
    #[error(
        "the authorization server supports none of Warden's token endpoint authentication methods (it offers {offered})"
    )]
    NoAuthMethod {
        /// What it offered.
        offered: String,
    },
    /// The authorization response (the redirect back to Warden) was refused.
    #[error("the authorization response was refused: {0}")]
    Callback(String),
    /// The user must sign in, and there is no way to ask them here.
    #[error("needs sign-in: run `warden login {server}`")]
    NeedsSignIn {
        /// The server's name.
        server: String,
    },
    /// Step-up or re-authorization was tried as often as allowed.
    #[error("the server still refuses the token after {attempts} authorization attempt(s){}", detail_text(.detail))]
    RetriesSpent {
        /// Attempts made.
        attempts: u32,
        /// The last challenge, if any.
        detail: String,
    },
    /// A refresh failed a moment ago without being refused (the authorization server
    /// unreachable or unwell); the next one waits a little, doubling each time.
    #[error("refreshing the token failed a moment ago ({last}); the next try is in {secs} s")]
    RefreshPaused {
        /// Why the last refresh failed.
        last: String,
        /// Seconds until the next try.
        secs: u64,
    },
    /// The token store failed.
    #[error("token store: {0}")]
    Store(String),
    /// Something waited longer than allowed.
    #[error("{what} did not finish within {secs} s")]
    Timeout {
        /// What.
        what: &'static str,
        /// The limit.
        secs: u64,
    },
}

fn detail_text(detail: &str) -> String {
    if detail.is_empty() {
        String::new()
    } else {
        format!(": {detail}")
    }
}

pub(crate) use warden_net::excerpt;
