//! Pinned executables: on a server's first start Warden records the sha256 of its resolved
//! program, of every file its arguments name, and the package of an `npx`/`uvx` launch, in
//! the state store; every later start compares and refuses a server whose bytes changed.
//! `warden pin SERVER` accepts the new state once the user has looked.
//!
//! The comparison happens in [`PinningLauncher`], at the launcher seam, right before the
//! process is spawned, so no caller can start a server around it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use warden_config::{Environment, Scope, ServerSpec};
use warden_mcp::{ConfinedLauncher, Fingerprint, LaunchError, LaunchRequest, Launched, Launcher};
use warden_store::{Pin, Store};

/// Where the state store lives: `$XDG_STATE_HOME/warden/state.db`.
pub fn state_db(env: &Environment) -> PathBuf {
    env.state_home.join("warden").join("state.db")
}

/// The key `spec`'s pin is stored under: name, scope and configuration file.
pub fn key_for(spec: &ServerSpec) -> String {
    let scope = match spec.origin.scope {
        Scope::User => "user",
        Scope::Project => "project",
        Scope::Local => "local",
        Scope::Explicit => "explicit",
    };
    warden_store::server_key(&spec.name, scope, &spec.origin.path)
}

/// A fingerprint as the store keeps it.
pub fn to_pin(fingerprint: Fingerprint) -> Pin {
    Pin {
        program: fingerprint.program,
        program_sha256: fingerprint.program_sha256,
        files: fingerprint.files,
        package: fingerprint.package,
    }
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// What differs between the stored pin `old` and the current state `new`, one line each;
/// empty when they match.
pub fn changes(old: &Pin, new: &Pin) -> Vec<String> {
    let mut out = Vec::new();
    if old.program != new.program {
        out.push(format!(
            "program path changed: {} -> {} (sha256 {}… -> {}…)",
            old.program.display(),
            new.program.display(),
            short(&old.program_sha256),
            short(&new.program_sha256)
        ));
    } else if old.program_sha256 != new.program_sha256 {
        out.push(format!(
            "program {} changed: sha256 {}… -> {}…",
            new.program.display(),
            short(&old.program_sha256),
            short(&new.program_sha256)
        ));
    }
    for (path, hash) in &old.files {
        match new.files.iter().find(|(p, _)| p == path) {
            None => out.push(format!(
                "file {} removed from the arguments",
                path.display()
            )),
            Some((_, now)) if now != hash => out.push(format!(
                "file {} changed: sha256 {}… -> {}…",
                path.display(),
                short(hash),
                short(now)
            )),
            Some(_) => {}
        }
    }
    for (path, hash) in &new.files {
        if !old.files.iter().any(|(p, _)| p == path) {
            out.push(format!(
                "file {} added to the arguments (sha256 {}…)",
                path.display(),
                short(hash)
            ));
        }
    }
    if old.package != new.package {
        out.push(format!(
            "package changed: {} -> {}",
            old.package.as_deref().unwrap_or("(none)"),
            new.package.as_deref().unwrap_or("(none)")
        ));
    }
    out
}

/// The current state of a pin, one line per hashed item.
pub fn describe(pin: &Pin) -> Vec<String> {
    let mut out = vec![format!(
        "program {}  sha256 {}",
        pin.program.display(),
        pin.program_sha256
    )];
    for (path, hash) in &pin.files {
        out.push(format!("file {}  sha256 {hash}", path.display()));
    }
    if let Some(package) = &pin.package {
        out.push(format!("package {package}"));
    }
    out
}

/// Starts servers through a [`ConfinedLauncher`] after checking each against its pin:
/// the first start records the pin (trust on first use), a later start whose program,
/// files or package differ is refused with [`LaunchError::Refused`] naming every change.
pub struct PinningLauncher {
    inner: ConfinedLauncher,
    store: Mutex<Store>,
    keys: HashMap<String, String>,
}

impl PinningLauncher {
    /// Pins the servers in `specs` (by name) in `store`.
    pub fn new(inner: ConfinedLauncher, store: Store, specs: &[ServerSpec]) -> Self {
        let keys = specs
            .iter()
            .map(|spec| (spec.name.clone(), key_for(spec)))
            .collect();
        Self {
            inner,
            store: Mutex::new(store),
            keys,
        }
    }

    fn check(&self, key: &str, request: &LaunchRequest) -> Result<(), LaunchError> {
        let current = match self.inner.fingerprint(request) {
            Ok(fingerprint) => to_pin(fingerprint),
            Err(warden_mcp::FingerprintError::Resolve(error)) => return Err(error),
            Err(error) => {
                return Err(LaunchError::Refused(format!(
                    "cannot check the pinned executable: {error}"
                )));
            }
        };
        let mut store = match self.store.lock() {
            Ok(store) => store,
            Err(poisoned) => poisoned.into_inner(),
        };
        let stored = store.pin_for(key).map_err(|error| {
            LaunchError::Refused(format!("cannot check the pinned executable: {error}"))
        })?;
        match stored {
            None => {
                store.save_pin(key, &current).map_err(|error| {
                    LaunchError::Refused(format!("cannot record the pinned executable: {error}"))
                })?;
                tracing::info!(
                    server = %request.server,
                    program = %current.program.display(),
                    sha256 = %current.program_sha256,
                    files = current.files.len(),
                    "pinned"
                );
                Ok(())
            }
            Some(pinned) => {
                let changed = changes(&pinned, &current);
                if changed.is_empty() {
                    return Ok(());
                }
                Err(LaunchError::Refused(format!(
                    "not started: what it runs changed since it was pinned:\n{}\n  \
                     check the change, then accept it with `warden pin {}`",
                    changed
                        .iter()
                        .map(|line| format!("  - {line}"))
                        .collect::<Vec<_>>()
                        .join("\n"),
                    request.server
                )))
            }
        }
    }
}

impl Launcher for PinningLauncher {
    fn launch(&self, request: &LaunchRequest) -> Result<Launched, LaunchError> {
        if let Some(key) = self.keys.get(&request.server) {
            self.check(key, request)?;
        }
        self.inner.launch(request)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn pin() -> Pin {
        Pin {
            program: PathBuf::from("/usr/bin/python3"),
            program_sha256: "a".repeat(64),
            files: vec![(PathBuf::from("/srv/server.py"), "b".repeat(64))],
            package: None,
        }
    }

    #[test]
    fn every_change_is_named() {
        assert!(changes(&pin(), &pin()).is_empty());
        let mut new = pin();
        new.program_sha256 = "c".repeat(64);
        new.files = vec![(PathBuf::from("/srv/other.py"), "d".repeat(64))];
        new.package = Some("pkg@2".into());
        let lines = changes(&pin(), &new);
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(
            lines[0].contains("/usr/bin/python3 changed: sha256 aaaaaaaaaaaa… -> cccccccccccc…")
        );
        assert!(lines[1].contains("/srv/server.py removed"));
        assert!(lines[2].contains("/srv/other.py added"));
        assert!(lines[3].contains("(none) -> pkg@2"));
        new = pin();
        new.program = PathBuf::from("/usr/local/bin/python3");
        assert!(changes(&pin(), &new)[0].contains("program path changed"));
    }
}
