//! `warden call`: one tool call, from the command line.
//!
//! The call is decided by the policy after its arguments are checked and before anything is
//! sent. The context is the user's own command line, so it is clean (a new session of
//! the host): only rules and defaults apply, no flow floor. A denied call exits with
//! code 4; a call the policy asks about is put to the user on the terminal, or, without
//! one, refused unless `--yes` approves it.

use std::io::{IsTerminal, Read};

use anyhow::Context;
use serde_json::Value;
use warden_config::ResolvedPolicy;
use warden_host::{
    ApprovedBy, Host, HostError, PreparedCall, Session, catalogue::candidate_servers,
};
use warden_mcp::CallOutcome;
use warden_policy::Decision;

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
    let builder = super::host_builder(policy, &config, &env)?;
    let host = super::connect(builder, specs).await?;
    // The user's own command line: a clean context. The session records the attempt in
    // the audit log however it ends (a Ctrl-C included).
    let session = host.session("cli");
    let result = tokio::select! {
        result = decide_and_call(&host, &session, &args, arguments, &config.policy) => Some(result),
        () = crate::signals::interrupted() => None,
    };
    host.shutdown().await;
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

/// Checks and decides the call, obtains approval if the policy asks, and sends it.
async fn decide_and_call(
    host: &Host,
    session: &Session,
    args: &CallArgs,
    arguments: Value,
    policy: &ResolvedPolicy,
) -> Result<CallOutcome, Failure> {
    let mut call = session
        .prepare(host, &args.target, arguments)
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
    // A call dropped unsent below is recorded by the session as denied or not approved.
    match call.verdict().decision {
        Decision::Allow => {}
        Decision::Deny => {
            return Err(denied(format!(
                "`{}` is denied by policy (nothing was sent):{}",
                call.tool().qualified,
                super::reason_lines(&call.verdict().reasons, policy)
            )));
        }
        Decision::Ask if args.yes => call.approve(ApprovedBy::named("--yes")),
        Decision::Ask if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() => {
            if !ask(&call, policy).await {
                return Err(denied(format!(
                    "`{}` was not approved (nothing was sent)",
                    call.tool().qualified
                )));
            }
            call.approve(ApprovedBy::named("user"));
        }
        Decision::Ask => {
            return Err(denied(format!(
                "`{}` needs approval, and there is no terminal to ask on (nothing was sent):{}\n\
                 Re-run with --yes to approve an `ask` from a script (--yes never overrides a deny).",
                call.tool().qualified,
                super::reason_lines(&call.verdict().reasons, policy)
            )));
        }
    }
    session.send(host, call).await.map_err(host_failure)
}

fn denied(message: String) -> Failure {
    Failure {
        code: Code::Denied,
        error: anyhow::anyhow!(message),
    }
}

/// Shows the call on stderr and asks `Run it? [y/N]`; true only for `y` or `yes`.
async fn ask(call: &PreparedCall, policy: &ResolvedPolicy) -> bool {
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
        HostError::ServerUnavailable { .. }
        | HostError::Call { .. }
        | HostError::Withdrawn { .. } => Code::Unavailable,
        HostError::Denied { .. } | HostError::NotApproved { .. } => Code::Denied,
    };
    let tail = match &error {
        HostError::ServerUnavailable { stderr_tail, .. } => stderr_tail.clone(),
        HostError::Call {
            source:
                warden_mcp::CallError::ServerGone { stderr_tail, .. }
                | warden_mcp::CallError::NotSent { stderr_tail, .. },
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
