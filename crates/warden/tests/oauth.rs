//! Signing in to remote servers (issue 12): Warden's OAuth client against an authorization
//! server of our own (`warden-auth-testserver`, the real protocol over loopback). Each
//! attack mode must be refused before the step it attacks completes (no code exchanged, no
//! token sent where it does not belong); the `good` mode is the positive control, and the
//! refresh storm checks that a hundred refusals at once lead to one refresh.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

#[path = "../../warden-oauth/tests/support/keyring_bus.rs"]
mod keyring_bus;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use warden_config::{EraPreference, HttpSettings};
use warden_mcp::http::{ClientProfile, Remote, Session, open};
use warden_oauth::{ClientSettings, Headless, MemoryStore, OAuthClient, Store};

const LIMIT: Duration = Duration::from_secs(60);
const REDIRECT: &str = "http://127.0.0.1:9/callback";

/// The authorization test server in `mode`, killed when dropped.
struct AuthServer {
    child: Child,
    base: String,
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl AuthServer {
    fn start(mode: &str) -> AuthServer {
        let program = support::warden_bin().with_file_name("warden-auth-testserver");
        assert!(
            program.exists(),
            "{} is missing: build it with `cargo build -p warden-testservers`",
            program.display()
        );
        let mut child = Command::new(program)
            .arg(mode)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        AuthServer {
            child,
            base: line.trim().to_owned(),
        }
    }

    fn url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    /// A plain HTTP/1.1 exchange with the server's admin endpoints.
    fn admin(&self, method: &str, path: &str) -> Value {
        let address = self.base.trim_start_matches("http://");
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        stream.set_read_timeout(Some(LIMIT)).unwrap();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        let body = text.split("\r\n\r\n").nth(1).unwrap_or_default();
        serde_json::from_str(body).unwrap_or(Value::Null)
    }

    fn stats(&self) -> Value {
        self.admin("GET", "/admin/stats")
    }
}

fn client(name: &str, url: &str, store: Arc<dyn Store>) -> Arc<OAuthClient> {
    let agent = Headless::new(warden_oauth::Fetcher::new(false).unwrap(), REDIRECT);
    Arc::new(
        OAuthClient::new(
            name,
            url,
            false,
            ClientSettings::default(),
            store,
            Arc::new(agent),
        )
        .unwrap(),
    )
}

fn remote(name: &str, url: &str, oauth: Arc<OAuthClient>) -> Remote {
    Remote {
        name: name.into(),
        url: url.into(),
        headers: BTreeMap::new(),
        settings: HttpSettings::default(),
        era: EraPreference::Legacy,
        max_bytes: warden_config::DEFAULT_MAX_MESSAGE_BYTES,
        connect_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(20),
        oauth: Some(oauth),
        backoff: warden_mcp::http::reconnect::Backoff::system(),
        transport: None,
    }
}

async fn connect(server: &AuthServer) -> Result<Session, String> {
    let oauth = client("docs", &server.url(), Arc::new(MemoryStore::default()));
    let remote = remote("docs", &server.url(), oauth);
    match tokio::time::timeout(LIMIT, open(&remote, &ClientProfile::default())).await {
        Ok(Ok((session, _))) => Ok(session),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => panic!("no answer within {LIMIT:?}"),
    }
}

async fn list(session: &Session) -> Value {
    session
        .request("tools/list", Map::new(), None)
        .await
        .unwrap()
}

#[tokio::test]
async fn signing_in_works_and_the_token_reaches_only_its_own_resource() {
    let server = AuthServer::start("good");
    let session = connect(&server).await.unwrap();
    let tools = list(&session).await;
    assert_eq!(tools["tools"][0]["name"], "echo");
    let stats = server.stats();
    assert_eq!(stats["registrations"], 1, "{stats}");
    assert_eq!(stats["code_grants"], 1, "{stats}");
    assert_eq!(stats["foreign"], 0, "{stats}");
    assert!(stats["valid"].as_u64().unwrap() >= 2, "{stats}");
}

/// Connects to `server` judging it a public server (as if it were not on loopback): the
/// session, or the error.
async fn connect_as_public(server: &AuthServer) -> Result<Session, String> {
    let url = warden_oauth::Url::parse(&server.url()).unwrap();
    let fetcher = warden_oauth::Fetcher::for_server(false, &url)
        .unwrap()
        .judging_server_public();
    let agent = Headless::new(warden_oauth::Fetcher::new(false).unwrap(), REDIRECT);
    let oauth = Arc::new(
        OAuthClient::with_fetcher(
            "docs",
            url,
            fetcher,
            ClientSettings::default(),
            Arc::new(MemoryStore::default()),
            Arc::new(agent),
        )
        .unwrap(),
    );
    let remote = remote("docs", &server.url(), oauth);
    match tokio::time::timeout(LIMIT, open(&remote, &ClientProfile::default())).await {
        Ok(Ok((session, _))) => Ok(session),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err("timed out".into()),
    }
}

#[tokio::test]
async fn a_public_server_naming_a_loopback_authorization_server_is_refused() {
    // Positive control: judged public, an honest server whose authorization server is on
    // its own origin signs in.
    let good = AuthServer::start("good");
    let session = connect_as_public(&good).await.unwrap();
    list(&session).await;
    assert_eq!(good.stats()["code_grants"], 1);
    // The protected-resource metadata names an authorization server on 127.0.0.2: refused
    // before its metadata is asked for, with the range named.
    let server = AuthServer::start("private-as");
    let error = connect_as_public(&server).await.err().unwrap();
    assert!(
        error.contains("127.0.0.2")
            && error.contains("loopback")
            && error.contains("is not on such a host"),
        "{error}"
    );
    let stats = server.stats();
    assert_eq!(stats["authorizations"], 0, "{stats}");
    assert_eq!(stats["registrations"], 0, "{stats}");
    // Control: the same server judged by its real (loopback) host may use a loopback
    // authorization server; the attempt then fails only because nothing listens there.
    let error = connect(&server).await.err().unwrap();
    assert!(!error.contains("is not on such a host"), "{error}");
}

#[tokio::test]
async fn a_public_server_whose_token_endpoint_is_on_loopback_gets_no_code() {
    let server = AuthServer::start("private-token");
    let error = connect_as_public(&server).await.err().unwrap();
    assert!(
        error.contains("the token endpoint") && error.contains("is not on such a host"),
        "{error}"
    );
    // The authorization happened (its endpoint is the server's own origin), but the code
    // never left for the loopback address.
    assert_eq!(server.stats()["code_grants"], 0);
}

/// Connects in an attack mode: the error, and the server's counts afterwards.
async fn refused(mode: &str) -> (String, Value) {
    let server = AuthServer::start(mode);
    let error = match connect(&server).await {
        Ok(_) => panic!("{mode}: the client signed in"),
        Err(error) => error,
    };
    (error, server.stats())
}

#[tokio::test]
async fn an_issuer_mix_up_in_the_metadata_is_refused_before_any_authorization() {
    let (error, stats) = refused("mixup").await;
    assert!(error.contains("mix-up"), "{error}");
    assert_eq!(stats["authorizations"], 0, "{stats}");
    assert_eq!(stats["registrations"], 0, "{stats}");
}

#[tokio::test]
async fn an_authorization_response_naming_another_issuer_is_refused() {
    let (error, stats) = refused("iss-wrong").await;
    assert!(
        error.contains("mix-up") && error.contains("evil.example"),
        "{error}"
    );
    assert_eq!(stats["authorizations"], 1, "{stats}");
    assert_eq!(stats["code_grants"], 0, "the code was exchanged: {stats}");
}

#[tokio::test]
async fn resource_metadata_for_another_resource_is_refused() {
    let (error, stats) = refused("resource-mismatch").await;
    assert!(error.contains("not for"), "{error}");
    assert_eq!(stats["authorizations"], 0, "{stats}");
}

#[tokio::test]
async fn a_token_endpoint_redirect_to_another_host_is_not_followed() {
    let (error, stats) = refused("token-redirect").await;
    assert!(
        error.contains("redirected") && error.contains("evil.example"),
        "{error}"
    );
    assert_eq!(stats["authorizations"], 1, "{stats}");
}

#[tokio::test]
async fn an_authorization_redirect_to_another_host_is_not_followed() {
    let (error, stats) = refused("authorize-elsewhere").await;
    assert!(
        error.contains("not to Warden's redirect URI") && error.contains("evil.example"),
        "{error}"
    );
    assert_eq!(stats["code_grants"], 0, "{stats}");
}

#[tokio::test]
async fn a_state_mismatch_is_refused() {
    let (error, stats) = refused("state").await;
    assert!(error.contains("state"), "{error}");
    assert_eq!(stats["code_grants"], 0, "{stats}");
}

#[tokio::test]
async fn a_downgrade_to_plain_pkce_is_refused() {
    let (error, stats) = refused("plain-pkce").await;
    assert!(error.contains("S256"), "{error}");
    assert_eq!(stats["authorizations"], 0, "{stats}");
    assert_eq!(stats["registrations"], 0, "{stats}");
}

#[tokio::test]
async fn a_token_from_one_authorization_server_is_never_offered_to_another_resource() {
    let a = AuthServer::start("good");
    let b = AuthServer::start("good");
    let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
    // Signed in to A as "docs"...
    let at_a = client("docs", &a.url(), store.clone());
    let (session, _) = open(&remote("docs", &a.url(), at_a), &ClientProfile::default())
        .await
        .unwrap();
    list(&session).await;
    assert_eq!(store.load("docs").unwrap().grants.len(), 1);
    // ...then "docs" points at B (another resource, another authorization server): A's
    // token is not sent there; Warden signs in with B instead.
    let at_b = client("docs", &b.url(), store.clone());
    assert!(at_b.current_token().is_none());
    let (session, _) = open(&remote("docs", &b.url(), at_b), &ClientProfile::default())
        .await
        .unwrap();
    list(&session).await;
    let stats = b.stats();
    assert_eq!(stats["foreign"], 0, "A's token reached B: {stats}");
    assert_eq!(stats["code_grants"], 1, "{stats}");
    // Both grants are kept, each under its own issuer and resource.
    let record = store.load("docs").unwrap();
    assert_eq!(record.grants.len(), 2);
    assert!(
        record
            .grants
            .iter()
            .any(|g| g.issuer == a.base && g.resource == a.url())
    );
    assert!(
        record
            .grants
            .iter()
            .any(|g| g.issuer == b.base && g.resource == b.url())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_concurrent_refusals_lead_to_one_refresh() {
    let server = AuthServer::start("good");
    let session = Arc::new(connect(&server).await.unwrap());
    list(&session).await;
    // Every access token issued so far is now refused.
    server.admin("POST", "/admin/expire");
    let calls = (0..100).map(|_| {
        let session = session.clone();
        tokio::spawn(async move {
            let mut params = Map::new();
            params.insert("name".into(), json!("echo"));
            params.insert("arguments".into(), json!({}));
            session.request("tools/call", params, None).await
        })
    });
    let results = tokio::time::timeout(LIMIT, futures::future::join_all(calls))
        .await
        .expect("the calls did not finish");
    for result in results {
        result.unwrap().unwrap(); // every call got through with the new token
    }
    let stats = server.stats();
    assert_eq!(stats["refresh_grants"], 1, "refresh storm: {stats}");
    assert_eq!(stats["code_grants"], 1, "{stats}");
    assert_eq!(stats["authorizations"], 1, "{stats}");
}

/// A raw `GET` (the test acting as the user's browser): the status line and `Location`.
fn browser_get(url: &str) -> (String, Option<String>) {
    let rest = url.trim_start_matches("http://");
    let (address, target) = match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, "/"),
    };
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(LIMIT)).unwrap();
    write!(
        stream,
        "GET {target} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let status = text.lines().next().unwrap_or_default().to_owned();
    let location = text
        .lines()
        .find_map(|line| {
            line.strip_prefix("location: ")
                .or(line.strip_prefix("Location: "))
        })
        .map(str::to_owned);
    (status, location)
}

/// Runs `warden login docs`, plays the browser, and either lets the browser's redirect
/// reach Warden's loopback listener or pastes it on standard input.
fn login(scratch: &support::Scratch, config: &str, paste: bool) -> std::process::Output {
    login_on(scratch, config, paste, None)
}

/// [`login`], with the session bus at `bus` (a private one with a Secret Service).
fn login_on(
    scratch: &support::Scratch,
    config: &str,
    paste: bool,
    bus: Option<&str>,
) -> std::process::Output {
    let mut command = scratch.warden(&["login", "docs", "--no-browser", "--config", config]);
    if let Some(bus) = bus {
        command.env("DBUS_SESSION_BUS_ADDRESS", bus);
    }
    let mut child = command.stdin(Stdio::piped()).spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut url = String::new();
    stdout.read_line(&mut url).unwrap();
    let url = url.trim().to_owned();
    assert!(url.contains("code_challenge_method=S256"), "{url}");
    let (status, location) = browser_get(&url);
    assert!(status.contains("302"), "{status}");
    let location = location.unwrap();
    assert!(location.starts_with("http://127.0.0.1:"), "{location}");
    if paste {
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{location}").unwrap();
    } else {
        let (status, _) = browser_get(&location);
        assert!(status.contains("200"), "{status}");
    }
    let output = support::wait_with_limit(child, LIMIT);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        support::describe(&output)
    );
    output
}

#[test]
fn login_keeps_tokens_in_a_0600_file_only_when_opted_in_and_logout_forgets_them() {
    use std::os::unix::fs::PermissionsExt as _;
    let server = AuthServer::start("good");
    let scratch = support::Scratch::new();
    let config = scratch.config(&format!(
        "[servers.docs]\nurl = \"{}\"\n\n[servers.docs.oauth]\ntoken_store = \"file\"\n",
        server.url()
    ));
    let config = config.to_str().unwrap();
    let tokens = scratch.path().join("state/warden/oauth-tokens.json");
    // Not signed in: `warden tools` (no user agent) says so and goes on.
    let output = scratch.run(&["tools", "--config", config], LIMIT);
    let text = support::stdout(&output);
    assert!(
        text.contains("docs: NEEDS AUTHORIZATION") && text.contains("warden login docs"),
        "{}",
        support::describe(&output)
    );
    assert_eq!(server.stats()["authorizations"], 0);
    // Signed in through the loopback redirect, with no credential store on this session
    // bus: the tokens land in a 0600 file, said loudly.
    let output = login(&scratch, config, false);
    let said = support::stderr(&output);
    assert!(
        said.contains("no credential store") && said.contains("FILE") && said.contains("mode 0600"),
        "{}",
        support::describe(&output)
    );
    let mode = std::fs::metadata(&tokens).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // A later command uses them without asking, and shows the sign-in.
    let output = scratch.run(&["tools", "--config", config], LIMIT);
    let text = support::stdout(&output);
    assert!(
        text.contains("docs: connected") && text.contains("sign-in: signed in with"),
        "{}",
        support::describe(&output)
    );
    assert!(
        !text.contains("at-") && !support::stderr(&output).contains("at-"),
        "a token was printed: {}",
        support::describe(&output)
    );
    assert_eq!(server.stats()["code_grants"], 1);
    // Logged out: forgotten; the next command needs a sign-in again.
    let output = scratch.run(&["logout", "docs", "--config", config], LIMIT);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        support::describe(&output)
    );
    let stored: Value = serde_json::from_slice(&std::fs::read(&tokens).unwrap()).unwrap();
    assert!(stored.get("docs").is_none(), "{stored}");
    let output = scratch.run(&["tools", "--config", config], LIMIT);
    assert!(support::stdout(&output).contains("docs: NEEDS AUTHORIZATION"));
}

#[test]
fn login_accepts_a_pasted_redirect_and_keeps_nothing_without_the_opt_in() {
    let server = AuthServer::start("good");
    let scratch = support::Scratch::new();
    let config = scratch.config(&format!("[servers.docs]\nurl = \"{}\"\n", server.url()));
    let output = login(&scratch, config.to_str().unwrap(), true);
    let said = support::stderr(&output);
    assert!(
        said.contains("NOT kept")
            && said.contains("no credential store")
            && said.contains("token_store = \"file\""),
        "{}",
        support::describe(&output)
    );
    assert_eq!(server.stats()["code_grants"], 1);
    assert!(
        !scratch
            .path()
            .join("state/warden/oauth-tokens.json")
            .exists()
    );
}

/// `warden` with `args`, on the session bus at `bus`.
fn run_on(scratch: &support::Scratch, bus: &str, args: &[&str]) -> std::process::Output {
    let mut command = scratch.warden(args);
    command.env("DBUS_SESSION_BUS_ADDRESS", bus);
    support::run_with_limit(command, LIMIT)
}

#[test]
fn login_keeps_tokens_in_a_real_secret_service_and_logout_forgets_them() {
    let bus = keyring_bus::PrivateBus::with_keyring();
    let server = AuthServer::start("good");
    let scratch = support::Scratch::new();
    // No token_store: the credential store is the default.
    let config = scratch.config(&format!("[servers.docs]\nurl = \"{}\"\n", server.url()));
    let config = config.to_str().unwrap();
    let tokens = scratch.path().join("state/warden/oauth-tokens.json");
    let output = login_on(&scratch, config, false, Some(&bus.address));
    let said = support::stderr(&output);
    assert!(
        said.contains("kept in the operating system's credential store")
            && !said.contains("NOT kept")
            && !said.contains("no credential store"),
        "{}",
        support::describe(&output)
    );
    assert!(!tokens.exists(), "a token file was written");
    // Another command, on the same bus, signs in with what the Secret Service holds.
    let output = run_on(&scratch, &bus.address, &["tools", "--config", config]);
    let text = support::stdout(&output);
    assert!(
        text.contains("docs: connected") && text.contains("sign-in: signed in with"),
        "{}",
        support::describe(&output)
    );
    assert!(
        !text.contains("at-") && !support::stderr(&output).contains("at-"),
        "a token was printed: {}",
        support::describe(&output)
    );
    assert_eq!(server.stats()["code_grants"], 1);
    // Without the bus (no credential store), the same command has no token: it was never
    // anywhere but in the Secret Service.
    let output = scratch.run(&["tools", "--config", config], LIMIT);
    assert!(
        support::stdout(&output).contains("docs: NEEDS AUTHORIZATION"),
        "{}",
        support::describe(&output)
    );
    // Logged out: removed from the Secret Service.
    let output = run_on(
        &scratch,
        &bus.address,
        &["logout", "docs", "--config", config],
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        support::describe(&output)
    );
    assert!(
        support::stderr(&output).contains("removed from the operating system's credential store"),
        "{}",
        support::describe(&output)
    );
    let output = run_on(
        &scratch,
        &bus.address,
        &["logout", "docs", "--config", config],
    );
    assert!(
        support::stderr(&output).contains("nothing was stored"),
        "{}",
        support::describe(&output)
    );
    let output = run_on(&scratch, &bus.address, &["tools", "--config", config]);
    assert!(
        support::stdout(&output).contains("docs: NEEDS AUTHORIZATION"),
        "{}",
        support::describe(&output)
    );
}

#[test]
fn tokens_in_the_old_file_keep_working_and_move_to_the_secret_service() {
    let server = AuthServer::start("good");
    let scratch = support::Scratch::new();
    let config = scratch.config(&format!(
        "[servers.docs]\nurl = \"{}\"\n\n[servers.docs.oauth]\ntoken_store = \"file\"\n",
        server.url()
    ));
    let config = config.to_str().unwrap();
    let tokens = scratch.path().join("state/warden/oauth-tokens.json");
    // Signed in where no credential store answers: the file (opted in).
    login(&scratch, config, true);
    let stored: Value = serde_json::from_slice(&std::fs::read(&tokens).unwrap()).unwrap();
    assert!(stored.get("docs").is_some(), "{stored}");
    // Now a Secret Service answers: the tokens still work, and move there.
    let bus = keyring_bus::PrivateBus::with_keyring();
    let output = run_on(&scratch, &bus.address, &["tools", "--config", config]);
    assert!(
        support::stdout(&output).contains("docs: connected")
            && support::stderr(&output).contains("moved from"),
        "{}",
        support::describe(&output)
    );
    let stored: Value = serde_json::from_slice(&std::fs::read(&tokens).unwrap()).unwrap();
    assert!(stored.get("docs").is_none(), "{stored}");
    let output = run_on(&scratch, &bus.address, &["tools", "--config", config]);
    assert!(
        support::stdout(&output).contains("docs: connected"),
        "{}",
        support::describe(&output)
    );
    assert_eq!(server.stats()["code_grants"], 1);
}

#[test]
fn without_a_secret_service_warden_says_so_promptly_and_goes_on() {
    let server = AuthServer::start("good");
    let scratch = support::Scratch::new();
    let config = scratch.config(&format!("[servers.docs]\nurl = \"{}\"\n", server.url()));
    let config = config.to_str().unwrap();
    // A session bus with nothing on it, and one that accepts and never answers: `warden
    // tools` reports the server as needing a sign-in, says why nothing is kept, and ends.
    let bare = keyring_bus::PrivateBus::bare();
    let silent = keyring_bus::SilentBus::start();
    for bus in [bare.address.as_str(), silent.address.as_str()] {
        let started = std::time::Instant::now();
        let output = run_on(&scratch, bus, &["tools", "--config", config]);
        assert!(started.elapsed() < Duration::from_secs(30), "{bus}");
        let said = support::stderr(&output);
        assert!(
            support::stdout(&output).contains("docs: NEEDS AUTHORIZATION")
                && said.contains("no credential store")
                && said.contains("memory only"),
            "{bus}: {}",
            support::describe(&output)
        );
    }
    assert!(
        !scratch
            .path()
            .join("state/warden/oauth-tokens.json")
            .exists()
    );
}

#[test]
fn a_token_file_other_users_can_read_is_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    // Another local user's trap: a world-readable token file (with made-up tokens) already
    // where Warden would keep them. Warden neither uses nor writes to it.
    let server = AuthServer::start("good");
    let scratch = support::Scratch::new();
    let config = scratch.config(&format!(
        "[servers.docs]\nurl = \"{}\"\n\n[servers.docs.oauth]\ntoken_store = \"file\"\n",
        server.url()
    ));
    let config = config.to_str().unwrap();
    let tokens = scratch.path().join("state/warden/oauth-tokens.json");
    std::fs::create_dir_all(tokens.parent().unwrap()).unwrap();
    std::fs::set_permissions(
        tokens.parent().unwrap(),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    std::fs::write(&tokens, "{}").unwrap();
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o644)).unwrap();
    let output = scratch.run(&["tools", "--config", config], LIMIT);
    let said = support::stderr(&output);
    assert!(said.contains("mode 644"), "{}", support::describe(&output));
    let child = scratch
        .warden(&["login", "docs", "--no-browser", "--config", config])
        .spawn()
        .unwrap();
    let output = support::wait_with_limit(child, LIMIT);
    assert_ne!(
        output.status.code(),
        Some(0),
        "{}",
        support::describe(&output)
    );
    assert!(
        support::stderr(&output).contains("mode 644"),
        "{}",
        support::describe(&output)
    );
    assert_eq!(std::fs::read_to_string(&tokens).unwrap(), "{}");
    assert_eq!(server.stats()["code_grants"], 0);
}

#[tokio::test]
async fn a_token_about_to_expire_is_refreshed_before_it_is_sent() {
    let server = AuthServer::start("short-lived");
    let session = connect(&server).await.unwrap();
    list(&session).await;
    list(&session).await;
    let stats = server.stats();
    // The sign-in's own first request went without a token (the 401 that started it);
    // every later one carried a valid token, refreshed ahead of its 30 s expiry.
    assert_eq!(stats["missing"], 1, "{stats}");
    assert!(stats["refresh_grants"].as_u64().unwrap() >= 1, "{stats}");
    assert_eq!(stats["code_grants"], 1, "{stats}");
}
