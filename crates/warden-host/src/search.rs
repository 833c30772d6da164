//! Tool search over the catalogue: the one ranking that `warden tools --search` prints and
//! the agent loop's `warden__search_tools` tool returns, so the two cannot disagree.
//!
//! The ranking is hybrid (words and meaning, `warden_search::SearchIndex`) when the
//! search model is installed (`WARDEN_SEARCH_MODEL`, see
//! `docs/decisions/0025-semantic-search.md`), and by words alone when it is not; a missing
//! or refused model is reported once per process, as a warning, and never stops a search.
//!
//! The index is built from the [`Catalogue`], which has already left out the tools the
//! policy hides: a hidden tool is never found, whatever the query.

#[cfg(feature = "semantic-search")]
use std::sync::atomic::{AtomicBool, Ordering};

pub use warden_search::{Hit, Ranking};
use warden_search::{SearchIndex, ToolDoc};

use std::collections::BTreeMap;

use crate::catalogue::Catalogue;
use crate::host::{Host, ServerStatus};

/// How many hits a search returns when the caller does not say.
pub const DEFAULT_SEARCH_LIMIT: usize = 8;

/// The most hits one search may ask for.
pub const MAX_SEARCH_LIMIT: usize = 50;

/// One [`ToolDoc`] per tool of the catalogue, in catalogue order: qualified name, server,
/// the tool's raw name on its server, title, description and input schema.
pub fn tool_docs(catalogue: &Catalogue) -> Vec<ToolDoc> {
    tool_docs_with(catalogue, &BTreeMap::new())
}

/// Like [`tool_docs`], each tool carrying its server's instructions from `instructions`
/// (server name to text).
pub fn tool_docs_with(
    catalogue: &Catalogue,
    instructions: &BTreeMap<String, String>,
) -> Vec<ToolDoc> {
    catalogue
        .tools()
        .iter()
        .map(|tool| ToolDoc {
            qualified: tool.qualified.clone(),
            server: tool.server.clone(),
            tool: tool.def.name.clone(),
            title: tool.def.title.clone(),
            description: tool.def.description.clone(),
            input_schema: tool.def.input_schema.clone(),
            instructions: instructions.get(&tool.server).cloned(),
        })
        .collect()
}

/// The instructions of every connected server that gave some, by server name. They are
/// the server's own words (untrusted, like its tool descriptions).
pub fn server_instructions(host: &Host) -> BTreeMap<String, String> {
    host.servers()
        .iter()
        .filter_map(|entry| match &entry.status {
            ServerStatus::Connected { info } => info
                .instructions
                .as_ref()
                .filter(|text| !text.trim().is_empty())
                .map(|text| (entry.spec.name.clone(), text.clone())),
            ServerStatus::Failed { .. } => None,
        })
        .collect()
}

/// How many tool definitions of the indexes built so far in this process still wait for
/// the search encoder's vectors (decision 0044); 0 without the model.
pub fn pending_search_vectors() -> usize {
    #[cfg(feature = "semantic-search")]
    {
        warden_search::semantic::shared_cache().pending()
    }
    #[cfg(not(feature = "semantic-search"))]
    0
}

/// Waits, at most `timeout`, until the search encoder has computed and stored the vectors
/// of every definition indexed so far; how many still wait then. A short-lived command
/// that searched (`warden tools --search`) calls it before it exits, so a later search of
/// the same catalogue ranks with the encoder's vectors (decision 0047). Blocks: call it
/// from a blocking task.
pub fn settle_search_vectors(timeout: std::time::Duration) -> usize {
    #[cfg(feature = "semantic-search")]
    {
        warden_search::semantic::shared_cache().settle(timeout)
    }
    #[cfg(not(feature = "semantic-search"))]
    {
        let _ = timeout;
        0
    }
}

/// A search index over one catalogue. Built once per catalogue; a new catalogue (a refresh,
/// a new policy) needs a new one.
#[derive(Debug)]
pub struct ToolSearch {
    index: SearchIndex,
}

impl ToolSearch {
    /// Indexes every tool of `catalogue`, with the search model when it is installed
    /// (hybrid ranking), by words alone when it is not.
    pub fn new(catalogue: &Catalogue) -> ToolSearch {
        ToolSearch::build(tool_docs(catalogue))
    }

    /// Indexes every tool of `host`'s catalogue with its server's instructions, which
    /// then take part in ranking ([`server_instructions`]).
    pub fn for_host(host: &Host) -> ToolSearch {
        ToolSearch::build(tool_docs_with(
            &host.catalogue(),
            &server_instructions(host),
        ))
    }

    #[cfg(feature = "semantic-search")]
    fn build(docs: Vec<ToolDoc>) -> ToolSearch {
        match warden_search::semantic::shared_model() {
            Ok(model) => ToolSearch {
                index: SearchIndex::with_model(
                    docs,
                    model,
                    warden_search::semantic::shared_cache(),
                ),
            },
            Err(error) => {
                static WARNED: AtomicBool = AtomicBool::new(false);
                if !WARNED.swap(true, Ordering::Relaxed) {
                    tracing::warn!("tool search ranks by words only: {error}");
                }
                ToolSearch {
                    index: SearchIndex::lexical(docs),
                }
            }
        }
    }

    /// This build has no semantic search: by words.
    #[cfg(not(feature = "semantic-search"))]
    fn build(docs: Vec<ToolDoc>) -> ToolSearch {
        ToolSearch {
            index: SearchIndex::lexical(docs),
        }
    }

    /// Indexes every tool of `catalogue` for a search by words only, model or not.
    pub fn lexical(catalogue: &Catalogue) -> ToolSearch {
        ToolSearch {
            index: SearchIndex::lexical(tool_docs(catalogue)),
        }
    }

    /// How this search ranks: [`Ranking::Hybrid`] with the model, [`Ranking::Lexical`]
    /// without.
    pub fn ranking(&self) -> Ranking {
        self.index.ranking()
    }

    /// The tools that best fit `query`, best first, at most `limit` of them (clamped to
    /// [`MAX_SEARCH_LIMIT`]). Empty when no tool shares a word with the query and, with the
    /// model, none is near enough in meaning.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Hit> {
        self.index.search(query, limit.min(MAX_SEARCH_LIMIT))
    }

    /// How many tools are indexed.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::SchemaLimits;
    use serde_json::json;
    use warden_mcp::ToolDef;
    use warden_policy::Policy;

    fn tool(name: &str, description: &str) -> ToolDef {
        ToolDef {
            name: name.into(),
            title: None,
            description: Some(description.into()),
            input_schema: json!({"type": "object"}),
            output_schema: None,
            annotations: None,
        }
    }

    fn lists() -> Vec<(String, Vec<ToolDef>)> {
        vec![
            (
                "fs".to_owned(),
                vec![
                    tool("read_file", "Read the contents of a file."),
                    tool("secret_read_file", "Read a secret file."),
                ],
            ),
            (
                "time".to_owned(),
                vec![tool(
                    "get-current-time",
                    "Get the current time in a timezone.",
                )],
            ),
        ]
    }

    #[test]
    fn docs_carry_the_qualified_and_the_raw_name() {
        let catalogue = Catalogue::build(lists(), SchemaLimits::default());
        let docs = tool_docs(&catalogue);
        assert_eq!(docs.len(), 3);
        let time = docs.iter().find(|d| d.server == "time").unwrap();
        assert_eq!(time.qualified, "time__get-current-time");
        assert_eq!(time.tool, "get-current-time");
        assert_eq!(
            time.description.as_deref(),
            Some("Get the current time in a timezone.")
        );
        let search = ToolSearch::lexical(&catalogue);
        let hits = search.search("current time", DEFAULT_SEARCH_LIMIT);
        assert_eq!(hits[0].qualified, "time__get-current-time");
        assert_eq!(hits[0].tool, "get-current-time");
        assert!(search.search("zebra", DEFAULT_SEARCH_LIMIT).is_empty());
    }

    #[test]
    fn hidden_tools_are_never_found() {
        let config: warden_policy::PolicyConfig = serde_json::from_value(json!({
            "rules": [{"tools": "fs__secret*", "effect": "hide"}]
        }))
        .unwrap();
        let policy = Policy::compile(&config).unwrap();
        let catalogue = Catalogue::build_with_policy(lists(), SchemaLimits::default(), &policy);
        assert_eq!(catalogue.hidden().len(), 1);
        let search = ToolSearch::lexical(&catalogue);
        assert_eq!(search.len(), 2);
        for query in ["secret", "read a secret file", "secret_read_file", "fs"] {
            let hits = search.search(query, MAX_SEARCH_LIMIT);
            assert!(
                hits.iter().all(|hit| !hit.qualified.contains("secret")),
                "{query}: {hits:?}"
            );
        }
        // Without the rule the same query finds it: the policy, not the words, hides it.
        let open = ToolSearch::lexical(&Catalogue::build(lists(), SchemaLimits::default()));
        assert_eq!(
            open.search("secret", 5)[0].qualified,
            "fs__secret_read_file"
        );
    }

    #[test]
    fn hidden_tools_are_never_found_by_meaning_either() {
        let config: warden_policy::PolicyConfig = serde_json::from_value(json!({
            "rules": [{"tools": "fs__secret*", "effect": "hide"}]
        }))
        .unwrap();
        let policy = Policy::compile(&config).unwrap();
        let catalogue = Catalogue::build_with_policy(lists(), SchemaLimits::default(), &policy);
        let search = ToolSearch::new(&catalogue);
        assert_eq!(
            search.ranking(),
            Ranking::Hybrid,
            "this test needs the search model: scripts/install-search-model DIR, then \
             WARDEN_SEARCH_MODEL=DIR"
        );
        for query in [
            "confidential document",
            "private file contents",
            "secret",
            "classified",
        ] {
            let hits = search.search(query, MAX_SEARCH_LIMIT);
            assert!(
                hits.iter().all(|hit| !hit.qualified.contains("secret")),
                "{query}: {hits:?}"
            );
        }
        // Positive control: the visible tools are found.
        let hits = search.search("what time is it in Tokyo", 3);
        assert_eq!(hits[0].qualified, "time__get-current-time", "{hits:?}");
        let hits = search.search("read a file", 3);
        assert_eq!(hits[0].qualified, "fs__read_file", "{hits:?}");
    }

    #[test]
    fn the_limit_is_clamped() {
        let tools = (0..60)
            .map(|i| tool(&format!("file_tool_{i}"), "Works on a file."))
            .collect();
        let catalogue = Catalogue::build(vec![("s".to_owned(), tools)], SchemaLimits::default());
        let search = ToolSearch::lexical(&catalogue);
        assert_eq!(search.search("file", 1000).len(), MAX_SEARCH_LIMIT);
        assert_eq!(search.search("file", 3).len(), 3);
        assert!(search.search("file", 0).is_empty());
    }
}
