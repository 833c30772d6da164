//! The elicitation form parser of `warden chat` (crates/warden/src/elicit.rs: a server's
//! requested schema, then the user's typed answers read against it). The binary crate
//! has no library, so its two modules are compiled into this crate from their files.
//! Properties: a schema is turned into fields or refused with a reason; answering a form
//! always ends (accept, decline or cancel) within a bounded number of lines; an accepted
//! answer holds only the schema's fields.
//!
//! Input: the schema as JSON, then a NUL, then the answer lines.

use std::collections::VecDeque;

use futures::future::BoxFuture;
use serde_json::Value;
use warden_mcp::ElicitationAnswer;

#[allow(dead_code, missing_docs, clippy::all)]
#[path = "../../crates/warden/src/elicit.rs"]
mod elicit;

struct Lines(VecDeque<String>);

impl elicit::Input for Lines {
    fn line(&mut self) -> BoxFuture<'_, Option<String>> {
        let next = self.0.pop_front();
        Box::pin(async move { next })
    }
}

/// Parses one schema and answers it.
pub fn run(data: &[u8]) {
    let (schema, answers) = crate::split2(data);
    let Ok(schema) = serde_json::from_slice::<Value>(schema) else {
        return;
    };
    let Ok(fields) = elicit::parse_form(&schema) else {
        return;
    };
    let lines: VecDeque<String> = String::from_utf8_lossy(answers)
        .split('\n')
        .map(str::to_owned)
        .collect();
    let supplied = lines.len();
    let mut input = Lines(lines);
    let mut out = Vec::new();
    let answer = crate::block_on(elicit::ask_form(
        "fuzz",
        "a message",
        &schema,
        &mut input,
        &mut out,
    ));
    assert!(input.0.len() <= supplied);
    if let ElicitationAnswer::Accept(Some(content)) = answer {
        let properties = schema["properties"].as_object().unwrap();
        assert!(content.len() <= fields.len());
        for key in content.keys() {
            assert!(
                properties.contains_key(key),
                "answer holds {key}, not a field"
            );
        }
    }
}
