//! What the retrieval evaluations (`eval`, `tool_eval`) share: reading their JSON-lines
//! inputs.

use std::error::Error;
use std::fs;

use serde_json::Value;

/// The JSON values of `path`, one a line (blank lines skipped); errors name the line.
pub fn read_lines(path: &str) -> Result<Vec<Value>, Box<dyn Error>> {
    let text = fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| {
            serde_json::from_str(line).map_err(|e| format!("{path}:{}: {e}", n + 1).into())
        })
        .collect()
}

/// The string at `key` of `value`, empty when absent.
pub fn text(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}
