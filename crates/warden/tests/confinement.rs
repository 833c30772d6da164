//! What a server started by Warden cannot do by default, checked from outside: the test
//! server probes at start (`WARDEN_TEST_PROBE_*`) and writes what it could do to a file the
//! test reads. The same server with `confine = false` can do all of it, which shows the
//! checks would notice a sandbox that did nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use support::{Scratch, json, server_toml, stderr, testserver_bin};

const LIMIT: Duration = Duration::from_secs(30);
const SECRET_VAR: &str = "WARDEN_TEST_SECRET_TOKEN";
const SECRET: &str = "ghp_not_for_servers";
const KEY: &str = "-----FAKE PRIVATE KEY-----";

/// A fake home with `.ssh/id_rsa`, readable by anyone so only the sandbox can stop a read.
fn fake_home(scratch: &Scratch) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let home = scratch.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), KEY).unwrap();
    for (path, mode) in [
        (home.clone(), 0o755),
        (home.join(".ssh"), 0o755),
        (home.join(".ssh/id_rsa"), 0o644),
    ] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    home
}

/// Runs `warden tools` on the test server with the probes on; returns the probe report.
fn probe(confine: bool) -> String {
    let scratch = Scratch::new();
    let home = fake_home(&scratch);
    let out_dir = support::server_writable_dir(&scratch.path().join("out"));
    let out = out_dir.join("probe.txt");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let env = format!(
        "env = {{ WARDEN_TEST_PROBE_OUT = {:?}, WARDEN_TEST_PROBE_READ = {:?}, \
         WARDEN_TEST_PROBE_ENV = {SECRET_VAR:?}, WARDEN_TEST_PROBE_CONNECT = {address:?} }}\n{}\n{}",
        out.display().to_string(),
        home.join(".ssh/id_rsa").display().to_string(),
        support::write_grant(&[&out_dir]),
        if confine { "" } else { "confine = false" },
    );
    let config = scratch.config(&server_toml("prober", &testserver_bin(), &["good"], &env));
    let mut command = scratch.warden(&["--config", config.to_str().unwrap(), "tools", "--json"]);
    command.env("HOME", &home).env(SECRET_VAR, SECRET);
    let output = support::run_with_limit(command, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let listing = json(&output);
    assert_eq!(listing["servers"][0]["state"], "connected", "{listing}");
    assert_eq!(listing["servers"][0]["confined"], confine, "{listing}");
    scratch.assert_no_leftovers();
    std::fs::read_to_string(&out).unwrap()
}

#[test]
fn a_confined_server_cannot_read_home_see_secrets_or_reach_the_network() {
    let report = probe(true);
    assert!(report.contains("read: denied"), "{report}");
    assert!(!report.contains(KEY), "{report}");
    assert!(report.contains("env: unset"), "{report}");
    assert!(!report.contains(SECRET), "{report}");
    assert!(report.contains("connect: denied"), "{report}");
}

#[test]
fn the_same_server_unconfined_can_do_all_of_it() {
    let report = probe(false);
    assert!(report.contains(&format!("read: ok {KEY}")), "{report}");
    assert!(report.contains(&format!("env: set {SECRET}")), "{report}");
    assert!(report.contains("connect: ok"), "{report}");
}

#[test]
fn unconfined_servers_are_marked_in_the_listing() {
    let scratch = Scratch::new();
    let config = scratch.config(&server_toml(
        "loose",
        &testserver_bin(),
        &["good"],
        "confine = false",
    ));
    let output = scratch.run(&["--config", config.to_str().unwrap(), "tools"], LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = support::stdout(&output);
    assert!(
        text.contains("loose: connected, ") && text.contains("UNCONFINED"),
        "{text}"
    );
    assert!(
        stderr(&output).contains("UNCONFINED"),
        "a warning at start: {}",
        stderr(&output)
    );
    scratch.assert_no_leftovers();
}

/// A fake interpreter that leaves a mark if it is ever run.
fn plant_decoy(dir: &Path, name: &str, mark: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let decoy = dir.join(name);
    std::fs::write(
        &decoy,
        format!("#!/bin/sh\necho ran > {:?}\n", mark.display().to_string()),
    )
    .unwrap();
    std::fs::set_permissions(&decoy, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_fake_node_or_python_in_the_working_directory_is_never_run() {
    let scratch = Scratch::new();
    let mark = scratch.path().join("decoy-ran");
    plant_decoy(scratch.path(), "node", &mark);
    plant_decoy(scratch.path(), "python3", &mark);
    let toml = [
        server_toml("n", "node".as_ref(), &["--version"], ""),
        server_toml("p", "python3".as_ref(), &["--version"], ""),
    ]
    .concat();
    let config = scratch.config(&toml);
    // The working directory (where the decoys are) is on PATH twice, relatively.
    let mut command = scratch.warden(&["--config", config.to_str().unwrap(), "tools", "--json"]);
    command.env("PATH", ".::/usr/local/bin:/usr/bin:/bin");
    let output = support::run_with_limit(command, LIMIT);
    // Neither speaks MCP, so both fail; what matters is which program ran.
    assert!(output.status.code().is_some(), "{}", stderr(&output));
    assert!(
        !mark.exists(),
        "a program from the working directory was run: {}",
        stderr(&output)
    );
    scratch.assert_no_leftovers();
}
