//! One step's calls, run concurrently per server: their results enter the context in the
//! order of the calls, and a call a turn leaves behind is cancelled, never left running.
//! Both were found by the simulation of the host (warden-sim, decision 0041); the servers
//! here are in-process connections reached through the host's relay seam.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use warden_agent::model::{
    Model, ModelError, ModelReply, ModelRequest, StopReason, TextSink, ToolCall,
};
use warden_agent::{Agent, AgentError, AgentSettings, AllowAll, Event, Observer};
use warden_config::{
    EraPreference, Format, Lifecycle, Origin, RelayChannel, Scope, ServerSpec, StartMode, Timeouts,
    TransportSpec,
};
use warden_host::{Host, NoReview};
use warden_mcp::launcher::StopReport;
use warden_mcp::{
    CallError, CallOutcome, ConnectFailure, ConnectOptions, Connection, Era, RelayDialer,
    ServerInfo, ToolDef,
};

/// What a server's calls did: finished, or dropped before they finished.
#[derive(Default)]
struct Seen {
    finished: AtomicUsize,
    dropped: AtomicUsize,
}

/// Counts a call dropped before it finished.
struct Watch {
    seen: Arc<Seen>,
    finished: bool,
}

impl Drop for Watch {
    fn drop(&mut self) {
        let count = if self.finished {
            &self.seen.finished
        } else {
            &self.seen.dropped
        };
        count.fetch_add(1, Ordering::SeqCst);
    }
}

/// A server with one tool, `work`, whose calls take `delay`.
struct Slow {
    name: String,
    info: ServerInfo,
    delay: Duration,
    seen: Arc<Seen>,
}

impl Connection for Slow {
    fn name(&self) -> &str {
        &self.name
    }

    fn info(&self) -> &ServerInfo {
        &self.info
    }

    fn list_tools(&self, _timeout: Duration) -> BoxFuture<'_, Result<Vec<ToolDef>, CallError>> {
        Box::pin(async {
            Ok(vec![ToolDef {
                name: "work".into(),
                title: None,
                description: Some("Works.".into()),
                input_schema: json!({"type": "object"}),
                output_schema: None,
                annotations: Some(json!({"readOnlyHint": true, "openWorldHint": false})),
            }])
        })
    }

    fn call_tool<'a>(
        &'a self,
        _name: &'a str,
        _arguments: Option<Map<String, Value>>,
        _timeout: Duration,
    ) -> BoxFuture<'a, Result<CallOutcome, CallError>> {
        let watch = Watch {
            seen: Arc::clone(&self.seen),
            finished: false,
        };
        Box::pin(async move {
            // The whole guard lives in the call's future: dropped with it.
            let mut watch = watch;
            tokio::time::sleep(self.delay).await;
            watch.finished = true;
            let text = format!("{} done", self.name);
            Ok(CallOutcome {
                content: vec![json!({"type": "text", "text": text})],
                structured: None,
                is_error: false,
                raw: json!({"content": [{"type": "text", "text": text}]}),
                input_required: None,
            })
        })
    }

    fn stderr_tail(&self, _count: usize) -> Vec<String> {
        Vec::new()
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, StopReport> {
        Box::pin(async {
            StopReport {
                status: "closed".into(),
                signals: Vec::new(),
            }
        })
    }
}

/// Dials the [`Slow`] servers by name.
struct Dialer(BTreeMap<String, (Duration, Arc<Seen>)>);

impl RelayDialer for Dialer {
    fn connect<'a>(
        &'a self,
        spec: &'a ServerSpec,
        _options: &'a ConnectOptions,
    ) -> BoxFuture<'a, Result<Box<dyn Connection>, ConnectFailure>> {
        Box::pin(async move {
            let (delay, seen) = self.0.get(&spec.name).cloned().expect("a known server");
            Ok(Box::new(Slow {
                name: spec.name.clone(),
                info: ServerInfo {
                    era: Era::Legacy,
                    protocol_version: "2025-11-25".into(),
                    name: None,
                    version: None,
                    title: None,
                    capabilities: json!({"tools": {}}),
                    instructions: None,
                    program: None,
                    connect_attempts: 1,
                },
                delay,
                seen,
            }) as Box<dyn Connection>)
        })
    }
}

fn spec(name: &str) -> ServerSpec {
    ServerSpec {
        name: name.into(),
        transport: TransportSpec::Relay {
            relay: "test".into(),
            channel: RelayChannel {
                command: vec!["/test/relay".into()],
                secrets: BTreeMap::new(),
                reconnect: Default::default(),
            },
        },
        timeouts: Timeouts {
            connect: Duration::from_secs(10),
            call: Duration::from_secs(60),
        },
        era: EraPreference::Legacy,
        max_message_bytes: 1 << 20,
        origin: Origin {
            scope: Scope::Explicit,
            format: Format::WardenToml,
            path: PathBuf::from("/test/warden.toml"),
        },
        sandbox: Default::default(),
        env_references: Vec::new(),
        lifecycle: Lifecycle {
            start: StartMode::Eager,
            idle_stop: None,
        },
    }
}

/// A host over servers named with the delay of their calls; every call allowed.
async fn start_host(servers: &[(&str, Duration)]) -> (Host, BTreeMap<String, Arc<Seen>>) {
    let seen: BTreeMap<String, Arc<Seen>> = servers
        .iter()
        .map(|(name, _)| ((*name).to_owned(), Arc::new(Seen::default())))
        .collect();
    let dialer = Dialer(
        servers
            .iter()
            .map(|(name, delay)| ((*name).to_owned(), (*delay, Arc::clone(&seen[*name]))))
            .collect(),
    );
    let config: warden_policy::PolicyConfig = serde_json::from_value(json!({
        "rules": [{"tools": "*", "effect": "allow", "even_if_tainted": true,
                   "even_if_private": true}]
    }))
    .unwrap();
    let host = Host::builder(Arc::new(warden_policy::Policy::compile(&config).unwrap()))
        .review(Arc::new(NoReview))
        .launcher(Arc::new(warden_mcp::DirectLauncher::from_env()))
        .options(ConnectOptions {
            relay: Some(Arc::new(dialer)),
            ..ConnectOptions::default()
        })
        .connect(servers.iter().map(|(name, _)| spec(name)).collect())
        .await;
    assert!(host.servers().iter().all(|entry| entry.ready()));
    (host, seen)
}

/// Calls `tools` in its first step, then answers; each reply takes 50 ms.
struct Scripted {
    tools: Vec<String>,
    steps: Mutex<usize>,
}

impl Model for Scripted {
    fn describe(&self) -> String {
        "scripted".into()
    }

    fn complete<'a>(
        &'a self,
        _request: ModelRequest<'a>,
        _sink: &'a mut dyn TextSink,
    ) -> BoxFuture<'a, Result<ModelReply, ModelError>> {
        let step = {
            let mut steps = self.steps.lock().unwrap();
            *steps += 1;
            *steps
        };
        let tool_calls: Vec<ToolCall> = if step == 1 {
            self.tools
                .iter()
                .enumerate()
                .map(|(n, tool)| ToolCall {
                    id: format!("call-{n}"),
                    name: tool.clone(),
                    arguments: Ok(json!({})),
                })
                .collect()
        } else {
            Vec::new()
        };
        let stop = if tool_calls.is_empty() {
            StopReason::EndTurn
        } else {
            StopReason::ToolUse
        };
        Box::pin(async move {
            // A model takes a moment to answer.
            tokio::time::sleep(Duration::from_millis(50)).await;
            Ok(ModelReply {
                text: "done".into(),
                tool_calls,
                stop,
                input_tokens: 0,
                output_tokens: 0,
            })
        })
    }
}

struct Quiet;

impl Observer for Quiet {
    fn event(&mut self, _event: &Event) {}
}

fn scripted(tools: &[&str]) -> Scripted {
    Scripted {
        tools: tools.iter().map(|t| (*t).to_owned()).collect(),
        steps: Mutex::new(0),
    }
}

/// Two servers answer one step's calls in the other order than they were made: `slow`'s
/// call first, `fast`'s second. The results enter the context as the calls were made, so
/// the sources later decisions name (the latest three) do not depend on who answered
/// first (the simulation saw the same calls decided with other reasons under other
/// latencies: host seed 77).
#[tokio::test(start_paused = true)]
async fn results_enter_the_context_in_the_order_of_the_calls() {
    let (mut host, seen) = start_host(&[
        ("slow", Duration::from_millis(300)),
        ("fast", Duration::from_millis(10)),
    ])
    .await;
    let model = scripted(&["slow__work", "fast__work"]);
    let session = host.session("run");
    let dir = tempfile::tempdir().unwrap();
    let mut agent = Agent::new(
        &mut host,
        session,
        &model,
        &AllowAll,
        AgentSettings::new(dir.path().to_path_buf()),
    );
    let answer = agent.ask("work", &mut Quiet).await.unwrap();
    assert_eq!(answer, "done");
    // Both ran; `fast` answered first.
    assert_eq!(seen["slow"].finished.load(Ordering::SeqCst), 1);
    assert_eq!(seen["fast"].finished.load(Ordering::SeqCst), 1);
    let provenance = agent.session().provenance();
    let order: Vec<&str> = provenance
        .sources()
        .iter()
        .map(|source| &*source.tool)
        .collect();
    assert_eq!(order, ["slow__work", "fast__work"]);
}

/// A call that would move to the background after 2 s, in a turn that runs out after 1 s:
/// the turn's end drops the step, and with it the call, which is cancelled (the server's
/// call is dropped) rather than left running with nobody to give its result to (host
/// seed 91: its cancellation never reached the server, and it ran to its end after the
/// session had moved on).
#[tokio::test(start_paused = true)]
async fn a_call_its_turn_leaves_behind_is_cancelled_not_left_running() {
    let (mut host, seen) = start_host(&[("slow", Duration::from_secs(10))]).await;
    let model = scripted(&["slow__work"]);
    let session = host.session("run");
    let dir = tempfile::tempdir().unwrap();
    let mut settings = AgentSettings::new(dir.path().to_path_buf());
    settings.background_after = Some(Duration::from_secs(2));
    settings.turn_timeout = Duration::from_secs(1);
    let mut agent = Agent::new(&mut host, session, &model, &AllowAll, settings);
    let answer = agent.ask("work", &mut Quiet).await;
    assert!(
        matches!(answer, Err(AgentError::Timeout { .. })),
        "{answer:?}"
    );
    // The agent stays, as a chat session's does; the call must not go on.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let slow = &seen["slow"];
    assert_eq!(
        slow.dropped.load(Ordering::SeqCst),
        1,
        "the call was not cancelled"
    );
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(slow.finished.load(Ordering::SeqCst), 0, "the call ran on");
    drop(agent);

    // Positive control: past its background threshold within the turn, a call goes on in
    // the background and finishes.
    let (mut host, seen) = start_host(&[("slow", Duration::from_secs(3))]).await;
    let model = scripted(&["slow__work"]);
    let session = host.session("run");
    let mut settings = AgentSettings::new(dir.path().to_path_buf());
    settings.background_after = Some(Duration::from_secs(1));
    settings.turn_timeout = Duration::from_secs(60);
    let mut agent = Agent::new(&mut host, session, &model, &AllowAll, settings);
    assert_eq!(agent.ask("work", &mut Quiet).await.unwrap(), "done");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(seen["slow"].finished.load(Ordering::SeqCst), 1);
    assert_eq!(seen["slow"].dropped.load(Ordering::SeqCst), 0);
}

/// A call moved to the background is the agent's: `/clear` (forgetting the conversation
/// its result was promised to) and the agent going away each cancel it, rather than leave
/// it running with nobody to give its result to. Both rely on the call's task aborting
/// when dropped. Control: left alone, the same call finishes in the background.
#[tokio::test(start_paused = true)]
async fn a_background_call_is_cancelled_by_clear_and_by_the_agent_going_away() {
    let dir = tempfile::tempdir().unwrap();
    let settings = || {
        let mut settings = AgentSettings::new(dir.path().to_path_buf());
        settings.background_after = Some(Duration::from_secs(1));
        settings.turn_timeout = Duration::from_secs(60);
        settings
    };
    for ending in ["clear", "drop", "none"] {
        let (mut host, seen) = start_host(&[("slow", Duration::from_secs(3))]).await;
        let model = scripted(&["slow__work"]);
        let session = host.session("run");
        let mut agent = Agent::new(&mut host, session, &model, &AllowAll, settings());
        assert_eq!(agent.ask("work", &mut Quiet).await.unwrap(), "done");
        // The call is in the background now, still running.
        assert_eq!(seen["slow"].finished.load(Ordering::SeqCst), 0);
        match ending {
            "clear" => agent.clear(),
            "drop" => drop(agent),
            _ => {}
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
        let slow = &seen["slow"];
        if ending == "none" {
            assert_eq!(
                slow.finished.load(Ordering::SeqCst),
                1,
                "the control did not finish"
            );
            assert_eq!(slow.dropped.load(Ordering::SeqCst), 0);
        } else {
            assert_eq!(
                slow.dropped.load(Ordering::SeqCst),
                1,
                "{ending}: the background call was not cancelled"
            );
            assert_eq!(
                slow.finished.load(Ordering::SeqCst),
                0,
                "{ending}: it ran on"
            );
        }
    }
}
