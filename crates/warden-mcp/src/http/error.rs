//! What can go wrong talking to a remote server, each case in words a user can act on.

use serde_json::Value;
use warden_net::NetError;

/// One failed exchange with a remote (Streamable HTTP) server.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The URL could not be used.
    #[error("invalid URL {url:?}: {reason}")]
    BadUrl {
        /// The URL as configured.
        url: String,
        /// Why it was refused.
        reason: String,
    },
    /// A configured header cannot be sent (invalid name or value).
    #[error("header `{name}` cannot be sent: {reason}")]
    BadHeader {
        /// The header's name (its value is never shown: it may be a secret).
        name: String,
        /// Why.
        reason: String,
    },
    /// Plain `http://` to a host that is not loopback, without `allow_http = true`.
    #[error(
        "refusing plain http:// to {host}, which is not a loopback host: headers (tokens) would \
         cross the network unencrypted; use https:// or set `allow_http = true` for this server"
    )]
    InsecureUrl {
        /// The host named by the URL.
        host: String,
    },
    /// The HTTP exchange itself failed (connect, TLS, timeout, size cap).
    #[error(transparent)]
    Net(#[from] NetError),
    /// The server answered with a redirect, which Warden never follows.
    #[error(
        "the server redirected (HTTP {status}) to {location}; Warden does not follow redirects \
         (a redirect could carry the headers to another origin): configure the final URL"
    )]
    Redirect {
        /// The status code.
        status: u16,
        /// The `Location` header, if any.
        location: String,
    },
    /// 401 or 403: the server wants credentials Warden did not send or that it refused.
    #[error("needs authorization: the server answered HTTP {status}{}", challenge_text(.challenge))]
    NeedsAuthorization {
        /// 401 or 403.
        status: u16,
        /// The `WWW-Authenticate` header, if any (a challenge, never a secret).
        challenge: Option<String>,
    },
    /// Signing in (or refreshing, or stepping up) failed; the server was not sent a token
    /// it should not see. The reason names the step.
    #[error(
        "needs authorization: the server answered HTTP {status}{}; {error}",
        challenge_text(.challenge)
    )]
    Auth {
        /// 401 or 403.
        status: u16,
        /// The `WWW-Authenticate` header, if any (sanitised).
        challenge: Option<String>,
        /// Why signing in (or refreshing, or stepping up) did not help.
        error: warden_oauth::OAuthError,
    },
    /// Any other unexpected status.
    #[error("the server answered HTTP {status}{}", excerpt_text(.excerpt))]
    Status {
        /// The status code.
        status: u16,
        /// The start of the body, sanitised.
        excerpt: String,
    },
    /// A reply whose content type is neither JSON nor an event stream.
    #[error(
        "the server answered with content type {content_type:?}; expected application/json or \
         text/event-stream"
    )]
    ContentType {
        /// The `Content-Type` received.
        content_type: String,
    },
    /// A reply that is not the JSON-RPC message the protocol calls for.
    #[error("the server's reply is not valid JSON-RPC: {0}")]
    Malformed(String),
    /// The server answered the request with a JSON-RPC error.
    #[error("the server answered with error {code}: {message}")]
    Rpc {
        /// The HTTP status it came with.
        status: u16,
        /// JSON-RPC error code.
        code: i64,
        /// The server's message.
        message: String,
        /// The error's `data`, if any.
        data: Option<Value>,
    },
    /// The event stream ended (or broke) before the answer came, and could not be resumed.
    #[error("the response stream ended before the answer arrived{}", excerpt_text(.detail))]
    StreamEnded {
        /// What ended it, if known.
        detail: String,
    },
    /// An HTTP+SSE `endpoint` event names a URL of another origin than the SSE URL.
    #[error(
        "the server's endpoint event names {endpoint}, which is not on the origin of its SSE \
         URL ({origin}); Warden refuses to send requests (and the configured headers) there"
    )]
    ForeignEndpoint {
        /// The endpoint as resolved (sanitised).
        endpoint: String,
        /// The origin of the SSE URL.
        origin: String,
    },
    /// The protocol era could not be agreed.
    #[error("{0}")]
    Era(String),
}

fn challenge_text(challenge: &Option<String>) -> String {
    match challenge {
        Some(challenge) => format!(" (WWW-Authenticate: {challenge})"),
        None => String::new(),
    }
}

fn excerpt_text(excerpt: &str) -> String {
    if excerpt.is_empty() {
        String::new()
    } else {
        format!(": {excerpt}")
    }
}

impl HttpError {
    /// True when trying again later could help: a refused connection, a timeout, a 5xx,
    /// 408 or 429. Never for 401, 403, 404 or a protocol error.
    pub fn is_transient(&self) -> bool {
        match self {
            HttpError::Net(error) => error.is_transient(),
            HttpError::Status { status, .. } | HttpError::Rpc { status, .. } => {
                *status >= 500 || *status == 408 || *status == 429
            }
            _ => false,
        }
    }

    /// True when the server never took the request: it said so (503; 404, the session it
    /// names is unknown) or the connection was refused. Such a request may be sent again
    /// whatever it does, and the audit log must not say it may have run.
    pub fn not_delivered(&self) -> bool {
        match self {
            HttpError::Status { status, .. } => matches!(status, 503 | 404),
            HttpError::Net(net) => net.is_refused(),
            _ => false,
        }
    }

    /// True for 401 / 403: the server is up but wants (other) credentials.
    pub fn needs_authorization(&self) -> bool {
        matches!(
            self,
            HttpError::NeedsAuthorization { .. } | HttpError::Auth { .. }
        )
    }
}

pub(crate) use warden_net::excerpt;
