//! The [`Connection`] over a remote server, with the reconnect policy: up to
//! `connect_attempts` tries on first connect, and up to `attempts` reconnects of a server
//! that dropped, each after a jittered, doubling back-off; after that the server is marked
//! failed with its reason. Only transient failures are retried; "needs authorization"
//! (401/403) is reported as such and never retried.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use warden_config::{RemoteTransport, ServerSpec};

use super::detect::{Remote, open};
use super::error::HttpError;
use super::headers::param_headers;
use super::reconnect::{self, Backoff, Link};
use super::session::{ClientProfile, Questions, Session};
use crate::connection::{
    CallOutcome, ConnectOptions, Connection, DEFAULT_MAX_PAGES, DEFAULT_MAX_TOOLS, Era,
    ListFreshness, ServerInfo, ToolDef,
};
use crate::downstream::CallContext;
use crate::error::{CallError, ConnectError, ConnectFailure};
use crate::launcher::StopReport;

struct HttpConnection {
    name: String,
    info: ServerInfo,
    remote: Remote,
    profile: ClientProfile,
    link: Link<Session>,
    backoff: Backoff,
    max_tools: usize,
    max_pages: usize,
    /// The list hints of the last complete tool list.
    freshness: Mutex<Option<ListFreshness>>,
}

/// Connects to the remote server `spec` names, within its connect timeout, trying again
/// on transient failures as its reconnect policy allows.
pub async fn connect(
    spec: &ServerSpec,
    options: &ConnectOptions,
) -> Result<Box<dyn Connection>, ConnectFailure> {
    let failure = |error: ConnectError| ConnectFailure {
        error,
        stderr_tail: Vec::new(),
    };
    let Some(mut remote) = Remote::from_spec(spec) else {
        return Err(failure(ConnectError::Unsupported(
            "not a remote server".into(),
        )));
    };
    if let Some(transport) = &options.http_transport {
        remote.transport = Some(Arc::clone(transport));
    }
    if let Some(backoff) = &options.backoff {
        remote.backoff = backoff.clone();
    }
    // A configured `Authorization` header is the user's own credential: OAuth stays out.
    let own_credential = spec.transport.sets_authorization();
    // The deprecated HTTP+SSE transport does not sign in (its event stream would carry no
    // token); only Streamable HTTP does.
    if !own_credential
        && remote.settings.transport != RemoteTransport::Sse
        && let Some(provider) = &options.oauth
    {
        remote.oauth = provider.client(&remote);
    }
    if remote.settings.transport == RemoteTransport::Sse {
        // Only ever because the configuration names it: never a fallback.
        return super::sse_legacy::connect(spec, remote, options).await;
    }
    let profile = ClientProfile::default();
    let backoff = remote.backoff.clone();
    let deadline = tokio::time::Instant::now() + spec.timeouts.connect;
    let (session, info) =
        match tokio::time::timeout_at(deadline, first_connect(&remote, &profile, &backoff)).await {
            Ok(Ok(opened)) => opened,
            Ok(Err(error)) => return Err(failure(error)),
            Err(_) => {
                return Err(failure(ConnectError::Timeout {
                    after: spec.timeouts.connect,
                }));
            }
        };
    tracing::info!(server = %spec.name, era = ?info.era, protocol = %info.protocol_version, "connected over HTTP");
    Ok(Box::new(HttpConnection {
        name: spec.name.clone(),
        info,
        remote,
        profile,
        link: Link::new(session),
        backoff,
        max_tools: options.max_tools.unwrap_or(DEFAULT_MAX_TOOLS),
        max_pages: options.max_pages.unwrap_or(DEFAULT_MAX_PAGES),
        freshness: Mutex::new(None),
    }))
}

/// First connect: up to `connect_attempts` tries on transient errors.
async fn first_connect(
    remote: &Remote,
    profile: &ClientProfile,
    backoff: &Backoff,
) -> Result<(Session, ServerInfo), ConnectError> {
    let (opened, attempts) = reconnect::first_connect(
        &remote.name,
        &remote.settings.reconnect,
        backoff,
        || open(remote, profile),
        HttpError::is_transient,
    )
    .await;
    match opened {
        Ok((session, mut info)) => {
            info.connect_attempts = attempts;
            Ok((session, info))
        }
        Err(error) => Err(connect_error(error, attempts)),
    }
}

pub(super) fn connect_error(error: HttpError, attempts: u32) -> ConnectError {
    if error.needs_authorization() {
        ConnectError::NeedsAuthorization {
            reason: error.to_string(),
        }
    } else if error.is_transient() {
        ConnectError::Down {
            attempts,
            reason: error.to_string(),
        }
    } else {
        ConnectError::Remote {
            reason: error.to_string(),
        }
    }
}

pub(super) fn call_error(error: HttpError) -> CallError {
    match error {
        HttpError::Rpc { code, message, .. } => CallError::Rejected {
            code: i32::try_from(code).unwrap_or(i32::MIN),
            message,
        },
        error @ (HttpError::Malformed(_) | HttpError::ContentType { .. } | HttpError::Era(_)) => {
            CallError::Protocol {
                reason: error.to_string(),
            }
        }
        // Never reached the server ([`HttpError::not_delivered`]).
        error if error.not_delivered() => CallError::NotSent {
            reason: error.to_string(),
            stderr_tail: Vec::new(),
        },
        error => CallError::ServerGone {
            reason: error.to_string(),
            stderr_tail: Vec::new(),
        },
    }
}

/// A tool as Warden describes it; `None` (with a warning) when its `x-mcp-header`
/// annotations break the rules, which makes it unusable over HTTP.
pub(super) fn tool_def(server: &str, tool: &Value, era: Era) -> Result<Option<ToolDef>, CallError> {
    let Some(name) = tool.get("name").and_then(Value::as_str) else {
        return Err(CallError::Protocol {
            reason: "a listed tool has no name".into(),
        });
    };
    let input_schema = tool.get("inputSchema").cloned().unwrap_or(Value::Null);
    if era == Era::Modern
        && let Err(reason) = param_headers(&input_schema)
    {
        tracing::warn!(server = %server, tool = %name, "tool left out: {reason}");
        return Ok(None);
    }
    let text = |key: &str| tool.get(key).and_then(Value::as_str).map(str::to_owned);
    Ok(Some(ToolDef {
        name: name.to_owned(),
        title: text("title"),
        description: text("description"),
        input_schema,
        output_schema: tool.get("outputSchema").cloned(),
        annotations: tool.get("annotations").cloned(),
    }))
}

impl HttpConnection {
    async fn current(&self) -> Arc<Session> {
        self.link.current()
    }

    /// Sends one request, reconnecting a dropped server when the policy allows. The request
    /// is sent again after a reconnect only if it never reached the server (a refused
    /// connection) or only reads.
    async fn request(
        &self,
        method: &str,
        params: Map<String, Value>,
        current: Option<&InFlight>,
    ) -> Result<Value, CallError> {
        self.request_as(method, params, current, &Questions::Answered)
            .await
    }

    /// [`HttpConnection::request`], with `questions` saying who answers a 2026-07-28
    /// server's `input_required` result.
    async fn request_as(
        &self,
        method: &str,
        params: Map<String, Value>,
        in_flight: Option<&InFlight>,
        questions: &Questions,
    ) -> Result<Value, CallError> {
        let current = in_flight.map(|f| &f.id);
        if let Some(reason) = self.link.health().failed {
            return Err(CallError::ServerGone {
                reason,
                stderr_tail: Vec::new(),
            });
        }
        let session = self.current().await;
        if let Some(in_flight) = in_flight {
            in_flight.sent_on(&session);
        }
        let error = match session
            .request_as(method, params.clone(), current, questions)
            .await
        {
            Ok(result) => return Ok(result),
            Err(error) if error.is_transient() => error,
            Err(error) => return Err(call_error(error)),
        };
        let undelivered = error.not_delivered();
        tracing::info!(server = %self.name, "{method} failed: {error}; reconnecting");
        let session = self.reconnect(&session, &error).await?;
        if reconnect::resend_after_reconnect(method, undelivered) {
            if let Some(in_flight) = in_flight {
                in_flight.sent_on(&session);
            }
            return session
                .request_as(method, params, current, questions)
                .await
                .map_err(call_error);
        }
        Err(CallError::ServerGone {
            reason: format!(
                "{error}; reconnected, but the call was not repeated (it may have run)"
            ),
            stderr_tail: Vec::new(),
        })
    }

    /// Reconnects within the budget of `attempts`, or marks the server failed; the session
    /// to use from now on.
    async fn reconnect(
        &self,
        failed: &Arc<Session>,
        cause: &HttpError,
    ) -> Result<Arc<Session>, CallError> {
        let (remote, profile) = (&self.remote, &self.profile);
        self.link
            .reconnect(
                &self.name,
                &remote.settings.reconnect,
                &self.backoff,
                failed,
                cause.to_string(),
                || async move { open(remote, profile).await.map(|(session, _info)| session) },
                HttpError::is_transient,
            )
            .await
            .map_err(|reason| CallError::ServerGone {
                reason,
                stderr_tail: Vec::new(),
            })
    }

    async fn list_all(&self) -> Result<Vec<ToolDef>, CallError> {
        let limits = ListLimits {
            server: &self.name,
            max_tools: self.max_tools,
            max_pages: self.max_pages,
        };
        let (tools, freshness) = list_pages(limits, |params| async move {
            let page = self.request("tools/list", params, None).await?;
            Ok((page, self.current().await.era()))
        })
        .await?;
        *self
            .freshness
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(freshness);
        Ok(tools)
    }
}

/// A request its caller may abandon: when the caller stops waiting before the request
/// ended (the future dropped: a gateway client cancelled, a turn ran out), or the
/// exchange broke under it (the server may still be running it), the request in flight
/// gets `notifications/cancelled` on a task of its own (2025-11-25; a 2026-07-28 request's
/// stream closing is its cancellation). A server that already finished it ignores it.
struct Abandoned<'a> {
    in_flight: &'a InFlight,
    armed: bool,
}

/// The request a call has in flight: its id and the session it was sent on. A
/// cancellation names the id on that session: ids are a session's own, and the same id
/// on the session a reconnect opened since is another request (found by the gateway
/// world with a remote upstream, seed 263: a call's timeout cancelled another call).
#[derive(Default)]
struct InFlight {
    id: Mutex<Option<Value>>,
    session: Mutex<Option<Arc<Session>>>,
}

impl InFlight {
    fn sent_on(&self, session: &Arc<Session>) {
        *self
            .session
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::clone(session));
    }

    /// `notifications/cancelled` for the request in flight, on the session it was sent
    /// on (recorded before its id, so an id always has one), on a task of its own bounded
    /// by the session's farewell limit: the caller is told it gave up now, not after the
    /// server took up to that limit to accept the notice (found by the simulator's remote
    /// world, seed 2: calls ended 2 s past their deadlines on a server slow to answer).
    fn cancel(&self) {
        let id = self
            .id
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let session = self
            .session
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let (Some(id), Some(session)) = (id, session)
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move { session.cancel(id).await });
        }
    }
}

impl<'a> Abandoned<'a> {
    fn new(in_flight: &'a InFlight) -> Abandoned<'a> {
        Abandoned {
            in_flight,
            armed: true,
        }
    }

    /// The request ended: cancelled only if it broke under its caller.
    fn settle<T>(&mut self, result: Result<T, CallError>) -> Result<T, CallError> {
        self.armed = matches!(&result, Err(CallError::ServerGone { .. }));
        result
    }
}

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.in_flight.cancel();
        }
    }
}

/// Every tool `session` lists, read exactly as a remote server's connection reads them
/// (the same page walk within the default bounds, the same reading of each definition,
/// tools whose `x-mcp-header` annotations break the rules left out): what Warden holds.
pub async fn list_tools(session: &Session, server: &str) -> Result<Vec<ToolDef>, CallError> {
    let limits = ListLimits {
        server,
        max_tools: DEFAULT_MAX_TOOLS,
        max_pages: DEFAULT_MAX_PAGES,
    };
    list_pages(limits, |params| async move {
        let page = session
            .request("tools/list", params, None)
            .await
            .map_err(call_error)?;
        Ok((page, session.era()))
    })
    .await
    .map(|(tools, _freshness)| tools)
}

/// The bounds of one `tools/list` walk.
pub(super) struct ListLimits<'a> {
    /// The server's name, for errors.
    pub server: &'a str,
    /// Tools accepted in all.
    pub max_tools: usize,
    /// Pages followed.
    pub max_pages: usize,
}

/// Follows `tools/list` pages within `limits`: `fetch` sends one request with the given
/// params (the cursor, when there is one) and returns the page and the era it was read in.
/// Returns the tools and the list hints of all pages together.
pub(super) async fn list_pages<F, Fut>(
    limits: ListLimits<'_>,
    mut fetch: F,
) -> Result<(Vec<ToolDef>, ListFreshness), CallError>
where
    F: FnMut(Map<String, Value>) -> Fut,
    Fut: std::future::Future<Output = Result<(Value, Era), CallError>>,
{
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    let mut freshness: Option<ListFreshness> = None;
    for _page in 0..limits.max_pages {
        let mut params = Map::new();
        if let Some(cursor) = cursor.take() {
            params.insert("cursor".into(), json!(cursor));
        }
        let (page, era) = fetch(params).await?;
        let hints = ListFreshness::of_page(&page, era);
        freshness = Some(freshness.map_or(hints, |before| before.and(hints)));
        for tool in page
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if tools.len() == limits.max_tools {
                return Err(CallError::TooMany {
                    limit: limits.max_tools,
                    what: "tools",
                });
            }
            if let Some(def) = tool_def(limits.server, tool, era)? {
                tools.push(def);
            }
        }
        match page.get("nextCursor").and_then(Value::as_str) {
            Some(next) if !next.is_empty() => cursor = Some(next.to_owned()),
            _ => return Ok((tools, freshness.unwrap_or(ListFreshness::NONE))),
        }
    }
    Err(CallError::TooMany {
        limit: limits.max_pages,
        what: "pages of tools",
    })
}

/// A remote 2026-07-28 server's `InputRequiredResult`, passed on by the session
/// ([`Questions::PassedOn`]: only for a client behind the call that answers it itself), as
/// the outcome that carries it.
fn input_required(result: Value) -> Result<CallOutcome, CallError> {
    let requests = result
        .get("inputRequests")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let state = result
        .get("requestState")
        .and_then(Value::as_str)
        .map(str::to_owned);
    if requests.is_empty() && state.is_none() {
        return Err(CallError::Protocol {
            reason: "the server asked for input without saying what (input_required with \
                     neither inputRequests nor requestState)"
                .into(),
        });
    }
    Ok(CallOutcome {
        content: Vec::new(),
        structured: None,
        is_error: false,
        raw: result,
        input_required: Some(crate::downstream::InputRequired { requests, state }),
    })
}

impl Connection for HttpConnection {
    fn name(&self) -> &str {
        &self.name
    }

    fn info(&self) -> &ServerInfo {
        &self.info
    }

    fn list_tools(&self, timeout: Duration) -> BoxFuture<'_, Result<Vec<ToolDef>, CallError>> {
        Box::pin(crate::connection::within(timeout, self.list_all()))
    }

    fn list_freshness(&self) -> Option<ListFreshness> {
        *self
            .freshness
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        arguments: Option<Map<String, Value>>,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<CallOutcome, CallError>> {
        self.call_tool_in(name, arguments, timeout, CallContext::default())
    }

    fn call_tool_in<'a>(
        &'a self,
        name: &'a str,
        arguments: Option<Map<String, Value>>,
        timeout: Duration,
        context: CallContext,
    ) -> BoxFuture<'a, Result<CallOutcome, CallError>> {
        Box::pin(async move {
            let mut params = Map::new();
            params.insert("name".into(), json!(name));
            if let Some(arguments) = arguments {
                params.insert("arguments".into(), Value::Object(arguments));
            }
            let questions = Questions::for_call(&context);
            if let Some(retry) = &context.retry {
                if let Some(responses) = &retry.responses {
                    params.insert("inputResponses".into(), Value::Object(responses.clone()));
                }
                if let Some(state) = &retry.state {
                    params.insert("requestState".into(), json!(state));
                }
            }
            let in_flight = InFlight::default();
            let mut abandoned = Abandoned::new(&in_flight);
            let sent = self.request_as("tools/call", params, Some(&in_flight), &questions);
            // On timeout the guard, still armed, cancels (modern: dropping the request
            // closed its stream, which is the cancellation; legacy: notifications/cancelled).
            let result = match tokio::time::timeout(timeout, sent).await {
                Ok(result) => abandoned.settle(result)?,
                Err(_) => return Err(CallError::Timeout { after: timeout }),
            };
            if !result.is_object() {
                return Err(CallError::Protocol {
                    reason: "the answer to tools/call is not an object".into(),
                });
            }
            if result.get("resultType").and_then(Value::as_str) == Some("input_required") {
                return input_required(result);
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

    fn forwards(&self) -> bool {
        true
    }

    fn request<'a>(
        &'a self,
        method: &'a str,
        params: Map<String, Value>,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Value, CallError>> {
        Box::pin(async move {
            if !crate::connection::FORWARDED_METHODS.contains(&method) {
                return Err(crate::connection::not_forwarded(method));
            }
            let in_flight = InFlight::default();
            let mut abandoned = Abandoned::new(&in_flight);
            let sent = self.request(method, params, Some(&in_flight));
            match tokio::time::timeout(timeout, sent).await {
                Ok(result) => abandoned.settle(result),
                // The guard, still armed, cancels.
                Err(_) => Err(CallError::Timeout { after: timeout }),
            }
        })
    }

    fn take_tools_changed(&self) -> bool {
        self.profile.notices.take_tools_changed()
    }

    fn subscribes(&self) -> bool {
        crate::rmcp_client::declares_subscribe(&self.info.capabilities)
    }

    /// 2025-11-25: `resources/subscribe` / `resources/unsubscribe` on the session (its
    /// updates come on the session's GET stream). 2026-07-28: the connection's one
    /// `subscriptions/listen` is opened again with the new set of URIs, and a subscription
    /// counts as made only when the server's acknowledgement honours its URI.
    fn subscribe<'a>(
        &'a self,
        uri: &'a str,
        on: bool,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<(), CallError>> {
        Box::pin(async move {
            let method = if on {
                "resources/subscribe"
            } else {
                "resources/unsubscribe"
            };
            if !self.subscribes() {
                return Err(crate::connection::not_forwarded(method));
            }
            let notices = self.profile.notices.lists();
            let send = crate::connection::within(timeout, async {
                let session = self.current().await;
                match session.era() {
                    Era::Legacy => {
                        let mut params = Map::new();
                        params.insert("uri".into(), json!(uri));
                        self.request(method, params, None).await.map(|_| ())
                    }
                    Era::Modern => {
                        let honoured = session.relisten(timeout).await.map_err(call_error)?;
                        crate::subscription::honoured(&honoured, uri, on)
                    }
                }
            });
            crate::subscription::change(&notices, uri, on, send).await
        })
    }

    fn notices(&self) -> Option<Arc<crate::notices::ServerNotices>> {
        Some(self.profile.notices.lists())
    }

    fn stderr_tail(&self, _count: usize) -> Vec<String> {
        Vec::new()
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, StopReport> {
        Box::pin(async move {
            self.current().await.close().await;
            StopReport {
                status: "disconnected (remote server)".into(),
                signals: Vec::new(),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::connection::CacheScope;

    /// Walks `pages` as a server would send them (each naming the next by cursor).
    async fn walk(pages: Vec<Value>, era: Era) -> (Vec<ToolDef>, ListFreshness) {
        let limits = ListLimits {
            server: "s",
            max_tools: 10,
            max_pages: 10,
        };
        let pages = &pages;
        list_pages(limits, |params| async move {
            let index = params
                .get("cursor")
                .and_then(Value::as_str)
                .map_or(0, |cursor| cursor.parse::<usize>().unwrap());
            Ok((pages[index].clone(), era))
        })
        .await
        .unwrap()
    }

    fn page(tool: &str, next: Option<&str>, hints: Value) -> Value {
        let mut page = json!({"tools": [{"name": tool, "inputSchema": {"type": "object"}}]});
        if let Some(next) = next {
            page["nextCursor"] = json!(next);
        }
        for (key, value) in hints.as_object().unwrap() {
            page[key] = value.clone();
        }
        page
    }

    /// A list is as fresh as its stalest page and public only when every page says so;
    /// a missing, negative or malformed `ttlMs` means zero; a 2025-11-25 list has no hints
    /// whatever it carries.
    #[tokio::test]
    async fn a_lists_hints_are_those_of_its_stalest_and_most_private_page() {
        let public = |ttl: Value| json!({"ttlMs": ttl, "cacheScope": "public"});
        let (tools, hints) = walk(
            vec![
                page("a", Some("1"), public(json!(60_000))),
                page("b", None, public(json!(5_000))),
            ],
            Era::Modern,
        )
        .await;
        assert_eq!(tools.len(), 2);
        assert_eq!(
            hints,
            ListFreshness {
                ttl: Duration::from_secs(5),
                scope: CacheScope::Public
            }
        );

        let (_, hints) = walk(
            vec![
                page("a", Some("1"), public(json!(60_000))),
                page("b", None, json!({"ttlMs": 60_000, "cacheScope": "private"})),
            ],
            Era::Modern,
        )
        .await;
        assert_eq!(hints.scope, CacheScope::Private);
        assert_eq!(hints.ttl, Duration::from_secs(60));

        for ttl in [json!(-5), json!("60000"), json!(1.5e300), Value::Null] {
            let (_, hints) = walk(vec![page("a", None, public(ttl.clone()))], Era::Modern).await;
            assert_eq!(hints.ttl, Duration::ZERO, "ttlMs {ttl}");
        }
        let (_, hints) = walk(vec![page("a", None, json!({}))], Era::Modern).await;
        assert_eq!(hints, ListFreshness::NONE);

        let (_, hints) = walk(vec![page("a", None, public(json!(60_000)))], Era::Legacy).await;
        assert_eq!(hints, ListFreshness::NONE);
    }
}
