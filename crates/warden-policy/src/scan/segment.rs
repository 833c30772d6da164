//! The pieces of text a server shows the model, each with where it sits in the definition.
//!
//! A tool's definition is more than its description: the model also reads its title, its
//! annotations and every string of its input and output schemas (parameter descriptions,
//! titles, defaults, enum values, examples, at any depth). [`segments`] walks all of them,
//! in a fixed order and within fixed limits, and names each by a JSON-pointer-like path
//! (`inputSchema.properties.mode.enum[1]`) so a verdict can say where it looked. Server
//! instructions and prompt or resource descriptions are scanned as single segments of
//! their own kind.

use serde_json::Value;

use super::ToolText;

/// Most segments taken from one definition.
pub const MAX_SEGMENTS: usize = 2048;

/// What a piece of text is, as far as the reader is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The tool's name (an identifier, not prose).
    Name,
    /// The tool's title.
    Title,
    /// The tool's description.
    Description,
    /// A string of the annotations (`title`, or anything a server adds).
    Annotation,
    /// A property name of a schema.
    PropertyName,
    /// A `description` in a schema.
    ParamDescription,
    /// A `title` in a schema.
    SchemaTitle,
    /// A `default` or `const` in a schema.
    Default,
    /// An `enum` value.
    Enum,
    /// An `examples` or `example` value.
    Example,
    /// Any other string of a schema (`format`, `pattern`, `$comment`, unknown keys).
    SchemaOther,
    /// A server's `instructions`.
    Instructions,
    /// A prompt's description.
    Prompt,
    /// A resource's description.
    Resource,
    /// Text decoded from an encoded run (base64, hex, tag characters) of another segment.
    Decoded,
}

impl Kind {
    /// A short stable name, used in features and explanations.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Name => "name",
            Kind::Title => "title",
            Kind::Description => "description",
            Kind::Annotation => "annotation",
            Kind::PropertyName => "property",
            Kind::ParamDescription => "param-description",
            Kind::SchemaTitle => "schema-title",
            Kind::Default => "default",
            Kind::Enum => "enum",
            Kind::Example => "example",
            Kind::SchemaOther => "schema-other",
            Kind::Instructions => "instructions",
            Kind::Prompt => "prompt",
            Kind::Resource => "resource",
            Kind::Decoded => "decoded",
        }
    }

    /// Whether the language model reads this kind (identifiers and schema plumbing are
    /// left to the exact rules).
    pub fn is_prose(self) -> bool {
        !matches!(self, Kind::Name | Kind::PropertyName)
    }
}

/// One piece of text and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment<'a> {
    /// Where: `description`, `inputSchema.properties.x.default`, ...
    pub path: String,
    /// What kind of text it is.
    pub kind: Kind,
    /// The text.
    pub text: &'a str,
}

/// Every string of `tool` that a model reads, in order: name, title, description,
/// annotations, input schema, output schema. At most [`MAX_SEGMENTS`] segments and
/// `max_nodes` schema nodes; the second value is `true` when something was left out.
pub fn segments<'a>(tool: &ToolText<'a>, max_nodes: usize) -> (Vec<Segment<'a>>, bool) {
    let mut out = Vec::new();
    let mut truncated = false;
    out.push(Segment {
        path: "name".into(),
        kind: Kind::Name,
        text: tool.name,
    });
    if let Some(title) = tool.title {
        out.push(Segment {
            path: "title".into(),
            kind: Kind::Title,
            text: title,
        });
    }
    if let Some(description) = tool.description {
        out.push(Segment {
            path: "description".into(),
            kind: Kind::Description,
            text: description,
        });
    }
    let mut nodes = 0usize;
    if let Some(annotations) = tool.annotations {
        walk(
            annotations,
            "annotations".into(),
            Kind::Annotation,
            &mut out,
            &mut nodes,
            max_nodes,
            &mut truncated,
        );
    }
    for (root, schema) in [
        ("inputSchema", tool.input_schema),
        ("outputSchema", tool.output_schema),
    ] {
        if let Some(schema) = schema {
            walk(
                schema,
                root.into(),
                Kind::SchemaOther,
                &mut out,
                &mut nodes,
                max_nodes,
                &mut truncated,
            );
        }
    }
    if out.len() > MAX_SEGMENTS {
        out.truncate(MAX_SEGMENTS);
        truncated = true;
    }
    (out, truncated)
}

/// The kind of the strings under `key` of a schema object.
fn kind_of_key(key: &str, inherited: Kind) -> Kind {
    if inherited == Kind::Annotation {
        return Kind::Annotation;
    }
    match key {
        "description" => Kind::ParamDescription,
        "title" => Kind::SchemaTitle,
        "default" | "const" => Kind::Default,
        "enum" => Kind::Enum,
        "examples" | "example" => Kind::Example,
        _ => inherited,
    }
}

/// Depth-first over `value`, pushing its strings; object keys under `properties` are
/// property names, and every other key decides the kind of what is under it.
fn walk<'a>(
    value: &'a Value,
    path: String,
    kind: Kind,
    out: &mut Vec<Segment<'a>>,
    nodes: &mut usize,
    max_nodes: usize,
    truncated: &mut bool,
) {
    // An explicit stack keeps a deep schema from exhausting the thread's stack.
    let mut stack: Vec<(&'a Value, String, Kind, bool)> = vec![(value, path, kind, false)];
    while let Some((value, path, kind, is_properties)) = stack.pop() {
        *nodes += 1;
        if *nodes > max_nodes || out.len() > MAX_SEGMENTS {
            *truncated = true;
            return;
        }
        match value {
            Value::String(text) => out.push(Segment { path, kind, text }),
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate().rev() {
                    stack.push((item, format!("{path}[{i}]"), kind, false));
                }
            }
            Value::Object(map) => {
                let mut children = Vec::with_capacity(map.len());
                for (key, item) in map {
                    let child = format!("{path}.{key}");
                    if is_properties {
                        out.push(Segment {
                            path: child.clone(),
                            kind: Kind::PropertyName,
                            text: key,
                        });
                        children.push((item, child, Kind::SchemaOther, false));
                    } else {
                        // `required` lists property names: identifiers, not prose.
                        let child_kind = if key == "required" && kind != Kind::Annotation {
                            Kind::PropertyName
                        } else {
                            kind_of_key(key, kind)
                        };
                        let props = kind != Kind::Annotation
                            && matches!(
                                key.as_str(),
                                "properties" | "patternProperties" | "$defs" | "definitions"
                            );
                        children.push((item, child, child_kind, props));
                    }
                }
                stack.extend(children.into_iter().rev());
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn every_string_is_found_with_its_path_and_kind() {
        let input = json!({
            "type": "object",
            "properties": {
                "mode": {"type": "string", "title": "Mode", "enum": ["a", "b"], "default": "a",
                         "description": "How.", "examples": ["a"]},
                "nested": {"type": "object", "properties": {"x": {"description": "Deep."}}}
            },
            "required": ["mode"]
        });
        let annotations = json!({"title": "Shown title"});
        let output = json!({"type": "object", "properties": {"r": {"description": "Out."}}});
        let tool = ToolText {
            name: "t",
            title: Some("T"),
            description: Some("D."),
            input_schema: Some(&input),
            output_schema: Some(&output),
            annotations: Some(&annotations),
            ..ToolText::default()
        };
        let (found, truncated) = segments(&tool, 4096);
        assert!(!truncated);
        let has = |path: &str, kind: Kind, text: &str| {
            found
                .iter()
                .any(|s| s.path == path && s.kind == kind && s.text == text)
        };
        assert!(has("name", Kind::Name, "t"));
        assert!(has("title", Kind::Title, "T"));
        assert!(has("description", Kind::Description, "D."));
        assert!(has("annotations.title", Kind::Annotation, "Shown title"));
        assert!(has(
            "inputSchema.properties.mode",
            Kind::PropertyName,
            "mode"
        ));
        assert!(has(
            "inputSchema.properties.mode.title",
            Kind::SchemaTitle,
            "Mode"
        ));
        assert!(has("inputSchema.properties.mode.enum[1]", Kind::Enum, "b"));
        assert!(has(
            "inputSchema.properties.mode.default",
            Kind::Default,
            "a"
        ));
        assert!(has(
            "inputSchema.properties.mode.examples[0]",
            Kind::Example,
            "a"
        ));
        assert!(has(
            "inputSchema.properties.nested.properties.x.description",
            Kind::ParamDescription,
            "Deep."
        ));
        assert!(has("inputSchema.required[0]", Kind::PropertyName, "mode"));
        assert!(has(
            "outputSchema.properties.r.description",
            Kind::ParamDescription,
            "Out."
        ));
        assert!(has("inputSchema.type", Kind::SchemaOther, "object"));
    }

    #[test]
    fn the_walk_is_bounded() {
        let mut deep = json!("leaf");
        for _ in 0..500 {
            deep = json!({ "items": deep });
        }
        let tool = ToolText {
            name: "t",
            input_schema: Some(&deep),
            ..ToolText::default()
        };
        let (found, truncated) = segments(&tool, 100);
        assert!(truncated);
        assert!(found.len() < 10);
    }
}
