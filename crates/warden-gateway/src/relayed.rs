//! The gateway's client as the [`Downstream`] of the calls it makes: how an upstream
//! server's questions, progress and log messages during a call reach the one client that
//! made that call (decision 0051).
//!
//! - What the client declared decides what it is asked: elicitation in the modes it named
//!   (`{}` alone means form), sampling, roots. Only those are declared to a 2026-07-28
//!   upstream with the call, and anything else a server asks for is refused here, not put
//!   to a client that never offered it.
//! - A 2025-11-25 client is asked with requests of its own (on the call's stream, or
//!   stdio), one at a time, each within [`ASK_TIMEOUT`]. A 2026-07-28 client gets the
//!   server's questions as an `InputRequiredResult` and answers with its retry (see
//!   [`crate::dispatch`], which signs the state).
//! - Every question names the server that asks: the client shows one gateway, and its user
//!   must know who wants the answer (elicitation messages are prefixed with the server's
//!   name).
//! - Progress reaches the client only under the token the client gave its request (none
//!   given: none relayed); log messages go to the client of the one call running.
//!   Notifications are sent without waiting: a client that does not read them loses some,
//!   the call goes on.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use warden_mcp::{CallContext, Downstream, InputRetry};

use crate::dispatch::Peer;

/// How long a client may take to answer a server's question relayed to it.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(600);

/// The capabilities of a client that a server may ask through Warden: its `elicitation`,
/// `sampling` and `roots`, as it declared them; nothing else.
pub fn relayable(capabilities: &Value) -> Value {
    let mut kept = Map::new();
    for key in ["elicitation", "sampling", "roots"] {
        if let Some(value) = capabilities.get(key).filter(|value| value.is_object()) {
            kept.insert(key.to_owned(), value.clone());
        }
    }
    Value::Object(kept)
}

/// Whether a client that declared `capabilities` can be asked `method` with `params`.
pub fn declares(capabilities: &Value, method: &str, params: &Value) -> bool {
    match method {
        "elicitation/create" => {
            let Some(Value::Object(modes)) = capabilities.get("elicitation") else {
                return false;
            };
            let mode = params.get("mode").and_then(Value::as_str).unwrap_or("form");
            match mode {
                // `{}` declares form only.
                "form" => modes.is_empty() || modes.contains_key("form"),
                "url" => modes.contains_key("url"),
                _ => false,
            }
        }
        "sampling/createMessage" => capabilities.get("sampling").is_some(),
        "roots/list" => capabilities.get("roots").is_some(),
        _ => false,
    }
}

/// The `_meta` key of the least severe log level a 2026-07-28 request wants to hear.
pub use warden_mcp::downstream::META_LOG_LEVEL;

/// The log levels, least severe first.
const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// The severity of a log level (`debug` 0 to `emergency` 7); `None` for an unknown name.
pub fn severity(level: &str) -> Option<u8> {
    LOG_LEVELS
        .iter()
        .position(|known| *known == level)
        .and_then(|index| u8::try_from(index).ok())
}

/// `params` of a server's question with the server named in what the user reads.
pub fn attributed(server: &str, method: &str, mut params: Value) -> Value {
    if method == "elicitation/create"
        && let Some(message) = params.get("message").and_then(Value::as_str)
    {
        params["message"] = json!(format!("[{server}] {message}"));
    }
    params
}

/// Where a call's upstream traffic goes, before the call's server is known.
pub struct RelayTo {
    /// Where requests and notifications to the client go.
    pub peer: Arc<dyn Peer>,
    /// What the client declared that may be asked ([`relayable`], computed once per
    /// session or request by the caller).
    pub capabilities: Value,
    /// The progress token the client gave this request, if any.
    pub progress_token: Option<Value>,
    /// A 2026-07-28 client.
    pub modern: bool,
    /// The least severe log message relayed ([`severity`]); `None`: none (a 2026-07-28
    /// request that did not ask for them).
    pub log_floor: Option<u8>,
    /// Answers and state of an earlier round, for the server.
    pub retry: Option<InputRetry>,
}

impl RelayTo {
    /// The call's context once its server is known.
    pub fn to_server(self, server: &str) -> CallContext {
        CallContext {
            downstream: Some(Arc::new(ClientBehindCall {
                peer: self.peer,
                capabilities: self.capabilities,
                progress_token: self.progress_token,
                server: server.to_owned(),
                modern: self.modern,
                log_floor: self.log_floor,
            })),
            retry: self.retry,
        }
    }
}

/// The client behind one call.
pub struct ClientBehindCall {
    /// Where requests and notifications to the client go.
    pub peer: Arc<dyn Peer>,
    /// What the client declared ([`relayable`]).
    pub capabilities: Value,
    /// The progress token the client gave this request, if any.
    pub progress_token: Option<Value>,
    /// The upstream server the call goes to.
    pub server: String,
    /// A 2026-07-28 client: answers questions with its retry.
    pub modern: bool,
    /// See [`RelayTo::log_floor`].
    pub log_floor: Option<u8>,
}

impl Downstream for ClientBehindCall {
    fn capabilities(&self) -> Value {
        self.capabilities.clone()
    }

    fn passes_input_through(&self) -> bool {
        self.modern
    }

    fn ask<'a>(&'a self, method: &'a str, params: Value) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(async move {
            if !declares(&self.capabilities, method, &params) {
                return Err(format!("the client did not declare what `{method}` needs"));
            }
            let params = attributed(&self.server, method, params);
            if self.modern {
                // A 2025-11-25 server's request during the call: a 2026-07-28 client is
                // asked through a result, and the call waits for its retry (parked).
                return self.peer.park(method, params, ASK_TIMEOUT).await;
            }
            self.peer.request(method, params, ASK_TIMEOUT).await
        })
    }

    fn follows_progress(&self) -> bool {
        self.progress_token.is_some()
    }

    fn log_level(&self) -> Option<&'static str> {
        self.log_floor
            .and_then(|floor| LOG_LEVELS.get(usize::from(floor)).copied())
    }

    fn notify(&self, method: &str, mut params: Value) {
        match method {
            "notifications/progress" => {
                let Some(token) = &self.progress_token else {
                    return;
                };
                params["progressToken"] = token.clone();
            }
            "notifications/message" => {
                let level = params
                    .get("level")
                    .and_then(Value::as_str)
                    .and_then(severity);
                match (self.log_floor, level) {
                    (Some(floor), Some(level)) if level >= floor => {}
                    _ => return,
                }
            }
            _ => return,
        }
        self.peer
            .notify(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::Mutex;

    use super::*;

    #[derive(Default)]
    struct Recording {
        asked: Mutex<Vec<(String, Value)>>,
        notified: Mutex<Vec<Value>>,
    }

    impl Peer for Recording {
        fn request<'a>(
            &'a self,
            method: &'a str,
            params: Value,
            _timeout: Duration,
        ) -> BoxFuture<'a, Result<Value, String>> {
            self.asked.lock().unwrap().push((method.to_owned(), params));
            Box::pin(async { Ok(json!({"action": "accept", "content": {"name": "A"}})) })
        }

        fn notify(&self, message: Value) {
            self.notified.lock().unwrap().push(message);
        }
    }

    fn client(
        peer: &Arc<Recording>,
        capabilities: Value,
        token: Option<Value>,
    ) -> ClientBehindCall {
        ClientBehindCall {
            peer: Arc::clone(peer) as Arc<dyn Peer>,
            capabilities: relayable(&capabilities),
            progress_token: token,
            server: "files".into(),
            modern: false,
            log_floor: Some(1),
        }
    }

    /// A client is asked only what it declared (form by `{}`, URL only when named,
    /// sampling and roots only when declared), and the question names the server.
    #[tokio::test]
    async fn a_client_is_asked_only_what_it_declared_and_told_who_asks() {
        let peer = Arc::new(Recording::default());
        let form_only = client(&peer, json!({"elicitation": {}, "experimental": {}}), None);
        assert_eq!(form_only.capabilities(), json!({"elicitation": {}}));
        let form = json!({"message": "Name?", "requestedSchema": {"type": "object"}});
        let answer = form_only.ask("elicitation/create", form).await.unwrap();
        assert_eq!(answer["action"], "accept");
        let url = json!({"mode": "url", "message": "Sign in", "url": "https://x.example"});
        assert!(form_only.ask("elicitation/create", url).await.is_err());
        assert!(
            form_only
                .ask("sampling/createMessage", json!({}))
                .await
                .is_err()
        );
        assert!(form_only.ask("roots/list", json!({})).await.is_err());
        assert!(form_only.ask("ping", json!({})).await.is_err());
        let asked = peer.asked.lock().unwrap().clone();
        assert_eq!(
            asked.len(),
            1,
            "only the declared question reached the client"
        );
        assert_eq!(asked[0].1["message"], "[files] Name?");
        let all = client(
            &peer,
            json!({"elicitation": {"url": {}}, "sampling": {}, "roots": {}}),
            None,
        );
        let url = json!({"mode": "url", "message": "Sign in", "url": "https://x.example"});
        assert!(all.ask("elicitation/create", url).await.is_ok());
        let form = json!({"message": "Name?", "requestedSchema": {"type": "object"}});
        assert!(
            all.ask("elicitation/create", form).await.is_err(),
            "url only"
        );
        assert!(all.ask("sampling/createMessage", json!({})).await.is_ok());
        assert!(all.ask("roots/list", json!({})).await.is_ok());
    }

    /// Progress travels under the client's own token, and not at all without one; log
    /// messages pass from the level asked for up; anything else is dropped.
    #[test]
    fn progress_carries_the_clients_token_or_is_not_sent() {
        let peer = Arc::new(Recording::default());
        let with = client(&peer, json!({}), Some(json!("client-7")));
        with.notify(
            "notifications/progress",
            json!({"progressToken": 3, "progress": 50, "total": 100}),
        );
        with.notify(
            "notifications/message",
            json!({"level": "info", "data": "x"}),
        );
        with.notify(
            "notifications/message",
            json!({"level": "debug", "data": "below"}),
        );
        with.notify("notifications/tools/list_changed", json!({}));
        let mut without = client(&peer, json!({}), None);
        without.notify(
            "notifications/progress",
            json!({"progressToken": 3, "progress": 1}),
        );
        without.log_floor = None;
        without.notify(
            "notifications/message",
            json!({"level": "error", "data": "unasked"}),
        );
        let sent = peer.notified.lock().unwrap().clone();
        assert_eq!(sent.len(), 2, "{sent:?}");
        assert_eq!(sent[0]["params"]["progressToken"], "client-7");
        assert_eq!(sent[0]["params"]["progress"], 50);
        assert_eq!(sent[1]["method"], "notifications/message");
    }
}
