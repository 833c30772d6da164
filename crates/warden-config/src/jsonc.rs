//! JSON with comments and trailing commas (VS Code's "JSONC"), turned into plain JSON.
//!
//! Comments and trailing commas are overwritten with spaces rather than removed, and line
//! breaks are kept, so every line and column `serde_json` reports is still true of the
//! original text.

/// An unterminated `/* ...` comment, at byte `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UnterminatedComment {
    pub offset: usize,
}

/// Returns `text` with comments and trailing commas blanked out.
pub(crate) fn strip(text: &str) -> Result<String, UnterminatedComment> {
    let mut bytes = text.as_bytes().to_vec();
    blank_comments(&mut bytes)?;
    blank_trailing_commas(&mut bytes);
    // Only ASCII bytes and whole comments (every byte of a multi-byte character) were
    // replaced by ASCII spaces, so the text is still UTF-8; fall back to the original if not.
    Ok(String::from_utf8(bytes).unwrap_or_else(|_| text.to_owned()))
}

fn blank(byte: &mut u8) {
    if *byte != b'\n' && *byte != b'\r' {
        *byte = b' ';
    }
}

fn blank_comments(bytes: &mut [u8]) -> Result<(), UnterminatedComment> {
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match (b, bytes.get(i + 1)) {
            (b'"', _) => {
                in_string = true;
                i += 1;
            }
            (b'/', Some(b'/')) => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    blank(&mut bytes[i]);
                    i += 1;
                }
            }
            (b'/', Some(b'*')) => {
                let start = i;
                let end = bytes[i + 2..]
                    .windows(2)
                    .position(|w| w == b"*/")
                    .map(|p| i + 2 + p + 2)
                    .ok_or(UnterminatedComment { offset: start })?;
                for byte in &mut bytes[start..end] {
                    blank(byte);
                }
                i = end;
            }
            _ => i += 1,
        }
    }
    Ok(())
}

fn blank_trailing_commas(bytes: &mut [u8]) {
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if b == b',' {
            let next = bytes[i + 1..]
                .iter()
                .find(|c| !c.is_ascii_whitespace())
                .copied();
            if matches!(next, Some(b'}' | b']')) {
                bytes[i] = b' ';
            }
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_trailing_commas_become_spaces() {
        let text = "{\n  // a comment, with \"quotes\"\n  \"a\": [1, 2,], /* b\n c */ \"u\": \"http://x//y\",\n}\n";
        let plain = strip(text).unwrap();
        assert_eq!(plain.len(), text.len());
        assert_eq!(plain.lines().count(), text.lines().count());
        let value: serde_json::Value = serde_json::from_str(&plain).unwrap();
        assert_eq!(value, serde_json::json!({"a": [1, 2], "u": "http://x//y"}));
    }

    #[test]
    fn strings_keep_their_slashes_and_commas() {
        let text = r#"{"a": "// not a comment, ]", "b": "\"/*\""}"#;
        assert_eq!(strip(text).unwrap(), text);
    }

    #[test]
    fn multibyte_characters_in_comments() {
        let text = "{ /* é ü */ \"a\": 1 // ß\n}";
        let plain = strip(text).unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&plain).unwrap(),
            serde_json::json!({"a": 1})
        );
    }

    #[test]
    fn unterminated_block_comment() {
        assert_eq!(strip("{\n /* open"), Err(UnterminatedComment { offset: 3 }));
    }
}
