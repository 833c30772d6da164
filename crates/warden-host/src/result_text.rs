//! A tool result turned into the text the model reads.

use serde_json::Value;
use warden_mcp::CallOutcome;

/// The text of `outcome`: text blocks as they are, resources by their text or address,
/// images and audio as a short placeholder (their bytes are not sent to the model), and
/// the structured content when no block carries text.
pub fn result_text(outcome: &CallOutcome) -> String {
    let mut parts: Vec<String> = Vec::new();
    for block in &outcome.content {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "text" => {
                if let Some(text) = block.get("text").and_then(Value::as_str) {
                    parts.push(text.to_owned());
                }
            }
            "image" | "audio" => {
                let mime = block
                    .get("mimeType")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown type");
                let size = block
                    .get("data")
                    .and_then(Value::as_str)
                    .map_or(0, |d| d.len() / 4 * 3);
                parts.push(format!("[{kind} ({mime}, about {size} bytes) not shown]"));
            }
            "resource" => {
                let resource = block.get("resource").unwrap_or(&Value::Null);
                match resource.get("text").and_then(Value::as_str) {
                    Some(text) => parts.push(text.to_owned()),
                    None => parts.push(format!(
                        "[resource {} (binary) not shown]",
                        resource.get("uri").and_then(Value::as_str).unwrap_or("?")
                    )),
                }
            }
            "resource_link" => parts.push(format!(
                "[resource link: {} {}]",
                block.get("name").and_then(Value::as_str).unwrap_or(""),
                block.get("uri").and_then(Value::as_str).unwrap_or("?")
            )),
            _ => parts.push(block.to_string()),
        }
    }
    if parts.is_empty()
        && let Some(structured) = &outcome.structured
    {
        parts.push(structured.to_string());
    }
    // A server's questions reach the client as they are: their text is the server's.
    if let Some(asked) = &outcome.input_required {
        parts.push(Value::Object(asked.requests.clone()).to_string());
    }
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn outcome(content: Vec<Value>, structured: Option<Value>) -> CallOutcome {
        CallOutcome {
            content,
            structured,
            is_error: false,
            raw: Value::Null,
            input_required: None,
        }
    }

    #[test]
    fn blocks_become_text_and_binary_data_is_not_sent() {
        let text = result_text(&outcome(
            vec![
                json!({"type":"text","text":"one"}),
                json!({"type":"image","mimeType":"image/png","data":"AAAA"}),
                json!({"type":"resource","resource":{"uri":"file:///a","text":"body"}}),
            ],
            None,
        ));
        assert_eq!(
            text,
            "one\n[image (image/png, about 3 bytes) not shown]\nbody"
        );
        assert_eq!(
            result_text(&outcome(vec![], Some(json!({"n": 1})))),
            "{\"n\":1}"
        );
    }
}
