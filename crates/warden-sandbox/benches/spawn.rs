//! Spawn-to-exit time of `/bin/true`, plain and confined (network off, and `host`), and of
//! `confine()`'s preparation alone. Medians of many runs, printed as a table; run with
//! `cargo bench -p warden-sandbox --bench spawn`.
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

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

fn confined_run(profile: &Profile) -> Duration {
    let mut command = Command::new("/bin/true");
    let started = Instant::now();
    let confinement = confine(&mut command, profile).unwrap();
    let status = command
        .status()
        .map_err(|e| confinement.spawn_error(e))
        .unwrap();
    assert!(status.success());
    started.elapsed()
}

fn main() {
    let base = tempfile::tempdir().unwrap();
    // The sandbox uid must be able to reach the scratch directory's parent.
    std::fs::set_permissions(
        base.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let scratch = Scratch::create(base.path(), "bench").unwrap();
    let profile = Profile::default_for(Path::new("/bin/true"), scratch.path()).unwrap();
    let mut host = profile.clone();
    host.network = Network::Host;
    let (mut plain, mut confined, mut with_host, mut prepare) = (vec![], vec![], vec![], vec![]);
    for _ in 0..RUNS {
        let started = Instant::now();
        assert!(Command::new("/bin/true").status().unwrap().success());
        plain.push(started.elapsed());
        confined.push(confined_run(&profile));
        with_host.push(confined_run(&host));
        let mut command = Command::new("/bin/true");
        let started = Instant::now();
        let _confinement = confine(&mut command, &profile).unwrap();
        prepare.push(started.elapsed());
    }
    let plain = median(plain);
    let confined = median(confined);
    println!("spawn+exit of /bin/true, median of {RUNS} interleaved runs");
    println!("| case | median |");
    println!("|---|---|");
    println!("| plain | {plain:?} |");
    println!("| confined, network none | {confined:?} |");
    println!("| confined, network host | {:?} |", median(with_host));
    println!("| confine() preparation alone | {:?} |", median(prepare));
    println!(
        "added by confinement: {:?} per start",
        confined.saturating_sub(plain)
    );
}
