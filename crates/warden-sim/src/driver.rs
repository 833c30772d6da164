//! What every simulated world shares (issue 18; decision 0041's revision): the seeded,
//! paused single-thread runtime a world runs in, a panic inside it reported as a
//! violation, the trace digest and the determinism check, the list of worlds, and the
//! replay hint a failure prints.
//!
//! Adding a world: a module with a plan drawn from its seed, a `world` future that runs it
//! and checks its properties into the [`Log`], `run(seed)` (the seed twice through
//! [`execute`], digests compared with [`same_digest`]) and `trace(seed)`; then one entry in
//! [`WORLDS`]. The `simulate` binary, its totals and replay hints, and the seed test that
//! CI runs (`every_seed_keeps_every_property`) read that list and need nothing else.

use std::future::Future;
use std::hash::{DefaultHasher, Hash, Hasher};

use crate::Log;

/// A world's audit log after its run, each row given to the call whose token its
/// arguments carry (`call_of`), with the number of rows; a row of no call is a violation.
/// `None` (a violation too): the log cannot be read.
pub(crate) fn audit_rows_by_call(
    store_path: &std::path::Path,
    call_of: impl Fn(&str) -> Option<usize>,
    log: &Log,
) -> Option<(
    usize,
    std::collections::BTreeMap<usize, Vec<warden_store::AuditEntry>>,
)> {
    let rows = match warden_store::Store::open(store_path)
        .and_then(|store| store.audit(&warden_store::AuditFilter::default(), 100_000))
    {
        Ok(rows) => rows,
        Err(error) => {
            log.violation(format!("the audit log cannot be read: {error}"));
            return None;
        }
    };
    let count = rows.len();
    let mut by_call: std::collections::BTreeMap<usize, Vec<warden_store::AuditEntry>> =
        std::collections::BTreeMap::new();
    for row in rows {
        match call_of(&row.entry.arguments.to_string()) {
            Some(number) => by_call.entry(number).or_default().push(row.entry),
            None => log.violation(format!("an audit row of no call: {:?}", row.entry)),
        }
    }
    Some((count, by_call))
}

/// Runs `world` on a fresh current-thread runtime whose clock is paused (time jumps to the
/// next timer only when every task waits): a pure function of what the world drew from
/// its seed. A panic inside (a `debug_assert!` of the code under test, or a world's own
/// refusal to run) is a violation in `log`, as is a runtime that cannot be built; both
/// give `None`.
pub(crate) fn execute<F: Future>(log: &Log, world: F) -> Option<F::Output> {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            log.violation(format!("no runtime: {error}"));
            return None;
        }
    };
    let outcome =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| runtime.block_on(world)));
    drop(runtime);
    match outcome {
        Ok(output) => Some(output),
        Err(panic) => {
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "a panic".into());
            log.violation(format!("panicked: {text}"));
            None
        }
    }
}

/// The digest of a trace, line by line as written.
pub(crate) fn digest<T: Hash>(trace: &[T]) -> u64 {
    let mut hasher = DefaultHasher::new();
    trace.hash(&mut hasher);
    hasher.finish()
}

/// The same seed must give the same trace: a second run's digest that differs is a
/// violation, named with its world and seed.
pub(crate) fn same_digest(
    world: &str,
    seed: u64,
    first: u64,
    second: u64,
    violations: &mut Vec<String>,
) {
    if first != second {
        violations.push(format!(
            "{world} seed {seed} is not deterministic: digest {first:x} then {second:x}"
        ));
    }
}

/// What one seed of one world found: its violations and what it counted.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Property violations; empty when the seed passed.
    pub violations: Vec<String>,
    /// Named counts, in a fixed order (summed over a run of seeds by `simulate`).
    pub counts: Vec<(&'static str, usize)>,
}

/// One simulated world, as the `simulate` binary and the seed test see it.
pub struct World {
    /// Its name (`--world NAME`).
    pub name: &'static str,
    /// Runs one seed with every check.
    pub run: fn(u64) -> Summary,
    /// The trace of one seed; the second argument picks a variant where a world runs a
    /// seed under more than one (the host world: 1 is the other timing; the remote world:
    /// 1 makes the calls through a host).
    pub trace: fn(u64, u64) -> Vec<String>,
    /// The part of the CI's seed count (`WARDEN_SIM_SEEDS`) the seed test runs of it, in
    /// percent: the CI's simulation time is kept about where it was as worlds are added
    /// (the long runs in docs/fuzzing.md take every world over 10,000 seeds).
    pub ci_share: u64,
}

/// Every world, in the order `--world all` runs them.
pub const WORLDS: &[World] = &[
    World {
        name: "connection",
        run: |seed| {
            let r = crate::run(seed);
            Summary {
                counts: vec![
                    ("calls", r.calls),
                    ("timeouts", r.timeouts),
                    ("opens", r.opens),
                    ("servers marked failed", r.failed_servers),
                    ("stray answers dropped", r.strays),
                ],
                violations: r.violations,
            }
        },
        trace: |seed, _| crate::trace(seed),
        ci_share: 100,
    },
    World {
        name: "gateway",
        run: |seed| {
            let r = crate::gateway::run(seed);
            Summary {
                counts: vec![
                    ("calls", r.calls),
                    ("HTTP session clients", r.http_sessions),
                    ("HTTP stateless clients", r.http_stateless),
                    ("requests to unknown sessions", r.unknown_sessions),
                    ("remote upstreams", r.remote_upstreams),
                    ("remote sessions expired", r.remote_expired),
                    ("received upstream", r.received),
                    ("answered", r.answered),
                    ("cancellations upstream", r.cancellations),
                    ("upstream connections", r.connections),
                    ("list changes", r.list_changes),
                    ("audit rows", r.audit_rows),
                ],
                violations: r.violations,
            }
        },
        trace: |seed, _| crate::gateway::trace(seed),
        ci_share: 100,
    },
    World {
        name: "host",
        run: |seed| {
            let r = crate::host::run(seed);
            Summary {
                counts: vec![
                    ("steps", r.steps),
                    ("calls", r.calls),
                    ("received upstream", r.received),
                    ("asked", r.asked),
                    ("prompts timed out", r.timed_out),
                    ("background calls", r.background),
                    ("cancellations upstream", r.cancellations),
                    ("list changes", r.list_changes),
                    ("catalogue changes between steps", r.catalogue_changes),
                    ("decisions compared across timings", r.compared),
                    ("audit rows", r.audit_rows),
                ],
                violations: r.violations,
            }
        },
        trace: |seed, timing| crate::host::trace(seed, timing),
        ci_share: 100,
    },
    World {
        name: "remote",
        run: |seed| {
            let r = crate::remote::run(seed);
            Summary {
                counts: vec![
                    ("calls", r.calls),
                    ("answered", r.answered),
                    ("timeouts", r.timeouts),
                    ("opens", r.opens),
                    ("sessions expired (404)", r.expired),
                    ("streams resumed", r.resumed),
                    ("calls refused 401", r.unauthorized),
                    ("cancellations upstream", r.cancellations),
                    ("sessions deleted", r.deleted),
                    ("back-off waits", r.waits),
                    ("audit rows", r.audit_rows),
                ],
                violations: r.violations,
            }
        },
        trace: |seed, variant| crate::remote::trace(seed, variant),
        ci_share: 100,
    },
    World {
        name: "oauth",
        run: |seed| {
            let r = crate::oauth::run(seed);
            Summary {
                counts: vec![
                    ("calls", r.calls),
                    ("answered", r.answered),
                    ("failed for want of authorization", r.unauthorized),
                    ("timeouts", r.timeouts),
                    ("401/403 answered", r.rejections),
                    ("step-ups (403)", r.step_ups),
                    ("refreshes", r.refreshes),
                    ("sign-ins", r.sign_ins),
                    ("audit rows", r.audit_rows),
                ],
                violations: r.violations,
            }
        },
        trace: |seed, _| crate::oauth::trace(seed),
        ci_share: 40,
    },
];

/// The world named `name`.
pub fn world(name: &str) -> Option<&'static World> {
    WORLDS.iter().find(|world| world.name == name)
}

/// The command that replays a failing seed with its trace. A violation found under a
/// world's other timing (the host world marks them `(other timing)`) replays only with it.
pub fn replay(world: &str, seed: u64, violations: &[String]) -> String {
    let timing = if violations
        .iter()
        .any(|v| v.starts_with("(other timing)") || v.starts_with(crate::remote::THROUGH_A_HOST))
    {
        " --timing 1"
    } else {
        ""
    };
    format!("cargo run -p warden-sim --bin simulate -- --seed {seed} --world {world}{timing}")
}
