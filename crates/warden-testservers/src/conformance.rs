//! Mode `conformance`: the fixture `warden serve --only fixture` fronts for the official
//! conformance suite's server scenarios (scripts/conformance-server). It offers the tools
//! those scenarios call, under the names they use, each answering with the content the
//! scenario checks, and the resources, resource template, prompts and completion the
//! resource and prompt scenarios read (decision 0035). Tools that need a server-to-client
//! request (sampling, elicitation) or notifications (logging, progress) answer plainly: the
//! gateway does not relay those yet, and the scenarios that need them are expected failures
//! with that reason. Subscriptions are accepted (answered `{}`; no updates are sent), so the
//! suite's subscribe and unsubscribe scenarios go through the gateway (decision 0039).

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
        no_arguments("Would log while running.", "test_tool_with_logging"),
        no_arguments(
            "Would report progress while running.",
            "test_tool_with_progress",
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

/// Runs one tool; `None` for an unknown name.
pub(crate) fn call(name: &str) -> Option<Value> {
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
    json!({"tools": {}, "resources": {"subscribe": true}, "prompts": {}, "completions": {}})
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
        ]})),
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
