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
//! 3. Calibrates the threshold on out-of-fold scores, repeated: [`PARTITIONS`] different
//!    partitions of the servers into five folds (records of one server stay in one fold),
//!    each fold scored by a model trained on the other four with the partition's shuffling
//!    seed (a definition scores the maximum of its sentences; new sentences of an update
//!    get the bonus). A partition's threshold is, for each large honest category (real
//!    definitions, generated honest definitions of everyday domains, generated
//!    hard-but-honest ones; a sentence one server repeats counted once), the
//!    Harrell-Davis estimate of the quantile that leaves [`TARGET_FPR`] of it above, and
//!    the same for [`REAL_DEFINITIONS_FPR`] of real definitions with every one counted
//!    (issue 17's goal counts definitions), and the highest of these; the threshold is
//!    the mean of the partitions' thresholds, not under [`MIN_THRESHOLD`]. A
//!    Harrell-Davis estimate is a weighted mean of every order statistic, not one of
//!    them, so it does not jump when one honest sentence moves.
//! 4. Trains on everything [`FINAL_SEEDS`] times with different shuffling seeds and writes
//!    the mean of the weights with that threshold: one shuffling order does not decide a
//!    verdict.
//!
//! `-- --stability N` retrains N times, each with other seeds and 3 % of the training
//! definitions left out at random, and reports how far the threshold and the model's
//! verdicts on the held-out sets move between retrains (`--legacy` does the same with
//! revision 3's rule: one partition, one seed, the 0.5 % order statistic). `-- --cross`
//! measures recall across authors on training data alone (see [`cross_author`]).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::Value;
use warden_policy::scan::features::{BUCKETS, hashed};
use warden_policy::scan::model::Model;
use warden_policy::scan::segment::Kind;
use warden_policy::scan::{ToolText, own_tool_names, unit_tokens, units_in};

/// The out-of-fold false-positive rate on real definitions the threshold is set for.
const TARGET_FPR: f64 = 0.005;
/// The share of real definitions, every one counted, flagged out of fold at the threshold
/// (issue 17's goal is at most 1 %).
const REAL_DEFINITIONS_FPR: f64 = 0.01;
/// The threshold is never set below this. Revision 2 of decision 0027 raised it to 0.6
/// after seeing held-out curves; revision 3 puts it back to 0.5, a sanity bound only, and
/// lets the out-of-fold rule decide on three honest categories (real, generated everyday,
/// generated hard-but-honest: 5,203 definitions, 3,910 distinct scores) instead of two.
const MIN_THRESHOLD: f32 = 0.5;
/// Log-odds added to a sentence that is new since the pinned definition.
const UPDATE_BONUS: f32 = 1.5;
const EPOCHS: usize = 12;
const LEARNING_RATE: f32 = 0.4;
/// L2 penalty. Revision 4 raised it from 1e-3: on training data alone, recall on
/// categories left out by author (`--cross`) rose from 0.748 to 0.756 and the
/// out-of-fold rate of real definitions flagged fell from 1.3 % to 0.3 % (1e-4 and 1e-2
/// were worse on both).
const L2: f32 = 3e-3;
const FOLDS: usize = 5;
/// Partitions of the servers into folds whose out-of-fold scores are averaged.
const PARTITIONS: u64 = 16;
/// Shuffling seeds whose models are averaged into the shipped one.
const FINAL_SEEDS: u64 = 8;
/// Of the training definitions, the share a stability run leaves out.
const STABILITY_DROP: u64 = 3;

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
    /// Who wrote it: the generator or publication (`source` up to " on a carrier").
    author: String,
    server: String,
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

fn group_of(server: &str, partition: u64) -> usize {
    // FNV-1a of the server's name (after the partition's number): records of one server
    // stay in one fold.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let salt = if partition == 0 {
        String::new()
    } else {
        format!("{partition}/")
    };
    for byte in salt
        .bytes()
        .chain(server.trim_start_matches("poisoned-").bytes())
    {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (hash % FOLDS as u64) as usize
}

fn load(path: &PathBuf) -> Vec<Record> {
    let text = std::fs::read_to_string(path).unwrap();
    let records: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The catalogue the scanner would see: each record's server's tool names (its own
    // tools, read as `<own-tool>` when a sentence names them), as `assess` does.
    let names: Vec<(String, String)> = records
        .iter()
        .map(|r| {
            (
                r["server"].as_str().unwrap_or_default().to_owned(),
                r["tool"]["name"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let mut by_server: HashMap<&str, Vec<(&str, &str)>> = HashMap::new();
    for (server, tool) in &names {
        by_server
            .entry(server.as_str())
            .or_default()
            .push((server.as_str(), tool.as_str()));
    }
    let mut out = Vec::new();
    for rec in &records {
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
        let server = rec["server"].as_str().unwrap_or_default();
        let own = own_tool_names(
            server,
            tool.name,
            by_server.get(server).map_or(&[][..], Vec::as_slice),
        );
        for unit in units_in(&tool, &own) {
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
            author: rec["source"]
                .as_str()
                .unwrap_or_default()
                .split(" on a carrier")
                .next()
                .unwrap_or_default()
                .to_owned(),
            server: rec["server"].as_str().unwrap_or_default().to_owned(),
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

fn train(examples: &[Example], seed: u64) -> (f32, Vec<f32>) {
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
    let mut rng = Xorshift(0x5eed_0017 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
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

/// How the threshold is set and the shipped model trained.
#[derive(Clone, Copy)]
struct Rule {
    /// Fold partitions whose out-of-fold scores are averaged.
    partitions: u64,
    /// Shuffling seeds whose models are averaged into the shipped one.
    final_seeds: u64,
    /// Harrell-Davis quantile (true) or the single order statistic (false).
    smooth: bool,
}

/// The rule of revision 4 of decision 0027.
const CURRENT: Rule = Rule {
    partitions: PARTITIONS,
    final_seeds: FINAL_SEEDS,
    smooth: true,
};

/// The rule of revision 3 (for comparison only): one partition, one seed, the order
/// statistic.
const LEGACY: Rule = Rule {
    partitions: 1,
    final_seeds: 1,
    smooth: false,
};

/// The honest categories the threshold is calibrated on.
const HONEST: [&str; 3] = ["real", "honest-generated", "hard-generated"];

/// The Harrell-Davis estimate of the `p` quantile of `sorted` (ascending): the mean of
/// every order statistic weighted by the Beta(p(n+1), (1-p)(n+1)) mass of its cell, so a
/// change of one value moves it by a fraction of that change.
fn harrell_davis(sorted: &[f32], p: f64) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return f64::from(MIN_THRESHOLD);
    }
    let a = p * (n as f64 + 1.0);
    let b = (1.0 - p) * (n as f64 + 1.0);
    const STEPS: usize = 16;
    let mut logs = Vec::with_capacity(n * STEPS);
    for i in 0..n {
        for step in 0..STEPS {
            let x = (i as f64 + (step as f64 + 0.5) / STEPS as f64) / n as f64;
            logs.push((a - 1.0) * x.ln() + (b - 1.0) * (1.0 - x).ln());
        }
    }
    let top = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut total = 0.0;
    let mut sum = 0.0;
    for (i, value) in sorted.iter().enumerate() {
        let mass: f64 = logs[i * STEPS..(i + 1) * STEPS]
            .iter()
            .map(|l| (l - top).exp())
            .sum();
        total += mass;
        sum += mass * f64::from(*value);
    }
    sum / total.max(f64::MIN_POSITIVE)
}

/// The distinct out-of-fold scores of one honest category, ascending: a sentence one
/// server repeats across its tools (a dozen tools of one API sharing a parameter's text)
/// counts once, or one honest sentence would set the threshold alone.
fn honest_scores(scored: &[(f32, &Record)], category: &str) -> Vec<f32> {
    let mut of: Vec<f32> = scored
        .iter()
        .filter(|(_, r)| !r.label && r.category == category)
        .map(|(s, r)| (r.server.as_str(), s.to_bits()))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|(_, bits)| f32::from_bits(bits))
        .collect();
    of.sort_by(f32::total_cmp);
    of
}

/// The threshold for each honest category and overall.
fn threshold_of(scored: &[(f32, &Record)], rule: Rule) -> (f32, Vec<(&'static str, usize, f32)>) {
    // The floor applies to the threshold that is shipped (the mean over partitions under
    // the current rule), not to each partition's; the legacy rule applied it here.
    let mut threshold = if rule.smooth { 0.0 } else { MIN_THRESHOLD };
    let mut each = Vec::new();
    for honest in HONEST {
        let of = honest_scores(scored, honest);
        let lowest = if rule.smooth {
            (harrell_davis(&of, 1.0 - TARGET_FPR) as f32).min(0.995)
        } else {
            let allowed = (of.len() as f64 * TARGET_FPR).floor() as usize;
            let at = of.len().saturating_sub(allowed + 1);
            of.get(at).map_or(MIN_THRESHOLD, |s| (s + 1e-4).min(0.995))
        };
        each.push((honest, of.len(), lowest));
        threshold = threshold.max(lowest);
    }
    if rule.smooth {
        // Issue 17's goal counts definitions, not distinct sentences: at most 1 % of real
        // definitions flagged, out of fold, every repeated one counted.
        let mut all: Vec<f32> = scored
            .iter()
            .filter(|(_, r)| !r.label && r.category == "real")
            .map(|(s, _)| *s)
            .collect();
        all.sort_by(f32::total_cmp);
        let lowest = (harrell_davis(&all, 1.0 - REAL_DEFINITIONS_FPR) as f32).min(0.995);
        each.push(("real (every definition)", all.len(), lowest));
        threshold = threshold.max(lowest);
    }
    (threshold, each)
}

/// A trained model and its calibration.
struct Trained<'a> {
    bias: f32,
    weights: Vec<f32>,
    threshold: f32,
    /// The threshold of each partition (their mean is `threshold`).
    thresholds: Vec<f32>,
    /// Per honest category: distinct scores and its threshold (means over partitions).
    each: Vec<(&'static str, usize, f32)>,
    /// Mean out-of-fold score of every training definition.
    scored: Vec<(f32, &'a Record)>,
}

/// Out-of-fold calibration and the final model under `rule`; `seed` varies every
/// shuffling order (0 is the shipped model's).
fn fit<'a>(records: &[&'a Record], rule: Rule, seed: u64) -> Trained<'a> {
    let mut sums = vec![0f32; records.len()];
    let mut thresholds = Vec::new();
    let mut each: Vec<(&'static str, usize, f32)> = Vec::new();
    for partition in 0..rule.partitions {
        let groups: Vec<usize> = records
            .iter()
            .map(|r| group_of(&r.server, partition))
            .collect();
        let mut scores = vec![0f32; records.len()];
        for fold in 0..FOLDS {
            let training = examples_of(
                records
                    .iter()
                    .zip(&groups)
                    .filter(|(_, g)| **g != fold)
                    .map(|(r, _)| *r),
            );
            let (bias, weights) = train(&training, seed * 1000 + partition);
            for (i, record) in records.iter().enumerate() {
                if groups[i] == fold {
                    scores[i] = record_score(bias, &weights, record);
                }
            }
        }
        // One partition's threshold, as one model trained this way would have it (mean
        // scores over partitions would shrink the honest tail and set it too low).
        let scored: Vec<(f32, &Record)> = scores
            .iter()
            .copied()
            .zip(records.iter().copied())
            .collect();
        let (threshold, per) = threshold_of(&scored, rule);
        thresholds.push(threshold);
        for (at, (name, n, t)) in per.into_iter().enumerate() {
            match each.get_mut(at) {
                Some(slot) => slot.2 += t / rule.partitions as f32,
                None => each.push((name, n, t / rule.partitions as f32)),
            }
        }
        for (sum, score) in sums.iter_mut().zip(&scores) {
            *sum += score / rule.partitions as f32;
        }
    }
    let threshold =
        (thresholds.iter().sum::<f32>() / thresholds.len().max(1) as f32).max(MIN_THRESHOLD);
    let scored: Vec<(f32, &Record)> = sums.into_iter().zip(records.iter().copied()).collect();
    let all = examples_of(records.iter().copied());
    let mut bias = 0f32;
    let mut weights = vec![0f32; BUCKETS];
    for s in 0..rule.final_seeds {
        let (b, w) = train(&all, seed * 1000 + s);
        bias += b / rule.final_seeds as f32;
        for (sum, value) in weights.iter_mut().zip(w) {
            *sum += value / rule.final_seeds as f32;
        }
    }
    Trained {
        bias,
        weights,
        threshold,
        thresholds,
        each,
        scored,
    }
}

/// The weights as the shipped file holds them (quantised to `i8` times a scale).
fn quantised(weights: &[f32]) -> Vec<f32> {
    let max = weights.iter().fold(0f32, |m, w| m.max(w.abs())).max(1e-6);
    let scale = max / 127.0;
    weights
        .iter()
        .map(|w| (w / scale).round().clamp(-127.0, 127.0) * scale)
        .collect()
}

/// FNV-1a of a record's id and a seed, for leaving records out at random.
fn draw(id: &str, seed: u64) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for byte in id.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// Retrains `runs` times with other seeds and 3 % of the definitions left out, and
/// reports how far the threshold and the model's verdicts on the held-out sets move.
fn stability(dir: &std::path::Path, records: &[Record], rule: Rule, runs: u64) {
    let held_out: Vec<(String, Vec<Record>)> =
        ["eval.jsonl", "eval2.jsonl", "eval3.jsonl", "eval4.jsonl"]
            .iter()
            .filter(|f| dir.join(f).exists())
            .map(|f| (f.to_string(), load(&dir.join(f))))
            .collect();
    let mut verdicts: Vec<Vec<bool>> = Vec::new();
    let mut thresholds = Vec::new();
    for run in 1..=runs {
        let kept: Vec<&Record> = records
            .iter()
            .filter(|r| draw(&r.id, run) % 100 >= STABILITY_DROP)
            .collect();
        let trained = fit(&kept, rule, run);
        let weights = quantised(&trained.weights);
        let mut these = Vec::new();
        let mut line = format!("run {run}: threshold {:.4}", trained.threshold);
        for (name, set) in &held_out {
            let flags: Vec<bool> = set
                .iter()
                .map(|r| record_score(trained.bias, &weights, r) >= trained.threshold)
                .collect();
            let poisoned = set.iter().filter(|r| r.label).count();
            let caught = set
                .iter()
                .zip(&flags)
                .filter(|(r, f)| r.label && **f)
                .count();
            let honest = set.len() - poisoned;
            let false_pos = set
                .iter()
                .zip(&flags)
                .filter(|(r, f)| !r.label && **f)
                .count();
            line += &format!(
                "; {name} model recall {caught}/{poisoned}, honest flagged {false_pos}/{honest}"
            );
            these.extend(flags);
        }
        println!("{line}");
        thresholds.push(trained.threshold);
        verdicts.push(these);
    }
    let lo = thresholds.iter().copied().fold(f32::INFINITY, f32::min);
    let hi = thresholds.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let total = verdicts.first().map_or(0, Vec::len);
    let mut unsteady = 0;
    let mut worst_pair = 0;
    for i in 0..total {
        let yes = verdicts.iter().filter(|v| v[i]).count();
        if yes != 0 && yes != verdicts.len() {
            unsteady += 1;
        }
    }
    for a in 0..verdicts.len() {
        for b in a + 1..verdicts.len() {
            let differ = (0..total)
                .filter(|&i| verdicts[a][i] != verdicts[b][i])
                .count();
            worst_pair = worst_pair.max(differ);
        }
    }
    println!(
        "{runs} retrains: threshold {lo:.4}..{hi:.4} (spread {:.4}); of {total} held-out definitions, {unsteady} change verdict in some retrain; two retrains differ on at most {worst_pair}",
        hi - lo
    );
}

/// Recall across authors, on training data only: for each poisoned category written by
/// several generators, each generator's definitions of it are left out in turn, a model
/// is trained on the rest, and the left-out ones are scored at `threshold`. A development
/// measure of how a change carries over to wordings of another author, without the
/// held-out sets.
fn cross_author(records: &[Record], threshold: f32) {
    let mut pairs: Vec<(&str, &str)> = records
        .iter()
        .filter(|r| r.label)
        .map(|r| (r.category.as_str(), r.author.as_str()))
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    let mut total = (0, 0);
    for (category, author) in pairs {
        let authors = records
            .iter()
            .filter(|r| r.label && r.category == category)
            .map(|r| r.author.as_str())
            .collect::<std::collections::BTreeSet<_>>();
        let left_out: Vec<&Record> = records
            .iter()
            .filter(|r| r.label && r.category == category && r.author == author)
            .collect();
        if authors.len() < 2 || left_out.len() < 100 {
            continue;
        }
        let training = examples_of(
            records
                .iter()
                .filter(|r| !(r.label && r.category == category && r.author == author)),
        );
        let (bias, weights) = train(&training, 0);
        let caught = left_out
            .iter()
            .filter(|r| record_score(bias, &weights, r) >= threshold)
            .count();
        total.0 += caught;
        total.1 += left_out.len();
        println!(
            "  {category:<14} by {author:<50} {caught:>4} / {:<4} ({:.3})",
            left_out.len(),
            caught as f64 / left_out.len() as f64
        );
    }
    println!(
        "across authors: {} / {} ({:.3})",
        total.0,
        total.1,
        total.0 as f64 / total.1.max(1) as f64
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let check = args.iter().any(|a| a == "--check");
    let verbose = args.iter().any(|a| a == "--verbose");
    let rule = if args.iter().any(|a| a == "--legacy") {
        LEGACY
    } else {
        CURRENT
    };
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
    if let Some(at) = args.iter().position(|a| a == "--stability") {
        let runs = args.get(at + 1).and_then(|n| n.parse().ok()).unwrap_or(5);
        stability(&dir, &records, rule, runs);
        return;
    }
    if args.iter().any(|a| a == "--cross") {
        let all: Vec<&Record> = records.iter().collect();
        let quick = Rule {
            partitions: 4,
            final_seeds: 1,
            smooth: true,
        };
        let trained = fit(&all, quick, 0);
        let flagged = |category: &str| {
            let of: Vec<f32> = trained
                .scored
                .iter()
                .filter(|(_, r)| r.category == category)
                .map(|(s, _)| *s)
                .collect();
            of.iter().filter(|&&s| s >= trained.threshold).count() as f64 / of.len().max(1) as f64
        };
        println!(
            "threshold {:.4} (4 partitions); out of fold: real {:.4}, hard-generated {:.4}, hard {:.4}",
            trained.threshold,
            flagged("real"),
            flagged("hard-generated"),
            flagged("hard")
        );
        cross_author(&records, trained.threshold);
        return;
    }
    let all: Vec<&Record> = records.iter().collect();
    let trained = fit(&all, rule, 0);
    for (honest, distinct, lowest) in &trained.each {
        println!("  {honest}: {distinct} distinct scores, threshold at least {lowest:.4}");
        if verbose {
            let mut top: Vec<&(f32, &Record)> = trained
                .scored
                .iter()
                .filter(|(_, r)| !r.label && r.category == *honest)
                .collect();
            top.sort_by(|a, b| b.0.total_cmp(&a.0));
            for (score, record) in top.iter().take(40) {
                println!("    {score:.3} {}", record.id);
            }
        }
    }
    let threshold = trained.threshold;
    let parts: Vec<String> = trained
        .thresholds
        .iter()
        .map(|t| format!("{t:.4}"))
        .collect();
    println!(
        "out-of-fold threshold {threshold:.4} (mean of the partitions' {})",
        parts.join(", ")
    );
    let mut categories: Vec<&str> = trained
        .scored
        .iter()
        .map(|(_, r)| r.category.as_str())
        .collect();
    categories.sort_unstable();
    categories.dedup();
    for category in categories {
        let of: Vec<f32> = trained
            .scored
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
    let bytes = Model::encode(trained.bias, &trained.weights, threshold, UPDATE_BONUS).unwrap();
    let nonzero = trained.weights.iter().filter(|w| **w != 0.0).count();
    println!(
        "final model: bias {:.3}, {nonzero} non-zero weights",
        trained.bias
    );
    if !check {
        std::fs::write(dir.join("model.bin"), bytes).unwrap();
        println!("wrote {}", dir.join("model.bin").display());
    }
}
