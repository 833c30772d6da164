//! Spawn-to-exit time of `/bin/true`, plain and confined, and of `confine()`'s preparation
//! alone. Medians of many runs, printed as a table; run with
//! `cargo bench -p warden-sandbox --bench spawn`.
//!
//! The first part interleaves, per round: plain; confined with network `none` and the
//! default limits (in a cgroup leaf where the machine offers one); the same with rlimits
//! only; network `host`; `confine()` alone (which creates the cgroup leaf); and it times
//! dropping a `Confinement` after its process exited (which removes the leaf). The second
//! part starts a confined process only after a pause, as a server usually starts, with and
//! without the cgroup.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark, not library code"
)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use warden_sandbox::{Network, Profile, Scratch, confine};

const RUNS: usize = 200;

/// Runs of the second part, and the pause before each.
const COLD_RUNS: usize = 60;
const PAUSE: Duration = Duration::from_millis(50);

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

/// Spawn to exit, and then the time to drop the command and its `Confinement`.
fn confined_run(profile: &Profile) -> (Duration, Duration) {
    let mut command = Command::new("/bin/true");
    let started = Instant::now();
    let confinement = confine(&mut command, profile).unwrap();
    let status = command
        .status()
        .map_err(|e| confinement.spawn_error(e))
        .unwrap();
    assert!(status.success());
    let elapsed = started.elapsed();
    let dropping = Instant::now();
    drop(command);
    drop(confinement);
    (elapsed, dropping.elapsed())
}

fn main() {
    let base = tempfile::tempdir().unwrap();
    let scratch = Scratch::create(base.path(), "bench").unwrap();
    let profile = Profile::default_for(Path::new("/bin/true"), scratch.path()).unwrap();
    let mut rlimits_only = profile.clone();
    rlimits_only.limits.cgroup = false;
    let mut host = profile.clone();
    host.network = Network::Host;
    let (mut plain, mut confined, mut no_cgroup, mut with_host) = (vec![], vec![], vec![], vec![]);
    let (mut prepare, mut teardown) = (vec![], vec![]);
    for _ in 0..RUNS {
        let started = Instant::now();
        assert!(Command::new("/bin/true").status().unwrap().success());
        plain.push(started.elapsed());
        let (run, dropped) = confined_run(&profile);
        confined.push(run);
        teardown.push(dropped);
        no_cgroup.push(confined_run(&rlimits_only).0);
        with_host.push(confined_run(&host).0);
        let mut command = Command::new("/bin/true");
        let started = Instant::now();
        let _confinement = confine(&mut command, &profile).unwrap();
        prepare.push(started.elapsed());
    }
    let (mut cold, mut cold_no_cgroup) = (vec![], vec![]);
    for _ in 0..COLD_RUNS {
        std::thread::sleep(PAUSE);
        cold.push(confined_run(&profile).0);
        std::thread::sleep(PAUSE);
        cold_no_cgroup.push(confined_run(&rlimits_only).0);
    }
    let plain = median(plain);
    let confined = median(confined);
    println!("spawn+exit of /bin/true, median of {RUNS} interleaved runs");
    println!("| case | median |");
    println!("|---|---|");
    println!("| plain | {plain:?} |");
    println!("| confined, network none, default limits | {confined:?} |");
    println!(
        "| confined, network none, rlimits only (no cgroup) | {:?} |",
        median(no_cgroup)
    );
    println!("| confined, network host | {:?} |", median(with_host));
    println!(
        "| confine() preparation alone (cgroup leaf included) | {:?} |",
        median(prepare)
    );
    println!(
        "| dropping the Confinement after exit (leaf removed) | {:?} |",
        median(teardown)
    );
    println!(
        "| after {PAUSE:?} idle: network none, default limits ({COLD_RUNS} runs) | {:?} |",
        median(cold)
    );
    println!(
        "| after {PAUSE:?} idle: network none, rlimits only ({COLD_RUNS} runs) | {:?} |",
        median(cold_no_cgroup)
    );
    println!(
        "added by confinement: {:?} per start",
        confined.saturating_sub(plain)
    );
}
