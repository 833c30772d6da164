//! The tools this server offers: `echo`, `add` and `fail`.
//!
//! Two variables change the list, for tests of pinned tool definitions: a non-empty
//! `WARDEN_TEST_DESCRIPTION_SUFFIX` is appended to `echo`'s description, and
//! `WARDEN_TEST_EXTRA_TOOL=1` adds a tool `extra` (no arguments, answers `extra`). The
//! text of the file `WARDEN_TEST_DESCRIPTION_FILE` names, when it exists, is appended to
//! `echo`'s description too: a definition that changes while the server's configuration
//! does not (a server updated in place).
//! `WARDEN_TEST_SLEEP_TOOL=1` adds a tool `sleep {ms}` that waits that long (at most
//! [`MAX_SLEEP_MS`]) before answering, for tests of concurrent calls.
//!
//! Argument problems are reported as tool results with `isError: true` (so a model can
//! correct itself, as MCP recommends); only an unknown tool name is a protocol error.

use serde_json::{Map, Value, json};

/// The definitions returned by `tools/list`, in a fixed order.
pub(crate) fn definitions() -> Vec<Value> {
    let mut suffix = std::env::var("WARDEN_TEST_DESCRIPTION_SUFFIX").unwrap_or_default();
    if let Some(text) = std::env::var_os("WARDEN_TEST_DESCRIPTION_FILE")
        .and_then(|path| std::fs::read_to_string(path).ok())
    {
        suffix.push_str(text.trim_end());
    }
    let mut tools = vec![
        json!({
            "name": "echo",
            "description": format!("Returns the message, prefixed with \"echo: \".{suffix}"),
            "inputSchema": {
                "type": "object",
                "properties": {"message": {"type": "string"}},
                "required": ["message"],
                "additionalProperties": false
            }
        }),
        json!({
            "name": "add",
            "description": "Adds two integers; the sum is also returned as structured content.",
            "inputSchema": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"]
            },
            "outputSchema": {
                "type": "object",
                "properties": {"sum": {"type": "integer"}},
                "required": ["sum"]
            }
        }),
        json!({
            "name": "fail",
            "description": "Always fails with a tool error (isError: true).",
            "inputSchema": {"type": "object"}
        }),
    ];
    if extra_tool() {
        tools.push(extra_definition());
    }
    if sleep_tool() {
        tools.push(json!({
            "name": "sleep",
            "description": "Waits `ms` milliseconds (at most 10000), then answers `slept N ms`.",
            "inputSchema": {
                "type": "object",
                "properties": {"ms": {"type": "integer", "minimum": 0}},
                "required": ["ms"]
            }
        }));
    }
    tools
}

/// The definition of the `extra` tool.
pub(crate) fn extra_definition() -> Value {
    json!({
        "name": "extra",
        "description": "Answers `extra`.",
        "inputSchema": {"type": "object"}
    })
}

/// The longest `sleep` the server does, in milliseconds.
pub(crate) const MAX_SLEEP_MS: u64 = 10_000;

/// Whether `WARDEN_TEST_SLEEP_TOOL=1` asks for the `sleep` tool.
fn sleep_tool() -> bool {
    std::env::var("WARDEN_TEST_SLEEP_TOOL").is_ok_and(|value| value == "1")
}

/// Whether `WARDEN_TEST_EXTRA_TOOL=1` asks for the `extra` tool.
fn extra_tool() -> bool {
    std::env::var("WARDEN_TEST_EXTRA_TOOL").is_ok_and(|value| value == "1")
}

/// A `CallToolResult` with one text block.
pub(crate) fn text_result(text: &str, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": is_error})
}

/// Runs tool `name` with `arguments` (`Value::Null` when absent). `None` means there is no
/// tool of that name.
pub(crate) fn call(name: &str, arguments: &Value) -> Option<Value> {
    let empty = Map::new();
    let args = match arguments {
        Value::Object(map) => map,
        Value::Null => &empty,
        _ => return Some(text_result("arguments must be an object", true)),
    };
    let result = match name {
        "echo" => echo(args),
        "add" => add(args),
        "fail" => Err("deliberate failure".to_owned()),
        "extra" if extra_tool() => Ok(text_result("extra", false)),
        "sleep" if sleep_tool() => sleep(args),
        _ => return None,
    };
    Some(result.unwrap_or_else(|message| text_result(&message, true)))
}

fn echo(args: &Map<String, Value>) -> Result<Value, String> {
    if let Some(extra) = args.keys().find(|k| *k != "message") {
        return Err(format!("unexpected argument: {extra}"));
    }
    let message = args
        .get("message")
        .and_then(Value::as_str)
        .ok_or("argument message must be a string")?;
    Ok(text_result(&format!("echo: {message}"), false))
}

fn sleep(args: &Map<String, Value>) -> Result<Value, String> {
    let ms = args
        .get("ms")
        .and_then(Value::as_u64)
        .ok_or("argument ms must be a non-negative integer")?
        .min(MAX_SLEEP_MS);
    std::thread::sleep(std::time::Duration::from_millis(ms));
    Ok(text_result(&format!("slept {ms} ms"), false))
}

fn add(args: &Map<String, Value>) -> Result<Value, String> {
    let integer = |key: &str| {
        args.get(key)
            .and_then(Value::as_i64)
            .ok_or_else(|| format!("argument {key} must be an integer"))
    };
    let sum = integer("a")?
        .checked_add(integer("b")?)
        .ok_or("the sum overflows a 64-bit integer")?;
    let mut result = text_result(&sum.to_string(), false);
    result["structuredContent"] = json!({"sum": sum});
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(result: &Value) -> &str {
        result["content"][0]["text"].as_str().unwrap()
    }

    #[test]
    fn echo_prefixes_the_message() {
        let result = call("echo", &json!({"message": "hi"})).unwrap();
        assert_eq!(result["isError"], false);
        assert_eq!(text_of(&result), "echo: hi");
    }

    #[test]
    fn add_returns_text_and_structured_sum() {
        let result = call("add", &json!({"a": 2, "b": -5})).unwrap();
        assert_eq!(text_of(&result), "-3");
        assert_eq!(result["structuredContent"], json!({"sum": -3}));
    }

    #[test]
    fn bad_arguments_are_tool_errors_not_protocol_errors() {
        for (name, args) in [
            ("echo", json!({})),
            ("echo", json!({"message": 1})),
            ("echo", json!({"message": "x", "extra": true})),
            ("add", json!({"a": 1})),
            ("add", json!({"a": 1.5, "b": 2})),
            ("add", json!({"a": i64::MAX, "b": 1})),
            ("add", json!([1, 2])),
        ] {
            let result = call(name, &args).unwrap();
            assert_eq!(result["isError"], true, "{name} {args}");
        }
    }

    #[test]
    fn fail_fails_and_unknown_tools_are_none() {
        let result = call("fail", &Value::Null).unwrap();
        assert_eq!(result["isError"], true);
        assert_eq!(text_of(&result), "deliberate failure");
        assert!(call("nope", &json!({})).is_none());
    }

    #[test]
    fn every_definition_is_callable() {
        for def in definitions() {
            let name = def["name"].as_str().unwrap();
            assert!(call(name, &json!({})).is_some(), "{name}");
            assert_eq!(def["inputSchema"]["type"], "object");
        }
    }
}
