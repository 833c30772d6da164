//! `warden serve --http` as an OAuth 2.1 resource server (`[serve.auth]`, decision 0033),
//! end to end: Warden's own authorization test server (`warden-auth-testserver`, the real
//! protocol over loopback: metadata, a key set, introspection) issues the tokens, a real
//! HTTP upstream (`warden-http-testserver`, which logs every `Authorization` it receives)
//! serves the tool. Each attack of seed 001 on this boundary is replayed with raw
//! requests and must be refused with the right status and challenge, next to the honest
//! request that must still work.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use support::Scratch;

const LIMIT: Duration = Duration::from_secs(60);
/// Warden's resource identifier in these tests: the tokens' audience.
const RESOURCE: &str = "https://warden.test/mcp";
const INTROSPECT_SECRET: &str = "introspect-secret";

/// A child process killed when dropped.
struct Proc {
    child: Child,
    first_line: String,
    log: Option<PathBuf>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_testserver(scratch: &Scratch, program: &str, mode: &str, log: Option<&str>) -> Proc {
    let program = support::warden_bin().with_file_name(program);
    assert!(
        program.exists(),
        "{} is missing: build it with `cargo build -p warden-testservers`",
        program.display()
    );
    let log = log.map(|name| scratch.path().join(name));
    let stderr = match &log {
        Some(path) => Stdio::from(std::fs::File::create(path).unwrap()),
        None => Stdio::null(),
    };
    let mut child = Command::new(program)
        .arg(mode)
        .env(support::TAG_VAR, &scratch.tag)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    Proc {
        child,
        first_line: line.trim().to_owned(),
        log,
    }
}

/// One raw HTTP exchange: the status, the headers (lowercased names) and the body.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC message of the body (JSON, or the last SSE `data:` line).
    fn message(&self) -> Value {
        let text = self
            .body
            .lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .next_back()
            .unwrap_or(&self.body);
        serde_json::from_str(text).unwrap_or(Value::Null)
    }
}

fn exchange(addr: &str, method: &str, path: &str, headers: &[(&str, String)], body: &str) -> Reply {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// An authorization test server.
struct Issuer(Proc);

impl Issuer {
    fn start(scratch: &Scratch) -> Issuer {
        Issuer(start_testserver(
            scratch,
            "warden-auth-testserver",
            "good",
            None,
        ))
    }

    fn base(&self) -> &str {
        &self.0.first_line
    }

    fn addr(&self) -> &str {
        self.base().trim_start_matches("http://")
    }

    /// A token with `claims` (over the defaults: this issuer, Warden's audience, `alice`,
    /// valid for five minutes, scope `mcp:tools`), signed as `sign` says.
    fn mint(&self, sign: &str, claims: Value) -> String {
        let mut all = json!({"iss": self.base(), "aud": RESOURCE, "sub": "alice",
                             "client_id": "test-client", "exp": now() + 300,
                             "scope": "mcp:tools"});
        for (key, value) in claims.as_object().unwrap() {
            if value.is_null() {
                all.as_object_mut().unwrap().remove(key);
            } else {
                all[key] = value.clone();
            }
        }
        let body = json!({"sign": sign, "claims": all}).to_string();
        let reply = exchange(
            self.addr(),
            "POST",
            "/admin/mint",
            &[("Content-Type", "application/json".into())],
            &body,
        );
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.message()["token"].as_str().unwrap().to_owned()
    }

    fn stats(&self) -> Value {
        exchange(self.addr(), "GET", "/admin/stats", &[], "").message()
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The real upstream: an HTTP MCP server that logs every `Authorization` it receives.
fn upstream(scratch: &Scratch) -> Proc {
    start_testserver(
        scratch,
        "warden-http-testserver",
        "good",
        Some("upstream.log"),
    )
}

/// The configuration: the upstream `up`, its `echo` allowed except for the caller
/// `mallory`, and `[serve.auth]` trusting `issuer` (with introspection).
fn config(scratch: &Scratch, upstream: &Proc, issuer: &Issuer, extra: &str) -> PathBuf {
    scratch.config(&format!(
        "[servers.up]\nurl = {url:?}\n\n\
         [[policy.rules]]\ntools = \"up__echo\"\neffect = \"allow\"\n\n\
         [[policy.rules]]\ntools = \"up__echo\"\neffect = \"deny\"\ncaller = \"mallory\"\n\
         note = \"mallory may not echo\"\n\n\
         [serve.auth]\nresource = {RESOURCE:?}\nrequired_scopes = [\"mcp:tools\"]\n{extra}\n\n\
         [[serve.auth.issuers]]\nissuer = {base:?}\n\
         introspection_client_id = \"warden-rs\"\n\
         introspection_secret_env = \"WARDEN_TEST_INTROSPECT\"\n",
        url = upstream.first_line,
        base = issuer.base(),
    ))
}

/// A running `warden serve --http`, stopped when dropped.
struct Served {
    child: Child,
    addr: String,
}

impl Served {
    fn start(scratch: &Scratch, config: &Path) -> Served {
        let mut command = scratch.warden(&["serve", "--config", config.to_str().unwrap()]);
        command
            .args(["--http", "127.0.0.1:0"])
            .env("WARDEN_TEST_INTROSPECT", INTROSPECT_SECRET);
        let mut child = command.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                eprintln!("[warden] {line}");
                if let Some(url) = line.strip_prefix("warden: serving MCP on ")
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(url.to_owned());
                }
            }
        });
        let url = rx
            .recv_timeout(LIMIT)
            .expect("warden serve --http printed no address");
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned();
        Served { child, addr }
    }

    fn post(&self, token: Option<&str>, extra: &[(&str, String)], body: &Value) -> Reply {
        let mut headers = vec![
            ("Content-Type", "application/json".to_owned()),
            ("Accept", "application/json, text/event-stream".to_owned()),
        ];
        if let Some(token) = token {
            headers.push(("Authorization", format!("Bearer {token}")));
        }
        headers.extend(extra.iter().cloned());
        exchange(&self.addr, "POST", "/mcp", &headers, &body.to_string())
    }

    fn initialize(&self, token: Option<&str>) -> Reply {
        self.post(token, &[], &initialize_body())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // SAFETY: kill has no memory preconditions; the pid is our own child's.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn initialize_body() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "oauth-test", "version": "0"}}})
}

fn modern_call(name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": name, "arguments": arguments,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}})
}

fn modern_headers(name: &str) -> Vec<(&'static str, String)> {
    vec![
        ("MCP-Protocol-Version", "2026-07-28".into()),
        ("Mcp-Method", "tools/call".into()),
        ("Mcp-Name", name.into()),
    ]
}

const METADATA_URL: &str = "https://warden.test/.well-known/oauth-protected-resource/mcp";

/// Asserts a 401 with the challenge: `error="invalid_token"` when a token was given.
fn assert_unauthorized(reply: &Reply, token_given: bool, case: &str) {
    assert_eq!(reply.status, 401, "{case}: {}", reply.body);
    let challenge = reply
        .header("www-authenticate")
        .unwrap_or_else(|| panic!("{case}: no WWW-Authenticate"));
    assert!(challenge.starts_with("Bearer "), "{case}: {challenge}");
    assert!(
        challenge.contains(&format!("resource_metadata=\"{METADATA_URL}\"")),
        "{case}: {challenge}"
    );
    assert_eq!(
        challenge.contains("error=\"invalid_token\""),
        token_given,
        "{case}: {challenge}"
    );
}

#[test]
fn tokens_not_meant_for_warden_are_refused_with_the_right_challenge() {
    let scratch = Scratch::new();
    let issuer = Issuer::start(&scratch);
    let other_issuer = Issuer::start(&scratch);
    let upstream = upstream(&scratch);
    let config = config(&scratch, &upstream, &issuer, "");
    let served = Served::start(&scratch, &config);

    // Positive controls: a token for Warden, signed with either published key, works.
    for sign in ["rs256", "es256"] {
        let token = issuer.mint(sign, json!({}));
        let reply = served.initialize(Some(&token));
        assert_eq!(reply.status, 200, "{sign}: {}", reply.body);
        assert!(reply.header("mcp-session-id").is_some());
    }

    // No token: the challenge names the metadata and the scope, without an error.
    let reply = served.initialize(None);
    assert_unauthorized(&reply, false, "no token");
    assert!(
        reply
            .header("www-authenticate")
            .unwrap()
            .contains("scope=\"mcp:tools\"")
    );
    // Another scheme is no token either.
    let reply = served.post(
        None,
        &[("Authorization", "Basic YTpi".into())],
        &initialize_body(),
    );
    assert_unauthorized(&reply, false, "basic");

    let expired = json!({"exp": now() - 3600});
    let not_yet = json!({"nbf": now() + 3600});
    let upstream_audience = json!({"aud": upstream.first_line});
    let their_resource = json!({"aud": format!("{}/mcp", issuer.base())});
    let cases: Vec<(&str, String, &str)> = vec![
        ("malformed", "not.a.jwt!".into(), "not"),
        (
            "garbage JWS",
            "eyJhbGciOiJSUzI1NiJ9.e30.AAAA".into(),
            "issuer",
        ),
        ("alg none", issuer.mint("none", json!({})), "unsigned"),
        (
            "HMAC with the public key as secret",
            issuer.mint("hs256-pubkey", json!({})),
            "shared secret",
        ),
        (
            "signed by another key",
            issuer.mint("other-key", json!({})),
            "signature",
        ),
        (
            "issued by another authorization server",
            other_issuer.mint("rs256", json!({})),
            "not an authorization server Warden trusts",
        ),
        (
            "meant for the upstream server",
            issuer.mint("rs256", upstream_audience),
            "meant for",
        ),
        (
            "meant for the authorization server's own resource",
            issuer.mint("es256", their_resource),
            "meant for",
        ),
        (
            "without an audience",
            issuer.mint("rs256", json!({"aud": null})),
            "no audience",
        ),
        ("expired", issuer.mint("rs256", expired), "expired"),
        (
            "not yet valid",
            issuer.mint("rs256", not_yet),
            "not valid for another",
        ),
        (
            "an opaque token introspection does not know",
            "at-12345".into(),
            "active",
        ),
    ];
    for (case, token, word) in &cases {
        let reply = served.initialize(Some(token));
        assert_unauthorized(&reply, true, case);
        assert!(reply.body.contains(word), "{case}: {}", reply.body);
    }
    // A valid token without the required scope: 403 with the scope to ask for.
    let token = issuer.mint("rs256", json!({"scope": "mcp:read"}));
    let reply = served.initialize(Some(&token));
    assert_eq!(reply.status, 403, "{}", reply.body);
    let challenge = reply.header("www-authenticate").unwrap();
    assert!(
        challenge.contains("error=\"insufficient_scope\""),
        "{challenge}"
    );
    assert!(challenge.contains("scope=\"mcp:tools\""), "{challenge}");
    assert!(challenge.contains(&format!("resource_metadata=\"{METADATA_URL}\"")));
    // Health endpoints are behind the same gate.
    let reply = exchange(&served.addr, "GET", "/readyz", &[], "");
    assert_unauthorized(&reply, false, "readyz");
    // None of the refused requests reached the upstream beyond Warden's own start.
    let log = std::fs::read_to_string(upstream.log.as_ref().unwrap()).unwrap();
    assert!(!log.contains("tools/call"), "{log}");
}

#[test]
fn protected_resource_metadata_is_served_at_both_well_known_forms() {
    let scratch = Scratch::new();
    let issuer = Issuer::start(&scratch);
    let upstream = upstream(&scratch);
    let config = config(&scratch, &upstream, &issuer, "");
    let served = Served::start(&scratch, &config);
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let reply = exchange(&served.addr, "GET", path, &[], "");
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
        let document = reply.message();
        assert_eq!(document["resource"], RESOURCE, "{path}");
        assert_eq!(document["authorization_servers"], json!([issuer.base()]));
        assert_eq!(document["scopes_supported"], json!(["mcp:tools"]));
    }
    // The metadata passes the same Host and Origin checks as everything else.
    let reply = exchange(
        &served.addr,
        "GET",
        "/.well-known/oauth-protected-resource",
        &[("Origin", "https://evil.example".into())],
        "",
    );
    assert_eq!(reply.status, 403, "{}", reply.body);
    // Warden's own client discovers the same document through the 401's challenge.
    let reply = served.initialize(None);
    let challenge = reply.header("www-authenticate").unwrap().to_owned();
    let parsed = warden_oauth::parse_challenge(&challenge).unwrap();
    assert_eq!(parsed.resource_metadata.as_deref(), Some(METADATA_URL));
}

#[test]
fn a_valid_token_reaches_a_real_upstream_without_passing_through_and_the_audit_names_the_caller() {
    let scratch = Scratch::new();
    let issuer = Issuer::start(&scratch);
    let upstream = upstream(&scratch);
    let config = config(&scratch, &upstream, &issuer, "");
    let served = Served::start(&scratch, &config);
    let alice = issuer.mint("rs256", json!({}));

    // 2025-11-25: a session opened with Alice's token, a call through it.
    let reply = served.initialize(Some(&alice));
    assert_eq!(reply.status, 200, "{}", reply.body);
    let session = reply.header("mcp-session-id").unwrap().to_owned();
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                      "params": {"name": "up__echo", "arguments": {"text": "hi"}}});
    let with_session = [("Mcp-Session-Id", session.clone())];
    let reply = served.post(Some(&alice), &with_session, &call);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let result = &reply.message()["result"];
    assert_ne!(result["isError"], json!(true), "{}", reply.body);
    // Her session is not Bob's, though Bob's token is valid.
    let bob = issuer.mint("rs256", json!({"sub": "bob"}));
    let reply = served.post(Some(&bob), &with_session, &call);
    assert_eq!(reply.status, 404, "{}", reply.body);
    // Alice's next token (another scope set) keeps her session.
    let alice_again = issuer.mint("es256", json!({"scope": "mcp:tools extra"}));
    let reply = served.post(Some(&alice_again), &with_session, &call);
    assert_eq!(reply.status, 200, "{}", reply.body);

    // 2026-07-28: a stateless call, per caller.
    let reply = served.post(
        Some(&alice),
        &modern_headers("up__echo"),
        &modern_call("up__echo", json!({"text": "modern"})),
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        reply.message()["result"]["resultType"],
        "complete",
        "{}",
        reply.body
    );

    // The policy sees the caller: `mallory` is denied what Alice may do.
    let mallory = issuer.mint("rs256", json!({"sub": "mallory"}));
    let reply = served.post(
        Some(&mallory),
        &modern_headers("up__echo"),
        &modern_call("up__echo", json!({"text": "no"})),
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
    let result = &reply.message()["result"];
    assert_eq!(result["isError"], json!(true), "{}", reply.body);
    assert!(
        reply.body.contains("mallory may not echo"),
        "{}",
        reply.body
    );

    // No token passthrough: the upstream got the calls, and never an Authorization header.
    let log = std::fs::read_to_string(upstream.log.as_ref().unwrap()).unwrap();
    assert!(log.contains("POST tools/call"), "{log}");
    assert!(!log.to_ascii_lowercase().contains("authorization"), "{log}");
    for token in [&alice, &alice_again, &mallory] {
        assert!(!log.contains(token.as_str()));
    }
    drop(served);

    // The audit log names the caller of each call, and never a token.
    let audit = scratch.run(
        &["audit", "--json", "--config", config.to_str().unwrap()],
        LIMIT,
    );
    let rows = support::json(&audit);
    let rows = rows.as_array().unwrap();
    let clients: Vec<&str> = rows
        .iter()
        .map(|row| row["client"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(rows.len(), 4, "{rows:?}");
    assert!(
        clients[..3]
            .iter()
            .all(|c| c.contains("caller:alice via test-client")),
        "{clients:?}"
    );
    assert!(clients[0].starts_with("oauth-test#"), "{clients:?}");
    assert!(clients[2].starts_with("http:caller:alice"), "{clients:?}");
    assert!(clients[3].contains("caller:mallory"), "{clients:?}");
    assert_eq!(rows[3]["outcome"], "denied");
    let text = support::stdout(&audit);
    assert!(!text.contains(&alice) && !text.contains(&mallory));
}

#[test]
fn opaque_tokens_are_introspected_and_the_answers_cached() {
    let scratch = Scratch::new();
    let issuer = Issuer::start(&scratch);
    let upstream = upstream(&scratch);
    let config = config(&scratch, &upstream, &issuer, "");
    let served = Served::start(&scratch, &config);
    let good = issuer.mint("opaque", json!({}));
    assert!(good.starts_with("opaque-"));
    for _ in 0..5 {
        let reply = served.initialize(Some(&good));
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    // Five requests, one introspection.
    assert_eq!(issuer.stats()["introspections"], 1, "{}", issuer.stats());
    // An active token for another resource, or expired, is refused all the same.
    let foreign = issuer.mint("opaque", json!({"aud": upstream.first_line}));
    assert_unauthorized(&served.initialize(Some(&foreign)), true, "opaque, foreign");
    let expired = issuer.mint("opaque", json!({"exp": now() - 3600}));
    assert_unauthorized(&served.initialize(Some(&expired)), true, "opaque, expired");
    let scopeless = issuer.mint("opaque", json!({"scope": "other"}));
    assert_eq!(served.initialize(Some(&scopeless)).status, 403);
}

#[test]
fn unknown_key_ids_make_warden_read_the_key_set_at_most_once_per_interval() {
    let scratch = Scratch::new();
    let issuer = Issuer::start(&scratch);
    let upstream = upstream(&scratch);
    let config = config(&scratch, &upstream, &issuer, "jwks_refresh = \"60m\"");
    let served = Served::start(&scratch, &config);
    let token = issuer.mint("rs256", json!({}));
    assert_eq!(served.initialize(Some(&token)).status, 200);
    assert_eq!(issuer.stats()["jwks"], 1);
    // Twenty tokens naming made-up key ids: refused, and the set is not read again.
    for i in 0..20 {
        let mut parts: Vec<String> = issuer
            .mint("other-key", json!({}))
            .split('.')
            .map(str::to_owned)
            .collect();
        let header = json!({"alg": "ES256", "kid": format!("made-up-{i}")}).to_string();
        parts[0] = base64_url(header.as_bytes());
        let reply = served.initialize(Some(&parts.join(".")));
        assert_unauthorized(&reply, true, "made-up kid");
    }
    assert_eq!(issuer.stats()["jwks"], 1, "{}", issuer.stats());
    // The honest token still works from the cached set.
    assert_eq!(served.initialize(Some(&token)).status, 200);
}

fn base64_url(bytes: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(TABLE[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// Runs the official Python SDK client (crates/warden/tests/support/gateway_client.py).
fn run_sdk_client(plan: &Value) -> std::process::Output {
    let mut command = Command::new(support::peers_dir().join("venv/bin/python"));
    command
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/gateway_client.py"))
        .arg(plan.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    support::run_with_limit(command, Duration::from_secs(90))
}

#[test]
fn the_python_sdk_client_with_a_token_for_warden_works_in_both_eras_and_without_one_does_not() {
    let scratch = Scratch::new();
    let issuer = Issuer::start(&scratch);
    let upstream = upstream(&scratch);
    let config = config(&scratch, &upstream, &issuer, "");
    let served = Served::start(&scratch, &config);
    let url = format!("http://{}/mcp", served.addr);
    let token = issuer.mint("es256", json!({"sub": "sdk-user"}));
    for mode in ["legacy", "2026-07-28"] {
        let plan = json!({
            "mode": mode, "url": url, "elicit": "none",
            "headers": {"Authorization": format!("Bearer {token}")},
            "steps": [{"list": true}, {"call": "up__echo", "args": {"text": "sdk"}}],
        });
        let output = run_sdk_client(&plan);
        assert!(
            output.status.success(),
            "{mode}: {}",
            support::describe(&output)
        );
        let stdout = String::from_utf8_lossy(&output.stdout);
        let out: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap();
        assert_eq!(out["tools"], json!(["up__echo"]), "{mode}: {out}");
        assert_eq!(out["calls"][0]["isError"], false, "{mode}: {out}");
    }
    // The same client with the upstream's token (wrong audience) gets nowhere.
    let foreign = issuer.mint("es256", json!({"aud": upstream.first_line}));
    let plan = json!({
        "mode": "legacy", "url": url, "elicit": "none",
        "headers": {"Authorization": format!("Bearer {foreign}")},
        "steps": [{"list": true}],
    });
    let output = run_sdk_client(&plan);
    assert!(!output.status.success(), "{}", support::describe(&output));
    let log = std::fs::read_to_string(upstream.log.as_ref().unwrap()).unwrap();
    assert!(!log.to_ascii_lowercase().contains("authorization"), "{log}");
}

#[test]
fn callers_whose_labels_coincide_share_neither_sessions_nor_policy_contexts() {
    let scratch = Scratch::new();
    let issuer = Issuer::start(&scratch);
    let upstream = upstream(&scratch);
    let config = config(&scratch, &upstream, &issuer, "");
    let served = Served::start(&scratch, &config);
    // `mallory` through `test-client` is denied `up__echo`. Another caller, whose subject
    // is "mallory via test-client" and who names no client, is not: both are shown as
    // "caller:mallory via test-client (ISSUER)".
    let mallory = issuer.mint("rs256", json!({"sub": "mallory"}));
    let lookalike = issuer.mint(
        "rs256",
        json!({"sub": "mallory via test-client", "client_id": null}),
    );
    let call = modern_call("up__echo", json!({"text": "modern"}));
    // Control: the lookalike may echo, in a policy context of its own.
    let reply = served.post(Some(&lookalike), &modern_headers("up__echo"), &call);
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_ne!(
        reply.message()["result"]["isError"],
        json!(true),
        "{}",
        reply.body
    );
    // Attack: Mallory's call must not run in the lookalike's context (as the lookalike).
    let reply = served.post(Some(&mallory), &modern_headers("up__echo"), &call);
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        reply.message()["result"]["isError"],
        json!(true),
        "{}",
        reply.body
    );
    assert!(
        reply.body.contains("mallory may not echo"),
        "{}",
        reply.body
    );
    // 2025-11-25: the lookalike's session is not Mallory's (404), and is still its own.
    let reply = served.initialize(Some(&lookalike));
    assert_eq!(reply.status, 200, "{}", reply.body);
    let session = [(
        "Mcp-Session-Id",
        reply.header("mcp-session-id").unwrap().to_owned(),
    )];
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                      "params": {"name": "up__echo", "arguments": {"text": "hi"}}});
    assert_eq!(served.post(Some(&mallory), &session, &call).status, 404);
    let reply = served.post(Some(&lookalike), &session, &call);
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_ne!(
        reply.message()["result"]["isError"],
        json!(true),
        "{}",
        reply.body
    );
}

/// A configuration whose only rule is `rule` (over the upstream `up` and `[serve.auth]`
/// trusting `issuer`, and `https://other.example` when `two_issuers`).
fn config_with_rule(
    scratch: &Scratch,
    upstream: &Proc,
    issuer: &Issuer,
    rule: &str,
    two_issuers: bool,
) -> PathBuf {
    let other = if two_issuers {
        "\n[[serve.auth.issuers]]\nissuer = \"https://other.example\"\n"
    } else {
        ""
    };
    scratch.config(&format!(
        "[servers.up]\nurl = {url:?}\n\n[[policy.rules]]\ntools = \"up__echo\"\n{rule}\n\n\
         [serve.auth]\nresource = {RESOURCE:?}\nrequired_scopes = [\"mcp:tools\"]\n\n\
         [[serve.auth.issuers]]\nissuer = {base:?}\n{other}",
        url = upstream.first_line,
        base = issuer.base(),
    ))
}

#[test]
fn a_client_named_like_a_user_is_not_that_user_and_caller_rules_name_their_issuer() {
    let scratch = Scratch::new();
    let issuer = Issuer::start(&scratch);
    let upstream = upstream(&scratch);
    let rule = format!(
        "effect = \"allow\"\ncaller = \"alice\"\ncaller_issuer = {:?}",
        issuer.base()
    );
    let config = config_with_rule(&scratch, &upstream, &issuer, &rule, false);
    let served = Served::start(&scratch, &config);
    let call = modern_call("up__echo", json!({"text": "modern"}));
    let echo = |token: &str| {
        let reply = served.post(Some(token), &modern_headers("up__echo"), &call);
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply
    };
    // Control: the user alice (through any client) is allowed by the rule.
    let alice = issuer.mint("rs256", json!({}));
    let reply = echo(&alice);
    assert_ne!(
        reply.message()["result"]["isError"],
        json!(true),
        "{}",
        reply.body
    );
    // Attack: a client-credentials token of the client `alice`, without `sub`, is not the
    // user alice: the rule does not allow it (the call is asked for, and no one answers).
    let client_alice = issuer.mint("rs256", json!({"sub": null, "client_id": "alice"}));
    let reply = echo(&client_alice);
    assert_eq!(
        reply.message()["result"]["isError"],
        json!(true),
        "{}",
        reply.body
    );
    drop(served);

    // With two issuers, a caller rule must say whose callers it means.
    let config = config_with_rule(
        &scratch,
        &upstream,
        &issuer,
        "effect = \"deny\"\ncaller = \"mallory\"",
        true,
    );
    let output = scratch.run(
        &[
            "serve",
            "--config",
            config.to_str().unwrap(),
            "--http",
            "127.0.0.1:0",
        ],
        LIMIT,
    );
    assert!(!output.status.success(), "{}", support::describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("needs `caller_issuer`"), "{stderr}");
    // A `caller_issuer` naming no configured issuer (a deny rule that never matches) too.
    let config = config_with_rule(
        &scratch,
        &upstream,
        &issuer,
        "effect = \"deny\"\ncaller = \"mallory\"\ncaller_issuer = \"https://typo.example\"",
        false,
    );
    let output = scratch.run(
        &[
            "serve",
            "--config",
            config.to_str().unwrap(),
            "--http",
            "127.0.0.1:0",
        ],
        LIMIT,
    );
    assert!(!output.status.success(), "{}", support::describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("https://typo.example") && stderr.contains("not an issuer"),
        "{stderr}"
    );
}
