//! Errors of the HTTP stack, each naming what went wrong in words a user can act on.

use std::error::Error as _;

/// What went wrong on an HTTP exchange.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The client could not be built (bad proxy URL, TLS set-up).
    #[error("HTTP client set-up failed: {0}")]
    Setup(String),
    /// A request failed before or while reading the response.
    #[error("{0}")]
    Request(String),
    /// A response body was larger than the cap.
    #[error("response body exceeds the {cap}-byte cap")]
    BodyTooLarge {
        /// The cap in bytes.
        cap: usize,
    },
    /// A single server-sent event was larger than the cap.
    #[error("a server-sent event exceeds the {cap}-byte cap")]
    EventTooLarge {
        /// The cap in bytes.
        cap: usize,
    },
    /// The stream sent nothing for longer than the idle timeout.
    #[error("no data for {secs} s (idle timeout)")]
    Idle {
        /// The idle timeout in seconds.
        secs: u64,
    },
    /// The event stream was not valid UTF-8.
    #[error("the event stream is not valid UTF-8")]
    NotUtf8,
}

impl NetError {
    /// Turns a reqwest error into a message that names the cause: a TLS certificate whose
    /// name does not match, a refused connection, a timeout.
    pub fn from_reqwest(error: reqwest::Error) -> NetError {
        NetError::Request(describe(&error))
    }

    /// True for a refused connection: the request never reached the server.
    pub fn is_refused(&self) -> bool {
        matches!(self, NetError::Request(message) if message.contains("connection refused"))
    }

    /// True when retrying could help: a refused or reset connection, a timeout.
    pub fn is_transient(&self) -> bool {
        match self {
            NetError::Request(message) => {
                message.contains("timed out")
                    || message.contains("connection refused")
                    || message.contains("connection reset")
                    || message.contains("connection closed")
            }
            NetError::Idle { .. } => true,
            _ => false,
        }
    }
}

/// The whole chain of causes, with the certificate-name case spelled out.
fn describe(error: &reqwest::Error) -> String {
    let mut parts = vec![error.to_string()];
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !parts.iter().any(|part| part.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    let mut message = parts.join(": ");
    let lower = message.to_ascii_lowercase();
    if lower.contains("notvalidforname") || lower.contains("not valid for name") {
        message.push_str(" (TLS: the server's certificate does not match its host name)");
    } else if error.is_timeout() {
        message.push_str(" (timed out)");
    } else if error.is_connect() && lower.contains("refused") {
        message = format!("connection refused: {message}");
    }
    message
}
