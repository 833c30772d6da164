//! `warden probe`: Warden's own binary, run in place of the test server under exactly the
//! server's confinement, reports what it can reach. Confined by default it reaches nothing
//! of the host's; the same server with `confine = false` reaches all of it, which shows the
//! probe's checks are live.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use support::{Scratch, json, server_toml, stderr, testserver_bin};

const LIMIT: Duration = Duration::from_secs(30);
const TOKEN_VALUE: &str = "ghp_probe_token_value";
const SECRET_VALUE: &str = "aws_probe_secret_value";
const FAKE_FILES: [&str; 3] = [".ssh/id_rsa", ".aws/credentials", ".netrc"];

/// A fake home with credential files readable by anyone, so only the sandbox can stop a read.
fn fake_home(scratch: &Scratch) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let home = scratch.path().join("home");
    for dir in [".ssh", ".aws"] {
        std::fs::create_dir_all(home.join(dir)).unwrap();
        std::fs::set_permissions(home.join(dir), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
    for file in FAKE_FILES {
        std::fs::write(home.join(file), "not a real secret").unwrap();
        std::fs::set_permissions(home.join(file), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    home
}

/// Everything under `dir`, relative, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in std::fs::read_dir(&current).unwrap().flatten() {
            let path = entry.path();
            found.push(path.strip_prefix(dir).unwrap().display().to_string());
            if path.is_dir() {
                stack.push(path);
            }
        }
    }
    found.sort();
    found
}

struct Probed {
    scratch: Scratch,
    home: PathBuf,
    address: String,
    output: std::process::Output,
}

/// Runs `warden probe prober --connect ADDRESS` (plus `extra` arguments) on the test server,
/// with a fake `HOME` and two secrets in Warden's environment.
fn probe(confine: bool, extra: &[&str]) -> Probed {
    let scratch = Scratch::new();
    let home = fake_home(&scratch);
    let before = listing(&home);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let config = scratch.config(&server_toml(
        "prober",
        &testserver_bin(),
        &["good"],
        if confine { "" } else { "confine = false" },
    ));
    let mut args = vec![
        "--config",
        config.to_str().unwrap(),
        "probe",
        "prober",
        "--connect",
        &address,
    ];
    args.extend_from_slice(extra);
    let mut command = scratch.warden(&args);
    command
        .env("HOME", &home)
        .env("GITHUB_TOKEN", TOKEN_VALUE)
        .env("AWS_SECRET_ACCESS_KEY", SECRET_VALUE);
    let output = support::run_with_limit(command, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let out = support::stdout(&output);
    assert!(
        !out.contains(TOKEN_VALUE) && !out.contains(SECRET_VALUE),
        "a secret's value was reported: {out}"
    );
    assert_eq!(listing(&home), before, "the probe left something in HOME");
    scratch.assert_no_leftovers();
    drop(listener);
    Probed {
        scratch,
        home,
        address,
        output,
    }
}

fn entry<'a>(list: &'a Value, key: &str, value: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|item| item[key] == value)
        .unwrap_or_else(|| panic!("no {key} = {value} in {list}"))
}

/// The test scratch folder's parent (a shared temporary directory) and the fake home are
/// among the writable-place candidates.
fn assert_candidates(report: &Value, probed: &Probed) {
    let parent = probed.scratch.path().parent().unwrap();
    for dir in [probed.home.as_path(), parent] {
        entry(&report["writable"], "path", dir.to_str().unwrap());
    }
}

#[test]
fn a_confined_server_reaches_nothing_of_the_hosts() {
    let probed = probe(true, &["--json"]);
    let value = json(&probed.output);
    assert_eq!(value["confined"], true, "{value}");
    let report = &value["report"];
    for file in FAKE_FILES {
        let path = probed.home.join(file);
        let check = entry(&report["credential_files"], "path", path.to_str().unwrap());
        assert_eq!(check["ok"], false, "{check}");
    }
    assert_eq!(report["secret_variables"], serde_json::json!([]), "{value}");
    assert_eq!(
        entry(&report["connect"], "address", &probed.address)["reachable"],
        false,
        "{value}"
    );
    assert!(
        report["processes"]["visible"].as_u64().unwrap() <= 4,
        "{value}"
    );
    assert_eq!(report["processes"]["sees_host"], false, "{value}");
    assert_ne!(report["uid"], 0, "{value}");
    assert_candidates(report, &probed);
    assert_eq!(
        value["summary"],
        serde_json::json!({
            "credential_files_readable": 0,
            "secret_variables": 0,
            "ports_reachable": 0,
            "host_processes_visible": 0,
            "writable_outside_grant": 0,
        }),
        "{value}"
    );
    probed.scratch.assert_no_leftovers();
}

#[test]
fn the_same_probe_unconfined_reaches_all_of_it() {
    let probed = probe(false, &["--json"]);
    let value = json(&probed.output);
    assert_eq!(value["confined"], false, "{value}");
    let report = &value["report"];
    for file in FAKE_FILES {
        let path = probed.home.join(file);
        let check = entry(&report["credential_files"], "path", path.to_str().unwrap());
        assert_eq!(check["ok"], true, "{check}");
    }
    let secrets = report["secret_variables"].as_array().unwrap();
    for name in ["GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY"] {
        assert!(secrets.contains(&Value::from(name)), "{value}");
    }
    assert_eq!(
        entry(&report["connect"], "address", &probed.address)["reachable"],
        true,
        "{value}"
    );
    assert!(
        report["processes"]["visible"].as_u64().unwrap() > 4,
        "{value}"
    );
    assert_eq!(report["processes"]["sees_host"], true, "{value}");
    assert_candidates(report, &probed);
    let home = entry(&report["writable"], "path", probed.home.to_str().unwrap());
    assert_eq!(home["ok"], true, "{home}");
    let summary = &value["summary"];
    assert!(
        summary["credential_files_readable"].as_u64().unwrap() >= 3,
        "{value}"
    );
    assert!(
        summary["secret_variables"].as_u64().unwrap() >= 2,
        "{value}"
    );
    assert_eq!(summary["ports_reachable"], 1, "{value}");
    assert!(
        summary["host_processes_visible"].as_u64().unwrap() > 4,
        "{value}"
    );
    assert!(
        summary["writable_outside_grant"].as_u64().unwrap() >= 1,
        "{value}"
    );
    probed.scratch.assert_no_leftovers();
}

#[test]
fn the_text_report_ends_with_the_summary() {
    let probed = probe(true, &[]);
    let text = support::stdout(&probed.output);
    assert!(text.contains("probe of `prober` (confined)"), "{text}");
    assert!(text.contains("the probe is Warden's binary"), "{text}");
    assert!(text.contains("no grant was added"), "{text}");
    assert!(
        text.trim_end().ends_with(
            "0 credential files readable, 0 secret-looking variables, 0 ports reachable, \
             0 host processes visible, 0 writable places outside the grant"
        ),
        "{text}"
    );
    probed.scratch.assert_no_leftovers();
}

#[test]
fn an_unknown_server_is_a_usage_error() {
    let scratch = Scratch::new();
    let config = scratch.config(&server_toml("prober", &testserver_bin(), &["good"], ""));
    let output = scratch.run(
        &["--config", config.to_str().unwrap(), "probe", "nope"],
        LIMIT,
    );
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("prober"), "{}", stderr(&output));
    scratch.assert_no_leftovers();
}

#[test]
fn warden_runs_from_the_servers_scratch_when_its_grants_miss_it() {
    // The "server" is a system program: its grants cover the system directories, not the
    // cargo target directory Warden's binary is in. The probe is never the server, so the
    // server program does not need to speak MCP.
    let scratch = Scratch::new();
    let config = scratch.config(&server_toml("sys", Path::new("/usr/bin/true"), &[], ""));
    let output = scratch.run(
        &[
            "--config",
            config.to_str().unwrap(),
            "probe",
            "sys",
            "--connect",
            "127.0.0.1:9",
            "--json",
        ],
        LIMIT,
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let value = json(&output);
    let copy = value["probe_binary"]["copied_into_scratch"]
        .as_str()
        .unwrap();
    assert!(
        !Path::new(copy).exists(),
        "the copy outlived the probe: {copy}"
    );
    assert_eq!(value["server_program"], "/usr/bin/true", "{value}");
    assert_eq!(value["summary"]["credential_files_readable"], 0, "{value}");
    assert_eq!(value["summary"]["writable_outside_grant"], 0, "{value}");
    scratch.assert_no_leftovers();
}
