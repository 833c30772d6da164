//! Clients of the gateway's Streamable HTTP face in the gateway world (issue 18; decision
//! 0041, revision of 2026-12-02).
//!
//! The face is `warden serve --http`'s own server ([`warden_gateway::http::serve_connections`],
//! the same per-connection code as a TCP accept): the simulator hands it in-memory pipes
//! instead of sockets, so hyper's server, the gate, sessions, SSE streams and the
//! cancellation paths run under the world's paused clock. Each request here is one HTTP/1.1
//! connection (hyper's client over the pipe), as a client that does not pool would send it.
//!
//! Two kinds of client, as MCP has them:
//! - 2025-11-25 ([`Face::Session`]): `initialize` opens a session (`Mcp-Session-Id`), each
//!   `tools/call` is answered on its own SSE stream, a cancellation is a POSTed
//!   `notifications/cancelled`, going away is `DELETE`; an unknown or deleted session must
//!   be answered 404.
//! - 2026-07-28 ([`Face::Stateless`]): no session; each request carries its version and
//!   capabilities in `_meta` and the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name`
//!   headers; a `tools/call` is answered on a request-scoped SSE stream, and closing that
//!   stream is the cancellation.

use std::net::{Ipv4Addr, SocketAddr};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::DuplexStream;
use tokio::sync::mpsc;

use crate::upstream::PIPE;

/// How a client reaches the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Face {
    /// `warden serve`'s stdio face: one session per process.
    Stdio,
    /// Streamable HTTP, 2025-11-25: a session.
    Session,
    /// Streamable HTTP, 2026-07-28: stateless, request-scoped streams.
    Stateless,
}

/// Where a client's connections go: the HTTP face's accept queue.
pub(crate) type Dial = mpsc::Sender<(DuplexStream, SocketAddr)>;

/// The headers every request carries (a loopback `Host`, both content types accepted).
const HOST: &str = "127.0.0.1:8420";

/// Sends one request on a fresh connection; the answer's head, its body still to read.
pub(crate) async fn send(
    dial: &Dial,
    client: usize,
    method: Method,
    headers: &[(&str, String)],
    body: Option<&Value>,
) -> Result<Response<Incoming>, String> {
    let (mine, theirs) = tokio::io::duplex(PIPE);
    let port = 40_000 + u16::try_from(client).unwrap_or(0);
    dial.send((theirs, SocketAddr::from((Ipv4Addr::LOCALHOST, port))))
        .await
        .map_err(|_| "the HTTP face no longer accepts connections".to_owned())?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(mine))
        .await
        .map_err(|error| format!("handshake: {error}"))?;
    // Ends when the answer is read or dropped (a dropped body closes the connection).
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut request = Request::builder()
        .method(method)
        .uri(warden_gateway::http::ENDPOINT)
        .header("host", HOST)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, value.as_str());
    }
    let body = body.map(Value::to_string).unwrap_or_default();
    let request = request
        .body(Full::new(Bytes::from(body)))
        .map_err(|error| format!("request: {error}"))?;
    sender
        .send_request(request)
        .await
        .map_err(|error| format!("send: {error}"))
}

/// A whole (non-stream) answer's body as JSON, with its status.
pub(crate) async fn json(response: Response<Incoming>) -> (StatusCode, Option<Value>) {
    let status = response.status();
    let body = match response.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return (status, None),
    };
    (status, serde_json::from_slice(&body).ok())
}

/// Reads an SSE answer: the JSON messages of its `data:` events, as they complete.
pub(crate) struct Events {
    body: Incoming,
    buffer: String,
    ready: std::collections::VecDeque<Value>,
    /// A JSON answer (not yet read): its body is the one message.
    json: bool,
}

impl Events {
    /// The messages of an answer: an SSE stream's, or a JSON answer's one.
    pub(crate) fn new(response: Response<Incoming>) -> Events {
        let json = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("application/json"));
        Events {
            body: response.into_body(),
            buffer: String::new(),
            ready: std::collections::VecDeque::new(),
            json,
        }
    }

    /// The next message, or `None` when the stream ended (or broke).
    pub(crate) async fn next(&mut self) -> Option<Value> {
        if self.json {
            // One message, the whole body.
            self.json = false;
            let mut bytes = Vec::new();
            while let Some(frame) = self.body.frame().await {
                if let Ok(data) = frame.ok()?.into_data() {
                    bytes.extend_from_slice(&data);
                }
            }
            return serde_json::from_slice(&bytes).ok();
        }
        loop {
            if let Some(message) = self.ready.pop_front() {
                return Some(message);
            }
            let frame = self.body.frame().await?.ok()?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            self.buffer.push_str(&String::from_utf8_lossy(&data));
            while let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|line| line.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if data.is_empty() {
                    continue; // a keep-alive comment
                }
                if let Ok(message) = serde_json::from_str(&data.join("\n")) {
                    self.ready.push_back(message);
                }
            }
        }
    }
}
