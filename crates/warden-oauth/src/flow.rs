//! The authorization code flow with PKCE (S256 only): the authorization request (with
//! `state`, `resource` and the scopes), the checks on the authorization response (the
//! redirect back: `state`, RFC 9207 `iss`, `error`, `code`), and the token requests
//! (code exchange and refresh, both with `resource`).

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;
use url::Url;

use crate::discovery::ServerMetadata;
use crate::error::{OAuthError, excerpt};
use crate::fetch::{Basic, Fetcher};
use crate::pkce::{Pkce, random_text};
use crate::store::{AuthMethod, Grant, Registration, Secret};

/// Longest access or refresh token accepted (it goes into a header on every request).
const MAX_TOKEN: usize = 16 * 1024;

/// One authorization in progress: what the response must match.
pub struct Pending {
    /// The `state` sent.
    pub state: String,
    /// The PKCE pair.
    pub pkce: Pkce,
    /// The issuer recorded before the redirect (RFC 9207).
    pub issuer: String,
    /// Whether the server promised `iss` in its responses.
    pub iss_required: bool,
    /// The redirect URI sent.
    pub redirect_uri: String,
    /// The `resource` sent.
    pub resource: String,
    /// The scopes asked for.
    pub scopes: Vec<String>,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("issuer", &self.issuer)
            .field("resource", &self.resource)
            .finish_non_exhaustive()
    }
}

/// Refuses an authorization server that does not advertise PKCE with S256.
pub fn require_s256(metadata: &ServerMetadata) -> Result<(), OAuthError> {
    let methods = metadata.code_challenge_methods_supported.as_deref();
    if methods.is_some_and(|methods| methods.iter().any(|m| m == "S256")) {
        return Ok(());
    }
    Err(OAuthError::NoPkce {
        issuer: metadata.issuer.clone(),
        advertised: match methods {
            None => "absent".into(),
            Some(methods) => format!("[{}]", methods.join(", ")),
        },
    })
}

/// Starts an authorization: the pending state and the URL to send the user to.
pub fn begin(
    metadata: &ServerMetadata,
    registration: &Registration,
    redirect_uri: &str,
    resource: &str,
    scopes: &[String],
) -> Result<(Pending, Url), OAuthError> {
    require_s256(metadata)?;
    let pending = Pending {
        state: random_text(24)?,
        pkce: Pkce::new()?,
        issuer: metadata.issuer.clone(),
        iss_required: metadata.authorization_response_iss_parameter_supported == Some(true),
        redirect_uri: redirect_uri.to_owned(),
        resource: resource.to_owned(),
        scopes: scopes.to_vec(),
    };
    let mut url =
        Url::parse(&metadata.authorization_endpoint).map_err(|error| OAuthError::BadUrl {
            what: "the authorization endpoint",
            url: excerpt(metadata.authorization_endpoint.as_bytes()),
            reason: error.to_string(),
        })?;
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("response_type", "code")
            .append_pair("client_id", &registration.client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("code_challenge", &pending.pkce.challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", &pending.state)
            .append_pair("resource", resource);
        if !scopes.is_empty() {
            query.append_pair("scope", &scopes.join(" "));
        }
    }
    Ok((pending, url))
}

/// Checks the authorization response (the URL the user agent was redirected to) and
/// returns the code: it must come to Warden's redirect URI, carry the `state` sent, and,
/// when it names an issuer (or the server promised to), name exactly the recorded one.
/// An `error` is reported only after those checks, so a forged one is not shown.
pub fn finish(pending: &Pending, callback: &Url) -> Result<String, OAuthError> {
    let expected = Url::parse(&pending.redirect_uri)
        .map_err(|error| OAuthError::Callback(format!("the redirect URI is not a URL: {error}")))?;
    if callback.origin() != expected.origin() || callback.path() != expected.path() {
        return Err(OAuthError::Callback(format!(
            "it went to {}, not to Warden's redirect URI {}",
            excerpt(without_query(callback).as_bytes()),
            pending.redirect_uri
        )));
    }
    let mut state = None;
    let mut iss = None;
    let mut code = None;
    let mut error = None;
    let mut description = None;
    for (name, value) in callback.query_pairs() {
        let slot = match name.as_ref() {
            "state" => &mut state,
            "iss" => &mut iss,
            "code" => &mut code,
            "error" => &mut error,
            "error_description" => &mut description,
            _ => continue,
        };
        if slot.is_some() {
            return Err(OAuthError::Callback(format!(
                "the parameter {name} appears twice"
            )));
        }
        *slot = Some(value.into_owned());
    }
    if state.as_deref() != Some(pending.state.as_str()) {
        return Err(OAuthError::Callback(
            "its state does not match the one Warden sent (a forged or replayed response)".into(),
        ));
    }
    match iss.as_deref() {
        Some(iss) if iss != pending.issuer => {
            return Err(OAuthError::Callback(format!(
                "it names issuer {}, but the authorization request went to {} (mix-up)",
                excerpt(iss.as_bytes()),
                pending.issuer
            )));
        }
        None if pending.iss_required => {
            return Err(OAuthError::Callback(format!(
                "it has no iss, though {} promised one (authorization_response_iss_parameter_supported)",
                pending.issuer
            )));
        }
        _ => {}
    }
    if let Some(error) = error {
        let description = description
            .map(|text| format!(" ({})", excerpt(text.as_bytes())))
            .unwrap_or_default();
        return Err(OAuthError::Callback(format!(
            "the authorization server said {}{description}",
            excerpt(error.as_bytes())
        )));
    }
    code.filter(|code| !code.is_empty())
        .ok_or_else(|| OAuthError::Callback("it carries no code".into()))
}

fn without_query(url: &Url) -> String {
    let mut url = url.clone();
    url.set_query(None);
    url.set_fragment(None);
    url.to_string()
}

/// Exchanges the code for tokens.
pub async fn exchange(
    fetcher: &Fetcher,
    metadata: &ServerMetadata,
    registration: &Registration,
    pending: &Pending,
    code: &str,
) -> Result<Grant, OAuthError> {
    let form = vec![
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", pending.redirect_uri.as_str()),
        ("code_verifier", pending.pkce.verifier.as_str()),
        ("resource", pending.resource.as_str()),
    ];
    let answer = token_request(fetcher, metadata, registration, form).await?;
    grant_from(answer, metadata, &pending.resource, &pending.scopes, None)
}

/// Uses the refresh token of `grant` for a new access token.
pub async fn refresh(
    fetcher: &Fetcher,
    metadata: &ServerMetadata,
    registration: &Registration,
    grant: &Grant,
) -> Result<Grant, OAuthError> {
    let Some(refresh_token) = &grant.refresh_token else {
        return Err(OAuthError::Malformed {
            what: "the stored grant",
            reason: "it has no refresh token".into(),
        });
    };
    let form = vec![
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh_token.expose()),
        ("resource", grant.resource.as_str()),
    ];
    let answer = token_request(fetcher, metadata, registration, form).await?;
    grant_from(
        answer,
        metadata,
        &grant.resource,
        &grant.scopes,
        grant.refresh_token.clone(),
    )
}

async fn token_request(
    fetcher: &Fetcher,
    metadata: &ServerMetadata,
    registration: &Registration,
    mut form: Vec<(&str, &str)>,
) -> Result<Value, OAuthError> {
    let endpoint = fetcher.check_url("the token endpoint", &metadata.token_endpoint)?;
    let secret = registration
        .client_secret
        .as_ref()
        .map(Secret::expose)
        .unwrap_or_default();
    let basic = match registration.auth_method {
        AuthMethod::None => {
            form.push(("client_id", registration.client_id.as_str()));
            Basic::None
        }
        AuthMethod::ClientSecretPost => {
            form.push(("client_id", registration.client_id.as_str()));
            form.push(("client_secret", secret));
            Basic::None
        }
        AuthMethod::ClientSecretBasic => Basic::Credentials {
            id: &registration.client_id,
            secret,
        },
    };
    let (_, answer) = fetcher
        .post_form("the token endpoint", &endpoint, &form, basic)
        .await?;
    Ok(answer)
}

fn grant_from(
    answer: Value,
    metadata: &ServerMetadata,
    resource: &str,
    requested: &[String],
    old_refresh: Option<Secret>,
) -> Result<Grant, OAuthError> {
    let malformed = |reason: String| OAuthError::Malformed {
        what: "the token response",
        reason,
    };
    let text = |key: &str| answer.get(key).and_then(Value::as_str);
    let access = text("access_token")
        .filter(|token| !token.is_empty())
        .ok_or_else(|| malformed("it has no access_token".into()))?;
    if access.len() > MAX_TOKEN || !access.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err(malformed(format!(
            "the access token is not 1 to {MAX_TOKEN} visible ASCII characters"
        )));
    }
    match text("token_type") {
        Some(kind) if kind.eq_ignore_ascii_case("bearer") => {}
        other => {
            return Err(malformed(format!(
                "token_type is {}, and Warden only uses Bearer tokens",
                other.map_or_else(
                    || "absent".to_owned(),
                    |t| format!("{:?}", excerpt(t.as_bytes()))
                )
            )));
        }
    }
    let refresh_token = match text("refresh_token") {
        Some(token) if token.len() <= MAX_TOKEN && !token.is_empty() => Some(Secret::new(token)),
        Some(_) => return Err(malformed("the refresh token is too long or empty".into())),
        None => old_refresh,
    };
    let expires_at = answer
        .get("expires_in")
        .and_then(Value::as_u64)
        .map(|seconds| now().saturating_add(seconds));
    let scopes = match text("scope") {
        Some(scope) => crate::challenge::split_scopes(scope),
        None => requested.to_vec(),
    };
    Ok(Grant {
        issuer: metadata.issuer.clone(),
        resource: resource.to_owned(),
        access_token: Secret::new(access),
        refresh_token,
        expires_at,
        scopes,
    })
}

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(iss: Option<bool>, methods: Option<Vec<&str>>) -> ServerMetadata {
        ServerMetadata {
            issuer: "https://as.example".into(),
            authorization_endpoint: "https://as.example/authorize".into(),
            token_endpoint: "https://as.example/token".into(),
            code_challenge_methods_supported: methods
                .map(|m| m.into_iter().map(str::to_owned).collect()),
            authorization_response_iss_parameter_supported: iss,
            ..ServerMetadata::default()
        }
    }

    fn registration() -> Registration {
        Registration {
            issuer: "https://as.example".into(),
            client_id: "client".into(),
            client_secret: None,
            auth_method: AuthMethod::None,
            source: "dynamic".into(),
        }
    }

    fn start(iss: Option<bool>) -> (Pending, Url) {
        begin(
            &metadata(iss, Some(vec!["S256"])),
            &registration(),
            "http://127.0.0.1:4000/callback",
            "https://mcp.example/mcp",
            &["a".into(), "b".into()],
        )
        .unwrap()
    }

    fn callback(pending: &Pending, extra: &str) -> Url {
        Url::parse(&format!(
            "http://127.0.0.1:4000/callback?code=c1&state={}{extra}",
            pending.state
        ))
        .unwrap()
    }

    #[test]
    fn the_request_carries_pkce_state_resource_and_scope() {
        let (pending, url) = start(None);
        let query: std::collections::HashMap<_, _> = url.query_pairs().into_owned().collect();
        assert_eq!(query["code_challenge_method"], "S256");
        assert_eq!(query["code_challenge"], pending.pkce.challenge);
        assert_eq!(query["state"], pending.state);
        assert_eq!(query["resource"], "https://mcp.example/mcp");
        assert_eq!(query["scope"], "a b");
        assert_eq!(query["response_type"], "code");
    }

    #[test]
    fn plain_pkce_or_no_pkce_is_refused() {
        for methods in [None, Some(vec!["plain"]), Some(vec![])] {
            let error = begin(
                &metadata(None, methods),
                &registration(),
                "http://127.0.0.1/callback",
                "https://mcp.example/mcp",
                &[],
            )
            .unwrap_err();
            assert!(matches!(error, OAuthError::NoPkce { .. }), "{error}");
        }
    }

    #[test]
    fn the_iss_matrix_of_rfc_9207() {
        let (pending, _) = start(Some(true));
        assert_eq!(
            finish(
                &pending,
                &callback(&pending, "&iss=https%3A%2F%2Fas.example")
            )
            .unwrap(),
            "c1"
        );
        // Promised but missing, wrong, or only equal after normalisation: refused.
        for extra in [
            "",
            "&iss=https%3A%2F%2Fevil.example",
            "&iss=https%3A%2F%2Fas.example%2F",
        ] {
            assert!(
                finish(&pending, &callback(&pending, extra)).is_err(),
                "{extra}"
            );
        }
        let (pending, _) = start(None);
        assert_eq!(finish(&pending, &callback(&pending, "")).unwrap(), "c1");
        assert!(
            finish(
                &pending,
                &callback(&pending, "&iss=https%3A%2F%2Fevil.example")
            )
            .is_err()
        );
    }

    #[test]
    fn a_wrong_state_another_redirect_target_or_a_forged_error_is_refused() {
        let (pending, _) = start(None);
        let wrong_state =
            Url::parse("http://127.0.0.1:4000/callback?code=c1&state=forged").unwrap();
        let error = finish(&pending, &wrong_state).unwrap_err().to_string();
        assert!(error.contains("state"), "{error}");
        let elsewhere = Url::parse(&format!(
            "http://evil.example/callback?code=c1&state={}",
            pending.state
        ))
        .unwrap();
        assert!(finish(&pending, &elsewhere).is_err());
        let error = finish(&pending, &callback(&pending, "&error=access_denied"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("access_denied"), "{error}");
        let twice = callback(&pending, &format!("&state={}", pending.state));
        assert!(finish(&pending, &twice).is_err());
    }

    #[test]
    fn token_responses_are_checked() {
        let m = metadata(None, None);
        let ok = serde_json::json!({"access_token": "t", "token_type": "bearer", "expires_in": 60, "refresh_token": "r"});
        let grant = grant_from(ok, &m, "https://mcp.example/mcp", &[], None).unwrap();
        assert_eq!(grant.access_token.expose(), "t");
        assert!(grant.expires_at.unwrap() >= now() + 59);
        for bad in [
            serde_json::json!({"token_type": "Bearer"}),
            serde_json::json!({"access_token": "t", "token_type": "DPoP"}),
            serde_json::json!({"access_token": "t\r\nX: y", "token_type": "Bearer"}),
        ] {
            assert!(grant_from(bad, &m, "r", &[], None).is_err());
        }
    }
}
