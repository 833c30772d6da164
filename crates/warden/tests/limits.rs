//! One server cannot take the machine down (issue 10, section 7), and a confined server does
//! not see Warden's command line (section 9), checked end to end with the real `warden`
//! binary and the test server's hog modes.
//!
//! Each hog is configured with a small limit and asks for far more. The call must fail with
//! an error that names the limit, while Warden itself and the other servers in the same run
//! carry on. The same hogs asking for less than their limits answer normally: the limits
//! do not get in an honest server's way.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{ModelServer, Scratch, assert_exit, describe, server_toml, stdout, transcript};

const LIMIT: Duration = Duration::from_secs(120);

/// A test server (a copy the sandbox uid can execute) in `mode` with `args`, limited by
/// `sandbox` (an inline table's contents).
fn hog(scratch: &Scratch, name: &str, args: &[&str], sandbox: &str) -> String {
    let program = support::copied_server(scratch);
    server_toml(name, &program, args, &format!("sandbox = {{ {sandbox} }}"))
}

/// Every tool of every server allowed, so the run never stops to ask.
const ALLOW_ALL: &str = "[[policy.rules]]\ntools = \"*\"\neffect = \"allow\"\n";

fn call(name: &str) -> Value {
    json!({"reply": {"tool_calls": [{"name": format!("{name}__echo"), "arguments": {"message": "hi"}}]}})
}

fn expect(step: Value, wanted: &str) -> Value {
    let mut step = step;
    step["expect"] = json!({"last_tool_results_contain": [wanted]});
    step
}

/// Runs `warden run --json` with a scripted model.
fn run(scratch: &Scratch, model: &ModelServer, config: &std::path::Path) -> std::process::Output {
    let mut command = scratch.warden(&[
        "run",
        "--json",
        "--provider",
        "anthropic",
        "--model",
        "test-model",
        "--base-url",
        &model.base_url,
        "--prompt",
        "hog the machine",
        // Taint would ask about every call after the first hog's answer: approve them all.
        "--approvals",
        "allow-all",
        "--config",
        config.to_str().unwrap(),
    ]);
    command.env("ANTHROPIC_API_KEY", "test-key");
    support::run_with_limit(command, LIMIT)
}

#[test]
fn a_memory_hog_a_fork_bomb_and_a_disk_filler_each_hit_their_limit_and_the_rest_goes_on() {
    let scratch = Scratch::new();
    let config = scratch.config(&format!(
        "{}{}{}{}{ALLOW_ALL}",
        hog(
            &scratch,
            "memhog",
            &["memory-hog", "--bytes", "1073741824"],
            "memory = \"64M\""
        ),
        hog(
            &scratch,
            "forkbomb",
            &["fork-bomb", "--count", "100000"],
            "processes = 32"
        ),
        hog(
            &scratch,
            "diskfill",
            &["disk-filler", "--bytes", "1073741824"],
            "disk = \"16M\""
        ),
        server_toml("good", &support::copied_server(&scratch), &["good"], ""),
    ));
    // Each hog's call fails naming its limit; the model is told and carries on; the good
    // server answers after all three.
    let model = ModelServer::start(
        &scratch,
        &json!({"steps": [
            call("memhog"),
            expect(call("forkbomb"), "memory limit of 64M"),
            expect(call("diskfill"), "process limit of 32 processes"),
            expect(call("good"), "disk limit of 16M"),
            expect(json!({"reply": {"text": "still here"}}), "echo: hi"),
        ]}),
    );
    let output = run(&scratch, &model, &config);
    assert_exit(&output, 0);
    let events = transcript(&output);
    let calls: Vec<&Value> = events.iter().filter(|e| e["type"] == "tool_call").collect();
    assert_eq!(calls.len(), 4, "{}", describe(&output));
    for (call, failed) in calls.iter().zip([true, true, true, false]) {
        assert_eq!(call["is_error"], failed, "{call}");
    }
    let text = stdout(&output);
    for key in ["sandbox.memory", "sandbox.processes", "sandbox.disk"] {
        assert!(
            text.contains(key),
            "the error names `{key}`: {}",
            describe(&output)
        );
    }
    drop(model);
    scratch.assert_no_leftovers();
}

#[test]
fn the_same_hogs_within_their_limits_answer() {
    let scratch = Scratch::new();
    let config = scratch.config(&format!(
        "{}{}{}{ALLOW_ALL}",
        hog(
            &scratch,
            "memhog",
            &["memory-hog", "--bytes", "8388608"],
            "memory = \"64M\""
        ),
        hog(
            &scratch,
            "forkbomb",
            &["fork-bomb", "--count", "8"],
            "processes = 32"
        ),
        hog(
            &scratch,
            "diskfill",
            &["disk-filler", "--bytes", "4194304"],
            "disk = \"16M\""
        ),
    ));
    let model = ModelServer::start(
        &scratch,
        &json!({"steps": [
            call("memhog"),
            expect(call("forkbomb"), "allocated 8 MiB"),
            expect(call("diskfill"), "forked 8 processes"),
            expect(json!({"reply": {"text": "fine"}}), "wrote 4 MiB and reserved 4 MiB"),
        ]}),
    );
    let output = run(&scratch, &model, &config);
    assert_exit(&output, 0);
    let events = transcript(&output);
    let calls: Vec<&Value> = events.iter().filter(|e| e["type"] == "tool_call").collect();
    assert_eq!(calls.len(), 3, "{}", describe(&output));
    for call in calls {
        assert_eq!(call["is_error"], false, "{call}");
    }
    drop(model);
    scratch.assert_no_leftovers();
}

#[test]
fn warden_call_on_a_memory_hog_fails_naming_the_limit() {
    // The error is Warden's own (the server cannot say it: it is killed or aborts).
    let scratch = Scratch::new();
    let config = scratch.config(&hog(
        &scratch,
        "memhog",
        &["memory-hog", "--bytes", "1073741824"],
        "memory = \"32M\"",
    ));
    let output = scratch.run(
        &[
            "--config",
            config.to_str().unwrap(),
            "call",
            "--yes",
            "memhog/echo",
            "--args",
            r#"{"message":"x"}"#,
        ],
        LIMIT,
    );
    assert_exit(&output, 3);
    let err = support::stderr(&output);
    assert!(
        err.contains("calling `memhog__echo` failed: the server is gone")
            && err.contains("memory limit of 32M")
            && err.contains("raise `sandbox.memory` if it needs more"),
        "{}",
        describe(&output)
    );
    scratch.assert_no_leftovers();
}

#[test]
fn a_confined_server_does_not_see_wardens_command_line_or_environment() {
    let scratch = Scratch::new();
    let config = scratch.config(&server_toml(
        "reader",
        &support::copied_server(&scratch),
        &["read-proc-one"],
        "",
    ));
    // The marker is in Warden's arguments (the call's arguments) and in its environment.
    let marker = format!("warden-argv-marker-{}", std::process::id());
    let args = format!(r#"{{"message":"{marker}"}}"#);
    let mut command = scratch.warden(&[
        "--config",
        config.to_str().unwrap(),
        "call",
        "--yes",
        "reader/echo",
        "--args",
        &args,
    ]);
    command.env("WARDEN_ENV_MARKER", &marker);
    let output = support::run_with_limit(command, LIMIT);
    assert_exit(&output, 0);
    let text = stdout(&output);
    // The server did read /proc/1 (the sandbox's init), which shows only its own name.
    assert!(
        text.contains("cmdline: warden-init"),
        "{}",
        describe(&output)
    );
    assert!(
        !text.contains(&marker),
        "Warden's arguments leaked: {}",
        describe(&output)
    );
    assert!(
        !text.contains(&scratch.tag),
        "Warden's environment leaked: {text}"
    );
    assert!(
        !text.contains("--args"),
        "Warden's arguments leaked: {text}"
    );
    scratch.assert_no_leftovers();
}
