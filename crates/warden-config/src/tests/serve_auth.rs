//! `[serve.auth]`: every key read, and the refusals of settings that cannot work.

use std::time::Duration;

use super::{Fixture, strings};
use crate::{ServeAuth, ServeIssuer, load_file};

const FULL: &str = r#"[serve.auth]
resource = "https://warden.example/mcp"
required_scopes = ["mcp:tools"]
scopes_supported = ["mcp:tools", "mcp:admin"]
leeway = "30s"
jwks_refresh = "2m"
introspection_ttl = "10s"

[[serve.auth.issuers]]
issuer = "https://auth.example"
jwks_uri = "https://auth.example/jwks"

[[serve.auth.issuers]]
issuer = "https://other.example/tenant"
introspection_endpoint = "https://other.example/introspect"
introspection_client_id = "warden"
introspection_secret_env = "WARDEN_INTROSPECTION_SECRET"
"#;

#[test]
fn every_key_of_serve_auth_is_read() {
    let fx = Fixture::new();
    let path = fx.write(&fx.project().join("warden.toml"), FULL);
    let config = load_file(&path, &fx.env).unwrap();
    assert_eq!(
        config.serve.auth,
        Some(ServeAuth {
            resource: "https://warden.example/mcp".into(),
            issuers: vec![
                ServeIssuer {
                    issuer: "https://auth.example".into(),
                    jwks_uri: Some("https://auth.example/jwks".into()),
                    ..ServeIssuer::default()
                },
                ServeIssuer {
                    issuer: "https://other.example/tenant".into(),
                    jwks_uri: None,
                    introspection_endpoint: Some("https://other.example/introspect".into()),
                    introspection_client_id: Some("warden".into()),
                    introspection_secret_env: Some("WARDEN_INTROSPECTION_SECRET".into()),
                },
            ],
            required_scopes: strings(&["mcp:tools"]),
            scopes_supported: strings(&["mcp:tools", "mcp:admin"]),
            leeway: Some(Duration::from_secs(30)),
            jwks_refresh: Some(Duration::from_secs(120)),
            introspection_ttl: Some(Duration::from_secs(10)),
        })
    );
    // Without `scopes_supported`, the required scopes are advertised.
    let path = fx.write(
        &fx.project().join("short.toml"),
        "[serve.auth]\nresource = \"http://127.0.0.1:8765/mcp\"\nrequired_scopes = [\"a\"]\n\
         [[serve.auth.issuers]]\nissuer = \"https://auth.example\"\n",
    );
    let auth = load_file(&path, &fx.env).unwrap().serve.auth.unwrap();
    assert_eq!(auth.scopes_supported, strings(&["a"]));
    // The bounds themselves are accepted.
    let path = fx.write(
        &fx.project().join("bounds.toml"),
        "[serve.auth]\nresource = \"https://w.example/mcp\"\nleeway = \"5m\"\n\
         jwks_refresh = \"10s\"\n[[serve.auth.issuers]]\nissuer = \"https://auth.example\"\n",
    );
    let auth = load_file(&path, &fx.env).unwrap().serve.auth.unwrap();
    assert_eq!(auth.leeway, Some(Duration::from_secs(300)));
    assert_eq!(auth.jwks_refresh, Some(Duration::from_secs(10)));
}

#[test]
fn serve_auth_settings_that_cannot_work_are_refused_by_name() {
    let fx = Fixture::new();
    let issuer = "[[serve.auth.issuers]]\nissuer = \"https://auth.example\"\n";
    for (text, word) in [
        (
            "[serve.auth]\nresource = \"https://w.example/mcp\"\n".to_owned(),
            "auth.issuers",
        ),
        (
            format!("[serve.auth]\nresource = \"w.example\"\n{issuer}"),
            "auth.resource",
        ),
        (format!("[serve.auth]\n{issuer}"), "resource"),
        (
            "[serve.auth]\nresource = \"https://w.example/mcp\"\n[[serve.auth.issuers]]\n\
             issuer = \"auth.example\"\n"
                .to_owned(),
            "auth.issuers[0].issuer",
        ),
        (
            format!(
                "[serve.auth]\nresource = \"https://w.example/mcp\"\n{issuer}\
                 introspection_client_id = \"w\"\n"
            ),
            "needs both",
        ),
        (
            format!(
                "[serve.auth]\nresource = \"https://w.example/mcp\"\n{issuer}\
                 introspection_client_id = \"w\"\nintrospection_secret_env = \"s3cr3t value\"\n"
            ),
            "never the secret",
        ),
        (
            format!(
                "[serve.auth]\nresource = \"https://w.example/mcp\"\n{issuer}\
                 introspection_endpoint = \"https://auth.example/i\"\n"
            ),
            "authenticates",
        ),
        (
            format!(
                "[serve.auth]\nresource = \"https://w.example/mcp\"\nrequired_scopes = [\"a b\"]\n{issuer}"
            ),
            "not a scope",
        ),
        (
            format!(
                "[serve.auth]\nresource = \"https://w.example/mcp\"\naudience = \"x\"\n{issuer}"
            ),
            "unknown field",
        ),
        (
            format!(
                "[serve.auth]\nresource = \"https://w.example/mcp\"\nleeway = \"301s\"\n{issuer}"
            ),
            "auth.leeway",
        ),
        (
            format!(
                "[serve.auth]\nresource = \"https://w.example/mcp\"\nleeway = \"60m\"\n{issuer}"
            ),
            "more than the 300s allowed",
        ),
        (
            format!(
                "[serve.auth]\nresource = \"https://w.example/mcp\"\njwks_refresh = \"9s\"\n{issuer}"
            ),
            "auth.jwks_refresh",
        ),
        (
            format!(
                "[serve.auth]\nresource = \"https://w.example/mcp\"\njwks_refresh = \"500ms\"\n{issuer}"
            ),
            "less than the 10s allowed",
        ),
    ] {
        let path = fx.write(&fx.home().join("bad.toml"), &text);
        let message = load_file(&path, &fx.env).unwrap_err().to_string();
        assert!(message.contains(word), "{text}\n=> {message}");
    }
}
