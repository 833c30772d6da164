//! The Anthropic Messages API (`POST /v1/messages`), streamed.
//!
//! The system prompt and the tool list are marked as a cacheable prefix
//! (`cache_control: ephemeral` on the system block and on the last tool): the loop keeps
//! both in the same order every turn, so every request after the first reads them from
//! the provider's prompt cache.

use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::{Map, Value, json};

use super::{
    MAX_REPLY_BYTES, Model, ModelError, ModelReply, ModelRequest, RetryPolicy, StopReason,
    TextSink, ToolCall,
};
use crate::conversation::{Block, Message, Role};

const PROVIDER: &str = "anthropic";
/// Content blocks accepted in one reply (text and tool calls): a stream of endless empty
/// blocks must not grow without bound.
const MAX_BLOCKS: usize = 1024;
/// The API version header value this client speaks.
const API_VERSION: &str = "2023-06-01";

/// An Anthropic Messages API client.
pub struct Anthropic {
    http: warden_net::reqwest::Client,
    endpoint: String,
    model: String,
    api_key: Option<String>,
    retry: RetryPolicy,
}

impl Anthropic {
    /// A client of `base_url` (e.g. `https://api.anthropic.com`) for `model`.
    pub fn new(
        http: warden_net::reqwest::Client,
        base_url: &str,
        model: &str,
        api_key: Option<String>,
        retry: RetryPolicy,
    ) -> Anthropic {
        let base = base_url.trim_end_matches('/');
        let endpoint = if base.ends_with("/v1") {
            format!("{base}/messages")
        } else {
            format!("{base}/v1/messages")
        };
        Anthropic {
            http,
            endpoint,
            model: model.to_owned(),
            api_key,
            retry,
        }
    }

    /// The request body for `request`.
    pub fn body(&self, request: &ModelRequest<'_>) -> Value {
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.input_schema,
                })
            })
            .collect();
        if let Some(Value::Object(last)) = tools.last_mut() {
            last.insert("cache_control".into(), json!({"type": "ephemeral"}));
        }
        let mut body = json!({
            "model": self.model,
            "max_tokens": request.max_tokens,
            "stream": true,
            "messages": request.messages.iter().map(message).collect::<Vec<_>>(),
        });
        if !request.system.is_empty() {
            body["system"] = json!([{
                "type": "text",
                "text": request.system,
                "cache_control": {"type": "ephemeral"},
            }]);
        }
        if !tools.is_empty() {
            body["tools"] = Value::Array(tools);
        }
        body
    }

    async fn once(&self, body: &Value, sink: &mut dyn TextSink) -> Result<ModelReply, ModelError> {
        let mut builder = self
            .http
            .post(&self.endpoint)
            .header("anthropic-version", API_VERSION);
        if let Some(key) = &self.api_key {
            builder = builder.header("x-api-key", key);
        }
        let mut events = Box::pin(super::post_for_events(PROVIDER, builder, body).await?);
        let mut reply = Assembly::default();
        while let Some(event) = events.next().await {
            let event = event?;
            if event.data.is_empty() {
                continue;
            }
            let data: Value = serde_json::from_str(&event.data).map_err(|error| {
                ModelError::malformed(PROVIDER, format!("an event is not JSON: {error}"))
            })?;
            if reply.apply(&data, sink)? {
                return reply.finish();
            }
        }
        Err(ModelError::malformed(
            PROVIDER,
            "the stream ended before message_stop",
        ))
    }
}

impl Model for Anthropic {
    fn describe(&self) -> String {
        format!("anthropic {}", self.model)
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

fn message(message: &Message) -> Value {
    let role = match message.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    let content: Vec<Value> = message
        .blocks
        .iter()
        .map(|block| match block {
            Block::Text { text } => json!({"type": "text", "text": text}),
            Block::ToolUse {
                id,
                name,
                arguments,
            } => {
                let input = match arguments {
                    Value::Object(_) => arguments.clone(),
                    _ => Value::Object(Map::new()),
                };
                json!({"type": "tool_use", "id": id, "name": name, "input": input})
            }
            Block::ToolResult {
                id,
                content,
                is_error,
            } => json!({
                "type": "tool_result",
                "tool_use_id": id,
                "content": content,
                "is_error": is_error,
            }),
        })
        .collect();
    json!({"role": role, "content": content})
}

/// A reply being put together from stream events.
#[derive(Default)]
struct Assembly {
    text: String,
    blocks: Vec<Partial>,
    stop: Option<StopReason>,
    input_tokens: u64,
    output_tokens: u64,
}

enum Partial {
    Text,
    Tool {
        id: String,
        name: String,
        json: String,
    },
    Other,
}

impl Assembly {
    /// Applies one event; true at `message_stop`.
    fn apply(&mut self, data: &Value, sink: &mut dyn TextSink) -> Result<bool, ModelError> {
        let kind = data.get("type").and_then(Value::as_str).unwrap_or_default();
        match kind {
            "message_start" => {
                self.input_tokens = data
                    .pointer("/message/usage/input_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
            }
            "content_block_start" => {
                let block = data.get("content_block").unwrap_or(&Value::Null);
                let partial = match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        if let Some(text) = block.get("text").and_then(Value::as_str) {
                            self.push_text(text, sink)?;
                        }
                        Partial::Text
                    }
                    Some("tool_use") => Partial::Tool {
                        id: string(block, "id")?,
                        name: string(block, "name")?,
                        json: String::new(),
                    },
                    _ => Partial::Other,
                };
                if self.blocks.len() == MAX_BLOCKS {
                    return Err(ModelError::malformed(
                        PROVIDER,
                        format!("more than {MAX_BLOCKS} content blocks in one reply"),
                    ));
                }
                self.blocks.push(partial);
            }
            "content_block_delta" => {
                let delta = data.get("delta").unwrap_or(&Value::Null);
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        let text = delta
                            .get("text")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        self.push_text(text, sink)?;
                    }
                    Some("input_json_delta") => {
                        let piece = delta
                            .get("partial_json")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        if let Some(Partial::Tool { json, .. }) = self.blocks.last_mut() {
                            if json.len() + piece.len() > MAX_REPLY_BYTES {
                                return Err(ModelError::malformed(
                                    PROVIDER,
                                    "tool arguments exceed 16 MiB",
                                ));
                            }
                            json.push_str(piece);
                        }
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop = Some(match reason {
                        "end_turn" | "stop_sequence" => StopReason::EndTurn,
                        "tool_use" => StopReason::ToolUse,
                        "max_tokens" => StopReason::MaxTokens,
                        other => StopReason::Other(other.to_owned()),
                    });
                }
                if let Some(tokens) = data.pointer("/usage/output_tokens").and_then(Value::as_u64) {
                    self.output_tokens = tokens;
                }
            }
            "message_stop" => return Ok(true),
            "error" => {
                let message = data
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown error");
                let status = match data.pointer("/error/type").and_then(Value::as_str) {
                    Some("overloaded_error") => 529,
                    Some("rate_limit_error") => 429,
                    _ => 500,
                };
                return Err(ModelError::Status {
                    provider: PROVIDER,
                    status,
                    message: format!("in the stream: {message}"),
                    retry_after: None,
                });
            }
            _ => {}
        }
        Ok(false)
    }

    fn push_text(&mut self, text: &str, sink: &mut dyn TextSink) -> Result<(), ModelError> {
        if self.text.len() + text.len() > MAX_REPLY_BYTES {
            return Err(ModelError::malformed(PROVIDER, "reply text exceeds 16 MiB"));
        }
        self.text.push_str(text);
        sink.text(text);
        Ok(())
    }

    fn finish(self) -> Result<ModelReply, ModelError> {
        let tool_calls = self
            .blocks
            .into_iter()
            .filter_map(|block| match block {
                Partial::Tool { id, name, json } => {
                    let arguments = if json.trim().is_empty() {
                        Ok(Value::Object(Map::new()))
                    } else {
                        serde_json::from_str(&json).map_err(|_| json)
                    };
                    Some(ToolCall {
                        id,
                        name,
                        arguments,
                    })
                }
                _ => None,
            })
            .collect::<Vec<_>>();
        let stop = self.stop.unwrap_or(if tool_calls.is_empty() {
            StopReason::EndTurn
        } else {
            StopReason::ToolUse
        });
        Ok(ModelReply {
            text: self.text,
            tool_calls,
            stop,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
        })
    }
}

fn string(value: &Value, key: &str) -> Result<String, ModelError> {
    value
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| ModelError::malformed(PROVIDER, format!("a content block has no `{key}`")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolSpec;

    struct Collect(String);
    impl TextSink for Collect {
        fn text(&mut self, delta: &str) {
            self.0.push_str(delta);
        }
    }

    #[test]
    fn a_streamed_reply_is_assembled_with_its_tool_calls() {
        let events = [
            json!({"type":"message_start","message":{"usage":{"input_tokens":12}}}),
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me "}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"check."}}),
            json!({"type":"content_block_stop","index":0}),
            json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"time__now","input":{}}}),
            json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"tz\": "}}),
            json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"UTC\"}"}}),
            json!({"type":"content_block_stop","index":1}),
            json!({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":30}}),
            json!({"type":"message_stop"}),
        ];
        let mut assembly = Assembly::default();
        let mut sink = Collect(String::new());
        let mut stopped = false;
        for event in &events {
            stopped = assembly.apply(event, &mut sink).unwrap();
        }
        assert!(stopped);
        let reply = assembly.finish().unwrap();
        assert_eq!(sink.0, "Let me check.");
        assert_eq!(reply.text, "Let me check.");
        assert_eq!(reply.stop, StopReason::ToolUse);
        assert_eq!((reply.input_tokens, reply.output_tokens), (12, 30));
        assert_eq!(reply.tool_calls.len(), 1);
        assert_eq!(reply.tool_calls[0].arguments, Ok(json!({"tz": "UTC"})));
    }

    #[test]
    fn a_reply_with_endless_blocks_is_refused() {
        let mut assembly = Assembly::default();
        let start = json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}});
        for _ in 0..MAX_BLOCKS {
            assembly.apply(&start, &mut super::super::NoText).unwrap();
        }
        let error = assembly
            .apply(&start, &mut super::super::NoText)
            .unwrap_err();
        assert!(error.to_string().contains("content blocks"), "{error}");
    }

    #[test]
    fn an_error_event_in_the_stream_is_a_status_error() {
        let mut assembly = Assembly::default();
        let error = assembly
            .apply(
                &json!({"type":"error","error":{"type":"overloaded_error","message":"busy"}}),
                &mut super::super::NoText,
            )
            .unwrap_err();
        assert!(error.is_transient(), "{error}");
    }

    #[test]
    fn the_system_prompt_and_the_last_tool_carry_cache_markers() {
        let http = warden_net::client(&warden_net::HttpOptions::default()).unwrap();
        let client = Anthropic::new(http, "http://127.0.0.1:1", "m", None, RetryPolicy::none());
        let tools = vec![
            ToolSpec {
                name: "a".into(),
                description: "A".into(),
                input_schema: json!({"type":"object"}),
            },
            ToolSpec {
                name: "b".into(),
                description: "B".into(),
                input_schema: json!({"type":"object"}),
            },
        ];
        let messages = vec![Message::user("hi")];
        let body = client.body(&ModelRequest {
            system: "sys",
            messages: &messages,
            tools: &tools,
            max_tokens: 100,
        });
        assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
        assert!(body["tools"][0].get("cache_control").is_none());
        assert_eq!(body["tools"][1]["cache_control"]["type"], "ephemeral");
        assert_eq!(body["messages"][0]["content"][0]["text"], "hi");
        assert_eq!(client.endpoint, "http://127.0.0.1:1/v1/messages");
    }
}
