//! Correlation of one relayed server's requests and answers, inside the supervisor.
//!
//! The brain's ids are never shown to the child: each request the brain sends gets a fresh
//! number from a counter that is never reset, not even when the child is started again,
//! and the answer is mapped back only while its request is pending in the current
//! generation. A child that was replaced (killed mid-call, restarted) can therefore never
//! answer a newer request: its late answer carries a number nobody waits for and is
//! dropped. Requests the child sends the other way (elicitation, ping) are renamed with
//! the generation in the id, so the brain's late answer to a dead child's question never
//! reaches the new one.
//!
//! Pure state: no I/O, so every rule here is tested without processes.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

/// A request forwarded to the child and not answered yet.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    /// The id the brain gave it (restored on the answer).
    pub origin: Value,
    /// Its method (`tools/call`, `initialize`, ...).
    pub method: String,
    /// When the supervisor gives up on it, and which level's deadline that is.
    pub deadline: Option<(Instant, Deadline)>,
    /// Sent by the supervisor itself (the replayed `initialize`): its answer is swallowed.
    pub internal: bool,
}

/// Which level a deadline belongs to (named in the timeout error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// The tool's own timeout (`timeout.call` of the server inside the sandbox).
    Tool(Duration),
    /// The deadline the brain sent with the request, less the relay's margin.
    Supervisor(Duration),
}

/// What to do with an answer or request that came from the child.
#[derive(Debug, PartialEq)]
pub enum FromChild {
    /// Forward this message to the brain.
    Forward(Map<String, Value>),
    /// The answer to a request the supervisor made itself.
    Internal(Map<String, Value>),
    /// A notification the brain may use (progress, a log message, a resource update):
    /// passed on within a rate budget, never waiting for the channel.
    Notice(Map<String, Value>),
    /// Drop it: an answer nobody waits for (stale, or already timed out), or a
    /// notification that is not passed on.
    Drop(&'static str),
}

/// Notifications passed on to the brain within a rate budget (besides list changes, which
/// always are).
pub const RELAYED_NOTICES: [&str; 3] = [
    "notifications/progress",
    "notifications/message",
    "notifications/resources/updated",
];

/// The correlation state of one server.
#[derive(Debug, Default)]
pub struct Correlator {
    generation: u64,
    next: u64,
    pending: HashMap<u64, Pending>,
    /// The brain's id (as JSON text) to the child's, for `notifications/cancelled`.
    by_origin: HashMap<String, u64>,
}

/// Most requests pending for one server at once; more are refused at once.
pub const MAX_PENDING: usize = 1024;

impl Correlator {
    /// The current generation (incremented each time the child is replaced).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Requests waiting for an answer.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Starts a new generation (the child was replaced): every pending request is
    /// returned so the caller can answer it with an error, and nothing of the old
    /// generation can be answered any more.
    pub fn new_generation(&mut self) -> Vec<Pending> {
        self.generation += 1;
        self.by_origin.clear();
        let mut failed: Vec<(u64, Pending)> = self.pending.drain().collect();
        failed.sort_by_key(|(id, _)| *id);
        failed.into_iter().map(|(_, pending)| pending).collect()
    }

    /// Renames a request from the brain before it goes to the child. `None` when too many
    /// requests are pending.
    pub fn request(
        &mut self,
        message: &mut Map<String, Value>,
        deadline: Option<(Instant, Deadline)>,
    ) -> Option<u64> {
        if self.pending.len() >= MAX_PENDING {
            return None;
        }
        let origin = message.get("id").cloned().unwrap_or(Value::Null);
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        self.next += 1;
        let id = self.next;
        message.insert("id".into(), Value::from(id));
        self.by_origin.insert(origin.to_string(), id);
        self.pending.insert(
            id,
            Pending {
                origin,
                method,
                deadline,
                internal: false,
            },
        );
        Some(id)
    }

    /// A request of the supervisor's own (the replayed `initialize`): its answer comes back
    /// as [`FromChild::Internal`].
    pub fn internal_request(&mut self, method: &str) -> u64 {
        self.next += 1;
        let id = self.next;
        self.pending.insert(
            id,
            Pending {
                origin: Value::Null,
                method: method.to_owned(),
                deadline: None,
                internal: true,
            },
        );
        id
    }

    /// Renames `notifications/cancelled` from the brain: its `requestId` becomes the
    /// child's. `false` when the request is not pending (already answered): then the
    /// notification is not forwarded.
    pub fn cancellation(&mut self, message: &mut Map<String, Value>) -> bool {
        let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) else {
            return false;
        };
        let Some(origin) = params.get("requestId") else {
            return false;
        };
        let Some(id) = self.by_origin.get(&origin.to_string()).copied() else {
            return false;
        };
        params.insert("requestId".into(), Value::from(id));
        true
    }

    /// Takes back a request that will not be answered by the child (timed out): its late
    /// answer will be dropped.
    pub fn forget(&mut self, id: u64) -> Option<Pending> {
        let pending = self.pending.remove(&id)?;
        self.by_origin.remove(&pending.origin.to_string());
        Some(pending)
    }

    /// The earliest deadline among pending requests.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.pending
            .values()
            .filter_map(|pending| pending.deadline.map(|(at, _)| at))
            .min()
    }

    /// Pending requests whose deadline is past at `now`, removed, with their child ids.
    pub fn expired(&mut self, now: Instant) -> Vec<(u64, Pending)> {
        let ids: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, pending)| pending.deadline.is_some_and(|(at, _)| at <= now))
            .map(|(id, _)| *id)
            .collect();
        ids.into_iter()
            .filter_map(|id| self.forget(id).map(|pending| (id, pending)))
            .collect()
    }

    /// Classifies one message from the child of generation `generation`.
    pub fn child_message(&mut self, generation: u64, mut message: Map<String, Value>) -> FromChild {
        if generation != self.generation {
            return FromChild::Drop("a message from a child that has been replaced");
        }
        let has_method = message.contains_key("method");
        let has_id = message.get("id").is_some_and(|id| !id.is_null());
        match (has_method, has_id) {
            // An answer.
            (false, true) => {
                let Some(id) = message.get("id").and_then(Value::as_u64) else {
                    return FromChild::Drop("an answer with an id the supervisor never sent");
                };
                let Some(pending) = self.forget(id) else {
                    return FromChild::Drop("an answer to no pending request (stale or late)");
                };
                if pending.internal {
                    return FromChild::Internal(message);
                }
                message.insert("id".into(), pending.origin);
                FromChild::Forward(message)
            }
            // A request of the child's own: renamed with the generation.
            (true, true) => {
                let id = message.get("id").cloned().unwrap_or(Value::Null);
                message.insert(
                    "id".into(),
                    Value::from(format!("g{}:{}", self.generation, id)),
                );
                FromChild::Forward(message)
            }
            // A notification: list changes are passed on; progress, log messages and
            // resource updates are passed on within a budget (the supervisor's); everything
            // else is acknowledged by being read and dropped, so a flood never fills the
            // brain's queue.
            (true, false) => {
                let method = message
                    .get("method")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if method.ends_with("/list_changed") {
                    FromChild::Forward(message)
                } else if RELAYED_NOTICES.contains(&method) {
                    FromChild::Notice(message)
                } else {
                    FromChild::Drop("a notification that is not passed on")
                }
            }
            (false, false) => {
                FromChild::Drop("a message that is neither request, answer nor notification")
            }
        }
    }

    /// Restores the child's id on the brain's answer to a request the child made. `false`
    /// when the answer belongs to an earlier generation (or was never asked): dropped.
    pub fn answer_to_child(&self, message: &mut Map<String, Value>) -> bool {
        let Some(id) = message.get("id").and_then(Value::as_str) else {
            return false;
        };
        let Some(rest) = id.strip_prefix(&format!("g{}:", self.generation)) else {
            return false;
        };
        let Ok(original) = serde_json::from_str::<Value>(rest) else {
            return false;
        };
        message.insert("id".into(), original);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn answers_get_the_brains_id_back() {
        let mut corr = Correlator::default();
        let mut request = object(json!({"jsonrpc":"2.0","id":"abc","method":"tools/call"}));
        let id = corr.request(&mut request, None).unwrap();
        assert_eq!(request["id"], json!(id));
        let answer = object(json!({"jsonrpc":"2.0","id":id,"result":{}}));
        match corr.child_message(0, answer) {
            FromChild::Forward(message) => assert_eq!(message["id"], json!("abc")),
            other => panic!("{other:?}"),
        }
        assert_eq!(corr.pending(), 0);
    }

    #[test]
    fn a_replaced_childs_late_answer_never_answers_a_newer_request() {
        // The attack: the old child answers request 1 after it was replaced; the brain
        // has since sent request 2 with the same id it reused. The late answer must not
        // be taken for the answer to the new request.
        let mut corr = Correlator::default();
        let mut first = object(json!({"jsonrpc":"2.0","id":7,"method":"tools/call"}));
        let old = corr.request(&mut first, None).unwrap();
        let failed = corr.new_generation();
        assert_eq!(
            failed.len(),
            1,
            "the pending request is failed, not left hanging"
        );
        let mut second = object(json!({"jsonrpc":"2.0","id":7,"method":"tools/call"}));
        let new = corr.request(&mut second, None).unwrap();
        assert_ne!(old, new, "ids are never reused across generations");
        // The old child's answer, read late, under its generation...
        let late = object(json!({"jsonrpc":"2.0","id":old,"result":{"stale":true}}));
        assert!(matches!(
            corr.child_message(0, late.clone()),
            FromChild::Drop(_)
        ));
        // ...or even if it somehow arrived through the new child's stream.
        assert!(matches!(corr.child_message(1, late), FromChild::Drop(_)));
        // The new child's answer is delivered.
        let answer = object(json!({"jsonrpc":"2.0","id":new,"result":{"fresh":true}}));
        match corr.child_message(1, answer) {
            FromChild::Forward(message) => {
                assert_eq!(message["id"], json!(7));
                assert_eq!(message["result"], json!({"fresh":true}));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn notifications_other_than_list_changes_and_notices_are_dropped() {
        let mut corr = Correlator::default();
        for method in [
            "x/y",
            "notifications/cancelled",
            "notifications/initialized",
        ] {
            let note = object(json!({"jsonrpc":"2.0","method":method,"params":{}}));
            assert!(
                matches!(corr.child_message(0, note), FromChild::Drop(_)),
                "{method}"
            );
        }
        for method in RELAYED_NOTICES {
            let note = object(json!({"jsonrpc":"2.0","method":method,"params":{}}));
            assert!(
                matches!(corr.child_message(0, note), FromChild::Notice(_)),
                "{method}"
            );
        }
        // A replaced child's notices are dropped like its answers.
        let note = object(json!({"jsonrpc":"2.0","method":"notifications/progress"}));
        assert!(matches!(corr.child_message(7, note), FromChild::Drop(_)));
        let changed = object(json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"}));
        assert!(matches!(
            corr.child_message(0, changed),
            FromChild::Forward(_)
        ));
    }

    #[test]
    fn cancellations_name_the_childs_id_and_timeouts_forget_the_request() {
        let mut corr = Correlator::default();
        let now = Instant::now();
        let mut request = object(json!({"jsonrpc":"2.0","id":3,"method":"tools/call"}));
        let id = corr
            .request(
                &mut request,
                Some((now, Deadline::Tool(Duration::from_millis(5)))),
            )
            .unwrap();
        let mut cancel = object(
            json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}),
        );
        assert!(corr.cancellation(&mut cancel));
        assert_eq!(cancel["params"]["requestId"], json!(id));
        assert_eq!(corr.next_deadline(), Some(now));
        let expired = corr.expired(now);
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].0, id);
        // The answer that comes after the timeout is dropped.
        let late = object(json!({"jsonrpc":"2.0","id":id,"result":{}}));
        assert!(matches!(corr.child_message(0, late), FromChild::Drop(_)));
        // A cancellation for something no longer pending is not forwarded.
        assert!(!corr.cancellation(&mut cancel));
    }

    #[test]
    fn the_childs_own_requests_carry_the_generation() {
        let mut corr = Correlator::default();
        let ask = object(json!({"jsonrpc":"2.0","id":1,"method":"elicitation/create"}));
        let FromChild::Forward(forwarded) = corr.child_message(0, ask) else {
            panic!("not forwarded");
        };
        let renamed = forwarded["id"].clone();
        let mut answer = object(json!({"jsonrpc":"2.0","id":renamed,"result":{}}));
        assert!(corr.answer_to_child(&mut answer.clone()));
        corr.new_generation();
        // The brain's answer to the old child's question does not reach the new child.
        assert!(!corr.answer_to_child(&mut answer));
    }

    #[test]
    fn pending_requests_are_bounded() {
        let mut corr = Correlator::default();
        for index in 0..MAX_PENDING {
            let mut request = object(json!({"jsonrpc":"2.0","id":index,"method":"ping"}));
            assert!(corr.request(&mut request, None).is_some());
        }
        let mut request = object(json!({"jsonrpc":"2.0","id":"x","method":"ping"}));
        assert!(corr.request(&mut request, None).is_none());
    }
}
