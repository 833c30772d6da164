//! The search the host uses: BM25F alone, or BM25F and the semantic model together.
//!
//! A tool's vector is that of its own text (name, title, description, parameter names),
//! blended with its server's instructions ([`INSTRUCTIONS_WEIGHT`]) when it has them.
//! With a model, each tool gets two scores for a query: its BM25F score `l` (0 when it
//! shares no term with the query) and its cosine `c` with the query's vector. Their scales
//! differ and change from query to query, so each is put on a common scale first:
//!
//! ```text
//! l' = l / max(l)                              (0 ≤ l' ≤ 1; the best word match gets 1)
//! c' = max(0, (c − mean(c)) / (max(c) − mean(c)))  (the nearest tool gets 1, a tool no
//!                                               nearer than the average tool gets 0)
//! score = LEXICAL_WEIGHT · l' + (1 − LEXICAL_WEIGHT) · c'
//! ```
//!
//! maxima and the mean taken over every tool in the index; and `c' = 0` for a tool that
//! shares no word with the query (`l = 0`) and whose cosine is below
//! [`SEMANTIC_ONLY_MIN_COSINE`]. A tool with score 0 is not returned, so a request of
//! words no tool is near (`zebra quasar`) still finds nothing. The weight is 0.5, an even mix fixed before any measurement: neither signal
//! is trusted over the other (the numbers for other mixes and for reciprocal-rank fusion
//! are in `docs/benchmarks.md`, "Tool search"). When the query has no word the model
//! knows, or there is no model, the ranking is BM25F alone, exactly as
//! [`ToolIndex::search`] gives it.

#[cfg(feature = "semantic")]
use std::cmp::Ordering;
#[cfg(feature = "semantic")]
use std::sync::Arc;

#[cfg(feature = "semantic")]
use crate::document::INSTRUCTIONS_CHAR_CAP;
use crate::document::ToolDoc;
use crate::index::{Hit, ToolIndex};
#[cfg(feature = "semantic")]
use crate::index::{cut_chars, round4};
#[cfg(feature = "semantic")]
use crate::semantic::{EmbeddingCache, Model, SemanticIndex};

/// The weight of the normalised BM25F score in the hybrid score; the semantic score
/// gets the rest.
pub const LEXICAL_WEIGHT: f64 = 0.5;

/// How much of a tool's vector comes from its server's instructions: the tool's own text
/// counts twice as much as what its server says about all of its tools.
pub const INSTRUCTIONS_WEIGHT: f32 = 0.5;

/// The least cosine at which a tool that shares no word with the query is found by
/// meaning alone. It is a guard against noise, not a relevance bar: a request of words
/// that mean nothing to any tool (`zebra quasar`) stays below it and finds nothing, while
/// a real request in other words usually clears it (relevant pairs of the evaluation set:
/// median 0.44; unrelated pairs: median 0.29, so ranking, not this bar, separates them).
pub const SEMANTIC_ONLY_MIN_COSINE: f32 = 0.25;

/// Which scores rank the tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ranking {
    /// BM25F only.
    Lexical,
    /// Cosine similarity only (needs a model).
    Semantic,
    /// Both, mixed as the module docs describe (needs a model).
    Hybrid,
}

/// A tool index with the best ranking available: hybrid with a model, lexical without.
#[derive(Debug)]
pub struct SearchIndex {
    lexical: ToolIndex,
    #[cfg(feature = "semantic")]
    semantic: Option<SemanticIndex>,
}

impl SearchIndex {
    /// An index that ranks by words only.
    pub fn lexical(docs: Vec<ToolDoc>) -> SearchIndex {
        SearchIndex {
            lexical: ToolIndex::build(docs),
            #[cfg(feature = "semantic")]
            semantic: None,
        }
    }

    /// An index that ranks by words and meaning; tool vectors come from `cache` when it has
    /// them and are added to it when not.
    #[cfg(feature = "semantic")]
    pub fn with_model(
        docs: Vec<ToolDoc>,
        model: Arc<Model>,
        cache: &EmbeddingCache,
    ) -> SearchIndex {
        let vectors: Vec<Option<Arc<[f32]>>> = docs
            .iter()
            .map(|doc| {
                let own = cache.embed(&model, &doc.embedding_text());
                let server = doc
                    .instructions
                    .as_deref()
                    .map(|text| cut_chars(text, INSTRUCTIONS_CHAR_CAP))
                    .and_then(|text| cache.embed(&model, text));
                match (own, server) {
                    (Some(own), Some(server)) => Some(blend(&own, &server)),
                    (own, _) => own,
                }
            })
            .collect();
        SearchIndex {
            lexical: ToolIndex::build(docs),
            semantic: Some(SemanticIndex::new(model, &vectors)),
        }
    }

    /// The ranking [`SearchIndex::search`] uses.
    pub fn ranking(&self) -> Ranking {
        #[cfg(feature = "semantic")]
        if self.semantic.is_some() {
            return Ranking::Hybrid;
        }
        Ranking::Lexical
    }

    /// The number of tools indexed.
    pub fn len(&self) -> usize {
        self.lexical.len()
    }

    /// Whether no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.lexical.is_empty()
    }

    /// The best `limit` tools for `query` by [`SearchIndex::ranking`], best first; equal
    /// (rounded) scores by qualified name.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Hit> {
        self.search_by(query, limit, self.ranking())
    }

    /// The best `limit` tools for `query` by `ranking`. A ranking that needs the model
    /// falls back to [`Ranking::Lexical`] when there is none or the query has no word it
    /// knows.
    pub fn search_by(&self, query: &str, limit: usize, ranking: Ranking) -> Vec<Hit> {
        if ranking == Ranking::Lexical || limit == 0 {
            return self.lexical.search(query, limit);
        }
        #[cfg(feature = "semantic")]
        if let Some(semantic) = &self.semantic
            && let Some(cosines) =
                semantic.scores(crate::index::cut_chars(query, crate::QUERY_CHAR_CAP))
        {
            let scores = mix(&self.lexical.scores(query), &cosines, ranking);
            return self.top(scores, limit);
        }
        self.lexical.search(query, limit)
    }

    #[cfg(feature = "semantic")]
    fn top(&self, scores: Vec<(u32, f64)>, limit: usize) -> Vec<Hit> {
        let mut ranked: Vec<(f64, u32)> = scores
            .into_iter()
            .map(|(doc, score)| (round4(score), doc))
            .filter(|(score, _)| *score > 0.0)
            .collect();
        let order = |a: &(f64, u32), b: &(f64, u32)| -> Ordering {
            b.0.total_cmp(&a.0)
                .then_with(|| self.lexical.qualified(a.1).cmp(self.lexical.qualified(b.1)))
                .then(a.1.cmp(&b.1))
        };
        if ranked.len() > limit {
            ranked.select_nth_unstable_by(limit - 1, order);
            ranked.truncate(limit);
        }
        ranked.sort_unstable_by(order);
        ranked
            .into_iter()
            .map(|(score, doc)| self.lexical.hit(doc, score))
            .collect()
    }
}

/// A tool's vector with its server's instructions mixed in:
/// `normalise(tool + INSTRUCTIONS_WEIGHT · instructions)`, both unit vectors.
#[cfg(feature = "semantic")]
fn blend(own: &[f32], server: &[f32]) -> Arc<[f32]> {
    let mut sum: Vec<f32> = own
        .iter()
        .zip(server)
        .map(|(a, b)| a + INSTRUCTIONS_WEIGHT * b)
        .collect();
    let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > f32::EPSILON {
        for x in &mut sum {
            *x /= norm;
        }
    }
    Arc::from(sum)
}

/// The per-tool scores of `ranking` from the BM25F scores of the tools that matched and
/// the cosines of all tools.
#[cfg(feature = "semantic")]
fn mix(lexical: &[(u32, f64)], cosines: &[f32], ranking: Ranking) -> Vec<(u32, f64)> {
    let n = cosines.len();
    let mean = cosines.iter().map(|&c| f64::from(c)).sum::<f64>() / n.max(1) as f64;
    let max = cosines
        .iter()
        .map(|&c| f64::from(c))
        .fold(f64::MIN, f64::max);
    let spread = max - mean;
    let semantic = |c: f32| -> f64 {
        if spread <= f64::EPSILON {
            0.0
        } else {
            ((f64::from(c) - mean) / spread).max(0.0)
        }
    };
    if ranking == Ranking::Semantic {
        return (0..n)
            .map(|doc| (doc as u32, semantic(cosines[doc])))
            .collect();
    }
    let top_lexical = lexical.iter().map(|(_, s)| *s).fold(0.0, f64::max);
    let mut words = vec![0f64; n];
    if top_lexical > 0.0 {
        for &(doc, score) in lexical {
            words[doc as usize] = score / top_lexical;
        }
    }
    (0..n)
        .map(|doc| {
            let c = cosines[doc];
            let meaning = if words[doc] == 0.0 && c < SEMANTIC_ONLY_MIN_COSINE {
                0.0
            } else {
                semantic(c)
            };
            let score = LEXICAL_WEIGHT * words[doc] + (1.0 - LEXICAL_WEIGHT) * meaning;
            (doc as u32, score)
        })
        .collect()
}
