//! The OpenAI Chat Completions API (`POST /v1/chat/completions`): header and body checks as
//! the real API makes them, and replies, streamed or whole, in its wire format.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::HeaderMap;
use serde_json::{Value, json};

use crate::conversation::{
    Ids, ParsedRequest, Rejection, RequestView, check_tool_name, check_unique, hit_max_tokens,
    optional_bool, pieces, required_str, rough_tokens, token_counts,
};
use crate::script::Reply;
use crate::sse::{data_event, done_event};

/// Characters per content delta.
const TEXT_PIECE: usize = 8;
/// Characters per arguments delta.
const JSON_PIECE: usize = 7;

/// Checks `Authorization: Bearer KEY` when the server was started with `--require-key`.
pub(crate) fn check_headers(
    headers: &HeaderMap,
    require_key: Option<&str>,
) -> Result<(), Rejection> {
    let Some(required) = require_key else {
        return Ok(());
    };
    let given = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match given {
        Some(key) if key == required => Ok(()),
        Some(_) => Err(Rejection {
            status: 401,
            message: "Incorrect API key provided.".into(),
        }),
        None => Err(Rejection {
            status: 401,
            message: "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).".into(),
        }),
    }
}

/// `{"error": {"message", "type", "param", "code"}}` as the real API sends it for `status`.
pub(crate) fn error_body(status: u16, message: &str) -> Value {
    let (kind, code) = match status {
        401 => ("invalid_request_error", json!("invalid_api_key")),
        404 => ("invalid_request_error", json!("not_found")),
        429 => ("requests", json!("rate_limit_exceeded")),
        500..=599 => ("server_error", Value::Null),
        _ => ("invalid_request_error", Value::Null),
    };
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

/// The message a scripted error step sends unless it names its own.
pub(crate) fn default_error_message(status: u16) -> &'static str {
    match status {
        429 => "Rate limit reached for requests (scripted error step)",
        500..=599 => {
            "The server had an error while processing your request. Sorry about that! (scripted error step)"
        }
        _ => "Invalid request (scripted error step)",
    }
}

/// The in-stream error: one `data:` line with the error body and no `choices` (the stream
/// then ends without `[DONE]`).
pub(crate) fn stream_error_event(status: u16, message: &str) -> Bytes {
    data_event(&error_body(status, message))
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
    let stream = optional_bool(body, "stream", "body")?;
    let include_usage = match body.get("stream_options") {
        None | Some(Value::Null) => false,
        Some(options) if options.is_object() => {
            if !stream {
                return Err(Rejection::invalid(
                    "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                ));
            }
            optional_bool(options, "include_usage", "stream_options")?
        }
        Some(_) => return Err(Rejection::invalid("stream_options: must be an object")),
    };
    let tools = parse_tools(body.get("tools"))?;
    let messages = match body.get("messages") {
        Some(Value::Array(messages)) if !messages.is_empty() => messages,
        Some(Value::Array(_)) => {
            return Err(Rejection::invalid(
                "'messages' must contain at least one message",
            ));
        }
        Some(_) => return Err(Rejection::invalid("messages: must be an array")),
        None => {
            return Err(Rejection::invalid(
                "Missing required parameter: 'messages'.",
            ));
        }
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
        include_usage,
        input_tokens: rough_tokens(&body.to_string()),
    })
}

fn parse_tools(tools: Option<&Value>) -> Result<Vec<String>, Rejection> {
    let tools = match tools {
        None => return Ok(Vec::new()),
        Some(Value::Array(tools)) => tools,
        Some(_) => return Err(Rejection::invalid("tools: must be an array")),
    };
    let mut names = Vec::with_capacity(tools.len());
    for (index, tool) in tools.iter().enumerate() {
        let place = format!("tools[{index}]");
        if tool.get("type").and_then(Value::as_str) != Some("function") {
            return Err(Rejection::invalid(format!(
                "{place}.type: must be \"function\""
            )));
        }
        let Some(function) = tool.get("function").filter(|f| f.is_object()) else {
            return Err(Rejection::invalid(format!(
                "Missing required parameter: '{place}.function'."
            )));
        };
        let place = format!("{place}.function");
        let name = required_str(function, "name", &place)?;
        check_tool_name(name, &format!("{place}.name"))?;
        if let Some(parameters) = function.get("parameters")
            && !parameters.is_object()
        {
            return Err(Rejection::invalid(format!(
                "{place}.parameters: must be an object"
            )));
        }
        if let Some(description) = function.get("description")
            && !description.is_string()
        {
            return Err(Rejection::invalid(format!(
                "{place}.description: must be a string"
            )));
        }
        names.push(name.to_string());
    }
    check_unique(&names)?;
    Ok(names)
}

fn check_messages(messages: &[Value]) -> Result<(), Rejection> {
    // The tool_call ids of the last assistant message still waiting for their tool message.
    let mut waiting: Vec<String> = Vec::new();
    // The ids of the assistant message the current run of tool messages answers.
    let mut answerable: Vec<String> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        let place = format!("messages[{index}]");
        let role = required_str(message, "role", &place)?;
        if role != "tool" && !waiting.is_empty() {
            return Err(unanswered(&waiting));
        }
        match role {
            "system" | "developer" | "user" => {
                check_content(message.get("content"), &place, false)?;
                answerable.clear();
            }
            "assistant" => {
                let calls = check_tool_calls(message.get("tool_calls"), &place)?;
                check_content(message.get("content"), &place, !calls.is_empty())?;
                waiting = calls.clone();
                answerable = calls;
            }
            "tool" => {
                let id = required_str(message, "tool_call_id", &place)?;
                if !answerable.iter().any(|a| a == id) {
                    return Err(Rejection::invalid(format!(
                        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. ({place}.tool_call_id {id:?})"
                    )));
                }
                waiting.retain(|w| w != id);
                check_content(message.get("content"), &place, false)?;
            }
            other => {
                return Err(Rejection::invalid(format!(
                    "Invalid value: '{other}'. Supported values are: 'system', 'developer', 'user', 'assistant', and 'tool'. ({place}.role)"
                )));
            }
        }
    }
    if !waiting.is_empty() {
        return Err(unanswered(&waiting));
    }
    Ok(())
}

fn unanswered(waiting: &[String]) -> Rejection {
    Rejection::invalid(format!(
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
        waiting.join(", ")
    ))
}

/// Content: a string, an array of parts, or (for an assistant message with tool calls) null.
fn check_content(content: Option<&Value>, place: &str, may_be_null: bool) -> Result<(), Rejection> {
    match content {
        Some(Value::String(_)) => Ok(()),
        None | Some(Value::Null) if may_be_null => Ok(()),
        None | Some(Value::Null) => Err(Rejection::invalid(format!(
            "Invalid value for '{place}.content': expected a string or an array, got null."
        ))),
        Some(Value::Array(parts)) => {
            for (index, part) in parts.iter().enumerate() {
                let part_place = format!("{place}.content[{index}]");
                match required_str(part, "type", &part_place)? {
                    "text" => {
                        required_str(part, "text", &part_place)?;
                    }
                    "image_url" | "input_audio" | "file" | "refusal" => {}
                    other => {
                        return Err(Rejection::invalid(format!(
                            "Invalid value: '{other}'. ({part_place}.type)"
                        )));
                    }
                }
            }
            Ok(())
        }
        Some(_) => Err(Rejection::invalid(format!(
            "{place}.content: must be a string or an array of content parts"
        ))),
    }
}

fn check_tool_calls(calls: Option<&Value>, place: &str) -> Result<Vec<String>, Rejection> {
    let calls = match calls {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(calls)) => calls,
        Some(_) => {
            return Err(Rejection::invalid(format!(
                "{place}.tool_calls: must be an array"
            )));
        }
    };
    let mut ids = Vec::with_capacity(calls.len());
    for (index, call) in calls.iter().enumerate() {
        let place = format!("{place}.tool_calls[{index}]");
        let id = required_str(call, "id", &place)?;
        if call.get("type").and_then(Value::as_str) != Some("function") {
            return Err(Rejection::invalid(format!(
                "{place}.type: must be \"function\""
            )));
        }
        let Some(function) = call.get("function").filter(|f| f.is_object()) else {
            return Err(Rejection::invalid(format!(
                "Missing required parameter: '{place}.function'."
            )));
        };
        let function_place = format!("{place}.function");
        check_tool_name(
            required_str(function, "name", &function_place)?,
            &format!("{function_place}.name"),
        )?;
        // The arguments are a JSON *string*; an object here is a common client bug.
        required_str(function, "arguments", &function_place)?;
        ids.push(id.to_string());
    }
    Ok(ids)
}

fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn last_tool_results(messages: &[Value]) -> Vec<String> {
    let mut results: Vec<String> = messages
        .iter()
        .rev()
        .take_while(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
        .map(|m| text_of(m.get("content")))
        .collect();
    results.reverse();
    results
}

fn last_user_text(messages: &[Value]) -> String {
    messages
        .iter()
        .rev()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .map(|m| text_of(m.get("content")))
        .find(|t| !t.is_empty())
        .unwrap_or_default()
}

/// A tool call of a reply, with its id settled and its arguments as the JSON string.
struct Call {
    id: String,
    name: String,
    arguments: String,
}

fn calls(reply: &Reply, ids: &Ids) -> Vec<Call> {
    reply
        .tool_calls
        .iter()
        .map(|call| Call {
            id: call
                .id
                .clone()
                .unwrap_or_else(|| format!("call_{:0>24}", ids.next())),
            name: call.name.clone(),
            arguments: call.arguments.to_string(),
        })
        .collect()
}

fn finish_reason(reply: &Reply) -> &'static str {
    if hit_max_tokens(reply) {
        "length"
    } else if reply.tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    }
}

fn usage(reply: &Reply, request: &ParsedRequest) -> Value {
    let (prompt, completion) = token_counts(reply, request);
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt.saturating_add(completion),
    })
}

fn created() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The whole reply, as a non-streaming response body.
pub(crate) fn reply_body(reply: &Reply, request: &ParsedRequest, ids: &Ids) -> Value {
    let mut message = json!({
        "role": "assistant",
        "content": reply.text.as_ref().filter(|t| !t.is_empty()),
        "refusal": null,
    });
    let calls = calls(reply, ids);
    if !calls.is_empty() {
        message["tool_calls"] = calls
            .into_iter()
            .map(|c| {
                json!({"id": c.id, "type": "function",
                       "function": {"name": c.name, "arguments": c.arguments}})
            })
            .collect();
    }
    json!({
        "id": format!("chatcmpl-{:0>24}", ids.next()),
        "object": "chat.completion",
        "created": created(),
        "model": request.model,
        "choices": [{"index": 0, "message": message, "logprobs": null,
                     "finish_reason": finish_reason(reply)}],
        "usage": usage(reply, request),
    })
}

/// The reply as a sequence of server-sent events, ending with `data: [DONE]`.
pub(crate) fn reply_events(reply: &Reply, request: &ParsedRequest, ids: &Ids) -> Vec<Bytes> {
    let id = format!("chatcmpl-{:0>24}", ids.next());
    let created = created();
    let chunk = |delta: Value, finish: Value| {
        let mut chunk = json!({
            "id": id, "object": "chat.completion.chunk", "created": created,
            "model": request.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        });
        if request.include_usage {
            chunk["usage"] = Value::Null;
        }
        data_event(&chunk)
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": "", "refusal": null}),
        Value::Null,
    )];
    if let Some(text) = &reply.text {
        for piece in pieces(text, TEXT_PIECE) {
            events.push(chunk(json!({"content": piece}), Value::Null));
        }
    }
    for (index, call) in calls(reply, ids).into_iter().enumerate() {
        events.push(chunk(
            json!({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                   "function": {"name": call.name, "arguments": ""}}]}),
            Value::Null,
        ));
        for piece in pieces(&call.arguments, JSON_PIECE) {
            events.push(chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                Value::Null,
            ));
        }
    }
    events.push(chunk(json!({}), json!(finish_reason(reply))));
    if request.include_usage {
        events.push(data_event(&json!({
            "id": id, "object": "chat.completion.chunk", "created": created,
            "model": request.model, "choices": [], "usage": usage(reply, request),
        })));
    }
    events.push(done_event());
    events
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;
    use crate::script::ToolCall;

    fn request(messages: Value) -> Value {
        json!({"model": "m", "messages": messages,
               "tools": [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]})
    }

    fn rejected(body: Value) -> String {
        parse(&body).unwrap_err().message
    }

    fn assistant_call(id: &str) -> Value {
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "add", "arguments": "{}"}}]})
    }

    #[test]
    fn a_tool_round_trip_is_accepted_and_viewed() {
        let parsed = parse(&request(json!([
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "add"},
            assistant_call("c1"),
            {"role": "tool", "tool_call_id": "c1", "content": "3"}
        ])))
        .unwrap();
        assert_eq!(parsed.view.tools, vec!["add"]);
        assert_eq!(parsed.view.last_tool_results, vec!["3"]);
        assert_eq!(parsed.view.last_user_text, "add");
    }

    #[test]
    fn tool_calls_must_be_answered_before_the_next_turn() {
        assert!(
            rejected(request(json!([
                {"role": "user", "content": "add"}, assistant_call("c1"),
                {"role": "user", "content": "again"}])))
            .contains("c1")
        );
        assert!(
            rejected(request(
                json!([{"role": "user", "content": "add"}, assistant_call("c1")])
            ))
            .contains("did not have response messages")
        );
        assert!(
            rejected(request(json!([
                {"role": "user", "content": "add"},
                {"role": "tool", "tool_call_id": "c1", "content": "3"}])))
            .contains("preceeding")
        );
        let mut object_arguments = assistant_call("c1");
        object_arguments["tool_calls"][0]["function"]["arguments"] = json!({});
        assert!(
            rejected(request(
                json!([{"role": "user", "content": "add"}, object_arguments])
            ))
            .contains("arguments: must be a string")
        );
    }

    #[test]
    fn stream_chunks_rebuild_the_reply() {
        let reply = Reply {
            text: Some("Hello there, friend".into()),
            tool_calls: vec![ToolCall {
                id: Some("call_x".into()),
                name: "add".into(),
                arguments: json!({"a": 1}),
            }],
            ..Reply::default()
        };
        let mut body = request(json!([{"role": "user", "content": "a"}]));
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
        let parsed = parse(&body).unwrap();
        let events = reply_events(&reply, &parsed, &Ids::default());
        let mut text = String::new();
        let mut arguments = String::new();
        let mut finish = None;
        let mut usage_seen = false;
        for event in &events {
            let line = std::str::from_utf8(event).unwrap().trim_end();
            let data = line.strip_prefix("data: ").unwrap();
            if data == "[DONE]" {
                continue;
            }
            let chunk: Value = serde_json::from_str(data).unwrap();
            usage_seen |= chunk["usage"].is_object();
            let Some(choice) = chunk["choices"].get(0) else {
                continue;
            };
            text.push_str(choice["delta"]["content"].as_str().unwrap_or(""));
            if let Some(calls) = choice["delta"]["tool_calls"].as_array() {
                arguments.push_str(calls[0]["function"]["arguments"].as_str().unwrap());
            }
            if let Some(reason) = choice["finish_reason"].as_str() {
                finish = Some(reason.to_string());
            }
        }
        assert_eq!(text, "Hello there, friend");
        assert_eq!(arguments, "{\"a\":1}");
        assert_eq!(finish.as_deref(), Some("tool_calls"));
        assert!(usage_seen);
        assert_eq!(events.last().unwrap(), &done_event());
    }
}
