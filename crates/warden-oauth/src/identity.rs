//! Who Warden is to an authorization server, in the order the MCP specification gives:
//! credentials configured for the server (bound to their issuer when the configuration
//! names one), else a Client ID Metadata Document where the server accepts them and
//! Warden has one, else a registration made earlier with this same issuer, else dynamic
//! client registration (RFC 7591, `application_type = "native"`). A registration is only
//! ever used with the issuer it was made with: when a server moves to another
//! authorization server, Warden registers again there.

use serde_json::{Value, json};

use crate::discovery::ServerMetadata;
use crate::error::OAuthError;
use crate::fetch::Fetcher;
use crate::store::{AuthMethod, Registration, Secret, ServerRecord};

/// Client credentials from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preregistered {
    /// The `client_id`.
    pub client_id: String,
    /// The client secret, if any.
    pub client_secret: Option<Secret>,
    /// The issuer they belong to; `None` means "whichever the server names" (warned).
    pub issuer: Option<String>,
    /// The token endpoint authentication method, if configured.
    pub auth_method: Option<AuthMethod>,
}

/// How Warden identifies itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSettings {
    /// `client_name` in registrations.
    pub client_name: String,
    /// The https URL of Warden's Client ID Metadata Document, if one is published.
    pub metadata_url: Option<String>,
    /// Configured credentials.
    pub preregistered: Option<Preregistered>,
}

impl Default for ClientSettings {
    fn default() -> Self {
        ClientSettings {
            client_name: "Warden".into(),
            metadata_url: None,
            preregistered: None,
        }
    }
}

/// Warden's identity with `metadata.issuer`; `Ok((registration, true))` when it is new
/// and should be stored.
pub async fn resolve(
    fetcher: &Fetcher,
    metadata: &ServerMetadata,
    settings: &ClientSettings,
    record: &ServerRecord,
    redirect_uri: &str,
) -> Result<(Registration, bool), OAuthError> {
    let issuer = &metadata.issuer;
    if let Some(configured) = &settings.preregistered {
        match &configured.issuer {
            Some(bound) if bound != issuer => {
                return Err(OAuthError::WrongIssuerForCredentials {
                    configured: bound.clone(),
                    current: issuer.clone(),
                });
            }
            Some(_) => {}
            None => tracing::warn!(
                issuer = %issuer,
                "the configured client_id names no issuer; using it with the issuer the server names (set oauth.issuer to bind it)"
            ),
        }
        let method = match configured.auth_method {
            Some(method) => method,
            None => choose_method(metadata, configured.client_secret.is_some())?,
        };
        return Ok((
            Registration {
                issuer: issuer.clone(),
                client_id: configured.client_id.clone(),
                client_secret: configured.client_secret.clone(),
                auth_method: method,
                source: "configured".into(),
            },
            false,
        ));
    }
    if metadata.client_id_metadata_document_supported == Some(true)
        && let Some(url) = &settings.metadata_url
    {
        return Ok((
            Registration {
                issuer: issuer.clone(),
                client_id: url.clone(),
                client_secret: None,
                auth_method: AuthMethod::None,
                source: "cimd".into(),
            },
            false,
        ));
    }
    if let Some(existing) = record.registration(issuer) {
        return Ok((existing.clone(), false));
    }
    let Some(endpoint) = &metadata.registration_endpoint else {
        return Err(OAuthError::NoClientIdentity {
            issuer: issuer.clone(),
        });
    };
    let endpoint = fetcher.check_url("the registration endpoint", endpoint)?;
    let requested = choose_method(metadata, false).or_else(|_| choose_method(metadata, true))?;
    let body = json!({
        "client_name": settings.client_name,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": requested.name(),
        "application_type": "native",
    });
    let (_, answer) = fetcher
        .post_json("the registration endpoint", &endpoint, &body)
        .await?;
    let text = |key: &str| answer.get(key).and_then(Value::as_str).map(str::to_owned);
    let client_id = text("client_id")
        .filter(|id| !id.is_empty())
        .ok_or_else(|| OAuthError::Malformed {
            what: "the registration response",
            reason: "it has no client_id".into(),
        })?;
    let client_secret = text("client_secret")
        .filter(|secret| !secret.is_empty())
        .map(Secret::new);
    let method = match text("token_endpoint_auth_method") {
        Some(name) => AuthMethod::from_name(&name).ok_or_else(|| OAuthError::NoAuthMethod {
            offered: name.clone(),
        })?,
        None => requested,
    };
    if method != AuthMethod::None && client_secret.is_none() {
        return Err(OAuthError::Malformed {
            what: "the registration response",
            reason: format!("it asks for {} but issued no client_secret", method.name()),
        });
    }
    tracing::info!(issuer = %issuer, method = method.name(), "registered with the authorization server");
    Ok((
        Registration {
            issuer: issuer.clone(),
            client_id,
            client_secret,
            auth_method: method,
            source: "dynamic".into(),
        },
        true,
    ))
}

/// The token endpoint authentication method to use: for a public client `none` when the
/// server accepts it; with a secret, `client_secret_basic` then `client_secret_post`. An
/// absent list means `client_secret_basic` (RFC 8414 §2).
fn choose_method(metadata: &ServerMetadata, has_secret: bool) -> Result<AuthMethod, OAuthError> {
    let offered: Vec<String> = metadata
        .token_endpoint_auth_methods_supported
        .clone()
        .unwrap_or_else(|| vec!["client_secret_basic".into()]);
    let order: &[AuthMethod] = if has_secret {
        &[AuthMethod::ClientSecretBasic, AuthMethod::ClientSecretPost]
    } else {
        &[AuthMethod::None]
    };
    order
        .iter()
        .copied()
        .find(|method| offered.iter().any(|name| name == method.name()))
        .ok_or_else(|| OAuthError::NoAuthMethod {
            offered: offered.join(", "),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(methods: Option<&[&str]>) -> ServerMetadata {
        ServerMetadata {
            issuer: "https://as.example".into(),
            token_endpoint_auth_methods_supported: methods
                .map(|m| m.iter().map(|s| (*s).to_owned()).collect()),
            ..ServerMetadata::default()
        }
    }

    #[test]
    fn methods_are_chosen_from_what_the_server_offers() {
        assert_eq!(
            choose_method(&metadata(Some(&["none", "client_secret_basic"])), false).unwrap(),
            AuthMethod::None
        );
        assert_eq!(
            choose_method(&metadata(Some(&["client_secret_post"])), true).unwrap(),
            AuthMethod::ClientSecretPost
        );
        assert_eq!(
            choose_method(&metadata(None), true).unwrap(),
            AuthMethod::ClientSecretBasic
        );
        assert!(choose_method(&metadata(Some(&["private_key_jwt"])), true).is_err());
    }

    #[tokio::test]
    async fn configured_credentials_bound_to_another_issuer_are_refused() {
        let settings = ClientSettings {
            preregistered: Some(Preregistered {
                client_id: "id".into(),
                client_secret: Some(Secret::new("s")),
                issuer: Some("https://old.example".into()),
                auth_method: None,
            }),
            ..ClientSettings::default()
        };
        let fetcher = Fetcher::new(false).unwrap();
        let error = resolve(
            &fetcher,
            &metadata(None),
            &settings,
            &ServerRecord::default(),
            "http://127.0.0.1/callback",
        )
        .await
        .unwrap_err();
        assert!(
            matches!(error, OAuthError::WrongIssuerForCredentials { .. }),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_registration_is_reused_only_with_its_own_issuer() {
        let mut record = ServerRecord::default();
        record.put_registration(Registration {
            issuer: "https://other.example".into(),
            client_id: "other-id".into(),
            client_secret: None,
            auth_method: AuthMethod::None,
            source: "dynamic".into(),
        });
        let fetcher = Fetcher::new(false).unwrap();
        // No registration endpoint and no registration for this issuer: nothing to use.
        let error = resolve(
            &fetcher,
            &metadata(None),
            &ClientSettings::default(),
            &record,
            "http://127.0.0.1/callback",
        )
        .await
        .unwrap_err();
        assert!(
            matches!(error, OAuthError::NoClientIdentity { .. }),
            "{error}"
        );
    }
}
