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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The longest a committed audit row waits for its disk sync.
pub const SYNC_WINDOW: Duration = Duration::from_millis(100);

/// The longest dropping the store waits for the last sync (a hung disk must not hang
/// Warden's exit; the rows are committed either way).
pub const FINAL_SYNC_WAIT: Duration = Duration::from_secs(10);

/// The thread that syncs the WAL after audit commits.
#[derive(Debug)]
pub(crate) struct WalSyncer {
    /// One slot: a commit that finds it full is covered by the sync already due.
    due: Option<SyncSender<()>>,
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
        let (ending, ended) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("warden-wal-sync".into())
            .spawn(move || {
                run(&wal, &waiting, &counted);
                drop(ending);
            })?;
        Ok(WalSyncer {
            due: Some(due),
            thread: Some(thread),
            ended,
            syncs,
        })
    }

    /// Asks for a sync after a commit that has just returned.
    pub(crate) fn committed(&self) {
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
fn run(wal: &Path, due: &mpsc::Receiver<()>, syncs: &AtomicU64) {
    while due.recv().is_ok() {
        let deadline = Instant::now() + SYNC_WINDOW;
        let mut closing = false;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match due.recv_timeout(left) {
                Ok(()) => continue,
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => {
                    closing = true;
                    break;
                }
            }
        }
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

    #[test]
    fn without_a_commit_nothing_is_synced() {
        let dir = tempfile::tempdir().unwrap();
        let syncer = WalSyncer::start(&dir.path().join("state.db")).unwrap();
        let syncs = syncer.syncs.clone();
        drop(syncer);
        assert_eq!(syncs.load(Ordering::Relaxed), 0);
    }
}
