//! Trains the description scanner's sentence model from `data/scanner/train.jsonl` and
//! writes `data/scanner/model.bin`.
//!
//! Run: `cargo run --release -p warden-policy --example train_scanner` (add `-- --check`
//! to train and report without writing, `-- --verbose` to list the honest training
//! definitions that score highest out of fold). Deterministic: the same data gives the same
//! bytes.
//!
//! What it does:
//! 1. Cuts every training definition into the sentences the scanner reads
//!    ([`warden_policy::scan::units`]). A sentence of a poisoned definition is a positive
//!    when it lies inside one of the record's injected texts (`inject`), or is text decoded
//!    from an encoding in a poisoned definition; every other sentence is a negative (the
//!    honest carrier text of a poisoned definition included).
//! 2. Fits a logistic regression over the hashed features
//!    ([`warden_policy::scan::features`]) by AdaGrad with L2, positives weighted so both
//!    classes count equally.
//! 3. Calibrates the threshold on out-of-fold scores: five folds grouped by server, each
//!    scored by a model trained on the other four; a definition scores the maximum of its
//!    sentences (new sentences of an update get the bonus). The threshold is the lowest
//!    that keeps the out-of-fold false-positive rate at or under [`TARGET_FPR`] on real
//!    definitions, on generated honest definitions of everyday domains and on generated
//!    hard-but-honest ones (a sentence one server repeats counted once), and not under
//!    [`MIN_THRESHOLD`].
//! 4. Trains on everything and writes the weights with that threshold.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::Value;
use warden_policy::scan::features::{BUCKETS, hashed};
use warden_policy::scan::model::Model;
use warden_policy::scan::segment::Kind;
use warden_policy::scan::{ToolText, unit_tokens, units};

/// The out-of-fold false-positive rate on real definitions the threshold is set for.
const TARGET_FPR: f64 = 0.005;
/// The threshold is never set below this. Revision 2 of decision 0027 raised it to 0.6
/// after seeing held-out curves; revision 3 puts it back to 0.5, a sanity bound only, and
/// lets the out-of-fold rule decide on three honest categories (real, generated everyday,
/// generated hard-but-honest: 5,203 definitions, 3,910 distinct scores) instead of two.
const MIN_THRESHOLD: f32 = 0.5;
/// Log-odds added to a sentence that is new since the pinned definition.
const UPDATE_BONUS: f32 = 1.5;
const EPOCHS: usize = 12;
const LEARNING_RATE: f32 = 0.4;
const L2: f32 = 1e-3;
const FOLDS: usize = 5;

struct Example {
    features: Vec<(usize, f32)>,
    label: bool,
    /// How much a mistake on it costs: sentences of real definitions count
    /// [`REAL_WEIGHT`] times, since flagging honest servers is what users see most.
    weight: f32,
}

/// The weight of a sentence of a real public definition.
const REAL_WEIGHT: f32 = 3.0;

/// One sentence: its hashed features, whether it is injected text, whether it is new since
/// the pinned definition.
type Sentence = (Vec<(usize, f32)>, bool, bool);

struct Record {
    id: String,
    server: String,
    group: usize,
    label: bool,
    category: String,
    /// Per sentence: (features, label, added).
    sentences: Vec<Sentence>,
}

fn normalized(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

fn group_of(server: &str) -> usize {
    // FNV-1a of the server's name: records of one server stay in one fold.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in server.trim_start_matches("poisoned-").bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (hash % FOLDS as u64) as usize
}

fn load(path: &PathBuf) -> Vec<Record> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let rec: Value = serde_json::from_str(line).unwrap();
        let label = rec["label"].as_i64() == Some(1);
        let injected: Vec<String> = rec["inject"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).map(normalized).collect())
            .unwrap_or_default();
        let mut tool = ToolText::from_definition(&rec["tool"]);
        if rec["previous"].is_object() {
            tool.previous = Some(&rec["previous"]);
        }
        let mut sentences = Vec::new();
        for unit in units(&tool) {
            let tokens = unit_tokens(&unit);
            if tokens.is_empty() {
                continue;
            }
            let text = normalized(&unit.text);
            let positive = label
                && (unit.kind == Kind::Decoded
                    || (tokens.len() >= 4 && injected.iter().any(|inj| inj.contains(&text))));
            sentences.push((hashed(unit.kind, &tokens), positive, unit.added));
        }
        out.push(Record {
            id: rec["id"].as_str().unwrap_or_default().to_owned(),
            server: rec["server"].as_str().unwrap_or_default().to_owned(),
            group: group_of(rec["server"].as_str().unwrap_or_default()),
            label,
            category: rec["category"].as_str().unwrap_or_default().to_owned(),
            sentences,
        });
    }
    out
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

struct Xorshift(u64);

impl Xorshift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn train(examples: &[Example]) -> (f32, Vec<f32>) {
    let positives = examples.iter().filter(|e| e.label).count().max(1);
    let negatives = (examples.len() - positives).max(1);
    // Positives count more, but not fully balanced: text unlike anything seen should lean
    // towards honest, or every unfamiliar description would sit near the threshold.
    let positive_weight = (negatives as f32 / positives as f32).sqrt();
    let mut weights = vec![0f32; BUCKETS];
    let mut squares = vec![1e-8f32; BUCKETS];
    let mut bias = 0f32;
    let mut bias_square = 1e-8f32;
    let mut order: Vec<usize> = (0..examples.len()).collect();
    let mut rng = Xorshift(0x5eed_0017);
    for _ in 0..EPOCHS {
        for i in (1..order.len()).rev() {
            let j = (rng.next() % (i as u64 + 1)) as usize;
            order.swap(i, j);
        }
        for &i in &order {
            let example = &examples[i];
            let z: f32 = bias
                + example
                    .features
                    .iter()
                    .map(|&(j, v)| weights[j] * v)
                    .sum::<f32>();
            let y = if example.label { 1.0 } else { 0.0 };
            let class_weight = if example.label {
                positive_weight
            } else {
                example.weight
            };
            let g = (sigmoid(z) - y) * class_weight;
            for &(j, v) in &example.features {
                let grad = g * v + L2 * weights[j];
                squares[j] += grad * grad;
                weights[j] -= LEARNING_RATE * grad / squares[j].sqrt();
            }
            bias_square += g * g;
            bias -= LEARNING_RATE * g / bias_square.sqrt();
        }
    }
    (bias, weights)
}

fn examples_of<'a>(records: impl Iterator<Item = &'a Record>) -> Vec<Example> {
    let mut seen: HashMap<Vec<(usize, u32)>, usize> = HashMap::new();
    let mut out: Vec<Example> = Vec::new();
    for record in records {
        let weight = if record.category == "real" {
            REAL_WEIGHT
        } else {
            1.0
        };
        for (features, label, _) in &record.sentences {
            let key: Vec<(usize, u32)> = features.iter().map(|&(j, v)| (j, v.to_bits())).collect();
            match seen.get(&key) {
                // The same sentence as positive and negative: positive wins (a carrier
                // sentence never equals an injected one; an injected one repeated does).
                Some(&at) => {
                    out[at].label |= *label;
                    out[at].weight = out[at].weight.max(weight);
                }
                None => {
                    seen.insert(key, out.len());
                    out.push(Example {
                        features: features.clone(),
                        label: *label,
                        weight,
                    });
                }
            }
        }
    }
    out
}

fn record_score(bias: f32, weights: &[f32], record: &Record) -> f32 {
    record
        .sentences
        .iter()
        .map(|(features, _, added)| {
            let z = bias + features.iter().map(|&(j, v)| weights[j] * v).sum::<f32>();
            sigmoid(z + if *added { UPDATE_BONUS } else { 0.0 })
        })
        .fold(0.0, f32::max)
}

fn main() {
    let check = std::env::args().any(|a| a == "--check");
    let verbose = std::env::args().any(|a| a == "--verbose");
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/scanner");
    let records = load(&dir.join("train.jsonl"));
    let sentences: usize = records.iter().map(|r| r.sentences.len()).sum();
    let positives: usize = records
        .iter()
        .map(|r| r.sentences.iter().filter(|s| s.1).count())
        .sum();
    println!(
        "{} definitions, {sentences} sentences, {positives} positive",
        records.len()
    );
    // Out-of-fold scores.
    let mut scored: Vec<(f32, &Record)> = Vec::new();
    for fold in 0..FOLDS {
        let training = examples_of(records.iter().filter(|r| r.group != fold));
        let (bias, weights) = train(&training);
        for record in records.iter().filter(|r| r.group == fold) {
            scored.push((record_score(bias, &weights, record), record));
        }
    }
    // The threshold: the lowest keeping the out-of-fold false-positive rate at or under
    // TARGET_FPR on each large honest category (real public definitions, generated honest
    // ones of everyday domains, generated hard-but-honest ones: 1,800 since the fourth
    // round, enough for a 0.5 % quantile), and not under MIN_THRESHOLD.
    let mut threshold = MIN_THRESHOLD;
    for honest in ["real", "honest-generated", "hard-generated"] {
        // One server's tools often repeat one parameter's documentation word for word
        // (a dozen tools of one API sharing `dateRange`): a sentence repeated by one
        // server counts once, or one honest sentence would set the threshold alone.
        let mut of: Vec<f32> = scored
            .iter()
            .filter(|(_, r)| !r.label && r.category == honest)
            .map(|(s, r)| (r.server.as_str(), s.to_bits()))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .map(|(_, bits)| f32::from_bits(bits))
            .collect();
        of.sort_by(f32::total_cmp);
        let allowed = (of.len() as f64 * TARGET_FPR).floor() as usize;
        let at = of.len().saturating_sub(allowed + 1);
        let lowest = of.get(at).map_or(MIN_THRESHOLD, |s| (s + 1e-4).min(0.995));
        println!(
            "  {honest}: {} distinct scores, threshold at least {lowest:.4}",
            of.len()
        );
        threshold = threshold.max(lowest);
        if verbose {
            let mut top: Vec<&(f32, &Record)> = scored
                .iter()
                .filter(|(_, r)| !r.label && r.category == honest)
                .collect();
            top.sort_by(|a, b| b.0.total_cmp(&a.0));
            for (score, record) in top.iter().take(40) {
                println!("    {score:.3} {}", record.id);
            }
        }
    }
    println!("out-of-fold threshold {threshold:.4}");
    let mut categories: Vec<&str> = scored.iter().map(|(_, r)| r.category.as_str()).collect();
    categories.sort_unstable();
    categories.dedup();
    for category in categories {
        let of: Vec<f32> = scored
            .iter()
            .filter(|(_, r)| r.category == category)
            .map(|(s, _)| *s)
            .collect();
        let flagged = of.iter().filter(|&&s| s >= threshold).count();
        println!(
            "  {category:<14} {flagged:>4} / {:<4} flagged by the model ({:.3})",
            of.len(),
            flagged as f64 / of.len().max(1) as f64
        );
    }
    let (bias, weights) = train(&examples_of(records.iter()));
    let bytes = Model::encode(bias, &weights, threshold, UPDATE_BONUS).unwrap();
    let nonzero = weights.iter().filter(|w| **w != 0.0).count();
    println!("final model: bias {bias:.3}, {nonzero} non-zero weights");
    if !check {
        std::fs::write(dir.join("model.bin"), bytes).unwrap();
        println!("wrote {}", dir.join("model.bin").display());
    }
}
