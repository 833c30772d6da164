//! End-to-end tests of the audit log: `warden call` records every attempt, `warden audit`
//! shows them, redacted, filtered by server and time. Against the test server
//! (`warden-testserver good`: tools `echo`, `add` and `fail`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};
use support::{Scratch, assert_exit, describe, json, server_toml, stderr, stdout, testserver_bin};

const LIMIT: Duration = Duration::from_secs(30);

/// Secret values the calls below pass; none may appear in `warden audit` output.
const SECRETS: [&str; 3] = ["abc.def", "s3cret", "hunter2"];

fn run(scratch: &Scratch, config: &str, args: &[&str]) -> Output {
    let mut full = vec!["--config", config];
    full.extend_from_slice(args);
    scratch.run(&full, LIMIT)
}

/// The rows of `warden audit --json ARGS...`.
fn audit_rows(scratch: &Scratch, args: &[&str]) -> Vec<Value> {
    let mut full = vec!["audit", "--json"];
    full.extend_from_slice(args);
    let output = scratch.run(&full, LIMIT);
    assert_exit(&output, 0);
    for secret in SECRETS {
        assert!(!stdout(&output).contains(secret), "{}", describe(&output));
    }
    json(&output).as_array().unwrap().clone()
}

#[test]
fn every_call_attempt_is_recorded_redacted_and_filtered() {
    let scratch = Scratch::new();
    let config = scratch.config(&format!(
        "{}{}[[policy.rules]]\ntools = \"good__add\"\neffect = \"deny\"\nnote = \"no adding\"\n",
        server_toml("good", &testserver_bin(), &["good"], ""),
        server_toml("other", &testserver_bin(), &["good"], ""),
    ));
    let config = config.to_str().unwrap();

    // Denied: nothing sent.
    let output = run(
        &scratch,
        config,
        &["call", "good/add", "--args", r#"{"a":1,"b":2}"#, "--yes"],
    );
    assert_exit(&output, 4);
    // Refused for its arguments, before any decision (with a secret under a secret key).
    let output = run(
        &scratch,
        config,
        &[
            "call",
            "good/echo",
            "--args",
            r#"{"message":5,"password":"hunter2"}"#,
            "--yes",
        ],
    );
    assert_exit(&output, 2);
    // Asked about, approved by --yes, run.
    let output = run(
        &scratch,
        config,
        &[
            "call",
            "good/echo",
            "--args",
            r#"{"message":"hi"}"#,
            "--yes",
        ],
    );
    assert_exit(&output, 0);
    // Secret-looking values, by pattern and by key; the tool reports an error.
    let output = run(
        &scratch,
        config,
        &[
            "call",
            "good/fail",
            "--args",
            r#"{"message":"Bearer abc.def","token":"s3cret"}"#,
            "--yes",
        ],
    );
    assert_exit(&output, 1);
    // Asked about, no terminal, no --yes: not approved.
    let output = run(
        &scratch,
        config,
        &["call", "other/echo", "--args", r#"{"message":"hi"}"#],
    );
    assert_exit(&output, 4);

    let rows = audit_rows(&scratch, &[]);
    assert_eq!(rows.len(), 5, "{rows:#?}");
    let ids: Vec<i64> = rows.iter().map(|r| r["id"].as_i64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let times: Vec<i64> = rows
        .iter()
        .map(|r| r["time_ms"].as_i64().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    for row in &rows {
        assert_eq!(row["front_end"], "cli");
        assert!(row["time"].as_str().unwrap().ends_with('Z'), "{row}");
    }

    let denied = &rows[0];
    assert_eq!(denied["tool"], "good__add");
    assert_eq!(denied["server"], "good");
    assert_eq!(denied["decision"], "deny");
    assert_eq!(denied["outcome"], "denied");
    assert_eq!(denied["executed"], false);
    assert_eq!(denied["approved_by"], Value::Null);
    assert_eq!(denied["latency_ms"], Value::Null);
    assert_eq!(denied["arguments"], json!({"a": 1, "b": 2}));
    assert_eq!(denied["reasons"][0]["kind"], "rule:0");
    assert_eq!(
        denied["reasons"][0]["text"],
        "policy.rules[0] (good__add) denies: no adding"
    );

    let invalid = &rows[1];
    assert_eq!(invalid["tool"], "good__echo");
    assert_eq!(invalid["decision"], Value::Null);
    assert_eq!(invalid["outcome"], "invalid_arguments");
    assert_eq!(invalid["executed"], false);
    assert_eq!(
        invalid["arguments"],
        json!({"message": 5, "password": "<redacted>"})
    );
    assert!(
        invalid["error"]
            .as_str()
            .unwrap()
            .contains("/message (type)"),
        "{invalid}"
    );

    let ran = &rows[2];
    assert_eq!(ran["decision"], "ask");
    assert_eq!(ran["approved_by"], "--yes");
    assert_eq!(ran["executed"], true);
    assert_eq!(ran["outcome"], "ok");
    assert!(ran["latency_ms"].as_i64().unwrap() >= 0, "{ran}");
    assert!(ran["result_bytes"].as_i64().unwrap() > 10, "{ran}");
    assert_eq!(ran["reasons"][0]["kind"], "default");

    let secret = &rows[3];
    assert_eq!(secret["tool"], "good__fail");
    assert_eq!(secret["outcome"], "tool_error");
    assert_eq!(secret["executed"], true);
    assert_eq!(
        secret["arguments"],
        json!({"message": "Bearer <redacted>", "token": "<redacted>"})
    );

    let not_approved = &rows[4];
    assert_eq!(not_approved["server"], "other");
    assert_eq!(not_approved["tool"], "other__echo");
    assert_eq!(not_approved["outcome"], "not_approved");
    assert_eq!(not_approved["executed"], false);

    // The text output: one line per row, no secrets either.
    let output = scratch.run(&["audit"], LIMIT);
    assert_exit(&output, 0);
    let text = stdout(&output);
    assert_eq!(text.lines().count(), 5, "{}", describe(&output));
    for secret in SECRETS {
        assert!(!text.contains(secret), "{}", describe(&output));
    }
    let first = text.lines().next().unwrap();
    for part in ["deny", "denied", "good__add", "no adding"] {
        assert!(first.contains(part), "{first}");
    }
    assert!(text.lines().nth(2).unwrap().contains("ms"), "{text}");

    // Filters.
    let good = audit_rows(&scratch, &["--server", "good"]);
    assert_eq!(good.len(), 4);
    assert!(good.iter().all(|r| r["server"] == "good"));
    assert_eq!(audit_rows(&scratch, &["--server", "other"]).len(), 1);
    assert_eq!(audit_rows(&scratch, &["--since", "1h"]).len(), 5);
    assert_eq!(
        audit_rows(&scratch, &["--since", "2999-01-01T00:00:00Z"]).len(),
        0
    );
    let latest = audit_rows(&scratch, &["--limit", "2"]);
    assert_eq!(latest.len(), 2);
    assert_eq!(latest[1]["tool"], "other__echo");

    // A bad time is a usage error that says what it expects.
    let output = scratch.run(&["audit", "--since", "yesterday"], LIMIT);
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("RFC 3339"),
        "{}",
        describe(&output)
    );

    scratch.assert_no_leftovers();
}

#[test]
fn a_failed_audit_write_is_a_warning_and_keeps_the_exit_code() {
    let scratch = Scratch::new();
    let config = scratch.config(&server_toml("good", &testserver_bin(), &["good"], ""));
    let config = config.to_str().unwrap();
    // Create the store, then make every audit insert fail.
    assert_exit(&scratch.run(&["audit"], LIMIT), 0);
    let db = scratch.path().join("state/warden/state.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TRIGGER refuse BEFORE INSERT ON audit BEGIN SELECT RAISE(ABORT, 'refused'); END;",
    )
    .unwrap();
    drop(conn);

    let output = run(
        &scratch,
        config,
        &[
            "call",
            "good/echo",
            "--args",
            r#"{"message":"hi"}"#,
            "--yes",
        ],
    );
    assert_exit(&output, 0);
    assert_eq!(stdout(&output), "echo: hi\n");
    assert!(
        stderr(&output).contains("warning: the audit log did not record this call of `good__echo`"),
        "{}",
        describe(&output)
    );
    assert!(audit_rows(&scratch, &[]).is_empty());
    scratch.assert_no_leftovers();
}
