//! The `Bearer` challenge of a 401 or 403 (`WWW-Authenticate`, RFC 6750 §3 and RFC 9728
//! §5.1): `resource_metadata`, `scope` and `error` are what the flow uses.

/// Longest header value parsed; a longer one is cut there.
const MAX_HEADER: usize = 8 * 1024;

/// What a server's `Bearer` challenge says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    /// `resource_metadata`: where the protected-resource metadata is.
    pub resource_metadata: Option<String>,
    /// `scope`: the scopes the request needs (space-separated).
    pub scope: Option<String>,
    /// `error`: `invalid_token`, `insufficient_scope`, ...
    pub error: Option<String>,
}

impl Challenge {
    /// The scopes of `scope`, split on spaces.
    pub fn scopes(&self) -> Vec<String> {
        split_scopes(self.scope.as_deref().unwrap_or_default())
    }

    /// True for `error="insufficient_scope"`.
    pub fn is_insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// Splits a space-separated scope string.
pub fn split_scopes(text: &str) -> Vec<String> {
    text.split(' ')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The `Bearer` challenge in `header`, if there is one. Other schemes are skipped.
pub fn parse(header: &str) -> Option<Challenge> {
    let header = match header.char_indices().nth(MAX_HEADER) {
        Some((cut, _)) => &header[..cut],
        None => header,
    };
    let mut tokens = Lexer {
        rest: header.as_bytes(),
    };
    let mut in_bearer = false;
    let mut found: Option<Challenge> = None;
    // A challenge is `scheme [param, param...]`; challenges are separated by commas too,
    // so a bare token not followed by `=` starts a new challenge.
    while let Some(token) = tokens.token() {
        if tokens.eat(b'=') {
            let value = tokens.value().unwrap_or_default();
            if in_bearer && let Some(challenge) = found.as_mut() {
                match token.to_ascii_lowercase().as_str() {
                    "resource_metadata" => challenge.resource_metadata = Some(value),
                    "scope" => challenge.scope = Some(value),
                    "error" => challenge.error = Some(value),
                    _ => {}
                }
            }
        } else if found.is_some() && in_bearer {
            break; // the next challenge begins: the Bearer one is complete
        } else {
            in_bearer = token.eq_ignore_ascii_case("bearer");
            if in_bearer {
                found = Some(Challenge::default());
            }
        }
        tokens.eat(b',');
    }
    found
}

struct Lexer<'a> {
    rest: &'a [u8],
}

impl Lexer<'_> {
    fn skip_space(&mut self) {
        while let [b' ' | b'\t' | b',', rest @ ..] = self.rest {
            self.rest = rest;
        }
    }

    fn eat(&mut self, byte: u8) -> bool {
        while let [b' ' | b'\t', rest @ ..] = self.rest {
            self.rest = rest;
        }
        if self.rest.first() == Some(&byte) {
            self.rest = &self.rest[1..];
            true
        } else {
            false
        }
    }

    fn token(&mut self) -> Option<String> {
        self.skip_space();
        let end = self
            .rest
            .iter()
            .position(|b| matches!(b, b' ' | b'\t' | b',' | b'=' | b'"'))
            .unwrap_or(self.rest.len());
        if end == 0 {
            if self.rest.is_empty() {
                return None;
            }
            // A stray quote or `=`: skip one byte and go on.
            self.rest = &self.rest[1..];
            return Some(String::new());
        }
        let token = String::from_utf8_lossy(&self.rest[..end]).into_owned();
        self.rest = &self.rest[end..];
        Some(token)
    }

    fn value(&mut self) -> Option<String> {
        while let [b' ' | b'\t', rest @ ..] = self.rest {
            self.rest = rest;
        }
        if self.eat(b'"') {
            let mut out = Vec::new();
            while let Some((&byte, rest)) = self.rest.split_first() {
                self.rest = rest;
                match byte {
                    b'"' => break,
                    b'\\' => {
                        if let Some((&escaped, rest)) = self.rest.split_first() {
                            out.push(escaped);
                            self.rest = rest;
                        }
                    }
                    other => out.push(other),
                }
            }
            return Some(String::from_utf8_lossy(&out).into_owned());
        }
        let end = self
            .rest
            .iter()
            .position(|b| matches!(b, b' ' | b'\t' | b','))
            .unwrap_or(self.rest.len());
        let value = String::from_utf8_lossy(&self.rest[..end]).into_owned();
        self.rest = &self.rest[end..];
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_parameters_are_read_quoted_or_not() {
        let challenge = parse(
            r#"Bearer resource_metadata="https://a.example/.well-known/oauth-protected-resource/mcp", scope="mcp:basic mcp:write", error=insufficient_scope"#,
        )
        .unwrap();
        assert_eq!(
            challenge.resource_metadata.as_deref(),
            Some("https://a.example/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(challenge.scopes(), vec!["mcp:basic", "mcp:write"]);
        assert!(challenge.is_insufficient_scope());
    }

    #[test]
    fn other_schemes_are_skipped_and_escapes_honoured() {
        let challenge =
            parse(r#"Basic realm="x", Bearer error="invalid_token", scope="a \"b\"""#).unwrap();
        assert_eq!(challenge.error.as_deref(), Some("invalid_token"));
        assert_eq!(challenge.scope.as_deref(), Some(r#"a "b""#));
        assert_eq!(challenge.resource_metadata, None);
        assert!(parse(r#"Basic realm="x""#).is_none());
        assert_eq!(parse("Bearer"), Some(Challenge::default()));
        // A later challenge's parameters do not leak into the Bearer one.
        let challenge = parse(r#"Bearer scope="a", DPoP scope="b""#).unwrap();
        assert_eq!(challenge.scope.as_deref(), Some("a"));
    }

    #[test]
    fn garbage_does_not_panic() {
        for text in [
            "",
            "=",
            "\"",
            "Bearer =\"",
            "Bearer a=\"unterminated",
            ",,,",
            "Bearer ,=,",
        ] {
            let _ = parse(text);
        }
    }
}
