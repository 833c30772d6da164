//! Search latency and index build time for catalogues of 1,000 and 10,000 tools, and of
//! the hybrid (words and meaning) search over 5,000.
//!
//! Run: `cargo bench -p warden-search` (append `-- NAME` to run matching benches only). The
//! `hybrid_*` benches need the search model (`scripts/install-search-model`,
//! `WARDEN_SEARCH_MODEL`).
//! `search` runs one query per iteration, cycling through 16 queries of two to six words
//! drawn from the same vocabulary as the tools, so most queries match many tools; `build`
//! indexes the whole catalogue once per iteration.
//!
//! The catalogue is synthetic and deterministic: a linear congruential generator with a
//! fixed seed picks, for each tool, a server, a verb and one or two nouns for the name, a
//! sentence of 8 to 30 words for the description, and one to five parameters with short
//! descriptions, from fixed word lists.

// A bench is a measuring program: a broken setup should stop it with the reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};

use divan::Bencher;
use serde_json::{Map, Value, json};
use warden_search::{SearchIndex, ToolDoc, ToolIndex};

fn main() {
    let index = ToolIndex::build(catalogue(10_000));
    for query in queries().iter().take(3) {
        let hits = index.search(query, 10);
        let first = hits.first().map_or("-", |h| h.qualified.as_str());
        println!("{query:?}: {} hits, first {first}", hits.len());
    }
    divan::main();
}

const SIZES: [usize; 2] = [1_000, 10_000];

const SERVERS: &[&str] = &[
    "filesystem",
    "git",
    "github",
    "gitlab",
    "slack",
    "notion",
    "jira",
    "postgres",
    "sqlite",
    "browser",
    "fetch",
    "memory",
    "calendar",
    "gmail",
    "drive",
    "stripe",
    "aws",
    "docker",
    "kubernetes",
    "sentry",
    "linear",
    "figma",
    "spotify",
    "weather",
    "maps",
];
const VERBS: &[&str] = &[
    "get", "list", "create", "update", "delete", "search", "read", "write", "send", "fetch",
    "move", "copy", "run", "query", "describe", "export", "import", "sync", "archive", "close",
];
const NOUNS: &[&str] = &[
    "file",
    "directory",
    "issue",
    "pull_request",
    "commit",
    "branch",
    "message",
    "channel",
    "page",
    "database",
    "table",
    "row",
    "user",
    "team",
    "project",
    "event",
    "calendar",
    "email",
    "document",
    "folder",
    "invoice",
    "customer",
    "payment",
    "bucket",
    "container",
    "pod",
    "deployment",
    "alert",
    "ticket",
    "comment",
    "label",
    "playlist",
    "track",
    "forecast",
    "location",
    "route",
    "note",
    "task",
    "record",
    "report",
];
const WORDS: &[&str] = &[
    "the",
    "a",
    "of",
    "for",
    "with",
    "in",
    "from",
    "to",
    "and",
    "by",
    "all",
    "new",
    "existing",
    "given",
    "specified",
    "current",
    "recent",
    "remote",
    "local",
    "optional",
    "returns",
    "results",
    "content",
    "details",
    "metadata",
    "status",
    "name",
    "identifier",
    "path",
    "query",
    "filter",
    "limit",
    "page",
    "token",
    "owner",
    "repository",
    "workspace",
    "account",
    "time",
    "date",
    "range",
    "format",
    "text",
    "json",
    "markdown",
    "url",
];

/// A linear congruential generator (Knuth's MMIX constants), enough for picking words.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, words: &[&'a str]) -> &'a str {
        words[self.below(words.len())]
    }

    fn sentence(&mut self, min: usize, max: usize) -> String {
        let len = min + self.below(max - min + 1);
        let mut out: Vec<&str> = Vec::with_capacity(len);
        for _ in 0..len {
            let list = match self.below(4) {
                0 => VERBS,
                1 => NOUNS,
                _ => WORDS,
            };
            out.push(self.pick(list));
        }
        out.join(" ")
    }
}

fn catalogue(n: usize) -> Vec<ToolDoc> {
    let mut rng = Lcg(0x5eed);
    (0..n)
        .map(|i| {
            let server = format!("{}{}", rng.pick(SERVERS), i % 40);
            let mut tool = format!("{}_{}", rng.pick(VERBS), rng.pick(NOUNS));
            if rng.below(2) == 0 {
                tool = format!("{tool}_{}", rng.pick(NOUNS));
            }
            let mut properties = Map::new();
            for _ in 0..1 + rng.below(5) {
                let name = format!("{}_{}", rng.pick(NOUNS), rng.pick(WORDS));
                properties.insert(
                    name,
                    json!({"type": "string", "description": rng.sentence(3, 12)}),
                );
            }
            ToolDoc {
                qualified: format!("{server}__{tool}"),
                server,
                tool,
                title: None,
                description: Some(rng.sentence(8, 30)),
                input_schema: json!({"type": "object", "properties": Value::Object(properties)}),
                instructions: None,
            }
        })
        .collect()
}

fn queries() -> Vec<String> {
    let mut rng = Lcg(0x0de1);
    (0..16).map(|_| rng.sentence(2, 6)).collect()
}

/// Requests of three steps (three clauses of four to eight words, joined by a comma and
/// "then", and a sentence end), as people write multi-step tasks: each is ranked whole
/// and by step.
fn step_queries() -> Vec<String> {
    let mut rng = Lcg(0x57e9);
    (0..16)
        .map(|_| {
            format!(
                "{}, then {}. {}",
                rng.sentence(4, 8),
                rng.sentence(4, 8),
                rng.sentence(4, 8)
            )
        })
        .collect()
}

#[divan::bench(args = SIZES)]
fn search(bencher: Bencher, n: usize) {
    let index = ToolIndex::build(catalogue(n));
    let queries = queries();
    let next = AtomicUsize::new(0);
    bencher.bench(|| {
        let i = next.fetch_add(1, Ordering::Relaxed) % queries.len();
        black_box(index.search(black_box(&queries[i]), 10))
    });
}

/// The catalogue size of the latency goal (5 ms with the model, 1 ms by words).
const GOAL_SIZE: usize = 5_000;

/// The installed search model (`WARDEN_SEARCH_MODEL`, or the usual place); the bench
/// stops with the reason when it is missing.
fn model() -> std::sync::Arc<warden_search::semantic::Model> {
    let dir = warden_search::semantic::model_dir();
    std::sync::Arc::new(
        warden_search::semantic::Model::load(&dir)
            .unwrap_or_else(|e| panic!("hybrid benches need the search model: {e}")),
    )
}

/// An index of `n` tools with the encoder's tool vectors (decision 0044), computed first
/// when the model directory does not have them yet (minutes for 5,000 tools, once).
fn encoder_index(n: usize) -> SearchIndex {
    let cache = warden_search::semantic::EmbeddingCache::default();
    let model = model();
    let docs = catalogue(n);
    let texts = SearchIndex::encoder_texts(&docs);
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    cache
        .encode(&model, &texts)
        .unwrap_or_else(|e| panic!("encoder tool vectors: {e}"));
    let index = SearchIndex::with_model(docs, model, &cache);
    assert!(index.encoder_vectors());
    index
}

/// One hybrid search with the encoder's tool vectors (query embedding by the static
/// table, cosines over every tool in both spaces, BM25F, mix, top 10).
#[divan::bench(args = [GOAL_SIZE])]
fn hybrid_search_encoder(bencher: Bencher, n: usize) {
    let index = encoder_index(n);
    let queries = queries();
    let next = AtomicUsize::new(0);
    bencher.bench(|| {
        let i = next.fetch_add(1, Ordering::Relaxed) % queries.len();
        black_box(index.search(black_box(&queries[i]), 10))
    });
}

/// One hybrid search of a three-step request with the encoder's tool vectors.
#[divan::bench(args = [GOAL_SIZE])]
fn hybrid_search_steps_encoder(bencher: Bencher, n: usize) {
    let index = encoder_index(n);
    let queries = step_queries();
    let next = AtomicUsize::new(0);
    bencher.bench(|| {
        let i = next.fetch_add(1, Ordering::Relaxed) % queries.len();
        black_box(index.search(black_box(&queries[i]), 10))
    });
}

/// Decision 0044's ranking (no feedback from the catalogue, decision 0047), with the
/// encoder's tool vectors: what the feedback costs, measured beside it.
#[divan::bench(args = [GOAL_SIZE])]
fn hybrid_search_encoder_no_feedback(bencher: Bencher, n: usize) {
    let index = encoder_index(n);
    let queries = queries();
    let next = AtomicUsize::new(0);
    let tuning = warden_search::Tuning {
        feedback: 0.0,
        ..warden_search::Tuning::default()
    };
    bencher.bench(|| {
        let i = next.fetch_add(1, Ordering::Relaxed) % queries.len();
        black_box(index.search_tuned(
            black_box(&queries[i]),
            10,
            warden_search::Ranking::Hybrid,
            &tuning,
        ))
    });
}

/// The same for a three-step request.
#[divan::bench(args = [GOAL_SIZE])]
fn hybrid_search_steps_encoder_no_feedback(bencher: Bencher, n: usize) {
    let index = encoder_index(n);
    let queries = step_queries();
    let next = AtomicUsize::new(0);
    let tuning = warden_search::Tuning {
        feedback: 0.0,
        ..warden_search::Tuning::default()
    };
    bencher.bench(|| {
        let i = next.fetch_add(1, Ordering::Relaxed) % queries.len();
        black_box(index.search_tuned(
            black_box(&queries[i]),
            10,
            warden_search::Ranking::Hybrid,
            &tuning,
        ))
    });
}

/// One hybrid search with the static table's tool vectors (query embedding, cosine over
/// every tool, BM25F, mix, top 10).
#[divan::bench(args = [GOAL_SIZE])]
fn hybrid_search(bencher: Bencher, n: usize) {
    let cache = warden_search::semantic::EmbeddingCache::default();
    let index = SearchIndex::with_table_vectors(catalogue(n), model(), &cache);
    let queries = queries();
    let next = AtomicUsize::new(0);
    bencher.bench(|| {
        let i = next.fetch_add(1, Ordering::Relaxed) % queries.len();
        black_box(index.search(black_box(&queries[i]), 10))
    });
}

/// One lexical search through the same index type, for comparison at the same size.
#[divan::bench(args = [GOAL_SIZE])]
fn lexical_search(bencher: Bencher, n: usize) {
    let index = SearchIndex::lexical(catalogue(n));
    let queries = queries();
    let next = AtomicUsize::new(0);
    bencher.bench(|| {
        let i = next.fetch_add(1, Ordering::Relaxed) % queries.len();
        black_box(index.search(black_box(&queries[i]), 10))
    });
}

/// One hybrid search of a three-step request (the whole and each step ranked, fused).
#[divan::bench(args = [GOAL_SIZE])]
fn hybrid_search_steps(bencher: Bencher, n: usize) {
    let cache = warden_search::semantic::EmbeddingCache::default();
    let index = SearchIndex::with_table_vectors(catalogue(n), model(), &cache);
    let queries = step_queries();
    let next = AtomicUsize::new(0);
    bencher.bench(|| {
        let i = next.fetch_add(1, Ordering::Relaxed) % queries.len();
        black_box(index.search(black_box(&queries[i]), 10))
    });
}

/// One lexical search of a three-step request.
#[divan::bench(args = [GOAL_SIZE])]
fn lexical_search_steps(bencher: Bencher, n: usize) {
    let index = SearchIndex::lexical(catalogue(n));
    let queries = step_queries();
    let next = AtomicUsize::new(0);
    bencher.bench(|| {
        let i = next.fetch_add(1, Ordering::Relaxed) % queries.len();
        black_box(index.search(black_box(&queries[i]), 10))
    });
}

/// Indexing with the model: every tool embedded by the static table (an empty cache each
/// time; the encoder's stored vectors are looked for too).
#[divan::bench(args = [GOAL_SIZE], sample_count = 5)]
fn hybrid_build(bencher: Bencher, n: usize) {
    let model = model();
    bencher.with_inputs(|| catalogue(n)).bench_values(|docs| {
        let cache = warden_search::semantic::EmbeddingCache::default();
        black_box(SearchIndex::with_model(
            docs,
            std::sync::Arc::clone(&model),
            &cache,
        ))
    });
}

#[divan::bench(args = SIZES, sample_count = 20)]
fn build(bencher: Bencher, n: usize) {
    bencher
        .with_inputs(|| catalogue(n))
        .bench_values(|docs| black_box(ToolIndex::build(docs)));
}
