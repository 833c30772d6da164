//! The `[model]` and `[agent]` tables of `warden.toml`: which model Warden's own agent talks
//! to, and the limits it runs under. Read per file (with the position of every key), restricted
//! in the project scope, and merged across scopes field by field.
//!
//! - **user, local and `--config` files** may set every key; a later file wins, key by key;
//! - **project files** (the working tree, possibly a cloned repository) may not choose the
//!   model endpoint or its key (`provider`, `name`, `base_url`, `api_key_env`), nor add
//!   instructions or tools (`system_prompt`, `favourites`): a repository must not be able to
//!   send the user's API key to a server of its own, nor steer the model. Every number and
//!   duration a project file sets is a ceiling: the merged value is the smaller of the
//!   project's and the one the other scopes (or Warden's default) give.
//!
//! Every value is an `Option`: unset means Warden's default, which the binary applies (the
//! defaults are the `DEFAULT_*` constants of this module, so that a project ceiling can be
//! compared with them).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::duration::TimeoutValue;
use crate::error::{ConfigError, LineCol};
use crate::spec::{Origin, Scope};

/// Default output tokens per model reply.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;
/// Default time without a byte from the model before a reply is abandoned.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// Default number of retries of one model request.
pub const DEFAULT_MAX_RETRIES: u32 = 4;
/// Default number of model turns in one user turn.
pub const DEFAULT_MAX_TURNS: u32 = 20;
/// Default time one user turn may take.
pub const DEFAULT_TURN_TIMEOUT: Duration = Duration::from_secs(600);
/// Default size (tokens) of a tool result above which the model is warned.
pub const DEFAULT_RESULT_WARN_TOKENS: u64 = 10_000;
/// Default size (tokens) above which a tool result is cut.
pub const DEFAULT_RESULT_CAP_TOKENS: u64 = 25_000;
/// Default size (characters) above which a tool result is offloaded to a file.
pub const DEFAULT_OFFLOAD_CHARS: u64 = 50_000;
/// Default number of tools above which the agent switches to tool search.
pub const DEFAULT_TOOL_BUDGET: usize = 40;
/// Default token budget of the tool definitions sent with each request.
pub const DEFAULT_TOOL_DEFINITION_TOKEN_BUDGET: u64 = 20_000;
/// Default time after which a tool call is moved to the background.
pub const DEFAULT_BACKGROUND_AFTER: Duration = Duration::from_secs(120);
/// Largest `max_turns` accepted.
pub const MAX_MAX_TURNS: u32 = 1000;

/// The providers `[model] provider` accepts. Everything but `anthropic` speaks the OpenAI
/// Chat Completions protocol; the string is kept as written, the agent crate parses it.
pub const PROVIDERS: [&str; 5] = ["anthropic", "openai", "openai-compatible", "ollama", "vllm"];

/// `[model]`, merged across scopes. `None` is Warden's default.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ModelConfig {
    /// `"anthropic"`, or `"openai"` (also `"openai-compatible"`, `"ollama"`, `"vllm"`) for
    /// any OpenAI-compatible endpoint.
    pub provider: Option<String>,
    /// The model's name, as the provider spells it.
    pub name: Option<String>,
    /// The endpoint, `http://` or `https://`.
    pub base_url: Option<String>,
    /// The name of the environment variable holding the API key (never the key itself).
    pub api_key_env: Option<String>,
    /// Output tokens per reply.
    pub max_tokens: Option<u32>,
    /// The model's context window, in tokens.
    pub context_window: Option<u64>,
    /// Time without a byte from the model before a reply is abandoned (milliseconds in JSON).
    #[serde(with = "option_duration_ms")]
    pub idle_timeout: Option<Duration>,
    /// Retries of one request (0: none).
    pub max_retries: Option<u32>,
}

/// `[agent]`, merged across scopes. `None` (or an empty list) is Warden's default.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AgentConfig {
    /// Model turns in one user turn, 1 to 1000.
    pub max_turns: Option<u32>,
    /// Time one user turn may take (milliseconds in JSON).
    #[serde(with = "option_duration_ms")]
    pub turn_timeout: Option<Duration>,
    /// Tool result size (tokens) above which the model is warned.
    pub result_warn_tokens: Option<u64>,
    /// Tool result size (tokens) above which the result is cut.
    pub result_cap_tokens: Option<u64>,
    /// Tool result size (characters) above which it is offloaded to a file.
    pub offload_chars: Option<u64>,
    /// More tools than this and the agent switches to tool search.
    pub tool_budget: Option<usize>,
    /// Token budget of the tool definitions sent with each request.
    pub tool_definition_token_budget: Option<u64>,
    /// Qualified tool names (`server__tool`) always exposed to the model.
    pub favourites: Vec<String>,
    /// Time after which a tool call is moved to the background (milliseconds in JSON).
    #[serde(with = "option_duration_ms")]
    pub background_after: Option<Duration>,
    /// Extra instructions appended to Warden's own system prompt.
    pub system_prompt: Option<String>,
}

mod option_duration_ms {
    use serde::Serializer;
    use std::time::Duration;

    pub fn serialize<S: Serializer>(
        value: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(d) => serializer.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            None => serializer.serialize_none(),
        }
    }
}

/// `[model]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a model table")]
pub(crate) struct ModelTable {
    provider: Option<Spanned<String>>,
    name: Option<Spanned<String>>,
    base_url: Option<Spanned<String>>,
    api_key_env: Option<Spanned<String>>,
    max_tokens: Option<Spanned<u32>>,
    context_window: Option<Spanned<u64>>,
    idle_timeout: Option<Spanned<TimeoutValue>>,
    max_retries: Option<Spanned<u32>>,
}

/// `[agent]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "an agent table")]
pub(crate) struct AgentTable {
    max_turns: Option<Spanned<u32>>,
    turn_timeout: Option<Spanned<TimeoutValue>>,
    result_warn_tokens: Option<Spanned<u64>>,
    result_cap_tokens: Option<Spanned<u64>>,
    offload_chars: Option<Spanned<u64>>,
    tool_budget: Option<Spanned<usize>>,
    tool_definition_token_budget: Option<Spanned<u64>>,
    favourites: Option<Spanned<Vec<String>>>,
    background_after: Option<Spanned<TimeoutValue>>,
    system_prompt: Option<Spanned<String>>,
}

/// The `[model]` and `[agent]` of one file, with where each key's value is written.
#[derive(Debug, Default)]
pub(crate) struct FileSettings {
    model: ModelConfig,
    agent: AgentConfig,
    /// `"model.provider"`, `"agent.max_turns"`, ...: every key the file sets (`favourites`
    /// included, so an empty list written out is told apart from no list).
    at: BTreeMap<&'static str, Option<LineCol>>,
}

/// Reads one file's tables: the scope restriction first (a refused key is reported as
/// refused, whatever its value), then each value on its own.
pub(crate) fn read(
    model: Option<ModelTable>,
    agent: Option<AgentTable>,
    text: &str,
    origin: &Origin,
) -> Result<FileSettings, ConfigError> {
    if origin.scope == Scope::Project {
        check_project(model.as_ref(), agent.as_ref(), text, origin)?;
    }
    let mut file = Reader {
        text,
        origin,
        settings: FileSettings::default(),
    };
    if let Some(table) = model {
        let m = ModelConfig {
            provider: file.text_value("model.provider", table.provider, check_provider)?,
            name: file.text_value("model.name", table.name, check_nonempty)?,
            base_url: file.text_value("model.base_url", table.base_url, check_url)?,
            api_key_env: file.text_value("model.api_key_env", table.api_key_env, check_var)?,
            max_tokens: file.number("model.max_tokens", table.max_tokens, 1, u32::MAX)?,
            context_window: file.number(
                "model.context_window",
                table.context_window,
                1,
                u64::MAX,
            )?,
            idle_timeout: file.duration("model.idle_timeout", table.idle_timeout),
            max_retries: file.number("model.max_retries", table.max_retries, 0, u32::MAX)?,
        };
        file.settings.model = m;
    }
    if let Some(table) = agent {
        let favourites = match table.favourites {
            Some(list) => {
                let at = file.at(list.span().start);
                file.settings.at.insert("agent.favourites", at);
                let list = list.into_inner();
                if let Some(bad) = list.iter().find(|name| !is_qualified_tool(name)) {
                    return Err(file.invalid(
                        "agent.favourites",
                        at,
                        format!("{bad:?} is not a qualified tool name (`server__tool`)"),
                    ));
                }
                list
            }
            None => Vec::new(),
        };
        let a = AgentConfig {
            max_turns: file.number("agent.max_turns", table.max_turns, 1, MAX_MAX_TURNS)?,
            turn_timeout: file.duration("agent.turn_timeout", table.turn_timeout),
            result_warn_tokens: file.number(
                "agent.result_warn_tokens",
                table.result_warn_tokens,
                1,
                u64::MAX,
            )?,
            result_cap_tokens: file.number(
                "agent.result_cap_tokens",
                table.result_cap_tokens,
                1,
                u64::MAX,
            )?,
            offload_chars: file.number("agent.offload_chars", table.offload_chars, 1, u64::MAX)?,
            tool_budget: file.number("agent.tool_budget", table.tool_budget, 1, usize::MAX)?,
            tool_definition_token_budget: file.number(
                "agent.tool_definition_token_budget",
                table.tool_definition_token_budget,
                1,
                u64::MAX,
            )?,
            favourites,
            background_after: file.duration("agent.background_after", table.background_after),
            system_prompt: file
                .text_value("agent.system_prompt", table.system_prompt, |_| Ok(()))?,
        };
        file.settings.agent = a;
    }
    Ok(file.settings)
}

const ENDPOINT: &str = "a project file may not choose the model endpoint or its key (a cloned \
                        repository could send your API key, and your conversation, to a server \
                        of its own)";
const STEERING: &str = "a project file may not add instructions for the model or expose tools \
                        to it (a cloned repository must not steer your agent)";

/// Refuses the keys a project file may not set, at the first one written.
fn check_project(
    model: Option<&ModelTable>,
    agent: Option<&AgentTable>,
    text: &str,
    origin: &Origin,
) -> Result<(), ConfigError> {
    let span = |value: Option<&Spanned<String>>| value.map(|v| v.span().start);
    let mut refused: Vec<(usize, &str, &str)> = Vec::new();
    if let Some(m) = model {
        for (key, value) in [
            ("model.provider", &m.provider),
            ("model.name", &m.name),
            ("model.base_url", &m.base_url),
            ("model.api_key_env", &m.api_key_env),
        ] {
            if let Some(offset) = span(value.as_ref()) {
                refused.push((offset, key, ENDPOINT));
            }
        }
    }
    if let Some(a) = agent {
        if let Some(offset) = a.favourites.as_ref().map(|v| v.span().start) {
            refused.push((offset, "agent.favourites", STEERING));
        }
        if let Some(offset) = span(a.system_prompt.as_ref()) {
            refused.push((offset, "agent.system_prompt", STEERING));
        }
    }
    match refused.into_iter().min_by_key(|(offset, _, _)| *offset) {
        Some((offset, key, reason)) => Err(ConfigError::ProjectSetting {
            path: origin.path.clone(),
            at: Some(LineCol::at_offset(text, offset)),
            key: key.to_owned(),
            reason: reason.to_owned(),
        }),
        None => Ok(()),
    }
}

struct Reader<'a> {
    text: &'a str,
    origin: &'a Origin,
    settings: FileSettings,
}

impl Reader<'_> {
    fn at(&self, offset: usize) -> Option<LineCol> {
        Some(LineCol::at_offset(self.text, offset))
    }

    fn invalid(&self, key: &str, at: Option<LineCol>, message: String) -> ConfigError {
        ConfigError::InvalidSetting {
            path: self.origin.path.clone(),
            at,
            key: key.to_owned(),
            message,
        }
    }

    fn text_value(
        &mut self,
        key: &'static str,
        value: Option<Spanned<String>>,
        check: fn(&str) -> Result<(), String>,
    ) -> Result<Option<String>, ConfigError> {
        let Some(value) = value else { return Ok(None) };
        let at = self.at(value.span().start);
        self.settings.at.insert(key, at);
        let value = value.into_inner();
        check(&value).map_err(|message| self.invalid(key, at, message))?;
        Ok(Some(value))
    }

    fn number<T: Copy + PartialOrd + std::fmt::Display>(
        &mut self,
        key: &'static str,
        value: Option<Spanned<T>>,
        min: T,
        max: T,
    ) -> Result<Option<T>, ConfigError> {
        let Some(value) = value else { return Ok(None) };
        let at = self.at(value.span().start);
        self.settings.at.insert(key, at);
        let value = value.into_inner();
        if value < min {
            return Err(self.invalid(key, at, format!("must be at least {min}, not {value}")));
        }
        if value > max {
            return Err(self.invalid(key, at, format!("must be at most {max}, not {value}")));
        }
        Ok(Some(value))
    }

    /// Durations are checked (non-zero, well formed) by [`TimeoutValue`] while parsing.
    fn duration(
        &mut self,
        key: &'static str,
        value: Option<Spanned<TimeoutValue>>,
    ) -> Option<Duration> {
        let value = value?;
        let at = self.at(value.span().start);
        self.settings.at.insert(key, at);
        Some(value.into_inner().0)
    }
}

fn check_provider(value: &str) -> Result<(), String> {
    if PROVIDERS.contains(&value) {
        Ok(())
    } else {
        Err(format!(
            "unknown provider {value:?}; expected \"anthropic\" or \"openai\" (also \
             \"openai-compatible\", \"ollama\", \"vllm\" for OpenAI-compatible endpoints)"
        ))
    }
}

fn check_nonempty(value: &str) -> Result<(), String> {
    if value.trim().is_empty() {
        Err("must not be empty".to_owned())
    } else {
        Ok(())
    }
}

fn check_url(value: &str) -> Result<(), String> {
    let ok = value.split_once("://").is_some_and(|(scheme, rest)| {
        (scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https"))
            && !rest.is_empty()
    });
    if ok && !value.contains(char::is_whitespace) {
        Ok(())
    } else {
        Err(format!("must be an http:// or https:// URL, not {value:?}"))
    }
}

/// The name of a variable (not its value): letters, digits and `_`, not starting with a digit.
fn check_var(value: &str) -> Result<(), String> {
    let ok = !value.is_empty()
        && !value.starts_with(|c: char| c.is_ascii_digit())
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{value:?} is not an environment variable name (write the variable's name, such as \
             \"ANTHROPIC_API_KEY\", never the key itself)"
        ))
    }
}

fn is_qualified_tool(name: &str) -> bool {
    name.split_once("__")
        .is_some_and(|(server, tool)| !server.is_empty() && !tool.is_empty())
        && !name.contains(char::is_whitespace)
}

/// Where a merged value was written.
type Source = (Origin, Option<LineCol>);

/// Merges the files' settings, given lowest precedence first: outside the project scope a
/// later file wins key by key; a project file's numbers and durations are ceilings applied
/// last. The merged result is then checked as a whole (`result_warn_tokens` may not exceed
/// `result_cap_tokens`).
pub(crate) fn merge(
    layers: Vec<(Origin, FileSettings)>,
) -> Result<(ModelConfig, AgentConfig), ConfigError> {
    let mut model = ModelConfig::default();
    let mut agent = AgentConfig::default();
    let mut sources: BTreeMap<&'static str, Source> = BTreeMap::new();
    let (project, others): (Vec<_>, Vec<_>) = layers
        .into_iter()
        .partition(|(origin, _)| origin.scope == Scope::Project);
    for (origin, file) in others {
        let FileSettings {
            model: fm,
            agent: fa,
            at,
        } = file;
        let mut m = Merger {
            origin: &origin,
            at: &at,
            sources: &mut sources,
        };
        m.later("model.provider", &mut model.provider, fm.provider);
        m.later("model.name", &mut model.name, fm.name);
        m.later("model.base_url", &mut model.base_url, fm.base_url);
        m.later("model.api_key_env", &mut model.api_key_env, fm.api_key_env);
        m.later("model.max_tokens", &mut model.max_tokens, fm.max_tokens);
        m.later(
            "model.context_window",
            &mut model.context_window,
            fm.context_window,
        );
        m.later(
            "model.idle_timeout",
            &mut model.idle_timeout,
            fm.idle_timeout,
        );
        m.later("model.max_retries", &mut model.max_retries, fm.max_retries);
        m.later("agent.max_turns", &mut agent.max_turns, fa.max_turns);
        m.later(
            "agent.turn_timeout",
            &mut agent.turn_timeout,
            fa.turn_timeout,
        );
        m.later(
            "agent.result_warn_tokens",
            &mut agent.result_warn_tokens,
            fa.result_warn_tokens,
        );
        m.later(
            "agent.result_cap_tokens",
            &mut agent.result_cap_tokens,
            fa.result_cap_tokens,
        );
        m.later(
            "agent.offload_chars",
            &mut agent.offload_chars,
            fa.offload_chars,
        );
        m.later("agent.tool_budget", &mut agent.tool_budget, fa.tool_budget);
        m.later(
            "agent.tool_definition_token_budget",
            &mut agent.tool_definition_token_budget,
            fa.tool_definition_token_budget,
        );
        if at.contains_key("agent.favourites") {
            let mut favourites = None;
            m.later("agent.favourites", &mut favourites, Some(fa.favourites));
            agent.favourites = favourites.unwrap_or_default();
        }
        m.later(
            "agent.background_after",
            &mut agent.background_after,
            fa.background_after,
        );
        m.later(
            "agent.system_prompt",
            &mut agent.system_prompt,
            fa.system_prompt,
        );
    }
    for (origin, file) in project {
        let mut m = Merger {
            origin: &origin,
            at: &file.at,
            sources: &mut sources,
        };
        let (fm, fa) = (&file.model, &file.agent);
        m.ceiling(
            "model.max_tokens",
            &mut model.max_tokens,
            fm.max_tokens,
            Some(DEFAULT_MAX_TOKENS),
        );
        m.ceiling(
            "model.context_window",
            &mut model.context_window,
            fm.context_window,
            None,
        );
        m.ceiling(
            "model.idle_timeout",
            &mut model.idle_timeout,
            fm.idle_timeout,
            Some(DEFAULT_IDLE_TIMEOUT),
        );
        m.ceiling(
            "model.max_retries",
            &mut model.max_retries,
            fm.max_retries,
            Some(DEFAULT_MAX_RETRIES),
        );
        m.ceiling(
            "agent.max_turns",
            &mut agent.max_turns,
            fa.max_turns,
            Some(DEFAULT_MAX_TURNS),
        );
        m.ceiling(
            "agent.turn_timeout",
            &mut agent.turn_timeout,
            fa.turn_timeout,
            Some(DEFAULT_TURN_TIMEOUT),
        );
        m.ceiling(
            "agent.result_warn_tokens",
            &mut agent.result_warn_tokens,
            fa.result_warn_tokens,
            Some(DEFAULT_RESULT_WARN_TOKENS),
        );
        m.ceiling(
            "agent.result_cap_tokens",
            &mut agent.result_cap_tokens,
            fa.result_cap_tokens,
            Some(DEFAULT_RESULT_CAP_TOKENS),
        );
        m.ceiling(
            "agent.offload_chars",
            &mut agent.offload_chars,
            fa.offload_chars,
            Some(DEFAULT_OFFLOAD_CHARS),
        );
        m.ceiling(
            "agent.tool_budget",
            &mut agent.tool_budget,
            fa.tool_budget,
            Some(DEFAULT_TOOL_BUDGET),
        );
        m.ceiling(
            "agent.tool_definition_token_budget",
            &mut agent.tool_definition_token_budget,
            fa.tool_definition_token_budget,
            Some(DEFAULT_TOOL_DEFINITION_TOKEN_BUDGET),
        );
        m.ceiling(
            "agent.background_after",
            &mut agent.background_after,
            fa.background_after,
            Some(DEFAULT_BACKGROUND_AFTER),
        );
    }
    check_thresholds(&mut agent, &sources)?;
    Ok((model, agent))
}

/// `result_warn_tokens` may not exceed `result_cap_tokens` (or the default cap). Where a
/// project ceiling (or a cap alone, below the default threshold) caused the conflict, the
/// threshold is lowered to the cap: tightening must never make the user's configuration
/// invalid. Where the user's own files conflict, it is an error at the threshold's place.
fn check_thresholds(
    agent: &mut AgentConfig,
    sources: &BTreeMap<&'static str, Source>,
) -> Result<(), ConfigError> {
    let cap = agent.result_cap_tokens.unwrap_or(DEFAULT_RESULT_CAP_TOKENS);
    let warn = agent
        .result_warn_tokens
        .unwrap_or(DEFAULT_RESULT_WARN_TOKENS);
    if warn <= cap {
        return Ok(());
    }
    let warn_source = sources
        .get("agent.result_warn_tokens")
        .filter(|source| source.0.scope != Scope::Project);
    let cap_source = sources.get("agent.result_cap_tokens");
    let cap_from_project = cap_source.is_some_and(|source| source.0.scope == Scope::Project);
    match warn_source {
        Some(warn_source) if !cap_from_project => {
            let cap_place = match cap_source {
                Some(source) => format!("set at {}", place(source)),
                None => "Warden's default".to_owned(),
            };
            Err(ConfigError::InvalidSetting {
                path: warn_source.0.path.clone(),
                at: warn_source.1,
                key: "agent.result_warn_tokens".to_owned(),
                message: format!(
                    "{warn} is larger than `agent.result_cap_tokens` ({cap}, {cap_place}): the \
                     warning threshold must not exceed the cap"
                ),
            })
        }
        _ => {
            agent.result_warn_tokens = Some(cap);
            Ok(())
        }
    }
}

fn place(source: &Source) -> String {
    match source.1 {
        Some(at) => format!("{}:{at}", source.0.path.display()),
        None => source.0.path.display().to_string(),
    }
}

struct Merger<'a> {
    origin: &'a Origin,
    at: &'a BTreeMap<&'static str, Option<LineCol>>,
    sources: &'a mut BTreeMap<&'static str, Source>,
}

impl Merger<'_> {
    fn record(&mut self, key: &'static str) {
        let at = self.at.get(key).copied().flatten();
        self.sources.insert(key, (self.origin.clone(), at));
    }

    /// A value set by this file replaces the one before it.
    fn later<T>(&mut self, key: &'static str, slot: &mut Option<T>, value: Option<T>) {
        if let Some(value) = value {
            *slot = Some(value);
            self.record(key);
        }
    }

    /// A value set by this (project) file can only lower the merged one, or Warden's default
    /// where no other file sets it. Without a default, the project's value is taken.
    fn ceiling<T: Copy + Ord>(
        &mut self,
        key: &'static str,
        slot: &mut Option<T>,
        value: Option<T>,
        default: Option<T>,
    ) {
        let Some(value) = value else { return };
        match slot.or(default) {
            Some(current) if current <= value => *slot = Some(current),
            _ => {
                *slot = Some(value);
                self.record(key);
            }
        }
    }
}
