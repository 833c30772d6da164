//! End-to-end tests against servers that misbehave on purpose (`warden-testserver MODE`).
//!
//! Each test runs the real `warden` binary and checks one behaviour: the exit code, the
//! reason Warden gives (naming what went wrong, with the server's last stderr lines), that
//! it gives it well before the hang it guards against, and that no process it started is
//! left running.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Scratch, assert_exit, describe, json, server_toml, stderr, stdout, testserver_bin};

/// Generous limit for a run that should finish at once; hitting it means Warden hung.
const LIMIT: Duration = Duration::from_secs(30);

/// A `[servers.NAME]` table running the test server with `args`; `extra` goes inside it.
fn testserver(name: &str, args: &[&str], extra: &str) -> String {
    server_toml(name, &testserver_bin(), args, extra)
}

/// `env = { VAR = "path", ... }` for a server table, and the write grant the confined
/// server needs for those files' directories.
fn env_line(vars: &[(&str, &Path)]) -> String {
    let items: Vec<String> = vars
        .iter()
        .map(|(name, path)| format!("{name} = {:?}", path.display().to_string()))
        .collect();
    let dirs: Vec<&Path> = vars.iter().filter_map(|(_, path)| path.parent()).collect();
    format!(
        "env = {{ {} }}\n{}",
        items.join(", "),
        support::write_grant(&dirs)
    )
}

/// `warden --config CONFIG call --yes TARGET --args ARGS`: the test server is untrusted, so
/// every call is one the policy asks about, approved here.
fn approved_call<'a>(config: &'a str, target: &'a str, args: &'a str) -> [&'a str; 7] {
    ["--config", config, "call", "--yes", target, "--args", args]
}

/// Runs warden and returns its output and how long it took.
fn timed(scratch: &Scratch, args: &[&str]) -> (Output, Duration) {
    let started = Instant::now();
    let output = scratch.run(args, LIMIT);
    (output, started.elapsed())
}

/// The entry for server `name` in `warden tools --json` output.
fn server<'a>(listing: &'a Value, name: &str) -> &'a Value {
    listing["servers"]
        .as_array()
        .and_then(|servers| servers.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no server `{name}` in {listing:#}"))
}

fn tool_names(server: &Value) -> Vec<&str> {
    server["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default()
}

fn assert_connected_with_three_tools(listing: &Value, name: &str) {
    let entry = server(listing, name);
    assert_eq!(entry["state"], "connected", "{entry:#}");
    assert_eq!(tool_names(entry), ["echo", "add", "fail"], "{entry:#}");
}

fn reason(listing: &Value, name: &str) -> String {
    let entry = server(listing, name);
    assert_eq!(entry["state"], "failed", "{entry:#}");
    entry["reason"].as_str().unwrap_or_default().to_owned()
}

fn stderr_tail(listing: &Value, name: &str) -> Vec<String> {
    server(listing, name)["stderr_tail"]
        .as_array()
        .map(|lines| {
            lines
                .iter()
                .filter_map(|l| l.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Polls `condition` every 20 ms until it holds or `limit` passes.
fn wait_until(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    condition()
}

// ---------------------------------------------------------------------------------------
// What a server writes on stdout and stderr
// ---------------------------------------------------------------------------------------

#[test]
fn stdout_log_lines_below_the_fault_bound_are_tolerated() {
    let scratch = Scratch::new();
    let config = scratch.config(&testserver("logs", &["stdout-logs"], ""));
    let config = config.to_str().unwrap();

    let (output, elapsed) = timed(
        &scratch,
        &approved_call(config, "logs/echo", r#"{"message":"hi"}"#),
    );
    assert_exit(&output, 0);
    // The stray lines are protocol faults (logged), never part of the result, and they do
    // not make the era probe wait for its limit either.
    assert_eq!(stdout(&output), "echo: hi\n");
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
    scratch.assert_no_leftovers();
}

#[test]
fn a_flood_of_non_json_stdout_lines_fails_only_that_server() {
    let scratch = Scratch::new();
    let config = scratch.config(&format!(
        "{}{}",
        testserver("flood", &["bad-json-lines", "--count", "1000"], ""),
        testserver("good", &["good"], "")
    ));
    let config = config.to_str().unwrap();

    let (output, elapsed) = timed(&scratch, &["--config", config, "tools", "--json"]);
    assert_exit(&output, 0);
    let listing = json(&output);
    let why = reason(&listing, "flood");
    assert!(
        why.contains("`flood` wrote 65 lines on stdout that are not MCP messages (limit 64)"),
        "{why}"
    );
    assert!(why.contains("logs belong on stderr"), "{why}");
    assert_connected_with_three_tools(&listing, "good");
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");

    // A call to the failed server says why; the good one still answers.
    let output = scratch.run(&["--config", config, "call", "flood/echo"], LIMIT);
    assert_exit(&output, 3);
    assert!(
        stderr(&output).contains("server `flood` is not available")
            && stderr(&output).contains("not MCP messages (limit 64)"),
        "{}",
        describe(&output)
    );
    let output = scratch.run(
        &[
            "--config",
            config,
            "call",
            "--yes",
            "good/add",
            "--args",
            r#"{"a":2,"b":3}"#,
            "--json",
        ],
        LIMIT,
    );
    assert_exit(&output, 0);
    assert_eq!(json(&output)["structuredContent"]["sum"], 5);
    scratch.assert_no_leftovers();
}

#[test]
fn json_rpc_lookalikes_on_stderr_are_ignored() {
    let scratch = Scratch::new();
    let config = scratch.config(&testserver("liar", &["stderr-jsonrpc"], ""));
    let config = config.to_str().unwrap();

    let output = scratch.run(&["--config", config, "tools", "--json"], LIMIT);
    assert_exit(&output, 0);
    let listing = json(&output);
    assert_connected_with_three_tools(&listing, "liar");
    assert_eq!(server(&listing, "liar")["protocol_version"], "2025-11-25");

    let output = scratch.run(
        &approved_call(config, "liar/echo", r#"{"message":"the truth"}"#),
        LIMIT,
    );
    assert_exit(&output, 0);
    assert_eq!(stdout(&output), "echo: the truth\n");
    assert!(!stdout(&output).contains("came from stderr"));
    scratch.assert_no_leftovers();
}

// ---------------------------------------------------------------------------------------
// Size limits
// ---------------------------------------------------------------------------------------

#[test]
fn an_oversized_answer_fails_the_call_at_the_default_limit() {
    let scratch = Scratch::new();
    // About 100 MiB on one line.
    let config = scratch.config(&testserver("huge", &["huge-line"], ""));
    let config = config.to_str().unwrap();

    let (output, elapsed) = timed(
        &scratch,
        &approved_call(config, "huge/echo", r#"{"message":"x"}"#),
    );
    assert_exit(&output, 3);
    let err = stderr(&output);
    assert!(
        err.contains("calling `huge__echo` failed: the server is gone: server `huge` sent a message over the 16777216 byte limit (max_message_bytes)"),
        "{}",
        describe(&output)
    );
    assert!(stdout(&output).is_empty(), "{}", describe(&output));
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
    scratch.assert_no_leftovers();
}

#[test]
fn max_message_bytes_from_the_config_is_enforced() {
    let scratch = Scratch::new();
    let config = scratch.config(&format!(
        "{}{}",
        testserver(
            "fits",
            &["huge-line", "--bytes", "1000"],
            "max_message_bytes = 4096"
        ),
        testserver(
            "over",
            &["huge-line", "--bytes", "5000"],
            "max_message_bytes = 4096"
        ),
    ));
    let config = config.to_str().unwrap();

    let output = scratch.run(
        &approved_call(config, "fits/echo", r#"{"message":"x"}"#),
        LIMIT,
    );
    assert_exit(&output, 0);
    assert_eq!(stdout(&output), format!("{}\n", "x".repeat(1000)));

    let (output, elapsed) = timed(
        &scratch,
        &approved_call(config, "over/echo", r#"{"message":"x"}"#),
    );
    assert_exit(&output, 3);
    assert!(
        stderr(&output).contains("server `over` sent a message over the 4096 byte limit"),
        "{}",
        describe(&output)
    );
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
    scratch.assert_no_leftovers();
}

// ---------------------------------------------------------------------------------------
// Timeouts
// ---------------------------------------------------------------------------------------

#[test]
fn a_silent_server_fails_at_its_connect_timeout_and_others_connect() {
    let scratch = Scratch::new();
    let config = scratch.config(&format!(
        "{}{}",
        testserver("mute", &["silent"], r#"timeout = { connect = "2s" }"#),
        testserver("good", &["good"], "")
    ));
    let config = config.to_str().unwrap();

    let (output, elapsed) = timed(&scratch, &["--config", config, "tools", "--json"]);
    assert_exit(&output, 0);
    let listing = json(&output);
    assert_eq!(reason(&listing, "mute"), "no handshake within 2s");
    assert_connected_with_three_tools(&listing, "good");
    // One connect timeout covers the whole `auto` negotiation (the discover probe, then
    // `initialize`); then the failed server is stopped, which a silent one does at EOF.
    assert!(
        elapsed >= Duration::from_secs(2) && elapsed < Duration::from_millis(2900),
        "took {elapsed:?}"
    );
    scratch.assert_no_leftovers();
}

#[test]
fn a_server_slower_than_its_connect_timeout_fails_without_delaying_others() {
    let scratch = Scratch::new();
    let config = scratch.config(&format!(
        "{}{}",
        testserver(
            "sleepy",
            &["slow-start", "--delay-ms", "20000"],
            r#"timeout = { connect = "1s" }"#
        ),
        testserver("good", &["good"], "")
    ));
    let config = config.to_str().unwrap();

    let (output, elapsed) = timed(&scratch, &["--config", config, "tools"]);
    assert_exit(&output, 0);
    let text = stdout(&output);
    assert!(
        text.contains("sleepy: FAILED: no handshake within 1s\n"),
        "{}",
        describe(&output)
    );
    assert!(
        text.contains("good: connected, legacy era (2025-11-25)  warden-testserver 0.1.0, 3 tools"),
        "{}",
        describe(&output)
    );
    // 1 s, then close stdin, 300 ms, SIGTERM: the sleeper does not read its input.
    assert!(elapsed < Duration::from_millis(2200), "took {elapsed:?}");
    scratch.assert_no_leftovers();
}

/// A modern-only server that starts slower than the era probe's limit answers the probe
/// late, and then refuses `initialize` as a 2026-07-28 server (as the Python SDK's servers
/// do on a loaded machine). It has said its era: Warden starts it once more in the modern
/// era instead of failing it.
#[test]
fn a_modern_server_that_answers_the_era_probe_late_is_started_again_as_modern() {
    let scratch = Scratch::new();
    // Probe limit: 70 % of 4 s = 2.8 s; the server sleeps 3 s before it reads anything.
    let config = scratch.config(&testserver(
        "late",
        &["slow-modern", "--delay-ms", "3000"],
        r#"timeout = { connect = "4s" }"#,
    ));
    let config = config.to_str().unwrap();
    let output = scratch.run(&["--config", config, "-v", "tools"], LIMIT);
    assert_exit(&output, 0);
    let text = stdout(&output);
    assert!(
        text.contains("late: connected, modern era (2026-07-28)"),
        "{}",
        describe(&output)
    );
    assert!(
        stderr(&output).contains("answered the era probe late"),
        "{}",
        describe(&output)
    );
    scratch.assert_no_leftovers();
}

#[test]
fn a_call_without_an_answer_times_out_and_is_cancelled() {
    let scratch = Scratch::new();
    let calls = scratch.path().join("calls.log");
    let cancels = scratch.path().join("cancels.log");
    let config = scratch.config(&testserver(
        "hang",
        &["hang-on-call"],
        &format!(
            "{}\ntimeout = {{ call = \"1s\" }}",
            env_line(&[
                ("WARDEN_TEST_CALL_LOG", &calls),
                ("WARDEN_TEST_CANCEL_LOG", &cancels)
            ])
        ),
    ));
    let config = config.to_str().unwrap();

    let (output, elapsed) = timed(
        &scratch,
        &approved_call(config, "hang/echo", r#"{"message":"x"}"#),
    );
    assert_exit(&output, 3);
    assert!(
        stderr(&output).contains(
            "calling `hang__echo` failed: no answer within 1s (the request was cancelled)"
        ),
        "{}",
        describe(&output)
    );
    assert!(
        elapsed >= Duration::from_secs(1) && elapsed < Duration::from_secs(3),
        "took {elapsed:?}"
    );
    // The server was told, with the id of the request it got.
    let call: Value = serde_json::from_str(read(&calls).trim()).unwrap();
    assert_eq!(read(&cancels), format!("cancelled {}\n", call["id"]));
    scratch.assert_no_leftovers();
}

// ---------------------------------------------------------------------------------------
// Servers that die
// ---------------------------------------------------------------------------------------

#[test]
fn a_crash_during_a_call_reports_the_exit_status_and_stderr() {
    let scratch = Scratch::new();
    let config = scratch.config(&testserver("crashy", &["crash-mid-call"], ""));
    let config = config.to_str().unwrap();

    let (output, elapsed) = timed(
        &scratch,
        &approved_call(config, "crashy/echo", r#"{"message":"x"}"#),
    );
    assert_exit(&output, 3);
    assert!(
        stderr(&output).contains(
            "calling `crashy__echo` failed: the server is gone: the server process exited (exit code 101)\n\
             last lines on the server's stderr:\n  | about to crash"
        ),
        "{}",
        describe(&output)
    );
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
    // The child process the simulator cannot run (decision 0041): the attempt is audited
    // once, as failed and as having reached the server (it crashed while running it).
    let audit = scratch.run(&["--config", config, "audit", "--json"], LIMIT);
    assert_exit(&audit, 0);
    let rows = json(&audit);
    let rows: Vec<&Value> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["tool"] == "crashy__echo")
        .collect();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["outcome"], "failed", "{}", rows[0]);
    assert_eq!(rows[0]["executed"], true, "{}", rows[0]);
    scratch.assert_no_leftovers();
}

#[test]
fn a_server_that_exits_at_start_is_reported_with_its_stderr() {
    let scratch = Scratch::new();
    let config = scratch.config(&format!(
        "{}{}",
        testserver("broken", &["exit-at-start"], ""),
        testserver("good", &["good"], "")
    ));
    let config = config.to_str().unwrap();

    let output = scratch.run(&["--config", config, "tools", "--json"], LIMIT);
    assert_exit(&output, 0);
    let listing = json(&output);
    assert_eq!(
        reason(&listing, "broken"),
        "the server exited during the handshake (exit code 3)"
    );
    assert_eq!(
        stderr_tail(&listing, "broken"),
        ["fatal: cannot open database /nonexistent"]
    );
    assert_connected_with_three_tools(&listing, "good");

    let output = scratch.run(&["--config", config, "tools"], LIMIT);
    assert!(
        stdout(&output).contains(
            "broken: FAILED: the server exited during the handshake (exit code 3)\n  \
             | fatal: cannot open database /nonexistent\n"
        ),
        "{}",
        describe(&output)
    );

    let output = scratch.run(&["--config", config, "call", "broken/echo"], LIMIT);
    assert_exit(&output, 3);
    assert!(
        stderr(&output).contains(
            "server `broken` is not available: the server exited during the handshake (exit code 3)\n\
             last lines on the server's stderr:\n  | fatal: cannot open database /nonexistent"
        ),
        "{}",
        describe(&output)
    );
    scratch.assert_no_leftovers();
}

/// Runs `args` against a `grandchild` server and checks that the server and the process it
/// left behind are both gone when warden returns, within the stop grace.
fn grandchild_is_stopped_after(args: &[&str], expected_stdout: &str) {
    let scratch = Scratch::new();
    let pids = scratch.path().join("pids");
    let config = scratch.config(&testserver(
        "stubborn",
        &["grandchild"],
        &env_line(&[("WARDEN_TEST_PID_FILE", &pids)]),
    ));
    let mut full = vec!["--config", config.to_str().unwrap()];
    full.extend_from_slice(args);

    let (output, elapsed) = timed(&scratch, &full);
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains(expected_stdout),
        "{}",
        describe(&output)
    );
    let recorded = read(&pids);
    let recorded: Vec<&str> = recorded.split_whitespace().collect();
    assert_eq!(recorded.len(), 2, "pid file: {recorded:?}");
    // Both got SIGKILL before warden returned; on a loaded machine the kernel may take a
    // moment to tear a killed process down, hence the short grace. The recorded pids are
    // the server's own view, inside its pid namespace when confined; from outside, both are
    // found by the test's tag, which the server got through its `env` and the grandchild
    // inherited.
    assert!(
        wait_until(Duration::from_millis(500), || scratch
            .leftovers()
            .is_empty()),
        "processes outlived warden: {:?} (recorded inside: {recorded:?})",
        scratch.leftovers()
    );
    // Close stdin, 2 s, SIGTERM (ignored), 2 s, SIGKILL to the group.
    assert!(
        elapsed >= Duration::from_secs(4) && elapsed < Duration::from_secs(5),
        "took {elapsed:?}"
    );
    scratch.assert_no_leftovers();
}

#[test]
fn a_server_and_its_grandchild_are_stopped_after_tools() {
    grandchild_is_stopped_after(&["tools"], "stubborn: connected");
}

#[test]
fn a_server_and_its_grandchild_are_stopped_after_a_call() {
    grandchild_is_stopped_after(
        &[
            "call",
            "--yes",
            "stubborn/echo",
            "--args",
            r#"{"message":"hi"}"#,
        ],
        "echo: hi\n",
    );
}

// ---------------------------------------------------------------------------------------
// Protocol features
// ---------------------------------------------------------------------------------------

#[test]
fn warden_answers_roots_list_and_ping_from_the_server() {
    let scratch = Scratch::new();
    let config = scratch.config(&testserver("curious", &["roots"], ""));
    let config = config.to_str().unwrap();

    let output = scratch.run(
        &approved_call(config, "curious/echo", r#"{"message":"x"}"#),
        LIMIT,
    );
    assert_exit(&output, 0);
    // Warden shares no roots (it does not declare the capability), but answers both.
    assert_eq!(stdout(&output), "roots: {\"roots\":[]}; ping: ok\n");
    scratch.assert_no_leftovers();
}

#[test]
fn tools_are_listed_across_pages() {
    let scratch = Scratch::new();
    let config = scratch.config(&format!(
        "{}{}",
        testserver("one", &["good", "--page-size", "1"], ""),
        testserver("two", &["modern", "--page-size", "2"], "")
    ));
    let config = config.to_str().unwrap();

    let output = scratch.run(&["--config", config, "tools", "--json"], LIMIT);
    assert_exit(&output, 0);
    let listing = json(&output);
    assert_connected_with_three_tools(&listing, "one");
    assert_connected_with_three_tools(&listing, "two");
    assert_eq!(server(&listing, "two")["era"], "modern");
    scratch.assert_no_leftovers();
}

// ---------------------------------------------------------------------------------------
// Calls refused before anything is sent
// ---------------------------------------------------------------------------------------

/// A config with the `good` server logging every `tools/call` it receives.
fn logged_good_server(scratch: &Scratch) -> (String, std::path::PathBuf) {
    let calls = scratch.path().join("calls.log");
    let config = scratch.config(&testserver(
        "good",
        &["good"],
        &env_line(&[("WARDEN_TEST_CALL_LOG", &calls)]),
    ));
    (config.to_str().unwrap().to_owned(), calls)
}

#[test]
fn arguments_breaking_the_schema_are_refused_before_sending() {
    let scratch = Scratch::new();
    let (config, calls) = logged_good_server(&scratch);

    let output = scratch.run(
        &[
            "--config",
            &config,
            "call",
            "good/add",
            "--args",
            r#"{"a":"x","b":1}"#,
        ],
        LIMIT,
    );
    assert_exit(&output, 2);
    assert_eq!(
        stderr(&output),
        "warden: arguments for `good__add` do not match its input schema (nothing was sent):\n  \
         - at /a: \"x\" is not of type \"integer\" (rule `type`)\n"
    );
    assert_eq!(read(&calls), "", "the server received the call");
    scratch.assert_no_leftovers();
}

#[test]
fn an_unknown_tool_is_refused_with_a_suggestion() {
    let scratch = Scratch::new();
    let (config, calls) = logged_good_server(&scratch);

    for (target, expected) in [
        (
            "good/ad",
            "warden: no tool `good/ad` (did you mean good__add?)\n",
        ),
        (
            "good__ehco",
            "warden: no tool `good__ehco` (did you mean good__echo?)\n",
        ),
        (
            "good/nothing_like_it",
            "warden: no tool `good/nothing_like_it`\n",
        ),
    ] {
        let output = scratch.run(&["--config", &config, "call", target], LIMIT);
        assert_exit(&output, 2);
        assert_eq!(stderr(&output), expected, "{}", describe(&output));
    }
    assert_eq!(read(&calls), "", "the server received a call");
    scratch.assert_no_leftovers();
}

#[test]
fn arguments_that_are_not_a_json_object_are_refused() {
    let scratch = Scratch::new();
    let (config, calls) = logged_good_server(&scratch);

    let output = scratch.run(
        &["--config", &config, "call", "good/add", "--args", "[1]"],
        LIMIT,
    );
    assert_exit(&output, 2);
    assert_eq!(
        stderr(&output),
        "warden: arguments for `good__add` must be a JSON object, got an array\n"
    );

    let output = scratch.run(
        &["--config", &config, "call", "good/add", "--args", "{"],
        LIMIT,
    );
    assert_exit(&output, 2);
    assert!(
        stderr(&output).starts_with("warden: --args: not valid JSON at line 1 column 1"),
        "{}",
        describe(&output)
    );
    assert_eq!(read(&calls), "", "the server received a call");
    scratch.assert_no_leftovers();
}

// ---------------------------------------------------------------------------------------
// Interruption
// ---------------------------------------------------------------------------------------

/// Starts `warden call hang/echo` (no answer, 60 s call timeout), waits until the server
/// has the call, sends `signal` to warden and checks that it stops promptly with 130.
fn interrupting_a_call_stops_everything(signal: i32) {
    let scratch = Scratch::new();
    let calls = scratch.path().join("calls.log");
    let config = scratch.config(&testserver(
        "hang",
        &["hang-on-call"],
        &format!(
            "{}\ntimeout = {{ call = \"60s\" }}",
            env_line(&[("WARDEN_TEST_CALL_LOG", &calls)])
        ),
    ));
    let mut child = scratch
        .warden(&[
            "--config",
            config.to_str().unwrap(),
            "call",
            "--yes",
            "hang/echo",
            "--args",
            r#"{"message":"x"}"#,
        ])
        .spawn()
        .unwrap();
    let in_flight = wait_until(Duration::from_secs(10), || !read(&calls).is_empty());
    if !in_flight {
        let _ = child.kill();
        panic!("the call never reached the server");
    }
    assert!(scratch.leftovers().len() >= 2, "the server is not running");

    let sent = Instant::now();
    // SAFETY: kill has no memory effects; the pid is our own child, not yet reaped.
    let rc = unsafe { libc::kill(child.id() as i32, signal) };
    assert_eq!(rc, 0);
    let exited = wait_until(Duration::from_secs(5), || {
        child.try_wait().ok().flatten().is_some()
    });
    if !exited {
        let _ = child.kill();
        panic!("warden did not stop within 5 s of the signal");
    }
    let elapsed = sent.elapsed();
    let output = child.wait_with_output().unwrap();
    assert_exit(&output, 130);
    assert!(
        stderr(&output).contains("warden: interrupted; the call was cancelled and servers stopped"),
        "{}",
        describe(&output)
    );
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
    scratch.assert_no_leftovers();
}

#[test]
fn ctrl_c_during_a_call_stops_warden_and_its_servers() {
    interrupting_a_call_stops_everything(libc::SIGINT);
}

#[test]
fn sigterm_during_a_call_stops_warden_and_its_servers() {
    interrupting_a_call_stops_everything(libc::SIGTERM);
}

#[test]
fn ctrl_c_while_connecting_stops_warden_and_its_servers() {
    let scratch = Scratch::new();
    let config = scratch.config(&testserver(
        "mute",
        &["silent"],
        r#"timeout = { connect = "60s" }"#,
    ));
    let mut child = scratch
        .warden(&["--config", config.to_str().unwrap(), "tools"])
        .spawn()
        .unwrap();
    // The server process carries the test's tag; warden itself does too, so wait for two.
    let started = wait_until(Duration::from_secs(10), || scratch.leftovers().len() >= 2);
    if !started {
        let _ = child.kill();
        panic!("the server never started");
    }
    let sent = Instant::now();
    // SAFETY: kill has no memory effects; the pid is our own child, not yet reaped.
    let rc = unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(rc, 0);
    let exited = wait_until(Duration::from_secs(5), || {
        child.try_wait().ok().flatten().is_some()
    });
    if !exited {
        let _ = child.kill();
        panic!("warden did not stop within 5 s of Ctrl-C");
    }
    let elapsed = sent.elapsed();
    let output = child.wait_with_output().unwrap();
    assert_exit(&output, 130);
    assert!(
        stderr(&output).contains("warden: interrupted while connecting; servers stopped"),
        "{}",
        describe(&output)
    );
    assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
    scratch.assert_no_leftovers();
}

// ---------------------------------------------------------------------------------------
// Finding the program
// ---------------------------------------------------------------------------------------

#[test]
fn a_command_not_in_path_is_reported_with_the_search_path() {
    let scratch = Scratch::new();
    let config = scratch.config(&format!(
        "[servers.ghost]\ncommand = \"warden-no-such-server\"\n\n{}",
        testserver("good", &["good"], "")
    ));
    let config = config.to_str().unwrap();
    let path = "/nonexistent-warden-bin:relative/bin:/usr/bin";
    let expected = "command `warden-no-such-server` was not found in PATH \
                    (searched: /nonexistent-warden-bin:/usr/bin)";

    let mut tools = scratch.warden(&["--config", config, "tools", "--json"]);
    tools.env("PATH", path);
    let output = support::run_with_limit(tools, LIMIT);
    assert_exit(&output, 0);
    let listing = json(&output);
    assert_eq!(reason(&listing, "ghost"), expected);
    assert_connected_with_three_tools(&listing, "good");

    let mut call = scratch.warden(&["--config", config, "call", "ghost/anything"]);
    call.env("PATH", path);
    let output = support::run_with_limit(call, LIMIT);
    assert_exit(&output, 3);
    assert_eq!(
        stderr(&output),
        format!("warden: server `ghost` is not available: {expected}\n")
    );
    scratch.assert_no_leftovers();
}

#[test]
fn a_relative_command_is_resolved_against_the_config_file_not_the_working_directory() {
    let scratch = Scratch::new();
    let conf = scratch.path().join("conf");
    std::fs::create_dir(&conf).unwrap();
    // `./server` exists next to the config; `./decoy` only in the working directory.
    std::os::unix::fs::symlink(testserver_bin(), conf.join("server")).unwrap();
    std::os::unix::fs::symlink(testserver_bin(), scratch.path().join("decoy")).unwrap();
    let config = conf.join("warden.toml");
    std::fs::write(
        &config,
        "[servers.near]\ncommand = \"./server\"\nargs = [\"good\"]\n\n\
         [servers.decoy]\ncommand = \"./decoy\"\nargs = [\"good\"]\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();

    let output = scratch.run(&["--config", config, "tools", "--json"], LIMIT);
    assert_exit(&output, 0);
    let listing = json(&output);
    assert_connected_with_three_tools(&listing, "near");
    assert_eq!(
        reason(&listing, "decoy"),
        format!("`{}/./decoy` is not an executable file", conf.display())
    );

    let output = scratch.run(&["--config", config, "call", "decoy/echo"], LIMIT);
    assert_exit(&output, 3);
    scratch.assert_no_leftovers();
}

// ---------------------------------------------------------------------------------------
// Protocol eras
// ---------------------------------------------------------------------------------------

#[test]
fn era_modern_does_not_fall_back_to_initialize() {
    let scratch = Scratch::new();
    let config = scratch.config(&testserver("old", &["good"], r#"era = "modern""#));
    let config = config.to_str().unwrap();

    let output = scratch.run(&["--config", config, "tools", "--json"], LIMIT);
    assert_exit(&output, 0);
    let why = reason(&json(&output), "old");
    assert_eq!(
        why,
        "handshake failed: the server does not speak the 2026-07-28 revision \
         (server/discover: the server answered with error -32601: method not found: \
         server/discover), and era = \"modern\" allows no fallback to initialize"
    );

    let output = scratch.run(&["--config", config, "call", "old/echo"], LIMIT);
    assert_exit(&output, 3);
    scratch.assert_no_leftovers();
}

#[test]
fn era_legacy_uses_initialize_even_with_a_modern_server() {
    let scratch = Scratch::new();
    let config = scratch.config(&testserver("dual", &["modern"], r#"era = "legacy""#));
    let config = config.to_str().unwrap();

    let output = scratch.run(&["--config", config, "tools", "--json"], LIMIT);
    assert_exit(&output, 0);
    let listing = json(&output);
    assert_connected_with_three_tools(&listing, "dual");
    assert_eq!(server(&listing, "dual")["era"], "legacy");
    assert_eq!(server(&listing, "dual")["protocol_version"], "2025-11-25");
    scratch.assert_no_leftovers();
}

#[test]
fn era_auto_picks_modern_when_offered_and_legacy_otherwise() {
    let scratch = Scratch::new();
    let config = scratch.config(&format!(
        "{}{}",
        testserver("dual", &["modern"], ""),
        testserver("old", &["good"], r#"era = "auto""#)
    ));
    let config = config.to_str().unwrap();

    let output = scratch.run(&["--config", config, "tools", "--json"], LIMIT);
    assert_exit(&output, 0);
    let listing = json(&output);
    assert_connected_with_three_tools(&listing, "dual");
    assert_eq!(server(&listing, "dual")["era"], "modern");
    assert_eq!(server(&listing, "dual")["protocol_version"], "2026-07-28");
    assert_connected_with_three_tools(&listing, "old");
    assert_eq!(server(&listing, "old")["era"], "legacy");
    assert_eq!(server(&listing, "old")["protocol_version"], "2025-11-25");

    let output = scratch.run(
        &approved_call(config, "dual/echo", r#"{"message":"now"}"#),
        LIMIT,
    );
    assert_exit(&output, 0);
    assert_eq!(stdout(&output), "echo: now\n");
    scratch.assert_no_leftovers();
}
