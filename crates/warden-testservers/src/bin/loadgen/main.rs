//! `warden-loadgen`: the load generator of `bench/gateways`, in Rust so that the client's
//! own cost is small next to the gateways it measures (on a 2-core machine a Python load
//! generator takes most of a core and flattens every ratio).
//!
//! ```text
//! warden-loadgen [NAME=URL ...] [--direct NAME=COMMAND] --clients 1,8,32 --seconds S [--expect TEXT]
//! ```
//!
//! Each `NAME=URL` is a Streamable HTTP endpoint. Each client is a thread with its own
//! keep-alive connection and its own 2025-11-25 session (`initialize`, then
//! `notifications/initialized`), 20 warm-up calls, then `tools/call` of
//! `echo {message: "hi"}` back to back for S seconds, every call timed from the request's
//! first byte to its parsed result and checked (`echo: hi`, or the text given with
//! `--expect`: server-everything answers `Echo: hi`). `--direct NAME=COMMAND` is the
//! baseline without a gateway: each client starts its own COMMAND (split on spaces) and
//! speaks newline-delimited JSON-RPC to it over stdio, the same calls.
//!
//! One JSON line per target and client count, the same fields as `bench/gateways.py`:
//! calls, calls per second, p50 and p99 in microseconds, errors. Bench only: nothing here
//! is a test.

mod direct;
mod http;

use std::process::ExitCode;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How many calls each client makes before the clock starts.
const WARM_UP_CALLS: usize = 20;
/// A session that fails this many times in a row ends its client (the target is down).
const MAX_CONSECUTIVE_FAILURES: usize = 50;
/// The answer of the Rust test server's `echo`, checked unless `--expect` says otherwise.
const DEFAULT_EXPECT: &str = "echo: hi";

/// One way to reach the echo tool.
#[derive(Clone, Debug)]
enum Target {
    Http { url: String },
    Direct { command: Vec<String> },
}

/// A client session: one call at a time, each answered before the next is sent.
trait Session {
    /// Sends one JSON-RPC request and returns its answer.
    fn request(&mut self, method: &str, params: Value) -> Result<Value, String>;
}

fn open(target: &Target) -> Result<Box<dyn Session>, String> {
    match target {
        Target::Http { url } => Ok(Box::new(http::HttpSession::open(url)?)),
        Target::Direct { command } => Ok(Box::new(direct::DirectSession::open(command)?)),
    }
}

fn echo(session: &mut dyn Session, expect: &str) -> Result<(), String> {
    let answer = session.request(
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "hi"}}),
    )?;
    match answer["result"]["content"][0]["text"].as_str() {
        Some(text) if text == expect => Ok(()),
        _ => Err(format!("unexpected answer: {answer}")),
    }
}

#[derive(Default)]
struct Tally {
    samples_us: Vec<u64>,
    errors: usize,
}

fn client(target: &Target, run: &Run, start: &Barrier, tally: &Mutex<Tally>) {
    let mut mine = Tally::default();
    let mut session = open(target).ok();
    for _ in 0..WARM_UP_CALLS {
        if let Some(s) = session.as_mut()
            && echo(s.as_mut(), &run.expect).is_err()
        {
            mine.errors += 1;
        }
    }
    start.wait();
    let stop_at = Instant::now() + Duration::from_secs_f64(run.seconds);
    let mut failures_in_a_row = 0;
    while Instant::now() < stop_at && failures_in_a_row < MAX_CONSECUTIVE_FAILURES {
        let Some(s) = session.as_mut() else {
            mine.errors += 1;
            failures_in_a_row += 1;
            session = open(target).ok();
            continue;
        };
        let began = Instant::now();
        match echo(s.as_mut(), &run.expect) {
            Ok(()) => {
                failures_in_a_row = 0;
                mine.samples_us
                    .push(u64::try_from(began.elapsed().as_micros()).unwrap_or(u64::MAX));
            }
            Err(problem) => {
                if mine.errors == 0 {
                    eprintln!("warden-loadgen: {problem}");
                }
                mine.errors += 1;
                failures_in_a_row += 1;
                session = open(target).ok();
            }
        }
    }
    if let Ok(mut all) = tally.lock() {
        all.samples_us.extend(mine.samples_us);
        all.errors += mine.errors;
    }
}

fn load(name: &str, target: &Target, clients: usize, run: &Arc<Run>) -> Value {
    let tally = Arc::new(Mutex::new(Tally::default()));
    let start = Arc::new(Barrier::new(clients + 1));
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let (target, start, tally) = (target.clone(), start.clone(), tally.clone());
            let run = Arc::clone(run);
            std::thread::spawn(move || client(&target, &run, &start, &tally))
        })
        .collect();
    start.wait();
    let began = Instant::now();
    for thread in threads {
        let _ = thread.join();
    }
    let elapsed = began.elapsed().as_secs_f64();
    let mut tally = match Arc::try_unwrap(tally) {
        Ok(m) => m.into_inner().unwrap_or_default(),
        Err(_) => Tally::default(),
    };
    tally.samples_us.sort_unstable();
    let n = tally.samples_us.len();
    let pick = |q: usize| tally.samples_us.get(n * q / 100).copied();
    json!({
        "clients": clients,
        "calls": n,
        "calls_per_s": ((n as f64 / elapsed) * 10.0).round() / 10.0,
        "p50_us": pick(50),
        "p99_us": pick(99),
        "errors": tally.errors,
        "gateway": name,
    })
}

/// What every client of a run does: how long, and which answer counts.
struct Run {
    seconds: f64,
    expect: String,
}

struct Args {
    targets: Vec<(String, Target)>,
    clients: Vec<usize>,
    run: Run,
}

fn parse(args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut parsed = Args {
        targets: Vec::new(),
        clients: vec![1],
        run: Run {
            seconds: 10.0,
            expect: DEFAULT_EXPECT.into(),
        },
    };
    let mut args = args.peekable();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--clients" => {
                let list = args.next().ok_or("--clients needs a list such as 1,8,32")?;
                parsed.clients = list
                    .split(',')
                    .map(|c| {
                        c.parse()
                            .map_err(|_| format!("--clients: not a count: {c}"))
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--seconds" => {
                let s = args.next().ok_or("--seconds needs a number")?;
                parsed.run.seconds = s
                    .parse()
                    .map_err(|_| format!("--seconds: not a number: {s}"))?;
            }
            "--expect" => {
                parsed.run.expect = args.next().ok_or("--expect needs the answer's text")?;
            }
            "--direct" => {
                let spec = args.next().ok_or("--direct needs NAME=COMMAND")?;
                let (name, command) = spec
                    .split_once('=')
                    .ok_or_else(|| format!("--direct: not NAME=COMMAND: {spec}"))?;
                let command: Vec<String> = command.split_whitespace().map(String::from).collect();
                if command.is_empty() {
                    return Err(format!("--direct: empty command in {spec}"));
                }
                parsed
                    .targets
                    .push((name.into(), Target::Direct { command }));
            }
            other => {
                let (name, url) = other
                    .split_once('=')
                    .ok_or_else(|| format!("not NAME=URL: {other}"))?;
                parsed
                    .targets
                    .push((name.into(), Target::Http { url: url.into() }));
            }
        }
    }
    if parsed.targets.is_empty() {
        return Err("no target: give NAME=URL or --direct NAME=COMMAND".into());
    }
    Ok(parsed)
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(problem) => {
            eprintln!(
                "warden-loadgen: {problem}\nusage: warden-loadgen [NAME=URL ...] \
                 [--direct NAME=COMMAND] --clients 1,8,32 --seconds S [--expect TEXT]"
            );
            return ExitCode::from(2);
        }
    };
    let run = Arc::new(args.run);
    for &clients in &args.clients {
        for (name, target) in &args.targets {
            println!("{}", load(name, target, clients, &run));
        }
    }
    ExitCode::SUCCESS
}
