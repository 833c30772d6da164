//! The file formats, and the common step that turns a parsed entry into a [`ServerSpec`].
//!
//! Each format module only knows its own file's shape: it fills in a [`Draft`] per server
//! and hands it to [`Draft::build`], which applies the rules shared by every format (name
//! check, transport choice, variable expansion, relative paths).

pub(crate) mod claude;
mod entries;
mod json;
pub(crate) mod vscode;
pub(crate) mod warden_toml;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub(crate) use entries::Entries;

use crate::Environment;
use crate::agent::FileSettings;
use crate::error::{ConfigError, LineCol};
use crate::expand::{ExpandError, Expander};
use crate::name::validate_server_name;
use crate::policy::FilePolicy;
use crate::size::{SizeText, format_size, parse_size};
use crate::spec::{
    DEFAULT_MAX_MESSAGE_BYTES, EnvReference, EraPreference, Format, HttpSettings, MIN_DISK,
    MIN_MEMORY, MIN_PROCESSES, NetworkSpec, Origin, RemoteTransport, SandboxSpec, Scope,
    ServerSpec, Timeouts, TransportSpec,
};

/// What one file says: its servers and, for Warden's own format, its `[policy]`, `[model]`
/// and `[agent]`.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    pub servers: Vec<ServerSpec>,
    /// Empty for the Claude and VS Code formats, which carry no policy.
    pub policy: FilePolicy,
    /// Empty for the Claude and VS Code formats.
    pub settings: FileSettings,
    /// `[project_servers.NAME] env`; empty for the Claude and VS Code formats.
    pub project_env: Vec<crate::spec::EnvAllowance>,
    /// `[serve]`; `None` when the file has none (always for the Claude and VS Code formats).
    pub serve: Option<crate::serve::ServeConfig>,
    /// `[host]`; `None` when the file has none (always for the Claude and VS Code formats).
    pub host: Option<crate::host::HostConfig>,
}

/// Parses the text of one file in a known format.
///
/// `workspace` is the project directory VS Code's `${workspaceFolder}` stands for.
pub(crate) fn parse(
    text: &str,
    origin: &Origin,
    env: &Environment,
    workspace: &Path,
) -> Result<Parsed, ConfigError> {
    let servers = match origin.format {
        Format::WardenToml => return warden_toml::parse(text, origin, env),
        Format::ClaudeDesktop | Format::ClaudeCode => claude::parse(text, origin, env)?,
        Format::VsCode => vscode::parse(text, origin, env, workspace)?,
    };
    Ok(Parsed {
        servers,
        policy: FilePolicy::default(),
        settings: FileSettings::default(),
        project_env: Vec::new(),
        serve: None,
        host: None,
    })
}

/// Builds every draft of one file, refusing a name used twice in it.
pub(crate) fn build_all(
    drafts: Vec<Draft>,
    cx: &Context<'_>,
) -> Result<Vec<ServerSpec>, ConfigError> {
    let mut seen = std::collections::BTreeSet::new();
    let mut specs = Vec::with_capacity(drafts.len());
    for draft in drafts {
        if !seen.insert(draft.name.clone()) {
            return Err(ConfigError::DuplicateServer {
                path: cx.origin.path.clone(),
                at: draft.at,
                name: draft.name,
            });
        }
        specs.push(draft.build(cx)?);
    }
    Ok(specs)
}

/// The directory holding `path` (configuration paths are absolute, so there is one).
pub(crate) fn directory_of(path: &Path) -> &Path {
    path.parent().unwrap_or(path)
}

/// Guesses the format of a file named on the command line: first from its name, then from
/// its content (JSON with `mcpServers` is Claude Code, with `servers` VS Code; anything not
/// starting with `{` is taken as Warden TOML).
pub(crate) fn detect(path: &Path, text: &str) -> Result<Format, ConfigError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let parent = path
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned());
    if name.ends_with(".toml") {
        return Ok(Format::WardenToml);
    }
    match name.as_str() {
        "claude_desktop_config.json" => return Ok(Format::ClaudeDesktop),
        ".mcp.json" => return Ok(Format::ClaudeCode),
        "mcp.json" if parent.as_deref() == Some(".vscode") => return Ok(Format::VsCode),
        _ => {}
    }
    let plain = json::strip_comments(text, path)?;
    if !plain.trim_start().starts_with('{') {
        return Ok(Format::WardenToml);
    }
    let value: serde_json::Value = json::from_plain(&plain, path)?;
    let has = |key: &str| value.get(key).is_some();
    if has("mcpServers") {
        Ok(Format::ClaudeCode)
    } else if has("servers") {
        Ok(Format::VsCode)
    } else {
        Err(ConfigError::UnknownFormat {
            path: path.to_owned(),
            reason: "a JSON object with neither `mcpServers` (Claude) nor `servers` (VS Code)"
                .to_owned(),
        })
    }
}

/// One server as a format module read it, before the shared rules are applied.
#[derive(Debug, Default)]
pub(crate) struct Draft {
    pub name: String,
    /// Where the server's name is written, for error messages.
    pub at: Option<LineCol>,
    /// An explicit `type` (JSON formats); `None` infers it from `command` / `url`.
    pub kind: Option<String>,
    pub command: Option<String>,
    pub args: Option<Vec<String>>,
    pub env: Option<BTreeMap<String, String>>,
    /// Variables from a file (VS Code `envFile`): taken literally, overridden by `env`.
    pub env_file_vars: BTreeMap<String, String>,
    pub cwd: Option<String>,
    pub url: Option<String>,
    pub headers: Option<BTreeMap<String, String>>,
    /// Remote-server settings (Warden TOML only); `None` is the default.
    pub http_settings: Option<HttpSettings>,
    pub timeouts: Option<Timeouts>,
    pub era: Option<EraPreference>,
    pub max_message_bytes: Option<usize>,
    /// Confinement (Warden TOML only); `None` is the default profile.
    pub sandbox: Option<SandboxDraft>,
    /// `relay = "NAME"` (Warden TOML only), with the relay's definition when the same file
    /// has it.
    pub relay: Option<(String, Option<crate::spec::RelayChannel>)>,
    /// `start` and `idle_stop` (Warden TOML only).
    pub lifecycle: crate::spec::Lifecycle,
}

/// `confine` and `[servers.NAME.sandbox]` as written (Warden TOML only).
#[derive(Debug, Default)]
pub(crate) struct SandboxDraft {
    pub confine: Option<bool>,
    pub read: Vec<String>,
    pub write: Vec<String>,
    pub network: Option<NetworkSpec>,
    pub env: Vec<String>,
    /// `memory`, `processes` and `disk` as written.
    pub memory: Option<SizeText>,
    pub processes: Option<u64>,
    pub disk: Option<SizeText>,
}

/// What [`Draft::build`] needs to know about the file the draft came from.
pub(crate) struct Context<'a> {
    pub origin: &'a Origin,
    pub expander: Expander<'a>,
    /// Relative `cwd` and relative command paths are resolved against this directory (for
    /// a project file, the project root).
    pub base_dir: &'a Path,
    /// The environment variables each server's values read, by server name.
    pub noted: RefCell<BTreeMap<String, Vec<EnvReference>>>,
}

enum Kind {
    Stdio,
    Http,
    /// The deprecated HTTP+SSE transport, named by `type`/`transport = "sse"`.
    Sse,
}

impl<'a> Context<'a> {
    /// The context for the servers of one file.
    pub(crate) fn new(origin: &'a Origin, expander: Expander<'a>, base_dir: &'a Path) -> Self {
        Self {
            origin,
            expander,
            base_dir,
            noted: RefCell::new(BTreeMap::new()),
        }
    }

    pub(crate) fn invalid(&self, draft: &Draft, message: impl Into<String>) -> ConfigError {
        ConfigError::InvalidServer {
            path: self.origin.path.clone(),
            at: draft.at,
            server: draft.name.clone(),
            message: message.into(),
        }
    }

    /// Expands references in one value of `draft` (its `field`, for messages), attributing
    /// failures to it and noting every environment variable it reads.
    pub(crate) fn expand(
        &self,
        draft: &Draft,
        field: &str,
        value: &str,
    ) -> Result<String, ConfigError> {
        let path = self.origin.path.clone();
        let server = draft.name.clone();
        let at = draft.at;
        let mut used = Vec::new();
        let expanded = self.expander.expand_noting(value, &mut used);
        if !used.is_empty() {
            let mut noted = self.noted.borrow_mut();
            let list = noted.entry(draft.name.clone()).or_default();
            for variable in used {
                let reference = EnvReference {
                    variable,
                    field: field.to_owned(),
                };
                if !list.contains(&reference) {
                    list.push(reference);
                }
            }
        }
        expanded.map_err(|e| match e {
            ExpandError::Unset(variable) => ConfigError::UnsetVariable {
                path,
                at,
                server,
                variable,
            },
            ExpandError::Input(id) => ConfigError::PromptedInput {
                path,
                at,
                server,
                id,
            },
            ExpandError::Invalid(message) => ConfigError::InvalidServer {
                path,
                at,
                server,
                message,
            },
        })
    }

    fn expand_map(
        &self,
        draft: &Draft,
        field: &str,
        map: Option<&BTreeMap<String, String>>,
    ) -> Result<BTreeMap<String, String>, ConfigError> {
        map.into_iter()
            .flatten()
            .map(|(k, v)| Ok((k.clone(), self.expand(draft, &format!("{field}.{k}"), v)?)))
            .collect()
    }

    /// `value` as a path, joined to `base` when relative.
    pub(crate) fn resolve(
        &self,
        draft: &Draft,
        base: &Path,
        value: &str,
    ) -> Result<String, ConfigError> {
        let path = Path::new(value);
        if path.is_absolute() {
            return Ok(value.to_owned());
        }
        base.join(path).into_os_string().into_string().map_err(|_| {
            self.invalid(
                draft,
                format!(
                    "the path {value:?}, resolved against {}, is not valid UTF-8",
                    base.display()
                ),
            )
        })
    }
}

impl Draft {
    /// Applies the rules every format shares and produces the final spec.
    pub(crate) fn build(self, cx: &Context<'_>) -> Result<ServerSpec, ConfigError> {
        validate_server_name(&self.name).map_err(|reason| ConfigError::InvalidName {
            path: cx.origin.path.clone(),
            at: self.at,
            name: self.name.clone(),
            reason,
        })?;
        let transport = match &self.relay {
            Some(relay) => self.relayed(cx, relay)?,
            None => self.transport(cx)?,
        };
        let mut sandbox = self.sandbox(cx)?;
        if cx.origin.scope == Scope::Project {
            let project = crate::project::resolve(cx.base_dir);
            crate::project::check_server(&self.name, &transport, &sandbox, &project, cx.origin)?;
            sandbox.project = Some(project);
        }
        let mut env_references = cx.noted.borrow_mut().remove(&self.name).unwrap_or_default();
        env_references.sort();
        Ok(ServerSpec {
            name: self.name,
            transport,
            timeouts: self.timeouts.unwrap_or_default(),
            era: self.era.unwrap_or_default(),
            max_message_bytes: self.max_message_bytes.unwrap_or(DEFAULT_MAX_MESSAGE_BYTES),
            origin: cx.origin.clone(),
            sandbox,
            env_references,
            lifecycle: self.lifecycle,
        })
    }

    /// A relayed server's route: a stub with nothing of the real definition. A relayed
    /// entry that carries a command, arguments, environment, a URL or confinement is
    /// refused: those belong inside the sandbox, and a copy here would put the very
    /// things the relay keeps off the brain's machine back on it.
    fn relayed(
        &self,
        cx: &Context<'_>,
        (relay, channel): &(String, Option<crate::spec::RelayChannel>),
    ) -> Result<TransportSpec, ConfigError> {
        for (field, present) in [
            ("command", self.command.is_some()),
            ("args", self.args.is_some()),
            ("env", self.env.is_some() || !self.env_file_vars.is_empty()),
            ("cwd", self.cwd.is_some()),
            ("url", self.url.is_some()),
            ("headers", self.headers.is_some()),
            ("type", self.kind.is_some()),
            (
                "allow_http, reconnect or oauth",
                self.http_settings.is_some(),
            ),
            ("confine or sandbox", self.sandbox.is_some()),
        ] {
            if present {
                return Err(cx.invalid(
                    self,
                    format!(
                        "a relayed server (`relay = \"{relay}\"`) is a stub: `{field}` belongs \
                         in the server's definition inside the sandbox, not here"
                    ),
                ));
            }
        }
        if cx.origin.scope == Scope::Project {
            return Err(cx.invalid(
                self,
                "relays are set up in your own configuration (user, local or --config), \
                 never in a project file",
            ));
        }
        let Some(channel) = channel else {
            return Err(cx.invalid(
                self,
                format!("`relay = \"{relay}\"` names no `[relays.{relay}]` in this file"),
            ));
        };
        Ok(TransportSpec::Relay {
            relay: relay.clone(),
            channel: channel.clone(),
        })
    }

    fn transport(&self, cx: &Context<'_>) -> Result<TransportSpec, ConfigError> {
        Ok(match self.kind(cx)? {
            Kind::Stdio => self.stdio(cx)?,
            kind @ (Kind::Http | Kind::Sse) => {
                if self.sandbox.is_some() {
                    return Err(cx.invalid(
                        self,
                        "`confine` and `sandbox` only apply to local (`command`) servers",
                    ));
                }
                if matches!(kind, Kind::Sse) && self.era == Some(EraPreference::Modern) {
                    return Err(cx.invalid(
                        self,
                        "the HTTP+SSE transport (2024-11-05) only speaks the legacy era; \
                         `era = \"modern\"` cannot apply",
                    ));
                }
                let mut transport = self.http(cx)?;
                if let (Kind::Sse, TransportSpec::Http { settings, .. }) = (kind, &mut transport) {
                    settings.transport = RemoteTransport::Sse;
                }
                transport
            }
        })
    }

    /// Resolves the sandbox settings: variables expanded, `~` refused, relative paths joined
    /// to the configuration file's directory, variable names checked.
    fn sandbox(&self, cx: &Context<'_>) -> Result<SandboxSpec, ConfigError> {
        let Some(draft) = &self.sandbox else {
            return Ok(SandboxSpec::default());
        };
        let paths = |key: &str, values: &[String]| -> Result<Vec<PathBuf>, ConfigError> {
            values
                .iter()
                .map(|value| {
                    let value = cx.expand(self, &format!("sandbox.{key}"), value)?;
                    if value.is_empty() {
                        return Err(cx.invalid(self, format!("an empty path in `sandbox.{key}`")));
                    }
                    if value.starts_with('~') {
                        return Err(cx.invalid(
                            self,
                            format!(
                                "`sandbox.{key}` path {value:?}: `~` is not expanded; \
                                 write an absolute path or ${{HOME}}/..."
                            ),
                        ));
                    }
                    Ok(PathBuf::from(cx.resolve(self, cx.base_dir, &value)?))
                })
                .collect()
        };
        let read = paths("read", &draft.read)?;
        let write = paths("write", &draft.write)?;
        if let Some(bad) = draft
            .env
            .iter()
            .find(|name| name.is_empty() || name.contains(['=', '\0']))
        {
            return Err(cx.invalid(
                self,
                format!("`sandbox.env`: {bad:?} is not a valid environment variable name"),
            ));
        }
        let size = |key: &str, value: &Option<SizeText>, min: u64| {
            let Some(SizeText(text)) = value else {
                return Ok(None);
            };
            let bytes =
                parse_size(text).map_err(|e| cx.invalid(self, format!("`sandbox.{key}`: {e}")))?;
            if bytes < min {
                return Err(cx.invalid(
                    self,
                    format!(
                        "`sandbox.{key}` = {text:?} is below the smallest accepted, {}",
                        format_size(min)
                    ),
                ));
            }
            Ok(Some(bytes))
        };
        let memory = size("memory", &draft.memory, MIN_MEMORY)?;
        let disk = size("disk", &draft.disk, MIN_DISK)?;
        if let Some(processes) = draft.processes
            && processes < MIN_PROCESSES
        {
            return Err(cx.invalid(
                self,
                format!(
                    "`sandbox.processes` = {processes} is below the smallest accepted, \
                     {MIN_PROCESSES} (the sandbox's own two helper processes count too)"
                ),
            ));
        }
        Ok(SandboxSpec {
            confine: draft.confine.unwrap_or(true),
            read,
            write,
            network: draft.network.clone().unwrap_or_default(),
            env: draft.env.clone(),
            project: None,
            memory,
            processes: draft.processes,
            disk,
        })
    }

    /// Chooses the transport from `type`, or from which of `command` / `url` is present.
    fn kind(&self, cx: &Context<'_>) -> Result<Kind, ConfigError> {
        if self.command.is_some() && self.url.is_some() {
            return Err(cx.invalid(
                self,
                "`command` and `url` are mutually exclusive: a server is either a local program or a remote endpoint",
            ));
        }
        let kind = match self.kind.as_deref() {
            None if self.command.is_some() => Kind::Stdio,
            None if self.url.is_some() => Kind::Http,
            None => {
                return Err(cx.invalid(
                    self,
                    "needs either `command` (a local program) or `url` (a remote endpoint)",
                ));
            }
            Some("stdio") => Kind::Stdio,
            Some("http" | "streamable-http" | "streamableHttp") => Kind::Http,
            Some("sse") => Kind::Sse,
            Some(other) => {
                return Err(cx.invalid(
                    self,
                    format!("unknown type {other:?}; expected \"stdio\", \"http\" or \"sse\""),
                ));
            }
        };
        Ok(kind)
    }

    fn stdio(&self, cx: &Context<'_>) -> Result<TransportSpec, ConfigError> {
        let Some(command) = &self.command else {
            return Err(cx.invalid(self, "type \"stdio\" needs a `command`"));
        };
        if self.http_settings.is_some() {
            return Err(cx.invalid(
                self,
                "`allow_http`, `reconnect` and `oauth` only apply to remote (`url`) servers",
            ));
        }
        if self.headers.as_ref().is_some_and(|h| !h.is_empty()) {
            return Err(cx.invalid(self, "`headers` only applies to remote (`url`) servers"));
        }
        let command = cx.expand(self, "command", command)?;
        if command.trim().is_empty() {
            return Err(cx.invalid(self, "`command` is empty"));
        }
        let cwd = match &self.cwd {
            Some(cwd) => {
                let cwd = cx.expand(self, "cwd", cwd)?;
                if cwd.is_empty() {
                    return Err(cx.invalid(self, "`cwd` is empty"));
                }
                Some(PathBuf::from(cx.resolve(self, cx.base_dir, &cwd)?))
            }
            None => None,
        };
        // A relative path with a directory part ("./server", "bin/server") means a file next
        // to the configuration (or in `cwd`, when one is given); a bare name is left for the
        // `PATH` lookup.
        let command = if command.contains('/') || command.contains(std::path::MAIN_SEPARATOR) {
            cx.resolve(self, cwd.as_deref().unwrap_or(cx.base_dir), &command)?
        } else {
            command
        };
        let args = self
            .args
            .iter()
            .flatten()
            .enumerate()
            .map(|(index, arg)| cx.expand(self, &format!("args[{index}]"), arg))
            .collect::<Result<Vec<_>, _>>()?;
        let mut env = self.env_file_vars.clone();
        env.extend(cx.expand_map(self, "env", self.env.as_ref())?);
        if let Some(bad) = env.keys().find(|k| k.is_empty() || k.contains(['=', '\0'])) {
            return Err(cx.invalid(
                self,
                format!("{bad:?} is not a valid environment variable name"),
            ));
        }
        Ok(TransportSpec::Stdio {
            command,
            args,
            env,
            cwd,
        })
    }

    fn http(&self, cx: &Context<'_>) -> Result<TransportSpec, ConfigError> {
        let Some(url) = &self.url else {
            return Err(cx.invalid(
                self,
                "a remote server (type \"http\" or \"sse\") needs a `url`",
            ));
        };
        for (field, present) in [
            ("args", self.args.as_ref().is_some_and(|a| !a.is_empty())),
            (
                "env",
                self.env.as_ref().is_some_and(|e| !e.is_empty()) || !self.env_file_vars.is_empty(),
            ),
            ("cwd", self.cwd.is_some()),
        ] {
            if present {
                return Err(cx.invalid(
                    self,
                    format!("`{field}` only applies to local (`command`) servers"),
                ));
            }
        }
        let url = cx.expand(self, "url", url)?;
        let scheme_ok = url.split_once("://").is_some_and(|(scheme, rest)| {
            (scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https"))
                && !rest.is_empty()
        });
        if !scheme_ok {
            return Err(cx.invalid(
                self,
                format!("`url` must be an http:// or https:// URL, not {url:?}"),
            ));
        }
        let headers = cx.expand_map(self, "headers", self.headers.as_ref())?;
        for (name, value) in &headers {
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
                return Err(cx.invalid(self, format!("{name:?} is not a valid header name")));
            }
            if value.contains(['\r', '\n', '\0']) {
                return Err(cx.invalid(
                    self,
                    format!("the value of header `{name}` contains a line break or NUL"),
                ));
            }
        }
        let mut settings = self.http_settings.clone().unwrap_or_default();
        if let Some(secret) = &settings.oauth.client_secret {
            settings.oauth.client_secret = Some(cx.expand(self, "oauth.client_secret", secret)?);
        }
        if let Some(id) = &settings.oauth.client_id {
            settings.oauth.client_id = Some(cx.expand(self, "oauth.client_id", id)?);
        }
        Ok(TransportSpec::Http {
            url,
            headers,
            settings,
        })
    }
}
