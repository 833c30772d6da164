//! [`OsStore`] against a real Secret Service (gnome-keyring on a private D-Bus session bus),
//! and without one: a bus with no Secret Service on it, a bus address nothing listens on,
//! and a bus that accepts the connection and never answers. The store must keep, return
//! and forget a server's record in the first case, move a record over from the old 0600
//! file, and in the others fail with a reason, within its time limit, without hanging.
//!
//! Each case runs in a process of its own (this test has its own `main`, `harness = false`):
//! libdbus reads `DBUS_SESSION_BUS_ADDRESS` once per process and keeps it, so a case can
//! only be pointed at its bus from the start. The parent starts the bus, runs this same
//! binary with `WARDEN_KEYRING_CASE` naming the case, under a time limit, and counts.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "support/keyring_bus.rs"]
mod keyring_bus;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keyring_bus::{PrivateBus, SilentBus};
use warden_oauth::store::{Grant, Registration, ServerRecord};
use warden_oauth::{AuthMethod, FileStore, OsStore, Secret, Store};

const SERVICE: &str = "warden-oauth-test";
const ACCESS: &str = "access-token-0123456789abcdef";
const REFRESH: &str = "refresh-token-fedcba9876543210";

fn record(access: &str) -> ServerRecord {
    let mut record = ServerRecord::default();
    record.put_grant(Grant {
        issuer: "https://as.example".into(),
        resource: "https://mcp.example/mcp".into(),
        access_token: Secret::new(access),
        refresh_token: Some(Secret::new(REFRESH)),
        expires_at: Some(1_900_000_000),
        scopes: vec!["read".into()],
    });
    record.put_registration(Registration {
        issuer: "https://as.example".into(),
        client_id: "client-1".into(),
        client_secret: Some(Secret::new("client-secret-xyz")),
        auth_method: AuthMethod::ClientSecretBasic,
        source: "dynamic".into(),
    });
    record
}

const CASE_VAR: &str = "WARDEN_KEYRING_CASE";
/// The longest a case's process may run.
const CASE_LIMIT: Duration = Duration::from_secs(90);

fn fresh() -> OsStore {
    OsStore::with_service(SERVICE, Duration::from_secs(20))
}

/// Every file under `dir`, read whole.
fn contents(dir: &std::path::Path) -> Vec<u8> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            all.extend(std::fs::read(path).unwrap());
        }
    }
    all
}

fn main() {
    if let Ok(case) = std::env::var(CASE_VAR) {
        match case.as_str() {
            "real" => real_secret_service(),
            "bare" => no_secret_service_on_the_bus(),
            "nowhere" => no_bus_at_all(),
            "silent" => a_bus_that_never_answers(),
            other => panic!("no case {other}"),
        }
        return;
    }
    let mut passed = 0;
    let mut failed = Vec::new();
    for case in ["real", "bare", "nowhere", "silent"] {
        // Each case's bus lives in this process, for as long as the case runs.
        let real;
        let bare;
        let silent;
        let nowhere = tempfile::tempdir().unwrap();
        let mut files = PathBuf::new();
        let address = match case {
            "real" => {
                real = PrivateBus::with_keyring();
                files = real.keyring_files();
                real.address.clone()
            }
            "bare" => {
                bare = PrivateBus::bare();
                bare.address.clone()
            }
            "silent" => {
                silent = SilentBus::start();
                silent.address.clone()
            }
            _ => format!("unix:path={}", nowhere.path().join("no-bus").display()),
        };
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .env(CASE_VAR, case)
            .env("DBUS_SESSION_BUS_ADDRESS", &address)
            .env("WARDEN_KEYRING_FILES", &files)
            .spawn()
            .unwrap();
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if started.elapsed() > CASE_LIMIT {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        match status {
            Some(status) if status.success() => {
                println!("test {case} ... ok");
                passed += 1;
            }
            Some(status) => {
                println!("test {case} ... FAILED ({status})");
                failed.push(case);
            }
            None => {
                println!("test {case} ... FAILED (still running after {CASE_LIMIT:?})");
                failed.push(case);
            }
        }
    }
    println!("{passed} passed, {} failed", failed.len());
    if !failed.is_empty() {
        std::process::exit(1);
    }
}

/// gnome-keyring on a private bus: kept, read back by another store, forgotten; the old
/// file's records move over.
fn real_secret_service() {
    {
        let keyrings = PathBuf::from(std::env::var("WARDEN_KEYRING_FILES").unwrap());
        let store = fresh();
        store.probe().unwrap();
        assert_eq!(store.load("docs").unwrap(), ServerRecord::default());
        store.save("docs", &record(ACCESS)).unwrap();
        // Another store (as another Warden process would): the record is in the Secret
        // Service, not in this process.
        assert_eq!(fresh().load("docs").unwrap(), record(ACCESS));
        // Replaced, not added to.
        store.save("docs", &record("access-token-2")).unwrap();
        assert_eq!(fresh().load("docs").unwrap(), record("access-token-2"));
        // Other servers are other entries.
        assert_eq!(fresh().load("mail").unwrap(), ServerRecord::default());
        // gnome-keyring's files on disk hold no token in the clear.
        let on_disk = contents(&keyrings);
        assert!(!on_disk.is_empty());
        for secret in [ACCESS, REFRESH, "access-token-2", "client-secret-xyz"] {
            assert!(
                !on_disk
                    .windows(secret.len())
                    .any(|window| window == secret.as_bytes()),
                "{secret} is in the clear in the keyring files"
            );
        }
        // The description names the store, never a secret.
        let described = store.describe();
        assert!(described.contains("Secret Service"), "{described}");
        assert!(store.remove("docs").unwrap());
        assert_eq!(fresh().load("docs").unwrap(), ServerRecord::default());
        assert!(!store.remove("docs").unwrap());

        // Migration: a record in the old 0600 file moves to the credential store.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("warden/oauth-tokens.json");
        let file = Arc::new(FileStore::new(&path));
        file.save("legacy", &record(ACCESS)).unwrap();
        file.save("other", &record("other-token")).unwrap();
        let migrating = fresh().with_file(file.clone());
        assert_eq!(migrating.load("legacy").unwrap(), record(ACCESS));
        assert_eq!(file.load("legacy").unwrap(), ServerRecord::default());
        assert_eq!(file.load("other").unwrap(), record("other-token"));
        assert_eq!(fresh().load("legacy").unwrap(), record(ACCESS));
        // A token file other users can read is not read, even to migrate it.
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        let refusing = fresh().with_file(file.clone());
        assert_eq!(refusing.load("other").unwrap(), ServerRecord::default());
        assert!(fresh().remove("legacy").unwrap());
    }
}

/// A session bus with no Secret Service on it: a reason, at once.
fn no_secret_service_on_the_bus() {
    {
        let started = Instant::now();
        let error = fresh().probe().unwrap_err().to_string();
        assert!(started.elapsed() < Duration::from_secs(10), "{error}");
        assert!(
            error.contains("Secret Service") && error.contains("org.freedesktop.secrets"),
            "{error}"
        );
        let error = fresh()
            .save("docs", &record(ACCESS))
            .unwrap_err()
            .to_string();
        assert!(!error.contains(ACCESS), "{error}");
    }
}

/// A bus address where nothing listens: a reason, at once.
fn no_bus_at_all() {
    {
        let started = Instant::now();
        let error = fresh().probe().unwrap_err().to_string();
        assert!(started.elapsed() < Duration::from_secs(10), "{error}");
        assert!(error.contains("Secret Service"), "{error}");
    }
}

/// A bus that accepts the connection and never answers: the call gives up at its limit,
/// and the store then fails at once instead of waiting again.
fn a_bus_that_never_answers() {
    {
        let store = OsStore::with_service(SERVICE, Duration::from_secs(2));
        let started = Instant::now();
        let error = store.probe().unwrap_err().to_string();
        let waited = started.elapsed();
        assert!(error.contains("did not answer within 2"), "{error}");
        assert!(waited >= Duration::from_secs(2), "{waited:?}");
        assert!(waited < Duration::from_secs(10), "{waited:?}");
        let started = Instant::now();
        let error = store.load("docs").unwrap_err().to_string();
        assert!(error.contains("did not answer"), "{error}");
        assert!(started.elapsed() < Duration::from_millis(500));
    }
}
