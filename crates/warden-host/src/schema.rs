//! Tool input schemas: compiled once when the catalogue is built, checked before every call.
//!
//! A schema is text from an untrusted server, so compiling one is bounded: its serialized
//! size and nesting depth are capped, and references outside the schema (`http:`, `file:`
//! and every other scheme) are never fetched.

use jsonschema::{Retrieve, Uri, Validator};
use serde_json::Value;

/// Bounds on a tool's input schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaLimits {
    /// Largest schema, serialized, in bytes.
    pub max_bytes: usize,
    /// Deepest nesting of objects and arrays.
    pub max_depth: usize,
}

impl Default for SchemaLimits {
    fn default() -> Self {
        Self {
            max_bytes: 256 * 1024,
            max_depth: 32,
        }
    }
}

/// Why a schema was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// Over the size cap.
    #[error("input schema is {size} bytes, over the {limit} byte limit")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The cap.
        limit: usize,
    },
    /// Nested too deeply.
    #[error("input schema nests deeper than {limit} levels")]
    TooDeep {
        /// The cap.
        limit: usize,
    },
    /// Not a JSON object.
    #[error("input schema is not a JSON object")]
    NotAnObject,
    /// The validator rejected it (bad keyword value, unresolvable reference, ...).
    #[error("input schema is invalid: {0}")]
    Invalid(String),
}

/// One way the arguments break the schema.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Violation {
    /// JSON pointer to the offending value in the arguments (`""` is the whole object).
    pub pointer: String,
    /// The schema keyword that failed (`required`, `type`, `minimum`, ...).
    pub rule: String,
    /// A sentence saying what is wrong.
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.pointer.is_empty() {
            "/"
        } else {
            &self.pointer
        };
        write!(f, "at {at}: {} (rule `{}`)", self.message, self.rule)
    }
}

/// A compiled input schema.
#[derive(Debug)]
pub struct CompiledSchema {
    validator: Validator,
}

/// Refuses every external reference: schemas are resolved from their own text only.
struct NoFetch;

impl Retrieve for NoFetch {
    fn retrieve(
        &self,
        uri: &Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!("external schema reference `{uri}` is not fetched").into())
    }
}

/// Most violations reported for one call.
const MAX_VIOLATIONS: usize = 16;

impl CompiledSchema {
    /// Compiles `schema` within `limits`.
    pub fn compile(schema: &Value, limits: SchemaLimits) -> Result<Self, SchemaError> {
        if !schema.is_object() {
            return Err(SchemaError::NotAnObject);
        }
        if depth_exceeds(schema, limits.max_depth) {
            return Err(SchemaError::TooDeep {
                limit: limits.max_depth,
            });
        }
        let size = serde_json::to_vec(schema)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        if size > limits.max_bytes {
            return Err(SchemaError::TooLarge {
                size,
                limit: limits.max_bytes,
            });
        }
        let validator = jsonschema::options()
            .with_retriever(NoFetch)
            .build(schema)
            .map_err(|error| SchemaError::Invalid(error.to_string()))?;
        Ok(Self { validator })
    }

    /// Checks `arguments`; on failure returns every violation found (capped).
    pub fn check(&self, arguments: &Value) -> Result<(), Vec<Violation>> {
        let violations: Vec<Violation> = self
            .validator
            .iter_errors(arguments)
            .take(MAX_VIOLATIONS)
            .map(|error| Violation {
                pointer: error.instance_path().to_string(),
                rule: error.kind().keyword().to_owned(),
                message: error.to_string(),
            })
            .collect();
        if violations.is_empty() {
            Ok(())
        } else {
            Err(violations)
        }
    }
}

/// Whether `value` nests deeper than `limit`, checked without recursion.
fn depth_exceeds(value: &Value, limit: usize) -> bool {
    let mut stack = vec![(value, 1usize)];
    while let Some((value, depth)) = stack.pop() {
        if depth > limit {
            return true;
        }
        match value {
            Value::Object(map) => stack.extend(map.values().map(|v| (v, depth + 1))),
            Value::Array(items) => stack.extend(items.iter().map(|v| (v, depth + 1))),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn compile(schema: Value) -> Result<CompiledSchema, SchemaError> {
        CompiledSchema::compile(&schema, SchemaLimits::default())
    }

    #[test]
    fn violations_name_the_pointer_and_the_rule() {
        let schema = compile(json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"]
        }))
        .unwrap();
        assert!(schema.check(&json!({"a": 1, "b": 2})).is_ok());
        let violations = schema.check(&json!({"a": "one"})).unwrap_err();
        let rules: Vec<(&str, &str)> = violations
            .iter()
            .map(|v| (v.pointer.as_str(), v.rule.as_str()))
            .collect();
        assert!(rules.contains(&("/a", "type")), "{violations:?}");
        assert!(rules.contains(&("", "required")), "{violations:?}");
        let shown = violations
            .iter()
            .find(|v| v.rule == "type")
            .unwrap()
            .to_string();
        assert!(shown.starts_with("at /a: "), "{shown}");
    }

    #[test]
    fn network_references_are_never_fetched() {
        let error = compile(json!({
            "type": "object",
            "properties": {"a": {"$ref": "http://127.0.0.1:9/schema.json"}}
        }))
        .unwrap_err();
        assert!(
            matches!(error, SchemaError::Invalid(ref text) if text.contains("not fetched")),
            "{error}"
        );
    }

    #[test]
    fn size_and_depth_are_bounded() {
        let mut deep = json!({"type": "object"});
        for _ in 0..40 {
            deep = json!({"type": "object", "properties": {"x": deep}});
        }
        assert_eq!(
            compile(deep).unwrap_err(),
            SchemaError::TooDeep { limit: 32 }
        );
        let big = json!({"type": "object", "description": "x".repeat(300 * 1024)});
        assert!(matches!(
            compile(big).unwrap_err(),
            SchemaError::TooLarge { .. }
        ));
        assert_eq!(compile(json!(true)).unwrap_err(), SchemaError::NotAnObject);
    }
}
