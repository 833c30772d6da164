//! The audit log's one writer: every attempted tool call, from every front end, becomes
//! exactly one row, written here.
//!
//! A front end never builds a row itself: a [`Session`](crate::Session) starts an
//! [`Attempt`] when it prepares a call and finishes it when the call ends (sent, refused,
//! or dropped unsent), so the rows of `warden call`, the agent loop and the gateway carry
//! the same fields with the same meaning. An attempt that is dropped before it was
//! finished (the user pressed Ctrl-C, a turn timed out, a client went away) is written as
//! it stands when dropped, so no attempt goes unrecorded and none is recorded twice.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use warden_policy::{Decision, Reason, Verdict};
use warden_store::{AuditEntry, Store, StoreError};

/// What became of an attempted call: the `outcome` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Sent, and the server answered with a result.
    Ok,
    /// Sent, and the server answered with a result that reports an error.
    ToolError,
    /// Permitted, but it failed on the way, at the server, or was cut short (the error
    /// says which; `executed` says whether it was sent).
    Failed,
    /// The policy denies it; nothing was sent.
    Denied,
    /// The policy asks about it and nobody approved it; nothing was sent.
    NotApproved,
    /// Refused before the policy: its arguments are not an object or break the tool's
    /// schema, its JSON is broken, or its name is unknown; nothing was sent.
    InvalidArguments,
}

impl Outcome {
    /// The name stored in the `outcome` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::ToolError => "tool_error",
            Outcome::Failed => "failed",
            Outcome::Denied => "denied",
            Outcome::NotApproved => "not_approved",
            Outcome::InvalidArguments => "invalid_arguments",
        }
    }
}

/// Who let a call run: the `approved_by` column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovedBy {
    /// The policy allows it.
    Policy,
    /// A person answered yes (a terminal prompt, a client's elicitation), under a name the
    /// front end chose (`user`, `--yes`, `allow-all`, `user-session`).
    Named(Arc<str>),
}

impl ApprovedBy {
    /// A person or setting, by the name recorded.
    pub fn named(name: impl Into<Arc<str>>) -> ApprovedBy {
        ApprovedBy::Named(name.into())
    }

    /// The name stored.
    pub fn as_str(&self) -> &str {
        match self {
            ApprovedBy::Policy => "policy",
            ApprovedBy::Named(name) => name,
        }
    }
}

/// One attempted call, as it will be recorded.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// When it was made, in milliseconds since the Unix epoch.
    pub time_ms: i64,
    /// The front end (`cli`, `run`, `chat`, `serve`).
    pub front_end: Arc<str>,
    /// The front end's client, when it has many (the gateway).
    pub client: Option<Arc<str>>,
    /// The tool's server (empty when the name matched no tool; `warden` for Warden's own).
    pub server: String,
    /// The qualified tool name (as written, when it matched no tool).
    pub tool: String,
    /// The arguments (stored redacted).
    pub arguments: Value,
    /// The policy's decision; `None` when refused before the policy.
    pub decision: Option<Decision>,
    /// The decision's reasons.
    pub reasons: Vec<Reason>,
    /// Who let it run; `None` while it has not been let.
    pub approved_by: Option<ApprovedBy>,
    /// Whether it was sent to the server.
    pub executed: bool,
    /// What became of it.
    pub outcome: Outcome,
    /// What went wrong, if anything.
    pub error: Option<String>,
    /// How long the server took, when it was sent.
    pub latency: Option<Duration>,
    /// The size of the result's JSON, when there was one.
    pub result_bytes: Option<usize>,
}

impl Attempt {
    /// An attempt on `tool` of `server` by `front_end`, not decided yet: until it is
    /// finished it reads as refused before the policy.
    pub fn new(
        front_end: Arc<str>,
        client: Option<Arc<str>>,
        server: impl Into<String>,
        tool: impl Into<String>,
        arguments: Value,
    ) -> Attempt {
        Attempt {
            time_ms: now_ms(),
            front_end,
            client,
            server: server.into(),
            tool: tool.into(),
            arguments,
            decision: None,
            reasons: Vec::new(),
            approved_by: None,
            executed: false,
            outcome: Outcome::InvalidArguments,
            error: None,
            latency: None,
            result_bytes: None,
        }
    }

    /// Records the policy's decision and reasons.
    pub fn decided(&mut self, verdict: &Verdict) {
        self.decision = Some(verdict.decision);
        self.reasons = verdict.reasons.clone();
    }

    /// The row as the store keeps it.
    pub fn entry(&self) -> AuditEntry {
        let reasons = self
            .reasons
            .iter()
            .map(|reason| json!({"kind": reason.kind.tag(), "text": &*reason.text}))
            .collect();
        AuditEntry {
            time_ms: self.time_ms,
            front_end: self.front_end.to_string(),
            client: self.client.as_deref().map(str::to_owned),
            server: self.server.clone(),
            tool: self.tool.clone(),
            arguments: self.arguments.clone(),
            decision: self.decision.map(|decision| decision.as_str().to_owned()),
            reasons: Value::Array(reasons),
            approved_by: self.approved_by.as_ref().map(|by| by.as_str().to_owned()),
            executed: self.executed,
            outcome: self.outcome.as_str().to_owned(),
            error: self.error.clone(),
            latency_ms: self
                .latency
                .map(|latency| i64::try_from(latency.as_millis()).unwrap_or(i64::MAX)),
            result_bytes: self
                .result_bytes
                .map(|bytes| i64::try_from(bytes).unwrap_or(i64::MAX)),
        }
    }

    /// The outcome of a call that was never sent, from its decision: denied, not approved,
    /// or (permitted, then dropped) failed.
    pub(crate) fn unsent(&mut self) {
        self.executed = false;
        self.outcome = match (self.decision, &self.approved_by) {
            (None, _) => Outcome::InvalidArguments,
            (Some(Decision::Deny), _) => Outcome::Denied,
            (Some(_), None) => Outcome::NotApproved,
            (Some(_), Some(_)) => Outcome::Failed,
        };
        if self.outcome == Outcome::Denied || self.outcome == Outcome::NotApproved {
            // Whoever would have let it run did not.
            self.approved_by = None;
        }
    }
}

/// A row that could not be written.
#[derive(Debug, thiserror::Error)]
#[error("the audit log did not record this call of `{tool}`: {source}")]
pub struct AuditError {
    /// The qualified tool name of the call.
    pub tool: String,
    /// Why.
    #[source]
    pub source: StoreError,
}

/// What a front end does when a row cannot be written (tell its user).
pub type AuditFailureHook = Arc<dyn Fn(&AuditError) + Send + Sync>;

/// The audit writer one host shares among all its sessions.
///
/// **Group commit.** A row is durable (committed with `synchronous = FULL`) before
/// [`write`](AuditLog::write) returns, so before the call's answer leaves, as it always
/// was; what changed is that concurrent writers share one commit. The first writer to find
/// no commit running becomes the leader: it takes every row waiting at that moment and
/// writes them in one transaction (one sync); writers arriving meanwhile wait for the next
/// commit, which the next of them leads. Each still returns only once its own row is
/// committed (or failed), and each row is written exactly once. On a multi-threaded
/// runtime the wait is a `block_in_place`, so the worker's other tasks (other clients'
/// requests) move to another thread while it waits, and their rows join the next commit.
pub struct AuditLog {
    store: Arc<Mutex<Store>>,
    on_failure: AuditFailureHook,
    warned: AtomicBool,
    queue: Mutex<Queue>,
    committed: Condvar,
}

/// Rows waiting for a commit, and the results of those committed.
#[derive(Default)]
struct Queue {
    /// Rows not yet taken by a leader, with their tickets.
    waiting: Vec<(u64, AuditEntry)>,
    next_ticket: u64,
    /// Whether a leader is writing now.
    leading: bool,
    /// Results of rows written and not yet collected by their writers.
    done: std::collections::HashMap<u64, Result<(), StoreError>>,
    /// Commits made (transactions), for tests and measurement.
    commits: u64,
}

impl AuditLog {
    /// Writes to `store`; the first failure is handed to `on_failure` (later ones are only
    /// logged: a log that cannot be written would otherwise repeat itself at every call).
    pub fn new(store: Arc<Mutex<Store>>, on_failure: AuditFailureHook) -> AuditLog {
        AuditLog {
            store,
            on_failure,
            warned: AtomicBool::new(false),
            queue: Mutex::new(Queue::default()),
            committed: Condvar::new(),
        }
    }

    /// Writes one row; a failure is reported, never raised: a call's result does not
    /// depend on its row.
    pub fn write(&self, attempt: &Attempt) {
        self.write_entry(&attempt.entry());
    }

    /// Writes one row built elsewhere (the egress proxy's, [`crate::egress_audit`]); a
    /// failure is reported as [`write`](AuditLog::write) reports it. Returns once the row
    /// is committed (see [`AuditLog`]: group commit).
    pub fn write_entry(&self, entry: &AuditEntry) {
        let multi_threaded = tokio::runtime::Handle::try_current().is_ok_and(|handle| {
            handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
        });
        let written = if multi_threaded {
            tokio::task::block_in_place(|| self.commit(entry.clone()))
        } else {
            self.commit(entry.clone())
        };
        if let Err(source) = written {
            let error = AuditError {
                tool: entry.tool.clone(),
                source,
            };
            if self.warned.swap(true, Ordering::Relaxed) {
                tracing::debug!("{error}");
            } else {
                (self.on_failure)(&error);
            }
        }
    }

    /// Queues `entry` and returns once it is committed, leading a commit when none runs.
    fn commit(&self, entry: AuditEntry) -> Result<(), StoreError> {
        let mut queue = lock(&self.queue);
        let ticket = queue.next_ticket;
        queue.next_ticket += 1;
        queue.waiting.push((ticket, entry));
        loop {
            if let Some(result) = queue.done.remove(&ticket) {
                return result;
            }
            if queue.leading {
                queue = self
                    .committed
                    .wait(queue)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                continue;
            }
            // Lead: write every waiting row (this one among them, unless an earlier
            // leader took it) in one transaction.
            queue.leading = true;
            let batch = std::mem::take(&mut queue.waiting);
            drop(queue);
            let results = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let rows: Vec<&AuditEntry> = batch.iter().map(|(_, entry)| entry).collect();
                lock(&self.store).record_audits(&rows)
            }))
            .unwrap_or_else(|_| {
                // Whoever waits for these rows is told, rather than waiting for ever.
                Err(StoreError::Batch {
                    reason: "the audit writer panicked".into(),
                })
            });
            queue = lock(&self.queue);
            queue.leading = false;
            queue.commits += 1;
            match results {
                Ok(results) => {
                    for ((ticket, _), result) in batch.iter().zip(results) {
                        queue.done.insert(*ticket, result.map(|_| ()));
                    }
                }
                Err(error) => {
                    // The transaction failed: every row of it failed with this reason.
                    let reason = error.to_string();
                    let mut first = Some(error);
                    for (ticket, _) in &batch {
                        let error = first.take().unwrap_or_else(|| StoreError::Batch {
                            reason: reason.clone(),
                        });
                        queue.done.insert(*ticket, Err(error));
                    }
                }
            }
            self.committed.notify_all();
        }
    }

    /// Commits (transactions) made so far.
    pub fn commits(&self) -> u64 {
        lock(&self.queue).commits
    }
}

/// The default failure hook: a warning in the log.
pub fn warn_on_failure() -> AuditFailureHook {
    Arc::new(|error: &AuditError| tracing::warn!("{error}"))
}

/// Locks `mutex`, taking over a poisoned one (its data is a store handle, still usable).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Now, in milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// An attempt that is written exactly once: when [`finish`](Recorder::finish)ed, or, if
/// dropped before, as it stands (`unsent` or cut short).
pub(crate) struct Recorder {
    attempt: Option<Attempt>,
    log: Option<Arc<AuditLog>>,
    /// Written into the row of an attempt dropped after it was sent.
    pub(crate) cancelled: &'static str,
}

impl Recorder {
    pub(crate) fn new(attempt: Attempt, log: Option<Arc<AuditLog>>) -> Recorder {
        Recorder {
            attempt: Some(attempt),
            log,
            cancelled: "interrupted",
        }
    }

    pub(crate) fn attempt(&mut self) -> Option<&mut Attempt> {
        self.attempt.as_mut()
    }

    pub(crate) fn attempt_ref(&self) -> Option<&Attempt> {
        self.attempt.as_ref()
    }

    /// Whether the row is written anywhere (worth measuring what goes in it).
    pub(crate) fn audited(&self) -> bool {
        self.log.is_some()
    }

    /// Writes the row now.
    pub(crate) fn finish(mut self) {
        self.write();
    }

    fn write(&mut self) {
        if let (Some(attempt), Some(log)) = (self.attempt.take(), self.log.as_ref()) {
            log.write(&attempt);
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Some(attempt) = self.attempt.as_mut() {
            if attempt.executed {
                attempt.outcome = Outcome::Failed;
                attempt
                    .error
                    .get_or_insert_with(|| self.cancelled.to_owned());
            } else {
                attempt.unsent();
                if attempt.outcome == Outcome::Failed {
                    attempt
                        .error
                        .get_or_insert_with(|| self.cancelled.to_owned());
                }
            }
        }
        self.write();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use warden_store::AuditFilter;

    fn entry(tool: &str) -> AuditEntry {
        AuditEntry {
            time_ms: now_ms(),
            front_end: "serve".into(),
            client: None,
            server: "s".into(),
            tool: tool.into(),
            arguments: json!({}),
            decision: Some("allow".into()),
            reasons: json!([]),
            approved_by: Some("policy".into()),
            executed: true,
            outcome: "ok".into(),
            error: None,
            latency_ms: Some(1),
            result_bytes: Some(1),
        }
    }

    /// The tools of every row a fresh connection to `path` reads (committed rows only).
    fn committed(path: &std::path::Path) -> Vec<String> {
        Store::open(path)
            .unwrap()
            .audit(&AuditFilter::default(), 1000)
            .unwrap()
            .into_iter()
            .map(|row| row.entry.tool)
            .collect()
    }

    /// Group commit: rows written while a commit runs share the next one, and each writer
    /// returns only once its own row is committed (a fresh connection reads it), each row
    /// exactly once. Here the store is held while eight writers arrive: the first leads a
    /// commit of its own row and waits for the store, the seven others queue behind it and
    /// are committed together. The control: writers one after another get one commit each.
    #[test]
    fn concurrent_rows_share_a_commit_and_each_is_durable_on_return() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let store = Arc::new(Mutex::new(Store::open(&path).unwrap()));
        let log = Arc::new(AuditLog::new(Arc::clone(&store), warn_on_failure()));
        for n in 0..3 {
            log.write_entry(&entry(&format!("alone-{n}")));
            assert_eq!(log.commits(), n + 1);
            assert_eq!(committed(&path).len(), usize::try_from(n + 1).unwrap());
        }
        let held = lock(&store);
        let writers: Vec<_> = (0..8)
            .map(|n| {
                let log = Arc::clone(&log);
                let path = path.clone();
                std::thread::spawn(move || {
                    let tool = format!("together-{n}");
                    log.write_entry(&entry(&tool));
                    committed(&path).contains(&tool)
                })
            })
            .collect();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while lock(&log.queue).waiting.len() < 7 {
            assert!(std::time::Instant::now() < deadline, "writers never queued");
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(held);
        for writer in writers {
            assert!(
                writer.join().unwrap(),
                "returned before its row was committed"
            );
        }
        assert_eq!(
            log.commits(),
            3 + 2,
            "the seven queued rows share one commit"
        );
        let mut tools = committed(&path);
        assert_eq!(tools.len(), 11);
        tools.sort();
        tools.dedup();
        assert_eq!(tools.len(), 11, "a row written twice");
    }
}
