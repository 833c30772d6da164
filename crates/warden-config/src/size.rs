//! Sizes as written in Warden's TOML: `"512M"`, `"2G"`, `"64K"`, or a whole number of bytes.
//!
//! The units are powers of 1024 (`K`, `M`, `G`, `T`, optionally followed by `iB` or `B`,
//! upper or lower case), because they bound memory and a memory-backed filesystem.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// Parses `"<digits>"` (bytes) or `"<digits><unit>"` with a unit among `K`, `M`, `G`, `T`
/// (powers of 1024; `KiB`, `KB`, `k` and the like are accepted too).
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(digits_end);
    let shape = || {
        format!(
            "invalid size {text:?}: expected a whole number of bytes, or one followed by \
             K, M, G or T (powers of 1024), such as \"512M\" or \"2G\""
        )
    };
    if digits.is_empty() {
        return Err(shape());
    }
    let shift = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => return Err(shape()),
    };
    let too_large = || format!("invalid size {text:?}: the number is too large");
    let number: u64 = digits.parse().map_err(|_| too_large())?;
    number.checked_mul(1u64 << shift).ok_or_else(too_large)
}

/// A size in a TOML file, as written: an integer or a string, parsed where its key is known
/// (so that the error can name it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SizeText(pub String);

impl<'de> Deserialize<'de> for SizeText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SizeVisitor;

        impl Visitor<'_> for SizeVisitor {
            type Value = SizeText;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number of bytes or a string such as \"512M\" or \"2G\"")
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(SizeText(v.to_string()))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(SizeText(v.to_string()))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(SizeText(v.to_owned()))
            }
        }

        deserializer.deserialize_any(SizeVisitor)
    }
}

/// Formats a byte count the way [`parse_size`] reads it, in the largest exact unit.
pub fn format_size(bytes: u64) -> String {
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_powers_of_1024() {
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert_eq!(parse_size("64KiB"), Ok(64 << 10));
        assert_eq!(parse_size("1T"), Ok(1 << 40));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4096B"), Ok(4096));
    }

    #[test]
    fn malformed_sizes_are_refused() {
        for bad in ["", "M", "1.5G", "2 G", "-1", "2P", "ten", "2GG"] {
            let err = parse_size(bad).unwrap_err();
            assert!(err.starts_with("invalid size"), "{bad}: {err}");
        }
        let err = parse_size("99999999999T").unwrap_err();
        assert!(err.contains("too large"), "{err}");
    }

    #[test]
    fn formatting_round_trips() {
        for bytes in [512 << 20, 2 << 30, 1536 << 20, 1000, 64 << 10] {
            assert_eq!(parse_size(&format_size(bytes)), Ok(bytes));
        }
        assert_eq!(format_size(2 << 30), "2G");
        assert_eq!(format_size(1536 << 20), "1536M");
    }
}
