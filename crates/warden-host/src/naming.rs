//! Qualified tool names: `server__tool`, unique across every connected server.
//!
//! Model APIs accept tool names of `[A-Za-z0-9_-]{1,64}`, and servers may use any string.
//! Each tool therefore gets a qualified name built from its server's name and its own,
//! with every other character replaced by `_`. A name that would be longer than 64
//! characters, or that would clash with another tool's, is cut and given a suffix taken from
//! a hash of the server and raw tool name, so it is the same on every run and independent
//! of which other tools are connected. The raw name is kept and used on the wire.

use std::collections::HashSet;

use sha2::{Digest, Sha256};

/// The longest qualified name.
pub const MAX_QUALIFIED_LEN: usize = 64;
/// Between the server's name and the tool's.
pub const SEPARATOR: &str = "__";

/// Replaces every character outside `[A-Za-z0-9_-]` with `_`.
pub fn sanitize(raw: &str) -> String {
    let cleaned: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if cleaned.is_empty() {
        "_".to_owned()
    } else {
        cleaned
    }
}

/// Whether `name` is a valid qualified name.
pub fn is_valid_qualified(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_QUALIFIED_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn hashed(base: &str, server: &str, raw: &str, hex_len: usize) -> String {
    let mut hasher = Sha256::new();
    hasher.update(server.as_bytes());
    hasher.update([0]);
    hasher.update(raw.as_bytes());
    let digest = hasher.finalize();
    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    let keep = MAX_QUALIFIED_LEN - 1 - hex_len;
    // `base` is ASCII after sanitizing, so byte slicing is on character boundaries.
    let prefix = &base[..base.len().min(keep)];
    format!("{prefix}_{}", &hex[..hex_len])
}

/// Assigns a qualified name to each `(server, raw tool name)` pair, in input order.
///
/// Pairs must be distinct. A pair keeps the plain `server__tool` form when that form is
/// short enough and needed no character replaced; every other pair gets the hashed form.
pub fn qualify(pairs: &[(&str, &str)]) -> Vec<String> {
    let bases: Vec<String> = pairs
        .iter()
        .map(|(server, raw)| format!("{}{SEPARATOR}{}", sanitize(server), sanitize(raw)))
        .collect();
    // A name that needed no change keeps the plain form: two such names cannot clash,
    // since equal plain forms mean equal server and tool. Every other one is hashed.
    let plain: Vec<bool> = pairs
        .iter()
        .zip(&bases)
        .map(|((server, raw), base)| {
            base.len() <= MAX_QUALIFIED_LEN && sanitize(server) == *server && sanitize(raw) == *raw
        })
        .collect();
    // Plain names are unique among themselves; widen the hash until the hashed ones are
    // unique too (8 hex digits nearly always suffice).
    let mut names = Vec::new();
    for hex_len in [8, 16, 32, 48] {
        names = pairs
            .iter()
            .zip(&bases)
            .zip(&plain)
            .map(|(((server, raw), base), &plain)| {
                if plain {
                    base.clone()
                } else {
                    hashed(base, server, raw, hex_len)
                }
            })
            .collect();
        let mut seen = HashSet::new();
        if names.iter().all(|name| seen.insert(name.as_str())) {
            break;
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_are_server_and_tool() {
        let names = qualify(&[("time", "get_current_time"), ("everything", "get-sum")]);
        assert_eq!(names, vec!["time__get_current_time", "everything__get-sum"]);
    }

    #[test]
    fn odd_characters_are_replaced_and_hashed() {
        let names = qualify(&[("fs", "read.file")]);
        assert!(names[0].starts_with("fs__read_file_"), "{}", names[0]);
        assert_eq!(names[0].len(), "fs__read_file_".len() + 8);
        assert!(is_valid_qualified(&names[0]));
    }

    #[test]
    fn clashing_names_both_stay_distinct_and_the_exact_one_keeps_its_form() {
        let names = qualify(&[("a", "x.y"), ("a", "x_y"), ("a", "x y")]);
        assert_eq!(names[1], "a__x_y");
        assert_ne!(names[0], names[2]);
        assert!(names.iter().all(|name| is_valid_qualified(name)));
    }

    #[test]
    fn long_names_are_cut_to_64_with_a_stable_suffix() {
        let server = "s".repeat(40);
        let tool = "t".repeat(40);
        let first = qualify(&[(&server, &tool)]);
        let again = qualify(&[("other", "tool"), (&server, &tool)]);
        assert_eq!(first[0].len(), MAX_QUALIFIED_LEN);
        assert_eq!(
            first[0], again[1],
            "the name must not depend on other tools"
        );
        assert!(is_valid_qualified(&first[0]));
    }

    #[test]
    fn names_with_a_common_long_prefix_still_differ() {
        let server = "srv";
        let a = format!("{}a", "t".repeat(70));
        let b = format!("{}b", "t".repeat(70));
        let names = qualify(&[(server, &a), (server, &b)]);
        assert_ne!(names[0], names[1]);
    }
}
