//! The relay (issue 13, seed 000), end to end with real processes: the sandbox is a network
//! namespace with no route out, holding `warden relay supervise` and real MCP servers; the
//! brain is Warden outside it; the channel is the command that enters the namespace.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use support::{
    Scratch, TAG_VAR, assert_exit, describe, node_server, peers_dir, server_toml, stderr, stdout,
    tagged_processes, testserver_bin, warden_bin,
};
use warden_mcp::{CallError, ConnectOptions, Connection, DirectLauncher, Launcher};

const LIMIT: Duration = Duration::from_secs(90);

/// A network namespace with no route out and no listener: the sandbox. Deleted on drop.
struct Netns(String);

impl Netns {
    fn new() -> Self {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "wrelay-{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::SeqCst)
        );
        let status = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .unwrap();
        assert!(status.success(), "ip netns add {name} failed");
        let netns = Netns(name);
        // The topology holds: no route at all inside.
        let routes = Command::new("ip")
            .args(["netns", "exec", &netns.0, "ip", "route", "show"])
            .output()
            .unwrap();
        assert!(routes.status.success());
        assert!(
            String::from_utf8_lossy(&routes.stdout).trim().is_empty(),
            "the sandbox namespace has a route: {}",
            String::from_utf8_lossy(&routes.stdout)
        );
        netns
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.0])
            .status();
    }
}

/// The test's world: the sandbox's configuration (the real definitions), the brain's (stubs
/// and the relay), and a secrets file on the brain's side.
struct Topology {
    scratch: Scratch,
    _netns: Netns,
    brain: PathBuf,
    inner: PathBuf,
    token: String,
    repo: PathBuf,
}

impl Topology {
    /// `brain_servers` are stub tables (`[servers.NAME]\nrelay = "box"` + extras).
    fn new(brain_servers: &str, inner_extra: &str) -> Self {
        let scratch = Scratch::new();
        let netns = Netns::new();
        let peers = peers_dir();
        let repo = scratch.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        for args in [
            &["init", "-q"][..],
            &[
                "-c",
                "user.email=t@e",
                "-c",
                "user.name=t",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "inside",
            ][..],
        ] {
            assert!(
                Command::new("git")
                    .args(args)
                    .current_dir(&repo)
                    .status()
                    .unwrap()
                    .success()
            );
        }
        support::open_to_servers(&repo);
        let token = format!("tok-{}", scratch.tag);
        let inner = scratch.path().join("inner.toml");
        let good_env = "env = { WARDEN_TEST_SLEEP_TOOL = \"1\" }";
        std::fs::write(
            &inner,
            format!(
                "{}{}{}{}{}{inner_extra}",
                server_toml(
                    "everything",
                    "node".as_ref(),
                    &[&node_server("server-everything"), "stdio"],
                    ""
                ),
                server_toml(
                    "git",
                    &peers.join("venv/bin/mcp-server-git"),
                    &["--repository", repo.to_str().unwrap()],
                    &support::write_grant(&[&repo])
                ),
                server_toml("good", &testserver_bin(), &["good"], good_env),
                server_toml(
                    "hung",
                    &testserver_bin(),
                    &["good"],
                    &format!("{good_env}\ntimeout = {{ call = \"1s\" }}")
                ),
                server_toml(
                    "flood",
                    &testserver_bin(),
                    &["notify-flood", "--count", "20000"],
                    ""
                ),
            ),
        )
        .unwrap();
        let secrets = scratch.path().join("good.env");
        std::fs::write(&secrets, format!("RELAY_TEST_TOKEN={token}\n")).unwrap();
        let home = scratch.path().join("inner-home");
        std::fs::create_dir_all(&home).unwrap();
        let channel = [
            "env".to_owned(),
            format!("{TAG_VAR}={}", scratch.tag),
            format!("HOME={}", home.display()),
            "ip".into(),
            "netns".into(),
            "exec".into(),
            netns.0.clone(),
            warden_bin().display().to_string(),
            "relay".into(),
            "supervise".into(),
            "--config".into(),
            inner.display().to_string(),
        ];
        let brain = scratch.path().join("brain.toml");
        std::fs::write(
            &brain,
            format!(
                "[relays.box]\ncommand = {}\nsecrets = {{ good = {:?} }}\n\
                 reconnect = {{ initial_delay = \"200ms\", max_delay = \"1s\" }}\n\n{brain_servers}",
                serde_json::to_string(&channel).unwrap(),
                secrets.display().to_string(),
            ),
        )
        .unwrap();
        Topology {
            scratch,
            _netns: netns,
            brain,
            inner,
            token,
            repo,
        }
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        let mut full = vec!["--config", self.brain.to_str().unwrap()];
        full.extend_from_slice(args);
        self.scratch.run(&full, LIMIT)
    }

    /// A relayed server's spec as the brain resolves it.
    fn spec(&self, name: &str) -> warden_config::ServerSpec {
        let env = warden_config::Environment::from_process().unwrap();
        let config = warden_config::load_file(&self.brain, &env).unwrap();
        config
            .servers
            .into_iter()
            .find(|spec| spec.name == name)
            .unwrap()
    }
}

fn stubs(names: &[&str], extra: &str) -> String {
    names
        .iter()
        .map(|name| format!("[servers.{name}]\nrelay = \"box\"\n{extra}\n"))
        .collect()
}

/// Processes whose environment holds `needle` (`NAME=value`).
fn holding(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ
            .split(|&byte| byte == 0)
            .any(|item| item == needle.as_bytes())
        {
            found.push(pid);
        }
    }
    found
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|bytes| String::from_utf8_lossy(&bytes).replace('\0', " "))
        .unwrap_or_default()
}

/// The parent of `pid`.
fn parent(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("PPid:"))
        .and_then(|value| value.trim().parse().ok())
}

/// The tagged processes whose command line contains `needle`.
fn tagged_with(scratch: &Scratch, needle: &str) -> Vec<u32> {
    tagged_processes(&scratch.tag)
        .into_iter()
        .filter_map(|pid| pid.parse::<u32>().ok())
        .filter(|pid| cmdline(*pid).contains(needle))
        .collect()
}

fn text_of(outcome: &warden_mcp::CallOutcome) -> String {
    outcome
        .content
        .iter()
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn args(value: Value) -> Option<Map<String, Value>> {
    match value {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

async fn connect(topology: &Topology, name: &str) -> Box<dyn Connection> {
    let launcher: Arc<dyn Launcher> = Arc::new(DirectLauncher::from_env());
    let options = ConnectOptions {
        relay: Some(warden_relay::Dialer::global()),
        ..ConnectOptions::default()
    };
    warden_mcp::connect(&topology.spec(name), &launcher, &options)
        .await
        .unwrap_or_else(|failure| panic!("{name} did not connect through the relay: {failure}"))
}

#[test]
fn calls_through_the_relay_reach_real_servers_inside_under_the_brains_policy_and_audit() {
    let topology = Topology::new(
        &format!(
            "{}[[policy.rules]]\ntools = \"good__add\"\neffect = \"deny\"\nnote = \"not from the brain\"\n",
            stubs(&["everything", "git", "good"], "")
        ),
        "",
    );
    let output = topology.run(&[
        "call",
        "everything/echo",
        "--args",
        r#"{"message":"through the relay"}"#,
        "--yes",
    ]);
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("through the relay"),
        "{}",
        describe(&output)
    );

    let repo = topology.repo.to_str().unwrap().to_owned();
    let output = topology.run(&[
        "call",
        "git/git_log",
        "--args",
        &json!({"repo_path": repo}).to_string(),
        "--yes",
    ]);
    assert_exit(&output, 0);
    assert!(stdout(&output).contains("inside"), "{}", describe(&output));

    // The brain's policy applies to a relayed server: denied, nothing sent.
    let output = topology.run(&["call", "good/add", "--args", r#"{"a":1,"b":2}"#, "--yes"]);
    assert_exit(&output, 4);
    assert!(
        stderr(&output).contains("not from the brain"),
        "{}",
        describe(&output)
    );
    // Positive control: the same server's honest call goes through.
    let output = topology.run(&[
        "call",
        "good/echo",
        "--args",
        r#"{"message":"ok"}"#,
        "--yes",
    ]);
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("echo: ok"),
        "{}",
        describe(&output)
    );

    // The brain's audit has every attempt, the denied one included.
    let output = topology.scratch.run(&["audit", "--json"], LIMIT);
    assert_exit(&output, 0);
    let rows = support::json(&output);
    let rows = rows.as_array().unwrap();
    let text = serde_json::to_string(rows).unwrap();
    for tool in [
        "everything__echo",
        "git__git_log",
        "good__add",
        "good__echo",
    ] {
        assert!(text.contains(tool), "{tool} is not in the audit: {text}");
    }
    // `warden tools` lists the relayed servers' tools like any others.
    let output = topology.run(&["tools"]);
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("git_status"),
        "{}",
        describe(&output)
    );
    // The servers' stderr, captured inside, is in the brain's per-server logs, tagged with
    // the sandbox and the server.
    let log = topology
        .scratch
        .path()
        .join("state/warden/logs/everything.log");
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(log.contains("[box/everything] "), "everything.log: {log}");
    // Each session ended with its brain: nothing of it is left in the sandbox.
    topology.scratch.assert_no_leftovers();
}

#[test]
fn the_token_lives_only_in_its_one_childs_environment() {
    let topology = Topology::new(&stubs(&["good", "everything"], ""), "");
    let brain_text = std::fs::read_to_string(&topology.brain).unwrap();
    let inner_text = std::fs::read_to_string(&topology.inner).unwrap();
    // The brain's configuration has the route only: not the command, not the token.
    assert!(!brain_text.contains(&topology.token));
    assert!(!brain_text.contains("warden-testserver") && !brain_text.contains("server-everything"));
    assert!(
        inner_text.contains("warden-testserver"),
        "control: the inside has it"
    );

    let brain = topology
        .scratch
        .warden(&[
            "--config",
            topology.brain.to_str().unwrap(),
            "call",
            "good/sleep",
            "--args",
            r#"{"ms":4000}"#,
            "--yes",
        ])
        .spawn()
        .unwrap();
    let needle = format!("RELAY_TEST_TOKEN={}", topology.token);
    let deadline = Instant::now() + Duration::from_secs(30);
    let holders = loop {
        let holders = holding(&needle);
        if !holders.is_empty() || Instant::now() > deadline {
            break holders;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(holders.len(), 1, "holders of the token: {holders:?}");
    assert!(
        cmdline(holders[0]).contains("warden-testserver"),
        "the one holder is the server: {}",
        cmdline(holders[0])
    );
    // Not the brain, not the supervisor, not the other server.
    assert_ne!(holders[0], brain.id());
    // The supervisor is the channel command's process, the brain's child (the sandbox's
    // helpers of a confined server are forks of it with the same command line).
    let supervisors: Vec<u32> = tagged_with(&topology.scratch, "relay supervise")
        .into_iter()
        .filter(|pid| parent(*pid) == Some(brain.id()))
        .collect();
    assert_eq!(supervisors.len(), 1, "{supervisors:?}");
    assert!(!holders.contains(&supervisors[0]));
    // The brain's process: neither its environment, its command line nor its memory map
    // holds the token or the server's command.
    let pid = brain.id();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let environ = String::from_utf8_lossy(&environ);
    assert!(!environ.contains(&topology.token));
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    assert!(!maps.contains("warden-testserver"));
    assert!(!cmdline(pid).contains("warden-testserver"));

    let output = support::wait_with_limit(brain, LIMIT);
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("slept 4000 ms"),
        "{}",
        describe(&output)
    );
    topology.scratch.assert_no_leftovers();
    assert!(
        holding(&needle).is_empty(),
        "the token outlived its session"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_killed_mid_call_is_replaced_and_the_next_call_gets_its_own_answer() {
    let topology = Topology::new(&stubs(&["good"], "timeout = { call = \"20s\" }"), "");
    let connection = connect(&topology, "good").await;
    let first = connection
        .call_tool(
            "echo",
            args(json!({"message":"first"})),
            Duration::from_secs(20),
        )
        .await
        .unwrap();
    assert_eq!(text_of(&first), "echo: first");

    let call = connection.call_tool("sleep", args(json!({"ms": 9000})), Duration::from_secs(20));
    let killer = async {
        // The child is killed while the call is in flight.
        tokio::time::sleep(Duration::from_millis(800)).await;
        let servers = tagged_with(&topology.scratch, "warden-testserver good");
        assert!(!servers.is_empty(), "no server process found");
        for pid in &servers {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
        Instant::now()
    };
    let (result, killed_at) = tokio::join!(call, killer);
    let error = result.unwrap_err();
    assert!(
        killed_at.elapsed() < Duration::from_secs(5),
        "the call did not fail promptly after the kill"
    );
    match &error {
        CallError::Rejected { code, message } => {
            assert_eq!(
                *code,
                warden_relay::supervisor::codes::SERVER_EXITED,
                "{message}"
            );
        }
        other => panic!("unexpected error: {other}"),
    }
    // The next call is answered by a new child, with its own answer.
    let second = connection
        .call_tool(
            "echo",
            args(json!({"message":"second"})),
            Duration::from_secs(20),
        )
        .await
        .unwrap();
    assert_eq!(text_of(&second), "echo: second");
    let third = connection
        .call_tool(
            "add",
            args(json!({"a": 2, "b": 3})),
            Duration::from_secs(20),
        )
        .await
        .unwrap();
    assert!(text_of(&third).contains('5'), "{}", text_of(&third));
    connection.close().await;
    topology.scratch.assert_no_leftovers();
}

#[test]
fn a_hung_tool_times_out_at_the_innermost_level_first_and_the_next_level_without_it() {
    // `hung` has a 1 s tool timeout inside; the brain allows 8 s.
    let topology = Topology::new(
        &format!(
            "{}{}",
            stubs(&["hung"], "timeout = { call = \"8s\" }"),
            stubs(&["good"], "timeout = { call = \"3s\" }")
        ),
        "",
    );
    let started = Instant::now();
    let output = topology.run(&["call", "hung/sleep", "--args", r#"{"ms":9000}"#, "--yes"]);
    let took = started.elapsed();
    assert_exit(&output, 3);
    assert!(
        stderr(&output).contains("the tool's own timeout"),
        "{}",
        describe(&output)
    );
    assert!(
        took < Duration::from_secs(7),
        "took {took:?}: {}",
        describe(&output)
    );

    // Without a tool timeout (`good` has the 60 s default inside), the next level fires:
    // the supervisor's deadline, the brain's 3 s less the margin, before the brain's own.
    let started = Instant::now();
    let output = topology.run(&["call", "good/sleep", "--args", r#"{"ms":9000}"#, "--yes"]);
    let took = started.elapsed();
    assert_exit(&output, 3);
    assert!(
        stderr(&output).contains("the supervisor's deadline"),
        "{}",
        describe(&output)
    );
    assert!(took < Duration::from_secs(8), "took {took:?}");
    topology.scratch.assert_no_leftovers();
}

#[test]
fn a_turn_goes_on_after_a_relayed_tool_times_out() {
    let topology = Topology::new(&stubs(&["hung"], "timeout = { call = \"8s\" }"), "");
    let model = support::ModelServer::start(
        &topology.scratch,
        &json!({"steps": [
            {"reply": {"tool_calls": [{"name": "hung__sleep", "arguments": {"ms": 9000}}]}},
            {"reply": {"text": "The tool timed out; moving on."},
             "expect": {"last_tool_results_contain": ["timed out inside the sandbox"]}}
        ]}),
    );
    let mut command = topology.scratch.warden(&[
        "--config",
        topology.brain.to_str().unwrap(),
        "run",
        "--json",
        "--provider",
        "openai",
        "--model",
        "test-model",
        "--base-url",
        &model.base_url,
        "--approvals",
        "allow-all",
        "--prompt",
        "sleep a while",
    ]);
    command.env("OPENAI_API_KEY", "test-key");
    let output = support::run_with_limit(command, LIMIT);
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("moving on"),
        "{}",
        describe(&output)
    );
    drop(model);
    topology.scratch.assert_no_leftovers();
}

#[test]
fn a_server_flooding_notifications_does_not_stall_calls() {
    let topology = Topology::new(&stubs(&["flood"], "timeout = { call = \"30s\" }"), "");
    let started = Instant::now();
    let output = topology.run(&[
        "call",
        "flood/echo",
        "--args",
        r#"{"message":"still here"}"#,
        "--yes",
    ]);
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("echo: still here"),
        "{}",
        describe(&output)
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    topology.scratch.assert_no_leftovers();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_channel_fails_calls_fast_and_is_restored() {
    let topology = Topology::new(&stubs(&["good"], "timeout = { call = \"10s\" }"), "");
    let connection = connect(&topology, "good").await;
    let before = connection
        .call_tool(
            "echo",
            args(json!({"message":"before"})),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(text_of(&before), "echo: before");

    // Cut the channel: the supervisor dies (and its children with their session).
    let supervisors: Vec<u32> = tagged_with(&topology.scratch, "relay supervise")
        .into_iter()
        .filter(|pid| parent(*pid) == Some(std::process::id()))
        .collect();
    assert_eq!(supervisors.len(), 1, "{supervisors:?}");
    for pid in supervisors {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let error = connection
        .call_tool(
            "echo",
            args(json!({"message":"down"})),
            Duration::from_secs(10),
        )
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "a call while the channel is down took {:?}",
        started.elapsed()
    );
    let message = error.to_string();
    assert!(
        message.contains("reconnecting") || message.contains("gone"),
        "{message}"
    );
    // Once the back-off has passed, the channel is opened again and calls work.
    let deadline = Instant::now() + Duration::from_secs(20);
    let after = loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        match connection
            .call_tool(
                "echo",
                args(json!({"message":"after"})),
                Duration::from_secs(10),
            )
            .await
        {
            Ok(outcome) => break outcome,
            Err(error) if Instant::now() < deadline => {
                assert!(
                    error.to_string().contains("reconnecting")
                        || error.to_string().contains("gone"),
                    "{error}"
                );
            }
            Err(error) => panic!("the channel was not restored: {error}"),
        }
    };
    assert_eq!(text_of(&after), "echo: after");
    connection.close().await;
    topology.scratch.assert_no_leftovers();
}

#[test]
fn a_relayed_entry_carrying_a_command_or_env_is_refused() {
    let scratch = Scratch::new();
    for extra in [
        "command = \"node\"",
        "args = [\"x\"]",
        "env = { TOKEN = \"t\" }",
        "url = \"https://example.invalid/mcp\"",
    ] {
        let config = scratch.config(&format!(
            "[relays.box]\ncommand = [\"true\"]\n\n[servers.s]\nrelay = \"box\"\n{extra}\n"
        ));
        let output = scratch.run(&["--config", config.to_str().unwrap(), "config"], LIMIT);
        assert_exit(&output, 2);
        assert!(
            stderr(&output).contains("is a stub"),
            "{extra}: {}",
            describe(&output)
        );
    }
    // Positive control: the stub alone is accepted.
    let config =
        scratch.config("[relays.box]\ncommand = [\"true\"]\n\n[servers.s]\nrelay = \"box\"\n");
    let output = scratch.run(&["--config", config.to_str().unwrap(), "config"], LIMIT);
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("relay  box"),
        "{}",
        describe(&output)
    );
    // A relay named by no table is refused.
    let config = scratch.config("[servers.s]\nrelay = \"nowhere\"\n");
    let output = scratch.run(&["--config", config.to_str().unwrap(), "config"], LIMIT);
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("[relays.nowhere]"),
        "{}",
        describe(&output)
    );
}

/// What the relay adds to one call over a local stdio call, the channel excluded (here the
/// channel is the supervisor's own pipes, no namespace, no exec). Printed for
/// docs/benchmarks.md; asserted loosely so a loaded machine does not fail it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_overhead_per_call_is_measured() {
    let scratch = Scratch::new();
    let inner = scratch.path().join("inner.toml");
    // No `${WARDEN_TEST_TAG}` here: this file is also read by the test process itself.
    std::fs::write(
        &inner,
        format!(
            "[servers.good]\ncommand = {:?}\nargs = [\"good\"]\n",
            testserver_bin().display().to_string()
        ),
    )
    .unwrap();
    let home = scratch.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let brain = scratch.config(&format!(
        "[relays.direct]\ncommand = {}\n\n[servers.good]\nrelay = \"direct\"\n",
        serde_json::to_string(&[
            "env".to_owned(),
            format!("{TAG_VAR}={}", scratch.tag),
            format!("HOME={}", home.display()),
            warden_bin().display().to_string(),
            "relay".into(),
            "supervise".into(),
            "--config".into(),
            inner.display().to_string(),
        ])
        .unwrap()
    ));
    let env = warden_config::Environment::from_process().unwrap();
    let relayed = warden_config::load_file(&brain, &env)
        .unwrap()
        .servers
        .remove(0);
    let local = warden_config::load_file(&inner, &env)
        .unwrap()
        .servers
        .remove(0);
    let scratch_base = scratch.path().join("scratch");
    let launcher: Arc<dyn Launcher> =
        Arc::new(warden_mcp::ConfinedLauncher::from_env(&scratch_base));
    let options = ConnectOptions {
        relay: Some(warden_relay::Dialer::global()),
        ..ConnectOptions::default()
    };
    let mut p50 = Vec::new();
    for spec in [&local, &relayed] {
        let connection = warden_mcp::connect(spec, &launcher, &options)
            .await
            .unwrap();
        let mut samples = Vec::new();
        for round in 0..330 {
            let started = Instant::now();
            let outcome = connection
                .call_tool(
                    "echo",
                    args(json!({"message":"m"})),
                    Duration::from_secs(10),
                )
                .await
                .unwrap();
            if round >= 30 {
                samples.push(started.elapsed());
            }
            assert_eq!(text_of(&outcome), "echo: m");
        }
        samples.sort();
        let median = samples[samples.len() / 2];
        let p90 = samples[samples.len() * 9 / 10];
        eprintln!("{}: p50 {median:?} p90 {p90:?}", spec.name);
        p50.push(median);
        connection.close().await;
    }
    let overhead = p50[1].saturating_sub(p50[0]);
    eprintln!(
        "relay overhead per call, p50: {overhead:?} (local {:?}, relayed {:?})",
        p50[0], p50[1]
    );
    assert!(
        overhead < Duration::from_millis(5),
        "relay overhead p50 {overhead:?}"
    );

    // What pins add to a start: a new session (channel, supervisor, child, handshake)
    // with and without the report and the brain's verdict (the check here allows all; the
    // supervisor hashes the server's binary, once per supervisor).
    struct AllowAll;
    impl warden_relay::pins::PinCheck for AllowAll {
        fn check(
            &self,
            _: &str,
            _: &warden_config::ServerSpec,
            _: &warden_relay::pins::Report,
        ) -> Result<(), String> {
            Ok(())
        }
    }
    let pinned = ConnectOptions {
        relay: Some(Arc::new(warden_relay::PinnedDialer::new(
            warden_relay::Dialer::global(),
            Arc::new(AllowAll),
        ))),
        ..ConnectOptions::default()
    };
    let mut starts = Vec::new();
    for options in [&options, &pinned] {
        let mut samples = Vec::new();
        for _ in 0..5 {
            let started = Instant::now();
            let connection = warden_mcp::connect(&relayed, &launcher, options)
                .await
                .unwrap();
            samples.push(started.elapsed());
            connection.close().await;
        }
        samples.sort();
        starts.push(samples[samples.len() / 2]);
    }
    eprintln!(
        "relayed session start, median of 5: {:?} without pins, {:?} with pins",
        starts[0], starts[1]
    );
    scratch.assert_no_leftovers();
}

/// A client of `warden serve` (stdio) run with the topology's brain configuration.
struct ServeClient {
    served: std::process::Child,
    input: std::process::ChildStdin,
    received: std::sync::mpsc::Receiver<Value>,
    /// The methods of the notifications heard so far.
    notes: Vec<String>,
}

impl ServeClient {
    fn start(topology: &Topology) -> Self {
        use std::io::BufRead;
        let mut command =
            topology
                .scratch
                .warden(&["--config", topology.brain.to_str().unwrap(), "serve"]);
        command.stdin(std::process::Stdio::piped());
        let mut served = command.spawn().unwrap();
        let input = served.stdin.take().unwrap();
        let output = served.stdout.take().unwrap();
        let (lines, received) = std::sync::mpsc::channel::<Value>();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(output).lines() {
                let Ok(line) = line else { return };
                if let Ok(value) = serde_json::from_str(&line)
                    && lines.send(value).is_err()
                {
                    return;
                }
            }
        });
        ServeClient {
            served,
            input,
            received,
            notes: Vec::new(),
        }
    }

    fn send(&mut self, value: Value) {
        use std::io::Write;
        writeln!(self.input, "{value}").unwrap();
        self.input.flush().unwrap();
    }

    /// The first message (within 60 s) that is `wanted`.
    fn wait_for(&mut self, wanted: &dyn Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self.received.recv_timeout(left).unwrap_or_else(|_| {
                panic!("nothing awaited from warden serve; heard {:?}", self.notes)
            });
            if let Some(method) = message["method"].as_str() {
                self.notes.push(method.to_owned());
            }
            if wanted(&message) {
                return message;
            }
        }
    }

    /// Sends request `id` and returns its answer.
    fn ask(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.wait_for(&|message: &Value| message["id"] == id)
    }

    /// Sends request `id` and returns its result (it must not be an error).
    fn result(&mut self, id: u64, method: &str, params: Value) -> Value {
        let answer = self.ask(id, method, params);
        assert!(answer["result"].is_object(), "{method}: {answer}");
        answer["result"].clone()
    }

    /// The MCP handshake; returns the gateway's `initialize` result.
    fn initialize(&mut self) -> Value {
        let answer = self.ask(
            1,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "relay-test", "version": "1"}}),
        );
        assert!(answer["result"].is_object(), "{answer}");
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        answer["result"].clone()
    }

    /// Closes the gateway's stdin and checks that it ends well.
    fn finish(self) {
        drop(self.input);
        let output = support::wait_with_limit(self.served, LIMIT);
        assert!(output.status.success(), "{}", describe(&output));
    }
}

#[test]
fn warden_serve_serves_relayed_servers_to_an_mcp_client_under_the_policy() {
    let topology = Topology::new(
        &format!(
            "{}[[policy.rules]]\ntools = \"good__echo\"\neffect = \"allow\"\n\n\
             [[policy.rules]]\ntools = \"good__add\"\neffect = \"deny\"\nnote = \"served, denied\"\n",
            stubs(&["good"], "")
        ),
        "",
    );
    let mut client = ServeClient::start(&topology);
    client.initialize();
    let echoed = client.ask(
        2,
        "tools/call",
        json!({"name": "good__echo", "arguments": {"message": "served"}}),
    );
    assert_eq!(
        echoed["result"]["content"][0]["text"], "echo: served",
        "{echoed}"
    );
    let denied = client
        .ask(
            3,
            "tools/call",
            json!({"name": "good__add", "arguments": {"a": 1, "b": 2}}),
        )
        .to_string();
    assert!(denied.contains("served, denied"), "{denied}");
    client.finish();
    topology.scratch.assert_no_leftovers();
}

/// Pins inside the sandbox (decision 0030, revision 1): the supervisor hashes what a start
/// runs and the brain compares it with the pin it keeps for (relay, server).
#[test]
fn a_server_binary_swapped_inside_the_sandbox_is_refused_until_pinned_again() {
    let topology = Topology::new(&stubs(&["swap", "good"], ""), "");
    // The server inside runs its own copy of a binary, which a task in the sandbox can
    // replace between two sessions.
    let bin_dir = topology.scratch.path().join("boxbin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let bin = bin_dir.join("box-server");
    std::fs::copy(testserver_bin(), &bin).unwrap();
    let mut inner = std::fs::read_to_string(&topology.inner).unwrap();
    inner.push_str(&server_toml("swap", &bin, &["good"], ""));
    std::fs::write(&topology.inner, inner).unwrap();
    let call = |message: &str| {
        topology.run(&[
            "call",
            "swap/echo",
            "--args",
            &json!({ "message": message }).to_string(),
            "--yes",
        ])
    };

    // First session: pinned on first use, and it runs.
    let output = call("first");
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("echo: first"),
        "{}",
        describe(&output)
    );
    // Control: a second session with the binary unchanged runs as well.
    let output = call("unchanged");
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("echo: unchanged"),
        "{}",
        describe(&output)
    );

    // Between sessions the binary is replaced inside the sandbox (it still works: a
    // swapped binary need not look broken).
    let swapped = bin_dir.join("box-server.new");
    std::fs::copy(testserver_bin(), &swapped).unwrap();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&swapped)
        .unwrap();
    std::io::Write::write_all(&mut file, b"\0swapped inside the sandbox").unwrap();
    drop(file);
    std::fs::rename(&swapped, &bin).unwrap();

    // The brain refuses it, naming the server, the relay and the file, and says how to
    // accept it.
    let output = call("after the swap");
    assert_exit(&output, 3);
    assert!(!stdout(&output).contains("echo: after the swap"));
    let text = stderr(&output);
    for part in [
        "`swap` is not started",
        "relay `box`",
        &format!("{} changed", bin.display()),
        "warden pin swap",
    ] {
        assert!(text.contains(part), "{part}: {}", describe(&output));
    }
    // The refusal is the one server's: another server of the same sandbox still runs.
    let output = topology.run(&[
        "call",
        "good/echo",
        "--args",
        r#"{"message":"ok"}"#,
        "--yes",
    ]);
    assert_exit(&output, 0);
    // `warden pin --show` shows what the sandbox reported, and accepts nothing.
    let output = topology.run(&["pin", "swap", "--show"]);
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains(&format!("{} changed", bin.display())),
        "{}",
        describe(&output)
    );
    assert_exit(&call("still refused"), 3);

    // Re-approved: the user pins what the sandbox reported, and the server runs again.
    let output = topology.run(&["pin", "swap", "--yes"]);
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("pinned to what the sandbox reported"),
        "{}",
        describe(&output)
    );
    let output = call("re-approved");
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("echo: re-approved"),
        "{}",
        describe(&output)
    );
    topology.scratch.assert_no_leftovers();
}

/// Replays a server binary inside the sandbox that another user could replace (it lies in
/// a directory every user may write): the supervisor refuses the start before reporting
/// it, naming the file and why, and the brain records no pin for it. Control: the same
/// binary once the directory is private again is pinned and runs.
#[test]
fn a_server_binary_others_can_replace_inside_the_sandbox_is_refused_before_it_is_pinned() {
    use std::os::unix::fs::PermissionsExt;
    let topology = Topology::new(&stubs(&["open"], ""), "");
    let bin_dir = topology.scratch.path().join("openbin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let bin = bin_dir.join("box-server");
    std::fs::copy(testserver_bin(), &bin).unwrap();
    let mut inner = std::fs::read_to_string(&topology.inner).unwrap();
    inner.push_str(&server_toml("open", &bin, &["good"], ""));
    std::fs::write(&topology.inner, inner).unwrap();
    let chmod = |mode: u32| {
        std::fs::set_permissions(&bin_dir, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    let call = |message: &str| {
        topology.run(&[
            "call",
            "open/echo",
            "--args",
            &json!({ "message": message }).to_string(),
            "--yes",
        ])
    };
    chmod(0o777);
    let output = call("exposed");
    assert_exit(&output, 3);
    assert!(!stdout(&output).contains("echo: exposed"));
    let text = stderr(&output);
    for part in [
        "`open` is not started".to_owned(),
        format!(
            "{}: {} is writable by every user",
            bin.display(),
            bin_dir.display()
        ),
    ] {
        assert!(text.contains(&part), "{part}: {}", describe(&output));
    }
    // Nothing was reported, so nothing was pinned.
    let output = topology.run(&["pin", "open", "--show"]);
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("not pinned yet"),
        "{}",
        describe(&output)
    );
    // Control: the directory made private again, the same binary is pinned and runs.
    chmod(0o755);
    let output = call("private");
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("echo: private"),
        "{}",
        describe(&output)
    );
    topology.scratch.assert_no_leftovers();
}

/// Resources and prompts of a relayed server through `warden serve`: listed (prompts
/// under the server's prefix), read and got through the relay, and a change of the
/// server's lists inside the sandbox reaches the gateway's client as list changes.
#[test]
fn warden_serve_offers_a_relayed_servers_resources_and_prompts() {
    let topology = Topology::new(
        &format!(
            "{}[[policy.rules]]\ntools = \"live__*\"\neffect = \"allow\"\n",
            stubs(&["live"], "")
        ),
        &server_toml("live", &testserver_bin(), &["live-resources"], ""),
    );
    let mut client = ServeClient::start(&topology);
    let initialized = client.initialize();
    for capability in ["resources", "prompts"] {
        assert!(
            initialized["capabilities"][capability].is_object(),
            "{initialized}"
        );
    }
    let uris = |result: &Value| -> Vec<String> {
        result["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["uri"].as_str().unwrap().to_owned())
            .collect()
    };
    let names = |result: &Value| -> Vec<String> {
        result["prompts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let listed = client.result(2, "resources/list", json!({}));
    assert_eq!(uris(&listed), ["live://a", "live://b"], "{listed}");
    let prompts = client.result(3, "prompts/list", json!({}));
    assert_eq!(names(&prompts), ["live__live"], "{prompts}");
    // The server's lists change inside the sandbox (called while the context is clean:
    // what is read below is untrusted text, after which the brain's policy would ask): the
    // client hears of both changes, and reads the new lists.
    let called = client.result(
        4,
        "tools/call",
        json!({"name": "live__change_lists", "arguments": {}}),
    );
    assert_ne!(called["isError"], true, "{called}");
    for list in ["resources", "prompts"] {
        let method = format!("notifications/{list}/list_changed");
        if !client.notes.contains(&method) {
            client.wait_for(&|message: &Value| message["method"] == method.as_str());
        }
    }
    let listed = client.result(5, "resources/list", json!({}));
    assert_eq!(
        uris(&listed),
        ["live://a", "live://b", "live://c"],
        "{listed}"
    );
    let prompts = client.result(6, "prompts/list", json!({}));
    assert_eq!(names(&prompts), ["live__live", "live__extra"], "{prompts}");
    // Read and got through the relay.
    let read = client.result(7, "resources/read", json!({"uri": "live://c"}));
    assert_eq!(
        read["contents"][0]["text"], "the live resource live://c",
        "{read}"
    );
    let got = client.result(8, "prompts/get", json!({"name": "live__extra"}));
    assert_eq!(
        got["messages"][0]["content"]["text"], "the live prompt extra",
        "{got}"
    );
    client.finish();
    topology.scratch.assert_no_leftovers();
}

/// A relayed server that fails at its start inside the sandbox is reported like a local one:
/// `warden tools` and `warden call` show the last lines it wrote to stderr inside, tagged
/// with the sandbox and the server. Control: another server of the box is listed.
#[test]
fn a_relayed_server_failing_at_start_is_reported_with_its_stderr() {
    let topology = Topology::new(
        &stubs(&["broken", "good"], ""),
        &server_toml("broken", &testserver_bin(), &["exit-at-start"], ""),
    );
    let line = "[box/broken] fatal: cannot open database /nonexistent";
    let output = topology.run(&["tools"]);
    assert_exit(&output, 0);
    let text = stdout(&output);
    assert!(
        text.contains("broken: FAILED") && text.contains(&format!("  | {line}\n")),
        "{}",
        describe(&output)
    );
    assert!(text.contains("good__echo"), "{}", describe(&output));
    let output = topology.run(&["call", "broken/echo", "--yes"]);
    assert_exit(&output, 3);
    assert!(
        stderr(&output).contains(&format!("last lines on the server's stderr:\n  | {line}")),
        "{}",
        describe(&output)
    );
    topology.scratch.assert_no_leftovers();
}

/// Processes whose environment holds `needle`, waited for (at most 10 s) to be `present`.
fn wait_holding(needle: &str, present: bool) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found = holding(needle);
        if found.is_empty() != present || Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Issue 13, "a change to the relayed server set applies on the next turn without a
/// restart of the sandbox", with the supervisor in a real network namespace: one server's
/// command changes, one is removed, one is added, while the brain's connections stay up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_server_set_inside_a_namespace_applies_without_restarting_the_sandbox() {
    let topology = Topology::new(
        &stubs(
            &["mutable", "doomed", "fresh"],
            "timeout = { call = \"20s\" }",
        ),
        "",
    );
    let bin_dir = topology.scratch.path().join("boxbin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let (first_bin, second_bin) = (bin_dir.join("first-server"), bin_dir.join("second-server"));
    std::fs::copy(testserver_bin(), &first_bin).unwrap();
    std::fs::copy(testserver_bin(), &second_bin).unwrap();
    let base = std::fs::read_to_string(&topology.inner).unwrap();
    // Markers unique to this run, to find each definition's process by its environment.
    let tag = topology.scratch.tag.clone();
    let marker = |name: &str| format!("{name}-{tag}");
    let def = |name: &str, bin: &std::path::Path, version: &str, more: &str| {
        server_toml(
            name,
            bin,
            &["good"],
            &format!("env = {{ RELAY_DEF = {:?}{more} }}", marker(version)),
        )
    };
    std::fs::write(
        &topology.inner,
        format!(
            "{base}{}{}",
            def("mutable", &first_bin, "mutable-1", ""),
            def("doomed", &first_bin, "doomed-1", "")
        ),
    )
    .unwrap();

    let mutable = connect(&topology, "mutable").await;
    let doomed = connect(&topology, "doomed").await;
    for connection in [&mutable, &doomed] {
        let outcome = connection
            .call_tool("echo", args(json!({"message": "before"})), LIMIT)
            .await
            .unwrap();
        assert_eq!(text_of(&outcome), "echo: before");
    }
    let tools = mutable.list_tools(LIMIT).await.unwrap();
    assert!(!tools.iter().any(|tool| tool.name == "extra"));
    assert!(!mutable.take_tools_changed());
    let supervisor: Vec<u32> = tagged_with(&topology.scratch, "relay supervise")
        .into_iter()
        .filter(|pid| parent(*pid) == Some(std::process::id()))
        .collect();
    assert_eq!(supervisor.len(), 1, "{supervisor:?}");
    assert_eq!(
        wait_holding(&format!("RELAY_DEF={}", marker("mutable-1")), true).len(),
        1
    );
    assert_eq!(
        wait_holding(&format!("RELAY_DEF={}", marker("doomed-1")), true).len(),
        1
    );

    // The sandbox's configuration changes: `mutable` runs another command (with one more
    // tool), `doomed` is gone, `fresh` is new. Nothing is sent by the brain meanwhile.
    std::fs::write(
        &topology.inner,
        format!(
            "{base}{}{}",
            def(
                "mutable",
                &second_bin,
                "mutable-2",
                ", WARDEN_TEST_EXTRA_TOOL = \"1\""
            ),
            def("fresh", &first_bin, "fresh-1", "")
        ),
    )
    .unwrap();
    // The changed server's old process and the removed server's process are stopped, and
    // the brain is told the changed one's list changed, all before its next call.
    assert!(wait_holding(&format!("RELAY_DEF={}", marker("mutable-1")), false).is_empty());
    assert!(wait_holding(&format!("RELAY_DEF={}", marker("doomed-1")), false).is_empty());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !mutable.take_tools_changed() {
        assert!(
            Instant::now() < deadline,
            "the brain was not told that `mutable`'s list changed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Its next turn reads the new list, from the new command.
    let tools = mutable.list_tools(LIMIT).await.unwrap();
    assert!(
        tools.iter().any(|tool| tool.name == "extra"),
        "{:?}",
        tools.iter().map(|tool| &tool.name).collect::<Vec<_>>()
    );
    let outcome = mutable.call_tool("extra", None, LIMIT).await.unwrap();
    assert_eq!(text_of(&outcome), "extra");
    let running = wait_holding(&format!("RELAY_DEF={}", marker("mutable-2")), true);
    assert_eq!(running.len(), 1, "{running:?}");
    assert!(
        cmdline(running[0]).contains("second-server"),
        "{}",
        cmdline(running[0])
    );
    // The removed server's calls fail, and its log says why.
    let error = doomed
        .call_tool("echo", args(json!({"message": "after"})), LIMIT)
        .await
        .unwrap_err();
    let tail = doomed.stderr_tail(20).join("\n");
    assert!(
        tail.contains("`doomed` is no longer defined"),
        "{error} / {tail}"
    );
    // The added server connects through the same channel.
    let fresh = connect(&topology, "fresh").await;
    let outcome = fresh
        .call_tool("echo", args(json!({"message": "new"})), LIMIT)
        .await
        .unwrap();
    assert_eq!(text_of(&outcome), "echo: new");
    // The sandbox was not restarted: the same supervisor served it all.
    let after: Vec<u32> = tagged_with(&topology.scratch, "relay supervise")
        .into_iter()
        .filter(|pid| parent(*pid) == Some(std::process::id()))
        .collect();
    assert_eq!(after, supervisor);
    for connection in [mutable, doomed, fresh] {
        connection.close().await;
    }
    topology.scratch.assert_no_leftovers();
}

/// `warden chat` through the relay (issue 13 asks for `call`, `run` and `serve`, tested
/// above; chat is the fourth front end): a relayed tool is called in one turn, the
/// sandbox's definition of its server changes between turns (one tool gone, one added),
/// and the next turn's catalogue reflects it, with no restart of either side: the removed
/// tool is gone, and the added one is held back for review like any server's new tool.
#[test]
fn warden_chat_calls_relayed_tools_and_sees_a_changed_definition_at_the_next_turn() {
    use std::io::{BufRead, Write};
    let topology = Topology::new(
        &format!(
            "{}[policy.servers.good]\ntrust = \"trusted\"\nintegrity = \"trusted\"\n\
             confidentiality = \"public\"\n\n[[policy.rules]]\ntools = \"good__*\"\n\
             effect = \"allow\"\n",
            stubs(&["good"], "")
        ),
        "",
    );
    let model = support::ModelServer::start(
        &topology.scratch,
        &json!({"steps": [
            {"reply": {"tool_calls": [{"name": "good__echo", "arguments": {"message": "one"}}]},
             "expect": {"tools_include": ["good__echo", "good__sleep"],
                        "tools_exclude": ["good__extra"]}},
            {"reply": {"text": "first turn done"},
             "expect": {"last_tool_results_contain": ["echo: one"]}},
            {"reply": {"tool_calls": [{"name": "good__echo", "arguments": {"message": "two"}}]},
             "expect": {"tools_include": ["good__echo"],
                        "tools_exclude": ["good__sleep", "good__extra"],
                        "last_user_text_contains": ["second"]}},
            {"reply": {"text": "second turn done"},
             "expect": {"last_tool_results_contain": ["echo: two"]}}
        ]}),
    );
    let mut command = topology.scratch.warden(&[
        "--config",
        topology.brain.to_str().unwrap(),
        "chat",
        "--provider",
        "anthropic",
        "--model",
        "m",
        "--base-url",
        &model.base_url,
    ]);
    command
        .env("ANTHROPIC_API_KEY", "test-key")
        .stdin(std::process::Stdio::piped());
    let mut chat = command.spawn().unwrap();
    let mut input = chat.stdin.take().unwrap();
    let output = chat.stdout.take().unwrap();
    let (lines, received) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(output).lines() {
            let Ok(line) = line else { return };
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    let mut seen = Vec::new();
    let mut wait_for = |needle: &str| -> bool {
        let deadline = Instant::now() + LIMIT;
        while !seen.iter().any(|line: &String| line.contains(needle)) {
            let left = deadline.saturating_duration_since(Instant::now());
            match received.recv_timeout(left) {
                Ok(line) => seen.push(line),
                Err(_) => return false,
            }
        }
        true
    };
    let fail = |mut chat: std::process::Child, needle: &str| -> ! {
        let _ = chat.kill();
        let output = chat.wait_with_output().unwrap();
        panic!("`{needle}` never came: {}", describe(&output));
    };
    writeln!(input, "first: echo one").unwrap();
    input.flush().unwrap();
    if !wait_for("first turn done") {
        fail(chat, "first turn done");
    }

    let supervisors = |chat: &std::process::Child| -> Vec<u32> {
        tagged_with(&topology.scratch, "relay supervise")
            .into_iter()
            .filter(|pid| parent(*pid) == Some(chat.id()))
            .collect()
    };
    let before = supervisors(&chat);
    assert_eq!(before.len(), 1, "{before:?}");
    // Between the turns, the sandbox's definition of `good` changes: `sleep` goes,
    // `extra` comes.
    let inner = std::fs::read_to_string(&topology.inner).unwrap();
    let changed = inner.replacen(
        "WARDEN_TEST_SLEEP_TOOL = \"1\"",
        "WARDEN_TEST_EXTRA_TOOL = \"1\"",
        1,
    );
    assert_ne!(changed, inner);
    std::fs::write(&topology.inner, changed).unwrap();
    // The supervisor looks at its configuration every second.
    std::thread::sleep(Duration::from_millis(2500));
    writeln!(input, "second: echo two").unwrap();
    input.flush().unwrap();
    if !wait_for("second turn done") {
        fail(chat, "second turn done");
    }
    assert_eq!(
        supervisors(&chat),
        before,
        "the sandbox's session was restarted"
    );
    drop(input);
    let output = support::wait_with_limit(chat, LIMIT);
    assert_exit(&output, 0);
    // Each model request met its expectations (the model server answers an error
    // otherwise, and the turn would not have printed its text).
    assert_eq!(model.requests().len(), 4, "{:?}", model.requests());
    // The added tool was seen, and held back for review (`warden approve good`).
    assert!(
        stderr(&output).contains("held back extra"),
        "{}",
        describe(&output)
    );
    drop(model);
    topology.scratch.assert_no_leftovers();
}
