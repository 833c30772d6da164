//! `warden chat`: an interactive session for a person. Answers stream as they come; every
//! tool call gets a line (what, where, the decision) and a spinner while it runs; calls the
//! policy asks about are put to the person; `/mcp`, `/tools`, `/audit`, `/clear` and
//! `/exit` inspect and steer the session.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use warden_agent::{Agent, Approver, DenyAll, Event, Observer};
use warden_host::{Host, ServerStatus};
use warden_store::AuditFilter;

use crate::cli::{ChatArgs, GlobalArgs};
use crate::exit::{Code, Failure};
use crate::render;
use crate::session::{self, Audited, TerminalApprover};

/// Longest line read at the prompt.
const MAX_LINE_BYTES: u64 = 1 << 20;
/// Audit rows `/audit` shows.
const AUDIT_ROWS: usize = 15;

/// Runs `warden chat`.
pub async fn run(global: &GlobalArgs, args: ChatArgs) -> Result<Code, Failure> {
    let (config, env) = super::load_config(global)?;
    let policy = super::compile_policy(&config.policy)?;
    let model_settings = session::model_settings(&config, &args.model)?;
    let model = warden_agent::model::build(&model_settings, &|name| std::env::var(name).ok())
        .map_err(Failure::usage)?;
    let (session_id, dir) = session::new_session(&env)?;
    let settings = session::agent_settings(&config, dir);
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let approver: Box<dyn Approver> = if interactive {
        Box::new(TerminalApprover)
    } else {
        Box::new(DenyAll)
    };
    // Elicitation: a form or URL prompt at the terminal; nobody to ask without one.
    let elicitor: std::sync::Arc<dyn warden_mcp::Elicitor> = if interactive {
        std::sync::Arc::new(crate::elicit::TerminalElicitor::default())
    } else {
        std::sync::Arc::new(warden_mcp::DeclineAll)
    };
    let mut host = super::connect_session(config.servers, policy, &env, elicitor).await?;
    let screen = Screen::new(interactive);
    let mut observer = Audited::new(screen, super::open_store(&env).ok(), "chat");
    let mut agent = Agent::new(&mut host, model.as_ref(), approver.as_ref(), settings);
    let history = History::start(&mut observer, &session_id, &model.describe());
    banner(agent.host(), &agent, model.describe().as_str());
    let mut history = history;
    loop {
        eprint!("\n› ");
        let _ = std::io::stderr().flush();
        let line = tokio::select! {
            line = crate::terminal::read_line(MAX_LINE_BYTES) => line,
            () = crate::signals::interrupted() => None,
        };
        let Some(line) = line else { break };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(command) = line.strip_prefix('/') {
            match command.split_whitespace().next().unwrap_or("") {
                "exit" | "quit" => break,
                "clear" => {
                    agent.clear();
                    eprintln!("(conversation cleared; what the model saw before is forgotten)");
                }
                "mcp" => eprint!("{}", mcp_report(agent.host(), &observer.inner().latencies)),
                "tools" => eprint!("{}", tools_report(agent.host(), &agent)),
                "audit" => eprint!("{}", audit_report(observer.store())),
                _ => eprintln!("commands: /mcp /tools /audit /clear /exit"),
            }
            continue;
        }
        history.record(&mut observer, "user", &serde_json::json!({"text": line}));
        let result = tokio::select! {
            result = agent.ask(line, &mut observer) => Some(result),
            () = crate::signals::interrupted() => None,
        };
        match result {
            Some(Ok(answer)) => {
                observer.inner().end_line();
                history.record(
                    &mut observer,
                    "assistant",
                    &serde_json::json!({"text": answer}),
                );
            }
            Some(Err(error)) => {
                observer.inner().end_line();
                eprintln!("warden: {error}");
            }
            None => break,
        }
    }
    drop(agent);
    host.shutdown().await;
    eprintln!();
    Ok(Code::Ok)
}

fn banner(host: &Host, agent: &Agent<'_>, model: &str) {
    let connected = host
        .servers()
        .iter()
        .filter(|s| matches!(s.status, ServerStatus::Connected { .. }))
        .count();
    let mode = match agent.session_event() {
        Event::Session {
            search_mode: true, ..
        } => " (the model searches them)",
        _ => "",
    };
    eprintln!(
        "warden chat: {model}; {connected} of {} servers connected, {} tools{mode}. /mcp /tools /audit /clear /exit",
        host.servers().len(),
        host.catalogue().tools().len()
    );
}

/// The session's history in the state store.
struct History {
    id: String,
    seq: i64,
}

impl History {
    fn start<O: Observer>(observer: &mut Audited<O>, id: &str, model: &str) -> History {
        if let Some(store) = observer.store() {
            let _ = store.create_session(id, "chat", model, crate::commands::audit::now_ms());
        }
        History {
            id: id.to_owned(),
            seq: 0,
        }
    }

    fn record<O: Observer>(
        &mut self,
        observer: &mut Audited<O>,
        role: &str,
        content: &serde_json::Value,
    ) {
        self.seq += 1;
        if let Some(store) = observer.store()
            && let Err(error) = store.append_session_message(
                &self.id,
                self.seq,
                crate::commands::audit::now_ms(),
                role,
                content,
            )
        {
            tracing::warn!("session history not saved: {error}");
        }
    }
}

/// What the person sees: streamed text, tool-call lines, a spinner while calls run.
struct Screen {
    interactive: bool,
    mid_line: bool,
    running: Arc<Mutex<Vec<(String, Instant)>>>,
    spinner: Option<tokio::task::JoinHandle<()>>,
    latencies: BTreeMap<String, Histogram<u64>>,
}

impl Screen {
    fn new(interactive: bool) -> Screen {
        Screen {
            interactive,
            mid_line: false,
            running: Arc::new(Mutex::new(Vec::new())),
            spinner: None,
            latencies: BTreeMap::new(),
        }
    }

    fn end_line(&mut self) {
        if self.mid_line {
            println!();
            self.mid_line = false;
        }
    }

    fn start_spinner(&mut self) {
        if !self.interactive || self.spinner.is_some() {
            return;
        }
        let running = Arc::clone(&self.running);
        self.spinner = Some(tokio::spawn(async move {
            const FRAMES: [char; 4] = ['|', '/', '-', '\\'];
            let mut frame = 0;
            loop {
                tokio::time::sleep(Duration::from_millis(120)).await;
                let line = match running.lock() {
                    Ok(running) => running.first().map(|(tool, started)| {
                        format!(
                            "{} running {tool} ({:.1} s)",
                            FRAMES[frame % 4],
                            started.elapsed().as_secs_f64()
                        )
                    }),
                    Err(_) => None,
                };
                if let Some(line) = line
                    && !crate::elicit::prompting()
                {
                    eprint!("\r\x1b[2K{line}");
                    let _ = std::io::stderr().flush();
                }
                frame += 1;
            }
        }));
    }

    fn stop_spinner(&mut self) {
        if let Some(task) = self.spinner.take() {
            task.abort();
            if self.interactive {
                eprint!("\r\x1b[2K");
            }
        }
    }
}

impl Observer for Screen {
    fn event(&mut self, event: &Event) {
        match event {
            Event::ToolCall(call) => {
                let idle = match self.running.lock() {
                    Ok(mut running) => {
                        if let Some(at) = running.iter().position(|(tool, _)| *tool == call.tool) {
                            running.remove(at);
                        }
                        running.is_empty()
                    }
                    Err(_) => true,
                };
                if idle {
                    self.stop_spinner();
                }
                if let Some(ms) = call.latency_ms
                    && !call.server.is_empty()
                {
                    if !self.latencies.contains_key(&call.server)
                        && let Ok(histogram) = Histogram::new_with_bounds(1, 3_600_000, 2)
                    {
                        self.latencies.insert(call.server.clone(), histogram);
                    }
                    if let Some(histogram) = self.latencies.get_mut(&call.server) {
                        let _ = histogram.record(ms.clamp(1, 3_600_000));
                    }
                }
                self.end_line();
                eprintln!("{}", render::tool_call_line(call));
            }
            Event::Notice { message, .. } => {
                self.end_line();
                eprintln!("warden: {message}");
            }
            Event::Assistant { .. } => self.end_line(),
            _ => {}
        }
    }

    fn text_delta(&mut self, delta: &str) {
        print!("{}", render::printable_text(delta));
        let _ = std::io::stdout().flush();
        self.mid_line = !delta.ends_with('\n');
    }

    fn call_started(&mut self, tool: &str, server: &str) {
        self.end_line();
        eprintln!("  ⏵ {} [{server}] running…", render::printable(tool));
        if let Ok(mut running) = self.running.lock() {
            running.push((tool.to_owned(), Instant::now()));
        }
        self.start_spinner();
    }
}

/// `/mcp`: every server, its state and era, its tools, and its call latency.
fn mcp_report(host: &Host, latencies: &BTreeMap<String, Histogram<u64>>) -> String {
    let mut out =
        String::from("server            state       era     tools  calls  p50 ms  p99 ms\n");
    for entry in host.servers() {
        let (state, era) = match &entry.status {
            ServerStatus::Connected { info } => ("connected", render::era(info.era)),
            ServerStatus::Failed { .. } => ("failed", "-"),
        };
        let tools = host.catalogue().tools_of(&entry.spec.name).count();
        let (calls, p50, p99) = match latencies.get(&entry.spec.name) {
            Some(h) if !h.is_empty() => (
                h.len().to_string(),
                h.value_at_quantile(0.5).to_string(),
                h.value_at_quantile(0.99).to_string(),
            ),
            _ => ("0".into(), "-".into(), "-".into()),
        };
        out.push_str(&format!(
            "{:<17} {state:<11} {era:<7} {tools:>5}  {calls:>5}  {p50:>6}  {p99:>6}\n",
            entry.spec.name
        ));
        if let ServerStatus::Failed { reason, .. } = &entry.status {
            out.push_str(&format!("  {}\n", render::first_line(reason)));
        }
    }
    out
}

/// `/tools`: what the model can call now.
fn tools_report(host: &Host, agent: &Agent<'_>) -> String {
    let Event::Session {
        exposed,
        search_mode,
        tools_total,
        ..
    } = agent.session_event()
    else {
        return String::new();
    };
    let mut out = format!("{tools_total} tools in the catalogue");
    if search_mode {
        out.push_str("; the model sees the search tool and these:\n");
    } else {
        out.push_str(":\n");
    }
    for name in exposed {
        let about = host
            .catalogue()
            .resolve(&name)
            .and_then(|t| t.def.description.as_deref())
            .map(render::first_line)
            .unwrap_or_default();
        out.push_str(&format!("  {name}  {about}\n"));
    }
    out
}

/// `/audit`: the latest rows of the audit log.
fn audit_report(store: Option<&mut warden_store::Store>) -> String {
    let Some(store) = store else {
        return "the state store is not available\n".into();
    };
    match store.audit(&AuditFilter::default(), AUDIT_ROWS) {
        Ok(rows) if rows.is_empty() => "no calls recorded yet\n".into(),
        Ok(rows) => rows
            .iter()
            .map(|row| {
                format!(
                    "{}  {:<5} {:<40} {} {}\n",
                    crate::commands::audit::format_time(row.entry.time_ms),
                    row.entry.front_end,
                    row.entry.tool,
                    row.entry.decision.as_deref().unwrap_or("-"),
                    row.entry.outcome
                )
            })
            .collect(),
        Err(error) => format!("cannot read the audit log: {error}\n"),
    }
}
