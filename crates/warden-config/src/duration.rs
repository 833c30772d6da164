//! Timeout values as written in Warden's TOML: `"500ms"`, `"10s"`, `"2m"` or whole seconds.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// Parses `"<digits>"`, `"<digits>ms"`, `"<digits>s"` or `"<digits>m"`; a bare number is seconds.
/// Zero is refused: a zero timeout would make every connection or call fail at once.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(digits_end);
    let shape = || {
        format!(
            "invalid duration {text:?}: expected a whole number followed by `ms`, `s` or `m`, such as \"500ms\", \"10s\" or \"2m\""
        )
    };
    if digits.is_empty() {
        return Err(shape());
    }
    let number: u64 = digits
        .parse()
        .map_err(|_| format!("invalid duration {text:?}: the number is too large"))?;
    let duration = match unit {
        "ms" => Duration::from_millis(number),
        "" | "s" => Duration::from_secs(number),
        "m" => number
            .checked_mul(60)
            .map(Duration::from_secs)
            .ok_or_else(|| format!("invalid duration {text:?}: the number is too large"))?,
        _ => return Err(shape()),
    };
    nonzero(duration)
}

fn nonzero(duration: Duration) -> Result<Duration, String> {
    if duration.is_zero() {
        Err("a timeout must be greater than zero".to_owned())
    } else {
        Ok(duration)
    }
}

/// A timeout in a TOML file: an integer number of seconds or a string with a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimeoutValue(pub Duration);

impl<'de> Deserialize<'de> for TimeoutValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TimeoutVisitor;

        impl Visitor<'_> for TimeoutVisitor {
            type Value = TimeoutValue;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a whole number of seconds or a string such as \"500ms\", \"10s\" or \"2m\"",
                )
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                nonzero(Duration::from_secs(v))
                    .map(TimeoutValue)
                    .map_err(E::custom)
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::custom("a timeout cannot be negative")),
                }
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                parse_duration(v).map(TimeoutValue).map_err(E::custom)
            }
        }

        deserializer.deserialize_any(TimeoutVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
    }

    #[test]
    fn refusals() {
        assert_eq!(
            parse_duration("0s"),
            Err("a timeout must be greater than zero".to_owned())
        );
        assert_eq!(
            parse_duration("0ms"),
            Err("a timeout must be greater than zero".to_owned())
        );
        for bad in ["", "s", "10 s", "1.5s", "10h", "-1s", "ten"] {
            let err = parse_duration(bad).unwrap_err();
            assert!(err.starts_with("invalid duration"), "{bad}: {err}");
        }
        assert_eq!(
            parse_duration("99999999999999999999s"),
            Err("invalid duration \"99999999999999999999s\": the number is too large".to_owned())
        );
    }
}
