//! End-to-end tests of the policy in `warden call` and `warden tools`, against the test
//! server (`warden-testserver good`: tools `echo`, `add` and `fail`, none annotated).
//!
//! Every call that must not run is checked on the server's side too: the server logs each
//! `tools/call` it receives (`WARDEN_TEST_CALL_LOG`), and that log stays empty.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Scratch, assert_exit, describe, json, server_toml, stderr, stdout, testserver_bin};

const LIMIT: Duration = Duration::from_secs(30);

/// The `good` server (or `modern`, with `mode`), logging calls to `calls` (with the write
/// grant the confined server needs for that folder: the server table is five lines, which
/// the positions asserted below count on); `extra` lines go after the server table (a
/// `[policy]` section).
fn config_text(mode: &str, calls: &Path, extra: &str) -> String {
    let env = format!(
        "env = {{ WARDEN_TEST_CALL_LOG = {:?} }}\n{}",
        calls.display().to_string(),
        support::write_grant(&[calls.parent().unwrap()])
    );
    // These tests pin the cautious mode's asks (the default is `assisted`, decision 0026);
    // the mode goes last so the line numbers asserted below stay.
    format!(
        "{}{extra}[policy]\nmode = \"cautious\"\n",
        server_toml("good", &testserver_bin(), &[mode], &env)
    )
}

/// Writes `warden.toml` (in the scratch folder, so also the project file) and returns its
/// path and the call log's, emptied.
fn setup(scratch: &Scratch, mode: &str, extra: &str) -> (String, PathBuf) {
    let calls = scratch.path().join("calls.log");
    let _ = std::fs::remove_file(&calls);
    let config = scratch.config(&config_text(mode, &calls, extra));
    (config.to_str().unwrap().to_owned(), calls)
}

fn calls_received(calls: &Path) -> usize {
    std::fs::read_to_string(calls)
        .unwrap_or_default()
        .lines()
        .count()
}

/// `warden --config CONFIG ARGS...`
fn run(scratch: &Scratch, config: &str, args: &[&str]) -> Output {
    let mut full = vec!["--config", config];
    full.extend_from_slice(args);
    scratch.run(&full, LIMIT)
}

/// The `tools` of server `good` in `warden tools --json`, by name.
fn listed_tools(output: &Output) -> (Vec<Value>, Value) {
    let listing = json(output);
    let server = listing["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "good")
        .unwrap()
        .clone();
    (server["tools"].as_array().unwrap().clone(), server)
}

fn tool<'a>(tools: &'a [Value], name: &str) -> &'a Value {
    tools
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no tool {name} in {tools:#?}"))
}

const ECHO: [&str; 4] = ["call", "good/echo", "--args", r#"{"message":"hi"}"#];

#[test]
fn an_untrusted_server_is_asked_about_so_a_script_needs_yes() {
    for mode in ["good", "modern"] {
        let scratch = Scratch::new();
        let (config, calls) = setup(&scratch, mode, "");

        let output = run(&scratch, &config, &ECHO);
        assert_exit(&output, 4);
        assert_eq!(
            stderr(&output),
            "warden: `good__echo` needs approval, and there is no terminal to ask on \
             (nothing was sent):\n  - no rule matches: its server is untrusted, so the tool is \
             taken to write and to reach outside; asking by default\nRe-run with --yes to \
             approve an `ask` from a script (--yes never overrides a deny).\n"
        );
        assert!(stdout(&output).is_empty(), "{}", describe(&output));
        assert_eq!(
            calls_received(&calls),
            0,
            "the server saw the call ({mode})"
        );

        let mut with_yes = ECHO.to_vec();
        with_yes.push("--yes");
        let output = run(&scratch, &config, &with_yes);
        assert_exit(&output, 0);
        assert_eq!(stdout(&output), "echo: hi\n");
        assert_eq!(calls_received(&calls), 1, "{mode}");

        // The listing says why, for every tool.
        let output = run(&scratch, &config, &["tools", "--json"]);
        assert_exit(&output, 0);
        let (tools, server) = listed_tools(&output);
        assert_eq!(server["hidden_tools"], 0);
        for name in ["echo", "add", "fail"] {
            let policy = &tool(&tools, name)["policy"];
            assert_eq!(policy["trust"], "untrusted", "{policy}");
            assert_eq!(policy["may_write"], true, "{policy}");
            assert_eq!(policy["may_reach_outside"], true, "{policy}");
            assert_eq!(policy["decision"], "ask", "{policy}");
        }
        let output = run(&scratch, &config, &["tools"]);
        assert!(
            stdout(&output).contains(
                "  good__echo  ask    untrusted  may write, may reach outside  Returns the message"
            ),
            "{}",
            describe(&output)
        );
        scratch.assert_no_leftovers();
    }
}

#[test]
fn a_trusted_read_only_server_is_allowed_without_yes() {
    let scratch = Scratch::new();
    // Trust alone is not enough: the test server's tools carry no readOnlyHint, and a
    // trusted server's missing hint means "may write".
    let (config, calls) = setup(
        &scratch,
        "good",
        "[policy.servers.good]\ntrust = \"trusted\"\n",
    );
    let output = run(&scratch, &config, &ECHO);
    assert_exit(&output, 4);
    assert!(
        stderr(&output).contains(
            "no rule matches: the tool may write (its trusted server does not say \
             readOnlyHint: true); asking by default"
        ),
        "{}",
        describe(&output)
    );
    assert_eq!(calls_received(&calls), 0);

    // Declared read-only (the user's word) for the whole server.
    let (config, calls) = setup(
        &scratch,
        "good",
        "[policy.servers.good]\ntrust = \"trusted\"\nread_only = true\nopen_world = false\n",
    );
    let output = run(&scratch, &config, &ECHO);
    assert_exit(&output, 0);
    assert_eq!(stdout(&output), "echo: hi\n");
    assert_eq!(calls_received(&calls), 1);
    let output = run(&scratch, &config, &["tools", "--json"]);
    let (tools, _) = listed_tools(&output);
    let policy = &tool(&tools, "add")["policy"];
    assert_eq!(policy["trust"], "trusted");
    assert_eq!(policy["may_write"], false);
    assert_eq!(policy["may_reach_outside"], false);
    assert_eq!(policy["decision"], "allow");
    assert_eq!(
        policy["reasons"][0],
        "no rule matches: declared read-only in the policy, so allowed by default"
    );

    // Or for one tool: `echo` runs, `add` is still asked about.
    let (config, calls) = setup(
        &scratch,
        "modern",
        "[policy.servers.good.tools.echo]\nread_only = true\n",
    );
    let output = run(&scratch, &config, &ECHO);
    assert_exit(&output, 0);
    assert_eq!(calls_received(&calls), 1);
    let output = run(
        &scratch,
        &config,
        &["call", "good/add", "--args", r#"{"a":1,"b":2}"#],
    );
    assert_exit(&output, 4);
    assert_eq!(calls_received(&calls), 1);
    let output = run(&scratch, &config, &["tools"]);
    let text = stdout(&output);
    assert!(
        text.contains("  good__echo  allow  untrusted  read-only, may reach outside")
            && text.contains("  good__add   ask    untrusted  may write, may reach outside"),
        "{}",
        describe(&output)
    );
    scratch.assert_no_leftovers();
}

#[test]
fn a_deny_rule_refuses_even_with_yes_and_names_the_rule() {
    let scratch = Scratch::new();
    let (config, calls) = setup(
        &scratch,
        "good",
        "[[policy.rules]]\ntools = \"good__e*\"\neffect = \"allow\"\n\n\
         [[policy.rules]]\ntools = \"good__add\"\neffect = \"deny\"\n\
         when = [{ arg = \"/a\", equals = 13 }]\nnote = \"unlucky\"\n\n\
         [[policy.rules]]\ntools = [\"good__echo\", \"good__fail\"]\neffect = \"deny\"\n",
    );
    let output = run(&scratch, &config, &[&ECHO[..], &["--yes"]].concat());
    assert_exit(&output, 4);
    assert_eq!(
        stderr(&output),
        format!(
            "warden: `good__echo` is denied by policy (nothing was sent):\n  \
             - policy.rules[2] (good__echo, good__fail) denies\n    \
             (written at {config}:16:1)\n"
        )
    );
    // Argument constraints: 13 is refused, whatever `--yes` says; 12 is only asked about.
    let output = run(
        &scratch,
        &config,
        &["call", "good/add", "--args", r#"{"a":13,"b":1}"#, "--yes"],
    );
    assert_exit(&output, 4);
    assert_eq!(
        stderr(&output),
        format!(
            "warden: `good__add` is denied by policy (nothing was sent):\n  \
             - policy.rules[1] (good__add) denies: unlucky\n    \
             (written at {config}:10:1)\n"
        )
    );
    assert_eq!(calls_received(&calls), 0, "the server saw a denied call");
    let output = run(
        &scratch,
        &config,
        &[
            "call",
            "good/add",
            "--args",
            r#"{"a":12,"b":1}"#,
            "--yes",
            "--json",
        ],
    );
    assert_exit(&output, 0);
    assert_eq!(json(&output)["structuredContent"]["sum"], 13);
    assert_eq!(calls_received(&calls), 1);

    // The listing shows the default, with no arguments: the `when` rule does not apply.
    let output = run(&scratch, &config, &["tools", "--json"]);
    let (tools, _) = listed_tools(&output);
    assert_eq!(tool(&tools, "echo")["policy"]["decision"], "deny");
    assert_eq!(tool(&tools, "fail")["policy"]["decision"], "deny");
    assert_eq!(tool(&tools, "add")["policy"]["decision"], "ask");
    scratch.assert_no_leftovers();
}

#[test]
fn a_hidden_tool_is_neither_listed_nor_callable() {
    let scratch = Scratch::new();
    let (config, calls) = setup(
        &scratch,
        "modern",
        "[[policy.rules]]\ntools = \"good__f*\"\neffect = \"hide\"\nnote = \"not for me\"\n",
    );
    let output = run(&scratch, &config, &["tools", "--json"]);
    assert_exit(&output, 0);
    let (tools, server) = listed_tools(&output);
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["echo", "add"]);
    assert_eq!(server["hidden_tools"], 1);
    assert!(!stdout(&output).contains("fail"), "{}", describe(&output));
    let output = run(&scratch, &config, &["tools"]);
    assert!(
        stdout(&output).contains("warden-testserver 0.1.0, 2 tools, 1 hidden by policy\n"),
        "{}",
        describe(&output)
    );

    for target in ["good/fail", "good__fail"] {
        let output = run(&scratch, &config, &["call", target, "--yes"]);
        assert_exit(&output, 2);
        assert_eq!(
            stderr(&output),
            format!(
                "warden: no tool `{target}`: it is hidden by policy.rules[0] (good__f*): \
                 not for me, written at {config}:6:1\n"
            )
        );
    }
    // No suggestion gives it away either.
    let output = run(&scratch, &config, &["call", "good/fial", "--yes"]);
    assert_exit(&output, 2);
    assert_eq!(stderr(&output), "warden: no tool `good/fial`\n");
    assert_eq!(calls_received(&calls), 0);
    scratch.assert_no_leftovers();
}

// ---------------------------------------------------------------------------------------
// Project files (discovered in the working directory, not named with --config)
// ---------------------------------------------------------------------------------------

#[test]
fn a_project_file_cannot_loosen_the_policy() {
    let scratch = Scratch::new();
    for (extra, position, what) in [
        (
            "[[policy.rules]]\ntools = \"good__*\"\neffect = \"allow\"\n",
            "6:1",
            "policy.rules[0] is an allow rule",
        ),
        (
            "[policy.servers.good]\ntrust = \"trusted\"\nread_only = true\n",
            "6:17",
            "`[policy.servers.good]` sets trust, labels or declared hints",
        ),
    ] {
        let (path, calls) = setup(&scratch, "good", extra);
        for command in [&ECHO[..], &["tools"]] {
            let output = scratch.run(command, LIMIT);
            assert_exit(&output, 2);
            let err = stderr(&output);
            assert!(
                err.starts_with(&format!(
                    "warden: {path}:{position}: {what}, but project files cannot loosen \
                     policy: a cloned repository must not approve its own tool calls."
                )),
                "{}",
                describe(&output)
            );
            assert!(stdout(&output).is_empty(), "{}", describe(&output));
        }
        assert_eq!(calls_received(&calls), 0);
    }
    // Nothing was started: the configuration is refused before any server runs.
    scratch.assert_no_leftovers();
}

#[test]
fn a_project_deny_rule_applies() {
    let scratch = Scratch::new();
    let (path, calls) = setup(
        &scratch,
        "good",
        "[[policy.rules]]\ntools = \"good__add\"\neffect = \"deny\"\nnote = \"from the repo\"\n",
    );
    let user_file = scratch.path().join("config-home/warden/warden.toml");
    std::fs::create_dir_all(user_file.parent().unwrap()).unwrap();
    std::fs::write(&user_file, support::project_tag_allowance(&["good"])).unwrap();
    // A project server starts only once approved (docs/policy.md, approvals).
    assert_exit(&scratch.run(&["approve", "good", "--yes"], LIMIT), 0);
    let output = scratch.run(
        &["call", "good/add", "--args", r#"{"a":1,"b":2}"#, "--yes"],
        LIMIT,
    );
    assert_exit(&output, 4);
    assert_eq!(
        stderr(&output),
        format!(
            "warden: `good__add` is denied by policy (nothing was sent):\n  \
             - policy.rules[0] (good__add) denies: from the repo\n    \
             (written at {path}:6:1)\n"
        )
    );
    assert_eq!(calls_received(&calls), 0);
    let output = scratch.run(&[&ECHO[..], &["--yes"]].concat(), LIMIT);
    assert_exit(&output, 0);
    assert_eq!(calls_received(&calls), 1);
    scratch.assert_no_leftovers();
}

#[test]
fn trust_from_the_user_file_does_not_pass_to_a_server_the_project_defines() {
    let scratch = Scratch::new();
    let user_file = scratch.path().join("config-home/warden/warden.toml");
    std::fs::create_dir_all(user_file.parent().unwrap()).unwrap();
    let trust = "[policy.servers.good]\ntrust = \"trusted\"\nread_only = true\n";

    // The user trusts their own `good` server: its calls run without a question.
    let calls = scratch.path().join("calls.log");
    std::fs::write(&user_file, config_text("good", &calls, trust)).unwrap();
    let output = scratch.run(&ECHO, LIMIT);
    assert_exit(&output, 0);
    assert_eq!(calls_received(&calls), 1);

    // A repository defines its own `good`: the user's trust does not go with the name.
    let (project, project_calls) = {
        let calls = scratch.path().join("project-calls.log");
        let path = scratch.config(&config_text("good", &calls, ""));
        (path, calls)
    };
    // It gets the test's tag from Warden's environment, which the user allows by name.
    let mut text = std::fs::read_to_string(&user_file).unwrap();
    text.push_str(&support::project_tag_allowance(&["good"]));
    std::fs::write(&user_file, text).unwrap();
    // A project server starts only once approved (docs/policy.md, approvals).
    assert_exit(&scratch.run(&["approve", "good", "--yes"], LIMIT), 0);
    let output = scratch.run(&ECHO, LIMIT);
    assert_exit(&output, 4);
    let err = stderr(&output);
    assert!(
        err.starts_with(&format!(
            "warden: warning: the policy settings for server `good` at {}:6:17 are not \
             applied: server `good` is defined by the project file {}",
            user_file.display(),
            project.display()
        )),
        "{}",
        describe(&output)
    );
    assert!(
        err.contains("its server is untrusted"),
        "{}",
        describe(&output)
    );
    assert_eq!(calls_received(&project_calls), 0);
    scratch.assert_no_leftovers();
}

// ---------------------------------------------------------------------------------------
// Asking on a terminal
// ---------------------------------------------------------------------------------------

/// A pseudo-terminal: the master side, and the path of the slave side.
fn open_pty() -> (std::fs::File, PathBuf) {
    // SAFETY: plain libc calls on a descriptor this function owns; ptsname_r writes at most
    // `buf.len()` bytes into `buf`.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(master >= 0, "posix_openpt failed");
        let master = std::fs::File::from(OwnedFd::from_raw_fd(master));
        use std::os::fd::AsRawFd;
        assert_eq!(libc::grantpt(master.as_raw_fd()), 0);
        assert_eq!(libc::unlockpt(master.as_raw_fd()), 0);
        let mut buf = [0 as libc::c_char; 128];
        assert_eq!(
            libc::ptsname_r(master.as_raw_fd(), buf.as_mut_ptr(), buf.len()),
            0
        );
        let name = std::ffi::CStr::from_ptr(buf.as_ptr());
        (master, PathBuf::from(name.to_str().unwrap()))
    }
}

/// What the test does at the prompt.
enum Reply<'a> {
    /// Types this.
    Answer(&'a str),
    /// Sends warden SIGINT instead of answering.
    Interrupt,
}

/// Runs `warden call good/echo` with stdin and stderr on a terminal, answers the prompt
/// with `answer`, and returns the exit code, stdout and everything shown on the terminal.
fn call_at_a_terminal(scratch: &Scratch, config: &str, answer: &str) -> (i32, String, String) {
    let (code, out, shown, _) = reply_at_a_terminal(scratch, config, Reply::Answer(answer));
    (code, out, shown)
}

/// [`call_at_a_terminal`], with any reply; also returns how long warden took after it.
fn reply_at_a_terminal(
    scratch: &Scratch,
    config: &str,
    reply: Reply<'_>,
) -> (i32, String, String, Duration) {
    use std::os::unix::fs::OpenOptionsExt;
    let (mut master, slave_path) = open_pty();
    let slave = || {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY)
            .open(&slave_path)
            .unwrap()
    };
    let mut command = scratch.warden(&[&["--config", config][..], &ECHO].concat());
    command
        .stdin(Stdio::from(slave()))
        .stderr(Stdio::from(slave()));
    let child = command.spawn().unwrap();
    // Drop the parent's copies (inside `command`), so the terminal closes with warden.
    drop(command);

    let shown = Arc::new(Mutex::new(Vec::new()));
    let mut reader = master.try_clone().unwrap();
    let sink = Arc::clone(&shown);
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        // Ends with EIO once every slave descriptor is closed.
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    let deadline = Instant::now() + LIMIT;
    while !String::from_utf8_lossy(&shown.lock().unwrap()).contains("Run it? [y/N] ") {
        assert!(Instant::now() < deadline, "no prompt was shown");
        std::thread::sleep(Duration::from_millis(20));
    }
    let replied = Instant::now();
    match reply {
        Reply::Answer(answer) => master.write_all(answer.as_bytes()).unwrap(),
        Reply::Interrupt => {
            // SAFETY: kill has no memory effects; the pid is our own child, not yet reaped.
            let rc = unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            assert_eq!(rc, 0);
        }
    }
    let output = support::wait_with_limit(child, LIMIT);
    let took = replied.elapsed();
    std::thread::sleep(Duration::from_millis(100));
    let shown = String::from_utf8_lossy(&shown.lock().unwrap()).into_owned();
    (
        output.status.code().unwrap_or(-1),
        stdout(&output),
        shown,
        took,
    )
}

#[test]
fn an_ask_at_a_terminal_is_put_to_the_user() {
    let scratch = Scratch::new();
    let (config, calls) = setup(&scratch, "good", "");

    let (code, out, shown) = call_at_a_terminal(&scratch, &config, "y\n");
    assert_eq!((code, out.as_str()), (0, "echo: hi\n"), "{shown}");
    let shown = shown.replace("\r\n", "\n");
    assert!(
        shown.starts_with(
            "warden: `good__echo` (server `good`) needs your approval.\narguments:\n  {\n    \
             \"message\": \"hi\"\n  }\nwhy:\n  - no rule matches: its server is untrusted, so \
             the tool is taken to write and to reach outside; asking by default\n\
             Run it? [y/N] y\n"
        ),
        "{shown}"
    );
    assert_eq!(calls_received(&calls), 1);

    for answer in ["n\n", "\n", "yes please\n", "Y\n"] {
        let (code, out, shown) = call_at_a_terminal(&scratch, &config, answer);
        if answer == "Y\n" {
            assert_eq!(code, 0, "{shown}");
            continue;
        }
        assert_eq!(code, 4, "answer {answer:?}: {shown}");
        assert!(out.is_empty());
        assert!(
            shown.contains("warden: `good__echo` was not approved (nothing was sent)"),
            "{shown}"
        );
    }
    assert_eq!(calls_received(&calls), 2);

    // Ctrl-C instead of an answer stops warden and its server at once.
    let (code, _, shown, took) = reply_at_a_terminal(&scratch, &config, Reply::Interrupt);
    assert_eq!(code, 130, "{shown}");
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert_eq!(calls_received(&calls), 2);
    scratch.assert_no_leftovers();
}
