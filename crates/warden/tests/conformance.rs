//! The official MCP conformance suite's client scenarios, both revisions, run through
//! `scripts/conformance` against `warden conformance-client`. The script installs the suite
//! and Node 22 on first use (stamp-checked) and fails unless exactly the scenarios listed
//! in tests/conformance/expected-failures-*.yaml (none: authorization included) fail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Command;
use std::time::Duration;

use support::{describe, repo_root, run_with_limit};

#[test]
fn the_conformance_suite_passes_every_client_scenario_of_both_revisions() {
    let mut command = Command::new(repo_root().join("scripts/conformance"));
    command
        .env("WARDEN_BIN", support::warden_bin())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let output = run_with_limit(command, Duration::from_secs(600));
    assert!(output.status.success(), "{}", describe(&output));
    let report = support::stderr(&output);
    assert!(report.contains("2025-11-25: as expected"), "{report}");
    assert!(report.contains("2026-07-28: as expected"), "{report}");
}
