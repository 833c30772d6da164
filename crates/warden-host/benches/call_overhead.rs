//! What Warden's call path costs per tool call, next to a plain MCP client on the same
//! server; and what the catalogue's own work (naming, schema compiling, argument checks,
//! the policy's decision) costs, so that a change to either shows up here.
//!
//! Run: `cargo build --release -p warden-testservers && cargo bench -p warden-host`.
//! Append `-- NAME...` to run only some of `testserver`, `everything`, `python` and
//! `catalogue`. Without `--bench` (as under `cargo test --all-targets`) every case runs a
//! few calls only, as a smoke test.
//!
//! # Call path: Warden against a direct client
//!
//! Four ways of calling the same tool, each on its own process of the same server:
//! - **`Host::call`** (`"srv/TOOL"`): Warden's whole path: resolve the target, check the
//!   arguments against the compiled input schema, let the (default) policy decide, then
//!   warden-mcp;
//! - **`Connection::call_tool`**: warden-mcp alone (launcher, client handler, timeouts, result
//!   conversion, over its size-capped stdio transport);
//! - **rmcp on Warden's `StdioTransport`**: a bare rmcp client over warden-mcp's transport;
//! - **rmcp direct**: a bare rmcp client (`()` as handler) on rmcp's own stdio transport,
//!   calling `Peer::call_tool`: the baseline. The bare clients speak the era Warden settled on.
//!
//! The headline is the first against the last; the two in between say where a difference
//! arises.
//!
//! Each round opens a fresh connection (a fresh server process) per way, warms it up with
//! as many untimed calls as it will time, then times one block of sequential calls per way,
//! ABCD in one round and DCBA in the next, so that drift in machine load falls on every way
//! alike. Fresh processes per round matter on a small machine: one long-lived server
//! process can stay faster or slower than another by a third for its whole life (how the
//! scheduler places it), which would be read as a difference between the ways. Every call is
//! timed on its own, from just before the call to its result; connection setup is never
//! timed. Reported per server: the median, p90 and p99 of Warden's path and of the direct
//! client, the ratio and difference of these medians, and the median (and range) of the
//! per-round ratios of block medians, the steadier of the two ratios. The runtime is the one
//! the `warden` binary uses: two worker threads, the caller on the main thread.
//!
//! Servers: the Rust `warden-testserver good` (`echo`), always, since it answers fastest and
//! so shows the overhead most plainly; the Node `server-everything` (`echo`) and the Python
//! SDK peer (`add`, 2026-07-28 era) when the peers are installed (`$WARDEN_PEERS`, default
//! `/work/.peers-scratch`); a missing peer is skipped with a note.
//!
//! Environment: `WARDEN_TESTSERVER` (the test server binary; default: next to this bench in
//! the target directory, release build first), `WARDEN_PEERS`, `WARDEN_BENCH_ROUNDS` (rounds,
//! default 24).
//!
//! This is a plain `main` rather than a criterion or divan bench: the comparison needs
//! stateful clients, reconnected every round and run in alternation, and paired medians,
//! which a short loop states plainly and without a benchmarking framework in the
//! dependency tree.

// A bench is a measuring program, not product code: a failed setup step should stop it
// with the reason, which is what `expect` does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use futures::future::join_all;
use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use serde_json::{Map, Value, json};
use warden_config::DEFAULT_CALL_TIMEOUT;
use warden_config::{EraPreference, Format, Origin, Scope, ServerSpec, Timeouts, TransportSpec};
use warden_host::{Catalogue, Host, SchemaLimits, ServerStatus};
use warden_mcp::stdio::{StdioLimits, StdioTransport};
use warden_mcp::{ConnectOptions, Connection, DirectLauncher, Era, ToolDef};
use warden_policy::{Policy, Provenance};

/// The server's name in Warden's configuration, and so the `srv/` in the call target.
const SERVER: &str = "srv";

/// How one benchmark run is sized.
#[derive(Debug, Clone, Copy)]
struct Plan {
    /// Rounds: fresh connections, then one block of calls per way.
    rounds: usize,
    /// Untimed calls on each fresh connection before its block, per timed call: enough
    /// for a JIT (Node's V8) to settle before the clock starts.
    warmup_per_call: f64,
    /// Scales each case's block size (1.0 in a real run).
    block_scale: f64,
    /// Samples per micro-benchmark.
    micro_samples: usize,
}

impl Plan {
    fn from_args(args: &[String]) -> Self {
        if args.iter().any(|arg| arg == "--bench") {
            let rounds = std::env::var("WARDEN_BENCH_ROUNDS")
                .ok()
                .and_then(|text| text.parse().ok())
                .filter(|&rounds| rounds > 0)
                .unwrap_or(24);
            Self {
                rounds,
                warmup_per_call: 1.0,
                block_scale: 1.0,
                micro_samples: 30,
            }
        } else {
            Self {
                rounds: 2,
                warmup_per_call: 0.5,
                block_scale: 0.02,
                micro_samples: 2,
            }
        }
    }
}

/// One server to measure against.
struct Case {
    label: &'static str,
    command: PathBuf,
    args: Vec<String>,
    tool: &'static str,
    arguments: Map<String, Value>,
    era: EraPreference,
    /// Calls per block at full scale: more for fast servers, so a block lasts long enough
    /// to matter and short enough to interleave.
    block: usize,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let plan = Plan::from_args(&args);
    let filter: Vec<&str> = args
        .iter()
        .filter(|arg| !arg.starts_with("--"))
        .map(String::as_str)
        .collect();
    let selected = |label: &str| filter.is_empty() || filter.iter().any(|f| label.contains(f));

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");

    println!("## Call path: Warden `Host::call` against a direct rmcp client\n");
    println!(
        "{} rounds; each opens a fresh connection per way (not timed), warms it up with as \
         many calls as it will time, then times one block of sequential calls per way, in \
         ABCD order, DCBA the next round\n",
        plan.rounds
    );
    println!(
        "| server | era | calls each | Warden median µs | direct median µs | ratio | Δ median µs \
         | Warden p90 / p99 µs | direct p90 / p99 µs | per-round ratio median [min–max] |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut breakdown = Vec::new();
    let mut commands = Vec::new();
    for (label, case) in cases() {
        if !selected(label) {
            continue;
        }
        match case {
            Ok(case) => {
                breakdown.push(runtime.block_on(compare(&case, plan)));
                commands.push(format!(
                    "- {}: `{} {}`, tool `{}`",
                    case.label,
                    case.command.display(),
                    case.args.join(" "),
                    case.tool
                ));
            }
            Err(note) => println!("| {note} |||||||||"),
        }
    }
    if !commands.is_empty() {
        println!("\nServers:\n\n{}", commands.join("\n"));
    }
    if !breakdown.is_empty() {
        println!(
            "\n### Where the difference arises: median µs per call (× the direct client's, \
             median of the rounds)\n"
        );
        let titles: Vec<&str> = WAYS.iter().map(|way| way.title()).collect();
        println!("| server | {} |", titles.join(" | "));
        println!("|---|{}", "---|".repeat(WAYS.len()));
        for row in breakdown {
            println!("{row}");
        }
    }

    if selected("catalogue") {
        println!("\n## Catalogue (pure CPU)\n");
        println!("| what | median | samples |");
        println!("|---|---|---|");
        catalogue_benches(plan);
    }
}

/// Every case by label, or the reason it cannot run here.
fn cases() -> Vec<(&'static str, Result<Case, String>)> {
    let peers = std::env::var_os("WARDEN_PEERS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/work/.peers-scratch"));

    let label = "testserver good (Rust)";
    let testserver = match testserver_binary() {
        Some(command) => Ok(Case {
            label,
            command,
            args: vec!["good".into()],
            tool: "echo",
            arguments: object(json!({"message": "hi"})),
            era: EraPreference::Auto,
            block: 400,
        }),
        None => Err(format!(
            "{label}: skipped, binary not found (build it with `cargo build --release \
             -p warden-testservers` or set WARDEN_TESTSERVER)"
        )),
    };

    let label = "server-everything (Node)";
    let script =
        peers.join("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let everything = match (script.is_file(), find_in_path("node")) {
        (true, Some(node)) => Ok(Case {
            label,
            command: node,
            args: vec![script.display().to_string(), "stdio".into()],
            tool: "echo",
            arguments: object(json!({"message": "hi"})),
            era: EraPreference::Auto,
            block: 150,
        }),
        _ => Err(format!(
            "{label}: skipped, {} or `node` not found (set WARDEN_PEERS)",
            script.display()
        )),
    };

    let label = "Python SDK peer";
    let python = peers.join("venv/bin/python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers/py_sdk_server.py");
    let script = script.canonicalize().unwrap_or(script);
    let python_sdk = if python.is_file() && script.is_file() {
        Ok(Case {
            label,
            command: python,
            args: vec![script.display().to_string()],
            tool: "add",
            arguments: object(json!({"a": 2, "b": 3})),
            era: EraPreference::Modern,
            block: 40,
        })
    } else {
        Err(format!(
            "{label}: skipped, {} not found (set WARDEN_PEERS)",
            python.display()
        ))
    };

    vec![
        ("testserver", testserver),
        ("everything", everything),
        ("python", python_sdk),
    ]
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => unreachable!("the arguments are written as objects above"),
    }
}

/// `$WARDEN_TESTSERVER`, else the test server built next to this bench (same profile
/// directory first, then release, then debug).
fn testserver_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("WARDEN_TESTSERVER") {
        return Some(PathBuf::from(path));
    }
    // This bench runs from TARGET/PROFILE/deps/.
    let exe = std::env::current_exe().ok()?;
    let profile_dir = exe.parent()?.parent()?;
    let target_dir = profile_dir.parent()?;
    [
        profile_dir.to_path_buf(),
        target_dir.join("release"),
        target_dir.join("debug"),
    ]
    .into_iter()
    .map(|dir| dir.join("warden-testserver"))
    .find(|path| path.is_file())
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// The ways of calling the tool, from all of Warden down to none of it. The differences
/// between neighbours say where Warden's time goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    /// `Host::call`: resolve + schema check + policy decision + warden-mcp.
    Host,
    /// warden-mcp's `Connection::call_tool`: Warden's launcher, client handler, timeout and
    /// result conversion, over Warden's transport.
    Connection,
    /// A bare rmcp client on warden-mcp's `StdioTransport` (reader task, size cap).
    Transport,
    /// A bare rmcp client on rmcp's own stdio transport: the baseline.
    Direct,
}

const WAYS: [Way; 4] = [Way::Host, Way::Connection, Way::Transport, Way::Direct];
/// Warden's whole path, in `WAYS`: connected first, since the others follow its era.
const HOST: usize = 0;
/// The baseline, in `WAYS`.
const DIRECT: usize = 3;

impl Way {
    fn title(self) -> &'static str {
        match self {
            Way::Host => "`Host::call`",
            Way::Connection => "`Connection::call_tool`",
            Way::Transport => "rmcp on Warden's `StdioTransport`",
            Way::Direct => "rmcp direct",
        }
    }

    async fn connect(self, case: &Case, settled: &Settled) -> Client {
        match self {
            Way::Host => connect_host(case).await.0,
            Way::Connection => connect_connection(case).await,
            Way::Transport => connect_sdk(case, settled, true).await,
            Way::Direct => connect_sdk(case, settled, false).await,
        }
    }
}

/// What Warden and the server settled on; the bare clients must match it.
#[derive(Debug, Clone, PartialEq)]
struct Settled {
    era: Era,
    protocol: String,
}

impl std::fmt::Display for Settled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let era = match self.era {
            Era::Legacy => "legacy",
            Era::Modern => "modern",
        };
        write!(f, "{era} ({})", self.protocol)
    }
}

/// One connected client.
enum Client {
    Host {
        host: Host,
        target: String,
    },
    Connection {
        connection: Box<dyn Connection>,
        tool: String,
    },
    Sdk {
        running: RunningService<RoleClient, ()>,
        tool: String,
        _child: tokio::process::Child,
    },
}

impl Client {
    /// One call, timed. The arguments are cloned before the clock starts, in every way.
    async fn timed_call(&self, arguments: &Map<String, Value>) -> Duration {
        let arguments = arguments.clone();
        match self {
            Client::Host { host, target } => {
                let arguments = Value::Object(arguments);
                let start = Instant::now();
                let outcome = host.call(target, arguments).await;
                let elapsed = start.elapsed();
                let outcome = outcome.expect("Warden's call succeeds");
                assert!(!outcome.is_error, "the tool reported an error: {outcome:?}");
                elapsed
            }
            Client::Connection { connection, tool } => {
                let start = Instant::now();
                let outcome = connection
                    .call_tool(tool, Some(arguments), DEFAULT_CALL_TIMEOUT)
                    .await;
                let elapsed = start.elapsed();
                let outcome = outcome.expect("the connection's call succeeds");
                assert!(!outcome.is_error, "the tool reported an error: {outcome:?}");
                elapsed
            }
            Client::Sdk { running, tool, .. } => {
                let start = Instant::now();
                let params = CallToolRequestParams::new(tool.clone()).with_arguments(arguments);
                let result = running.peer().call_tool(params).await;
                let elapsed = start.elapsed();
                let result = result.expect("the direct call succeeds");
                assert_ne!(result.is_error, Some(true), "the tool reported an error");
                elapsed
            }
        }
    }

    async fn close(self) {
        match self {
            Client::Host { host, .. } => host.shutdown().await,
            Client::Connection { connection, .. } => {
                connection.close().await;
            }
            Client::Sdk { running, .. } => {
                let _ = running.cancel().await;
            }
        }
    }
}

fn spec(case: &Case) -> ServerSpec {
    ServerSpec {
        name: SERVER.into(),
        transport: TransportSpec::Stdio {
            command: case.command.display().to_string(),
            args: case.args.clone(),
            env: BTreeMap::new(),
            cwd: None,
        },
        timeouts: Timeouts::default(),
        era: case.era,
        max_message_bytes: warden_config::DEFAULT_MAX_MESSAGE_BYTES,
        origin: Origin {
            scope: Scope::Explicit,
            format: Format::WardenToml,
            path: PathBuf::from("call_overhead.rs"),
        },
        sandbox: Default::default(),
        env_references: Vec::new(),
        lifecycle: Default::default(),
    }
}

/// Connects through `Host::builder` (no store, the default policy), and tells what Warden
/// settled on.
async fn connect_host(case: &Case) -> (Client, Settled) {
    let host = Host::builder(std::sync::Arc::new(Policy::default()))
        .launcher(std::sync::Arc::new(DirectLauncher::from_env()))
        .connect(vec![spec(case)])
        .await;
    let settled = match &host.servers()[0].status {
        ServerStatus::Connected { info } => Settled {
            era: info.era,
            protocol: info.protocol_version.clone(),
        },
        ServerStatus::Failed { reason, .. } => {
            panic!("Warden could not connect to {}: {reason}", case.label)
        }
    };
    let target = format!("{SERVER}/{}", case.tool);
    (Client::Host { host, target }, settled)
}

async fn connect_connection(case: &Case) -> Client {
    let launcher: std::sync::Arc<dyn warden_mcp::Launcher> =
        std::sync::Arc::new(DirectLauncher::from_env());
    let connection = warden_mcp::connect(&spec(case), &launcher, &ConnectOptions::default())
        .await
        .unwrap_or_else(|failure| panic!("warden-mcp could not connect: {}", failure.error));
    Client::Connection {
        connection,
        tool: case.tool.to_owned(),
    }
}

/// A bare rmcp client in Warden's era and protocol revision, on warden-mcp's transport or
/// on rmcp's own.
async fn connect_sdk(case: &Case, settled: &Settled, warden_transport: bool) -> Client {
    let mut child = tokio::process::Command::new(&case.command)
        .args(&case.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the server starts");
    let stdin = child.stdin.take().expect("piped stdin");
    let stdout = child.stdout.take().expect("piped stdout");
    let lifecycle = match settled.era {
        Era::Legacy => ClientLifecycleMode::Initialize,
        Era::Modern => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    };
    let running = if warden_transport {
        let (transport, _closer, _health) =
            StdioTransport::new(SERVER.into(), stdin, stdout, StdioLimits::default());
        ().serve_with_lifecycle(transport, lifecycle).await
    } else {
        ().serve_with_lifecycle((stdout, stdin), lifecycle).await
    };
    let running = running.expect("the rmcp client connects");
    let protocol = running
        .peer()
        .peer_info()
        .map(|info| info.protocol_version.to_string());
    assert_eq!(
        protocol.as_deref(),
        Some(settled.protocol.as_str()),
        "the bare client must speak the revision Warden settled on"
    );
    Client::Sdk {
        running,
        tool: case.tool.to_owned(),
        _child: child,
    }
}

/// What one case measured.
struct Measured {
    settled: Settled,
    /// Every timed call, per way.
    samples: Vec<Vec<Duration>>,
    /// Per round and way: the block median over the direct client's.
    round_ratios: Vec<Vec<f64>>,
}

/// Runs one case: every round connects each way afresh (setup is not timed), warms the
/// connections up, then times one block of sequential calls per way.
async fn measure_case(case: &Case, plan: Plan) -> Measured {
    let block = ((case.block as f64 * plan.block_scale).ceil() as usize).max(1);
    let warmup = (block as f64 * plan.warmup_per_call).ceil() as usize;
    let mut settled = None;
    let mut samples = vec![Vec::with_capacity(plan.rounds * block); WAYS.len()];
    let mut round_ratios = vec![Vec::with_capacity(plan.rounds); WAYS.len()];
    for round in 0..plan.rounds {
        // Warden first (`HOST` is 0): the bare clients speak what it settled on.
        let (host, host_settled) = connect_host(case).await;
        let mut clients = vec![host];
        clients
            .extend(join_all(WAYS[1..].iter().map(|way| way.connect(case, &host_settled))).await);
        settled = Some(host_settled);
        for client in &clients {
            for _ in 0..warmup {
                client.timed_call(&case.arguments).await;
            }
        }
        // Forward in even rounds, backward in odd ones (ABCD DCBA), so every way takes
        // every place in the sequence equally often.
        let mut order: Vec<usize> = (0..WAYS.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        let mut blocks = vec![Vec::with_capacity(block); WAYS.len()];
        for index in order {
            for _ in 0..block {
                blocks[index].push(clients[index].timed_call(&case.arguments).await);
            }
        }
        join_all(clients.into_iter().map(Client::close)).await;
        let medians: Vec<f64> = blocks
            .iter_mut()
            .map(|block| median(block).as_secs_f64())
            .collect();
        for (ratios, way_median) in round_ratios.iter_mut().zip(&medians) {
            ratios.push(way_median / medians[DIRECT]);
        }
        for (all, block) in samples.iter_mut().zip(blocks) {
            all.extend(block);
        }
    }
    Measured {
        settled: settled.expect("at least one round"),
        samples,
        round_ratios,
    }
}

/// Runs one case, prints its row of the main table, and returns its row of the breakdown.
async fn compare(case: &Case, plan: Plan) -> String {
    let Measured {
        settled,
        mut samples,
        mut round_ratios,
    } = measure_case(case, plan).await;
    let summaries: Vec<Summary> = samples.iter_mut().map(|s| Summary::of(s)).collect();
    for ratios in &mut round_ratios {
        ratios.sort_by(f64::total_cmp);
    }
    let (w, d) = (&summaries[HOST], &summaries[DIRECT]);
    let ratios = &round_ratios[HOST];
    println!(
        "| {} | {settled} | {} | {:.1} | {:.1} | {:.3} | {:+.1} | {:.0} / {:.0} | {:.0} / {:.0} | {:.3} [{:.3}–{:.3}] |",
        case.label,
        samples[HOST].len(),
        micros(w.median),
        micros(d.median),
        w.median.as_secs_f64() / d.median.as_secs_f64(),
        micros(w.median) - micros(d.median),
        micros(w.p90),
        micros(w.p99),
        micros(d.p90),
        micros(d.p99),
        ratios[ratios.len() / 2],
        ratios[0],
        ratios[ratios.len() - 1],
    );
    let cells: Vec<String> = summaries
        .iter()
        .zip(&round_ratios)
        .map(|(summary, ratios)| {
            format!(
                "{:.1} (×{:.3})",
                micros(summary.median),
                ratios[ratios.len() / 2]
            )
        })
        .collect();
    format!("| {} | {} |", case.label, cells.join(" | "))
}

struct Summary {
    median: Duration,
    p90: Duration,
    p99: Duration,
}

impl Summary {
    fn of(samples: &mut [Duration]) -> Self {
        samples.sort_unstable();
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
        Self {
            median: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
        }
    }
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

// ---------------------------------------------------------------------------------------
// Catalogue micro-benchmarks.

/// Servers and tools per server in the large catalogue (10 × 100 = 1,000 tools).
const SERVERS: usize = 10;
const TOOLS_PER_SERVER: usize = 100;

/// A tool list shaped like real servers' lists: a few properties of the common types, with
/// descriptions, a `required` list, and some names that need sanitizing or are too long
/// for the plain qualified form.
fn tool_lists() -> Vec<(String, Vec<ToolDef>)> {
    (0..SERVERS)
        .map(|server| {
            let tools = (0..TOOLS_PER_SERVER)
                .map(|index| {
                    let name = match index % 10 {
                        0 => format!("files.read_{index}"),
                        1 => format!(
                            "a_tool_name_long_enough_that_with_its_server_it_passes_64_chars_{index}"
                        ),
                        _ => format!("tool_{index}"),
                    };
                    ToolDef {
                        name,
                        title: None,
                        description: Some("Does one thing to a file.".into()),
                        input_schema: typical_schema(),
                        output_schema: None,
                        annotations: None,
                    }
                })
                .collect();
            (format!("server-{server}"), tools)
        })
        .collect()
}

fn typical_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "A file path.", "minLength": 1},
            "line": {"type": "integer", "minimum": 1, "description": "A line number."},
            "recursive": {"type": "boolean", "default": false},
            "mode": {"type": "string", "enum": ["text", "binary", "auto"]},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 16}
        },
        "required": ["path"],
        "additionalProperties": false
    })
}

fn typical_arguments() -> Value {
    json!({"path": "src/main.rs", "line": 42, "recursive": true, "mode": "text", "tags": ["a", "b"]})
}

/// The median time per iteration over `samples` samples of `iterations` iterations each.
/// `setup` makes each iteration's input before the clock starts.
fn measure<I, O>(
    samples: usize,
    iterations: usize,
    mut setup: impl FnMut() -> I,
    mut routine: impl FnMut(I) -> O,
) -> Duration {
    let mut per_iteration: Vec<Duration> = (0..samples.max(1))
        .map(|_| {
            let inputs: Vec<I> = (0..iterations).map(|_| setup()).collect();
            let mut outputs = Vec::with_capacity(iterations);
            let start = Instant::now();
            for input in inputs {
                outputs.push(black_box(routine(black_box(input))));
            }
            let elapsed = start.elapsed();
            drop(outputs);
            elapsed / iterations as u32
        })
        .collect();
    median(&mut per_iteration)
}

fn show(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    if nanos >= 1_000_000 {
        format!("{:.2} ms", duration.as_secs_f64() * 1e3)
    } else if nanos >= 10_000 {
        format!("{:.1} µs", duration.as_secs_f64() * 1e6)
    } else {
        format!("{nanos} ns")
    }
}

fn catalogue_benches(plan: Plan) {
    let lists = tool_lists();
    let samples = plan.micro_samples;

    let build = measure(
        samples,
        1,
        || lists.clone(),
        |lists| Catalogue::build(lists, SchemaLimits::default()),
    );
    println!(
        "| `Catalogue::build`, 1,000 tools (naming + schema compile) | {} | {samples} |",
        show(build)
    );

    let catalogue = Catalogue::build(lists, SchemaLimits::default());
    assert_eq!(catalogue.tools().len(), SERVERS * TOOLS_PER_SERVER);
    // A fifth of the names (sanitised or too long) take the hashed form.
    let hashed = catalogue
        .tools()
        .iter()
        .filter(|tool| tool.qualified != format!("{}__{}", tool.server, tool.def.name))
        .count();
    assert_eq!(hashed, SERVERS * TOOLS_PER_SERVER / 5);
    let tool = catalogue
        .resolve("server-3/tool_42")
        .expect("the tool is in the catalogue");

    let arguments = typical_arguments();
    assert!(tool.check(&arguments).is_ok());
    let check = measure(samples, 10_000, || (), |()| tool.check(&arguments));
    println!(
        "| `CatalogueTool::check`, valid 5-field object | {} | {samples} × 10,000 |",
        show(check)
    );

    let invalid = json!({"line": 0, "mode": "other", "extra": 1});
    assert!(tool.check(&invalid).is_err());
    let reject = measure(samples, 10_000, || (), |()| tool.check(&invalid));
    println!(
        "| `CatalogueTool::check`, invalid object (4 violations) | {} | {samples} × 10,000 |",
        show(reject)
    );

    let resolve = measure(
        samples,
        10_000,
        || (),
        |()| catalogue.resolve("server-3/tool_42").is_some(),
    );
    println!(
        "| `Catalogue::resolve(\"server/tool\")` in 1,000 tools | {} | {samples} × 10,000 |",
        show(resolve)
    );

    // What `Host::call` asks the policy, with the policy `connect_host` uses (no rules).
    let policy = Policy::default();
    let context = Provenance::new();
    let decide = measure(
        samples,
        10_000,
        || (),
        |()| policy.decide(&tool.facts, &arguments, &context),
    );
    println!(
        "| `Policy::decide`, default policy, valid 5-field object | {} | {samples} × 10,000 |",
        show(decide)
    );
}
