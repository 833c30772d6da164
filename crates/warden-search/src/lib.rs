//! Warden's tool search: which tools fit a few words, ranked.
//!
//! When the catalogue of tools is large, the agent loop shows the model a single
//! `warden__search_tools` tool instead of every definition; the model searches by words and
//! gets back the tools to use. `warden tools --search QUERY` prints the same ranking. This
//! crate is that ranking: BM25F over the fields of each definition (tool name, qualified
//! name, title, description, parameter names and parameter descriptions, and the server's
//! instructions), with name words weighted above description words; and, with the
//! `semantic` feature and its model installed, a hybrid of that and the cosine similarity
//! of static sentence embeddings ([`SearchIndex`], [`semantic`]). [`SearchIndex`] also
//! ranks each step of a multi-step request ([`steps`]) and each server as a whole, so
//! every step finds its tool and the tools of the server a request is about rise together
//! (`docs/decisions/0038-search-evidence.md`). Tool vectors come from the whole encoder
//! once it has embedded every definition (kept on disk; requests keep the static table's
//! vectors), from the static table until then (`docs/decisions/0044-encoder-tool-vectors.md`).
//!
//! The words ranking needs no model, gives the same answer for the same input on every
//! machine, and searches 10,000 tools in well under a millisecond
//! (`docs/decisions/0012-tool-search-bm25.md`); the semantic part finds tools whose
//! descriptions use other words than the request (`docs/decisions/0025-semantic-search.md`).
//!
//! ```
//! use serde_json::json;
//! use warden_search::{ToolDoc, ToolIndex};
//!
//! let tool = |server: &str, name: &str, description: &str| ToolDoc {
//!     qualified: format!("{server}__{name}"),
//!     server: server.into(),
//!     tool: name.into(),
//!     title: None,
//!     description: Some(description.into()),
//!     input_schema: json!({"type": "object"}),
//!     instructions: None,
//! };
//! let index = ToolIndex::build(vec![
//!     tool("fs", "read_file", "Read the contents of a file."),
//!     tool("git", "git_status", "Show the working tree status."),
//! ]);
//! let hits = index.search("read a file", 5);
//! assert_eq!(hits[0].qualified, "fs__read_file");
//! assert!(index.search("zebra", 5).is_empty());
//! ```
//!
//! # Hostile definitions
//!
//! A server controls its own tool definitions and may want its tool picked for every query.
//! Three things limit what it can buy: the first [`DEFINITION_CHAR_CAP`] characters of a
//! definition are all that is read; a term counts at most [`TF_CAP`] times per field; and
//! BM25's length normalisation makes a padded field weigh less per term.
//!
//! # Determinism
//!
//! The same tools and query give the same hits in the same order: scores are rounded to 4
//! decimals and equal scores are ordered by qualified name.

#![deny(missing_docs)]

mod document;
mod hybrid;
mod index;
#[cfg(feature = "semantic")]
pub mod semantic;
mod servers;
pub mod steps;
mod tokenize;

pub use document::{
    DEFINITION_CHAR_CAP, INSTRUCTIONS_CHAR_CAP, SCHEMA_DEPTH_CAP, SCHEMA_NODE_CAP, SERVER_CHAR_CAP,
    ToolDoc,
};
pub use hybrid::{
    FEEDBACK_DEPTH, FEEDBACK_WEIGHT, INSTRUCTIONS_WEIGHT, LEXICAL_WEIGHT, MAPPED_LEXICAL_WEIGHT,
    QUERY_MAP_RIDGE, Ranking, SEMANTIC_ONLY_MIN_COSINE, SERVER_WEIGHT, SearchIndex, StepFusion,
    Tuning,
};
pub use index::{B, FIELD_WEIGHTS, Hit, K1, QUERY_CHAR_CAP, QUERY_TERM_CAP, TF_CAP, ToolIndex};
pub use tokenize::{MAX_TERM_CHARS, is_stopword, stem, tokenize};
