//! Bounded starts: at most N servers start at once, the others wait their turn in order.
//!
//! Starting a local server costs CPU (an interpreter loading its modules: 1-1.5 CPU-seconds
//! for a typical Python or Node server). Started all at once on a small machine, a hundred
//! of them share the cores, every one is slow, and every one misses its connect timeout.
//! The [`StartGate`] lets `N` starts run at once (by default the machine's available
//! parallelism; `[host] max_parallel_starts`); a start holds its turn from before its
//! approval is checked until its first tool list is read (or it failed), and the wait for
//! a turn is not charged to its connect timeout, which begins when it is spawned. The
//! queue is fair: turns are given in the order they were asked for (tokio's semaphore is
//! first in, first out).
//!
//! A front end may watch the queue ([`StartGate::on_progress`]): every change of a server's
//! state ("queued", "starting", "connected", "failed") is reported with the counts.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use serde::Serialize;
use tokio::sync::{Semaphore, SemaphorePermit};

/// Where one server is in its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StartState {
    /// Waiting for a turn.
    Queued,
    /// Its turn: being checked, spawned, and asked for its tools.
    Starting,
    /// Started; its tools are read.
    Connected,
    /// Did not start (the reason is in its status).
    Failed,
}

/// The queue's counts after a change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StartCounts {
    /// Waiting for a turn.
    pub queued: usize,
    /// Starting now (at most the limit).
    pub starting: usize,
    /// Connected since the gate was made.
    pub connected: usize,
    /// Failed since the gate was made.
    pub failed: usize,
}

/// What a progress hook is told: which server changed to which state, and the counts.
pub type ProgressHook = Arc<dyn Fn(&str, StartState, StartCounts) + Send + Sync>;

/// The default limit: the machine's available parallelism (its cores, or the CPU quota).
pub fn default_parallel_starts() -> usize {
    std::thread::available_parallelism().map_or(1, NonZeroUsize::get)
}

/// The turns of server starts (see the module documentation).
pub struct StartGate {
    permits: Semaphore,
    limit: usize,
    queued: AtomicUsize,
    starting: AtomicUsize,
    connected: AtomicUsize,
    failed: AtomicUsize,
    progress: OnceLock<ProgressHook>,
}

impl std::fmt::Debug for StartGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartGate")
            .field("limit", &self.limit)
            .field("counts", &self.counts())
            .finish()
    }
}

impl StartGate {
    /// A gate letting `limit` starts run at once (at least 1).
    pub fn new(limit: usize) -> StartGate {
        let limit = limit.clamp(1, Semaphore::MAX_PERMITS);
        StartGate {
            permits: Semaphore::new(limit),
            limit,
            queued: AtomicUsize::new(0),
            starting: AtomicUsize::new(0),
            connected: AtomicUsize::new(0),
            failed: AtomicUsize::new(0),
            progress: OnceLock::new(),
        }
    }

    /// How many starts may run at once.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Calls `hook` at every change of a server's state; only the first hook set counts.
    pub fn on_progress(&self, hook: ProgressHook) {
        let _ = self.progress.set(hook);
    }

    /// The counts now.
    pub fn counts(&self) -> StartCounts {
        StartCounts {
            queued: self.queued.load(Ordering::Relaxed),
            starting: self.starting.load(Ordering::Relaxed),
            connected: self.connected.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
        }
    }

    fn report(&self, server: &str, state: StartState) {
        tracing::debug!(server, ?state, "start");
        if let Some(hook) = self.progress.get() {
            hook(server, state, self.counts());
        }
    }

    /// Waits for `server`'s turn (first in, first out); the turn lasts until the returned
    /// [`Turn`] is finished or dropped.
    pub async fn turn(&self, server: &str) -> Turn<'_> {
        self.queued.fetch_add(1, Ordering::Relaxed);
        self.report(server, StartState::Queued);
        // The semaphore is never closed, so acquiring only fails if it were; a start then
        // runs without a turn rather than not at all.
        let permit = self.permits.acquire().await.ok();
        self.queued.fetch_sub(1, Ordering::Relaxed);
        self.starting.fetch_add(1, Ordering::Relaxed);
        self.report(server, StartState::Starting);
        Turn {
            gate: self,
            server: server.to_owned(),
            permit,
            done: false,
        }
    }
}

/// One server's turn to start; ends with [`Turn::finish`] (or, if dropped, as failed).
pub struct Turn<'a> {
    gate: &'a StartGate,
    server: String,
    permit: Option<SemaphorePermit<'a>>,
    done: bool,
}

impl Turn<'_> {
    /// Ends the turn: the server connected (`true`) or failed.
    pub fn finish(mut self, connected: bool) {
        self.end(connected);
    }

    fn end(&mut self, connected: bool) {
        if self.done {
            return;
        }
        self.done = true;
        // Counted out before the turn is given on, so `starting` never exceeds the limit.
        self.gate.starting.fetch_sub(1, Ordering::Relaxed);
        self.permit.take();
        let (counter, state) = if connected {
            (&self.gate.connected, StartState::Connected)
        } else {
            (&self.gate.failed, StartState::Failed)
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.gate.report(&self.server, state);
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.end(false);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::Mutex;
    use std::time::Duration;

    #[test]
    fn the_default_is_at_least_one() {
        assert!(default_parallel_starts() >= 1);
        assert_eq!(StartGate::new(0).limit(), 1);
    }

    /// At most `limit` turns at once, given in the order asked for, and every state change
    /// reported with the counts.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn turns_are_bounded_and_given_in_order() {
        let gate = Arc::new(StartGate::new(2));
        let events = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&events);
        gate.on_progress(Arc::new(move |server, state, counts| {
            seen.lock()
                .unwrap()
                .push((server.to_owned(), state, counts));
        }));
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..6 {
            let (gate, order) = (Arc::clone(&gate), Arc::clone(&order));
            tasks.push(tokio::spawn(async move {
                let turn = gate.turn(&format!("s{i}")).await;
                order.lock().unwrap().push(i);
                assert!(gate.counts().starting <= 2);
                tokio::time::sleep(Duration::from_millis(20)).await;
                turn.finish(i != 3);
            }));
            // Each asks after the one before, so the queue's order is known.
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4, 5]);
        let events = events.lock().unwrap();
        assert!(events.iter().all(|(_, _, counts)| counts.starting <= 2));
        assert!(
            events
                .iter()
                .any(|(server, state, _)| server == "s5" && *state == StartState::Queued)
        );
        assert_eq!(
            gate.counts(),
            StartCounts {
                queued: 0,
                starting: 0,
                connected: 5,
                failed: 1
            }
        );
    }
}
