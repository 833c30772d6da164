//! Fixtures the host's unit tests share.

use std::collections::BTreeMap;
use std::path::PathBuf;

use warden_config::{Format, Origin, Scope, ServerSpec, TransportSpec};

/// A stdio server named `name` running `command`, from an explicit warden.toml, with
/// every other setting at its default (the program never runs unless a test starts it).
pub(crate) fn stdio_spec(name: &str, command: &str) -> ServerSpec {
    ServerSpec {
        name: name.into(),
        transport: TransportSpec::Stdio {
            command: command.into(),
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
        },
        timeouts: Default::default(),
        era: Default::default(),
        max_message_bytes: 1 << 20,
        origin: Origin {
            scope: Scope::Explicit,
            format: Format::WardenToml,
            path: PathBuf::from("/test/warden.toml"),
        },
        sandbox: Default::default(),
        env_references: Vec::new(),
        lifecycle: Default::default(),
    }
}

/// [`stdio_spec`] of a program that is never started.
pub(crate) fn spec_named(name: &str) -> ServerSpec {
    stdio_spec(name, "/bin/false")
}
