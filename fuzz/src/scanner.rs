//! The tool-description scanner (`warden_policy::scan`), on a definition a server sends.
//! Properties: it never panics; its score is a number in `[0, 1]` (or 0 when it read
//! nothing); it is deterministic (the same definition, the same flags and score); and
//! the name helpers (`skeleton`, `escape_non_ascii`, `name_confusable`) terminate and
//! `escape_non_ascii` yields ASCII only.
//!
//! Input: a tool definition as JSON; anything else is taken as a description.

use serde_json::{Value, json};
use warden_policy::scan::{self, ToolText};

const OTHERS: [(&str, &str); 3] = [
    ("github", "create_issue"),
    ("fs", "read_file"),
    ("mail", "send_email"),
];

/// Scans one input.
pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let definition = match serde_json::from_str::<Value>(&text) {
        Ok(value @ Value::Object(_)) => value,
        _ => json!({"name": "tool", "description": text}),
    };
    let tool = ToolText::from_definition(&definition);
    let first = scan::assess("fuzz", &tool, &OTHERS);
    assert!(
        first.score.is_finite() && (0.0..=1.0).contains(&first.score),
        "score {}",
        first.score
    );
    let second = scan::assess("fuzz", &tool, &OTHERS);
    assert_eq!(
        format!("{first:?}"),
        format!("{second:?}"),
        "not deterministic"
    );
    let _ = scan::units(&tool);

    let name = tool.name;
    let _ = scan::skeleton(name);
    assert!(scan::escape_non_ascii(name).is_ascii());
    let _ = scan::name_confusable("fuzz", name, &OTHERS);
}
