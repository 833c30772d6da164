//! Warden's configuration: which MCP servers exist, and how to reach them.
//!
//! People who want an MCP host already have servers configured for Claude Desktop, Claude
//! Code or VS Code. This crate reads those files as they are, alongside Warden's own
//! `warden.toml`, and turns all of them into one list of [`ServerSpec`]s, so the rest of
//! Warden never deals with file formats.
//!
//! Files come from three scopes, merged by name with the higher scope winning (a server is
//! replaced whole, never field by field):
//! - **user**: `$XDG_CONFIG_HOME/warden/warden.toml` and Claude Desktop's
//!   `$XDG_CONFIG_HOME/Claude/claude_desktop_config.json`;
//! - **project**: `.vscode/mcp.json`, `.mcp.json` and `warden.toml` in the nearest directory
//!   (from the working directory up to the repository root) that has any of them;
//! - **local**: `$XDG_STATE_HOME/warden/local/<key>.toml`, private per-project settings.
//!
//! [`discover`] does that search; [`load_file`] reads one named file instead. Both report
//! which files were read and which definitions were shadowed, and refuse broken files
//! with an error naming the file and position rather than skipping them.
//!
//! `warden.toml` may also hold a `[policy]` table (`warden_policy::PolicyConfig`), merged
//! into [`ResolvedPolicy`]. A project file may only make the policy stricter (rules that
//! deny, ask or hide): a cloned repository must not approve its own tool calls.
//!
//! Servers from project files get no variable of the user's environment (no `${VAR}`, no
//! `sandbox.env`) unless the user's own files allow it by name (`[project_servers.NAME]
//! env`), and nothing Warden grants them on its own may reach outside the project.
//!
//! It may also hold `[model]` and `[agent]` tables ([`ModelConfig`], [`AgentConfig`]),
//! merged key by key. A project file may not choose the model, its endpoint or its key, nor
//! add instructions or always-exposed tools; its numbers and durations are only ceilings.

mod agent;
mod discover;
mod duration;
pub mod egress;
mod envfile;
mod environment;
mod error;
mod expand;
mod formats;
mod host;
mod jsonc;
mod name;
mod policy;
mod project;
mod read;
mod resolved;
mod serve;
mod size;
pub mod spec;

pub use agent::{
    AgentConfig, DEFAULT_BACKGROUND_AFTER, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_RETRIES,
    DEFAULT_MAX_TOKENS, DEFAULT_MAX_TURNS, DEFAULT_OFFLOAD_CHARS, DEFAULT_RESULT_CAP_TOKENS,
    DEFAULT_RESULT_WARN_TOKENS, DEFAULT_TOOL_BUDGET, DEFAULT_TOOL_DEFINITION_TOKEN_BUDGET,
    DEFAULT_TURN_TIMEOUT, MAX_MAX_TURNS, ModelConfig, PROVIDERS,
};
pub use discover::{discover, load_file, local_config_path, local_key, parse_text, project_root};
pub use envfile::parse as parse_env_file;
pub use environment::Environment;
pub use error::{ConfigError, LineCol};
pub use host::{HostConfig, MAX_PARALLEL_STARTS};
pub use name::{MAX_SERVER_NAME_LEN, validate_server_name};
pub use policy::{NotApplied, PolicySource, ResolvedPolicy};
pub use read::MAX_CONFIG_FILE_BYTES;
pub use resolved::{ResolvedConfig, Shadowed};
pub use serve::{ServeAuth, ServeConfig, ServeIssuer};
pub use size::format_size;
pub use spec::*;

#[cfg(test)]
mod tests;
