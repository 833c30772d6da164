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

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Map, Value, json};
use warden_net::reqwest::Method;
use warden_net::reqwest::header::{HeaderName, HeaderValue};

use super::error::HttpError;
use super::exchange::{Endpoint, Reply, ServerRequests, StreamContext, rpc_error};
use super::headers::{ParamHeader, name_of, param_headers, param_values};
use crate::connection::{Era, ServerInfo};

/// The one modern revision Warden speaks.
pub const MODERN_VERSION: &str = "2026-07-28";
/// Handshake revisions Warden accepts, newest first.
pub const LEGACY_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// Rounds of `input_required` answered for one request.
const MAX_INPUT_ROUNDS: usize = 8;
/// Time allowed for the `DELETE` of a session, and for a cancellation notice.
const FAREWELL_LIMIT: Duration = Duration::from_secs(2);
/// Time allowed to open the legacy session's own event stream.
const LISTEN_OPEN_LIMIT: Duration = Duration::from_secs(2);
/// Pages of `tools/list` fetched again after a header mismatch.
const MAX_RELIST_PAGES: usize = 64;
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
    /// The capabilities declared (`{}` for Warden: no sampling, roots or elicitation yet).
    pub capabilities: Value,
    /// Answers server requests (legacy) and input requests (modern).
    pub requests: Arc<dyn ServerRequests>,
    /// The handshake revision offered in `initialize`.
    pub legacy_version: String,
}

impl Default for ClientProfile {
    fn default() -> Self {
        Self {
            name: "warden".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            capabilities: json!({}),
            requests: Arc::new(super::exchange::DeclineRequests),
            legacy_version: LEGACY_VERSIONS[0].into(),
        }
    }
}

#[derive(Default)]
struct SessionState {
    /// `Mcp-Session-Id` (legacy), if the server issued one.
    id: Option<String>,
    /// The negotiated revision.
    version: String,
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
    pub(crate) fn new(endpoint: Endpoint, era: Era, profile: ClientProfile) -> Session {
        let version = match era {
            Era::Modern => MODERN_VERSION.to_owned(),
            Era::Legacy => profile.legacy_version.clone(),
        };
        Session {
            endpoint: Arc::new(endpoint),
            listener: Mutex::new(None),
            era,
            profile,
            state: Mutex::new(SessionState { id: None, version }),
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
                Ok(self.modern_info(&result))
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
        let result = match self.era {
            Era::Modern => match self.modern(method, params.clone(), current).await {
                // A header mismatch on a call may mean the tool's x-mcp-header marking is
                // not known (a new session) or changed: fetch the list again, retry once.
                Err(HttpError::Rpc { code: -32020, .. }) if method == "tools/call" => {
                    tracing::info!(server = %self.endpoint.server, "header mismatch on tools/call; listing tools again and retrying once");
                    self.relist().await?;
                    self.modern(method, params, current).await?
                }
                other => other?,
            },
            Era::Legacy => self.legacy(method, params, current).await?,
        };
        if method == "tools/list" {
            self.learn_param_headers(&result);
        }
        Ok(result)
    }

    /// Lists every tool again (at most [`MAX_RELIST_PAGES`] pages), to learn their
    /// `x-mcp-header` annotations.
    async fn relist(&self) -> Result<(), HttpError> {
        let mut params = Map::new();
        for _page in 0..MAX_RELIST_PAGES {
            let result = self.modern("tools/list", params.clone(), None).await?;
            self.learn_param_headers(&result);
            match result.get("nextCursor").and_then(Value::as_str) {
                Some(cursor) if !cursor.is_empty() => {
                    params.insert("cursor".into(), json!(cursor));
                }
                _ => break,
            }
        }
        Ok(())
    }

    /// Records each listed tool's `x-mcp-header` annotations (modern era).
    fn learn_param_headers(&self, result: &Value) {
        let mut known = lock(&self.param_headers);
        for tool in result
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let (Some(name), Some(schema)) = (
                tool.get("name").and_then(Value::as_str),
                tool.get("inputSchema"),
            ) else {
                continue;
            };
            if let Ok(headers) = param_headers(schema) {
                known.insert(name.to_owned(), headers);
            }
        }
    }

    async fn modern(
        &self,
        method: &str,
        params: Map<String, Value>,
        current: Option<&Mutex<Option<Value>>>,
    ) -> Result<Value, HttpError> {
        let mut params = params;
        for _round in 0..=MAX_INPUT_ROUNDS {
            let result = self.modern_once(method, &params, current).await?;
            if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
                return Ok(result);
            }
            // MRTR: answer each input request, then send the request again (new id) with
            // the answers and the server's state, unchanged.
            let mut responses = Map::new();
            let requests = result.get("inputRequests").and_then(Value::as_object);
            for (key, request) in requests.into_iter().flatten() {
                let kind = request
                    .get("method")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let request_params = request.get("params").cloned().unwrap_or(Value::Null);
                match self.profile.requests.answer(kind, &request_params) {
                    Ok(answer) => {
                        responses.insert(key.clone(), answer);
                    }
                    Err((_, message)) => {
                        return Err(HttpError::Malformed(format!(
                            "the server asked for input ({kind}) that Warden cannot give: {message}"
                        )));
                    }
                }
            }
            params.insert("inputResponses".into(), Value::Object(responses));
            match result.get("requestState") {
                Some(state) => params.insert("requestState".into(), state.clone()),
                None => params.remove("requestState"),
            };
        }
        Err(HttpError::Malformed(format!(
            "the server still asked for input after {MAX_INPUT_ROUNDS} rounds"
        )))
    }

    async fn modern_once(
        &self,
        method: &str,
        params: &Map<String, Value>,
        current: Option<&Mutex<Option<Value>>>,
    ) -> Result<Value, HttpError> {
        let mut version_retry = true;
        let mut reissue = is_safe(method);
        loop {
            let version = self.protocol_version();
            let id = self.next_id();
            if let Some(current) = current {
                *lock(current) = Some(id.clone());
            }
            let mut params = params.clone();
            let mut meta = params
                .remove("_meta")
                .and_then(|meta| meta.as_object().cloned())
                .unwrap_or_default();
            meta.insert(
                "io.modelcontextprotocol/protocolVersion".into(),
                json!(version),
            );
            meta.insert(
                "io.modelcontextprotocol/clientInfo".into(),
                json!({"name": self.profile.name, "version": self.profile.version}),
            );
            meta.insert(
                "io.modelcontextprotocol/clientCapabilities".into(),
                self.profile.capabilities.clone(),
            );
            let mut headers: Vec<(HeaderName, HeaderValue)> = Vec::new();
            headers.extend(header("mcp-protocol-version", &version));
            headers.extend(header("mcp-method", method));
            if let Some(name) = name_of(method, &params) {
                headers.extend(header("mcp-name", &name));
            }
            if method == "tools/call"
                && let Some(tool) = params.get("name").and_then(Value::as_str)
            {
                let known = lock(&self.param_headers)
                    .get(tool)
                    .cloned()
                    .unwrap_or_default();
                let arguments = params.get("arguments").and_then(Value::as_object);
                for (name, value) in param_values(&known, arguments) {
                    if let (Ok(name), Ok(value)) =
                        (HeaderName::try_from(name), HeaderValue::from_str(&value))
                    {
                        headers.push((name, value));
                    }
                }
            }
            params.insert("_meta".into(), Value::Object(meta));
            let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            let context = StreamContext {
                session_headers: &[],
                resumable: false,
                requests: self.profile.requests.as_ref(),
            };
            let outcome = self
                .endpoint
                .post(&message, &headers, Some(&id), &context)
                .await
                .and_then(|(reply, _)| result_of(reply, 200));
            match outcome {
                Ok(result) => return Ok(result),
                Err(HttpError::Rpc {
                    code: -32022,
                    data,
                    message,
                    ..
                }) if version_retry => {
                    version_retry = false;
                    let supported: Vec<String> = data
                        .as_ref()
                        .and_then(|data| data.get("supported"))
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect();
                    if !supported.iter().any(|v| v == MODERN_VERSION) {
                        return Err(HttpError::Era(format!(
                            "the server does not support protocol {version} ({message}); it \
                             supports {}, and Warden speaks {MODERN_VERSION} in this era",
                            if supported.is_empty() {
                                "nothing it named".to_owned()
                            } else {
                                supported.join(", ")
                            }
                        )));
                    }
                    tracing::info!(server = %self.endpoint.server, "the server refused protocol {version}; retrying with {MODERN_VERSION}");
                    lock(&self.state).version = MODERN_VERSION.to_owned();
                }
                Err(error @ (HttpError::StreamEnded { .. } | HttpError::Net(_)))
                    if reissue && !matches!(&error, HttpError::Net(net) if !net.is_transient()) =>
                {
                    reissue = false;
                    tracing::info!(server = %self.endpoint.server, "{method}: {error}; sending it again under a new id (it only reads)");
                }
                Err(error) => return Err(error),
            }
        }
    }

    fn session_headers(&self) -> Vec<(HeaderName, HeaderValue)> {
        let state = lock(&self.state);
        let mut headers = Vec::new();
        if let Some(id) = &state.id {
            headers.extend(header("mcp-session-id", id));
        }
        headers.extend(header("mcp-protocol-version", &state.version));
        headers
    }

    async fn legacy(
        &self,
        method: &str,
        params: Map<String, Value>,
        current: Option<&Mutex<Option<Value>>>,
    ) -> Result<Value, HttpError> {
        let mut reinitialise = true;
        loop {
            let headers = self.session_headers();
            let had_session = lock(&self.state).id.is_some();
            let id = self.next_id();
            if let Some(current) = current {
                *lock(current) = Some(id.clone());
            }
            let mut message = json!({"jsonrpc": "2.0", "id": id, "method": method});
            if !params.is_empty() {
                message["params"] = Value::Object(params.clone());
            }
            let context = StreamContext {
                session_headers: &headers,
                resumable: true,
                requests: self.profile.requests.as_ref(),
            };
            let outcome = self
                .endpoint
                .post(&message, &headers, Some(&id), &context)
                .await
                .and_then(|(reply, _)| result_of(reply, 200));
            match outcome {
                Err(HttpError::Status { status: 404, .. } | HttpError::Rpc { status: 404, .. })
                    if had_session && reinitialise =>
                {
                    reinitialise = false;
                    tracing::info!(server = %self.endpoint.server, "the session expired (HTTP 404); initialising again");
                    lock(&self.state).id = None;
                    self.initialize().await?;
                }
                other => return other,
            }
        }
    }

    /// The `initialize` handshake and `notifications/initialized` (legacy era).
    async fn initialize(&self) -> Result<Value, HttpError> {
        let id = self.next_id();
        let message = json!({
            "jsonrpc": "2.0", "id": id, "method": "initialize",
            "params": {
                "protocolVersion": self.profile.legacy_version,
                "capabilities": self.profile.capabilities,
                "clientInfo": {"name": self.profile.name, "version": self.profile.version},
            },
        });
        let context = StreamContext {
            session_headers: &[],
            resumable: false,
            requests: self.profile.requests.as_ref(),
        };
        let (reply, headers) = self
            .endpoint
            .post(&message, &[], Some(&id), &context)
            .await?;
        let result = result_of(reply, 200)?;
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if !LEGACY_VERSIONS.contains(&version.as_str()) {
            return Err(HttpError::Era(format!(
                "the server answered initialize with protocol version {version:?}, which Warden \
                 does not speak (it speaks {})",
                LEGACY_VERSIONS.join(", ")
            )));
        }
        let session = match headers.get("mcp-session-id") {
            None => None,
            Some(value) => {
                let bytes = value.as_bytes();
                if bytes.is_empty()
                    || bytes.len() > MAX_SESSION_ID
                    || !bytes.iter().all(|b| (0x21..=0x7e).contains(b))
                {
                    return Err(HttpError::Malformed(
                        "the Mcp-Session-Id header is not 1 to 1024 visible ASCII characters"
                            .into(),
                    ));
                }
                Some(String::from_utf8_lossy(bytes).into_owned())
            }
        };
        {
            let mut state = lock(&self.state);
            state.id = session;
            state.version = version;
        }
        let headers = self.session_headers();
        let notification = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let context = StreamContext {
            session_headers: &headers,
            resumable: false,
            requests: self.profile.requests.as_ref(),
        };
        self.endpoint
            .post(&notification, &headers, None, &context)
            .await?;
        self.listen(headers).await;
        Ok(result)
    }

    /// Starts (or restarts, after a new `initialize`) the task that answers requests the
    /// server sends on the session's own event stream.
    /// The stream is open before this returns, so a request the server sends while
    /// answering the next call is not lost.
    async fn listen(&self, headers: Vec<(HeaderName, HeaderValue)>) {
        let Some(response) = self.endpoint.open_listen(&headers, LISTEN_OPEN_LIMIT).await else {
            return;
        };
        let endpoint = self.endpoint.clone();
        let requests = self.profile.requests.clone();
        let task = tokio::spawn(async move {
            endpoint.listen(response, headers, requests.as_ref()).await;
        });
        if let Some(old) = lock(&self.listener).replace(task) {
            old.abort();
        }
    }

    /// Tells a legacy server to stop working on request `id` (the caller gave up). In the
    /// modern era closing the response stream is the cancellation, so nothing is sent.
    pub async fn cancel(&self, id: Value) {
        if self.era != Era::Legacy {
            return;
        }
        let headers = self.session_headers();
        let notification = json!({
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "the caller stopped waiting"},
        });
        let context = StreamContext {
            session_headers: &headers,
            resumable: false,
            requests: self.profile.requests.as_ref(),
        };
        let send = self.endpoint.post(&notification, &headers, None, &context);
        let _ = tokio::time::timeout(FAREWELL_LIMIT, send).await;
    }

    /// Ends a legacy session with `DELETE` (a 405 means the server does not support it).
    pub async fn close(&self) {
        if let Some(task) = lock(&self.listener).take() {
            task.abort();
        }
        if self.era != Era::Legacy || lock(&self.state).id.is_none() {
            return;
        }
        let headers = self.session_headers();
        match self
            .endpoint
            .send_bodyless(Method::DELETE, &headers, FAREWELL_LIMIT)
            .await
        {
            Ok(status) => {
                tracing::debug!(server = %self.endpoint.server, %status, "session deleted")
            }
            Err(error) => {
                tracing::debug!(server = %self.endpoint.server, "DELETE of the session failed: {error}")
            }
        }
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
