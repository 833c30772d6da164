//! `warden config`: the resolved servers and where each came from, the policy, and the
//! `[model]` and `[agent]` settings. Values of environment variables and headers are never
//! printed: they are often secrets. (`model.api_key_env` is the name of a variable, never a
//! key, so it is shown.)

use serde_json::{Value, json};
use std::time::Duration;

use warden_config::{RemoteTransport, ResolvedConfig, TransportSpec};
use warden_policy::Effect;

use crate::cli::{ConfigArgs, GlobalArgs};
use crate::exit::{Code, Failure};
use crate::render;

const HIDDEN: &str = "<hidden>";

/// Runs `warden config`.
pub fn run(global: &GlobalArgs, args: ConfigArgs) -> Result<Code, Failure> {
    let (config, env) = super::load_config(global)?;
    if args.json {
        println!("{}", render::pretty(&redacted(&config)));
    } else {
        print!("{}", text(&config));
        // Where per-project settings go (`[project_servers.NAME] env`, private servers).
        if global.config.is_none()
            && let Ok(local) = warden_config::local_config_path(&env)
        {
            println!(
                "\nLocal file for this project{}: {}",
                if local.exists() { "" } else { " (not created)" },
                local.display()
            );
        }
    }
    Ok(Code::Ok)
}

/// The configuration as JSON with every env and header value replaced by `<hidden>`.
fn redacted(config: &ResolvedConfig) -> Value {
    let mut value = json!(config);
    if let Some(servers) = value["servers"].as_array_mut() {
        for (server, spec) in servers.iter_mut().zip(&config.servers) {
            // An argument built from a variable of the environment may hold a secret.
            for reference in &spec.env_references {
                let index = reference
                    .field
                    .strip_prefix("args[")
                    .and_then(|rest| rest.strip_suffix(']'))
                    .and_then(|index| index.parse::<usize>().ok());
                if let Some(index) = index
                    && let Some(arg) = server
                        .get_mut("transport")
                        .and_then(|transport| transport.get_mut("args"))
                        .and_then(|args| args.get_mut(index))
                {
                    *arg = json!(HIDDEN);
                }
            }
            for key in ["env", "headers"] {
                let secrets = server
                    .get_mut("transport")
                    .and_then(|transport| transport.get_mut(key))
                    .and_then(Value::as_object_mut);
                if let Some(map) = secrets {
                    for entry in map.values_mut() {
                        *entry = json!(HIDDEN);
                    }
                }
            }
        }
    }
    value
}

fn text(config: &ResolvedConfig) -> String {
    let mut out = String::from("Files read (later ones win):\n");
    if config.files.is_empty() {
        out.push_str("  (none)\n");
    }
    for origin in &config.files {
        out.push_str(&format!(
            "  {:8} {}\n",
            render::scope(origin.scope),
            origin.path.display()
        ));
    }
    out.push_str("\nServers:\n");
    if config.servers.is_empty() {
        out.push_str("  (none)\n");
    }
    for spec in &config.servers {
        let what = match &spec.transport {
            TransportSpec::Stdio {
                command, args, env, ..
            } => {
                let mut line = format!("stdio  {command}");
                for (index, arg) in args.iter().enumerate() {
                    line.push(' ');
                    let field = format!("args[{index}]");
                    if spec.env_references.iter().any(|r| r.field == field) {
                        line.push_str(HIDDEN);
                    } else {
                        line.push_str(arg);
                    }
                }
                if !env.is_empty() {
                    let keys: Vec<&str> = env.keys().map(String::as_str).collect();
                    line.push_str(&format!("  (env: {})", keys.join(", ")));
                }
                line
            }
            TransportSpec::Http {
                url,
                headers,
                settings,
            } => {
                let mut line = match settings.transport {
                    RemoteTransport::Http => format!("http   {url}"),
                    RemoteTransport::Sse => {
                        format!("sse    {url}  (deprecated HTTP+SSE transport, 2024-11-05)")
                    }
                };
                if settings.allow_http {
                    line.push_str("  (allow_http)");
                }
                if !headers.is_empty() {
                    let keys: Vec<&str> = headers.keys().map(String::as_str).collect();
                    line.push_str(&format!("  (headers: {})", keys.join(", ")));
                }
                line
            }
            TransportSpec::Relay { relay, .. } => format!("relay  {relay}"),
        };
        // A project file is a repository's words: its command line is made inert too.
        out.push_str(&format!(
            "  {}: {}\n    from {} ({})\n",
            spec.name,
            crate::untrusted::inert(&what, crate::untrusted::Shape::Line),
            spec.origin.path.display(),
            render::scope(spec.origin.scope)
        ));
        if !spec.env_references.is_empty() {
            let uses: Vec<String> = spec
                .env_references
                .iter()
                .map(|r| format!("{} ({})", r.variable, r.field))
                .collect();
            out.push_str(&format!(
                "    reads from your environment: {}\n",
                uses.join(", ")
            ));
        }
    }
    if !config.project_env.is_empty() {
        out.push_str("\nProject servers may read from your environment ([project_servers]):\n");
        for allowance in &config.project_env {
            let at = allowance.at.map(|at| format!(":{at}")).unwrap_or_default();
            out.push_str(&format!(
                "  {}: {}  ({}{at})\n",
                allowance.server,
                allowance.variable,
                allowance.path.display()
            ));
        }
    }
    let policy = &config.policy;
    if !policy.config.rules.is_empty()
        || !policy.config.servers.is_empty()
        || !policy.not_applied.is_empty()
    {
        out.push_str("\nPolicy (docs/policy.md):\n");
        for (index, rule) in policy.config.rules.iter().enumerate() {
            let place = policy
                .rule_source(index)
                .map(|source| format!("  ({source})"))
                .unwrap_or_default();
            out.push_str(&format!(
                "  policy.rules[{index}]: {} {}{place}\n",
                effect_name(rule.effect),
                rule.tools.as_slice().join(", ")
            ));
        }
        for name in policy.config.servers.keys() {
            let place = policy
                .server_sources
                .get(name)
                .map(|source| format!("  ({source})"))
                .unwrap_or_default();
            out.push_str(&format!("  settings for server {name}{place}\n"));
        }
        for note in &policy.not_applied {
            out.push_str(&format!(
                "  not applied: settings for server {} ({}): {}\n",
                note.server, note.source, note.reason
            ));
        }
    }
    out.push_str(&settings(config));
    if !config.shadowed.is_empty() {
        out.push_str("\nShadowed:\n");
        for shadowed in &config.shadowed {
            out.push_str(&format!(
                "  {} in {} is replaced by {}\n",
                shadowed.name,
                shadowed.hidden.path.display(),
                shadowed.winner.path.display()
            ));
        }
    }
    out
}

/// The `[model]` and `[agent]` sections: every key, its value or `(default)`.
fn settings(config: &ResolvedConfig) -> String {
    fn line<T: ToString>(out: &mut String, key: &str, value: Option<T>, default: Option<String>) {
        let shown = match (value, default) {
            (Some(value), _) => value.to_string(),
            (None, Some(default)) => format!("{default} (default)"),
            (None, None) => "(default)".to_owned(),
        };
        out.push_str(&format!(
            "  {key} = {}\n",
            crate::untrusted::inert(&shown, crate::untrusted::Shape::Line)
        ));
    }
    fn secs(d: Duration) -> String {
        if d.subsec_millis() == 0 {
            format!("{}s", d.as_secs())
        } else {
            format!("{}ms", d.as_millis())
        }
    }
    let (m, a) = (&config.model, &config.agent);
    let mut out = String::from("\nModel (docs/config.md):\n");
    line(&mut out, "provider", m.provider.as_ref(), None);
    line(&mut out, "name", m.name.as_ref(), None);
    line(&mut out, "base_url", m.base_url.as_ref(), None);
    line(&mut out, "api_key_env", m.api_key_env.as_ref(), None);
    let d = |v: &dyn ToString| Some(v.to_string());
    line(
        &mut out,
        "max_tokens",
        m.max_tokens,
        d(&warden_config::DEFAULT_MAX_TOKENS),
    );
    line(&mut out, "context_window", m.context_window, None);
    line(
        &mut out,
        "idle_timeout",
        m.idle_timeout.map(secs),
        Some(secs(warden_config::DEFAULT_IDLE_TIMEOUT)),
    );
    line(
        &mut out,
        "max_retries",
        m.max_retries,
        d(&warden_config::DEFAULT_MAX_RETRIES),
    );
    out.push_str("\nAgent:\n");
    line(
        &mut out,
        "max_turns",
        a.max_turns,
        d(&warden_config::DEFAULT_MAX_TURNS),
    );
    line(
        &mut out,
        "turn_timeout",
        a.turn_timeout.map(secs),
        Some(secs(warden_config::DEFAULT_TURN_TIMEOUT)),
    );
    line(
        &mut out,
        "result_warn_tokens",
        a.result_warn_tokens,
        d(&warden_config::DEFAULT_RESULT_WARN_TOKENS),
    );
    line(
        &mut out,
        "result_cap_tokens",
        a.result_cap_tokens,
        d(&warden_config::DEFAULT_RESULT_CAP_TOKENS),
    );
    line(
        &mut out,
        "offload_chars",
        a.offload_chars,
        d(&warden_config::DEFAULT_OFFLOAD_CHARS),
    );
    line(
        &mut out,
        "tool_budget",
        a.tool_budget,
        d(&warden_config::DEFAULT_TOOL_BUDGET),
    );
    line(
        &mut out,
        "tool_definition_token_budget",
        a.tool_definition_token_budget,
        d(&warden_config::DEFAULT_TOOL_DEFINITION_TOKEN_BUDGET),
    );
    let favourites = (!a.favourites.is_empty()).then(|| a.favourites.join(", "));
    line(&mut out, "favourites", favourites, Some("none".to_owned()));
    line(
        &mut out,
        "background_after",
        a.background_after.map(secs),
        Some(secs(warden_config::DEFAULT_BACKGROUND_AFTER)),
    );
    let prompt = a
        .system_prompt
        .as_ref()
        .map(|p| format!("{} characters of extra instructions", p.chars().count()));
    line(&mut out, "system_prompt", prompt, Some("none".to_owned()));
    out
}

fn effect_name(effect: Effect) -> &'static str {
    match effect {
        Effect::Allow => "allow",
        Effect::Ask => "ask",
        Effect::Deny => "deny",
        Effect::Hide => "hide",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_hidden_and_nothing_is_added() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("warden.toml");
        std::fs::write(
            &path,
            "[servers.a]\ncommand = \"/bin/true\"\nenv = { TOKEN = \"s3cret\" }\n\
             [servers.b]\nurl = \"https://example.com/mcp\"\nheaders = { Authorization = \"Bearer s3cret\" }\n",
        )
        .unwrap();
        let vars = [("HOME".to_owned(), dir.path().display().to_string())].into();
        let env = warden_config::Environment::from_vars(dir.path().to_path_buf(), vars).unwrap();
        let config = warden_config::load_file(&path, &env).unwrap();
        let value = redacted(&config);
        let text = value.to_string();
        assert!(!text.contains("s3cret"), "{text}");
        assert_eq!(value["servers"][0]["transport"]["env"]["TOKEN"], HIDDEN);
        assert_eq!(
            value["servers"][1]["transport"]["headers"]["Authorization"],
            HIDDEN
        );
        assert!(
            value["servers"][1]["transport"].get("env").is_none(),
            "{text}"
        );
    }

    #[test]
    fn model_and_agent_settings_are_shown() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("warden.toml");
        std::fs::write(
            &path,
            "[model]\nprovider = \"openai\"\napi_key_env = \"OPENAI_API_KEY\"\nidle_timeout = \"90s\"\n\
             [agent]\nmax_turns = 7\nfavourites = [\"time__now\"]\n",
        )
        .unwrap();
        let vars = [("HOME".to_owned(), dir.path().display().to_string())].into();
        let env = warden_config::Environment::from_vars(dir.path().to_path_buf(), vars).unwrap();
        let config = warden_config::load_file(&path, &env).unwrap();
        let shown = text(&config);
        for expected in [
            "  provider = openai\n",
            "  api_key_env = OPENAI_API_KEY\n",
            "  idle_timeout = 90s\n",
            "  max_tokens = 4096 (default)\n",
            "  max_turns = 7\n",
            "  favourites = time__now\n",
            "  system_prompt = none (default)\n",
        ] {
            assert!(shown.contains(expected), "{expected:?} in\n{shown}");
        }
        let value = redacted(&config);
        assert_eq!(value["model"]["api_key_env"], "OPENAI_API_KEY");
        assert_eq!(value["agent"]["max_turns"], 7);
    }
}
