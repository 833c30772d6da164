//! How the OAuth client refreshes when the authorization server misbehaves: found by the
//! simulator's OAuth world (decision 0041, revision 3), each test failing on the code
//! before its fix. A scripted authorization server answers in memory through the
//! fetcher's transport; time is tokio's paused clock.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use warden_net::reqwest;
use warden_net::{NetError, Transport};
use warden_oauth::store::{AuthMethod, Grant, ServerRecord};
use warden_oauth::{
    ClientSettings, Fetcher, MemoryStore, NoUserAgent, OAuthClient, Preregistered, Secret, Store,
    Url,
};

const SERVER: &str = "https://mcp.test.invalid/mcp";
const ISSUER: &str = "https://as.test.invalid";

/// What the token endpoint does with the next refresh.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Answer {
    /// New tokens (the refresh token rotated).
    Tokens,
    /// 503.
    Unavailable,
    /// The access token given last, again.
    Same,
    /// Processed (rotated), answered only after `delay`.
    Slow(Duration),
}

#[derive(Default)]
struct Script {
    answers: Vec<Answer>,
    /// Refresh tokens received, in order.
    refreshes: Vec<String>,
    issued: usize,
    /// Refresh tokens retired by a rotation.
    retired: Vec<String>,
}

#[derive(Clone, Default)]
struct AuthServer(Arc<Mutex<Script>>);

impl std::fmt::Debug for AuthServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuthServer")
    }
}

fn json_response(code: u16, body: &Value) -> reqwest::Response {
    let response = http::Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(reqwest::Body::from(body.to_string()))
        .unwrap();
    reqwest::Response::from(response)
}

impl Transport for AuthServer {
    fn send(
        &self,
        request: reqwest::Request,
    ) -> BoxFuture<'static, Result<reqwest::Response, NetError>> {
        let script = Arc::clone(&self.0);
        let path = request.url().path().to_owned();
        let body = request
            .body()
            .and_then(reqwest::Body::as_bytes)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default();
        Box::pin(async move {
            if path == "/.well-known/oauth-protected-resource/mcp" {
                return Ok(json_response(
                    200,
                    &json!({"resource": SERVER, "authorization_servers": [ISSUER]}),
                ));
            }
            if path == "/.well-known/oauth-authorization-server" {
                return Ok(json_response(
                    200,
                    &json!({"issuer": ISSUER,
                            "authorization_endpoint": format!("{ISSUER}/authorize"),
                            "token_endpoint": format!("{ISSUER}/token"),
                            "code_challenge_methods_supported": ["S256"]}),
                ));
            }
            let form: HashMap<String, String> = url::form_urlencoded::parse(body.as_bytes())
                .into_owned()
                .collect();
            let (answer, access) = {
                let mut script = script.lock().unwrap();
                let token = form.get("refresh_token").cloned().unwrap_or_default();
                script.refreshes.push(token.clone());
                let answer = if script.answers.is_empty() {
                    Answer::Tokens
                } else {
                    script.answers.remove(0)
                };
                if script.retired.contains(&token) {
                    return Ok(json_response(400, &json!({"error": "invalid_grant"})));
                }
                match answer {
                    Answer::Unavailable => return Ok(json_response(503, &json!({}))),
                    Answer::Same => (
                        answer,
                        json!({"access_token": format!("at{}", script.issued),
                                                    "token_type": "Bearer"}),
                    ),
                    Answer::Tokens | Answer::Slow(_) => {
                        script.issued += 1;
                        script.retired.push(token);
                        let n = script.issued;
                        (
                            answer,
                            json!({"access_token": format!("at{n}"),
                                        "refresh_token": format!("rt{n}"),
                                        "token_type": "Bearer", "expires_in": 3600}),
                        )
                    }
                }
            };
            if let Answer::Slow(delay) = answer {
                tokio::time::sleep(delay).await;
            }
            Ok(json_response(200, &access))
        })
    }
}

/// A client holding access token `at0` and refresh token `rt0`, nobody to consent.
fn client(server: &AuthServer) -> OAuthClient {
    let store = Arc::new(MemoryStore::default());
    let mut record = ServerRecord::default();
    record.put_grant(Grant {
        issuer: ISSUER.into(),
        resource: SERVER.into(),
        access_token: Secret::new("at0"),
        refresh_token: Some(Secret::new("rt0")),
        expires_at: None,
        scopes: Vec::new(),
    });
    store.save("up", &record).unwrap();
    let url = Url::parse(SERVER).unwrap();
    let fetcher = Fetcher::for_server(false, &url)
        .unwrap()
        .with_transport(Arc::new(server.clone()));
    let settings = ClientSettings {
        client_name: "Warden".into(),
        metadata_url: None,
        preregistered: Some(Preregistered {
            client_id: "warden-test".into(),
            client_secret: None,
            issuer: Some(ISSUER.into()),
            auth_method: Some(AuthMethod::None),
        }),
    };
    let store: Arc<dyn Store> = store;
    OAuthClient::with_fetcher("up", url, fetcher, settings, store, Arc::new(NoUserAgent)).unwrap()
}

/// Old code: the 503 dropped the refresh token, then asked for a sign-in ("needs
/// sign-in: run `warden login`") although the grant was fine.
#[tokio::test(start_paused = true)]
async fn a_refresh_the_authorization_server_could_not_answer_keeps_the_refresh_token() {
    let server = AuthServer::default();
    server.0.lock().unwrap().answers = vec![Answer::Unavailable];
    let client = client(&server);
    let refused = Secret::new("at0");
    let error = client
        .unauthorized(Some(&refused), None, 1)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("503"), "{error}");
    assert!(!error.contains("sign-in"), "{error}");
    assert!(client.refreshable(), "the refresh token was dropped");
    // Once the pause is over, the same refresh token gets a new access token.
    tokio::time::sleep(warden_oauth::client::REFRESH_PAUSE_START).await;
    client.unauthorized(Some(&refused), None, 1).await.unwrap();
    assert_eq!(client.current_token(), Some(Secret::new("at1")));
    assert_eq!(server.0.lock().unwrap().refreshes, ["rt0", "rt0"]);
}

/// Old code: every 401 after an outage went to the token endpoint at once.
#[tokio::test(start_paused = true)]
async fn refreshes_that_fail_without_a_refusal_pause_before_the_next() {
    let server = AuthServer::default();
    server.0.lock().unwrap().answers = vec![Answer::Unavailable, Answer::Unavailable];
    let client = client(&server);
    let refused = Secret::new("at0");
    for _ in 0..3 {
        let _ = client.unauthorized(Some(&refused), None, 1).await;
    }
    assert_eq!(server.0.lock().unwrap().refreshes.len(), 1, "no pause");
    let error = client
        .unauthorized(Some(&refused), None, 1)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("the next try is in 2 s"), "{error}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _ = client.unauthorized(Some(&refused), None, 1).await;
    assert_eq!(server.0.lock().unwrap().refreshes.len(), 2);
    // The second failure in a row doubles the pause.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _ = client.unauthorized(Some(&refused), None, 1).await;
    assert_eq!(
        server.0.lock().unwrap().refreshes.len(),
        2,
        "paused 2 s, not 4"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    client.unauthorized(Some(&refused), None, 1).await.unwrap();
    assert_eq!(server.0.lock().unwrap().refreshes.len(), 3);
}

/// Old code: the token the server had just refused was taken as new, and the request sent
/// again with it (and refused again).
#[tokio::test(start_paused = true)]
async fn a_refresh_that_gives_back_the_refused_token_is_not_taken() {
    let server = AuthServer::default();
    server.0.lock().unwrap().answers = vec![Answer::Same];
    let client = client(&server);
    let refused = Secret::new("at0");
    let error = client
        .unauthorized(Some(&refused), None, 1)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("had just refused"), "{error}");
    assert!(client.refreshable());
    // A control: a refresh without a refused token may give the same one back.
    assert_eq!(client.current_token(), Some(refused));
}

/// Old code: a caller giving up (its call's deadline) cut the refresh short after the
/// authorization server had rotated the refresh token, so the next refresh sent the
/// retired one and was refused: the grant was lost, and a sign-in needed.
#[tokio::test(start_paused = true)]
async fn a_refresh_outlives_a_caller_that_gave_up() {
    let server = AuthServer::default();
    server.0.lock().unwrap().answers = vec![Answer::Slow(Duration::from_secs(5))];
    let client = Arc::new(client(&server));
    let refused = Secret::new("at0");
    let cut = tokio::time::timeout(
        Duration::from_secs(1),
        client.unauthorized(Some(&refused), None, 1),
    )
    .await;
    assert!(cut.is_err(), "the caller should have given up");
    // Another caller refused with the same token waits for the refresh under way and
    // takes its token, without a refresh of its own.
    client.unauthorized(Some(&refused), None, 1).await.unwrap();
    assert_eq!(client.current_token(), Some(Secret::new("at1")));
    assert!(client.refreshable());
    assert_eq!(server.0.lock().unwrap().refreshes, ["rt0"]);
    // And the next refresh uses the rotated refresh token.
    client
        .unauthorized(Some(&Secret::new("at1")), None, 1)
        .await
        .unwrap();
    assert_eq!(server.0.lock().unwrap().refreshes, ["rt0", "rt1"]);
}
