//! Calls waiting for a 2026-07-28 client's answer to a 2025-11-25 server's question
//! (decision 0051).
//!
//! A 2025-11-25 server asks during the call (`elicitation/create`, ...) and waits for the
//! answer; a 2026-07-28 client can only be asked through a result, and answers with a new
//! request. So the call is parked: its request ends with an `InputRequiredResult` whose
//! `requestState` names the parked call (signed: [`crate::secret::Issued::Parked`]), the
//! call keeps running, waiting, and the client's retry hands the answer over and takes the
//! rest of the call's messages (more questions, progress, the answer) as its own.
//!
//! Bounded: at most [`MAX_PARKED`] calls wait at once, each at most [`PARK_LIFETIME`]; a
//! call nobody comes back for is aborted when its time is up (the server is told the call
//! is cancelled), found by the next park or take. Dropping a parked call, or a retry that
//! holds it, aborts it too.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

/// Most calls parked at once.
pub const MAX_PARKED: usize = 256;
/// How long a parked call waits for its client (the same as a signed state lives).
pub const PARK_LIFETIME: Duration = crate::secret::STATE_LIFETIME;

/// `"method"` of the message a parking question is sent as, on the call's own channel, so
/// the request's handler turns it into an input-required result.
pub const QUESTION_MARK: &str = "dev.warden/question";

/// Where a parked call's question is answered: filled by the stream's `park`, emptied by
/// whoever turns the question into a result.
pub type AnswerSlot = Arc<Mutex<Option<oneshot::Sender<Value>>>>;

/// Whether a call's message is a server's question to park (a [`QUESTION_MARK`] message).
pub fn is_question(message: &Value) -> bool {
    message.get("method").and_then(Value::as_str) == Some(QUESTION_MARK)
}

/// Puts a server's question to the request whose call it is: a [`QUESTION_MARK`] message on
/// the call's channel `events` (its handler turns it into an input-required result and
/// parks the call), and waits at most `timeout` for the answer the client's retry brings.
pub async fn ask_through(
    events: &mpsc::Sender<Value>,
    slot: &AnswerSlot,
    method: &str,
    params: Value,
    timeout: Duration,
) -> Result<Value, String> {
    let (answer, answered) = oneshot::channel();
    match slot.lock() {
        Ok(mut slot) => *slot = Some(answer),
        Err(_) => return Err("the question's answer slot was lost".to_owned()),
    }
    let question = serde_json::json!({"jsonrpc": "2.0", "method": QUESTION_MARK,
                                      "params": {"method": method, "params": params}});
    if events.send(question).await.is_err() {
        return Err("the client's request is gone".to_owned());
    }
    match tokio::time::timeout(timeout, answered).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(_)) => Err("the client did not come back with an answer".to_owned()),
        Err(_) => Err("the client did not answer in time".to_owned()),
    }
}

/// A 2026-07-28 call's way back to its client, on either transport: notifications go to
/// `notifications` (the call's SSE stream over HTTP, stdout over stdio) without waiting; a
/// server's question goes to the call's channel `events`, whose reader parks the call; the
/// client is never sent a request.
pub struct CallStream {
    /// The call's own channel (its answer, and questions to park).
    pub events: mpsc::Sender<Value>,
    /// Where notifications about the call go.
    pub notifications: mpsc::Sender<Value>,
    /// Where a parked question's answer will be sent.
    pub slot: AnswerSlot,
}

impl crate::dispatch::Peer for CallStream {
    fn request<'a>(
        &'a self,
        method: &'a str,
        _params: Value,
        _timeout: Duration,
    ) -> futures::future::BoxFuture<'a, Result<Value, String>> {
        Box::pin(async move {
            Err(format!(
                "{method}: a 2026-07-28 client is not sent requests"
            ))
        })
    }

    fn notify(&self, message: Value) {
        let _ = self.notifications.try_send(message);
    }

    fn park<'a>(
        &'a self,
        method: &'a str,
        params: Value,
        timeout: Duration,
    ) -> futures::future::BoxFuture<'a, Result<Value, String>> {
        Box::pin(ask_through(
            &self.events,
            &self.slot,
            method,
            params,
            timeout,
        ))
    }
}

/// Aborts a call's task when dropped, unless disarmed.
pub struct CallTask(Option<AbortHandle>);

impl CallTask {
    /// Owns `handle`: the task is aborted when this is dropped.
    pub fn new(handle: AbortHandle) -> CallTask {
        CallTask(Some(handle))
    }

    /// Lets the task run on.
    pub fn disarm(mut self) -> Option<AbortHandle> {
        self.0.take()
    }
}

impl Drop for CallTask {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            handle.abort();
        }
    }
}

/// A call waiting for its client.
pub struct ParkedCall {
    /// The key the question was given in `inputRequests`.
    pub key: String,
    /// Where the answer goes.
    pub answer: oneshot::Sender<Value>,
    /// The call's messages after the question.
    pub rest: mpsc::Receiver<Value>,
    /// The next question's answer slot.
    pub slot: AnswerSlot,
    /// The running call.
    pub task: CallTask,
    /// When it stops waiting.
    pub until: Instant,
}

/// The parked calls of one gateway.
#[derive(Default)]
pub struct Parking {
    calls: Mutex<HashMap<String, ParkedCall>>,
}

/// Why a call could not be parked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{MAX_PARKED} calls already wait for their clients' answers")]
pub struct Full;

impl Parking {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, ParkedCall>> {
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Parks `call` under `id`; expired calls are aborted first.
    pub fn park(&self, id: String, call: ParkedCall) -> Result<(), Full> {
        let mut calls = self.lock();
        let now = Instant::now();
        calls.retain(|_, parked| parked.until > now);
        if calls.len() >= MAX_PARKED {
            return Err(Full);
        }
        calls.insert(id, call);
        Ok(())
    }

    /// Takes the call parked under `id`, if it is still waiting.
    pub fn take(&self, id: &str) -> Option<ParkedCall> {
        let mut calls = self.lock();
        let now = Instant::now();
        calls.retain(|_, parked| parked.until > now);
        calls.remove(id)
    }

    /// How many calls wait.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no call waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn parked(until: Instant) -> (ParkedCall, tokio::task::JoinHandle<()>) {
        let task = tokio::spawn(std::future::pending::<()>());
        let (answer, _) = oneshot::channel();
        let (_, rest) = mpsc::channel(1);
        let call = ParkedCall {
            key: "k".into(),
            answer,
            rest,
            slot: AnswerSlot::default(),
            task: CallTask::new(task.abort_handle()),
            until,
        };
        (call, task)
    }

    /// A parked call is taken once; one whose time is up is aborted, not handed out; the
    /// count is bounded.
    #[tokio::test]
    async fn a_parked_call_is_taken_once_and_an_expired_one_is_aborted() {
        let parking = Parking::default();
        let later = Instant::now() + Duration::from_secs(60);
        let (call, _task) = parked(later);
        parking.park("a".into(), call).unwrap();
        assert!(parking.take("a").is_some());
        assert!(parking.take("a").is_none(), "taken once");
        let (call, task) = parked(Instant::now());
        parking.park("old".into(), call).unwrap();
        assert!(parking.take("old").is_none(), "its time is up");
        assert!(task.await.unwrap_err().is_cancelled(), "and it was aborted");
        for n in 0..MAX_PARKED {
            let (call, _task) = parked(later);
            parking.park(format!("n{n}"), call).unwrap();
        }
        let (call, _task) = parked(later);
        assert_eq!(parking.park("one-too-many".into(), call), Err(Full));
    }
}
