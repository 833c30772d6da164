//! The conformance fixture's tools and prompt that need the client: each asks with a
//! 2026-07-28 `InputRequiredResult` (the keys the suite's scenarios name) and answers when
//! called again with `inputResponses`. A request that lacks an answer it needs is asked
//! again, never failed; a `requestState` this fixture did not hand out is an error (the
//! tampered-state scenario).

use serde_json::{Value, json};

use crate::tools::text_result;

/// The state `test_input_required_result_request_state` hands out.
const CONFIRM_STATE: &str = "fixture-confirm-1";
/// The states of `test_input_required_result_multi_round`'s rounds.
const ROUND_STATES: [&str; 2] = ["fixture-round-1", "fixture-round-2"];
/// The state `test_input_required_result_tampered_state` checks (a real server would sign
/// it; the fixture compares it whole).
const CHECKED_STATE: &str = "fixture-checked-7f3a";
/// `test_input_required_result_multiple_inputs`'s state.
const MULTIPLE_STATE: &str = "fixture-multiple-1";

fn form(message: &str, properties: Value, required: &[&str]) -> Value {
    json!({"method": "elicitation/create", "params": {
        "message": message,
        "requestedSchema": {"type": "object", "properties": properties, "required": required},
    }})
}

fn name_form(message: &str) -> Value {
    form(message, json!({"name": {"type": "string"}}), &["name"])
}

fn sampling(text: &str, max_tokens: u32) -> Value {
    json!({"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        "maxTokens": max_tokens,
    }})
}

fn roots() -> Value {
    json!({"method": "roots/list", "params": {}})
}

fn asking(requests: Value, state: Option<&str>) -> Value {
    let mut result = json!({"resultType": "input_required", "inputRequests": requests});
    if let Some(state) = state {
        result["requestState"] = json!(state);
    }
    result
}

/// The client's answer under `key`, when it is an object.
fn answer<'p>(params: &'p Value, key: &str) -> Option<&'p Value> {
    params
        .get("inputResponses")
        .and_then(|responses| responses.get(key))
        .filter(|answer| answer.is_object())
}

fn state(params: &Value) -> Option<&str> {
    params.get("requestState").and_then(Value::as_str)
}

/// What an elicitation answer says, as text.
fn elicited(answer: &Value) -> String {
    format!(
        "action={}, content={}",
        answer
            .get("action")
            .and_then(Value::as_str)
            .unwrap_or("none"),
        answer.get("content").unwrap_or(&Value::Null)
    )
}

/// The text of a sampling answer.
fn sampled(answer: &Value) -> String {
    answer
        .pointer("/content/text")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn declared(params: &Value, capability: &str) -> bool {
    params
        .pointer("/_meta/io.modelcontextprotocol~1clientCapabilities")
        .and_then(|capabilities| capabilities.get(capability))
        .is_some()
}

/// Runs one of these tools; `None` for another name.
pub(crate) fn call(name: &str, params: &Value) -> Option<Result<Value, (i64, String)>> {
    let done = |text: String| Some(Ok(text_result(&text, false)));
    match name {
        "test_elicitation" => {
            let message = params
                .pointer("/arguments/message")
                .and_then(Value::as_str)
                .unwrap_or("Please provide your information");
            match answer(params, "input") {
                Some(reply) => done(format!("User response: {}", elicited(reply))),
                None => Some(Ok(asking(
                    json!({"input": form(message, json!({
                        "username": {"type": "string", "description": "User's response"},
                        "email": {"type": "string", "description": "User's email address"},
                    }), &["username", "email"])}),
                    None,
                ))),
            }
        }
        "test_sampling" => {
            let prompt = params
                .pointer("/arguments/prompt")
                .and_then(Value::as_str)
                .unwrap_or("Hello");
            match answer(params, "input") {
                Some(reply) => done(format!("LLM response: {}", sampled(reply))),
                None => Some(Ok(asking(json!({"input": sampling(prompt, 100)}), None))),
            }
        }
        "test_elicitation_sep1034_defaults" => match answer(params, "input") {
            Some(reply) => done(format!("Elicitation completed: {}", elicited(reply))),
            None => Some(Ok(asking(
                json!({"input": form("Please review the defaults", json!({
                    "name": {"type": "string", "default": "John Doe"},
                    "age": {"type": "integer", "default": 30},
                    "score": {"type": "number", "default": 95.5},
                    "status": {"type": "string", "enum": ["active", "inactive", "pending"],
                               "default": "active"},
                    "verified": {"type": "boolean", "default": true},
                }), &[])}),
                None,
            ))),
        },
        "test_elicitation_sep1330_enums" => match answer(params, "input") {
            Some(reply) => done(format!("Elicitation completed: {}", elicited(reply))),
            None => Some(Ok(asking(
                json!({"input": form("Please choose", json!({
                    "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                    "titledSingle": {"type": "string", "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"}]},
                    "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                                   "enumNames": ["Option One", "Option Two", "Option Three"]},
                    "untitledMulti": {"type": "array", "items": {"type": "string",
                                      "enum": ["option1", "option2", "option3"]}},
                    "titledMulti": {"type": "array", "items": {"anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"}]}},
                }), &[])}),
                None,
            ))),
        },
        "test_input_required_result_elicitation" => match answer(params, "user_name") {
            Some(reply) => {
                let name = reply
                    .pointer("/content/name")
                    .and_then(Value::as_str)
                    .unwrap_or("stranger");
                done(format!("Hello, {name}!"))
            }
            None => Some(Ok(asking(
                json!({"user_name": name_form("What is your name?")}),
                None,
            ))),
        },
        "test_input_required_result_sampling" => match answer(params, "capital_question") {
            Some(reply) => done(format!("The model said: {}", sampled(reply))),
            None => Some(Ok(asking(
                json!({"capital_question": sampling("What is the capital of France?", 100)}),
                None,
            ))),
        },
        "test_input_required_result_list_roots" => match answer(params, "client_roots") {
            Some(reply) => done(format!(
                "Roots: {}",
                reply.get("roots").unwrap_or(&Value::Null)
            )),
            None => Some(Ok(asking(json!({"client_roots": roots()}), None))),
        },
        "test_input_required_result_request_state" => {
            match (answer(params, "confirm"), state(params)) {
                (Some(_), Some(CONFIRM_STATE)) => done("state-ok: confirmed".into()),
                (_, Some(other)) if other != CONFIRM_STATE => Some(Err((
                    -32602,
                    "requestState failed its check: not the state this server sent".into(),
                ))),
                _ => Some(Ok(asking(
                    json!({"confirm": form("Please confirm",
                        json!({"ok": {"type": "boolean"}}), &["ok"])}),
                    Some(CONFIRM_STATE),
                ))),
            }
        }
        "test_input_required_result_multiple_inputs" => {
            let all = ["user_name", "greeting", "client_roots"]
                .iter()
                .all(|key| answer(params, key).is_some());
            if all && state(params) == Some(MULTIPLE_STATE) {
                done("All three inputs received.".into())
            } else {
                Some(Ok(asking(
                    json!({
                        "user_name": name_form("What is your name?"),
                        "greeting": sampling("Generate a greeting", 50),
                        "client_roots": roots(),
                    }),
                    Some(MULTIPLE_STATE),
                )))
            }
        }
        "test_input_required_result_multi_round" => {
            match (
                state(params),
                answer(params, "step1"),
                answer(params, "step2"),
            ) {
                (Some(s), Some(_), _) if s == ROUND_STATES[0] => Some(Ok(asking(
                    json!({"step2": form("Step 2: What is your favorite color?",
                        json!({"color": {"type": "string"}}), &["color"])}),
                    Some(ROUND_STATES[1]),
                ))),
                (Some(s), _, Some(_)) if s == ROUND_STATES[1] => {
                    done("Both steps completed.".into())
                }
                _ => Some(Ok(asking(
                    json!({"step1": name_form("Step 1: What is your name?")}),
                    Some(ROUND_STATES[0]),
                ))),
            }
        }
        "test_input_required_result_tampered_state" => match state(params) {
            None => Some(Ok(asking(
                json!({"confirm": form("Please confirm",
                    json!({"ok": {"type": "boolean"}}), &["ok"])}),
                Some(CHECKED_STATE),
            ))),
            Some(CHECKED_STATE) => done("state verified".into()),
            Some(_) => Some(Err((
                -32602,
                "requestState failed its integrity check".into(),
            ))),
        },
        // The suite's stateless diagnostics: a tool that needs sampling, one that asks
        // through its result (never a request of its own), one that always logs (a server
        // that ignores the request's log level: the gateway must not pass it on).
        "test_missing_capability" if !declared(params, "sampling") => Some(Err((
            -32021,
            "test_missing_capability needs the sampling capability".into(),
        ))),
        "test_missing_capability" => done("sampling declared".into()),
        "test_streaming_elicitation" => match answer(params, "confirm") {
            Some(reply) => done(format!("Streamed: {}", elicited(reply))),
            None => Some(Ok(asking(
                json!({"confirm": form("Continue?",
                    json!({"ok": {"type": "boolean"}}), &["ok"])}),
                None,
            ))),
        },
        "test_logging_tool" => done("logged".into()),
        "test_input_required_result_capabilities" => {
            let mut requests = serde_json::Map::new();
            if declared(params, "elicitation") {
                requests.insert("user_name".into(), name_form("What is your name?"));
            }
            if declared(params, "sampling") {
                requests.insert("greeting".into(), sampling("Generate a greeting", 50));
            }
            if requests.is_empty() || params.get("inputResponses").is_some() {
                return done("Nothing more to ask.".into());
            }
            Some(Ok(asking(Value::Object(requests), None)))
        }
        _ => None,
    }
}

/// `prompts/get` of the prompt that asks first; `None` for another prompt.
pub(crate) fn prompt(params: &Value) -> Option<Result<Value, (i64, String)>> {
    if params.get("name").and_then(Value::as_str) != Some("test_input_required_result_prompt") {
        return None;
    }
    Some(Ok(match answer(params, "user_context") {
        Some(reply) => {
            let context = reply
                .pointer("/content/context")
                .and_then(Value::as_str)
                .unwrap_or("none");
            json!({"messages": [{"role": "user", "content": {"type": "text",
                "text": format!("Use this context: {context}")}}]})
        }
        None => asking(
            json!({"user_context": form("What context should the prompt use?",
                json!({"context": {"type": "string"}}), &["context"])}),
            None,
        ),
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A round without answers asks; the retry with them completes; a state the fixture
    /// did not hand out is an error.
    #[test]
    fn tools_ask_then_answer_and_check_their_state() {
        let first = call("test_input_required_result_elicitation", &json!({}))
            .unwrap()
            .unwrap();
        assert_eq!(first["resultType"], "input_required");
        assert!(first["inputRequests"]["user_name"].is_object());
        let retry = json!({"inputResponses": {"user_name": {"action": "accept",
                           "content": {"name": "Alice"}}}});
        let done = call("test_input_required_result_elicitation", &retry)
            .unwrap()
            .unwrap();
        assert_eq!(done["content"][0]["text"], "Hello, Alice!");
        let tampered = json!({"requestState": format!("{CHECKED_STATE}-TAMPERED"),
                              "inputResponses": {"confirm": {"action": "accept"}}});
        assert!(
            call("test_input_required_result_tampered_state", &tampered)
                .unwrap()
                .is_err()
        );
        let only_sampling = json!({"_meta": {"io.modelcontextprotocol/clientCapabilities":
                                   {"sampling": {}}}});
        let asked = call("test_input_required_result_capabilities", &only_sampling)
            .unwrap()
            .unwrap();
        let keys: Vec<&String> = asked["inputRequests"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["greeting"]);
    }
}
