//! The server naming rule, shared by every format.
//!
//! Names end up in tool names (`server__tool`), file names and log lines, so they are kept
//! to a small, unambiguous alphabet.

/// Longest accepted server name, in characters.
pub const MAX_SERVER_NAME_LEN: usize = 64;

/// A server name Warden keeps for its own tools (`warden__search_tools`), so no server
/// can define a tool that shadows one of them.
pub const RESERVED_SERVER_NAME: &str = "warden";

/// Checks a server name: ASCII letters, digits, `_` and `-`, 1 to 64 characters, and not
/// [`RESERVED_SERVER_NAME`].
///
/// The error is a sentence saying which rule the name breaks.
pub fn validate_server_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a server name cannot be empty".to_owned());
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(format!(
            "{bad:?} is not allowed; use ASCII letters, digits, `_` and `-`"
        ));
    }
    if name.eq_ignore_ascii_case(RESERVED_SERVER_NAME) {
        return Err(format!(
            "`{name}` is reserved for Warden's own tools; choose another name"
        ));
    }
    if name.len() > MAX_SERVER_NAME_LEN {
        return Err(format!(
            "a server name has at most {MAX_SERVER_NAME_LEN} characters, this one has {}",
            name.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_allowed_alphabet() {
        for name in ["time", "my-server_2", "A", "x".repeat(64).as_str()] {
            assert_eq!(validate_server_name(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn rejects_with_a_reason() {
        assert_eq!(
            validate_server_name(""),
            Err("a server name cannot be empty".to_owned())
        );
        assert_eq!(
            validate_server_name("my server"),
            Err("' ' is not allowed; use ASCII letters, digits, `_` and `-`".to_owned())
        );
        assert_eq!(
            validate_server_name("a.b"),
            Err("'.' is not allowed; use ASCII letters, digits, `_` and `-`".to_owned())
        );
        assert_eq!(
            validate_server_name("café"),
            Err("'é' is not allowed; use ASCII letters, digits, `_` and `-`".to_owned())
        );
        assert!(
            validate_server_name("warden")
                .unwrap_err()
                .contains("reserved")
        );
        assert!(
            validate_server_name("Warden")
                .unwrap_err()
                .contains("reserved")
        );
        assert_eq!(validate_server_name("warden-notes"), Ok(()));
        assert_eq!(
            validate_server_name(&"x".repeat(65)),
            Err("a server name has at most 64 characters, this one has 65".to_owned())
        );
    }
}
