//! Mode `live-resources`: a server whose resources and prompts change and whose resources
//! are updated, with subscriptions (2025-11-25), for the gateway's relaying tests
//! (decision 0039). Its tools are the `good` server's, plus:
//!
//! - `touch {uris: [...]}`: sends `notifications/resources/updated` for each URI (whether
//!   or not anyone subscribed: the gateway must deliver only to subscribers), before its
//!   answer;
//! - `change_lists`: adds `live://c` and the prompt `extra`, and sends
//!   `notifications/resources/list_changed` and `notifications/prompts/list_changed`
//!   before its answer.
//!
//! Every `initialize` (a start, as Warden starts it), list request, subscription and
//! unsubscription it receives is appended to
//! `$WARDEN_TEST_COUNT_LOG` (one line: the method, and the URI for subscriptions), so a
//! test counts how often the gateway read its lists. With `$WARDEN_TEST_LIST_DELAY_MS`, it
//! waits that long before answering each page of `resources/list`, and each page holds
//! one resource (a slow upstream whose every page is within a call timeout, but not the
//! whole list). With `$WARDEN_TEST_UNSUBSCRIBE_FAILS` set, every `resources/unsubscribe`
//! is logged and answered with an error (the subscription stays), for the gateway's
//! failed-unsubscribe test.

use std::collections::BTreeSet;

use serde_json::{Value, json};

/// The file list requests and subscriptions are appended to.
pub(crate) const COUNT_LOG_ENV: &str = "WARDEN_TEST_COUNT_LOG";
/// Milliseconds to wait before answering `resources/list`.
pub(crate) const LIST_DELAY_ENV: &str = "WARDEN_TEST_LIST_DELAY_MS";
/// Set: `resources/unsubscribe` fails.
pub(crate) const UNSUBSCRIBE_FAILS_ENV: &str = "WARDEN_TEST_UNSUBSCRIBE_FAILS";

/// What the server has changed and who subscribed.
#[derive(Debug, Default)]
pub(crate) struct Live {
    changed: bool,
    subscribed: BTreeSet<String>,
    /// Notifications to send before the next answer.
    outbox: Vec<Value>,
}

/// The capabilities it declares.
pub(crate) fn capabilities() -> Value {
    json!({"tools": {}, "resources": {"subscribe": true, "listChanged": true},
           "prompts": {"listChanged": true}})
}

/// Its two tools besides the `good` server's.
pub(crate) fn tool_definitions() -> Vec<Value> {
    vec![
        json!({"name": "touch", "description": "Says that resources were updated.",
               "inputSchema": {"type": "object", "properties": {
                   "uris": {"type": "array", "items": {"type": "string"}}},
                   "required": ["uris"]}}),
        json!({"name": "change_lists", "description": "Adds a resource and a prompt.",
               "inputSchema": {"type": "object", "properties": {}}}),
    ]
}

fn notification(method: &str, params: Option<Value>) -> Value {
    let mut message = json!({"jsonrpc": "2.0", "method": method});
    if let Some(params) = params {
        message["params"] = params;
    }
    message
}

pub(crate) fn record(line: &str) {
    if let Some(path) = std::env::var_os(COUNT_LOG_ENV) {
        use std::io::Write;
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(file, "{line}");
        }
    }
}

impl Live {
    /// Notifications to send before the answer now being written.
    pub(crate) fn take_outbox(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.outbox)
    }

    /// Runs `touch` or `change_lists`; `None` for another tool.
    pub(crate) fn call(&mut self, name: &str, arguments: &Value) -> Option<Value> {
        match name {
            "touch" => {
                let uris: Vec<&str> = arguments
                    .get("uris")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                for uri in &uris {
                    self.outbox.push(notification(
                        "notifications/resources/updated",
                        Some(json!({"uri": uri})),
                    ));
                }
                Some(crate::tools::text_result(
                    &format!("touched {}", uris.join(" ")),
                    false,
                ))
            }
            "change_lists" => {
                self.changed = true;
                self.outbox
                    .push(notification("notifications/resources/list_changed", None));
                self.outbox
                    .push(notification("notifications/prompts/list_changed", None));
                Some(crate::tools::text_result("changed", false))
            }
            _ => None,
        }
    }

    /// Answers the resource and prompt methods; `None` for any other method.
    pub(crate) fn answer(
        &mut self,
        method: &str,
        params: &Value,
    ) -> Option<Result<Value, (i64, String)>> {
        let uri = params
            .get("uri")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let answer = match method {
            "resources/list" => {
                record(method);
                let mut resources = vec![
                    json!({"uri": "live://a", "name": "a", "mimeType": "text/plain"}),
                    json!({"uri": "live://b", "name": "b", "mimeType": "text/plain"}),
                ];
                if self.changed {
                    resources
                        .push(json!({"uri": "live://c", "name": "c", "mimeType": "text/plain"}));
                }
                match std::env::var(LIST_DELAY_ENV)
                    .ok()
                    .and_then(|ms| ms.parse::<u64>().ok())
                {
                    // Slow: each page waits, and each page has one resource.
                    Some(delay) => {
                        std::thread::sleep(std::time::Duration::from_millis(delay));
                        let start = params
                            .get("cursor")
                            .and_then(Value::as_str)
                            .and_then(|cursor| cursor.parse::<usize>().ok())
                            .unwrap_or(0)
                            .min(resources.len());
                        let page: Vec<Value> =
                            resources.iter().skip(start).take(1).cloned().collect();
                        let mut result = json!({"resources": page});
                        if start + 1 < resources.len() {
                            result["nextCursor"] = json!((start + 1).to_string());
                        }
                        Ok(result)
                    }
                    None => Ok(json!({"resources": resources})),
                }
            }
            "resources/templates/list" => {
                record(method);
                Ok(json!({"resourceTemplates": []}))
            }
            "resources/read" => {
                let known = ["live://a", "live://b"].contains(&uri.as_str())
                    || (self.changed && uri == "live://c");
                if known {
                    Ok(json!({"contents": [{"uri": uri, "mimeType": "text/plain",
                                            "text": format!("the live resource {uri}")}]}))
                } else {
                    Err((-32602, format!("Resource not found: {uri}")))
                }
            }
            "resources/subscribe" => {
                record(&format!("{method} {uri}"));
                self.subscribed.insert(uri);
                Ok(json!({}))
            }
            "resources/unsubscribe" => {
                record(&format!("{method} {uri}"));
                if std::env::var_os(UNSUBSCRIBE_FAILS_ENV).is_some() {
                    Err((-32603, format!("cannot unsubscribe from {uri} now")))
                } else {
                    self.subscribed.remove(&uri);
                    Ok(json!({}))
                }
            }
            "prompts/list" => {
                record(method);
                let mut prompts = vec![json!({"name": "live", "description": "A live prompt."})];
                if self.changed {
                    prompts.push(json!({"name": "extra", "description": "Added later."}));
                }
                Ok(json!({"prompts": prompts}))
            }
            "prompts/get" => {
                let name = params
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                Ok(json!({"messages": [{"role": "user", "content": {
                    "type": "text", "text": format!("the live prompt {name}")}}]}))
            }
            _ => return None,
        };
        Some(answer)
    }
}
