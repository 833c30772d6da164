//! JSON-RPC 2.0 messages as a serving side receives and sends them (Warden's gateway, in
//! `warden serve`): one parse of an incoming message into its kind, the error codes both MCP
//! eras use, and the response shapes. It lives here, beside the client, so that every decoder
//! of untrusted protocol bytes sits in this one crate (and its fuzz targets need no more).

use serde_json::{Value, json};

/// The `_meta` key under which a 2026-07-28 request names its protocol version.
pub const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// Invalid JSON.
pub const PARSE_ERROR: i64 = -32700;
/// Not a valid JSON-RPC message, or not valid in this state.
pub const INVALID_REQUEST: i64 = -32600;
/// No such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid parameters (also: a missing required `_meta` field in 2026-07-28).
pub const INVALID_PARAMS: i64 = -32602;
/// Something failed inside the gateway.
pub const INTERNAL_ERROR: i64 = -32603;
/// 2026-07-28: an HTTP header does not agree with the body.
pub const HEADER_MISMATCH: i64 = -32020;
/// 2026-07-28: the request needs a client capability it did not declare.
pub const MISSING_CAPABILITY: i64 = -32021;
/// 2026-07-28: the request names a protocol version the gateway does not speak.
pub const UNSUPPORTED_VERSION: i64 = -32022;

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The code.
    pub code: i64,
    /// What was wrong, in words.
    pub message: String,
    /// Structured details, if any.
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with `code` and `message`.
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The same error, with `data`.
    pub fn with_data(mut self, data: Value) -> RpcError {
        self.data = Some(data);
        self
    }

    /// As a JSON error object.
    pub fn to_value(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        error
    }
}

/// One message from a client.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request: it gets exactly one response.
    Request {
        /// Its id (a string or an integer).
        id: Value,
        /// The method.
        method: String,
        /// Its parameters (`null` when absent).
        params: Value,
    },
    /// A notification: no response.
    Notification {
        /// The method.
        method: String,
        /// Its parameters (`null` when absent).
        params: Value,
    },
    /// A response to a request the gateway sent (an elicitation).
    Response {
        /// The id of the gateway's request.
        id: Value,
        /// The result, or the error object.
        outcome: Result<Value, Value>,
    },
}

/// Classifies `message`; the error names what was wrong (and carries the id when there
/// was a usable one, so the client can match it).
pub fn parse(message: Value) -> Result<Incoming, (Value, RpcError)> {
    let Value::Object(mut object) = message else {
        return Err((
            Value::Null,
            RpcError::new(
                INVALID_REQUEST,
                "a message must be one JSON object (batches are not part of MCP)",
            ),
        ));
    };
    let id = object.remove("id");
    let id_ok = matches!(&id, Some(Value::String(_)) | Some(Value::Number(_)));
    let shown_id = if id_ok {
        id.clone().unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err((
            shown_id,
            RpcError::new(INVALID_REQUEST, "`jsonrpc` must be \"2.0\""),
        ));
    }
    let params = object.remove("params").unwrap_or(Value::Null);
    if !matches!(params, Value::Null | Value::Object(_)) {
        return Err((
            shown_id,
            RpcError::new(INVALID_REQUEST, "`params` must be an object"),
        ));
    }
    match (object.remove("method"), id) {
        (Some(Value::String(method)), None) => Ok(Incoming::Notification { method, params }),
        (Some(Value::String(method)), Some(id)) if id_ok => {
            Ok(Incoming::Request { id, method, params })
        }
        (Some(Value::String(_)), Some(_)) => Err((
            Value::Null,
            RpcError::new(
                INVALID_REQUEST,
                "a request id must be a string or an integer",
            ),
        )),
        (Some(_), _) => Err((
            shown_id,
            RpcError::new(INVALID_REQUEST, "`method` must be a string"),
        )),
        (None, Some(id)) if id_ok => {
            let outcome = match (object.remove("result"), object.remove("error")) {
                (Some(result), None) => Ok(result),
                (None, Some(error)) => Err(error),
                _ => {
                    return Err((
                        id,
                        RpcError::new(
                            INVALID_REQUEST,
                            "a response needs exactly one of `result` and `error`",
                        ),
                    ));
                }
            };
            Ok(Incoming::Response { id, outcome })
        }
        (None, _) => Err((
            Value::Null,
            RpcError::new(INVALID_REQUEST, "a message needs a `method` or an `id`"),
        )),
    }
}

/// A success response.
pub fn response(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response.
pub fn error_response(id: &Value, error: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error.to_value()})
}

/// A notification.
pub fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

/// A request from the gateway to the client.
pub fn request(id: &Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A key for an id, the same for `1` and `1.0` is not needed: ids are compared as sent.
pub fn id_key(id: &Value) -> String {
    id.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_classified_and_bad_ones_named() {
        let request = parse(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})).unwrap();
        assert_eq!(
            request,
            Incoming::Request {
                id: json!(1),
                method: "ping".into(),
                params: Value::Null
            }
        );
        let note = parse(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        assert!(matches!(note, Ok(Incoming::Notification { .. })));
        let answer = parse(json!({"jsonrpc": "2.0", "id": "w1", "result": {}}));
        assert!(matches!(
            answer,
            Ok(Incoming::Response { outcome: Ok(_), .. })
        ));
        let (_, error) = parse(json!([1, 2])).unwrap_err();
        assert_eq!(error.code, INVALID_REQUEST);
        let (id, error) = parse(json!({"jsonrpc": "1.0", "id": 3, "method": "x"})).unwrap_err();
        assert_eq!((id, error.code), (json!(3), INVALID_REQUEST));
        let (id, _) = parse(json!({"jsonrpc": "2.0", "id": null, "method": "x"})).unwrap_err();
        assert_eq!(id, Value::Null);
        let (_, error) =
            parse(json!({"jsonrpc": "2.0", "id": 1, "method": "x", "params": [1]})).unwrap_err();
        assert!(error.message.contains("params"), "{}", error.message);
    }
}
