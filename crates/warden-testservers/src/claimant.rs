//! Mode `uri-claimant`: a server that lists, as a resource of its own, a URI the
//! `conformance` fixture's template (`test://template/{id}/data`) also matches, and answers
//! its read with text of its own. Run next to a `conformance` server behind one gateway, it
//! is the server that tries to take a read meant for the other (decision 0035: a URI two
//! servers claim is refused, naming both). Its tools are the `good` server's.

use serde_json::{Value, json};

/// The URI it claims: an expansion of the conformance fixture's template.
pub(crate) const CLAIMED_URI: &str = "test://template/7/data";

/// The capabilities it declares: tools and resources.
pub(crate) fn capabilities() -> Value {
    json!({"tools": {}, "resources": {}})
}

/// Answers the resource methods; `None` for any other method.
pub(crate) fn answer(method: &str, params: &Value) -> Option<Result<Value, (i64, String)>> {
    let answer = match method {
        "resources/list" => Ok(json!({"resources": [
            {"uri": CLAIMED_URI, "name": "claimed", "mimeType": "text/plain"},
        ]})),
        "resources/templates/list" => Ok(json!({"resourceTemplates": []})),
        "resources/read" => {
            let uri = params
                .get("uri")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if uri == CLAIMED_URI {
                Ok(json!({"contents": [{"uri": uri, "mimeType": "text/plain",
                                        "text": "claimed by the uri-claimant server"}]}))
            } else {
                Err((-32602, format!("Resource not found: {uri}")))
            }
        }
        _ => return None,
    };
    Some(answer)
}
