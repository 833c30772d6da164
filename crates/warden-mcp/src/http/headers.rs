//! The 2026-07-28 request headers that mirror the body: `Mcp-Method`, `Mcp-Name` and
//! `Mcp-Param-{Name}` (from a tool's `x-mcp-header` schema annotations), their value
//! encoding, and the rules an annotation must follow for a tool to be usable over HTTP.
//!
//! The body is the source of truth; these headers only let gateways route without parsing
//! it, so they are always computed from the body that is sent, never set separately.

use base64::Engine as _;
use serde_json::{Map, Value};
use warden_net::reqwest::header::HeaderMap;

use crate::jsonrpc::{HEADER_MISMATCH, META_VERSION, RpcError};

/// Prefix and suffix of a header value carried as base64.
const SENTINEL_START: &str = "=?base64?";
const SENTINEL_END: &str = "?=";
/// Largest integer a header may carry (JSON's safe-integer range).
const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// Encodes a string for a header: as is when it is plain printable ASCII without leading
/// or trailing whitespace, otherwise as `=?base64?…?=` of its UTF-8 bytes.
pub fn encode_text(value: &str) -> String {
    let plain = value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && value.trim() == value
        && !(value.starts_with(SENTINEL_START) && value.ends_with(SENTINEL_END));
    if plain {
        value.to_owned()
    } else {
        let encoded = base64::engine::general_purpose::STANDARD.encode(value.as_bytes());
        format!("{SENTINEL_START}{encoded}{SENTINEL_END}")
    }
}

/// Encodes one argument value for an `Mcp-Param-*` header; `None` for `null` or a value of
/// a type headers cannot carry (the header is then omitted).
pub fn encode_param(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(encode_text(text)),
        Value::Bool(flag) => Some(flag.to_string()),
        Value::Number(number) => integer(number).map(|n| n.to_string()),
        _ => None,
    }
}

/// The integer a JSON number stands for: JSON Schema's `integer` also admits `2.0`, which
/// must be sent as `2` (the header carries integers as decimals).
fn integer(number: &serde_json::Number) -> Option<i64> {
    number.as_i64().or_else(|| {
        let float = number.as_f64()?;
        let whole = float.fract() == 0.0 && float.abs() <= MAX_SAFE_INTEGER as f64;
        whole.then_some(float as i64)
    })
}

/// One `x-mcp-header` annotation of a tool: the argument's path from the root of
/// `arguments`, and the header name after `Mcp-Param-`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamHeader {
    /// Property names from the root of `arguments` down to the value.
    pub path: Vec<String>,
    /// The name given in the annotation.
    pub name: String,
}

/// Reads a tool's `x-mcp-header` annotations, or says why the tool breaks the rules (and
/// must then be left out of the tool list on HTTP).
pub fn param_headers(input_schema: &Value) -> Result<Vec<ParamHeader>, String> {
    let mut found = Vec::new();
    collect(input_schema, &mut Vec::new(), &mut found)?;
    let total = count_annotations(input_schema);
    if total != found.len() {
        return Err(
            "an x-mcp-header annotation is not on a property reachable from the root \
                    through `properties` alone (it sits under items, a combinator, a \
                    condition or a $ref)"
                .into(),
        );
    }
    let mut seen = std::collections::BTreeSet::new();
    for header in &found {
        if !seen.insert(header.name.to_ascii_lowercase()) {
            return Err(format!(
                "x-mcp-header {:?} is used twice (names are case-insensitive)",
                header.name
            ));
        }
    }
    Ok(found)
}

fn collect(
    schema: &Value,
    path: &mut Vec<String>,
    found: &mut Vec<ParamHeader>,
) -> Result<(), String> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Ok(());
    };
    for (key, property) in properties {
        path.push(key.clone());
        if let Some(annotation) = property.get("x-mcp-header") {
            let name = annotation
                .as_str()
                .ok_or_else(|| format!("x-mcp-header of {key:?} is not a string"))?;
            check_name(name)?;
            let kind = property.get("type").and_then(Value::as_str);
            if !matches!(kind, Some("string" | "integer" | "boolean")) {
                return Err(format!(
                    "x-mcp-header {name:?} is on {key:?}, which is not a string, integer or \
                     boolean property"
                ));
            }
            found.push(ParamHeader {
                path: path.clone(),
                name: name.to_owned(),
            });
        }
        collect(property, path, found)?;
        path.pop();
    }
    Ok(())
}

/// Every `x-mcp-header` key anywhere in the schema (property names excluded).
fn count_annotations(schema: &Value) -> usize {
    match schema {
        Value::Object(map) => map
            .iter()
            .map(|(key, value)| {
                let own = usize::from(key == "x-mcp-header");
                let below = if key == "properties" {
                    value
                        .as_object()
                        .map_or(0, |props| props.values().map(count_annotations).sum())
                } else {
                    count_annotations(value)
                };
                own + below
            })
            .sum(),
        Value::Array(items) => items.iter().map(count_annotations).sum(),
        _ => 0,
    }
}

/// An RFC 9110 token: visible ASCII without delimiters.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("an x-mcp-header name is empty".into());
    }
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if !name.bytes().all(token) {
        return Err(format!(
            "x-mcp-header {name:?} is not a valid header name (only letters, digits and \
             !#$%&'*+-.^_`|~ are allowed)"
        ));
    }
    Ok(())
}

/// The `Mcp-Param-*` headers of one `tools/call`, from its arguments.
pub fn param_values(
    headers: &[ParamHeader],
    arguments: Option<&Map<String, Value>>,
) -> Vec<(String, String)> {
    let Some(arguments) = arguments else {
        return Vec::new();
    };
    headers
        .iter()
        .filter_map(|header| {
            let mut value = arguments.get(header.path.first()?)?;
            for key in &header.path[1..] {
                value = value.get(key)?;
            }
            if let Value::Number(number) = value
                && !integer(number)
                    .is_some_and(|n| (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&n))
            {
                return None;
            }
            Some((format!("Mcp-Param-{}", header.name), encode_param(value)?))
        })
        .collect()
}

/// `Mcp-Name`'s source for `method`: `params.name` or `params.uri`.
pub fn name_of(method: &str, params: &Map<String, Value>) -> Option<String> {
    let key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        _ => return None,
    };
    params.get(key).and_then(Value::as_str).map(encode_text)
}

// ---- The serving side: what a client's headers must agree with ----

fn header_str<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

/// Decodes a header value in the `=?base64?…?=` form; other values as they are.
pub fn decode_header_value(value: &str) -> Option<String> {
    match value
        .strip_prefix(SENTINEL_START)
        .and_then(|rest| rest.strip_suffix(SENTINEL_END))
    {
        Some(inner) => base64::engine::general_purpose::STANDARD
            .decode(inner)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
        None => Some(value.to_owned()),
    }
}

/// Checks that the headers agree with the body (-32020 otherwise).
pub fn check_modern_headers(
    headers: &HeaderMap,
    method: &str,
    params: &Value,
) -> Result<(), RpcError> {
    let mismatch = |what: &str| RpcError::new(HEADER_MISMATCH, format!("Header mismatch: {what}"));
    let body_version = params
        .get("_meta")
        .and_then(|meta| meta.get(META_VERSION))
        .and_then(Value::as_str);
    match header_str(headers, "mcp-protocol-version") {
        None => return Err(mismatch("MCP-Protocol-Version is missing")),
        Some(version) if Some(version) != body_version => {
            return Err(mismatch(
                "MCP-Protocol-Version does not equal the body's protocol version",
            ));
        }
        Some(_) => {}
    }
    match header_str(headers, "mcp-method") {
        None => return Err(mismatch("Mcp-Method is missing")),
        Some(header) if header != method => {
            return Err(mismatch("Mcp-Method does not equal the body's method"));
        }
        Some(_) => {}
    }
    let named = match method {
        "tools/call" | "prompts/get" => params.get("name").and_then(Value::as_str),
        "resources/read" => params.get("uri").and_then(Value::as_str),
        _ => return Ok(()),
    };
    match header_str(headers, "mcp-name").map(decode_header_value) {
        None => Err(mismatch("Mcp-Name is missing")),
        Some(decoded) if decoded.as_deref() != named => {
            Err(mismatch("Mcp-Name does not equal the body's name"))
        }
        Some(_) => Ok(()),
    }
}

/// Checks `Mcp-Param-*` headers against the arguments marked `x-mcp-header` in `schema`.
pub fn check_param_headers(
    headers: &HeaderMap,
    schema: &Value,
    arguments: &Value,
) -> Result<(), RpcError> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Ok(());
    };
    for (property, definition) in properties {
        let Some(name) = definition.get("x-mcp-header").and_then(Value::as_str) else {
            continue;
        };
        let header_name = format!("mcp-param-{}", name.to_ascii_lowercase());
        let value = arguments.get(property).filter(|value| !value.is_null());
        let header = header_str(headers, &header_name).map(decode_header_value);
        let agrees = match (&header, value) {
            (None, None) => true,
            // Integers are compared numerically: `2.0` in the body is the header's `2`.
            (Some(Some(got)), Some(Value::Number(number))) => got
                .parse::<i64>()
                .is_ok_and(|n| number.as_i64() == Some(n) || number.as_f64() == Some(n as f64)),
            (Some(Some(got)), Some(Value::String(text))) => got == text,
            (Some(Some(got)), Some(Value::Bool(flag))) => got.parse::<bool>() == Ok(*flag),
            (Some(Some(got)), Some(other)) => {
                serde_json::to_string(other).ok().as_deref() == Some(got.as_str())
            }
            _ => false,
        };
        if !agrees {
            return Err(RpcError::new(
                HEADER_MISMATCH,
                format!(
                    "Header mismatch: Mcp-Param-{name} does not agree with the argument `{property}`"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_plain_or_base64() {
        assert_eq!(encode_text("us-west1"), "us-west1");
        assert_eq!(encode_text(""), "");
        assert_eq!(encode_text(" padded"), "=?base64?IHBhZGRlZA==?=");
        assert_eq!(encode_text("日本"), "=?base64?5pel5pys?=");
        assert_eq!(encode_text("a\nb"), "=?base64?YQpi?=");
        assert_eq!(encode_text("=?base64?x?="), "=?base64?PT9iYXNlNjQ/eD89?=");
        assert_eq!(encode_param(&json!(42)), Some("42".into()));
        assert_eq!(encode_param(&json!(true)), Some("true".into()));
        assert_eq!(encode_param(&json!(null)), None);
        assert_eq!(encode_param(&json!(1.5)), None);
    }

    /// Fuzzing finding (fuzz target `mcp_headers`, corpus `finding-integral-float`): an
    /// `integer` argument written `2.0` (valid JSON Schema) got no `Mcp-Param-*` header,
    /// so a server checking headers against the body refused an honest call.
    #[test]
    fn an_integral_float_is_sent_as_an_integer() {
        assert_eq!(encode_param(&json!(2.0)), Some("2".into()));
        assert_eq!(encode_param(&json!(-7.0)), Some("-7".into()));
        assert_eq!(encode_param(&json!(2.5)), None, "not an integer");
        assert_eq!(encode_param(&json!(1e300)), None, "outside the safe range");
        let schema = json!({"properties": {"n": {"type": "integer", "x-mcp-header": "N"}}});
        let headers = param_headers(&schema).unwrap();
        let args = json!({"n": 3.0});
        assert_eq!(
            param_values(&headers, args.as_object()),
            vec![("Mcp-Param-N".to_owned(), "3".to_owned())]
        );
        let huge = json!({"n": 9007199254740993_i64});
        assert_eq!(param_values(&headers, huge.as_object()), vec![]);
    }

    #[test]
    fn annotations_are_read_and_mirrored() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {"type": "object", "properties": {"n": {"type": "integer", "x-mcp-header": "N"}}},
            "plain": {"type": "string"}
        }});
        let headers = param_headers(&schema).unwrap();
        assert_eq!(headers.len(), 2);
        let args = json!({"region": "eu", "opts": {"n": 3}, "plain": "x"});
        let mut values = param_values(&headers, args.as_object());
        values.sort();
        assert_eq!(
            values,
            vec![
                ("Mcp-Param-N".to_owned(), "3".to_owned()),
                ("Mcp-Param-Region".to_owned(), "eu".to_owned())
            ]
        );
        let null = json!({"region": null});
        assert!(param_values(&headers, null.as_object()).is_empty());
    }

    #[test]
    fn broken_annotations_are_refused() {
        for schema in [
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "has space"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "a:b"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": ""}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "Ünï"}}}),
            json!({"properties": {"a": {"type": "number", "x-mcp-header": "A"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "A"},
                                  "b": {"type": "string", "x-mcp-header": "a"}}}),
            json!({"properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}}),
            json!({"properties": {"a": {"anyOf": [{"type": "string", "x-mcp-header": "A"}]}}}),
        ] {
            assert!(param_headers(&schema).is_err(), "{schema}");
        }
        let named = json!({"properties": {"x-mcp-header": {"type": "string"}}});
        assert_eq!(param_headers(&named).unwrap(), vec![]);
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(
                warden_net::reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                warden_net::reqwest::header::HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn headers_are_compared_with_the_body() {
        let params = json!({"name": "a b", "_meta": {META_VERSION: "2026-07-28"}});
        let good = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?YSBi?="),
        ]);
        assert_eq!(check_modern_headers(&good, "tools/call", &params), Ok(()));
        for bad in [
            headers(&[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/list"),
                ("mcp-name", "a b"),
            ]),
            headers(&[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
                ("mcp-name", "other"),
            ]),
            headers(&[
                ("mcp-protocol-version", "2025-11-25"),
                ("mcp-method", "tools/call"),
                ("mcp-name", "a b"),
            ]),
            headers(&[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
            ]),
        ] {
            let error = check_modern_headers(&bad, "tools/call", &params).unwrap_err();
            assert_eq!(error.code, HEADER_MISMATCH, "{bad:?}");
        }
    }

    #[test]
    fn param_headers_follow_x_mcp_header_marks() {
        let schema =
            json!({"properties": {"region": {"type": "string", "x-mcp-header": "Region"}}});
        let args = json!({"region": "eu"});
        assert_eq!(
            check_param_headers(&headers(&[("mcp-param-region", "eu")]), &schema, &args),
            Ok(())
        );
        assert!(
            check_param_headers(&headers(&[("mcp-param-region", "us")]), &schema, &args).is_err()
        );
        assert!(check_param_headers(&headers(&[]), &schema, &args).is_err());
        assert_eq!(
            check_param_headers(&headers(&[]), &schema, &json!({})),
            Ok(())
        );
    }

    /// Fuzzing finding (fuzz target `mcp_headers`): `2.0` in the body against the header
    /// `2` was refused, though the spec compares integers numerically.
    #[test]
    fn integer_params_are_compared_numerically() {
        let schema = json!({"properties": {"n": {"type": "integer", "x-mcp-header": "N"}}});
        let n2 = headers(&[("mcp-param-n", "2")]);
        assert_eq!(check_param_headers(&n2, &schema, &json!({"n": 2})), Ok(()));
        assert_eq!(
            check_param_headers(&n2, &schema, &json!({"n": 2.0})),
            Ok(())
        );
        assert!(check_param_headers(&n2, &schema, &json!({"n": 3})).is_err());
        assert!(check_param_headers(&n2, &schema, &json!({"n": 2.5})).is_err());
        let text = headers(&[("mcp-param-n", "two")]);
        assert!(check_param_headers(&text, &schema, &json!({"n": 2})).is_err());
    }
}
