//! What happens in a session, as events: the `--json` transcript of `warden run` writes
//! one per line (docs/transcript.md) and `warden chat` renders them for a person. (The audit
//! log is written by the host's session, not from events.)

use serde::Serialize;
use serde_json::Value;

/// One event of a session.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// The session started: the model, the servers and the tools the model sees first.
    Session {
        /// The model, as `provider name`.
        model: String,
        /// Every configured server.
        servers: Vec<ServerSummary>,
        /// Tools in the catalogue.
        tools_total: usize,
        /// Whether the model sees the search tool instead of the whole catalogue.
        search_mode: bool,
        /// The tools offered on the first step, in order.
        exposed: Vec<String>,
    },
    /// The model's text for one step (streamed to a terminal as it arrives).
    Assistant {
        /// The step, from 1.
        turn: u32,
        /// The text.
        text: String,
    },
    /// A tool call the model made, and what became of it.
    ToolCall(ToolCallEvent),
    /// A call moved to the background earlier has finished; its result goes to the model
    /// at this step.
    BackgroundResult {
        /// The step it is given to the model in.
        turn: u32,
        /// The provider's id of the original call.
        id: String,
        /// The qualified tool name.
        tool: String,
        /// Its server.
        server: String,
        /// Whether it reports an error.
        is_error: bool,
        /// Characters of the result before shaping.
        result_chars: usize,
        /// Milliseconds from the call's start to now.
        latency_ms: u64,
    },
    /// Something the user should know: a retry, a result flagged for size, context trimmed.
    Notice {
        /// The step it happened in.
        turn: u32,
        /// What happened.
        message: String,
    },
    /// The model's final answer. Always the last event of a successful run.
    Final {
        /// The answer.
        answer: String,
        /// Steps taken.
        turns: u32,
        /// Input tokens over all steps, as the provider counted them.
        input_tokens: u64,
        /// Output tokens over all steps.
        output_tokens: u64,
    },
    /// The run ended without an answer. The last event of a failed run.
    Error {
        /// Why.
        message: String,
    },
}

/// A configured server, as the session started.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerSummary {
    /// Its configured name.
    pub name: String,
    /// `connected`, `failed`, or `not_started`.
    pub state: String,
    /// The protocol era, when connected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub era: Option<String>,
    /// Tools it offers.
    pub tools: usize,
    /// Why it is not connected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A tool call and its outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallEvent {
    /// The step, from 1.
    pub turn: u32,
    /// The provider's call id.
    pub id: String,
    /// The qualified tool name (as the model wrote it when it names no tool).
    pub tool: String,
    /// The server it belongs to (`warden` for Warden's own search tool; empty if unknown).
    pub server: String,
    /// The arguments as the model wrote them.
    pub arguments: Value,
    /// `allow`, `ask`, `deny`, or `invalid` (refused before the policy: unknown tool,
    /// arguments that are not JSON or do not match the schema).
    pub decision: String,
    /// The policy's reasons.
    pub reasons: Vec<ReasonEntry>,
    /// Who let it run: `policy`, `user`, `user-session`, `allow-all`; absent when it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    /// Whether it was sent to the server.
    pub executed: bool,
    /// True when the call was still running after `[agent] background_after` and moved to
    /// the background (its result comes later, as a `background_result` event).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub background: bool,
    /// Whether the model was given an error (refused, failed, or the tool's own error).
    pub is_error: bool,
    /// What went wrong, when something did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Characters of the result before shaping.
    pub result_chars: usize,
    /// Estimated tokens of the result before shaping.
    pub result_tokens: usize,
    /// True when the result was over the warning size.
    pub flagged: bool,
    /// True when the result was cut to the cap.
    pub truncated: bool,
    /// Where the whole result was written, when it was too long to give the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offloaded_to: Option<String>,
    /// When the call was sent, in milliseconds since the Unix epoch (absent when it was
    /// not sent). With `latency_ms` it shows which calls ran at the same time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<u64>,
    /// Milliseconds the call took at the server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
}

/// One reason of a decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReasonEntry {
    /// Machine-readable: `rule:N`, `default`, `tainted_write`, `private_egress`,
    /// `verbatim_argument`, `verbatim_unchecked`.
    pub kind: String,
    /// The sentence, naming the rule or the sources.
    pub text: String,
}

/// Receives a session's events as they happen.
pub trait Observer: Send {
    /// An event.
    fn event(&mut self, event: &Event);
    /// A piece of the model's text as it streams in (before its [`Event::Assistant`]).
    fn text_delta(&mut self, _delta: &str) {}
    /// A tool call is about to be sent (for a spinner).
    fn call_started(&mut self, _tool: &str, _server: &str) {}
}

/// An observer that keeps every event (tests, and `run` without `--json`).
#[derive(Debug, Default)]
pub struct Recorder {
    /// The events, in order.
    pub events: Vec<Event>,
}

impl Observer for Recorder {
    fn event(&mut self, event: &Event) {
        self.events.push(event.clone());
    }
}

impl<O: Observer + ?Sized> Observer for Box<O> {
    fn event(&mut self, event: &Event) {
        (**self).event(event);
    }

    fn text_delta(&mut self, delta: &str) {
        (**self).text_delta(delta);
    }

    fn call_started(&mut self, tool: &str, server: &str) {
        (**self).call_started(tool, server);
    }
}
