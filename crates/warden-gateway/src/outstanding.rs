//! Requests Warden sends a client (elicitations) and waits on: the ids it gives them, the
//! callers waiting for each answer, and a bound on how many may be open at once. Shared
//! by the stdio transport and a legacy HTTP session, which differ only in how a request
//! reaches the client (their own writer queue, or the call's SSE stream).

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::oneshot;

use crate::jsonrpc;

/// The client's answer to one request: its `result`, or its `error` object.
type Answer = Result<Value, Value>;

/// The requests sent to one client and not yet answered.
pub(crate) struct Outstanding {
    next_id: AtomicU64,
    waiting: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
}

impl Outstanding {
    pub(crate) fn new() -> Outstanding {
        Outstanding {
            next_id: AtomicU64::new(1),
            waiting: Mutex::new(HashMap::new()),
        }
    }

    /// Hands a client's response to the request it answers; a response to no open request
    /// (late, unknown, or answered already) is dropped.
    pub(crate) fn answer(&self, id: &Value, answer: Answer) {
        let waiting = self
            .waiting
            .lock()
            .ok()
            .and_then(|mut waiting| waiting.remove(&jsonrpc::id_key(id)));
        if let Some(waiting) = waiting {
            let _ = waiting.send(answer);
        }
    }

    /// Sends `method` to the client through `send` (which says whether the request could
    /// be written) and waits at most `timeout` for its answer. At most `max` requests are
    /// open at once; past that the request is refused without being sent.
    pub(crate) async fn request<F>(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        max: usize,
        send: impl FnOnce(Value) -> F,
    ) -> Result<Value, String>
    where
        F: Future<Output = bool>,
    {
        let id = Value::String(format!(
            "warden-{}",
            self.next_id.fetch_add(1, Ordering::Relaxed)
        ));
        let key = jsonrpc::id_key(&id);
        let (tx, rx) = oneshot::channel();
        {
            let mut waiting = self.waiting.lock().map_err(|_| "state lost".to_owned())?;
            if waiting.len() >= max {
                return Err(format!(
                    "{max} requests to the client are already outstanding"
                ));
            }
            waiting.insert(key.clone(), tx);
        }
        let sent = send(jsonrpc::request(&id, method, params)).await;
        let answer = if sent {
            Some(tokio::time::timeout(timeout, rx).await)
        } else {
            None
        };
        if let Ok(mut waiting) = self.waiting.lock() {
            waiting.remove(&key);
        }
        match answer {
            None => Err("the client closed the stream".into()),
            Some(Ok(Ok(Ok(result)))) => Ok(result),
            Some(Ok(Ok(Err(error)))) => Err(format!("the client answered with an error: {error}")),
            Some(Ok(Err(_))) => Err("the client went away".into()),
            Some(Err(_)) => Err(format!("no answer within {}s", timeout.as_secs())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn answers_reach_their_request_and_the_bound_holds() {
        let outstanding = std::sync::Arc::new(Outstanding::new());
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Value>(4);
        let asking = std::sync::Arc::clone(&outstanding);
        let call = tokio::spawn(async move {
            asking
                .request(
                    "elicitation/create",
                    json!({}),
                    Duration::from_secs(5),
                    1,
                    |m| {
                        let tx = tx.clone();
                        async move { tx.send(m).await.is_ok() }
                    },
                )
                .await
        });
        let sent = rx.recv().await.unwrap();
        // A second request while one is open is refused unsent.
        let refused = outstanding
            .request("ping", json!({}), Duration::from_secs(1), 1, |_| async {
                true
            })
            .await;
        assert_eq!(
            refused.unwrap_err(),
            "1 requests to the client are already outstanding"
        );
        // An answer to an unknown id is dropped; the right one is delivered.
        outstanding.answer(&json!("warden-999"), Ok(json!({"wrong": true})));
        outstanding.answer(&sent["id"], Ok(json!({"action": "accept"})));
        assert_eq!(call.await.unwrap().unwrap(), json!({"action": "accept"}));
        // A request that cannot be written is not waited on.
        let closed = outstanding
            .request("ping", json!({}), Duration::from_secs(5), 1, |_| async {
                false
            })
            .await;
        assert_eq!(closed.unwrap_err(), "the client closed the stream");
        let timed_out = outstanding
            .request("ping", json!({}), Duration::from_millis(10), 1, |_| async {
                true
            })
            .await;
        assert_eq!(timed_out.unwrap_err(), "no answer within 0s");
    }
}
