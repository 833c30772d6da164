//! Pinned executables: the first start of a server records the sha256 of its program and
//! of the files its arguments name; a later start whose bytes differ is refused, with a
//! reason naming what changed, until `warden pin SERVER` accepts the new state.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::time::Duration;

use support::{
    Scratch, assert_exit, copied_server, json, server_toml, stderr, stdout, testserver_bin,
};

const LIMIT: Duration = Duration::from_secs(30);

/// Appends bytes to a file: an ELF still runs, a shell script gets a comment.
fn append(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(bytes).unwrap();
}

fn tools(scratch: &Scratch, config: &str) -> serde_json::Value {
    let output = scratch.run(&["--config", config, "tools", "--json"], LIMIT);
    assert_exit(&output, 0);
    json(&output)
}

fn call(scratch: &Scratch, config: &str, target: &str) -> std::process::Output {
    scratch.run(
        &[
            "--config",
            config,
            "call",
            "--yes",
            target,
            "--args",
            r#"{"message":"hi"}"#,
        ],
        LIMIT,
    )
}

#[test]
fn a_replaced_binary_is_refused_until_it_is_pinned_again() {
    let scratch = Scratch::new();
    let program = copied_server(&scratch);
    let config = scratch.config(&server_toml("good", &program, &["good"], ""));
    let config = config.to_str().unwrap();

    // First start: trust on first use, the program is pinned.
    let listing = tools(&scratch, config);
    assert_eq!(listing["servers"][0]["state"], "connected", "{listing}");
    assert!(scratch.path().join("state/warden/state.db").exists());
    let output = call(&scratch, config, "good/echo");
    assert_exit(&output, 0);

    // The call above was a second start with the same bytes. Different bytes: refused.
    append(&program, b"\0changed after pinning");
    let listing = tools(&scratch, config);
    let server = &listing["servers"][0];
    assert_eq!(server["state"], "failed", "{listing}");
    let reason = server["reason"].as_str().unwrap();
    assert!(reason.contains(&program.display().to_string()), "{reason}");
    assert!(reason.contains("changed"), "{reason}");
    assert!(reason.contains("warden pin good"), "{reason}");
    let output = call(&scratch, config, "good/echo");
    assert_exit(&output, 3);
    assert!(stderr(&output).contains("changed"), "{}", stderr(&output));

    // `--show` shows the change and records nothing.
    let output = scratch.run(&["--config", config, "pin", "good", "--show"], LIMIT);
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("changed since it was pinned"),
        "{}",
        stdout(&output)
    );
    assert_exit(&call(&scratch, config, "good/echo"), 3);

    // Accepted after a look: the next call works.
    let output = scratch.run(&["--config", config, "pin", "good"], LIMIT);
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("pinned to what it runs now"),
        "{}",
        stdout(&output)
    );
    let output = call(&scratch, config, "good/echo");
    assert_exit(&output, 0);
    assert_eq!(stdout(&output), "echo: hi\n");

    // An unknown server is a usage error.
    let output = scratch.run(&["--config", config, "pin", "nope"], LIMIT);
    assert_exit(&output, 2);
    scratch.assert_no_leftovers();
}

#[test]
fn a_changed_script_argument_is_refused() {
    let scratch = Scratch::new();
    let scripts = scratch.path().join("scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    let script = scripts.join("server.sh");
    std::fs::write(
        &script,
        format!("exec {:?} good\n", testserver_bin().display().to_string()),
    )
    .unwrap();
    // The script runs the test server from the build folder, which a confined server
    // cannot reach; pinning is the same either way.
    let config = scratch.config(&server_toml(
        "scripted",
        Path::new("/bin/sh"),
        &[script.to_str().unwrap()],
        "confine = false",
    ));
    let config = config.to_str().unwrap();

    let listing = tools(&scratch, config);
    assert_eq!(listing["servers"][0]["state"], "connected", "{listing}");

    append(&script, b"# changed\n");
    let listing = tools(&scratch, config);
    let server = &listing["servers"][0];
    assert_eq!(server["state"], "failed", "{listing}");
    let reason = server["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("file {} changed", script.display())),
        "{reason}"
    );
    assert!(
        !reason.contains("program"),
        "the shell did not change: {reason}"
    );
    assert_exit(&call(&scratch, config, "scripted/echo"), 3);
    scratch.assert_no_leftovers();
}
