//! Mode `modern`: a strict, stateless 2026-07-28 server. It refuses the very first request
//! with `-32022` (the client must retry once), checks on every POST that
//! `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` and `Mcp-Param-Region` agree with the
//! body (`-32020` otherwise, after base64 decoding), and lists two tools: `echo`, whose
//! `region` argument is marked `x-mcp-header: Region`, and `bad`, whose marking is on a
//! number (a client must leave it out). Each request is logged on stderr with the headers
//! it carried. Its tool list is not reusable (`ttlMs` 0, `private`) unless
//! `$WARDEN_TEST_LIST_TTL_MS` and `$WARDEN_TEST_LIST_SCOPE` say otherwise.

use http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

/// Decodes `=?base64?…?=`; other values are returned as they are.
fn decode(value: &str) -> String {
    let Some(inner) = value
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
    else {
        return value.to_owned();
    };
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::new();
    for byte in inner.bytes().filter(|b| *b != b'=') {
        let Some(index) = alphabet.iter().position(|a| *a == byte) else {
            return String::new();
        };
        bits = (bits << 6) | index as u32;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The list hints its `tools/list` carries: `ttlMs` from `$WARDEN_TEST_LIST_TTL_MS` and
/// `cacheScope` from `$WARDEN_TEST_LIST_SCOPE` (by default 0 and `private`: not reusable).
fn list_hints() -> (u64, String) {
    let ttl = std::env::var("WARDEN_TEST_LIST_TTL_MS")
        .ok()
        .and_then(|ttl| ttl.parse().ok())
        .unwrap_or(0);
    let scope = std::env::var("WARDEN_TEST_LIST_SCOPE").unwrap_or_else(|_| "private".into());
    (ttl, scope)
}

fn error(id: &Value, code: i64, message: &str, data: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message, "data": data}})
}

/// The status and JSON body for one POST (`None`: no body, for a notification).
pub fn answer(message: &Value, headers: &HeaderMap, first: bool) -> (StatusCode, Option<Value>) {
    let method = message["method"].as_str().unwrap_or("-");
    let params = &message["params"];
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let version = header(headers, "mcp-protocol-version");
    let mcp_method = header(headers, "mcp-method");
    let mcp_name = header(headers, "mcp-name");
    let region = header(headers, "mcp-param-region");
    eprintln!(
        "POST {method} version={} mcp-method={} mcp-name={} mcp-param-region={}",
        version.as_deref().unwrap_or("-"),
        mcp_method.as_deref().unwrap_or("-"),
        mcp_name.as_deref().unwrap_or("-"),
        region.as_deref().unwrap_or("-"),
    );
    if method == "tools/call" {
        // What the call says of the client behind it, for the tests to check.
        let meta = &params["_meta"];
        eprintln!(
            "CALL meta log-level={} capabilities={}",
            meta["io.modelcontextprotocol/logLevel"]
                .as_str()
                .unwrap_or("-"),
            meta["io.modelcontextprotocol/clientCapabilities"],
        );
    }
    if message.get("id").is_none() {
        return (StatusCode::ACCEPTED, None);
    }
    let meta_version = params["_meta"]["io.modelcontextprotocol/protocolVersion"].as_str();
    if first {
        let data = json!({"supported": ["2026-07-28"], "requested": meta_version});
        return (
            StatusCode::BAD_REQUEST,
            Some(error(&id, -32022, "Unsupported protocol version", data)),
        );
    }
    let mismatch = |what: &str| {
        (
            StatusCode::BAD_REQUEST,
            Some(error(
                &id,
                -32020,
                &format!("{what} does not match the body"),
                Value::Null,
            )),
        )
    };
    if meta_version != Some("2026-07-28") || version.as_deref() != meta_version {
        return mismatch("MCP-Protocol-Version");
    }
    if mcp_method.as_deref() != Some(method) {
        return mismatch("Mcp-Method");
    }
    let result = match method {
        "server/discover" => json!({
            "resultType": "complete", "ttlMs": 0, "cacheScope": "private",
            "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "warden-http-testserver-modern", "version": "0"}},
        }),
        "tools/list" => {
            let (ttl, scope) = list_hints();
            json!({"resultType": "complete", "ttlMs": ttl, "cacheScope": scope, "tools": [
                {"name": "echo", "description": "Echoes its text and region.", "inputSchema": {
                    "type": "object", "properties": {
                        "text": {"type": "string"},
                        "region": {"type": "string", "x-mcp-header": "Region"},
                    }}},
                {"name": "bad", "description": "Marks a number as a header.", "inputSchema": {
                    "type": "object", "properties": {"score": {"type": "number", "x-mcp-header": "Score"}}}},
                {"name": "ask", "description": "Asks for a confirmation first.", "inputSchema": {
                    "type": "object", "properties": {}}},
            ]})
        }
        "tools/call" => {
            let name = params["name"].as_str();
            if mcp_name.as_deref().map(decode).as_deref() != name {
                return mismatch("Mcp-Name");
            }
            if name == Some("ask") {
                // Asks first; answers only with an answer and its own state back.
                let answer = params.pointer("/inputResponses/confirm/action");
                let result = match (answer, params["requestState"].as_str()) {
                    (Some(action), Some("remote-state-1")) => json!({"resultType": "complete",
                        "content": [{"type": "text", "text": format!("remote state-ok: {action}")}]}),
                    _ => json!({"resultType": "input_required", "requestState": "remote-state-1",
                        "inputRequests": {"confirm": {"method": "elicitation/create", "params": {
                            "message": "Go ahead?", "requestedSchema": {"type": "object",
                            "properties": {"ok": {"type": "boolean"}}}}}}}),
                };
                return (
                    StatusCode::OK,
                    Some(json!({"jsonrpc": "2.0", "id": id, "result": result})),
                );
            }
            let body_region = params["arguments"]["region"].as_str();
            if region.as_deref().map(decode).as_deref() != body_region {
                return mismatch("Mcp-Param-Region");
            }
            json!({"resultType": "complete", "content": [{"type": "text", "text": format!(
                "echo: {} from {}", params["arguments"]["text"].as_str().unwrap_or(""), body_region.unwrap_or("nowhere"))}]})
        }
        _ => {
            return (
                StatusCode::NOT_FOUND,
                Some(error(&id, -32601, "Method not found", Value::Null)),
            );
        }
    };
    (
        StatusCode::OK,
        Some(json!({"jsonrpc": "2.0", "id": id, "result": result})),
    )
}
