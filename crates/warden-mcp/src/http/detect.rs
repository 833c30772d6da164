//! Which era a remote server speaks, following the 2026-07-28 compatibility rules for
//! HTTP: send a modern request (`server/discover`) first; a result, or a modern error
//! (-32022, -32021, -32020), means modern; any other error status or body means legacy,
//! and `initialize` follows. The verdict is cached per origin for the life of the process.
//! `era = "modern"` or `"legacy"` pins it, with no fallback either way.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use warden_config::{EraPreference, HttpSettings, ServerSpec, TransportSpec};
use warden_net::reqwest::Url;
use warden_net::reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use warden_net::{HttpOptions, is_loopback_url};
use warden_oauth::OAuthClient;

use super::error::HttpError;
use super::exchange::Endpoint;
use super::session::{ClientProfile, Session};
use crate::connection::{Era, ServerInfo};

/// How much longer than the call timeout a reply may stay silent.
const IDLE_MARGIN: Duration = Duration::from_secs(1);
/// Error codes only a 2026-07-28 server sends.
const MODERN_ERRORS: [i64; 3] = [-32022, -32021, -32020];

/// One remote server as configured.
#[derive(Debug, Clone)]
pub struct Remote {
    /// Its name in the configuration.
    pub name: String,
    /// The endpoint URL.
    pub url: String,
    /// Headers sent with every request (secrets: never logged).
    pub headers: BTreeMap<String, String>,
    /// `allow_http`, reconnect policy.
    pub settings: HttpSettings,
    /// Era preference or pin.
    pub era: EraPreference,
    /// Cap on one body or one event.
    pub max_bytes: usize,
    /// Time to open a connection.
    pub connect_timeout: Duration,
    /// Longest silence while reading an answer.
    pub idle_timeout: Duration,
    /// Signs in when the server answers 401 (and sends the token it got); `None` means
    /// a 401 or 403 ends the request with "needs authorization".
    pub oauth: Option<Arc<OAuthClient>>,
    /// The clock and jitter every wait before another try uses: first connect, reconnect
    /// and reopening a stream of the server's own messages ([`super::reconnect::Backoff`];
    /// tokio's clock unless one is injected).
    pub backoff: super::reconnect::Backoff,
    /// Where requests go instead of the HTTP client's own connections
    /// ([`warden_net::Transport`]; `None` in production): the simulator's in-memory server.
    pub transport: Option<Arc<dyn warden_net::Transport>>,
}

impl Remote {
    /// The remote part of `spec`; `None` for a local server.
    pub fn from_spec(spec: &ServerSpec) -> Option<Remote> {
        let TransportSpec::Http {
            url,
            headers,
            settings,
        } = &spec.transport
        else {
            return None;
        };
        Some(Remote {
            name: spec.name.clone(),
            url: url.clone(),
            headers: headers.clone(),
            settings: settings.clone(),
            era: spec.era,
            max_bytes: spec.max_message_bytes,
            connect_timeout: spec.timeouts.connect,
            // A little longer than a call may take, so the call's own timeout fires first
            // and the request is cancelled as its era says.
            idle_timeout: spec.timeouts.call + IDLE_MARGIN,
            oauth: None,
            backoff: super::reconnect::Backoff::system(),
            transport: None,
        })
    }

    /// The endpoint, after the URL and header checks.
    pub(crate) fn endpoint(&self) -> Result<Endpoint, HttpError> {
        let url = Url::parse(&self.url).map_err(|error| HttpError::BadUrl {
            url: self.url.clone(),
            reason: error.to_string(),
        })?;
        match url.scheme() {
            "https" => {}
            "http" if is_loopback_url(&url) || self.settings.allow_http => {}
            "http" => {
                return Err(HttpError::InsecureUrl {
                    host: url.host_str().unwrap_or_default().to_owned(),
                });
            }
            other => {
                return Err(HttpError::BadUrl {
                    url: self.url.clone(),
                    reason: format!("scheme {other:?} is not http or https"),
                });
            }
        }
        let mut headers = HeaderMap::new();
        for (name, value) in &self.headers {
            let header = HeaderName::try_from(name.as_str()).map_err(|_| HttpError::BadHeader {
                name: name.clone(),
                reason: "not a valid header name".into(),
            })?;
            let mut value = HeaderValue::from_str(value).map_err(|_| HttpError::BadHeader {
                name: name.clone(),
                reason: "the value has characters a header cannot carry".into(),
            })?;
            value.set_sensitive(true);
            headers.insert(header, value);
        }
        let options = HttpOptions {
            connect_timeout: self.connect_timeout,
            read_idle_timeout: self.idle_timeout,
            ..HttpOptions::default()
        };
        Ok(Endpoint {
            http: warden_net::client(&options)?,
            url,
            headers,
            max_bytes: self.max_bytes,
            server: self.name.clone(),
            auth: self.oauth.clone(),
            notices: Arc::default(),
            backoff: self.backoff.clone(),
            transport: self.transport.clone(),
        })
    }

    fn origin(&self) -> String {
        Url::parse(&self.url).map_or_else(
            |_| self.url.clone(),
            |url| url.origin().ascii_serialization(),
        )
    }
}

fn cache() -> &'static Mutex<HashMap<String, Era>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Era>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

fn cached(origin: &str) -> Option<Era> {
    cache()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(origin)
        .copied()
}

fn remember(origin: &str, era: Option<Era>) {
    let mut cache = cache()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match era {
        Some(era) => cache.insert(origin.to_owned(), era),
        None => cache.remove(origin),
    };
}

/// True when an error ends the attempt whatever the era: the server is unreachable, wants
/// credentials, redirects, or broke the transport rules.
fn is_final(error: &HttpError) -> bool {
    match error {
        HttpError::Rpc { code, status, .. } => MODERN_ERRORS.contains(code) || *status >= 500,
        HttpError::Status { status, .. } => !matches!(status, 400 | 404 | 405 | 406 | 415),
        HttpError::Malformed(_) => false,
        _ => true,
    }
}

/// Opens a session with `remote` in the era it speaks (one attempt; the caller retries).
pub async fn open(
    remote: &Remote,
    profile: &ClientProfile,
) -> Result<(Session, ServerInfo), HttpError> {
    let origin = remote.origin();
    let start = |era: Era| -> Result<Session, HttpError> {
        Ok(Session::new(remote.endpoint()?, era, profile.clone()))
    };
    match remote.era {
        EraPreference::Legacy => {
            let session = start(Era::Legacy)?;
            let info = session.open().await?;
            return Ok((session, info));
        }
        EraPreference::Modern => {
            let session = start(Era::Modern)?;
            return match session.open().await {
                Ok(info) => Ok((session, info)),
                Err(error) if is_final(&error) => Err(error),
                Err(error) => Err(HttpError::Era(format!(
                    "the server does not speak the 2026-07-28 revision (server/discover: \
                     {error}), and era = \"modern\" allows no fallback to initialize"
                ))),
            };
        }
        EraPreference::Auto => {}
    }
    if let Some(era) = cached(&origin) {
        let session = start(era)?;
        match session.open().await {
            Ok(info) => return Ok((session, info)),
            Err(error) if error.is_transient() || error.needs_authorization() => return Err(error),
            Err(error) => {
                tracing::info!(server = %remote.name, "the cached era no longer works ({error}); probing again");
                remember(&origin, None);
            }
        }
    }
    let modern = start(Era::Modern)?;
    match modern.open().await {
        Ok(info) => {
            remember(&origin, Some(Era::Modern));
            return Ok((modern, info));
        }
        Err(error) if is_final(&error) => return Err(error),
        Err(error) => {
            tracing::info!(server = %remote.name, "server/discover: {error}: falling back to initialize (2025-11-25)");
        }
    }
    let legacy = start(Era::Legacy)?;
    let info = legacy.open().await?;
    remember(&origin, Some(Era::Legacy));
    Ok((legacy, info))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rpc(status: u16, code: i64) -> HttpError {
        HttpError::Rpc {
            status,
            code,
            message: String::new(),
            data: None,
        }
    }

    #[test]
    fn legacy_answers_to_the_probe_fall_back_and_the_rest_end_the_attempt() {
        // A legacy server's answers to server/discover: fall back to initialize.
        for error in [
            rpc(400, -32000),
            rpc(404, -32601),
            HttpError::Status {
                status: 404,
                excerpt: String::new(),
            },
            HttpError::Status {
                status: 405,
                excerpt: String::new(),
            },
            HttpError::Malformed("no id".into()),
        ] {
            assert!(!is_final(&error), "{error}");
        }
        // A modern server refusing us, or anything that is not an answer at all: no fallback.
        for error in [
            rpc(400, -32022),
            rpc(400, -32020),
            rpc(503, -32603),
            HttpError::Status {
                status: 502,
                excerpt: String::new(),
            },
            HttpError::NeedsAuthorization {
                status: 401,
                challenge: None,
            },
            HttpError::Redirect {
                status: 307,
                location: String::new(),
            },
            HttpError::ContentType {
                content_type: "text/html".into(),
            },
        ] {
            assert!(is_final(&error), "{error}");
        }
    }
}
