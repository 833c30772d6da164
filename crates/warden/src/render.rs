//! Turning results into text for people.

use serde_json::Value;
use warden_config::Scope;
use warden_mcp::{CallOutcome, Era};

use crate::untrusted::{Shape, inert, inert_json};

/// Pretty JSON, or a note if it cannot be printed. serde escapes the C0 controls in
/// strings; [`inert_json`] escapes the rest (DEL, C1, bidi controls) the same JSON way.
pub fn pretty(value: &impl serde::Serialize) -> String {
    match serde_json::to_string_pretty(value) {
        Ok(text) => inert_json(&text).into_owned(),
        Err(error) => format!("<unprintable: {error}>"),
    }
}

/// The era as a word.
pub fn era(era: Era) -> &'static str {
    match era {
        Era::Modern => "modern",
        Era::Legacy => "legacy",
    }
}

/// The scope as a word.
pub fn scope(scope: Scope) -> &'static str {
    match scope {
        Scope::User => "user",
        Scope::Project => "project",
        Scope::Local => "local",
        Scope::Explicit => "--config",
    }
}

/// The first line of a description, cut to a readable length.
pub fn first_line(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    if line.chars().count() > 100 {
        let cut: String = line.chars().take(99).collect();
        format!("{cut}…")
    } else {
        line.to_owned()
    }
}

/// A tool result as text: text blocks as they are (made [`inert`]: a server wrote them),
/// other blocks summarised, then the structured content.
pub fn outcome(outcome: &CallOutcome) -> String {
    let mut out = String::new();
    let mut texts = Vec::new();
    let push_text = |out: &mut String, text: &str| {
        out.push_str(&inert(text, Shape::Block));
        if !text.ends_with('\n') {
            out.push('\n');
        }
    };
    let field = |value: &Value, key: &str| -> String {
        inert(
            value.get(key).and_then(Value::as_str).unwrap_or("?"),
            Shape::Line,
        )
        .into_owned()
    };
    for block in &outcome.content {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("?");
        match kind {
            "text" => {
                let text = block.get("text").and_then(Value::as_str).unwrap_or("");
                texts.push(text);
                push_text(&mut out, text);
            }
            "image" | "audio" => {
                let size = block
                    .get("data")
                    .and_then(Value::as_str)
                    .map_or(0, |data| data.len() / 4 * 3);
                out.push_str(&format!(
                    "[{kind}: {}, about {size} bytes]\n",
                    field(block, "mimeType")
                ));
            }
            "resource" => {
                let resource = block.get("resource").cloned().unwrap_or(Value::Null);
                out.push_str(&format!("[resource: {}]\n", field(&resource, "uri")));
                if let Some(text) = resource.get("text").and_then(Value::as_str) {
                    push_text(&mut out, text);
                }
            }
            "resource_link" => {
                out.push_str(&format!("[link: {}]\n", field(block, "uri")));
            }
            _ => {
                out.push_str(&pretty(block));
                out.push('\n');
            }
        }
    }
    if let Some(structured) = &outcome.structured {
        // Servers often repeat the structured content as JSON text; print it once.
        let repeated = texts
            .iter()
            .any(|text| serde_json::from_str::<Value>(text).ok().as_ref() == Some(structured));
        if !repeated {
            out.push_str("structured content:\n");
            out.push_str(&pretty(structured));
            out.push('\n');
        }
    }
    out
}

/// The arguments shown at an approval prompt are cut after this many characters, or lines.
const SHOWN_ARGUMENT_CHARS: usize = 4000;
const SHOWN_ARGUMENT_LINES: usize = 60;

/// The arguments as pretty JSON, cut to a size a person reads.
pub fn shown_arguments(arguments: &Value) -> String {
    let text = pretty(arguments);
    let mut end = text.len();
    if let Some((index, _)) = text.char_indices().nth(SHOWN_ARGUMENT_CHARS) {
        end = index;
    }
    if let Some((index, _)) = text
        .match_indices('\n')
        .nth(SHOWN_ARGUMENT_LINES - 1)
        .filter(|(index, _)| *index < end)
    {
        end = index;
    }
    if end == text.len() {
        return text;
    }
    let rest = text[end..].chars().count();
    format!(
        "{}\n… ({rest} more characters not shown)",
        text[..end].trim_end()
    )
}

pub fn indent(text: &str) -> String {
    text.lines()
        .map(|line| format!("  {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One line for a tool call: what, where, the decision and what became of it.
pub fn tool_call_line(call: &warden_agent::ToolCallEvent) -> String {
    let outcome = if call.executed {
        if call.is_error { "error" } else { "ok" }
    } else {
        "not run"
    };
    let mut line = format!(
        "  ⏵ {} [{}] {} → {outcome}",
        inert(&call.tool, Shape::Line),
        if call.server.is_empty() {
            "?"
        } else {
            &call.server
        },
        call.decision,
    );
    if let Some(by) = &call.approved_by
        && by != "policy"
    {
        line.push_str(&format!(" (approved by {by})"));
    }
    if let Some(ms) = call.latency_ms {
        line.push_str(&format!(" {ms} ms"));
    }
    if call.truncated {
        line.push_str(", cut to the cap");
    }
    if let Some(path) = &call.offloaded_to {
        line.push_str(&format!(", saved to {path}"));
    }
    if !call.executed
        && let Some(error) = &call.error
    {
        line.push_str(": ");
        // The error may quote what a server sent: escaped.
        line.push_str(&inert(&first_line(error), Shape::Line));
    }
    line
}

/// One line for a background call that finished (empty for any other event).
pub fn background_line(event: &warden_agent::Event) -> String {
    match event {
        warden_agent::Event::BackgroundResult {
            tool,
            server,
            is_error,
            latency_ms,
            ..
        } => format!(
            "  ⏵ {} [{}] finished in the background → {} {latency_ms} ms",
            inert(tool, Shape::Line),
            inert(server, Shape::Line),
            if *is_error { "error" } else { "ok" }
        ),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_call_line_escapes_what_a_server_sent() {
        let call = warden_agent::ToolCallEvent {
            turn: 1,
            id: "c1".into(),
            tool: "srv__echo".into(),
            server: "srv".into(),
            arguments: json!({}),
            decision: "allow".into(),
            reasons: Vec::new(),
            approved_by: Some("policy".into()),
            executed: false,
            background: false,
            is_error: true,
            error: Some("The call failed: \u{1b}]0;pwned\u{7}\u{1b}[2J".into()),
            result_chars: 0,
            result_tokens: 0,
            flagged: false,
            truncated: false,
            offloaded_to: None,
            latency_ms: None,
            started_ms: None,
        };
        let line = tool_call_line(&call);
        assert!(!line.chars().any(char::is_control), "{line:?}");
        assert!(line.contains("\\x1b[2J"), "{line}");
    }

    #[test]
    fn shown_arguments_are_cut_to_a_readable_size() {
        let small = json!({"message": "hi"});
        assert_eq!(shown_arguments(&small), "{\n  \"message\": \"hi\"\n}");
        let long = json!({"text": "é".repeat(10_000)});
        let shown = shown_arguments(&long);
        assert!(
            shown.chars().count() < SHOWN_ARGUMENT_CHARS + 100,
            "{shown}"
        );
        assert!(shown.ends_with("more characters not shown)"), "{shown}");
        let many: Vec<u32> = (0..1000).collect();
        let shown = shown_arguments(&json!({ "n": many }));
        assert_eq!(shown.lines().count(), SHOWN_ARGUMENT_LINES + 1, "{shown}");
        // Control characters in values are escaped by JSON, never sent to the terminal.
        let shown = shown_arguments(&json!({"x": "\u{1b}[2J"}));
        assert!(
            shown.contains("\\u001b[2J") && !shown.contains('\u{1b}'),
            "{shown}"
        );
    }
}
