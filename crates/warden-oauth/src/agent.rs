//! The user agent: whatever takes the authorization URL to the user's consent and brings
//! back the URL the authorization server redirected to.
//!
//! - [`Headless`]: `GET`s the authorization URL without following redirects and takes the
//!   `Location` (the conformance suite's mock server approves at once; Warden's own tests
//!   do the same). The redirect must go to Warden's redirect URI, nowhere else.
//! - [`NoUserAgent`]: nobody to ask (no terminal): the flow stops with "needs sign-in".
//! - `warden login` brings its own (browser and loopback listener, or paste-back).

use futures::future::BoxFuture;
use url::Url;

use crate::error::{OAuthError, excerpt};
use crate::fetch::Fetcher;

/// Takes the user through consent.
pub trait UserAgent: Send + Sync {
    /// The redirect URI to register and send.
    fn redirect_uri(&self) -> String;

    /// Sends the user to `url` (the authorization request for `server`) and returns the
    /// URL the authorization server redirected back to.
    fn authorize<'a>(
        &'a self,
        server: &'a str,
        url: &'a Url,
    ) -> BoxFuture<'a, Result<Url, OAuthError>>;
}

/// Nobody can be asked: signing in needs `warden login`.
#[derive(Debug, Default)]
pub struct NoUserAgent;

impl UserAgent for NoUserAgent {
    fn redirect_uri(&self) -> String {
        "http://127.0.0.1/callback".into()
    }

    fn authorize<'a>(
        &'a self,
        server: &'a str,
        _url: &'a Url,
    ) -> BoxFuture<'a, Result<Url, OAuthError>> {
        Box::pin(async move {
            Err(OAuthError::NeedsSignIn {
                server: server.to_owned(),
            })
        })
    }
}

/// Follows the authorization URL's one redirect without a browser.
pub struct Headless {
    fetcher: Fetcher,
    redirect_uri: String,
}

impl Headless {
    /// A headless agent using `redirect_uri`.
    pub fn new(fetcher: Fetcher, redirect_uri: impl Into<String>) -> Headless {
        Headless {
            fetcher,
            redirect_uri: redirect_uri.into(),
        }
    }
}

impl UserAgent for Headless {
    fn redirect_uri(&self) -> String {
        self.redirect_uri.clone()
    }

    fn authorize<'a>(
        &'a self,
        _server: &'a str,
        url: &'a Url,
    ) -> BoxFuture<'a, Result<Url, OAuthError>> {
        Box::pin(async move {
            let (status, location) = self
                .fetcher
                .get_location("the authorization endpoint", url)
                .await?;
            if !status.is_redirection() {
                return Err(OAuthError::Callback(format!(
                    "the authorization endpoint answered HTTP {} instead of redirecting back",
                    status.as_u16()
                )));
            }
            let location = location.ok_or_else(|| {
                OAuthError::Callback(
                    "the authorization endpoint redirected without a Location".into(),
                )
            })?;
            let target = url.join(&location).map_err(|error| {
                OAuthError::Callback(format!(
                    "the redirect {} is not a URL: {error}",
                    excerpt(location.as_bytes())
                ))
            })?;
            // The one redirect must come back to Warden; anything else (another host, a
            // login page) is not followed.
            let expected = Url::parse(&self.redirect_uri).map_err(|error| {
                OAuthError::Callback(format!("the redirect URI is not a URL: {error}"))
            })?;
            if target.origin() != expected.origin() || target.path() != expected.path() {
                let mut shown = target.clone();
                shown.set_query(None);
                return Err(OAuthError::Callback(format!(
                    "the authorization endpoint redirected to {}, not to Warden's redirect URI \
                     {}; not followed",
                    excerpt(shown.as_str().as_bytes()),
                    self.redirect_uri
                )));
            }
            Ok(target)
        })
    }
}
