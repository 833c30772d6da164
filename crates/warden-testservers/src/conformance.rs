//! Mode `conformance`: the fixture `warden serve --only fixture` fronts for the official
//! conformance suite's server scenarios (scripts/conformance-server). It offers the tools
//! those scenarios call, under the names they use, each answering with the content the
//! scenario checks, and the resources, resource template, prompts and completion the
//! resource and prompt scenarios read (decision 0035). Subscriptions are accepted (answered
//! `{}`; no updates are sent), so the suite's subscribe and unsubscribe scenarios go through
//! the gateway (decision 0039).
//!
//! Tools that need the client (elicitation, sampling, roots) ask in the 2026-07-28 way, with
//! an `InputRequiredResult` and the keys the suite's scenarios name, and answer when called
//! again with `inputResponses` (decision 0051): the gateway relays the questions to its own
//! client in either era. `test_tool_with_logging` and `test_tool_with_progress` send their
//! notifications before answering ([`notifications`]).

use serde_json::{Value, json};

/// A 1x1 transparent PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
/// A tiny WAV header (no samples).
const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA=";

fn no_arguments(description: &str, name: &str) -> Value {
    json!({"name": name, "description": description,
           "inputSchema": {"type": "object", "properties": {}}})
}

/// The tool definitions, in a fixed order.
pub(crate) fn definitions() -> Vec<Value> {
    vec![
        no_arguments("Returns one text block.", "test_simple_text"),
        no_arguments("Returns one image block.", "test_image_content"),
        no_arguments("Returns one audio block.", "test_audio_content"),
        no_arguments("Returns one embedded resource.", "test_embedded_resource"),
        no_arguments(
            "Returns text, an image and a resource.",
            "test_multiple_content_types",
        ),
        no_arguments("Always fails with a tool error.", "test_error_handling"),
        no_arguments(
            "Logs three messages while running.",
            "test_tool_with_logging",
        ),
        no_arguments(
            "Reports progress three times while running.",
            "test_tool_with_progress",
        ),
        json!({"name": "test_elicitation", "description": "Asks the user for their details.",
               "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}},
                               "required": ["message"]}}),
        json!({"name": "test_sampling", "description": "Asks the client's model a question.",
               "inputSchema": {"type": "object", "properties": {"prompt": {"type": "string"}},
                               "required": ["prompt"]}}),
        no_arguments(
            "Asks for values whose fields have defaults.",
            "test_elicitation_sep1034_defaults",
        ),
        no_arguments(
            "Asks to choose among enumerated values.",
            "test_elicitation_sep1330_enums",
        ),
        no_arguments(
            "Takes itself off this server's tool list.",
            "test_trigger_tool_change",
        ),
        no_arguments(
            "Adds a prompt to this server's list.",
            "test_trigger_prompt_change",
        ),
        no_arguments("Needs the sampling capability.", "test_missing_capability"),
        no_arguments("Asks through its result.", "test_streaming_elicitation"),
        no_arguments("Logs whether asked to or not.", "test_logging_tool"),
        no_arguments(
            "Asks the user's name.",
            "test_input_required_result_elicitation",
        ),
        no_arguments(
            "Asks the client's model.",
            "test_input_required_result_sampling",
        ),
        no_arguments(
            "Asks the client's roots.",
            "test_input_required_result_list_roots",
        ),
        no_arguments(
            "Asks for a confirmation, with a state of its own.",
            "test_input_required_result_request_state",
        ),
        no_arguments(
            "Asks three things at once.",
            "test_input_required_result_multiple_inputs",
        ),
        no_arguments(
            "Asks twice in turn.",
            "test_input_required_result_multi_round",
        ),
        no_arguments(
            "Asks with a state it checks.",
            "test_input_required_result_tampered_state",
        ),
        no_arguments(
            "Asks only what the client declared.",
            "test_input_required_result_capabilities",
        ),
        json!({"name": "json_schema_2020_12_tool",
               "description": "Has a JSON Schema 2020-12 input schema with $defs.",
               "inputSchema": {
                   "$schema": "https://json-schema.org/draft/2020-12/schema",
                   "type": "object",
                   "$defs": {"address": {"$anchor": "addressDef", "type": "object", "properties": {
                       "street": {"type": "string"}, "city": {"type": "string"}}}},
                   "properties": {"name": {"type": "string"},
                                  "address": {"$ref": "#/$defs/address"},
                                  "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                                  "phone": {"type": "string"},
                                  "email": {"type": "string"}},
                   "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
                   "if": {"properties": {"contactMethod": {"const": "phone"}},
                          "required": ["contactMethod"]},
                   "then": {"required": ["phone"]},
                   "else": {"required": ["email"]},
                   "additionalProperties": false}}),
    ]
}

fn resource() -> Value {
    json!({"type": "resource", "resource": {
        "uri": "test://embedded-resource", "mimeType": "text/plain",
        "text": "This is an embedded resource content."}})
}

/// Runs one tool called with `params`; `None` for an unknown name.
pub(crate) fn call(name: &str, params: &Value) -> Option<Result<Value, (i64, String)>> {
    if let Some(answer) = crate::conformance_input::call(name, params) {
        return Some(answer);
    }
    plain_call(name).map(Ok)
}

/// The acknowledgement of a 2026-07-28 `subscriptions/listen` (request `id`): everything
/// asked for is honoured. The listen itself is never answered (it stays open until the
/// client cancels it); no update is ever sent, as with the 2025-11-25 subscriptions.
pub(crate) fn listen_acknowledgement(id: &Value, params: &Value) -> Value {
    let asked = params.get("notifications").cloned().unwrap_or(json!({}));
    json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
           "params": {"notifications": asked,
                      "_meta": {"io.modelcontextprotocol/subscriptionId": id}}})
}

/// The notifications `name` sends before its answer, with the pause before each.
pub(crate) fn notifications(name: &str, params: &Value) -> Vec<(std::time::Duration, Value)> {
    let pause = std::time::Duration::from_millis(50);
    let notification =
        |method: &str, params: Value| json!({"jsonrpc": "2.0", "method": method, "params": params});
    match name {
        "test_tool_with_logging" => [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed",
        ]
        .iter()
        .enumerate()
        .map(|(n, text)| {
            let wait = if n == 0 {
                std::time::Duration::ZERO
            } else {
                pause
            };
            let message = json!({"level": "info", "logger": "conformance", "data": text});
            (wait, notification("notifications/message", message))
        })
        .collect(),
        "test_logging_tool" => vec![(
            std::time::Duration::ZERO,
            notification(
                "notifications/message",
                json!({"level": "error", "logger": "conformance", "data": "unasked log line"}),
            ),
        )],
        "test_tool_with_progress" => {
            let Some(token) = params.pointer("/_meta/progressToken") else {
                return Vec::new();
            };
            [0, 50, 100]
                .iter()
                .enumerate()
                .map(|(n, progress)| {
                    let wait = if n == 0 {
                        std::time::Duration::ZERO
                    } else {
                        pause
                    };
                    let message =
                        json!({"progressToken": token, "progress": progress, "total": 100});
                    (wait, notification("notifications/progress", message))
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

/// The tools that need nothing from the client.
fn plain_call(name: &str) -> Option<Value> {
    let text = |text: &str| json!({"type": "text", "text": text});
    let content = match name {
        "test_simple_text" => vec![text("This is a simple text response for testing.")],
        "test_image_content" => {
            vec![json!({"type": "image", "data": PNG, "mimeType": "image/png"})]
        }
        "test_audio_content" => {
            vec![json!({"type": "audio", "data": WAV, "mimeType": "audio/wav"})]
        }
        "test_embedded_resource" => vec![resource()],
        "test_multiple_content_types" => vec![
            text("Multiple content types test:"),
            json!({"type": "image", "data": PNG, "mimeType": "image/png"}),
            resource(),
        ],
        "test_error_handling" => {
            return Some(
                json!({"content": [text("This tool intentionally returns an error for testing")],
                               "isError": true}),
            );
        }
        "test_tool_with_logging" => vec![text("Tool with logging executed successfully")],
        "test_tool_with_progress" => vec![text("Tool with progress executed successfully")],
        "json_schema_2020_12_tool" => vec![text("ok")],
        _ => return None,
    };
    Some(json!({"content": content}))
}

/// The capabilities the fixture declares.
pub(crate) fn capabilities() -> Value {
    json!({"tools": {"listChanged": true}, "resources": {"subscribe": true},
           "prompts": {"listChanged": true}, "completions": {}})
}

/// The suite's hooks that change the fixture's lists (`test_trigger_tool_change`,
/// `test_trigger_prompt_change`), once each, said with a `list_changed` notification sent
/// before the hook's answer. The tool hook takes itself off the list (a tool that appears
/// later is held back by the gateway until a person reviews it, so it would change nothing
/// a client sees); the prompt hook adds a prompt.
#[derive(Debug, Default)]
pub(crate) struct Changes {
    /// The tool hook ran (and is gone from the list).
    tool_added: bool,
    /// The prompt hook ran (`test_added_prompt` is listed).
    prompt_added: bool,
    outbox: Vec<Value>,
}

impl Changes {
    /// Runs a hook; `None` for another tool.
    pub(crate) fn trigger(&mut self, name: &str) -> Option<Value> {
        let (added, method) = match name {
            "test_trigger_tool_change" => {
                (&mut self.tool_added, "notifications/tools/list_changed")
            }
            "test_trigger_prompt_change" => {
                (&mut self.prompt_added, "notifications/prompts/list_changed")
            }
            _ => return None,
        };
        *added = true;
        self.outbox
            .push(json!({"jsonrpc": "2.0", "method": method}));
        Some(crate::tools::text_result("changed", false))
    }

    /// The notifications to send now.
    pub(crate) fn take_outbox(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.outbox)
    }

    /// The tool definitions, without the tool hook once it ran.
    pub(crate) fn applied_tools(&self, mut tools: Vec<Value>) -> Vec<Value> {
        if self.tool_added {
            tools.retain(|tool| tool["name"] != "test_trigger_tool_change");
        }
        tools
    }

    /// An answer to `method`, with the added prompt in `prompts/list`.
    pub(crate) fn applied(&self, method: &str, mut result: Value) -> Value {
        if method == "prompts/list"
            && self.prompt_added
            && let Some(prompts) = result.get_mut("prompts").and_then(Value::as_array_mut)
        {
            prompts.push(json!({"name": "test_added_prompt",
                                "description": "Added by the suite's hook."}));
        }
        result
    }
}

const TEXT_URI: &str = "test://static-text";
const BINARY_URI: &str = "test://static-binary";
const TEMPLATE: &str = "test://template/{id}/data";

fn prompt_text(text: &str) -> Value {
    json!({"role": "user", "content": {"type": "text", "text": text}})
}

/// Answers the resource, prompt and completion methods; `None` for any other method.
pub(crate) fn answer(method: &str, params: &Value) -> Option<Result<Value, (i64, String)>> {
    let text = |key: &str| params.get(key).and_then(Value::as_str).unwrap_or_default();
    let answer = match method {
        "resources/list" => Ok(json!({"resources": [
            {"uri": TEXT_URI, "name": "static-text", "description": "A static text resource.",
             "mimeType": "text/plain"},
            {"uri": BINARY_URI, "name": "static-binary",
             "description": "A static binary resource.", "mimeType": "image/png"},
        ]})),
        "resources/templates/list" => Ok(json!({"resourceTemplates": [
            {"uriTemplate": TEMPLATE, "name": "template",
             "description": "Data for an id.", "mimeType": "application/json"},
        ]})),
        "resources/read" => {
            let uri = text("uri");
            if uri == TEXT_URI {
                Ok(json!({"contents": [{"uri": uri, "mimeType": "text/plain",
                                        "text": "This is the content of the static text resource."}]}))
            } else if uri == BINARY_URI {
                Ok(json!({"contents": [{"uri": uri, "mimeType": "image/png", "blob": PNG}]}))
            } else if let Some(id) = uri
                .strip_prefix("test://template/")
                .and_then(|rest| rest.strip_suffix("/data"))
            {
                Ok(
                    json!({"contents": [{"uri": uri, "mimeType": "application/json",
                                        "text": json!({"id": id, "data": format!("Data for ID: {id}")}).to_string()}]}),
                )
            } else {
                Err((-32602, format!("Resource not found: {uri}")))
            }
        }
        "prompts/list" => Ok(json!({"prompts": [
            {"name": "test_simple_prompt", "description": "A simple prompt without arguments."},
            {"name": "test_prompt_with_arguments", "description": "A prompt with two arguments.",
             "arguments": [{"name": "arg1", "description": "First argument", "required": true},
                           {"name": "arg2", "description": "Second argument", "required": true}]},
            {"name": "test_prompt_with_embedded_resource",
             "description": "A prompt with an embedded resource.",
             "arguments": [{"name": "resourceUri", "description": "The resource to embed",
                            "required": true}]},
            {"name": "test_prompt_with_image", "description": "A prompt with an image."},
            {"name": "test_input_required_result_prompt",
             "description": "A prompt that asks for its context first."},
        ]})),
        "prompts/get" if let Some(answer) = crate::conformance_input::prompt(params) => answer,
        "prompts/get" => {
            let arguments = params.get("arguments").cloned().unwrap_or(Value::Null);
            let argument = |key: &str| {
                arguments
                    .get(key)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            let messages = match text("name") {
                "test_simple_prompt" => vec![prompt_text("This is a simple prompt for testing.")],
                "test_prompt_with_arguments" => vec![prompt_text(&format!(
                    "Prompt with arguments: arg1='{}', arg2='{}'",
                    argument("arg1"),
                    argument("arg2")
                ))],
                "test_prompt_with_embedded_resource" => vec![
                    json!({"role": "user", "content": {"type": "resource", "resource": {
                        "uri": argument("resourceUri"), "mimeType": "text/plain",
                        "text": "Embedded resource content for testing."}}}),
                    prompt_text("Please process the embedded resource above."),
                ],
                "test_prompt_with_image" => vec![
                    json!({"role": "user", "content": {"type": "image", "data": PNG,
                                                       "mimeType": "image/png"}}),
                    prompt_text("Please analyze the image above."),
                ],
                other => return Some(Err((-32602, format!("unknown prompt: {other}")))),
            };
            Ok(json!({"messages": messages}))
        }
        // Accepted and forgotten: the suite checks the answers, not updates.
        "resources/subscribe" | "resources/unsubscribe" => Ok(json!({})),
        "completion/complete" => {
            Ok(json!({"completion": {"values": [], "total": 0, "hasMore": false}}))
        }
        _ => return None,
    };
    Some(answer)
}
