//! Retrieval quality of lexical, semantic and hybrid tool search on real MCP tools.
//!
//! ```text
//! cargo run --release -p warden-search --example tool_eval -- POOL.jsonl QUERIES.jsonl [MODEL_DIR]
//! ```
//!
//! `POOL.jsonl`: one tool a line (`server`, `name`, `description`, `parameters`: a JSON
//! Schema). `QUERIES.jsonl`: one request a line (`id`, `category`, `query`, `expected`:
//! tool names). `bench/search-eval/prepare_livemcp.py` writes both from LiveMCPBench;
//! `bench/search-eval/README.md` describes the method. `MODEL_DIR` defaults to the
//! search model's usual place (`WARDEN_SEARCH_MODEL`); without a model only the lexical
//! rows are printed.
//!
//! Per ranking, over all requests: recall@k (the fraction of a request's expected tools
//! among the names of the top k hits, averaged) for k = 5, 10, 20, and all@k (the
//! fraction of requests with every expected tool in the top k) for k = 10, 20. A name that
//! several servers define is found by any of them. Latency: median and 95th percentile of
//! one `search(query, 20)`, query embedding included.
//!
//! **Dev and test halves.** A request is in the dev half when the lowest bit of the first
//! byte of the SHA-256 of its `id` is 0, else in the test half (a fixed rule, chosen
//! before any result was seen because it splits LiveMCPBench's 94 requests 47/47).
//! Ranking changes are tried on the dev half only; the test half checks them once.
//! `TOOL_EVAL_SPLIT=dev` (or `test`, `all`) prints only that part; by default all three.
//!
//! **Variants.** Each ranking is measured with the shipped combination of evidence
//! ([`Tuning::default`]), with decision 0025's (`baseline`), and with each part alone
//! (steps of a multi-step request, server-level evidence, centred cosines), so what each
//! adds shows. `TOOL_EVAL_TUNING=PREFIX` keeps only the variants whose name starts with
//! it; `TOOL_EVAL_CUSTOM="steps=blend,server=0.3,centre=1,lexical=0.5"` adds
//! one more. `TOOL_EVAL_MISSES=1` prints each request's missed tools (shipped evidence),
//! `TOOL_EVAL_RANKS=1` the rank of every expected tool, `TOOL_EVAL_PER_REQUEST=FILE` every
//! request's five measures under every ranking and evidence (JSON lines, for
//! `bench/search-eval/paired.py`).
//!
//! **Tool vectors.** By default every tool is first embedded by the whole encoder
//! (decision 0044; stored in the model directory, so only the first run pays) and the
//! index uses those vectors; `TOOL_EVAL_VECTORS=table` keeps the static table's.
//! `TOOL_EVAL_CONTEXTUAL=1` adds the encoder-on-requests experiment (its cost per request
//! and, in decision 0025's simple mix, table and encoder vectors on either side);
//! `TOOL_EVAL_NAMES_FOR_FOREIGN=1` leaves out descriptions that are mostly CJK.

use std::collections::BTreeMap;
use std::error::Error;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod support;

use serde_json::Value;
use sha2::{Digest, Sha256};
use support::{read_lines, text};
use warden_search::semantic::{ContextualEncoder, EmbeddingCache, Model, model_dir};
use warden_search::{Ranking, SearchIndex, StepFusion, ToolDoc, Tuning};

const KS: [usize; 3] = [5, 10, 20];

struct Query {
    id: String,
    dev: bool,
    category: String,
    text: String,
    expected: Vec<String>,
}

#[derive(Default, Clone)]
struct Tally {
    queries: usize,
    recall: [f64; KS.len()],
    all_found: [usize; KS.len()],
}

/// One request's five measures: recall@5, @10, @20, then all@10 and all@20 (1 or 0).
fn measures(expected: &[String], ranked: &[String]) -> [f64; 5] {
    let mut out = [0.0; 5];
    for (i, k) in KS.iter().enumerate() {
        let top = &ranked[..ranked.len().min(*k)];
        let found = expected.iter().filter(|e| top.contains(e)).count();
        out[i] = found as f64 / expected.len() as f64;
        if i > 0 && found == expected.len() {
            out[2 + i] = 1.0;
        }
    }
    out
}

impl Tally {
    fn add(&mut self, expected: &[String], ranked: &[String]) {
        self.queries += 1;
        for (i, k) in KS.iter().enumerate() {
            let top = &ranked[..ranked.len().min(*k)];
            let found = expected.iter().filter(|e| top.contains(e)).count();
            self.recall[i] += found as f64 / expected.len() as f64;
            if found == expected.len() {
                self.all_found[i] += 1;
            }
        }
    }

    fn row(&self, name: &str, latency: Option<(Duration, Duration)>) -> String {
        let n = self.queries.max(1) as f64;
        let mut row = format!("| {name} | {} |", self.queries);
        for r in self.recall {
            row += &format!(" {:.3} |", r / n);
        }
        for a in &self.all_found[1..] {
            row += &format!(" {:.3} |", *a as f64 / n);
        }
        if let Some((p50, p95)) = latency {
            row += &format!(" {:.1} µs / {:.1} µs |", micros(p50), micros(p95));
        }
        row
    }
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn percentiles(mut times: Vec<Duration>) -> (Duration, Duration) {
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.95))
}

/// Reciprocal-rank fusion of two rankings (k = 60), for comparison only.
fn rrf(a: &[String], b: &[String]) -> Vec<String> {
    let mut score: BTreeMap<&str, f64> = BTreeMap::new();
    for list in [a, b] {
        for (rank, name) in list.iter().enumerate() {
            *score.entry(name).or_default() += 1.0 / (60.0 + rank as f64 + 1.0);
        }
    }
    let mut ranked: Vec<(&str, f64)> = score.into_iter().collect();
    ranked.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(y.0)));
    ranked.into_iter().map(|(n, _)| n.to_owned()).collect()
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (pool_path, queries_path, dir) = match args.as_slice() {
        [p, q] => (p, q, model_dir()),
        [p, q, d] => (p, q, PathBuf::from(d)),
        _ => return Err("usage: tool_eval POOL.jsonl QUERIES.jsonl [MODEL_DIR]".into()),
    };
    let docs: Vec<ToolDoc> = read_lines(pool_path)?
        .iter()
        .map(|f| {
            let (server, name) = (text(f, "server"), text(f, "name"));
            ToolDoc {
                qualified: format!("{server}__{name}"),
                server,
                tool: name,
                title: None,
                description: Some(text(f, "description")).filter(|d| {
                    // TOOL_EVAL_NAMES_FOR_FOREIGN=1 (an experiment, decision 0044): a
                    // description mostly in CJK script is left out, so the tool is
                    // ranked by its name and parameters.
                    std::env::var_os("TOOL_EVAL_NAMES_FOR_FOREIGN").is_none() || !mostly_cjk(d)
                }),
                input_schema: f.get("parameters").cloned().unwrap_or(Value::Null),
                // With TOOL_EVAL_INSTRUCTIONS set, the server's catalogue description stands
                // in for its instructions (LiveMCPBench did not record `instructions`).
                instructions: std::env::var_os("TOOL_EVAL_INSTRUCTIONS")
                    .map(|_| text(f, "server_description"))
                    .filter(|d| !d.is_empty()),
            }
        })
        .collect();
    let queries: Vec<Query> = read_lines(queries_path)?
        .iter()
        .map(|q| Query {
            id: text(q, "id"),
            dev: Sha256::digest(text(q, "id").as_bytes())[0] & 1 == 0,
            category: text(q, "category"),
            text: text(q, "query"),
            expected: q
                .get("expected")
                .and_then(Value::as_array)
                .map(|v| {
                    v.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
        })
        .filter(|q| !q.expected.is_empty())
        .collect();
    println!("pool: {} tools; queries: {}", docs.len(), queries.len());

    let model = match Model::load(&dir) {
        Ok(model) => {
            println!(
                "model: {} loaded in {:.0} ms, token table {:.1} MiB",
                dir.display(),
                model.load_time().as_secs_f64() * 1e3,
                model.table_bytes() as f64 / (1024.0 * 1024.0)
            );
            Some(Arc::new(model))
        }
        Err(e) => {
            println!("no model ({e}): lexical only");
            None
        }
    };
    let texts: Vec<String> = docs.iter().map(plain_text).collect();
    let start = Instant::now();
    // TOOL_EVAL_VECTORS=table: the static table's tool vectors (decision 0038); by default
    // the encoder's (decision 0044), computed first (and kept in the model directory).
    let table = std::env::var("TOOL_EVAL_VECTORS").is_ok_and(|v| v == "table");
    let cache = EmbeddingCache::default();
    if let (Some(m), false) = (&model, table) {
        let wanted = SearchIndex::encoder_texts(&docs);
        let wanted: Vec<&str> = wanted.iter().map(String::as_str).collect();
        let encoded = cache.encode(m, &wanted)?;
        println!(
            "encoder tool vectors: {encoded} computed in {:.1} s (the others were stored)",
            start.elapsed().as_secs_f64()
        );
    }
    let start = Instant::now();
    let mut index = match &model {
        Some(m) if table => SearchIndex::with_table_vectors(docs, Arc::clone(m), &cache),
        Some(m) => SearchIndex::with_model(docs, Arc::clone(m), &cache),
        None => SearchIndex::lexical(docs),
    };
    println!(
        "index build (embedding every tool): {:.1} ms; tool vectors: {}",
        start.elapsed().as_secs_f64() * 1e3,
        if index.encoder_vectors() {
            "encoder"
        } else {
            "static table"
        }
    );

    // TOOL_EVAL_MAP=RIDGE (QUERY_MAP_RIDGE is 1): fit the request map
    // (`SearchIndex::fit_query_map`, decision 0052) and measure it (`request map` variant;
    // `map=1,mlexical=W` in TOOL_EVAL_CUSTOM).
    let map_ridge: Option<f32> = std::env::var("TOOL_EVAL_MAP")
        .ok()
        .map(|v| v.parse())
        .transpose()?;
    if let Some(ridge) = map_ridge {
        let start = Instant::now();
        index.fit_query_map(ridge);
        println!(
            "request map fitted (ridge {ridge}) in {:.1} ms",
            start.elapsed().as_secs_f64() * 1e3
        );
    }
    let splits: Vec<&str> = match std::env::var("TOOL_EVAL_SPLIT") {
        Ok(only) => ["dev", "test", "all"]
            .into_iter()
            .filter(|n| *n == only)
            .collect(),
        Err(_) => vec!["dev", "test", "all"],
    };
    for split in &splits {
        let n = queries.iter().filter(|q| in_split(split, q)).count();
        println!("{split}: {n} requests");
    }

    let mut rankings = vec![("lexical", Ranking::Lexical)];
    if model.is_some() {
        rankings.push(("semantic", Ranking::Semantic));
        rankings.push(("hybrid", Ranking::Hybrid));
    }
    let mut tunings: Vec<(String, Tuning)> = vec![
        ("shipped".into(), Tuning::default()),
        ("baseline (decision 0025)".into(), Tuning::BASELINE),
    ];
    for (name, steps) in [
        ("max", StepFusion::Max),
        ("blend", StepFusion::Blend),
        ("mean", StepFusion::Mean),
    ] {
        tunings.push((
            format!("steps {name}"),
            Tuning {
                steps,
                ..Tuning::BASELINE
            },
        ));
    }
    for weight in [0.2, 0.3, 0.5] {
        tunings.push((
            format!("server {weight}"),
            Tuning {
                server_weight: weight,
                ..Tuning::BASELINE
            },
        ));
    }
    tunings.push((
        "shipped without query idf".into(),
        Tuning {
            query_idf: false,
            ..Tuning::default()
        },
    ));
    tunings.push((
        "shipped without feedback (decision 0044)".into(),
        Tuning {
            feedback: 0.0,
            ..Tuning::default()
        },
    ));
    tunings.push((
        "centred".into(),
        Tuning {
            centre: true,
            ..Tuning::BASELINE
        },
    ));
    if map_ridge.is_some() {
        tunings.push((
            "request map (decision 0052, not adopted)".into(),
            Tuning {
                query_map: true,
                ..Tuning::default()
            },
        ));
    }
    // TOOL_EVAL_CUSTOM="steps=max,server=0.3,centre=1" adds one more combination.
    if let Ok(custom) = std::env::var("TOOL_EVAL_CUSTOM") {
        let mut tuning = Tuning::BASELINE;
        for pair in custom.split(',') {
            match pair.split_once('=') {
                Some(("steps", "max")) => tuning.steps = StepFusion::Max,
                Some(("steps", "blend")) => tuning.steps = StepFusion::Blend,
                Some(("steps", "mean")) => tuning.steps = StepFusion::Mean,
                Some(("server", w)) => tuning.server_weight = w.parse()?,
                Some(("centre", c)) => tuning.centre = c == "1",
                Some(("lexical", w)) => tuning.lexical_weight = w.parse()?,
                Some(("idf", c)) => tuning.query_idf = c == "1",
                Some(("feedback", w)) => tuning.feedback = w.parse()?,
                Some(("depth", d)) => tuning.feedback_depth = d.parse()?,
                Some(("mlexical", w)) => tuning.mapped_lexical_weight = w.parse()?,
                Some(("map", c)) => tuning.query_map = c == "1",
                _ => return Err(format!("TOOL_EVAL_CUSTOM: cannot read {pair:?}").into()),
            }
        }
        tunings.push((format!("custom {custom}"), tuning));
    }
    // TOOL_EVAL_GRID=1: a grid of the fusion's constants around the shipped ones (for
    // choosing them on the dev half only; read with TOOL_EVAL_SPLIT=dev).
    if std::env::var_os("TOOL_EVAL_GRID").is_some() {
        for lexical in [0.4, 0.5, 0.6] {
            for server in [0.2, 0.3, 0.4] {
                for feedback in [0.0, 0.2, 0.3, 0.4, 0.5] {
                    for depth in [3, 5, 8] {
                        if feedback == 0.0 && depth != 5 {
                            continue;
                        }
                        tunings.push((
                            format!(
                                "grid lexical={lexical},server={server},feedback={feedback},depth={depth}"
                            ),
                            Tuning {
                                lexical_weight: lexical,
                                server_weight: server,
                                feedback,
                                feedback_depth: depth,
                                ..Tuning::default()
                            },
                        ));
                    }
                }
            }
        }
    }
    if let Ok(only) = std::env::var("TOOL_EVAL_TUNING") {
        tunings.retain(|(name, _)| name.starts_with(&only));
    }
    // TOOL_EVAL_PER_REQUEST=FILE: every request's five measures under every ranking and
    // evidence, one JSON line each, for paired comparisons (`bench/search-eval/paired.py`).
    let mut per_request = match std::env::var_os("TOOL_EVAL_PER_REQUEST") {
        Some(path) => Some(std::io::BufWriter::new(std::fs::File::create(path)?)),
        None => None,
    };
    println!(
        "\n| ranking | evidence | split | queries | recall@5 | recall@10 | recall@20 | all@10 | all@20 | p50 / p95 |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut per_ranking: BTreeMap<&str, Vec<Vec<String>>> = BTreeMap::new();
    let mut by_category: BTreeMap<String, Tally> = BTreeMap::new();
    for (name, ranking) in &rankings {
        for (tuning_name, tuning) in &tunings {
            let mut tallies = vec![Tally::default(); splits.len()];
            let mut times = Vec::new();
            let mut lists = Vec::new();
            for query in &queries {
                let start = Instant::now();
                let hits = index.search_tuned(&query.text, 20, *ranking, tuning);
                times.push(start.elapsed());
                let ranked: Vec<String> = hits.into_iter().map(|h| h.tool).collect();
                if let Some(out) = &mut per_request
                    && splits.iter().any(|split| in_split(split, query))
                {
                    let m = measures(&query.expected, &ranked);
                    let line = serde_json::json!({
                        "ranking": name,
                        "evidence": tuning_name,
                        "id": query.id,
                        "dev_half": query.dev,
                        "measures": m,
                    });
                    writeln!(out, "{line}")?;
                }
                for (split, tally) in splits.iter().zip(&mut tallies) {
                    if in_split(split, query) {
                        tally.add(&query.expected, &ranked);
                    }
                }
                if std::env::var_os("TOOL_EVAL_MISSES").is_some()
                    && splits.iter().any(|split| in_split(split, query))
                    && *tuning == Tuning::default()
                {
                    let missed: Vec<&String> = query
                        .expected
                        .iter()
                        .filter(|e| !ranked[..ranked.len().min(10)].contains(e))
                        .collect();
                    if !missed.is_empty() {
                        println!(
                            "MISS {name}: {:?} missed {missed:?}; top10 {:?}",
                            query.text,
                            &ranked[..ranked.len().min(10)]
                        );
                    }
                }
                if std::env::var_os("TOOL_EVAL_RANKS").is_some()
                    && splits.iter().any(|split| in_split(split, query))
                {
                    let all: Vec<String> = index
                        .search_tuned(&query.text, 10_000, *ranking, tuning)
                        .into_iter()
                        .map(|h| h.tool)
                        .collect();
                    for e in &query.expected {
                        let rank = all.iter().position(|t| t == e).map_or(9999, |r| r + 1);
                        println!("RANK {name} {tuning_name} {rank} {e}");
                    }
                }
                if *ranking == Ranking::Hybrid && *tuning == Tuning::default() {
                    by_category
                        .entry(query.category.clone())
                        .or_default()
                        .add(&query.expected, &ranked);
                }
                lists.push(ranked);
            }
            let latency = percentiles(times);
            for (split, tally) in splits.iter().zip(&tallies) {
                println!(
                    "{}",
                    tally.row(&format!("{name} | {tuning_name} | {split}"), Some(latency))
                );
            }
            if *tuning == Tuning::BASELINE {
                per_ranking.insert(name, lists);
            }
        }
    }
    if let Some(out) = &mut per_request {
        out.flush()?;
    }
    if let (Some(lex), Some(sem)) = (per_ranking.get("lexical"), per_ranking.get("semantic")) {
        for split in &splits {
            let mut tally = Tally::default();
            for (i, query) in queries.iter().enumerate() {
                if in_split(split, query) {
                    tally.add(&query.expected, &rrf(&lex[i], &sem[i]));
                }
            }
            println!(
                "{}",
                tally.row(
                    &format!("RRF of lexical and semantic top 20 (k = 60) | baseline | {split}"),
                    None
                )
            );
        }
    }
    if std::env::var_os("TOOL_EVAL_CONTEXTUAL").is_some()
        && let Some(model) = &model
    {
        contextual(&dir, model, &index, &texts, &queries, &splits)?;
    }
    if !by_category.is_empty() && splits.len() == 3 {
        println!("\nhybrid (shipped) by category, all requests:\n");
        println!("| category | queries | recall@5 | recall@10 | recall@20 | all@10 | all@20 |");
        println!("|---|---:|---:|---:|---:|---:|---:|");
        for (category, tally) in &by_category {
            println!("{}", tally.row(category, None));
        }
    }
    Ok(())
}

/// Whether `query` is in the named half (`all`: every request).
fn in_split(split: &str, query: &Query) -> bool {
    match split {
        "dev" => query.dev,
        "test" => !query.dev,
        _ => true,
    }
}

/// A tool's text for the contextual experiment: its qualified name, description and
/// parameter names (close to what the index embeds).
fn plain_text(doc: &ToolDoc) -> String {
    let params: Vec<&str> = doc
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    format!(
        "{}\n{}\n{}",
        doc.qualified.replace("__", " "),
        doc.description.as_deref().unwrap_or_default(),
        params.join(" ")
    )
}

fn cosines(tools: &[Option<Vec<f32>>], query: Option<&Vec<f32>>) -> Vec<f64> {
    tools
        .iter()
        .map(|t| match (t, query) {
            (Some(t), Some(q)) => f64::from(t.iter().zip(q).map(|(a, b)| a * b).sum::<f32>()),
            _ => 0.0,
        })
        .collect()
}

/// `0.5 · l/max l + 0.5 · max(0, (c − mean c)/(max c − mean c))`, or the cosine part alone.
fn simple_mix(words: &[f64], cos: &[f64], semantic_only: bool) -> Vec<f64> {
    let n = cos.len().max(1) as f64;
    let mean = cos.iter().sum::<f64>() / n;
    let max = cos.iter().copied().fold(f64::MIN, f64::max);
    let top = words.iter().copied().fold(0.0, f64::max);
    words
        .iter()
        .zip(cos)
        .map(|(&w, &c)| {
            let c = if max - mean > 1e-9 {
                ((c - mean) / (max - mean)).max(0.0)
            } else {
                0.0
            };
            if semantic_only {
                c
            } else {
                0.5 * if top > 0.0 { w / top } else { 0.0 } + 0.5 * c
            }
        })
        .collect()
}

/// The whole encoder (`ContextualEncoder`) against the static table, both in the same
/// simple ranking (decision 0025's mix, no steps or servers): tools and requests embedded
/// by the encoder, or both by the table. Prints the encoder's cost per request.
fn contextual(
    dir: &std::path::Path,
    model: &Model,
    index: &SearchIndex,
    texts: &[String],
    queries: &[Query],
    splits: &[&str],
) -> Result<(), Box<dyn Error>> {
    let start = Instant::now();
    let encoder = ContextualEncoder::load(dir)?;
    println!(
        "\ncontextual encoder loaded in {:.0} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    let start = Instant::now();
    let contextual_tools: Vec<Option<Vec<f32>>> = texts.iter().map(|t| encoder.embed(t)).collect();
    println!(
        "embedding {} tools with the encoder: {:.1} s",
        texts.len(),
        start.elapsed().as_secs_f64()
    );
    let static_tools: Vec<Option<Vec<f32>>> = texts.iter().map(|t| model.embed(t)).collect();
    // Centred on the catalogue's mean (as the shipped ranking centres cosines), so that a
    // static query vector can be compared with encoder tool vectors.
    let centre = |tools: &[Option<Vec<f32>>]| -> (Vec<Option<Vec<f32>>>, Vec<f32>) {
        let dim = model.dim();
        let mut mean = vec![0f32; dim];
        let present: Vec<&Vec<f32>> = tools.iter().flatten().collect();
        for v in &present {
            for (m, x) in mean.iter_mut().zip(v.iter()) {
                *m += x / present.len() as f32;
            }
        }
        let centred = tools
            .iter()
            .map(|t| {
                t.as_ref()
                    .map(|v| unit(v.iter().zip(&mean).map(|(a, b)| a - b).collect()))
            })
            .collect();
        (centred, mean)
    };
    let (contextual_centred, contextual_mean) = centre(&contextual_tools);
    let (_, static_mean) = centre(&static_tools);
    let mut times = Vec::new();
    let mut rows: BTreeMap<&str, Vec<Tally>> = BTreeMap::new();
    for query in queries {
        let start = Instant::now();
        let q_ctx = encoder.embed(&query.text);
        times.push(start.elapsed());
        let q_static = model.embed(&query.text);
        let hits = index.search_tuned(&query.text, 100_000, Ranking::Lexical, &Tuning::BASELINE);
        let mut words = vec![0.0; texts.len()];
        let mut tool_of: Vec<String> = vec![String::new(); texts.len()];
        // Hits carry the qualified name; map them back to the tools' order by name.
        for h in &hits {
            if let Some(i) = texts
                .iter()
                .position(|t| t.starts_with(&format!("{}\n", h.qualified.replace("__", " "))))
            {
                words[i] = h.score;
            }
        }
        for (i, t) in texts.iter().enumerate() {
            let first = t.lines().next().unwrap_or_default();
            tool_of[i] = first.split_once(' ').map_or(first, |(_, n)| n).to_owned();
        }
        let q_mixed = q_static
            .as_ref()
            .map(|q| unit(q.iter().zip(&static_mean).map(|(a, b)| a - b).collect()));
        let _ = &contextual_mean;
        for (label, tools, q) in [
            ("static", &static_tools, q_static.as_ref()),
            ("contextual", &contextual_tools, q_ctx.as_ref()),
            ("mixed", &contextual_centred, q_mixed.as_ref()),
        ] {
            let cos = cosines(tools, q);
            for (kind, semantic_only) in [("semantic", true), ("simple hybrid", false)] {
                let scores = simple_mix(&words, &cos, semantic_only);
                let mut order: Vec<usize> =
                    (0..scores.len()).filter(|&i| scores[i] > 0.0).collect();
                order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
                let ranked: Vec<String> =
                    order.iter().take(20).map(|&i| tool_of[i].clone()).collect();
                let key: &str = match (label, kind) {
                    ("static", "semantic") => "static table | semantic",
                    ("static", _) => "static table | simple hybrid",
                    ("mixed", "semantic") => "static query, encoder tools (centred) | semantic",
                    ("mixed", _) => "static query, encoder tools (centred) | simple hybrid",
                    (_, "semantic") => "contextual encoder | semantic",
                    _ => "contextual encoder | simple hybrid",
                };
                let tallies = rows
                    .entry(key)
                    .or_insert_with(|| vec![Tally::default(); splits.len()]);
                for (split, tally) in splits.iter().zip(tallies.iter_mut()) {
                    if in_split(split, query) {
                        tally.add(&query.expected, &ranked);
                    }
                }
            }
        }
    }
    let (p50, p95) = percentiles(times);
    println!(
        "encoder per request (at most {} tokens): p50 {:.1} ms, p95 {:.1} ms",
        warden_search::semantic::CONTEXTUAL_TOKEN_CAP,
        micros(p50) / 1e3,
        micros(p95) / 1e3
    );
    for (key, tallies) in rows {
        for (split, tally) in splits.iter().zip(&tallies) {
            println!("{}", tally.row(&format!("{key} | {split}"), None));
        }
    }
    Ok(())
}

/// `v` scaled to length 1 (unless it is zero).
fn unit(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > f32::EPSILON {
        for x in &mut v {
            *x /= norm;
        }
    }
    v
}

/// Whether most letters of `text` are CJK ideographs or kana.
fn mostly_cjk(text: &str) -> bool {
    let (mut cjk, mut letters) = (0usize, 0usize);
    for c in text.chars().filter(|c| c.is_alphabetic()) {
        letters += 1;
        if matches!(c as u32, 0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF)
        {
            cjk += 1;
        }
    }
    letters > 0 && cjk * 2 > letters
}
