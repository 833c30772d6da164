//! What both wire formats have in common: the parts of a request that expectations and the
//! log look at, a refused request, and the checks both providers make on names.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use crate::script::Reply;

/// A request, reduced to what a script's expectations may test.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct RequestView {
    /// The names of the request's tools, in the order sent.
    pub(crate) tools: Vec<String>,
    /// The tool results of the request's last message group (Anthropic: the `tool_result`
    /// blocks of the last message if it is a user message; OpenAI: the trailing `tool`
    /// messages), as text.
    pub(crate) last_tool_results: Vec<String>,
    /// The text of the most recent user message that has any text (tool results excluded).
    pub(crate) last_user_text: String,
}

/// A checked request: the view plus what the answer depends on.
#[derive(Debug, Clone)]
pub(crate) struct ParsedRequest {
    pub(crate) view: RequestView,
    pub(crate) model: String,
    pub(crate) stream: bool,
    /// OpenAI `stream_options.include_usage`.
    pub(crate) include_usage: bool,
    /// A rough token count of the request, for `usage`.
    pub(crate) input_tokens: u64,
}

/// A request the server refuses, as the provider would: a status and a message.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rejection {
    pub(crate) status: u16,
    pub(crate) message: String,
}

impl Rejection {
    /// A 400 "invalid request".
    pub(crate) fn invalid(message: impl Into<String>) -> Rejection {
        Rejection {
            status: 400,
            message: message.into(),
        }
    }
}

/// Whether `name` is a valid tool name for both providers: `^[a-zA-Z0-9_-]{1,64}$`.
pub(crate) fn is_valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Checks a tool name, naming where it was found.
pub(crate) fn check_tool_name(name: &str, place: &str) -> Result<(), Rejection> {
    if is_valid_tool_name(name) {
        Ok(())
    } else {
        Err(Rejection::invalid(format!(
            "{place}: tool name {name:?} does not match ^[a-zA-Z0-9_-]{{1,64}}$"
        )))
    }
}

/// Checks that tool names are unique, naming the first repeated one.
pub(crate) fn check_unique(names: &[String]) -> Result<(), Rejection> {
    for (index, name) in names.iter().enumerate() {
        if names[..index].contains(name) {
            return Err(Rejection::invalid(format!(
                "tools: tool names must be unique; {name:?} appears twice"
            )));
        }
    }
    Ok(())
}

/// A rough token count: a quarter of the characters, at least one.
pub(crate) fn rough_tokens(text: &str) -> u64 {
    u64::try_from(text.chars().count() / 4)
        .unwrap_or(u64::MAX)
        .max(1)
}

/// A field of a JSON object, as a string, or a 400 naming it.
pub(crate) fn required_str<'a>(
    object: &'a Value,
    field: &str,
    place: &str,
) -> Result<&'a str, Rejection> {
    match object.get(field) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(Rejection::invalid(format!(
            "{place}.{field}: must be a string"
        ))),
        None => Err(Rejection::invalid(format!(
            "{place}.{field}: field required"
        ))),
    }
}

/// An optional boolean field, or a 400 naming it.
pub(crate) fn optional_bool(object: &Value, field: &str, place: &str) -> Result<bool, Rejection> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(Rejection::invalid(format!(
            "{place}.{field}: must be a boolean"
        ))),
    }
}

/// The (input, output) token counts of a reply: the script's, or rough ones.
pub(crate) fn token_counts(reply: &Reply, request: &ParsedRequest) -> (u64, u64) {
    if let Some(usage) = reply.usage {
        return (usage.input_tokens, usage.output_tokens);
    }
    let mut text = reply.text.clone().unwrap_or_default();
    for call in &reply.tool_calls {
        text.push_str(&call.name);
        text.push_str(&call.arguments.to_string());
    }
    (request.input_tokens, rough_tokens(&text))
}

/// Whether the scripted turn ends at the token limit.
pub(crate) fn hit_max_tokens(reply: &Reply) -> bool {
    reply.stop.as_deref() == Some("max_tokens")
}

/// Counters for the ids the server makes up, so every id in one run is distinct and runs
/// are reproducible.
#[derive(Debug, Default)]
pub(crate) struct Ids {
    next: AtomicU64,
}

impl Ids {
    /// The next number, starting at 1.
    pub(crate) fn next(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// Splits `text` into pieces of at most `size` characters (never splitting a character), at
/// least two pieces when the text has two or more characters, so a client that only reads
/// the first delta is caught.
pub(crate) fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let size = size.max(1).min(chars.len().div_ceil(2)).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn tool_names_follow_the_providers_pattern() {
        assert!(is_valid_tool_name("read_file-2"));
        assert!(is_valid_tool_name(&"a".repeat(64)));
        assert!(!is_valid_tool_name(&"a".repeat(65)));
        assert!(!is_valid_tool_name(""));
        assert!(!is_valid_tool_name("fs.read"));
        assert!(!is_valid_tool_name("ünïcode"));
    }

    #[test]
    fn pieces_split_into_at_least_two_and_rejoin() {
        assert_eq!(pieces("", 4), Vec::<String>::new());
        assert_eq!(pieces("a", 4), vec!["a"]);
        assert_eq!(pieces("ab", 4), vec!["a", "b"]);
        let text = "héllo wörld, this is longer";
        let split = pieces(text, 5);
        assert!(split.len() >= 2);
        assert!(split.iter().all(|p| p.chars().count() <= 5));
        assert_eq!(split.concat(), text);
    }

    #[test]
    fn duplicate_tools_are_named() {
        let names = vec!["a".to_string(), "b".to_string(), "a".to_string()];
        assert!(check_unique(&names).unwrap_err().message.contains("\"a\""));
    }
}
