//! Discovery: which authorization server protects a server, and what it offers.
//!
//! - Protected-resource metadata (RFC 9728): the URL in the challenge's
//!   `resource_metadata`, else `/.well-known/oauth-protected-resource/<path>` and then
//!   `/.well-known/oauth-protected-resource` on the server's origin. Its `resource` must be
//!   the server itself (same origin, a path the server's URL lies under); anything else is
//!   refused before a single authorization request is made.
//! - Authorization-server metadata (RFC 8414, then OpenID Connect discovery), in the
//!   order the MCP specification gives for issuers with and without a path. The document's
//!   `issuer` must equal the issuer the URL was built from, byte for byte (a mix-up
//!   defence); its endpoints must be `https://` (or loopback `http://`).

use serde::Deserialize;
use url::Url;

use crate::challenge::Challenge;
use crate::error::OAuthError;
use crate::fetch::Fetcher;

/// What a protected resource says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedResource {
    /// Its `resource` identifier, exactly as published (sent as RFC 8707 `resource`).
    pub resource: String,
    /// The authorization servers (issuers) that can issue tokens for it.
    pub authorization_servers: Vec<String>,
    /// The scopes it knows, if it lists them.
    pub scopes_supported: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct RawResource {
    resource: Option<String>,
    #[serde(default)]
    authorization_servers: Vec<String>,
    scopes_supported: Option<Vec<String>>,
}

/// What an authorization server offers (the fields the flow uses).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ServerMetadata {
    /// Its issuer identifier.
    pub issuer: String,
    /// Where the user is sent to consent.
    pub authorization_endpoint: String,
    /// Where codes and refresh tokens are exchanged.
    pub token_endpoint: String,
    /// Dynamic client registration (RFC 7591), if offered.
    #[serde(default)]
    pub registration_endpoint: Option<String>,
    /// Scopes it knows.
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
    /// PKCE methods; Warden requires `S256`.
    #[serde(default)]
    pub code_challenge_methods_supported: Option<Vec<String>>,
    /// Token endpoint authentication methods (default `client_secret_basic`).
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    /// Grant types.
    #[serde(default)]
    pub grant_types_supported: Option<Vec<String>>,
    /// Client ID Metadata Documents accepted as `client_id`.
    #[serde(default)]
    pub client_id_metadata_document_supported: Option<bool>,
    /// RFC 9207: the authorization response carries `iss`.
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: Option<bool>,
    /// Its key set (RFC 7517), which `warden serve` checks JWT access tokens with.
    #[serde(default)]
    pub jwks_uri: Option<String>,
    /// Token introspection (RFC 7662), for opaque access tokens offered to `warden serve`.
    #[serde(default)]
    pub introspection_endpoint: Option<String>,
}

impl ServerMetadata {
    /// True when `scope` is listed in `scopes_supported`.
    pub fn lists_scope(&self, scope: &str) -> bool {
        self.scopes_supported
            .iter()
            .flatten()
            .any(|listed| listed == scope)
    }
}

/// The protected-resource metadata of `server_url`, checked to be about that server.
pub async fn resource_metadata(
    fetcher: &Fetcher,
    server_url: &Url,
    challenge: Option<&Challenge>,
) -> Result<ProtectedResource, OAuthError> {
    let mut candidates: Vec<Url> = Vec::new();
    if let Some(url) = challenge.and_then(|c| c.resource_metadata.as_deref()) {
        candidates.push(fetcher.check_url("the resource_metadata URL", url)?);
    }
    candidates.extend(well_known_resource_urls(server_url));
    let mut tried = Vec::new();
    for url in candidates {
        match fetcher
            .get_json("the protected-resource metadata", &url)
            .await?
        {
            Ok(document) => {
                let raw: RawResource =
                    serde_json::from_value(document).map_err(|error| OAuthError::Malformed {
                        what: "the protected-resource metadata",
                        reason: error.to_string(),
                    })?;
                let resource = raw.resource.ok_or_else(|| OAuthError::Malformed {
                    what: "the protected-resource metadata",
                    reason: "it has no `resource`".into(),
                })?;
                if !resource_covers(&resource, server_url) {
                    return Err(OAuthError::ResourceMismatch {
                        resource: crate::error::excerpt(resource.as_bytes()),
                        server: server_url.to_string(),
                    });
                }
                if raw.authorization_servers.is_empty() {
                    return Err(OAuthError::Malformed {
                        what: "the protected-resource metadata",
                        reason: "it names no authorization_servers".into(),
                    });
                }
                return Ok(ProtectedResource {
                    resource,
                    authorization_servers: raw.authorization_servers,
                    scopes_supported: raw.scopes_supported,
                });
            }
            Err(status) => tried.push(format!("{url} (HTTP {status})")),
        }
    }
    Err(OAuthError::NoResourceMetadata {
        server: server_url.to_string(),
        tried: tried.join(", "),
    })
}

/// The well-known locations of a server's protected-resource metadata, path first.
pub fn well_known_resource_urls(server_url: &Url) -> Vec<Url> {
    let mut urls = Vec::new();
    let path = server_url.path().trim_end_matches('/');
    let mut base = server_url.clone();
    base.set_query(None);
    base.set_fragment(None);
    if !path.is_empty() {
        let mut url = base.clone();
        url.set_path(&format!("/.well-known/oauth-protected-resource{path}"));
        urls.push(url);
    }
    let mut root = base;
    root.set_path("/.well-known/oauth-protected-resource");
    urls.push(root);
    urls
}

/// True when the metadata's `resource` names `server_url`: the same origin, and a path
/// the server's URL equals or lies under (segment-wise). `https://a.example` covers
/// `https://a.example/mcp`; `https://evil.example/mcp` or `https://a.example/other` do not.
pub fn resource_covers(resource: &str, server_url: &Url) -> bool {
    let Ok(resource) = Url::parse(resource) else {
        return false;
    };
    if resource.origin() != server_url.origin()
        || resource.fragment().is_some()
        || resource.query().is_some()
    {
        return false;
    }
    let covering = resource.path().trim_end_matches('/');
    let path = server_url.path().trim_end_matches('/');
    path == covering
        || (path.starts_with(covering) && path.as_bytes().get(covering.len()) == Some(&b'/'))
}

/// The authorization-server metadata of `issuer`, from the first location that has it.
pub async fn server_metadata(
    fetcher: &Fetcher,
    issuer: &str,
) -> Result<ServerMetadata, OAuthError> {
    let issuer_url = fetcher.check_url("the authorization server", issuer)?;
    let mut tried = Vec::new();
    for url in metadata_urls(&issuer_url) {
        match fetcher
            .get_json("the authorization-server metadata", &url)
            .await?
        {
            Ok(document) => {
                let found = document
                    .get("issuer")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                if found != issuer {
                    return Err(OAuthError::IssuerMismatch {
                        expected: issuer.to_owned(),
                        found: crate::error::excerpt(found.as_bytes()),
                    });
                }
                let metadata: ServerMetadata =
                    serde_json::from_value(document).map_err(|error| OAuthError::Malformed {
                        what: "the authorization-server metadata",
                        reason: error.to_string(),
                    })?;
                fetcher.check_url(
                    "the authorization endpoint",
                    &metadata.authorization_endpoint,
                )?;
                fetcher.check_url("the token endpoint", &metadata.token_endpoint)?;
                if let Some(registration) = &metadata.registration_endpoint {
                    fetcher.check_url("the registration endpoint", registration)?;
                }
                return Ok(metadata);
            }
            Err(status) => tried.push(format!("{url} (HTTP {status})")),
        }
    }
    Err(OAuthError::NoServerMetadata {
        issuer: issuer.to_owned(),
        tried: tried.join(", "),
    })
}

/// The metadata locations of an issuer, in the MCP specification's order: for
/// `https://as/tenant1`, RFC 8414 with the path inserted, OpenID Connect with the path
/// inserted, OpenID Connect with the path appended; for `https://as`, RFC 8414 then OIDC.
pub fn metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/').to_owned();
    let mut base = issuer.clone();
    base.set_query(None);
    base.set_fragment(None);
    let at = |path: String| {
        let mut url = base.clone();
        url.set_path(&path);
        url
    };
    if path.is_empty() {
        vec![
            at("/.well-known/oauth-authorization-server".into()),
            at("/.well-known/openid-configuration".into()),
        ]
    } else {
        vec![
            at(format!("/.well-known/oauth-authorization-server{path}")),
            at(format!("/.well-known/openid-configuration{path}")),
            at(format!("{path}/.well-known/openid-configuration")),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    #[test]
    fn resource_metadata_locations_are_path_first() {
        let urls = well_known_resource_urls(&url("https://a.example/public/mcp?x=1"));
        assert_eq!(
            urls.iter().map(Url::as_str).collect::<Vec<_>>(),
            vec![
                "https://a.example/.well-known/oauth-protected-resource/public/mcp",
                "https://a.example/.well-known/oauth-protected-resource",
            ]
        );
        assert_eq!(
            well_known_resource_urls(&url("https://a.example/")).len(),
            1
        );
    }

    #[test]
    fn metadata_locations_follow_the_specification_order() {
        let with_path = metadata_urls(&url("https://as.example/tenant1"));
        assert_eq!(
            with_path.iter().map(Url::as_str).collect::<Vec<_>>(),
            vec![
                "https://as.example/.well-known/oauth-authorization-server/tenant1",
                "https://as.example/.well-known/openid-configuration/tenant1",
                "https://as.example/tenant1/.well-known/openid-configuration",
            ]
        );
        let root = metadata_urls(&url("https://as.example"));
        assert_eq!(
            root.iter().map(Url::as_str).collect::<Vec<_>>(),
            vec![
                "https://as.example/.well-known/oauth-authorization-server",
                "https://as.example/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn a_resource_covers_only_its_own_origin_and_paths_below_it() {
        let server = url("https://mcp.example/api/mcp");
        for (resource, covers) in [
            ("https://mcp.example/api/mcp", true),
            ("https://mcp.example/api/mcp/", true),
            ("https://mcp.example/api", true),
            ("https://mcp.example", true),
            ("https://MCP.example/api/mcp", true),
            ("https://mcp.example:443/api/mcp", true),
            ("https://evil.example/api/mcp", false),
            ("http://mcp.example/api/mcp", false),
            ("https://mcp.example:8443/api/mcp", false),
            ("https://mcp.example/ap", false),
            ("https://mcp.example/other", false),
            ("https://mcp.example/api/mcp/deeper", false),
            ("https://mcp.example/api/mcp#frag", false),
            ("not a url", false),
        ] {
            assert_eq!(resource_covers(resource, &server), covers, "{resource}");
        }
    }
}
