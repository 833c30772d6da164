//! Language-model providers behind one trait, [`Model`].
//!
//! A provider turns a provider-neutral [`ModelRequest`] (system prompt, conversation, tool
//! definitions) into its own wire format, streams the reply over server-sent events, hands
//! each piece of text to a [`TextSink`] as it arrives, and returns the whole
//! [`ModelReply`]. Transient failures (429, 5xx, refused connections) are retried under
//! a [`RetryPolicy`] budget.

mod anthropic;
mod openai;
mod retry;
mod settings;

use futures::future::BoxFuture;
use serde_json::Value;

pub use anthropic::Anthropic;
pub use openai::OpenAi;
pub use retry::{Attempts, RetryPolicy};
pub use settings::{ModelSettings, Provider, build};

use crate::conversation::Message;

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The name the model calls it by (a qualified, model-safe name).
    pub name: String,
    /// What it does.
    pub description: String,
    /// The JSON Schema of its arguments.
    pub input_schema: Value,
}

/// One request to a model.
#[derive(Debug, Clone)]
pub struct ModelRequest<'a> {
    /// The system prompt.
    pub system: &'a str,
    /// The conversation so far, oldest first.
    pub messages: &'a [Message],
    /// The tools offered, in a stable order (the prompt-cache prefix depends on it).
    pub tools: &'a [ToolSpec],
    /// The most output tokens wanted.
    pub max_tokens: u32,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// A final answer.
    EndTurn,
    /// It asked for tool calls.
    ToolUse,
    /// It ran out of output tokens.
    MaxTokens,
    /// Anything else the provider reported.
    Other(String),
}

/// A model's reply: its text and the tool calls it asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelReply {
    /// The assistant's text (may be empty when it only calls tools).
    pub text: String,
    /// The tool calls, in the order the model made them.
    pub tool_calls: Vec<ToolCall>,
    /// Why it stopped.
    pub stop: StopReason,
    /// Input tokens, as the provider counted them.
    pub input_tokens: u64,
    /// Output tokens, as the provider counted them.
    pub output_tokens: u64,
}

/// One tool call the model asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The provider's id for the call, echoed with its result.
    pub id: String,
    /// The tool's name as the model wrote it.
    pub name: String,
    /// The arguments; a model that wrote text that is not JSON gets `Err` with that text,
    /// which goes back to it as an error it can fix.
    pub arguments: Result<Value, String>,
}

/// Receives the reply's text as it streams in.
pub trait TextSink: Send {
    /// One piece of text, in order.
    fn text(&mut self, delta: &str);
    /// The request failed for a reason worth retrying, and will be retried (a person may
    /// want to know why the answer is late).
    fn retrying(&mut self, _message: &str) {}
}

/// A sink that drops the text (the whole reply is still returned).
pub struct NoText;

impl TextSink for NoText {
    fn text(&mut self, _delta: &str) {}
}

/// What went wrong talking to a model.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The provider answered with an error status.
    #[error("{provider} returned HTTP {status}: {message}")]
    Status {
        /// The provider's name.
        provider: &'static str,
        /// The HTTP status.
        status: u16,
        /// The provider's error message.
        message: String,
        /// Seconds the provider asked to wait (`retry-after`), if it said.
        retry_after: Option<f64>,
    },
    /// The request could not be sent or the reply not read.
    #[error("{provider}: {source}")]
    Net {
        /// The provider's name.
        provider: &'static str,
        /// The cause.
        #[source]
        source: warden_net::NetError,
    },
    /// The reply was not what the provider's format says.
    #[error("{provider} sent a malformed reply: {message}")]
    Malformed {
        /// The provider's name.
        provider: &'static str,
        /// What was wrong.
        message: String,
    },
    /// The model's settings are unusable (no key, bad URL).
    #[error("model settings: {0}")]
    Settings(String),
    /// Retries were used up; the last error is kept.
    #[error("{last} (gave up after {attempts} attempts)")]
    GaveUp {
        /// Attempts made.
        attempts: u32,
        /// The last error.
        last: Box<ModelError>,
    },
}

impl ModelError {
    /// True when trying again could help: 408, 409, 429, 5xx, 529, and transient network
    /// failures.
    pub fn is_transient(&self) -> bool {
        match self {
            ModelError::Status { status, .. } => {
                matches!(*status, 408 | 409 | 429) || *status >= 500
            }
            ModelError::Net { source, .. } => source.is_transient(),
            _ => false,
        }
    }

    /// Seconds the provider asked to wait before retrying.
    pub fn retry_after(&self) -> Option<f64> {
        match self {
            ModelError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// A language model.
pub trait Model: Send + Sync {
    /// A short description for logs and `/mcp`: provider and model name.
    fn describe(&self) -> String;
    /// Sends one request (retrying transient failures within the budget) and returns the
    /// whole reply, streaming its text into `sink` as it arrives.
    fn complete<'a>(
        &'a self,
        request: ModelRequest<'a>,
        sink: &'a mut dyn TextSink,
    ) -> BoxFuture<'a, Result<ModelReply, ModelError>>;
}

/// Reads an error reply's body (capped) and turns it into [`ModelError::Status`].
pub(crate) async fn status_error(
    provider: &'static str,
    response: warden_net::reqwest::Response,
) -> ModelError {
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<f64>().ok())
        .filter(|seconds| seconds.is_finite() && *seconds >= 0.0);
    let body = warden_net::read_capped(response, 64 * 1024)
        .await
        .unwrap_or_default();
    let message = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|value| {
            value
                .pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(500)]).into_owned());
    ModelError::Status {
        provider,
        status,
        message,
        retry_after,
    }
}

/// Posts `body` as JSON with `builder` (URL and headers set), asking for an event stream,
/// and returns the stream's events; an error status is read into [`ModelError::Status`].
pub(crate) async fn post_for_events(
    provider: &'static str,
    builder: warden_net::reqwest::RequestBuilder,
    body: &Value,
) -> Result<
    impl futures::Stream<Item = Result<warden_net::SseEvent, ModelError>> + Send + use<>,
    ModelError,
> {
    use futures::StreamExt;
    let bytes =
        serde_json::to_vec(body).map_err(|error| ModelError::Settings(error.to_string()))?;
    let response = builder
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(bytes)
        .send()
        .await
        .map_err(|error| ModelError::net(provider, warden_net::NetError::from_reqwest(error)))?;
    if !response.status().is_success() {
        return Err(status_error(provider, response).await);
    }
    Ok(warden_net::sse_events(response, MAX_EVENT_BYTES)
        .map(move |event| event.map_err(|error| ModelError::net(provider, error))))
}

impl ModelError {
    /// A reply that breaks the provider's format.
    pub(crate) fn malformed(provider: &'static str, message: impl Into<String>) -> ModelError {
        ModelError::Malformed {
            provider,
            message: message.into(),
        }
    }

    /// A failure of the HTTP exchange.
    pub(crate) fn net(provider: &'static str, source: warden_net::NetError) -> ModelError {
        ModelError::Net { provider, source }
    }
}

/// Largest single streamed event accepted from a model.
pub(crate) const MAX_EVENT_BYTES: usize = 16 << 20;
/// Largest reply text (or one tool call's arguments) accumulated from a stream.
pub(crate) const MAX_REPLY_BYTES: usize = 16 << 20;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    /// Both providers hand a tool's input schema to the model exactly as the server sent it:
    /// every JSON Schema 2020-12 keyword intact (what the conformance suite's
    /// `json-schema-2020-12-preservation` checks on the client side).
    #[test]
    fn a_2020_12_schema_reaches_the_model_unchanged() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                                  "properties": {"city": {"type": "string"}}}},
            "properties": {"address": {"$ref": "#/$defs/address"},
                           "phone": {"type": "string"}, "email": {"type": "string"}},
            "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
            "if": {"required": ["phone"]}, "then": {"required": ["phone"]},
            "else": {"required": ["email"]},
            "additionalProperties": false
        });
        let tools = vec![ToolSpec {
            name: "s__t".into(),
            description: "T".into(),
            input_schema: schema.clone(),
        }];
        let messages = vec![Message::user("hi")];
        let request = ModelRequest {
            system: "",
            messages: &messages,
            tools: &tools,
            max_tokens: 10,
        };
        let http = warden_net::client(&warden_net::HttpOptions::default()).unwrap();
        let anthropic = Anthropic::new(
            http.clone(),
            "http://127.0.0.1:1",
            "m",
            None,
            RetryPolicy::none(),
        );
        assert_eq!(anthropic.body(&request)["tools"][0]["input_schema"], schema);
        let openai = OpenAi::new(
            http,
            "http://127.0.0.1:1/v1",
            "m",
            None,
            RetryPolicy::none(),
        );
        assert_eq!(
            openai.body(&request)["tools"][0]["function"]["parameters"],
            schema
        );
    }
}
