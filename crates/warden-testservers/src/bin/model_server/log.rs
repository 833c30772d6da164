//! The request log: one JSON object per model request, appended and flushed before the
//! answer is sent, so a test that has its answer can read the line.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::sync::Mutex;

use http::HeaderMap;
use serde_json::{Value, json};

/// Where log lines go; without `--log`, nowhere.
pub(crate) struct RequestLog {
    file: Option<Mutex<File>>,
}

impl RequestLog {
    /// Opens (creating, appending to) the log file, if one was asked for.
    pub(crate) fn open(path: Option<&Path>) -> io::Result<RequestLog> {
        let file = match path {
            Some(path) => Some(Mutex::new(
                OpenOptions::new().create(true).append(true).open(path)?,
            )),
            None => None,
        };
        Ok(RequestLog { file })
    }

    /// Appends one line; a failure is reported on stderr and otherwise ignored, so a full
    /// disk shows up in the test output rather than as a different answer.
    pub(crate) fn write(&self, entry: &str) {
        let Some(file) = &self.file else { return };
        let mut file = match file.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut line = entry.to_string();
        line.push('\n');
        if let Err(e) = file.write_all(line.as_bytes()).and_then(|()| file.flush()) {
            eprintln!("warden-model-server: cannot write the request log: {e}");
        }
    }
}

/// The headers a test may assert on: versions and betas by value, credentials only by
/// presence.
pub(crate) fn selected_headers(headers: &HeaderMap) -> Value {
    let text = |name: &str| {
        headers
            .get(name)
            .map(|v| Value::String(String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .unwrap_or(Value::Null)
    };
    json!({
        "anthropic-version": text("anthropic-version"),
        "anthropic-beta": text("anthropic-beta"),
        "content-type": text("content-type"),
        "x-api-key": headers.contains_key("x-api-key"),
        "authorization": headers.contains_key("authorization"),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn credentials_are_logged_by_presence_only() {
        let mut headers = HeaderMap::new();
        headers.insert("x-api-key", "secret-value".parse().unwrap());
        headers.insert("anthropic-version", "2023-06-01".parse().unwrap());
        let selected = selected_headers(&headers);
        assert_eq!(selected["x-api-key"], json!(true));
        assert_eq!(selected["authorization"], json!(false));
        assert_eq!(selected["anthropic-version"], json!("2023-06-01"));
        assert!(!selected.to_string().contains("secret-value"));
    }
}
