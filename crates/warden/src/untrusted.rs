//! Text a server or a model wrote, made inert before it reaches a terminal.
//!
//! Whatever a server sends (tool results, error messages, its name, title and version, tool
//! names, titles and descriptions, the lines it writes on stderr) and whatever a model
//! writes (its answer, the tool names it calls) is untrusted. Printed raw, a control
//! sequence in it drives the terminal: OSC 52 writes the clipboard, OSC 0 sets the title,
//! `ESC[2J` clears the screen, a lone carriage return or a bidi override makes a line show
//! something else than it says. Every front end prints such text only after [`inert`]; JSON
//! output is serde's (which escapes C0 controls) passed through [`inert_json`] (which
//! escapes the rest the JSON way), and log records format their fields with
//! [`log_fields`]. Warden's own escape codes (the status line of `warden chat`) are written
//! around the escaped text, never through it. See
//! docs/decisions/0021-terminal-and-capabilities.md.

use std::borrow::Cow;
use std::fmt::Write;

/// Where the text is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Within a line of Warden's own (a name, a title, a reason, one line of a report):
    /// line breaks and tabs are escaped too, so the text cannot start a line that looks
    /// like Warden's.
    Line,
    /// A block of its own (a tool result, a model's answer, an error report): line
    /// breaks (`\n`, and `\r\n`) and tabs are kept; every other control is escaped.
    Block,
}

/// `text` with every character that could drive a terminal made visible: C0 controls as
/// `\x1b` (`\n`, `\t` and `\r` as themselves in [`Shape::Block`] where kept, as `\n`,
/// `\t`, `\r` otherwise), DEL as `\x7f`, C1 controls as `\u{9b}`, and the bidirectional
/// overrides, embeddings, isolates and marks as `\u{202e}`. Everything else, other Unicode
/// included, is shown as it is. Borrowed when nothing needed escaping.
pub fn inert(text: &str, shape: Shape) -> Cow<'_, str> {
    let needs = |(index, c): (usize, char)| escape_of(text, index, c, shape).is_some();
    let Some(first) = text.char_indices().position(needs) else {
        return Cow::Borrowed(text);
    };
    let start = text.char_indices().nth(first).map_or(0, |(index, _)| index);
    let mut out = String::with_capacity(text.len() + 16);
    out.push_str(&text[..start]);
    for (index, c) in text[start..].char_indices() {
        match escape_of(text, start + index, c, shape) {
            Some(Escape::Short(short)) => out.push_str(short),
            Some(Escape::Byte(byte)) => {
                let _ = write!(out, "\\x{byte:02x}");
            }
            Some(Escape::Unicode(code)) => {
                let _ = write!(out, "\\u{{{code:x}}}");
            }
            None => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// JSON text (as serde_json writes it) with the characters serde leaves raw and a
/// terminal may still act on (DEL, C1 controls, bidi controls) written as JSON escapes
/// (`\u009b`): the same JSON value, inert on a terminal. Outside strings JSON text holds
/// only ASCII, so every such character is inside a string, where the escape is valid.
pub fn inert_json(json: &str) -> Cow<'_, str> {
    let needs = |c: char| matches!(c, '\u{7f}'..='\u{9f}') || is_bidi_control(c);
    if !json.chars().any(needs) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if needs(c) {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// How Warden's log records write their fields: each value made [`inert`] (records quote
/// servers: a tool's name, an error, with `-vv` the lines a server writes on stderr). The
/// message is written bare, other fields as `name=value`, as tracing's default does.
pub fn log_fields() -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> + 'static {
    use tracing_subscriber::field::MakeExt;
    tracing_subscriber::fmt::format::debug_fn(|writer, field, value| {
        let text = format!("{value:?}");
        let text = inert(&text, Shape::Block);
        if field.name() == "message" {
            write!(writer, "{text}")
        } else {
            write!(writer, "{}={text}", field.name())
        }
    })
    .delimited(" ")
}

/// How one character is shown.
enum Escape {
    /// `\n`, `\t`, `\r`.
    Short(&'static str),
    /// `\x1b`: a C0 control or DEL.
    Byte(u32),
    /// `\u{9b}`: a C1 control or a bidi control.
    Unicode(u32),
}

/// The escape of `c` (at byte `index` of `text`), or `None` when it is shown as it is.
fn escape_of(text: &str, index: usize, c: char, shape: Shape) -> Option<Escape> {
    let block = shape == Shape::Block;
    match c {
        '\n' if block => None,
        '\t' if block => None,
        // CRLF ends a line like LF does; a lone CR would let the rest overwrite the line.
        '\r' if block && text[index + 1..].starts_with('\n') => None,
        '\n' => Some(Escape::Short("\\n")),
        '\t' => Some(Escape::Short("\\t")),
        '\r' => Some(Escape::Short("\\r")),
        '\u{0}'..='\u{1f}' | '\u{7f}' => Some(Escape::Byte(u32::from(c))),
        '\u{80}'..='\u{9f}' => Some(Escape::Unicode(u32::from(c))),
        c if is_bidi_control(c) => Some(Escape::Unicode(u32::from(c))),
        _ => None,
    }
}

/// The characters that reorder how a line is displayed (Unicode's bidirectional format
/// characters): with them a line can show its words in another order than they are read.
fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The three attacks of issue 10: OSC 52 (clipboard), OSC 0 (title), ESC[2J (clear).
    const HOSTILE: &str = "a\u{1b}]52;c;cHduZWQ=\u{7}b\u{1b}]0;pwned\u{1b}\\c\u{1b}[2Jd";

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        for text in [
            "",
            "hello",
            "naïve café — 日本語 🙂",
            "C:\\path\\x1b is text",
        ] {
            assert!(matches!(inert(text, Shape::Line), Cow::Borrowed(t) if t == text));
            assert!(matches!(inert(text, Shape::Block), Cow::Borrowed(t) if t == text));
        }
    }

    #[test]
    fn escape_sequences_are_made_visible_and_inert() {
        let shown = inert(HOSTILE, Shape::Line);
        assert_eq!(
            shown,
            "a\\x1b]52;c;cHduZWQ=\\x07b\\x1b]0;pwned\\x1b\\c\\x1b[2Jd"
        );
        assert!(!shown.chars().any(char::is_control), "{shown}");
        assert_eq!(inert(HOSTILE, Shape::Block), shown);
    }

    #[test]
    fn c1_del_and_bidi_controls_are_escaped() {
        assert_eq!(
            inert("\u{9b}2J \u{9d}0;t\u{9c} \u{7f}", Shape::Block),
            "\\u{9b}2J \\u{9d}0;t\\u{9c} \\x7f"
        );
        assert_eq!(
            inert(
                "abc\u{202e}fed\u{202c} \u{2066}x\u{2069} \u{200f}",
                Shape::Line
            ),
            "abc\\u{202e}fed\\u{202c} \\u{2066}x\\u{2069} \\u{200f}"
        );
    }

    #[test]
    fn a_block_keeps_its_lines_and_tabs_and_a_line_does_not() {
        let text = "one\ttab\r\ntwo\nthree\rover\u{0}";
        assert_eq!(
            inert(text, Shape::Block),
            "one\ttab\r\ntwo\nthree\\rover\\x00"
        );
        assert_eq!(
            inert(text, Shape::Line),
            "one\\ttab\\r\\ntwo\\nthree\\rover\\x00"
        );
        // A CR at the very end has no line feed after it.
        assert_eq!(inert("end\r", Shape::Block), "end\\r");
    }

    #[test]
    fn json_stays_the_same_value_with_c1_and_bidi_escaped() {
        let value = serde_json::json!({"t": HOSTILE, "c1": "\u{9b}2J\u{7f}", "b": "\u{202e}x"});
        let text = serde_json::to_string_pretty(&value).unwrap_or_default();
        let shown = inert_json(&text);
        assert!(
            !shown
                .chars()
                .any(|c| (c.is_control() && c != '\n') || is_bidi_control(c)),
            "{shown}"
        );
        assert!(
            shown.contains("\\u009b2J\\u007f") && shown.contains("\\u202ex"),
            "{shown}"
        );
        let back: serde_json::Value = serde_json::from_str(&shown).unwrap_or_default();
        assert_eq!(back, value);
    }

    #[test]
    fn nothing_printed_is_a_control_character_whatever_the_input() {
        // Every code point below U+0100 and every bidi control, in both shapes.
        let all: String = (0u32..0x100)
            .chain([0x61c, 0x200e, 0x200f, 0x202a, 0x202e, 0x2066, 0x2069])
            .filter_map(char::from_u32)
            .collect();
        for shape in [Shape::Line, Shape::Block] {
            let shown = inert(&all, shape);
            for c in shown.chars() {
                let kept = shape == Shape::Block && matches!(c, '\n' | '\t' | '\r');
                assert!(
                    kept || !(c.is_control() || is_bidi_control(c)),
                    "{shape:?}: {c:?} got through"
                );
            }
        }
    }
}
