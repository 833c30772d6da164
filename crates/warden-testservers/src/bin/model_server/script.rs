//! The script: the list of steps the server plays, one per model request, and the checks a
//! step may make on the request that consumes it.
//!
//! ```json
//! {"steps": [
//!   {"reply": {"text": "Looking.", "tool_calls": [{"name": "search", "arguments": {"q": "x"}}]},
//!    "expect": {"tools_include": ["search"]}},
//!   {"error": {"status": 429, "retry_after": 1}},
//!   {"reply": {"text": "Done."}, "chunk_delay_ms": 5}
//! ]}
//! ```

use std::path::Path;
use std::sync::Mutex;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::conversation::RequestView;

/// The whole script file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Script {
    pub(crate) steps: Vec<Step>,
}

/// One scripted answer to one model request.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Step {
    #[serde(default)]
    pub(crate) reply: Option<Reply>,
    #[serde(default)]
    pub(crate) error: Option<ErrorStep>,
    #[serde(default)]
    pub(crate) expect: Option<Expect>,
    /// Wait this long before answering at all.
    #[serde(default)]
    pub(crate) delay_ms: u64,
    /// Wait this long between two stream events.
    #[serde(default)]
    pub(crate) chunk_delay_ms: u64,
    /// Send the headers and the first stream event, then nothing more, ever.
    #[serde(default)]
    pub(crate) stall: bool,
    /// Streams only: after this many events of the reply, send the provider's in-stream
    /// error event and end the stream.
    #[serde(default)]
    pub(crate) stream_error: Option<StreamError>,
    /// Streams only: end the stream cleanly after this many events, without the final
    /// events (`message_stop`, `[DONE]`), as a cut connection would.
    #[serde(default)]
    pub(crate) cut_after_events: Option<usize>,
}

/// An error reported inside a stream that has already started.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StreamError {
    pub(crate) after_events: usize,
    #[serde(default = "overloaded")]
    pub(crate) status: u16,
    #[serde(default)]
    pub(crate) message: Option<String>,
}

fn overloaded() -> u16 {
    529
}

/// An assistant turn: optional text, then zero or more tool calls.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Reply {
    #[serde(default)]
    pub(crate) text: Option<String>,
    #[serde(default)]
    pub(crate) tool_calls: Vec<ToolCall>,
    /// `"max_tokens"`: the turn was cut by the token limit (Anthropic `max_tokens`, OpenAI
    /// `length`) instead of ending normally.
    #[serde(default)]
    pub(crate) stop: Option<String>,
    /// Replaces the rough token counts.
    #[serde(default)]
    pub(crate) usage: Option<Usage>,
}

/// Token counts reported for a reply.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Usage {
    pub(crate) input_tokens: u64,
    pub(crate) output_tokens: u64,
}

/// One tool call of a [`Reply`].
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolCall {
    /// Generated in the provider's style when absent.
    #[serde(default)]
    pub(crate) id: Option<String>,
    pub(crate) name: String,
    #[serde(default = "empty_object")]
    pub(crate) arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// A provider error answered instead of a reply.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ErrorStep {
    pub(crate) status: u16,
    /// Seconds, sent as the `retry-after` header.
    #[serde(default)]
    pub(crate) retry_after: Option<u64>,
    /// Replaces the provider's usual message for this status.
    #[serde(default)]
    pub(crate) message: Option<String>,
}

/// What the request consuming a step must look like.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Expect {
    #[serde(default)]
    pub(crate) tools_include: Vec<String>,
    #[serde(default)]
    pub(crate) tools_exclude: Vec<String>,
    #[serde(default)]
    pub(crate) last_tool_results_contain: Vec<String>,
    #[serde(default)]
    pub(crate) last_tool_results_exclude: Vec<String>,
    #[serde(default)]
    pub(crate) tool_count_max: Option<usize>,
    #[serde(default)]
    pub(crate) last_user_text_contains: Vec<String>,
}

/// What a step does, once its shape has been checked.
#[derive(Debug, Clone)]
pub(crate) enum Action {
    Reply(Reply),
    Error(ErrorStep),
}

impl Step {
    /// The step's reply or error; [`Script::load`] guarantees exactly one is present.
    pub(crate) fn action(&self) -> Action {
        match (&self.reply, &self.error) {
            (_, Some(error)) => Action::Error(error.clone()),
            (Some(reply), None) => Action::Reply(reply.clone()),
            (None, None) => Action::Reply(Reply::default()),
        }
    }
}

impl Script {
    /// Reads and checks a script file; the error names the file and the faulty step.
    pub(crate) fn load(path: &Path) -> Result<Script, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read script {}: {e}", path.display()))?;
        Script::parse(&text).map_err(|e| format!("script {}: {e}", path.display()))
    }

    /// Parses and checks a script.
    pub(crate) fn parse(text: &str) -> Result<Script, String> {
        let script: Script = serde_json::from_str(text).map_err(|e| e.to_string())?;
        for (index, step) in script.steps.iter().enumerate() {
            step.check().map_err(|e| format!("step {index}: {e}"))?;
        }
        Ok(script)
    }
}

impl Step {
    fn check(&self) -> Result<(), String> {
        match (&self.reply, &self.error) {
            (Some(_), Some(_)) => return Err("has both \"reply\" and \"error\"".into()),
            (None, None) => return Err("needs \"reply\" or \"error\"".into()),
            _ => {}
        }
        if let Some(error) = &self.error
            && !(400..=599).contains(&error.status)
        {
            return Err(format!("error status {} is not 400..=599", error.status));
        }
        if let Some(error) = &self.stream_error
            && !(400..=599).contains(&error.status)
        {
            return Err(format!(
                "stream_error status {} is not 400..=599",
                error.status
            ));
        }
        if self.error.is_some() && (self.stream_error.is_some() || self.cut_after_events.is_some())
        {
            return Err("\"stream_error\" and \"cut_after_events\" go with a reply".into());
        }
        if let Some(reply) = &self.reply {
            if let Some(stop) = &reply.stop
                && stop != "max_tokens"
            {
                return Err(format!(
                    "reply.stop {stop:?}: the only scripted stop is \"max_tokens\""
                ));
            }
            for call in &reply.tool_calls {
                if !call.arguments.is_object() {
                    return Err(format!(
                        "arguments of tool call {:?} must be a JSON object",
                        call.name
                    ));
                }
            }
        }
        Ok(())
    }
}

impl Expect {
    /// Checks the request against every expectation; the error names the first that failed.
    pub(crate) fn check(&self, request: &RequestView) -> Result<(), String> {
        for name in &self.tools_include {
            if !request.tools.contains(name) {
                return Err(format!(
                    "tools_include: {name:?} is not among the request's tools {:?}",
                    request.tools
                ));
            }
        }
        for name in &self.tools_exclude {
            if request.tools.contains(name) {
                return Err(format!(
                    "tools_exclude: {name:?} is among the request's tools {:?}",
                    request.tools
                ));
            }
        }
        if let Some(max) = self.tool_count_max
            && request.tools.len() > max
        {
            return Err(format!(
                "tool_count_max: the request has {} tools, more than {max}",
                request.tools.len()
            ));
        }
        for needle in &self.last_tool_results_contain {
            if !request.last_tool_results.iter().any(|r| r.contains(needle)) {
                return Err(format!(
                    "last_tool_results_contain: no tool result of the last message group \
                     contains {needle:?} (results: {:?})",
                    request.last_tool_results
                ));
            }
        }
        for needle in &self.last_tool_results_exclude {
            if request.last_tool_results.iter().any(|r| r.contains(needle)) {
                return Err(format!(
                    "last_tool_results_exclude: a tool result of the last message group \
                     contains {needle:?}"
                ));
            }
        }
        for needle in &self.last_user_text_contains {
            if !request.last_user_text.contains(needle) {
                return Err(format!(
                    "last_user_text_contains: the last user text {:?} does not contain {needle:?}",
                    request.last_user_text
                ));
            }
        }
        Ok(())
    }
}

/// The script being played: the steps and the index of the next one, behind one lock so
/// concurrent requests take distinct steps in arrival order.
pub(crate) struct Player {
    steps: Vec<Step>,
    next: Mutex<usize>,
}

impl Player {
    pub(crate) fn new(script: Script) -> Player {
        Player {
            steps: script.steps,
            next: Mutex::new(0),
        }
    }

    /// Takes the next step and its index, or `Err(len)` when the script is exhausted.
    pub(crate) fn take(&self) -> Result<(usize, Step), usize> {
        let mut next = match self.next.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let index = *next;
        match self.steps.get(index) {
            Some(step) => {
                *next += 1;
                Ok((index, step.clone()))
            }
            None => Err(self.steps.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn parses_every_step_kind() {
        let script = Script::parse(
            r#"{"steps": [
                {"reply": {"text": "hi", "tool_calls": [{"name": "a", "arguments": {"x": 1}}]},
                 "expect": {"tools_include": ["a"], "tool_count_max": 3}, "chunk_delay_ms": 2},
                {"error": {"status": 429, "retry_after": 1}},
                {"reply": {"text": "x"}, "stall": true, "delay_ms": 5}
            ]}"#,
        )
        .unwrap();
        assert_eq!(script.steps.len(), 3);
        assert!(matches!(script.steps[1].action(), Action::Error(ref e) if e.status == 429));
        assert!(script.steps[2].stall);
    }

    #[test]
    fn rejects_malformed_steps() {
        for (text, needle) in [
            (r#"{"steps": [{}]}"#, "step 0: needs"),
            (
                r#"{"steps": [{"reply": {}, "error": {"status": 500}}]}"#,
                "both",
            ),
            (r#"{"steps": [{"error": {"status": 200}}]}"#, "400..=599"),
            (
                r#"{"steps": [{"reply": {"txt": "typo"}}]}"#,
                "unknown field",
            ),
            (
                r#"{"steps": [{"reply": {"stop": "end"}}]}"#,
                "only scripted stop",
            ),
            (
                r#"{"steps": [{"error": {"status": 500}, "cut_after_events": 1}]}"#,
                "go with a reply",
            ),
            (
                r#"{"steps": [{"reply": {}, "stream_error": {"after_events": 1, "status": 200}}]}"#,
                "stream_error status",
            ),
            (
                r#"{"steps": [{"reply": {"tool_calls": [{"name": "a", "arguments": 3}]}}]}"#,
                "JSON object",
            ),
        ] {
            let error = Script::parse(text).unwrap_err();
            assert!(error.contains(needle), "{error}");
        }
    }

    #[test]
    fn expectations_name_what_failed() {
        let view = RequestView {
            tools: vec!["a".into(), "b".into()],
            last_tool_results: vec!["result: 42".into()],
            last_user_text: "please add".into(),
        };
        let ok = Expect {
            tools_include: vec!["a".into()],
            tools_exclude: vec!["c".into()],
            last_tool_results_contain: vec!["42".into()],
            last_tool_results_exclude: vec!["error".into()],
            tool_count_max: Some(2),
            last_user_text_contains: vec!["add".into()],
        };
        assert!(ok.check(&view).is_ok());
        let failing = Expect {
            tool_count_max: Some(1),
            ..Expect::default()
        };
        assert!(
            failing
                .check(&view)
                .unwrap_err()
                .starts_with("tool_count_max")
        );
        let failing = Expect {
            last_tool_results_contain: vec!["43".into()],
            ..Expect::default()
        };
        assert!(
            failing
                .check(&view)
                .unwrap_err()
                .starts_with("last_tool_results_contain")
        );
    }

    #[test]
    fn player_hands_out_steps_once_then_reports_exhaustion() {
        let player = Player::new(Script::parse(r#"{"steps": [{"reply": {}}]}"#).unwrap());
        assert_eq!(player.take().unwrap().0, 0);
        assert_eq!(player.take().unwrap_err(), 1);
    }
}
