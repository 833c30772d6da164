//! The client behind a call: what a server sends while one of its calls runs, and where it
//! goes when Warden is a gateway.
//!
//! A server may need something from the person or client behind a call before it can
//! answer: a form filled in or a URL visited (elicitation), a model's completion
//! (sampling), the client's roots. It may also report progress and write log messages.
//! In `warden run` and `warden chat` Warden itself is that client (its [`Elicitor`]
//! answers, progress is not shown). Behind `warden serve` the answer must come from the
//! gateway's own client, the one that made this call and no other: a [`Downstream`] given
//! with the call ([`CallContext`]) is that client.
//!
//! Two shapes of asking exist, one per era of the server:
//! - a 2025-11-25 server sends `elicitation/create` (or `sampling/createMessage`,
//!   `roots/list`) as a request of its own while the call runs, and the call's answer
//!   waits for the reply: [`Downstream::ask`] relays it;
//! - a 2026-07-28 server answers the call with an `InputRequiredResult` and expects the call
//!   again with the answers (`inputResponses`) and its `requestState` echoed. A downstream
//!   client of the same era answers such a result itself
//!   ([`Downstream::passes_input_through`]): the call ends with [`InputRequired`], and the
//!   client's retry comes back as [`InputRetry`]. A 2025-11-25 client is asked each request
//!   in turn, and the call is sent again here.
//!
//! A server's own request carries no mark of the call it belongs to on stdio, so a request
//! or log message is relayed only while exactly one call runs on that connection: with two
//! or more, nobody can tell which client it is for, and it is declined (a request) or kept
//! in Warden's log (a message), never sent to a client it may not concern. Progress is
//! matched exactly, by the progress token of the call.
//!
//! [`Elicitor`]: crate::elicit::Elicitor

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use serde_json::{Map, Value};

/// The methods a server may ask a downstream client through Warden, in either shape.
pub const RELAYED_REQUESTS: [&str; 3] =
    ["elicitation/create", "sampling/createMessage", "roots/list"];

/// The client behind one call (a gateway's client).
pub trait Downstream: Send + Sync {
    /// What this client declared among `elicitation` (with its `form`/`url` modes),
    /// `sampling` and `roots`, in the shape of client capabilities: declared to a
    /// 2026-07-28 server with the call, so it asks only for what the client can give.
    fn capabilities(&self) -> Value;
    /// Whether an `InputRequiredResult` is returned to this client as it is (a 2026-07-28
    /// client answers it and retries), rather than its requests asked one by one through
    /// [`Downstream::ask`].
    fn passes_input_through(&self) -> bool;
    /// Puts one of the server's requests ([`RELAYED_REQUESTS`]) to the client and returns
    /// its answer, as the client sent it. `Err` says why it could not be asked (the client
    /// did not declare it, did not answer in time, went away).
    fn ask<'a>(&'a self, method: &'a str, params: Value) -> BoxFuture<'a, Result<Value, String>>;
    /// A notification the server sent about this call (`notifications/progress`, its
    /// progress token already Warden's; `notifications/message`). Never blocks: a client
    /// that does not keep up loses notifications, not the call.
    fn notify(&self, method: &str, params: Value);
    /// Whether this client follows the call's progress (it sent a progress token of its
    /// own): a remote server is given one only then, so it reports to someone.
    fn follows_progress(&self) -> bool {
        true
    }
    /// The least severe log level this client hears (`debug` ... `emergency`), if it hears
    /// any: a 2026-07-28 server sends log lines only to a request that names one
    /// (`io.modelcontextprotocol/logLevel` in its `_meta`).
    fn log_level(&self) -> Option<&'static str> {
        None
    }
}

/// `_meta` key of the least severe log level a 2026-07-28 request asks to hear.
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";

/// Input requests of one `input_required` result put to a client, at most: each may be a
/// question to a person, so a server cannot queue up an unbounded series of them.
pub(crate) const MAX_INPUT_REQUESTS: usize = 16;

/// Refuses an `input_required` result asking more than [`MAX_INPUT_REQUESTS`] at once.
pub(crate) fn check_input_count(asked: usize) -> Result<(), String> {
    if asked > MAX_INPUT_REQUESTS {
        return Err(format!(
            "the server asked {asked} questions at once (at most {MAX_INPUT_REQUESTS} are put)"
        ));
    }
    Ok(())
}

/// Puts one of a 2026-07-28 server's input requests (`{method, params}`, keyed `key` in
/// its `inputRequests`) to the client behind the call, asked as a request of its own, and
/// returns the answer for `inputResponses`. An elicitation that cannot be put is declined
/// (the server goes on without the input); a request of another kind that cannot be put
/// is an error naming it (the call fails: the server cannot go on without it).
pub(crate) async fn ask_input(
    downstream: &dyn Downstream,
    key: &str,
    request: &Value,
) -> Result<Value, String> {
    let method = request
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default();
    // A request without parameters (`roots/list`) still carries an object.
    let params = request
        .get("params")
        .filter(|params| params.is_object())
        .cloned()
        .unwrap_or_else(|| serde_json::json!({}));
    match downstream.ask(method, params).await {
        Ok(answer) => Ok(answer),
        Err(reason) if method == "elicitation/create" => {
            tracing::info!("a server's input request `{key}` was declined: {reason}");
            Ok(serde_json::json!({"action": "decline"}))
        }
        Err(reason) => Err(format!(
            "the server asked for `{method}` (input request `{key}`) and the client could \
             not answer: {reason}"
        )),
    }
}

/// Answers one of a 2025-11-25 server's own requests during a call by asking the client
/// behind the call. `None`: not a request relayed to clients ([`RELAYED_REQUESTS`]), or
/// one the client did not answer, which the caller answers as Warden would without a
/// client (an elicitation declined, no roots, sampling refused).
pub(crate) async fn relay_request(
    downstream: &dyn Downstream,
    method: &str,
    params: &Value,
) -> Option<Value> {
    if !RELAYED_REQUESTS.contains(&method) {
        return None;
    }
    match downstream.ask(method, params.clone()).await {
        Ok(answer) => Some(answer),
        Err(reason) => {
            tracing::info!("a server's {method} was not answered by the client: {reason}");
            None
        }
    }
}

/// A retry of a call after a 2026-07-28 server asked for input.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InputRetry {
    /// The client's answers, keyed as the server asked (`inputResponses`).
    pub responses: Option<Map<String, Value>>,
    /// The server's `requestState`, exactly as it sent it.
    pub state: Option<String>,
}

/// A 2026-07-28 server's `InputRequiredResult`, for a downstream client to answer.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct InputRequired {
    /// What the server asks, keyed (`inputRequests`: `{method, params}` each).
    pub requests: Map<String, Value>,
    /// The server's opaque state, to be echoed with the answers.
    pub state: Option<String>,
}

/// What a caller brings to one call besides its name and arguments.
#[derive(Clone, Default)]
pub struct CallContext {
    /// The client behind the call; `None`: Warden is the client (its elicitor answers).
    pub downstream: Option<Arc<dyn Downstream>>,
    /// Answers and state from an earlier round of the same call.
    pub retry: Option<InputRetry>,
}

impl std::fmt::Debug for CallContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallContext")
            .field("downstream", &self.downstream.is_some())
            .field("retry", &self.retry)
            .finish()
    }
}

/// The calls running on one connection, with their downstream clients: how a server's
/// requests, log messages and progress find the client they belong to.
#[derive(Default)]
pub(crate) struct Routes {
    running: Mutex<Vec<Route>>,
}

impl std::fmt::Debug for Routes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Routes")
            .field("running", &self.lock().len())
            .finish()
    }
}

struct Route {
    id: u64,
    progress_token: Option<String>,
    downstream: Option<Arc<dyn Downstream>>,
}

/// Removes its call from [`Routes`] when the call ends, however it ends.
pub(crate) struct RouteGuard<'r> {
    routes: &'r Routes,
    id: u64,
}

impl Drop for RouteGuard<'_> {
    fn drop(&mut self) {
        let mut running = self.routes.lock();
        running.retain(|route| route.id != self.id);
    }
}

impl Routes {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Route>> {
        self.running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a running call (its progress token, once known, with
    /// [`Routes::set_progress_token`]).
    pub(crate) fn enter(&self, downstream: Option<Arc<dyn Downstream>>) -> RouteGuard<'_> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.lock().push(Route {
            id,
            progress_token: None,
            downstream,
        });
        RouteGuard { routes: self, id }
    }

    /// The progress token the call `guard` stands for was sent with.
    pub(crate) fn set_progress_token(&self, guard: &RouteGuard<'_>, token: String) {
        if let Some(route) = self.lock().iter_mut().find(|route| route.id == guard.id) {
            route.progress_token = Some(token);
        }
    }

    /// The client of the one call running, if exactly one runs and it has one.
    pub(crate) fn sole(&self) -> Option<Arc<dyn Downstream>> {
        match self.lock().as_slice() {
            [only] => only.downstream.clone(),
            _ => None,
        }
    }

    /// The client of the call sent with `token`.
    pub(crate) fn by_progress_token(&self, token: &str) -> Option<Arc<dyn Downstream>> {
        self.lock()
            .iter()
            .find(|route| route.progress_token.as_deref() == Some(token))
            .and_then(|route| route.downstream.clone())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    struct Named;

    impl Downstream for Named {
        fn capabilities(&self) -> Value {
            Value::Null
        }
        fn passes_input_through(&self) -> bool {
            false
        }
        fn ask<'a>(
            &'a self,
            _method: &'a str,
            _params: Value,
        ) -> BoxFuture<'a, Result<Value, String>> {
            Box::pin(async { Err("not asked".into()) })
        }
        fn notify(&self, _method: &str, _params: Value) {}
    }

    /// A request is routed only while exactly one call runs: with two, it could belong to
    /// either client, and goes to neither. Progress is matched by token whatever runs.
    #[test]
    fn only_an_unambiguous_call_gets_the_servers_requests() {
        let routes = Routes::default();
        assert!(routes.sole().is_none(), "nothing runs");
        let first = routes.enter(Some(Arc::new(Named)));
        routes.set_progress_token(&first, "t1".into());
        assert!(routes.sole().is_some(), "one call with a client");
        let second = routes.enter(None);
        assert!(routes.sole().is_none(), "two calls: ambiguous");
        assert!(routes.by_progress_token("t1").is_some());
        assert!(routes.by_progress_token("t2").is_none());
        drop(first);
        assert!(
            routes.sole().is_none(),
            "the call left has no client of its own"
        );
        drop(second);
        assert!(routes.lock().is_empty(), "every route ends with its call");
    }
}
