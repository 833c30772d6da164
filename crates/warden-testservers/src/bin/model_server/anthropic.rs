//! The Anthropic Messages API (`POST /v1/messages`): header and body checks as the real API
//! makes them, and replies, streamed or whole, in its wire format.

use bytes::Bytes;
use http::HeaderMap;
use serde_json::{Value, json};

use crate::conversation::{
    Ids, ParsedRequest, Rejection, RequestView, check_tool_name, check_unique, hit_max_tokens,
    optional_bool, pieces, required_str, rough_tokens, token_counts,
};
use crate::script::Reply;
use crate::sse::named_event;

/// Characters per `text_delta`.
const TEXT_PIECE: usize = 8;
/// Characters per `input_json_delta`.
const JSON_PIECE: usize = 7;

/// Checks `x-api-key` (present, and equal to `require_key` when given) and
/// `anthropic-version` (present).
pub(crate) fn check_headers(
    headers: &HeaderMap,
    require_key: Option<&str>,
) -> Result<(), Rejection> {
    let Some(key) = headers.get("x-api-key") else {
        return Err(Rejection {
            status: 401,
            message: "x-api-key header is required".into(),
        });
    };
    if let Some(required) = require_key
        && key.as_bytes() != required.as_bytes()
    {
        return Err(Rejection {
            status: 401,
            message: "invalid x-api-key".into(),
        });
    }
    if headers.get("anthropic-version").is_none() {
        return Err(Rejection::invalid("anthropic-version: header is required"));
    }
    Ok(())
}

/// The `error.type` the real API uses for `status`.
pub(crate) fn error_type(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        500..=599 => "api_error",
        _ => "invalid_request_error",
    }
}

/// The message a scripted error step sends unless it names its own.
pub(crate) fn default_error_message(status: u16) -> &'static str {
    match status {
        429 => "Number of requests has exceeded your rate limit (scripted error step)",
        529 => "Overloaded (scripted error step)",
        500..=599 => "Internal server error (scripted error step)",
        _ => "Invalid request (scripted error step)",
    }
}

/// `{"type": "error", "error": {"type", "message"}}`.
pub(crate) fn error_body(status: u16, message: &str) -> Value {
    json!({"type": "error", "error": {"type": error_type(status), "message": message}})
}

/// The in-stream error event: `event: error` with the error body.
pub(crate) fn stream_error_event(status: u16, message: &str) -> Bytes {
    named_event("error", &error_body(status, message))
}

/// Checks a request body as the real API would and reduces it to a [`ParsedRequest`].
pub(crate) fn parse(body: &Value) -> Result<ParsedRequest, Rejection> {
    if !body.is_object() {
        return Err(Rejection::invalid("request body must be a JSON object"));
    }
    let model = required_str(body, "model", "body")?;
    if model.is_empty() {
        return Err(Rejection::invalid("model: must not be empty"));
    }
    match body.get("max_tokens") {
        None => return Err(Rejection::invalid("max_tokens: field required")),
        Some(v) if v.as_u64().is_some_and(|n| n >= 1) => {}
        Some(_) => {
            return Err(Rejection::invalid(
                "max_tokens: must be an integer greater than 0",
            ));
        }
    }
    check_system(body.get("system"))?;
    let stream = optional_bool(body, "stream", "body")?;
    let tools = parse_tools(body.get("tools"))?;
    check_tool_choice(body.get("tool_choice"))?;
    let messages = match body.get("messages") {
        Some(Value::Array(messages)) if !messages.is_empty() => messages,
        Some(Value::Array(_)) => {
            return Err(Rejection::invalid(
                "messages: at least one message is required",
            ));
        }
        Some(_) => return Err(Rejection::invalid("messages: must be an array")),
        None => return Err(Rejection::invalid("messages: field required")),
    };
    check_messages(messages)?;
    Ok(ParsedRequest {
        view: RequestView {
            tools,
            last_tool_results: last_tool_results(messages),
            last_user_text: last_user_text(messages),
        },
        model: model.to_string(),
        stream,
        include_usage: false,
        input_tokens: rough_tokens(&body.to_string()),
    })
}

fn check_system(system: Option<&Value>) -> Result<(), Rejection> {
    match system {
        None | Some(Value::String(_)) => Ok(()),
        Some(Value::Array(blocks)) => {
            for (index, block) in blocks.iter().enumerate() {
                let place = format!("system.{index}");
                if block.get("type").and_then(Value::as_str) != Some("text") {
                    return Err(Rejection::invalid(format!(
                        "{place}.type: must be \"text\""
                    )));
                }
                required_str(block, "text", &place)?;
            }
            Ok(())
        }
        Some(_) => Err(Rejection::invalid(
            "system: must be a string or an array of text blocks",
        )),
    }
}

fn parse_tools(tools: Option<&Value>) -> Result<Vec<String>, Rejection> {
    let tools = match tools {
        None => return Ok(Vec::new()),
        Some(Value::Array(tools)) => tools,
        Some(_) => return Err(Rejection::invalid("tools: must be an array")),
    };
    let mut names = Vec::with_capacity(tools.len());
    for (index, tool) in tools.iter().enumerate() {
        let place = format!("tools.{index}");
        if !tool.is_object() {
            return Err(Rejection::invalid(format!("{place}: must be an object")));
        }
        let name = required_str(tool, "name", &place)?;
        check_tool_name(name, &format!("{place}.name"))?;
        // Server tools (`{"type": "web_search_...", "name": ...}`) carry no schema.
        let custom = matches!(
            tool.get("type").and_then(Value::as_str),
            None | Some("custom")
        );
        if custom {
            match tool.get("input_schema") {
                Some(schema) if schema.is_object() => {}
                Some(_) => {
                    return Err(Rejection::invalid(format!(
                        "{place}.input_schema: must be an object"
                    )));
                }
                None => {
                    return Err(Rejection::invalid(format!(
                        "{place}.input_schema: field required"
                    )));
                }
            }
            if let Some(description) = tool.get("description")
                && !description.is_string()
            {
                return Err(Rejection::invalid(format!(
                    "{place}.description: must be a string"
                )));
            }
        }
        names.push(name.to_string());
    }
    check_unique(&names)?;
    Ok(names)
}

fn check_tool_choice(choice: Option<&Value>) -> Result<(), Rejection> {
    let Some(choice) = choice else {
        return Ok(());
    };
    match choice.get("type").and_then(Value::as_str) {
        Some("auto" | "any" | "none") => Ok(()),
        Some("tool") => required_str(choice, "name", "tool_choice").map(|_| ()),
        _ => Err(Rejection::invalid(
            "tool_choice.type: must be one of \"auto\", \"any\", \"tool\", \"none\"",
        )),
    }
}

/// The tool_use ids and tool_result ids of one message.
#[derive(Default)]
struct MessageTools {
    uses: Vec<String>,
    results: Vec<(usize, String)>,
}

fn check_messages(messages: &[Value]) -> Result<(), Rejection> {
    let mut all_use_ids: Vec<String> = Vec::new();
    let mut previous: Option<(&str, MessageTools)> = None;
    for (index, message) in messages.iter().enumerate() {
        let place = format!("messages.{index}");
        let role = required_str(message, "role", &place)?;
        if role != "user" && role != "assistant" {
            return Err(Rejection::invalid(format!(
                "{place}.role: must be \"user\" or \"assistant\" (system text goes in the top-level \"system\" field)"
            )));
        }
        match (index, previous.as_ref()) {
            (0, _) if role != "user" => {
                return Err(Rejection::invalid(
                    "messages.0.role: the first message must use the \"user\" role",
                ));
            }
            (_, Some((previous_role, _))) if *previous_role == role => {
                return Err(Rejection::invalid(format!(
                    "{place}.role: roles must alternate between \"user\" and \"assistant\", but found two \"{role}\" messages in a row"
                )));
            }
            _ => {}
        }
        let final_assistant = role == "assistant" && index + 1 == messages.len();
        let tools = check_content(message.get("content"), role, &place, final_assistant)?;
        for id in &tools.uses {
            if all_use_ids.contains(id) {
                return Err(Rejection::invalid(format!(
                    "{place}: tool_use ids must be unique; {id:?} appears twice"
                )));
            }
            all_use_ids.push(id.clone());
        }
        // Every tool_result answers a tool_use of the message just before.
        let previous_uses: &[String] = match &previous {
            Some((_, p)) => &p.uses,
            None => &[],
        };
        for (block, id) in &tools.results {
            if !previous_uses.contains(id) {
                return Err(Rejection::invalid(format!(
                    "{place}.content.{block}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                )));
            }
        }
        // Every tool_use of the message just before is answered here.
        let missing: Vec<&String> = previous_uses
            .iter()
            .filter(|id| !tools.results.iter().any(|(_, r)| r == *id))
            .collect();
        if !missing.is_empty() {
            return Err(Rejection::invalid(format!(
                "messages.{}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                index - 1,
                join(&missing)
            )));
        }
        previous = Some((role, tools));
    }
    if let Some((_, last)) = previous
        && !last.uses.is_empty()
    {
        return Err(Rejection::invalid(format!(
            "messages.{}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
            messages.len() - 1,
            join(&last.uses.iter().collect::<Vec<_>>())
        )));
    }
    Ok(())
}

fn join(ids: &[&String]) -> String {
    ids.iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn check_content(
    content: Option<&Value>,
    role: &str,
    place: &str,
    final_assistant: bool,
) -> Result<MessageTools, Rejection> {
    let blocks = match content {
        None => {
            return Err(Rejection::invalid(format!(
                "{place}.content: field required"
            )));
        }
        Some(Value::String(text)) => {
            if text.is_empty() && !final_assistant {
                return Err(Rejection::invalid(format!(
                    "{place}: all messages must have non-empty content except for the optional final assistant message"
                )));
            }
            return Ok(MessageTools::default());
        }
        Some(Value::Array(blocks)) => blocks,
        Some(_) => {
            return Err(Rejection::invalid(format!(
                "{place}.content: must be a string or an array of content blocks"
            )));
        }
    };
    if blocks.is_empty() && !final_assistant {
        return Err(Rejection::invalid(format!(
            "{place}: all messages must have non-empty content except for the optional final assistant message"
        )));
    }
    let mut tools = MessageTools::default();
    let mut seen_other = false;
    for (index, block) in blocks.iter().enumerate() {
        let place = format!("{place}.content.{index}");
        let kind = required_str(block, "type", &place)?;
        match kind {
            "text" => {
                if required_str(block, "text", &place)?.is_empty() {
                    return Err(Rejection::invalid(format!(
                        "{place}: text content blocks must be non-empty"
                    )));
                }
                seen_other = true;
            }
            "tool_use" => {
                if role != "assistant" {
                    return Err(Rejection::invalid(format!(
                        "{place}: `tool_use` blocks may only appear in assistant messages"
                    )));
                }
                let id = required_str(block, "id", &place)?;
                if !is_valid_id(id) {
                    return Err(Rejection::invalid(format!(
                        "{place}.id: {id:?} does not match ^[a-zA-Z0-9_-]+$"
                    )));
                }
                check_tool_name(
                    required_str(block, "name", &place)?,
                    &format!("{place}.name"),
                )?;
                if !block.get("input").is_some_and(Value::is_object) {
                    return Err(Rejection::invalid(format!(
                        "{place}.input: must be an object"
                    )));
                }
                tools.uses.push(id.to_string());
            }
            "tool_result" => {
                if role != "user" {
                    return Err(Rejection::invalid(format!(
                        "{place}: `tool_result` blocks may only appear in user messages"
                    )));
                }
                if seen_other {
                    return Err(Rejection::invalid(format!(
                        "{place}: `tool_result` blocks must come first in the content of a user message, before any other block"
                    )));
                }
                let id = required_str(block, "tool_use_id", &place)?;
                match block.get("content") {
                    None | Some(Value::String(_)) => {}
                    Some(Value::Array(inner)) => {
                        for (j, part) in inner.iter().enumerate() {
                            let inner_place = format!("{place}.content.{j}");
                            match required_str(part, "type", &inner_place)? {
                                "text" => {
                                    required_str(part, "text", &inner_place)?;
                                }
                                "image" | "document" | "search_result" => {}
                                other => {
                                    return Err(Rejection::invalid(format!(
                                        "{inner_place}.type: {other:?} is not allowed in a tool_result"
                                    )));
                                }
                            }
                        }
                    }
                    Some(_) => {
                        return Err(Rejection::invalid(format!(
                            "{place}.content: must be a string or an array of blocks"
                        )));
                    }
                }
                optional_bool(block, "is_error", &place)?;
                tools.results.push((index, id.to_string()));
            }
            "image"
            | "document"
            | "thinking"
            | "redacted_thinking"
            | "search_result"
            | "server_tool_use"
            | "web_search_tool_result" => {
                seen_other = true;
            }
            other => {
                return Err(Rejection::invalid(format!(
                    "{place}.type: unknown content block type {other:?}"
                )));
            }
        }
    }
    Ok(tools)
}

/// The text of a tool_result's `content` (a string, or its text blocks joined by newlines).
fn tool_result_text(block: &Value) -> String {
    match block.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn last_tool_results(messages: &[Value]) -> Vec<String> {
    let Some(last) = messages.last() else {
        return Vec::new();
    };
    if last.get("role").and_then(Value::as_str) != Some("user") {
        return Vec::new();
    }
    match last.get("content") {
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
            .map(tool_result_text)
            .collect(),
        _ => Vec::new(),
    }
}

fn last_user_text(messages: &[Value]) -> String {
    for message in messages.iter().rev() {
        if message.get("role").and_then(Value::as_str) != Some("user") {
            continue;
        }
        let text = match message.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(blocks)) => blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        };
        if !text.is_empty() {
            return text;
        }
    }
    String::new()
}

/// One content block of a reply.
enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
}

fn blocks(reply: &Reply, ids: &Ids) -> Vec<Block> {
    let mut blocks = Vec::new();
    if let Some(text) = reply.text.as_ref().filter(|t| !t.is_empty()) {
        blocks.push(Block::Text(text.clone()));
    }
    for call in &reply.tool_calls {
        blocks.push(Block::ToolUse {
            id: call
                .id
                .clone()
                .unwrap_or_else(|| format!("toolu_01{:0>22}", ids.next())),
            name: call.name.clone(),
            input: call.arguments.clone(),
        });
    }
    blocks
}

fn stop_reason(reply: &Reply) -> &'static str {
    if hit_max_tokens(reply) {
        "max_tokens"
    } else if reply.tool_calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    }
}

/// The whole reply, as a non-streaming response body.
pub(crate) fn reply_body(reply: &Reply, request: &ParsedRequest, ids: &Ids) -> Value {
    let (input_tokens, output_tokens) = token_counts(reply, request);
    let content: Vec<Value> = blocks(reply, ids)
        .into_iter()
        .map(|block| match block {
            Block::Text(text) => json!({"type": "text", "text": text}),
            Block::ToolUse { id, name, input } => {
                json!({"type": "tool_use", "id": id, "name": name, "input": input})
            }
        })
        .collect();
    json!({
        "id": format!("msg_01{:0>22}", ids.next()),
        "type": "message",
        "role": "assistant",
        "model": request.model,
        "content": content,
        "stop_reason": stop_reason(reply),
        "stop_sequence": null,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    })
}

/// The reply as a sequence of server-sent events.
pub(crate) fn reply_events(reply: &Reply, request: &ParsedRequest, ids: &Ids) -> Vec<Bytes> {
    let (input_tokens, output_tokens) = token_counts(reply, request);
    let mut events = vec![named_event(
        "message_start",
        &json!({"type": "message_start", "message": {
            "id": format!("msg_01{:0>22}", ids.next()),
            "type": "message",
            "role": "assistant",
            "model": request.model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1},
        }}),
    )];
    let ping = || named_event("ping", &json!({"type": "ping"}));
    let blocks = blocks(reply, ids);
    if blocks.is_empty() {
        events.push(ping());
    }
    for (index, block) in blocks.into_iter().enumerate() {
        let (start, deltas) = match block {
            Block::Text(text) => (
                json!({"type": "text", "text": ""}),
                pieces(&text, TEXT_PIECE)
                    .into_iter()
                    .map(|p| json!({"type": "text_delta", "text": p}))
                    .collect::<Vec<_>>(),
            ),
            Block::ToolUse { id, name, input } => {
                // The real API opens with an empty fragment, then splits the JSON anywhere.
                let mut deltas = vec![json!({"type": "input_json_delta", "partial_json": ""})];
                deltas.extend(
                    pieces(&input.to_string(), JSON_PIECE)
                        .into_iter()
                        .map(|p| json!({"type": "input_json_delta", "partial_json": p})),
                );
                (
                    json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                    deltas,
                )
            }
        };
        events.push(named_event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        if index == 0 {
            events.push(ping());
        }
        for delta in deltas {
            events.push(named_event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        events.push(named_event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
    }
    events.push(named_event(
        "message_delta",
        &json!({"type": "message_delta",
                "delta": {"stop_reason": stop_reason(reply), "stop_sequence": null},
                "usage": {"output_tokens": output_tokens}}),
    ));
    events.push(named_event(
        "message_stop",
        &json!({"type": "message_stop"}),
    ));
    events
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;
    use crate::script::ToolCall;

    fn request(messages: Value) -> Value {
        json!({"model": "m", "max_tokens": 10, "messages": messages,
               "tools": [{"name": "add", "description": "adds", "input_schema": {"type": "object"}}]})
    }

    fn rejected(body: Value) -> String {
        parse(&body).unwrap_err().message
    }

    #[test]
    fn a_tool_round_trip_is_accepted_and_viewed() {
        let parsed = parse(&request(json!([
            {"role": "user", "content": "add 1 and 2"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "adding"},
                {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "3"}]}]}
        ])))
        .unwrap();
        assert_eq!(parsed.view.tools, vec!["add"]);
        assert_eq!(parsed.view.last_tool_results, vec!["3"]);
        assert_eq!(parsed.view.last_user_text, "add 1 and 2");
    }

    #[test]
    fn conversation_shape_is_checked() {
        assert!(
            rejected(request(json!([{"role": "assistant", "content": "x"}])))
                .contains("first message")
        );
        assert!(
            rejected(request(json!([
                {"role": "user", "content": "a"}, {"role": "user", "content": "b"}])))
            .contains("alternate")
        );
        assert!(
            rejected(request(json!([
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "add", "input": {}}]},
                {"role": "user", "content": "no result"}])))
            .contains("without `tool_result`")
        );
        assert!(
            rejected(request(json!([
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "add", "input": {}}]}])))
            .contains("t1")
        );
        assert!(
            rejected(request(json!([
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "x"}]}])))
            .contains("unexpected `tool_use_id`")
        );
        assert!(
            rejected(request(json!([
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "add", "input": {}}]},
                {"role": "user", "content": [{"type": "text", "text": "first"},
                    {"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}])))
            .contains("must come first")
        );
    }

    #[test]
    fn fields_and_tools_are_checked() {
        assert!(
            rejected(json!({"model": "m", "messages": [{"role": "user", "content": "a"}]}))
                .contains("max_tokens")
        );
        let mut body = request(json!([{"role": "user", "content": "a"}]));
        body["tools"] = json!([{"name": "fs.read", "input_schema": {}}]);
        assert!(rejected(body.clone()).contains("^[a-zA-Z0-9_-]{1,64}$"));
        body["tools"] =
            json!([{"name": "a", "input_schema": {}}, {"name": "a", "input_schema": {}}]);
        assert!(rejected(body.clone()).contains("unique"));
        body["tools"] = json!([{"name": "a"}]);
        assert!(rejected(body).contains("input_schema"));
    }

    #[test]
    fn headers_are_required() {
        let mut headers = HeaderMap::new();
        assert_eq!(check_headers(&headers, None).unwrap_err().status, 401);
        headers.insert("x-api-key", "k".parse().unwrap());
        assert_eq!(check_headers(&headers, None).unwrap_err().status, 400);
        headers.insert("anthropic-version", "2023-06-01".parse().unwrap());
        assert!(check_headers(&headers, None).is_ok());
        assert_eq!(
            check_headers(&headers, Some("other")).unwrap_err().status,
            401
        );
    }

    #[test]
    fn stream_events_rebuild_the_reply() {
        let reply = Reply {
            text: Some("Hello there, friend".into()),
            tool_calls: vec![ToolCall {
                id: None,
                name: "add".into(),
                arguments: json!({"a": 1, "b": [2, 3]}),
            }],
            ..Reply::default()
        };
        let parsed = parse(&request(json!([{"role": "user", "content": "a"}]))).unwrap();
        let events = reply_events(&reply, &parsed, &Ids::default());
        let mut text = String::new();
        let mut json_text = String::new();
        for event in &events {
            let event = std::str::from_utf8(event).unwrap();
            let data: Value = serde_json::from_str(
                event
                    .lines()
                    .nth(1)
                    .unwrap()
                    .strip_prefix("data: ")
                    .unwrap(),
            )
            .unwrap();
            match data["delta"]["type"].as_str() {
                Some("text_delta") => text.push_str(data["delta"]["text"].as_str().unwrap()),
                Some("input_json_delta") => {
                    json_text.push_str(data["delta"]["partial_json"].as_str().unwrap())
                }
                _ => {}
            }
        }
        assert_eq!(text, "Hello there, friend");
        assert_eq!(
            serde_json::from_str::<Value>(&json_text).unwrap(),
            json!({"a": 1, "b": [2, 3]})
        );
        assert!(
            std::str::from_utf8(events.last().unwrap())
                .unwrap()
                .starts_with("event: message_stop")
        );
    }
}
