//! The deprecated HTTP+SSE transport of 2024-11-05, used only when the configuration names
//! it (`transport = "sse"`); a Streamable HTTP server never falls back to it.
//!
//! `GET` the SSE URL; its first event, `endpoint`, names the URL requests are POSTed to,
//! which must be on the same origin (the configured headers go there too). Every JSON-RPC
//! message is POSTed there (202 or 200 expected); responses come back on the event stream
//! as `message` events and are matched to their request by id. Every wait is bounded by the
//! server's timeouts, every event is size-capped, and closing drops the stream.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{Stream, StreamExt};
use serde_json::{Map, Value, json};
use tokio::sync::oneshot;
use warden_config::ServerSpec;
use warden_net::reqwest::Url;
use warden_net::reqwest::header::{ACCEPT, CONTENT_TYPE};
use warden_net::{HttpOptions, NetError, SseEvent, sse_events};

use super::connection::{ListLimits, call_error, connect_error, list_pages};
use super::detect::Remote;
use super::error::{HttpError, excerpt};
use super::exchange::{
    DeclineRequests, Endpoint, ServerRequests, StreamContext, check_status, header_text,
    media_type, rpc_error,
};
use super::reconnect;
use super::session::LEGACY_VERSIONS;
use crate::connection::{
    CallOutcome, ConnectOptions, Connection, DEFAULT_MAX_PAGES, DEFAULT_MAX_TOOLS, Era, ServerInfo,
    ToolDef,
};
use crate::error::{CallError, ConnectError, ConnectFailure};
use crate::launcher::StopReport;

/// The revision offered in `initialize`: the one this transport belongs to.
const SSE_VERSION: &str = "2024-11-05";
/// Longest silence tolerated on the event stream itself (each request has its own bound).
const STREAM_IDLE: Duration = Duration::from_secs(24 * 60 * 60);
/// Events read before the `endpoint` event, at most.
const MAX_EVENTS_BEFORE_ENDPOINT: usize = 16;
/// Time allowed for a cancellation notice.
const FAREWELL_LIMIT: Duration = Duration::from_secs(2);

/// Requests waiting for their answer on the stream, and why the stream ended, once it has.
#[derive(Default)]
struct Pending {
    waiting: HashMap<String, oneshot::Sender<Value>>,
    ended: Option<String>,
}

fn lock(pending: &Mutex<Pending>) -> MutexGuard<'_, Pending> {
    pending
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Removes a request from [`Pending`] when its waiter goes away (answered, timed out or
/// dropped), so nothing accumulates.
struct Waiting<'a> {
    pending: &'a Mutex<Pending>,
    key: String,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        lock(self.pending).waiting.remove(&self.key);
    }
}

struct SseConnection {
    name: String,
    info: ServerInfo,
    channel: Channel,
    max_tools: usize,
    max_pages: usize,
}

/// The event stream (read by a task) and the POST endpoint it named.
struct Channel {
    post: Arc<Endpoint>,
    pending: Arc<Mutex<Pending>>,
    reader: tokio::task::JoinHandle<()>,
    next_id: AtomicU64,
    /// Longest wait for one answer.
    wait: Duration,
}

/// The POST URL an `endpoint` event names, resolved against the SSE URL; refused unless it
/// is on the same origin.
pub(crate) fn endpoint_url(sse: &Url, data: &str) -> Result<Url, HttpError> {
    let target = data.trim();
    let url = sse.join(target).map_err(|error| {
        HttpError::Malformed(format!(
            "the endpoint event {:?} is not a URL: {error}",
            excerpt(target.as_bytes())
        ))
    })?;
    if url.origin() != sse.origin() {
        return Err(HttpError::ForeignEndpoint {
            endpoint: excerpt(url.as_str().as_bytes()),
            origin: sse.origin().ascii_serialization(),
        });
    }
    Ok(url)
}

/// Connects to the HTTP+SSE server `spec` names, within its connect timeout, trying again
/// on transient failures as its reconnect policy allows.
pub(super) async fn connect(
    spec: &ServerSpec,
    remote: Remote,
    options: &ConnectOptions,
) -> Result<Box<dyn Connection>, ConnectFailure> {
    tracing::warn!(
        server = %spec.name,
        "server {} uses the deprecated HTTP+SSE transport (2024-11-05); ask its authors for Streamable HTTP",
        spec.name
    );
    let failure = |error: ConnectError| ConnectFailure {
        error,
        stderr_tail: Vec::new(),
    };
    let deadline = tokio::time::Instant::now() + spec.timeouts.connect;
    let backoff = remote.backoff.clone();
    let tries = async {
        let (opened, attempts) = reconnect::first_connect(
            &remote.name,
            &remote.settings.reconnect,
            &backoff,
            || open(&remote),
            HttpError::is_transient,
        )
        .await;
        match opened {
            Ok((channel, mut info)) => {
                info.connect_attempts = attempts;
                Ok((channel, info))
            }
            Err(error) => Err(connect_error(error, attempts)),
        }
    };
    let (channel, info) = match tokio::time::timeout_at(deadline, tries).await {
        Ok(Ok(opened)) => opened,
        Ok(Err(error)) => return Err(failure(error)),
        Err(_) => {
            return Err(failure(ConnectError::Timeout {
                after: spec.timeouts.connect,
            }));
        }
    };
    tracing::info!(server = %spec.name, protocol = %info.protocol_version, "connected over HTTP+SSE");
    Ok(Box::new(SseConnection {
        name: spec.name.clone(),
        info,
        channel,
        max_tools: options.max_tools.unwrap_or(DEFAULT_MAX_TOOLS),
        max_pages: options.max_pages.unwrap_or(DEFAULT_MAX_PAGES),
    }))
}

/// One attempt: the stream, its `endpoint` event, `initialize` and `notifications/initialized`.
async fn open(remote: &Remote) -> Result<(Channel, ServerInfo), HttpError> {
    let endpoint = remote.endpoint()?;
    let stream_client = warden_net::client(&HttpOptions {
        connect_timeout: remote.connect_timeout,
        read_idle_timeout: STREAM_IDLE,
        ..HttpOptions::default()
    })?;
    let response = endpoint
        .send(
            stream_client
                .get(endpoint.url.clone())
                .headers(endpoint.headers.clone())
                .header(ACCEPT, "text/event-stream"),
        )
        .await?;
    let response = check_status(response).await?;
    if media_type(response.headers()) != "text/event-stream" {
        return Err(HttpError::ContentType {
            content_type: header_text(response.headers(), &CONTENT_TYPE),
        });
    }
    let mut events = Box::pin(sse_events(response, endpoint.max_bytes));
    let mut post_url = None;
    for _ in 0..MAX_EVENTS_BEFORE_ENDPOINT {
        let event = match events.next().await {
            Some(Ok(event)) => event,
            Some(Err(error)) => return Err(error.into()),
            None => {
                return Err(HttpError::StreamEnded {
                    detail: "no endpoint event".into(),
                });
            }
        };
        match event.event.as_deref() {
            Some("endpoint") => {
                post_url = Some(endpoint_url(&endpoint.url, &event.data)?);
                break;
            }
            _ if event.data.trim().is_empty() => {}
            _ => {
                return Err(HttpError::Malformed(
                    "the event stream did not start with an endpoint event (is this an \
                     HTTP+SSE server?)"
                        .into(),
                ));
            }
        }
    }
    let Some(post_url) = post_url else {
        return Err(HttpError::Malformed(format!(
            "no endpoint event among the first {MAX_EVENTS_BEFORE_ENDPOINT} events"
        )));
    };
    let post = Arc::new(Endpoint {
        url: post_url,
        ..endpoint
    });
    let pending = Arc::new(Mutex::new(Pending::default()));
    let reader = tokio::spawn(read_events(events, pending.clone(), post.clone()));
    let channel = Channel {
        post,
        pending,
        reader,
        next_id: AtomicU64::new(1),
        wait: remote.idle_timeout,
    };
    match channel.initialize().await {
        Ok(info) => Ok((channel, info)),
        Err(error) => {
            channel.reader.abort();
            Err(error)
        }
    }
}

/// Delivers responses on the stream to their waiters and answers server requests, until the
/// stream ends; then every waiter learns why.
async fn read_events(
    mut events: impl Stream<Item = Result<SseEvent, NetError>> + Unpin,
    pending: Arc<Mutex<Pending>>,
    post: Arc<Endpoint>,
) {
    let requests = DeclineRequests;
    let reason = loop {
        let event = match events.next().await {
            Some(Ok(event)) => event,
            Some(Err(error)) => break error.to_string(),
            None => break "the server closed the event stream".to_owned(),
        };
        if event.event.as_deref().is_some_and(|name| name != "message")
            || event.data.trim().is_empty()
        {
            continue;
        }
        let Ok(message) = serde_json::from_str::<Value>(&event.data) else {
            tracing::debug!(server = %post.server, "an event is not JSON; ignored");
            continue;
        };
        if message.get("method").is_some() {
            if message.get("id").is_some() {
                let context = StreamContext {
                    session_headers: &[],
                    resumable: false,
                    requests: &requests as &dyn ServerRequests,
                    behind: None,
                };
                post.answer(&message, &context).await;
            }
            continue;
        }
        let Some(id) = message.get("id") else {
            continue;
        };
        match lock(&pending).waiting.remove(&id.to_string()) {
            Some(waiter) => {
                let _ = waiter.send(message);
            }
            None => tracing::debug!(server = %post.server, "an answer to no waiting request"),
        }
    };
    tracing::debug!(server = %post.server, "the event stream ended: {reason}");
    let mut pending = lock(&pending);
    pending.ended = Some(reason);
    pending.waiting.clear();
}

impl Channel {
    fn next_id(&self) -> Value {
        json!(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    fn context(&self) -> StreamContext<'static> {
        StreamContext {
            session_headers: &[],
            resumable: false,
            requests: &DeclineRequests,
            behind: None,
        }
    }

    /// POSTs a notification.
    async fn notify(&self, method: &str, params: Option<Value>) -> Result<(), HttpError> {
        let mut message = json!({"jsonrpc": "2.0", "method": method});
        if let Some(params) = params {
            message["params"] = params;
        }
        self.post.post(&message, &[], None, &self.context()).await?;
        Ok(())
    }

    /// POSTs request `id` and waits (bounded) for its answer on the stream.
    async fn request(
        &self,
        id: Value,
        method: &str,
        params: Map<String, Value>,
    ) -> Result<Value, HttpError> {
        let key = id.to_string();
        let (sender, answer) = oneshot::channel();
        {
            let mut pending = lock(&self.pending);
            if let Some(reason) = &pending.ended {
                return Err(HttpError::StreamEnded {
                    detail: reason.clone(),
                });
            }
            pending.waiting.insert(key.clone(), sender);
        }
        let _waiting = Waiting {
            pending: &self.pending,
            key,
        };
        let mut message = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if !params.is_empty() {
            message["params"] = Value::Object(params);
        }
        // The answer comes on the stream, whatever the POST's own reply says.
        self.post.post(&message, &[], None, &self.context()).await?;
        let message = match tokio::time::timeout(self.wait, answer).await {
            Ok(Ok(message)) => message,
            Ok(Err(_)) => {
                return Err(HttpError::StreamEnded {
                    detail: lock(&self.pending).ended.clone().unwrap_or_default(),
                });
            }
            Err(_) => {
                return Err(NetError::Idle {
                    secs: self.wait.as_secs(),
                }
                .into());
            }
        };
        if let Some(error) = message.get("error") {
            return Err(rpc_error(200, error));
        }
        match message.get("result") {
            Some(result) => Ok(result.clone()),
            None => Err(HttpError::Malformed(
                "the answer has neither result nor error".into(),
            )),
        }
    }

    /// The legacy handshake, offering 2024-11-05.
    async fn initialize(&self) -> Result<ServerInfo, HttpError> {
        let mut params = Map::new();
        params.insert("protocolVersion".into(), json!(SSE_VERSION));
        params.insert("capabilities".into(), crate::client_capabilities());
        params.insert(
            "clientInfo".into(),
            json!({"name": "warden", "version": env!("CARGO_PKG_VERSION")}),
        );
        let result = self.request(self.next_id(), "initialize", params).await?;
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if !LEGACY_VERSIONS.contains(&version.as_str()) {
            return Err(HttpError::Era(format!(
                "the server answered initialize with protocol version {:?}, which Warden does \
                 not speak (it speaks {})",
                excerpt(version.as_bytes()),
                LEGACY_VERSIONS.join(", ")
            )));
        }
        self.notify("notifications/initialized", None).await?;
        let text = |value: Option<&Value>, key: &str| {
            value
                .and_then(|v| v.get(key))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let implementation = result.get("serverInfo");
        Ok(ServerInfo {
            era: Era::Legacy,
            protocol_version: version,
            name: text(implementation, "name"),
            version: text(implementation, "version"),
            title: text(implementation, "title"),
            capabilities: result.get("capabilities").cloned().unwrap_or(Value::Null),
            instructions: text(Some(&result), "instructions"),
            program: None,
            connect_attempts: 1,
        })
    }
}

impl SseConnection {
    async fn list_all(&self) -> Result<Vec<ToolDef>, CallError> {
        let limits = ListLimits {
            server: &self.name,
            max_tools: self.max_tools,
            max_pages: self.max_pages,
        };
        list_pages(limits, |params| async move {
            let page = self
                .channel
                .request(self.channel.next_id(), "tools/list", params)
                .await
                .map_err(call_error)?;
            Ok((page, Era::Legacy))
        })
        .await
        .map(|(tools, _freshness)| tools)
    }
}

impl Connection for SseConnection {
    fn name(&self) -> &str {
        &self.name
    }

    fn info(&self) -> &ServerInfo {
        &self.info
    }

    fn list_tools(&self, timeout: Duration) -> BoxFuture<'_, Result<Vec<ToolDef>, CallError>> {
        Box::pin(crate::connection::within(timeout, self.list_all()))
    }

    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        arguments: Option<Map<String, Value>>,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<CallOutcome, CallError>> {
        Box::pin(async move {
            let mut params = Map::new();
            params.insert("name".into(), json!(name));
            if let Some(arguments) = arguments {
                params.insert("arguments".into(), Value::Object(arguments));
            }
            let id = self.channel.next_id();
            let sent = self.channel.request(id.clone(), "tools/call", params);
            let result = match tokio::time::timeout(timeout, sent).await {
                Ok(result) => result.map_err(call_error)?,
                Err(_) => {
                    // On a task of its own, bounded: the caller is told at its deadline,
                    // not after the server took its time to accept the notice.
                    let post = Arc::clone(&self.channel.post);
                    let context = self.channel.context();
                    let cancel = json!({
                        "jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": id, "reason": "the caller stopped waiting"},
                    });
                    tokio::spawn(async move {
                        let send = post.post(&cancel, &[], None, &context);
                        let _ = tokio::time::timeout(FAREWELL_LIMIT, send).await;
                    });
                    return Err(CallError::Timeout { after: timeout });
                }
            };
            if !result.is_object() {
                return Err(CallError::Protocol {
                    reason: "the answer to tools/call is not an object".into(),
                });
            }
            Ok(CallOutcome {
                content: result
                    .get("content")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
                structured: result.get("structuredContent").cloned(),
                is_error: result
                    .get("isError")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                raw: result,
                input_required: None,
            })
        })
    }

    fn stderr_tail(&self, _count: usize) -> Vec<String> {
        Vec::new()
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, StopReport> {
        Box::pin(async move {
            // Dropping the stream ends the HTTP+SSE session.
            self.channel.reader.abort();
            StopReport {
                status: "disconnected (remote server, HTTP+SSE)".into(),
                signals: Vec::new(),
            }
        })
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_must_be_on_the_origin_of_the_sse_url() {
        let sse = Url::parse("http://127.0.0.1:3001/sse").unwrap();
        let same = endpoint_url(&sse, "/message?sessionId=abc\n").unwrap();
        assert_eq!(same.as_str(), "http://127.0.0.1:3001/message?sessionId=abc");
        let relative = endpoint_url(&sse, "messages/1").unwrap();
        assert_eq!(relative.as_str(), "http://127.0.0.1:3001/messages/1");
        for foreign in [
            "http://evil.example/message",
            "https://127.0.0.1:3001/message",
            "http://127.0.0.1:3002/message",
            "//evil.example/message",
        ] {
            let error = endpoint_url(&sse, foreign).unwrap_err();
            assert!(
                matches!(error, HttpError::ForeignEndpoint { .. }),
                "{foreign}: {error}"
            );
            assert!(error.to_string().contains("not on the origin"), "{error}");
        }
    }
}
