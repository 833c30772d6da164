//! Elicitation in the terminal (`warden chat`): a server's form, rendered from its
//! restricted schema, or its URL, shown and opened only when the user says so.
//!
//! The server is always named; its message is shown as untrusted text (control characters
//! made visible). What the user types is the user's own words. Every request can be
//! answered accept, decline or cancel; a URL is opened with `xdg-open` (never through a
//! shell) only after an explicit "open", never automatically.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::BoxFuture;
use serde_json::{Map, Number, Value};
use warden_mcp::{ElicitationAnswer, ElicitationRequest, Elicitor};

use crate::untrusted::{Shape, inert};

/// Longest answer line read.
const MAX_LINE_BYTES: u64 = 16 * 1024;
/// Tries at one field before the form is cancelled.
const MAX_TRIES: usize = 3;
/// Times the whole form may be started over.
const MAX_EDITS: usize = 3;

/// Set while an elicitation prompt waits for the user.
static PROMPTING: AtomicBool = AtomicBool::new(false);

/// True while an elicitation prompt waits for the user: a spinner must not draw over it.
pub fn prompting() -> bool {
    PROMPTING.load(Ordering::SeqCst)
}

/// Marks a prompt as shown until dropped.
struct Prompting;

impl Prompting {
    fn start() -> Prompting {
        PROMPTING.store(true, Ordering::SeqCst);
        // Clears a spinner's line before the prompt is drawn.
        eprint!("\r\x1b[2K");
        Prompting
    }
}

impl Drop for Prompting {
    fn drop(&mut self) {
        PROMPTING.store(false, Ordering::SeqCst);
    }
}

/// Where answers come from: the terminal, or a script in tests.
pub trait Input: Send {
    /// The next line, without its end; `None` at end of input.
    fn line(&mut self) -> BoxFuture<'_, Option<String>>;
}

/// Lines typed at the terminal.
struct Terminal;

impl Input for Terminal {
    fn line(&mut self) -> BoxFuture<'_, Option<String>> {
        Box::pin(crate::terminal::read_line(MAX_LINE_BYTES))
    }
}

/// Puts elicitation requests to the person at the terminal, one at a time.
#[derive(Debug, Default)]
pub struct TerminalElicitor {
    one_at_a_time: tokio::sync::Mutex<()>,
}

impl Elicitor for TerminalElicitor {
    fn elicit<'a>(
        &'a self,
        server: &'a str,
        request: ElicitationRequest,
    ) -> BoxFuture<'a, ElicitationAnswer> {
        Box::pin(async move {
            let _turn = self.one_at_a_time.lock().await;
            let _shown = Prompting::start();
            let mut out = std::io::stderr();
            match request {
                ElicitationRequest::Form { message, schema } => {
                    ask_form(server, &message, &schema, &mut Terminal, &mut out).await
                }
                ElicitationRequest::Url { message, url } => {
                    ask_url(
                        server,
                        &message,
                        &url,
                        &mut Terminal,
                        &mut out,
                        open_in_browser,
                    )
                    .await
                }
            }
        })
    }
}

/// Opens `url` with `xdg-open`, directly (no shell), detached from the terminal.
fn open_in_browser(url: &str) -> Result<(), String> {
    std::process::Command::new("xdg-open")
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map(|_| ())
        .map_err(|error| format!("xdg-open could not be started: {error}"))
}

/// One field of a form.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    key: String,
    title: Option<String>,
    description: Option<String>,
    kind: Kind,
    required: bool,
    default: Option<Value>,
}

/// What a field holds.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Text {
        format: Option<String>,
        min_length: Option<u64>,
        max_length: Option<u64>,
    },
    Number {
        integer: bool,
        minimum: Option<f64>,
        maximum: Option<f64>,
    },
    Boolean,
    /// One of these `(value, label)` choices.
    Choice(Vec<(String, String)>),
    /// Some of these choices.
    Choices {
        options: Vec<(String, String)>,
        min: Option<u64>,
        max: Option<u64>,
    },
}

/// The fields of a restricted elicitation schema (a flat object of primitive properties),
/// in the schema's order.
pub fn parse_form(schema: &Value) -> Result<Vec<Field>, String> {
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .ok_or("the requested schema has no properties object")?;
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut fields = Vec::new();
    for (key, property) in properties {
        let text = |name: &str| {
            property
                .get(name)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let number = |name: &str| property.get(name).and_then(Value::as_f64);
        let count = |name: &str| property.get(name).and_then(Value::as_u64);
        let kind = match property.get("type").and_then(Value::as_str) {
            Some("string") => match choices(property) {
                Some(options) => Kind::Choice(options),
                None => Kind::Text {
                    format: text("format"),
                    min_length: count("minLength"),
                    max_length: count("maxLength"),
                },
            },
            Some(kind @ ("number" | "integer")) => Kind::Number {
                integer: kind == "integer",
                minimum: number("minimum"),
                maximum: number("maximum"),
            },
            Some("boolean") => Kind::Boolean,
            Some("array") => {
                let options = property
                    .get("items")
                    .and_then(choices)
                    .ok_or_else(|| format!("field `{key}`: an array must list its choices"))?;
                Kind::Choices {
                    options,
                    min: count("minItems"),
                    max: count("maxItems"),
                }
            }
            other => {
                return Err(format!(
                    "field `{key}`: type {} is not allowed in a form",
                    other.unwrap_or("(none)")
                ));
            }
        };
        fields.push(Field {
            key: key.clone(),
            title: text("title"),
            description: text("description"),
            kind,
            required: required.contains(&key.as_str()),
            default: property.get("default").cloned(),
        });
    }
    Ok(fields)
}

/// The `(value, label)` choices of `enum` (with `enumNames`), `oneOf` or `anyOf` of
/// `{const, title}`.
fn choices(schema: &Value) -> Option<Vec<(String, String)>> {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let names = schema.get("enumNames").and_then(Value::as_array);
        return Some(
            values
                .iter()
                .enumerate()
                .filter_map(|(i, v)| {
                    let value = v.as_str()?.to_owned();
                    let label = names
                        .and_then(|n| n.get(i))
                        .and_then(Value::as_str)
                        .unwrap_or(&value)
                        .to_owned();
                    Some((value, label))
                })
                .collect(),
        );
    }
    let list = schema
        .get("oneOf")
        .or_else(|| schema.get("anyOf"))
        .and_then(Value::as_array)?;
    Some(
        list.iter()
            .filter_map(|item| {
                let value = item.get("const")?.as_str()?.to_owned();
                let label = item
                    .get("title")
                    .and_then(Value::as_str)
                    .unwrap_or(&value)
                    .to_owned();
                Some((value, label))
            })
            .collect(),
    )
}

/// Reads one field's value from `answer`: `Ok(None)` leaves it out.
fn read_value(field: &Field, answer: &str) -> Result<Option<Value>, String> {
    let answer = answer.trim();
    if answer.is_empty() {
        return match (&field.default, field.required) {
            (Some(default), _) => Ok(Some(default.clone())),
            (None, true) => Err("this field is required".into()),
            (None, false) => Ok(None),
        };
    }
    let pick = |options: &[(String, String)], word: &str| -> Result<String, String> {
        if let Ok(n) = word.parse::<usize>()
            && n >= 1
            && n <= options.len()
        {
            return Ok(options[n - 1].0.clone());
        }
        options
            .iter()
            .find(|(value, label)| value == word || label.eq_ignore_ascii_case(word))
            .map(|(value, _)| value.clone())
            .ok_or_else(|| format!("`{word}` is not one of the choices"))
    };
    let value = match &field.kind {
        Kind::Text {
            min_length,
            max_length,
            ..
        } => {
            let length = answer.chars().count() as u64;
            if min_length.is_some_and(|min| length < min) {
                return Err(format!("at least {} characters", min_length.unwrap_or(0)));
            }
            if max_length.is_some_and(|max| length > max) {
                return Err(format!("at most {} characters", max_length.unwrap_or(0)));
            }
            Value::String(answer.to_owned())
        }
        Kind::Number {
            integer,
            minimum,
            maximum,
        } => {
            let number: f64 = if *integer {
                answer
                    .parse::<i64>()
                    .map_err(|_| "a whole number, please".to_owned())? as f64
            } else {
                answer
                    .parse::<f64>()
                    .ok()
                    .filter(|n| n.is_finite())
                    .ok_or("a number, please")?
            };
            if minimum.is_some_and(|min| number < min) || maximum.is_some_and(|max| number > max) {
                return Err(format!(
                    "between {} and {}",
                    minimum.map_or("-∞".into(), |n| n.to_string()),
                    maximum.map_or("∞".into(), |n| n.to_string())
                ));
            }
            if *integer {
                Value::Number(Number::from(number as i64))
            } else {
                Number::from_f64(number).map_or(Value::Null, Value::Number)
            }
        }
        Kind::Boolean => match answer.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Value::Bool(true),
            "n" | "no" | "false" => Value::Bool(false),
            _ => return Err("yes or no, please".into()),
        },
        Kind::Choice(options) => Value::String(pick(options, answer)?),
        Kind::Choices { options, min, max } => {
            let mut picked = Vec::new();
            for word in answer.split(',').map(str::trim).filter(|w| !w.is_empty()) {
                let value = pick(options, word)?;
                if !picked.contains(&value) {
                    picked.push(value);
                }
            }
            let count = picked.len() as u64;
            if min.is_some_and(|m| count < m) || max.is_some_and(|m| count > m) {
                return Err(format!(
                    "choose {} to {}",
                    min.unwrap_or(0),
                    max.map_or("any".into(), |m| m.to_string())
                ));
            }
            Value::Array(picked.into_iter().map(Value::String).collect())
        }
    };
    Ok(Some(value))
}

/// The lines that present one field.
fn field_lines(field: &Field) -> String {
    let title = field.title.as_deref().unwrap_or(&field.key);
    let mut text = format!(
        "  {}{} ({})",
        inert(title, Shape::Line),
        if field.required { " *" } else { "" },
        inert(&field.key, Shape::Line)
    );
    if let Some(description) = &field.description {
        text.push_str(&format!(" — {}", inert(description, Shape::Line)));
    }
    text.push('\n');
    match &field.kind {
        Kind::Choice(options) | Kind::Choices { options, .. } => {
            for (n, (value, label)) in options.iter().enumerate() {
                text.push_str(&format!(
                    "    {}) {}{}\n",
                    n + 1,
                    inert(label, Shape::Line),
                    if label == value {
                        String::new()
                    } else {
                        format!(" [{}]", inert(value, Shape::Line))
                    }
                ));
            }
            if matches!(field.kind, Kind::Choices { .. }) {
                text.push_str("    (numbers or values, separated by commas)\n");
            }
        }
        Kind::Boolean => text.push_str("    (yes or no)\n"),
        Kind::Text {
            format: Some(format),
            ..
        } => text.push_str(&format!("    (format: {})\n", inert(format, Shape::Line))),
        _ => {}
    }
    text
}

/// Puts a form to the user: answer it, decline or cancel; the answers are shown before
/// they are sent, and can be entered again.
pub async fn ask_form(
    server: &str,
    message: &str,
    schema: &Value,
    input: &mut dyn Input,
    out: &mut (dyn Write + Send),
) -> ElicitationAnswer {
    let _ = write!(
        out,
        "\nwarden: server `{server}` asks for input:\n  {}\n",
        inert(message, Shape::Line)
    );
    let fields = match parse_form(schema) {
        Ok(fields) => fields,
        Err(problem) => {
            let _ = writeln!(
                out,
                "warden: the form cannot be shown ({}); declined.",
                inert(&problem, Shape::Line)
            );
            return ElicitationAnswer::Decline;
        }
    };
    let _ = write!(out, "Answer it? [a]nswer, [d]ecline, [c]ancel: ");
    let _ = out.flush();
    match input.line().await.map(|l| l.trim().to_ascii_lowercase()) {
        Some(a) if a == "a" || a == "answer" => {}
        Some(d) if d == "d" || d == "decline" => return ElicitationAnswer::Decline,
        _ => return ElicitationAnswer::Cancel,
    }
    for _ in 0..MAX_EDITS {
        let mut values = Map::new();
        for field in &fields {
            let _ = write!(out, "{}", field_lines(field));
            let mut done = false;
            for _ in 0..MAX_TRIES {
                let default = field
                    .default
                    .as_ref()
                    .map(|d| format!(" [{}]", inert(&d.to_string(), Shape::Line)))
                    .unwrap_or_default();
                let _ = write!(out, "  > {default} ");
                let _ = out.flush();
                let Some(line) = input.line().await else {
                    return ElicitationAnswer::Cancel;
                };
                match read_value(field, &line) {
                    Ok(value) => {
                        if let Some(value) = value {
                            values.insert(field.key.clone(), value);
                        }
                        done = true;
                        break;
                    }
                    Err(problem) => {
                        let _ = writeln!(out, "  {problem}");
                    }
                }
            }
            if !done {
                let _ = writeln!(out, "warden: no valid answer; the form is cancelled.");
                return ElicitationAnswer::Cancel;
            }
        }
        let _ = write!(
            out,
            "Send to `{server}`:\n{}\n[s]end, [e]dit, [d]ecline, [c]ancel: ",
            crate::render::indent(&crate::render::pretty(&Value::Object(values.clone())))
        );
        let _ = out.flush();
        match input.line().await.map(|l| l.trim().to_ascii_lowercase()) {
            Some(s) if s == "s" || s == "send" => return ElicitationAnswer::Accept(Some(values)),
            Some(e) if e == "e" || e == "edit" => continue,
            Some(d) if d == "d" || d == "decline" => return ElicitationAnswer::Decline,
            _ => return ElicitationAnswer::Cancel,
        }
    }
    ElicitationAnswer::Cancel
}

/// Whether `url` is an `https:` or `http:` address, and its host (after any user
/// information, without the port), for showing.
fn web_host(url: &str) -> (bool, String) {
    let lower = url.to_ascii_lowercase();
    let rest = if lower.starts_with("https://") {
        &url["https://".len()..]
    } else if lower.starts_with("http://") {
        &url["http://".len()..]
    } else {
        return (false, "(none)".into());
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit('@').next().unwrap_or("");
    let host = if host_port.starts_with('[') {
        host_port
            .split(']')
            .next()
            .map(|h| format!("{h}]"))
            .unwrap_or_default()
    } else {
        host_port.split(':').next().unwrap_or("").to_owned()
    };
    if host.is_empty() || url.chars().any(char::is_control) {
        return (false, "(none)".into());
    }
    (true, host)
}

/// Shows a URL request (the whole URL and its host) and opens it only on an explicit
/// "open". Only `https:` and `http:` URLs can be opened.
pub async fn ask_url(
    server: &str,
    message: &str,
    url: &str,
    input: &mut dyn Input,
    out: &mut (dyn Write + Send),
    open: fn(&str) -> Result<(), String>,
) -> ElicitationAnswer {
    let shown = inert(url, Shape::Line);
    let (web, host) = web_host(url);
    let _ = write!(
        out,
        "\nwarden: server `{server}` asks you to open a web page:\n  {}\n  {shown}\n  (host: {})\n",
        inert(message, Shape::Line),
        inert(&host, Shape::Line)
    );
    if !web {
        let _ = writeln!(out, "warden: not a web address; declined.");
        return ElicitationAnswer::Decline;
    }
    let _ = write!(out, "[o]pen it in your browser, [d]ecline, [c]ancel: ");
    let _ = out.flush();
    match input.line().await.map(|l| l.trim().to_ascii_lowercase()) {
        Some(o) if o == "o" || o == "open" => match open(url) {
            Ok(()) => ElicitationAnswer::Accept(None),
            Err(problem) => {
                let _ = writeln!(out, "warden: {problem}; open it yourself if you wish.");
                ElicitationAnswer::Accept(None)
            }
        },
        Some(d) if d == "d" || d == "decline" => ElicitationAnswer::Decline,
        _ => ElicitationAnswer::Cancel,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;
    use std::collections::VecDeque;

    struct Script(VecDeque<&'static str>);

    impl Input for Script {
        fn line(&mut self) -> BoxFuture<'_, Option<String>> {
            let next = self.0.pop_front().map(str::to_owned);
            Box::pin(std::future::ready(next))
        }
    }

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "title": "Name", "description": "Your name", "minLength": 2},
                "age": {"type": "integer", "minimum": 0, "maximum": 150, "default": 42},
                "ratio": {"type": "number"},
                "agree": {"type": "boolean", "title": "Agree"},
                "pet": {"type": "string", "enum": ["cat", "dog"]},
                "hero": {"type": "string", "oneOf": [{"const": "h1", "title": "Superman"}, {"const": "h2", "title": "Batman"}]},
                "tools": {"type": "array", "items": {"anyOf": [{"const": "g", "title": "Guitar"}, {"const": "p", "title": "Piano"}]}, "maxItems": 2}
            },
            "required": ["name", "agree"]
        })
    }

    async fn form(lines: &[&'static str]) -> (ElicitationAnswer, String) {
        let mut input = Script(lines.iter().copied().collect());
        let mut out = Vec::new();
        let answer = ask_form("srv", "Tell me\u{1b}[2J", &schema(), &mut input, &mut out).await;
        (answer, String::from_utf8(out).unwrap())
    }

    #[tokio::test]
    async fn a_form_is_rendered_from_the_schema_and_answers_are_typed() {
        // Fields come in the order of the schema's keys as parsed (sorted here).
        let (answer, out) = form(&[
            "a", "",    // age: the default
            "yes", // agree
            "Superman", "x", "Ann", // name: too short, then fine
            "2", "2.5", "1, p", "s",
        ])
        .await;
        let ElicitationAnswer::Accept(Some(values)) = answer else {
            panic!("{answer:?}\n{out}");
        };
        assert_eq!(
            Value::Object(values),
            json!({"name": "Ann", "age": 42, "ratio": 2.5, "agree": true, "pet": "dog", "hero": "h1", "tools": ["g", "p"]})
        );
        assert!(out.contains("server `srv` asks for input"), "{out}");
        assert!(out.contains("Name * (name) — Your name"), "{out}");
        assert!(out.contains("Agree * (agree)"), "{out}");
        assert!(out.contains("1) Superman [h1]"), "{out}");
        assert!(out.contains("[42]"), "the default is shown: {out}");
        assert!(out.contains("at least 2 characters"), "{out}");
        assert!(
            !out.contains('\u{1b}'),
            "control characters are not passed on"
        );
    }

    #[tokio::test]
    async fn a_form_can_be_declined_cancelled_or_abandoned() {
        assert_eq!(form(&["d"]).await.0, ElicitationAnswer::Decline);
        assert_eq!(form(&["c"]).await.0, ElicitationAnswer::Cancel);
        assert_eq!(form(&[]).await.0, ElicitationAnswer::Cancel);
        // A required field left empty three times cancels.
        assert_eq!(
            form(&["a", "", "", "", ""]).await.0,
            ElicitationAnswer::Cancel
        );
        // Declined at the review.
        let lines = ["a", "", "no", "", "Bob", "", "", "", "d"];
        assert_eq!(form(&lines).await.0, ElicitationAnswer::Decline);
    }

    #[test]
    fn schemas_outside_the_restricted_subset_are_refused() {
        let nested = json!({"type": "object", "properties": {"x": {"type": "object"}}});
        assert!(parse_form(&nested).is_err());
        assert!(parse_form(&json!({"type": "object"})).is_err());
    }

    fn opened(_: &str) -> Result<(), String> {
        Ok(())
    }

    fn never(url: &str) -> Result<(), String> {
        panic!("opened {url} without consent")
    }

    #[tokio::test]
    async fn a_url_is_shown_with_its_host_and_opened_only_on_consent() {
        let url = "https://auth.example.com/login?x=1";
        let mut out = Vec::new();
        let answer = ask_url(
            "srv",
            "Sign in",
            url,
            &mut Script(["o"].into()),
            &mut out,
            opened,
        )
        .await;
        assert_eq!(answer, ElicitationAnswer::Accept(None));
        let out = String::from_utf8(out).unwrap();
        assert!(
            out.contains(url) && out.contains("host: auth.example.com"),
            "{out}"
        );
        for (line, expected) in [
            ("d", ElicitationAnswer::Decline),
            ("", ElicitationAnswer::Cancel),
        ] {
            let answer = ask_url(
                "srv",
                "Sign in",
                url,
                &mut Script([line].into()),
                &mut Vec::new(),
                never,
            )
            .await;
            assert_eq!(answer, expected);
        }
        let answer = ask_url(
            "srv",
            "Run",
            "file:///etc/passwd",
            &mut Script(["o"].into()),
            &mut Vec::new(),
            never,
        )
        .await;
        assert_eq!(answer, ElicitationAnswer::Decline);
        assert_eq!(
            web_host("https://user:pw@evil.example:8443/x"),
            (true, "evil.example".into())
        );
    }
}
