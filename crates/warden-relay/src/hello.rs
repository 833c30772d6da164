//! The control payloads of the channel's first frames.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Brain to supervisor, first frame: the session's secrets, per server, as variables.
///
/// Held in the supervisor's memory only (never in a file, never in its own environment),
/// and added to the environment of the one server they name when it starts.
#[derive(Default, Serialize, Deserialize)]
pub struct Hello {
    /// The relay protocol's version.
    #[serde(default)]
    pub version: u32,
    /// Server name to variables.
    #[serde(default)]
    pub secrets: BTreeMap<String, BTreeMap<String, String>>,
}

impl std::fmt::Debug for Hello {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: BTreeMap<&String, Vec<&String>> = self
            .secrets
            .iter()
            .map(|(server, vars)| (server, vars.keys().collect()))
            .collect();
        f.debug_struct("Hello")
            .field("version", &self.version)
            .field("secrets (names only)", &names)
            .finish()
    }
}

/// Supervisor to brain: the servers defined inside the sandbox.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Ready {
    /// Their names.
    pub servers: Vec<String>,
    /// The supervisor's relay protocol version (absent before version 2, which added
    /// executable pins: [`crate::pins`]).
    #[serde(default)]
    pub version: u32,
}

/// The relay protocol's version. 2: starts are reported and wait for the brain's verdict
/// when the stream asks for pins.
pub const VERSION: u32 = 2;

/// The first version whose supervisor reports executable pins.
pub const PINS_VERSION: u32 = 2;
