//! Remote servers over Streamable HTTP: real peers in both eras, and a hostile server of our
//! own (`warden-http-testserver`) for every refusal and recovery the client promises. Each
//! test is bounded by a time limit, and ends by checking nothing it started still runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{HttpServer, Scratch, assert_exit, describe, json, peers_dir, stderr, stdout};

const LIMIT: Duration = Duration::from_secs(60);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn config(scratch: &Scratch, name: &str, url: &str, extra: &str) -> PathBuf {
    scratch.config(&format!("[servers.{name}]\nurl = {url:?}\n{extra}\n"))
}

fn call_echo(scratch: &Scratch, config: &std::path::Path) -> std::process::Output {
    scratch.run(
        &[
            "--config",
            config.to_str().unwrap(),
            "call",
            "--yes",
            "h/echo",
            "--args",
            r#"{"text":"hi"}"#,
        ],
        LIMIT,
    )
}

/// Runs `warden call h/echo` against the hostile server in `mode`, returning the run and
/// the requests the server saw.
fn against(mode: &str, extra: &str) -> (std::process::Output, Vec<String>) {
    let scratch = Scratch::new();
    let server = HttpServer::hostile(&scratch, mode);
    let config = config(&scratch, "h", &server.url, extra);
    let output = call_echo(&scratch, &config);
    let requests = server.requests();
    drop(server);
    scratch.assert_no_leftovers();
    (output, requests)
}

#[test]
fn a_good_legacy_server_round_trips_and_its_session_is_deleted() {
    let (output, requests) = against("good", "");
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("echo from session s1: hi"),
        "{}",
        describe(&output)
    );
    assert_eq!(
        requests.first().map(String::as_str),
        Some("POST server/discover session=-")
    );
    assert!(
        requests.contains(&"POST tools/call session=s1".to_owned()),
        "{requests:?}"
    );
    assert_eq!(
        requests.last().map(String::as_str),
        Some("DELETE session=s1"),
        "{requests:?}"
    );
}

#[test]
fn a_redirect_is_refused_not_followed() {
    let (output, requests) = against("redirect", "");
    assert_exit(&output, 3);
    let err = stderr(&output);
    assert!(
        err.contains("redirected (HTTP 307) to http://elsewhere.invalid/mcp"),
        "{err}"
    );
    assert!(err.contains("does not follow redirects"), "{err}");
    assert_eq!(requests.len(), 1, "no retry, no follow: {requests:?}");
}

#[test]
fn a_wrong_content_type_is_an_error_naming_it() {
    let (output, _) = against("content-type", "");
    assert_exit(&output, 3);
    assert!(
        stderr(&output).contains("content type \"text/html\""),
        "{}",
        describe(&output)
    );
}

#[test]
fn an_oversized_body_is_refused_at_the_cap() {
    let (output, _) = against("big-body", "max_message_bytes = 1048576");
    assert_exit(&output, 3);
    assert!(
        stderr(&output).contains("response body exceeds the 1048576-byte cap"),
        "{}",
        describe(&output)
    );
}

#[test]
fn an_oversized_event_is_refused_at_the_cap() {
    let (output, _) = against("big-event", "max_message_bytes = 1048576");
    assert_exit(&output, 3);
    assert!(
        stderr(&output).contains("a server-sent event exceeds the 1048576-byte cap"),
        "{}",
        describe(&output)
    );
}

#[test]
fn a_stalled_stream_ends_at_the_call_timeout() {
    let started = Instant::now();
    let (output, requests) = against("stall", "[servers.h.timeout]\ncall = \"2s\"");
    assert_exit(&output, 3);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    let err = stderr(&output);
    assert!(
        err.contains("no answer within 2s (the request was cancelled)"),
        "{err}"
    );
    // Legacy era: the server is told with notifications/cancelled.
    assert!(
        requests.contains(&"POST notifications/cancelled session=s1".to_owned()),
        "{requests:?}"
    );
}

#[test]
fn an_expired_session_is_initialised_again_once() {
    let (output, requests) = against("expire", "");
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("echo from session s2: hi"),
        "{}",
        describe(&output)
    );
    let initializes = requests
        .iter()
        .filter(|r| r.starts_with("POST initialize"))
        .count();
    assert_eq!(initializes, 2, "{requests:?}");
}

#[test]
fn a_flapping_server_is_retried_on_first_connect() {
    let (output, requests) = against("flap", "[servers.h.reconnect]\ninitial_delay = \"50ms\"");
    assert_exit(&output, 0);
    let discovers = requests
        .iter()
        .filter(|r| r.starts_with("POST server/discover"))
        .count();
    assert_eq!(discovers, 3, "two 503s, then an answer: {requests:?}");
}

#[test]
fn a_flapping_server_without_retries_is_reported_down() {
    let (output, requests) = against("flap", "[servers.h.reconnect]\nconnect_attempts = 1");
    assert_exit(&output, 3);
    assert!(
        stderr(&output).contains("down after 1 attempt(s): the server answered HTTP 503"),
        "{}",
        describe(&output)
    );
    assert_eq!(requests.len(), 1, "{requests:?}");
}

#[test]
fn replies_that_disagree_with_the_request_are_refused() {
    let (output, _) = against("mismatch", "");
    assert_exit(&output, 3);
    assert!(
        stderr(&output).contains("the answer is for request \"someone-else\""),
        "{}",
        describe(&output)
    );
}

#[test]
fn unauthorized_is_needs_authorization_not_down_and_is_not_retried() {
    let (output, requests) = against("unauthorized", "");
    assert_exit(&output, 3);
    let err = stderr(&output);
    assert!(
        err.contains("needs authorization: the server answered HTTP 401"),
        "{err}"
    );
    assert!(err.contains("WWW-Authenticate: Bearer"), "{err}");
    assert_eq!(requests.len(), 1, "{requests:?}");
}

#[test]
fn a_broken_legacy_stream_resumes_with_last_event_id_after_retry() {
    let started = Instant::now();
    let (output, requests) = against("resume", "");
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("echo from session s1: hi"),
        "{}",
        describe(&output)
    );
    assert!(
        requests.contains(&"GET session=s1 last-event-id=7".to_owned()),
        "{requests:?}"
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
}

#[test]
fn plain_http_to_a_remote_host_is_refused_unless_allowed() {
    let scratch = Scratch::new();
    let config = config(&scratch, "h", "http://192.0.2.1/mcp", "");
    let output = call_echo(&scratch, &config);
    assert_exit(&output, 3);
    assert!(
        stderr(&output).contains("refusing plain http:// to 192.0.2.1"),
        "{}",
        describe(&output)
    );
    assert!(
        stderr(&output).contains("allow_http = true"),
        "{}",
        describe(&output)
    );
}

#[test]
fn header_values_are_sent_and_never_shown() {
    let scratch = Scratch::new();
    let server = HttpServer::hostile(&scratch, "good");
    let config = config(
        &scratch,
        "h",
        &server.url,
        "headers = { Authorization = \"Bearer ${WARDEN_TEST_SECRET}\" }",
    );
    let mut command = scratch.warden(&["--config", config.to_str().unwrap(), "-vvv", "tools"]);
    command.env("WARDEN_TEST_SECRET", "s3cr3t-value");
    let output = support::run_with_limit(command, LIMIT);
    assert_exit(&output, 0);
    assert!(!stdout(&output).contains("s3cr3t-value"));
    assert!(
        !stderr(&output).contains("s3cr3t-value"),
        "the secret reached the log"
    );
    assert!(
        server
            .log_text()
            .contains("authorization: Bearer s3cr3t-value"),
        "the header did not reach the server: {:?}",
        server.requests()
    );
    let shown = scratch.run(&["--config", config.to_str().unwrap(), "config"], LIMIT);
    assert!(
        !stdout(&shown).contains("s3cr3t-value"),
        "{}",
        stdout(&shown)
    );
}

// Real peers.

fn everything(scratch: &Scratch) -> HttpServer {
    let port = free_port();
    let mut command = Command::new("node");
    command
        .arg(
            peers_dir()
                .join("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
        )
        .arg("streamableHttp")
        .env("PORT", port.to_string());
    HttpServer::peer(scratch, command, port, "/mcp")
}

fn python(scratch: &Scratch) -> HttpServer {
    let port = free_port();
    let mut command = Command::new(peers_dir().join("venv/bin/python"));
    command
        .arg(support::repo_root().join("tests/peers/py_sdk_server.py"))
        .args(["http", &port.to_string()]);
    HttpServer::peer(scratch, command, port, "/mcp")
}

fn tools_json(scratch: &Scratch, config: &std::path::Path) -> serde_json::Value {
    let output = scratch.run(
        &["--config", config.to_str().unwrap(), "tools", "--json"],
        LIMIT,
    );
    assert_exit(&output, 0);
    json(&output)["servers"][0].clone()
}

#[test]
fn server_everything_over_http_speaks_legacy_and_calls_round_trip() {
    let scratch = Scratch::new();
    let server = everything(&scratch);
    let config = config(&scratch, "ev", &server.url, "");
    let listing = tools_json(&scratch, &config);
    assert_eq!(listing["state"], "connected", "{listing}");
    assert_eq!(listing["era"], "legacy");
    assert_eq!(listing["protocol_version"], "2025-11-25");
    assert!(
        listing["tools"].as_array().unwrap().len() >= 13,
        "{listing}"
    );
    let output = scratch.run(
        &[
            "--config",
            config.to_str().unwrap(),
            "call",
            "--yes",
            "ev/echo",
            "--args",
            r#"{"message":"over http"}"#,
        ],
        LIMIT,
    );
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("Echo: over http"),
        "{}",
        describe(&output)
    );
    // Pinned to the modern era, it is refused without a fallback.
    let pinned = config_with(&scratch, "ev", &server.url, "era = \"modern\"");
    let output = scratch.run(&["--config", pinned.to_str().unwrap(), "tools"], LIMIT);
    assert!(
        stdout(&output).contains("no fallback") || stderr(&output).contains("no fallback"),
        "{}",
        describe(&output)
    );
    drop(server);
    scratch.assert_no_leftovers();
}

fn everything_sse(scratch: &Scratch) -> HttpServer {
    let port = free_port();
    let mut command = Command::new("node");
    command
        .arg(
            peers_dir()
                .join("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
        )
        .arg("sse")
        .env("PORT", port.to_string());
    HttpServer::peer(scratch, command, port, "/sse")
}

#[test]
fn server_everything_over_the_deprecated_sse_transport_only_when_named() {
    let scratch = Scratch::new();
    let server = everything_sse(&scratch);
    let config = config(&scratch, "ev", &server.url, "transport = \"sse\"");
    let output = scratch.run(
        &["--config", config.to_str().unwrap(), "tools", "--json"],
        LIMIT,
    );
    assert_exit(&output, 0);
    assert!(
        stderr(&output).contains(
            "server ev uses the deprecated HTTP+SSE transport (2024-11-05); ask its authors for Streamable HTTP"
        ),
        "{}",
        describe(&output)
    );
    let listing = json(&output)["servers"][0].clone();
    assert_eq!(listing["state"], "connected", "{listing}");
    assert_eq!(listing["era"], "legacy");
    assert_eq!(listing["protocol_version"], "2024-11-05");
    assert!(
        listing["tools"].as_array().unwrap().len() >= 10,
        "{listing}"
    );
    let output = scratch.run(
        &[
            "--config",
            config.to_str().unwrap(),
            "call",
            "--yes",
            "ev/echo",
            "--args",
            r#"{"message":"over sse"}"#,
        ],
        LIMIT,
    );
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("Echo: over sse"),
        "{}",
        describe(&output)
    );
    let shown = scratch.run(&["--config", config.to_str().unwrap(), "config"], LIMIT);
    assert!(
        stdout(&shown).contains("sse    ") && stdout(&shown).contains("deprecated HTTP+SSE"),
        "{}",
        describe(&shown)
    );
    // Not named: Streamable HTTP is tried, fails, and nothing falls back to HTTP+SSE.
    let plain = config_with(&scratch, "ev", &server.url, "");
    let output = scratch.run(
        &["--config", plain.to_str().unwrap(), "tools", "--json"],
        LIMIT,
    );
    let text = describe(&output);
    assert!(!text.contains("deprecated HTTP+SSE"), "{text}");
    assert!(!text.contains("Echo"), "{text}");
    let listing = serde_json::from_slice::<serde_json::Value>(&output.stdout)
        .map(|value| value["servers"][0]["state"].clone())
        .unwrap_or_default();
    assert_ne!(listing, "connected", "{text}");
    drop(server);
    scratch.assert_no_leftovers();
}

#[test]
fn an_sse_endpoint_on_another_origin_is_refused() {
    let (output, requests) = against("sse-foreign", "transport = \"sse\"");
    assert_exit(&output, 3);
    let err = stderr(&output);
    assert!(
        err.contains("http://elsewhere.invalid/message?sessionId=1")
            && err.contains("not on the origin of its SSE URL"),
        "{}",
        describe(&output)
    );
    assert!(
        requests.iter().all(|line| !line.starts_with("POST")),
        "nothing may be POSTed: {requests:?}"
    );
    assert!(
        requests
            .iter()
            .any(|line| line.starts_with("GET sse accept=text/event-stream")),
        "{requests:?}"
    );
}

/// A second configuration file beside the first, for a pinned variant of server `name`.
fn config_with(scratch: &Scratch, name: &str, url: &str, extra: &str) -> PathBuf {
    let path = scratch.path().join("pinned.toml");
    std::fs::write(&path, format!("[servers.{name}]\nurl = {url:?}\n{extra}\n")).unwrap();
    path
}

#[test]
fn the_python_sdk_over_http_speaks_modern_and_legacy_when_pinned() {
    let scratch = Scratch::new();
    let server = python(&scratch);
    let config = config(&scratch, "py", &server.url, "");
    let listing = tools_json(&scratch, &config);
    assert_eq!(listing["era"], "modern", "{listing}");
    assert_eq!(listing["protocol_version"], "2026-07-28");
    assert_eq!(listing["server_info"]["name"], "warden-py-sdk-peer");
    let output = scratch.run(
        &[
            "--config",
            config.to_str().unwrap(),
            "call",
            "--yes",
            "py/add",
            "--args",
            r#"{"a":2,"b":40}"#,
        ],
        LIMIT,
    );
    assert_exit(&output, 0);
    assert!(stdout(&output).contains("42"), "{}", describe(&output));
    let legacy = config_with(&scratch, "py", &server.url, "era = \"legacy\"");
    let output = scratch.run(
        &["--config", legacy.to_str().unwrap(), "tools", "--json"],
        LIMIT,
    );
    assert_exit(&output, 0);
    assert_eq!(
        json(&output)["servers"][0]["era"],
        "legacy",
        "{}",
        describe(&output)
    );
    let output = scratch.run(
        &[
            "--config",
            legacy.to_str().unwrap(),
            "call",
            "--yes",
            "py/shout",
            "--args",
            r#"{"text":"hey"}"#,
        ],
        LIMIT,
    );
    assert_exit(&output, 0);
    assert!(stdout(&output).contains("HEY"), "{}", describe(&output));
    drop(server);
    scratch.assert_no_leftovers();
}

#[test]
fn a_dropped_server_is_reconnected_and_an_undelivered_call_sent_again() {
    let (output, requests) = against(
        "drop",
        "[servers.h.reconnect]\ninitial_delay = \"50ms\"\nattempts = 5",
    );
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("echo from session s2: hi"),
        "{}",
        describe(&output)
    );
    let initializes = requests
        .iter()
        .filter(|r| r.starts_with("POST initialize"))
        .count();
    assert_eq!(
        initializes, 4,
        "one, then three while it was down: {requests:?}"
    );
}

#[test]
fn a_dropped_server_is_marked_failed_when_the_reconnect_budget_is_spent() {
    let (output, requests) = against(
        "drop",
        "[servers.h.reconnect]\ninitial_delay = \"50ms\"\nattempts = 2",
    );
    assert_exit(&output, 3);
    assert!(
        stderr(&output).contains(
            "marked failed after 2 reconnect attempt(s); last error: the server answered HTTP 503"
        ),
        "{}",
        describe(&output)
    );
    let calls = requests
        .iter()
        .filter(|r| r.starts_with("POST tools/call"))
        .count();
    assert_eq!(calls, 1, "{requests:?}");
}

#[test]
fn warden_tools_shows_attempts_and_tells_needs_authorization_from_down() {
    let scratch = Scratch::new();
    let flap = HttpServer::hostile(&scratch, "flap");
    let unauthorized = HttpServer::hostile(&scratch, "unauthorized");
    let config = scratch.config(&format!(
        "[servers.flap]\nurl = {:?}\n[servers.flap.reconnect]\ninitial_delay = \"50ms\"\n\n\
         [servers.auth]\nurl = {:?}\n\n[servers.gone]\nurl = \"http://127.0.0.1:9/mcp\"\n\
         [servers.gone.reconnect]\nconnect_attempts = 2\ninitial_delay = \"50ms\"\n",
        flap.url, unauthorized.url
    ));
    let output = scratch.run(
        &["--config", config.to_str().unwrap(), "tools", "--json"],
        LIMIT,
    );
    let listing = json(&output);
    let server = |name: &str| {
        listing["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(server("flap")["state"], "connected", "{listing}");
    assert_eq!(server("flap")["attempts"], 3, "{listing}");
    assert_eq!(server("auth")["state"], "needs_authorization", "{listing}");
    assert_eq!(server("gone")["state"], "down", "{listing}");
    assert!(
        server("gone")["reason"]
            .as_str()
            .unwrap()
            .starts_with("down after 2 attempt(s)"),
        "{listing}"
    );
    let text = scratch.run(&["--config", config.to_str().unwrap(), "tools"], LIMIT);
    assert!(
        stdout(&text).contains("auth: NEEDS AUTHORIZATION: "),
        "{}",
        describe(&text)
    );
    drop((flap, unauthorized));
    scratch.assert_no_leftovers();
}

#[test]
fn a_strict_modern_server_gets_headers_that_agree_with_the_body() {
    let scratch = Scratch::new();
    let server = HttpServer::hostile(&scratch, "modern");
    let config = config(&scratch, "h", &server.url, "");
    let listing = tools_json(&scratch, &config);
    assert_eq!(listing["era"], "modern", "{listing}");
    let names: Vec<&str> = listing["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["echo", "ask"],
        "the tool with a broken x-mcp-header is left out"
    );
    let output = scratch.run(
        &[
            "--config",
            config.to_str().unwrap(),
            "call",
            "--yes",
            "h/echo",
            "--args",
            r#"{"text":"hi","region":"Île de France"}"#,
        ],
        LIMIT,
    );
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("echo: hi from Île de France"),
        "{}",
        describe(&output)
    );
    assert!(
        stderr(&output).contains("tool left out: x-mcp-header \"Score\""),
        "{}",
        describe(&output)
    );
    let requests = server.requests();
    // The very first request was refused with -32022 and sent again.
    assert_eq!(
        requests
            .iter()
            .filter(|r| r.starts_with("POST server/discover"))
            .count(),
        3,
        "{requests:?}"
    );
    assert!(
        requests.contains(
            &"POST tools/call version=2026-07-28 mcp-method=tools/call mcp-name=echo \
              mcp-param-region==?base64?w45sZSBkZSBGcmFuY2U=?="
                .to_owned()
        ),
        "{requests:?}"
    );
    drop(server);
    scratch.assert_no_leftovers();
}

/// How many tool lists `server` was asked for.
fn lists_asked(server: &HttpServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.starts_with("POST tools/list"))
        .count()
}

/// A 2026-07-28 server's list hints decide whether the catalogue cache answers for it:
/// a `public` list with a lifetime is shown from the cache (the server is not asked, and
/// the listing says `cached`) until the lifetime ends; a list without one, or a `private`
/// one whose authorization the definition does not fix, is read from the server at every
/// listing (the controls).
#[test]
fn a_modern_servers_list_lifetime_decides_whether_its_list_is_read_from_the_cache() {
    let scratch = Scratch::new();
    let listing = |server: &HttpServer, name: &str| {
        let config = config(&scratch, name, &server.url, "");
        tools_json(&scratch, &config)
    };

    let public = HttpServer::hostile_with(
        &scratch,
        "modern",
        &[
            ("WARDEN_TEST_LIST_TTL_MS", "60000"),
            ("WARDEN_TEST_LIST_SCOPE", "public"),
        ],
    );
    let first = listing(&public, "pub");
    assert_eq!(first["state"], "connected", "{first}");
    assert_eq!(lists_asked(&public), 1);
    let second = listing(&public, "pub");
    assert_eq!(second["state"], "cached", "{second}");
    assert_eq!(second["tools"], first["tools"], "{second}");
    assert_eq!(lists_asked(&public), 1, "answered from the cache");
    // A call starts the server on first use, as a cached local server is started.
    let output = scratch.run(
        &[
            "--config",
            config(&scratch, "pub", &public.url, "").to_str().unwrap(),
            "call",
            "--yes",
            "pub/echo",
            "--args",
            r#"{"text":"hi","region":"north"}"#,
        ],
        LIMIT,
    );
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("echo: hi from north"),
        "{}",
        describe(&output)
    );
    assert_eq!(
        lists_asked(&public),
        2,
        "its list is read live at its start"
    );

    let short = HttpServer::hostile_with(
        &scratch,
        "modern",
        &[
            ("WARDEN_TEST_LIST_TTL_MS", "1500"),
            ("WARDEN_TEST_LIST_SCOPE", "public"),
        ],
    );
    listing(&short, "short");
    std::thread::sleep(Duration::from_millis(1600));
    let again = listing(&short, "short");
    assert_eq!(again["state"], "connected", "{again}");
    assert_eq!(lists_asked(&short), 2, "asked again after its lifetime");

    let private = HttpServer::hostile_with(
        &scratch,
        "modern",
        &[
            ("WARDEN_TEST_LIST_TTL_MS", "60000"),
            ("WARDEN_TEST_LIST_SCOPE", "private"),
        ],
    );
    let unhinted = HttpServer::hostile(&scratch, "modern");
    for (server, name) in [(&private, "priv"), (&unhinted, "zero")] {
        listing(server, name);
        let again = listing(server, name);
        assert_eq!(again["state"], "connected", "{name}: {again}");
        assert_eq!(
            lists_asked(server),
            2,
            "{name}: read from the server each time"
        );
    }
    drop((public, short, private, unhinted));
    scratch.assert_no_leftovers();
}

#[test]
fn a_broken_modern_stream_reissues_reads_under_a_new_id_and_reports_calls() {
    let scratch = Scratch::new();
    let server = HttpServer::hostile(&scratch, "modern-broken");
    let config = config(&scratch, "h", &server.url, "era = \"modern\"");
    let output = call_echo(&scratch, &config);
    assert_exit(&output, 3);
    assert!(
        stderr(&output).contains("the response stream ended before the answer arrived"),
        "{}",
        describe(&output)
    );
    let requests = server.requests();
    let broken: Vec<&String> = requests
        .iter()
        .filter(|r| r.ends_with("(stream broken)"))
        .collect();
    assert_eq!(
        broken.len(),
        2,
        "the first tools/list and the one tools/call: {requests:?}"
    );
    assert!(broken[1].starts_with("POST tools/call"), "{requests:?}");
    // tools/list was sent again (under a new id) and answered; tools/call was not repeated.
    assert_eq!(
        requests
            .iter()
            .filter(|r| r.starts_with("POST tools/list"))
            .count(),
        2,
        "{requests:?}"
    );
    assert_eq!(
        requests
            .iter()
            .filter(|r| r.starts_with("POST tools/call"))
            .count(),
        1,
        "{requests:?}"
    );
    drop(server);
    scratch.assert_no_leftovers();
}

#[test]
fn a_modern_call_that_times_out_is_cancelled_by_closing_its_stream() {
    let scratch = Scratch::new();
    let server = HttpServer::hostile(&scratch, "modern-stall");
    let config = config(
        &scratch,
        "h",
        &server.url,
        "era = \"modern\"\n[servers.h.timeout]\ncall = \"1s\"",
    );
    let output = call_echo(&scratch, &config);
    assert_exit(&output, 3);
    assert!(
        stderr(&output).contains("no answer within 1s (the request was cancelled)"),
        "{}",
        describe(&output)
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !server.log_text().contains("stream closed by the client") {
        assert!(Instant::now() < deadline, "{:?}", server.requests());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!server.log_text().contains("notifications/cancelled"));
    drop(server);
    scratch.assert_no_leftovers();
}

/// Runs `openssl` with `args` in `dir`, failing the test if it fails.
fn openssl(dir: &std::path::Path, args: &[&str]) {
    let status = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("the openssl command line tool is needed for the TLS test");
    assert!(status.success(), "openssl {args:?} failed");
}

#[test]
fn a_certificate_for_another_name_is_an_error_that_says_so() {
    let scratch = Scratch::new();
    let dir = scratch.path();
    // A CA the test trusts (SSL_CERT_FILE), and a certificate it signed for another name.
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=Warden Test CA",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "leaf.key",
            "-out",
            "leaf.csr",
            "-subj",
            "/CN=wrong.example",
        ],
    );
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=DNS:wrong.example\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "leaf.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    );
    let port = free_port();
    let mut command = Command::new("openssl");
    command
        .args([
            "s_server", "-cert", "leaf.pem", "-key", "leaf.key", "-www", "-accept",
        ])
        .arg(format!("127.0.0.1:{port}"))
        .current_dir(dir);
    let server = HttpServer::peer(&scratch, command, port, "/mcp");
    let url = format!("https://localhost:{port}/mcp");
    let config = config(
        &scratch,
        "tls",
        &url,
        "[servers.tls.reconnect]\nconnect_attempts = 1",
    );
    let mut warden = scratch.warden(&["--config", config.to_str().unwrap(), "tools"]);
    warden.env("SSL_CERT_FILE", dir.join("ca.pem"));
    let output = support::run_with_limit(warden, LIMIT);
    assert!(
        stdout(&output).contains("the server's certificate does not match its host name"),
        "{}",
        describe(&output)
    );
    drop(server);
    scratch.assert_no_leftovers();
}
