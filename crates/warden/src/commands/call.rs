//! `warden call`: one tool call, from the command line.
//!
//! The call is decided by the policy after its arguments are checked and before anything is
//! sent. The context is the user's own command line, so it is clean (an empty
//! [`Provenance`]): only rules and defaults apply, no flow floor. A denied call exits with
//! code 4; a call the policy asks about is put to the user on the terminal, or, without
//! one, refused unless `--yes` approves it.

use std::io::{IsTerminal, Read};
use std::time::Instant;

use anyhow::Context;
use serde_json::Value;
use warden_config::ResolvedPolicy;
use warden_host::{Approval, Host, HostError, PreparedCall, catalogue::candidate_servers};
use warden_mcp::CallOutcome;
use warden_policy::{Decision, Provenance, Verdict};
use warden_store::AuditEntry;

use crate::cli::{CallArgs, GlobalArgs};
use crate::exit::{Code, Failure};
use crate::render;

/// Largest arguments file accepted.
const MAX_ARGS_BYTES: u64 = 16 * 1024 * 1024;
/// Longest answer read at the approval prompt.
const MAX_ANSWER_BYTES: u64 = 1024;

/// Runs `warden call`.
pub async fn run(global: &GlobalArgs, args: CallArgs) -> Result<Code, Failure> {
    let arguments = read_arguments(&args).map_err(Failure::usage)?;
    let (config, env) = super::load_config(global)?;
    let policy = super::compile_policy(&config.policy)?;
    // Start only the servers the target can belong to; all of them if the name doesn't say.
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    let wanted: Vec<String> = candidate_servers(&args.target, &names)
        .into_iter()
        .map(str::to_owned)
        .collect();
    let specs: Vec<_> = config
        .servers
        .iter()
        .filter(|spec| wanted.is_empty() || wanted.contains(&spec.name))
        .cloned()
        .collect();
    if specs.is_empty() {
        return Err(Failure::usage(anyhow::anyhow!(
            "no servers are configured (see `warden config`)"
        )));
    }
    let host = super::connect(specs, &config.servers, policy, &env).await?;
    let mut record = None;
    let result = tokio::select! {
        result = decide_and_call(&host, &args, arguments, &config.policy, &mut record) => Some(result),
        () = crate::signals::interrupted() => None,
    };
    host.shutdown().await;
    if let Some(mut entry) = record {
        if result.is_none() && entry.outcome.is_empty() {
            entry.outcome = "failed".into();
            entry.error = Some("interrupted".into());
        }
        write_audit(&env, &entry);
    }
    let Some(result) = result else {
        return Err(Failure {
            code: Code::Interrupted,
            error: anyhow::anyhow!("interrupted; the call was cancelled and servers stopped"),
        });
    };
    let outcome = result?;
    if args.json {
        println!("{}", render::pretty(&outcome.raw));
    } else {
        print!("{}", render::outcome(&outcome));
    }
    if outcome.is_error {
        eprintln!("warden: the tool reported an error");
        Ok(Code::ToolError)
    } else {
        Ok(Code::Ok)
    }
}

/// Appends `entry` to the audit log; a failure is a warning, never a changed exit code.
fn write_audit(env: &warden_config::Environment, entry: &AuditEntry) {
    let written = super::open_store(env)
        .map_err(|failure| failure.error)
        .and_then(|mut store| store.record_audit(entry).map_err(anyhow::Error::from));
    if let Err(error) = written {
        eprintln!(
            "warden: warning: the audit log did not record this call of `{}`: {error:#}",
            entry.tool
        );
    }
}

/// The audit entry of an attempt on `tool`; the outcome is filled in as it proceeds (an
/// empty outcome means the attempt was cut short).
fn audit_entry(
    tool: &warden_host::CatalogueTool,
    arguments: &Value,
    verdict: Option<&Verdict>,
) -> AuditEntry {
    AuditEntry {
        time_ms: super::audit::now_ms(),
        front_end: "cli".into(),
        server: tool.server.clone(),
        tool: tool.qualified.clone(),
        arguments: arguments.clone(),
        decision: verdict.map(|v| v.decision.as_str().to_owned()),
        reasons: Value::Array(
            verdict
                .map(|v| v.reasons.as_slice())
                .unwrap_or_default()
                .iter()
                .map(|reason| serde_json::json!({"kind": reason.kind.tag(), "text": &*reason.text}))
                .collect(),
        ),
        approved_by: None,
        executed: false,
        outcome: String::new(),
        error: None,
        latency_ms: None,
        result_bytes: None,
    }
}

/// Checks and decides the call, obtains approval if the policy asks, and sends it, filling
/// in `record` (the audit entry) as it goes.
async fn decide_and_call(
    host: &Host,
    args: &CallArgs,
    arguments: Value,
    policy: &ResolvedPolicy,
    record: &mut Option<AuditEntry>,
) -> Result<CallOutcome, Failure> {
    // Kept for the audit log of a call refused for its arguments (prepare consumes them).
    let given = arguments.clone();
    let call = host
        .prepare(&args.target, arguments, &Provenance::new())
        .inspect_err(|error| {
            let violations = match error {
                HostError::InvalidArguments { violations, .. } => violations
                    .iter()
                    .map(|v| {
                        let at = if v.pointer.is_empty() {
                            "/"
                        } else {
                            &v.pointer
                        };
                        format!("{at} ({})", v.rule)
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
                HostError::ArgumentsNotObject { got, .. } => format!("not an object ({got})"),
                _ => return,
            };
            if let Ok(tool) = host.resolve(&args.target) {
                let mut entry = audit_entry(tool, &given, None);
                entry.outcome = "invalid_arguments".into();
                // Where and which schema rule failed, not the messages: they quote values.
                entry.error = Some(format!(
                    "arguments do not match the input schema: {violations}"
                ));
                *record = Some(entry);
            }
        })
        .map_err(
            |error| match (&error, host.catalogue().hidden_tool(&args.target)) {
                // The host says "no tool", as it would to a model; the person at the command
                // line owns the configuration and is told which rule hides it.
                (HostError::UnknownTool { .. }, Some(hidden)) => {
                    let place = hidden
                        .rule
                        .and_then(|index| policy.rule_source(index))
                        .map(|source| format!(", written at {source}"))
                        .unwrap_or_default();
                    Failure::usage(anyhow::anyhow!(
                        "no tool `{}`: it is {}{place}",
                        args.target,
                        hidden.reason
                    ))
                }
                _ => host_failure(error),
            },
        )?;
    drop(given);
    let mut entry = audit_entry(call.tool(), call.arguments(), Some(call.verdict()));
    let approval = match call.verdict().decision {
        Decision::Allow => {
            entry.approved_by = Some("policy".into());
            Approval::NotAsked
        }
        Decision::Deny => {
            entry.outcome = "denied".into();
            *record = Some(entry);
            return Err(denied(format!(
                "`{}` is denied by policy (nothing was sent):{}",
                call.tool().qualified,
                super::reason_lines(&call.verdict().reasons, policy)
            )));
        }
        Decision::Ask if args.yes => {
            entry.approved_by = Some("--yes".into());
            Approval::Approved
        }
        Decision::Ask if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() => {
            // Recorded as not approved if the user interrupts instead of answering.
            entry.outcome = "not_approved".into();
            *record = Some(entry.clone());
            if !ask(&call, policy).await {
                return Err(denied(format!(
                    "`{}` was not approved (nothing was sent)",
                    call.tool().qualified
                )));
            }
            entry.outcome.clear();
            entry.approved_by = Some("user".into());
            Approval::Approved
        }
        Decision::Ask => {
            entry.outcome = "not_approved".into();
            *record = Some(entry);
            return Err(denied(format!(
                "`{}` needs approval, and there is no terminal to ask on (nothing was sent):{}\n\
                 Re-run with --yes to approve an `ask` from a script (--yes never overrides a deny).",
                call.tool().qualified,
                super::reason_lines(&call.verdict().reasons, policy)
            )));
        }
    };
    // Recorded as sent (an empty outcome: cut short) from here: if the user interrupts,
    // the server may have received the call.
    entry.executed = true;
    *record = Some(entry);
    let started = Instant::now();
    let result = host.send(call, approval).await;
    let latency = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
    if let Some(entry) = record.as_mut() {
        entry.latency_ms = Some(latency);
        match &result {
            Ok(outcome) => {
                entry.outcome = if outcome.is_error { "tool_error" } else { "ok" }.into();
                entry.result_bytes = serde_json::to_vec(&outcome.raw)
                    .ok()
                    .and_then(|bytes| i64::try_from(bytes.len()).ok());
            }
            Err(error) => {
                entry.outcome = "failed".into();
                entry.executed = matches!(error, HostError::Call { .. });
                entry.error = Some(error.to_string());
            }
        }
    }
    result.map_err(host_failure)
}

fn denied(message: String) -> Failure {
    Failure {
        code: Code::Denied,
        error: anyhow::anyhow!(message),
    }
}

/// Shows the call on stderr and asks `Run it? [y/N]`; true only for `y` or `yes`.
async fn ask(call: &PreparedCall<'_>, policy: &ResolvedPolicy) -> bool {
    let tool = call.tool();
    eprint!(
        "warden: `{}` (server `{}`) needs your approval.\narguments:\n{}\nwhy:{}\nRun it? [y/N] ",
        tool.qualified,
        tool.server,
        render::indent(&render::shown_arguments(call.arguments())),
        super::reason_lines(&call.verdict().reasons, policy)
    );
    match crate::terminal::read_line(MAX_ANSWER_BYTES).await {
        Some(line) => matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes"),
        None => false,
    }
}

fn host_failure(error: HostError) -> Failure {
    let code = match &error {
        HostError::UnknownTool { .. }
        | HostError::ArgumentsNotObject { .. }
        | HostError::InvalidArguments { .. } => Code::Usage,
        HostError::ServerUnavailable { .. } | HostError::Call { .. } => Code::Unavailable,
        HostError::Denied { .. } | HostError::NotApproved { .. } => Code::Denied,
    };
    let tail = match &error {
        HostError::ServerUnavailable { stderr_tail, .. } => stderr_tail.clone(),
        HostError::Call {
            source: warden_mcp::CallError::ServerGone { stderr_tail, .. },
            ..
        } => stderr_tail.clone(),
        _ => Vec::new(),
    };
    let mut message = error.to_string();
    if !tail.is_empty() {
        message.push_str("\nlast lines on the server's stderr:");
        for line in tail {
            message.push_str("\n  | ");
            message.push_str(&line);
        }
    }
    Failure {
        code,
        error: anyhow::anyhow!(message),
    }
}

fn read_arguments(args: &CallArgs) -> anyhow::Result<Value> {
    let (text, source) = match (&args.args, &args.args_file) {
        (Some(text), _) => (text.clone(), "--args".to_owned()),
        (None, Some(path)) if path.as_os_str() == "-" => {
            let mut text = String::new();
            std::io::stdin()
                .take(MAX_ARGS_BYTES + 1)
                .read_to_string(&mut text)
                .context("reading arguments from stdin")?;
            (text, "stdin".to_owned())
        }
        (None, Some(path)) => {
            let file = std::fs::File::open(path)
                .with_context(|| format!("cannot open {}", path.display()))?;
            let mut text = String::new();
            file.take(MAX_ARGS_BYTES + 1)
                .read_to_string(&mut text)
                .with_context(|| format!("cannot read {}", path.display()))?;
            (text, path.display().to_string())
        }
        (None, None) => return Ok(Value::Object(serde_json::Map::new())),
    };
    if text.len() as u64 > MAX_ARGS_BYTES {
        anyhow::bail!("{source}: arguments are larger than {MAX_ARGS_BYTES} bytes");
    }
    serde_json::from_str(&text).map_err(|error| {
        anyhow::anyhow!(
            "{source}: not valid JSON at line {} column {}: {error}",
            error.line(),
            error.column()
        )
    })
}
