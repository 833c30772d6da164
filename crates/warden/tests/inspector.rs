//! `warden serve` driven by the MCP inspector's command line
//! (`@modelcontextprotocol/inspector-cli` 1.0.3, a real client on the TypeScript SDK, issue
//! 11's "real clients end to end"), over stdio and over Streamable HTTP: it lists the
//! prefixed catalogue of two servers, an allowed call is answered, a denied one comes back
//! as the policy's refusal and never reaches the server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Scratch, describe, peers_dir, server_toml, testserver_bin, warden_bin};

/// Two copies of the test server (`t` and `u`), so that the catalogue's prefixes are visible;
/// `t__echo` allowed, `t__fail` denied. Each server records the calls it is sent.
fn config(scratch: &Scratch) -> PathBuf {
    let calls = support::server_writable_dir(&scratch.path().join("calls"));
    let server = |name: &str| {
        server_toml(
            name,
            &testserver_bin(),
            &[],
            &format!(
                "env = {{ WARDEN_TEST_CALL_LOG = {:?} }}\nsandbox = {{ write = [{:?}] }}",
                calls.join(name).display().to_string(),
                calls.display().to_string()
            ),
        )
    };
    scratch.config(&format!(
        "{}\n{}\n\
         [[policy.rules]]\ntools = \"t__echo\"\neffect = \"allow\"\n\n\
         [[policy.rules]]\ntools = \"t__fail\"\neffect = \"deny\"\n",
        server("t"),
        server("u"),
    ))
}

/// The inspector's launcher. It reads `../package.json` relative to its working directory
/// before it starts (../shared/spec/peers.md, pitfall 2), so it is run from a folder whose
/// parent has one: [`inspector`] makes that folder in the scratch.
fn inspector_bin() -> PathBuf {
    let bin = peers_dir().join("node/node_modules/.bin/mcp-inspector-cli");
    assert!(
        bin.exists(),
        "{} is missing: the peers predate the inspector; run scripts/install-peers",
        bin.display()
    );
    bin
}

/// How the inspector reaches Warden.
enum Face<'a> {
    /// It starts `warden serve` with these arguments and speaks stdio to it.
    Stdio(&'a [&'a str]),
    /// Streamable HTTP at this URL.
    Http(&'a str),
}

/// Runs the inspector against `face` with `method` arguments, with Warden's state in the
/// scratch (the inspector passes its environment on to a command it starts).
fn inspector(scratch: &Scratch, face: &Face, method: &[&str]) -> Output {
    let parent = scratch.path().join("inspector");
    let cwd = parent.join("run");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::write(parent.join("package.json"), "{}\n").unwrap();
    let mut command = Command::new(inspector_bin());
    command.arg("--cli");
    match face {
        // The command goes after `--`: the launcher has options of its own (`--config`
        // among them) that would take Warden's.
        Face::Stdio(args) => {
            command.args(method).arg("--").arg(warden_bin()).args(*args);
        }
        Face::Http(url) => {
            command.args([url, "--transport", "http"]).args(method);
        }
    }
    command
        .current_dir(&cwd)
        .env(support::TAG_VAR, &scratch.tag)
        .env("XDG_STATE_HOME", scratch.path().join("state"))
        .env("XDG_CONFIG_HOME", scratch.path().join("config-home"))
        .env_remove("WARDEN_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    support::run_with_limit(command, Duration::from_secs(90))
}

/// The JSON result the inspector printed on stdout (it exits 0 for a result, error or not).
fn result(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "inspector failed:\n{}",
        describe(output)
    );
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("stdout is not JSON ({error}):\n{}", describe(output)))
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

fn calls_sent(scratch: &Scratch, server: &str) -> String {
    std::fs::read_to_string(scratch.path().join("calls").join(server)).unwrap_or_default()
}

/// One face: list, an allowed call, a denied call.
fn check_face(scratch: &Scratch, target: &Face) {
    let listed = result(&inspector(scratch, target, &["--method", "tools/list"]));
    let mut names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    for name in ["t__echo", "t__fail", "u__echo", "u__fail"] {
        assert!(names.contains(&name), "{name} not listed: {names:?}");
    }
    assert!(
        names
            .iter()
            .all(|name| name.starts_with("t__") || name.starts_with("u__")),
        "a tool without its server's prefix: {names:?}"
    );

    let before = calls_sent(scratch, "t");
    let allowed = result(&inspector(
        scratch,
        target,
        // `--tool-arg` takes every value up to the next option (the launcher's `--` does not
        // end it), so another option follows it.
        &[
            "--method",
            "tools/call",
            "--tool-arg",
            "message=from the inspector",
            "--tool-name",
            "t__echo",
        ],
    ));
    assert_ne!(allowed["isError"], true, "{allowed}");
    assert_eq!(text(&allowed), "echo: from the inspector", "{allowed}");

    let denied = result(&inspector(
        scratch,
        target,
        &["--method", "tools/call", "--tool-name", "t__fail"],
    ));
    assert_eq!(denied["isError"], true, "{denied}");
    assert!(text(&denied).contains("denies"), "{denied}");
    // Positive control first, then the claim: the allowed call reached the server, the
    // denied one did not.
    let sent = calls_sent(scratch, "t");
    let new = &sent[before.len()..];
    assert!(
        new.contains("echo"),
        "the allowed call was not sent: {sent:?}"
    );
    assert!(!new.contains("fail"), "the denied call was sent: {sent:?}");
}

/// A running `warden serve --http`, stopped (and its servers with it) when dropped.
struct Served {
    child: Child,
    url: String,
}

impl Served {
    fn start(scratch: &Scratch, config: &Path) -> Served {
        let mut command = scratch.warden(&["serve", "--config", config.to_str().unwrap()]);
        command.args(["--http", "127.0.0.1:0"]);
        let mut child = command.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                eprintln!("[warden] {line}");
                if let Some(url) = line.strip_prefix("warden: serving MCP on ")
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(url.to_owned());
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("warden serve --http printed no address");
        Served { child, url }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // SIGTERM: Warden stops accepting and stops its servers.
        // SAFETY: kill has no memory preconditions; the pid is our own child's.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_inspector_cli_lists_the_prefixed_catalogue_and_meets_the_policy_over_stdio() {
    let scratch = Scratch::new();
    let config = config(&scratch);
    check_face(
        &scratch,
        &Face::Stdio(&["serve", "--config", config.to_str().unwrap()]),
    );
    scratch.assert_no_leftovers();
}

#[test]
fn the_inspector_cli_lists_the_prefixed_catalogue_and_meets_the_policy_over_http() {
    let scratch = Scratch::new();
    let config = config(&scratch);
    let served = Served::start(&scratch, &config);
    check_face(&scratch, &Face::Http(&served.url));
    drop(served);
    scratch.assert_no_leftovers();
}
