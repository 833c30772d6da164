//! Redaction of what goes into the audit log: a pure function over JSON.
//!
//! Two rules, applied together:
//! - **by key**: the value of an object member whose key names a secret (`password`,
//!   `api_key`, `Authorization`, `sessionId`, ...; case and separators ignored) is replaced
//!   whole, whatever it is, by [`REDACTED`];
//! - **by pattern**: inside every string, wherever it is, a token that looks like a secret
//!   (a `Bearer`/`Basic` credential, an `sk-`, `ghp_`, `github_pat_`, `xoxb-`/`xoxp-` key,
//!   an AWS access key id `AKIA…`, a JWT `eyJ….….…`, a PEM private key block) is replaced
//!   by [`REDACTED`]; the rest of the string is kept.
//!
//! The work is bounded: nesting deeper than [`MAX_DEPTH`] and anything after
//! [`MAX_NODES`] values are replaced by a marker, and strings are cut to
//! [`MAX_STRING_BYTES`] before they are scanned. Redaction errs on the side of hiding: a
//! false positive costs a less useful log line, a false negative a leaked secret.

use serde_json::{Map, Value};

/// What a secret is replaced with.
pub const REDACTED: &str = "<redacted>";
/// Deepest nesting kept; deeper values are replaced by `"<too deep>"`.
pub const MAX_DEPTH: usize = 32;
/// Most values visited; the rest are replaced by `"<truncated>"`.
pub const MAX_NODES: usize = 10_000;
/// Longest string kept, in bytes; longer ones are cut (at a character boundary).
pub const MAX_STRING_BYTES: usize = 4096;

/// Compound words that make a key secret wherever they appear in it (after lowercasing
/// and removing separators): `db_password`, `X-Api-Key`, `refreshToken`.
const SECRET_KEY_PARTS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "authorization",
    "cookie",
    "privatekey",
    "credential",
    "accesskey",
    "session",
];
/// Short words that make a key secret only as a whole word of it (`auth`, `x-auth`,
/// `authHeader`, but not `author`).
const SECRET_KEY_WORDS: &[&str] = &["auth", "pwd", "pass", "sid"];

/// Returns `value` with secrets replaced (see the module documentation).
pub fn redact(value: &Value) -> Value {
    let mut budget = MAX_NODES;
    walk(value, 0, &mut budget)
}

fn walk(value: &Value, depth: usize, budget: &mut usize) -> Value {
    if *budget == 0 {
        return Value::String("<truncated>".into());
    }
    *budget -= 1;
    if depth >= MAX_DEPTH {
        return Value::String("<too deep>".into());
    }
    match value {
        Value::String(text) => Value::String(redact_text(text)),
        Value::Array(items) => {
            let mut out = Vec::new();
            for item in items {
                if *budget == 0 {
                    out.push(Value::String("<truncated>".into()));
                    break;
                }
                out.push(walk(item, depth + 1, budget));
            }
            Value::Array(out)
        }
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, item) in map {
                if *budget == 0 {
                    out.insert("<truncated>".into(), Value::Null);
                    break;
                }
                let kept = if is_secret_key(key) {
                    Value::String(REDACTED.into())
                } else {
                    walk(item, depth + 1, budget)
                };
                out.insert(redact_text(key), kept);
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// Whether an object key names a secret.
pub fn is_secret_key(key: &str) -> bool {
    let words = key_words(key);
    let joined: String = words.concat();
    SECRET_KEY_PARTS.iter().any(|part| joined.contains(part))
        || words
            .iter()
            .any(|word| SECRET_KEY_WORDS.contains(&word.as_str()))
}

/// The key's words, lowercased: split at separators and at lower-to-upper case changes.
fn key_words(key: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in key.chars() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// Cuts `text` to [`MAX_STRING_BYTES`] and replaces every secret-looking token in it.
pub fn redact_text(text: &str) -> String {
    let (kept, cut) = if text.len() > MAX_STRING_BYTES {
        let mut end = MAX_STRING_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        (&text[..end], text.len() - end)
    } else {
        (text, 0)
    };
    let mut out = String::with_capacity(kept.len());
    let bytes = kept.as_bytes();
    let mut i = 0;
    let mut copied = 0;
    while i < bytes.len() {
        let at_boundary = kept.is_char_boundary(i) && (i == 0 || !is_word_byte(bytes[i - 1]));
        if at_boundary && let Some((keep, end)) = secret_at(kept, i) {
            out.push_str(&kept[copied..i + keep]);
            out.push_str(REDACTED);
            i = end;
            copied = end;
            continue;
        }
        i += 1;
    }
    out.push_str(&kept[copied..]);
    if cut > 0 {
        out.push_str(&format!("…({cut} more bytes)"));
    }
    out
}

/// Bytes a secret must not follow to start there (`risk-free` holds no `sk-` key; `=sk-…`
/// and `/sk-…` do).
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_')
}

/// Bytes that continue a token (a key, a JWT segment).
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'+' | b'/' | b'=' | b'~')
}

/// The end of the token starting at `start`.
fn token_end(text: &str, start: usize) -> usize {
    let bytes = text.as_bytes();
    let mut end = start;
    while end < bytes.len() && is_token_byte(bytes[end]) {
        end += 1;
    }
    end
}

/// Prefixes of well-known API keys, each needing at least this many token bytes after it.
const KEY_PREFIXES: &[(&str, usize)] = &[
    ("github_pat_", 8),
    ("ghp_", 8),
    ("gho_", 8),
    ("ghu_", 8),
    ("ghs_", 8),
    ("ghr_", 8),
    ("xoxb-", 8),
    ("xoxp-", 8),
    ("sk-", 8),
];

/// If a secret starts at byte `start` of `text` (at a token boundary): how many bytes of
/// it to keep in the clear (the `Bearer ` word) and where it ends.
fn secret_at(text: &str, start: usize) -> Option<(usize, usize)> {
    let rest = &text[start..];
    let lower_head: String = rest.chars().take(12).collect::<String>().to_lowercase();
    for scheme in ["bearer ", "basic "] {
        if lower_head.starts_with(scheme) {
            let token = start + scheme.len();
            let end = token_end(text, token);
            if end - token >= 6 {
                return Some((scheme.len(), end));
            }
        }
    }
    if rest.starts_with("-----BEGIN ") {
        let header_end = rest
            .find("-----\n")
            .or_else(|| rest[11..].find("-----").map(|i| i + 11));
        if header_end.is_some_and(|e| rest[..e].contains("PRIVATE KEY")) {
            let end = match rest.find("-----END ") {
                Some(e) => rest[e + 9..]
                    .find("-----")
                    .map_or(rest.len(), |f| e + 9 + f + 5),
                None => rest.len(),
            };
            return Some((0, start + end));
        }
    }
    for (prefix, min) in KEY_PREFIXES {
        if rest.starts_with(prefix) {
            let end = token_end(text, start + prefix.len());
            if end - (start + prefix.len()) >= *min {
                return Some((0, end));
            }
        }
    }
    if rest.starts_with("AKIA") {
        let id = rest.as_bytes().get(4..20)?;
        let after = rest.as_bytes().get(20).copied();
        if id
            .iter()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
            && !after.is_some_and(|b| b.is_ascii_alphanumeric())
        {
            return Some((0, start + 20));
        }
    }
    if rest.starts_with("eyJ") {
        let end = token_end(text, start);
        let segments: Vec<&str> = text[start..end].split('.').collect();
        if segments.len() >= 3 && segments[..2].iter().all(|s| s.len() >= 2) {
            return Some((0, end));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secret_keys_are_recognised_whatever_their_case_and_separators() {
        for key in [
            "password",
            "db_password",
            "Passwd",
            "client_secret",
            "token",
            "refreshToken",
            "api_key",
            "X-Api-Key",
            "apikey",
            "Authorization",
            "auth",
            "x-auth",
            "authHeader",
            "Cookie",
            "session",
            "sessionId",
            "private_key",
            "PRIVATE-KEY",
            "credentials",
            "aws_access_key_id",
        ] {
            assert!(is_secret_key(key), "{key}");
        }
        for key in [
            "author",
            "message",
            "path",
            "authority",
            "passage",
            "keyboard",
        ] {
            assert!(!is_secret_key(key), "{key}");
        }
    }

    #[test]
    fn values_under_secret_keys_are_replaced_whole_at_any_depth() {
        let value = json!({
            "message": "hi",
            "token": "s3cret",
            "nested": [{"headers": {"Authorization": {"scheme": "x", "value": 1}}}],
            "password": null,
        });
        assert_eq!(
            redact(&value),
            json!({
                "message": "hi",
                "token": REDACTED,
                "nested": [{"headers": {"Authorization": REDACTED}}],
                "password": REDACTED,
            })
        );
    }

    #[test]
    fn secret_looking_strings_are_replaced_whatever_their_key() {
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl";
        let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAK\n-----END RSA PRIVATE KEY-----";
        let cases = [
            ("Bearer abc.def", "Bearer <redacted>"),
            ("use bearer abc.def now", "use bearer <redacted> now"),
            ("Basic dXNlcjpwYXNz", "Basic <redacted>"),
            ("sk-proj-abcdefghijkl", "<redacted>"),
            ("key=ghp_0123456789abcdef", "key=<redacted>"),
            ("github_pat_11ABCDEFG_xyz", "<redacted>"),
            ("xoxb-1234-5678-abcd", "<redacted>"),
            ("id AKIAIOSFODNN7EXAMPLE.", "id <redacted>."),
            (jwt, "<redacted>"),
            (&format!("before {pem} after"), "before <redacted> after"),
            ("-----BEGIN PRIVATE KEY-----\nMIIB", "<redacted>"),
        ];
        for (input, expected) in cases {
            assert_eq!(redact_text(input), expected, "{input}");
        }
        assert_eq!(
            redact(&json!({"message": "Bearer abc.def", "list": ["x", jwt]})),
            json!({"message": "Bearer <redacted>", "list": ["x", REDACTED]})
        );
    }

    #[test]
    fn ordinary_text_is_kept() {
        for text in [
            "hello world",
            "risk-free",
            "sk-short",
            "ask-me",
            "AKIA is a prefix",
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
            "eyJ alone",
            "the bearer of news",
            "é-ü ünïcödé",
        ] {
            assert_eq!(redact_text(text), text);
        }
    }

    #[test]
    fn the_work_is_bounded() {
        let long = "é".repeat(5000);
        let cut = redact_text(&long);
        assert!(cut.len() < MAX_STRING_BYTES + 40, "{}", cut.len());
        assert!(cut.ends_with("more bytes)"), "{cut}");

        let mut deep = json!("bottom");
        for _ in 0..100 {
            deep = json!([deep]);
        }
        let text = redact(&deep).to_string();
        assert!(text.contains("<too deep>") && !text.contains("bottom"));

        let wide = Value::Array((0..20_000).map(|i| json!(i)).collect());
        let out = redact(&wide);
        let items = out.as_array().unwrap_or(&Vec::new()).clone();
        assert_eq!(items.len(), MAX_NODES);
        assert_eq!(items[MAX_NODES - 2], json!(MAX_NODES - 2));
        assert_eq!(items[MAX_NODES - 1], json!("<truncated>"));
    }
}
