//! The resolved description of one server: what the rest of Warden consumes.
//!
//! Every loader (Warden's TOML, Claude Desktop, Claude Code, VS Code) produces these values;
//! nothing downstream knows which file format a server came from, only its [`Origin`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Default time to establish a connection (spawn, handshake, first `tools/list`).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time one tool call may take.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Default cap on one message read from a server (one stdio line).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// Default `sandbox.memory`: the most memory a confined server (everything it starts, and
/// what it keeps in its scratch directory, which is memory-backed) may use.
pub const DEFAULT_MEMORY: u64 = 2 << 30;
/// Default `sandbox.processes`: the most processes and threads a confined server may run.
pub const DEFAULT_PROCESSES: u64 = 512;
/// Default `sandbox.disk`: the size of a confined server's scratch directory.
pub const DEFAULT_DISK: u64 = 1 << 30;
/// The smallest `sandbox.memory` accepted (below it no interpreter starts).
pub const MIN_MEMORY: u64 = 16 << 20;
/// The smallest `sandbox.disk` accepted.
pub const MIN_DISK: u64 = 1 << 20;
/// The smallest `sandbox.processes` accepted (the sandbox's own two helpers count too).
pub const MIN_PROCESSES: u64 = 4;

/// One configured server, fully resolved (variables expanded, scopes merged).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerSpec {
    /// Validated name: ASCII letters, digits, `_` and `-`, 1 to 64 characters.
    pub name: String,
    /// How to reach the server.
    pub transport: TransportSpec,
    /// Timeouts for this server.
    pub timeouts: Timeouts,
    /// Which protocol era(s) Warden may speak to it.
    pub era: EraPreference,
    /// Cap on a single incoming message, in bytes.
    pub max_message_bytes: usize,
    /// Where this definition came from.
    pub origin: Origin,
    /// How a local (stdio) server is confined; ignored for remote servers.
    pub sandbox: SandboxSpec,
    /// Every variable of Warden's environment the definition reads through `${VAR}` (or VS
    /// Code's `${env:VAR}`, `${userHome}`), and where: the value reaches the server, so a
    /// project file may only use the names the user allowed (`[project_servers.NAME]`).
    pub env_references: Vec<EnvReference>,
    /// When the server is started and stopped (`start`, `idle_stop`).
    pub lifecycle: Lifecycle,
}

/// When a server is started (`start = "lazy" | "eager"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StartMode {
    /// On its first call, or when its tools are not in the catalogue cache.
    #[default]
    Lazy,
    /// With every command that uses servers, kept warm.
    Eager,
}

/// When a server is started and stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Lifecycle {
    /// `start`.
    pub start: StartMode,
    /// `idle_stop`: a server unused this long is stopped (started again by its next call);
    /// `None` keeps it running (then `[host] idle_stop` applies, if set).
    #[serde(serialize_with = "optional_ms")]
    pub idle_stop: Option<Duration>,
}

/// An optional duration as milliseconds (`null` when unset).
pub(crate) fn optional_ms<S: serde::Serializer>(
    value: &Option<Duration>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(d) => serializer.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        None => serializer.serialize_none(),
    }
}

/// A variable of the user's environment that a server from a project file may read: one
/// name of `[project_servers.NAME] env` in the user's own file (user, local or `--config`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvAllowance {
    /// The server's name.
    pub server: String,
    /// The variable's name.
    pub variable: String,
    /// The file that allows it.
    pub path: PathBuf,
    /// Where in that file.
    pub at: Option<crate::LineCol>,
}

/// One variable of Warden's environment read while expanding a server's definition.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct EnvReference {
    /// The variable's name (`HOME` for VS Code's `${userHome}`).
    pub variable: String,
    /// Where it is used: `command`, `args[2]`, `env.TOKEN`, `envFile`, `cwd`, `url`,
    /// `headers.Authorization`, `sandbox.read` or `sandbox.write`.
    pub field: String,
}

/// How one local server is confined (Warden TOML `[servers.NAME.sandbox]` and `confine`).
///
/// Plain data: the launcher turns it into a sandbox profile. Every server gets the default
/// (confined, no extra grants, no network) unless its Warden TOML table says otherwise;
/// servers from Claude or VS Code files always get the default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxSpec {
    /// `false` starts the server without any confinement (`confine = false`): loud, an
    /// explicit opt-out.
    pub confine: bool,
    /// Extra paths the server may read (absolute; relative ones were resolved against the
    /// configuration file's directory).
    pub read: Vec<PathBuf>,
    /// Extra paths the server may read and write.
    pub write: Vec<PathBuf>,
    /// Network access.
    pub network: NetworkSpec,
    /// Names of variables passed from Warden's environment, beyond the allowlist.
    pub env: Vec<String>,
    /// For a server from a project file: the project directory (resolved). What Warden
    /// grants on its own (the working directory, the package directories of file
    /// arguments) must lie inside it, or inside the system directories every server reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<PathBuf>,
    /// `memory`, in bytes; `None` means [`DEFAULT_MEMORY`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    /// `processes`; `None` means [`DEFAULT_PROCESSES`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    /// `disk`, in bytes; `None` means [`DEFAULT_DISK`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk: Option<u64>,
}

impl SandboxSpec {
    /// The memory limit in force: `memory`, or [`DEFAULT_MEMORY`].
    pub fn memory_limit(&self) -> u64 {
        self.memory.unwrap_or(DEFAULT_MEMORY)
    }

    /// The process limit in force: `processes`, or [`DEFAULT_PROCESSES`].
    pub fn process_limit(&self) -> u64 {
        self.processes.unwrap_or(DEFAULT_PROCESSES)
    }

    /// The scratch size in force: `disk`, or [`DEFAULT_DISK`].
    pub fn disk_limit(&self) -> u64 {
        self.disk.unwrap_or(DEFAULT_DISK)
    }
}

impl Default for SandboxSpec {
    fn default() -> Self {
        Self {
            confine: true,
            read: Vec::new(),
            write: Vec::new(),
            network: NetworkSpec::None,
            env: Vec::new(),
            project: None,
            memory: None,
            processes: None,
            disk: None,
        }
    }
}

pub use crate::egress::NetworkSpec;

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum TransportSpec {
    /// A local program speaking MCP over its stdin and stdout.
    Stdio {
        /// The program, as written in the configuration (a bare name is looked up in `PATH`).
        command: String,
        /// Its arguments, passed as they are (never through a shell).
        args: Vec<String>,
        /// Variables added to its environment.
        env: BTreeMap<String, String>,
        /// Its working directory; `None` means Warden's own.
        cwd: Option<PathBuf>,
    },
    /// A remote server over Streamable HTTP.
    Http {
        /// The endpoint URL.
        url: String,
        /// Headers sent with every request (values may be secrets: never log them).
        headers: BTreeMap<String, String>,
        /// How Warden talks to it: plain-HTTP permission, reconnect policy.
        settings: HttpSettings,
    },
    /// A server that runs inside a sandbox, reached through a relay's channel
    /// (`relay = "NAME"`, docs/relay.md). The brain's side holds only this route: the
    /// command, arguments, environment and secrets are defined inside the sandbox.
    Relay {
        /// The relay's name (`[relays.NAME]`).
        relay: String,
        /// How to open the channel into the sandbox.
        channel: RelayChannel,
    },
}

impl TransportSpec {
    /// Whether this is a remote server configured with an `Authorization` header of its
    /// own: the user's credential, which keeps OAuth out, and which is part of the
    /// server's definition.
    pub fn sets_authorization(&self) -> bool {
        matches!(self, TransportSpec::Http { headers, .. }
            if headers.keys().any(|name| name.eq_ignore_ascii_case("authorization")))
    }
}

/// `[relays.NAME]`: how Warden opens the byte stream into a sandbox (the way an
/// orchestrator execs into it), shared by every server relayed through it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RelayChannel {
    /// The program and arguments that open the channel (for example
    /// `["ip", "netns", "exec", "box", "warden", "relay", "supervise", "--config", ...]`);
    /// it must speak Warden's relay framing on its stdin and stdout.
    pub command: Vec<String>,
    /// Per relayed server, a file of `NAME=value` lines read when the channel starts and
    /// sent over it: the variables land only in that server's process inside the sandbox.
    /// Never the values themselves: the configuration holds only where they are.
    pub secrets: BTreeMap<String, PathBuf>,
    /// When and how often a broken channel is opened again.
    pub reconnect: ReconnectSpec,
}

/// Settings of one remote (Streamable HTTP) server beyond its URL and headers.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct HttpSettings {
    /// `allow_http = true`: permits `http://` to a host that is not loopback. Without it such
    /// a URL is refused, since headers (tokens) would cross the network in clear text.
    pub allow_http: bool,
    /// When and how often Warden tries again after a failure.
    pub reconnect: ReconnectSpec,
    /// Which HTTP transport: Streamable HTTP unless the configuration names the deprecated
    /// HTTP+SSE transport (`transport = "sse"`); never a fallback from one to the other.
    pub transport: RemoteTransport,
    /// How Warden signs in to it (`[servers.NAME.oauth]`).
    pub oauth: OAuthSpec,
}

/// `[servers.NAME.oauth]`: how Warden signs in to a remote server (docs/remote-servers.md).
/// Everything is optional: without it Warden uses dynamic client registration.
#[derive(Clone, PartialEq, Eq, Default, Serialize)]
pub struct OAuthSpec {
    /// A pre-registered `client_id`.
    pub client_id: Option<String>,
    /// Its secret (after `${VAR}` expansion; never serialised, never shown).
    #[serde(skip_serializing)]
    pub client_secret: Option<String>,
    /// The issuer the credentials belong to; they are never sent to another.
    pub issuer: Option<String>,
    /// The https URL of a Client ID Metadata Document describing Warden, where one is
    /// published; used where the authorization server accepts them.
    pub client_metadata_url: Option<String>,
    /// Where tokens are kept.
    pub token_store: TokenStoreChoice,
}

impl std::fmt::Debug for OAuthSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthSpec")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| ".."))
            .field("issuer", &self.issuer)
            .field("client_metadata_url", &self.client_metadata_url)
            .field("token_store", &self.token_store)
            .finish()
    }
}

/// Where a remote server's OAuth tokens are kept (`token_store`; decision 0034).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenStoreChoice {
    /// The operating system's credential store (the default); where none answers, in
    /// memory only, said when it happens.
    #[default]
    Keyring,
    /// The credential store where one answers, else a file of mode 0600 under the state
    /// directory: the explicit opt-in to the file, since anything running as the same user
    /// can read it.
    File,
    /// In memory only: forgotten when Warden exits.
    Memory,
}

/// The HTTP transport of a remote server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RemoteTransport {
    /// Streamable HTTP (2025-03-26 and later), the default.
    #[default]
    Http,
    /// The deprecated HTTP+SSE transport of 2024-11-05: a `GET` event stream whose
    /// `endpoint` event names the URL requests are POSTed to. Only when named.
    Sse,
}

/// The reconnect policy of one remote server (`[servers.NAME.reconnect]`).
///
/// Only transient failures are retried: a 5xx status, a refused connection, a timeout. A
/// 401, 403 or 404 is final at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ReconnectSpec {
    /// Attempts on first connect (1 = no retry).
    pub connect_attempts: u32,
    /// Reconnects of a server that dropped, before it is marked failed.
    pub attempts: u32,
    /// The first back-off; each next one doubles, with full jitter.
    #[serde(with = "duration_ms")]
    pub initial_delay: Duration,
    /// The longest back-off.
    #[serde(with = "duration_ms")]
    pub max_delay: Duration,
}

/// Attempts on first connect by default.
pub const DEFAULT_CONNECT_ATTEMPTS: u32 = 3;
/// Reconnects of a dropped server by default.
pub const DEFAULT_RECONNECT_ATTEMPTS: u32 = 5;

impl Default for ReconnectSpec {
    fn default() -> Self {
        Self {
            connect_attempts: DEFAULT_CONNECT_ATTEMPTS,
            attempts: DEFAULT_RECONNECT_ATTEMPTS,
            initial_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
        }
    }
}

/// Timeouts for one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Timeouts {
    /// Spawn + handshake + first tool list.
    #[serde(with = "duration_ms")]
    pub connect: Duration,
    /// One tool call.
    #[serde(with = "duration_ms")]
    pub call: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: DEFAULT_CONNECT_TIMEOUT,
            call: DEFAULT_CALL_TIMEOUT,
        }
    }
}

/// Which protocol era Warden speaks to a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EraPreference {
    /// Probe with `server/discover` (2026-07-28) and fall back to `initialize` (2025-11-25).
    #[default]
    Auto,
    /// Only the stateless 2026-07-28 revision; no fallback.
    Modern,
    /// Only the `initialize` handshake (2025-11-25 and older); no probe.
    Legacy,
}

/// The scope a definition was found in. Later scopes win: local > project > user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The user's own configuration directory.
    User,
    /// Files in the working tree (possibly a cloned repository: not to be trusted blindly).
    Project,
    /// Private per-project settings kept in the user's state directory.
    Local,
    /// A file named with `--config`, which replaces discovery.
    Explicit,
}

/// The file format a definition was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// Warden's own TOML (`[servers.NAME]`).
    WardenToml,
    /// Claude Desktop's `claude_desktop_config.json` (`mcpServers`).
    ClaudeDesktop,
    /// Claude Code's `.mcp.json` (`mcpServers`, `${VAR}` expansion).
    ClaudeCode,
    /// VS Code's `.vscode/mcp.json` (`servers`).
    VsCode,
}

/// Where a server definition came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Origin {
    /// The scope of the file.
    pub scope: Scope,
    /// The file's format.
    pub format: Format,
    /// The file's path.
    pub path: PathBuf,
}

mod duration_ms {
    use serde::Serializer;
    use std::time::Duration;

    pub fn serialize<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(u64::try_from(value.as_millis()).unwrap_or(u64::MAX))
    }
}
