//! `warden tools`: every server with its state and tools, and what the policy makes of
//! each tool: whether its server is trusted, what it is taken to do, and its decision in a
//! clean context with no arguments. Tools the policy hides are only counted.
//!
//! `warden tools --search QUERY` prints instead the ranking of [`ToolSearch`], the one the
//! agent loop's tool search returns to the model.

use std::time::Duration;

use serde_json::{Value, json};
use warden_host::{CatalogueTool, DEFAULT_SEARCH_LIMIT, Hit, Host, ServerStatus, ToolSearch};
use warden_policy::{Provenance, Trust, Verdict};

use super::{DriftByServer, ScansByServer};
use crate::cli::{GlobalArgs, ToolsArgs};
use crate::exit::{Code, Failure};
use crate::render;
use crate::untrusted::{Shape, inert};
use warden_host::approvals::ToolScan;

/// Runs `warden tools`; with `-v` (`verbose` > 0) every local server's grants are listed.
pub async fn run(global: &GlobalArgs, args: ToolsArgs, verbose: u8) -> Result<Code, Failure> {
    let (config, env) = super::load_config(global)?;
    if config.servers.is_empty() {
        return Err(Failure::usage(anyhow::anyhow!(
            "no servers are configured (see `warden config` for the files searched)"
        )));
    }
    let policy = super::compile_policy(&config.policy)?;
    // The catalogue cache answers for every server it knows as it is now; `--refresh`
    // starts them all and updates it.
    let builder = super::host_builder(policy, &config, &env)?.from_cache(!args.refresh);
    let host = super::connect(builder, config.servers).await?;
    note_cached(&host);
    let (drift, scans) = (host.drift(), host.scans());
    if let Some(query) = &args.search {
        let limit = args.limit.unwrap_or(DEFAULT_SEARCH_LIMIT);
        search(&host, query, limit, args.json);
        let wait = if args.refresh {
            REFRESH_VECTORS_WAIT
        } else {
            SEARCH_VECTORS_WAIT
        };
        settle_vectors(wait).await;
    } else if args.json {
        let mut value = listing(&host, &drift, &scans);
        if verbose > 0
            && let Some(servers) = value["servers"].as_array_mut()
        {
            for (server, entry) in servers.iter_mut().zip(host.servers()) {
                if let Some(grants) = grants_json(&entry.spec) {
                    server["grants"] = grants;
                }
            }
        }
        println!("{}", render::pretty(&value));
    } else {
        print!("{}", text(&host, &drift, &scans, verbose > 0));
    }
    host.shutdown().await;
    Ok(Code::Ok)
}

/// How long a `warden tools --search` waits, after printing its answer, for the search
/// encoder to compute the vectors of definitions it has not seen (decision 0047): each
/// vector is stored as it is computed, so a catalogue too large for one wait is finished
/// by the next searches.
pub const SEARCH_VECTORS_WAIT: Duration = Duration::from_secs(30);

/// The same wait with `--refresh`, which is asked for when the user expects work.
pub const REFRESH_VECTORS_WAIT: Duration = Duration::from_secs(600);

/// After a search: lets the search encoder compute and store the vectors of the
/// definitions it has not seen, at most `wait` (a note on stderr says so; Ctrl-C stops
/// the wait and keeps what was stored), so that the next search ranks with them.
async fn settle_vectors(wait: Duration) {
    let pending = warden_host::pending_search_vectors();
    if pending == 0 {
        return;
    }
    eprintln!(
        "warden: computing the search model's vectors of {pending} tool definitions once \
         (about 0.1 s each; waiting at most {} s, Ctrl-C keeps what is done, the next \
         search goes on)",
        wait.as_secs()
    );
    crate::signals::watch();
    let settle = tokio::task::spawn_blocking(move || warden_host::settle_search_vectors(wait));
    tokio::select! {
        left = settle => {
            if let Ok(left) = left && left > 0 {
                eprintln!(
                    "warden: {left} tool definitions still without vectors; the next \
                     `warden tools --search` goes on"
                );
            }
        }
        () = crate::signals::interrupted() => {
            eprintln!("warden: interrupted; the vectors computed so far are kept");
        }
    }
}

/// How long ago, in one unit: `42s`, `5m`, `3h`, `2d`.
pub fn age(age: std::time::Duration) -> String {
    let secs = age.as_secs();
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86_400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

/// How old `entry`'s cached catalogue is, if it comes from the cache.
fn cached_age(entry: &warden_host::ServerEntry) -> Option<std::time::Duration> {
    entry.cached_at().map(|at| {
        std::time::SystemTime::now()
            .duration_since(at)
            .unwrap_or_default()
    })
}

/// Says on stderr how many servers were answered from the catalogue cache, and how old
/// the oldest answer is.
fn note_cached(host: &Host) {
    let ages: Vec<std::time::Duration> = host.servers().iter().filter_map(cached_age).collect();
    if let Some(oldest) = ages.iter().max() {
        eprintln!(
            "warden: {} of {} servers not started: their tools come from the catalogue cache \
             (oldest {} old); `warden tools --refresh` starts them",
            ages.len(),
            host.servers().len(),
            age(*oldest)
        );
    }
}

/// Prints the tools that best fit `query`: a table, or with `json` an array of
/// `{qualified, server, tool, score}` in rank order. No hit is not an error: a note on
/// stderr (and `[]` in JSON).
fn search(host: &Host, query: &str, limit: usize, json: bool) {
    for entry in host.servers() {
        if let ServerStatus::Failed { reason, .. } = &entry.status {
            eprintln!(
                "warden: {} failed, its tools are not searched: {}",
                entry.spec.name,
                inert(reason, Shape::Line)
            );
        }
    }
    let hits = ToolSearch::for_host(host).search(query, limit);
    if hits.is_empty() {
        eprintln!("no tool matches {query:?}");
    }
    if json {
        println!("{}", render::pretty(&hits));
    } else if !hits.is_empty() {
        print!("{}", ranking(&hits));
    }
}

/// The hits as a table: rank, qualified name, server, the tool's own name (as the server
/// wrote it: made inert), score.
fn ranking(hits: &[Hit]) -> String {
    let names: Vec<String> = hits
        .iter()
        .map(|hit| inert(&hit.tool, Shape::Line).into_owned())
        .collect();
    let width = |column: fn(&Hit) -> &str, title: &str| {
        hits.iter()
            .map(|hit| column(hit).chars().count())
            .chain([title.len()])
            .max()
            .unwrap_or(0)
    };
    let qualified = width(|hit| &hit.qualified, "TOOL");
    let server = width(|hit| &hit.server, "SERVER");
    let tool = names
        .iter()
        .map(|name| name.chars().count())
        .chain(["NAME".len()])
        .max()
        .unwrap_or(0);
    let rank = hits.len().to_string().len().max(1);
    let mut out = format!(
        "{:>rank$}  {:qualified$}  {:server$}  {:tool$}  SCORE\n",
        "#", "TOOL", "SERVER", "NAME"
    );
    for (i, (hit, name)) in hits.iter().zip(&names).enumerate() {
        out.push_str(&format!(
            "{:>rank$}  {:qualified$}  {:server$}  {name:tool$}  {:.4}\n",
            i + 1,
            hit.qualified,
            hit.server,
            hit.score
        ));
    }
    out
}

fn listing(host: &Host, drift: &DriftByServer, scans: &ScansByServer) -> Value {
    let servers: Vec<Value> = host
        .servers()
        .iter()
        .map(|entry| {
            let name = &entry.spec.name;
            let mut server = json!({
                "name": name,
                "origin": entry.spec.origin,
            });
            if let Some(confined) = confined(&entry.spec) {
                server["confined"] = json!(confined);
            }
            if let Some(auth) = super::login::auth_state(name) {
                server["auth"] = json!(super::login::describe(&auth));
            }
            match &entry.status {
                ServerStatus::Connected { info } => {
                    match (cached_age(entry), entry.cached_at()) {
                        (Some(age), Some(at)) => {
                            server["state"] = json!("cached");
                            server["cached_age_s"] = json!(age.as_secs());
                            server["cached_at_ms"] =
                                json!(at.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| {
                                    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
                                }));
                        }
                        _ => server["state"] = json!("connected"),
                    }
                    server["attempts"] = json!(info.connect_attempts);
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
                            let verdict = default_verdict(host, tool);
                            json!({
                                "qualified_name": tool.qualified,
                                "name": tool.def.name,
                                "title": tool.def.title,
                                "description": tool.def.description,
                                "annotations": tool.def.annotations,
                                "input_schema": tool.def.input_schema,
                                "flags": flags_of(scans, name, &tool.def.name),
                                "policy": {
                                    "trust": tool.facts.trust,
                                    "may_write": tool.facts.may_write(),
                                    "may_reach_outside": tool.facts.open_world(),
                                    "decision": verdict.decision,
                                    "reasons": verdict
                                        .reasons
                                        .iter()
                                        .map(|r| r.text.as_ref())
                                        .collect::<Vec<_>>(),
                                },
                            })
                        })
                        .collect();
                    server["hidden_tools"] = json!(hidden_count(host, name));
                    server["drift"] = json!(drift.get(name).map_or(&[][..], Vec::as_slice));
                    server["quarantined"] = quarantined(scans, name)
                        .map(|scan| json!({"tool": scan.tool, "flags": scan.flags}))
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
                    server["state"] = json!(failure_state(reason));
                    server["reason"] = json!(reason);
                    server["stderr_tail"] = json!(stderr_tail);
                }
            }
            server
        })
        .collect();
    json!({ "servers": servers })
}

/// The state of a server that did not connect: `needs_authorization` (it answered 401 or
/// 403: up, but wants credentials), `down` (unreachable after every attempt), or `failed`.
/// Read from the reason's wording, which warden-mcp's `ConnectError` fixes.
fn failure_state(reason: &str) -> &'static str {
    if reason.starts_with("needs authorization") {
        "needs_authorization"
    } else if reason.starts_with("down after") {
        "down"
    } else {
        "failed"
    }
}

/// The decision for a call with no arguments in a clean context: what the tool gets by
/// default, before any argument constraint or context label comes into play.
fn default_verdict(host: &Host, tool: &CatalogueTool) -> Verdict {
    host.decide(
        tool,
        &Value::Object(serde_json::Map::new()),
        &Provenance::new(),
    )
}

fn hidden_count(host: &Host, server: &str) -> usize {
    host.catalogue()
        .hidden()
        .iter()
        .filter(|hidden| hidden.server == server)
        .count()
}

/// `untrusted  may write, may reach outside`, the policy's view of a tool in words.
fn effects(tool: &CatalogueTool) -> String {
    let trust = match tool.facts.trust {
        Trust::Trusted => "trusted",
        Trust::Untrusted => "untrusted",
    };
    let writes = if tool.facts.may_write() {
        "may write"
    } else {
        "read-only"
    };
    let reach = if tool.facts.open_world() {
        "may reach outside"
    } else {
        "stays inside"
    };
    format!("{trust:9}  {writes}, {reach}")
}

/// Whether a local server runs confined; `None` for remote servers.
fn confined(spec: &warden_config::ServerSpec) -> Option<bool> {
    match spec.transport {
        warden_config::TransportSpec::Stdio { .. } => Some(spec.sandbox.confine),
        warden_config::TransportSpec::Http { .. } => None,
        // Confined inside the sandbox, by the supervisor there; not decided here.
        warden_config::TransportSpec::Relay { .. } => None,
    }
}

/// The flags of `server`'s tool `tool`.
fn flags_of<'a>(
    scans: &'a ScansByServer,
    server: &str,
    tool: &str,
) -> &'a [warden_policy::scan::Flag] {
    scans
        .get(server)
        .and_then(|found| found.iter().find(|scan| scan.tool == tool))
        .map_or(&[], |scan| scan.flags.as_slice())
}

/// `server`'s quarantined tools.
fn quarantined<'a>(
    scans: &'a ScansByServer,
    server: &str,
) -> impl Iterator<Item = &'a ToolScan> + use<'a> {
    scans
        .get(server)
        .into_iter()
        .flatten()
        .filter(|scan| scan.quarantined)
}

/// How many of `server`'s tools are held back because their definitions are not approved.
fn held_back(drift: &DriftByServer, server: &str) -> usize {
    drift
        .get(server)
        .map_or(0, |found| found.iter().filter(|d| d.held_back()).count())
}

/// What a confined local server is granted, as `warden approve` shows it (`None` for a
/// remote or unconfined server).
fn grant_lines(spec: &warden_config::ServerSpec) -> Option<Vec<String>> {
    match warden_host::approvals::effective_grants(spec) {
        Ok(None) => None,
        Ok(Some(grants)) => {
            let mut out = vec![format!("  grants (program {}):", grants.program.display())];
            out.extend(grants.lines().into_iter().map(|line| format!("    {line}")));
            let passed: Vec<&str> = grants.passed.iter().map(String::as_str).collect();
            let set: Vec<&str> = grants.set.iter().map(String::as_str).collect();
            out.push(format!(
                "    variables: from your environment {}; set by the definition {}",
                if passed.is_empty() {
                    "(none)".to_owned()
                } else {
                    passed.join(", ")
                },
                if set.is_empty() {
                    "(none)".to_owned()
                } else {
                    set.join(", ")
                },
            ));
            Some(out)
        }
        Err(error) => Some(vec![format!("  grants: cannot be computed: {error}")]),
    }
}

/// [`grant_lines`] as JSON: the effective profile, or `{"error": ...}`.
fn grants_json(spec: &warden_config::ServerSpec) -> Option<Value> {
    match warden_host::approvals::effective_grants(spec) {
        Ok(grants) => grants.map(|g| json!(g)),
        Err(error) => Some(json!({ "error": error.to_string() })),
    }
}

fn text(host: &Host, drift: &DriftByServer, scans: &ScansByServer, verbose: bool) -> String {
    let mut out = String::new();
    for entry in host.servers() {
        let name = &entry.spec.name;
        let grants = if verbose {
            grant_lines(&entry.spec)
        } else {
            None
        };
        match &entry.status {
            ServerStatus::Connected { info } => {
                let catalogue = host.catalogue();
                let tools: Vec<_> = catalogue.tools_of(name).collect();
                // What the server says about itself: its words, made inert.
                let implementation = match (&info.name, &info.version) {
                    (Some(n), Some(v)) => {
                        format!("  {} {}", inert(n, Shape::Line), inert(v, Shape::Line))
                    }
                    (Some(n), None) => format!("  {}", inert(n, Shape::Line)),
                    _ => String::new(),
                };
                let hidden = match hidden_count(host, name) {
                    0 => String::new(),
                    n => format!(", {n} hidden by policy"),
                };
                let held = match held_back(drift, name) {
                    0 => String::new(),
                    n => format!(", {n} held back for approval"),
                };
                let held = match quarantined(scans, name).count() {
                    0 => held,
                    n => format!("{held}, {n} quarantined"),
                };
                let unconfined = if confined(&entry.spec) == Some(false) {
                    ", UNCONFINED"
                } else {
                    ""
                };
                let unconfined = match info.connect_attempts {
                    0 | 1 => unconfined.to_owned(),
                    n => format!("{unconfined}, after {n} attempts"),
                };
                let state = match cached_age(entry) {
                    Some(old) => format!("cached {} ago (not started)", age(old)),
                    None => "connected".to_owned(),
                };
                out.push_str(&format!(
                    "{name}: {state}, {} era ({}){implementation}, {} tool{}{hidden}{held}{unconfined}\n",
                    render::era(info.era),
                    inert(&info.protocol_version, Shape::Line),
                    tools.len(),
                    if tools.len() == 1 { "" } else { "s" }
                ));
                for line in grants.iter().flatten() {
                    out.push_str(&format!("{line}\n"));
                }
                if let Some(auth) = super::login::auth_state(name)
                    .filter(|auth| !matches!(auth, warden_oauth::AuthState::NeedsSignIn))
                {
                    out.push_str(&format!(
                        "  sign-in: {}\n",
                        inert(&super::login::describe(&auth), Shape::Line)
                    ));
                }
                let rows: Vec<(&CatalogueTool, String, String)> = tools
                    .iter()
                    .map(|tool| {
                        let decision = default_verdict(host, tool).decision.to_string();
                        (*tool, decision, effects(tool))
                    })
                    .collect();
                let width = tools.iter().map(|t| t.qualified.len()).max().unwrap_or(0);
                let effects_width = rows.iter().map(|r| r.2.len()).max().unwrap_or(0);
                for (tool, decision, effects) in rows {
                    let summary = tool
                        .def
                        .description
                        .as_deref()
                        .map(|about| inert(&render::first_line(about), Shape::Line).into_owned())
                        .unwrap_or_default();
                    let line = format!(
                        "  {:width$}  {decision:5}  {effects:effects_width$}  {summary}",
                        tool.qualified
                    );
                    out.push_str(line.trim_end());
                    out.push('\n');
                    let flags = flags_of(scans, name, &tool.def.name);
                    if !flags.is_empty() {
                        let ids: Vec<&str> = flags.iter().map(|flag| flag.id).collect();
                        out.push_str(&format!("    flags: {} (approved)\n", ids.join(", ")));
                    }
                }
                for rejected in host.catalogue().rejected() {
                    if &rejected.server == name {
                        out.push_str(&format!(
                            "  (left out: {}: {})\n",
                            inert(&rejected.name, Shape::Line),
                            inert(&rejected.reason, Shape::Line)
                        ));
                    }
                }
                let held: Vec<&ToolScan> = quarantined(scans, name).collect();
                if !held.is_empty() {
                    out.push_str(&format!(
                        "  quarantined, their descriptions were flagged (review, then run \
                         `warden approve {name}`):\n"
                    ));
                    for scan in held {
                        for line in super::scan::flag_lines(scan) {
                            out.push_str(&format!("    {line}\n"));
                        }
                    }
                }
                if let Some(found) = drift.get(name) {
                    out.push_str(&format!(
                        "  tool definitions differ from the approved ones (review, then run \
                         `warden approve {name}`):\n"
                    ));
                    for line in super::approve::drift_lines(found) {
                        out.push_str(&format!("    {line}\n"));
                    }
                }
            }
            ServerStatus::Failed {
                reason,
                stderr_tail,
            } => {
                let label = match failure_state(reason) {
                    "needs_authorization" => "NEEDS AUTHORIZATION",
                    "down" => "DOWN",
                    _ => "FAILED",
                };
                out.push_str(&format!(
                    "{name}: {label}: {}\n",
                    inert(reason, Shape::Block)
                ));
                if let Some(auth) = super::login::auth_state(name) {
                    out.push_str(&format!(
                        "  sign-in: {}\n",
                        inert(&super::login::describe(&auth), Shape::Line)
                    ));
                }
                for line in stderr_tail {
                    out.push_str(&format!("  | {}\n", inert(line, Shape::Line)));
                }
                for line in grants.iter().flatten() {
                    out.push_str(&format!("{line}\n"));
                }
            }
        }
    }
    out
}
