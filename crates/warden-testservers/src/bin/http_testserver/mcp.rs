//! The server's answers, per mode.

use std::convert::Infallible;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use serde_json::{Value, json};

/// Bytes sent by `big-body` and `big-event`: more than any test's cap.
const BIG: usize = 4 * 1024 * 1024;
/// POSTs `drop` fails once its tools were listed.
const DROPPED_POSTS: usize = 3;
/// Requests `flap` fails before it works.
const FLAPS: usize = 2;

/// One deviation from a correct server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// None.
    Good,
    /// Every POST is redirected (307) to another host.
    Redirect,
    /// Answers `text/html`.
    ContentType,
    /// `tools/call` answers a JSON body of 4 MiB.
    BigBody,
    /// `tools/call` answers one server-sent event of 4 MiB.
    BigEvent,
    /// `tools/call` sends the headers of an event stream, then nothing, for ever.
    Stall,
    /// Session `s1` expires (404) at its first `tools/call`; later sessions work.
    Expire,
    /// The first two requests get 503; then it works.
    Flap,
    /// `tools/call` answers with `Content-Type: application/json` but an event-stream body,
    /// and `tools/list` answers with the id of another request.
    Mismatch,
    /// Every request gets 401 with a `WWW-Authenticate` challenge.
    Unauthorized,
    /// `tools/call` sends a priming event (`id`, `retry: 300`) and closes; the answer comes
    /// on `GET` with `Last-Event-ID`.
    Resume,
    /// After the first `tools/list` the server is down for the next three POSTs (503), then
    /// back: a dropped server that a client should reconnect to.
    Drop,
    /// A strict 2026-07-28 server (see [`crate::modern`]).
    Modern,
    /// `modern` without the -32022, whose response streams break: the first `tools/list`
    /// and every `tools/call` get an event stream that ends without an answer.
    ModernBroken,
    /// `modern` without the -32022, whose `tools/call` stream stalls after its headers; it
    /// logs `stream closed by the client` when the client closes it (the 2026-07-28
    /// cancellation).
    ModernStall,
    /// A deprecated HTTP+SSE server whose `GET` stream's `endpoint` event names another
    /// origin (`http://elsewhere.invalid/message`), which a client must refuse.
    SseForeign,
}

impl Mode {
    /// Every mode's name.
    pub const NAMES: [&str; 16] = [
        "good",
        "redirect",
        "content-type",
        "big-body",
        "big-event",
        "stall",
        "expire",
        "flap",
        "mismatch",
        "unauthorized",
        "resume",
        "drop",
        "modern",
        "modern-broken",
        "modern-stall",
        "sse-foreign",
    ];

    /// The mode named `name`.
    pub fn parse(name: &str) -> Option<Mode> {
        Some(match name {
            "good" => Mode::Good,
            "redirect" => Mode::Redirect,
            "content-type" => Mode::ContentType,
            "big-body" => Mode::BigBody,
            "big-event" => Mode::BigEvent,
            "stall" => Mode::Stall,
            "expire" => Mode::Expire,
            "flap" => Mode::Flap,
            "mismatch" => Mode::Mismatch,
            "unauthorized" => Mode::Unauthorized,
            "resume" => Mode::Resume,
            "drop" => Mode::Drop,
            "modern" => Mode::Modern,
            "modern-broken" => Mode::ModernBroken,
            "modern-stall" => Mode::ModernStall,
            "sse-foreign" => Mode::SseForeign,
            _ => return None,
        })
    }
}

/// What the server remembers between requests.
pub struct State {
    mode: Mode,
    requests: AtomicUsize,
    sessions: AtomicUsize,
    /// The answer `resume` keeps for the `GET` that resumes.
    pending: Mutex<Option<Value>>,
    /// POSTs `drop` still fails (set when it lists its tools).
    down: AtomicUsize,
    listed: std::sync::atomic::AtomicBool,
}

impl State {
    /// A fresh server in `mode`.
    pub fn new(mode: Mode) -> State {
        State {
            mode,
            requests: AtomicUsize::new(0),
            sessions: AtomicUsize::new(0),
            pending: Mutex::new(None),
            down: AtomicUsize::new(0),
            listed: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

type Body = BoxBody<Bytes, Infallible>;

/// Logs when a stalled response body is dropped: the client closed the stream.
struct ClosedGuard;

impl Drop for ClosedGuard {
    fn drop(&mut self) {
        eprintln!("stream closed by the client");
    }
}

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

fn reply(status: StatusCode, content_type: &str, body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    if let Ok(value) = content_type.parse() {
        response
            .headers_mut()
            .insert(http::header::CONTENT_TYPE, value);
    }
    response
}

fn json_reply(message: &Value) -> Response<Body> {
    reply(
        StatusCode::OK,
        "application/json",
        full(message.to_string()),
    )
}

fn sse_reply(message: &Value) -> Response<Body> {
    let text = format!("id: 1\ndata: \n\nevent: message\ndata: {message}\n\n");
    reply(StatusCode::OK, "text/event-stream", full(text))
}

fn header<'a>(request: &'a Request<Incoming>, name: &str) -> &'a str {
    request
        .headers()
        .get(name)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("-")
}

/// Answers one request.
pub async fn handle(request: Request<Incoming>, state: &State) -> Response<Body> {
    let count = state.requests.fetch_add(1, Ordering::SeqCst) + 1;
    let session = header(&request, "mcp-session-id").to_owned();
    let headers = request.headers().clone();
    if let Some(value) = headers.get(http::header::AUTHORIZATION) {
        eprintln!(
            "authorization: {}",
            String::from_utf8_lossy(value.as_bytes())
        );
    }
    let method = request.method().clone();
    if method == Method::DELETE {
        eprintln!("DELETE session={session}");
        return reply(StatusCode::OK, "text/plain", full(""));
    }
    if method == Method::GET && state.mode == Mode::SseForeign {
        eprintln!("GET sse accept={}", header(&request, "accept"));
        return reply(
            StatusCode::OK,
            "text/event-stream",
            full("event: endpoint\ndata: http://elsewhere.invalid/message?sessionId=1\n\n"),
        );
    }
    if method == Method::GET {
        eprintln!(
            "GET session={session} last-event-id={}",
            header(&request, "last-event-id")
        );
        let pending = state.pending.lock().ok().and_then(|mut p| p.take());
        return match pending {
            Some(message) if state.mode == Mode::Resume => sse_reply(&message),
            _ => reply(StatusCode::METHOD_NOT_ALLOWED, "text/plain", full("")),
        };
    }
    let body = match request.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => return reply(StatusCode::BAD_REQUEST, "text/plain", full("")),
    };
    let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let rpc_method = message["method"].as_str().unwrap_or("-").to_owned();
    if state.mode == Mode::ModernBroken {
        let breaks = rpc_method == "tools/call"
            || (rpc_method == "tools/list" && !state.listed.swap(true, Ordering::SeqCst));
        if breaks {
            eprintln!("POST {rpc_method} id={} (stream broken)", message["id"]);
            return reply(
                StatusCode::OK,
                "text/event-stream",
                full(": going away\n\n"),
            );
        }
    }
    if state.mode == Mode::ModernStall && rpc_method == "tools/call" {
        eprintln!("POST tools/call (stalling)");
        let stalled = futures::stream::unfold(ClosedGuard, |guard| async move {
            futures::future::pending::<()>().await;
            Some((Ok::<_, Infallible>(Frame::data(Bytes::new())), guard))
        });
        return reply(
            StatusCode::OK,
            "text/event-stream",
            BodyExt::boxed(StreamBody::new(stalled)),
        );
    }
    if matches!(
        state.mode,
        Mode::Modern | Mode::ModernBroken | Mode::ModernStall
    ) {
        let first =
            state.mode == Mode::Modern && state.sessions.fetch_add(1, Ordering::SeqCst) == 0;
        let (status, answer) = crate::modern::answer(&message, &headers, first);
        return match answer {
            Some(answer) => reply(status, "application/json", full(answer.to_string())),
            None => reply(status, "text/plain", full("")),
        };
    }
    eprintln!("POST {rpc_method} session={session}");
    match state.mode {
        Mode::Redirect => {
            let mut response = reply(StatusCode::TEMPORARY_REDIRECT, "text/plain", full(""));
            if let Ok(value) = "http://elsewhere.invalid/mcp".parse() {
                response.headers_mut().insert(http::header::LOCATION, value);
            }
            return response;
        }
        Mode::ContentType => {
            return reply(StatusCode::OK, "text/html", full("<html>hello</html>"));
        }
        Mode::Unauthorized => {
            let mut response = reply(StatusCode::UNAUTHORIZED, "text/plain", full(""));
            if let Ok(value) = "Bearer resource_metadata=\"http://127.0.0.1/.well-known/x\"".parse()
            {
                response
                    .headers_mut()
                    .insert(http::header::WWW_AUTHENTICATE, value);
            }
            return response;
        }
        Mode::Drop
            if state.listed.load(Ordering::SeqCst)
                && state
                    .down
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok() =>
        {
            return reply(StatusCode::SERVICE_UNAVAILABLE, "text/plain", full("down"));
        }
        Mode::Flap if count <= FLAPS => {
            return reply(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain",
                full("try later"),
            );
        }
        _ => {}
    }
    let id = message.get("id").cloned();
    let Some(id) = id else {
        return reply(StatusCode::ACCEPTED, "text/plain", full(""));
    };
    let result = match rpc_method.as_str() {
        "server/discover" => {
            let error = json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": -32000, "message": "Bad Request: Server not initialized"}});
            return reply(
                StatusCode::BAD_REQUEST,
                "application/json",
                full(error.to_string()),
            );
        }
        "initialize" => {
            let number = state.sessions.fetch_add(1, Ordering::SeqCst) + 1;
            let result = json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "warden-http-testserver", "version": "0"},
            }});
            let mut response = sse_reply(&result);
            if let Ok(value) = format!("s{number}").parse() {
                response.headers_mut().insert("mcp-session-id", value);
            }
            return response;
        }
        "tools/list" if state.mode == Mode::Drop && !state.listed.swap(true, Ordering::SeqCst) => {
            state.down.store(DROPPED_POSTS, Ordering::SeqCst);
            json!({"tools": [{
                "name": "echo", "description": "Echoes its text.",
                "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
            }]})
        }
        "tools/list" => json!({"tools": [{
            "name": "echo", "description": "Echoes its text.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        }]}),
        "tools/call" => json!({"content": [{"type": "text",
            "text": format!("echo from session {session}: {}", message["params"]["arguments"]["text"].as_str().unwrap_or(""))}]}),
        _ => {
            let error = json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "Method not found"}});
            return json_reply(&error);
        }
    };
    let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
    match (state.mode, rpc_method.as_str()) {
        (Mode::BigBody, "tools/call") => {
            let chunk = Bytes::from(vec![b' '; 64 * 1024]);
            let chunks = futures::stream::iter(
                (0..BIG / chunk.len())
                    .map(move |_| Ok::<_, Infallible>(Frame::data(chunk.clone()))),
            );
            reply(
                StatusCode::OK,
                "application/json",
                BodyExt::boxed(StreamBody::new(chunks)),
            )
        }
        (Mode::BigEvent, "tools/call") => {
            let head = futures::stream::iter([Ok::<_, Infallible>(Frame::data(
                Bytes::from_static(b"data: \""),
            ))]);
            let chunk = Bytes::from(vec![b'a'; 64 * 1024]);
            let body = futures::stream::iter(
                (0..BIG / chunk.len())
                    .map(move |_| Ok::<_, Infallible>(Frame::data(chunk.clone()))),
            );
            reply(
                StatusCode::OK,
                "text/event-stream",
                BodyExt::boxed(StreamBody::new(head.chain(body))),
            )
        }
        (Mode::Stall, "tools/call") => {
            let priming = futures::stream::iter([Ok::<_, Infallible>(Frame::data(
                Bytes::from_static(b": stalled\n\n"),
            ))]);
            let forever = futures::stream::pending::<Result<Frame<Bytes>, Infallible>>();
            reply(
                StatusCode::OK,
                "text/event-stream",
                BodyExt::boxed(StreamBody::new(priming.chain(forever))),
            )
        }
        (Mode::Expire, "tools/call") if session == "s1" => reply(
            StatusCode::NOT_FOUND,
            "application/json",
            full(
                json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": -32001, "message": "Session not found"}})
                .to_string(),
            ),
        ),
        (Mode::Mismatch, "tools/call") => reply(
            StatusCode::OK,
            "application/json",
            full(format!("event: message\ndata: {answer}\n\n")),
        ),
        (Mode::Mismatch, "tools/list") => {
            let mut wrong = answer.clone();
            wrong["id"] = json!("someone-else");
            json_reply(&wrong)
        }
        (Mode::Resume, "tools/call") => {
            if let Ok(mut pending) = state.pending.lock() {
                *pending = Some(answer);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            reply(
                StatusCode::OK,
                "text/event-stream",
                full("id: 7\nretry: 300\ndata: \n\n"),
            )
        }
        _ => sse_reply(&answer),
    }
}
