//! JSON-RPC 2.0 message shapes: classifying an incoming line and building outgoing messages.
//!
//! Only what MCP uses: single messages (no batches), ids that are strings or integers.

use serde_json::{Value, json};

/// Parse error: the line is not JSON.
pub(crate) const PARSE_ERROR: i64 = -32700;
/// The JSON is not a valid JSON-RPC 2.0 message.
pub(crate) const INVALID_REQUEST: i64 = -32600;
/// The method does not exist here.
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
/// The method exists but its parameters are wrong.
pub(crate) const INVALID_PARAMS: i64 = -32602;

/// A message received from the client.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Incoming {
    /// A request: must be answered with the same id.
    Request {
        /// The request id (string or integer).
        id: Value,
        /// The method name.
        method: String,
        /// The params, `Value::Null` when absent.
        params: Value,
    },
    /// A notification: never answered.
    Notification {
        /// The method name.
        method: String,
        /// The params, `Value::Null` when absent.
        params: Value,
    },
    /// The client's answer to a request this server sent.
    Response {
        /// The id of the request it answers.
        id: Value,
        /// `Ok(result)` or `Err(error object)`.
        outcome: Result<Value, Value>,
    },
}

/// Why an incoming line was rejected, ready to be sent back as an error response.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rejection {
    /// The id to answer with (`null` when the id itself could not be read).
    pub(crate) id: Value,
    /// JSON-RPC error code.
    pub(crate) code: i64,
    /// Human-readable reason.
    pub(crate) message: String,
}

impl Rejection {
    /// The error response for this rejection.
    pub(crate) fn to_response(&self) -> Value {
        error_response(&self.id, self.code, &self.message)
    }
}

fn reject(id: Value, code: i64, message: impl Into<String>) -> Rejection {
    Rejection {
        id,
        code,
        message: message.into(),
    }
}

fn is_valid_id(id: &Value) -> bool {
    id.is_string() || id.is_i64() || id.is_u64()
}

/// Classifies one line received from the client.
pub(crate) fn parse(line: &[u8]) -> Result<Incoming, Rejection> {
    let value: Value = serde_json::from_slice(line)
        .map_err(|e| reject(Value::Null, PARSE_ERROR, format!("parse error: {e}")))?;
    let Value::Object(mut object) = value else {
        return Err(reject(
            Value::Null,
            INVALID_REQUEST,
            "expected a single JSON-RPC message object (batches are not supported)",
        ));
    };
    let id = object.remove("id");
    if id.as_ref().is_some_and(|id| !is_valid_id(id)) {
        return Err(reject(
            Value::Null,
            INVALID_REQUEST,
            "id must be a string or an integer",
        ));
    }
    let answer_id = id.clone().unwrap_or(Value::Null);
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(reject(
            answer_id,
            INVALID_REQUEST,
            "jsonrpc must be \"2.0\"",
        ));
    }
    let params = object.remove("params").unwrap_or(Value::Null);
    match (object.remove("method"), id) {
        (Some(Value::String(method)), Some(id)) => Ok(Incoming::Request { id, method, params }),
        (Some(Value::String(method)), None) => Ok(Incoming::Notification { method, params }),
        (Some(_), _) => Err(reject(
            answer_id,
            INVALID_REQUEST,
            "method must be a string",
        )),
        (None, Some(id)) => match (object.remove("result"), object.remove("error")) {
            (Some(result), None) => Ok(Incoming::Response {
                id,
                outcome: Ok(result),
            }),
            (None, Some(error)) => Ok(Incoming::Response {
                id,
                outcome: Err(error),
            }),
            _ => Err(reject(
                answer_id,
                INVALID_REQUEST,
                "a response needs exactly one of result and error",
            )),
        },
        (None, None) => Err(reject(Value::Null, INVALID_REQUEST, "no method and no id")),
    }
}

/// A success response.
pub(crate) fn result_response(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response.
pub(crate) fn error_response(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// A request sent by this server to the client.
pub(crate) fn request(id: &str, method: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_requests_notifications_and_responses() {
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#),
            Ok(Incoming::Request {
                id: json!(7),
                method: "ping".into(),
                params: Value::Null
            })
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}"#),
            Ok(Incoming::Notification {
                method: "notifications/initialized".into(),
                params: json!({})
            })
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":"r1","result":{"roots":[]}}"#),
            Ok(Incoming::Response {
                id: json!("r1"),
                outcome: Ok(json!({"roots": []}))
            })
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":"p1","error":{"code":-1,"message":"no"}}"#),
            Ok(Incoming::Response {
                id: json!("p1"),
                outcome: Err(json!({"code": -1, "message": "no"}))
            })
        );
    }

    #[test]
    fn rejects_malformed_messages_with_the_right_code_and_id() {
        let code_and_id = |line: &[u8]| {
            let r = parse(line).unwrap_err();
            (r.code, r.id)
        };
        assert_eq!(code_and_id(b"INFO starting"), (PARSE_ERROR, Value::Null));
        assert_eq!(code_and_id(b"[1,2]"), (INVALID_REQUEST, Value::Null));
        assert_eq!(
            code_and_id(br#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#),
            (INVALID_REQUEST, json!(3))
        );
        assert_eq!(
            code_and_id(br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#),
            (INVALID_REQUEST, Value::Null)
        );
        assert_eq!(
            code_and_id(br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#),
            (INVALID_REQUEST, Value::Null)
        );
        assert_eq!(
            code_and_id(br#"{"jsonrpc":"2.0","id":4,"method":5}"#),
            (INVALID_REQUEST, json!(4))
        );
        assert_eq!(
            code_and_id(br#"{"jsonrpc":"2.0","id":5}"#),
            (INVALID_REQUEST, json!(5))
        );
    }
}
