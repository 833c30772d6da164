//! The search the host uses: BM25F alone, or BM25F and the semantic model together, over
//! a request, its steps and the tools' servers.
//!
//! A tool's vector is that of its own text (name, title, description, parameter names),
//! blended with its server's instructions ([`INSTRUCTIONS_WEIGHT`]) when it has them.
//! With a model, each tool gets two scores for a text: its BM25F score `l` (0 when it
//! shares no term with the text) and its cosine `c` with the text's vector, taken after
//! the catalogue's mean vector is removed from both (so the direction every tool shares,
//! and with it the "hub" tools that are near every request, count for nothing; see
//! [`Tuning::centre`]). Their scales differ and change from text to text, so each is put
//! on a common scale first:
//!
//! ```text
//! l' = l / max(l)                              (0 ≤ l' ≤ 1; the best word match gets 1)
//! c' = max(0, (c − mean(c)) / (max(c) − mean(c)))  (the nearest tool gets 1, a tool no
//!                                               nearer than the average tool gets 0)
//! own = LEXICAL_WEIGHT · l' + (1 − LEXICAL_WEIGHT) · c'
//! ```
//!
//! maxima and the mean taken over every tool in the index; and `c' = 0` for a tool that
//! shares no word with the text (`l = 0`) and whose plain cosine is below
//! [`SEMANTIC_ONLY_MIN_COSINE`]. The weight is 0.5, an even mix fixed before any
//! measurement. Without a model (or for a text with no word it knows), `own = l'`.
//!
//! Each server is scored the same way as one document (its tools' names and descriptions,
//! its name and instructions; its vector the normalised sum of its tools'), and a tool's
//! score for the text is `(1 − w) · own + w · server` with `w` = [`SERVER_WEIGHT`], so the
//! tools of the server a request is about rise together.
//!
//! With a model, each text then gets **feedback** from the catalogue itself (decision
//! 0047): its best [`FEEDBACK_DEPTH`] tools so far, weighted by their scores, stand in
//! for the text in the encoder's space (the tools' own, once every tool has a vector there),
//! and every tool's centred cosine with them, put on the same scale as `c'`, takes
//! [`FEEDBACK_WEIGHT`] of its score: `(1 − f) · score + f · feedback`. A request's words
//! are few and embedded by the static table; the tools it found first are whole
//! definitions embedded by the encoder, so their neighbours (the same job in other words,
//! the other tools of a task) rise. A text that found nothing gets no feedback, and an
//! index with the static table's tool vectors (before the encoder's are computed) none.
//!
//! The text is the whole request and, for a request of several steps
//! ([`crate::steps`]), each step: a tool's final score is `0.5 · whole + 0.5 · best step`.
//! A tool with score 0 is not returned, so a request of words no tool is near (`zebra
//! quasar`) still finds nothing. Decision 0038 has the measurements; [`Tuning`] selects
//! each part for them ([`Tuning::BASELINE`] is decision 0025's ranking).

use std::cmp::Ordering;
#[cfg(feature = "semantic")]
use std::sync::Arc;

#[cfg(feature = "semantic")]
use crate::document::INSTRUCTIONS_CHAR_CAP;
use crate::document::ToolDoc;
use crate::index::{Hit, QUERY_CHAR_CAP, ToolIndex, cut_chars, round4};
#[cfg(feature = "semantic")]
use crate::semantic::{Cosines, EmbeddingCache, Model, SemanticIndex, TokenIdf};
use crate::servers::ServerIndex;

/// The weight of the normalised BM25F score in the hybrid score; the semantic score
/// gets the rest.
pub const LEXICAL_WEIGHT: f64 = 0.5;

/// The share of a tool's score that is its server's (decision 0038).
pub const SERVER_WEIGHT: f64 = 0.3;

/// How much of a tool's vector comes from its server's instructions: the tool's own text
/// counts twice as much as what its server says about all of its tools.
pub const INSTRUCTIONS_WEIGHT: f32 = 0.5;

/// How many of a text's best tools seed its feedback query ([`Tuning::feedback`]).
pub const FEEDBACK_DEPTH: usize = 5;

/// The share of a tool's score for a text that is its feedback score: its nearness, in
/// the tools' own vector space, to the text's best [`FEEDBACK_DEPTH`] tools (decision
/// 0047; chosen on LiveMCPBench's dev half only).
pub const FEEDBACK_WEIGHT: f64 = 0.3;

/// The weight of the normalised BM25F score when requests are mapped into the encoder's
/// space ([`Tuning::query_map`], not adopted): the semantic half is then better and gets
/// more (decision 0052; chosen on LiveMCPBench's dev half only).
pub const MAPPED_LEXICAL_WEIGHT: f64 = 0.4;

/// The ridge penalty of the request map ([`Tuning::query_map`]), as a share of the mean
/// variance of the tools' centred static vectors: `λ = QUERY_MAP_RIDGE · trace(XᵀX) / dim`
/// (decision 0052; chosen on LiveMCPBench's dev half only).
pub const QUERY_MAP_RIDGE: f32 = 1.0;

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

/// How the steps of a multi-step request ([`crate::steps`]) are fused with the whole.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StepFusion {
    /// The request is ranked whole only.
    Off,
    /// A tool's score is the best of its score for the whole request and for each step.
    Max,
    /// The mean of its score for the whole and its best score for a step.
    Blend,
    /// The mean of its score for the whole and its mean score over the steps.
    Mean,
}

/// How a search combines its evidence. [`Tuning::default`] is what
/// [`SearchIndex::search`] uses; the other values are there to measure each part alone
/// (`examples/tool_eval.rs`, `docs/benchmarks.md`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tuning {
    /// Whether and how the steps of a request are ranked too.
    pub steps: StepFusion,
    /// The share of a tool's score that is its server's score (0: the tool's own alone).
    pub server_weight: f64,
    /// Whether cosines are taken after removing the catalogue's mean vector (hubness).
    pub centre: bool,
    /// The weight of the normalised BM25F score in the hybrid score.
    pub lexical_weight: f64,
    /// Whether a query's tokens are weighted by their inverse document frequency over the
    /// tools' embedded texts before they are added up, when the tool vectors are the
    /// static table's (decision 0044; with the encoder's it is not applied).
    pub query_idf: bool,
    /// The weight of the feedback score: each text's best [`Tuning::feedback_depth`]
    /// tools after a first ranking stand in for the text in the tools' own vector space,
    /// and every tool's centred cosine with them (normalised as the cosines are) takes
    /// this share of its score (0: no feedback). Applied only while an index has the
    /// encoder's tool vectors (decision 0047).
    pub feedback: f64,
    /// How many of a text's best tools seed the feedback query.
    pub feedback_depth: usize,
    /// Whether a request's static vector is mapped into the encoder's space by the
    /// linear map fitted on the catalogue's own tools ([`SearchIndex::fit_query_map`])
    /// before its cosines with the encoder's tool (and server) vectors are taken. When it
    /// applies (the index has the encoder's vectors and a fitted map),
    /// [`Tuning::mapped_lexical_weight`] replaces [`Tuning::lexical_weight`] and there is
    /// no feedback. Measured and not adopted (decision 0052): off by default.
    pub query_map: bool,
    /// The weight of the normalised BM25F score when the request map applies.
    pub mapped_lexical_weight: f64,
}

impl Tuning {
    /// The ranking of decision 0025: the whole request, each tool by its own text.
    pub const BASELINE: Tuning = Tuning {
        steps: StepFusion::Off,
        server_weight: 0.0,
        centre: false,
        lexical_weight: LEXICAL_WEIGHT,
        query_idf: false,
        feedback: 0.0,
        feedback_depth: FEEDBACK_DEPTH,
        query_map: false,
        mapped_lexical_weight: MAPPED_LEXICAL_WEIGHT,
    };
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            steps: StepFusion::Blend,
            server_weight: SERVER_WEIGHT,
            centre: true,
            query_idf: true,
            feedback: FEEDBACK_WEIGHT,
            ..Tuning::BASELINE
        }
    }
}

/// The vectors of the tools and of the servers.
#[cfg(feature = "semantic")]
#[derive(Debug)]
struct Vectors {
    tools: SemanticIndex,
    servers: SemanticIndex,
    /// Token rarity over the tools' embedded texts ([`Tuning::query_idf`]); built only
    /// when the tool vectors are the static table's, the only ones it applies to.
    idf: Option<TokenIdf>,
    /// Whether the tool vectors are the encoder's.
    encoder: bool,
}

/// A tool index with the best ranking available: hybrid with a model, lexical without.
#[derive(Debug)]
pub struct SearchIndex {
    lexical: ToolIndex,
    servers: ServerIndex,
    #[cfg(feature = "semantic")]
    semantic: Option<Vectors>,
}

impl SearchIndex {
    /// An index that ranks by words only.
    pub fn lexical(docs: Vec<ToolDoc>) -> SearchIndex {
        SearchIndex {
            servers: ServerIndex::build(&docs),
            lexical: ToolIndex::build(docs),
            #[cfg(feature = "semantic")]
            semantic: None,
        }
    }

    /// An index that ranks by words and meaning; tool vectors come from `cache` when it has
    /// them and are added to it when not.
    ///
    /// The tool vectors are the encoder's when every tool has one (in `cache` or in the
    /// model directory), else the static table's; a cache made by
    /// [`EmbeddingCache::background`] then computes the missing ones for a later index.
    #[cfg(feature = "semantic")]
    pub fn with_model(
        docs: Vec<ToolDoc>,
        model: Arc<Model>,
        cache: &EmbeddingCache,
    ) -> SearchIndex {
        SearchIndex::build_semantic(docs, model, cache, true)
    }

    /// As [`SearchIndex::with_model`], with the static table's tool vectors whatever the
    /// cache holds (decision 0038's ranking; for measuring the encoder's against it).
    #[cfg(feature = "semantic")]
    pub fn with_table_vectors(
        docs: Vec<ToolDoc>,
        model: Arc<Model>,
        cache: &EmbeddingCache,
    ) -> SearchIndex {
        SearchIndex::build_semantic(docs, model, cache, false)
    }

    #[cfg(feature = "semantic")]
    fn build_semantic(
        docs: Vec<ToolDoc>,
        model: Arc<Model>,
        cache: &EmbeddingCache,
        use_encoder: bool,
    ) -> SearchIndex {
        let texts: Vec<String> = docs.iter().map(ToolDoc::embedding_text).collect();
        let instructions: Vec<Option<&str>> = docs
            .iter()
            .map(|doc| {
                doc.instructions
                    .as_deref()
                    .map(|text| cut_chars(text, INSTRUCTIONS_CHAR_CAP))
            })
            .collect();
        // The static table's vectors (queries are embedded the same way).
        let table: Vec<Option<Arc<[f32]>>> = texts
            .iter()
            .zip(&instructions)
            .map(|(text, instructions)| {
                let own = cache.embed(&model, text);
                let server = instructions.and_then(|text| cache.embed(&model, text));
                join(own, server)
            })
            .collect();
        // The encoder's, when every text has one already (decision 0044).
        let mut wanted: Vec<&str> = texts.iter().map(String::as_str).collect();
        wanted.extend(instructions.iter().flatten());
        let found = if use_encoder {
            cache.encoded(&model, &wanted)
        } else {
            None
        };
        let encoder: Option<Vec<Option<Arc<[f32]>>>> = found.map(|found| {
            let (own, rest) = found.split_at(texts.len());
            let mut rest = rest.iter();
            own.iter()
                .zip(&instructions)
                .map(|(own, instructions)| {
                    let server = instructions.and_then(|_| rest.next().cloned());
                    join(Some(Arc::clone(own)), server)
                })
                .collect()
        });
        // Query IDF applies to table vectors only: no table of token counts otherwise.
        let idf = encoder
            .is_none()
            .then(|| TokenIdf::build(&model, texts.iter().map(String::as_str)));
        let servers = ServerIndex::build(&docs);
        let server_centroids = |vectors: &[Option<Arc<[f32]>>]| -> Vec<Option<Arc<[f32]>>> {
            servers
                .tools
                .iter()
                .map(|members| {
                    centroid(
                        members
                            .iter()
                            .filter_map(|&t| vectors[t as usize].as_deref()),
                    )
                })
                .collect()
        };
        let (tools, server_vectors) = match &encoder {
            Some(encoder) => (
                SemanticIndex::new(Arc::clone(&model), encoder, Some(&table)),
                SemanticIndex::new(
                    Arc::clone(&model),
                    &server_centroids(encoder),
                    Some(&server_centroids(&table)),
                ),
            ),
            None => (
                SemanticIndex::new(Arc::clone(&model), &table, None),
                SemanticIndex::new(Arc::clone(&model), &server_centroids(&table), None),
            ),
        };
        SearchIndex {
            lexical: ToolIndex::build(docs),
            servers,
            semantic: Some(Vectors {
                tools,
                servers: server_vectors,
                idf,
                encoder: encoder.is_some(),
            }),
        }
    }

    /// Fits the linear map from the static table's space to the encoder's that
    /// [`Tuning::query_map`] applies to requests: a ridge regression of the tools' encoder
    /// vectors on their static ones (no request takes part; `ridge` scales the penalty,
    /// [`QUERY_MAP_RIDGE`] is the one measured). For measuring only: the map was measured
    /// and not adopted (decision 0052), so no index is built with it and
    /// [`Tuning::default`] does not use it. Does nothing for an index without the
    /// encoder's vectors. Costs about 0.1 s for 527 tools (at most
    /// [`crate::semantic::QUERY_MAP_FIT_CAP`] tools are read).
    pub fn fit_query_map(&mut self, ridge: f32) {
        #[cfg(feature = "semantic")]
        if let Some(vectors) = self.semantic.as_mut().filter(|v| v.encoder) {
            vectors.tools.fit_query_map(ridge);
            vectors.servers.fit_query_map(ridge);
        }
        #[cfg(not(feature = "semantic"))]
        let _ = ridge;
    }

    /// The texts whose encoder vectors an index of `docs` needs (each tool's embedded
    /// text, then each distinct server instructions' text, cut as the index cuts them):
    /// what to give [`EmbeddingCache::encode`] so that [`SearchIndex::with_model`] uses
    /// the encoder's vectors.
    #[cfg(feature = "semantic")]
    pub fn encoder_texts(docs: &[ToolDoc]) -> Vec<String> {
        let mut texts: Vec<String> = docs.iter().map(ToolDoc::embedding_text).collect();
        for doc in docs {
            if let Some(text) = doc.instructions.as_deref() {
                let text = cut_chars(text, INSTRUCTIONS_CHAR_CAP);
                if !texts[docs.len()..].iter().any(|t| t == text) {
                    texts.push(text.to_owned());
                }
            }
        }
        texts
    }

    /// Whether the tool vectors are the encoder's (every tool had one when the index was
    /// built; decision 0044) rather than the static table's.
    pub fn encoder_vectors(&self) -> bool {
        #[cfg(feature = "semantic")]
        if let Some(vectors) = &self.semantic {
            return vectors.encoder;
        }
        false
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
        self.search_tuned(query, limit, ranking, &Tuning::default())
    }

    /// The best `limit` tools for `query` by `ranking`, combining the evidence as `tuning`
    /// says.
    pub fn search_tuned(
        &self,
        query: &str,
        limit: usize,
        ranking: Ranking,
        tuning: &Tuning,
    ) -> Vec<Hit> {
        if limit == 0 || self.is_empty() {
            return Vec::new();
        }
        let ranking = self.effective(ranking);
        if ranking == Ranking::Lexical && *tuning == Tuning::BASELINE {
            return self.lexical.search(query, limit);
        }
        let query = cut_chars(query, QUERY_CHAR_CAP);
        let mut texts = vec![query];
        if tuning.steps != StepFusion::Off {
            texts.extend(crate::steps::steps(query));
        }
        let mut scores = self.text_scores(&texts, ranking, tuning);
        let whole = scores.swap_remove(0);
        if scores.is_empty() {
            return self.top(whole, limit);
        }
        let parts = scores;
        let count = parts.len() as f64;
        let fused = whole
            .iter()
            .enumerate()
            .map(|(doc, &whole)| {
                let best = parts.iter().map(|p| p[doc]).fold(0.0, f64::max);
                let mean = parts.iter().map(|p| p[doc]).sum::<f64>() / count;
                match tuning.steps {
                    StepFusion::Off => whole,
                    StepFusion::Max => whole.max(best),
                    StepFusion::Blend => 0.5 * whole + 0.5 * best,
                    StepFusion::Mean => 0.5 * whole + 0.5 * mean,
                }
            })
            .collect();
        self.top(fused, limit)
    }

    /// `ranking`, or [`Ranking::Lexical`] when it needs a model and there is none.
    fn effective(&self, ranking: Ranking) -> Ranking {
        #[cfg(feature = "semantic")]
        if self.semantic.is_some() {
            return ranking;
        }
        let _ = ranking;
        Ranking::Lexical
    }

    /// For each of `texts`, every tool's score (0 to 1): its own, and its server's share.
    fn text_scores(&self, texts: &[&str], ranking: Ranking, tuning: &Tuning) -> Vec<Vec<f64>> {
        let servers = tuning.server_weight > 0.0 && self.servers.len() > 1;
        // Whether requests are mapped into the encoder's space (decision 0052): then the
        // mapped lexical weight, and no feedback.
        #[cfg(feature = "semantic")]
        let mapped = tuning.query_map
            && self
                .semantic
                .as_ref()
                .is_some_and(|v| v.encoder && v.tools.has_map());
        #[cfg(feature = "semantic")]
        let lexical_weight = if mapped {
            tuning.mapped_lexical_weight
        } else {
            tuning.lexical_weight
        };
        // The cosines of every text with every tool (and server), from one pass over the
        // vectors for all the texts together.
        #[cfg(feature = "semantic")]
        let (mut tool_cosines, mut server_cosines) = match (&self.semantic, ranking) {
            (Some(vectors), Ranking::Semantic | Ranking::Hybrid) => {
                // Query IDF weights only against the static table's tool vectors: the
                // encoder pools a tool's tokens evenly, and an evenly pooled request
                // matched those better on the dev half (decision 0044).
                let idf = vectors.idf.as_ref().filter(|_| tuning.query_idf);
                let queries: Vec<Option<Vec<f32>>> = texts
                    .iter()
                    .map(|text| vectors.tools.embed(text, idf))
                    .collect();
                let tools = vectors.tools.cosines(&queries, tuning.centre, mapped);
                let servers = if servers {
                    vectors.servers.cosines(&queries, tuning.centre, mapped)
                } else {
                    texts.iter().map(|_| None).collect()
                };
                (tools, servers)
            }
            _ => (
                texts.iter().map(|_| None).collect(),
                texts.iter().map(|_| None).collect(),
            ),
        };
        let mut out = Vec::with_capacity(texts.len());
        for (i, text) in texts.iter().enumerate() {
            #[cfg(feature = "semantic")]
            let mut scores = own_scores(
                &self.lexical,
                text,
                tool_cosines[i].take(),
                ranking,
                lexical_weight,
            );
            #[cfg(not(feature = "semantic"))]
            let mut scores = {
                let _ = (i, ranking);
                lexical_scores(&self.lexical, text)
            };
            if servers {
                #[cfg(feature = "semantic")]
                let server = own_scores(
                    &self.servers.index,
                    text,
                    server_cosines[i].take(),
                    ranking,
                    lexical_weight,
                );
                #[cfg(not(feature = "semantic"))]
                let server = lexical_scores(&self.servers.index, text);
                let weight = tuning.server_weight;
                for (score, &of) in scores.iter_mut().zip(&self.servers.of_tool) {
                    *score = (1.0 - weight) * *score + weight * server[of as usize];
                }
            }
            out.push(scores);
        }
        #[cfg(feature = "semantic")]
        if let (Some(vectors), Ranking::Semantic | Ranking::Hybrid) = (&self.semantic, ranking)
            && tuning.feedback > 0.0
            && vectors.encoder
            && !mapped
        {
            // Only with the encoder's tool vectors: the static table's average a
            // definition's tokens, and their neighbours lost on the dev half (decision 0047).
            // Not with the request map: together they lost on the dev half (decision 0052).
            feedback(&vectors.tools, &mut out, tuning);
        }
        out
    }

    fn top(&self, scores: Vec<f64>, limit: usize) -> Vec<Hit> {
        let mut ranked: Vec<(f64, u32)> = scores
            .into_iter()
            .enumerate()
            .map(|(doc, score)| (round4(score), doc as u32))
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

/// The BM25F scores of every document of `index` for `text`, divided by the best (the
/// best word match gets 1, a document that shares no word 0).
fn lexical_scores(index: &ToolIndex, text: &str) -> Vec<f64> {
    let mut words = vec![0f64; index.len()];
    let found = index.scores(text);
    let top = found.iter().map(|(_, s)| *s).fold(0.0, f64::max);
    if top > 0.0 {
        for (doc, score) in found {
            words[doc as usize] = score / top;
        }
    }
    words
}

/// Every document's own score for `text` under `ranking` (see the module docs), from its
/// words and, when there are any, the `cosines` of its vector with the text's.
#[cfg(feature = "semantic")]
fn own_scores(
    index: &ToolIndex,
    text: &str,
    cosines: Option<Cosines<'_>>,
    ranking: Ranking,
    lexical_weight: f64,
) -> Vec<f64> {
    let words = lexical_scores(index, text);
    match cosines {
        Some(cosines) if ranking != Ranking::Lexical => mix(
            &words,
            cosines.rank.as_deref().unwrap_or(&cosines.raw),
            &|row| cosines.guard(row),
            ranking,
            lexical_weight,
        ),
        _ => words,
    }
}

/// Pseudo-relevance feedback: for each text's scores, its best
/// [`Tuning::feedback_depth`] tools (weighted by their scores) make a query in the tools'
/// own space ([`SemanticIndex::feedback_query`]); every tool's centred cosine with it,
/// normalised as in [`mix`], takes [`Tuning::feedback`] of the score. A text that found
/// nothing gets no feedback, so noise still finds nothing.
#[cfg(feature = "semantic")]
fn feedback(tools: &SemanticIndex, scores: &mut [Vec<f64>], tuning: &Tuning) {
    let queries: Vec<Option<Vec<f32>>> = scores
        .iter()
        .map(|scores| {
            let mut ranked: Vec<(usize, f64)> = scores
                .iter()
                .copied()
                .enumerate()
                .filter(|(_, s)| *s > 0.0)
                .collect();
            let depth = tuning.feedback_depth.min(ranked.len());
            if depth == 0 {
                return None;
            }
            let order =
                |a: &(usize, f64), b: &(usize, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
            if ranked.len() > depth {
                ranked.select_nth_unstable_by(depth - 1, order);
                ranked.truncate(depth);
            }
            let seeds: Vec<(usize, f32)> = ranked.iter().map(|&(row, s)| (row, s as f32)).collect();
            tools.feedback_query(&seeds)
        })
        .collect();
    let present: Vec<&[f32]> = queries.iter().flatten().map(Vec::as_slice).collect();
    if present.is_empty() {
        return;
    }
    let mut cosines = tools.feedback_cosines(&present).into_iter();
    let weight = tuning.feedback;
    for (scores, query) in scores.iter_mut().zip(&queries) {
        if query.is_none() {
            continue;
        }
        let Some(cosines) = cosines.next() else {
            return;
        };
        let normalised = spread(&cosines);
        for (score, c) in scores.iter_mut().zip(normalised) {
            *score = (1.0 - weight) * *score + weight * c;
        }
    }
}

/// Cosines on the hybrid's scale: `max(0, (c − mean) / (max − mean))`.
#[cfg(feature = "semantic")]
fn spread(cosines: &[f32]) -> Vec<f64> {
    let n = cosines.len().max(1) as f64;
    let mean = cosines.iter().map(|&c| f64::from(c)).sum::<f64>() / n;
    let max = cosines
        .iter()
        .map(|&c| f64::from(c))
        .fold(f64::MIN, f64::max);
    let spread = max - mean;
    cosines
        .iter()
        .map(|&c| {
            if spread <= f64::EPSILON {
                0.0
            } else {
                ((f64::from(c) - mean) / spread).max(0.0)
            }
        })
        .collect()
}

/// A tool's vector with its server's instructions' mixed in when it has both.
#[cfg(feature = "semantic")]
fn join(own: Option<Arc<[f32]>>, server: Option<Arc<[f32]>>) -> Option<Arc<[f32]>> {
    match (own, server) {
        (Some(own), Some(server)) => Some(blend(&own, &server)),
        (own, _) => own,
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
    normalise(&mut sum);
    Arc::from(sum)
}

/// The normalised sum of `vectors` (a server's vector from its tools'); `None` when there
/// are none.
#[cfg(feature = "semantic")]
fn centroid<'a>(vectors: impl Iterator<Item = &'a [f32]>) -> Option<Arc<[f32]>> {
    let mut sum: Option<Vec<f32>> = None;
    for vector in vectors {
        let acc = sum.get_or_insert_with(|| vec![0f32; vector.len()]);
        for (s, x) in acc.iter_mut().zip(vector) {
            *s += x;
        }
    }
    let mut sum = sum?;
    normalise(&mut sum);
    Some(Arc::from(sum))
}

/// Scales `v` to length 1 (unless it is zero).
#[cfg(feature = "semantic")]
fn normalise(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > f32::EPSILON {
        for x in v {
            *x /= norm;
        }
    }
}

/// The per-document scores of `ranking` from the normalised BM25F scores `words`, the
/// cosines that rank (`cosines`) and the plain cosines that the
/// [`SEMANTIC_ONLY_MIN_COSINE`] guard reads (`guard(row)`, asked only for a document that
/// shares no word with the text and is nearer than average), of all documents.
#[cfg(feature = "semantic")]
fn mix(
    words: &[f64],
    cosines: &[f32],
    guard: &dyn Fn(usize) -> f32,
    ranking: Ranking,
    lexical_weight: f64,
) -> Vec<f64> {
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
        return cosines.iter().map(|&c| semantic(c)).collect();
    }
    words
        .iter()
        .zip(cosines)
        .enumerate()
        .map(|(row, (&word, &c))| {
            let mut meaning = semantic(c);
            if word == 0.0 && meaning > 0.0 && guard(row) < SEMANTIC_ONLY_MIN_COSINE {
                meaning = 0.0;
            }
            lexical_weight * word + (1.0 - lexical_weight) * meaning
        })
        .collect()
}
