//! A tool definition as the index sees it, and the capped text of its fields.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::index::cut_chars;

/// The most characters of one definition's text that are indexed, all fields together.
///
/// The fields are read in the order tool name, qualified name, title, description,
/// parameter names, parameter descriptions, server instructions, and the text stops where the budget runs out,
/// cut on a character boundary. A
/// server cannot buy weight with a giant description: past this point nothing more of its
/// definition is read, and the length it did fill counts against it in BM25's length
/// normalisation.
pub const DEFINITION_CHAR_CAP: usize = 4096;

/// How deep the walk into `input_schema` goes: `properties` of `properties` (and array
/// `items`) below this depth are not read.
pub const SCHEMA_DEPTH_CAP: usize = 4;

/// The most schema nodes (schemas and properties) visited in one definition, whatever
/// their text.
pub const SCHEMA_NODE_CAP: usize = 512;

/// One tool to index: its names, its human text and its input schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDoc {
    /// The name the model calls, e.g. `filesystem__read_file`.
    pub qualified: String,
    /// The server's name in the configuration.
    pub server: String,
    /// The tool's own name on its server.
    pub tool: String,
    /// The tool's human-readable title, if any.
    pub title: Option<String>,
    /// The tool's description, if any.
    pub description: Option<String>,
    /// The tool's JSON Schema for its arguments.
    pub input_schema: Value,
    /// Its server's instructions (the `instructions` of the server's initialize or
    /// discover answer), if any. They rank with a low weight ([`crate::FIELD_WEIGHTS`]),
    /// read last, so only what is left of [`DEFINITION_CHAR_CAP`] after the tool's own text
    /// and at most [`INSTRUCTIONS_CHAR_CAP`] characters of them count.
    #[serde(default)]
    pub instructions: Option<String>,
}

/// The most characters of a server's instructions that take part in ranking a tool.
pub const INSTRUCTIONS_CHAR_CAP: usize = 1024;

/// The fields of a definition, each with its own weight and length normalisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Field {
    /// The raw tool name.
    Name,
    /// The qualified name (server and tool) split into words.
    Qualified,
    /// The title.
    Title,
    /// The description.
    Description,
    /// Parameter names, nested ones included.
    ParamName,
    /// Parameter descriptions, nested ones included.
    ParamDescription,
    /// The server's instructions.
    Instructions,
}

/// The number of fields.
pub(crate) const FIELDS: usize = 7;

impl Field {
    /// Every field, in the order its text is read against the character budget.
    pub(crate) const ALL: [Field; FIELDS] = [
        Field::Name,
        Field::Qualified,
        Field::Title,
        Field::Description,
        Field::ParamName,
        Field::ParamDescription,
        Field::Instructions,
    ];

    /// The field's position in per-field arrays.
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// A definition's text per field, after the character cap.
#[derive(Debug, Default)]
pub(crate) struct FieldTexts {
    /// Text pieces per field, indexed by [`Field::index`].
    pub(crate) pieces: [Vec<String>; FIELDS],
}

/// Hands out at most [`DEFINITION_CHAR_CAP`] characters across all of a definition's text.
struct Budget {
    left: usize,
}

impl Budget {
    /// The longest prefix of `text` that fits, cut on a char boundary; `None` when the
    /// budget is spent.
    fn take<'a>(&mut self, text: &'a str) -> Option<&'a str> {
        if self.left == 0 {
            return None;
        }
        let end = text
            .char_indices()
            .nth(self.left)
            .map_or(text.len(), |(i, _)| i);
        let piece = &text[..end];
        self.left -= piece.chars().count();
        Some(piece)
    }
}

impl ToolDoc {
    /// The definition's text per field, read in field order and capped at
    /// [`DEFINITION_CHAR_CAP`] characters in total.
    pub(crate) fn field_texts(&self) -> FieldTexts {
        let mut params = Vec::new();
        let mut nodes = 0;
        walk_schema(&self.input_schema, 0, &mut nodes, &mut params);

        let mut budget = Budget {
            left: DEFINITION_CHAR_CAP,
        };
        let mut out = FieldTexts::default();
        for field in Field::ALL {
            let texts: Vec<&str> = match field {
                Field::Name => vec![self.tool.as_str()],
                Field::Qualified => vec![self.qualified.as_str()],
                Field::Title => self.title.as_deref().into_iter().collect(),
                Field::Description => self.description.as_deref().into_iter().collect(),
                Field::ParamName => params.iter().map(|p| p.name).collect(),
                Field::ParamDescription => params.iter().filter_map(|p| p.description).collect(),
                Field::Instructions => self
                    .instructions
                    .as_deref()
                    .map(|text| cut_chars(text, INSTRUCTIONS_CHAR_CAP))
                    .into_iter()
                    .collect(),
            };
            for text in texts {
                match budget.take(text) {
                    Some(piece) => out.pieces[field.index()].push(piece.to_owned()),
                    None => return out,
                }
            }
        }
        out
    }
}

/// The most characters of one server's text (its name, its tools' names, titles and
/// descriptions, its instructions) that rank the server as a whole.
pub const SERVER_CHAR_CAP: usize = 16_384;

/// The text that ranks a server as a whole: its tools' names (in the name field, read
/// first so every name counts), the server's name, its tools' titles and descriptions (each
/// cut at [`DEFINITION_CHAR_CAP`] characters), and its instructions, within
/// [`SERVER_CHAR_CAP`] characters together. Reading stops where the budget runs out, so a
/// server of many tools costs no more than that.
pub(crate) fn server_field_texts(server: &str, tools: &[&ToolDoc]) -> FieldTexts {
    let mut budget = Budget {
        left: SERVER_CHAR_CAP,
    };
    let mut out = FieldTexts::default();
    let instructions = tools
        .iter()
        .find_map(|doc| doc.instructions.as_deref())
        .map(|text| cut_chars(text, INSTRUCTIONS_CHAR_CAP));
    for field in Field::ALL {
        let texts: Box<dyn Iterator<Item = &str>> = match field {
            Field::Name => Box::new(tools.iter().map(|doc| doc.tool.as_str())),
            Field::Qualified => Box::new(std::iter::once(server)),
            Field::Title => Box::new(tools.iter().filter_map(|doc| doc.title.as_deref())),
            Field::Description => Box::new(
                tools
                    .iter()
                    .filter_map(|doc| doc.description.as_deref())
                    .map(|text| cut_chars(text, DEFINITION_CHAR_CAP)),
            ),
            Field::ParamName | Field::ParamDescription => Box::new(std::iter::empty()),
            Field::Instructions => Box::new(instructions.into_iter()),
        };
        for text in texts {
            match budget.take(text) {
                Some(piece) => out.pieces[field.index()].push(piece.to_owned()),
                None => return out,
            }
        }
    }
    out
}

impl ToolDoc {
    /// The text the semantic model embeds for this tool: its qualified name, title,
    /// description and parameter names, within the same [`DEFINITION_CHAR_CAP`] as the
    /// words index (read in that order, so names always count). A description mostly in
    /// another script than Latin is left out (`mostly_latin`; decision 0052): the model
    /// was trained on English, and its vector of such text is noise that drowns the
    /// tool's name.
    #[cfg(feature = "semantic")]
    pub fn embedding_text(&self) -> String {
        let texts = self.field_texts();
        let mut out = String::new();
        for field in [
            Field::Qualified,
            Field::Title,
            Field::Description,
            Field::ParamName,
        ] {
            for piece in &texts.pieces[field.index()] {
                // The model reads English: a description in another script gives it
                // noise, not meaning (decision 0052); the words index still reads it.
                if field == Field::Description && !mostly_latin(piece) {
                    continue;
                }
                out.push_str(piece);
                out.push('\n');
            }
        }
        out
    }
}

/// A parameter found in the schema: its name and description.
struct Param<'a> {
    name: &'a str,
    description: Option<&'a str>,
}

/// Collects parameters from `properties`, recursing into nested objects and array `items`
/// (and `anyOf` / `oneOf` / `allOf` branches) down to [`SCHEMA_DEPTH_CAP`] levels and at most
/// [`SCHEMA_NODE_CAP`] nodes. Properties are visited in the map's order, which is stable.
fn walk_schema<'a>(schema: &'a Value, depth: usize, nodes: &mut usize, out: &mut Vec<Param<'a>>) {
    if depth >= SCHEMA_DEPTH_CAP || *nodes >= SCHEMA_NODE_CAP {
        return;
    }
    let Some(object) = schema.as_object() else {
        return;
    };
    *nodes += 1;
    if let Some(Value::Object(properties)) = object.get("properties") {
        for (name, property) in properties {
            if *nodes >= SCHEMA_NODE_CAP {
                return;
            }
            *nodes += 1;
            out.push(Param {
                name,
                description: property.get("description").and_then(Value::as_str),
            });
            walk_schema(property, depth + 1, nodes, out);
        }
    }
    match object.get("items") {
        Some(items @ Value::Object(_)) => walk_schema(items, depth + 1, nodes, out),
        Some(Value::Array(items)) => {
            for item in items {
                walk_schema(item, depth + 1, nodes, out);
            }
        }
        _ => {}
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = object.get(key) {
            for branch in branches {
                walk_schema(branch, depth + 1, nodes, out);
            }
        }
    }
}

/// Whether at least half the letters of `text` are Latin (up to Latin Extended-B), the
/// script the search model (trained on English) reads; text with no letters counts as
/// Latin. A description that is not is left out of the tool's vectors (decision 0052).
#[cfg(feature = "semantic")]
pub(crate) fn mostly_latin(text: &str) -> bool {
    let (mut letters, mut latin) = (0usize, 0usize);
    for c in text.chars().filter(|c| c.is_alphabetic()) {
        letters += 1;
        if (c as u32) <= 0x024F {
            latin += 1;
        }
    }
    letters == 0 || latin * 2 >= letters
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(description: &str, schema: Value) -> ToolDoc {
        ToolDoc {
            qualified: "srv__tool_name".into(),
            server: "srv".into(),
            tool: "tool_name".into(),
            title: Some("Title".into()),
            description: Some(description.into()),
            input_schema: schema,
            instructions: None,
        }
    }

    #[test]
    fn schema_walk_reads_nested_properties_and_items() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path"},
                "options": {
                    "type": "object",
                    "properties": {"encoding": {"type": "string", "description": "Text encoding"}}
                },
                "edits": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"old_text": {"type": "string"}}}
                }
            }
        });
        let texts = doc("d", schema).field_texts();
        let names = &texts.pieces[Field::ParamName.index()];
        assert!(names.contains(&"encoding".to_owned()), "{names:?}");
        assert!(names.contains(&"old_text".to_owned()), "{names:?}");
        assert!(names.contains(&"path".to_owned()), "{names:?}");
        let descriptions = &texts.pieces[Field::ParamDescription.index()];
        assert!(descriptions.contains(&"Text encoding".to_owned()));
    }

    #[test]
    fn schema_walk_stops_at_the_depth_cap() {
        let mut schema = json!({"type": "string"});
        for level in (0..10).rev() {
            schema = json!({"type": "object", "properties": {format!("level{level}"): schema}});
        }
        let texts = doc("d", schema).field_texts();
        let names = &texts.pieces[Field::ParamName.index()];
        assert_eq!(names.len(), SCHEMA_DEPTH_CAP, "{names:?}");
        assert_eq!(names[0], "level0");
    }

    #[test]
    fn schema_walk_stops_at_the_node_cap() {
        let properties: serde_json::Map<String, Value> = (0..10_000)
            .map(|i| (format!("p{i:05}"), Value::Bool(true)))
            .collect();
        let texts = doc("d", json!({"properties": properties})).field_texts();
        let names = &texts.pieces[Field::ParamName.index()];
        // The root schema is one node, each property another.
        assert_eq!(names.len(), SCHEMA_NODE_CAP - 1);
    }

    #[cfg(feature = "semantic")]
    #[test]
    fn a_description_in_a_script_the_model_does_not_read_is_left_out_of_its_vector() {
        let chinese = doc(
            "获取 BBC 新闻，提供全球新闻、英国新闻、商业、政治等资讯",
            json!({}),
        );
        let text = chinese.embedding_text();
        assert!(
            text.contains("tool_name") && !text.contains("新闻"),
            "{text}"
        );
        // The words index still reads it.
        let fields = chinese.field_texts();
        assert!(fields.pieces[Field::Description.index()][0].contains("新闻"));
        // Control: Latin descriptions, accents and all, are embedded.
        for description in [
            "Get the BBC news of the day.",
            "Résumé des actualités, période",
        ] {
            let text = doc(description, json!({})).embedding_text();
            assert!(text.contains(description), "{text}");
        }
        assert!(mostly_latin("12345 — !?"));
        assert!(!mostly_latin("Новости дня"));
    }

    #[test]
    fn all_text_together_is_capped_on_a_char_boundary() {
        let long = "é".repeat(DEFINITION_CHAR_CAP * 2);
        let schema = json!({"properties": {"p": {"description": "never read"}}});
        let texts = doc(&long, schema).field_texts();
        let total: usize = texts
            .pieces
            .iter()
            .flatten()
            .map(|p| p.chars().count())
            .sum();
        assert_eq!(total, DEFINITION_CHAR_CAP);
        assert!(texts.pieces[Field::ParamName.index()].is_empty());
        let description = &texts.pieces[Field::Description.index()][0];
        assert!(description.chars().all(|c| c == 'é'));
        // Names come first, so they are always indexed.
        assert_eq!(texts.pieces[Field::Name.index()], ["tool_name"]);
    }
}
