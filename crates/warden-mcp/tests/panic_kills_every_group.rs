//! The panic path: `kill_all_live_groups` (what Warden's panic hook calls) kills every
//! process group Warden started. In its own test binary, because it kills every group of
//! the process it runs in.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use warden_mcp::launcher::kill_all_live_groups;
use warden_mcp::{DirectLauncher, LaunchRequest, Launcher};

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(") ").map(|(_, rest)| rest.to_owned()))
        .is_some_and(|rest| !rest.starts_with('Z') && !rest.starts_with('X'))
}

#[tokio::test]
async fn the_panic_path_kills_every_live_group() {
    let request = LaunchRequest {
        server: "sleeper".into(),
        command: "sleep".into(),
        args: vec!["600".into()],
        env: BTreeMap::new(),
        cwd: None,
        sandbox: Default::default(),
    };
    let launcher = DirectLauncher::from_env();
    let first = launcher.launch(&request).unwrap();
    let second = launcher.launch(&request).unwrap();
    let pids = [first.group.pid(), second.group.pid()];
    assert!(pids.iter().all(|&pid| alive(pid)));
    kill_all_live_groups();
    for _ in 0..200 {
        if pids.iter().all(|&pid| !alive(pid)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("a process group survived kill_all_live_groups: {pids:?}");
}
