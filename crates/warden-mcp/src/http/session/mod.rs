//! A conversation with one remote server in the era it speaks.
//!
//! - **2026-07-28** (modern): no session; every request carries `_meta` (protocol version,
//!   client info and capabilities) and the headers mirroring it ([`super::headers`]). An
//!   `UnsupportedProtocolVersion` (-32022) answer is retried once with a version the server
//!   names; a broken stream re-issues the request under a new id only for reads; an
//!   `input_required` result is answered and retried within a bound.
//! - **2025-11-25** (legacy): `initialize`, then `Mcp-Session-Id` and
//!   `MCP-Protocol-Version` on every request; a 404 means the session expired, and the
//!   client initialises again once; broken streams resume with `Last-Event-ID`; the
//!   session is deleted on close.
//!
//! Each era lives in its own submodule (`modern`, `legacy`); this one holds what they share.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Map, Value, json};
use warden_config::ReconnectSpec;
use warden_net::reqwest;
use warden_net::reqwest::header::{HeaderName, HeaderValue};

use super::error::HttpError;
use super::exchange::{
    Behind, Endpoint, ListenOpen, ListenState, Notices, Reply, ServerRequests, rpc_error,
};
use super::headers::ParamHeader;
use crate::connection::{Era, ServerInfo};
use crate::downstream::{CallContext, Downstream};

mod legacy;
mod modern;

/// The one modern revision Warden speaks.
pub const MODERN_VERSION: &str = "2026-07-28";
/// Handshake revisions Warden accepts, newest first.
pub const LEGACY_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// Who answers what a server asks during one request, and hears what it reports about it.
#[derive(Clone, Default)]
pub(crate) enum Questions {
    /// Warden itself: the session's [`ServerRequests`](super::exchange::ServerRequests)
    /// answer, and a 2026-07-28 server's `input_required` result is answered there and the
    /// request sent again.
    #[default]
    Answered,
    /// The client behind a call, asked each question as a request of its own (a
    /// 2025-11-25 client): a 2026-07-28 server's input requests are put to it one by one
    /// and the call sent again with its answers.
    Relayed(Arc<dyn Downstream>),
    /// The client behind a call, which answers a 2026-07-28 server's `input_required`
    /// result itself (a 2026-07-28 client): the result comes back as the server sent it.
    PassedOn(Arc<dyn Downstream>),
}

impl Questions {
    /// Who answers for a call made in `context`.
    pub(crate) fn for_call(context: &CallContext) -> Questions {
        match &context.downstream {
            None => Questions::Answered,
            Some(client) if client.passes_input_through() => {
                Questions::PassedOn(Arc::clone(client))
            }
            Some(client) => Questions::Relayed(Arc::clone(client)),
        }
    }

    /// The client behind the request, if there is one. Either way a 2025-11-25 server's
    /// requests on the call's stream are put to it (a 2026-07-28 client is asked through
    /// the gateway's parking, decision 0051), and its progress and log messages reach it.
    pub(crate) fn downstream(&self) -> Option<&dyn Downstream> {
        match self {
            Questions::Answered => None,
            Questions::Relayed(client) | Questions::PassedOn(client) => Some(client.as_ref()),
        }
    }

    /// The progress token a request with id `id` goes out with: one only when a client
    /// behind it follows progress (a server reports progress only under a token).
    fn progress_token(&self, id: &Value) -> Option<String> {
        self.downstream()
            .filter(|client| client.follows_progress())
            .map(|_| match id {
                Value::String(id) => format!("warden-{id}"),
                other => format!("warden-{other}"),
            })
    }

    /// What a stream answering the request with `progress_token` relays to the client.
    fn behind<'a>(&'a self, progress_token: Option<&'a str>) -> Option<Behind<'a>> {
        self.downstream().map(|downstream| Behind {
            downstream,
            progress_token,
        })
    }
}

/// Puts `token` into the request's `_meta` as its `progressToken` (the caller's other
/// `_meta` entries kept).
fn with_progress_token(params: &mut Map<String, Value>, token: &str) {
    let meta = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(PROGRESS_TOKEN.into(), json!(token));
    }
}

/// `_meta` key of a request's progress token.
const PROGRESS_TOKEN: &str = "progressToken";

/// Rounds of `input_required` answered for one request.
const MAX_INPUT_ROUNDS: usize = 8;
/// Time allowed for the `DELETE` of a session, and for a cancellation notice.
const FAREWELL_LIMIT: Duration = Duration::from_secs(2);
/// Time allowed to open a stream of the server's own messages (the legacy session's GET
/// stream, a modern `subscriptions/listen`).
const LISTEN_OPEN_LIMIT: Duration = Duration::from_secs(2);
/// Pages of `tools/list` fetched again after a header mismatch.
const MAX_RELIST_PAGES: usize = 64;
/// Consecutive failed attempts to reopen a stream of the server's own messages (the
/// legacy GET stream, a modern `subscriptions/listen`) before Warden stops following it;
/// a stream that stayed open for [`HEALTHY_STREAM`] restores the budget.
const MAX_LISTEN_RETRIES: u32 = 5;
/// A stream open at least this long counted as healthy when it ends (an idle timeout, a
/// server's periodic close): its retry budget starts again.
const HEALTHY_STREAM: Duration = Duration::from_secs(10);
/// The back-off before reopening a stream when the server named no `retry`: the shared
/// full-jitter back-off ([`super::reconnect::Backoff`], on the remote's clock), up to
/// 500 ms before the first reopening, doubling, at most 30 s.
const LISTEN_RETRY: ReconnectSpec = ReconnectSpec {
    connect_attempts: 1,
    attempts: MAX_LISTEN_RETRIES,
    initial_delay: Duration::from_millis(500),
    max_delay: Duration::from_secs(30),
};

/// Follows a stream of the server's own messages for as long as the session lives:
/// reads it ([`Endpoint::listen`]), and when it ends, opens it again with `reopen`
/// (legacy: `Last-Event-ID`; modern: a new `subscriptions/listen`) after a delay (the
/// server's `retry`, else [`LISTEN_RETRY`]'s back-off; both waited on the endpoint's
/// [`super::reconnect::Backoff`] clock), at most [`MAX_LISTEN_RETRIES`] failures in
/// a row. A 405 (or a listen the server does not offer) ends it quietly. Each reopening
/// marks the lists and the subscribed resources as possibly changed: a notice may have
/// been lost in the gap. `state` starts as the first stream's (its subscription id, and
/// who waits for its acknowledgement).
async fn follow<F, Fut>(
    endpoint: Arc<Endpoint>,
    first: reqwest::Response,
    mut state: ListenState,
    headers: Vec<(HeaderName, HeaderValue)>,
    requests: Arc<dyn ServerRequests>,
    mut reopen: F,
) where
    F: FnMut(Option<String>) -> Fut,
    Fut: std::future::Future<Output = ListenOpen>,
{
    let mut response = first;
    let mut failures = 0u32;
    loop {
        let opened = tokio::time::Instant::now();
        endpoint
            .listen(response, &headers, requests.as_ref(), &mut state)
            .await;
        if opened.elapsed() >= HEALTHY_STREAM {
            failures = 0;
        }
        response = loop {
            if failures >= MAX_LISTEN_RETRIES {
                tracing::warn!(server = %endpoint.server, "stopped following the server's event stream after {MAX_LISTEN_RETRIES} failed reconnections; its tool list changes are read at the next reconnect");
                return;
            }
            let delay = state
                .retry
                .unwrap_or_else(|| endpoint.backoff.delay(&LISTEN_RETRY, failures));
            failures += 1;
            endpoint.backoff.sleep(delay).await;
            match reopen(state.last_id.clone()).await {
                ListenOpen::Open(response, subscription) => {
                    tracing::debug!(server = %endpoint.server, "event stream reopened");
                    state.subscription = subscription;
                    endpoint.notices.mark_gap();
                    break response;
                }
                ListenOpen::NotOffered => return,
                ListenOpen::Failed(reason) => {
                    tracing::debug!(server = %endpoint.server, "event stream not reopened: {reason}");
                }
            }
        };
    }
}

/// Longest session id accepted.
const MAX_SESSION_ID: usize = 1024;

/// Methods safe to send again after a broken stream: they only read.
fn is_safe(method: &str) -> bool {
    matches!(
        method,
        "server/discover"
            | "tools/list"
            | "prompts/list"
            | "prompts/get"
            | "resources/list"
            | "resources/read"
            | "resources/templates/list"
            | "completion/complete"
    )
}

/// What the client says about itself, and who answers the server's questions.
#[derive(Clone)]
pub struct ClientProfile {
    /// `clientInfo.name`.
    pub name: String,
    /// `clientInfo.version`.
    pub version: String,
    /// The capabilities declared ([`crate::client_capabilities`] for Warden: elicitation,
    /// the same as on every other connection; never sampling or roots).
    pub capabilities: Value,
    /// Answers server requests (legacy) and input requests (modern).
    pub requests: Arc<dyn ServerRequests>,
    /// The handshake revision offered in `initialize`.
    pub legacy_version: String,
    /// Where the server's notices go; shared by every session of one connection.
    pub notices: Arc<Notices>,
}

impl Default for ClientProfile {
    fn default() -> Self {
        Self {
            name: "warden".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            capabilities: crate::client_capabilities(),
            requests: Arc::new(super::exchange::DeclineRequests),
            legacy_version: LEGACY_VERSIONS[0].into(),
            notices: Arc::default(),
        }
    }
}

#[derive(Default)]
struct SessionState {
    /// `Mcp-Session-Id` (legacy), if the server issued one.
    id: Option<String>,
    /// The negotiated revision.
    version: String,
    /// The capabilities the server declared (what its modern listen asks for).
    capabilities: Value,
}

/// One server's conversation; safe to share between concurrent requests.
pub struct Session {
    endpoint: Arc<Endpoint>,
    /// The task listening on the legacy session's event stream, if one runs.
    listener: Mutex<Option<tokio::task::JoinHandle<()>>>,
    era: Era,
    profile: ClientProfile,
    state: Mutex<SessionState>,
    next_id: AtomicU64,
    /// `x-mcp-header` annotations per tool, from the last `tools/list` (modern).
    param_headers: Mutex<HashMap<String, Vec<ParamHeader>>>,
    /// Held while the modern listen is replaced ([`Session::relisten`]).
    listening: tokio::sync::Mutex<()>,
    /// Held while an expired legacy session is initialised again: no request goes out
    /// without a session meanwhile, and one re-initialisation serves every request the
    /// expired session refused.
    reopening: tokio::sync::Mutex<()>,
    /// `subscriptions/listen` requests sent, numbering their ids.
    listens: Arc<AtomicU64>,
    /// Set by [`Session::close`]: the session was deleted (or needs no deleting).
    closed: std::sync::atomic::AtomicBool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn header(name: &'static str, value: &str) -> Option<(HeaderName, HeaderValue)> {
    HeaderValue::from_str(value)
        .ok()
        .map(|value| (HeaderName::from_static(name), value))
}

impl Session {
    pub(crate) fn new(mut endpoint: Endpoint, era: Era, profile: ClientProfile) -> Session {
        endpoint.notices = Arc::clone(&profile.notices);
        let version = match era {
            Era::Modern => MODERN_VERSION.to_owned(),
            Era::Legacy => profile.legacy_version.clone(),
        };
        Session {
            endpoint: Arc::new(endpoint),
            listener: Mutex::new(None),
            era,
            profile,
            state: Mutex::new(SessionState {
                id: None,
                version,
                capabilities: Value::Null,
            }),
            listening: tokio::sync::Mutex::new(()),
            reopening: tokio::sync::Mutex::new(()),
            listens: Arc::new(AtomicU64::new(0)),
            closed: std::sync::atomic::AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            param_headers: Mutex::new(HashMap::new()),
        }
    }

    /// The era this session speaks.
    pub fn era(&self) -> Era {
        self.era
    }

    /// The negotiated protocol revision.
    pub fn protocol_version(&self) -> String {
        lock(&self.state).version.clone()
    }

    fn next_id(&self) -> Value {
        json!(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Opens the conversation: `server/discover` (modern) or `initialize` (legacy). Returns
    /// what the server said about itself.
    pub async fn open(&self) -> Result<ServerInfo, HttpError> {
        match self.era {
            Era::Modern => {
                let result = self.request("server/discover", Map::new(), None).await?;
                let info = self.modern_info(&result);
                lock(&self.state).capabilities = info.capabilities.clone();
                self.start_listening();
                Ok(info)
            }
            Era::Legacy => {
                let result = self.initialize().await?;
                Ok(self.legacy_info(&result))
            }
        }
    }

    /// Sends one request and returns its result. `current` is updated with the id in
    /// flight, so a caller that gives up can name it in a cancellation.
    pub async fn request(
        &self,
        method: &str,
        params: Map<String, Value>,
        current: Option<&Mutex<Option<Value>>>,
    ) -> Result<Value, HttpError> {
        self.request_as(method, params, current, &Questions::Answered)
            .await
    }

    /// [`Session::request`], with `questions` saying who answers a 2026-07-28 server's
    /// `input_required` result (a 2025-11-25 session has none).
    pub(crate) async fn request_as(
        &self,
        method: &str,
        params: Map<String, Value>,
        current: Option<&Mutex<Option<Value>>>,
        questions: &Questions,
    ) -> Result<Value, HttpError> {
        let result = match self.era {
            Era::Modern => match self
                .modern(method, params.clone(), current, questions)
                .await
            {
                // A header mismatch on a call may mean the tool's x-mcp-header marking is
                // not known (a new session) or changed: fetch the list again, retry once.
                Err(HttpError::Rpc { code: -32020, .. }) if method == "tools/call" => {
                    tracing::info!(server = %self.endpoint.server, "header mismatch on tools/call; listing tools again and retrying once");
                    self.relist().await?;
                    self.modern(method, params, current, questions).await?
                }
                other => other?,
            },
            Era::Legacy => self.legacy(method, params, current, questions).await?,
        };
        if method == "tools/list" {
            self.learn_param_headers(&result);
        }
        Ok(result)
    }

    fn modern_info(&self, result: &Value) -> ServerInfo {
        let implementation = result
            .get("_meta")
            .and_then(|meta| meta.get("io.modelcontextprotocol/serverInfo"))
            .or_else(|| result.get("serverInfo"));
        info(self.era, self.protocol_version(), result, implementation)
    }

    fn legacy_info(&self, result: &Value) -> ServerInfo {
        info(
            self.era,
            self.protocol_version(),
            result,
            result.get("serverInfo"),
        )
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // A session replaced by a reconnect stops following its streams.
        if let Some(task) = lock(&self.listener).take() {
            task.abort();
        }
        // And is deleted, as one that is closed is (on a task of its own, bounded): left
        // alone, the server would hold it until it expired it itself. The simulator's
        // remote world found every reconnect leaving one behind, and a session re-opened
        // after a 404 by a request still running on a replaced session leaving another.
        if self.era == Era::Legacy
            && !self.closed.load(Ordering::SeqCst)
            && lock(&self.state).id.is_some()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let endpoint = Arc::clone(&self.endpoint);
            let headers = self.session_headers();
            runtime.spawn(async move {
                let _ = endpoint
                    .send_bodyless(reqwest::Method::DELETE, &headers, FAREWELL_LIMIT)
                    .await;
            });
        }
    }
}

fn info(
    era: Era,
    protocol_version: String,
    result: &Value,
    implementation: Option<&Value>,
) -> ServerInfo {
    let text = |value: Option<&Value>, key: &str| {
        value
            .and_then(|v| v.get(key))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    ServerInfo {
        era,
        protocol_version,
        name: text(implementation, "name"),
        version: text(implementation, "version"),
        title: text(implementation, "title"),
        capabilities: result.get("capabilities").cloned().unwrap_or(Value::Null),
        instructions: text(Some(result), "instructions"),
        program: None,
        connect_attempts: 1,
    }
}

/// The result of a reply, or its JSON-RPC error as [`HttpError::Rpc`].
fn result_of(reply: Reply, status: u16) -> Result<Value, HttpError> {
    match reply {
        Reply::Response(message) => {
            if let Some(error) = message.get("error") {
                return Err(rpc_error(status, error));
            }
            Ok(message.get("result").cloned().unwrap_or(Value::Null))
        }
        Reply::Accepted => Err(HttpError::Malformed("no answer to the request".into())),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::http::reconnect::{Backoff, Clock, SeededRng};
    use futures::future::BoxFuture;

    /// A clock that records what it was asked to wait and returns at once.
    #[derive(Debug, Default)]
    struct Recording(Mutex<Vec<Duration>>);

    impl Clock for Recording {
        fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
            self.0.lock().unwrap().push(duration);
            Box::pin(async {})
        }
    }

    /// A response whose (empty) event stream ends at once, from a one-shot local server.
    async fn ended_stream() -> reqwest::Response {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut head = [0u8; 1024];
            let _ = stream.read(&mut head).await;
            let _ = stream
                .write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                      Content-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
        });
        warden_net::client(&warden_net::HttpOptions::default())
            .unwrap()
            .get(format!("http://{addr}/mcp"))
            .send()
            .await
            .unwrap()
    }

    /// Reopening a stream of the server's own messages waits on the remote's injected
    /// clock (the shared back-off), within [`LISTEN_RETRY`]'s ceilings, and gives up after
    /// [`MAX_LISTEN_RETRIES`] failures in a row: nothing waits on tokio's own timer.
    #[tokio::test]
    async fn reopening_a_stream_backs_off_on_the_injected_clock() {
        let clock = Arc::new(Recording::default());
        let endpoint = Arc::new(Endpoint {
            http: warden_net::client(&warden_net::HttpOptions::default()).unwrap(),
            url: reqwest::Url::parse("http://127.0.0.1:9/mcp").unwrap(),
            headers: reqwest::header::HeaderMap::new(),
            max_bytes: 1 << 20,
            server: "s".into(),
            auth: None,
            notices: Arc::default(),
            backoff: Backoff::new(clock.clone(), SeededRng::new(3)),
            transport: None,
        });
        let tries = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&tries);
        let started = std::time::Instant::now();
        tokio::time::timeout(
            Duration::from_secs(5),
            follow(
                endpoint,
                ended_stream().await,
                ListenState::default(),
                Vec::new(),
                Arc::new(super::super::exchange::DeclineRequests),
                move |_| {
                    counted.fetch_add(1, Ordering::SeqCst);
                    async { ListenOpen::Failed("refused".into()) }
                },
            ),
        )
        .await
        .unwrap();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(tries.load(Ordering::SeqCst), u64::from(MAX_LISTEN_RETRIES));
        let waits = clock.0.lock().unwrap().clone();
        assert_eq!(waits.len(), MAX_LISTEN_RETRIES as usize, "{waits:?}");
        for (attempt, wait) in waits.iter().enumerate() {
            let ceiling = crate::http::reconnect::ceiling(&LISTEN_RETRY, attempt as u32);
            assert!(
                *wait <= ceiling,
                "attempt {attempt}: {wait:?} over {ceiling:?}"
            );
        }
    }
}
