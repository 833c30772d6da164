//! What servers and models write never drives the terminal (issue 10, section 8).
//!
//! The test server's `hostile` mode puts OSC 52 (write the clipboard), OSC 0 (set the
//! title), `ESC[2J` (clear the screen), the 8-bit CSI `U+009B` and a bidi override into its
//! name, title and version, a tool's name, title and description, a tool result, a
//! JSON-RPC error message and the stderr lines it writes before it crashes; the scripted
//! model repeats them in its answer and in an error. Every front end that prints them
//! (`warden tools`, `scan`, `approve`, `call`, `audit`, `run`, `chat`, and the error report
//! of every command) must print them inert: never a raw ESC (0x1b) or C1 CSI (U+009B, the
//! only way a byte 0x9b can stand for a control in UTF-8 output) or bidi override, on
//! stdout or stderr, and always the visible escape (`\x1b]52;`), so the person sees that
//! something was there.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Output;
use std::time::Duration;

use serde_json::json;
use support::{ModelServer, Scratch, assert_exit, describe, server_toml, stderr, stdout};

const LIMIT: Duration = Duration::from_secs(60);

/// The sequences as the hostile server writes them, and as they must be shown.
const OSC_52: (&str, &str) = ("\u{1b}]52;c;aGFja2Vk\u{7}", "\\x1b]52;c;aGFja2Vk\\x07");
const OSC_0: (&str, &str) = ("\u{1b}]0;pwned\u{7}", "\\x1b]0;pwned\\x07");
const CLEAR: (&str, &str) = ("\u{1b}[2J", "\\x1b[2J");
const C1_CLEAR: (&str, &str) = ("\u{9b}2J", "\\u{9b}2J");
const BIDI: (&str, &str) = ("\u{202e}", "\\u{202e}");

/// Asserts that nothing in `output` can drive a terminal: valid UTF-8 (so a 0x9b byte can
/// only be part of a character, and U+009B is looked for as a character), no ESC, no C1
/// control, no bidi override, on stdout or stderr.
fn assert_inert(output: &Output, what: &str) {
    for (stream, bytes) in [("stdout", &output.stdout), ("stderr", &output.stderr)] {
        let text = std::str::from_utf8(bytes)
            .unwrap_or_else(|error| panic!("{what}: {stream} is not UTF-8: {error}"));
        assert!(
            !bytes.contains(&0x1b),
            "{what}: a raw ESC reached {stream}:\n{}",
            describe(output)
        );
        for c in text.chars() {
            assert!(
                !matches!(c, '\u{80}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'),
                "{what}: a raw {c:?} reached {stream}:\n{}",
                describe(output)
            );
        }
    }
}

/// Asserts `text` shows each of `sequences` as its visible escape.
fn assert_shown(text: &str, sequences: &[(&str, &str)], what: &str) {
    for (raw, shown) in sequences {
        assert!(
            text.contains(shown),
            "{what}: {raw:?} is not shown as {shown}:\n{text}"
        );
    }
}

fn hostile_config(scratch: &Scratch, policy: &str) -> String {
    let program = support::copied_server(scratch);
    let toml = format!(
        "{}{policy}",
        server_toml("hostile", &program, &["hostile"], "")
    );
    scratch.config(&toml).to_str().unwrap().to_owned()
}

/// `warden tools`, then `warden approve hostile --yes` (the descriptions are flagged by the
/// description scan: approving releases them), each printed inert; returns the config path.
fn listed_and_approved(scratch: &Scratch, policy: &str) -> String {
    let config = hostile_config(scratch, policy);
    let tools = scratch.run(&["--config", &config, "tools"], LIMIT);
    assert_exit(&tools, 0);
    assert_inert(&tools, "warden tools");
    let listed = stdout(&tools);
    // The server's name and version, and the flags' excerpts of its descriptions.
    assert_shown(&listed, &[OSC_0, CLEAR], "warden tools (server info)");
    assert!(listed.contains("quarantined"), "{listed}");

    let approve = scratch.run(&["--config", &config, "approve", "hostile", "--yes"], LIMIT);
    assert_exit(&approve, 0);
    assert_inert(&approve, "warden approve");
    let shown = stdout(&approve);
    // A tool's name, title and description, in full.
    assert!(shown.contains("wipe\\x1b[2J"), "{shown}");
    assert!(shown.contains("Echo\\x1b]0;pwned\\x07"), "{shown}");
    assert_shown(
        &shown,
        &[OSC_52, OSC_0, CLEAR, C1_CLEAR, BIDI],
        "warden approve",
    );
    config
}

#[test]
fn a_tool_result_an_error_and_a_servers_names_are_printed_inert_by_the_cli() {
    let scratch = Scratch::new();
    let config = listed_and_approved(&scratch, "");

    // Now listed: the description's first line, and the JSON form.
    let tools = scratch.run(&["--config", &config, "tools"], LIMIT);
    assert_inert(&tools, "warden tools after approval");
    assert_shown(
        &stdout(&tools),
        &[OSC_52, OSC_0, CLEAR, C1_CLEAR, BIDI],
        "warden tools (description)",
    );
    let json = scratch.run(&["--config", &config, "tools", "--json"], LIMIT);
    assert_exit(&json, 0);
    assert_inert(&json, "warden tools --json");
    let listing = support::json(&json);
    // Still the same JSON value: the escapes are JSON's own.
    let server = &listing["servers"][0];
    assert_eq!(
        server["server_info"]["name"],
        format!("hostile-server{}", OSC_0.0)
    );
    let echo = server["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "echo")
        .unwrap();
    assert!(
        echo["description"]
            .as_str()
            .unwrap()
            .contains(&format!("{}{}", C1_CLEAR.0, BIDI.0)),
        "{echo}"
    );

    // A tool result: every sequence visible, its line break and tab kept.
    let call = scratch.run(
        &["--config", &config, "call", "hostile/echo", "--yes"],
        LIMIT,
    );
    assert_exit(&call, 0);
    assert_inert(&call, "warden call (result)");
    let result = stdout(&call);
    assert_shown(
        &result,
        &[OSC_52, OSC_0, CLEAR, C1_CLEAR, BIDI],
        "warden call",
    );
    assert!(
        result.contains("\\x07\nsecond line") && result.contains("2J\tafter a tab"),
        "lines and tabs of a result are kept: {result:?}"
    );
    let raw = scratch.run(
        &[
            "--config",
            &config,
            "call",
            "hostile/echo",
            "--yes",
            "--json",
        ],
        LIMIT,
    );
    assert_exit(&raw, 0);
    assert_inert(&raw, "warden call --json");
    assert!(
        support::json(&raw)["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains(OSC_52.0)
    );

    // A JSON-RPC error message, printed by the error report.
    let fail = scratch.run(
        &["--config", &config, "call", "hostile/fail", "--yes"],
        LIMIT,
    );
    assert_exit(&fail, 3);
    assert_inert(&fail, "warden call (JSON-RPC error)");
    assert!(
        stderr(&fail).contains("hostile failure"),
        "{}",
        describe(&fail)
    );
    assert_shown(
        &stderr(&fail),
        &[OSC_52, OSC_0, CLEAR, C1_CLEAR, BIDI],
        "warden call (JSON-RPC error)",
    );

    // The last lines a crashing server wrote on stderr.
    let crash = scratch.run(
        &["--config", &config, "call", "hostile/crash", "--yes"],
        LIMIT,
    );
    assert_exit(&crash, 3);
    assert_inert(&crash, "warden call (stderr tail)");
    assert!(stderr(&crash).contains("| panic: "), "{}", describe(&crash));
    assert_shown(
        &stderr(&crash),
        &[OSC_52, OSC_0, CLEAR, C1_CLEAR, BIDI],
        "warden call (stderr tail)",
    );

    // The scan, and the audit log of those calls (errors quoted).
    let scan = scratch.run(&["--config", &config, "scan"], LIMIT);
    assert_exit(&scan, 0);
    assert_inert(&scan, "warden scan");
    assert!(
        stdout(&scan).contains("wipe\\x1b[2J"),
        "{}",
        describe(&scan)
    );
    let audit = scratch.run(&["audit"], LIMIT);
    assert_exit(&audit, 0);
    assert_inert(&audit, "warden audit");
    assert!(
        stdout(&audit).contains("failed             hostile__fail"),
        "{}",
        describe(&audit)
    );
    let audit = scratch.run(&["audit", "--json"], LIMIT);
    assert_exit(&audit, 0);
    assert_inert(&audit, "warden audit --json");
    let rows = support::json(&audit);
    let failed = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["tool"] == "hostile__fail")
        .unwrap();
    assert!(
        failed["error"].as_str().unwrap().contains(OSC_52.0),
        "the log keeps what the server sent: {failed}"
    );

    // Logs quote the server too (a quarantined tool's name, with -v the server's stderr).
    let verbose = scratch.run(
        &["--config", &config, "-vv", "call", "hostile/crash", "--yes"],
        LIMIT,
    );
    assert_inert(&verbose, "warden -vv call (logs)");
    scratch.assert_no_leftovers();
}

/// The honest control: plain text, line breaks and tabs reach the terminal unchanged.
#[test]
fn plain_results_are_printed_unchanged() {
    let scratch = Scratch::new();
    let program = support::copied_server(&scratch);
    let config = scratch.config(&server_toml("good", &program, &[], ""));
    let config = config.to_str().unwrap();
    let message = "naïve café — 日本語\ttab\\x1b stays text";
    let call = scratch.run(
        &[
            "--config",
            config,
            "call",
            "good/echo",
            "--yes",
            "--args",
            &json!({ "message": message }).to_string(),
        ],
        LIMIT,
    );
    assert_exit(&call, 0);
    assert_eq!(stdout(&call), format!("echo: {message}\n"));
}

/// The model's words (its answer, its provider's error) and a server's result and words in
/// `warden run` and `warden chat`.
#[test]
fn the_agent_front_ends_print_what_models_and_servers_wrote_inert() {
    let scratch = Scratch::new();
    let allow = "[[policy.rules]]\ntools = \"hostile__*\"\neffect = \"allow\"\n";
    let config = listed_and_approved(&scratch, allow);
    let hostile = format!("{}{}{}{}{}", OSC_52.0, OSC_0.0, CLEAR.0, C1_CLEAR.0, BIDI.0);
    let script = json!({"steps": [
        {"reply": {"tool_calls": [
            {"name": "hostile__echo", "arguments": {}},
            {"name": "hostile__fail", "arguments": {}}]},
         "expect": {"tools_include": ["hostile__echo"]}},
        {"reply": {"text": format!("The answer:\n{hostile}\tdone.")},
         "expect": {"last_tool_results_contain": ["first line"]}},
        {"reply": {"text": format!("In JSON: {hostile}")}},
        {"error": {"status": 400, "message": format!("bad request {hostile}")}},
    ]});
    let model = ModelServer::start(&scratch, &script);
    let agent = |args: &[&str]| {
        let mut full = vec![
            "--config",
            &config,
            args[0],
            "--provider",
            "openai",
            "--model",
            "m",
            "--base-url",
            &model.base_url,
        ];
        full.extend_from_slice(&args[1..]);
        let mut command = scratch.warden(&full);
        command.env("OPENAI_API_KEY", "test-key");
        command
    };
    // `warden run`'s plain printer: the answer on stdout, a line per call on stderr.
    let run = support::run_with_limit(
        agent(&["run", "--approvals", "deny", "--prompt", "go"]),
        LIMIT,
    );
    assert_exit(&run, 0);
    assert_inert(&run, "warden run");
    assert_shown(
        &stdout(&run),
        &[OSC_52, OSC_0, CLEAR, C1_CLEAR, BIDI],
        "warden run (answer)",
    );
    assert!(stdout(&run).contains("The answer:\n"), "{}", describe(&run));

    // `warden run --json`: the transcript stays JSON, the same answer in it.
    let json_run = support::run_with_limit(
        agent(&["run", "--json", "--approvals", "deny", "--prompt", "go"]),
        LIMIT,
    );
    assert_exit(&json_run, 0);
    assert_inert(&json_run, "warden run --json");
    let last = support::transcript(&json_run).pop().unwrap();
    assert_eq!(last["answer"], format!("In JSON: {hostile}"), "{last}");

    // `warden chat` without a terminal: the model's provider error, then the commands that
    // show the servers' words.
    let mut chat = agent(&["chat"]);
    chat.stdin(std::process::Stdio::piped());
    let mut child = chat.spawn().unwrap();
    {
        use std::io::Write;
        let mut input = child.stdin.take().unwrap();
        input.write_all(b"go\n/tools\n/mcp\n/audit\n").unwrap();
    }
    let chat = support::wait_with_limit(child, LIMIT);
    assert_exit(&chat, 0);
    assert_inert(&chat, "warden chat");
    assert!(stderr(&chat).contains("bad request"), "{}", describe(&chat));
    assert_shown(
        &stderr(&chat),
        &[OSC_52, OSC_0, CLEAR],
        "warden chat (provider error, /tools)",
    );
    drop(model);
    scratch.assert_no_leftovers();
}
