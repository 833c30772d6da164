//! `warden serve --http` as an OAuth 2.1 resource server (`[serve.auth]`, decision 0033):
//! the HTTP side of the MCP authorization specification (2025-11-25 and 2026-07-28).
//!
//! - **Protected-resource metadata** (RFC 9728) at both well-known forms: the root
//!   `/.well-known/oauth-protected-resource` and the one suffixed with the MCP endpoint's
//!   path (`/.well-known/oauth-protected-resource/mcp`). These are the only paths answered
//!   without a token (after the same `Host` and `Origin` checks as everything else).
//! - **Every request** to anything else must carry `Authorization: Bearer TOKEN` with a
//!   token [`warden_oauth::resource::Validator`] accepts for Warden's own resource URL:
//!   - none (or another scheme): 401 with `WWW-Authenticate: Bearer
//!     resource_metadata="…", scope="…"`, so a client can discover where to sign in;
//!   - one that is not valid for Warden (malformed, unsigned, HMAC, another key, another
//!     issuer, another audience, expired, not yet valid): 401 with `error="invalid_token"`;
//!   - a valid one without the required scopes: 403 with `error="insufficient_scope"` and
//!     the scopes needed;
//!   - one that cannot be judged now (the issuer's keys or introspection unreachable): 503.
//! - The accepted token's caller (issuer, subject, client, scopes) becomes the request's
//!   [`Principal::Caller`]: sessions belong to it, modern clients' policy contexts are kept
//!   per caller, the policy may match on it and audit rows name it.
//!
//! The token itself goes no further than this module: the gateway's calls upstream are
//! made by the host's own connections, which never see a client's headers (no token
//! passthrough, by construction).

use std::sync::Arc;

use http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use serde_json::{Value, json};
use warden_oauth::Url;
use warden_oauth::resource::{Rejection, ResourceSettings, SettingsError, Validator};
use warden_policy::Caller;

use crate::guard::Principal;
use crate::http::{Early, json_response, text};

/// The root well-known path of the protected-resource metadata.
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// Warden's resource-server side: the metadata it publishes and the token check.
pub struct ResourceServer {
    validator: Validator,
    /// The paths the metadata is served at.
    paths: Vec<String>,
    /// The metadata document.
    document: Value,
    /// The `resource_metadata` URL named in challenges.
    metadata_url: String,
    /// The required scopes, space-separated, for challenges.
    scope: String,
}

impl ResourceServer {
    /// A resource server for `settings`, advertising `scopes_supported`.
    pub fn new(
        settings: ResourceSettings,
        scopes_supported: Vec<String>,
    ) -> Result<ResourceServer, SettingsError> {
        let resource =
            Url::parse(&settings.resource).map_err(|error| warden_oauth::OAuthError::BadUrl {
                what: "Warden's resource URL",
                url: settings.resource.clone(),
                reason: error.to_string(),
            })?;
        let suffix = resource.path().trim_end_matches('/').to_owned();
        let mut paths = vec![METADATA_PATH.to_owned()];
        for path in [suffix.as_str(), crate::http::ENDPOINT] {
            let suffixed = format!("{METADATA_PATH}{path}");
            if !path.is_empty() && !paths.contains(&suffixed) {
                paths.push(suffixed);
            }
        }
        let mut metadata_url = resource.clone();
        metadata_url.set_query(None);
        metadata_url.set_path(&format!("{METADATA_PATH}{suffix}"));
        let document = json!({
            "resource": settings.resource,
            "authorization_servers": settings
                .issuers
                .iter()
                .map(|issuer| issuer.issuer.clone())
                .collect::<Vec<_>>(),
            "scopes_supported": scopes_supported,
            "bearer_methods_supported": ["header"],
            "resource_name": "Warden",
        });
        let scope = settings.required_scopes.join(" ");
        let validator = Validator::new(settings)?;
        Ok(ResourceServer {
            validator,
            paths,
            document,
            metadata_url: metadata_url.to_string(),
            scope,
        })
    }

    /// The protected-resource metadata document.
    pub fn document(&self) -> &Value {
        &self.document
    }

    /// The URL of the metadata named in every challenge.
    pub fn metadata_url(&self) -> &str {
        &self.metadata_url
    }

    /// The paths the metadata is served at.
    pub fn metadata_paths(&self) -> &[String] {
        &self.paths
    }

    /// The `WWW-Authenticate` value for a refusal: `error` (with its description) when a
    /// token was given, `scope` when scopes are required or missing.
    fn challenge(&self, error: Option<(&str, &str)>, scope: &str) -> String {
        let mut value = String::from("Bearer ");
        if let Some((code, description)) = error {
            value.push_str(&format!(
                "error=\"{code}\", error_description=\"{}\", ",
                quoted(description)
            ));
        }
        if !scope.is_empty() {
            value.push_str(&format!("scope=\"{}\", ", quoted(scope)));
        }
        value.push_str(&format!(
            "resource_metadata=\"{}\"",
            quoted(&self.metadata_url)
        ));
        value
    }

    /// Checks a request's `Authorization`: its caller, or the refusal to answer with.
    pub async fn authorize(&self, headers: &HeaderMap) -> Result<Arc<Caller>, Early> {
        let mut values = headers.get_all(header::AUTHORIZATION).iter();
        let (first, second) = (values.next(), values.next());
        let bearer = first
            .and_then(|value| value.to_str().ok())
            .and_then(|value| {
                let (scheme, token) = value.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            });
        let Some(token) = bearer else {
            return Err(self.refuse(
                StatusCode::UNAUTHORIZED,
                None,
                &self.scope,
                "a bearer token is required: sign in with the authorization server named in \
                 the protected-resource metadata",
            ));
        };
        if second.is_some() || token.is_empty() {
            return Err(self.refuse(
                StatusCode::UNAUTHORIZED,
                Some(("invalid_token", "one bearer token is expected")),
                &self.scope,
                "the request must carry exactly one bearer token",
            ));
        }
        match self.validator.validate(token).await {
            Ok(claims) => Ok(Arc::new(Caller {
                issuer: claims.issuer,
                subject: claims.subject,
                client_id: claims.client_id,
                scopes: claims.scopes,
            })),
            Err(rejection) => {
                let message = rejection.to_string();
                tracing::info!("refused: {message}");
                Err(match &rejection {
                    Rejection::Invalid(reason) => self.refuse(
                        StatusCode::UNAUTHORIZED,
                        Some(("invalid_token", reason)),
                        &self.scope,
                        &message,
                    ),
                    Rejection::InsufficientScope { missing } => {
                        // The scopes to ask for: those required (the union a client
                        // signing in again needs), which include the missing ones.
                        let needed = if self.scope.is_empty() {
                            missing.join(" ")
                        } else {
                            self.scope.clone()
                        };
                        self.refuse(
                            StatusCode::FORBIDDEN,
                            Some(("insufficient_scope", &message)),
                            &needed,
                            &message,
                        )
                    }
                    Rejection::Unavailable(_) => {
                        Box::new(text(StatusCode::SERVICE_UNAVAILABLE, &message))
                    }
                })
            }
        }
    }

    fn refuse(
        &self,
        status: StatusCode,
        error: Option<(&str, &str)>,
        scope: &str,
        message: &str,
    ) -> Early {
        let mut response = text(status, message);
        if let Ok(value) = HeaderValue::from_str(&self.challenge(error, scope)) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        Box::new(response)
    }
}

/// A value for a quoted-string: printable ASCII, no quotes or backslashes, short.
fn quoted(value: &str) -> String {
    value
        .chars()
        .map(|c| match c {
            '"' | '\\' => '\'',
            c if c.is_ascii_graphic() || c == ' ' => c,
            _ => '?',
        })
        .take(200)
        .collect()
}

/// The hook of the HTTP transport: with a resource server configured, answers the
/// metadata paths, and admits every other request only with a token meant for Warden.
/// Without one, the principal the gate found stands.
pub(crate) async fn admit<B>(
    server: Option<&ResourceServer>,
    request: &Request<B>,
    principal: Principal,
) -> Result<Principal, Early> {
    let Some(server) = server else {
        return Ok(principal);
    };
    let path = request.uri().path();
    if server.paths.iter().any(|known| known == path) {
        return Err(Box::new(match *request.method() {
            Method::GET | Method::HEAD => json_response(StatusCode::OK, &server.document),
            _ => text(StatusCode::METHOD_NOT_ALLOWED, "use GET"),
        }));
    }
    server
        .authorize(request.headers())
        .await
        .map(Principal::Caller)
}

#[cfg(test)]
mod tests {
    use super::*;
    use warden_oauth::resource::IssuerSettings;

    fn server(required: &[&str]) -> ResourceServer {
        let mut settings = ResourceSettings::new(
            "https://warden.example/mcp",
            vec![IssuerSettings {
                issuer: "https://as.example".into(),
                jwks_uri: None,
                introspection: None,
            }],
        );
        settings.required_scopes = required.iter().map(|s| (*s).to_owned()).collect();
        ResourceServer::new(settings, vec!["mcp:tools".into()]).unwrap()
    }

    #[test]
    fn metadata_is_published_at_both_forms_and_named_in_challenges() {
        let server = server(&["mcp:tools"]);
        assert_eq!(
            server.metadata_paths(),
            [
                "/.well-known/oauth-protected-resource",
                "/.well-known/oauth-protected-resource/mcp"
            ]
        );
        assert_eq!(
            server.metadata_url(),
            "https://warden.example/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(server.document()["resource"], "https://warden.example/mcp");
        assert_eq!(
            server.document()["authorization_servers"],
            json!(["https://as.example"])
        );
        assert_eq!(
            server.challenge(Some(("invalid_token", "it \"expired\"")), "mcp:tools"),
            "Bearer error=\"invalid_token\", error_description=\"it 'expired'\", \
             scope=\"mcp:tools\", resource_metadata=\
             \"https://warden.example/.well-known/oauth-protected-resource/mcp\""
        );
    }

    #[tokio::test]
    async fn a_request_without_a_bearer_token_gets_the_challenge() {
        let server = server(&[]);
        for value in [None, Some("Basic YTpi"), Some("Bearer "), Some("Bearer")] {
            let mut headers = HeaderMap::new();
            if let Some(value) = value {
                headers.insert(header::AUTHORIZATION, HeaderValue::from_static(value));
            }
            let refusal = server.authorize(&headers).await.unwrap_err();
            assert_eq!(refusal.status(), StatusCode::UNAUTHORIZED, "{value:?}");
            let challenge = refusal.headers()[header::WWW_AUTHENTICATE]
                .to_str()
                .unwrap();
            assert!(challenge.starts_with("Bearer "), "{challenge}");
            assert!(challenge.contains("resource_metadata="), "{challenge}");
        }
    }
}
