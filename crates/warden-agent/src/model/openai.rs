//! The OpenAI Chat Completions API (`POST {base}/chat/completions`), streamed; also every
//! OpenAI-compatible endpoint (Ollama, vLLM, llama.cpp's server) by its base URL.
//!
//! OpenAI caches long prompt prefixes automatically; the loop sends the system prompt and
//! the tools first and in the same order every turn, so the prefix stays cacheable.

use std::collections::BTreeMap;

use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::{Map, Value, json};

use super::{
    MAX_REPLY_BYTES, Model, ModelError, ModelReply, ModelRequest, RetryPolicy, StopReason,
    TextSink, ToolCall,
};
use crate::conversation::{Block, Message, Role};

const PROVIDER: &str = "openai";

/// An OpenAI Chat Completions client.
pub struct OpenAi {
    http: warden_net::reqwest::Client,
    endpoint: String,
    model: String,
    api_key: Option<String>,
    retry: RetryPolicy,
}

impl OpenAi {
    /// A client of `base_url` (e.g. `https://api.openai.com/v1`, or
    /// `http://localhost:11434/v1` for Ollama) for `model`.
    pub fn new(
        http: warden_net::reqwest::Client,
        base_url: &str,
        model: &str,
        api_key: Option<String>,
        retry: RetryPolicy,
    ) -> OpenAi {
        OpenAi {
            http,
            endpoint: format!("{}/chat/completions", base_url.trim_end_matches('/')),
            model: model.to_owned(),
            api_key,
            retry,
        }
    }

    /// The request body for `request`.
    pub fn body(&self, request: &ModelRequest<'_>) -> Value {
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        if !request.system.is_empty() {
            messages.push(json!({"role": "system", "content": request.system}));
        }
        for message in request.messages {
            push_message(&mut messages, message);
        }
        let mut body = json!({
            "model": self.model,
            "messages": messages,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if !request.tools.is_empty() {
            body["tools"] = Value::Array(
                request
                    .tools
                    .iter()
                    .map(|tool| {
                        json!({"type": "function", "function": {
                            "name": tool.name,
                            "description": tool.description,
                            "parameters": tool.input_schema,
                        }})
                    })
                    .collect(),
            );
        }
        body
    }

    async fn once(&self, body: &Value, sink: &mut dyn TextSink) -> Result<ModelReply, ModelError> {
        let mut builder = self.http.post(&self.endpoint);
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(key);
        }
        let mut events = Box::pin(super::post_for_events(PROVIDER, builder, body).await?);
        let mut reply = Assembly::default();
        while let Some(event) = events.next().await {
            let event = event?;
            let data = event.data.trim();
            if data.is_empty() {
                continue;
            }
            if data == "[DONE]" {
                return reply.finish();
            }
            let chunk: Value = serde_json::from_str(data).map_err(|error| {
                ModelError::malformed(PROVIDER, format!("a chunk is not JSON: {error}"))
            })?;
            reply.apply(&chunk, sink)?;
        }
        // Some compatible servers end the stream without `[DONE]`; a finish reason is enough.
        if reply.stop.is_some() {
            return reply.finish();
        }
        Err(ModelError::malformed(
            PROVIDER,
            "the stream ended before a finish reason",
        ))
    }
}

impl Model for OpenAi {
    fn describe(&self) -> String {
        format!("openai-compatible {} at {}", self.model, self.endpoint)
    }

    fn complete<'a>(
        &'a self,
        request: ModelRequest<'a>,
        sink: &'a mut dyn TextSink,
    ) -> BoxFuture<'a, Result<ModelReply, ModelError>> {
        Box::pin(async move {
            let body = self.body(&request);
            let mut attempts = self.retry.start();
            loop {
                match self.once(&body, sink).await {
                    Ok(reply) => return Ok(reply),
                    Err(error) => attempts.wait_or_fail_telling(error, sink).await?,
                }
            }
        })
    }
}

/// Appends `message` in Chat Completions form: tool results become `tool` messages, an
/// assistant's tool calls its `tool_calls`.
fn push_message(out: &mut Vec<Value>, message: &Message) {
    match message.role {
        Role::Assistant => {
            let text: String = message
                .blocks
                .iter()
                .filter_map(|block| match block {
                    Block::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            let calls: Vec<Value> = message
                .blocks
                .iter()
                .filter_map(|block| match block {
                    Block::ToolUse {
                        id,
                        name,
                        arguments,
                    } => {
                        let arguments = match arguments {
                            Value::String(raw) => raw.clone(),
                            other => other.to_string(),
                        };
                        Some(json!({"id": id, "type": "function",
                            "function": {"name": name, "arguments": arguments}}))
                    }
                    _ => None,
                })
                .collect();
            let mut entry = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { Value::String(text) }});
            if !calls.is_empty() {
                entry["tool_calls"] = Value::Array(calls);
            }
            out.push(entry);
        }
        Role::User => {
            let mut text = String::new();
            for block in &message.blocks {
                match block {
                    Block::ToolResult {
                        id,
                        content,
                        is_error,
                    } => {
                        let content = if *is_error {
                            format!("Error: {content}")
                        } else {
                            content.clone()
                        };
                        out.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
                    }
                    Block::Text { text: piece } => {
                        if !text.is_empty() {
                            text.push('\n');
                        }
                        text.push_str(piece);
                    }
                    Block::ToolUse { .. } => {}
                }
            }
            if !text.is_empty() {
                out.push(json!({"role": "user", "content": text}));
            }
        }
    }
}

#[derive(Default)]
struct Assembly {
    text: String,
    calls: BTreeMap<u64, (String, String, String)>,
    stop: Option<StopReason>,
    input_tokens: u64,
    output_tokens: u64,
}

impl Assembly {
    fn apply(&mut self, chunk: &Value, sink: &mut dyn TextSink) -> Result<(), ModelError> {
        if let Some(error) = chunk.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("unknown error");
            return Err(ModelError::Status {
                provider: PROVIDER,
                status: 500,
                message: format!("in the stream: {message}"),
                retry_after: None,
            });
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.input_tokens = usage
                .get("prompt_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            self.output_tokens = usage
                .get("completion_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(0);
        }
        let Some(choice) = chunk.pointer("/choices/0") else {
            return Ok(());
        };
        if let Some(delta) = choice.get("delta") {
            if let Some(text) = delta.get("content").and_then(Value::as_str) {
                if self.text.len() + text.len() > MAX_REPLY_BYTES {
                    return Err(ModelError::malformed(PROVIDER, "reply text exceeds 16 MiB"));
                }
                self.text.push_str(text);
                sink.text(text);
            }
            if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                for (position, call) in calls.iter().enumerate() {
                    let index = call
                        .get("index")
                        .and_then(Value::as_u64)
                        .unwrap_or(position as u64);
                    if self.calls.len() >= 128 && !self.calls.contains_key(&index) {
                        return Err(ModelError::malformed(
                            PROVIDER,
                            "more than 128 tool calls in one reply",
                        ));
                    }
                    let entry = self.calls.entry(index).or_default();
                    if let Some(id) = call.get("id").and_then(Value::as_str) {
                        entry.0 = id.to_owned();
                    }
                    if let Some(name) = call.pointer("/function/name").and_then(Value::as_str) {
                        entry.1.push_str(name);
                    }
                    if let Some(piece) = call.pointer("/function/arguments").and_then(Value::as_str)
                    {
                        if entry.2.len() + piece.len() > MAX_REPLY_BYTES {
                            return Err(ModelError::malformed(
                                PROVIDER,
                                "tool arguments exceed 16 MiB",
                            ));
                        }
                        entry.2.push_str(piece);
                    }
                }
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.stop = Some(match reason {
                "stop" => StopReason::EndTurn,
                "tool_calls" | "function_call" => StopReason::ToolUse,
                "length" => StopReason::MaxTokens,
                other => StopReason::Other(other.to_owned()),
            });
        }
        Ok(())
    }

    fn finish(self) -> Result<ModelReply, ModelError> {
        let tool_calls: Vec<ToolCall> = self
            .calls
            .into_iter()
            .map(|(index, (id, name, json))| {
                let arguments = if json.trim().is_empty() {
                    Ok(Value::Object(Map::new()))
                } else {
                    serde_json::from_str(&json).map_err(|_| json)
                };
                let id = if id.is_empty() {
                    format!("call_{index}")
                } else {
                    id
                };
                ToolCall {
                    id,
                    name,
                    arguments,
                }
            })
            .collect();
        let stop = match self.stop {
            // Some compatible servers say "stop" even when they called tools.
            Some(StopReason::EndTurn) | None if !tool_calls.is_empty() => StopReason::ToolUse,
            Some(stop) => stop,
            None => StopReason::EndTurn,
        };
        Ok(ModelReply {
            text: self.text,
            tool_calls,
            stop,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::NoText;

    #[test]
    fn streamed_tool_calls_are_put_together_by_index() {
        let chunks = [
            json!({"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}),
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"time__now","arguments":""}}]}}]}),
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"fs__read","arguments":"{\"pa"}}]}}]}),
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"tz\":\"UTC\"}"}}]}}]}),
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"th\":\"/a\"}"}}]}}]}),
            json!({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}),
            json!({"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7}}),
        ];
        let mut assembly = Assembly::default();
        for chunk in &chunks {
            assembly.apply(chunk, &mut NoText).unwrap();
        }
        let reply = assembly.finish().unwrap();
        assert_eq!(reply.stop, StopReason::ToolUse);
        assert_eq!(reply.tool_calls.len(), 2);
        assert_eq!(reply.tool_calls[0].id, "call_a");
        assert_eq!(reply.tool_calls[0].arguments, Ok(json!({"tz":"UTC"})));
        assert_eq!(reply.tool_calls[1].arguments, Ok(json!({"path":"/a"})));
        assert_eq!((reply.input_tokens, reply.output_tokens), (5, 7));
    }

    #[test]
    fn arguments_that_are_not_json_are_kept_as_text() {
        let mut assembly = Assembly::default();
        assembly
            .apply(&json!({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"x","arguments":"{oops"}}]},"finish_reason":"tool_calls"}]}), &mut NoText)
            .unwrap();
        let reply = assembly.finish().unwrap();
        assert_eq!(reply.tool_calls[0].arguments, Err("{oops".to_owned()));
    }

    #[test]
    fn tool_results_become_tool_messages() {
        let mut out = Vec::new();
        push_message(
            &mut out,
            &Message {
                role: Role::Assistant,
                blocks: vec![
                    Block::Text {
                        text: "checking".into(),
                    },
                    Block::ToolUse {
                        id: "c1".into(),
                        name: "t".into(),
                        arguments: json!({"a": 1}),
                    },
                ],
            },
        );
        push_message(
            &mut out,
            &Message {
                role: Role::User,
                blocks: vec![Block::ToolResult {
                    id: "c1".into(),
                    content: "boom".into(),
                    is_error: true,
                }],
            },
        );
        assert_eq!(
            out[0]["tool_calls"][0]["function"]["arguments"],
            "{\"a\":1}"
        );
        assert_eq!(
            out[1],
            json!({"role":"tool","tool_call_id":"c1","content":"Error: boom"})
        );
    }
}
