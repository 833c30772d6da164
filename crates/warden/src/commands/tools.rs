//! `warden tools`: every server with its state and tools.

use serde_json::{Value, json};
use warden_host::{Host, ServerStatus};

use crate::cli::{GlobalArgs, ToolsArgs};
use crate::exit::{Code, Failure};
use crate::render;

/// Runs `warden tools`.
pub async fn run(global: &GlobalArgs, args: ToolsArgs) -> Result<Code, Failure> {
    let (config, env) = super::load_config(global)?;
    if config.servers.is_empty() {
        return Err(Failure::usage(anyhow::anyhow!(
            "no servers are configured (see `warden config` for the files searched)"
        )));
    }
    let host = super::connect(config.servers, &env).await?;
    if args.json {
        println!("{}", render::pretty(&listing(&host)));
    } else {
        print!("{}", text(&host));
    }
    host.shutdown().await;
    Ok(Code::Ok)
}

fn listing(host: &Host) -> Value {
    let servers: Vec<Value> = host
        .servers()
        .iter()
        .map(|entry| {
            let name = &entry.spec.name;
            let mut server = json!({
                "name": name,
                "origin": entry.spec.origin,
            });
            match &entry.status {
                ServerStatus::Connected { info } => {
                    server["state"] = json!("connected");
                    server["era"] = json!(info.era);
                    server["protocol_version"] = json!(info.protocol_version);
                    server["server_info"] = json!({
                        "name": info.name, "version": info.version, "title": info.title,
                    });
                    server["capabilities"] = info.capabilities.clone();
                    server["instructions"] = json!(info.instructions);
                    server["tools"] = host
                        .catalogue()
                        .tools_of(name)
                        .map(|tool| {
                            json!({
                                "qualified_name": tool.qualified,
                                "name": tool.def.name,
                                "title": tool.def.title,
                                "description": tool.def.description,
                                "annotations": tool.def.annotations,
                                "input_schema": tool.def.input_schema,
                            })
                        })
                        .collect();
                    server["rejected_tools"] = host
                        .catalogue()
                        .rejected()
                        .iter()
                        .filter(|rejected| &rejected.server == name)
                        .map(|rejected| json!({"name": rejected.name, "reason": rejected.reason}))
                        .collect();
                }
                ServerStatus::Failed {
                    reason,
                    stderr_tail,
                } => {
                    server["state"] = json!("failed");
                    server["reason"] = json!(reason);
                    server["stderr_tail"] = json!(stderr_tail);
                }
            }
            server
        })
        .collect();
    json!({ "servers": servers })
}

fn text(host: &Host) -> String {
    let mut out = String::new();
    for entry in host.servers() {
        let name = &entry.spec.name;
        match &entry.status {
            ServerStatus::Connected { info } => {
                let tools: Vec<_> = host.catalogue().tools_of(name).collect();
                let implementation = match (&info.name, &info.version) {
                    (Some(n), Some(v)) => format!("  {n} {v}"),
                    (Some(n), None) => format!("  {n}"),
                    _ => String::new(),
                };
                out.push_str(&format!(
                    "{name}: connected, {} era ({}){implementation}, {} tool{}\n",
                    render::era(info.era),
                    info.protocol_version,
                    tools.len(),
                    if tools.len() == 1 { "" } else { "s" }
                ));
                let width = tools.iter().map(|t| t.qualified.len()).max().unwrap_or(0);
                for tool in tools {
                    let summary = tool
                        .def
                        .description
                        .as_deref()
                        .map(render::first_line)
                        .unwrap_or_default();
                    out.push_str(&format!("  {:width$}  {summary}\n", tool.qualified));
                }
                for rejected in host.catalogue().rejected() {
                    if &rejected.server == name {
                        out.push_str(&format!(
                            "  (left out: {}: {})\n",
                            rejected.name, rejected.reason
                        ));
                    }
                }
            }
            ServerStatus::Failed {
                reason,
                stderr_tail,
            } => {
                out.push_str(&format!("{name}: FAILED: {reason}\n"));
                for line in stderr_tail {
                    out.push_str(&format!("  | {line}\n"));
                }
            }
        }
    }
    out
}
