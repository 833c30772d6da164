//! Serving one client over stdio: one JSON message per line in, one per line out.
//!
//! Each request runs as its own task (at most [`StdioLimits::max_in_flight`] at once; past
//! that, reading waits), so a slow call never holds up a `ping` or a cancellation.
//! `notifications/cancelled` aborts the named request's task, and dropping the call sends
//! the cancellation on to the upstream server. Requests the gateway sends the client
//! (legacy `elicitation/create`) are matched with their responses by id. A line longer than
//! [`StdioLimits::max_message_bytes`] is refused and skipped. End of input ends the
//! session: every request still running is cancelled.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::AbortHandle;

use crate::backend::ClientContext;
use crate::dispatch::{Era, Gateway, LegacySession, ModernRequest, Peer, era_of};
use crate::jsonrpc::{self, INVALID_REQUEST, Incoming, PARSE_ERROR, RpcError};
use crate::outstanding::Outstanding;
use crate::parked::{self, AnswerSlot, CallStream, CallTask};

/// Bounds of a stdio session.
#[derive(Debug, Clone)]
pub struct StdioLimits {
    /// Longest message (line) accepted.
    pub max_message_bytes: usize,
    /// Requests handled at once.
    pub max_in_flight: usize,
    /// Requests the gateway may have outstanding at the client (elicitations).
    pub max_outbound: usize,
}

impl Default for StdioLimits {
    fn default() -> Self {
        StdioLimits {
            max_message_bytes: 4 << 20,
            max_in_flight: 64,
            max_outbound: 16,
        }
    }
}

/// Messages waiting to be written, at most.
const WRITE_QUEUE: usize = 256;

struct Shared {
    gateway: Arc<Gateway>,
    out: mpsc::Sender<Value>,
    era: Mutex<Option<Era>>,
    /// Whether a 2026-07-28 request other than `server/discover` was served: until then a
    /// client whose era probe timed out may still begin with `initialize` (its choice).
    modern_used: std::sync::atomic::AtomicBool,
    legacy: OnceLock<Arc<LegacySession>>,
    /// One policy context for the whole stdio client, whichever era it speaks.
    modern_client: ClientContext,
    running: Mutex<HashMap<String, AbortHandle>>,
    outstanding: Outstanding,
    max_outbound: usize,
    /// Tells a 2025-11-25 client of changes, once it has initialized.
    announcer: Mutex<Option<AbortHandle>>,
}

impl Shared {
    async fn send(&self, message: Value) {
        // A closed writer means the client is gone; the reader notices too.
        let _ = self.out.send(message).await;
    }
}

impl Peer for Shared {
    fn request<'a>(
        &'a self,
        method: &'a str,
        params: Value,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(self.outstanding.request(
            method,
            params,
            timeout,
            self.max_outbound,
            move |message| async move {
                self.send(message).await;
                // A closed writer is noticed by the reader; the wait then ends.
                true
            },
        ))
    }

    fn notify(&self, message: Value) {
        // A full queue drops the notification, never the call.
        let _ = self.out.try_send(message);
    }
}

/// Serves one client on `input` and `output` until `input` ends.
pub async fn serve<R, W>(gateway: Arc<Gateway>, input: R, output: W, limits: StdioLimits)
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out, mut queue) = mpsc::channel::<Value>(WRITE_QUEUE);
    let writer = tokio::spawn(async move {
        let mut output = output;
        while let Some(message) = queue.recv().await {
            let mut line = message.to_string();
            line.push('\n');
            if output.write_all(line.as_bytes()).await.is_err() || output.flush().await.is_err() {
                break;
            }
        }
    });
    let tag = crate::secret::session_id()
        .unwrap_or_else(|_| "stdio".into())
        .chars()
        .take(8)
        .collect::<String>();
    let modern_client = gateway.backend().client(format!("stdio#{tag}"));
    let shared = Arc::new(Shared {
        gateway,
        out,
        era: Mutex::new(None),
        modern_used: std::sync::atomic::AtomicBool::new(false),
        legacy: OnceLock::new(),
        modern_client,
        running: Mutex::new(HashMap::new()),
        outstanding: Outstanding::new(),
        max_outbound: limits.max_outbound,
        announcer: Mutex::new(None),
    });
    let slots = Arc::new(Semaphore::new(limits.max_in_flight.max(1)));
    let mut reader = input;
    let mut line = Vec::new();
    loop {
        line.clear();
        match read_line(&mut reader, &mut line, limits.max_message_bytes).await {
            Ok(Line::End) | Err(_) => break,
            Ok(Line::TooLong) => {
                let error = RpcError::new(
                    INVALID_REQUEST,
                    format!(
                        "message longer than {} bytes; skipped",
                        limits.max_message_bytes
                    ),
                );
                shared
                    .send(jsonrpc::error_response(&Value::Null, &error))
                    .await;
                continue;
            }
            Ok(Line::Read) => {}
        }
        let text = String::from_utf8_lossy(&line);
        if text.trim().is_empty() {
            continue;
        }
        let message: Value = match serde_json::from_str(text.trim()) {
            Ok(message) => message,
            Err(error) => {
                let error = RpcError::new(PARSE_ERROR, format!("not JSON: {error}"));
                shared
                    .send(jsonrpc::error_response(&Value::Null, &error))
                    .await;
                continue;
            }
        };
        match jsonrpc::parse(message) {
            Err((id, error)) => shared.send(jsonrpc::error_response(&id, &error)).await,
            Ok(Incoming::Response { id, outcome }) => shared.outstanding.answer(&id, outcome),
            Ok(Incoming::Notification { method, params }) => {
                notification(&shared, &method, &params);
            }
            Ok(Incoming::Request { id, method, params }) => {
                let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
                    break;
                };
                let key = jsonrpc::id_key(&id);
                let task_shared = Arc::clone(&shared);
                let task_key = key.clone();
                // Held while spawning, so the task cannot remove its entry before it is in.
                let Ok(mut running) = shared.running.lock() else {
                    break;
                };
                let task = tokio::spawn(async move {
                    let answer = request(&task_shared, &id, &method, params).await;
                    if let Ok(mut running) = task_shared.running.lock() {
                        running.remove(&task_key);
                    }
                    let message = match answer {
                        Ok(result) => jsonrpc::response(&id, result),
                        Err(error) => jsonrpc::error_response(&id, &error),
                    };
                    task_shared.send(message).await;
                    drop(permit);
                });
                running.insert(key, task.abort_handle());
                drop(running);
            }
        }
    }
    // Input ended: cancel what is still running (each call's cancellation goes upstream).
    let handles: Vec<AbortHandle> = shared
        .running
        .lock()
        .map(|mut running| running.drain().map(|(_, handle)| handle).collect())
        .unwrap_or_default();
    for handle in handles {
        handle.abort();
    }
    if let Some(announcer) = shared.announcer.lock().ok().and_then(|mut a| a.take()) {
        announcer.abort();
    }
    drop(shared);
    let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
}

fn notification(shared: &Shared, method: &str, params: &Value) {
    match method {
        "notifications/cancelled" => {
            let Some(id) = params.get("requestId") else {
                return;
            };
            let handle = shared
                .running
                .lock()
                .ok()
                .and_then(|mut running| running.remove(&jsonrpc::id_key(id)));
            if let Some(handle) = handle {
                tracing::info!(request = %id, "cancelled by the client");
                handle.abort();
            }
        }
        _ => {
            if let Some(session) = shared.legacy.get() {
                shared.gateway.legacy_notification(session, method);
            }
        }
    }
}

/// Tells a 2025-11-25 client, once initialized, each time the tools, resources or prompts
/// offered changed (`notifications/…/list_changed`), and of each update of a resource it
/// subscribed to (`notifications/resources/updated`). A 2026-07-28 client is told on its
/// `subscriptions/listen` streams instead.
async fn announce_changes(shared: Weak<Shared>, session: Arc<LegacySession>) {
    let Some(mut listener) = shared.upgrade().map(|shared| {
        shared
            .gateway
            .backend()
            .listener(crate::listener::Want::ALL)
    }) else {
        return;
    };
    while let Some(notices) = listener.next(Some(&session.subscriber)).await {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        if !session.initialized() {
            continue;
        }
        for notice in notices {
            shared.send(notice.message()).await;
        }
    }
}

async fn request(
    shared: &Arc<Shared>,
    id: &Value,
    method: &str,
    params: Value,
) -> Result<Value, RpcError> {
    let era = {
        let Ok(mut era) = shared.era.lock() else {
            return Err(RpcError::new(crate::jsonrpc::INTERNAL_ERROR, "state lost"));
        };
        let opened = era_of(method, &params);
        match (*era, opened) {
            // A dual-era client whose `server/discover` probe timed out (Warden answers only
            // once its servers are connected) falls back to `initialize`: its own choice,
            // allowed until it has made any other 2026-07-28 request.
            (Some(Era::Modern), Some(Era::Legacy))
                if !shared.modern_used.load(Ordering::Relaxed) =>
            {
                *era = Some(Era::Legacy);
                Era::Legacy
            }
            (Some(current), _) => current,
            (None, Some(opened)) => {
                *era = Some(opened);
                opened
            }
            (None, None) => {
                return Err(RpcError::new(
                    INVALID_REQUEST,
                    format!(
                        "`{method}` before the session began: send `initialize` (2025-11-25) or a \
                         request with `_meta` `{}` (2026-07-28) first",
                        crate::dispatch::META_VERSION
                    ),
                ));
            }
        }
    };
    match era {
        Era::Legacy => {
            if method == "initialize" && shared.legacy.get().is_none() {
                let (session, result) = shared.gateway.initialize(&params, "stdio")?;
                let session = Arc::new(session);
                if shared.legacy.set(Arc::clone(&session)).is_err() {
                    return Err(RpcError::new(INVALID_REQUEST, "already initialized"));
                }
                let announcer = tokio::spawn(announce_changes(Arc::downgrade(shared), session));
                if let Ok(mut slot) = shared.announcer.lock() {
                    *slot = Some(announcer.abort_handle());
                }
                return Ok(result);
            }
            if era_of(method, &params) == Some(Era::Modern) {
                return Err(RpcError::new(
                    INVALID_REQUEST,
                    "this client began with `initialize` (2025-11-25); a 2026-07-28 request is \
                     refused, not served in another era",
                ));
            }
            let Some(session) = shared.legacy.get() else {
                return Err(RpcError::new(INVALID_REQUEST, "not initialized"));
            };
            shared
                .gateway
                .legacy(session, method, params, Arc::clone(shared) as Arc<dyn Peer>)
                .await
        }
        Era::Modern => {
            if method == "initialize" {
                return Err(RpcError::new(
                    INVALID_REQUEST,
                    "this client speaks 2026-07-28 (stateless); `initialize` is not part of it",
                ));
            }
            let checked = shared.gateway.modern_check(&params)?;
            if method != "server/discover" {
                shared.modern_used.store(true, Ordering::Relaxed);
            }
            if method == "subscriptions/listen" {
                // Runs until the client cancels it (`notifications/cancelled` aborts this
                // task) or goes away; a graceful end answers the request.
                crate::dispatch::listen(
                    &shared.gateway,
                    &shared.modern_client,
                    id,
                    &params,
                    |message| async move { shared.out.send(message).await.is_ok() },
                )
                .await;
                return Ok(serde_json::json!({
                    "resultType": "complete",
                    "_meta": {crate::dispatch::META_SUBSCRIPTION_ID: id},
                }));
            }
            if method == "tools/call" {
                return modern_call(shared, &checked, params).await;
            }
            shared
                .gateway
                .modern(
                    &shared.modern_client,
                    &checked,
                    method,
                    params,
                    Arc::clone(shared) as Arc<dyn Peer>,
                )
                .await
        }
    }
}

/// A 2026-07-28 `tools/call`: run as a task of its own, so a 2025-11-25 server's question
/// during it can end this request with an input-required result while the call waits for
/// the retry (parked: [`crate::parked`], decision 0051). Dropping this (the client
/// cancelled the request, or went away) aborts the call.
async fn modern_call(
    shared: &Arc<Shared>,
    checked: &ModernRequest,
    params: Value,
) -> Result<Value, RpcError> {
    let (events, mut events_rx) = mpsc::channel::<Value>(4);
    let slot = AnswerSlot::default();
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let arguments = params.get("arguments").cloned().unwrap_or(Value::Null);
    let stream = Arc::new(CallStream {
        events: events.clone(),
        notifications: shared.out.clone(),
        slot: Arc::clone(&slot),
    });
    let task_shared = Arc::clone(shared);
    let checked = checked.clone();
    let task = tokio::spawn(async move {
        let answer = task_shared
            .gateway
            .modern(
                &task_shared.modern_client,
                &checked,
                "tools/call",
                params,
                stream,
            )
            .await;
        let message = match answer {
            Ok(result) => jsonrpc::response(&Value::Null, result),
            Err(error) => jsonrpc::error_response(&Value::Null, &error),
        };
        let _ = events.send(message).await;
    });
    let call = CallTask::new(task.abort_handle());
    let Some(first) = events_rx.recv().await else {
        return Err(RpcError::new(
            jsonrpc::INTERNAL_ERROR,
            "the call ended without an answer",
        ));
    };
    if parked::is_question(&first) {
        return shared.gateway.park_question(
            &first,
            events_rx,
            slot,
            call,
            &name,
            &arguments,
            shared.modern_client.name(),
        );
    }
    let _ = call.disarm();
    crate::dispatch::answer_of(&first)
}

enum Line {
    Read,
    TooLong,
    End,
}

/// Reads one line into `buffer` (without its newline), keeping at most `limit` bytes: a
/// longer line is read to its end and reported as [`Line::TooLong`].
async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buffer: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<Line> {
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(if buffer.is_empty() && !too_long {
                Line::End
            } else if too_long {
                Line::TooLong
            } else {
                Line::Read
            });
        }
        let (chunk, done) = match available.iter().position(|b| *b == b'\n') {
            Some(at) => (&available[..at], Some(at + 1)),
            None => (available, None),
        };
        if !too_long {
            if buffer.len() + chunk.len() > limit {
                too_long = true;
                buffer.clear();
            } else {
                buffer.extend_from_slice(chunk);
            }
        }
        let used = done.unwrap_or(available.len());
        reader.consume(used);
        if done.is_some() {
            return Ok(if too_long { Line::TooLong } else { Line::Read });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Sends `requests` one at a time to a gateway without servers, each after the answer
    /// to the one before, and returns the answers.
    async fn exchange(requests: &[Value]) -> Vec<Value> {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        let policy = Arc::new(warden_policy::Policy::default());
        let host = warden_host::Host::builder(policy)
            .launcher(Arc::new(warden_mcp::DirectLauncher::from_env()))
            .connect(Vec::new())
            .await;
        let backend = crate::Backend::new(Arc::new(host), None).unwrap();
        let gateway = Arc::new(Gateway::new(backend, Default::default()).unwrap());
        let (mut to_gateway, input) = tokio::io::duplex(1 << 16);
        let (output, from_gateway) = tokio::io::duplex(1 << 16);
        let served = tokio::spawn(serve(
            gateway,
            tokio::io::BufReader::new(input),
            output,
            StdioLimits::default(),
        ));
        let mut lines = tokio::io::BufReader::new(from_gateway).lines();
        let mut answers = Vec::new();
        for request in requests {
            let mut line = request.to_string();
            line.push('\n');
            to_gateway.write_all(line.as_bytes()).await.unwrap();
            let answer = lines.next_line().await.unwrap().unwrap();
            answers.push(serde_json::from_str(&answer).unwrap());
        }
        drop(to_gateway);
        served.await.unwrap();
        answers
    }

    fn meta() -> Value {
        json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientCapabilities": {}})
    }

    fn initialize(id: i64) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}})
    }

    #[tokio::test]
    async fn a_timed_out_era_probe_may_fall_back_but_a_modern_client_may_not_switch() {
        // The probe (server/discover), then initialize: the client chose the legacy era.
        let discover = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
                              "params": {"_meta": meta()}});
        let out = exchange(&[discover.clone(), initialize(2)]).await;
        assert_eq!(out[1]["result"]["protocolVersion"], "2025-11-25", "{out:?}");
        // After a real modern request, initialize is refused: no switching eras.
        let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list",
                          "params": {"_meta": meta()}});
        let out = exchange(&[discover, list, initialize(3)]).await;
        assert_eq!(out[1]["result"]["resultType"], "complete", "{out:?}");
        assert_eq!(out[2]["error"]["code"], INVALID_REQUEST, "{out:?}");
        // A legacy session refuses a modern request.
        let modern = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list",
                            "params": {"_meta": meta()}});
        let out = exchange(&[initialize(1), modern]).await;
        assert_eq!(out[1]["error"]["code"], INVALID_REQUEST, "{out:?}");
    }

    #[tokio::test]
    async fn long_lines_are_skipped_whole() {
        let input = b"12345\n123456789012\nabc".to_vec();
        let mut reader = tokio::io::BufReader::with_capacity(4, &input[..]);
        let mut buffer = Vec::new();
        assert!(matches!(
            read_line(&mut reader, &mut buffer, 8).await.unwrap(),
            Line::Read
        ));
        assert_eq!(buffer, b"12345");
        buffer.clear();
        assert!(matches!(
            read_line(&mut reader, &mut buffer, 8).await.unwrap(),
            Line::TooLong
        ));
        buffer.clear();
        assert!(matches!(
            read_line(&mut reader, &mut buffer, 8).await.unwrap(),
            Line::Read
        ));
        assert_eq!(buffer, b"abc");
        buffer.clear();
        assert!(matches!(
            read_line(&mut reader, &mut buffer, 8).await.unwrap(),
            Line::End
        ));
    }
}
