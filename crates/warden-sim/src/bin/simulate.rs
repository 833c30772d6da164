//! `simulate`: runs the connection simulation over many seeds, or replays one.
//!
//! ```text
//! cargo run -p warden-sim --bin simulate -- --seeds 1000 [--from 0]
//! cargo run -p warden-sim --bin simulate -- --seed 42        # replay: prints the trace
//! ```
//!
//! Exits 1 when a seed breaks a property, after printing the seed and the command that
//! replays it.

use std::process::ExitCode;

fn usage() -> ExitCode {
    eprintln!("usage: simulate --seeds N [--from S] | --seed S");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    if let Some(seed) = number("--seed") {
        for line in warden_sim::trace(seed) {
            println!("{line}");
        }
        let report = warden_sim::run(seed);
        println!("{report:?}");
        return if report.violations.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    let Some(count) = number("--seeds") else {
        return usage();
    };
    let from = number("--from").unwrap_or(0);
    let started = std::time::Instant::now();
    let (mut calls, mut opens, mut failed, mut strays, mut timeouts) = (0, 0, 0, 0, 0);
    let mut failures = Vec::new();
    for seed in from..from.saturating_add(count) {
        let report = warden_sim::run(seed);
        calls += report.calls;
        opens += report.opens;
        failed += report.failed_servers;
        strays += report.strays;
        timeouts += report.timeouts;
        if !report.violations.is_empty() {
            eprintln!("seed {seed} FAILED:");
            for violation in &report.violations {
                eprintln!("  {violation}");
            }
            eprintln!("  replay: cargo run -p warden-sim --bin simulate -- --seed {seed}");
            failures.push(seed);
        }
    }
    println!(
        "simulate: {count} seeds from {from} in {:.1?}: {calls} calls, {timeouts} timeouts, \
         {opens} opens, {failed} servers marked failed, {strays} stray answers dropped; \
         {} failing seed(s){}",
        started.elapsed(),
        failures.len(),
        if failures.is_empty() {
            String::new()
        } else {
            format!(": {failures:?}")
        }
    );
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
