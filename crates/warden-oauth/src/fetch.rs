//! The few HTTP exchanges of a sign-in (metadata `GET`s, form `POST`s to the token and
//! registration endpoints), on warden-net's client: every body read within a cap, every
//! exchange within a time limit, redirects refused with their target named, and only
//! `https://` URLs (plain `http://` only to a loopback host, or where the server's
//! configuration allows it).
//!
//! A fetcher made [`Fetcher::for_server`] also keeps discovery from reaching into the
//! machine or its network: unless the configured server is itself on a special-range host
//! (loopback, private, link-local, ...; [`warden_net::special_range`]), a URL named by a
//! discovery document (an authorization server, a metadata, registration or token
//! endpoint) on such a host is refused before any request: an IP literal by its range, a
//! name by the addresses it resolves to (the connection goes to an address that was
//! checked). URLs on the server's own origin are always allowed: the user chose that host.
//!
//! [`Fetcher::with_transport`] sends every exchange through a [`warden_net::Transport`]
//! instead (the simulator's in-memory authorization server, decision 0041's revision 3):
//! the same requests, caps, time limits and refusals; what the seam leaves out is what a
//! connection does, name lookups included, so the server's host is then judged by its
//! literal alone.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use url::{Host, Url};
use warden_net::read_capped;
use warden_net::reqwest::{self, StatusCode, header};

use crate::error::{OAuthError, excerpt};

/// Cap on a metadata document, a registration or a token response.
pub const DOCUMENT_CAP: usize = 64 * 1024;
/// Time allowed for one exchange, from connect to the last byte.
pub const EXCHANGE_LIMIT: Duration = Duration::from_secs(15);

/// The HTTP side of a sign-in.
#[derive(Clone)]
pub struct Fetcher {
    http: reqwest::Client,
    allow_http: bool,
    reach: Option<Reach>,
    /// Where requests go instead of `http`'s own connections, if anywhere.
    transport: Option<Arc<dyn warden_net::Transport>>,
}

/// Which hosts a server's sign-in may reach.
#[derive(Clone)]
struct Reach {
    /// The configured server: its origin is always reachable.
    server: Url,
    /// Whether the server itself is on a special-range host, decided once.
    server_special: Arc<tokio::sync::OnceCell<bool>>,
    /// A client whose name lookups keep only public addresses.
    public: reqwest::Client,
}

/// How a `POST` authenticates the client (token endpoint only).
pub(crate) enum Basic<'a> {
    None,
    Credentials { id: &'a str, secret: &'a str },
}

impl Fetcher {
    /// A fetcher on a fresh warden-net client. `allow_http` permits plain `http://` to
    /// hosts that are not loopback (the server's `allow_http`).
    /// It reaches any host (the headless user agent of the tests and the conformance
    /// client); a server's sign-in uses [`Fetcher::for_server`].
    pub fn new(allow_http: bool) -> Result<Fetcher, OAuthError> {
        let http = warden_net::client(&options()).map_err(|source| OAuthError::Net {
            what: "HTTP client",
            source,
        })?;
        Ok(Fetcher {
            http,
            allow_http,
            reach: None,
            transport: None,
        })
    }

    /// A fetcher for the sign-in to the server at `server_url`: hosts in special ranges are
    /// reachable only when the server itself is on one (see the module docs).
    pub fn for_server(allow_http: bool, server_url: &Url) -> Result<Fetcher, OAuthError> {
        let mut fetcher = Fetcher::new(allow_http)?;
        let public = warden_net::public_client(&options()).map_err(|source| OAuthError::Net {
            what: "HTTP client",
            source,
        })?;
        fetcher.reach = Some(Reach {
            server: server_url.clone(),
            server_special: Arc::new(tokio::sync::OnceCell::new()),
            public,
        });
        Ok(fetcher)
    }

    /// Judges the server's host as public whatever it is: for tests of the refusal on a
    /// machine where every server is on loopback.
    pub fn judging_server_public(self) -> Fetcher {
        if let Some(reach) = &self.reach {
            let _ = reach.server_special.set(false);
        }
        self
    }

    /// Sends every exchange through `transport` (the simulator's in-memory servers) rather
    /// than over the network. Name lookups are the transport's business: the configured
    /// server's host is judged special or public by its literal alone.
    pub fn with_transport(mut self, transport: Arc<dyn warden_net::Transport>) -> Fetcher {
        self.transport = Some(transport);
        self
    }

    /// The client that may carry a request to `url`, or the refusal.
    async fn route(&self, what: &'static str, url: &Url) -> Result<&reqwest::Client, OAuthError> {
        let Some(reach) = &self.reach else {
            return Ok(&self.http);
        };
        if url.origin() == reach.server.origin() {
            return Ok(&self.http);
        }
        let server_special = *reach
            .server_special
            .get_or_init(|| host_is_special(&reach.server, self.transport.is_none()))
            .await;
        if server_special {
            return Ok(&self.http);
        }
        if let Some(range) = literal_special(url) {
            return Err(OAuthError::BadUrl {
                what,
                url: excerpt(url.as_str().as_bytes()),
                reason: format!(
                    "its host is {range}, and the server {} is not on such a host: a \
                     discovery document may not point Warden at the loopback, the private \
                     network or the cloud metadata service",
                    reach.server.host_str().unwrap_or_default()
                ),
            });
        }
        Ok(&reach.public)
    }

    /// Parses `url` and checks it may be used for `what`.
    pub fn check_url(&self, what: &'static str, url: &str) -> Result<Url, OAuthError> {
        check_url(what, url, self.allow_http)
    }

    /// `GET url` for a JSON document. `Ok(None)` on 404 (and other 4xx), so discovery can
    /// try the next location; `Err` on anything that must stop the flow.
    pub async fn get_json(
        &self,
        what: &'static str,
        url: &Url,
    ) -> Result<Result<Value, u16>, OAuthError> {
        let request = self
            .route(what, url)
            .await?
            .get(url.clone())
            .header(header::ACCEPT, "application/json");
        let response = self.send(what, request).await?;
        let status = response.status();
        if status.is_client_error() {
            return Ok(Err(status.as_u16()));
        }
        let body = expect_success(what, response).await?;
        parse_json(what, &body).map(Ok)
    }

    /// `POST` a form; returns the status and the JSON body (an OAuth error body on 4xx).
    pub(crate) async fn post_form(
        &self,
        what: &'static str,
        url: &Url,
        form: &[(&str, &str)],
        basic: Basic<'_>,
    ) -> Result<(StatusCode, Value), OAuthError> {
        let body = {
            let mut body = url::form_urlencoded::Serializer::new(String::new());
            for (name, value) in form {
                body.append_pair(name, value);
            }
            body.finish()
        };
        let mut request = self
            .route(what, url)
            .await?
            .post(url.clone())
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::ACCEPT, "application/json")
            .body(body);
        if let Basic::Credentials { id, secret } = basic {
            // RFC 6749 §2.3.1: each part form-urlencoded before the Basic encoding.
            let encode = |text: &str| {
                url::form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>()
            };
            let pair = format!("{}:{}", encode(id), encode(secret));
            let mut value = header::HeaderValue::from_str(&format!(
                "Basic {}",
                base64::Engine::encode(&base64::engine::general_purpose::STANDARD, pair)
            ))
            .map_err(|_| OAuthError::Malformed {
                what: "the client credentials",
                reason: "they cannot be sent in a header".into(),
            })?;
            value.set_sensitive(true);
            request = request.header(header::AUTHORIZATION, value);
        }
        self.finish_post(what, request).await
    }

    /// `POST` JSON (dynamic client registration).
    pub async fn post_json(
        &self,
        what: &'static str,
        url: &Url,
        body: &Value,
    ) -> Result<(StatusCode, Value), OAuthError> {
        let request = self
            .route(what, url)
            .await?
            .post(url.clone())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json")
            .body(body.to_string());
        self.finish_post(what, request).await
    }

    async fn finish_post(
        &self,
        what: &'static str,
        request: reqwest::RequestBuilder,
    ) -> Result<(StatusCode, Value), OAuthError> {
        let response = self.send(what, request).await?;
        let status = response.status();
        if status.is_redirection() {
            return Err(redirect(what, &response));
        }
        let body = read_capped(response, DOCUMENT_CAP)
            .await
            .map_err(|source| OAuthError::Net { what, source })?;
        if status.is_success() {
            return parse_json(what, &body).map(|value| (status, value));
        }
        Err(OAuthError::Status {
            what,
            status: status.as_u16(),
            detail: oauth_error_text(&body),
        })
    }

    /// `GET url` without following redirects; returns the status and `Location` (the
    /// headless user agent of the tests and the conformance client).
    pub async fn get_location(
        &self,
        what: &'static str,
        url: &Url,
    ) -> Result<(StatusCode, Option<String>), OAuthError> {
        let response = self.send(what, self.http.get(url.clone())).await?;
        let location = response
            .headers()
            .get(header::LOCATION)
            .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
        Ok((response.status(), location))
    }
}

fn options() -> warden_net::HttpOptions {
    warden_net::HttpOptions {
        connect_timeout: Duration::from_secs(10),
        read_idle_timeout: EXCHANGE_LIMIT,
        request_timeout: Some(EXCHANGE_LIMIT),
        ..warden_net::HttpOptions::default()
    }
}

/// The special range of `url`'s host when it is an IP literal or a `localhost` name.
fn literal_special(url: &Url) -> Option<&'static str> {
    match url.host()? {
        Host::Ipv4(ip) => warden_net::special_range(ip.into()),
        Host::Ipv6(ip) => warden_net::special_range(ip.into()),
        Host::Domain(_) => warden_net::is_loopback_url(url).then_some("loopback (localhost)"),
    }
}

/// Whether the configured server is on a special-range host: an IP literal or `localhost`
/// in one, or a name whose addresses all are (a LAN or company-internal server). A lookup
/// that fails judges it public (the stricter side). Without `lookup`, a name is public.
async fn host_is_special(server: &Url, lookup: bool) -> bool {
    if literal_special(server).is_some() {
        return true;
    }
    if !lookup {
        return false;
    }
    let (Some(host), Some(port)) = (server.host_str(), server.port_or_known_default()) else {
        return false;
    };
    match tokio::time::timeout(EXCHANGE_LIMIT, tokio::net::lookup_host((host, port))).await {
        Ok(Ok(addresses)) => {
            let addresses: Vec<_> = addresses.collect();
            !addresses.is_empty()
                && addresses
                    .iter()
                    .all(|address| warden_net::special_range(address.ip()).is_some())
        }
        _ => false,
    }
}

impl Fetcher {
    /// Sends `request` (through the transport, if one is set) within [`EXCHANGE_LIMIT`].
    async fn send(
        &self,
        what: &'static str,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, OAuthError> {
        let sent = warden_net::transport::send(request, self.transport.as_ref());
        match tokio::time::timeout(EXCHANGE_LIMIT, sent).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(source)) => Err(OAuthError::Net { what, source }),
            Err(_) => Err(OAuthError::Timeout {
                what,
                secs: EXCHANGE_LIMIT.as_secs(),
            }),
        }
    }
}

fn redirect(what: &'static str, response: &reqwest::Response) -> OAuthError {
    OAuthError::Redirect {
        what,
        status: response.status().as_u16(),
        location: response
            .headers()
            .get(header::LOCATION)
            .map(|value| excerpt(value.as_bytes()))
            .unwrap_or_else(|| "(no Location)".into()),
    }
}

async fn expect_success(
    what: &'static str,
    response: reqwest::Response,
) -> Result<bytes::Bytes, OAuthError> {
    let status = response.status();
    if status.is_redirection() {
        return Err(redirect(what, &response));
    }
    if !status.is_success() {
        let body = read_capped(response, 4096).await.unwrap_or_default();
        return Err(OAuthError::Status {
            what,
            status: status.as_u16(),
            detail: excerpt(&body),
        });
    }
    read_capped(response, DOCUMENT_CAP)
        .await
        .map_err(|source| OAuthError::Net { what, source })
}

fn parse_json(what: &'static str, body: &[u8]) -> Result<Value, OAuthError> {
    let value: Value = serde_json::from_slice(body).map_err(|error| OAuthError::Malformed {
        what,
        reason: format!("not JSON: {error}"),
    })?;
    if !value.is_object() {
        return Err(OAuthError::Malformed {
            what,
            reason: "not a JSON object".into(),
        });
    }
    Ok(value)
}

/// `error` and `error_description` of an OAuth error body, sanitised; else its start.
fn oauth_error_text(body: &[u8]) -> String {
    if let Ok(value) = serde_json::from_slice::<Value>(body)
        && let Some(error) = value.get("error").and_then(Value::as_str)
    {
        let description = value
            .get("error_description")
            .and_then(Value::as_str)
            .map(|text| format!(" ({})", excerpt(text.as_bytes())))
            .unwrap_or_default();
        return format!("{}{description}", excerpt(error.as_bytes()));
    }
    excerpt(body)
}

/// Parses `url` and checks that it is `https://`, or plain `http://` to a loopback host
/// (or anywhere when `allow_http`).
pub fn check_url(what: &'static str, url: &str, allow_http: bool) -> Result<Url, OAuthError> {
    let refuse = |reason: String| OAuthError::BadUrl {
        what,
        url: excerpt(url.as_bytes()),
        reason,
    };
    let parsed = Url::parse(url).map_err(|error| refuse(error.to_string()))?;
    match parsed.scheme() {
        "https" => {}
        "http" if allow_http || warden_net::is_loopback_url(&parsed) => {}
        "http" => {
            return Err(refuse(
                "plain http:// to a host that is not loopback (credentials would cross the \
                 network unencrypted)"
                    .into(),
            ));
        }
        other => return Err(refuse(format!("scheme {other:?} is not https"))),
    }
    if parsed.fragment().is_some() {
        return Err(refuse("it has a fragment".into()));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(refuse("it carries user information".into()));
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_loopback_http_is_accepted() {
        assert!(check_url("x", "https://as.example/token", false).is_ok());
        assert!(check_url("x", "http://localhost:3000/token", false).is_ok());
        assert!(check_url("x", "http://127.0.0.1/token", false).is_ok());
        assert!(check_url("x", "http://as.example/token", false).is_err());
        assert!(check_url("x", "http://as.example/token", true).is_ok());
        for bad in [
            "javascript:alert(1)",
            "file:///etc/passwd",
            "data:text/html,x",
            "https://as.example/#frag",
            "https://user:pw@as.example/",
            "not a url",
        ] {
            assert!(check_url("x", bad, true).is_err(), "{bad}");
        }
    }

    #[test]
    fn special_hosts_are_recognised_in_urls() {
        for (url, range) in [
            ("http://169.254.169.254/latest/meta-data", Some("metadata")),
            ("https://127.0.0.1:8443/token", Some("loopback")),
            ("https://[::1]/token", Some("loopback")),
            ("https://[::ffff:10.0.0.1]/token", Some("private")),
            ("https://10.1.2.3/register", Some("private")),
            ("https://192.168.0.1/jwks", Some("private")),
            ("https://localhost/token", Some("loopback")),
            ("https://a.localhost./token", Some("loopback")),
            ("https://as.example.com/token", None),
            ("https://140.82.112.5/token", None),
        ] {
            let found = literal_special(&Url::parse(url).unwrap());
            match range {
                Some(word) => assert!(found.is_some_and(|r| r.contains(word)), "{url}: {found:?}"),
                None => assert_eq!(found, None, "{url}"),
            }
        }
    }

    #[tokio::test]
    async fn a_public_server_may_not_point_warden_at_special_hosts() {
        let server = Url::parse("https://mcp.example.com/mcp").unwrap();
        let fetcher = Fetcher::for_server(false, &server)
            .unwrap()
            .judging_server_public();
        // Refused before any request (these addresses are never contacted).
        // Only loopback addresses here, in case the refusal ever breaks: the other ranges
        // are judged by the same `literal_special` (above).
        for url in [
            "http://127.0.0.2:9/.well-known/oauth-authorization-server",
            "http://[::1]:9/token",
            "http://localhost:9/register",
        ] {
            let error = fetcher
                .get_json(
                    "the authorization-server metadata",
                    &Url::parse(url).unwrap(),
                )
                .await
                .unwrap_err()
                .to_string();
            assert!(error.contains("is not on such a host"), "{url}: {error}");
        }
        // A loopback server may use a loopback authorization server: the request is made
        // (and fails here only because nothing listens on that port).
        let local = Url::parse("http://127.0.0.1:9/mcp").unwrap();
        let fetcher = Fetcher::for_server(false, &local).unwrap();
        let error = fetcher
            .get_json(
                "the authorization-server metadata",
                &Url::parse("http://127.0.0.2:9/").unwrap(),
            )
            .await
            .unwrap_err()
            .to_string();
        assert!(!error.contains("is not on such a host"), "{error}");
    }

    #[test]
    fn oauth_error_bodies_are_quoted_safely() {
        assert_eq!(
            oauth_error_text(br#"{"error":"invalid_grant","error_description":"bad\ncode"}"#),
            "invalid_grant (bad code)"
        );
        assert_eq!(oauth_error_text(b"plain"), "plain");
    }
}
