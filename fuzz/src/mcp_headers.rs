//! The 2026-07-28 `Mcp-*` request headers, both sides: the client's encoders in
//! `warden_mcp::http::headers` (`encode_text`, `param_headers`, `param_values`, `name_of`)
//! and, in the same module, the serving side's decoder and checks (`decode_header_value`,
//! `check_param_headers`, `check_modern_headers`). Properties:
//!
//! - `decode_header_value(encode_text(s)) == s` for every string, and the encoded form is
//!   always a valid header value;
//! - headers a client computes for a call are accepted by the gateway's check of the same
//!   call (an honest client is never refused with a header mismatch).
//!
//! Input: text; when it is a JSON array `[schema, arguments]`, the second property is
//! checked for it.

use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};
use warden_mcp::http::headers::{
    check_modern_headers, check_param_headers, decode_header_value, encode_text, name_of,
    param_headers, param_values,
};

/// Largest integer JSON Schema tools agree on (the safe-integer range).
const SAFE: i64 = (1 << 53) - 1;

fn round_trip(text: &str) {
    let encoded = encode_text(text);
    assert!(
        HeaderValue::from_str(&encoded).is_ok(),
        "not a header value: {encoded:?}"
    );
    assert_eq!(
        decode_header_value(&encoded).as_deref(),
        Some(text),
        "encoded as {encoded:?}"
    );
}

/// True when `value` is of the JSON Schema type named (what the host's argument
/// validation lets through before a call is sent).
fn has_type(value: &Value, kind: Option<&str>) -> bool {
    match kind {
        Some("string") => value.is_string(),
        Some("boolean") => value.is_boolean(),
        Some("integer") => value
            .as_f64()
            .is_some_and(|f| f.fract() == 0.0 && f.abs() <= SAFE as f64),
        _ => false,
    }
}

fn client_and_gateway_agree(schema: &Value, arguments: &Value) {
    let Ok(headers) = param_headers(schema) else {
        return;
    };
    let Some(args) = arguments.as_object() else {
        return;
    };
    // Only calls whose annotated arguments match their declared types reach the wire.
    for header in &headers {
        let mut property = schema;
        for key in &header.path {
            property = &property["properties"][key];
        }
        let mut value = arguments;
        for key in &header.path {
            value = &value[key];
        }
        if !value.is_null() && !has_type(value, property["type"].as_str()) {
            return;
        }
    }
    let mut map = HeaderMap::new();
    for (name, value) in param_values(&headers, Some(args)) {
        let name = HeaderName::from_bytes(name.as_bytes())
            .unwrap_or_else(|e| panic!("client made a bad header name {name:?}: {e}"));
        let value = HeaderValue::from_str(&value)
            .unwrap_or_else(|e| panic!("client made a bad header value {value:?}: {e}"));
        map.append(name, value);
    }
    if let Err(error) = check_param_headers(&map, schema, arguments) {
        panic!("the gateway refused the headers an honest client sent: {error:?}; headers {map:?}");
    }

    // Mcp-Name and Mcp-Method, from the same arguments taken as a tools/call's params.
    let name = args
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("tool")
        .to_owned();
    let mut params = json!({"name": name, "_meta": {}});
    let version = "2026-07-28";
    params["_meta"][warden_mcp::jsonrpc::META_VERSION] = json!(version);
    let mut map = HeaderMap::new();
    map.insert("mcp-protocol-version", HeaderValue::from_static(version));
    map.insert("mcp-method", HeaderValue::from_static("tools/call"));
    if let Some(encoded) = name_of("tools/call", params.as_object().unwrap()) {
        map.insert("mcp-name", HeaderValue::from_str(&encoded).unwrap());
    }
    if let Err(error) = check_modern_headers(&map, "tools/call", &params) {
        panic!("the gateway refused an honest Mcp-Name for {name:?}: {error:?}");
    }
}

/// Checks both properties on one input.
pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    round_trip(&text);
    let _ = decode_header_value(&text);
    if let Ok(Value::Array(pair)) = serde_json::from_str::<Value>(&text)
        && let [schema, arguments] = pair.as_slice()
    {
        client_and_gateway_agree(schema, arguments);
    }
}
