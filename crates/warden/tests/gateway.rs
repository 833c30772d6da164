//! `warden serve` end to end: the official Python SDK client (both eras, stdio and HTTP)
//! in front of real servers through Warden, and the HTTP attacks of seed 001 replayed with
//! raw requests, each next to the honest request that must still work.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Scratch, describe, peers_dir, server_toml, testserver_bin, warden_bin};

/// The policy the tests serve under: `echo` allowed (in a clean context), `add` asked,
/// `fail` denied. The test server is untrusted, so its results taint a context, and a
/// later `echo` (which may write) is asked about.
const POLICY: &str = r#"
[[policy.rules]]
tools = "t__echo"
effect = "allow"

[[policy.rules]]
tools = "t__add"
effect = "ask"

[[policy.rules]]
tools = "t__fail"
effect = "deny"
"#;

fn config(scratch: &Scratch, extra: &str) -> PathBuf {
    let cancel_log = scratch.path().join("cancelled.log");
    let server = server_toml(
        "t",
        &testserver_bin(),
        &[],
        &format!(
            "env = {{ WARDEN_TEST_SLEEP_TOOL = \"1\", WARDEN_TEST_CANCEL_LOG = {:?} }}\n\
             sandbox = {{ write = [{:?}] }}",
            cancel_log.display().to_string(),
            scratch.path().display().to_string()
        ),
    );
    scratch.config(&format!("{server}\n{POLICY}\n{extra}"))
}

fn python() -> PathBuf {
    peers_dir().join("venv/bin/python")
}

fn client_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/gateway_client.py")
}

/// The environment `warden serve` gets from the client (the SDK passes only what it is
/// given, over a minimal default).
fn warden_env(scratch: &Scratch) -> Value {
    json!({
        "XDG_STATE_HOME": scratch.path().join("state"),
        "XDG_CONFIG_HOME": scratch.path().join("config-home"),
        "WARDEN_TEST_TAG": scratch.tag,
        "PATH": std::env::var("PATH").unwrap_or_default(),
        "HOME": std::env::var("HOME").unwrap_or_default(),
    })
}

/// Runs the Python client with `plan` and returns what it printed.
fn run_client(plan: Value) -> Value {
    let mut command = Command::new(python());
    command
        .arg(client_script())
        .arg(plan.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let output = support::run_with_limit(command, Duration::from_secs(90));
    assert!(
        output.status.success(),
        "client failed:\n{}",
        describe(&output)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|error| panic!("{error}:\n{}", describe(&output)))
}

fn stdio_plan(scratch: &Scratch, config: &Path, mode: &str, elicit: &str, steps: Value) -> Value {
    json!({
        "mode": mode,
        "elicit": elicit,
        "stdio": {
            "command": warden_bin(),
            "args": ["serve", "--config", config],
            "env": warden_env(scratch),
            "cwd": scratch.path(),
        },
        "steps": steps,
    })
}

fn the_steps() -> Value {
    json!([
        {"list": true},
        {"call": "t__echo", "args": {"message": "hi"}},
        {"call": "t__fail", "args": {}},
        {"call": "t__add", "args": {"a": 2, "b": 3}},
        {"call": "t__echo", "args": {"message": "again"}},
    ])
}

fn call(out: &Value, index: usize) -> &Value {
    &out["calls"][index]
}

/// What every era must show for [`the_steps`] when nobody can be asked.
fn assert_policy_without_asking(out: &Value) {
    assert_eq!(
        out["tools"],
        json!(["t__echo", "t__add", "t__fail", "t__sleep"]),
        "{out}"
    );
    // Allowed in a clean context: sent, answered.
    assert_eq!(call(out, 0)["isError"], false, "{out}");
    assert_eq!(call(out, 0)["text"], "echo: hi");
    // Denied: refused with the reason, nothing sent.
    assert_eq!(call(out, 1)["isError"], true);
    let denied = call(out, 1)["text"].as_str().unwrap();
    assert!(denied.contains("denies"), "{denied}");
    // Asked, and nobody to ask: a refusal the model can read, with what, why and how.
    assert_eq!(call(out, 2)["isError"], true);
    let refused = call(out, 2)["text"].as_str().unwrap();
    assert!(refused.contains("did not run `t__add`"), "{refused}");
    assert!(refused.contains("nothing was sent"), "{refused}");
    assert!(refused.contains("warden call t__add"), "{refused}");
    assert!(refused.contains("\"a\": 2"), "{refused}");
    // The echo result made this client's context untrusted: the same echo is now asked.
    assert_eq!(call(out, 3)["isError"], true, "{out}");
    let tainted = call(out, 3)["text"].as_str().unwrap();
    assert!(tainted.contains("did not run `t__echo`"), "{tainted}");
}

#[test]
fn stdio_legacy_client_gets_the_catalogue_and_the_policy() {
    let scratch = Scratch::new();
    let config = config(&scratch, "");
    let out = run_client(stdio_plan(&scratch, &config, "legacy", "none", the_steps()));
    assert_eq!(out["protocol"], "2025-11-25");
    assert_policy_without_asking(&out);
    assert!(out["asked"].as_array().unwrap().is_empty());
    // Audit rows name the client (the SDK's self-description) and the front end.
    let audit = scratch.run(
        &["audit", "--json", "--config", config.to_str().unwrap()],
        Duration::from_secs(30),
    );
    let rows = support::json(&audit);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 4, "{rows:?}");
    for row in rows {
        assert_eq!(row["front_end"], "serve", "{row}");
        let client = row["client"].as_str().unwrap();
        assert!(!client.is_empty(), "{row}");
    }
    let outcomes: Vec<&str> = rows
        .iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["ok", "denied", "not_approved", "not_approved"]);
    scratch.assert_no_leftovers();
}

#[test]
fn stdio_modern_client_gets_the_same_decisions() {
    let scratch = Scratch::new();
    let config = config(&scratch, "");
    let out = run_client(stdio_plan(
        &scratch,
        &config,
        "2026-07-28",
        "none",
        the_steps(),
    ));
    assert_eq!(out["protocol"], "2026-07-28");
    assert_policy_without_asking(&out);
    // A dual-era client's probe (server/discover) finds the modern era.
    let out = run_client(stdio_plan(
        &scratch,
        &config,
        "auto",
        "none",
        json!([{"list": true}]),
    ));
    assert_eq!(out["protocol"], "2026-07-28");
    scratch.assert_no_leftovers();
}

#[test]
fn an_ask_is_put_to_the_client_as_an_elicitation_in_both_eras() {
    let scratch = Scratch::new();
    let config = config(&scratch, "");
    let steps = json!([{"call": "t__add", "args": {"a": 2, "b": 3}}]);
    for mode in ["legacy", "2026-07-28"] {
        let out = run_client(stdio_plan(
            &scratch,
            &config,
            mode,
            "approve",
            steps.clone(),
        ));
        assert_eq!(call(&out, 0)["isError"], false, "{mode}: {out}");
        assert_eq!(
            call(&out, 0)["structured"],
            json!({"sum": 5}),
            "{mode}: {out}"
        );
        let asked = out["asked"][0].as_str().unwrap();
        assert!(
            asked.contains("t__add") && asked.contains("\"b\": 3"),
            "{asked}"
        );
        // The person says no: refused, nothing sent.
        let out = run_client(stdio_plan(
            &scratch,
            &config,
            mode,
            "decline",
            steps.clone(),
        ));
        assert_eq!(call(&out, 0)["isError"], true, "{mode}: {out}");
        let text = call(&out, 0)["text"].as_str().unwrap();
        assert!(text.contains("did not approve"), "{mode}: {text}");
    }
    scratch.assert_no_leftovers();
}

#[test]
fn only_mode_serves_one_real_server_under_its_own_names() {
    let scratch = Scratch::new();
    let venv = peers_dir().join("venv/bin");
    // A Python server, confined, on a loaded machine: more than the default 10 s to start.
    let time = server_toml(
        "time",
        &venv.join("mcp-server-time"),
        &["--local-timezone", "UTC"],
        "timeout = { connect = \"60s\" }",
    );
    let config = scratch.config(&format!(
        "{time}\n{}\n[[policy.rules]]\ntools = \"time__*\"\neffect = \"allow\"\n",
        server_toml("t", &testserver_bin(), &[], "")
    ));
    let steps = json!([
        {"list": true},
        {"call": "get_current_time", "args": {"timezone": "Europe/Paris"}},
    ]);
    let mut plan = stdio_plan(&scratch, &config, "legacy", "none", steps);
    plan["stdio"]["args"] = json!(["serve", "--config", config, "--only", "time"]);
    let out = run_client(plan);
    let tools: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(tools.contains(&"get_current_time"), "{tools:?}");
    assert!(
        !tools.iter().any(|t| t.contains("__") || *t == "echo"),
        "{tools:?}"
    );
    assert_eq!(call(&out, 0)["isError"], false, "{out}");
    assert!(
        call(&out, 0)["text"]
            .as_str()
            .unwrap()
            .contains("Europe/Paris")
    );
    scratch.assert_no_leftovers();
}

/// A running `warden serve --http`, stopped (and its servers with it) when dropped.
struct Served {
    child: Child,
    addr: String,
    url: String,
}

impl Served {
    fn start(scratch: &Scratch, config: &Path, extra: &[&str], env: &[(&str, &str)]) -> Served {
        let mut command = scratch.warden(&["serve", "--config", config.to_str().unwrap()]);
        command.args(["--http", "127.0.0.1:0"]).args(extra);
        for (name, value) in env {
            command.env(name, value);
        }
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
            .recv_timeout(Duration::from_secs(60))
            .expect("warden serve --http printed no address");
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned();
        Served { child, addr, url }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // SIGTERM: Warden stops accepting and stops its servers.
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

fn exchange(addr: &str, head: &str, body: &str) -> Reply {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let request = format!(
        "{head}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
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
    // Chunked bodies: keep only the lines that carry data.
    Reply {
        status,
        headers,
        body: body.to_owned(),
    }
}

struct Post<'a> {
    host: String,
    extra: Vec<(&'a str, String)>,
}

impl<'a> Post<'a> {
    fn to(served: &Served) -> Post<'a> {
        Post {
            host: served.addr.clone(),
            extra: Vec::new(),
        }
    }

    fn with(mut self, name: &'a str, value: impl Into<String>) -> Post<'a> {
        self.extra.push((name, value.into()));
        self
    }

    fn send(&self, served: &Served, body: &Value) -> Reply {
        self.send_text(served, &body.to_string())
    }

    fn send_text(&self, served: &Served, body: &str) -> Reply {
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\n",
            self.host
        );
        for (name, value) in &self.extra {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        exchange(&served.addr, &head, body)
    }
}

fn initialize_body() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "0"}}})
}

fn list_body() -> Value {
    json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
}

#[test]
fn http_clients_in_both_eras_share_one_host_with_separate_contexts() {
    let scratch = Scratch::new();
    let config = config(&scratch, "");
    let served = Served::start(&scratch, &config, &[], &[]);
    for mode in ["legacy", "2026-07-28"] {
        let plan = json!({"mode": mode, "url": served.url, "elicit": "none", "steps": the_steps()});
        let out = run_client(plan);
        assert_eq!(out["protocol"], mode.replace("legacy", "2025-11-25"));
        assert_policy_without_asking(&out);
    }
    // A second legacy session is a clean context of its own: its first echo is allowed,
    // though the first session's context is tainted.
    let plan = json!({"mode": "legacy", "url": served.url, "elicit": "approve",
                      "steps": [{"call": "t__echo", "args": {"message": "fresh"}},
                                {"call": "t__add", "args": {"a": 1, "b": 1}}]});
    let out = run_client(plan);
    assert_eq!(call(&out, 0)["text"], "echo: fresh", "{out}");
    // Over HTTP, the approval elicitation travels on the call's stream and comes back.
    assert_eq!(call(&out, 1)["structured"], json!({"sum": 2}), "{out}");
    drop(served);
    scratch.assert_no_leftovers();
}

/// A 2025-11-25 call whose first message is its answer is answered as plain JSON (the
/// client accepts both; decision 0053). A call still running after a keep-alive interval
/// (2 s) opens the call's stream, which carries keep-alives until the answer. (An
/// answer preceded by a question on the stream: the approval above, through the SDK.)
#[test]
fn a_legacy_http_call_answered_at_once_is_plain_json() {
    let scratch = Scratch::new();
    let server = server_toml(
        "t",
        &testserver_bin(),
        &[],
        "env = { WARDEN_TEST_SLEEP_TOOL = \"1\" }",
    );
    let config = scratch.config(&format!(
        "{server}\n[[policy.rules]]\ntools = \"t__*\"\neffect = \"allow\"\n\
         even_if_tainted = true\neven_if_private = true\n"
    ));
    let served = Served::start(&scratch, &config, &[], &[]);
    let opened = Post::to(&served).send(&served, &initialize_body());
    let session = opened.header("mcp-session-id").unwrap().to_owned();
    let in_session = || Post::to(&served).with("Mcp-Session-Id", session.clone());
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(in_session().send(&served, &initialized).status, 202);
    // The long call first, in a clean context.
    let sleep = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                       "params": {"name": "t__sleep", "arguments": {"ms": 5000}}});
    let reply = in_session().send(&served, &sleep);
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        reply.header("content-type"),
        Some("text/event-stream"),
        "{}",
        reply.body
    );
    assert!(reply.body.contains(": keep-alive"), "{}", reply.body);
    assert_eq!(reply.message()["id"], 4, "{}", reply.body);
    assert!(reply.message()["result"].is_object(), "{}", reply.body);
    let echo = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                      "params": {"name": "t__echo", "arguments": {"message": "hi"}}});
    let reply = in_session().send(&served, &echo);
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        reply.header("content-type"),
        Some("application/json"),
        "{}",
        reply.body
    );
    let answer: Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(answer["id"], 3);
    assert_eq!(
        answer["result"]["content"][0]["text"], "echo: hi",
        "{answer}"
    );
    drop(served);
    scratch.assert_no_leftovers();
}

#[test]
fn hostile_origin_and_rebinding_host_get_403_before_anything_runs() {
    let scratch = Scratch::new();
    let config = config(&scratch, "");
    let served = Served::start(&scratch, &config, &[], &[]);
    // The honest request first: a session is opened.
    let reply = Post::to(&served).send(&served, &initialize_body());
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.header("mcp-session-id").is_some());
    // A page on another site (a browser sends its Origin): refused, no session.
    let reply = Post::to(&served)
        .with("Origin", "https://evil.example")
        .send(&served, &initialize_body());
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert!(reply.header("mcp-session-id").is_none());
    // DNS rebinding: the attacker's name resolves to 127.0.0.1; the Host header keeps it.
    let mut rebound = Post::to(&served);
    rebound.host = format!(
        "rebind.evil.example:{}",
        served.addr.rsplit(':').next().unwrap()
    );
    let reply = rebound.send(&served, &initialize_body());
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert!(reply.header("mcp-session-id").is_none());
    // A loopback page (a local inspector) is allowed.
    let reply = Post::to(&served)
        .with("Origin", "http://localhost:6274")
        .send(&served, &initialize_body());
    assert_eq!(reply.status, 200, "{}", reply.body);
}

#[test]
fn sessions_belong_to_their_token_and_die_with_delete() {
    let scratch = Scratch::new();
    let config = config(&scratch, "");
    let alice = "alice-token-0123456789abcdef";
    let bob = "bob-token-0123456789abcdefgh";
    let served = Served::start(
        &scratch,
        &config,
        &["--token-env", "ALICE_TOKEN", "--token-env", "BOB_TOKEN"],
        &[("ALICE_TOKEN", alice), ("BOB_TOKEN", bob)],
    );
    // No token, a wrong token: 401.
    let reply = Post::to(&served).send(&served, &initialize_body());
    assert_eq!(reply.status, 401, "{}", reply.body);
    let reply = Post::to(&served)
        .with("Authorization", "Bearer alice-token-0123456789abcdeX")
        .send(&served, &initialize_body());
    assert_eq!(reply.status, 401);
    let as_alice = || Post::to(&served).with("Authorization", format!("Bearer {alice}"));
    let as_bob = || Post::to(&served).with("Authorization", format!("Bearer {bob}"));
    let reply = as_alice().send(&served, &initialize_body());
    assert_eq!(reply.status, 200, "{}", reply.body);
    let session = reply.header("mcp-session-id").unwrap().to_owned();
    assert!(session.len() >= 32 && session.chars().all(|c| c.is_ascii_hexdigit()));
    // Alice's session works for Alice...
    let reply = as_alice()
        .with("Mcp-Session-Id", session.clone())
        .send(&served, &list_body());
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.body.contains("t__echo"));
    // ...and is unknown to Bob, who holds a valid token of his own.
    let reply = as_bob()
        .with("Mcp-Session-Id", session.clone())
        .send(&served, &list_body());
    assert_eq!(reply.status, 404, "{}", reply.body);
    // A made-up id is unknown too; a missing one is a bad request.
    let reply = as_alice()
        .with("Mcp-Session-Id", "0".repeat(64))
        .send(&served, &list_body());
    assert_eq!(reply.status, 404);
    let reply = as_alice().send(&served, &list_body());
    assert_eq!(reply.status, 400);
    // Bob cannot end Alice's session; Alice can, and then it is gone for good.
    let delete = |token: &str| {
        exchange(
            &served.addr,
            &format!(
                "DELETE /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\
                 Mcp-Session-Id: {session}\r\n",
                served.addr
            ),
            "",
        )
    };
    assert_eq!(delete(bob).status, 404);
    assert_eq!(delete(alice).status, 200);
    let reply = as_alice()
        .with("Mcp-Session-Id", session.clone())
        .send(&served, &list_body());
    assert_eq!(
        reply.status, 404,
        "a replayed request after the session ended"
    );
}

#[test]
fn oversized_bodies_and_slow_headers_are_cut_off() {
    let scratch = Scratch::new();
    let config = config(
        &scratch,
        "[serve]\nmax_body_bytes = 4096\nheader_timeout = \"1s\"\n",
    );
    let served = Served::start(&scratch, &config, &[], &[]);
    let padding = "x".repeat(8192);
    let mut big = initialize_body();
    big["params"]["padding"] = json!(padding);
    let reply = Post::to(&served).send(&served, &big);
    assert_eq!(reply.status, 413, "{}", reply.body);
    // The control: the same request without padding.
    let reply = Post::to(&served).send(&served, &initialize_body());
    assert_eq!(reply.status, 200);
    // Slow-loris: headers trickle in and never end; the connection is closed after the
    // header timeout, and other clients are served meanwhile.
    let mut slow = TcpStream::connect(&served.addr).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let started = Instant::now();
    slow.write_all(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\n")
        .unwrap();
    let writer = {
        let mut slow = slow.try_clone().unwrap();
        std::thread::spawn(move || {
            for _ in 0..20 {
                std::thread::sleep(Duration::from_millis(300));
                if slow.write_all(b"X-Slow: 1\r\n").is_err() {
                    return;
                }
            }
        })
    };
    let reply = Post::to(&served).send(&served, &initialize_body());
    assert_eq!(reply.status, 200);
    let mut rest = Vec::new();
    let _ = slow.read_to_end(&mut rest);
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(5),
        "the slow client was kept for {waited:?}"
    );
    let _ = writer.join();
}

fn modern_call(name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": name, "arguments": arguments,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}})
}

#[test]
fn modern_headers_must_agree_with_the_body() {
    let scratch = Scratch::new();
    let config = config(&scratch, "");
    let served = Served::start(&scratch, &config, &[], &[]);
    let body = modern_call("t__echo", json!({"message": "m"}));
    let honest = || {
        Post::to(&served)
            .with("MCP-Protocol-Version", "2026-07-28")
            .with("Mcp-Method", "tools/call")
    };
    let reply = honest().with("Mcp-Name", "t__echo").send(&served, &body);
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.message()["result"]["resultType"], "complete");
    assert_eq!(reply.message()["result"]["content"][0]["text"], "echo: m");
    // The header routes to one tool, the body calls another.
    let reply = honest().with("Mcp-Name", "t__add").send(&served, &body);
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.message()["error"]["code"], -32020);
    // The method header lies.
    let reply = Post::to(&served)
        .with("MCP-Protocol-Version", "2026-07-28")
        .with("Mcp-Method", "tools/list")
        .with("Mcp-Name", "t__echo")
        .send(&served, &body);
    assert_eq!(reply.message()["error"]["code"], -32020, "{}", reply.body);
    // No Mcp-Name at all.
    let reply = honest().send(&served, &body);
    assert_eq!(reply.message()["error"]["code"], -32020, "{}", reply.body);
    // A version not served: -32022 naming what is.
    let mut old = body.clone();
    old["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2027-01-01");
    let reply = Post::to(&served)
        .with("MCP-Protocol-Version", "2027-01-01")
        .with("Mcp-Method", "tools/call")
        .with("Mcp-Name", "t__echo")
        .send(&served, &old);
    assert_eq!(reply.status, 400);
    assert_eq!(reply.message()["error"]["code"], -32022, "{}", reply.body);
    assert_eq!(
        reply.message()["error"]["data"]["supported"],
        json!(["2026-07-28"])
    );
    // An unknown method: 404 with -32601.
    let mut unknown = body.clone();
    unknown["method"] = json!("tools/frobnicate");
    let reply = Post::to(&served)
        .with("MCP-Protocol-Version", "2026-07-28")
        .with("Mcp-Method", "tools/frobnicate")
        .send(&served, &unknown);
    assert_eq!(reply.status, 404, "{}", reply.body);
    assert_eq!(reply.message()["error"]["code"], -32601);
}

#[test]
fn closing_a_modern_request_stream_cancels_the_call_upstream() {
    let scratch = Scratch::new();
    // A server that never answers tools/call, and records every cancellation it receives.
    let cancel_log = scratch.path().join("cancelled.log");
    let server = server_toml(
        "h",
        &testserver_bin(),
        &["hang-on-call"],
        &format!(
            "env = {{ WARDEN_TEST_CANCEL_LOG = {:?} }}\nsandbox = {{ write = [{:?}] }}",
            cancel_log.display().to_string(),
            scratch.path().display().to_string()
        ),
    );
    let config = scratch.config(&format!(
        "{server}\n[[policy.rules]]\ntools = \"h__echo\"\neffect = \"allow\"\n"
    ));
    let served = Served::start(&scratch, &config, &[], &[]);
    let body = modern_call("h__echo", json!({"message": "wait"})).to_string();
    let mut stream = TcpStream::connect(&served.addr).unwrap();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: h__echo\r\nContent-Length: {}\r\n\r\n{body}",
        served.addr,
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    // The call is in flight upstream; nothing was said yet, so no answer has begun (its
    // form waits for the call's first message).
    std::thread::sleep(Duration::from_millis(1000));
    stream.set_nonblocking(true).unwrap();
    let mut nothing = [0u8; 1];
    assert!(
        stream.read(&mut nothing).is_err(),
        "no answer may begin before the call says something"
    );
    assert!(!std::fs::read_to_string(&cancel_log).is_ok_and(|t| t.contains("cancelled")));
    drop(stream);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if std::fs::read_to_string(&cancel_log).is_ok_and(|text| text.contains("cancelled")) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the upstream server never saw a cancellation");
}

#[test]
fn print_client_config_writes_a_snippet_for_each_client() {
    let scratch = Scratch::new();
    let config = config(&scratch, "");
    let config_arg = config.to_str().unwrap();
    let out = scratch.run(
        &[
            "serve",
            "--config",
            config_arg,
            "--print-client-config",
            "claude-code",
        ],
        Duration::from_secs(20),
    );
    let value = support::json(&out);
    let entry = &value["mcpServers"]["warden"];
    assert_eq!(entry["command"], warden_bin().display().to_string());
    assert_eq!(entry["args"], json!(["serve", "--config", config_arg]));
    let out = scratch.run(
        &[
            "serve",
            "--http",
            "127.0.0.1:8765",
            "--print-client-config",
            "vscode",
        ],
        Duration::from_secs(20),
    );
    assert_eq!(
        support::json(&out)["servers"]["warden"],
        json!({"type": "http", "url": "http://127.0.0.1:8765/mcp"})
    );
}

/// A config with one test server `t` in `mode` (which changes its tools after the first
/// call and says so), everything of `t` allowed in a clean context.
fn live_config(scratch: &Scratch, mode: &str) -> PathBuf {
    let server = server_toml("t", &testserver_bin(), &[mode], "");
    scratch.config(&format!(
        "{server}\n[[policy.rules]]\ntools = \"t__*\"\neffect = \"allow\"\n"
    ))
}

fn live_steps(listen: bool) -> Value {
    let mut steps = vec![json!({"list": true})];
    if listen {
        steps.push(json!({"listen": true}));
    }
    steps.extend([
        // The first call makes the server change its list and notify.
        json!({"call": "t__echo", "args": {"message": "hi"}}),
        json!({"wait_changed": 20}),
        json!({"list": true}),
        json!({"call": "t__echo", "args": {"message": "again"}}),
    ]);
    Value::Array(steps)
}

#[test]
fn an_upstream_list_change_is_reviewed_then_announced_in_both_eras() {
    // The last: a 2026-07-28 server that announces its change only on a listen, which
    // Warden keeps open for it from the start (nothing is subscribed).
    for (mode, listen, server) in [
        ("legacy", false, "list-change"),
        ("2026-07-28", true, "list-change"),
        ("legacy", false, "modern-list-change"),
    ] {
        let scratch = Scratch::new();
        let config = live_config(&scratch, server);
        let out = run_client(stdio_plan(
            &scratch,
            &config,
            mode,
            "none",
            live_steps(listen),
        ));
        assert_eq!(
            out["lists"][0],
            json!(["t__echo", "t__add", "t__fail"]),
            "{mode}, {server}: {out}"
        );
        assert_eq!(
            out["changes"],
            json!([true]),
            "{mode}, {server}: announced: {out}"
        );
        // `fail` is gone; `extra`, new to a server whose definitions are pinned, is held
        // back until reviewed (`warden approve t`), not served.
        assert_eq!(
            out["lists"][1],
            json!(["t__echo", "t__add"]),
            "{mode}: {out}"
        );
        if listen {
            assert_eq!(out["honored"], true, "{out}");
        }
        scratch.assert_no_leftovers();
    }
}

#[test]
fn a_redefined_tool_is_withdrawn_not_served_unreviewed() {
    let scratch = Scratch::new();
    let config = live_config(&scratch, "redefine");
    let out = run_client(stdio_plan(
        &scratch,
        &config,
        "legacy",
        "none",
        live_steps(false),
    ));
    assert_eq!(out["calls"][0]["text"], "echo: hi", "{out}");
    assert_eq!(out["changes"], json!([true]), "{out}");
    // The changed `echo` is neither listed nor callable; the unchanged tools still are
    // (the positive control).
    assert_eq!(out["lists"][1], json!(["t__add", "t__fail"]), "{out}");
    let refused = &out["calls"][1];
    assert!(
        refused["error"]
            .as_str()
            .is_some_and(|e| e.contains("Unknown tool")),
        "{out}"
    );
    scratch.assert_no_leftovers();
}

/// Opens `GET /mcp` with `headers` and reads the stream until `needle` appears or
/// `within` passes; returns the status line and everything read.
fn read_stream(addr: &str, headers: &str, needle: &str, within: Duration) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let request =
        format!("GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n{headers}\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let deadline = Instant::now() + within;
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    while Instant::now() < deadline {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => seen.extend_from_slice(&buffer[..n]),
            Err(_) => {}
        }
        if String::from_utf8_lossy(&seen).contains(needle) {
            break;
        }
    }
    String::from_utf8_lossy(&seen).into_owned()
}

#[test]
fn http_sessions_hear_list_changes_on_their_get_stream_and_resume_with_last_event_id() {
    let scratch = Scratch::new();
    let config = live_config(&scratch, "list-change");
    let served = Served::start(&scratch, &config, &[], &[]);
    let reply = Post::to(&served).send(&served, &initialize_body());
    let session = reply.header("mcp-session-id").unwrap().to_owned();
    let with_session = || Post::to(&served).with("Mcp-Session-Id", session.clone());
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(with_session().send(&served, &initialized).status, 202);
    // Negative controls: without a session a GET is refused (405: 2026-07-28 clients use
    // subscriptions/listen), and another session id is unknown (404).
    let head = read_stream(&served.addr, "", "\r\n\r\n", Duration::from_secs(5));
    assert!(head.starts_with("HTTP/1.1 405"), "{head}");
    let unknown = format!("Mcp-Session-Id: {}\r\n", "0".repeat(64));
    let head = read_stream(&served.addr, &unknown, "\r\n\r\n", Duration::from_secs(5));
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    // The session's stream, open while the server changes its list.
    let mine = format!("Mcp-Session-Id: {session}\r\n");
    let listening = {
        let (addr, mine) = (served.addr.clone(), mine.clone());
        std::thread::spawn(move || {
            read_stream(
                &addr,
                &mine,
                "notifications/tools/list_changed",
                Duration::from_secs(30),
            )
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                      "params": {"name": "t__echo", "arguments": {"message": "hi"}}});
    let reply = with_session().send(&served, &call);
    assert_eq!(reply.message()["result"]["content"][0]["text"], "echo: hi");
    let heard = listening.join().unwrap();
    assert!(heard.starts_with("HTTP/1.1 200"), "{heard}");
    assert!(
        // The id names the tool, resource and prompt list generations.
        heard.contains("id: 1.0.0\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}"),
        "{heard}"
    );
    // The list it then reads is the reviewed one: `fail` gone, the new `extra` held back.
    let listed = with_session().send(&served, &list_body()).message();
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["t__echo", "t__add"], "{listed}");
    // A client that reconnects behind the current generation is told at once; one that
    // saw the last notice is not told again (a bare number, as the first version of the
    // stream numbered its events, is the tool generation).
    let behind = format!("{mine}Last-Event-ID: 0.0.0\r\n");
    let heard = read_stream(
        &served.addr,
        &behind,
        "notifications/tools/list_changed",
        Duration::from_secs(10),
    );
    assert!(heard.contains("id: 1.0.0\n"), "{heard}");
    let current = format!("{mine}Last-Event-ID: 1\r\n");
    let heard = read_stream(
        &served.addr,
        &current,
        "notifications/tools/list_changed",
        Duration::from_secs(3),
    );
    assert!(heard.starts_with("HTTP/1.1 200"), "{heard}");
    assert!(!heard.contains("list_changed"), "{heard}");
    drop(served);
    scratch.assert_no_leftovers();
}

#[test]
fn a_modern_http_client_hears_list_changes_on_subscriptions_listen() {
    let scratch = Scratch::new();
    let config = live_config(&scratch, "list-change");
    let served = Served::start(&scratch, &config, &[], &[]);
    let plan = json!({"mode": "2026-07-28", "url": served.url, "elicit": "none",
                      "steps": live_steps(true)});
    let out = run_client(plan);
    assert_eq!(out["honored"], true, "{out}");
    assert_eq!(out["changes"], json!([true]), "{out}");
    assert_eq!(out["lists"][1], json!(["t__echo", "t__add"]), "{out}");
    drop(served);
    scratch.assert_no_leftovers();
}

fn get(served: &Served, path: &str, host: &str) -> Reply {
    exchange(
        &served.addr,
        &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n"),
        "",
    )
}

/// [`get`] with an `Authorization` header (a gateway that requires tokens).
fn get_with(served: &Served, path: &str, authorization: &str) -> Reply {
    exchange(
        &served.addr,
        &format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: {authorization}\r\n",
            served.addr
        ),
        "",
    )
}

#[test]
fn health_and_readiness_answer_behind_the_same_gate() {
    let scratch = Scratch::new();
    let config = config(&scratch, "");
    let served = Served::start(&scratch, &config, &[], &[]);
    let live = get(&served, "/healthz", &served.addr);
    assert_eq!(
        (live.status, live.body.trim()),
        (200, "ok"),
        "{}",
        live.body
    );
    let ready = get(&served, "/readyz", &served.addr);
    assert_eq!(ready.status, 200, "{}", ready.body);
    let body: Value = serde_json::from_str(&ready.body).unwrap();
    assert_eq!(body["ready"], true);
    assert_eq!(body["servers"]["t"], "connected", "{body}");
    // A rebinding Host gets 403 here too: nothing answers before the gate.
    let rebound = get(&served, "/readyz", "evil.example:80");
    assert_eq!(rebound.status, 403, "{}", rebound.body);
    drop(served);
    scratch.assert_no_leftovers();
}

#[test]
fn a_stop_finishes_the_call_in_flight_then_stops_every_server() {
    let scratch = Scratch::new();
    let server = server_toml(
        "t",
        &testserver_bin(),
        &[],
        "env = { WARDEN_TEST_SLEEP_TOOL = \"1\" }",
    );
    let config = scratch.config(&format!(
        "{server}\n[[policy.rules]]\ntools = \"t__*\"\neffect = \"allow\"\n"
    ));
    let mut served = Served::start(&scratch, &config, &[], &[]);
    let (addr, host) = (served.addr.clone(), served.addr.clone());
    let call = std::thread::spawn(move || {
        // Longer than the 2 s a stop used to wait for its last calls.
        let body = modern_call("t__sleep", json!({"ms": 4000})).to_string();
        exchange(
            &addr,
            &format!(
                "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
                 Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
                 Mcp-Method: tools/call\r\nMcp-Name: t__sleep\r\n"
            ),
            &body,
        )
    });
    std::thread::sleep(Duration::from_millis(500));
    // SIGTERM while the call runs upstream.
    // SAFETY: kill has no memory preconditions; the pid is our own child's.
    unsafe {
        libc::kill(served.child.id() as i32, libc::SIGTERM);
    }
    let reply = call.join().unwrap();
    assert_eq!(reply.status, 200, "{}", reply.body);
    let result = &reply.message()["result"];
    assert_eq!(result["isError"], Value::Null, "{}", reply.body);
    assert_eq!(
        result["content"][0]["text"], "slept 4000 ms",
        "the call ran to its end: {}",
        reply.body
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = served.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "warden serve did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    // Nothing new is accepted once stopped.
    assert!(TcpStream::connect(&served.addr).is_err());
    // No server process outlives the gateway.
    scratch.assert_no_leftovers();
}

#[test]
fn a_client_past_its_rate_is_refused_with_a_clear_error_and_others_are_not() {
    let scratch = Scratch::new();
    let config = config(
        &scratch,
        "[serve]\nrequests_per_second = 1\nrequest_burst = 3\n",
    );
    let served = Served::start(&scratch, &config, &[], &[]);
    let open = || {
        let reply = Post::to(&served).send(&served, &initialize_body());
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.header("mcp-session-id").unwrap().to_owned()
    };
    let first = open();
    let list = |session: &str| {
        Post::to(&served)
            .with("Mcp-Session-Id", session.to_owned())
            .send(&served, &list_body())
    };
    for _ in 0..3 {
        assert_eq!(list(&first).status, 200);
    }
    let refused = list(&first);
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert!(refused.header("retry-after").is_some());
    let message = refused.message()["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(message.contains("rate limit"), "{message}");
    assert!(message.contains("requests_per_second"), "{message}");
    // Another client (a session of its own) is not held back by the first one's flood.
    let second = open();
    assert_eq!(list(&second).status, 200);
    // The first client gets requests back as time passes.
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(list(&first).status, 200);
    drop(served);
    scratch.assert_no_leftovers();
}

// Resources, prompts and completion (issue 11): server-everything's, through the gateway.

/// The test server `t` (tools only, under [`POLICY`], its results labelled trusted) and
/// server-everything (resources, templates, prompts, completion), with `extra` (a
/// `[serve]` table, a hide rule).
fn everything_config(scratch: &Scratch, extra: &str) -> PathBuf {
    let everything = server_toml(
        "everything",
        "node".as_ref(),
        &[&support::node_server("server-everything"), "stdio"],
        "timeout = { connect = \"60s\" }",
    );
    // `t`'s own results are declared trusted and public, so only what server-everything
    // says can taint a context here; `t` stays untrusted for its annotations (its echo
    // may write).
    let t_labels = "[policy.servers.t]\nintegrity = \"trusted\"\nconfidentiality = \"public\"\n";
    config(scratch, &format!("{everything}\n{t_labels}\n{extra}"))
}

const DYNAMIC_TEXT: &str = "demo://resource/dynamic/text/{resourceId}";

fn offered_steps() -> Value {
    json!([
        // A clean context: the allowed echo runs.
        {"call": "t__echo", "args": {"message": "before"}},
        {"offered": true},
        // Listing does not taint: the echo still runs.
        {"call": "t__echo", "args": {"message": "after listing"}},
        {"read": "demo://resource/static/document/features.md"},
        // What the resource said is in this client's context now: the echo is asked.
        {"call": "t__echo", "args": {"message": "after reading"}},
        {"prompt": "everything__simple-prompt"},
        {"prompt": "everything__completable-prompt", "args": {"department": "Sales", "name": "Eve"}},
        // And so is what the prompts said.
        {"call": "t__echo", "args": {"message": "after prompts"}},
        {"read": "demo://resource/dynamic/text/7"},
        {"read": "demo://nowhere/at/all"},
        // Completion values are server text too (labelled; see
        // `upstream_errors_and_completions_taint_the_context`).
        {"complete": {"prompt": "everything__completable-prompt"}, "argument": {"name": "department", "value": "Eng"}},
        {"complete": {"template": DYNAMIC_TEXT}, "argument": {"name": "resourceId", "value": "1"}},
    ])
}

/// What every era and transport must show for [`offered_steps`].
fn assert_offered(out: &Value) {
    let capabilities = &out["capabilities"];
    assert!(capabilities.get("resources").is_some(), "{out}");
    assert!(capabilities.get("prompts").is_some(), "{out}");
    assert!(capabilities.get("completions").is_some(), "{out}");
    // Resources keep their URIs; their names say where they come from.
    let resources = out["resources"].as_array().unwrap();
    let features = resources
        .iter()
        .find(|r| r["uri"] == "demo://resource/static/document/features.md")
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(features["name"], "everything__features.md");
    assert!(
        out["resources_pages"].as_u64().unwrap() > 1,
        "several pages: {out}"
    );
    let templates: Vec<&str> = out["templates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["uriTemplate"].as_str().unwrap())
        .collect();
    assert!(templates.contains(&DYNAMIC_TEXT), "{out}");
    // Prompts are named like tools.
    let prompts: Vec<&str> = out["prompt_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert!(prompts.contains(&"everything__simple-prompt"), "{out}");
    assert!(prompts.contains(&"everything__completable-prompt"), "{out}");
    assert_eq!(
        out["prompts"][0]["texts"][0], "This is a simple prompt without arguments.",
        "{out}"
    );
    assert_eq!(
        out["prompts"][1]["texts"][0], "Please promote Eve to the head of the Sales team.",
        "{out}"
    );
    assert_eq!(
        out["completions"][0]["values"],
        json!(["Engineering"]),
        "{out}"
    );
    assert!(
        out["completions"][1]["values"].is_array(),
        "a template's completion is answered: {out}"
    );
    let features = out["reads"][0]["texts"][0].as_str().unwrap_or_default();
    assert!(!features.is_empty(), "{out}");
    let dynamic = out["reads"][1]["texts"][0].as_str().unwrap_or_default();
    assert!(dynamic.contains('7'), "routed by its template: {out}");
    assert!(
        out["reads"][2]["error"]
            .as_str()
            .is_some_and(|e| !e.is_empty()),
        "{out}"
    );
    // The echo ran twice in a clean context, then the resource tainted it, then the
    // prompts added to that.
    assert_eq!(call(out, 0)["isError"], false, "{out}");
    assert_eq!(call(out, 1)["isError"], false, "listing tainted: {out}");
    assert_eq!(call(out, 2)["isError"], true, "{out}");
    let asked = call(out, 2)["text"].as_str().unwrap();
    assert!(asked.contains("did not run `t__echo`"), "{asked}");
    assert!(
        asked.contains("text from demo://resource/static/document/features.md"),
        "{asked}"
    );
    let asked = call(out, 3)["text"].as_str().unwrap();
    assert!(
        asked.contains("text from everything__completable-prompt"),
        "{asked}"
    );
}

const SMALL_PAGES: &str = "[serve]\npage_size = 3\n";

#[test]
fn resources_prompts_and_completion_over_stdio_in_both_eras() {
    for mode in ["legacy", "2026-07-28"] {
        let scratch = Scratch::new();
        let config = everything_config(&scratch, SMALL_PAGES);
        let out = run_client(stdio_plan(&scratch, &config, mode, "none", offered_steps()));
        assert_offered(&out);
        scratch.assert_no_leftovers();
    }
}

#[test]
fn resources_prompts_and_completion_over_http_in_both_eras() {
    let scratch = Scratch::new();
    let config = everything_config(&scratch, SMALL_PAGES);
    let served = Served::start(&scratch, &config, &[], &[]);
    for mode in ["legacy", "2026-07-28"] {
        let out = run_client(json!({
            "mode": mode,
            "url": served.url,
            "elicit": "none",
            "steps": offered_steps(),
        }));
        assert_offered(&out);
    }
    drop(served);
    scratch.assert_no_leftovers();
}

/// An upstream's error text from `resources/read` and `prompts/get`, and the values of a
/// completion, are server text reaching the client: each is labelled into the client's
/// context as a failed tool call's text is, so a later side-effect call is asked about.
/// The positive control is the first echo of each run (clean context: it runs).
#[test]
fn upstream_errors_and_completions_taint_the_context() {
    let scratch = Scratch::new();
    let config = everything_config(&scratch, "");
    let runs = [
        (
            json!({"read": "demo://nowhere/at/all"}),
            "reads",
            "text from demo://nowhere/at/all",
        ),
        (
            json!({"prompt": "everything__completable-prompt", "args": {"nobody": "x"}}),
            "prompts",
            "text from everything__completable-prompt",
        ),
        (
            json!({"complete": {"prompt": "everything__completable-prompt"}, "argument": {"name": "department", "value": "Eng"}}),
            "completions",
            "text from everything__completable-prompt",
        ),
    ];
    for (step, key, source) in runs {
        let steps = json!([
            {"call": "t__echo", "args": {"message": "before"}},
            step,
            {"call": "t__echo", "args": {"message": "after"}},
        ]);
        let out = run_client(stdio_plan(&scratch, &config, "legacy", "none", steps));
        assert_eq!(call(&out, 0)["isError"], false, "{out}");
        if key == "completions" {
            assert_eq!(out[key][0]["values"], json!(["Engineering"]), "{out}");
        } else {
            assert!(out[key][0]["error"].is_string(), "the step fails: {out}");
        }
        assert_eq!(call(&out, 1)["isError"], true, "{out}");
        let asked = call(&out, 1)["text"].as_str().unwrap();
        assert!(asked.contains("did not run `t__echo`"), "{asked}");
        assert!(asked.contains(source), "{asked}");
    }
    scratch.assert_no_leftovers();
}

/// A server the policy hides entirely shows no resources, prompts or completion: not
/// listed, not declared, not readable by URI. The positive control is the same server
/// unhidden in the tests above.
#[test]
fn a_hidden_server_shows_no_resources_or_prompts() {
    let scratch = Scratch::new();
    let config = everything_config(
        &scratch,
        "[[policy.rules]]\ntools = \"everything__*\"\neffect = \"hide\"\n",
    );
    let steps = json!([
        {"offered": true},
        {"read": "demo://resource/static/document/features.md"},
        {"prompt": "everything__simple-prompt"},
        {"call": "t__echo", "args": {"message": "still served"}},
    ]);
    let out = run_client(stdio_plan(&scratch, &config, "legacy", "none", steps));
    let capabilities = &out["capabilities"];
    assert!(capabilities.get("resources").is_none(), "{out}");
    assert!(capabilities.get("prompts").is_none(), "{out}");
    assert!(capabilities.get("completions").is_none(), "{out}");
    assert_eq!(out["resources"], json!([]), "{out}");
    assert_eq!(out["templates"], json!([]), "{out}");
    assert_eq!(out["prompt_list"], json!([]), "{out}");
    assert!(out["reads"][0]["error"].is_string(), "{out}");
    assert!(out["prompts"][0]["error"].is_string(), "{out}");
    // The other server is served as before.
    assert_eq!(call(&out, 0)["isError"], false, "{out}");
    scratch.assert_no_leftovers();
}

/// A server that lists, as its own resource, a URI another server's template matches does
/// not take the read: a URI claimed by more than one server (listing or template alike) is
/// refused with an error naming both, and nothing is read from either. The positive control:
/// a URI only the honest server's template matches is read from it as before.
#[test]
fn a_uri_claimed_by_two_servers_is_refused_naming_both() {
    let scratch = Scratch::new();
    let honest = server_toml("honest", &testserver_bin(), &["conformance"], "");
    let claimant = server_toml("claimant", &testserver_bin(), &["uri-claimant"], "");
    let config = config(&scratch, &format!("{honest}\n{claimant}"));
    let steps = json!([
        {"read": "test://template/8/data"},
        {"read": "test://template/7/data"},
    ]);
    for mode in ["legacy", "2026-07-28"] {
        let out = run_client(stdio_plan(&scratch, &config, mode, "none", steps.clone()));
        let honest_read = out["reads"][0]["texts"][0].as_str().unwrap_or_default();
        assert!(honest_read.contains("Data for ID: 8"), "{out}");
        let refused = &out["reads"][1];
        assert!(
            refused.get("texts").is_none(),
            "the claimant took the read: {out}"
        );
        let error = refused["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("more than one server")
                && error.contains("claimant")
                && error.contains("honest"),
            "{out}"
        );
    }
    scratch.assert_no_leftovers();
}

/// `/metrics` counts what the gateway did, with bounded labels, behind the same gate: a
/// rebinding Host gets 403 there too (and is counted as a refusal); a made-up method is
/// counted as `other`, never under its own name.
#[test]
fn metrics_count_requests_and_refusals_behind_the_gate() {
    let scratch = Scratch::new();
    let config = config(&scratch, "");
    let served = Served::start(&scratch, &config, &[], &[]);
    let opened = Post::to(&served).send(&served, &initialize_body());
    assert_eq!(opened.status, 200, "{}", opened.body);
    let session = opened.header("mcp-session-id").unwrap().to_owned();
    let in_session = Post::to(&served).with("Mcp-Session-Id", session.clone());
    let listed = in_session.send(&served, &list_body());
    assert_eq!(listed.status, 200, "{}", listed.body);
    let made_up = json!({"jsonrpc": "2.0", "id": 3, "method": "x-secret-tool-name/argh"});
    let refused = in_session.send(&served, &made_up);
    assert_eq!(refused.status, 200, "{}", refused.body);
    let call = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                      "params": {"name": "t__echo", "arguments": {"message": "counted"}}});
    let called = in_session.send(&served, &call);
    assert_eq!(called.status, 200, "{}", called.body);
    let rebound = get(&served, "/metrics", "evil.example:80");
    assert_eq!(rebound.status, 403, "{}", rebound.body);
    let metrics = get(&served, "/metrics", &served.addr);
    assert_eq!(metrics.status, 200, "{}", metrics.body);
    let text = &metrics.body;
    for line in [
        "warden_requests_total{method=\"initialize\",outcome=\"ok\"} 1",
        "warden_requests_total{method=\"tools/list\",outcome=\"ok\"} 1",
        "warden_requests_total{method=\"tools/call\",outcome=\"ok\"} 1",
        "warden_requests_total{method=\"other\",outcome=\"error\"} 1",
        "warden_upstream_calls_total{server=\"t\",outcome=\"ok\"} 1",
        "warden_upstream_call_duration_seconds_count{server=\"t\"} 1",
        "warden_refusals_total{reason=\"forbidden\"} 1",
        "warden_open_sessions 1",
        "# TYPE warden_request_duration_seconds histogram",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    assert!(!text.contains("x-secret"), "{text}");
    assert!(!text.contains(&session), "{text}");
    drop(served);
    scratch.assert_no_leftovers();
}

/// Refusals at the request-slot and stateless-client caps are counted once each in
/// `/metrics`, in both eras: a legacy session's second request while its one slot is busy
/// (it was counted twice), a modern client's (it was not counted), and a modern client
/// past `max_sessions` (not counted). The positive control: the busy calls finish.
#[test]
fn metrics_count_each_cap_refusal_once_in_both_eras() {
    let scratch = Scratch::new();
    let server = server_toml(
        "t",
        &testserver_bin(),
        &[],
        "env = { WARDEN_TEST_SLEEP_TOOL = \"1\" }",
    );
    let config = scratch.config(&format!(
        "{server}\n[[policy.rules]]\ntools = \"t__*\"\neffect = \"allow\"\n\n\
         [serve]\nmax_in_flight_per_client = 1\nmax_sessions = 1\n"
    ));
    let alice = "alice-token-0123456789abcdef";
    let bob = "bob-token-0123456789abcdefgh";
    let served = Served::start(
        &scratch,
        &config,
        &["--token-env", "ALICE_TOKEN", "--token-env", "BOB_TOKEN"],
        &[("ALICE_TOKEN", alice), ("BOB_TOKEN", bob)],
    );
    let bearer = |token: &str| format!("Bearer {token}");
    let as_alice = || Post::to(&served).with("Authorization", bearer(alice));
    let opened = as_alice().send(&served, &initialize_body());
    assert_eq!(opened.status, 200, "{}", opened.body);
    let session = opened.header("mcp-session-id").unwrap().to_owned();
    let in_session = || as_alice().with("Mcp-Session-Id", session.clone());
    let modern = |post: Post<'static>| {
        post.with("MCP-Protocol-Version", "2026-07-28")
            .with("Mcp-Method", "tools/call")
    };
    let refusals = |reason: &str| {
        let text = get_with(&served, "/metrics", &bearer(alice)).body;
        let prefix = format!("warden_refusals_total{{reason=\"{reason}\"}} ");
        text.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .map_or(0, |count| count.parse::<u64>().unwrap())
    };
    let sleep = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                       "params": {"name": "t__sleep", "arguments": {"ms": 3000}}});
    std::thread::scope(|scope| {
        let legacy_busy = scope.spawn(|| in_session().send(&served, &sleep));
        let modern_busy = scope.spawn(|| {
            modern(Post::to(&served).with("Authorization", bearer(alice)))
                .with("Mcp-Name", "t__sleep")
                .send(&served, &modern_call("t__sleep", json!({"ms": 3000})))
        });
        std::thread::sleep(Duration::from_millis(1000));
        // The legacy session's one slot is busy: 429, counted once.
        let refused = in_session().send(&served, &list_body());
        assert_eq!(refused.status, 429, "{}", refused.body);
        assert_eq!(refusals("in_flight"), 1);
        // The modern client's one slot is busy: 429, counted.
        let echo = modern_call("t__echo", json!({"message": "hi"}));
        let refused = modern(Post::to(&served).with("Authorization", bearer(alice)))
            .with("Mcp-Name", "t__echo")
            .send(&served, &echo);
        assert_eq!(refused.status, 429, "{}", refused.body);
        assert_eq!(refusals("in_flight"), 2);
        // A second stateless client past `max_sessions`: 503, counted.
        let refused = modern(Post::to(&served).with("Authorization", bearer(bob)))
            .with("Mcp-Name", "t__echo")
            .send(&served, &echo);
        assert_eq!(refused.status, 503, "{}", refused.body);
        assert_eq!(refusals("sessions"), 1);
        for busy in [legacy_busy, modern_busy] {
            let reply = busy.join().unwrap();
            assert_eq!(reply.status, 200, "{}", reply.body);
            assert!(reply.body.contains("slept 3000 ms"), "{}", reply.body);
        }
    });
    assert_eq!(refusals("in_flight"), 2);
    drop(served);
    scratch.assert_no_leftovers();
}

/// A remote (HTTP) upstream's tool list change reaches the gateway's clients: an inner
/// `warden serve --http` fronts the `list-change` test server, and an outer `warden serve`
/// (stdio, the Python SDK client in front) has the inner one as a remote server, once in
/// each era: 2025-11-25 (the session's GET stream) and 2026-07-28
/// (`subscriptions/listen`). Before this, the outer gateway never heard of the change.
#[test]
fn a_remote_servers_list_change_reaches_gateway_clients() {
    for era in ["legacy", "modern"] {
        let inner_scratch = Scratch::new();
        let inner_config = live_config(&inner_scratch, "list-change");
        let inner = Served::start(&inner_scratch, &inner_config, &[], &[]);
        let scratch = Scratch::new();
        let config = scratch.config(&format!(
            "[servers.in]\nurl = {:?}\nera = {era:?}\n\
             [[policy.rules]]\ntools = \"in__*\"\neffect = \"allow\"\n",
            inner.url
        ));
        let steps = json!([
            {"list": true},
            // The inner test server changes its list at its first call, and says so.
            {"call": "in__t__echo", "args": {"message": "hi"}},
            {"wait_changed": 20},
            {"list": true},
        ]);
        let out = run_client(stdio_plan(&scratch, &config, "legacy", "none", steps));
        assert_eq!(
            out["lists"][0],
            json!(["in__t__echo", "in__t__add", "in__t__fail"]),
            "{era}: {out}"
        );
        assert_eq!(call(&out, 0)["isError"], false, "{era}: {out}");
        assert_eq!(out["changes"], json!([true]), "{era}: announced: {out}");
        assert_eq!(
            out["lists"][1],
            json!(["in__t__echo", "in__t__add"]),
            "{era}: {out}"
        );
        drop(inner);
        inner_scratch.assert_no_leftovers();
        scratch.assert_no_leftovers();
    }
}

// Resource subscriptions and resource/prompt list changes (decision 0039).

/// A `live-resources` test server `live` (its lists and subscriptions counted in
/// `counts.log`), every tool of it allowed in a clean context, with `extra`.
fn relay_config(scratch: &Scratch, extra: &str) -> PathBuf {
    let counts = scratch.path().join("counts.log");
    let live = server_toml(
        "live",
        &testserver_bin(),
        &["live-resources"],
        &format!(
            "env = {{ WARDEN_TEST_COUNT_LOG = {:?} }}\nsandbox = {{ write = [{:?}] }}",
            counts.display().to_string(),
            scratch.path().display().to_string()
        ),
    );
    scratch.config(&format!(
        "{live}\n[[policy.rules]]\ntools = \"live__*\"\neffect = \"allow\"\n{extra}"
    ))
}

/// The lines of the live server's `counts.log` (its list requests and subscriptions).
fn counted(scratch: &Scratch) -> Vec<String> {
    std::fs::read_to_string(scratch.path().join("counts.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The URIs of the `notifications/resources/updated` a client heard, sorted, each once.
fn updated_uris(out: &Value) -> Vec<String> {
    let mut uris: Vec<String> = out["notices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|notice| notice[0] == "notifications/resources/updated")
        .map(|notice| notice[1].as_str().unwrap_or_default().to_owned())
        .collect();
    uris.sort();
    uris.dedup();
    uris
}

/// Runs the client `plan` on a thread of its own.
fn run_client_later(plan: Value) -> std::thread::JoinHandle<Value> {
    std::thread::spawn(move || run_client(plan))
}

/// Waits until `path` exists (a client's sign that it is ready), at most `within`.
fn wait_for_file(path: &Path, within: Duration) {
    let deadline = Instant::now() + within;
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Three clients of one gateway subscribe to resources of the same upstream server: each
/// hears the updates of its own resources and never another's (the upstream connection is
/// shared, so the upstream announces all of them on it), a resource nobody subscribed to
/// reaches nobody, and a session's subscriptions end upstream when the session ends. A
/// 2025-11-25 session subscribes with `resources/subscribe` and hears on its GET stream; a
/// 2026-07-28 client subscribes on its `subscriptions/listen` stream. The positive control
/// is each client hearing its own resource.
#[test]
fn updates_reach_exactly_their_subscribers_and_end_with_the_session() {
    let scratch = Scratch::new();
    let config = relay_config(&scratch, "");
    let served = Served::start(&scratch, &config, &[], &[]);
    let ready = scratch.path().join("modern-listening");
    let modern = run_client_later(json!({
        "mode": "2026-07-28", "url": served.url, "elicit": "none",
        "steps": [
            {"listen": true, "resources": ["live://b"]},
            {"write_file": ready},
            {"wait_notice": "notifications/resources/updated", "seconds": 30},
            {"sleep": 2},
        ],
    }));
    wait_for_file(&ready, Duration::from_secs(60));
    let legacy = run_client(json!({
        "mode": "legacy", "url": served.url, "elicit": "none",
        "steps": [
            {"subscribe": "live://a"},
            // The upstream announces all three; only the subscribers of each hear it.
            {"call": "live__touch", "args": {"uris": ["live://a", "live://b", "live://c"]}},
            {"wait_notice": "notifications/resources/updated", "seconds": 30},
            {"sleep": 2},
        ],
    }));
    let modern = modern.join().unwrap();
    assert_eq!(
        legacy["capabilities"]["resources"]["subscribe"], true,
        "{legacy}"
    );
    assert_eq!(legacy["subscriptions"][0]["ok"], true, "{legacy}");
    assert_eq!(updated_uris(&legacy), vec!["live://a"], "{legacy}");
    assert_eq!(
        modern["honored_filter"]["resourceSubscriptions"],
        json!(["live://b"]),
        "{modern}"
    );
    assert_eq!(updated_uris(&modern), vec!["live://b"], "{modern}");
    // Both clients are gone (the session deleted, the listen stream closed): their
    // subscriptions end upstream within a tick or two.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let lines = counted(&scratch);
        let ended = ["live://a", "live://b"]
            .iter()
            .all(|uri| lines.contains(&format!("resources/unsubscribe {uri}")));
        if ended {
            assert!(
                lines.contains(&"resources/subscribe live://a".to_owned()),
                "{lines:?}"
            );
            assert!(
                lines.contains(&"resources/subscribe live://b".to_owned()),
                "{lines:?}"
            );
            assert!(
                !lines.iter().any(|line| line.contains("live://c")),
                "nobody subscribed to c: {lines:?}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "not unsubscribed: {lines:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(served);
    scratch.assert_no_leftovers();
}

/// A server the policy hides takes no subscription: a client subscribing to its resource
/// is refused and the server never hears of it (nor is `resources.subscribe` declared).
/// The positive control is the same server unhidden: the subscription reaches it.
#[test]
fn a_hidden_servers_resource_cannot_be_subscribed() {
    for hidden in [true, false] {
        let scratch = Scratch::new();
        let hide = if hidden {
            "[[policy.rules]]\ntools = \"live__*\"\neffect = \"hide\"\n"
        } else {
            ""
        };
        // A second server keeps the gateway offering something either way.
        let t = server_toml("t", &testserver_bin(), &[], "");
        let config = relay_config(&scratch, &format!("{t}\n{hide}"));
        for mode in ["legacy", "2026-07-28"] {
            let steps = if mode == "legacy" {
                json!([{"subscribe": "live://a"}])
            } else {
                json!([{"listen": true, "resources": ["live://a"]}])
            };
            let out = run_client(stdio_plan(&scratch, &config, mode, "none", steps));
            let subscribed = counted(&scratch).contains(&"resources/subscribe live://a".to_owned());
            if hidden {
                assert!(out["capabilities"].get("resources").is_none(), "{out}");
                if mode == "legacy" {
                    assert!(out["subscriptions"][0]["error"].is_string(), "{out}");
                } else {
                    assert!(
                        out["honored_filter"].get("resourceSubscriptions").is_none(),
                        "{out}"
                    );
                }
                assert!(!subscribed, "the hidden server heard of it: {out}");
            } else {
                assert_eq!(out["capabilities"]["resources"]["subscribe"], true, "{out}");
                if mode == "legacy" {
                    assert_eq!(out["subscriptions"][0]["ok"], true, "{out}");
                } else {
                    assert_eq!(
                        out["honored_filter"]["resourceSubscriptions"],
                        json!(["live://a"]),
                        "{out}"
                    );
                }
                assert!(subscribed, "{out}");
            }
        }
        scratch.assert_no_leftovers();
    }
}

/// An upstream's `notifications/resources/list_changed` and `prompts/list_changed` are
/// consumed, the lists read again, and only then announced to clients, in both eras; the
/// lists read afterwards show the change.
#[test]
fn resource_and_prompt_list_changes_are_relayed_in_both_eras() {
    for mode in ["legacy", "2026-07-28"] {
        let scratch = Scratch::new();
        let config = relay_config(&scratch, "");
        let mut steps = vec![json!({"offered": true})];
        if mode != "legacy" {
            steps.push(json!({"listen": true, "lists": true}));
        }
        steps.extend([
            json!({"call": "live__change_lists", "args": {}}),
            json!({"wait_notice": "notifications/resources/list_changed", "seconds": 20}),
            json!({"wait_notice": "notifications/prompts/list_changed", "seconds": 20}),
            json!({"offered": true}),
        ]);
        let out = run_client(stdio_plan(
            &scratch,
            &config,
            mode,
            "none",
            Value::Array(steps),
        ));
        assert_eq!(
            out["capabilities"]["resources"]["listChanged"], true,
            "{out}"
        );
        assert_eq!(out["capabilities"]["prompts"]["listChanged"], true, "{out}");
        assert_eq!(out["waited"], json!([true, true]), "{mode}: {out}");
        let uris: Vec<&str> = out["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["uri"].as_str().unwrap())
            .collect();
        assert_eq!(uris, ["live://a", "live://b", "live://c"], "{out}");
        assert_eq!(
            out["prompt_list"],
            json!(["live__live", "live__extra"]),
            "{out}"
        );
        scratch.assert_no_leftovers();
    }
}

/// A 2026-07-28 request of `method` with `params` (the `_meta` added), as raw HTTP with the
/// headers that must agree with it.
fn modern_post(
    served: &Served,
    id: u64,
    method: &str,
    mut params: Value,
    name: Option<&str>,
) -> Reply {
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                             "io.modelcontextprotocol/clientCapabilities": {}});
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let mut post = Post::to(served)
        .with("MCP-Protocol-Version", "2026-07-28")
        .with("Mcp-Method", method.to_owned());
    if let Some(name) = name {
        post = post.with("Mcp-Name", name.to_owned());
    }
    post.send(served, &body)
}

/// Concurrent first pages of a list, and concurrent reads of URIs nobody lists, read the
/// upstream's lists once between them, not once per request (decision 0035's bound: at
/// most once per 5 s per list). The live server counts the list requests it receives. The
/// positive control: a first page after the 5 s have passed reads the list again, so the
/// count is live.
#[test]
fn concurrent_first_pages_and_unknown_uris_read_each_upstream_once() {
    let scratch = Scratch::new();
    let config = relay_config(&scratch, "");
    let served = Served::start(&scratch, &config, &[], &[]);
    let lists = |lines: &[String], method: &str| lines.iter().filter(|l| *l == method).count();
    std::thread::scope(|threads| {
        let served = &served;
        let mut running = Vec::new();
        for n in 0..8u64 {
            running.push(threads.spawn(move || {
                let uri = format!("live://nowhere/{n}");
                let reply =
                    modern_post(served, n, "resources/read", json!({"uri": uri}), Some(&uri));
                assert_eq!(reply.message()["error"]["code"], -32602, "{}", reply.body);
            }));
            running.push(threads.spawn(move || {
                let reply = modern_post(served, 100 + n, "resources/list", json!({}), None);
                let listed = reply.message()["result"]["resources"]
                    .as_array()
                    .map(Vec::len);
                assert_eq!(listed, Some(2), "{}", reply.body);
            }));
        }
        for thread in running {
            thread.join().unwrap();
        }
    });
    let lines = counted(&scratch);
    assert_eq!(lists(&lines, "resources/list"), 1, "{lines:?}");
    assert_eq!(lists(&lines, "resources/templates/list"), 1, "{lines:?}");
    std::thread::sleep(Duration::from_millis(5500));
    let reply = modern_post(&served, 200, "resources/list", json!({}), None);
    assert!(
        reply.message()["result"]["resources"].is_array(),
        "{}",
        reply.body
    );
    let lines = counted(&scratch);
    assert_eq!(
        lists(&lines, "resources/list"),
        2,
        "read again after 5 s: {lines:?}"
    );
    drop(served);
    scratch.assert_no_leftovers();
}

/// One slow upstream does not hold an aggregated list beyond its own deadline: its whole
/// read (every page, each of which is within its call timeout) is bounded by that timeout,
/// the other server's resources are served, and the first page names the slow server. The
/// positive control is the fast server's resources in the same list.
#[test]
fn a_slow_upstream_is_left_out_of_a_list_at_its_deadline_and_named() {
    let scratch = Scratch::new();
    let slow = server_toml(
        "slow",
        &testserver_bin(),
        &["live-resources"],
        "env = { WARDEN_TEST_LIST_DELAY_MS = \"900\" }\ntimeout = { call = \"1500ms\" }",
    );
    let config = relay_config(&scratch, &slow);
    let served = Served::start(&scratch, &config, &[], &[]);
    let started = Instant::now();
    let reply = modern_post(&served, 1, "resources/list", json!({}), None);
    let took = started.elapsed();
    let result = &reply.message()["result"];
    let names: Vec<&str> = result["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", reply.body))
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["live__a", "live__b"], "{}", reply.body);
    let left_out = &result["_meta"]["dev.warden/leftOut"];
    assert_eq!(left_out[0]["server"], "slow", "{}", reply.body);
    assert!(
        left_out[0]["reason"].as_str().unwrap().contains("1.5"),
        "{}",
        reply.body
    );
    assert!(took < Duration::from_millis(2700), "held for {took:?}");
    drop(served);
    scratch.assert_no_leftovers();
}

/// Resource reads and prompt fetches through the gateway are audit rows, written by the
/// host's one audit writer: each names the client, the server it went to and what was
/// asked (`resources/read URI`, `prompts/get NAME`), with a typed outcome: `ok` when the
/// server answered, `failed` when it answered with an error, `invalid_arguments` when no
/// server served here claims it (nothing was sent).
#[test]
fn resource_reads_and_prompt_gets_are_audit_rows() {
    let scratch = Scratch::new();
    let config = relay_config(&scratch, "");
    let steps = json!([
        {"read": "live://a"},
        {"read": "live://missing"},
        {"prompt": "live__live"},
        {"prompt": "live__nowhere"},
    ]);
    let out = run_client(stdio_plan(&scratch, &config, "legacy", "none", steps));
    assert_eq!(
        out["reads"][0]["texts"][0], "the live resource live://a",
        "{out}"
    );
    let audit = scratch.run(
        &["audit", "--json", "--config", config.to_str().unwrap()],
        Duration::from_secs(30),
    );
    let rows = support::json(&audit);
    let rows: Vec<(&str, &str, &str, bool)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            assert_eq!(row["front_end"], "serve", "{row}");
            assert!(
                row["client"].as_str().is_some_and(|c| !c.is_empty()),
                "{row}"
            );
            (
                row["server"].as_str().unwrap(),
                row["tool"].as_str().unwrap(),
                row["outcome"].as_str().unwrap(),
                row["executed"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("live", "resources/read live://a", "ok", true),
            ("live", "resources/read live://missing", "failed", true),
            ("live", "prompts/get live__live", "ok", true),
            ("", "prompts/get live__nowhere", "invalid_arguments", false),
        ],
        "{rows:?}"
    );
    scratch.assert_no_leftovers();
}

/// The real peer: server-everything keeps subscriptions and, once its
/// `toggle-subscriber-updates` tool is called, announces an update of every resource its
/// client (Warden's one connection) subscribed to, every 5 s. Three clients of one gateway
/// each subscribe to a resource of their own (two 2025-11-25 sessions with
/// `resources/subscribe`, one 2026-07-28 client on `subscriptions/listen`); each hears
/// updates of its own resource, and never of another's, though every update arrives on
/// the one upstream connection.
#[test]
fn server_everythings_updates_reach_only_their_subscribers() {
    let scratch = Scratch::new();
    let config = everything_config(
        &scratch,
        "[[policy.rules]]\ntools = \"everything__toggle-subscriber-updates\"\neffect = \"allow\"\n",
    );
    let served = Served::start(&scratch, &config, &[], &[]);
    let uri = |n: u32| format!("demo://resource/dynamic/text/{n}");
    let ready_b = scratch.path().join("b-ready");
    let ready_c = scratch.path().join("c-ready");
    let listening = |steps: Value| {
        json!([steps, {"wait_notice": "notifications/resources/updated", "seconds": 40},
               {"sleep": 6}])
    };
    let mut b_steps = listening(json!({"subscribe": uri(2)}));
    b_steps
        .as_array_mut()
        .unwrap()
        .insert(1, json!({"write_file": ready_b}));
    let b = run_client_later(json!({
        "mode": "legacy", "url": served.url, "elicit": "none", "steps": b_steps,
    }));
    let mut c_steps = listening(json!({"listen": true, "resources": [uri(3)]}));
    c_steps
        .as_array_mut()
        .unwrap()
        .insert(1, json!({"write_file": ready_c}));
    let c = run_client_later(json!({
        "mode": "2026-07-28", "url": served.url, "elicit": "none", "steps": c_steps,
    }));
    wait_for_file(&ready_b, Duration::from_secs(60));
    wait_for_file(&ready_c, Duration::from_secs(60));
    let a = run_client(json!({
        "mode": "legacy", "url": served.url, "elicit": "none",
        "steps": [
            {"subscribe": uri(1)},
            {"call": "everything__toggle-subscriber-updates", "args": {}},
            {"wait_notice": "notifications/resources/updated", "seconds": 40},
            {"sleep": 6},
        ],
    }));
    let b = b.join().unwrap();
    let c = c.join().unwrap();
    assert_eq!(a["capabilities"]["resources"]["subscribe"], true, "{a}");
    assert_eq!(a["calls"][0]["isError"], false, "{a}");
    assert_eq!(updated_uris(&a), vec![uri(1)], "{a}");
    assert_eq!(updated_uris(&b), vec![uri(2)], "{b}");
    assert_eq!(updated_uris(&c), vec![uri(3)], "{c}");
    drop(served);
    scratch.assert_no_leftovers();
}

// Subscriptions through remote upstreams, and idle_stop (decision 0039, revision).

/// A real peer listening on a loopback port, killed when dropped.
struct HttpPeer {
    child: Child,
    url: String,
}

impl HttpPeer {
    fn start(mut command: Command, port: u16) -> HttpPeer {
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the peer did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        HttpPeer {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A remote upstream's resource updates reach exactly their subscribers, in both of the
/// upstream's eras: a 2025-11-25 upstream is subscribed with `resources/subscribe` and
/// heard on its session's GET stream; a 2026-07-28 upstream through the one
/// `subscriptions/listen` Warden keeps with it, carrying the union of the clients' URIs
/// and opened again when that changes. The upstream is a second `warden serve --http` in
/// front of the live server (which logs what reached it): it announces all three updates
/// on its one connection to the outer Warden, which must hand each to its own subscriber
/// only (the attack: a client hearing of a resource another client follows). When the
/// clients leave, the subscriptions end at the live server too. The positive control is
/// each client hearing its own resource.
#[test]
fn a_remote_upstreams_updates_reach_only_their_subscribers_in_both_eras() {
    for era in ["legacy", "modern"] {
        let inner_scratch = Scratch::new();
        let inner_config = relay_config(&inner_scratch, "");
        let inner = Served::start(&inner_scratch, &inner_config, &[], &[]);
        let scratch = Scratch::new();
        let config = scratch.config(&format!(
            "[servers.in]\nurl = {:?}\nera = {era:?}\n\
             [[policy.rules]]\ntools = \"in__*\"\neffect = \"allow\"\n",
            inner.url
        ));
        let served = Served::start(&scratch, &config, &[], &[]);
        let ready = scratch.path().join("modern-listening");
        let modern = run_client_later(json!({
            "mode": "2026-07-28", "url": served.url, "elicit": "none",
            "steps": [
                {"listen": true, "resources": ["live://b"]},
                {"write_file": ready},
                {"wait_notice": "notifications/resources/updated", "seconds": 30},
                {"sleep": 2},
            ],
        }));
        wait_for_file(&ready, Duration::from_secs(60));
        let legacy = run_client(json!({
            "mode": "legacy", "url": served.url, "elicit": "none",
            "steps": [
                {"subscribe": "live://a"},
                {"call": "in__live__touch", "args": {"uris": ["live://a", "live://b", "live://c"]}},
                {"wait_notice": "notifications/resources/updated", "seconds": 30},
                {"sleep": 2},
            ],
        }));
        let modern = modern.join().unwrap();
        assert_eq!(
            legacy["capabilities"]["resources"]["subscribe"], true,
            "{era}: {legacy}"
        );
        assert_eq!(legacy["subscriptions"][0]["ok"], true, "{era}: {legacy}");
        assert_eq!(legacy["calls"][0]["isError"], false, "{era}: {legacy}");
        assert_eq!(updated_uris(&legacy), vec!["live://a"], "{era}: {legacy}");
        assert_eq!(
            modern["honored_filter"]["resourceSubscriptions"],
            json!(["live://b"]),
            "{era}: {modern}"
        );
        assert_eq!(updated_uris(&modern), vec!["live://b"], "{era}: {modern}");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let lines = counted(&inner_scratch);
            let ended = ["live://a", "live://b"]
                .iter()
                .all(|uri| lines.contains(&format!("resources/unsubscribe {uri}")));
            if ended {
                assert!(
                    !lines.iter().any(|line| line.contains("live://c")),
                    "{era}: nobody subscribed to c: {lines:?}"
                );
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{era}: not unsubscribed upstream: {lines:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        drop(served);
        drop(inner);
        scratch.assert_no_leftovers();
        inner_scratch.assert_no_leftovers();
    }
}

/// Real peers over Streamable HTTP: server-everything (2025-11-25: `resources/subscribe`,
/// its updates on the session's GET stream) and a server on the official Python SDK
/// (2026-07-28: its own `subscriptions/listen`, which acknowledges the URIs it honours and
/// tags each update with the listen's id). Two gateway clients subscribe to different
/// resources of the one upstream connection; each hears only its own.
#[test]
fn real_http_peers_updates_reach_only_their_subscribers() {
    // server-everything: the updates come every few seconds once toggled on.
    let port = free_port();
    let mut command = Command::new("node");
    command
        .arg(support::node_server("server-everything"))
        .arg("streamableHttp")
        .env("PORT", port.to_string());
    let everything = HttpPeer::start(command, port);
    let scratch = Scratch::new();
    let config = scratch.config(&format!(
        "[servers.everything]\nurl = {:?}\n\
         [[policy.rules]]\ntools = \"everything__toggle-subscriber-updates\"\neffect = \"allow\"\n",
        everything.url
    ));
    let served = Served::start(&scratch, &config, &[], &[]);
    let uri = |n: u32| format!("demo://resource/dynamic/text/{n}");
    let ready = scratch.path().join("c-ready");
    let c = run_client_later(json!({
        "mode": "2026-07-28", "url": served.url, "elicit": "none",
        "steps": [
            {"listen": true, "resources": [uri(3)]},
            {"write_file": ready},
            {"wait_notice": "notifications/resources/updated", "seconds": 40},
            {"sleep": 6},
        ],
    }));
    wait_for_file(&ready, Duration::from_secs(60));
    let a = run_client(json!({
        "mode": "legacy", "url": served.url, "elicit": "none",
        "steps": [
            {"subscribe": uri(1)},
            {"call": "everything__toggle-subscriber-updates", "args": {}},
            {"wait_notice": "notifications/resources/updated", "seconds": 40},
            {"sleep": 6},
        ],
    }));
    let c = c.join().unwrap();
    assert_eq!(a["capabilities"]["resources"]["subscribe"], true, "{a}");
    assert_eq!(a["calls"][0]["isError"], false, "{a}");
    assert_eq!(updated_uris(&a), vec![uri(1)], "{a}");
    assert_eq!(updated_uris(&c), vec![uri(3)], "{c}");
    drop(served);
    drop(everything);
    scratch.assert_no_leftovers();

    // The Python SDK server in the 2026-07-28 era, over Streamable HTTP.
    let port = free_port();
    let mut command = Command::new(python());
    command
        .arg(py_resources())
        .args(["http", &port.to_string()]);
    let py = HttpPeer::start(command, port);
    py_subscribers_hear_their_own(&format!(
        "[servers.py]\nurl = {:?}\nera = \"modern\"\n",
        py.url
    ));
    drop(py);
}

/// The Python SDK server with updated resources (tests/peers/py_sdk_resources.py).
fn py_resources() -> PathBuf {
    support::repo_root().join("tests/peers/py_sdk_resources.py")
}

/// Through a gateway serving `server` (the Python SDK resources server `py`, in the
/// 2026-07-28 era), a modern client listening to `note://b` and a legacy client subscribed
/// to `note://a` each hear only their own resource's update.
fn py_subscribers_hear_their_own(server: &str) {
    let scratch = Scratch::new();
    let config = scratch.config(&format!(
        "{server}\n\
         [policy.servers.py]\nintegrity = \"trusted\"\nconfidentiality = \"public\"\n\
         [[policy.rules]]\ntools = \"py__touch\"\neffect = \"allow\"\n"
    ));
    let served = Served::start(&scratch, &config, &[], &[]);
    let ready = scratch.path().join("b-ready");
    let b = run_client_later(json!({
        "mode": "2026-07-28", "url": served.url, "elicit": "none",
        "steps": [
            {"listen": true, "resources": ["note://b"]},
            {"write_file": ready},
            {"wait_notice": "notifications/resources/updated", "seconds": 30},
            {"sleep": 2},
        ],
    }));
    wait_for_file(&ready, Duration::from_secs(60));
    let a = run_client(json!({
        "mode": "legacy", "url": served.url, "elicit": "none",
        "steps": [
            {"subscribe": "note://a"},
            {"call": "py__touch", "args": {"uri": "note://a"}},
            {"call": "py__touch", "args": {"uri": "note://b"}},
            {"wait_notice": "notifications/resources/updated", "seconds": 30},
            {"sleep": 2},
        ],
    }));
    let b = b.join().unwrap();
    assert_eq!(a["capabilities"]["resources"]["subscribe"], true, "{a}");
    assert_eq!(a["subscriptions"][0]["ok"], true, "{a}");
    assert_eq!(a["calls"][0]["isError"], false, "{a}");
    assert_eq!(a["calls"][1]["isError"], false, "{a}");
    assert_eq!(updated_uris(&a), vec!["note://a"], "{a}");
    assert_eq!(
        b["honored_filter"]["resourceSubscriptions"],
        json!(["note://b"]),
        "{b}"
    );
    assert_eq!(updated_uris(&b), vec!["note://b"], "{b}");
    drop(served);
    scratch.assert_no_leftovers();
}

/// A 2026-07-28 stdio server (the Python SDK's, confined) takes its subscriptions through
/// the one `subscriptions/listen` Warden keeps with it: each gateway client hears only its
/// own resource's update.
#[test]
fn a_modern_stdio_servers_updates_reach_only_their_subscribers() {
    let script = py_resources();
    let folder = script.parent().unwrap().display().to_string();
    let server = server_toml(
        "py",
        &python(),
        &[script.to_str().unwrap()],
        &format!("era = \"modern\"\nsandbox = {{ read = [{folder:?}] }}"),
    );
    py_subscribers_hear_their_own(&server);
}

/// `idle_stop` does not stop a server a client is subscribed to through it (decision 0039,
/// revision): the subscriber, idle far longer than `idle_stop`, still hears the next
/// update (another client's call makes it). Stopping it would have ended the upstream
/// subscription silently, and the update would have been announced by a new process that
/// nobody had subscribed to yet. The control, on the same gateway: once the subscriber
/// left, the server is stopped as configured (the next call starts it again: a second
/// `initialize`).
#[test]
fn idle_stop_keeps_a_subscribed_server_and_stops_it_once_nobody_is() {
    let scratch = Scratch::new();
    let counts = scratch.path().join("counts.log");
    let live = server_toml(
        "live",
        &testserver_bin(),
        &["live-resources"],
        &format!(
            "idle_stop = \"1s\"\n\
             env = {{ WARDEN_TEST_COUNT_LOG = {:?} }}\nsandbox = {{ write = [{:?}] }}",
            counts.display().to_string(),
            scratch.path().display().to_string()
        ),
    );
    let config = scratch.config(&format!(
        "{live}\n[[policy.rules]]\ntools = \"live__*\"\neffect = \"allow\"\n"
    ));
    let served = Served::start(&scratch, &config, &[], &[]);
    let ready = scratch.path().join("subscribed");
    let subscriber = run_client_later(json!({
        "mode": "legacy", "url": served.url, "elicit": "none",
        "steps": [
            {"subscribe": "live://a"},
            {"write_file": ready},
            {"wait_notice": "notifications/resources/updated", "seconds": 30},
            {"sleep": 1},
        ],
    }));
    wait_for_file(&ready, Duration::from_secs(60));
    let starts = |lines: &[String]| lines.iter().filter(|l| *l == "initialize").count();
    let before = starts(&counted(&scratch));
    // Idle for four times its idle_stop.
    std::thread::sleep(Duration::from_secs(4));
    let toucher = run_client(json!({
        "mode": "legacy", "url": served.url, "elicit": "none",
        "steps": [{"call": "live__touch", "args": {"uris": ["live://a"]}}],
    }));
    assert_eq!(toucher["calls"][0]["isError"], false, "{toucher}");
    let subscriber = subscriber.join().unwrap();
    assert_eq!(updated_uris(&subscriber), vec!["live://a"], "{subscriber}");
    assert_eq!(
        starts(&counted(&scratch)),
        before,
        "stopped while subscribed: {:?}",
        counted(&scratch)
    );
    // Nobody subscribes any more: the server stops after its idle_stop, and the next call
    // starts it again.
    std::thread::sleep(Duration::from_secs(4));
    let again = run_client(json!({
        "mode": "legacy", "url": served.url, "elicit": "none",
        "steps": [{"call": "live__touch", "args": {"uris": ["live://a"]}}],
    }));
    assert_eq!(again["calls"][0]["isError"], false, "{again}");
    let lines = counted(&scratch);
    assert!(
        lines.contains(&"resources/unsubscribe live://a".to_owned()),
        "{lines:?}"
    );
    assert_eq!(
        starts(&lines),
        before + 1,
        "not stopped when unsubscribed: {lines:?}"
    );
    drop(served);
    scratch.assert_no_leftovers();
}

/// An upstream that fails `resources/unsubscribe` (decision 0039, revision 2): whichever
/// face the client uses (stdio, HTTP), its unsubscription succeeds and ends its
/// subscription at once (it hears no more updates of that resource); Warden sends the
/// failed unsubscribe once and does not try again at every tick; and a later subscription
/// to the same resource is sent to the server afresh and is heard (the positive control).
#[test]
fn a_failed_upstream_unsubscribe_ends_the_subscription_once_on_both_faces() {
    for face in ["stdio", "http"] {
        let scratch = Scratch::new();
        let counts = scratch.path().join("counts.log");
        let live = server_toml(
            "live",
            &testserver_bin(),
            &["live-resources"],
            &format!(
                "env = {{ WARDEN_TEST_COUNT_LOG = {:?}, WARDEN_TEST_UNSUBSCRIBE_FAILS = \"1\" }}\n\
                 sandbox = {{ write = [{:?}] }}",
                counts.display().to_string(),
                scratch.path().display().to_string()
            ),
        );
        let config = scratch.config(&format!(
            "{live}\n[[policy.rules]]\ntools = \"live__*\"\neffect = \"allow\"\n"
        ));
        let steps = json!([
            {"subscribe": "live://a"},
            {"unsubscribe": "live://a"},
            {"call": "live__touch", "args": {"uris": ["live://a"]}},
            // Several ticks: an update that leaked, or a retried unsubscribe, shows here.
            {"sleep": 3},
            {"subscribe": "live://a"},
            {"call": "live__touch", "args": {"uris": ["live://a"]}},
            {"wait_notice": "notifications/resources/updated", "seconds": 30},
            {"sleep": 1},
        ]);
        let (out, served) = if face == "stdio" {
            // The second touch is asked about (the first one's result is in the context):
            // the client approves it.
            let plan = stdio_plan(&scratch, &config, "legacy", "approve", steps);
            (run_client(plan), None)
        } else {
            let served = Served::start(&scratch, &config, &[], &[]);
            let plan = json!({"mode": "legacy", "url": served.url, "elicit": "approve",
                              "steps": steps});
            (run_client(plan), Some(served))
        };
        let subscriptions = out["subscriptions"].as_array().unwrap();
        assert!(
            subscriptions.iter().all(|step| step["ok"] == true),
            "{face}: {out}"
        );
        let heard: Vec<&Value> = out["notices"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|notice| notice[0] == "notifications/resources/updated")
            .collect();
        assert_eq!(
            heard.len(),
            1,
            "{face}: one update, after the second subscription: {out}"
        );
        let lines = counted(&scratch);
        let count = |lines: &[String], line: &str| lines.iter().filter(|l| *l == line).count();
        assert_eq!(
            count(&lines, "resources/subscribe live://a"),
            2,
            "{face}: {lines:?}"
        );
        // Up to the second subscription (the session's end may unsubscribe once more).
        let second = lines
            .iter()
            .rposition(|line| line == "resources/subscribe live://a")
            .unwrap();
        assert_eq!(
            count(&lines[..second], "resources/unsubscribe live://a"),
            1,
            "{face}: sent once, not retried: {lines:?}"
        );
        drop(served);
        scratch.assert_no_leftovers();
    }
}

/// Servers reached over the deprecated HTTP+SSE transport (and relayed servers, by the
/// same rule) have only their tools relayed: a client reading or subscribing to one of
/// their resources is told so, naming the server and its transport, rather than a bare
/// "not found", and nothing is sent to the server. The real peer is server-everything in
/// its `sse` mode; its tools still work there (`echo`). The positive control is the same
/// peer over Streamable HTTP, where the same subscription is made.
#[test]
fn resources_of_a_server_over_http_sse_are_refused_with_the_reason() {
    for (mode, path, transport) in [
        ("sse", "/sse", "transport = \"sse\"\n"),
        ("streamableHttp", "/mcp", ""),
    ] {
        let port = free_port();
        let mut command = Command::new("node");
        command
            .arg(support::node_server("server-everything"))
            .arg(mode)
            .env("PORT", port.to_string());
        let everything = HttpPeer::start(command, port);
        let url = format!("http://127.0.0.1:{port}{path}");
        let scratch = Scratch::new();
        let config = scratch.config(&format!(
            "[servers.everything]\nurl = {url:?}\n{transport}\
             [[policy.rules]]\ntools = \"everything__echo\"\neffect = \"allow\"\n",
        ));
        let served = Served::start(&scratch, &config, &[], &[]);
        let uri = "demo://resource/dynamic/text/1";
        let out = run_client(json!({
            "mode": "legacy", "url": served.url, "elicit": "none",
            "steps": [
                // First: a read puts the server's text in the context, and a later call
                // would be asked about.
                {"call": "everything__echo", "args": {"message": "still here"}},
                {"subscribe": uri},
                {"read": uri},
            ],
        }));
        assert_eq!(out["calls"][0]["isError"], false, "{mode}: {out}");
        let subscribed = &out["subscriptions"][0];
        if mode == "sse" {
            let error = subscribed["error"].as_str().unwrap_or_default();
            assert!(
                error.contains("`everything` is reached over the deprecated HTTP+SSE transport")
                    && error.contains("not their resources"),
                "{out}"
            );
            let read = out["reads"][0]["error"].as_str().unwrap_or_default();
            assert!(read.contains("HTTP+SSE"), "{out}");
            assert_ne!(out["capabilities"]["resources"]["subscribe"], true, "{out}");
        } else {
            assert_eq!(subscribed["ok"], true, "{out}");
        }
        drop(served);
        drop(everything);
        scratch.assert_no_leftovers();
    }
}

/// Runs the TypeScript SDK client with `plan` and returns what it printed.
fn run_ts_client(plan: Value) -> Value {
    let sdk = peers_dir().join("node/node_modules/@modelcontextprotocol/sdk");
    let mut command = Command::new("node");
    command
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/gateway_ts_client.mjs"))
        .arg(sdk)
        .arg(plan.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let output = support::run_with_limit(command, Duration::from_secs(90));
    assert!(
        output.status.success(),
        "TypeScript client failed:\n{}",
        describe(&output)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|error| panic!("{error}:\n{}", describe(&output)))
}

/// The official TypeScript SDK client (issue 11's "real clients"), over stdio and over
/// Streamable HTTP: it gets the same catalogue and the same decisions as the Python SDK's
/// client (allowed and answered; denied with the reason; asked with nobody to ask, refused
/// with what, why and how; a second call in a context the first result tainted, asked).
#[test]
fn the_typescript_sdk_client_gets_the_catalogue_and_the_policy_on_both_faces() {
    let scratch = Scratch::new();
    let config = config(&scratch, "");
    let stdio = run_ts_client(json!({
        "stdio": {
            "command": warden_bin(),
            "args": ["serve", "--config", config],
            "env": warden_env(&scratch),
            "cwd": scratch.path(),
        },
        "steps": the_steps(),
    }));
    assert_policy_without_asking(&stdio);
    assert_eq!(
        stdio["capabilities"]["tools"]["listChanged"], true,
        "{stdio}"
    );
    let served = Served::start(&scratch, &config, &[], &[]);
    let http = run_ts_client(json!({"url": served.url, "steps": the_steps()}));
    assert_policy_without_asking(&http);
    drop(served);
    scratch.assert_no_leftovers();
}

/// The conformance fixture, every tool allowed even in a context its own results made
/// untrusted. Spoken to in `era` ("" for the probe's choice, 2026-07-28: its tools ask with
/// an input-required result; "legacy": they ask with requests of their own during the
/// call).
fn asking_config(scratch: &Scratch, era: &str) -> PathBuf {
    let fixture = server_toml("c", &testserver_bin(), &["conformance"], era);
    scratch.config(&format!(
        "{fixture}\n[[policy.rules]]\ntools = \"c__*\"\neffect = \"allow\"\n\
         even_if_tainted = true\neven_if_private = true\n"
    ))
}

/// A server's question reaches the real SDK client (over stdio) that made the call, in
/// every pairing of eras: a 2025-11-25 client is sent `elicitation/create`; a 2026-07-28
/// client gets an input-required result and retries (a 2026-07-28 server's own, or, for a
/// 2025-11-25 server's request during the call, Warden's, the call parked until the
/// retry). The question names the server that asks; the answer goes back to the server,
/// whose result the client reads. A client that declared no elicitation is not asked: the
/// server gets a decline.
#[test]
fn a_servers_question_reaches_the_client_that_made_the_call_in_both_eras() {
    let scratch = Scratch::new();
    let steps = json!([{"call": "c__test_elicitation", "args": {"message": "Your details?"}}]);
    for (server_era, mode) in [
        ("", "legacy"),
        ("", "2026-07-28"),
        ("era = \"legacy\"", "legacy"),
        ("era = \"legacy\"", "2026-07-28"),
    ] {
        let config = asking_config(&scratch, server_era);
        let mode_name = format!("{mode} client, server {server_era:?}");
        let mode_name = mode_name.as_str();
        let out = run_client(stdio_plan(
            &scratch,
            &config,
            mode,
            "approve",
            steps.clone(),
        ));
        assert_eq!(
            out["asked"],
            json!(["[c] Your details?"]),
            "{mode_name}: {out}"
        );
        let text = call(&out, 0)["text"].as_str().unwrap_or_default();
        assert!(
            text.contains("User response: action=accept"),
            "{mode_name}: {out}"
        );
        let out = run_client(stdio_plan(&scratch, &config, mode, "none", steps.clone()));
        assert_eq!(out["asked"], json!([]), "{mode_name}: {out}");
        let text = call(&out, 0)["text"].as_str().unwrap_or_default();
        assert!(
            text.contains("action=decline") || call(&out, 0)["isError"] == true,
            "{mode_name}: the server must not get an answer nobody gave: {out}"
        );
    }
    scratch.assert_no_leftovers();
}

/// Posts a 2026-07-28 `tools/call` of `name` with `arguments`, declaring `capabilities`,
/// with `extra` parameters (`requestState`, `inputResponses`, other `arguments`) set over
/// the body's.
fn send_modern(
    served: &Served,
    name: &str,
    arguments: Value,
    capabilities: Value,
    extra: &Value,
) -> Reply {
    let mut body = modern_call(name, arguments);
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = capabilities;
    for (key, value) in extra.as_object().into_iter().flatten() {
        body["params"][key] = value.clone();
    }
    Post::to(served)
        .with("MCP-Protocol-Version", "2026-07-28")
        .with("Mcp-Method", "tools/call")
        .with("Mcp-Name", name.to_owned())
        .send(served, &body)
}

/// A 2026-07-28 client's retry carries Warden's `requestState`, which holds the server's
/// own: a tampered state, one moved to other arguments, and one used twice are JSON-RPC
/// errors and reach no server; the honest retry reaches the server with its state
/// unchanged (the fixture says `state-ok` only for its own state). The client is asked only
/// what it declared.
#[test]
fn a_continuation_state_cannot_be_forged_moved_or_replayed() {
    let scratch = Scratch::new();
    let config = asking_config(&scratch, "");
    let served = Served::start(&scratch, &config, &[], &[]);
    let tool = "c__test_input_required_result_request_state";
    let send = |name: &str, params: Value| {
        send_modern(
            &served,
            name,
            json!({}),
            json!({"elicitation": {}}),
            &params,
        )
    };
    let first = send(tool, json!({}));
    let asked = &first.message()["result"];
    assert_eq!(asked["resultType"], "input_required", "{}", first.body);
    assert_eq!(
        asked["inputRequests"]["confirm"]["params"]["message"],
        "[c] Please confirm"
    );
    let state = asked["requestState"].as_str().unwrap().to_owned();
    assert!(
        !state.contains("fixture-confirm"),
        "the server's state is Warden's to carry, not shown: {state}"
    );
    let yes = json!({"confirm": {"action": "accept", "content": {"ok": true}}});
    for (what, params) in [
        (
            "tampered",
            json!({"requestState": format!("{state}-TAMPERED"), "inputResponses": yes}),
        ),
        (
            "moved to other arguments",
            json!({"requestState": state, "inputResponses": yes, "arguments": {"x": 1}}),
        ),
        (
            "not a string",
            json!({"requestState": 7, "inputResponses": yes}),
        ),
    ] {
        let refused = send(tool, params);
        assert_eq!(refused.status, 400, "{what}: {}", refused.body);
        assert_eq!(
            refused.message()["error"]["code"],
            -32602,
            "{what}: {}",
            refused.body
        );
    }
    let honest = send(tool, json!({"requestState": state, "inputResponses": yes}));
    let result = &honest.message()["result"];
    assert_eq!(result["resultType"], "complete", "{}", honest.body);
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("state-ok"), "{}", honest.body);
    let replayed = send(tool, json!({"requestState": state, "inputResponses": yes}));
    assert_eq!(
        replayed.message()["error"]["code"],
        -32602,
        "{}",
        replayed.body
    );
    // Declared sampling only: the server asks only for that, and the question survives.
    let reply = send_modern(
        &served,
        "c__test_input_required_result_capabilities",
        json!({}),
        json!({"sampling": {}}),
        &json!({}),
    );
    let keys: Vec<String> = reply.message()["result"]["inputRequests"]
        .as_object()
        .map(|requests| requests.keys().cloned().collect())
        .unwrap_or_default();
    assert_eq!(keys, ["greeting"], "{}", reply.body);
    drop(served);
    scratch.assert_no_leftovers();
}

/// A 2025-11-25 server's question during a call reaches a 2026-07-28 client as an
/// input-required result, the call parked: the state naming the parked call cannot be
/// tampered with, moved to other arguments or used twice (each a -32602 error, and the
/// call still waits); the honest retry hands the answer to the waiting server and gets the
/// call's result. The parked call is one call: one audit row.
#[test]
fn a_legacy_servers_question_parks_the_call_for_a_modern_client() {
    let scratch = Scratch::new();
    let config = asking_config(&scratch, "era = \"legacy\"");
    let served = Served::start(&scratch, &config, &[], &[]);
    let tool = "c__test_elicitation";
    let send = |params: Value| {
        send_modern(
            &served,
            tool,
            json!({"message": "Who?"}),
            json!({"elicitation": {}}),
            &params,
        )
    };
    let first = send(json!({}));
    let asked = &first.message()["result"];
    assert_eq!(asked["resultType"], "input_required", "{}", first.body);
    let (key, question) = asked["inputRequests"]
        .as_object()
        .and_then(|requests| requests.iter().next())
        .map(|(key, question)| (key.clone(), question.clone()))
        .unwrap();
    assert_eq!(question["method"], "elicitation/create");
    assert_eq!(question["params"]["message"], "[c] Who?");
    let state = asked["requestState"].as_str().unwrap().to_owned();
    let yes = json!({key.clone(): {"action": "accept",
                     "content": {"username": "u", "email": "e@example.com"}}});
    for (what, params) in [
        (
            "tampered",
            json!({"requestState": format!("{state}x"), "inputResponses": yes}),
        ),
        (
            "moved to other arguments",
            json!({"requestState": state, "inputResponses": yes,
                   "arguments": {"message": "Other?"}}),
        ),
    ] {
        let refused = send(params);
        assert_eq!(
            refused.message()["error"]["code"],
            -32602,
            "{what}: {}",
            refused.body
        );
    }
    let honest = send(json!({"requestState": state, "inputResponses": yes}));
    let result = &honest.message()["result"];
    assert_eq!(result["resultType"], "complete", "{}", honest.body);
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("action=accept") && text.contains("e@example.com"),
        "{}",
        honest.body
    );
    let replayed = send(json!({"requestState": state, "inputResponses": yes}));
    assert_eq!(
        replayed.message()["error"]["code"],
        -32602,
        "{}",
        replayed.body
    );
    drop(served);
    let audit = scratch.run(
        &["audit", "--json", "--config", config.to_str().unwrap()],
        Duration::from_secs(30),
    );
    let rows = support::json(&audit);
    let calls: Vec<&Value> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["tool"] == "c__test_elicitation")
        .collect();
    assert_eq!(calls.len(), 1, "one call, one row: {rows}");
    assert_eq!(calls[0]["outcome"], "ok", "{rows}");
    scratch.assert_no_leftovers();
}

/// The hostile HTTP server in its strict 2026-07-28 mode (its `ask` tool asks first), as
/// server `h`, with a policy that lets its tools run.
fn modern_remote_config(scratch: &Scratch) -> (support::HttpServer, PathBuf) {
    let server = support::HttpServer::hostile(scratch, "modern");
    let config = scratch.config(&format!(
        "[servers.h]\nurl = {:?}\n[[policy.rules]]\ntools = \"h__*\"\neffect = \"allow\"\n\
         even_if_tainted = true\n",
        server.url
    ));
    (server, config)
}

/// A remote 2026-07-28 server's question reaches a 2026-07-28 client of the gateway, and
/// the client's retry reaches the server with its answer and the server's own state
/// (`remote state-ok`), through Warden's signed state.
#[test]
fn a_remote_servers_question_reaches_a_modern_client_and_its_answer_the_server() {
    let scratch = Scratch::new();
    let (server, config) = modern_remote_config(&scratch);
    let served = Served::start(&scratch, &config, &[], &[]);
    let first = send_modern(
        &served,
        "h__ask",
        json!({}),
        json!({"elicitation": {}}),
        &json!({}),
    );
    let asked = &first.message()["result"];
    assert_eq!(asked["resultType"], "input_required", "{}", first.body);
    assert_eq!(
        asked["inputRequests"]["confirm"]["params"]["message"],
        "[h] Go ahead?"
    );
    let state = asked["requestState"].as_str().unwrap().to_owned();
    assert_ne!(
        state, "remote-state-1",
        "the server's state is carried, not shown"
    );
    let answer = json!({"requestState": state,
                        "inputResponses": {"confirm": {"action": "accept", "content": {"ok": true}}}});
    let done = send_modern(
        &served,
        "h__ask",
        json!({}),
        json!({"elicitation": {}}),
        &answer,
    );
    let text = done.message()["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(text, "remote state-ok: \"accept\"", "{}", done.body);
    drop(served);
    drop(server);
    scratch.assert_no_leftovers();
}

/// The Python SDK's server over Streamable HTTP, pinned to 2025-11-25 (its `confirm` tool
/// asks during the call, reports progress and writes a log line, all on the call's
/// stream), with a policy that lets its tools run.
fn remote_asking_config(scratch: &Scratch) -> (support::HttpServer, PathBuf) {
    let port = free_port();
    let mut command = Command::new(support::peers_dir().join("venv/bin/python"));
    command
        .arg(support::repo_root().join("tests/peers/py_sdk_server.py"))
        .args(["http", &port.to_string()]);
    let server = support::HttpServer::peer(scratch, command, port, "/mcp");
    let config = scratch.config(&format!(
        "[servers.py]\nurl = {:?}\nera = \"legacy\"\n[[policy.rules]]\ntools = \"py__*\"\n\
         effect = \"allow\"\neven_if_tainted = true\n",
        server.url
    ));
    (server, config)
}

/// A remote 2025-11-25 server's request during a call reaches the client that made the
/// call, as on stdio: the server (the Python SDK over Streamable HTTP) sends
/// `elicitation/create`, progress and a log line on the call's own stream. A 2025-11-25
/// client of the gateway is asked (the question naming the server), hears the progress
/// under its own token and the log line, and the server gets its answer; a 2026-07-28
/// client is asked through the parked call; a client that declared no elicitation is not
/// asked, and the server hears a decline, not an answer nobody gave.
#[test]
fn a_remote_legacy_servers_question_progress_and_log_reach_the_client_behind_the_call() {
    let scratch = Scratch::new();
    let (server, config) = remote_asking_config(&scratch);
    let steps = json!([{"call": "py__confirm", "args": {"what": "launch"}, "progress": true}]);
    let out = run_client(stdio_plan(
        &scratch,
        &config,
        "legacy",
        "approve",
        steps.clone(),
    ));
    assert_eq!(out["asked"], json!(["[py] Go ahead with launch?"]), "{out}");
    assert_eq!(
        call(&out, 0)["text"],
        "confirmed launch: accept",
        "the server got the client's answer: {out}"
    );
    let progress: Vec<(f64, String)> = out["progress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p[0].as_f64().unwrap(),
                p[2].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        progress,
        vec![(1.0, "asking".to_owned()), (2.0, "answered".to_owned())],
        "progress under the client's own token: {out}"
    );
    assert!(
        out["logs"].as_array().unwrap().iter().any(|log| log[1]
            .as_str()
            .unwrap_or("")
            .contains("asking about launch")),
        "the server's log line reached the client: {out}"
    );

    let out = run_client(stdio_plan(
        &scratch,
        &config,
        "2026-07-28",
        "approve",
        steps.clone(),
    ));
    assert_eq!(out["asked"], json!(["[py] Go ahead with launch?"]), "{out}");
    assert_eq!(call(&out, 0)["text"], "confirmed launch: accept", "{out}");

    let out = run_client(stdio_plan(&scratch, &config, "legacy", "none", steps));
    assert_eq!(out["asked"], json!([]), "{out}");
    assert_eq!(call(&out, 0)["text"], "confirmed launch: decline", "{out}");
    drop(server);
    scratch.assert_no_leftovers();
}

/// A remote 2026-07-28 server's input request reaches a 2025-11-25 client of the gateway
/// as a request of its own, and the call is sent again with the client's answer and the
/// server's state (`remote state-ok`: the server saw its own state). The server is told
/// the client's capabilities (not Warden's) and the log level the client hears.
#[test]
fn a_remote_modern_servers_question_is_put_to_a_legacy_client() {
    let scratch = Scratch::new();
    let (server, config) = modern_remote_config(&scratch);
    let steps = json!([{"call": "h__ask", "args": {}}]);
    let out = run_client(stdio_plan(
        &scratch,
        &config,
        "legacy",
        "approve",
        steps.clone(),
    ));
    assert_eq!(out["asked"], json!(["[h] Go ahead?"]), "{out}");
    assert_eq!(
        call(&out, 0)["text"],
        "remote state-ok: \"accept\"",
        "{out}"
    );
    // The server was told what the client behind the call can do, and the log level it
    // hears (a 2025-11-25 session that set none hears every level).
    let calls: Vec<String> = server
        .requests()
        .into_iter()
        .filter(|line| line.starts_with("CALL meta"))
        .collect();
    assert!(
        !calls.is_empty()
            && calls
                .iter()
                .all(|line| line.contains("log-level=debug") && line.contains("\"elicitation\"")),
        "{calls:?}"
    );
    let out = run_client(stdio_plan(&scratch, &config, "legacy", "none", steps));
    assert_eq!(out["asked"], json!([]), "{out}");
    assert_eq!(
        call(&out, 0)["text"],
        "remote state-ok: \"decline\"",
        "{out}"
    );
    let last = server
        .requests()
        .into_iter()
        .rfind(|line| line.starts_with("CALL meta"))
        .unwrap_or_default();
    assert!(
        last.contains("CALL meta") && !last.contains("elicitation"),
        "a client that declared no elicitation is not declared as one: {last}"
    );
    drop(server);
    scratch.assert_no_leftovers();
}
