//! The inverted index and its BM25F ranking.

use std::cmp::Ordering;
use std::collections::HashMap;

use serde::Serialize;

use crate::document::{FIELDS, Field, FieldTexts, ToolDoc};
use crate::tokenize::for_each_term;

/// BM25's term-frequency saturation: how fast repeated mentions stop adding score. 1.2 is
/// the usual default (Robertson and Zaragoza; Lucene).
pub const K1: f64 = 1.2;

/// BM25's length normalisation: 0 ignores a field's length, 1 divides by it fully. 0.75 is
/// the usual default; it applies to every field.
pub const B: f64 = 0.75;

/// Mentions of one term in one field beyond this many are not counted. Honest text rarely
/// names the same thing more than a few times in one field; repetition past that is
/// padding, and with this cap a padded field only grows longer, which lowers its score.
pub const TF_CAP: u32 = 3;

/// At most this many distinct query terms are used (the first ones), so a huge query
/// cannot stall a search.
pub const QUERY_TERM_CAP: usize = 64;

/// At most this many characters of a query are read.
pub const QUERY_CHAR_CAP: usize = 1024;

/// Per-field weights: a word in a tool's name says more about what the tool does than the
/// same word in its description, and a parameter's description says less; the server's
/// instructions, shared by all its tools, say least about any one tool. The qualified
/// name repeats the tool name with the server's name, so a tool-name word counts
/// `3.0 + 1.0` and a server-name word `1.0`.
pub const FIELD_WEIGHTS: [(&str, f64); FIELDS] = [
    ("name", 3.0),
    ("qualified", 1.0),
    ("title", 2.0),
    ("description", 1.0),
    ("param_name", 1.0),
    ("param_description", 0.5),
    ("instructions", 0.25),
];

/// One search result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    /// The tool's qualified name.
    pub qualified: String,
    /// The tool's server.
    pub server: String,
    /// The tool's own name.
    pub tool: String,
    /// The ranking's score, rounded to 4 decimals: BM25F from [`ToolIndex::search`], the
    /// fused score (0 to 1) from [`crate::SearchIndex`].
    pub score: f64,
}

/// A tool's identity, kept for the hits.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) qualified: String,
    pub(crate) server: String,
    pub(crate) tool: String,
}

/// One document in a term's postings, with the term's whole contribution to its score.
#[derive(Debug, Clone, Copy)]
struct Posting {
    doc: u32,
    impact: f64,
}

/// An immutable BM25F index over tool definitions. Build it once with [`ToolIndex::build`],
/// then [`ToolIndex::search`] as often as needed, from any thread.
///
/// Scoring (BM25F, one saturation over the weighted sum of fields): for a query term `t`
/// and a tool `d`,
///
/// ```text
/// tf'(t, d) = Σ_f  w_f · min(tf_f(t, d), TF_CAP) / ((1 − B) + B · len_f(d) / avglen_f)
/// score(t, d) = idf(t) · tf' · (K1 + 1) / (tf' + K1)
/// idf(t) = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))
/// ```
///
/// and a tool's score is the sum over the query's distinct terms. Lengths are counted in
/// terms after the [character cap](crate::DEFINITION_CHAR_CAP). Everything but the query is
/// known when the index is built, so each posting stores its term's finished score and a
/// search only adds up postings.
#[derive(Debug)]
pub struct ToolIndex {
    entries: Vec<Entry>,
    terms: HashMap<String, u32>,
    postings: Vec<Vec<Posting>>,
}

impl ToolIndex {
    /// Indexes `docs`. Tools with the same qualified name are all kept.
    pub fn build(docs: Vec<ToolDoc>) -> ToolIndex {
        ToolIndex::build_fields(docs.into_iter().map(|doc| {
            let texts = doc.field_texts();
            (
                Entry {
                    qualified: doc.qualified,
                    server: doc.server,
                    tool: doc.tool,
                },
                texts,
            )
        }))
    }

    /// Indexes documents given by their identity and their (already capped) field texts.
    pub(crate) fn build_fields(
        docs: impl ExactSizeIterator<Item = (Entry, FieldTexts)>,
    ) -> ToolIndex {
        let n = docs.len();
        let mut terms: HashMap<String, u32> = HashMap::new();
        // Per term: (doc, raw counts per field).
        let mut raw: Vec<Vec<(u32, [u32; FIELDS])>> = Vec::new();
        let mut lengths: Vec<[u32; FIELDS]> = Vec::with_capacity(n);
        let mut entries = Vec::with_capacity(n);

        for (doc_id, (entry, texts)) in docs.enumerate() {
            let doc_id = u32::try_from(doc_id).unwrap_or(u32::MAX);
            let mut counts: HashMap<u32, [u32; FIELDS]> = HashMap::new();
            let mut length = [0u32; FIELDS];
            for field in Field::ALL {
                let f = field.index();
                for text in &texts.pieces[f] {
                    for_each_term(text, &mut |term| {
                        let next = u32::try_from(raw.len()).unwrap_or(u32::MAX);
                        let id = *terms.entry(term).or_insert_with(|| {
                            raw.push(Vec::new());
                            next
                        });
                        counts.entry(id).or_default()[f] += 1;
                        length[f] += 1;
                        true
                    });
                }
            }
            // Postings stay sorted by document: documents are added in order.
            let mut counts: Vec<(u32, [u32; FIELDS])> = counts.into_iter().collect();
            counts.sort_unstable_by_key(|(id, _)| *id);
            for (id, per_field) in counts {
                raw[id as usize].push((doc_id, per_field));
            }
            lengths.push(length);
            entries.push(entry);
        }

        let mut avg = [0f64; FIELDS];
        for length in &lengths {
            for (sum, &l) in avg.iter_mut().zip(length) {
                *sum += f64::from(l);
            }
        }
        for sum in &mut avg {
            *sum /= n.max(1) as f64;
        }

        let postings = raw
            .into_iter()
            .map(|list| {
                let idf = idf(n, list.len());
                list.into_iter()
                    .map(|(doc, counts)| {
                        let length = &lengths[doc as usize];
                        let tf = weighted_tf(&counts, length, &avg);
                        Posting {
                            doc,
                            impact: idf * tf * (K1 + 1.0) / (tf + K1),
                        }
                    })
                    .collect()
            })
            .collect();

        ToolIndex {
            entries,
            terms,
            postings,
        }
    }

    /// The number of tools indexed.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The best `limit` tools for `query`, best first. Only tools that share at least one
    /// term with the query are returned, so a query of stopwords or unknown words returns
    /// nothing. Equal (rounded) scores are ordered by qualified name, ascending.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Hit> {
        if limit == 0 || self.entries.is_empty() {
            return Vec::new();
        }
        let mut ranked: Vec<(f64, u32)> = self
            .scores(query)
            .into_iter()
            .map(|(doc, score)| (round4(score), doc))
            .collect();
        let order = |a: &(f64, u32), b: &(f64, u32)| -> Ordering {
            b.0.total_cmp(&a.0)
                .then_with(|| {
                    let (x, y) = (&self.entries[a.1 as usize], &self.entries[b.1 as usize]);
                    x.qualified.cmp(&y.qualified)
                })
                .then(a.1.cmp(&b.1))
        };
        if ranked.len() > limit {
            ranked.select_nth_unstable_by(limit - 1, order);
            ranked.truncate(limit);
        }
        ranked.sort_unstable_by(order);
        ranked
            .into_iter()
            .map(|(score, doc)| self.hit(doc, score))
            .collect()
    }

    /// The BM25F score of every tool that shares a term with `query` (unrounded), in no
    /// particular order.
    pub(crate) fn scores(&self, query: &str) -> Vec<(u32, f64)> {
        let query = cut_chars(query, QUERY_CHAR_CAP);
        let mut query_terms: Vec<String> = Vec::new();
        for_each_term(query, &mut |term| {
            if !query_terms.contains(&term) {
                query_terms.push(term);
            }
            query_terms.len() < QUERY_TERM_CAP
        });

        let mut scores = vec![0f64; self.entries.len()];
        let mut touched: Vec<u32> = Vec::new();
        for term in &query_terms {
            let Some(&id) = self.terms.get(term) else {
                continue;
            };
            for posting in &self.postings[id as usize] {
                let score = &mut scores[posting.doc as usize];
                if *score == 0.0 {
                    touched.push(posting.doc);
                }
                *score += posting.impact;
            }
        }
        touched
            .into_iter()
            .map(|doc| (doc, scores[doc as usize]))
            .collect()
    }

    /// The hit for tool `doc` with `score`.
    pub(crate) fn hit(&self, doc: u32, score: f64) -> Hit {
        let entry = &self.entries[doc as usize];
        Hit {
            qualified: entry.qualified.clone(),
            server: entry.server.clone(),
            tool: entry.tool.clone(),
            score,
        }
    }

    /// The qualified name of tool `doc`.
    pub(crate) fn qualified(&self, doc: u32) -> &str {
        &self.entries[doc as usize].qualified
    }
}

/// BM25's inverse document frequency, in the form that is never negative.
fn idf(n: usize, df: usize) -> f64 {
    let (n, df) = (n as f64, df as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// BM25F's pseudo term frequency: capped counts, length-normalised per field, weighted.
fn weighted_tf(counts: &[u32; FIELDS], length: &[u32; FIELDS], avg: &[f64; FIELDS]) -> f64 {
    let mut tf = 0.0;
    for f in 0..FIELDS {
        if counts[f] == 0 || avg[f] <= 0.0 {
            continue;
        }
        let norm = (1.0 - B) + B * f64::from(length[f]) / avg[f];
        tf += FIELD_WEIGHTS[f].1 * f64::from(counts[f].min(TF_CAP)) / norm;
    }
    tf
}

pub(crate) fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// The first `max` characters of `text`.
pub(crate) fn cut_chars(text: &str, max: usize) -> &str {
    text.char_indices()
        .nth(max)
        .map_or(text, |(i, _)| &text[..i])
}
