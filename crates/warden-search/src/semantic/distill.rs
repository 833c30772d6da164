//! From a BERT-style sentence encoder to a static token table (the Model2Vec recipe):
//! every vocabulary token is run once through the whole encoder as the sequence
//! `[CLS] token [SEP]`, and the mean of the encoder's three output vectors becomes that
//! token's vector. The table then carries what the encoder learned about each token in
//! context-free form, and a text's vector is a cheap sum of rows.
//!
//! The encoder is the standard post-LayerNorm BERT: embeddings (word + position + token
//! type, LayerNorm), then per layer multi-head self-attention and a GELU feed-forward
//! block, each followed by a residual LayerNorm. Weights are read by the names BERT
//! checkpoints use (`encoder.layer.N.attention.self.query.weight`, ...). Matrix products
//! use `matrixmultiply`'s SGEMM.
//!
//! After the pass, rows are centred on their mean (the direction every output shares says
//! nothing about a text), scaled to length 1, and weighted by a smooth inverse frequency
//! `a / (a + p(t))` with `p` a Zipf law over the vocabulary order (WordPiece vocabularies
//! list whole words roughly by frequency): very common tokens count less in a sum.

use std::thread;

use super::safetensors::read_tensor;

/// Attention heads of the pinned encoder (all-MiniLM-L6-v2: 384 dimensions, 12 heads).
pub const ATTENTION_HEADS: usize = 12;
/// LayerNorm's epsilon in BERT.
const LAYER_NORM_EPS: f32 = 1e-12;
/// The smooth-inverse-frequency constant `a`.
pub const SIF_A: f64 = 1e-4;
/// Tokens run through the encoder per batch (each a sequence of 3).
const BATCH: usize = 1024;
/// The most layers read.
const LAYER_CAP: usize = 48;

/// A dense layer: `weight` is `[out × in]`, row-major, as checkpoints store it.
struct Linear {
    weight: Vec<f32>,
    bias: Vec<f32>,
    inputs: usize,
    outputs: usize,
}

struct Norm {
    weight: Vec<f32>,
    bias: Vec<f32>,
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: Norm,
    intermediate: Linear,
    output: Linear,
    output_norm: Norm,
}

/// The encoder's weights.
pub(crate) struct Encoder {
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
    pub(crate) dim: usize,
    pub(crate) vocab: usize,
}

fn tensor(file: &[u8], name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
    let (found, data) = read_tensor(file, name)?;
    if found != shape {
        return Err(format!(
            "tensor {name} has shape {found:?}, expected {shape:?}"
        ));
    }
    Ok(data)
}

fn linear(file: &[u8], prefix: &str, inputs: usize, outputs: usize) -> Result<Linear, String> {
    Ok(Linear {
        weight: tensor(file, &format!("{prefix}.weight"), &[outputs, inputs])?,
        bias: tensor(file, &format!("{prefix}.bias"), &[outputs])?,
        inputs,
        outputs,
    })
}

fn norm(file: &[u8], prefix: &str, dim: usize) -> Result<Norm, String> {
    Ok(Norm {
        weight: tensor(file, &format!("{prefix}.weight"), &[dim])?,
        bias: tensor(file, &format!("{prefix}.bias"), &[dim])?,
    })
}

impl Encoder {
    /// Reads the encoder from safetensors bytes. The error names the tensor at fault.
    pub(crate) fn read(file: &[u8]) -> Result<Encoder, String> {
        let (shape, word) = read_tensor(file, "embeddings.word_embeddings.weight")?;
        let [vocab, dim] = shape[..] else {
            return Err("embeddings.word_embeddings.weight is not 2-dimensional".into());
        };
        if dim == 0 || dim % ATTENTION_HEADS != 0 {
            return Err(format!(
                "hidden size {dim} does not split into {ATTENTION_HEADS} heads"
            ));
        }
        let (position_shape, position) =
            read_tensor(file, "embeddings.position_embeddings.weight")?;
        if position_shape.len() != 2 || position_shape[0] < 3 || position_shape[1] != dim {
            return Err(format!(
                "embeddings.position_embeddings.weight has shape {position_shape:?}"
            ));
        }
        let (type_shape, token_type) =
            read_tensor(file, "embeddings.token_type_embeddings.weight")?;
        if type_shape.len() != 2 || type_shape[1] != dim {
            return Err(format!(
                "embeddings.token_type_embeddings.weight has shape {type_shape:?}"
            ));
        }
        let embedding_norm = norm(file, "embeddings.LayerNorm", dim)?;
        let mut layers = Vec::new();
        for l in 0..LAYER_CAP {
            let prefix = format!("encoder.layer.{l}");
            let Ok((shape, _)) = read_tensor(file, &format!("{prefix}.intermediate.dense.bias"))
            else {
                break;
            };
            let inner = shape.first().copied().unwrap_or(0);
            layers.push(Layer {
                query: linear(file, &format!("{prefix}.attention.self.query"), dim, dim)?,
                key: linear(file, &format!("{prefix}.attention.self.key"), dim, dim)?,
                value: linear(file, &format!("{prefix}.attention.self.value"), dim, dim)?,
                attention_out: linear(file, &format!("{prefix}.attention.output.dense"), dim, dim)?,
                attention_norm: norm(file, &format!("{prefix}.attention.output.LayerNorm"), dim)?,
                intermediate: linear(file, &format!("{prefix}.intermediate.dense"), dim, inner)?,
                output: linear(file, &format!("{prefix}.output.dense"), inner, dim)?,
                output_norm: norm(file, &format!("{prefix}.output.LayerNorm"), dim)?,
            });
        }
        if layers.is_empty() {
            return Err("no encoder.layer.0 tensors".into());
        }
        Ok(Encoder {
            word,
            position,
            token_type,
            embedding_norm,
            layers,
            dim,
            vocab,
        })
    }

    /// The static table: one row per vocabulary token (`vocab × dim`), from the encoder
    /// run on `[cls] token [sep]`, centred, unit length and weighted as the module docs
    /// say. Rows of `skip` tokens (special tokens) are zero. Uses up to `threads` threads.
    pub(crate) fn distill(&self, cls: u32, sep: u32, skip: &[bool], threads: usize) -> Vec<f32> {
        let dim = self.dim;
        let mut table = vec![0f32; self.vocab * dim];
        let threads = threads.clamp(1, 8);
        let per = self.vocab.div_ceil(threads).max(1);
        thread::scope(|scope| {
            for (part, rows) in table.chunks_mut(per * dim).enumerate() {
                scope.spawn(move || {
                    let first = part * per;
                    let count = rows.len() / dim;
                    for start in (0..count).step_by(BATCH) {
                        let end = (start + BATCH).min(count);
                        let ids: Vec<u32> =
                            (first + start..first + end).map(|i| i as u32).collect();
                        let pooled = self.encode_tokens(&ids, cls, sep);
                        rows[start * dim..end * dim].copy_from_slice(&pooled);
                    }
                });
            }
        });
        for (id, row) in table.chunks_exact_mut(dim).enumerate() {
            if skip.get(id).copied().unwrap_or(true) {
                row.fill(0.0);
            }
        }
        finish(&mut table, dim, skip);
        table
    }

    /// The mean-pooled outputs for the sequences `[cls] id [sep]`, one row per id.
    fn encode_tokens(&self, ids: &[u32], cls: u32, sep: u32) -> Vec<f32> {
        let sequences: Vec<u32> = ids.iter().flat_map(|&id| [cls, id, sep]).collect();
        self.encode(&sequences, 3)
    }

    /// The mean-pooled outputs of the encoder for `tokens`, read as consecutive sequences
    /// of `seq` token ids each (every one starting at position 0), one row per sequence.
    /// Ids and lengths must be in range (the callers' vocabulary and the position table).
    pub(crate) fn encode(&self, tokens: &[u32], seq: usize) -> Vec<f32> {
        let dim = self.dim;
        let seq = seq.max(1);
        let sequences = tokens.len() / seq;
        let rows = sequences * seq;
        let mut x = vec![0f32; rows * dim];
        for (row, &token) in tokens[..rows].iter().enumerate() {
            let p = row % seq;
            let out = &mut x[row * dim..(row + 1) * dim];
            let Some(word) = self
                .word
                .get(token as usize * dim..(token as usize + 1) * dim)
            else {
                continue;
            };
            let Some(position) = self.position.get(p * dim..(p + 1) * dim) else {
                continue;
            };
            for (((o, w), q), t) in out.iter_mut().zip(word).zip(position).zip(&self.token_type) {
                *o = w + q + t;
            }
        }
        layer_norm(&mut x, &self.embedding_norm, dim);
        for layer in &self.layers {
            let q = apply(&layer.query, &x, rows);
            let k = apply(&layer.key, &x, rows);
            let v = apply(&layer.value, &x, rows);
            let context = attention(&q, &k, &v, sequences, seq, dim);
            let mut attended = apply(&layer.attention_out, &context, rows);
            for (a, r) in attended.iter_mut().zip(&x) {
                *a += r;
            }
            layer_norm(&mut attended, &layer.attention_norm, dim);
            let mut inner = apply(&layer.intermediate, &attended, rows);
            for h in &mut inner {
                *h = gelu(*h);
            }
            let mut out = apply(&layer.output, &inner, rows);
            for (o, r) in out.iter_mut().zip(&attended) {
                *o += r;
            }
            layer_norm(&mut out, &layer.output_norm, dim);
            x = out;
        }
        let mut pooled = vec![0f32; sequences * dim];
        for s in 0..sequences {
            let out = &mut pooled[s * dim..(s + 1) * dim];
            for p in 0..seq {
                let row = &x[(s * seq + p) * dim..(s * seq + p + 1) * dim];
                for (o, r) in out.iter_mut().zip(row) {
                    *o += r / seq as f32;
                }
            }
        }
        pooled
    }

    /// The number of positions the encoder has embeddings for.
    pub(crate) fn max_positions(&self) -> usize {
        self.position.len() / self.dim.max(1)
    }
}

/// `x · Wᵀ + b` for `rows` rows of `x`.
fn apply(layer: &Linear, x: &[f32], rows: usize) -> Vec<f32> {
    let (k, n) = (layer.inputs, layer.outputs);
    let mut out = Vec::with_capacity(rows * n);
    for _ in 0..rows {
        out.extend_from_slice(&layer.bias);
    }
    if x.len() != rows * k || layer.weight.len() != n * k {
        // Shapes are checked when the encoder is read; this cannot happen, and if it did,
        // the product is skipped rather than read out of bounds.
        return out;
    }
    // SAFETY: `x` holds `rows × k` floats (row-major: row stride k, column stride 1), the
    // weight `n × k` floats read as its transpose `k × n` (row stride 1, column stride k),
    // and `out` `rows × n` floats (row stride n); all three are checked just above and
    // live for the whole call. beta = 1 adds the product to the bias already in `out`.
    unsafe {
        matrixmultiply::sgemm(
            rows,
            k,
            n,
            1.0,
            x.as_ptr(),
            k as isize,
            1,
            layer.weight.as_ptr(),
            1,
            k as isize,
            1.0,
            out.as_mut_ptr(),
            n as isize,
            1,
        );
    }
    out
}

/// Multi-head self-attention over `sequences` sequences of `seq` positions each.
fn attention(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    sequences: usize,
    seq: usize,
    dim: usize,
) -> Vec<f32> {
    let head = dim / ATTENTION_HEADS;
    let scale = 1.0 / (head as f32).sqrt();
    let mut out = vec![0f32; q.len()];
    let mut weights = vec![0f32; seq];
    for s in 0..sequences {
        for h in 0..ATTENTION_HEADS {
            let lane = h * head..(h + 1) * head;
            for i in 0..seq {
                let qi = &q[(s * seq + i) * dim..][lane.clone()];
                let mut max = f32::MIN;
                for (j, w) in weights.iter_mut().enumerate() {
                    let kj = &k[(s * seq + j) * dim..][lane.clone()];
                    *w = qi.iter().zip(kj).map(|(a, b)| a * b).sum::<f32>() * scale;
                    max = max.max(*w);
                }
                let mut total = 0.0;
                for w in &mut weights {
                    *w = (*w - max).exp();
                    total += *w;
                }
                let oi = &mut out[(s * seq + i) * dim..][lane.clone()];
                for (j, w) in weights.iter().enumerate() {
                    let vj = &v[(s * seq + j) * dim..][lane.clone()];
                    for (o, x) in oi.iter_mut().zip(vj) {
                        *o += w / total * x;
                    }
                }
            }
        }
    }
    out
}

fn layer_norm(x: &mut [f32], norm: &Norm, dim: usize) {
    for row in x.chunks_exact_mut(dim) {
        let mean = row.iter().sum::<f32>() / dim as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / dim as f32;
        let inv = 1.0 / (var + LAYER_NORM_EPS).sqrt();
        for ((v, w), b) in row.iter_mut().zip(&norm.weight).zip(&norm.bias) {
            *v = (*v - mean) * inv * w + b;
        }
    }
}

/// GELU with the exact error function (BERT's `gelu`).
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x / std::f32::consts::SQRT_2))
}

/// The error function (Abramowitz and Stegun 7.1.26, absolute error below 1.5e-7).
fn erf(x: f32) -> f32 {
    let sign = if x < 0.0 { -1.0 } else { 1.0 };
    let x = f64::from(x.abs());
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    sign * (1.0 - poly * (-x * x).exp()) as f32
}

/// Centres the non-skipped rows on their mean, scales each to length 1 and weights it by
/// its smooth inverse frequency.
pub(crate) fn finish(table: &mut [f32], dim: usize, skip: &[bool]) {
    let rows = table.len() / dim.max(1);
    let live = |id: usize| !skip.get(id).copied().unwrap_or(true);
    let mut mean = vec![0f64; dim];
    let mut count = 0usize;
    for (id, row) in table.chunks_exact(dim).enumerate() {
        if live(id) {
            count += 1;
            for (m, x) in mean.iter_mut().zip(row) {
                *m += f64::from(*x);
            }
        }
    }
    for m in &mut mean {
        *m /= count.max(1) as f64;
    }
    let harmonic: f64 = (1..=rows).map(|r| 1.0 / r as f64).sum();
    for (id, row) in table.chunks_exact_mut(dim).enumerate() {
        if !live(id) {
            continue;
        }
        for (x, m) in row.iter_mut().zip(&mean) {
            *x -= *m as f32;
        }
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        let p = 1.0 / ((id + 1) as f64 * harmonic);
        let weight = (SIF_A / (SIF_A + p)) as f32;
        let scale = if norm > f32::EPSILON {
            weight / norm
        } else {
            0.0
        };
        for x in row.iter_mut() {
            *x *= scale;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_and_gelu_match_known_values() {
        assert!((erf(0.5) - 0.520_499_9).abs() < 1e-6);
        assert!((erf(-1.0) + 0.842_700_8).abs() < 1e-6);
        assert!((gelu(1.0) - 0.841_344_7).abs() < 1e-5);
        assert_eq!(gelu(0.0), 0.0);
    }

    #[test]
    fn apply_is_x_times_w_transposed_plus_b() {
        let layer = Linear {
            weight: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], // 2 outputs × 3 inputs
            bias: vec![0.5, -0.5],
            inputs: 3,
            outputs: 2,
        };
        let out = apply(&layer, &[1.0, 0.0, 1.0, 0.0, 1.0, 0.0], 2);
        assert_eq!(out, [4.5, 9.5, 2.5, 4.5]);
    }

    #[test]
    fn attention_over_identical_keys_averages_values() {
        let dim = ATTENTION_HEADS;
        let q = vec![1.0; 2 * dim];
        let k = vec![1.0; 2 * dim];
        let mut v = vec![0.0; 2 * dim];
        v[dim..].fill(2.0);
        let out = attention(&q, &k, &v, 1, 2, dim);
        assert!(out.iter().all(|x| (x - 1.0).abs() < 1e-6), "{out:?}");
    }
}
