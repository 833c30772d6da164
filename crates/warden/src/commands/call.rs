//! `warden call`: one tool call, from the command line.

use std::io::Read;

use anyhow::Context;
use serde_json::Value;
use warden_host::{HostError, catalogue::candidate_servers};

use crate::cli::{CallArgs, GlobalArgs};
use crate::exit::{Code, Failure};
use crate::render;

/// Largest arguments file accepted.
const MAX_ARGS_BYTES: u64 = 16 * 1024 * 1024;

/// Runs `warden call`.
pub async fn run(global: &GlobalArgs, args: CallArgs) -> Result<Code, Failure> {
    let arguments = read_arguments(&args).map_err(Failure::usage)?;
    let (config, env) = super::load_config(global)?;
    // Start only the servers the target can belong to; all of them if the name doesn't say.
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    let wanted: Vec<String> = candidate_servers(&args.target, &names)
        .into_iter()
        .map(str::to_owned)
        .collect();
    let specs: Vec<_> = config
        .servers
        .into_iter()
        .filter(|spec| wanted.is_empty() || wanted.contains(&spec.name))
        .collect();
    if specs.is_empty() {
        return Err(Failure::usage(anyhow::anyhow!(
            "no servers are configured (see `warden config`)"
        )));
    }
    let host = super::connect(specs, &env).await?;
    let result = tokio::select! {
        result = host.call(&args.target, arguments) => Some(result),
        () = crate::signals::interrupted() => None,
    };
    host.shutdown().await;
    let Some(result) = result else {
        return Err(Failure {
            code: Code::Interrupted,
            error: anyhow::anyhow!("interrupted; the call was cancelled and servers stopped"),
        });
    };
    match result {
        Ok(outcome) => {
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
        Err(error) => Err(host_failure(error)),
    }
}

fn host_failure(error: HostError) -> Failure {
    let code = match &error {
        HostError::UnknownTool { .. }
        | HostError::ArgumentsNotObject { .. }
        | HostError::InvalidArguments { .. } => Code::Usage,
        HostError::ServerUnavailable { .. } | HostError::Call { .. } => Code::Unavailable,
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
