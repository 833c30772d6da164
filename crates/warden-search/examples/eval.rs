//! Retrieval quality of the tool search on a pool of function definitions.
//!
//! ```text
//! cargo run --release -p warden-search --example eval -- POOL.jsonl QUERIES.jsonl
//! ```
//!
//! `POOL.jsonl` holds one function definition a line (`name`, `description`, `parameters`:
//! a JSON Schema); all of them go into one index. `QUERIES.jsonl` holds one query a line
//! (`id`, `category`, `query`, `expected`: function names). `bench/search-eval/prepare.py`
//! writes both from the bfcl-eval data; `bench/search-eval/README.md` describes the method.
//!
//! For each query, the top 10 hits are taken and, for k in 1, 5, 10:
//! - recall@k: the fraction of the query's expected names among the names of the top k
//!   hits, averaged over queries;
//! - all@k: the fraction of queries whose expected names are all in the top k.
//!
//! A pool may define one name more than once; every definition is indexed, and a hit is a
//! hit when its name is expected (duplicates take up places in the top k like any tool).
//! Latency is the wall time of `search(query, 10)`, median and 95th percentile.

use std::collections::BTreeMap;
use std::error::Error;
use std::time::{Duration, Instant};

mod support;

use serde_json::Value;
use support::{read_lines, text};
use warden_search::{Ranking, SearchIndex, ToolDoc, Tuning};

const KS: [usize; 3] = [1, 5, 10];

struct Query {
    category: String,
    text: String,
    expected: Vec<String>,
}

/// Sums for one group of queries.
#[derive(Default)]
struct Tally {
    queries: usize,
    recall: [f64; KS.len()],
    all_found: [usize; KS.len()],
}

impl Tally {
    fn add(&mut self, expected: &[String], ranked: &[&str]) {
        self.queries += 1;
        for (i, k) in KS.iter().enumerate() {
            let top = &ranked[..ranked.len().min(*k)];
            let found = expected
                .iter()
                .filter(|e| top.contains(&e.as_str()))
                .count();
            self.recall[i] += found as f64 / expected.len() as f64;
            if found == expected.len() {
                self.all_found[i] += 1;
            }
        }
    }

    fn row(&self, name: &str) -> String {
        let n = self.queries.max(1) as f64;
        let mut row = format!("| {name} | {} |", self.queries);
        for i in 0..KS.len() {
            row += &format!(" {:.3} |", self.recall[i] / n);
        }
        for i in 1..KS.len() {
            row += &format!(" {:.3} |", self.all_found[i] as f64 / n);
        }
        row
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [pool_path, queries_path] = args.as_slice() else {
        return Err("usage: eval POOL.jsonl QUERIES.jsonl".into());
    };

    let docs: Vec<ToolDoc> = read_lines(pool_path)?
        .iter()
        .map(|f| {
            let name = text(f, "name");
            ToolDoc {
                qualified: format!("bfcl__{name}"),
                server: "bfcl".into(),
                tool: name,
                title: None,
                description: Some(text(f, "description")),
                input_schema: f.get("parameters").cloned().unwrap_or(Value::Null),
                instructions: None,
            }
        })
        .collect();
    let queries: Vec<Query> = read_lines(queries_path)?
        .iter()
        .map(|q| Query {
            category: text(q, "category"),
            text: text(q, "query"),
            expected: q
                .get("expected")
                .and_then(Value::as_array)
                .map(|names| {
                    names
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
        })
        .filter(|q| !q.expected.is_empty())
        .collect();

    let pool_size = docs.len();
    let start = Instant::now();
    // EVAL_RANKING=hybrid ranks with the search model (WARDEN_SEARCH_MODEL), anything else
    // by words; EVAL_TUNING=baseline uses decision 0025's evidence instead of the shipped.
    let hybrid = std::env::var("EVAL_RANKING").is_ok_and(|r| r == "hybrid");
    let tuning = match std::env::var("EVAL_TUNING") {
        Ok(t) if t == "baseline" => Tuning::BASELINE,
        // Decision 0044's evidence: the shipped one without catalogue feedback.
        Ok(t) if t == "nofeedback" => Tuning {
            feedback: 0.0,
            ..Tuning::default()
        },
        _ => Tuning::default(),
    };
    let index = build(docs, hybrid)?;
    let ranking = if hybrid {
        Ranking::Hybrid
    } else {
        Ranking::Lexical
    };
    println!("ranking: {ranking:?}, evidence: {tuning:?}");
    let build_time = start.elapsed();

    let mut overall = Tally::default();
    let mut by_category: BTreeMap<String, Tally> = BTreeMap::new();
    let mut latencies: Vec<Duration> = Vec::with_capacity(queries.len());
    let mut empty = 0;
    for query in &queries {
        let start = Instant::now();
        let hits = index.search_tuned(&query.text, 10, ranking, &tuning);
        latencies.push(start.elapsed());
        if hits.is_empty() {
            empty += 1;
        }
        let ranked: Vec<&str> = hits.iter().map(|h| h.tool.as_str()).collect();
        overall.add(&query.expected, &ranked);
        by_category
            .entry(query.category.clone())
            .or_default()
            .add(&query.expected, &ranked);
    }
    latencies.sort();
    let percentile = |p: usize| {
        latencies
            .get((latencies.len() * p / 100).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };

    println!(
        "pool: {pool_size} definitions ({pool_path}); queries: {} ({queries_path})",
        queries.len()
    );
    println!("index build: {:.1} ms", build_time.as_secs_f64() * 1e3);
    println!(
        "search(query, 10): median {:.1} µs, p95 {:.1} µs; queries with no hit: {empty}",
        percentile(50).as_secs_f64() * 1e6,
        percentile(95).as_secs_f64() * 1e6
    );
    println!();
    println!("| category | queries | recall@1 | recall@5 | recall@10 | all@5 | all@10 |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (name, tally) in &by_category {
        println!("{}", tally.row(name));
    }
    println!("{}", overall.row("**all**"));
    Ok(())
}

/// The index of `docs`, with the search model when `hybrid`.
fn build(docs: Vec<ToolDoc>, hybrid: bool) -> Result<SearchIndex, Box<dyn Error>> {
    if !hybrid {
        return Ok(SearchIndex::lexical(docs));
    }
    #[cfg(feature = "semantic")]
    {
        use warden_search::semantic::{EmbeddingCache, Model, model_dir};
        let model = std::sync::Arc::new(Model::load(&model_dir())?);
        let cache = EmbeddingCache::default();
        // EVAL_VECTORS=table: the static table's tool vectors (decision 0038); by default
        // the encoder's (decision 0044), computed first and kept in the model directory.
        if std::env::var("EVAL_VECTORS").is_ok_and(|v| v == "table") {
            return Ok(SearchIndex::with_table_vectors(docs, model, &cache));
        }
        let texts = SearchIndex::encoder_texts(&docs);
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let start = std::time::Instant::now();
        let encoded = cache.encode(&model, &texts)?;
        println!(
            "encoder tool vectors: {encoded} computed in {:.1} s",
            start.elapsed().as_secs_f64()
        );
        Ok(SearchIndex::with_model(docs, model, &cache))
    }
    #[cfg(not(feature = "semantic"))]
    Err("EVAL_RANKING=hybrid needs the semantic feature".into())
}
