//! One HTTP exchange with a Streamable HTTP endpoint: POST a JSON-RPC message and read the
//! answer, whether it comes as one JSON body or as an event stream; resume a broken legacy
//! stream with `GET` + `Last-Event-ID`. Every read is size-capped and status codes and
//! content types are checked before a byte of the body is trusted.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use warden_net::reqwest::header::{
    ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, LOCATION,
    WWW_AUTHENTICATE,
};
use warden_net::reqwest::{self, Method, StatusCode, Url};
use warden_net::{NetError, read_capped, sse_events};
use warden_oauth::{OAuthClient, Secret};

use super::error::{HttpError, excerpt};

/// Bytes of an error body read to quote it.
const ERROR_BODY_CAP: usize = 4096;
/// Resumptions of one broken event stream (legacy era).
const MAX_RESUMES: u32 = 5;
/// Longest `retry` delay honoured; a larger one is clamped.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);
/// Delay before resuming when the server named none.
const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(1000);
/// Server requests answered within one exchange, at most.
const MAX_SERVER_REQUESTS: usize = 64;
/// Authorization rounds (sign-in, refresh, step-up) for one request, at most: a server
/// that keeps refusing does not get an endless loop of consent screens.
pub(crate) const MAX_AUTH_ROUNDS: u32 = 3;

/// Answers requests a server sends on a response stream (legacy era: `ping`,
/// `elicitation/create`, `roots/list`, ...), and input requests (2026-07-28 era).
pub trait ServerRequests: Send + Sync {
    /// The result for `method` with `params`, or a JSON-RPC error (code, message).
    fn answer(&self, method: &str, params: &Value) -> Result<Value, (i64, String)>;
}

/// What a server announced on any of its streams that Warden acts on later: that its tool
/// list changed (`notifications/tools/list_changed`). Shared by every session of one
/// connection (a reconnect keeps it), read by [`crate::Connection::take_tools_changed`].
#[derive(Debug, Default)]
pub struct Notices {
    tools_changed: std::sync::atomic::AtomicBool,
    /// Resource and prompt list changes, for a gateway to relay
    /// ([`crate::Connection::notices`]).
    lists: Arc<crate::notices::ServerNotices>,
}

impl Notices {
    /// Takes note of a notification a server sent.
    pub(crate) fn note(&self, message: &Value) {
        let method = message.get("method").and_then(Value::as_str);
        if method == Some("notifications/tools/list_changed") {
            self.mark_tools_changed();
        } else if let Some(method) = method {
            self.lists.note(method, message.get("params"));
        }
    }

    /// The resource and prompt list changes noted.
    pub fn lists(&self) -> Arc<crate::notices::ServerNotices> {
        Arc::clone(&self.lists)
    }

    /// Marks everything a gap in a stream of the server's own messages may have lost a
    /// notice of: the tool, resource and prompt lists, and every subscribed resource
    /// (its subscribers are told to read it again: a spurious update costs a read, a
    /// missed one leaves a client with stale content).
    pub(crate) fn mark_gap(&self) {
        self.mark_tools_changed();
        self.lists.mark_lists_changed();
        self.lists.mark_subscribed_updated();
    }

    /// Marks the tool list as possibly changed (a notice, or a gap in a stream that may
    /// have lost one: reading the list again is cheap, missing a change is not).
    pub(crate) fn mark_tools_changed(&self) {
        self.tools_changed
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// True once after the server said its tool list changed, clearing the mark.
    pub fn take_tools_changed(&self) -> bool {
        self.tools_changed
            .swap(false, std::sync::atomic::Ordering::SeqCst)
    }
}

/// The prefix of the request ids of Warden's `subscriptions/listen` requests.
pub(crate) const LISTEN_ID_PREFIX: &str = "warden-listen-";

/// How opening a stream of the server's own messages went.
pub(crate) enum ListenOpen {
    /// Open; with the id of the `subscriptions/listen` request whose stream it is
    /// (modern), which every notification on it must carry as its subscription id.
    Open(reqwest::Response, Option<Value>),
    /// The server offers no such stream (405): not an error.
    NotOffered,
    /// It could not be opened now (why, for the log).
    Failed(String),
}

/// Where a stream of the server's own messages stands, across its reconnections.
#[derive(Debug, Default)]
pub(crate) struct ListenState {
    /// The last event id seen (legacy: sent back as `Last-Event-ID`).
    pub last_id: Option<String>,
    /// The delay the server asked for before reconnecting (`retry:`), clamped.
    pub retry: Option<Duration>,
    /// The subscription id of the stream being read (a modern `subscriptions/listen`'s
    /// request id): a notification tagged with another is not this stream's, and dropped.
    pub subscription: Option<Value>,
    /// Who waits for the stream's `notifications/subscriptions/acknowledged` (the
    /// `notifications` filter the server honours); taken by the first one.
    pub acknowledged: Option<tokio::sync::oneshot::Sender<Value>>,
}

/// `_meta` key of the subscription a notification belongs to (2026-07-28).
pub(crate) const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// Warden's default: answers `ping`, declines elicitation (declared on every connection,
/// see [`crate::client_capabilities`]: the user's answer is "no"), and refuses everything
/// else (sampling and roots are never declared).
#[derive(Debug, Default)]
pub struct DeclineRequests;

impl ServerRequests for DeclineRequests {
    fn answer(&self, method: &str, _params: &Value) -> Result<Value, (i64, String)> {
        match method {
            "ping" => Ok(serde_json::json!({})),
            "elicitation/create" => Ok(serde_json::json!({"action": "decline"})),
            other => Err((-32601, format!("Warden does not handle {other}"))),
        }
    }
}

/// The endpoint and what every request to it carries.
pub(crate) struct Endpoint {
    pub http: reqwest::Client,
    pub url: Url,
    /// Configured headers (values may be secrets: never logged).
    pub headers: HeaderMap,
    /// Cap on one JSON body and on one event.
    pub max_bytes: usize,
    /// Server name, for logs.
    pub server: String,
    /// Signs in on a 401 and steps up on a 403 `insufficient_scope`, if configured.
    pub auth: Option<Arc<OAuthClient>>,
    /// Where the server's notices go (the connection's, set by the session).
    pub notices: Arc<Notices>,
    /// Waits before reopening a stream of the server's own messages (the remote's).
    pub backoff: super::reconnect::Backoff,
    /// Where requests go instead of `http`'s own connections (the simulator's in-memory
    /// server), if anywhere ([`warden_net::Transport`]).
    pub transport: Option<Arc<dyn warden_net::Transport>>,
}

/// The answer to one POST.
#[derive(Debug)]
pub(crate) enum Reply {
    /// A JSON-RPC response (result or error) to the request sent.
    Response(Value),
    /// 202 / 204 or an empty 200: a notification or response was accepted.
    Accepted,
}

/// Legacy-era context for answering server requests and resuming streams.
pub(crate) struct StreamContext<'a> {
    /// Headers of the session (`Mcp-Session-Id`, `MCP-Protocol-Version`) for follow-ups.
    pub session_headers: &'a [(HeaderName, HeaderValue)],
    /// May a broken stream be resumed with `GET` + `Last-Event-ID`?
    pub resumable: bool,
    /// Who answers server requests.
    pub requests: &'a dyn ServerRequests,
    /// The client behind the request this stream answers, when it is a call made for one.
    pub behind: Option<Behind<'a>>,
}

/// The client behind a call, for the stream that answers it: what the server says on that
/// stream concerns this call (2025-11-25: "these messages SHOULD relate to the originating
/// client request"), so its requests are put to that client and its progress and log
/// messages relayed to it, unlike those on a stream of the server's own, which concern no
/// call and are answered or kept by Warden.
#[derive(Clone, Copy)]
pub(crate) struct Behind<'a> {
    /// The client.
    pub downstream: &'a dyn crate::downstream::Downstream,
    /// The progress token the call went out with, if it was given one: progress under
    /// any other token is not this call's.
    pub progress_token: Option<&'a str>,
}

impl Behind<'_> {
    /// Relays a notification the server sent on the call's stream; false if it is not one
    /// relayed (a list change, a notice of another call's progress).
    fn relay(&self, message: &Value) -> bool {
        let params = || message.get("params").cloned().unwrap_or(Value::Null);
        match message.get("method").and_then(Value::as_str) {
            Some("notifications/message") => {
                self.downstream.notify("notifications/message", params());
                true
            }
            Some("notifications/progress") => {
                let token = message
                    .pointer("/params/progressToken")
                    .and_then(Value::as_str);
                if token.is_some() && token == self.progress_token {
                    self.downstream.notify("notifications/progress", params());
                }
                true
            }
            _ => false,
        }
    }
}

impl Endpoint {
    /// Sends a request built from [`Endpoint::request`] (through the transport, if one is
    /// set).
    pub(crate) async fn send(
        &self,
        builder: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, NetError> {
        warden_net::transport::send(builder, self.transport.as_ref()).await
    }

    fn request(
        &self,
        method: Method,
        extra: &[(HeaderName, HeaderValue)],
    ) -> reqwest::RequestBuilder {
        let token = self.auth.as_ref().and_then(|auth| auth.current_token());
        self.request_with(method, extra, token.as_ref())
    }

    /// A request carrying `token` as `Authorization: Bearer` (never in the URL, never
    /// logged: the header value is marked sensitive).
    fn request_with(
        &self,
        method: Method,
        extra: &[(HeaderName, HeaderValue)],
        token: Option<&Secret>,
    ) -> reqwest::RequestBuilder {
        let mut builder = self
            .http
            .request(method, self.url.clone())
            .headers(self.headers.clone());
        for (name, value) in extra {
            builder = builder.header(name, value);
        }
        if let Some(token) = token
            && let Ok(mut value) = HeaderValue::from_str(&format!("Bearer {}", token.expose()))
        {
            value.set_sensitive(true);
            builder = builder.header(AUTHORIZATION, value);
        }
        builder
    }

    /// POSTs `message` (a request when `expect` names its id, else a notification or a
    /// response) and returns the matching answer.
    pub async fn post(
        &self,
        message: &Value,
        extra: &[(HeaderName, HeaderValue)],
        expect: Option<&Value>,
        context: &StreamContext<'_>,
    ) -> Result<(Reply, HeaderMap), HttpError> {
        let body = serde_json::to_vec(message).map_err(|error| {
            HttpError::Malformed(format!("could not encode the request: {error}"))
        })?;
        let mut round = 0u32;
        let response = loop {
            let token = match &self.auth {
                Some(auth) => auth.bearer().await,
                None => None,
            };
            let request = self
                .request_with(Method::POST, extra, token.as_ref())
                .header(ACCEPT, "application/json, text/event-stream")
                .header(CONTENT_TYPE, "application/json")
                .body(body.clone());
            let response = self.send(request).await?;
            let status = response.status().as_u16();
            let Some(auth) = self
                .auth
                .as_ref()
                .filter(|_| status == 401 || status == 403)
            else {
                break response;
            };
            // The server did not process the request: sign in (or refresh, or step up)
            // and send it again, a bounded number of times.
            let header = header_text(response.headers(), &WWW_AUTHENTICATE);
            let challenge = warden_oauth::parse_challenge(&header);
            let failed = |error| HttpError::Auth {
                status,
                challenge: (!header.is_empty()).then(|| excerpt(header.as_bytes())),
                error,
            };
            if round == MAX_AUTH_ROUNDS {
                return Err(failed(warden_oauth::OAuthError::RetriesSpent {
                    attempts: round,
                    detail: String::new(),
                }));
            }
            round += 1;
            if status == 401 {
                auth.unauthorized(token.as_ref(), challenge.as_ref(), round)
                    .await
                    .map_err(failed)?;
            } else if let Some(challenge) = challenge.filter(|c| c.is_insufficient_scope()) {
                auth.insufficient_scope(token.as_ref(), &challenge)
                    .await
                    .map_err(failed)?;
            } else {
                break response; // a 403 that is not about scope: reported as it is
            }
            tracing::debug!(server = %self.server, round, "sending the request again with a new token");
        };
        let headers = response.headers().clone();
        let response = check_status(response).await?;
        let reply = self.read_reply(response, expect, context).await?;
        Ok((reply, headers))
    }

    /// Sends a request with no body (`DELETE` of a session), bounded by `limit`.
    pub async fn send_bodyless(
        &self,
        method: Method,
        extra: &[(HeaderName, HeaderValue)],
        limit: Duration,
    ) -> Result<StatusCode, HttpError> {
        let send = self.send(self.request(method, extra));
        match tokio::time::timeout(limit, send).await {
            Ok(Ok(response)) => Ok(response.status()),
            Ok(Err(error)) => Err(error.into()),
            Err(_) => Err(NetError::Idle {
                secs: limit.as_secs(),
            }
            .into()),
        }
    }

    async fn read_reply(
        &self,
        response: reqwest::Response,
        expect: Option<&Value>,
        context: &StreamContext<'_>,
    ) -> Result<Reply, HttpError> {
        let status = response.status();
        if status == StatusCode::ACCEPTED || status == StatusCode::NO_CONTENT {
            return match expect {
                None => Ok(Reply::Accepted),
                Some(_) => Err(HttpError::Malformed(format!(
                    "HTTP {} with no answer to a request",
                    status.as_u16()
                ))),
            };
        }
        let content_type = media_type(response.headers());
        match content_type.as_str() {
            "application/json" => {
                let body = read_capped(response, self.max_bytes).await?;
                let Some(expect) = expect else {
                    // A notification needs no answer; some servers send one anyway.
                    return Ok(Reply::Accepted);
                };
                let message: Value = serde_json::from_slice(&body).map_err(|error| {
                    HttpError::Malformed(format!("the body is not JSON: {error}"))
                })?;
                check_response(&message, expect)?;
                Ok(Reply::Response(message))
            }
            "text/event-stream" => match expect {
                Some(expect) => self
                    .read_stream(response, expect, context)
                    .await
                    .map(Reply::Response),
                None => Ok(Reply::Accepted),
            },
            "" if expect.is_none() => Ok(Reply::Accepted),
            _ => Err(HttpError::ContentType {
                content_type: header_text(response.headers(), &CONTENT_TYPE),
            }),
        }
    }

    /// Reads events until the response with id `expect`; answers server requests on the
    /// way; resumes a broken stream when the context allows and the server gave event ids.
    async fn read_stream(
        &self,
        response: reqwest::Response,
        expect: &Value,
        context: &StreamContext<'_>,
    ) -> Result<Value, HttpError> {
        let mut last_id: Option<String> = None;
        let mut retry: Option<Duration> = None;
        let mut answered = 0usize;
        let mut resumes = 0u32;
        let mut response = response;
        loop {
            let mut events = Box::pin(sse_events(response, self.max_bytes));
            let mut ended = String::new();
            while let Some(event) = events.next().await {
                let event = match event {
                    Ok(event) => event,
                    Err(error @ (NetError::EventTooLarge { .. } | NetError::NotUtf8)) => {
                        return Err(error.into());
                    }
                    Err(error) => {
                        ended = error.to_string();
                        break;
                    }
                };
                if let Some(id) = event.id {
                    last_id = Some(id);
                }
                if let Some(millis) = event.retry {
                    retry = Some(Duration::from_millis(millis).min(MAX_RETRY_DELAY));
                }
                if event.data.trim().is_empty() {
                    continue; // a priming event, or a keep-alive
                }
                let message: Value = serde_json::from_str(&event.data).map_err(|error| {
                    HttpError::Malformed(format!("an event is not JSON: {error}"))
                })?;
                if message.get("method").is_some() {
                    if message.get("id").is_some() {
                        answered += 1;
                        if answered > MAX_SERVER_REQUESTS {
                            return Err(HttpError::Malformed(format!(
                                "more than {MAX_SERVER_REQUESTS} server requests in one exchange"
                            )));
                        }
                        self.answer(&message, context).await;
                    } else if !context.behind.is_some_and(|behind| behind.relay(&message)) {
                        tracing::debug!(server = %self.server, method = %message["method"], "notification on the response stream");
                        self.notices.note(&message);
                    }
                    continue;
                }
                if message.get("id") == Some(expect) {
                    check_response(&message, expect)?;
                    return Ok(message);
                }
                tracing::debug!(server = %self.server, "ignored a response to another request on the stream");
            }
            let Some(event_id) = last_id
                .clone()
                .filter(|_| context.resumable && resumes < MAX_RESUMES)
            else {
                return Err(HttpError::StreamEnded { detail: ended });
            };
            resumes += 1;
            let delay = retry.unwrap_or(DEFAULT_RETRY_DELAY);
            tracing::debug!(server = %self.server, ?delay, "resuming the response stream after event {event_id:?}");
            tokio::time::sleep(delay).await;
            let mut extra = context.session_headers.to_vec();
            if let Ok(value) = HeaderValue::from_str(&event_id) {
                extra.push((HeaderName::from_static("last-event-id"), value));
            }
            // However the resumption fails, the request was delivered and may have run: the
            // error says the stream broke, never what the server said to the GET (a 404
            // there is a stream the server no longer has, not an expired session, and taking
            // it for one re-sent a call that had run: found by the simulator's remote world).
            let broken = |why: String| HttpError::StreamEnded {
                detail: format!("{ended}; resuming it failed: {why}"),
            };
            let resumed = self
                .send(
                    self.request(Method::GET, &extra)
                        .header(ACCEPT, "text/event-stream"),
                )
                .await
                .map_err(|error| broken(error.to_string()))?;
            let resumed = check_status(resumed)
                .await
                .map_err(|error| broken(error.to_string()))?;
            if media_type(resumed.headers()) != "text/event-stream" {
                return Err(broken(format!(
                    "the answer is {}, not an event stream",
                    header_text(resumed.headers(), &CONTENT_TYPE)
                )));
            }
            response = resumed;
        }
    }

    /// Opens the session's own event stream (legacy era: `GET` with the session headers,
    /// and `Last-Event-ID` when resuming after `last_id`), within `limit`. A 405 means the
    /// server offers none.
    pub async fn open_listen(
        &self,
        session_headers: &[(HeaderName, HeaderValue)],
        last_id: Option<&str>,
        limit: Duration,
    ) -> ListenOpen {
        let mut extra = session_headers.to_vec();
        if let Some(value) = last_id.and_then(|id| HeaderValue::from_str(id).ok()) {
            extra.push((HeaderName::from_static("last-event-id"), value));
        }
        let send = self.send(
            self.request(Method::GET, &extra)
                .header(ACCEPT, "text/event-stream"),
        );
        match tokio::time::timeout(limit, send).await {
            Ok(Ok(response))
                if response.status().is_success()
                    && media_type(response.headers()) == "text/event-stream" =>
            {
                ListenOpen::Open(response, None)
            }
            Ok(Ok(response)) if response.status() == StatusCode::METHOD_NOT_ALLOWED => {
                tracing::debug!(server = %self.server, "the server offers no event stream of its own (405)");
                ListenOpen::NotOffered
            }
            Ok(Ok(response)) => ListenOpen::Failed(format!("HTTP {}", response.status())),
            Ok(Err(error)) => ListenOpen::Failed(error.to_string()),
            Err(_) => ListenOpen::Failed(format!("no answer within {limit:?}")),
        }
    }

    /// POSTs `message` (a 2026-07-28 `subscriptions/listen` request) and returns its event
    /// stream, within `limit`; the caller reads it with [`listen`](Endpoint::listen).
    pub async fn open_subscription(
        &self,
        message: &Value,
        extra: &[(HeaderName, HeaderValue)],
        limit: Duration,
    ) -> ListenOpen {
        let Ok(body) = serde_json::to_vec(message) else {
            return ListenOpen::Failed("could not encode the request".into());
        };
        let send = self.send(
            self.request(Method::POST, extra)
                .header(ACCEPT, "application/json, text/event-stream")
                .header(CONTENT_TYPE, "application/json")
                .body(body),
        );
        match tokio::time::timeout(limit, send).await {
            Ok(Ok(response))
                if response.status().is_success()
                    && media_type(response.headers()) == "text/event-stream" =>
            {
                ListenOpen::Open(response, message.get("id").cloned())
            }
            Ok(Ok(response)) if response.status() == StatusCode::METHOD_NOT_ALLOWED => {
                ListenOpen::NotOffered
            }
            Ok(Ok(response)) => {
                let status = response.status();
                let json = media_type(response.headers()) == "application/json";
                let body = read_capped(response, ERROR_BODY_CAP)
                    .await
                    .unwrap_or_default();
                // A JSON answer (an error: method not found, ...) means no stream is offered.
                if json && status.is_success() || status == StatusCode::NOT_FOUND {
                    tracing::debug!(server = %self.server, "subscriptions/listen not offered: {}", excerpt(&body));
                    return ListenOpen::NotOffered;
                }
                ListenOpen::Failed(format!("HTTP {status}: {}", excerpt(&body)))
            }
            Ok(Err(error)) => ListenOpen::Failed(error.to_string()),
            Err(_) => ListenOpen::Failed(format!("no answer within {limit:?}")),
        }
    }

    /// Reads a stream of the server's own messages until it ends: answers its requests,
    /// notes its notices ([`Notices`]), and keeps the last event id and retry delay in
    /// `state`. Returns how many events came. The caller aborts the task when the session
    /// closes.
    pub async fn listen(
        &self,
        response: reqwest::Response,
        session_headers: &[(HeaderName, HeaderValue)],
        requests: &dyn ServerRequests,
        state: &mut ListenState,
    ) -> usize {
        let context = StreamContext {
            session_headers,
            resumable: false,
            requests,
            behind: None,
        };
        let mut seen = 0usize;
        let mut events = Box::pin(sse_events(response, self.max_bytes));
        while let Some(Ok(event)) = events.next().await {
            seen += 1;
            if let Some(id) = event.id {
                state.last_id = Some(id);
            }
            if let Some(millis) = event.retry {
                state.retry = Some(Duration::from_millis(millis).min(MAX_RETRY_DELAY));
            }
            let Ok(message) = serde_json::from_str::<Value>(&event.data) else {
                continue;
            };
            if message.get("method").is_some() {
                if message.get("id").is_some() {
                    self.answer(&message, &context).await;
                    continue;
                }
                let tagged = message
                    .get("params")
                    .and_then(|params| params.get("_meta"))
                    .and_then(|meta| meta.get(META_SUBSCRIPTION_ID));
                if let (Some(own), Some(tagged)) = (&state.subscription, tagged)
                    && own != tagged
                {
                    tracing::debug!(server = %self.server, "dropped a notification of another subscription ({tagged}) on the stream of {own}");
                    continue;
                }
                if message.get("method").and_then(Value::as_str)
                    == Some("notifications/subscriptions/acknowledged")
                {
                    let honoured = message
                        .get("params")
                        .and_then(|params| params.get("notifications"))
                        .cloned()
                        .unwrap_or(Value::Null);
                    if let Some(waiting) = state.acknowledged.take() {
                        let _ = waiting.send(honoured);
                    }
                    continue;
                }
                self.notices.note(&message);
            } else if message
                .get("id")
                .and_then(Value::as_str)
                .is_some_and(|id| id.starts_with(LISTEN_ID_PREFIX))
            {
                // The answer to a `subscriptions/listen`: the server ended the stream.
                break;
            }
        }
        seen
    }

    /// Answers one server request by POSTing the response (legacy era).
    pub(crate) async fn answer(&self, request: &Value, context: &StreamContext<'_>) {
        let method = request["method"].as_str().unwrap_or_default();
        let params = request.get("params").cloned().unwrap_or(Value::Null);
        let id = request["id"].clone();
        let relayed = match context.behind {
            Some(behind) => {
                crate::downstream::relay_request(behind.downstream, method, &params).await
            }
            None => None,
        };
        let answer = match relayed {
            Some(answer) => Ok(answer),
            None => context.requests.answer(method, &params),
        };
        let reply = match answer {
            Ok(result) => serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err((code, message)) => serde_json::json!({
                "jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}
            }),
        };
        let plain = StreamContext {
            session_headers: context.session_headers,
            resumable: false,
            requests: context.requests,
            behind: None,
        };
        let sent = Box::pin(self.post(&reply, context.session_headers, None, &plain)).await;
        if let Err(error) = sent {
            tracing::info!(server = %self.server, "could not answer the server's {method}: {error}");
        }
    }
}

/// Refuses redirects, authorization failures and other unexpected statuses; JSON-RPC
/// errors sent with a 4xx status become [`HttpError::Rpc`].
pub(crate) async fn check_status(
    response: reqwest::Response,
) -> Result<reqwest::Response, HttpError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let code = status.as_u16();
    if status.is_redirection() {
        return Err(HttpError::Redirect {
            status: code,
            location: excerpt(header_text(response.headers(), &LOCATION).as_bytes()),
        });
    }
    if code == 401 || code == 403 {
        let challenge = response
            .headers()
            .get(WWW_AUTHENTICATE)
            .map(|value| excerpt(value.as_bytes()));
        return Err(HttpError::NeedsAuthorization {
            status: code,
            challenge,
        });
    }
    let json = media_type(response.headers()) == "application/json";
    let body = read_capped(response, ERROR_BODY_CAP)
        .await
        .unwrap_or_default();
    if json
        && let Ok(message) = serde_json::from_slice::<Value>(&body)
        && let Some(error) = message.get("error")
    {
        return Err(rpc_error(code, error));
    }
    Err(HttpError::Status {
        status: code,
        excerpt: excerpt(&body),
    })
}

/// Checks a JSON-RPC response against the request it answers. An error reply becomes
/// [`HttpError::Rpc`] only later, at the session, which knows the status and retries.
fn check_response(message: &Value, expect: &Value) -> Result<(), HttpError> {
    if !message.is_object() {
        return Err(HttpError::Malformed(
            "the answer is not a JSON object".into(),
        ));
    }
    match message.get("id") {
        // A JSON body answers the one request of its POST; an error may carry id null.
        None | Some(Value::Null) => {}
        Some(id) if id == expect => {}
        Some(id) => {
            return Err(HttpError::Malformed(format!(
                "the answer is for request {id}, not for request {expect}"
            )));
        }
    }
    if message.get("result").is_none() && message.get("error").is_none() {
        return Err(HttpError::Malformed(
            "the answer has neither result nor error".into(),
        ));
    }
    Ok(())
}

/// A JSON-RPC `error` object as an [`HttpError::Rpc`].
pub(crate) fn rpc_error(status: u16, error: &Value) -> HttpError {
    HttpError::Rpc {
        status,
        code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
        message: excerpt(
            error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("(no message)")
                .as_bytes(),
        ),
        data: error.get("data").cloned(),
    }
}

/// The media type of `Content-Type`, lower case, without parameters.
pub(crate) fn media_type(headers: &HeaderMap) -> String {
    header_text(headers, &CONTENT_TYPE)
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

pub(crate) fn header_text(headers: &HeaderMap, name: &HeaderName) -> String {
    headers
        .get(name)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_answer_must_be_for_the_request_sent() {
        let id = json!(7);
        assert!(check_response(&json!({"jsonrpc": "2.0", "id": 7, "result": {}}), &id).is_ok());
        // A JSON body answers its POST's one request; an error may carry id null.
        assert!(
            check_response(
                &json!({"jsonrpc": "2.0", "id": null, "error": {"code": 1}}),
                &id
            )
            .is_ok()
        );
        assert!(check_response(&json!({"jsonrpc": "2.0", "id": 8, "result": {}}), &id).is_err());
        assert!(check_response(&json!({"jsonrpc": "2.0", "id": 7}), &id).is_err());
        assert!(check_response(&json!([1, 2]), &id).is_err());
    }

    #[test]
    fn media_types_ignore_parameters_and_case() {
        let mut headers = HeaderMap::new();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("Text/Event-Stream; charset=utf-8"),
        );
        assert_eq!(media_type(&headers), "text/event-stream");
        assert_eq!(media_type(&HeaderMap::new()), "");
    }

    /// A response whose event stream is `body`, from a one-shot local server.
    async fn stream_of(body: String) -> reqwest::Response {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut head = [0u8; 1024];
            let _ = stream.read(&mut head).await;
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(body.as_bytes()).await;
        });
        warden_net::client(&warden_net::HttpOptions::default())
            .unwrap()
            .get(format!("http://{addr}/mcp"))
            .send()
            .await
            .unwrap()
    }

    /// An endpoint nothing listens at (the streams read come from [`stream_of`]).
    fn unreachable_endpoint() -> Endpoint {
        Endpoint {
            http: warden_net::client(&warden_net::HttpOptions::default()).unwrap(),
            url: Url::parse("http://127.0.0.1:9/mcp").unwrap(),
            headers: HeaderMap::new(),
            max_bytes: 1 << 20,
            server: "s".into(),
            auth: None,
            notices: Arc::default(),
            backoff: super::super::reconnect::Backoff::default(),
            transport: None,
        }
    }

    /// A modern listen stream is demultiplexed by its subscription id: the acknowledgement
    /// reaches whoever waits for it, an update tagged with this stream's id (or untagged)
    /// is noted, one tagged with another listen's id is not, and an update of a resource
    /// this connection is not subscribed to is dropped whatever its tag.
    #[tokio::test]
    async fn a_listen_stream_keeps_only_its_own_subscriptions_notices() {
        let event = |message: Value| format!("event: message\ndata: {message}\n\n");
        let tagged = |uri: &str, id: &str| {
            json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                   "params": {"uri": uri, "_meta": {META_SUBSCRIPTION_ID: id}}})
        };
        let body = [
            event(
                json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                "params": {"notifications": {"resourceSubscriptions": ["x://mine"]},
                           "_meta": {META_SUBSCRIPTION_ID: "warden-listen-4"}}}),
            ),
            event(tagged("x://other", "warden-listen-3")),
            event(tagged("x://mine", "warden-listen-3")),
            event(tagged("x://unsubscribed", "warden-listen-4")),
        ]
        .concat();
        let endpoint = unreachable_endpoint();
        let lists = endpoint.notices.lists();
        lists.set_subscribed("x://mine", true);
        lists.set_subscribed("x://other", true);
        let (acknowledged, honoured) = tokio::sync::oneshot::channel();
        let mut state = ListenState {
            subscription: Some(json!("warden-listen-4")),
            acknowledged: Some(acknowledged),
            ..ListenState::default()
        };
        endpoint
            .listen(stream_of(body).await, &[], &DeclineRequests, &mut state)
            .await;
        assert_eq!(
            honoured.await.unwrap(),
            json!({"resourceSubscriptions": ["x://mine"]})
        );
        assert!(
            lists.take_updated().is_empty(),
            "another listen's notices were taken for this one's"
        );
        // The control: the same update tagged with this stream's id, and untagged.
        let body = [
            event(tagged("x://mine", "warden-listen-4")),
            event(
                json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                         "params": {"uri": "x://other"}}),
            ),
        ]
        .concat();
        endpoint
            .listen(stream_of(body).await, &[], &DeclineRequests, &mut state)
            .await;
        assert_eq!(lists.take_updated(), vec!["x://mine", "x://other"]);
    }

    /// What a client behind a call was told.
    #[derive(Default)]
    struct Told(std::sync::Mutex<Vec<(String, Value)>>);

    impl crate::downstream::Downstream for Told {
        fn capabilities(&self) -> Value {
            json!({})
        }
        fn passes_input_through(&self) -> bool {
            false
        }
        fn ask<'a>(
            &'a self,
            _method: &'a str,
            _params: Value,
        ) -> futures::future::BoxFuture<'a, Result<Value, String>> {
            Box::pin(async { Err("not asked here".into()) })
        }
        fn notify(&self, method: &str, params: Value) {
            self.0.lock().unwrap().push((method.to_owned(), params));
        }
    }

    /// On the stream that answers a call, the server's log line and its progress under the
    /// call's own token reach the client behind the call; progress under another token (a
    /// notice of another call) does not, and a list change is Warden's to note, not the
    /// client's.
    #[tokio::test]
    async fn a_calls_stream_relays_its_own_progress_and_log_to_the_client_behind_it() {
        let event = |message: Value| format!("event: message\ndata: {message}\n\n");
        let progress = |token: &str, at: u32| {
            json!({"jsonrpc": "2.0", "method": "notifications/progress",
                   "params": {"progressToken": token, "progress": at}})
        };
        let body = [
            event(progress("warden-9", 1)),
            event(progress("warden-7", 2)),
            event(json!({"jsonrpc": "2.0", "method": "notifications/message",
                         "params": {"level": "info", "data": "working"}})),
            event(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})),
            event(json!({"jsonrpc": "2.0", "id": 7, "result": {"content": []}})),
        ]
        .concat();
        let endpoint = unreachable_endpoint();
        let told = Told::default();
        let context = StreamContext {
            session_headers: &[],
            resumable: false,
            requests: &DeclineRequests,
            behind: Some(Behind {
                downstream: &told,
                progress_token: Some("warden-7"),
            }),
        };
        let answer = endpoint
            .read_stream(stream_of(body).await, &json!(7), &context)
            .await
            .unwrap();
        assert_eq!(answer["result"], json!({"content": []}));
        let told = told.0.into_inner().unwrap();
        assert_eq!(
            told,
            vec![
                (
                    "notifications/progress".to_owned(),
                    json!({"progressToken": "warden-7", "progress": 2})
                ),
                (
                    "notifications/message".to_owned(),
                    json!({"level": "info", "data": "working"})
                ),
            ]
        );
        assert!(
            endpoint.notices.take_tools_changed(),
            "the list change was noted by Warden"
        );
    }

    #[test]
    fn quoted_bodies_cannot_forge_lines() {
        let quoted = super::super::error::excerpt(b"bad\r\nINFO forged line\x1b[31m");
        assert!(!quoted.contains('\n') && !quoted.contains('\r') && !quoted.contains('\x1b'));
        assert!(super::super::error::excerpt(&[b'a'; 500]).chars().count() <= 201);
    }
}
