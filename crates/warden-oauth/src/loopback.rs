//! The user agent of `warden login`: a loopback redirect (RFC 8252 §7.3) on an ephemeral
//! port of 127.0.0.1, and a paste-back fallback for a machine without a browser.
//!
//! [`Loopback::bind`] takes a free port first, so the redirect URI
//! (`http://127.0.0.1:PORT/callback`) is known before registration. `authorize` hands the
//! authorization URL to the caller's `show` (which prints it, and opens a browser where
//! there is one), then waits for whichever comes first: the browser's request to
//! `/callback`, or a line pasted by the user (the full URL the browser was sent to). The
//! wait is bounded; the listener answers only `GET /callback`, reads at most 8 KiB of a
//! request, and serves a fixed page.

use std::sync::Mutex;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use url::Url;

use crate::agent::UserAgent;
use crate::error::{OAuthError, excerpt};

/// Longest wait for the user to consent.
pub const CONSENT_LIMIT: Duration = Duration::from_secs(300);
/// Largest request head read from the browser.
const MAX_REQUEST: usize = 8 * 1024;
/// Connections answered before giving up (a browser may ask for `/favicon.ico` too).
const MAX_CONNECTIONS: usize = 32;
/// Time allowed for one connection to send its request head.
const READ_LIMIT: Duration = Duration::from_secs(10);

/// Shows the authorization URL to the user.
pub type Show = Box<dyn Fn(&Url) + Send + Sync>;

/// A loopback listener and an optional source of pasted lines.
pub struct Loopback {
    listener: Mutex<Option<TcpListener>>,
    redirect_uri: String,
    paste: Mutex<Option<mpsc::Receiver<String>>>,
    show: Show,
    limit: Duration,
}

impl Loopback {
    /// Binds 127.0.0.1 on a free port. `paste` delivers lines the user typed; `show`
    /// presents the URL.
    pub async fn bind(
        paste: Option<mpsc::Receiver<String>>,
        show: Show,
    ) -> Result<Loopback, OAuthError> {
        let listener = TcpListener::bind("127.0.0.1:0").await.map_err(|error| {
            OAuthError::Callback(format!("no loopback port for the redirect: {error}"))
        })?;
        let port = listener
            .local_addr()
            .map_err(|error| OAuthError::Callback(error.to_string()))?
            .port();
        Ok(Loopback {
            listener: Mutex::new(Some(listener)),
            redirect_uri: format!("http://127.0.0.1:{port}/callback"),
            paste: Mutex::new(paste),
            show,
            limit: CONSENT_LIMIT,
        })
    }

    /// The same agent with another consent limit (tests).
    pub fn with_limit(mut self, limit: Duration) -> Loopback {
        self.limit = limit;
        self
    }
}

fn take<T>(slot: &Mutex<Option<T>>) -> Option<T> {
    slot.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take()
}

impl UserAgent for Loopback {
    fn redirect_uri(&self) -> String {
        self.redirect_uri.clone()
    }

    fn authorize<'a>(
        &'a self,
        _server: &'a str,
        url: &'a Url,
    ) -> BoxFuture<'a, Result<Url, OAuthError>> {
        Box::pin(async move {
            let listener = take(&self.listener).ok_or_else(|| {
                OAuthError::Callback("the loopback listener was already used".into())
            })?;
            let mut paste = take(&self.paste);
            (self.show)(url);
            let base = Url::parse(&self.redirect_uri)
                .map_err(|error| OAuthError::Callback(error.to_string()))?;
            let pasted = async {
                match paste.as_mut() {
                    Some(lines) => loop {
                        match lines.recv().await {
                            Some(line) if !line.trim().is_empty() => break Some(line),
                            Some(_) => continue,
                            None => break None,
                        }
                    },
                    None => None,
                }
            };
            let wait = async {
                tokio::select! {
                    callback = accept(&listener, &base) => callback,
                    Some(line) = pasted => Url::parse(line.trim()).map_err(|error| {
                        OAuthError::Callback(format!(
                            "the pasted text is not a URL ({error}); paste the whole address \
                             the browser was sent to"
                        ))
                    }),
                }
            };
            match tokio::time::timeout(self.limit, wait).await {
                Ok(result) => result,
                Err(_) => Err(OAuthError::Timeout {
                    what: "signing in (waiting for the browser or a pasted URL)",
                    secs: self.limit.as_secs(),
                }),
            }
        })
    }
}

/// Answers connections until one is `GET /callback...`; returns its URL.
async fn accept(listener: &TcpListener, base: &Url) -> Result<Url, OAuthError> {
    for _ in 0..MAX_CONNECTIONS {
        let (mut stream, _) = listener.accept().await.map_err(|error| {
            OAuthError::Callback(format!("the loopback listener failed: {error}"))
        })?;
        let mut head = Vec::new();
        let mut buffer = [0u8; 1024];
        let read = async {
            while head.len() < MAX_REQUEST && !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buffer).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buffer[..n]),
                }
            }
        };
        if tokio::time::timeout(READ_LIMIT, read).await.is_err() {
            continue;
        }
        let line = String::from_utf8_lossy(&head)
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned();
        let mut parts = line.split(' ');
        let (method, target) = (
            parts.next().unwrap_or_default(),
            parts.next().unwrap_or_default(),
        );
        let is_callback =
            method == "GET" && (target == "/callback" || target.starts_with("/callback?"));
        let (status, page) = if is_callback {
            (
                "200 OK",
                "Warden received the answer. You can close this tab.",
            )
        } else {
            ("404 Not Found", "Not found.")
        };
        let response = format!(
            "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n{page}",
            page.len()
        );
        let _ = stream.write_all(response.as_bytes()).await;
        let _ = stream.shutdown().await;
        if is_callback {
            return base.join(target).map_err(|error| {
                OAuthError::Callback(format!(
                    "the browser's request {} is not a URL: {error}",
                    excerpt(target.as_bytes())
                ))
            });
        }
    }
    Err(OAuthError::Callback(format!(
        "{MAX_CONNECTIONS} requests reached the loopback listener, none to /callback"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(uri: &str) {
        let url = Url::parse(uri).unwrap();
        let address = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap());
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let target = match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        };
        stream
            .write_all(format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
    }

    #[tokio::test]
    async fn the_browser_s_redirect_reaches_the_listener() {
        let agent = Loopback::bind(None, Box::new(|_| {})).await.unwrap();
        let redirect = agent.redirect_uri();
        assert!(redirect.starts_with("http://127.0.0.1:") && redirect.ends_with("/callback"));
        let url = Url::parse("https://as.example/authorize").unwrap();
        let browser = {
            let redirect = redirect.clone();
            async move {
                get(&redirect.replace("/callback", "/favicon.ico")).await;
                get(&format!("{redirect}?code=c&state=s")).await;
            }
        };
        let (got, ()) = tokio::join!(agent.authorize("docs", &url), browser);
        let got = got.unwrap();
        assert_eq!(got.as_str(), format!("{redirect}?code=c&state=s"));
    }

    #[tokio::test]
    async fn a_pasted_url_is_taken_and_nothing_waits_for_ever() {
        let (send, receive) = mpsc::channel(4);
        let shown = std::sync::Arc::new(Mutex::new(None));
        let seen = shown.clone();
        let agent = Loopback::bind(
            Some(receive),
            Box::new(move |url| *seen.lock().unwrap() = Some(url.to_string())),
        )
        .await
        .unwrap();
        let url = Url::parse("https://as.example/authorize?x=1").unwrap();
        send.send("\n".into()).await.unwrap();
        send.send("http://127.0.0.1:1/callback?code=c&state=s\n".into())
            .await
            .unwrap();
        let got = agent.authorize("docs", &url).await.unwrap();
        assert_eq!(got.query(), Some("code=c&state=s"));
        assert_eq!(shown.lock().unwrap().as_deref(), Some(url.as_str()));

        let idle = Loopback::bind(None, Box::new(|_| {}))
            .await
            .unwrap()
            .with_limit(Duration::from_millis(200));
        let error = idle.authorize("docs", &url).await.unwrap_err();
        assert!(matches!(error, OAuthError::Timeout { .. }), "{error}");
    }
}
