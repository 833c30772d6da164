//! Which tools the model sees.
//!
//! A catalogue within the budget (by count and by the estimated tokens of the
//! definitions) is offered whole. A larger one is not: the model sees Warden's reserved
//! [`SEARCH_TOOL`], the pinned favourites, and the tools its searches found, which become
//! callable from the next step. The order never changes except by appending, so the
//! offered list stays a stable, cacheable prefix of every request.
//!
//! Descriptions are cut to a budget: [`UPFRONT_DESCRIPTION_CHARS`] for tools offered from
//! the start (the whole catalogue, or the favourites), [`DEFERRED_DESCRIPTION_CHARS`] for
//! tools a search brought in (the model asked for them, so it gets more of each). A cut
//! keeps the beginning, where a description says what the tool does (the words a search
//! matches), ends on a word boundary and is marked with `…`. A search's answer lists each
//! tool's name and first line, then what each server's instructions say, cut to
//! [`INSTRUCTIONS_CHARS`].

use serde_json::json;
use warden_host::Host;
use warden_host::search::{ToolSearch, server_instructions};

use crate::conversation::estimate_tokens;
use crate::model::ToolSpec;

/// The reserved name of Warden's search tool. No server tool can take it: server
/// tools are always `server__tool`, and the server name `warden` is reserved.
pub const SEARCH_TOOL: &str = "warden__search_tools";
/// The longest description of a tool offered from the start, in characters (the same
/// number of characters of a definition the search index reads; Claude Code's cut too).
pub const UPFRONT_DESCRIPTION_CHARS: usize = 4096;
/// The longest description of a tool a search brought in, in characters.
pub const DEFERRED_DESCRIPTION_CHARS: usize = 16_384;
/// The longest part of a server's instructions shown with search results, in characters.
pub const INSTRUCTIONS_CHARS: usize = 1024;

/// The most tools one search returns.
pub const MAX_SEARCH_RESULTS: usize = 20;
/// Results of a search when the model does not say.
pub const DEFAULT_SEARCH_RESULTS: usize = 8;

/// The tools offered to the model, and the search behind them in search mode.
pub struct Exposure {
    search: Option<ToolSearch>,
    favourites: Vec<String>,
    found: Vec<String>,
}

/// One search's outcome, for the model and the transcript.
#[derive(Debug, Clone)]
pub struct SearchOutcome {
    /// The text the model gets.
    pub text: String,
    /// Qualified names found, in rank order.
    pub found: Vec<String>,
}

impl Exposure {
    /// Decides how `host`'s catalogue is offered: whole when it has at most `tool_budget`
    /// tools whose definitions take at most `token_budget` tokens, else through search.
    pub fn new(
        host: &Host,
        tool_budget: usize,
        token_budget: usize,
        favourites: &[String],
    ) -> Exposure {
        let catalogue = host.catalogue();
        let tools = catalogue.tools();
        let tokens: usize = tools.iter().map(|tool| spec_tokens(&tool_spec(tool))).sum();
        let search_mode = tools.len() > tool_budget || tokens > token_budget;
        let favourites = favourites
            .iter()
            .filter(|name| catalogue.resolve(name).is_some())
            .cloned()
            .collect();
        Exposure {
            search: search_mode.then(|| ToolSearch::for_host(host)),
            favourites,
            found: Vec::new(),
        }
    }

    /// Follows a catalogue that changed (a server's tool list was read again): the search
    /// index is rebuilt; the mode stays as the session started, and the tools found or
    /// pinned keep their places (a tool that is gone is simply no longer offered).
    pub fn refresh(&mut self, host: &Host) {
        if self.search.is_some() {
            self.search = Some(ToolSearch::for_host(host));
        }
    }

    /// True when the model sees the search tool instead of the whole catalogue.
    pub fn search_mode(&self) -> bool {
        self.search.is_some()
    }

    /// The tools offered now, in their stable order.
    pub fn tools(&self, host: &Host) -> Vec<ToolSpec> {
        if self.search.is_none() {
            return host.catalogue().tools().iter().map(tool_spec).collect();
        }
        let catalogue = host.catalogue();
        let mut specs = vec![search_spec()];
        let favourites = self
            .favourites
            .iter()
            .map(|n| (n, UPFRONT_DESCRIPTION_CHARS));
        let found = self.found.iter().map(|n| (n, DEFERRED_DESCRIPTION_CHARS));
        for (name, budget) in favourites.chain(found) {
            if let Some(tool) = catalogue.resolve(name)
                && !specs.iter().any(|s| s.name == tool.qualified)
            {
                specs.push(tool_spec_within(tool, budget));
            }
        }
        specs
    }

    /// True when the model may call `name` now.
    pub fn is_offered(&self, name: &str) -> bool {
        match &self.search {
            None => name != SEARCH_TOOL,
            Some(_) => {
                name == SEARCH_TOOL
                    || self.favourites.iter().any(|f| f == name)
                    || self.found.iter().any(|f| f == name)
            }
        }
    }

    /// Runs a search for the model; the tools found are offered from the next step.
    pub fn search(&mut self, host: &Host, query: &str, limit: usize) -> SearchOutcome {
        let Some(search) = &self.search else {
            return SearchOutcome {
                text: "Every tool is already available; no search is needed.".into(),
                found: Vec::new(),
            };
        };
        let hits = search.search(query, limit.clamp(1, MAX_SEARCH_RESULTS));
        let mut text = if hits.is_empty() {
            format!("No tool matches {query:?}. Try other words.")
        } else {
            format!(
                "{} tools found; they can be called from your next step:\n",
                hits.len()
            )
        };
        let mut found = Vec::new();
        let mut servers: Vec<String> = Vec::new();
        for hit in hits {
            if !servers.contains(&hit.server) {
                servers.push(hit.server.clone());
            }
            let about = host
                .catalogue()
                .resolve(&hit.qualified)
                .map(|tool| {
                    first_line(
                        tool.def
                            .description
                            .as_deref()
                            .or(tool.def.title.as_deref())
                            .unwrap_or(""),
                    )
                })
                .unwrap_or_default();
            text.push_str(&format!(
                "- {} (server {}): {about}\n",
                hit.qualified, hit.server
            ));
            if !self.found.contains(&hit.qualified) {
                self.found.push(hit.qualified.clone());
            }
            found.push(hit.qualified);
        }
        let instructions = server_instructions(host);
        let about: Vec<(&String, &String)> = servers
            .iter()
            .filter_map(|server| instructions.get(server).map(|text| (server, text)))
            .collect();
        if !about.is_empty() {
            text.push_str("\nWhat these servers say about themselves (their own words):\n");
            for (server, said) in about {
                let said = budget(said.trim(), INSTRUCTIONS_CHARS);
                text.push_str(&format!("- {server}: {}\n", said.replace('\n', " ")));
            }
        }
        SearchOutcome { text, found }
    }
}

/// The definition of the search tool.
fn search_spec() -> ToolSpec {
    ToolSpec {
        name: SEARCH_TOOL.into(),
        description: "Search the available tools by keywords (what you want to do, the \
            kind of thing it acts on). Returns the best matches; each one found can be \
            called from your next step. Search again with other words if nothing fits."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words describing the tool you need."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_RESULTS,
                          "description": "How many tools to return (default 8)."}
            },
            "required": ["query"],
            "additionalProperties": false
        }),
    }
}

/// How a catalogue tool offered from the start is shown to the model: its qualified name,
/// its description (or title) within [`UPFRONT_DESCRIPTION_CHARS`], and its input schema
/// exactly as the server sent it (no keyword added, dropped or rewritten; the providers
/// send it on as it is).
pub fn tool_spec(tool: &warden_host::CatalogueTool) -> ToolSpec {
    tool_spec_within(tool, UPFRONT_DESCRIPTION_CHARS)
}

/// Like [`tool_spec`], with the description cut by [`budget`] to `chars` characters.
pub fn tool_spec_within(tool: &warden_host::CatalogueTool, chars: usize) -> ToolSpec {
    let description = tool
        .def
        .description
        .as_deref()
        .or(tool.def.title.as_deref())
        .unwrap_or("");
    ToolSpec {
        name: tool.qualified.clone(),
        description: budget(description, chars),
        input_schema: tool.def.input_schema.clone(),
    }
}

/// `text` within `chars` characters: whole when it fits; else its beginning, cut after the
/// last whitespace that leaves at least half the budget (so no word is split, unless one
/// word fills half the budget), with `…` appended, all within `chars`.
pub fn budget(text: &str, chars: usize) -> String {
    if chars == 0 {
        return String::new();
    }
    if text.chars().nth(chars).is_none() {
        return text.to_owned();
    }
    let head = cut(text, chars - 1);
    let keep = head
        .char_indices()
        .rev()
        .find(|(_, c)| c.is_whitespace())
        .map(|(i, _)| i)
        .filter(|&i| head[..i].chars().count() >= chars / 2)
        .map_or(head, |i| head[..i].trim_end());
    format!("{keep}…")
}

fn spec_tokens(spec: &ToolSpec) -> usize {
    estimate_tokens(&spec.name)
        + estimate_tokens(&spec.description)
        + estimate_tokens(&spec.input_schema.to_string())
}

fn cut(text: &str, chars: usize) -> &str {
    match text.char_indices().nth(chars) {
        Some((index, _)) => &text[..index],
        None => text,
    }
}

/// The first line of a description, at most 200 characters.
fn first_line(text: &str) -> String {
    let line = text
        .lines()
        .find(|line| !line.trim().is_empty())
        .unwrap_or("")
        .trim();
    let short = cut(line, 200);
    if short.len() < line.len() {
        format!("{short}…")
    } else {
        short.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_keeps_short_text_whole() {
        assert_eq!(budget("Read a file.", 100), "Read a file.");
        let exact = "x".repeat(50);
        assert_eq!(budget(&exact, 50), exact);
        assert_eq!(budget("anything", 0), "");
    }

    #[test]
    fn budget_keeps_the_beginning_on_a_word_boundary_within_the_limit() {
        let text = format!(
            "Search flights between airports. {}",
            "More detail here. ".repeat(400)
        );
        for chars in [UPFRONT_DESCRIPTION_CHARS, DEFERRED_DESCRIPTION_CHARS, 64] {
            let shown = budget(&text, chars);
            if text.chars().count() <= chars {
                assert_eq!(shown, text);
                continue;
            }
            assert!(
                shown.chars().count() <= chars,
                "{chars}: {}",
                shown.chars().count()
            );
            assert!(shown.starts_with("Search flights between airports."));
            assert!(shown.ends_with('…'));
            let body = shown.trim_end_matches('…');
            assert!(text.starts_with(body));
            // Cut between words: the next character of the original is whitespace.
            assert!(
                text[body.len()..].starts_with(char::is_whitespace),
                "{body:?}"
            );
        }
    }

    #[test]
    fn budget_cuts_a_single_huge_word_on_a_char_boundary() {
        let word = "é".repeat(10_000);
        let shown = budget(&word, 100);
        assert_eq!(shown.chars().count(), 100);
        assert!(shown.ends_with('…'));
    }
}
