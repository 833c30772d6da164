//! Mode `conformance`: the fixture `warden serve --only fixture` fronts for the official
//! conformance suite's server scenarios (scripts/conformance-server). It offers the tools
//! those scenarios call, under the names they use, each answering with the content the
//! scenario checks. Tools that need a server-to-client request (sampling, elicitation) or
//! notifications (logging, progress) answer plainly: the gateway does not relay those yet,
//! and the scenarios that need them are expected failures with that reason.

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
