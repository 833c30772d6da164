//! Executable pins of relayed servers, kept by the brain (decision 0030, revision 1).
//!
//! The supervisor inside a sandbox hashes what each start of a server would execute and
//! reports it before the start ([`warden_relay::pins`]). This is the brain's answer: the
//! report is compared with the pin stored for that (relay, server) pair in the state
//! store, exactly as a local server's start is compared with its pin
//! ([`crate::pins`]): recorded on first use, allowed while it matches, refused while it
//! differs, until the user accepts the new state with `warden pin SERVER`. A refused
//! report is kept as the pending state, so `warden pin` shows and accepts exactly what the
//! sandbox reported (the brain cannot hash files inside the sandbox itself).
//!
//! The report is the supervisor's word: this catches a server binary that something in the
//! sandbox swapped under an honest supervisor, not a supervisor that lies.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use warden_config::{ServerSpec, TransportSpec};
use warden_relay::pins::{PinCheck, Report};
use warden_store::{Pin, Store};

/// The store key of the executable pin of relayed server `spec` behind relay `relay`.
pub fn key(relay: &str, spec: &ServerSpec) -> String {
    format!(
        "relay:{}",
        crate::pins::key_in(&format!("{relay}/{}", spec.name), &spec.origin)
    )
}

/// The store key of the state a sandbox last reported for `spec` that differed from its
/// pin (what `warden pin` accepts).
pub fn pending_key(relay: &str, spec: &ServerSpec) -> String {
    format!("{}#pending", key(relay, spec))
}

/// The relay a relayed server's stub names; `None` for any other server.
pub fn relay_of(spec: &ServerSpec) -> Option<&str> {
    match &spec.transport {
        TransportSpec::Relay { relay, .. } => Some(relay),
        _ => None,
    }
}

/// A report as the store keeps it (as a local server's fingerprint is kept).
pub fn to_pin(report: &Report) -> Pin {
    crate::pins::pin_of(
        &report.program,
        &report.program_sha256,
        report
            .files
            .iter()
            .map(|file| (file.path.as_path(), file.sha256.as_str())),
        report.package.as_deref(),
    )
}

/// What differs between the pin `old` and the reported state `new`, one line each; empty
/// when they match.
pub fn changes(old: &Pin, new: &Pin) -> Vec<String> {
    use crate::pins::short;
    let mut out = crate::pins::program_changes(old, &new.program, &new.program_sha256);
    let find = |files: &[(PathBuf, String)], path: &PathBuf| {
        files
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, hash)| hash.clone())
    };
    for (path, hash) in &old.files {
        match find(&new.files, path) {
            None => out.push(format!("{} is no longer run", path.display())),
            Some(now) if &now != hash => out.push(format!(
                "{} changed: sha256 {}… -> {}…",
                path.display(),
                short(hash),
                short(&now)
            )),
            Some(_) => {}
        }
    }
    for (path, hash) in &new.files {
        if find(&old.files, path).is_none() {
            out.push(format!(
                "{} is new (sha256 {}…)",
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

/// The brain's [`PinCheck`] over its state store.
pub struct RelayPins {
    store: Arc<Mutex<Store>>,
}

impl RelayPins {
    /// Checks reports against the pins in `store`.
    pub fn new(store: Arc<Mutex<Store>>) -> Self {
        Self { store }
    }
}

impl PinCheck for RelayPins {
    fn check(&self, relay: &str, spec: &ServerSpec, report: &Report) -> Result<(), String> {
        let key = key(relay, spec);
        let now = to_pin(report);
        let mut store = self
            .store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let cannot = |what: &str, error: warden_store::StoreError| {
            format!(
                "`{}` is not started: cannot {what} the executable pin of what it runs \
                 inside relay `{relay}`: {error}",
                spec.name
            )
        };
        match store.pin_for(&key).map_err(|e| cannot("read", e))? {
            None => {
                store
                    .save_pin(&key, &now)
                    .map_err(|e| cannot("record", e))?;
                tracing::info!(
                    server = %spec.name,
                    relay,
                    program = %now.program.display(),
                    sha256 = %now.program_sha256,
                    "pinned what the server runs inside the sandbox"
                );
                Ok(())
            }
            Some(pinned) => {
                let changed = changes(&pinned, &now);
                if changed.is_empty() {
                    return Ok(());
                }
                tracing::warn!(
                    server = %spec.name,
                    relay,
                    changes = ?changed,
                    "refused a start inside the sandbox: what it runs changed since it was pinned"
                );
                // Kept for `warden pin`, which accepts exactly what was reported (written
                // only when it differs from what is kept: a refused server is asked about
                // at each of its requests).
                let pending = pending_key(relay, spec);
                let kept = store.pin_for(&pending).ok().flatten();
                if kept.as_ref() != Some(&now)
                    && let Err(error) = store.save_pin(&pending, &now)
                {
                    tracing::warn!(server = %spec.name, "the reported state could not be kept for `warden pin`: {error}");
                }
                let lines: Vec<String> = changed.iter().map(|line| format!("  - {line}")).collect();
                Err(format!(
                    "`{name}` is not started: what it runs inside relay `{relay}` changed \
                     since it was pinned (executable pin drift):\n{}\n  check the change, then \
                     accept it with `warden pin {name}`",
                    lines.join("\n"),
                    name = spec.name
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warden_relay::pins::ReportedFile;

    fn stub(dir: &std::path::Path) -> ServerSpec {
        let path = dir.join("brain.toml");
        std::fs::write(
            &path,
            "[relays.box]\ncommand = [\"true\"]\n\n[servers.git]\nrelay = \"box\"\n",
        )
        .unwrap();
        let env = warden_config::Environment::from_process().unwrap();
        warden_config::load_file(&path, &env)
            .unwrap()
            .servers
            .remove(0)
    }

    fn report(program_sha256: &str) -> Report {
        Report {
            start: 1,
            program: "/opt/venv/bin/python3".into(),
            program_sha256: program_sha256.into(),
            files: vec![ReportedFile {
                path: "/opt/venv/bin/mcp-server-git".into(),
                role: "script".into(),
                sha256: "b".repeat(64),
            }],
            package: None,
            notes: Vec::new(),
        }
    }

    #[test]
    fn a_changed_report_is_refused_until_its_pending_state_is_pinned() {
        let dir = tempfile::tempdir().unwrap();
        let spec = stub(dir.path());
        let store = Arc::new(Mutex::new(
            Store::open(dir.path().join("state.db")).unwrap(),
        ));
        let pins = RelayPins::new(Arc::clone(&store));
        // First use records; the same state again passes (control).
        pins.check("box", &spec, &report(&"a".repeat(64))).unwrap();
        pins.check("box", &spec, &report(&"a".repeat(64))).unwrap();
        // A swapped program is refused, naming the server, the relay and the file.
        let error = pins
            .check("box", &spec, &report(&"c".repeat(64)))
            .unwrap_err();
        for part in [
            "`git` is not started",
            "relay `box`",
            "/opt/venv/bin/python3 changed",
            "warden pin git",
        ] {
            assert!(error.contains(part), "{part}: {error}");
        }
        // Refused again on the next start: nothing was accepted silently.
        assert!(pins.check("box", &spec, &report(&"c".repeat(64))).is_err());
        // Accepting the pending state (what `warden pin` does) lets it run.
        let pending = store
            .lock()
            .unwrap()
            .pin_for(&pending_key("box", &spec))
            .unwrap()
            .unwrap();
        assert_eq!(pending.program_sha256, "c".repeat(64));
        store
            .lock()
            .unwrap()
            .save_pin(&key("box", &spec), &pending)
            .unwrap();
        pins.check("box", &spec, &report(&"c".repeat(64))).unwrap();
        // The pin is per relay: the same server behind another relay is pinned apart.
        assert_ne!(key("box", &spec), key("other", &spec));
        assert!(
            key("box", &spec).starts_with("relay:"),
            "{}",
            key("box", &spec)
        );
    }
}
