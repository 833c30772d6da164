//! Server-level evidence: which servers a request is about, as a whole.
//!
//! A task often needs two or three tools of one server (a presentation server's
//! `create_presentation`, `add_slide` and `save_presentation` for "make a PPT"), and a
//! request names the server's subject more often than each tool's. Each server is ranked
//! as one document ([`server_field_texts`]: its tools' names, titles and descriptions, its
//! name and its instructions), and [`crate::SearchIndex`] adds a share of its server's
//! score to each tool's own, so the tools of the server a request is about rise together.

use std::collections::HashMap;

use crate::document::{ToolDoc, server_field_texts};
use crate::index::{Entry, ToolIndex};

/// The servers of an index, each ranked as one document.
#[derive(Debug)]
pub(crate) struct ServerIndex {
    /// One document per server, in order of first appearance among the tools.
    pub(crate) index: ToolIndex,
    /// For each tool (in index order), its server's document.
    pub(crate) of_tool: Vec<u32>,
    /// For each server, its tools (in index order).
    pub(crate) tools: Vec<Vec<u32>>,
}

impl ServerIndex {
    /// The server index of `docs` (the tools, in index order).
    pub(crate) fn build(docs: &[ToolDoc]) -> ServerIndex {
        let mut ids: HashMap<&str, u32> = HashMap::new();
        let mut tools: Vec<Vec<u32>> = Vec::new();
        let mut names: Vec<&str> = Vec::new();
        let of_tool = docs
            .iter()
            .enumerate()
            .map(|(i, doc)| {
                let next = u32::try_from(tools.len()).unwrap_or(u32::MAX);
                let id = *ids.entry(doc.server.as_str()).or_insert_with(|| {
                    tools.push(Vec::new());
                    names.push(doc.server.as_str());
                    next
                });
                tools[id as usize].push(u32::try_from(i).unwrap_or(u32::MAX));
                id
            })
            .collect();
        let index = ToolIndex::build_fields(names.iter().zip(&tools).map(|(name, members)| {
            let members: Vec<&ToolDoc> = members.iter().map(|&t| &docs[t as usize]).collect();
            (
                Entry {
                    qualified: (*name).to_owned(),
                    server: (*name).to_owned(),
                    tool: String::new(),
                },
                server_field_texts(name, &members),
            )
        }));
        ServerIndex {
            index,
            of_tool,
            tools,
        }
    }

    /// The number of servers.
    pub(crate) fn len(&self) -> usize {
        self.tools.len()
    }
}
