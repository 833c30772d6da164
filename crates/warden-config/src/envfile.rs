//! `KEY=VALUE` environment files, as named by VS Code's `envFile`.
//!
//! Supported: blank lines, `#` comment lines, an optional `export ` prefix, values in single
//! or double quotes (taken literally, without escapes), and ` #` comments after unquoted
//! values. Values are not expanded.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{ConfigError, LineCol};

/// Parses an environment file; errors point at the offending line.
pub fn parse(text: &str, path: &Path) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut vars = BTreeMap::new();
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let error = |message: &str| ConfigError::Parse {
            path: path.to_owned(),
            at: Some(LineCol {
                line: index + 1,
                column: 1,
            }),
            message: message.to_owned(),
        };
        let assignment = trimmed
            .strip_prefix("export ")
            .map_or(trimmed, str::trim_start);
        let Some((key, value)) = assignment.split_once('=') else {
            return Err(error("expected KEY=VALUE"));
        };
        let key = key.trim();
        let key_ok = key
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if !key_ok {
            return Err(error("invalid variable name before `=`"));
        }
        vars.insert(key.to_owned(), unquote(value.trim()));
    }
    Ok(vars)
}

fn unquote(value: &str) -> String {
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|v| v.strip_suffix(quote))
        {
            return inner.to_owned();
        }
    }
    match value.find(" #") {
        Some(comment) => value[..comment].trim_end().to_owned(),
        None => value.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_assignments() {
        let text = "# comment\n\nA=1\nexport B = two words \nC=\"quoted # not comment\"\nD='x'\nE=v # note\nF=\n";
        let vars = parse(text, Path::new("/p/.env")).unwrap();
        let expected: BTreeMap<String, String> = [
            ("A", "1"),
            ("B", "two words"),
            ("C", "quoted # not comment"),
            ("D", "x"),
            ("E", "v"),
            ("F", ""),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(vars, expected);
    }

    #[test]
    fn errors_name_the_line() {
        let err = parse("A=1\nnot an assignment\n", Path::new("/p/.env")).unwrap_err();
        assert_eq!(err.to_string(), "/p/.env:2:1: expected KEY=VALUE");
        let err = parse("1A=1\n", Path::new("/p/.env")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "/p/.env:1:1: invalid variable name before `=`"
        );
    }
}
