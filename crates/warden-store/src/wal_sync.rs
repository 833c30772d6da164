//! The audit log's disk sync, after the commit instead of inside it (decision 0050).
//!
//! An audit row is committed before its call's answer is sent: once
//! [`Store::record_audits`](crate::Store::record_audits) returns, the row is in the WAL,
//! visible to every reader and kept if Warden crashes or is killed. What waits is only
//! the `fsync` that also keeps it through a crash of the machine: [`WalSyncer`] syncs the
//! WAL file within [`SYNC_WINDOW`] of a commit, on its own thread, one sync for every
//! commit of that window, and once more when the store is dropped. A call therefore no
//! longer waits for the disk (about a millisecond on the machines measured, more than
//! the rest of a gateway's work on a call), and a power loss costs at most the rows of the
//! last window, never a torn database (SQLite's WAL checksums frames at commit).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The longest a committed audit row waits for its disk sync.
pub const SYNC_WINDOW: Duration = Duration::from_millis(100);

/// The longest dropping the store waits for the last sync (a hung disk must not hang
/// Warden's exit; the rows are committed either way).
pub const FINAL_SYNC_WAIT: Duration = Duration::from_secs(10);

/// The thread that syncs the WAL after audit commits.
///
/// The thread is woken once per window, not once per commit: the first commit after a
/// sync sets `pending` and wakes it; commits while `pending` is set are covered by the
/// sync already due and wake nothing (a wake-up is a thread switch, which cost more than
/// the rest of a gateway's audit write when it happened at every call).
#[derive(Debug)]
pub(crate) struct WalSyncer {
    /// One slot, sent to only by the commit that sets `pending`.
    due: Option<SyncSender<()>>,
    /// A sync is due and the thread knows it: set by the commit that wakes the thread,
    /// cleared by the thread just before it syncs.
    pending: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Disconnected when the thread has ended: what the drop waits for, by a deadline.
    ended: mpsc::Receiver<()>,
    syncs: Arc<AtomicU64>,
}

impl WalSyncer {
    /// Starts the thread for the database at `database` (its WAL is `<database>-wal`).
    pub(crate) fn start(database: &Path) -> std::io::Result<WalSyncer> {
        let wal = wal_path(database);
        let (due, waiting) = mpsc::sync_channel(1);
        let syncs = Arc::new(AtomicU64::new(0));
        let counted = syncs.clone();
        let pending = Arc::new(AtomicBool::new(false));
        let cleared = pending.clone();
        let (ending, ended) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("warden-wal-sync".into())
            .spawn(move || {
                run(&wal, &waiting, &cleared, &counted);
                drop(ending);
            })?;
        Ok(WalSyncer {
            due: Some(due),
            pending,
            thread: Some(thread),
            ended,
            syncs,
        })
    }

    /// Asks for a sync after a commit that has just returned.
    pub(crate) fn committed(&self) {
        // Already due: the sync the thread is waiting to make starts after this commit
        // returned (it clears `pending` first, then syncs).
        if self.pending.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(due) = &self.due {
            match due.try_send(()) {
                // Full: a sync is already due and starts after this commit.
                Ok(()) | Err(TrySendError::Full(())) => {}
                Err(TrySendError::Disconnected(())) => {
                    tracing::warn!("the audit log's disk sync thread has stopped");
                }
            }
        }
    }

    /// Syncs made so far (for tests).
    pub(crate) fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }
}

impl Drop for WalSyncer {
    /// Syncs what is still due and waits for it (at most [`FINAL_SYNC_WAIT`]), so a store
    /// dropped at exit leaves every audit row on disk.
    fn drop(&mut self) {
        drop(self.due.take());
        match self.ended.recv_timeout(FINAL_SYNC_WAIT) {
            Err(RecvTimeoutError::Timeout) => tracing::warn!(
                "the audit log's last disk sync did not finish within {} s; its rows are \
                 committed, not yet synced",
                FINAL_SYNC_WAIT.as_secs()
            ),
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                if let Some(thread) = self.thread.take() {
                    let _ = thread.join();
                }
            }
        }
    }
}

fn wal_path(database: &Path) -> PathBuf {
    let mut wal = database.as_os_str().to_owned();
    wal.push("-wal");
    PathBuf::from(wal)
}

/// Waits for a commit, lets the window's other commits join it, syncs; until the store
/// is dropped, then syncs what is due one last time.
fn run(wal: &Path, due: &mpsc::Receiver<()>, pending: &AtomicBool, syncs: &AtomicU64) {
    while due.recv().is_ok() {
        let deadline = Instant::now() + SYNC_WINDOW;
        let mut closing = false;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match due.recv_timeout(left) {
                // Nothing is sent while `pending` is set; kept for robustness.
                Ok(()) => continue,
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => {
                    closing = true;
                    break;
                }
            }
        }
        // Commits from here on ask for the next sync; those before are in this one.
        pending.store(false, Ordering::SeqCst);
        sync(wal);
        syncs.fetch_add(1, Ordering::Relaxed);
        if closing {
            return;
        }
    }
}

/// `fdatasync` of the WAL: any descriptor of the file flushes its pages. No WAL file means
/// its frames were checkpointed into the database, which SQLite synced when it did so.
fn sync(wal: &Path) {
    match std::fs::File::open(wal) {
        Ok(file) => {
            if let Err(error) = file.sync_data() {
                tracing::warn!("syncing the audit log to disk ({}): {error}", wal.display());
            }
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            tracing::warn!("opening {} to sync the audit log: {error}", wal.display());
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_commit_due_when_the_store_is_dropped_is_synced_before_the_drop_returns() {
        let dir = tempfile::tempdir().unwrap();
        let database = dir.path().join("state.db");
        std::fs::write(wal_path(&database), b"frames").unwrap();
        let syncer = WalSyncer::start(&database).unwrap();
        let syncs = syncer.syncs.clone();
        syncer.committed();
        drop(syncer);
        assert_eq!(syncs.load(Ordering::Relaxed), 1, "synced at drop, not lost");
    }

    fn until_synced(syncs: &AtomicU64, count: u64) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while syncs.load(Ordering::SeqCst) < count {
            assert!(
                Instant::now() < deadline,
                "no sync number {count} within 30 s"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_window_of_commits_is_one_sync_and_a_commit_after_it_gets_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let database = dir.path().join("state.db");
        std::fs::write(wal_path(&database), b"frames").unwrap();
        let syncer = WalSyncer::start(&database).unwrap();
        let syncs = syncer.syncs.clone();
        for _ in 0..100 {
            syncer.committed();
        }
        until_synced(&syncs, 1);
        assert!(
            !syncer.pending.load(Ordering::SeqCst),
            "nothing due once the window's commits are synced"
        );
        // A commit after the sync is not covered by it: it gets a sync of its own.
        syncer.committed();
        until_synced(&syncs, 2);
        drop(syncer);
        assert_eq!(syncs.load(Ordering::SeqCst), 2, "nothing left due at drop");
    }

    #[test]
    fn without_a_commit_nothing_is_synced() {
        let dir = tempfile::tempdir().unwrap();
        let syncer = WalSyncer::start(&dir.path().join("state.db")).unwrap();
        let syncs = syncer.syncs.clone();
        drop(syncer);
        assert_eq!(syncs.load(Ordering::Relaxed), 0);
    }
}
