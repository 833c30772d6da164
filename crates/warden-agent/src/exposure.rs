//! Which tools the model sees.
//!
//! A catalogue within the budget (by count and by the estimated tokens of the
//! definitions) is offered whole. A larger one is not: the model sees Warden's reserved
//! [`SEARCH_TOOL`], the pinned favourites, and the tools its searches found, which become
//! callable from the next step. The order never changes except by appending, so the
//! offered list stays a stable, cacheable prefix of every request.

use serde_json::json;
use warden_host::Host;
use warden_host::search::ToolSearch;

use crate::conversation::estimate_tokens;
use crate::model::ToolSpec;

/// The reserved name of Warden's search tool. No server tool can take it: server
/// tools are always `server__tool`, and the server name `warden` is reserved.
pub const SEARCH_TOOL: &str = "warden__search_tools";
/// The longest description offered to the model, in characters (the same cut the search
/// index makes).
pub const DESCRIPTION_CHAR_CAP: usize = 4096;
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
        let tools = host.catalogue().tools();
        let tokens: usize = tools.iter().map(|tool| spec_tokens(&tool_spec(tool))).sum();
        let search_mode = tools.len() > tool_budget || tokens > token_budget;
        let favourites = favourites
            .iter()
            .filter(|name| host.catalogue().resolve(name).is_some())
            .cloned()
            .collect();
        Exposure {
            search: search_mode.then(|| ToolSearch::new(host.catalogue())),
            favourites,
            found: Vec::new(),
        }
    }

    /// Follows a catalogue that changed (a server's tool list was read again): the search
    /// index is rebuilt; the mode stays as the session started, and the tools found or
    /// pinned keep their places (a tool that is gone is simply no longer offered).
    pub fn refresh(&mut self, host: &Host) {
        if self.search.is_some() {
            self.search = Some(ToolSearch::new(host.catalogue()));
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
        let mut specs = vec![search_spec()];
        for name in self.favourites.iter().chain(&self.found) {
            if let Some(tool) = host.catalogue().resolve(name)
                && !specs.iter().any(|s| s.name == tool.qualified)
            {
                specs.push(tool_spec(tool));
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
        for hit in hits {
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

/// How a catalogue tool is shown to the model: its qualified name, its description (or
/// title) cut to [`DESCRIPTION_CHAR_CAP`], and its input schema exactly as the server sent
/// it (no keyword added, dropped or rewritten; the providers send it on as it is).
pub fn tool_spec(tool: &warden_host::CatalogueTool) -> ToolSpec {
    let description = tool
        .def
        .description
        .as_deref()
        .or(tool.def.title.as_deref())
        .unwrap_or("");
    ToolSpec {
        name: tool.qualified.clone(),
        description: cut(description, DESCRIPTION_CHAR_CAP).to_owned(),
        input_schema: tool.def.input_schema.clone(),
    }
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
