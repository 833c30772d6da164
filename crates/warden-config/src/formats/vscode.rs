//! VS Code's `.vscode/mcp.json`: `servers` (and `inputs`, which Warden cannot use).
//!
//! VS Code reads it as JSONC; its predefined variables are supported except prompted
//! `${input:...}` values. Relative paths are resolved against the workspace folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{Context, Draft, Entries, build_all, json};
use crate::Environment;
use crate::envfile;
use crate::error::ConfigError;
use crate::expand::Expander;
use crate::read::read_required;
use crate::spec::{Origin, Scope, ServerSpec};

#[derive(Deserialize)]
#[serde(expecting = "a JSON object")]
struct VsCodeFile {
    #[serde(default)]
    servers: Option<Entries<String, VsCodeServer>>,
}

#[derive(Deserialize)]
#[serde(expecting = "a server object")]
struct VsCodeServer {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    args: Option<Vec<String>>,
    env: Option<BTreeMap<String, serde_json::Value>>,
    #[serde(rename = "envFile")]
    env_file: Option<String>,
    cwd: Option<String>,
    url: Option<String>,
    headers: Option<BTreeMap<String, String>>,
}

/// Parses one `.vscode/mcp.json`; `workspace` is what `${workspaceFolder}` stands for.
pub(crate) fn parse(
    text: &str,
    origin: &Origin,
    env: &Environment,
    workspace: &Path,
) -> Result<Vec<ServerSpec>, ConfigError> {
    let plain = json::strip_comments(text, &origin.path)?;
    let file: VsCodeFile = json::from_object(&plain, &origin.path)?;
    let entries = file.servers.unwrap_or_default().0;
    let positions = json::name_positions(
        &plain,
        "servers",
        entries.iter().map(|(name, _)| name.as_str()),
    );
    let cx = Context::new(
        origin,
        Expander::VsCode {
            vars: &env.vars,
            workspace,
            home: env.home.as_deref(),
        },
        workspace,
    );
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
            if let Some(env_file) = &server.env_file {
                let expanded = cx.expand(&draft, "envFile", env_file)?;
                let path: PathBuf = workspace.join(expanded);
                if origin.scope == Scope::Project {
                    crate::project::check_env_file(&draft.name, &path, workspace, origin)?;
                }
                let text = read_required(&path)?;
                draft.env_file_vars = envfile::parse(&text, &path)?;
            }
            Ok(draft)
        })
        .collect::<Result<Vec<_>, ConfigError>>()?;
    build_all(drafts, &cx)
}
