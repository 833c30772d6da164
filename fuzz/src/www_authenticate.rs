//! The `Bearer` challenge of a remote server's 401 or 403 (`WWW-Authenticate`,
//! `warden_oauth::parse_challenge`): where Warden goes for sign-in (`resource_metadata`),
//! what it asks for (`scope`) and why it was refused (`error`) all come from these bytes.
//! Properties:
//!
//! - any header is read or found to hold no `Bearer` challenge, the same way twice, and
//!   its scopes are non-empty words without spaces;
//! - round trip: a challenge written by a spec-following encoder (RFC 9110 quoted
//!   strings, `\` escapes) reads back as itself, also behind another scheme's challenge
//!   whose quoted parameter holds arbitrary text (a `Bearer ...` inside a quoted value is
//!   not a challenge).
//!
//! Input: the header as text; the same text split at NUL bytes gives the fields of the
//! challenge to encode (`resource_metadata`, `scope`, `error`, another scheme's `realm`).

use warden_oauth::{Challenge, parse_challenge};

/// Longest header the round trip checks (the parser reads at most 8 KiB characters).
const MAX_CHECKED: usize = 8 * 1024;

fn quoted(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// Writes `challenge` as a `WWW-Authenticate` value.
pub fn encode(challenge: &Challenge) -> String {
    let mut params = Vec::new();
    for (name, value) in [
        ("resource_metadata", &challenge.resource_metadata),
        ("scope", &challenge.scope),
        ("error", &challenge.error),
    ] {
        if let Some(value) = value {
            params.push(format!("{name}={}", quoted(value)));
        }
    }
    if params.is_empty() {
        "Bearer".to_owned()
    } else {
        format!("Bearer {}", params.join(", "))
    }
}

/// Reads one input and checks the properties.
pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let read = parse_challenge(&text);
    assert_eq!(read, parse_challenge(&text), "not deterministic");
    if let Some(challenge) = &read {
        for scope in challenge.scopes() {
            assert!(!scope.is_empty() && !scope.contains(' '), "scope {scope:?}");
        }
        let _ = challenge.is_insufficient_scope();
    }

    let mut fields = text.split('\0');
    let challenge = Challenge {
        resource_metadata: fields.next().map(str::to_owned),
        scope: fields.next().map(str::to_owned),
        error: fields.next().map(str::to_owned),
    };
    let realm = fields.next().unwrap_or("warden");
    let header = encode(&challenge);
    if header.chars().count() <= MAX_CHECKED {
        assert_eq!(
            parse_challenge(&header),
            Some(challenge.clone()),
            "round trip of {header:?}"
        );
    }
    let behind = format!("Basic realm={}, {header}", quoted(realm));
    if behind.chars().count() <= MAX_CHECKED {
        assert_eq!(
            parse_challenge(&behind),
            Some(challenge),
            "behind another scheme: {behind:?}"
        );
    }
}
