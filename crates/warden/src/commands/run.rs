//! `warden run`: one task, non-interactive. The model works through the configured
//! servers under the policy until it answers; `--json` writes the transcript as it happens
//! (docs/transcript.md).

use std::io::{IsTerminal, Write};

use warden_agent::{Agent, AgentError, AllowAll, Approver, DenyAll, Event, Observer};

use crate::cli::{ApprovalMode, GlobalArgs, RunArgs};
use crate::exit::{Code, Failure};
use crate::session::{self, TerminalApprover};
use crate::untrusted::{Shape, inert};

/// Runs `warden run`.
pub async fn run(global: &GlobalArgs, args: RunArgs) -> Result<Code, Failure> {
    let (config, env) = super::load_config(global)?;
    let policy = super::compile_policy(&config.policy)?;
    let model_settings = session::model_settings(&config, &args.model)?;
    let model = warden_agent::model::build(&model_settings, &|name| std::env::var(name).ok())
        .map_err(Failure::usage)?;
    let (_id, dir) = session::new_session(&env)?;
    let mut settings = session::agent_settings(&config, dir);
    if let Some(turns) = args.max_turns {
        settings.max_turns = turns;
    }
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let mode = args.approvals.unwrap_or(if interactive {
        ApprovalMode::Ask
    } else {
        ApprovalMode::Deny
    });
    if mode == ApprovalMode::Ask && !interactive {
        return Err(Failure::usage(anyhow::anyhow!(
            "--approvals ask needs a terminal; use --approvals deny (the default here) or allow-all"
        )));
    }
    let approver: Box<dyn Approver> = match mode {
        ApprovalMode::Ask => Box::new(TerminalApprover),
        ApprovalMode::Deny => Box::new(DenyAll),
        ApprovalMode::AllowAll => Box::new(AllowAll),
    };
    // Nobody to ask: every elicitation request is declined (decision 0016).
    let elicitor = std::sync::Arc::new(warden_mcp::DeclineAll);
    let builder = super::host_builder(policy, &config, &env)?.elicitor(elicitor);
    let mut host = super::connect(builder, config.servers).await?;
    if interactive {
        // With a person at a terminal: a server that needs a sign-in is offered one.
        super::sign_ins::offer(&mut host, &env).await;
    }
    // What did not connect is said, and the task goes on without it.
    super::sign_ins::report_unconnected(&host);
    let mut observer: Box<dyn Observer> = if args.json {
        Box::new(JsonLines)
    } else {
        Box::new(Plain::default())
    };
    let session = host.session("run");
    let mut agent = Agent::new(
        &mut host,
        session,
        model.as_ref(),
        approver.as_ref(),
        settings,
    );
    observer.event(&agent.session_event());
    let result = tokio::select! {
        result = agent.ask(&args.prompt, &mut observer) => Some(result),
        () = crate::signals::interrupted() => None,
    };
    let (input_tokens, output_tokens) = agent.usage();
    let turns = agent
        .messages()
        .iter()
        .filter(|m| m.role == warden_agent::conversation::Role::Assistant)
        .count();
    drop(agent);
    host.shutdown().await;
    match result {
        Some(Ok(answer)) => {
            observer.event(&Event::Final {
                answer,
                turns: u32::try_from(turns).unwrap_or(u32::MAX),
                input_tokens,
                output_tokens,
            });
            Ok(Code::Ok)
        }
        Some(Err(error)) => {
            observer.event(&Event::Error {
                message: error.to_string(),
            });
            let code = match &error {
                AgentError::TurnLimit { .. } | AgentError::Timeout { .. } => Code::NoAnswer,
                AgentError::Model(warden_agent::model::ModelError::Settings(_)) => Code::Usage,
                AgentError::Model(_) => Code::Unavailable,
            };
            Err(Failure {
                code,
                error: error.into(),
            })
        }
        None => {
            observer.event(&Event::Error {
                message: "interrupted".into(),
            });
            Err(Failure {
                code: Code::Interrupted,
                error: anyhow::anyhow!("interrupted; calls were cancelled and servers stopped"),
            })
        }
    }
}

/// One JSON object per line on stdout, flushed as each event happens.
pub struct JsonLines;

impl Observer for JsonLines {
    fn event(&mut self, event: &Event) {
        // serde escapes C0 controls; C1 and bidi controls get JSON escapes too.
        if let Ok(line) = serde_json::to_string(event) {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(crate::untrusted::inert_json(&line).as_bytes());
            let _ = out.write_all(b"\n");
            let _ = out.flush();
        }
    }
}

/// For a person reading `warden run`: the answer streams to stdout, a line per tool call
/// to stderr.
#[derive(Default)]
pub struct Plain {
    mid_line: bool,
}

impl Observer for Plain {
    fn event(&mut self, event: &Event) {
        match event {
            Event::ToolCall(call) => {
                if self.mid_line {
                    println!();
                    self.mid_line = false;
                }
                eprintln!("{}", crate::render::tool_call_line(call));
            }
            // A notice may name a server's tools: made inert.
            Event::Notice { message, .. } => eprintln!("warden: {}", inert(message, Shape::Line)),
            Event::BackgroundResult { .. } => {
                if self.mid_line {
                    println!();
                    self.mid_line = false;
                }
                eprintln!("{}", crate::render::background_line(event));
            }
            Event::Final { .. } => {
                if self.mid_line {
                    println!();
                    self.mid_line = false;
                }
            }
            // The failure is printed once, with its exit code, by `main`.
            Event::Error { .. } => {}
            Event::Assistant { .. } => {
                if self.mid_line {
                    println!();
                    self.mid_line = false;
                }
            }
            Event::Session { .. } => {}
        }
    }

    fn text_delta(&mut self, delta: &str) {
        // The model's words (which may repeat a server's): made inert, lines kept.
        print!("{}", inert(delta, Shape::Block));
        let _ = std::io::stdout().flush();
        self.mid_line = !delta.ends_with('\n');
    }
}
