//! `warden chat`: an interactive session for a person. Answers stream as they come; every
//! tool call gets a line (what, where, the decision, the outcome); one status line with a
//! spinner says what is being waited for (the model, running calls); calls the policy asks
//! about are put to the person; a remote server that needs a sign-in is offered one at the
//! start (yes connects it, no goes on without it) and `/login NAME` signs in again later;
//! `/mcp`, `/tools`, `/audit`, `/clear` and `/exit` (or Ctrl-D) inspect and steer the
//! session. A failed prompt is reported and the chat goes on;
//! the history is saved per session in the state store.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use warden_agent::{Agent, Approver, DenyAll, Event, Observer};
use warden_host::{Host, ServerStatus};
use warden_store::AuditFilter;

use crate::cli::{ChatArgs, GlobalArgs};
use crate::exit::{Code, Failure};
use crate::render;
use crate::session::{self, Stored, TerminalApprover};
use crate::untrusted::{Shape, inert};

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
    let mut settings = session::agent_settings(&config, dir);
    // A person should not wait on a call for ever: past this, it goes on in the background.
    settings.background_after = settings
        .background_after
        .or(Some(warden_config::DEFAULT_BACKGROUND_AFTER));
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let screen = Screen::new(interactive);
    let asking = Arc::new(AtomicBool::new(false));
    let approver: Box<dyn Approver> = if interactive {
        Box::new(ChatApprover {
            status: screen.status.clone(),
            asking: Arc::clone(&asking),
        })
    } else {
        Box::new(DenyAll)
    };
    // Elicitation: a form or URL prompt at the terminal; nobody to ask without one.
    let elicitor: std::sync::Arc<dyn warden_mcp::Elicitor> = if interactive {
        std::sync::Arc::new(crate::elicit::TerminalElicitor::default())
    } else {
        std::sync::Arc::new(warden_mcp::DeclineAll)
    };
    let builder = super::host_builder(policy, &config, &env)?.elicitor(elicitor);
    let mut host = super::connect(builder, config.servers).await?;
    if interactive {
        // Only with a person at a terminal: a server that needs a sign-in is offered one.
        super::sign_ins::offer(&mut host, &env).await;
    }
    let mut observer = Stored::new(screen, super::open_store(&env).ok());
    let session = host.session("chat");
    let mut agent = Agent::new(
        &mut host,
        session,
        model.as_ref(),
        approver.as_ref(),
        settings,
    );
    let mut history = History::start(&mut observer, &session_id, &model.describe());
    banner(agent.host(), &agent, model.describe().as_str());
    loop {
        eprint!("\n› ");
        let _ = std::io::stderr().flush();
        let seen = crate::signals::interrupts();
        let line = tokio::select! {
            line = crate::terminal::read_line(MAX_LINE_BYTES) => line,
            () = crate::signals::interrupted_since(seen) => None,
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
                "login" if interactive => {
                    login_command(agent.host_mut(), &env, command).await;
                }
                _ => eprintln!("commands: /mcp /tools /audit /login NAME /clear /exit"),
            }
            continue;
        }
        history.record(&mut observer, "user", &serde_json::json!({"text": line}));
        observer.inner().asked();
        // Ctrl-C during a turn cancels the turn (and its calls), not the chat.
        let seen = crate::signals::interrupts();
        let result = tokio::select! {
            result = agent.ask(line, &mut observer) => Some(result),
            () = crate::signals::interrupted_since(seen) => None,
        };
        observer.inner().settled();
        if asking.swap(false, Ordering::Relaxed) {
            // A question was left open (the turn timed out, or was interrupted, while it
            // waited): end its line. What is typed next goes to the chat's prompt.
            eprintln!();
        }
        match result {
            Some(Ok(answer)) => {
                history.record(
                    &mut observer,
                    "assistant",
                    &serde_json::json!({"text": answer}),
                );
            }
            Some(Err(error)) => {
                // The conversation is as it was before the prompt: the person may go on.
                // The message may quote the provider's error body: escaped.
                eprintln!("warden: {}", inert(&error.to_string(), Shape::Line));
            }
            None if crate::signals::terminated() => {
                eprintln!("warden: stopped; calls were cancelled");
                break;
            }
            None => {
                agent.abandon();
                eprintln!(
                    "warden: interrupted; the turn and its calls were cancelled (Ctrl-D or /exit ends the chat)"
                );
            }
        }
    }
    drop(agent);
    drop(observer);
    host.shutdown().await;
    eprintln!();
    Ok(Code::Ok)
}

/// `/login NAME [browser]`: signs in to the remote server `NAME` again (its sign-in
/// lapsed, or was declined at the start) and starts it anew, so its tools are offered from
/// the next prompt. Only with a terminal: the sign-in needs the person.
async fn login_command(host: &mut Host, env: &warden_config::Environment, command: &str) {
    let mut words = command.split_whitespace().skip(1);
    let (Some(name), open) = (words.next(), words.next()) else {
        eprintln!("usage: /login NAME [browser] (signs in to the remote server NAME)");
        return;
    };
    let Some(spec) = host
        .servers()
        .iter()
        .find(|entry| entry.spec.name == name)
        .map(|entry| entry.spec.clone())
    else {
        eprintln!("no server is named {}", inert(name, Shape::Line));
        return;
    };
    if !super::sign_ins::signs_in(&spec) {
        eprintln!(
            "{} does not sign in with OAuth (not a Streamable HTTP server, or its \
             configuration sets its own Authorization header)",
            inert(name, Shape::Line)
        );
        return;
    }
    let open_browser = matches!(open, Some("browser" | "b"));
    super::sign_ins::sign_in_and_start(host, env, &spec, open_browser).await;
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
        "warden chat: {model}; {connected} of {} servers connected, {} tools{mode}. /mcp /tools /audit /login /clear /exit",
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
    fn start<O: Observer>(observer: &mut Stored<O>, id: &str, model: &str) -> History {
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
        observer: &mut Stored<O>,
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

/// What the person sees: streamed text, tool-call lines, and one transient status line
/// with a spinner while Warden waits for the model or for calls.
struct Screen {
    mid_line: bool,
    status: StatusLine,
    spinner: Option<tokio::task::JoinHandle<()>>,
    latencies: BTreeMap<String, Histogram<u64>>,
}

impl Screen {
    fn new(interactive: bool) -> Screen {
        let status = StatusLine::default();
        let spinner = interactive.then(|| {
            let status = status.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(SPINNER_FRAME).await;
                    status.tick();
                }
            })
        });
        Screen {
            mid_line: false,
            status,
            spinner,
            latencies: BTreeMap::new(),
        }
    }

    /// A prompt was sent: the model is working on it.
    fn asked(&mut self) {
        self.status.set(MODEL, "waiting for the model");
    }

    /// The prompt was answered, failed or was interrupted: nothing is waited for now.
    fn settled(&mut self) {
        self.status.clear();
        self.end_line();
    }

    fn end_line(&mut self) {
        if self.mid_line {
            println!();
            self.mid_line = false;
        }
    }

    /// Prints a line of its own, below the streamed text and in place of the status line.
    fn line(&mut self, text: &str) {
        self.status.hide();
        self.end_line();
        eprintln!("{text}");
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        if let Some(task) = self.spinner.take() {
            task.abort();
        }
        self.status.clear();
    }
}

impl Observer for Screen {
    fn event(&mut self, event: &Event) {
        match event {
            Event::ToolCall(call) => {
                self.status.remove(&call.tool);
                if let Some(ms) = call.latency_ms
                    && !call.server.is_empty()
                {
                    if !self.latencies.contains_key(&call.server)
                        && let Ok(histogram) = Histogram::new_with_bounds(1, MAX_LATENCY_MS, 2)
                    {
                        self.latencies.insert(call.server.clone(), histogram);
                    }
                    if let Some(histogram) = self.latencies.get_mut(&call.server) {
                        let _ = histogram.record(ms.min(MAX_LATENCY_MS));
                    }
                }
                self.line(&render::tool_call_line(call));
                // The step's results go back to the model once every call is done.
                if self.status.is_idle() {
                    self.status.set(MODEL, "waiting for the model");
                }
            }
            Event::Notice { message, .. } => {
                self.line(&format!("warden: {}", inert(message, Shape::Line)));
            }
            Event::BackgroundResult { .. } => self.line(&render::background_line(event)),
            Event::Assistant { .. } => {
                self.status.remove(MODEL);
                self.end_line();
            }
            _ => {}
        }
    }

    fn text_delta(&mut self, delta: &str) {
        if delta.is_empty() {
            return;
        }
        self.status.remove(MODEL);
        print!("{}", inert(delta, Shape::Block));
        let _ = std::io::stdout().flush();
        self.mid_line = !delta.ends_with('\n');
    }

    fn call_started(&mut self, tool: &str, server: &str) {
        self.status.remove(MODEL);
        self.end_line();
        if self.spinner.is_none() {
            // No terminal to redraw a status line on: a line per call instead.
            eprintln!(
                "  ⏵ {} [{}] running…",
                inert(tool, Shape::Line),
                inert(server, Shape::Line)
            );
        }
        self.status.set(
            tool,
            &format!(
                "running {} [{}]",
                inert(tool, Shape::Line),
                inert(server, Shape::Line)
            ),
        );
    }
}

/// The status line's key for the model's turn (tool calls are keyed by their names).
const MODEL: &str = "";
/// How often the spinner turns.
const SPINNER_FRAME: Duration = Duration::from_millis(120);
/// Latencies above an hour are recorded as an hour.
const MAX_LATENCY_MS: u64 = 3_600_000;
/// The longest status line drawn, in characters (less on a narrower terminal).
const STATUS_CHARS: usize = 100;

/// The transient bottom line: what is being waited for, with a spinner and the time spent.
/// Drawn, erased and changed under one lock, so it never overwrites other output.
#[derive(Clone, Default)]
struct StatusLine(Arc<Mutex<Status>>);

#[derive(Default)]
struct Status {
    /// (key, what, since), oldest first.
    waiting: Vec<(String, String, Instant)>,
    shown: bool,
    frame: usize,
}

impl Status {
    fn erase(&mut self) {
        if self.shown {
            eprint!("\r\x1b[2K");
            let _ = std::io::stderr().flush();
            self.shown = false;
        }
    }
}

impl StatusLine {
    fn with<T>(&self, f: impl FnOnce(&mut Status) -> T) -> Option<T> {
        self.0.lock().ok().map(|mut status| f(&mut status))
    }

    /// Waits for `what` under `key` (replacing what was waited for under it).
    fn set(&self, key: &str, what: &str) {
        self.with(|status| {
            status.waiting.retain(|(k, _, _)| k != key);
            status
                .waiting
                .push((key.to_owned(), what.to_owned(), Instant::now()));
        });
    }

    /// Stops waiting for `key`; erases the line when nothing is left.
    fn remove(&self, key: &str) {
        self.with(|status| {
            status.waiting.retain(|(k, _, _)| k != key);
            if status.waiting.is_empty() {
                status.erase();
            }
        });
    }

    /// Stops waiting for anything, and erases the line.
    fn clear(&self) {
        self.with(|status| {
            status.waiting.clear();
            status.erase();
        });
    }

    /// Erases the line before other output; the next tick draws it again below.
    fn hide(&self) {
        self.with(Status::erase);
    }

    fn is_idle(&self) -> bool {
        self.with(|status| status.waiting.is_empty())
            .unwrap_or(true)
    }

    /// Draws the next frame.
    fn tick(&self) {
        const FRAMES: [char; 4] = ['|', '/', '-', '\\'];
        if crate::elicit::prompting() {
            // A server's form or URL prompt is on the screen: leave it alone.
            return;
        }
        self.with(|status| {
            let Some((_, what, since)) = status.waiting.first() else {
                return;
            };
            let mut line = format!(
                "{} {what} ({:.1} s)",
                FRAMES[status.frame % FRAMES.len()],
                since.elapsed().as_secs_f64()
            );
            if status.waiting.len() > 1 {
                line.push_str(&format!(" and {} more", status.waiting.len() - 1));
            }
            // One row: a line that wrapped could not be erased by `\r`.
            let room = crate::terminal::width()
                .map_or(STATUS_CHARS, |columns| columns.saturating_sub(1))
                .min(STATUS_CHARS);
            let line: String = line.chars().take(room).collect();
            eprint!("\r\x1b[2K{line}");
            let _ = std::io::stderr().flush();
            status.shown = true;
            status.frame = status.frame.wrapping_add(1);
        });
    }
}

/// Approvals at the terminal, with the status line out of the way while the person reads.
struct ChatApprover {
    status: StatusLine,
    /// True while a question waits for its answer.
    asking: Arc<AtomicBool>,
}

impl Approver for ChatApprover {
    fn approve<'a>(
        &'a self,
        request: &'a warden_agent::ApprovalRequest,
    ) -> futures::future::BoxFuture<'a, warden_agent::ApprovalAnswer> {
        self.status.clear();
        Box::pin(async move {
            self.asking.store(true, Ordering::Relaxed);
            let answer = TerminalApprover.approve(request).await;
            self.asking.store(false, Ordering::Relaxed);
            answer
        })
    }

    fn name(&self) -> &'static str {
        TerminalApprover.name()
    }
}

/// `/mcp`: every server, its state and era, its tools, and its call latency.
fn mcp_report(host: &Host, latencies: &BTreeMap<String, Histogram<u64>>) -> String {
    let width = host
        .servers()
        .iter()
        .map(|entry| entry.spec.name.chars().count())
        .max()
        .unwrap_or(0)
        .max(17);
    let mut out = format!(
        "{:<width$} state       era     tools  calls  p50 ms  p99 ms\n",
        "server"
    );
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
            "{:<width$} {state:<11} {era:<7} {tools:>5}  {calls:>5}  {p50:>6}  {p99:>6}\n",
            entry.spec.name
        ));
        if let ServerStatus::Failed { reason, .. } = &entry.status {
            // The reason may quote the server's stderr: escaped.
            out.push_str(&format!(
                "  {}\n",
                inert(&render::first_line(reason), Shape::Line)
            ));
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
            // A server's words: escaped.
            .map(|about| inert(&render::first_line(about), Shape::Line).into_owned())
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
                    inert(&row.entry.tool, Shape::Line),
                    row.entry.decision.as_deref().unwrap_or("-"),
                    row.entry.outcome
                )
            })
            .collect(),
        Err(error) => format!("cannot read the audit log: {error}\n"),
    }
}
