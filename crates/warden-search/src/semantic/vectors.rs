//! Tool vectors from the whole encoder, computed once per definition and kept on disk
//! (decision 0044).
//!
//! The static table (decision 0025) embeds a text as a sum of context-free token vectors:
//! cheap enough for every request, but a long tool description becomes an average in
//! which its subject is diluted. Running the whole encoder on a request costs tens of
//! milliseconds on a small machine, over the search's 5 ms budget; running it on a tool's
//! definition costs the same, but only once per definition, and a definition changes far
//! less often than requests come. So tools get the encoder's vector (mean-pooled and
//! unit length, [`super::ContextualEncoder`]) and requests keep the static table's; the
//! two are compared after each side's catalogue mean is taken out ([`super::SemanticIndex`]).
//!
//! Encoding a definition takes about 50-100 ms of one core, so it is never done while a
//! search waits: an index uses the encoder's vectors only when every tool already has
//! one (in memory or on disk), and the static table's otherwise. Missing vectors are
//! computed by [`super::EmbeddingCache::encode`] (tests, evaluations) or, for the
//! process-wide cache, by one background thread ([`super::EmbeddingCache::background`]),
//! so a later index of the same catalogue uses them.
//!
//! On disk: one file per definition in `tool-vectors-v1-<first 16 hex of the weights'
//! digest>/` in the model directory, named by the SHA-256 of the embedded text, holding
//! the vector's `dim` little-endian `f32`s; written through a temporary file and a rename,
//! so a reader never sees half of one. A file of another size, or whose values are not a
//! unit vector, is ignored (and rewritten). Like the distilled table, the vectors are
//! derived from digest-checked weights and carry the trust of the directory they are in
//! (docs/security.md).
//!
//! **Pruning** (decision 0047). The store is shared by every catalogue on the machine, and
//! no process knows every configuration, so "no longer in any catalogue" is read as "not
//! used by any index for [`UNUSED_FOR`]": a file read by an index has its modification
//! time set to now when it is older than [`TOUCH_AFTER`] (at most one write per file a
//! day), and [`prune_store`] removes the files untouched for longer, leftover temporary
//! files, and the least recently used past [`STORE_CAP`] files. It runs at most once per
//! process, after the process stored new vectors (a catalogue changed), and reads at most
//! [`PRUNE_SCAN_CAP`] directory entries.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

use super::model::Model;
use super::model::hex;

/// The directory of encoder tool vectors in the model directory: this prefix and the
/// first 16 hex digits of the weights' SHA-256.
pub const TOOL_VECTORS_PREFIX: &str = "tool-vectors-v1-";

/// A stored vector no index has read for this long is removed by [`prune_store`].
pub const UNUSED_FOR: Duration = Duration::from_secs(30 * 24 * 3600);

/// A stored vector read by an index has its modification time set to now when it is
/// older than this (so a catalogue in use keeps its vectors, at one write per file a day).
pub const TOUCH_AFTER: Duration = Duration::from_secs(24 * 3600);

/// The most vector files the store keeps (about 150 MiB at 384 dimensions); past this the
/// least recently used go first.
pub const STORE_CAP: usize = 100_000;

/// The most directory entries one [`prune_store`] reads.
pub const PRUNE_SCAN_CAP: usize = 4 * STORE_CAP;

/// A temporary file older than this was left by a process that died while writing.
const TEMP_STALE_AFTER: Duration = Duration::from_secs(3600);

/// The key of `text`'s encoder vector under `model`: SHA-256 of the weights' digest, a
/// separator, and the text.
pub(crate) fn key(model: &Model, text: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(model.weights_sha256().as_bytes());
    hasher.update(b"\0encoder\0");
    hasher.update(text.as_bytes());
    hasher.finalize().into()
}

/// Where `model`'s encoder tool vectors are kept.
pub(crate) fn store_dir(model: &Model) -> PathBuf {
    let digest = model.weights_sha256();
    model.dir().join(format!(
        "{TOOL_VECTORS_PREFIX}{}",
        &digest[..16.min(digest.len())]
    ))
}

fn file(dir: &Path, key: &[u8; 32]) -> PathBuf {
    dir.join(format!("{}.f32", hex(key)))
}

/// The vector stored for `key`, if there is one of `dim` values that is a unit vector.
/// A file older than [`TOUCH_AFTER`] is marked as used (best effort).
pub(crate) fn read(dir: &Path, key: &[u8; 32], dim: usize) -> Option<Arc<[f32]>> {
    use std::io::Read;
    let mut bytes = Vec::with_capacity(dim * 4);
    let file = std::fs::File::open(file(dir, key)).ok()?;
    (&file)
        .take(dim as u64 * 4 + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() != dim * 4 {
        return None;
    }
    let vector: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let norm2: f32 = vector.iter().map(|x| x * x).sum();
    if !(vector.iter().all(|x| x.is_finite()) && (norm2 - 1.0).abs() < 1e-3) {
        return None;
    }
    let now = SystemTime::now();
    let stale = file
        .metadata()
        .and_then(|m| m.modified())
        .is_ok_and(|at| now.duration_since(at).is_ok_and(|age| age > TOUCH_AFTER));
    if stale {
        let _ = file.set_modified(now);
    }
    Some(Arc::from(vector))
}

/// What [`prune_store`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pruned {
    /// Vector files kept.
    pub kept: usize,
    /// Vector files removed (unused for [`UNUSED_FOR`], or past [`STORE_CAP`]).
    pub removed: usize,
    /// Leftover temporary files removed.
    pub temporary: usize,
}

/// Removes from the vector store `dir` the vectors no index has read for [`UNUSED_FOR`],
/// temporary files left by a process that died while writing, and, past [`STORE_CAP`]
/// files, the least recently used; reads at most [`PRUNE_SCAN_CAP`] entries. Best effort:
/// what cannot be read or removed is left.
pub fn prune_store(dir: &Path) -> Pruned {
    let mut pruned = Pruned::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return pruned;
    };
    let now = SystemTime::now();
    let age = |at: SystemTime| now.duration_since(at).unwrap_or_default();
    let mut live: Vec<(SystemTime, PathBuf)> = Vec::new();
    for entry in entries.take(PRUNE_SCAN_CAP).flatten() {
        let path = entry.path();
        let Ok(modified) = entry.metadata().and_then(|m| m.modified()) else {
            continue;
        };
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".f32") {
            if age(modified) > UNUSED_FOR {
                if std::fs::remove_file(&path).is_ok() {
                    pruned.removed += 1;
                }
            } else {
                live.push((modified, path));
            }
        } else if name.contains(".tmp")
            && age(modified) > TEMP_STALE_AFTER
            && std::fs::remove_file(&path).is_ok()
        {
            pruned.temporary += 1;
        }
    }
    if live.len() > STORE_CAP {
        let extra = live.len() - STORE_CAP;
        live.select_nth_unstable_by(extra - 1, |a, b| a.0.cmp(&b.0));
        for (_, path) in live.drain(..extra) {
            if std::fs::remove_file(&path).is_ok() {
                pruned.removed += 1;
            }
        }
    }
    pruned.kept = live.len();
    pruned
}

/// [`prune_store`] of `dir`, the first time this process asks.
pub(crate) fn prune_once(dir: &Path) {
    static PRUNED: AtomicBool = AtomicBool::new(false);
    if !PRUNED.swap(true, Ordering::Relaxed) {
        let _ = prune_store(dir);
    }
}

/// Stores `vector` for `key`; best effort (a read-only directory only means encoding
/// again in a later process).
pub(crate) fn write(dir: &Path, key: &[u8; 32], vector: &[f32]) {
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let path = file(dir, key);
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
    if std::fs::write(&tmp, bytes).is_err() || std::fs::rename(&tmp, &path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}
