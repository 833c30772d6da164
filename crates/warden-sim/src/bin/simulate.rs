//! `simulate`: runs the simulations over many seeds, or replays one.
//!
//! ```text
//! cargo run -p warden-sim --bin simulate -- --seeds 1000 [--from 0] [--world W]
//! cargo run -p warden-sim --bin simulate -- --seed 42 [--world W] [--timing 1]  # replay
//! ```
//!
//! `W` is one of `warden_sim::driver::WORLDS` — `connection` (reconnects, back-off, answer
//! correlation), `gateway` (many clients through `warden serve`'s stdio and HTTP faces,
//! faulty upstreams), `host` (the agent loop over the host: the catalogue at turn
//! boundaries, audit, cancellation, decisions), `remote` (the real Streamable HTTP client
//! against scripted remote servers: reconnects, 404/5xx/401, broken streams), `oauth`
//! (re-authorisation: 401 mid-session, refresh that succeeds, fails, answers late or
//! twice, an authorization server down, rotated refresh tokens, 403 step-up) — or `all`
//! (the default).
//!
//! Exits 1 when a seed breaks a property, after printing the seed and the command that
//! replays it.

use std::process::ExitCode;

use warden_sim::driver::{self, WORLDS, World};

fn usage() -> ExitCode {
    let names: Vec<&str> = WORLDS.iter().map(|w| w.name).collect();
    eprintln!(
        "usage: simulate --seeds N [--from S] | --seed S [--timing T]  [--world {}|all]",
        names.join("|")
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let number = |flag: &str| value(flag).and_then(|v| v.parse::<u64>().ok());
    let name = value("--world").unwrap_or_else(|| "all".into());
    let worlds: Vec<&World> = if name == "all" {
        WORLDS.iter().collect()
    } else {
        match driver::world(&name) {
            Some(world) => vec![world],
            None => return usage(),
        }
    };
    if let Some(seed) = number("--seed") {
        let mut failed = false;
        for world in &worlds {
            for line in (world.trace)(seed, number("--timing").unwrap_or(0)) {
                println!("{line}");
            }
            let summary = (world.run)(seed);
            println!("{} seed {seed}: {:?}", world.name, summary);
            failed |= !summary.violations.is_empty();
        }
        return if failed {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        };
    }
    let Some(count) = number("--seeds") else {
        return usage();
    };
    let from = number("--from").unwrap_or(0);
    let started = std::time::Instant::now();
    let mut failures = Vec::new();
    for world in &worlds {
        let mut totals: Vec<(&str, usize)> = Vec::new();
        for seed in from..from.saturating_add(count) {
            let summary = (world.run)(seed);
            for (label, count) in &summary.counts {
                match totals.iter_mut().find(|(l, _)| l == label) {
                    Some((_, total)) => *total += count,
                    None => totals.push((label, *count)),
                }
            }
            if !summary.violations.is_empty() {
                eprintln!("seed {seed} FAILED ({}):", world.name);
                for violation in &summary.violations {
                    eprintln!("  {violation}");
                }
                eprintln!(
                    "  replay: {}",
                    driver::replay(world.name, seed, &summary.violations)
                );
                failures.push(seed);
            }
        }
        let totals: Vec<String> = totals
            .iter()
            .map(|(label, total)| format!("{total} {label}"))
            .collect();
        println!(
            "{}: {count} seeds from {from}: {}",
            world.name,
            totals.join(", ")
        );
    }
    println!(
        "simulate: {} in {:.1?}; {} failing seed(s){}",
        name,
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
