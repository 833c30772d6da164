//! Claude's `mcpServers` files: Claude Desktop's `claude_desktop_config.json` and Claude
//! Code's `.mcp.json`.
//!
//! Both hold other settings too, so unknown keys (top level and per server) are ignored.
//! Only Claude Code expands `${VAR}` / `${VAR:-default}`; Claude Desktop passes values as
//! written, and so does Warden for that file.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{Context, Draft, Entries, build_all, directory_of, json};
use crate::Environment;
use crate::error::ConfigError;
use crate::expand::Expander;
use crate::spec::{Format, Origin, ServerSpec};

#[derive(Deserialize)]
#[serde(expecting = "a JSON object")]
struct ClaudeFile {
    #[serde(rename = "mcpServers", default)]
    servers: Option<Entries<String, ClaudeServer>>,
}

#[derive(Deserialize)]
#[serde(expecting = "a server object")]
struct ClaudeServer {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    args: Option<Vec<String>>,
    env: Option<BTreeMap<String, serde_json::Value>>,
    cwd: Option<String>,
    url: Option<String>,
    headers: Option<BTreeMap<String, String>>,
}

/// Parses one `mcpServers` file.
pub(crate) fn parse(
    text: &str,
    origin: &Origin,
    env: &Environment,
) -> Result<Vec<ServerSpec>, ConfigError> {
    let plain = json::strip_comments(text, &origin.path)?;
    let file: ClaudeFile = json::from_object(&plain, &origin.path)?;
    let entries = file.servers.unwrap_or_default().0;
    let positions = json::name_positions(
        &plain,
        "mcpServers",
        entries.iter().map(|(name, _)| name.as_str()),
    );
    let expander = match origin.format {
        Format::ClaudeCode => Expander::Shell {
            vars: &env.vars,
            escape: false,
        },
        _ => Expander::Literal,
    };
    let cx = Context::new(origin, expander, directory_of(&origin.path));
    let drafts = entries
        .into_iter()
        .zip(positions)
        .map(|((name, server), at)| {
            let mut draft = Draft {
                name,
                at,
                kind: server.kind,
                command: server.command,
                args: server.args,
                cwd: server.cwd,
                url: server.url,
                headers: server.headers,
                ..Draft::default()
            };
            if let Some(vars) = server.env {
                draft.env = Some(json::env_strings(vars).map_err(|m| cx.invalid(&draft, m))?);
            }
            Ok(draft)
        })
        .collect::<Result<Vec<_>, ConfigError>>()?;
    build_all(drafts, &cx)
}
