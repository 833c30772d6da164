//! The whole encoder run on a text: a contextual embedding (decision 0044). The search
//! runs it on tool definitions only, once per definition, in the background encoder of
//! [`super::EmbeddingCache`] (the vectors are kept on disk), never on a request: on this
//! machine one request costs tens of milliseconds, over the 5 ms budget of the whole
//! search (`docs/benchmarks.md`). Requests keep the static table's vectors; the
//! measurement of encoder requests can be repeated (`examples/tool_eval.rs`,
//! `TOOL_EVAL_CONTEXTUAL=1`).
//!
//! The text is cut into WordPiece tokens as for the static table (no stopwords left out),
//! at most [`CONTEXTUAL_TOKEN_CAP`] of them, framed `[CLS] … [SEP]`, run through all six
//! layers, and the outputs are mean-pooled and scaled to length 1, as sentence-transformers
//! does for this model.

use std::path::Path;

use super::distill::Encoder;
use super::model::{ModelError, ModelPin, PINNED_MODEL, VOCAB_FILE, WEIGHTS_FILE, read_checked};
use super::model::{VOCAB_SIZE_CAP, WEIGHTS_SIZE_CAP};
use super::wordpiece::Vocab;

/// The most tokens of one text the contextual encoder reads (the first ones).
pub const CONTEXTUAL_TOKEN_CAP: usize = 128;

/// all-MiniLM-L6-v2 with its weights in memory (about 91 MB), run whole on each text.
pub struct ContextualEncoder {
    encoder: Encoder,
    vocab: Vocab,
    cls: u32,
    sep: u32,
}

impl std::fmt::Debug for ContextualEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContextualEncoder")
            .field("dim", &self.encoder.dim)
            .finish_non_exhaustive()
    }
}

impl ContextualEncoder {
    /// Loads the encoder in `dir`, its files checked against [`PINNED_MODEL`].
    pub fn load(dir: &Path) -> Result<ContextualEncoder, ModelError> {
        ContextualEncoder::load_pinned(dir, PINNED_MODEL)
    }

    /// Loads the encoder in `dir`, its files checked against `pin`.
    pub fn load_pinned(dir: &Path, pin: ModelPin) -> Result<ContextualEncoder, ModelError> {
        let weights_path = dir.join(WEIGHTS_FILE);
        let vocab_path = dir.join(VOCAB_FILE);
        let vocab_bytes = read_checked(&vocab_path, VOCAB_SIZE_CAP, pin.vocab_sha256)?;
        let vocab_text = String::from_utf8(vocab_bytes).map_err(|_| ModelError::Format {
            path: vocab_path.clone(),
            reason: "not UTF-8".into(),
        })?;
        let vocab = Vocab::parse(&vocab_text);
        let weights = read_checked(&weights_path, WEIGHTS_SIZE_CAP, pin.weights_sha256)?;
        let encoder = Encoder::read(&weights).map_err(|reason| ModelError::Format {
            path: weights_path.clone(),
            reason,
        })?;
        let (Some(cls), Some(sep)) = (vocab.id("[CLS]"), vocab.id("[SEP]")) else {
            return Err(ModelError::Format {
                path: vocab_path,
                reason: "no [CLS] or [SEP] token".into(),
            });
        };
        if encoder.vocab != vocab.len() || encoder.max_positions() < 3 {
            return Err(ModelError::Format {
                path: weights_path,
                reason: format!(
                    "the encoder has {} token embeddings, the vocabulary {} tokens",
                    encoder.vocab,
                    vocab.len()
                ),
            });
        }
        Ok(ContextualEncoder {
            encoder,
            vocab,
            cls,
            sep,
        })
    }

    /// The vector length.
    pub fn dim(&self) -> usize {
        self.encoder.dim
    }

    /// The unit vector of `text` (its first [`CONTEXTUAL_TOKEN_CAP`] tokens); `None` when
    /// it has no known token.
    pub fn embed(&self, text: &str) -> Option<Vec<f32>> {
        let cap = CONTEXTUAL_TOKEN_CAP.min(self.encoder.max_positions() - 2);
        let mut ids = vec![self.cls];
        self.vocab.for_each_id(text, &|_| false, &mut |id| {
            ids.push(id);
            ids.len() <= cap
        });
        if ids.len() == 1 {
            return None;
        }
        ids.push(self.sep);
        let len = ids.len();
        let mut vector = self.encoder.encode(&ids, len);
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm <= f32::EPSILON {
            return None;
        }
        for x in &mut vector {
            *x /= norm;
        }
        Some(vector)
    }
}
