//! `simulate`: runs the simulations over many seeds, or replays one.
//!
//! ```text
//! cargo run -p warden-sim --bin simulate -- --seeds 1000 [--from 0] [--world W]
//! cargo run -p warden-sim --bin simulate -- --seed 42 [--world W]   # replay: the trace
//! ```
//!
//! `W` is `connection` (reconnects, back-off, answer correlation), `gateway` (many clients
//! through `warden serve`, faulty upstreams), `host` (the agent loop over the host: the
//! catalogue at turn boundaries, audit, cancellation, decisions) or `all` (the default).
//!
//! Exits 1 when a seed breaks a property, after printing the seed and the command that
//! replays it.

use std::process::ExitCode;

fn usage() -> ExitCode {
    eprintln!(
        "usage: simulate --seeds N [--from S] | --seed S  [--world connection|gateway|host|all]"
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
    let world = value("--world").unwrap_or_else(|| "all".into());
    let (connection, gateway, host) = match world.as_str() {
        "all" => (true, true, true),
        "connection" => (true, false, false),
        "gateway" => (false, true, false),
        "host" => (false, false, true),
        _ => return usage(),
    };
    if let Some(seed) = number("--seed") {
        let mut failed = false;
        if connection {
            for line in warden_sim::trace(seed) {
                println!("{line}");
            }
            let report = warden_sim::run(seed);
            println!("{report:?}");
            failed |= !report.violations.is_empty();
        }
        if gateway {
            for line in warden_sim::gateway::trace(seed) {
                println!("{line}");
            }
            let report = warden_sim::gateway::run(seed);
            println!("{report:?}");
            failed |= !report.violations.is_empty();
        }
        if host {
            // `--timing 1`: the trace of the other timing the decisions are compared with.
            for line in warden_sim::host::trace(seed, number("--timing").unwrap_or(0)) {
                println!("{line}");
            }
            let report = warden_sim::host::run(seed);
            println!("{report:?}");
            failed |= !report.violations.is_empty();
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
    let fail = |seed: u64, world: &str, violations: &[String], failures: &mut Vec<u64>| {
        eprintln!("seed {seed} FAILED ({world}):");
        for violation in violations {
            eprintln!("  {violation}");
        }
        // The host world runs each seed again under other timings; a violation found there
        // replays only with them.
        let timing = if violations.iter().any(|v| v.starts_with("(other timing)")) {
            " --timing 1"
        } else {
            ""
        };
        eprintln!(
            "  replay: cargo run -p warden-sim --bin simulate -- --seed {seed} --world {world}{timing}"
        );
        failures.push(seed);
    };
    if connection {
        let (mut calls, mut opens, mut failed, mut strays, mut timeouts) = (0, 0, 0, 0, 0);
        for seed in from..from.saturating_add(count) {
            let report = warden_sim::run(seed);
            calls += report.calls;
            opens += report.opens;
            failed += report.failed_servers;
            strays += report.strays;
            timeouts += report.timeouts;
            if !report.violations.is_empty() {
                fail(seed, "connection", &report.violations, &mut failures);
            }
        }
        println!(
            "connection: {count} seeds from {from}: {calls} calls, {timeouts} timeouts, \
             {opens} opens, {failed} servers marked failed, {strays} stray answers dropped"
        );
    }
    if gateway {
        let mut totals = warden_sim::gateway::Report::default();
        for seed in from..from.saturating_add(count) {
            let report = warden_sim::gateway::run(seed);
            totals.calls += report.calls;
            totals.received += report.received;
            totals.answered += report.answered;
            totals.cancellations += report.cancellations;
            totals.connections += report.connections;
            totals.list_changes += report.list_changes;
            totals.audit_rows += report.audit_rows;
            if !report.violations.is_empty() {
                fail(seed, "gateway", &report.violations, &mut failures);
            }
        }
        println!(
            "gateway: {count} seeds from {from}: {} calls, {} received upstream, {} answered, \
             {} cancellations upstream, {} upstream connections, {} list changes, {} audit rows",
            totals.calls,
            totals.received,
            totals.answered,
            totals.cancellations,
            totals.connections,
            totals.list_changes,
            totals.audit_rows
        );
    }
    if host {
        let mut totals = warden_sim::host::Report::default();
        for seed in from..from.saturating_add(count) {
            let report = warden_sim::host::run(seed);
            totals.steps += report.steps;
            totals.calls += report.calls;
            totals.received += report.received;
            totals.asked += report.asked;
            totals.timed_out += report.timed_out;
            totals.background += report.background;
            totals.cancellations += report.cancellations;
            totals.list_changes += report.list_changes;
            totals.catalogue_changes += report.catalogue_changes;
            totals.compared += report.compared;
            totals.audit_rows += report.audit_rows;
            if !report.violations.is_empty() {
                fail(seed, "host", &report.violations, &mut failures);
            }
        }
        println!(
            "host: {count} seeds from {from}: {} steps, {} calls, {} received upstream, {} asked, \
             {} prompts timed out, {} background calls, {} cancellations upstream, \
             {} list changes, {} catalogue changes between steps, {} decisions compared \
             across timings, {} audit rows",
            totals.steps,
            totals.calls,
            totals.received,
            totals.asked,
            totals.timed_out,
            totals.background,
            totals.cancellations,
            totals.list_changes,
            totals.catalogue_changes,
            totals.compared,
            totals.audit_rows
        );
    }
    println!(
        "simulate: {} in {:.1?}; {} failing seed(s){}",
        world,
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
