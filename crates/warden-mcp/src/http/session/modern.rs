//! The 2026-07-28 era: stateless requests, each with `_meta` and the headers mirroring
//! it; `-32022` retried once with a version the server names; a broken stream re-issues a
//! read under a new id; `input_required` answered within a bound.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};
use warden_net::reqwest::header::{HeaderName, HeaderValue};

use super::{
    LISTEN_OPEN_LIMIT, MAX_INPUT_ROUNDS, MAX_RELIST_PAGES, MODERN_VERSION, Session, follow, header,
    is_safe, lock, result_of,
};
use crate::http::error::HttpError;
use crate::http::exchange::StreamContext;
use crate::http::exchange::{Endpoint, LISTEN_ID_PREFIX, ListenOpen, ListenState};
use crate::http::headers::{name_of, param_headers, param_values};
use crate::subscription::ListenFilter;

impl Session {
    /// Lists every tool again (at most [`MAX_RELIST_PAGES`] pages), to learn their
    /// `x-mcp-header` annotations.
    pub(super) async fn relist(&self) -> Result<(), HttpError> {
        let mut params = Map::new();
        for _page in 0..MAX_RELIST_PAGES {
            let result = self
                .modern(
                    "tools/list",
                    params.clone(),
                    None,
                    &super::Questions::Answered,
                )
                .await?;
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
    pub(super) fn learn_param_headers(&self, result: &Value) {
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

    /// Adds what every modern request carries in `_meta`: the version, who Warden is, and
    /// its capabilities.
    fn add_meta(&self, meta: &mut Map<String, Value>, version: &str, capabilities: Value) {
        meta.insert(crate::jsonrpc::META_VERSION.into(), json!(version));
        meta.insert(
            "io.modelcontextprotocol/clientInfo".into(),
            json!({"name": self.profile.name, "version": self.profile.version}),
        );
        meta.insert(
            "io.modelcontextprotocol/clientCapabilities".into(),
            capabilities,
        );
    }

    /// What this session's `subscriptions/listen` asks for, read afresh at each opening.
    fn listen_request(&self) -> ListenRequest {
        let version = self.protocol_version();
        let mut meta = Map::new();
        self.add_meta(&mut meta, &version, self.profile.capabilities.clone());
        ListenRequest {
            endpoint: Arc::clone(&self.endpoint),
            capabilities: lock(&self.state).capabilities.clone(),
            meta,
            version,
            count: Arc::clone(&self.listens),
        }
    }

    /// Starts the task that follows this session's `subscriptions/listen` stream (the
    /// 2026-07-28 replacement of the GET stream) for what the server announces: its list
    /// changes, and updates of the resources this connection is subscribed to
    /// ([`ListenRequest::filter`]); it opens the stream again, with the filter of that
    /// moment, when it ends, within the retry budget ([`follow`]). A server that does not
    /// offer it is not asked again; with nothing to ask for, nothing is opened.
    pub(super) fn start_listening(&self) {
        let request = self.listen_request();
        if request.filter().is_none() {
            return;
        }
        let requests = self.profile.requests.clone();
        let task = tokio::spawn(async move {
            match request.open().await {
                ListenOpen::Open(response, subscription) => {
                    let state = ListenState {
                        subscription,
                        ..ListenState::default()
                    };
                    let endpoint = Arc::clone(&request.endpoint);
                    follow(endpoint, response, state, Vec::new(), requests, move |_| {
                        let request = request.clone();
                        async move { request.open().await }
                    })
                    .await;
                }
                ListenOpen::NotOffered => {}
                ListenOpen::Failed(reason) => {
                    tracing::debug!(server = %request.endpoint.server, "subscriptions/listen not opened: {reason}");
                }
            }
        });
        if let Some(old) = lock(&self.listener).replace(task) {
            old.abort();
        }
    }

    /// Replaces this session's `subscriptions/listen` by one asking for what is wanted now
    /// (the resource subscriptions changed), and waits at most `limit` for the server's
    /// acknowledgement: the filter it honours. The old stream is closed once the new one
    /// is acknowledged (or given up on), which ends its subscription (2026-07-28 has no
    /// unsubscribe); in between, an update heard on both is noted once. An empty filter:
    /// nothing is asked for any more, and no stream is kept.
    pub(crate) async fn relisten(&self, limit: Duration) -> Result<ListenFilter, HttpError> {
        let _one_at_a_time = self.listening.lock().await;
        let request = self.listen_request();
        if request.filter().is_none() {
            if let Some(old) = lock(&self.listener).take() {
                old.abort();
            }
            return Ok(ListenFilter::default());
        }
        let (response, subscription) = match request.open().await {
            ListenOpen::Open(response, subscription) => (response, subscription),
            ListenOpen::NotOffered => {
                return Err(HttpError::Rpc {
                    status: 200,
                    code: -32601,
                    message: "the server does not offer subscriptions/listen".into(),
                    data: None,
                });
            }
            ListenOpen::Failed(reason) => {
                return Err(HttpError::Malformed(format!(
                    "subscriptions/listen could not be opened: {reason}"
                )));
            }
        };
        let (acknowledged, honoured) = tokio::sync::oneshot::channel();
        let state = ListenState {
            subscription,
            acknowledged: Some(acknowledged),
            ..ListenState::default()
        };
        let requests = self.profile.requests.clone();
        let endpoint = Arc::clone(&request.endpoint);
        let task = tokio::spawn(follow(
            endpoint,
            response,
            state,
            Vec::new(),
            requests,
            move |_| {
                let request = request.clone();
                async move { request.open().await }
            },
        ));
        // Guarded while the acknowledgement is awaited: a caller that gives up first (its
        // own timeout) drops this future, and the new stream must not go on unowned.
        let pending = crate::connection::AbortOnDrop::new(task);
        let answer = tokio::time::timeout(limit, honoured).await;
        if let Some(task) = pending.keep()
            && let Some(old) = lock(&self.listener).replace(task)
        {
            old.abort();
        }
        match answer {
            Ok(Ok(honoured)) => Ok(ListenFilter::from_json(Some(&honoured))),
            Ok(Err(_)) => Err(HttpError::StreamEnded {
                detail: "the subscriptions/listen stream ended before its acknowledgement".into(),
            }),
            Err(_) => Err(HttpError::Malformed(format!(
                "no acknowledgement of subscriptions/listen within {limit:?}"
            ))),
        }
    }

    pub(super) async fn modern(
        &self,
        method: &str,
        params: Map<String, Value>,
        current: Option<&Mutex<Option<Value>>>,
        questions: &super::Questions,
    ) -> Result<Value, HttpError> {
        let mut params = params;
        for _round in 0..=MAX_INPUT_ROUNDS {
            let result = self
                .modern_once(method, &params, current, questions)
                .await?;
            // Passed on: one round, its result as the server sent it.
            if matches!(questions, super::Questions::PassedOn(_))
                || result.get("resultType").and_then(Value::as_str) != Some("input_required")
            {
                return Ok(result);
            }
            // MRTR: answer each input request, then send the request again (new id) with
            // the answers and the server's state, unchanged.
            let mut responses = Map::new();
            let requests = result.get("inputRequests").and_then(Value::as_object);
            crate::downstream::check_input_count(requests.map_or(0, Map::len))
                .map_err(HttpError::Malformed)?;
            for (key, request) in requests.into_iter().flatten() {
                let answer = match questions.downstream() {
                    Some(client) => crate::downstream::ask_input(client, key, request)
                        .await
                        .map_err(HttpError::Malformed)?,
                    None => self.answer_input(request)?,
                };
                responses.insert(key.clone(), answer);
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

    /// Answers one input request with the session's own
    /// [`ServerRequests`](crate::http::exchange::ServerRequests) (Warden is the client).
    fn answer_input(&self, request: &Value) -> Result<Value, HttpError> {
        let kind = request
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let params = request.get("params").cloned().unwrap_or(Value::Null);
        self.profile
            .requests
            .answer(kind, &params)
            .map_err(|(_, message)| {
                HttpError::Malformed(format!(
                    "the server asked for input ({kind}) that Warden cannot give: {message}"
                ))
            })
    }

    pub(super) async fn modern_once(
        &self,
        method: &str,
        params: &Map<String, Value>,
        current: Option<&Mutex<Option<Value>>>,
        questions: &super::Questions,
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
            // A 2026-07-28 server asks only for what the client behind the call declared.
            let capabilities = match questions.downstream() {
                Some(client) => client.capabilities(),
                None => self.profile.capabilities.clone(),
            };
            self.add_meta(&mut meta, &version, capabilities);
            if let Some(level) = questions.downstream().and_then(|client| client.log_level()) {
                meta.insert(crate::downstream::META_LOG_LEVEL.into(), json!(level));
            }
            let progress_token = questions.progress_token(&id);
            if let Some(token) = &progress_token {
                meta.insert(super::PROGRESS_TOKEN.into(), json!(token));
            }
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
                behind: questions.behind(progress_token.as_deref()),
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
                // A refused connection is no broken stream: the request never left, and
                // trying again at once (no back-off, outside the connection's budget)
                // doubled the first connect's tries (found by the simulator's remote
                // world); the connection's retry policy takes it.
                Err(error @ (HttpError::StreamEnded { .. } | HttpError::Net(_)))
                    if reissue
                        && !matches!(&error, HttpError::Net(net)
                            if !net.is_transient() || net.is_refused()) =>
                {
                    reissue = false;
                    tracing::info!(server = %self.endpoint.server, "{method}: {error}; sending it again under a new id (it only reads)");
                }
                Err(error) => return Err(error),
            }
        }
    }
}

/// One `subscriptions/listen` of a session, built afresh at each opening so the filter is
/// that moment's.
#[derive(Clone)]
struct ListenRequest {
    endpoint: Arc<Endpoint>,
    /// What the server declared.
    capabilities: Value,
    /// The `_meta` every modern request carries.
    meta: Map<String, Value>,
    version: String,
    /// Listens sent by the session, numbering their ids.
    count: Arc<AtomicU64>,
}

impl ListenRequest {
    /// What to ask for: the list changes the server says it announces, and, when it
    /// declared `resources.subscribe`, the resources this connection is subscribed to (the
    /// union of its users' subscriptions: one stream per server, demultiplexed later).
    /// `None` when that is nothing.
    fn filter(&self) -> Option<Value> {
        let filter = ListenFilter::upstream(
            &self.capabilities,
            self.endpoint.notices.lists().subscribed(),
        );
        (!filter.is_empty()).then(|| filter.to_json())
    }

    /// Sends it (a new id each time) and returns its stream.
    async fn open(&self) -> ListenOpen {
        let Some(filter) = self.filter() else {
            return ListenOpen::NotOffered;
        };
        let mut headers: Vec<(HeaderName, HeaderValue)> = Vec::new();
        headers.extend(header("mcp-protocol-version", &self.version));
        headers.extend(header("mcp-method", "subscriptions/listen"));
        let count = self.count.fetch_add(1, Ordering::Relaxed);
        let message = json!({
            "jsonrpc": "2.0",
            "id": format!("{LISTEN_ID_PREFIX}{count}"),
            "method": "subscriptions/listen",
            "params": {"notifications": filter, "_meta": self.meta},
        });
        self.endpoint
            .open_subscription(&message, &headers, LISTEN_OPEN_LIMIT)
            .await
    }
}
