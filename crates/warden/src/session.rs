//! What `warden run` and `warden chat` share: the model and agent settings from
//! `[model]`, `[agent]` and the command line, the session's folder, and the approval
//! prompt. (The audit log is written by the host's session: `warden_host::Session`.)

use std::path::PathBuf;

use futures::future::BoxFuture;
use warden_agent::model::{ModelSettings, Provider, RetryPolicy};
use warden_agent::{AgentSettings, ApprovalAnswer, ApprovalRequest, Approver, Event, Observer};
use warden_config::{Environment, ResolvedConfig};
use warden_store::Store;

use crate::cli::ModelArgs;
use crate::exit::Failure;
use crate::untrusted::{Shape, inert};

/// Longest answer read at the approval prompt.
const MAX_ANSWER_BYTES: u64 = 1024;

/// The model settings: `[model]`, overridden by the command line.
pub fn model_settings(config: &ResolvedConfig, args: &ModelArgs) -> Result<ModelSettings, Failure> {
    let model = &config.model;
    let provider = args
        .provider
        .clone()
        .or_else(|| model.provider.clone())
        .ok_or_else(|| {
            Failure::usage(anyhow::anyhow!(
                "no model configured: add a [model] table to warden.toml (docs/config.md) \
                 or pass --provider and --model"
            ))
        })?;
    let provider = Provider::parse(&provider).map_err(Failure::usage)?;
    let name = args
        .model
        .clone()
        .or_else(|| model.name.clone())
        .ok_or_else(|| {
            Failure::usage(anyhow::anyhow!(
                "no model name: set `name` in [model] or pass --model"
            ))
        })?;
    let retry = RetryPolicy {
        max_attempts: model
            .max_retries
            .unwrap_or(warden_config::DEFAULT_MAX_RETRIES)
            .saturating_add(1),
        ..RetryPolicy::default()
    };
    Ok(ModelSettings {
        provider,
        name,
        base_url: args.base_url.clone().or_else(|| model.base_url.clone()),
        api_key_env: model.api_key_env.clone(),
        idle_timeout: model
            .idle_timeout
            .unwrap_or(warden_config::DEFAULT_IDLE_TIMEOUT),
        retry,
    })
}

/// The agent settings: `[agent]` and `[model]`, over the defaults.
pub fn agent_settings(config: &ResolvedConfig, session_dir: PathBuf) -> AgentSettings {
    let mut settings = AgentSettings::new(session_dir);
    let agent = &config.agent;
    let to_usize = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    if let Some(turns) = agent.max_turns {
        settings.max_turns = turns;
    }
    if let Some(timeout) = agent.turn_timeout {
        settings.turn_timeout = timeout;
    }
    if let Some(tokens) = config.model.max_tokens {
        settings.max_tokens = tokens;
        settings.budget.reply_tokens = to_usize(u64::from(tokens));
    }
    if let Some(window) = config.model.context_window {
        settings.budget.context_window = to_usize(window);
    }
    if let Some(tokens) = agent.result_warn_tokens {
        settings.budget.warn_tokens = to_usize(tokens);
    }
    if let Some(tokens) = agent.result_cap_tokens {
        settings.budget.cap_tokens = to_usize(tokens);
    }
    if let Some(chars) = agent.offload_chars {
        settings.budget.offload_chars = to_usize(chars);
    }
    if let Some(budget) = agent.tool_budget {
        settings.tool_budget = budget;
    }
    if let Some(tokens) = agent.tool_definition_token_budget {
        settings.tool_token_budget = to_usize(tokens);
    }
    // Only when configured: `warden run` waits for its calls unless told otherwise
    // (`warden chat` applies the default, 2 minutes).
    settings.background_after = agent.background_after;
    settings.favourites = agent.favourites.clone();
    settings.extra_instructions = agent.system_prompt.clone();
    settings
}

/// A new session's id and folder (`$XDG_STATE_HOME/warden/sessions/ID`, mode 700), where
/// long tool results are written.
pub fn new_session(env: &Environment) -> Result<(String, PathBuf), Failure> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let id = format!(
        "{}-{}-{:03}",
        now.as_secs(),
        std::process::id(),
        now.subsec_millis()
    );
    let dir = env.state_home.join("warden").join("sessions").join(&id);
    let created = std::fs::create_dir_all(&dir).and_then(|()| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
    });
    created.map_err(|error| {
        Failure::usage(anyhow::anyhow!("cannot create {}: {error}", dir.display()))
    })?;
    Ok((id, dir))
}

/// An observer with the state store beside it, for what a chat keeps besides the audit log
/// (its history; `/audit` reads the log). The audit log itself is written by the host's
/// session, never from events.
pub struct Stored<O> {
    inner: O,
    store: Option<Store>,
}

impl<O: Observer> Stored<O> {
    /// Wraps `inner`, with `store`.
    pub fn new(inner: O, store: Option<Store>) -> Stored<O> {
        Stored { inner, store }
    }

    /// The wrapped observer.
    pub fn inner(&mut self) -> &mut O {
        &mut self.inner
    }

    /// The store, for other session records.
    pub fn store(&mut self) -> Option<&mut Store> {
        self.store.as_mut()
    }
}

impl<O: Observer> Observer for Stored<O> {
    fn event(&mut self, event: &Event) {
        self.inner.event(event);
    }

    fn text_delta(&mut self, delta: &str) {
        self.inner.text_delta(delta);
    }

    fn call_started(&mut self, tool: &str, server: &str) {
        self.inner.call_started(tool, server);
    }
}

/// Asks the person at the terminal: once, for this session, or no.
pub struct TerminalApprover;

impl Approver for TerminalApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        Box::pin(async move {
            let mut why = String::new();
            for reason in &request.reasons {
                why.push_str("\n  - ");
                why.push_str(&inert(reason, Shape::Line));
            }
            let session = if request.tainted {
                // Asked for the flow of data: a session-wide yes would not cover the next one.
                ""
            } else {
                ", [s]ession"
            };
            eprint!(
                "\nwarden: `{}` (server `{}`) needs your approval.\narguments:\n{}\nwhy:{why}\nRun it? [y]es once{session}, [N]o: ",
                inert(&request.tool, Shape::Line),
                inert(&request.server, Shape::Line),
                crate::render::indent(&crate::render::shown_arguments(&request.arguments)),
            );
            match crate::terminal::read_line(MAX_ANSWER_BYTES).await {
                Some(line) => match line.trim().to_ascii_lowercase().as_str() {
                    "y" | "yes" => ApprovalAnswer::Once,
                    "s" | "session" if !request.tainted => ApprovalAnswer::Session,
                    _ => ApprovalAnswer::No,
                },
                None => ApprovalAnswer::No,
            }
        })
    }

    fn name(&self) -> &'static str {
        "user"
    }
}
