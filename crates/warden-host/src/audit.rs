//! The audit log's one writer: every attempted tool call, from every front end, becomes
//! exactly one row, written here.
//!
//! A front end never builds a row itself: a [`Session`](crate::Session) starts an
//! [`Attempt`] when it prepares a call and finishes it when the call ends (sent, refused,
//! or dropped unsent), so the rows of `warden call`, the agent loop and the gateway carry
//! the same fields with the same meaning. An attempt that is dropped before it was
//! finished (the user pressed Ctrl-C, a turn timed out, a client went away) is written as
//! it stands when dropped, so no attempt goes unrecorded and none is recorded twice.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use warden_policy::{Decision, Reason, Verdict};
use warden_store::{AuditEntry, EncodedAudit, Store, StoreError};

/// What became of an attempted call: the `outcome` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Sent, and the server answered with a result.
    Ok,
    /// Sent, and the server answered with a result that reports an error.
    ToolError,
    /// Sent, and a 2026-07-28 server asked the client behind the call for input before it
    /// would answer; the client's retry with its answers is an attempt of its own.
    InputRequired,
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
            Outcome::InputRequired => "input_required",
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

/// A row that could not be written, or not known to be written by its deadline.
#[derive(Debug, thiserror::Error)]
#[error("the audit log did not record this call of `{tool}`: {source}")]
pub struct AuditError {
    /// The qualified tool name of the call.
    pub tool: String,
    /// Why.
    #[source]
    pub source: WriteError,
}

/// Why one row was not written, or not known to be by its writer's deadline.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The row could not be encoded, or the transaction that held it failed: it was not
    /// written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The state store stayed held by another task (or another row's commit) until this
    /// row's deadline: it was not written, and never will be.
    #[error(
        "the state store stayed busy for {} ms, the longest a call's row waits for it; \
         the row was not written",
        waited.as_millis()
    )]
    StoreHeld {
        /// How long the row waited.
        waited: Duration,
    },
    /// No commit took the row before its deadline (the one running was stuck on the
    /// disk or the database's lock): it was taken out of the queue and will never be
    /// written.
    #[error(
        "no commit took the row within {} ms (the commit before it did not end: the \
         state store's disk or lock is stuck); the row was withdrawn and will not be written",
        waited.as_millis()
    )]
    Withdrawn {
        /// How long the row waited.
        waited: Duration,
    },
    /// The row's commit was running at its deadline and had not ended: the row is
    /// written at most once, if that commit succeeds; the commit's end is logged, naming
    /// the row, when it comes.
    #[error(
        "the commit holding the row did not end within {} ms (the state store's disk or \
         lock is stuck); the row will be written at most once, when that commit ends, and \
         its outcome logged then",
        waited.as_millis()
    )]
    Unconfirmed {
        /// How long the row waited.
        waited: Duration,
    },
}

/// What a front end does when a row cannot be written (tell its user).
pub type AuditFailureHook = Arc<dyn Fn(&AuditError) + Send + Sync>;

/// How long one writer waits for its row to be committed, from when it queues it: longer
/// than the state store's busy timeout (5 s) twice over, since a row may wait for the
/// commit before its own and then its own, each of which may meet another process's write.
pub const COMMIT_DEADLINE: Duration = Duration::from_secs(15);

/// The audit writer one host shares among all its sessions.
///
/// **Group commit** (decision 0042). A row is durable (committed with
/// `synchronous = FULL`) before [`write`](AuditLog::write) returns, so before the call's
/// answer leaves; concurrent writers share one commit. Each writer encodes its own row
/// (redaction, JSON) before it queues it, so a commit holds the store only for SQL. The
/// first writer to find no commit running becomes the leader: it takes every row waiting
/// at that moment and writes them in one transaction (one sync); writers arriving
/// meanwhile wait for the next commit, which the next of them leads. Each row is in
/// exactly one transaction, so written at most once, and each writer returns once its own
/// row is committed or failed. On a multi-threaded runtime the wait is a
/// `block_in_place`, so the worker's other tasks (other clients' requests) move to
/// another thread while it waits, and their rows join the next commit. A row that meets
/// no wait at all (no commit running or queued, the store free, SQLite's write lock
/// free) is committed by its writer at once, without that hand-over (decision 0053).
///
/// **Every wait ends** by the writer's deadline ([`COMMIT_DEADLINE`] after it queued its
/// row), with an error that says what became of the row ([`WriteError`]):
/// - a row no commit took by then is withdrawn from the queue: never written;
/// - a leader that cannot take the store by its own deadline fails its commit: none of
///   its rows is written;
/// - a row inside a commit still running is *unconfirmed*: that commit writes it at most
///   once, and its end is logged naming the row (a stuck disk cannot be interrupted; the
///   SQL itself is bounded by the store's busy timeout, the sync by the disk).
///
/// A call's answer never depends on its row: the failure goes to the front end's hook.
pub struct AuditLog {
    store: Arc<Mutex<Store>>,
    on_failure: AuditFailureHook,
    warned: AtomicBool,
    queue: Mutex<Queue>,
    committed: Condvar,
    deadline: Duration,
}

/// Rows waiting for a commit, and the results of those committed.
#[derive(Default)]
struct Queue {
    /// Rows not yet taken by a leader, with their tickets. At most one per blocked
    /// writer thread.
    waiting: Vec<(u64, EncodedAudit)>,
    next_ticket: u64,
    /// Whether a leader is writing now.
    leading: bool,
    /// Results of rows written and not yet collected by their writers.
    done: HashMap<u64, Result<(), WriteError>>,
    /// Tickets in the running commit whose writers stopped waiting (unconfirmed): their
    /// outcome is logged when the commit ends, and not kept.
    abandoned: HashSet<u64>,
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
            deadline: COMMIT_DEADLINE,
        }
    }

    /// The same log with another deadline per row (tests).
    #[cfg(test)]
    fn with_deadline(mut self, deadline: Duration) -> AuditLog {
        self.deadline = deadline;
        self
    }

    /// Writes one row; a failure is reported, never raised: a call's result does not
    /// depend on its row.
    pub fn write(&self, attempt: &Attempt) {
        self.write_entry(&attempt.entry());
    }

    /// Writes one row built elsewhere (the egress proxy's, [`crate::egress_audit`]); a
    /// failure is reported as [`write`](AuditLog::write) reports it. Returns once the row
    /// is committed, failed, or its deadline passed (see [`AuditLog`]).
    pub fn write_entry(&self, entry: &AuditEntry) {
        if let Err(source) = self.write_row(entry) {
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

    /// Encodes `entry` (outside every lock) and commits it: at once where it runs when
    /// nothing stands in the way ([`commit_now`](AuditLog::commit_now)), else queued for
    /// the group commit, off the async worker on a multi-threaded runtime.
    fn write_row(&self, entry: &AuditEntry) -> Result<(), WriteError> {
        let row = EncodedAudit::new(entry)?;
        let multi_threaded = tokio::runtime::Handle::try_current().is_ok_and(|handle| {
            handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
        });
        if multi_threaded {
            if let Some(result) = self.commit_now(&row) {
                return result;
            }
            tokio::task::block_in_place(|| self.commit(row))
        } else {
            self.commit(row)
        }
    }

    /// Commits `row` alone, here and now, when that needs no wait: no commit running or
    /// queued, the store free, and SQLite's write lock free (not held by another
    /// process). A commit without its disk sync (decision 0050) takes tens of
    /// microseconds, less than `block_in_place`'s hand-over of the async worker to
    /// another thread, which every call paid before (decision 0053). `None`: not
    /// written, something stood in the way; the caller queues it ([`commit`](AuditLog::commit)).
    fn commit_now(&self, row: &EncodedAudit) -> Option<Result<(), WriteError>> {
        let mut queue = lock(&self.queue);
        if queue.leading || !queue.waiting.is_empty() {
            return None;
        }
        let Ok(mut store) = self.store.try_lock() else {
            return None;
        };
        // Writers arriving meanwhile queue behind this commit as behind any leader's.
        queue.leading = true;
        drop(queue);
        let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            store.try_record_audits(&[row])
        }));
        drop(store);
        let mut queue = lock(&self.queue);
        queue.leading = false;
        let result = match written {
            Ok(Ok(Some(_))) => Ok(()),
            Ok(Ok(None)) => {
                // Busy: nothing written; queued, it waits for the lock off the worker.
                self.committed.notify_all();
                return None;
            }
            Ok(Err(error)) => Err(WriteError::Store(error)),
            Err(_) => Err(WriteError::Store(StoreError::Batch {
                reason: "the audit writer panicked".into(),
            })),
        };
        queue.commits += 1;
        self.committed.notify_all();
        Some(result)
    }

    /// Queues `row` and returns once it is committed, failed, or its deadline passed,
    /// leading a commit when none runs.
    fn commit(&self, row: EncodedAudit) -> Result<(), WriteError> {
        let queued = Instant::now();
        let deadline = queued + self.deadline;
        let mut queue = lock(&self.queue);
        let ticket = queue.next_ticket;
        queue.next_ticket += 1;
        queue.waiting.push((ticket, row));
        loop {
            if let Some(result) = queue.done.remove(&ticket) {
                return result;
            }
            if queue.leading {
                let now = Instant::now();
                if now >= deadline {
                    return Err(Self::give_up(&mut queue, ticket, queued.elapsed()));
                }
                queue = self
                    .committed
                    .wait_timeout(queue, deadline - now)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
                continue;
            }
            // Lead: write every waiting row (this one among them, unless an earlier
            // leader took it) in one transaction.
            queue.leading = true;
            let batch = std::mem::take(&mut queue.waiting);
            drop(queue);
            let results = self.write_batch(&batch, deadline, queued);
            queue = lock(&self.queue);
            queue.leading = false;
            queue.commits += 1;
            let mut results = results.into_iter();
            for (ticket, row) in &batch {
                let result = results.next().unwrap_or_else(|| {
                    Err(WriteError::Store(StoreError::Batch {
                        reason: "the commit reported fewer rows than it was given".into(),
                    }))
                });
                if queue.abandoned.remove(ticket) {
                    // Its writer was told "unconfirmed": this is the outcome it was
                    // promised in the log.
                    match &result {
                        Ok(()) => tracing::warn!(
                            "the audit row of `{}` was committed after its writer stopped \
                             waiting (it is in the log once)",
                            row.tool()
                        ),
                        Err(error) => tracing::warn!(
                            "the audit row of `{}`, whose writer stopped waiting, was not \
                             written: {error}",
                            row.tool()
                        ),
                    }
                } else {
                    queue.done.insert(*ticket, result);
                }
            }
            self.committed.notify_all();
        }
    }

    /// A writer whose deadline passed while another leads: its row is withdrawn if no
    /// commit took it yet, else left to the running commit and marked abandoned.
    fn give_up(queue: &mut Queue, ticket: u64, waited: Duration) -> WriteError {
        if let Some(at) = queue
            .waiting
            .iter()
            .position(|(queued, _)| *queued == ticket)
        {
            queue.waiting.remove(at);
            WriteError::Withdrawn { waited }
        } else {
            queue.abandoned.insert(ticket);
            WriteError::Unconfirmed { waited }
        }
    }

    /// One transaction for `batch`, the store taken by the leader's `deadline`: each row's
    /// result, in order. A panic fails the rows rather than leaving their writers waiting.
    fn write_batch(
        &self,
        batch: &[(u64, EncodedAudit)],
        deadline: Instant,
        queued: Instant,
    ) -> Vec<Result<(), WriteError>> {
        let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let Some(mut store) = lock_by(&self.store, deadline) else {
                return Err(WriteError::StoreHeld {
                    waited: queued.elapsed(),
                });
            };
            let rows: Vec<&EncodedAudit> = batch.iter().map(|(_, row)| row).collect();
            store.record_audits(&rows).map_err(WriteError::Store)
        }))
        .unwrap_or_else(|_| {
            Err(WriteError::Store(StoreError::Batch {
                reason: "the audit writer panicked".into(),
            }))
        });
        match written {
            Ok(_) => batch.iter().map(|_| Ok(())).collect(),
            Err(error) => {
                // The transaction failed: every row of it failed with this reason.
                let reason = error.to_string();
                let mut first = Some(error);
                batch
                    .iter()
                    .map(|_| {
                        Err(first.take().unwrap_or_else(|| {
                            WriteError::Store(StoreError::Batch {
                                reason: reason.clone(),
                            })
                        }))
                    })
                    .collect()
            }
        }
    }

    /// Commits (transactions) made so far.
    pub fn commits(&self) -> u64 {
        lock(&self.queue).commits
    }
}

/// Locks `mutex` by `deadline`, or `None`: the store's lock has no timed wait, so a busy
/// lock is tried again after a pause that doubles from 50 µs to 5 ms.
fn lock_by<T>(mutex: &Mutex<T>, deadline: Instant) -> Option<MutexGuard<'_, T>> {
    let mut pause = Duration::from_micros(50);
    loop {
        match mutex.try_lock() {
            Ok(guard) => return Some(guard),
            Err(TryLockError::Poisoned(poisoned)) => return Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => {}
        }
        let left = deadline.checked_duration_since(Instant::now())?;
        if left.is_zero() {
            return None;
        }
        std::thread::sleep(pause.min(left));
        pause = (pause * 2).min(Duration::from_millis(5));
    }
}

/// The default failure hook: a warning in the log.
pub fn warn_on_failure() -> AuditFailureHook {
    Arc::new(|error: &AuditError| tracing::warn!("{error}"))
}

/// Locks `mutex`, taking over a poisoned one (its data is a store handle, still usable).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
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

    /// Another connection to `path` holding the database's write lock (as another Warden
    /// process writing would), until it is dropped.
    fn write_lock(path: &std::path::Path) -> rusqlite::Connection {
        let other = rusqlite::Connection::open(path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        other
    }

    fn row(tool: &str) -> EncodedAudit {
        EncodedAudit::new(&entry(tool)).unwrap()
    }

    /// On an async worker a row is committed where it is written when nothing stands in
    /// the way; when something does (the store held, another process's write lock), it
    /// is not written there, and the queued commit writes it once the way is clear. Each
    /// row once, each writer back only once its row is committed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_row_is_committed_at_once_when_free_and_queued_when_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let store = Arc::new(Mutex::new(Store::open(&path).unwrap()));
        let log = Arc::new(AuditLog::new(Arc::clone(&store), warn_on_failure()));
        // Free: committed at once, by the writer itself.
        assert!(log.commit_now(&row("free")).is_some());
        assert_eq!(committed(&path), ["free"]);
        // Another process holds the write lock: not written here, nothing waited for.
        let other = write_lock(&path);
        let started = Instant::now();
        assert!(log.commit_now(&row("busy")).is_none(), "written while busy");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "waited for the lock"
        );
        assert!(!lock(&log.queue).leading, "the way is left clear");
        // The store held in this process: not written here either.
        let held = lock(&store);
        assert!(log.commit_now(&row("held")).is_none());
        drop(held);
        // Through `write_entry` on a worker: queued behind the lock, committed once freed.
        let writer = tokio::spawn({
            let log = Arc::clone(&log);
            async move { log.write_entry(&entry("later")) }
        });
        until(&log, "the queued commit", |queue| queue.leading);
        drop(other);
        writer.await.unwrap();
        // Neither refused row was written.
        assert_eq!(committed(&path), ["free", "later"]);
        assert_eq!(log.commits(), 2);
    }

    /// Waits (at most 20 s) until `ready` holds of the queue.
    fn until(log: &AuditLog, what: &str, ready: impl Fn(&Queue) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !ready(&lock(&log.queue)) {
            assert!(Instant::now() < deadline, "{what} never happened");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// No follower waits for ever (house rule: every wait has a timeout). A commit stuck
    /// on the database (another process holds its write lock) keeps a row queued behind
    /// it past that row's deadline: its writer is told the row was withdrawn, and it is
    /// never written, not even when the stuck commit ends and the next one runs. The
    /// stuck commit's own row, and a row written afterwards, are written once each.
    #[test]
    fn a_row_no_commit_took_by_its_deadline_is_withdrawn_and_never_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let store = Arc::new(Mutex::new(Store::open(&path).unwrap()));
        let log = Arc::new(
            AuditLog::new(Arc::clone(&store), warn_on_failure())
                .with_deadline(Duration::from_secs(1)),
        );
        let other = write_lock(&path);
        let stuck = std::thread::spawn({
            let log = Arc::clone(&log);
            move || log.commit(row("stuck"))
        });
        until(&log, "the first commit", |queue| queue.leading);
        let started = Instant::now();
        let late = log.commit(row("queued"));
        let waited = started.elapsed();
        assert!(
            matches!(late, Err(WriteError::Withdrawn { .. })),
            "{late:?}"
        );
        assert!(waited < Duration::from_secs(4), "waited {waited:?}");
        assert!(
            late.unwrap_err()
                .to_string()
                .contains("will not be written"),
            "the error says what became of the row"
        );
        drop(other);
        stuck.join().unwrap().unwrap();
        log.commit(row("after")).unwrap();
        assert_eq!(committed(&path), ["stuck", "after"]);
        let queue = lock(&log.queue);
        assert!(queue.waiting.is_empty() && queue.done.is_empty() && queue.abandoned.is_empty());
    }

    /// A row already inside a commit that has not ended by its writer's deadline: the
    /// writer is told it is unconfirmed (written at most once, when that commit ends), and
    /// the commit does write it, once. Set up so: the store is held until the first
    /// leader gives up (its row fails as `StoreHeld`, never written); two rows queued
    /// meanwhile are then taken by one commit, which meets another process's write lock
    /// until past the follower's deadline.
    #[test]
    fn a_row_whose_commit_outlives_its_deadline_is_unconfirmed_then_written_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let store = Arc::new(Mutex::new(Store::open(&path).unwrap()));
        let log = Arc::new(
            AuditLog::new(Arc::clone(&store), warn_on_failure())
                .with_deadline(Duration::from_secs(2)),
        );
        let held = lock(&store);
        let other = write_lock(&path);
        let first = std::thread::spawn({
            let log = Arc::clone(&log);
            move || log.commit(row("held"))
        });
        until(&log, "the first commit", |queue| queue.leading);
        std::thread::sleep(Duration::from_secs(1));
        let (sender, results) = std::sync::mpsc::channel();
        for tool in ["one", "two"] {
            let log = Arc::clone(&log);
            let sender = sender.clone();
            std::thread::spawn(move || sender.send(log.commit(row(tool))).unwrap());
        }
        until(&log, "two rows queued", |queue| queue.waiting.len() == 2);
        let gave_up = first.join().unwrap();
        assert!(
            matches!(gave_up, Err(WriteError::StoreHeld { .. })),
            "{gave_up:?}"
        );
        drop(held);
        let follower = results.recv_timeout(Duration::from_secs(20)).unwrap();
        assert!(
            matches!(follower, Err(WriteError::Unconfirmed { .. })),
            "{follower:?}"
        );
        drop(other);
        let leader = results.recv_timeout(Duration::from_secs(20)).unwrap();
        assert!(leader.is_ok(), "{leader:?}");
        let mut tools = committed(&path);
        tools.sort();
        assert_eq!(tools, ["one", "two"], "each once; the held row never");
        let queue = lock(&log.queue);
        assert!(queue.waiting.is_empty() && queue.done.is_empty() && queue.abandoned.is_empty());
    }
}
