//! Command-line definitions. Help text is written for a person in a hurry.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Warden: an MCP host that connects your tools' servers, under your policy.
#[derive(Debug, Parser)]
#[command(name = "warden", version, about, long_about = None)]
#[command(after_help = "Exit codes: 0 success, 1 the tool reported an error, \
2 usage or configuration error, 3 a server could not be reached or failed, \
4 denied by policy (or not approved), 5 no final answer (`warden run`: turn limit or timeout).")]
pub struct Cli {
    /// Global options.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// More logging on stderr (-v info, -vv debug, -vvv trace). WARDEN_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Read servers from this file only (Warden TOML, .mcp.json, Claude Desktop or VS Code
    /// format), instead of discovering user, project and local files.
    #[arg(long, value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Connect to every server and list its state and tools, or search them by words.
    Tools(ToolsArgs),
    /// Call one tool and print its result.
    Call(CallArgs),
    /// Connect to every server and scan its tool descriptions for text aimed at the model.
    Scan(ScanArgs),
    /// Show the resolved servers and which file each came from.
    Config(ConfigArgs),
    /// Run a probe under the confinement a server gets and report what it can reach.
    Probe(ProbeArgs),
    /// Show how a server's executable changed since it was pinned, and accept the change.
    Pin(PinArgs),
    /// Approve a project server, or a server's changed or new tool definitions.
    Approve(ApproveArgs),
    /// Install an `npx`/`uvx` server's package again, show what changed, and pin it.
    Update(UpdateArgs),
    /// The package cache of `npx`/`uvx` servers: remove installs nothing uses any more.
    #[command(subcommand)]
    Packages(PackagesCommand),
    /// Show the audit log: every call attempted, its decision and its outcome.
    Audit(AuditArgs),
    /// Give a model one task; it works through your servers under the policy.
    Run(RunArgs),
    /// Talk with a model that works through your servers, in the terminal.
    Chat(ChatArgs),
    /// Serve your servers to any MCP client (stdio, or Streamable HTTP with --http), under
    /// the policy.
    Serve(ServeArgs),
    /// The probe itself, run by `warden probe` inside a server's confinement.
    #[command(name = "__probe-report", hide = true)]
    ProbeReport(ProbeReportArgs),
    /// Sign in to a remote server (OAuth): opens the browser, or prints the address.
    Login(LoginArgs),
    /// Forget a remote server's stored tokens and registrations.
    Logout(LogoutArgs),
    /// The relay: servers inside a sandbox, reached over a channel (docs/relay.md).
    #[command(subcommand)]
    Relay(RelayCommand),
    /// A client for the official MCP conformance suite (scripts/conformance).
    #[command(name = "conformance-client", hide = true)]
    ConformanceClient(ConformanceArgs),
}

/// `warden login SERVER`
#[derive(Debug, Args)]
#[command(
    after_help = "Warden discovers the server's authorization server, registers (or uses the \
client_id of [servers.NAME.oauth]), and sends you to its consent page with a redirect back to \
a port of 127.0.0.1. On a machine without a browser, open the printed address elsewhere and \
paste here the whole address the browser ends up at. Tokens are kept in the operating \
system's credential store (the Secret Service on Linux); where none answers, only in memory, \
unless token_store = \"file\" allows a 0600 file under the state directory.\n\n\
Examples:\n  warden login docs\n  warden login docs --no-browser"
)]
pub struct LoginArgs {
    /// The server's name in the configuration.
    pub server: String,
    /// Print the address only; do not open a browser.
    #[arg(long)]
    pub no_browser: bool,
}

/// `warden relay ...`
#[derive(Debug, Subcommand)]
pub enum RelayCommand {
    /// Inside a sandbox: serve the relay's framed channel on stdin and stdout, starting the
    /// servers of --config (the real definitions) confined, one per stream, and stopping
    /// every one of them when the channel ends.
    #[command(
        after_help = "Run by the channel command of a `[relays.NAME]` on the brain's \
side, for example:\n  ip netns exec box warden relay supervise --config /etc/warden/box.toml\n\n\
stdout carries frames only; logs go to stderr."
    )]
    Supervise(SuperviseArgs),
}

/// `warden relay supervise`
#[derive(Debug, Args)]
pub struct SuperviseArgs {
    /// The base of the confined servers' scratch directories (default: as for `warden run`).
    #[arg(long, value_name = "DIR")]
    pub scratch: Option<PathBuf>,
}

/// `warden logout SERVER`
#[derive(Debug, Args)]
pub struct LogoutArgs {
    /// The server's name in the configuration.
    pub server: String,
}

/// `warden conformance-client URL`: the scenario comes from `MCP_CONFORMANCE_SCENARIO`,
/// its data from `MCP_CONFORMANCE_CONTEXT`, the wire revision from
/// `MCP_CONFORMANCE_PROTOCOL_VERSION`.
#[derive(Debug, Args)]
pub struct ConformanceArgs {
    /// The server URL, given last by the suite.
    pub url: String,
}

/// `warden tools`
#[derive(Debug, Args)]
#[command(
    after_help = "With --search, prints only the tools that best fit a few words, best first: \
the same ranking the agent loop's tool search gives the model. Tools the policy hides are \
never found.\n\n\
Examples:\n  warden tools\n  warden tools --search \"current time in a timezone\"\n  \
warden tools --search \"read a file\" --limit 3 --json"
)]
pub struct ToolsArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Rank the tools by how well they fit these words, instead of listing them all.
    #[arg(long, value_name = "QUERY")]
    pub search: Option<String>,
    /// With --search: how many tools to show (1 to 50) [default: 8].
    #[arg(
        long,
        value_name = "K",
        requires = "search",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new()
            .range(1..=warden_host::MAX_SEARCH_LIMIT as u64)
    )]
    pub limit: Option<usize>,
    /// Start every server and read its tools again, instead of answering from the catalogue
    /// cache (what each server offered when it last started), and update the cache.
    #[arg(long)]
    pub refresh: bool,
}

/// `warden scan`
#[derive(Debug, Args)]
pub struct ScanArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `warden call`
#[derive(Debug, Args)]
#[command(
    after_help = "Every call is decided by the policy first (docs/policy.md): allowed calls run, \
denied ones exit with code 4, and for the others Warden asks on the terminal, or, without one, \
refuses unless --yes is given.\n\n\
Examples:\n  warden call time/get_current_time --args '{\"timezone\":\"UTC\"}'\n  \
warden call time__get_current_time --args-file args.json --yes"
)]
pub struct CallArgs {
    /// The tool: `server/tool` (the tool's own name) or its qualified name `server__tool`.
    pub target: String,
    /// Arguments as a JSON object.
    #[arg(long, value_name = "JSON", conflicts_with = "args_file")]
    pub args: Option<String>,
    /// Read the arguments from a file (`-` for stdin).
    #[arg(long, value_name = "FILE")]
    pub args_file: Option<PathBuf>,
    /// Print the raw result as JSON.
    #[arg(long)]
    pub json: bool,
    /// Approve the call if the policy asks about it (for scripts). Never overrides a deny.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// `warden config`
#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `warden probe`
#[derive(Debug, Args)]
#[command(
    after_help = "The probe is Warden's own binary, run in place of the server under exactly the \
server's confinement (or none, for `confine = false`). It reports its uid, which credential files \
it can read, secret-looking variables (names only), whether the SSH agent and the given TCP \
addresses are reachable, whether host processes are visible, and where outside its grants it can \
write. It sends nothing but TCP connection attempts.\n\n\
Examples:\n  warden probe filesystem\n  warden probe github --connect 127.0.0.1:5432 --json"
)]
pub struct ProbeArgs {
    /// The server whose confinement to probe.
    pub server: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Try a TCP connection to HOST:PORT (repeatable). Default: every port listening on the
    /// host's loopback, and 1.1.1.1:443 (one attempt, 1 s at most).
    #[arg(long, value_name = "HOST:PORT")]
    pub connect: Vec<String>,
}

/// `warden pin`
#[derive(Debug, Args)]
#[command(
    after_help = "On its first start Warden pins each local server: the sha256 of what the start \
executes (its resolved program, the interpreter of a `#!` line, the script or `-m` module an \
interpreter runs, files `node --require` preloads, the `uv.lock` of `uv run`) and the package a \
package launcher (`npx`, `uvx`) fetches. Data files named in the arguments are not pinned. A \
later start that differs is refused. Look at what changed, then run `warden pin SERVER` to accept \
it: it asks on the terminal, or, without one, refuses unless --yes is given.\n\n\
Examples:\n  warden pin filesystem --show\n  warden pin filesystem\n  warden pin filesystem --yes"
)]
pub struct PinArgs {
    /// The server to pin.
    pub server: String,
    /// Only show the stored pin and the current state; record nothing.
    #[arg(long, conflicts_with = "yes")]
    pub show: bool,
    /// Accept the current state without asking (for scripts, after reviewing `--show`).
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// `warden update`
#[derive(Debug, Args)]
#[command(
    after_help = "A server written as `npx -y PKG[@VERSION]` or `uvx PKG[==VERSION]` (also `uv \
tool run`, `pipx run`) runs the package Warden installed for it on its first start, never what \
the registry serves later. This installs the package again (confined, the registry's hosts \
only), shows the version and every installed file that changed (by sha256), and pins the new \
install once you accept: on the terminal, or with --yes. Without a terminal and without --yes it \
only reports. An install that was changed on disk is replaced by a fresh one the same way.\n\n\
Examples:\n  warden update everything\n  warden update time --yes"
)]
pub struct UpdateArgs {
    /// The server whose package to update.
    pub server: String,
    /// Accept the new install without asking (for scripts).
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// `warden packages ...`
#[derive(Debug, Subcommand)]
pub enum PackagesCommand {
    /// Remove installs that no package pin references (servers removed from this
    /// configuration, installs replaced by `warden update`, installs interrupted).
    #[command(
        after_help = "First the package pins of servers no longer defined in a file this \
configuration reads (or no longer written as `npx`/`uvx`) are dropped; pins of servers from \
files not read now (another project) are kept. Then every install directory in Warden's \
package cache that no remaining package pin references is removed. Never an install a pin \
references, never one being installed by another Warden process, never anything outside the \
package cache: symbolic links there are reported, not followed. --dry-run lists what would \
go and changes nothing.\n\n\
Examples:\n  warden packages gc --dry-run\n  warden packages gc"
    )]
    Gc(PackagesGcArgs),
}

/// `warden packages gc`
#[derive(Debug, Args)]
pub struct PackagesGcArgs {
    /// List what would be removed; remove nothing, drop no pin.
    #[arg(long)]
    pub dry_run: bool,
}

/// `warden approve`
#[derive(Debug, Args)]
#[command(
    after_help = "Servers from project files (a repository's warden.toml, .mcp.json or \
.vscode/mcp.json) do not start until approved: this shows the server's full definition \
(command line, variable names, sandbox grants, the file it came from) and records the approval \
of exactly that definition in your state store; a changed definition needs a new approval. \
It then connects the server and pins every tool's definition; a tool whose definition later \
changes, or a new tool, is held back until approved here again (`warden tools` shows what \
changed).\n\n\
Examples:\n  warden approve github\n  warden approve github --yes"
)]
pub struct ApproveArgs {
    /// The server to approve.
    pub server: String,
    /// Approve without asking (for scripts). Without it, Warden asks on the terminal.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// `warden audit`
#[derive(Debug, Args)]
#[command(
    after_help = "Every `warden call` attempt is recorded in the state store: time (UTC), tool, \
arguments (secret-looking values redacted), the policy's decision and reasons, who approved it, \
whether it ran, its outcome, latency and result size. The latest rows are shown, oldest first.\n\n\
Examples:\n  warden audit --since 1h\n  warden audit --server github --since 2026-11-30T08:00:00Z --json"
)]
pub struct AuditArgs {
    /// Print a JSON array instead of text.
    #[arg(long)]
    pub json: bool,
    /// Only this server's calls.
    #[arg(long, value_name = "SERVER")]
    pub server: Option<String>,
    /// Only calls since TIME: an RFC 3339 time, or a duration back from now (`10m`, `2h`, `7d`).
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Show at most N rows (the latest), 1 to 10000.
    #[arg(long, value_name = "N", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub limit: u32,
}

/// `warden __probe-report` (hidden)
#[derive(Debug, Args)]
pub struct ProbeReportArgs {
    /// What to try, as JSON (from `warden probe`).
    #[arg(long, value_name = "JSON")]
    pub input: String,
}

/// Which model to use, over `[model]` in the configuration.
#[derive(Debug, Args)]
pub struct ModelArgs {
    /// The wire format: `anthropic` or `openai` (any OpenAI-compatible endpoint).
    #[arg(long, value_name = "PROVIDER")]
    pub provider: Option<String>,
    /// The model's name at the provider.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// The endpoint, e.g. http://localhost:11434/v1 for Ollama.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
}

/// Who answers when the policy asks about a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ApprovalMode {
    /// Ask on the terminal.
    Ask,
    /// Refuse, and tell the model (the default without a terminal).
    Deny,
    /// Approve every call the policy asks about (never one it denies).
    AllowAll,
}

/// `warden run`
#[derive(Debug, Args)]
#[command(
    after_help = "Every tool call goes through schema validation and the policy \
(docs/policy.md). Calls the policy asks about are put to you on a terminal; without one they \
are refused and the model is told (--approvals deny).\n\n\
Examples:\n  warden run --prompt 'What time is it in Tokyo?'\n  \
warden run --json --approvals deny --prompt 'Summarise README.md' > transcript.jsonl"
)]
pub struct RunArgs {
    /// The task.
    #[arg(long, short = 'p', value_name = "TEXT")]
    pub prompt: String,
    /// Who answers approval requests (default: ask on a terminal, else deny).
    #[arg(long, value_enum, value_name = "MODE")]
    pub approvals: Option<ApprovalMode>,
    /// The most model requests (default 20, or [agent] max_turns).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub max_turns: Option<u32>,
    /// Write the transcript as JSON lines on stdout (docs/transcript.md).
    #[arg(long)]
    pub json: bool,
    /// The model.
    #[command(flatten)]
    pub model: ModelArgs,
}

/// `warden chat`
#[derive(Debug, Args)]
#[command(
    after_help = "Commands inside the chat: /mcp (servers, state, latency), /tools, \
/audit, /clear, /exit (or Ctrl-D)."
)]
pub struct ChatArgs {
    /// The model.
    #[command(flatten)]
    pub model: ModelArgs,
}

/// Which client `warden serve --print-client-config` writes for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ClientKind {
    /// Claude Code (`.mcp.json`).
    ClaudeCode,
    /// VS Code (`.vscode/mcp.json`).
    Vscode,
    /// Claude Desktop (`claude_desktop_config.json`).
    ClaudeDesktop,
}

/// `warden serve`
#[derive(Debug, Args)]
#[command(
    after_help = "Any MCP client connects to Warden as to one server offering every configured \
server's tools, under the names `warden tools` shows (or, with --only, one server's tools under \
their own names). Every call is decided by the policy in that client's own context; a call the \
policy asks about is put to the client's user as an elicitation when the client supports it, and \
refused with an explanation otherwise. Both protocol eras are served (2025-11-25 and \
2026-07-28). Over HTTP only loopback Host and Origin headers are accepted unless configured; a \
non-loopback address needs bearer tokens (docs/gateway.md).\n\n\
Examples:\n  warden serve\n  warden serve --http 127.0.0.1:8765\n  \
warden serve --only time --print-client-config claude-code\n  \
WARDEN_TOKEN=... warden serve --http 0.0.0.0:8765 --token-env WARDEN_TOKEN --allow-host gw.lan"
)]
pub struct ServeArgs {
    /// Serve Streamable HTTP on ADDR (127.0.0.1:8765, :8765) instead of stdio; without a
    /// value, `[serve] listen`.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "")]
    pub http: Option<String>,
    /// Front one server only, under its tools' own names (no prefixes).
    #[arg(long, value_name = "SERVER")]
    pub only: Option<String>,
    /// A variable holding a bearer token clients must send (repeatable; adds to `[serve]
    /// token_env`).
    #[arg(long = "token-env", value_name = "VAR")]
    pub token_env: Vec<String>,
    /// Also accept requests from this browser Origin (repeatable).
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
    /// Also accept this Host name (repeatable), e.g. the name a non-loopback address is
    /// reached by.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_host: Vec<String>,
    /// Print the configuration snippet for a client and exit.
    #[arg(long, value_enum, value_name = "CLIENT")]
    pub print_client_config: Option<ClientKind>,
}
