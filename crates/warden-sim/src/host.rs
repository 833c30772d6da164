//! The host under the simulator: Warden's own agent loop over the host core, with a
//! scripted model and approver, scripted faulty upstreams, and storms of `list_changed`
//! (issue 18).
//!
//! What is real: the agent loop ([`warden_agent::Agent`]: turn boundaries, the exposure of
//! tools to the model, the policy's decisions and approvals, concurrent calls per step,
//! background calls, the turn timeout), the host core under it (catalogue refreshes at
//! turn boundaries, sessions, provenance, the audit log in a real state store) and the stdio
//! MCP client under that (through the same relay seam and in-memory pipes as the gateway
//! world, [`crate::upstream`]). What is scripted: the model (it records the tools each
//! request offers and makes calls by its plan, some to tools that come and go), the
//! approver (yes or no by the call's number), and the upstreams.
//!
//! Properties checked in every run:
//! 1. the tools offered to the model at each step are, per upstream, exactly a list it
//!    served (the latest, unless the read of a later one was cut short and could not be
//!    repeated), in the stable order (servers by name, each server's tools in the order it
//!    lists them); an upstream's `list_changed` is read again (a read not cancelled) by the
//!    second step after it at the latest, so no change is lost; a call of a tool offered
//!    in its step is never refused as unknown;
//! 2. the audit log holds exactly one row per call the model made (refusals included),
//!    none for a call never made, each with the outcome the model was told (`ok`,
//!    `tool_error`, `denied`, `not_approved`, `failed`) and `executed` exactly when its
//!    upstream received it;
//! 3. a call still unanswered at its call timeout, or when its turn timed out (a call in
//!    the background outlives its turn), gets `notifications/cancelled` upstream;
//! 4. a decision never depends on timing: the same plan run with other latencies and other
//!    moments of the `list_changed` storms decides every call that is the same in both runs
//!    the same way (decision, reasons, who approved), whenever the same results reached the
//!    model at the same steps in both (no turn timed out, no call went to the background);
//! 5. nothing leaks: after the agent is dropped and the host shut down, every upstream
//!    connection is closed and no task is left on the runtime;
//! 6. the same seed gives the same trace.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::time::Instant;
use warden_agent::conversation::Block;
use warden_agent::model::{
    Model, ModelError, ModelReply, ModelRequest, StopReason, TextSink, ToolCall,
};
use warden_agent::{
    Agent, AgentSettings, ApprovalAnswer, ApprovalRequest, Approver, Event, Observer,
};
use warden_mcp::http::reconnect::SeededRng;

use crate::upstream::{
    Script, UpFault, UpPlan, Upstream, all_received, canonical, check_cancelled, check_no_leaks,
    lock, store_dir, token,
};
use crate::{Log, driver, pick};

/// Calls the model makes at most in one run.
const MAX_CALLS: usize = 24;

#[derive(Debug, Clone)]
struct PromptPlan {
    idle_before: Duration,
    /// Per step, the calls the model makes (`true`: a tool other than `echo`, when its
    /// upstream offers one); an empty step, or the end of the list, is the final answer.
    steps: Vec<Vec<bool>>,
}

#[derive(Debug, Clone)]
struct Plan {
    upstreams: Vec<UpPlan>,
    /// The upstream and script of call number `n`.
    scripts: Vec<(usize, Script)>,
    prompts: Vec<PromptPlan>,
    turn_timeout: Duration,
    background_after: Option<Duration>,
    /// How long the model takes to answer.
    think: Duration,
}

fn plan(seed: u64, variant: u64) -> Plan {
    let mut rng = SeededRng::new(seed ^ 0x686f_7374_776f_726c);
    // What the timing variant changes: latencies below the timeout, and storm moments.
    let mut timing = SeededRng::new(seed ^ 0x7469_6d69_6e67 ^ variant.wrapping_mul(0x9e37_79b9));
    let upstreams: Vec<UpPlan> = (0..1 + rng.below(3))
        .map(|_| UpPlan {
            remote: false,
            call_timeout: Duration::from_millis(1_000 + rng.below(9_000)),
            honours_cancel: rng.below(2) == 0,
            storms: (0..rng.below(8))
                .map(|_| {
                    let count = 1 + rng.below(4) as u32;
                    (Duration::from_millis(timing.below(90_000)), count)
                })
                .collect(),
        })
        .collect();
    let faults = [
        (10, UpFault::Answer),
        (1, UpFault::ToolError),
        (1, UpFault::RpcError),
        (1, UpFault::Late),
        (1, UpFault::Stall),
        (2, UpFault::AnswerTwice),
        (2, UpFault::StaleId),
        (1, UpFault::Drop),
        (3, UpFault::ListChangedFirst),
    ];
    let scripts = (0..MAX_CALLS)
        .map(|number| {
            let upstream = rng.below(upstreams.len() as u64) as usize;
            let timeout = upstreams[upstream].call_timeout;
            let fault = pick(&mut rng, &faults);
            let late = Duration::from_millis(1 + rng.below(3_000));
            let latency = match fault {
                UpFault::Late => timeout + late,
                _ => Duration::from_millis(timing.below(timeout.as_millis() as u64 - 1)),
            };
            (
                upstream,
                Script {
                    number,
                    fault,
                    latency,
                },
            )
        })
        .collect();
    let prompts = (0..1 + rng.below(3))
        .map(|_| PromptPlan {
            idle_before: Duration::from_millis(rng.below(20_000)),
            steps: (0..1 + rng.below(4))
                .map(|step| {
                    let calls = if step == 0 {
                        1 + rng.below(3)
                    } else {
                        rng.below(4)
                    };
                    (0..calls).map(|_| rng.below(3) == 0).collect()
                })
                .collect(),
        })
        .collect();
    Plan {
        upstreams,
        scripts,
        prompts,
        turn_timeout: Duration::from_millis(5_000 + rng.below(60_000)),
        background_after: (rng.below(3) == 0)
            .then(|| Duration::from_millis(300 + rng.below(4_000))),
        think: Duration::from_millis(20 + rng.below(500)),
    }
}

/// What a host run found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The seed.
    pub seed: u64,
    /// Model requests (steps).
    pub steps: usize,
    /// Calls the model made.
    pub calls: usize,
    /// Calls the upstreams received.
    pub received: usize,
    /// Calls asked about (the approver answered).
    pub asked: usize,
    /// Prompts that hit the turn timeout.
    pub timed_out: usize,
    /// Calls moved to the background.
    pub background: usize,
    /// Cancellations the upstreams received.
    pub cancellations: usize,
    /// `list_changed` the upstreams sent.
    pub list_changes: usize,
    /// Steps whose offered tools differed from the step before.
    pub catalogue_changes: usize,
    /// Calls whose decision was compared with the other timing's.
    pub compared: usize,
    /// Audit rows written.
    pub audit_rows: usize,
    /// Property violations; empty when the run passed.
    pub violations: Vec<String>,
    /// A digest of the trace.
    pub digest: u64,
}

/// One request the model got.
#[derive(Debug, Clone)]
struct Offered {
    at: Duration,
    prompt: usize,
    tools: Vec<String>,
}

/// One call the model made.
#[derive(Debug, Clone)]
struct Made {
    number: usize,
    /// When its step began.
    at: Duration,
    tool: String,
    prompt: usize,
    /// The tools offered in the step that made it.
    offered: bool,
}

/// What the model was told of a call.
#[derive(Debug, Clone)]
struct Told {
    content: String,
    is_error: bool,
    background: bool,
}

/// The scripted model: makes the plan's calls and records what it was offered and told.
struct SimModel {
    plan: Plan,
    log: Arc<Log>,
    state: Mutex<ModelState>,
}

#[derive(Default)]
struct ModelState {
    prompt: usize,
    step: usize,
    next: usize,
    offered: Vec<Offered>,
    made: Vec<Made>,
    told: BTreeMap<usize, Told>,
    finished_background: BTreeMap<usize, String>,
}

fn number_of(id: &str) -> Option<usize> {
    id.strip_prefix("call-")?.parse().ok()
}

impl SimModel {
    fn begin(&self, prompt: usize) {
        let mut state = lock(&self.state);
        state.prompt = prompt;
        state.step = 0;
    }

    fn reply(&self, request: &ModelRequest<'_>, at: Duration) -> ModelReply {
        let mut state = lock(&self.state);
        let tools: Vec<String> = request
            .tools
            .iter()
            .map(|t| t.name.clone())
            .filter(|name| name != "warden__search_tools")
            .collect();
        let prompt = state.prompt;
        let step = state.step;
        state.step += 1;
        // What it was told of earlier calls (each call's result once, by its id).
        for message in request.messages {
            for block in &message.blocks {
                match block {
                    Block::ToolResult {
                        id,
                        content,
                        is_error,
                    } => {
                        if let Some(number) = number_of(id)
                            && !state.told.contains_key(&number)
                        {
                            let background = content.contains("in the background");
                            // (A background notice says how long the call ran, in wall time.)
                            let shown: String = if background {
                                "in the background".into()
                            } else {
                                content.chars().take(100).collect()
                            };
                            self.log.event(format!(
                                "model: told of call {number}{}: {shown}",
                                if *is_error { " (error)" } else { "" }
                            ));
                            state.told.insert(
                                number,
                                Told {
                                    content: content.clone(),
                                    is_error: *is_error,
                                    background,
                                },
                            );
                        }
                    }
                    Block::Text { text } if text.starts_with("[The background call call-") => {
                        let number = text
                            .trim_start_matches("[The background call ")
                            .split(' ')
                            .next()
                            .and_then(number_of);
                        if let Some(number) = number {
                            state
                                .finished_background
                                .entry(number)
                                .or_insert_with(|| text.clone());
                        }
                    }
                    _ => {}
                }
            }
        }
        self.log.event(format!(
            "model: prompt {prompt} step {step} offered {}",
            tools.join(",")
        ));
        state.offered.push(Offered {
            at,
            prompt,
            tools: tools.clone(),
        });
        let wanted = self
            .plan
            .prompts
            .get(prompt)
            .and_then(|p| p.steps.get(step))
            .cloned()
            .unwrap_or_default();
        let mut calls = Vec::new();
        for aux in wanted {
            let number = state.next;
            let Some((upstream, _)) = self.plan.scripts.get(number) else {
                break;
            };
            state.next += 1;
            let prefix = format!("up{upstream}__");
            let other = tools
                .iter()
                .find(|t| t.starts_with(&prefix) && !t.ends_with("__echo"));
            let tool = match other {
                Some(name) if aux => name.clone(),
                _ => format!("{prefix}echo"),
            };
            self.log.event(format!("model: call {number} of {tool}"));
            state.made.push(Made {
                number,
                at,
                tool: tool.clone(),
                prompt,
                offered: tools.contains(&tool),
            });
            calls.push(ToolCall {
                id: format!("call-{number}"),
                name: tool,
                arguments: Ok(json!({"text": token(number)})),
            });
        }
        let stop = if calls.is_empty() {
            StopReason::EndTurn
        } else {
            StopReason::ToolUse
        };
        ModelReply {
            text: if calls.is_empty() {
                "done".into()
            } else {
                String::new()
            },
            tool_calls: calls,
            stop,
            input_tokens: 0,
            output_tokens: 0,
        }
    }
}

impl Model for SimModel {
    fn describe(&self) -> String {
        "sim".into()
    }

    fn complete<'a>(
        &'a self,
        request: ModelRequest<'a>,
        _sink: &'a mut dyn TextSink,
    ) -> BoxFuture<'a, Result<ModelReply, ModelError>> {
        // A model takes time to answer: a turn may run out meanwhile (the request is then
        // dropped, and the model read nothing).
        let asked_at = self.log.now();
        Box::pin(async move {
            tokio::time::sleep(self.plan.think).await;
            Ok(self.reply(&request, asked_at))
        })
    }
}

/// Says yes or no by the call's number (no to every fourth), and records what it was asked.
struct SimApprover {
    asked: Mutex<BTreeMap<usize, bool>>,
}

impl Approver for SimApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        let number = request
            .arguments
            .get("text")
            .and_then(Value::as_str)
            .and_then(|t| t.strip_prefix("tok-"))
            .and_then(|t| t.strip_suffix("-end"))
            .and_then(|t| t.parse::<usize>().ok());
        let yes = number.is_some_and(|n| n % 4 != 0);
        if let Some(number) = number {
            lock(&self.asked).insert(number, yes);
        }
        Box::pin(async move {
            if yes {
                ApprovalAnswer::Once
            } else {
                ApprovalAnswer::No
            }
        })
    }

    fn name(&self) -> &'static str {
        "sim"
    }
}

/// Records which calls the agent moved to the background (whether or not the model was
/// told before its turn ran out).
#[derive(Default)]
struct Watcher {
    background: std::collections::BTreeSet<usize>,
}

impl Observer for Watcher {
    fn event(&mut self, event: &Event) {
        if let Event::ToolCall(call) = event
            && call.background
            && let Some(number) = number_of(&call.id)
        {
            self.background.insert(number);
        }
    }
}

/// Each call as the audit log has it, for comparing timings: its tool, its outcome, and
/// its decision (with reasons and who approved).
type Decided = BTreeMap<usize, (String, String, String)>;

/// Runs one seed of the host world: twice as planned (the digests must match) and once
/// with other timings (the decisions must match where comparable).
pub fn run(seed: u64) -> Report {
    let (first, decided) = run_once(seed, 0);
    let (second, _) = run_once(seed, 0);
    let (other, other_decided) = run_once(seed, 1);
    let mut report = first;
    driver::same_digest(
        "host",
        seed,
        report.digest,
        second.digest,
        &mut report.violations,
    );
    for violation in &other.violations {
        report
            .violations
            .push(format!("(other timing) {violation}"));
    }
    // Compared while both runs made the same calls with the same outcomes so far (the
    // model's context, and so every decision's input, is then the same in both).
    if let (Some(decided), Some(other_decided)) = (decided, other_decided) {
        for (number, (tool, outcome, decision)) in &decided {
            let Some((other_tool, other_outcome, other_decision)) = other_decided.get(number)
            else {
                break;
            };
            if tool != other_tool {
                break;
            }
            report.compared += 1;
            if decision != other_decision {
                report.violations.push(format!(
                    "call {number} of {tool} was decided `{decision}` with one timing and \
                     `{other_decision}` with another"
                ));
            }
            if outcome != other_outcome {
                break;
            }
        }
    }
    report
}

/// The trace of one host seed (as planned: `variant` 0; 1 is the other timing).
pub fn trace(seed: u64, variant: u64) -> Vec<String> {
    let log = Arc::new(Log::default());
    let _ = simulate(seed, variant, log.clone());
    lock(&log.trace).clone()
}

fn run_once(seed: u64, variant: u64) -> (Report, Option<Decided>) {
    let log = Arc::new(Log::default());
    let (mut report, decided) = simulate(seed, variant, log.clone());
    report.digest = driver::digest(&canonical(&lock(&log.trace)));
    (report, decided)
}

fn simulate(seed: u64, variant: u64, log: Arc<Log>) -> (Report, Option<Decided>) {
    let plan = plan(seed, variant);
    let dir = store_dir(seed);
    let outcome = driver::execute(&log, world(seed, plan, log.clone(), dir.clone()));
    let _ = std::fs::remove_dir_all(&dir);
    let (mut report, decided) = outcome.unwrap_or((
        Report {
            seed,
            ..Report::default()
        },
        None,
    ));
    report.violations = lock(&log.violations).clone();
    (report, decided)
}

async fn world(seed: u64, plan: Plan, log: Arc<Log>, dir: PathBuf) -> (Report, Option<Decided>) {
    let start = Instant::now();
    *lock(&log.start) = Some(start);
    log.event(format!(
        "host seed {seed}: {} upstream(s), {} prompt(s), turn timeout {:?}, background after {:?}",
        plan.upstreams.len(),
        plan.prompts.len(),
        plan.turn_timeout,
        plan.background_after
    ));
    let mut report = Report {
        seed,
        ..Report::default()
    };
    let upstreams: Vec<Arc<Upstream>> = plan
        .upstreams
        .iter()
        .enumerate()
        .map(|(index, up)| {
            let calls = plan
                .scripts
                .iter()
                .filter(|(upstream, _)| *upstream == index)
                .map(|(_, script)| (script.token(), script.clone()))
                .collect();
            Arc::new(Upstream::new(index, up.clone(), calls, log.clone()))
        })
        .collect();
    let store_path = dir.join("state.db");
    let store = match warden_store::Store::open(&store_path) {
        Ok(store) => store,
        Err(error) => {
            log.violation(format!("no state store: {error}"));
            return (report, None);
        }
    };
    // up0's calls are allowed whatever the context; every `aux1` is denied; the rest is
    // the default (asked about: the servers are untrusted), answered by the approver.
    let policy = crate::upstream::policy(json!({"rules": [
        {"tools": "up0__*", "effect": "allow", "even_if_tainted": true, "even_if_private": true},
        {"tools": "up*__aux1", "effect": "deny"},
    ]}));
    let mut host = crate::upstream::host(&upstreams, start, store, policy, &log, None).await;
    let model = SimModel {
        plan: plan.clone(),
        log: log.clone(),
        state: Mutex::new(ModelState::default()),
    };
    let approver = SimApprover {
        asked: Mutex::new(BTreeMap::new()),
    };
    let mut settings = AgentSettings::new(dir.join("session"));
    settings.turn_timeout = plan.turn_timeout;
    settings.background_after = plan.background_after;
    settings.max_turns = 8;
    // (prompt start, whether it timed out)
    let mut prompts: Vec<(Duration, bool)> = Vec::new();
    let mut observer = Watcher::default();
    {
        let session = host.session("run");
        let mut agent = Agent::new(&mut host, session, &model, &approver, settings);
        for (index, prompt) in plan.prompts.iter().enumerate() {
            tokio::time::sleep(prompt.idle_before).await;
            model.begin(index);
            let began = start.elapsed();
            let answer = agent.ask("Use the tools.", &mut observer).await;
            let timed_out = matches!(answer, Err(warden_agent::AgentError::Timeout { .. }));
            log.event(format!(
                "prompt {index} ends: {}",
                match &answer {
                    Ok(text) => format!("answer {text:?}"),
                    Err(error) => format!("error {error}"),
                }
            ));
            prompts.push((began, timed_out));
        }
    }
    log.event("agent dropped; shutting down".into());
    host.shutdown().await;
    check_no_leaks(&upstreams, &log).await;

    let state = std::mem::take(&mut *lock(&model.state));
    let asked = std::mem::take(&mut *lock(&approver.asked));
    let decided = check(
        &plan,
        &upstreams,
        &state,
        &observer.background,
        &asked,
        &prompts,
        &store_path,
        &log,
        &mut report,
    );
    log.event(format!(
        "end: {} steps, {} calls, {} received, {} asked, {} timed out, {} background, \
         {} cancellations, {} list changes, {} catalogue changes, {} audit rows",
        report.steps,
        report.calls,
        report.received,
        report.asked,
        report.timed_out,
        report.background,
        report.cancellations,
        report.list_changes,
        report.catalogue_changes,
        report.audit_rows
    ));
    (report, decided)
}

/// Whether `offered` is what the host may offer at `at`: servers in the order of their
/// names (`up0` < `up1` < `up2`), each with exactly one list it served by then, in the
/// server's own order (the latest normally; an earlier one when the read of a later one was
/// cut short and could not be repeated: the connection dropped). That the latest is read in
/// time is the "no change is lost" check.
fn offered_as_served(upstreams: &[Arc<Upstream>], offered: &[String], at: Duration) -> bool {
    let mut rest = offered;
    for upstream in upstreams {
        let prefix = format!("{}__", upstream.name());
        let count = rest.iter().take_while(|t| t.starts_with(&prefix)).count();
        let (mine, after) = rest.split_at(count);
        rest = after;
        let lists = lock(&upstream.lists);
        let served = lists.iter().filter(|served| served.at <= at);
        let matches = served.clone().any(|served| {
            served.names.len() == mine.len()
                && served
                    .names
                    .iter()
                    .zip(mine)
                    .all(|(name, tool)| tool.strip_prefix(&prefix) == Some(name.as_str()))
        });
        let never_listed = mine.is_empty() && served.count() == 0;
        if !(matches || never_listed) {
            return false;
        }
    }
    rest.is_empty()
}

#[allow(clippy::too_many_arguments)]
fn check(
    plan: &Plan,
    upstreams: &[Arc<Upstream>],
    state: &ModelState,
    moved: &std::collections::BTreeSet<usize>,
    asked: &BTreeMap<usize, bool>,
    prompts: &[(Duration, bool)],
    store_path: &std::path::Path,
    log: &Log,
    report: &mut Report,
) -> Option<Decided> {
    let received = all_received(upstreams);
    report.steps = state.offered.len();
    report.calls = state.made.len();
    report.received = received.len();
    report.asked = asked.len();
    report.timed_out = prompts.iter().filter(|(_, t)| *t).count();
    let mut background: std::collections::BTreeSet<usize> = moved.clone();
    background.extend(
        state
            .told
            .iter()
            .filter(|(_, t)| t.background)
            .map(|(n, _)| *n),
    );
    report.background = background.len();
    report.cancellations = received.iter().filter(|r| r.cancelled.is_some()).count();
    report.list_changes = upstreams.iter().map(|u| lock(&u.announced).len()).sum();

    // 1: what the model was offered, step by step.
    let mut before: Option<&Vec<String>> = None;
    for offered in &state.offered {
        if !offered_as_served(upstreams, &offered.tools, offered.at) {
            log.violation(format!(
                "prompt {} at {:?}: the model was offered {:?}, not the servers' lists in \
                 their order",
                offered.prompt, offered.at, offered.tools
            ));
        }
        if before.is_some_and(|b| *b != offered.tools) {
            report.catalogue_changes += 1;
        }
        before = Some(&offered.tools);
    }
    // No change is lost: a list announced changed is read again by the second step after
    // the announcement at the latest (the first may have been refreshing already when it
    // came: the refresh reads the servers marked when it begins).
    for upstream in upstreams {
        let announced = lock(&upstream.announced).clone();
        let lists = lock(&upstream.lists).clone();
        for at in &announced {
            let Some(second) = state.offered.iter().filter(|o| o.at > *at).nth(1) else {
                continue;
            };
            let dropped = lock(&upstream.received)
                .iter()
                .any(|r| r.dropped.is_some_and(|d| d <= second.at));
            // Read: served after the announcement and not cancelled (a refresh dropped
            // mid-read cancels its request: the host never had that list).
            let read = lists
                .iter()
                .any(|served| !served.cancelled && served.at >= *at && served.at <= second.at);
            if !read && !dropped {
                log.violation(format!(
                    "{} announced list_changed at {at:?}, and the step at {:?} was still \
                     offered its tools without reading them again",
                    upstream.name(),
                    second.at
                ));
            }
        }
    }

    // 3: cancellations.
    let made: HashMap<String, &Made> = state.made.iter().map(|m| (token(m.number), m)).collect();
    check_cancelled(
        &received,
        |r| {
            let call = made.get(&r.token)?;
            let (upstream, _) = plan.scripts.get(call.number)?;
            let mut due = r.at + plan.upstreams[*upstream].call_timeout;
            let background = state.told.get(&call.number).is_some_and(|t| t.background)
                || moved.contains(&call.number);
            if let Some((began, true)) = prompts.get(call.prompt)
                && !background
            {
                due = due.min((*began + plan.turn_timeout).max(r.at));
            }
            Some(due)
        },
        log,
    );

    // 2: the audit log.
    let (count, mut by_number) = crate::driver::audit_rows_by_call(
        store_path,
        |arguments| (0..MAX_CALLS).find(|n| arguments.contains(&token(*n))),
        log,
    )?;
    report.audit_rows = count;
    let mut decided = Decided::new();
    for call in &state.made {
        let rows = by_number.remove(&call.number).unwrap_or_default();
        let token = token(call.number);
        let reached = received.iter().any(|r| r.token == token);
        let [row] = rows.as_slice() else {
            log.violation(format!(
                "call {} of {} has {} audit rows",
                call.number,
                call.tool,
                rows.len()
            ));
            continue;
        };
        log.event(format!(
            "call {}: audit {} (executed {}, decision {:?})",
            call.number, row.outcome, row.executed, row.decision
        ));
        decided.insert(
            call.number,
            (
                call.tool.clone(),
                row.outcome.clone(),
                format!("{:?} {} {:?}", row.decision, row.reasons, row.approved_by),
            ),
        );
        if call.offered && row.outcome == "invalid_arguments" {
            log.violation(format!(
                "call {} of {}, offered in its step, was refused as invalid: {:?}",
                call.number, call.tool, row.error
            ));
        }
        // Written to a connection that its upstream dropped in that step (a later call of a
        // server's lane is sent when the one before it ends): sent, never read.
        let unread = row.executed
            && !reached
            && plan.scripts.get(call.number).is_some_and(|(upstream, _)| {
                lock(&upstreams[*upstream].received)
                    .iter()
                    .any(|r| r.dropped.is_some_and(|d| d >= call.at))
            });
        // A call cut short while it was being sent is recorded as maybe executed (the safe
        // side); one whose result the model was told must be recorded as it went.
        let cut_short = state
            .told
            .get(&call.number)
            .is_none_or(|told| told.background);
        if reached != row.executed && !unread && !(cut_short && row.executed) {
            log.violation(format!(
                "call {}: its upstream {} it, but its audit row says executed {}",
                call.number,
                if reached {
                    "received"
                } else {
                    "never received"
                },
                row.executed
            ));
        }
        if let Some(&yes) = asked.get(&call.number)
            && !yes
            && row.outcome != "not_approved"
        {
            log.violation(format!(
                "call {} was not approved, but its audit row says `{}`",
                call.number, row.outcome
            ));
        }
        if row.decision.as_deref() == Some("deny") && row.outcome != "denied" {
            log.violation(format!(
                "call {} was denied, but its audit row says `{}`",
                call.number, row.outcome
            ));
        }
        let Some(told) = state.told.get(&call.number) else {
            // Its turn ended before the model heard of it: cut short, unless its upstream
            // had answered by then.
            let answered = received
                .iter()
                .any(|r| r.token == token && r.answered.is_some());
            if reached && !answered && row.outcome != "failed" {
                log.violation(format!(
                    "call {} was cut short, but its audit row says `{}`",
                    call.number, row.outcome
                ));
            }
            continue;
        };
        if told.background || moved.contains(&call.number) {
            continue;
        }
        let echoed = told.content.contains(&token);
        let expected = match (echoed, told.is_error) {
            (true, false) => Some("ok"),
            (true, true) => Some("tool_error"),
            (false, false) => None,
            (false, true) => None,
        };
        if let Some(expected) = expected
            && row.outcome != expected
        {
            log.violation(format!(
                "call {}: the model was told `{expected}`, the audit row says `{}`",
                call.number, row.outcome
            ));
        }
        if expected.is_none() && (row.outcome == "ok" || row.outcome == "tool_error") {
            log.violation(format!(
                "call {}: the audit row says `{}`, but the model was told an error: {}",
                call.number, row.outcome, told.content
            ));
        }
    }
    for (number, rows) in by_number {
        log.violation(format!(
            "{} audit row(s) for call {number}, which the model never made",
            rows.len()
        ));
    }
    // Decisions are comparable across timings only when the same results reached the model
    // at the same steps.
    let comparable = report.timed_out == 0 && report.background == 0;
    comparable.then_some(decided)
}
