//! `warden scan`: connects to every server like `warden tools` and shows what the
//! description scan (docs/policy.md, "Description scanning") found in each tool's
//! definition, flagged or not, quarantined or approved. Names are compared with every
//! other server's tool names here, whatever order the servers connected in.

use serde_json::{Value, json};
use warden_host::ServerStatus;
use warden_policy::scan::segment::Kind;
use warden_policy::scan::{FLAG_IDS, Flag, assess_text, name_confusable};

use super::ScansByServer;
use crate::cli::{GlobalArgs, ScanArgs};
use crate::exit::{Code, Failure};
use crate::render;
use crate::untrusted::{Shape, inert};
use warden_host::approvals::ToolScan;

/// Runs `warden scan`.
pub async fn run(global: &GlobalArgs, args: ScanArgs) -> Result<Code, Failure> {
    let (config, env) = super::load_config(global)?;
    if config.servers.is_empty() {
        return Err(Failure::usage(anyhow::anyhow!(
            "no servers are configured (see `warden config` for the files searched)"
        )));
    }
    let policy = super::compile_policy(&config.policy)?;
    // The scan reads what each server lists now: every server is started.
    let builder = super::host_builder(policy, &config, &env)?.from_cache(false);
    let host = super::connect(builder, config.servers).await?;
    let mut scans = host.scans();
    add_confusables(&mut scans);
    let mut servers = Vec::new();
    let mut text = String::new();
    for entry in host.servers() {
        let name = &entry.spec.name;
        match &entry.status {
            ServerStatus::Connected { info } => {
                let found = scans.get(name).map_or(&[][..], Vec::as_slice);
                let (instructions, instruction_lines) =
                    instructions_scan(info.instructions.as_deref());
                let flagged = found.iter().filter(|scan| !scan.flags.is_empty()).count();
                let clean = found.len() - flagged;
                servers.push(json!({
                    "name": name, "state": "connected", "clean": clean, "flagged": flagged,
                    "tools": found, "instructions": instructions,
                }));
                text.push_str(&format!(
                    "{name}: {} tool{}, {clean} clean, {flagged} flagged\n",
                    found.len(),
                    if found.len() == 1 { "" } else { "s" }
                ));
                for scan in found.iter().filter(|scan| !scan.flags.is_empty()) {
                    for line in flag_lines(scan) {
                        text.push_str(&format!("  {line}\n"));
                    }
                }
                for line in instruction_lines {
                    text.push_str(&format!("  {line}\n"));
                }
            }
            ServerStatus::Failed { reason, .. } => {
                servers.push(json!({"name": name, "state": "failed", "reason": reason}));
                text.push_str(&format!(
                    "{name}: FAILED: {}\n",
                    inert(reason, Shape::Block)
                ));
            }
        }
    }
    host.shutdown().await;
    if args.json {
        println!(
            "{}",
            render::pretty(&json!({ "servers": Value::Array(servers) }))
        );
    } else {
        print!("{text}");
    }
    Ok(Code::Ok)
}

/// Adds `name.confusable` against every other server's names (by
/// [`warden_policy::scan::name_confusable`]): at connect time a server is only compared
/// with those reviewed before it.
fn add_confusables(scans: &mut ScansByServer) {
    let names: Vec<(String, String)> = scans
        .iter()
        .flat_map(|(server, found)| found.iter().map(|scan| (server.clone(), scan.tool.clone())))
        .collect();
    let others: Vec<(&str, &str)> = names
        .iter()
        .map(|(server, tool)| (server.as_str(), tool.as_str()))
        .collect();
    for (server, found) in scans.iter_mut() {
        for scan in found.iter_mut() {
            if scan.flags.iter().any(|flag| flag.id == "name.confusable") {
                continue;
            }
            if let Some(reason) = name_confusable(server, &scan.tool, &others) {
                scan.flags.push(Flag::rule("name.confusable", reason));
                scan.flags.sort_by_key(|flag| {
                    FLAG_IDS
                        .iter()
                        .position(|id| *id == flag.id)
                        .unwrap_or(usize::MAX)
                });
            }
        }
    }
}

/// The scan of a server's `instructions`, and its lines for the text output.
fn instructions_scan(instructions: Option<&str>) -> (Value, Vec<String>) {
    let Some(text) = instructions else {
        return (Value::Null, Vec::new());
    };
    let found = assess_text(Kind::Instructions, "instructions", text);
    let mut lines = Vec::new();
    if !found.flags.is_empty() {
        let ids: Vec<&str> = found.flags.iter().map(|flag| flag.id).collect();
        lines.push(format!("(server instructions): flags: {}", ids.join(", ")));
        for flag in &found.flags {
            lines.push(format!(
                "  {}: {}",
                flag.id,
                inert(&flag.reason, Shape::Line)
            ));
        }
    }
    (json!(found), lines)
}

/// `TOOL: id, id (quarantined)`, then one `id: reason` line per flag, indented.
pub fn flag_lines(scan: &ToolScan) -> Vec<String> {
    let ids: Vec<&str> = scan.flags.iter().map(|flag| flag.id).collect();
    let state = if scan.quarantined {
        "quarantined until approved"
    } else {
        "approved"
    };
    let mut out = vec![format!(
        "{}: flags: {} ({state})",
        inert(&scan.tool, Shape::Line),
        ids.join(", ")
    )];
    for flag in &scan.flags {
        out.push(format!(
            "  {}: {}",
            flag.id,
            inert(&flag.reason, Shape::Line)
        ));
    }
    out
}
