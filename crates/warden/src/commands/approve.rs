//! `warden approve SERVER`: shows a server's resolved definition and, for a project server,
//! records the approval of exactly that definition; then connects it and pins the current
//! definitions of its tools, after showing how they differ from the approved ones.

use std::sync::Mutex;

use warden_config::{EnvAllowance, NetworkSpec, ServerSpec, TransportSpec};
use warden_host::ServerStatus;
use warden_mcp::{Grants, ToolDef};

use crate::cli::{ApproveArgs, GlobalArgs};
use crate::exit::{Code, Failure};
use crate::untrusted::{Shape, inert};
use warden_host::approvals::{self, Change, Drift};
use warden_host::pins;

/// Runs `warden approve`.
pub async fn run(global: &GlobalArgs, args: ApproveArgs) -> Result<Code, Failure> {
    let (config, env) = super::load_config(global)?;
    let spec = super::configured_server(&config, &args.server)?.clone();
    let name = spec.name.clone();
    let grants = approvals::effective_grants(&spec);
    for line in definition_lines(
        &spec,
        grants.as_ref().ok().and_then(Option::as_ref),
        &config.project_env,
    ) {
        println!("{line}");
    }
    let grants = grants.map_err(|error| Failure {
        code: Code::Unavailable,
        error: anyhow::anyhow!("server `{name}` cannot start, so nothing was approved: {error}"),
    })?;
    let mut store = super::open_store(&env)?;
    if approvals::needs_approval(&spec) {
        let hash = approvals::definition_sha256(&spec, grants.as_ref());
        if store.is_approved(&hash).map_err(unavailable)? {
            println!("{name}: this definition is approved");
        } else {
            confirm(&args, &format!("Approve server `{name}` as shown?"))?;
            store
                .save_approval(&hash, &pins::key_for(&spec))
                .map_err(unavailable)?;
            println!("{name}: definition approved");
        }
    } else {
        println!("{name}: defined outside the project, so it starts without an approval");
    }
    drop(store);

    // Connect it alone, with every tool offered, to see its current tool definitions.
    let policy = super::compile_policy(&config.policy)?;
    let collect = std::sync::Arc::new(Collect(Mutex::new(None)));
    let builder =
        super::host_builder(policy, &config, &env)?.review(std::sync::Arc::clone(&collect) as _);
    let host = super::connect(builder, vec![spec.clone()]).await?;
    let status = host.servers().first().map(|entry| entry.status.clone());
    host.shutdown().await;
    package_lines(&spec, &env);
    let listed = match collect.0.lock() {
        Ok(mut listed) => listed.take(),
        Err(poisoned) => poisoned.into_inner().take(),
    };
    let Some(listed) = listed else {
        let reason = match status {
            Some(ServerStatus::Failed { reason, .. }) => reason,
            _ => "not connected".to_owned(),
        };
        return Err(Failure {
            code: Code::Unavailable,
            error: anyhow::anyhow!(
                "server `{name}` did not connect, so its tools were not pinned: {reason}"
            ),
        });
    };
    let key = pins::key_for(&spec);
    let mut store = super::open_store(&env)?;
    let current = approvals::tool_pins(&listed);
    // The description scan, against the pinned tool names of every other server.
    let mut others = Vec::new();
    for other in config.servers.iter().filter(|other| other.name != name) {
        if let Ok(Some(pins)) = store.tool_pins(&pins::key_for(other)) {
            others.extend(pins.into_iter().map(|pin| (other.name.clone(), pin.tool)));
        }
    }
    let mut others: Vec<(&str, &str)> = others
        .iter()
        .map(|(server, tool)| (server.as_str(), tool.as_str()))
        .collect();
    others.extend(
        listed
            .iter()
            .map(|tool| (name.as_str(), tool.name.as_str())),
    );
    let mut flagged = Vec::new();
    let mut unapproved = 0;
    let mut seen = std::collections::HashSet::new();
    for tool in listed.iter().filter(|tool| seen.insert(tool.name.clone())) {
        let flags = approvals::scan_tool(&name, tool, &others);
        if flags.is_empty() {
            continue;
        }
        let approval = approvals::flags_approval_key(&key, tool);
        let approved = store.is_approved(&approval).map_err(unavailable)?;
        if !approved {
            unapproved += 1;
        }
        flagged.push((
            approval,
            approvals::ToolScan {
                tool: tool.name.clone(),
                flags,
                score: None,
                quarantined: !approved,
            },
        ));
    }
    match store.tool_pins(&key).map_err(unavailable)? {
        None => println!(
            "{name}: {} tool definition{} not pinned yet:",
            current.len(),
            if current.len() == 1 { "" } else { "s" }
        ),
        Some(stored) => {
            let found = approvals::drift(&stored, &listed);
            if found.is_empty() && unapproved == 0 {
                println!("{name}: every tool definition matches the approved one");
                return Ok(Code::Ok);
            }
            if found.is_empty() {
                println!("{name}: every tool definition matches its pin");
            } else {
                println!("{name}: tool definitions differ from the approved ones:");
                for line in drift_lines(&found) {
                    println!("  {line}");
                }
            }
        }
    }
    println!("the tools as they are now (the descriptions in full: a model reads them):");
    for tool in &listed {
        for line in tool_lines(tool) {
            println!("  {line}");
        }
    }
    if !flagged.is_empty() {
        println!(
            "{name}: the description scan flagged {} tool{} (approving releases them):",
            flagged.len(),
            if flagged.len() == 1 { "" } else { "s" }
        );
        for (_, scan) in &flagged {
            for line in super::scan::flag_lines(scan) {
                println!("  {line}");
            }
        }
    }
    confirm(
        &args,
        &format!("Approve these tool definitions of `{name}`?"),
    )?;
    store
        .replace_tool_pins(&key, &current)
        .map_err(unavailable)?;
    for (approval, _) in &flagged {
        store.save_approval(approval, &key).map_err(unavailable)?;
    }
    println!("{name}: tool definitions approved");
    Ok(Code::Ok)
}

/// Offers every tool and keeps the list, for `approve`.
struct Collect(Mutex<Option<Vec<ToolDef>>>);

impl warden_host::Review for Collect {
    fn admit(&self, _spec: &ServerSpec) -> Result<(), String> {
        Ok(())
    }

    fn tools(&self, _spec: &ServerSpec, tools: Vec<ToolDef>) -> Vec<ToolDef> {
        if let Ok(mut listed) = self.0.lock() {
            *listed = Some(tools.clone());
        }
        tools
    }
}

/// A tool's name and title, then its whole description, indented: the server's words,
/// each line made inert.
fn tool_lines(tool: &ToolDef) -> Vec<String> {
    let name = inert(&tool.name, Shape::Line);
    let mut out = vec![match &tool.title {
        Some(title) => format!("{name}  ({})", inert(title, Shape::Line)),
        None => name.into_owned(),
    }];
    for line in tool.description.as_deref().unwrap_or_default().lines() {
        out.push(
            format!("    {}", inert(line, Shape::Line))
                .trim_end()
                .to_owned(),
        );
    }
    out
}

/// One line per drifted tool, with its description diff and changed parts indented (the
/// server's words, made inert).
pub fn drift_lines(found: &[Drift]) -> Vec<String> {
    let mut out = Vec::new();
    for item in found {
        let tool = inert(&item.tool, Shape::Line);
        match item.change {
            Change::Changed => {
                out.push(format!("changed: {tool} (held back until approved)"));
                if !item.description_diff.is_empty() {
                    out.push("  description:".to_owned());
                    for line in &item.description_diff {
                        out.push(format!("    {}", inert(line, Shape::Line)));
                    }
                }
                if !item.changed_keys.is_empty() {
                    out.push(format!(
                        "  also changed: {}",
                        inert(&item.changed_keys.join(", "), Shape::Line)
                    ));
                }
            }
            Change::Added => out.push(format!("new: {tool} (held back until approved)")),
            Change::Removed => out.push(format!("removed: {tool} (no longer listed)")),
        }
    }
    out
}

/// The resolved definition, as the approval covers it, and what it amounts to: the
/// effective profile (`grants`, for a confined local server) and every variable of your
/// environment it gets, by name, with the file that allows it for a project server.
fn definition_lines(
    spec: &ServerSpec,
    grants: Option<&Grants>,
    allowances: &[EnvAllowance],
) -> Vec<String> {
    let origin = &spec.origin;
    let format = serde_json::to_value(origin.format).unwrap_or_default();
    let mut out = vec![format!(
        "server `{}`, defined in {} ({} scope, {} format)",
        spec.name,
        origin.path.display(),
        crate::render::scope(origin.scope),
        format.as_str().unwrap_or("?")
    )];
    let from_environment = environment_lines(spec, allowances);
    match &spec.transport {
        TransportSpec::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut line = shell_word(command);
            for (index, arg) in args.iter().enumerate() {
                line.push(' ');
                // An argument built from your environment may hold a secret: not shown.
                let field = format!("args[{index}]");
                match spec.env_references.iter().find(|r| r.field == field) {
                    Some(reference) => line.push_str(&format!(
                        "<argument {index}: reads ${{{}}}, not shown>",
                        reference.variable
                    )),
                    None => line.push_str(&shell_word(arg)),
                }
            }
            out.push(format!("  runs:      {line}"));
            if let Some(cwd) = cwd {
                out.push(format!("  in:        {}", cwd.display()));
            }
            let keys: Vec<&str> = env.keys().map(String::as_str).collect();
            out.push(format!(
                "  variables: {} (values not shown)",
                list_or_none(&keys)
            ));
            let sandbox = &spec.sandbox;
            if sandbox.confine {
                let paths = |paths: &[std::path::PathBuf]| {
                    let shown: Vec<String> =
                        paths.iter().map(|p| p.display().to_string()).collect();
                    let shown: Vec<&str> = shown.iter().map(String::as_str).collect();
                    list_or_none(&shown)
                };
                out.push("  sandbox:   confined".to_owned());
                out.push(format!("    may read:  {}", paths(&sandbox.read)));
                out.push(format!("    may write: {}", paths(&sandbox.write)));
                out.push(format!(
                    "    network:   {}",
                    match &sandbox.network {
                        NetworkSpec::None => "none".to_owned(),
                        NetworkSpec::Host => "the host's network".to_owned(),
                        NetworkSpec::Allow(list) => format!(
                            "only through Warden's egress proxy, to {}",
                            list.rules
                                .iter()
                                .map(ToString::to_string)
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    }
                ));
                out.push(format!(
                    "    passed from your environment: {}",
                    if from_environment.is_empty() {
                        "(none)".to_owned()
                    } else {
                        from_environment.join("; ")
                    }
                ));
            } else {
                out.push(
                    "  sandbox:   NONE (confine = false: runs with your full rights)".to_owned(),
                );
                if !from_environment.is_empty() {
                    out.push(format!(
                        "  from your environment: {}",
                        from_environment.join("; ")
                    ));
                }
            }
            if let Some(grants) = grants {
                out.push(
                    "  in effect, everything it may reach (paths resolved, as of now):".to_owned(),
                );
                out.push(format!("    program:   {}", grants.program.display()));
                for line in grants.lines() {
                    out.push(format!("    {line}"));
                }
                let passed: Vec<&str> = grants.passed.iter().map(String::as_str).collect();
                out.push(format!(
                    "    variables from your environment, as every server gets them: {}",
                    list_or_none(&passed)
                ));
            }
        }
        TransportSpec::Http { url, headers, .. } => {
            out.push(format!("  url:       {url}"));
            let keys: Vec<&str> = headers.keys().map(String::as_str).collect();
            out.push(format!(
                "  headers:   {} (values not shown)",
                list_or_none(&keys)
            ));
            if !from_environment.is_empty() {
                out.push(format!(
                    "  from your environment: {}",
                    from_environment.join("; ")
                ));
            }
        }
        TransportSpec::Relay { relay, channel } => {
            out.push(format!(
                "  relayed through `{relay}`: {} (the server's definition is inside the sandbox)",
                channel.command.join(" ")
            ));
        }
    }
    out
}

/// Each variable of your environment the definition reads (`NAME (${NAME} in env.X)`) or
/// passes on (`sandbox.env`), with the file that allows it when one does.
fn environment_lines(spec: &ServerSpec, allowances: &[EnvAllowance]) -> Vec<String> {
    let mut uses: Vec<(String, String)> = spec
        .env_references
        .iter()
        .map(|r| {
            (
                r.variable.clone(),
                format!("${{{}}} in {}", r.variable, r.field),
            )
        })
        .collect();
    uses.extend(
        spec.sandbox
            .env
            .iter()
            .map(|name| (name.clone(), "sandbox.env".to_owned())),
    );
    let mut names: Vec<&String> = uses.iter().map(|(name, _)| name).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|name| {
            let wheres: Vec<&str> = uses
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, place)| place.as_str())
                .collect();
            let allowed = allowances
                .iter()
                .find(|a| a.server == spec.name && &a.variable == name)
                .map(|a| format!(", allowed by {}", a.path.display()))
                .unwrap_or_default();
            format!("{name} ({}{allowed})", wheres.join(", "))
        })
        .collect()
}

fn list_or_none(items: &[&str]) -> String {
    if items.is_empty() {
        "(none)".to_owned()
    } else {
        items.join(", ")
    }
}

/// `word` as a shell would need it written: as is when plainly safe, else single-quoted.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+%".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", inert(&word.replace('\'', r"'\''"), Shape::Line))
    }
}

/// For a server written as `npx -y PKG` / `uvx PKG`: the version Warden installed and
/// pinned for it (its first start, just now or earlier), which is what runs from now on.
fn package_lines(spec: &ServerSpec, env: &warden_config::Environment) {
    let Some(request) = warden_mcp::LaunchRequest::for_spec(spec) else {
        return;
    };
    let Some(package) = warden_packages::parse(&request.command, &request.args) else {
        return;
    };
    let name = inert(&spec.name, Shape::Line);
    let pin = super::open_store(env)
        .ok()
        .and_then(|store| store.package_pin_for(&pins::key_for(spec)).ok().flatten());
    match pin {
        Some(pin) => {
            println!(
                "{name}: package {}@{} ({}; asked for {}), installed in {}",
                inert(&pin.name, Shape::Line),
                inert(&pin.version, Shape::Line),
                pin.ecosystem,
                inert(&package.display(), Shape::Line),
                inert(&pin.dir, Shape::Line),
            );
            println!(
                "{name}: lockfile sha256 {}; installed tree sha256 {}; later starts run this \
                 install offline, `warden update {name}` resolves again",
                pin.lock_sha256, pin.tree_sha256
            );
        }
        None => println!(
            "{name}: package {} is not installed yet (its install failed; see above)",
            inert(&package.display(), Shape::Line)
        ),
    }
}

/// Asks `question` on the terminal; `--yes` answers it. Without a terminal and without
/// `--yes`, nothing is approved.
fn confirm(args: &ApproveArgs, question: &str) -> Result<(), Failure> {
    crate::terminal::confirm(args.yes, question).map_err(|refusal| Failure {
        code: Code::Denied,
        error: match refusal {
            crate::terminal::Refusal::NoTerminal => anyhow::anyhow!(
                "nothing approved: there is no terminal to ask on (use --yes after reviewing)"
            ),
            crate::terminal::Refusal::Declined => anyhow::anyhow!("nothing approved"),
        },
    })
}

fn unavailable(error: warden_store::StoreError) -> Failure {
    Failure {
        code: Code::Unavailable,
        error: error.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_definition_names_what_it_reads_from_your_environment_but_not_the_values() {
        use std::path::PathBuf;
        use warden_config::{EnvReference, Format, Origin, SandboxSpec, Scope};
        let spec = ServerSpec {
            name: "gh".into(),
            transport: TransportSpec::Stdio {
                command: "gh-mcp".into(),
                args: vec!["--token".into(), "ghp_secret".into()],
                env: Default::default(),
                cwd: None,
            },
            timeouts: Default::default(),
            era: Default::default(),
            max_message_bytes: 1024,
            origin: Origin {
                scope: Scope::Project,
                format: Format::ClaudeCode,
                path: PathBuf::from("/p/.mcp.json"),
            },
            sandbox: SandboxSpec {
                env: vec!["LANGUAGE".into()],
                ..SandboxSpec::default()
            },
            env_references: vec![EnvReference {
                variable: "GITHUB_TOKEN".into(),
                field: "args[1]".into(),
            }],
            lifecycle: Default::default(),
        };
        let allowances = [EnvAllowance {
            server: "gh".into(),
            variable: "GITHUB_TOKEN".into(),
            path: PathBuf::from("/u/warden.toml"),
            at: None,
        }];
        let text = definition_lines(&spec, None, &allowances).join("\n");
        assert!(!text.contains("ghp_secret"), "{text}");
        assert!(
            text.contains(
                "runs:      gh-mcp --token <argument 1: reads ${GITHUB_TOKEN}, not shown>"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "passed from your environment: GITHUB_TOKEN (${GITHUB_TOKEN} in args[1], allowed \
                 by /u/warden.toml); LANGUAGE (sandbox.env)"
            ),
            "{text}"
        );
    }

    #[test]
    fn shell_words_are_quoted_when_needed() {
        assert_eq!(shell_word("/usr/bin/node"), "/usr/bin/node");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
        assert_eq!(shell_word("x\ny"), r"'x\ny'");
    }
}
