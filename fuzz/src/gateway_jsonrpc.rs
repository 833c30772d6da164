//! The gateway's JSON-RPC classification of what a client sends
//! (`warden_mcp::jsonrpc::parse`). Properties: a message is classified or refused
//! (never a panic); whatever is classified is rebuilt by the gateway's own encoders
//! (`request`, `notification`, `response`, `error_response`) into a message that
//! classifies the same way; an error always carries a string or number id, or null.

use serde_json::Value;
use warden_mcp::jsonrpc::{self, Incoming};

/// Decodes one input and checks the classification.
pub fn run(data: &[u8]) {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    match jsonrpc::parse(value) {
        Err((id, error)) => {
            assert!(matches!(
                id,
                Value::Null | Value::String(_) | Value::Number(_)
            ));
            let shown = jsonrpc::error_response(&id, &error);
            assert_eq!(shown["jsonrpc"], "2.0");
            let _ = jsonrpc::id_key(&id);
        }
        Ok(incoming) => {
            let rebuilt = match &incoming {
                Incoming::Request { id, method, params } => {
                    jsonrpc::request(id, method, params.clone())
                }
                Incoming::Notification { method, params } => {
                    jsonrpc::notification(method, params.clone())
                }
                Incoming::Response { id, outcome } => match outcome {
                    Ok(result) => jsonrpc::response(id, result.clone()),
                    Err(error) => {
                        let mut message = jsonrpc::response(id, Value::Null);
                        let object = message.as_object_mut().unwrap();
                        object.remove("result");
                        object.insert("error".into(), error.clone());
                        message
                    }
                },
            };
            let again = jsonrpc::parse(rebuilt.clone())
                .unwrap_or_else(|(_, e)| panic!("rebuilt message refused: {e:?}: {rebuilt}"));
            assert_eq!(incoming, again);
        }
    }
}
