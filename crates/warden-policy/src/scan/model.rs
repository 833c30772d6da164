//! The learned part of the scanner: a logistic regression over hashed n-grams that scores
//! each sentence a server shows the model for "this is an instruction aimed at the model".
//!
//! Why a linear model: it is trained offline in seconds from the data in
//! `data/scanner/` (`examples/train_scanner.rs`, reproducible, no Python), it runs in
//! microseconds per sentence without allocation-heavy machinery, its size is fixed
//! ([`BUCKETS`] weights of one byte), and every score can be explained as a sum of named
//! features. A sentence is the unit, not the whole description, so an instruction buried
//! in a long honest text scores as high as one standing alone.
//!
//! The weights file (`data/scanner/model.bin`, little-endian):
//! `b"WSCN"`, version `u32` (1), bucket bits `u32`, bias `f32`, scale `f32`,
//! threshold `f32`, update bonus `f32`, then [`BUCKETS`] weights as `i8` (weight =
//! `i8 × scale`). The threshold and the bonus are set by the trainer (see
//! docs/decisions/0027-scanner-model.md).

use std::sync::LazyLock;

use super::features::{
    BUCKET_BITS, BUCKETS, MAX_TOKENS, bucket, feature_strings, hashed, tokens, values,
};
use super::segment::Kind;

/// The weights shipped with Warden.
static BUILTIN_BYTES: &[u8] = include_bytes!("../../data/scanner/model.bin");

const MAGIC: &[u8; 4] = b"WSCN";
const VERSION: u32 = 1;
const HEADER: usize = 4 + 4 + 4 + 4 * 4;

/// Why a weights file could not be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ModelError {
    /// Not a scanner model, or another version or size of one.
    #[error("not a Warden scanner model of version {VERSION} with {BUCKET_BITS}-bit features: {0}")]
    Format(&'static str),
}

/// A trained sentence model.
#[derive(Debug, Clone)]
pub struct Model {
    bias: f32,
    scale: f32,
    threshold: f32,
    update_bonus: f32,
    weights: Vec<i8>,
}

/// One scored sentence.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    /// The probability that the sentence is aimed at the model, after any update bonus.
    pub score: f32,
    /// Whether the sentence is new since the pinned definition.
    pub added: bool,
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

impl Model {
    /// The model shipped with Warden, or why it cannot be read (a build defect; a unit
    /// test keeps it from shipping).
    pub fn builtin() -> Result<&'static Model, &'static ModelError> {
        static BUILTIN: LazyLock<Result<Model, ModelError>> =
            LazyLock::new(|| Model::parse(BUILTIN_BYTES));
        BUILTIN.as_ref()
    }

    /// Reads a weights file.
    pub fn parse(bytes: &[u8]) -> Result<Model, ModelError> {
        if bytes.len() != HEADER + BUCKETS {
            return Err(ModelError::Format("wrong size"));
        }
        if &bytes[..4] != MAGIC {
            return Err(ModelError::Format("wrong magic"));
        }
        let word = |at: usize| {
            let mut four = [0u8; 4];
            four.copy_from_slice(&bytes[at..at + 4]);
            four
        };
        if u32::from_le_bytes(word(4)) != VERSION {
            return Err(ModelError::Format("wrong version"));
        }
        if u32::from_le_bytes(word(8)) != BUCKET_BITS {
            return Err(ModelError::Format("wrong feature size"));
        }
        let float = |at: usize| f32::from_le_bytes(word(at));
        let (bias, scale, threshold, update_bonus) = (float(12), float(16), float(20), float(24));
        if ![bias, scale, threshold, update_bonus]
            .iter()
            .all(|v| v.is_finite())
            || !(0.0..1.0).contains(&threshold)
        {
            return Err(ModelError::Format("bad header values"));
        }
        let weights = bytes[HEADER..]
            .iter()
            .map(|&b| i8::from_le_bytes([b]))
            .collect();
        Ok(Model {
            bias,
            scale,
            threshold,
            update_bonus,
            weights,
        })
    }

    /// Encodes a model (for the trainer): float weights are quantised to `i8`.
    pub fn encode(
        bias: f32,
        weights: &[f32],
        threshold: f32,
        update_bonus: f32,
    ) -> Result<Vec<u8>, ModelError> {
        if weights.len() != BUCKETS {
            return Err(ModelError::Format("wrong feature size"));
        }
        let max = weights.iter().fold(0f32, |m, w| m.max(w.abs())).max(1e-6);
        let scale = max / 127.0;
        let mut out = Vec::with_capacity(HEADER + BUCKETS);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&BUCKET_BITS.to_le_bytes());
        for value in [bias, scale, threshold, update_bonus] {
            out.extend_from_slice(&value.to_le_bytes());
        }
        for w in weights {
            // In range by construction of `scale`.
            let q = (w / scale).round().clamp(-127.0, 127.0) as i8;
            out.extend_from_slice(&q.to_le_bytes());
        }
        Ok(out)
    }

    /// The calibrated decision threshold: a sentence scoring at or above it is flagged.
    pub fn threshold(&self) -> f32 {
        self.threshold
    }

    /// What is added to the log-odds of a sentence that is new since the pinned
    /// definition.
    pub fn update_bonus(&self) -> f32 {
        self.update_bonus
    }

    /// The log-odds of a sentence of `kind` with these tokens.
    pub fn logit(&self, kind: Kind, tokens: &[String]) -> f32 {
        let sum: f32 = hashed(kind, tokens)
            .into_iter()
            .map(|(j, v)| f32::from(self.weights[j]) * v)
            .sum();
        self.bias + sum * self.scale
    }

    /// Scores one sentence; `added` sentences get the update bonus.
    pub fn score(&self, kind: Kind, tokens: &[String], added: bool) -> Scored {
        let bonus = if added { self.update_bonus } else { 0.0 };
        Scored {
            score: sigmoid(self.logit(kind, tokens) + bonus),
            added,
        }
    }

    /// The features that pushed this sentence's score up most, strongest first, as
    /// `feature (+contribution)`.
    pub fn explain(&self, kind: Kind, tokens: &[String], most: usize) -> Vec<String> {
        let strings = feature_strings(kind, tokens);
        let mut parts: Vec<(f32, String)> = Vec::new();
        for (s, v) in strings.iter().zip(values(&strings)) {
            let weight = f32::from(self.weights[bucket(s)]) * self.scale * v;
            match parts.iter_mut().find(|(_, seen)| seen == s) {
                Some(part) => part.0 += weight,
                None => parts.push((weight, s.clone())),
            }
        }
        parts.retain(|(w, _)| *w > 0.0);
        parts.sort_by(|a, b| b.0.total_cmp(&a.0));
        parts
            .into_iter()
            .take(most)
            .map(|(w, s)| format!("{s} (+{w:.2})"))
            .collect()
    }
}

/// The sentences of `text` as byte ranges: cut at line breaks and after `.`, `!` or `?`
/// followed by a space; a run longer than [`MAX_TOKENS`] words is cut into overlapping
/// windows. At most `limit` ranges.
pub fn sentences(text: &str, limit: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    let push = |from: usize, to: usize, out: &mut Vec<(usize, usize)>| {
        if text[from..to].trim().is_empty() {
            return;
        }
        windows(text, from, to, out);
    };
    for (at, c) in text.char_indices() {
        if out.len() >= limit {
            break;
        }
        let end_here = match c {
            '\n' => true,
            '.' | '!' | '?' => bytes.get(at + 1).is_none_or(|b| b.is_ascii_whitespace()),
            _ => false,
        };
        if end_here {
            let to = at + c.len_utf8();
            push(start, to, &mut out);
            start = to;
        }
    }
    if start < text.len() && out.len() < limit {
        push(start, text.len(), &mut out);
    }
    out.truncate(limit);
    out
}

/// `text[from..to]` as windows of at most [`MAX_TOKENS`] whitespace-separated words,
/// overlapping by a quarter.
fn windows(text: &str, from: usize, to: usize, out: &mut Vec<(usize, usize)>) {
    let piece = &text[from..to];
    let starts: Vec<usize> = piece
        .char_indices()
        .filter(|&(i, c)| {
            !c.is_whitespace() && (i == 0 || piece[..i].ends_with(char::is_whitespace))
        })
        .map(|(i, _)| i)
        .collect();
    if starts.len() <= MAX_TOKENS {
        out.push((from, to));
        return;
    }
    let step = MAX_TOKENS * 3 / 4;
    let mut first = 0;
    while first < starts.len() {
        let last = first + MAX_TOKENS;
        let end = starts.get(last).map_or(piece.len(), |&e| e);
        out.push((from + starts[first], from + end));
        if last >= starts.len() {
            break;
        }
        first += step;
    }
}

/// The tokens of a sentence, as the model reads them.
pub fn sentence_tokens(text: &str) -> Vec<String> {
    tokens(text, MAX_TOKENS)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_builtin_model_loads() {
        let model = Model::builtin().unwrap();
        assert!(model.threshold() > 0.0 && model.threshold() < 1.0);
    }

    #[test]
    fn encode_and_parse_round_trip() {
        let mut weights = vec![0f32; BUCKETS];
        weights[bucket("w=forward")] = 2.0;
        weights[bucket("w=read")] = -1.0;
        let bytes = Model::encode(-1.5, &weights, 0.7, 1.0).unwrap();
        let model = Model::parse(&bytes).unwrap();
        assert_eq!(model.threshold(), 0.7);
        assert_eq!(model.update_bonus(), 1.0);
        let toks = sentence_tokens("forward");
        let up = model.logit(Kind::Description, &toks);
        let down = model.logit(Kind::Description, &sentence_tokens("read"));
        assert!(up > -1.5 && down < -1.5);
        assert!(
            model.score(Kind::Description, &toks, true).score
                > model.score(Kind::Description, &toks, false).score
        );
        assert!(model.explain(Kind::Description, &toks, 3)[0].starts_with("w=forward"));
        assert!(Model::parse(&bytes[..100]).is_err());
        let mut bad = bytes.clone();
        bad[0] = b'X';
        assert!(Model::parse(&bad).is_err());
    }

    #[test]
    fn sentences_are_cut_at_ends_and_lines_and_windows() {
        let text = "Adds numbers. Use it often!\nSee e.g. v1.2 docs";
        let cut: Vec<&str> = sentences(text, 100)
            .into_iter()
            .map(|(a, b)| text[a..b].trim())
            .collect();
        assert_eq!(
            cut,
            ["Adds numbers.", "Use it often!", "See e.g.", "v1.2 docs"]
        );
        let long = "word ".repeat(200);
        let cut = sentences(&long, 100);
        assert!(cut.len() >= 4);
        assert!(
            cut.iter()
                .all(|&(a, b)| long[a..b].split_whitespace().count() <= MAX_TOKENS)
        );
        assert_eq!(sentences(&"a. ".repeat(50), 10).len(), 10);
    }
}
