//! What the JSON formats share: JSONC clean-up, error positions, locating a server's key.

use std::collections::BTreeMap;
use std::path::Path;

use serde::de::DeserializeOwned;

use crate::error::{ConfigError, LineCol};
use crate::jsonc;

/// Blanks out comments and trailing commas (see [`jsonc`]).
pub(super) fn strip_comments(text: &str, path: &Path) -> Result<String, ConfigError> {
    jsonc::strip(text).map_err(|e| ConfigError::Parse {
        path: path.to_owned(),
        at: Some(LineCol::at_offset(text, e.offset)),
        message: "this `/*` comment is never closed".to_owned(),
    })
}

/// Parses a plain JSON document whose top level must be an object (serde would otherwise
/// accept an array for a struct, with baffling messages).
pub(super) fn from_object<T: DeserializeOwned>(plain: &str, path: &Path) -> Result<T, ConfigError> {
    let start = plain.len() - plain.trim_start().len();
    if plain[start..].starts_with('[') {
        return Err(ConfigError::Parse {
            path: path.to_owned(),
            at: Some(LineCol::at_offset(plain, start)),
            message: "expected a JSON object (`{ ... }`) at the top level".to_owned(),
        });
    }
    from_plain(plain, path)
}

/// Parses plain JSON (already stripped), reporting serde_json's line and column.
pub(super) fn from_plain<T: DeserializeOwned>(plain: &str, path: &Path) -> Result<T, ConfigError> {
    serde_json::from_str(plain).map_err(|e| {
        let at = (e.line() > 0).then(|| LineCol {
            line: e.line(),
            // serde_json counts columns from 0 before the first character of a line.
            column: e.column().max(1),
        });
        // serde_json appends " at line L column C" to its message; the position is already
        // in front of ours.
        let full = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        let message = full.strip_suffix(&suffix).unwrap_or(&full).to_owned();
        ConfigError::Parse {
            path: path.to_owned(),
            at,
            message,
        }
    })
}

/// Byte offset of `"key":`, searching from byte `from`. Callers search for server names in
/// file order, each from the previous one, which is good enough to point at the right entry.
pub(super) fn key_offset(plain: &str, key: &str, from: usize) -> Option<usize> {
    let quoted = serde_json::to_string(key).ok()?;
    let mut start = from.min(plain.len());
    while let Some(found) = plain.get(start..)?.find(&quoted) {
        let at = start + found;
        let after = plain[at + quoted.len()..].trim_start();
        if after.starts_with(':') {
            return Some(at);
        }
        start = at + quoted.len();
    }
    None
}

/// Finds each name's position, in order, starting inside the `section` object.
pub(super) fn name_positions<'a>(
    plain: &str,
    section: &str,
    names: impl IntoIterator<Item = &'a str>,
) -> Vec<Option<LineCol>> {
    let mut from = section_offset(plain, section);
    names
        .into_iter()
        .map(|name| {
            let found = key_offset(plain, name, from)?;
            from = found + 1;
            Some(LineCol::at_offset(plain, found))
        })
        .collect()
}

/// Byte offset just after the top-level section key (`"mcpServers"`, `"servers"`), so that
/// server keys are searched for inside it.
pub(super) fn section_offset(plain: &str, section: &str) -> usize {
    let quoted = format!("\"{section}\"");
    plain.find(&quoted).map_or(0, |i| i + quoted.len())
}

/// Turns a JSON `env` object into strings: VS Code allows numbers there as well.
/// `null` (VS Code's "remove this variable") cannot be expressed: Warden only adds variables.
pub(super) fn env_strings(
    env: BTreeMap<String, serde_json::Value>,
) -> Result<BTreeMap<String, String>, String> {
    env.into_iter()
        .map(|(key, value)| match value {
            serde_json::Value::String(s) => Ok((key, s)),
            serde_json::Value::Number(n) => Ok((key, n.to_string())),
            serde_json::Value::Bool(b) => Ok((key, b.to_string())),
            serde_json::Value::Null => Err(format!(
                "env `{key}` is null; removing an inherited variable is not supported"
            )),
            _ => Err(format!("env `{key}` must be a string")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_keys_not_values() {
        let text = "{\n \"servers\": {\n  \"a\": {\"command\": \"time\"},\n  \"time\" : {},\n  \"time\": {}\n }\n}";
        assert_eq!(
            name_positions(text, "servers", ["a", "time", "time", "nope"]),
            vec![
                Some(LineCol { line: 3, column: 3 }),
                Some(LineCol { line: 4, column: 3 }),
                Some(LineCol { line: 5, column: 3 }),
                None,
            ]
        );
    }

    #[test]
    fn json_errors_carry_position_once() {
        let err =
            from_plain::<serde_json::Value>("{\n  \"a\": 1\n  \"b\": 2\n}", Path::new("/x.json"))
                .unwrap_err();
        assert_eq!(err.to_string(), "/x.json:3:3: expected `,` or `}`");
    }
}
