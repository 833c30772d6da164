//! `warden audit`: the audit log of tool calls, from the state store.
//!
//! Every `warden call` attempt is one row (see `docs/policy.md`, "Audit log"). Times are
//! shown in UTC, RFC 3339; `--since` takes an RFC 3339 time or a duration back from now.

use serde_json::{Value, json};
use warden_config::Environment;
use warden_store::{AuditFilter, AuditRow};

use crate::cli::AuditArgs;
use crate::exit::{Code, Failure};
use crate::untrusted::{Shape, inert};

/// Longest reasons text on a line of the text output.
const SHORT_REASONS_CHARS: usize = 100;

/// Runs `warden audit`.
pub fn run(args: &AuditArgs) -> Result<Code, Failure> {
    let since_ms = match &args.since {
        Some(text) => Some(
            parse_since(text, now_ms())
                .map_err(|error| Failure::usage(anyhow::anyhow!("--since {text:?}: {error}")))?,
        ),
        None => None,
    };
    let env = Environment::from_process().map_err(Failure::usage)?;
    let store = super::open_store(&env)?;
    let filter = AuditFilter {
        server: args.server.clone(),
        since_ms,
    };
    let rows = store
        .audit(&filter, usize::try_from(args.limit).unwrap_or(usize::MAX))
        .map_err(|error| Failure {
            code: Code::Unavailable,
            error: error.into(),
        })?;
    if args.json {
        let rows: Vec<Value> = rows.iter().map(row_json).collect();
        println!("{}", crate::render::pretty(&Value::Array(rows)));
    } else {
        for row in &rows {
            println!("{}", row_line(row));
        }
        if rows.is_empty() {
            eprintln!("warden: no calls recorded match");
        }
    }
    Ok(Code::Ok)
}

/// One row as a JSON object.
fn row_json(row: &AuditRow) -> Value {
    let entry = &row.entry;
    let mut value = json!({
        "id": row.id,
        "time": format_time(entry.time_ms),
        "time_ms": entry.time_ms,
        "front_end": entry.front_end,
        "server": entry.server,
        "tool": entry.tool,
        "arguments": entry.arguments,
        "decision": entry.decision,
        "reasons": entry.reasons,
        "approved_by": entry.approved_by,
        "executed": entry.executed,
        "outcome": entry.outcome,
        "error": entry.error,
        "latency_ms": entry.latency_ms,
        "result_bytes": entry.result_bytes,
    });
    // Named only for a front end with many clients (the gateway).
    if let Some(client) = &entry.client {
        value["client"] = json!(client);
    }
    value
}

/// One row as a line: time, decision, outcome, tool, latency, short reasons.
fn row_line(row: &AuditRow) -> String {
    let entry = &row.entry;
    let latency = entry
        .latency_ms
        .map_or_else(|| "-".to_owned(), |ms| format!("{ms}ms"));
    let mut why: Vec<String> = entry
        .reasons
        .as_array()
        .map(|reasons| {
            reasons
                .iter()
                .filter_map(|r| r["text"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if let Some(error) = &entry.error
        && entry.outcome != "denied"
        && entry.outcome != "not_approved"
    {
        why.push(format!(
            "error: {}",
            error.lines().next().unwrap_or_default()
        ));
    }
    let why = why.join("; ");
    let why = match why.char_indices().nth(SHORT_REASONS_CHARS) {
        Some((end, _)) => format!("{}…", &why[..end]),
        None => why,
    };
    // The error may quote a server, and the tool name may be a model's: made inert.
    format!(
        "{}  {:<5}  {:<17}  {}  {}  {}",
        format_time(entry.time_ms),
        entry.decision.as_deref().unwrap_or("-"),
        entry.outcome,
        inert(&entry.tool, Shape::Line),
        latency,
        inert(&why, Shape::Line)
    )
    .trim_end()
    .to_owned()
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `--since`: a duration back from `now_ms` (`90s`, `10m`, `2h`, `7d`, `2w`) or an RFC 3339
/// time (`2026-11-30T08:00:00Z`, `2026-11-30T09:00:00+01:00`; a bare date is midnight UTC).
pub fn parse_since(text: &str, now_ms: i64) -> Result<i64, String> {
    let text = text.trim();
    if let Some(unit) = text.chars().last().filter(char::is_ascii_alphabetic)
        && text.len() > 1
        && text[..text.len() - 1].bytes().all(|b| b.is_ascii_digit())
    {
        let count: i64 = text[..text.len() - 1]
            .parse()
            .map_err(|_| "the number is too large".to_owned())?;
        let unit_ms: i64 = match unit {
            's' => 1_000,
            'm' => 60_000,
            'h' => 3_600_000,
            'd' => 86_400_000,
            'w' => 7 * 86_400_000,
            _ => return Err(format!("unknown unit `{unit}` (use s, m, h, d or w)")),
        };
        let back = count
            .checked_mul(unit_ms)
            .ok_or_else(|| "the duration is too long".to_owned())?;
        return Ok(now_ms.saturating_sub(back));
    }
    parse_rfc3339(text).ok_or_else(|| {
        "expected a duration (10m, 2h, 7d) or an RFC 3339 time (2026-11-30T08:00:00Z)".to_owned()
    })
}

/// Parses `YYYY-MM-DD[(T| )HH:MM:SS[.fraction](Z|±HH:MM)]` into milliseconds since the epoch.
fn parse_rfc3339(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(range)?;
        if part.is_empty() || !part.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let date_ms = days_from_civil(year, month, day) * 86_400_000;
    if b.len() == 10 {
        return Some(date_ms);
    }
    if !matches!(b[10], b'T' | b't' | b' ') || b.len() < 20 || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut at = 19;
    let mut millis = 0;
    if b[at] == b'.' {
        let start = at + 1;
        at = start;
        while at < b.len() && b[at].is_ascii_digit() {
            at += 1;
        }
        if at == start {
            return None;
        }
        let digits = &text[start..at.min(start + 3)];
        millis = digits.parse::<i64>().ok()? * 10_i64.pow(3 - digits.len() as u32);
    }
    let offset_minutes = match &text[at..] {
        "Z" | "z" => 0,
        zone if zone.len() == 6 && matches!(zone.as_bytes()[0], b'+' | b'-') => {
            if zone.as_bytes()[3] != b':' {
                return None;
            }
            let (h, m) = (number(at + 1..at + 3)?, number(at + 4..at + 6)?);
            if h > 23 || m > 59 {
                return None;
            }
            let minutes = h * 60 + m;
            if zone.starts_with('-') {
                -minutes
            } else {
                minutes
            }
        }
        _ => return None,
    };
    Some(date_ms + ((hour * 60 + minute - offset_minutes) * 60 + second) * 1_000 + millis)
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    // Count from 0000-03-01 so the leap day ends a year; 146,097 days per 400 years.
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400);
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date of a day counted from 1970-01-01: (year, month, day).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Milliseconds since the epoch as RFC 3339 in UTC, with milliseconds.
pub fn format_time(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1_000 % 60,
        in_day % 1_000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_formatted_in_utc() {
        assert_eq!(format_time(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_time(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(format_time(1_796_029_509_123), "2026-11-30T09:05:09.123Z");
        assert_eq!(format_time(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn rfc3339_times_round_trip_and_offsets_apply() {
        for ms in [0, 951_782_400_000, 1_796_029_509_123, 4_102_444_800_000] {
            assert_eq!(parse_since(&format_time(ms), 0), Ok(ms));
        }
        assert_eq!(parse_since("1970-01-01T01:00:00+01:00", 0), Ok(0));
        assert_eq!(parse_since("1970-01-01 00:00:00.5Z", 0), Ok(500));
        assert_eq!(parse_since("1970-01-02", 0), Ok(86_400_000));
        for bad in [
            "yesterday",
            "2026-13-01",
            "2026-02-30",
            "2026-11-30T25:00:00Z",
            "2026-11-30T08:00:00",
            "2026-11-30T08:00:00+0100",
            "10",
            "10y",
            "",
        ] {
            assert!(parse_since(bad, 0).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_count_back_from_now() {
        let now = 1_000_000_000;
        assert_eq!(parse_since("90s", now), Ok(now - 90_000));
        assert_eq!(parse_since("10m", now), Ok(now - 600_000));
        assert_eq!(parse_since("2h", now), Ok(now - 7_200_000));
        assert_eq!(parse_since("7d", now), Ok(now - 7 * 86_400_000));
        assert_eq!(parse_since("1w", now), Ok(now - 7 * 86_400_000));
        assert!(parse_since("99999999999999999999d", now).is_err());
    }
}
