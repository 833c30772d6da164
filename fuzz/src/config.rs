//! The configuration readers, on text a project can ship (`warden_config::parse_text`):
//! Warden TOML, Claude Desktop and Claude Code `mcpServers` JSON, VS Code's `servers`
//! JSON, the JSONC comment stripper they share, and `${VAR}` expansion. Properties: a
//! file is read or refused with an error (never a panic, never a hang), an error names
//! the file, and a value that expanded `${SECRET}` shows up nowhere in an error message.
//!
//! Input: byte 0 picks the file name (and so the format, or detection by content); the
//! rest is the file's text.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use warden_config::{Environment, parse_text};

const NAMES: [&str; 5] = [
    "warden.toml",
    "claude_desktop_config.json",
    ".mcp.json",
    ".vscode/mcp.json",
    "named-on-the-command-line",
];

/// The value of `${SECRET}`: it must never be quoted in an error.
const SECRET: &str = "s3cr3t-value-9f2b";

fn environment() -> Environment {
    let vars = BTreeMap::from([
        ("HOME".to_owned(), "/tmp/warden-fuzz-home".to_owned()),
        ("TOKEN".to_owned(), "token-value".to_owned()),
        ("SECRET".to_owned(), SECRET.to_owned()),
        ("EMPTY".to_owned(), String::new()),
        ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
    ]);
    Environment::from_vars(PathBuf::from("/tmp/warden-fuzz-project"), vars)
        .expect("a fixed environment")
}

/// Reads one input as a configuration file.
pub fn run(data: &[u8]) {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(body) else {
        return;
    };
    let name = NAMES[usize::from(pick) % NAMES.len()];
    let env = environment();
    match parse_text(Path::new(name), text, &env) {
        Ok(config) => {
            let _ = format!("{config:?}");
        }
        Err(error) => {
            let message = error.to_string();
            assert!(!message.is_empty());
            if !text.contains(SECRET) {
                assert!(
                    !message.contains(SECRET),
                    "an error quoted the value of ${{SECRET}}: {message}"
                );
            }
        }
    }
}
