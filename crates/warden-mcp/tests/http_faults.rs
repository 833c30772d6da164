//! A remote server's faults that the simulator's remote world found mishandled (decision
//! 0041, revision 2), each replayed here against a scripted server answering in memory
//! through the HTTP client's transport seam (`ConnectOptions::http_transport`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use warden_config::{EraPreference, HttpSettings, ReconnectSpec, ServerSpec, TransportSpec};
use warden_mcp::http::reconnect::{Backoff, SeededRng, TokioClock};
use warden_mcp::{CallError, ConnectOptions};
use warden_net::reqwest;
use warden_net::{NetError, Transport};

/// What a scripted server is asked: the method, the JSON body (null for a GET), the
/// `Last-Event-ID` and `Mcp-Session-Id` headers.
struct Asked {
    http: String,
    body: Value,
    last_event: Option<String>,
    session: Option<String>,
}

type Handler =
    dyn Fn(Asked) -> BoxFuture<'static, Result<reqwest::Response, NetError>> + Send + Sync;

/// A server that is a function of each request, counting the JSON-RPC methods it got.
struct Scripted {
    handler: Box<Handler>,
    seen: Mutex<Vec<String>>,
}

impl std::fmt::Debug for Scripted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Scripted")
    }
}

impl Scripted {
    fn count(&self, method: &str) -> usize {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|m| *m == method)
            .count()
    }
}

/// The transport handed to the client: a shared scripted server.
#[derive(Debug)]
struct Wire(Arc<Scripted>);

impl Transport for Wire {
    fn send(
        &self,
        request: reqwest::Request,
    ) -> BoxFuture<'static, Result<reqwest::Response, NetError>> {
        let body = request
            .body()
            .and_then(reqwest::Body::as_bytes)
            .and_then(|bytes| serde_json::from_slice(bytes).ok())
            .unwrap_or(Value::Null);
        let method = body["method"].as_str().unwrap_or(request.method().as_str());
        self.0.seen.lock().unwrap().push(method.to_owned());
        let asked = Asked {
            http: request.method().as_str().to_owned(),
            body,
            last_event: request
                .headers()
                .get("last-event-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            session: request
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
        };
        (self.0.handler)(asked)
    }
}

fn response(status: u16, headers: &[(&str, &str)], body: reqwest::Body) -> reqwest::Response {
    let mut builder = http::Response::builder().status(status);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    reqwest::Response::from(builder.body(body).unwrap())
}

fn json(message: Value, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut all = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    response(200, &all, reqwest::Body::from(message.to_string()))
}

fn status(code: u16) -> reqwest::Response {
    response(code, &[], reqwest::Body::from(Bytes::new()))
}

/// A 2025-11-25 `initialize` answer opening session `s1`, and the answers every session
/// needs besides the calls (`notifications/initialized`, no event stream of its own).
fn session_basics(asked: &Asked) -> Option<reqwest::Response> {
    match (asked.http.as_str(), asked.body["method"].as_str()) {
        ("POST", Some("initialize")) => Some(json(
            json!({"jsonrpc": "2.0", "id": asked.body["id"], "result": {
                "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "scripted", "version": "1"}}}),
            &[("mcp-session-id", "s1")],
        )),
        ("POST", Some("notifications/initialized")) => Some(status(202)),
        ("GET", _) if asked.last_event.is_none() => Some(status(405)),
        ("DELETE", _) => Some(status(200)),
        _ => None,
    }
}

fn spec(era: EraPreference, reconnect: ReconnectSpec) -> ServerSpec {
    let toml = r#"
        [servers.remote]
        url = "https://remote.test.invalid/mcp"
    "#;
    let env = warden_config::Environment::from_vars(
        "/test".into(),
        BTreeMap::from([("HOME".to_owned(), "/test/home".to_owned())]),
    )
    .expect("an environment");
    let mut spec = warden_config::parse_text(std::path::Path::new("warden.toml"), toml, &env)
        .expect("a remote server's configuration")
        .servers
        .remove(0);
    let TransportSpec::Http { settings, .. } = &mut spec.transport else {
        panic!("not a remote server");
    };
    *settings = HttpSettings {
        reconnect,
        ..settings.clone()
    };
    spec.era = era;
    spec
}

fn options(server: &Arc<Scripted>) -> ConnectOptions {
    ConnectOptions {
        http_transport: Some(Arc::new(Wire(Arc::clone(server)))),
        backoff: Some(Backoff::new(Arc::new(TokioClock), SeededRng::new(7))),
        ..ConnectOptions::default()
    }
}

fn quick(connect_attempts: u32, attempts: u32) -> ReconnectSpec {
    ReconnectSpec {
        connect_attempts,
        attempts,
        initial_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(2),
    }
}

fn arguments() -> Option<Map<String, Value>> {
    Some(Map::from_iter([("text".to_owned(), json!("hi"))]))
}

/// A call's event stream broke after its first event and the server no longer had it
/// when the client came back with `Last-Event-ID` (404). The 404 was taken for an
/// expired session: the client initialised again and sent the `tools/call` a second
/// time, though the server had it (remote world seeds 184 and 195). Now it fails as a
/// broken stream, sent once. The control: a 404 answering the call's own POST is an
/// expired session, initialised again once, and the call goes through.
#[tokio::test]
async fn a_call_whose_stream_cannot_be_resumed_is_not_sent_again() {
    let server = Arc::new(Scripted {
        handler: Box::new(|asked| {
            Box::pin(async move {
                if let Some(answer) = session_basics(&asked) {
                    return Ok(answer);
                }
                if asked.http == "GET" {
                    return Ok(status(404)); // the resumption: no such stream
                }
                let stream = futures::stream::iter(vec![
                    Ok(Bytes::from("id: e1\ndata: \n\n")),
                    Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionReset,
                        "connection reset by peer",
                    )),
                ]);
                Ok(response(
                    200,
                    &[("content-type", "text/event-stream")],
                    reqwest::Body::wrap_stream(stream),
                ))
            })
        }),
        seen: Mutex::default(),
    });
    let connection =
        warden_mcp::http::connect(&spec(EraPreference::Legacy, quick(1, 2)), &options(&server))
            .await
            .expect("connected");
    let error = connection
        .call_tool("echo", arguments(), Duration::from_secs(10))
        .await
        .expect_err("a broken stream");
    assert!(error.to_string().contains("resuming it failed"), "{error}");
    assert_eq!(server.count("tools/call"), 1, "the call was sent again");
    assert_eq!(server.count("initialize"), 1, "initialised again");

    // The control: the session expired (404 to the POST itself): initialised again once,
    // the call sent again (it was not processed) and answered.
    let expired = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&expired);
    let server = Arc::new(Scripted {
        handler: Box::new(move |asked| {
            let first =
                asked.body["method"] == "tools/call" && counted.fetch_add(1, Ordering::SeqCst) == 0;
            Box::pin(async move {
                if let Some(answer) = session_basics(&asked) {
                    return Ok(answer);
                }
                if first {
                    return Ok(status(404));
                }
                Ok(json(
                    json!({"jsonrpc": "2.0", "id": asked.body["id"],
                           "result": {"content": [{"type": "text", "text": "hi"}]}}),
                    &[],
                ))
            })
        }),
        seen: Mutex::default(),
    });
    let connection =
        warden_mcp::http::connect(&spec(EraPreference::Legacy, quick(1, 2)), &options(&server))
            .await
            .expect("connected");
    let outcome = connection
        .call_tool("echo", arguments(), Duration::from_secs(10))
        .await
        .expect("answered after the session was opened again");
    assert_eq!(outcome.content[0]["text"], "hi");
    assert_eq!(server.count("initialize"), 2);
    assert_eq!(server.count("tools/call"), 2);
}

/// A call past its deadline on a 2025-11-25 session returned only once the server had
/// accepted its `notifications/cancelled`, up to 2 s later, although the caller's deadline
/// had passed (remote world seed 2). Now the caller is told at its deadline and the
/// notice goes out on its own, still delivered.
#[tokio::test]
async fn a_call_past_its_deadline_returns_at_once_and_is_still_cancelled() {
    let server = Arc::new(Scripted {
        handler: Box::new(|asked| {
            Box::pin(async move {
                if let Some(answer) = session_basics(&asked) {
                    return Ok(answer);
                }
                // The call and the cancellation alike: a server too busy to answer.
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok(status(202))
            })
        }),
        seen: Mutex::default(),
    });
    let connection =
        warden_mcp::http::connect(&spec(EraPreference::Legacy, quick(1, 0)), &options(&server))
            .await
            .expect("connected");
    let started = Instant::now();
    let error = connection
        .call_tool("echo", arguments(), Duration::from_millis(200))
        .await
        .expect_err("no answer");
    let took = started.elapsed();
    assert!(matches!(error, CallError::Timeout { .. }), "{error}");
    assert!(
        took < Duration::from_millis(1500),
        "returned after {took:?}"
    );
    // The cancellation still reaches the server.
    for _ in 0..100 {
        if server.count("notifications/cancelled") == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(server.count("notifications/cancelled"), 1);
}

/// A refused `server/discover` was sent again at once inside one try (as if a stream had
/// broken), so the first connect opened twice per try, without back-off, beyond
/// `connect_attempts` (remote world seed 178). Now the connect policy alone retries it.
#[tokio::test]
async fn a_refused_discover_is_tried_as_often_as_the_policy_says() {
    let server = Arc::new(Scripted {
        handler: Box::new(|_| {
            Box::pin(async {
                Err(NetError::Request(
                    "connection refused: error sending request (test)".into(),
                ))
            })
        }),
        seen: Mutex::default(),
    });
    let failure =
        warden_mcp::http::connect(&spec(EraPreference::Modern, quick(3, 0)), &options(&server))
            .await
            .err()
            .expect("refused");
    assert!(
        failure.error.to_string().contains("refused"),
        "{}",
        failure.error
    );
    assert_eq!(server.count("server/discover"), 3);

    // The control: a stream that broke after its head is still sent again once (it only
    // reads), inside the same try.
    let server = Arc::new(Scripted {
        handler: Box::new(|asked| {
            let answer = json(
                json!({"jsonrpc": "2.0", "id": asked.body["id"], "result": {
                    "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                    "serverInfo": {"name": "scripted", "version": "1"}}}),
                &[],
            );
            Box::pin(async move { Ok(answer) })
        }),
        seen: Mutex::default(),
    });
    let broke = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&broke);
    let inner = Arc::clone(&server);
    let breaking = Arc::new(Scripted {
        handler: Box::new(move |asked| {
            if counted.fetch_add(1, Ordering::SeqCst) == 0 {
                let stream = futures::stream::iter(vec![Err::<Bytes, _>(std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "connection reset by peer",
                ))]);
                return Box::pin(async move {
                    Ok(response(
                        200,
                        &[("content-type", "text/event-stream")],
                        reqwest::Body::wrap_stream(stream),
                    ))
                });
            }
            (inner.handler)(asked)
        }),
        seen: Mutex::default(),
    });
    warden_mcp::http::connect(
        &spec(EraPreference::Modern, quick(1, 0)),
        &options(&breaking),
    )
    .await
    .expect("sent again after the broken stream");
    assert_eq!(breaking.count("server/discover"), 2);
}

/// A session a reconnect replaced was dropped without `DELETE`, left for the server to
/// expire (every reconnect of a 2025-11-25 server left one: remote world seeds 5894 and
/// 7252). Now it is deleted when dropped; the one in use at close is deleted once.
#[tokio::test]
async fn a_session_a_reconnect_replaced_is_deleted() {
    let opened = Arc::new(AtomicUsize::new(0));
    let deleted = Arc::new(Mutex::new(Vec::<String>::new()));
    let (opens, deletes) = (Arc::clone(&opened), Arc::clone(&deleted));
    let server = Arc::new(Scripted {
        handler: Box::new(move |asked| {
            let (opens, deletes) = (Arc::clone(&opens), Arc::clone(&deletes));
            Box::pin(async move {
                match (asked.http.as_str(), asked.body["method"].as_str()) {
                    ("POST", Some("initialize")) => {
                        let n = opens.fetch_add(1, Ordering::SeqCst) + 1;
                        Ok(json(
                            json!({"jsonrpc": "2.0", "id": asked.body["id"], "result": {
                                "protocolVersion": "2025-11-25", "capabilities": {},
                                "serverInfo": {"name": "scripted", "version": "1"}}}),
                            &[("mcp-session-id", &format!("s{n}"))],
                        ))
                    }
                    ("DELETE", _) => {
                        deletes
                            .lock()
                            .unwrap()
                            .push(asked.session.unwrap_or_default());
                        Ok(status(200))
                    }
                    // The first call breaks the server (502): a reconnect.
                    ("POST", Some("tools/call")) if asked.session.as_deref() == Some("s1") => {
                        Ok(status(502))
                    }
                    ("POST", Some("tools/call")) => Ok(json(
                        json!({"jsonrpc": "2.0", "id": asked.body["id"],
                               "result": {"content": []}}),
                        &[],
                    )),
                    ("GET", _) => Ok(status(405)),
                    _ => Ok(status(202)),
                }
            })
        }),
        seen: Mutex::default(),
    });
    let connection =
        warden_mcp::http::connect(&spec(EraPreference::Legacy, quick(1, 2)), &options(&server))
            .await
            .expect("connected");
    let error = connection
        .call_tool("echo", arguments(), Duration::from_secs(5))
        .await
        .expect_err("a 502, not repeated");
    assert!(error.to_string().contains("not repeated"), "{error}");
    for _ in 0..100 {
        if !deleted.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(*deleted.lock().unwrap(), ["s1"], "the replaced session");
    connection
        .call_tool("echo", arguments(), Duration::from_secs(5))
        .await
        .expect("answered on the new session");
    connection.close().await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(*deleted.lock().unwrap(), ["s1", "s2"], "each deleted once");
}

/// A 2025-11-25 call whose caller stopped waiting before its deadline (a gateway client
/// cancelled it, a turn ran out: the call's future dropped) was never cancelled upstream:
/// the remote server ran it to its end (gateway world with a remote upstream, decision
/// 0041 revision 3, seed 53). Now its `notifications/cancelled` goes out. The control: a
/// call answered in time is not cancelled.
#[tokio::test]
async fn a_call_its_caller_abandons_is_cancelled_upstream() {
    let server = Arc::new(Scripted {
        handler: Box::new(|asked| {
            Box::pin(async move {
                if let Some(answer) = session_basics(&asked) {
                    return Ok(answer);
                }
                if asked.body["method"] == "notifications/cancelled" {
                    return Ok(status(202));
                }
                if asked.body["params"]["arguments"]["text"] == "slow" {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                }
                Ok(json(
                    json!({"jsonrpc": "2.0", "id": asked.body["id"],
                           "result": {"content": [{"type": "text", "text": "done"}]}}),
                    &[],
                ))
            })
        }),
        seen: Mutex::default(),
    });
    let connection =
        warden_mcp::http::connect(&spec(EraPreference::Legacy, quick(1, 0)), &options(&server))
            .await
            .expect("connected");
    // The control: answered, nothing cancelled.
    connection
        .call_tool("echo", arguments(), Duration::from_secs(10))
        .await
        .expect("answered");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(server.count("notifications/cancelled"), 0);
    // The caller gives up after 100 ms, long before the call's 10 s deadline.
    let slow = Some(Map::from_iter([("text".to_owned(), json!("slow"))]));
    let abandoned = tokio::time::timeout(
        Duration::from_millis(100),
        connection.call_tool("echo", slow, Duration::from_secs(10)),
    )
    .await;
    assert!(abandoned.is_err(), "the call should still be running");
    for _ in 0..100 {
        if server.count("notifications/cancelled") == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        server.count("notifications/cancelled"),
        1,
        "never cancelled"
    );
}

/// A call the server refused with 503, or whose session it did not know (404), twice (so
/// also after the reconnect or re-initialisation) failed as "may have run", and the audit
/// log said it was executed, although the server had said it did not take it (gateway
/// world with a remote upstream, seeds 4 and 37). Now it fails as never sent. The control:
/// a 500 (the server took it and failed) may have run.
#[tokio::test]
async fn a_call_the_server_would_not_take_is_known_not_sent() {
    for (code, sent) in [(503, false), (404, false), (500, true)] {
        let server = Arc::new(Scripted {
            handler: Box::new(move |asked| {
                Box::pin(async move {
                    if let Some(answer) = session_basics(&asked) {
                        return Ok(answer);
                    }
                    Ok(status(code))
                })
            }),
            seen: Mutex::default(),
        });
        let connection =
            warden_mcp::http::connect(&spec(EraPreference::Legacy, quick(1, 1)), &options(&server))
                .await
                .expect("connected");
        let error = connection
            .call_tool("echo", arguments(), Duration::from_secs(10))
            .await
            .expect_err("refused");
        assert_eq!(
            error.may_have_reached_server(),
            sent,
            "HTTP {code}: {error}"
        );
    }
}

/// A request as a server saw it: the session it named, and its id.
type SessionAndId = (Option<String>, Value);

/// A call cut short by its deadline after a reconnect had replaced its session had its
/// `notifications/cancelled` sent on the new session, naming an id that there belongs to
/// another request, which the server then stopped (gateway world with a remote upstream,
/// seed 263). Now it names the request on the session it was sent on.
#[tokio::test]
async fn a_cancellation_goes_to_the_session_its_request_was_sent_on() {
    let sessions = Arc::new(AtomicUsize::new(0));
    let cancels: Arc<Mutex<Vec<SessionAndId>>> = Arc::default();
    let calls: Arc<Mutex<Vec<SessionAndId>>> = Arc::default();
    let (opened, cancelled, called) = (
        Arc::clone(&sessions),
        Arc::clone(&cancels),
        Arc::clone(&calls),
    );
    let server = Arc::new(Scripted {
        handler: Box::new(move |asked| {
            let (opened, cancelled, called) = (
                Arc::clone(&opened),
                Arc::clone(&cancelled),
                Arc::clone(&called),
            );
            Box::pin(async move {
                match asked.body["method"].as_str() {
                    Some("initialize") => {
                        let id = format!("s{}", opened.fetch_add(1, Ordering::SeqCst) + 1);
                        return Ok(json(
                            json!({"jsonrpc": "2.0", "id": asked.body["id"], "result": {
                                "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                                "serverInfo": {"name": "scripted", "version": "1"}}}),
                            &[("mcp-session-id", &id)],
                        ));
                    }
                    Some("notifications/cancelled") => {
                        let id = asked.body["params"]["requestId"].clone();
                        cancelled.lock().unwrap().push((asked.session, id));
                        return Ok(status(202));
                    }
                    Some("tools/call") => {
                        let text = asked.body["params"]["arguments"]["text"].clone();
                        called
                            .lock()
                            .unwrap()
                            .push((asked.session.clone(), asked.body["id"].clone()));
                        if text == "boom" {
                            return Ok(status(500));
                        }
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        return Ok(status(202));
                    }
                    _ => {}
                }
                Ok(session_basics(&asked).unwrap_or_else(|| status(202)))
            })
        }),
        seen: Mutex::default(),
    });
    let connection = Arc::new(
        warden_mcp::http::connect(&spec(EraPreference::Legacy, quick(1, 2)), &options(&server))
            .await
            .expect("connected"),
    );
    let slow = {
        let connection = Arc::clone(&connection);
        tokio::spawn(async move {
            let slow = Some(Map::from_iter([("text".to_owned(), json!("slow"))]));
            connection
                .call_tool("echo", slow, Duration::from_millis(400))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let boom = Some(Map::from_iter([("text".to_owned(), json!("boom"))]));
    let _ = connection
        .call_tool("echo", boom, Duration::from_secs(5))
        .await;
    assert_eq!(sessions.load(Ordering::SeqCst), 2, "no reconnect");
    assert!(matches!(
        slow.await.unwrap(),
        Err(CallError::Timeout { .. })
    ));
    for _ in 0..100 {
        if !cancels.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let slow_call = calls.lock().unwrap()[0].clone();
    assert_eq!(slow_call.0.as_deref(), Some("s1"));
    let cancels = cancels.lock().unwrap().clone();
    assert!(
        cancels.contains(&slow_call),
        "the slow call was not cancelled on its own session: {cancels:?}"
    );
    assert!(
        cancels
            .iter()
            .all(|(session, _)| session.as_deref() == Some("s1")),
        "a cancellation went to another session: {cancels:?}"
    );
}

/// While one request initialised an expired 2025-11-25 session again, the session had no
/// id, and a concurrent request went out without one (answered 400, and the call failed
/// as "may have run"); every request the expired session refused also initialised its
/// own new session (gateway world with a remote upstream, seed 9999). Now requests wait
/// for the re-initialisation, and one serves them all.
#[tokio::test]
async fn one_reinitialisation_serves_every_request_an_expired_session_refused() {
    let sessions = Arc::new(AtomicUsize::new(0));
    let sessionless = Arc::new(AtomicUsize::new(0));
    let (opened, bare) = (Arc::clone(&sessions), Arc::clone(&sessionless));
    let server = Arc::new(Scripted {
        handler: Box::new(move |asked| {
            let (opened, bare) = (Arc::clone(&opened), Arc::clone(&bare));
            Box::pin(async move {
                match asked.body["method"].as_str() {
                    Some("initialize") => {
                        let n = opened.fetch_add(1, Ordering::SeqCst) + 1;
                        if n > 1 {
                            // Opening again takes a while: the window a request may fall in.
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        return Ok(json(
                            json!({"jsonrpc": "2.0", "id": asked.body["id"], "result": {
                                "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                                "serverInfo": {"name": "scripted", "version": "1"}}}),
                            &[("mcp-session-id", &format!("s{n}"))],
                        ));
                    }
                    Some("tools/call") => match asked.session.as_deref() {
                        None => {
                            bare.fetch_add(1, Ordering::SeqCst);
                            return Ok(status(400));
                        }
                        Some("s1") => {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            return Ok(status(404));
                        }
                        Some(_) => {
                            return Ok(json(
                                json!({"jsonrpc": "2.0", "id": asked.body["id"],
                                       "result": {"content": [{"type": "text", "text": "hi"}]}}),
                                &[],
                            ));
                        }
                    },
                    _ => {}
                }
                Ok(session_basics(&asked).unwrap_or_else(|| status(202)))
            })
        }),
        seen: Mutex::default(),
    });
    let connection = Arc::new(
        warden_mcp::http::connect(&spec(EraPreference::Legacy, quick(1, 0)), &options(&server))
            .await
            .expect("connected"),
    );
    let call = |after: u64| {
        let connection = Arc::clone(&connection);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(after)).await;
            connection
                .call_tool("echo", arguments(), Duration::from_secs(10))
                .await
        })
    };
    // Two calls the expired session refuses, and one that comes while it is opened again.
    let calls = [call(0), call(0), call(50)];
    for call in calls {
        call.await.unwrap().expect("answered on the new session");
    }
    assert_eq!(
        sessionless.load(Ordering::SeqCst),
        0,
        "a call went out without a session"
    );
    assert_eq!(
        sessions.load(Ordering::SeqCst),
        2,
        "more than one re-initialisation"
    );
}
