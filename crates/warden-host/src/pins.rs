//! Pinned executables: on a server's first start Warden records the sha256 of what the
//! start executes (the resolved program, the interpreter of its `#!` line, the script or
//! module an interpreter runs, preloads, a `uv run` lockfile) and the package of a package
//! launcher, in the state store; every later start compares and refuses a server whose
//! bytes changed. Data files named in the arguments are not pinned (see
//! [`warden_mcp::executed`]). `warden pin SERVER` accepts the new state once the user has
//! looked.
//!
//! The comparison happens in [`PinningLauncher`], at the launcher seam, right before the
//! process is spawned, so no caller can start a server around it; the launcher then runs
//! exactly the files it hashed, or refuses (see [`warden_mcp::ConfinedLauncher::launch_pinned`]).
//! A pinned file that someone other than the user could change (inside a server's write
//! grant, or in a directory other users may write) is refused before anything is compared:
//! a pin could not vouch for it ([`warden_mcp::exposure`]).
//!
//! Part of the host core: [`HostBuilder`](crate::HostBuilder) puts every stdio server it
//! starts through a [`PinningLauncher`], whichever front end builds the host.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use warden_config::{Environment, Scope, ServerSpec};
use warden_mcp::{
    ConfinedLauncher, Fingerprint, LaunchError, LaunchRequest, Launched, Launcher, WriteGrant,
};
use warden_store::{PIN_RULE_EXECUTED, Pin, Store};

/// Where the state store lives: `$XDG_STATE_HOME/warden/state.db`.
pub fn state_db(env: &Environment) -> PathBuf {
    env.state_home.join("warden").join("state.db")
}

/// The key `spec`'s pin is stored under: name, scope and configuration file.
pub fn key_for(spec: &ServerSpec) -> String {
    key_in(&spec.name, &spec.origin)
}

/// The store key of a server named `name` defined in the file `origin`.
pub fn key_in(name: &str, origin: &warden_config::Origin) -> String {
    let scope = match origin.scope {
        Scope::User => "user",
        Scope::Project => "project",
        Scope::Local => "local",
        Scope::Explicit => "explicit",
    };
    warden_store::server_key(name, scope, &origin.path)
}

pub use warden_mcp::exposure::{exposed, exposed_refusal, write_grants};

/// A fingerprint as the store keeps it.
pub fn to_pin(fingerprint: &Fingerprint) -> Pin {
    pin_of(
        &fingerprint.program,
        &fingerprint.program_sha256,
        fingerprint
            .files
            .iter()
            .map(|file| (file.path.as_path(), file.sha256.as_str())),
        fingerprint.package.as_deref(),
    )
}

/// The pin of a start that runs `program` (hashed `program_sha256`), the other `files`
/// with their hashes, and `package`: what the store keeps for a local server's
/// fingerprint and for a relayed server's report alike.
pub(crate) fn pin_of<'a>(
    program: &Path,
    program_sha256: &str,
    files: impl Iterator<Item = (&'a Path, &'a str)>,
    package: Option<&str>,
) -> Pin {
    Pin {
        rule: PIN_RULE_EXECUTED,
        program: program.to_path_buf(),
        program_sha256: program_sha256.to_owned(),
        files: files
            .map(|(path, sha256)| (path.to_path_buf(), sha256.to_owned()))
            .collect(),
        package: package.map(str::to_owned),
    }
}

/// The first 12 hex digits of `hash`, for a line a person reads.
pub(crate) fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// The line saying how the pinned program of `old` differs from `program` with
/// `program_sha256` (moved, or changed in place); none when it is the same.
pub(crate) fn program_changes(old: &Pin, program: &Path, program_sha256: &str) -> Vec<String> {
    if old.program != program {
        vec![format!(
            "program path changed: {} -> {} (sha256 {}… -> {}…)",
            old.program.display(),
            program.display(),
            short(&old.program_sha256),
            short(program_sha256)
        )]
    } else if old.program_sha256 != program_sha256 {
        vec![format!(
            "program {} changed: sha256 {}… -> {}…",
            program.display(),
            short(&old.program_sha256),
            short(program_sha256)
        )]
    } else {
        Vec::new()
    }
}

/// What differs between the stored pin `old` and the current state `new`, one line each;
/// empty when they match.
///
/// A pin recorded by the earlier rule (every file named in the arguments, data included;
/// [`warden_store::PIN_RULE_ARGUMENTS`]) is compared on what both rules pin: the program,
/// the files it holds that are still executed, and the package as that rule chose it. A
/// file it holds that is not executed (a database, a log) is not compared; an executed
/// file it would have pinned but does not hold is a new argument, and a change. The caller
/// then records the pin again under the current rule.
pub fn changes(old: &Pin, new: &Fingerprint) -> Vec<String> {
    let mut out = program_changes(old, &new.program, &new.program_sha256);
    let legacy = old.rule < PIN_RULE_EXECUTED;
    for (path, hash) in &old.files {
        match new.files.iter().find(|f| &f.path == path) {
            None if legacy => {} // a data file the earlier rule pinned
            None => out.push(format!("{} is no longer run", path.display())),
            Some(now) if &now.sha256 != hash => out.push(format!(
                "{} {} changed: sha256 {}… -> {}…",
                now.role.as_str(),
                path.display(),
                short(hash),
                short(&now.sha256)
            )),
            Some(_) => {}
        }
    }
    for file in &new.files {
        if old.files.iter().any(|(p, _)| p == &file.path) {
            continue;
        }
        if legacy && !new.legacy_files.contains(&file.path) {
            continue; // the earlier rule could not pin it: recorded from now on
        }
        out.push(format!(
            "{} {} is new (sha256 {}…; {})",
            file.role.as_str(),
            file.path.display(),
            short(&file.sha256),
            file.origin
        ));
    }
    let package = if legacy {
        &new.legacy_package
    } else {
        &new.package
    };
    if &old.package != package {
        out.push(format!(
            "package changed: {} -> {}",
            old.package.as_deref().unwrap_or("(none)"),
            package.as_deref().unwrap_or("(none)")
        ));
    }
    out
}

/// What the earlier rule pinned that the current one does not (data files), for display.
pub fn dropped_by_rule(old: &Pin, new: &Fingerprint) -> Vec<PathBuf> {
    if old.rule >= PIN_RULE_EXECUTED {
        return Vec::new();
    }
    old.files
        .iter()
        .filter(|(path, _)| !new.files.iter().any(|f| &f.path == path))
        .map(|(path, _)| path.clone())
        .collect()
}

/// What a start executes, one line per hashed item, then what could not be pinned.
pub fn describe(fingerprint: &Fingerprint) -> Vec<String> {
    let files = fingerprint.files.iter().map(|file| {
        format!(
            "{} {}  sha256 {}  ({})",
            file.role.as_str(),
            file.path.display(),
            file.sha256,
            file.origin
        )
    });
    let mut out = lines_of(
        &fingerprint.program,
        &fingerprint.program_sha256,
        files,
        fingerprint.package.as_deref(),
    );
    out.extend(
        fingerprint
            .notes
            .iter()
            .map(|note| format!("not pinned: {note}")),
    );
    out
}

/// What a stored pin holds, one line per item (`warden pin` of a relayed server, whose
/// files the brain knows only from the sandbox's report).
pub fn describe_pin(pin: &Pin) -> Vec<String> {
    let files = pin
        .files
        .iter()
        .map(|(path, hash)| format!("file {}  sha256 {hash}", path.display()));
    lines_of(
        &pin.program,
        &pin.program_sha256,
        files,
        pin.package.as_deref(),
    )
}

/// The program's line, the `files` lines, the package's line.
fn lines_of(
    program: &Path,
    program_sha256: &str,
    files: impl Iterator<Item = String>,
    package: Option<&str>,
) -> Vec<String> {
    let mut out = vec![format!(
        "program {}  sha256 {program_sha256}",
        program.display()
    )];
    out.extend(files);
    out.extend(package.map(|package| format!("package {package}")));
    out
}

/// Starts servers through a [`ConfinedLauncher`] after checking each against its pin:
/// a server whose pinned files someone else could change is refused, the first start
/// records the pin (trust on first use), a later start whose program, files or package
/// differ is refused with [`LaunchError::Refused`] naming every change, and a start that
/// passes runs exactly the files that were hashed.
pub struct PinningLauncher {
    inner: ConfinedLauncher,
    store: Arc<Mutex<Store>>,
    keys: HashMap<String, String>,
    grants: Vec<WriteGrant>,
    packages: Option<warden_packages::Packages>,
    /// Installs just made by [`install_missing`](PinningLauncher::install_missing), by
    /// server key, with the request they were made for: the next start of that server runs
    /// it without scanning and hashing the whole tree a second time (as a start that
    /// installs does). Taken once; every later start verifies.
    fresh: Mutex<HashMap<String, (LaunchRequest, crate::packages::Prepared)>>,
}

impl PinningLauncher {
    /// Pins the servers in `specs` (by name) in `store`; `configured` is every server of
    /// the configuration (whose write grants decide what is exposed).
    pub fn new(
        inner: ConfinedLauncher,
        store: Store,
        specs: &[ServerSpec],
        configured: &[ServerSpec],
    ) -> Self {
        Self::shared(inner, Arc::new(Mutex::new(store)), specs, configured)
    }

    /// [`new`](PinningLauncher::new), with a store shared with the rest of the host.
    pub fn shared(
        inner: ConfinedLauncher,
        store: Arc<Mutex<Store>>,
        specs: &[ServerSpec],
        configured: &[ServerSpec],
    ) -> Self {
        let keys = specs
            .iter()
            .map(|spec| (spec.name.clone(), key_for(spec)))
            .collect();
        let grants = write_grants(configured, inner.scratch_base());
        Self {
            inner,
            store,
            keys,
            grants,
            packages: None,
            fresh: Mutex::new(HashMap::new()),
        }
    }

    /// Installs and runs the packages of servers written as `npx -y PKG` or `uvx PKG` from
    /// `packages` (see [`crate::packages`]) instead of letting the launcher fetch them at
    /// every start.
    pub fn with_packages(mut self, packages: warden_packages::Packages) -> Self {
        self.packages = Some(packages);
        self
    }

    /// Installs the packages of the servers in `specs` that have none pinned yet (or whose
    /// package spec changed), all at once, before any server is connected: an install
    /// takes far longer than a connect timeout. A failure is logged; the server's start
    /// then tries again and reports it.
    pub async fn install_missing(self: &Arc<Self>, specs: &[ServerSpec]) {
        let Some(packages) = &self.packages else {
            return;
        };
        let mut pending = Vec::new();
        for spec in specs {
            let (Some(request), Some(key)) =
                (LaunchRequest::for_spec(spec), self.keys.get(&spec.name))
            else {
                continue;
            };
            let Some(package) = warden_packages::parse(&request.command, &request.args) else {
                continue;
            };
            let pinned = self.lock_store().package_pin_for(key).ok().flatten();
            if pinned.is_some_and(|pin| crate::packages::pin_matches(&pin, &package)) {
                continue;
            }
            let (packages, launcher, key) = (packages.clone(), Arc::clone(self), key.clone());
            pending.push(tokio::task::spawn_blocking(
                move || match crate::packages::prepare(
                    &packages,
                    &launcher.store,
                    &key,
                    &request,
                    &launcher.grants,
                ) {
                    Ok(Some(prepared)) => launcher.remember_fresh(&key, &request, prepared),
                    Ok(None) => {}
                    Err(error) => {
                        tracing::warn!(server = %request.server, %error, "package install failed");
                    }
                },
            ));
        }
        for task in pending {
            let _ = task.await;
        }
    }

    fn remember_fresh(
        &self,
        key: &str,
        request: &LaunchRequest,
        prepared: crate::packages::Prepared,
    ) {
        self.fresh
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key.to_owned(), (request.clone(), prepared));
    }

    /// The package server `request`'s rewritten request: the install `install_missing`
    /// just made for it when it is still the pinned one for the same request, else
    /// [`crate::packages::prepare`] (which verifies the pinned tree, or installs).
    fn prepared(
        &self,
        packages: &warden_packages::Packages,
        key: &str,
        request: &LaunchRequest,
    ) -> Result<Option<crate::packages::Prepared>, LaunchError> {
        let fresh = self
            .fresh
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(key);
        if let Some((made_for, prepared)) = fresh {
            let still_pinned = self
                .lock_store()
                .package_pin_for(key)
                .ok()
                .flatten()
                .is_some_and(|pin| Path::new(&pin.dir) == prepared.dir);
            if made_for == *request && still_pinned {
                return Ok(Some(prepared));
            }
        }
        crate::packages::prepare(packages, &self.store, key, request, &self.grants)
    }

    fn lock_store(&self) -> std::sync::MutexGuard<'_, Store> {
        match self.store.lock() {
            Ok(store) => store,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// `check` with the executable pin of a package server recorded afresh when it names
    /// nothing in the pinned installation: its package was installed anew (by this start,
    /// or by `install_missing` before it), or the pin predates package installs (it pinned
    /// the launcher, which no longer runs). The package pin was verified before.
    fn check(
        &self,
        key: &str,
        request: &LaunchRequest,
        package: Option<crate::packages::Prepared>,
    ) -> Result<Fingerprint, LaunchError> {
        if let (Some(prepared), Some(packages)) = (package, &self.packages) {
            let stale = self
                .lock_store()
                .pin_for(key)
                .ok()
                .flatten()
                .filter(|pin| !crate::packages::pin_is_of(pin, &prepared.dir));
            if let Some(stale) = stale {
                let current = self.current(request)?;
                // What the stale pin holds outside the package cache (`node`, the system
                // interpreter) was not vouched for by the package pin: still compared.
                let changed = crate::packages::changed_outside(&stale, &current, packages.base());
                if !changed.is_empty() {
                    return Err(changed_since_pinned(
                        "what it runs outside its package",
                        &changed,
                        &request.server,
                    ));
                }
                self.lock_store()
                    .save_pin(key, &to_pin(&current))
                    .map_err(|error| {
                        LaunchError::Refused(format!(
                            "cannot record the pinned executable: {error}"
                        ))
                    })?;
                tracing::info!(
                    server = %request.server,
                    install = %prepared.dir.display(),
                    "pinned the entry point of its newly installed package"
                );
                return Ok(current);
            }
        }
        self.check_pin(key, request)
    }

    fn current(&self, request: &LaunchRequest) -> Result<Fingerprint, LaunchError> {
        let current = match self.inner.fingerprint(request) {
            Ok(fingerprint) => fingerprint,
            Err(warden_mcp::FingerprintError::Resolve(error)) => return Err(error),
            Err(error) => {
                return Err(LaunchError::Refused(format!(
                    "cannot check the pinned executable: {error}"
                )));
            }
        };
        let exposed = exposed(&current, &self.grants);
        if !exposed.is_empty() {
            return Err(LaunchError::Refused(exposed_refusal(&exposed)));
        }
        Ok(current)
    }

    fn check_pin(&self, key: &str, request: &LaunchRequest) -> Result<Fingerprint, LaunchError> {
        let current = self.current(request)?;
        let mut store = self.lock_store();
        let stored = store.pin_for(key).map_err(|error| {
            LaunchError::Refused(format!("cannot check the pinned executable: {error}"))
        })?;
        let record = |store: &mut Store| {
            store.save_pin(key, &to_pin(&current)).map_err(|error| {
                LaunchError::Refused(format!("cannot record the pinned executable: {error}"))
            })
        };
        match stored {
            None => {
                record(&mut store)?;
                tracing::info!(
                    server = %request.server,
                    program = %current.program.display(),
                    sha256 = %current.program_sha256,
                    files = current.files.len(),
                    "pinned"
                );
            }
            Some(pinned) => {
                let changed = changes(&pinned, &current);
                if !changed.is_empty() {
                    return Err(changed_since_pinned(
                        "what it runs",
                        &changed,
                        &request.server,
                    ));
                }
                if pinned.rule < PIN_RULE_EXECUTED {
                    record(&mut store)?;
                    tracing::info!(
                        server = %request.server,
                        "pin recorded again under the current rule (only what is executed)"
                    );
                }
            }
        }
        Ok(current)
    }
}

impl Launcher for PinningLauncher {
    fn launch(&self, request: &LaunchRequest) -> Result<Launched, LaunchError> {
        match self.keys.get(&request.server) {
            Some(key) => {
                // A package server runs its installed entry point, never the launcher.
                let prepared = match &self.packages {
                    Some(packages) => self.prepared(packages, key, request)?,
                    None => None,
                };
                let request = prepared
                    .as_ref()
                    .map_or_else(|| request.clone(), |p| p.request.clone());
                let in_use = prepared.as_ref().map(|p| Arc::clone(&p.in_use));
                let fingerprint = self.check(key, &request, prepared)?;
                let mut launched = self.inner.launch_pinned(&request, &fingerprint)?;
                if let Some(in_use) = in_use {
                    launched
                        .group
                        .keep_also(Box::new(SharedInUse { _held: in_use }));
                }
                Ok(launched)
            }
            None => self.inner.launch(request),
        }
    }
}

/// A package install's hold, shared with the [`crate::packages::Prepared`] it came with,
/// kept with the server's process.
#[derive(Debug)]
struct SharedInUse {
    _held: Arc<warden_packages::InUse>,
}

impl warden_mcp::launcher::Keep for SharedInUse {}

/// The refusal of a start because `what` changed since it was pinned: each change on a
/// line, and the command that accepts them.
fn changed_since_pinned(what: &str, changed: &[String], server: &str) -> LaunchError {
    let lines: Vec<String> = changed.iter().map(|line| format!("  - {line}")).collect();
    LaunchError::Refused(format!(
        "not started: {what} changed since it was pinned:\n{}\n  check the change, then \
         accept it with `warden pin {server}`",
        lines.join("\n")
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::collections::BTreeMap;
    use std::os::unix::fs::PermissionsExt;
    use warden_store::PIN_RULE_ARGUMENTS;

    /// `python3 server.py --db data.db` in a temporary folder, fingerprinted.
    fn fingerprinted() -> (tempfile::TempDir, Fingerprint) {
        let dir = tempfile::tempdir().unwrap();
        let python = dir.path().join("python3");
        std::fs::write(&python, "interpreter").unwrap();
        std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.path().join("server.py"), "print(1)").unwrap();
        std::fs::write(dir.path().join("data.db"), "rows").unwrap();
        let request = LaunchRequest {
            server: "s".into(),
            command: python.display().to_string(),
            args: ["server.py", "--db", "data.db"].map(str::to_owned).to_vec(),
            env: BTreeMap::new(),
            cwd: Some(dir.path().to_path_buf()),
            sandbox: warden_config::SandboxSpec::default(),
        };
        let fingerprint = warden_mcp::fingerprint(&request, std::ffi::OsStr::new("")).unwrap();
        (dir, fingerprint)
    }

    #[test]
    fn every_change_is_named() {
        let (dir, now) = fingerprinted();
        let pin = to_pin(&now);
        assert_eq!(pin.rule, PIN_RULE_EXECUTED);
        assert_eq!(pin.files.len(), 1, "the script, not the database");
        assert!(changes(&pin, &now).is_empty());

        let mut old = pin.clone();
        old.program_sha256 = "a".repeat(64);
        old.files[0].1 = "b".repeat(64);
        old.files.push((dir.path().join("gone.py"), "c".repeat(64)));
        old.package = Some("pkg@1".into());
        let lines = changes(&old, &now);
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(
            lines[0].contains("python3 changed: sha256 aaaaaaaaaaaa… ->"),
            "{lines:?}"
        );
        assert!(lines[1].starts_with("script ") && lines[1].contains("server.py changed"));
        assert!(lines[2].contains("gone.py is no longer run"), "{lines:?}");
        assert!(lines[3].contains("pkg@1 -> (none)"), "{lines:?}");

        let mut old = pin;
        old.files.clear();
        let lines = changes(&old, &now);
        assert!(lines[0].contains("server.py is new"), "{lines:?}");
        old.program = PathBuf::from("/usr/bin/python3");
        assert!(changes(&old, &now)[0].contains("program path changed"));
    }

    #[test]
    fn a_pin_of_the_earlier_rule_is_compared_on_what_both_rules_pin() {
        let (dir, now) = fingerprinted();
        let script = dir.path().join("server.py");
        let data = dir.path().join("data.db");
        let mut old = to_pin(&now);
        old.rule = PIN_RULE_ARGUMENTS;
        // The database, pinned then, has changed since: not compared.
        old.files.push((data.clone(), "d".repeat(64)));
        assert!(changes(&old, &now).is_empty(), "{:?}", changes(&old, &now));
        assert_eq!(dropped_by_rule(&old, &now), [data]);
        // The script is compared as before.
        old.files[0].1 = "e".repeat(64);
        assert_eq!(changes(&old, &now).len(), 1);
        // A script the earlier rule would have pinned but the pin lacks is a new argument.
        old.files.remove(0);
        let lines = changes(&old, &now);
        assert!(
            lines.len() == 1 && lines[0].contains(&format!("{} is new", script.display())),
            "{lines:?}"
        );
    }
}

#[cfg(test)]
mod package_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::collections::BTreeMap;
    use std::time::Duration;
    use warden_packages::{PackageError, Runner, Step};

    /// Plays npm: writes `@s/pkg` at the version the step asks for.
    struct FakeNpm;

    impl Runner for FakeNpm {
        fn run(&self, step: &Step, dir: &Path, _limit: Duration) -> Result<(), PackageError> {
            let requirement = step.args.last().unwrap();
            let version = requirement.rsplit('@').next().unwrap();
            let package = dir.join("node_modules/@s/pkg");
            std::fs::create_dir_all(package.join("dist")).unwrap();
            std::fs::write(
                package.join("package.json"),
                format!(r#"{{"name":"@s/pkg","version":"{version}","bin":"dist/index.js"}}"#),
            )
            .unwrap();
            std::fs::write(
                package.join("dist/index.js"),
                format!("console.log('{version}')"),
            )
            .unwrap();
            std::fs::write(dir.join("package-lock.json"), "{}").unwrap();
            Ok(())
        }
    }

    fn launcher(root: &Path) -> PinningLauncher {
        let store = Store::open(root.join("state/state.db")).unwrap();
        PinningLauncher {
            inner: ConfinedLauncher::from_env(root.join("scratch")),
            store: Arc::new(Mutex::new(store)),
            keys: [("s".to_owned(), "key".to_owned())].into_iter().collect(),
            grants: Vec::new(),
            packages: Some(warden_packages::Packages::new(
                root.join("packages"),
                Arc::new(FakeNpm),
            )),
            fresh: Mutex::new(HashMap::new()),
        }
    }

    fn npx(package: &str) -> LaunchRequest {
        LaunchRequest {
            server: "s".into(),
            command: "npx".into(),
            args: vec!["-y".into(), package.into()],
            env: BTreeMap::new(),
            cwd: None,
            sandbox: warden_config::SandboxSpec::default(),
        }
    }

    /// What a start checks before the spawn: the package, then the executable pin.
    fn start(launcher: &PinningLauncher, request: &LaunchRequest) -> Result<Fingerprint, String> {
        let packages = launcher.packages.as_ref().unwrap();
        let prepared = launcher
            .prepared(packages, "key", request)
            .map_err(|error| error.to_string())?
            .unwrap();
        let rewritten = prepared.request.clone();
        launcher
            .check("key", &rewritten, Some(prepared))
            .map_err(|error| error.to_string())
    }

    fn root() -> tempfile::TempDir {
        // Under /var/tmp, like a user's state: /tmp's tempdirs are fine too, but the
        // exposure check must see a directory only its owner can write.
        let root = tempfile::tempdir().unwrap();
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        root
    }

    use std::os::unix::fs::PermissionsExt;

    /// Plays a slow npm that counts its installs.
    struct SlowNpm {
        installs: std::sync::atomic::AtomicUsize,
    }

    impl Runner for SlowNpm {
        fn run(&self, step: &Step, dir: &Path, limit: Duration) -> Result<(), PackageError> {
            self.installs
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            // Long enough for the other start to arrive while this install runs.
            std::thread::sleep(Duration::from_millis(700));
            FakeNpm.run(step, dir, limit)
        }
    }

    #[test]
    fn two_starts_of_a_missing_package_install_it_once() {
        let root = root();
        let slow = Arc::new(SlowNpm {
            installs: std::sync::atomic::AtomicUsize::new(0),
        });
        let packages = warden_packages::Packages::new(root.path().join("packages"), slow.clone());
        let db = root.path().join("state/state.db");
        Store::open(&db).unwrap();
        // Two starts, each with a store of its own on the same database, as two processes.
        let starts: Vec<_> = (0..2)
            .map(|n| {
                let packages = packages.clone();
                let store = Arc::new(Mutex::new(Store::open(&db).unwrap()));
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(50 * n));
                    crate::packages::prepare(&packages, &store, "key", &npx("@s/pkg@1"), &[])
                        .map(|prepared| prepared.unwrap().dir)
                        .map_err(|error| error.to_string())
                })
            })
            .collect();
        let dirs: Vec<PathBuf> = starts
            .into_iter()
            .map(|start| start.join().unwrap().unwrap())
            .collect();
        assert_eq!(
            slow.installs.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "the second start waited and used the first one's install"
        );
        assert_eq!(dirs[0], dirs[1]);
        // Install directories (beside each, the `.use` file its holds lock).
        let installs: Vec<_> = std::fs::read_dir(packages.slot("key"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|path| path.is_dir())
            .collect();
        assert_eq!(
            installs,
            [dirs[0].clone()],
            "one install, no half-made other"
        );
        let pinned = Store::open(&db)
            .unwrap()
            .package_pin_for("key")
            .unwrap()
            .unwrap();
        assert_eq!(Path::new(&pinned.dir), dirs[0]);

        // The waiter still verifies what it finds: an install changed while it waited is
        // refused, not used.
        let store = Arc::new(Mutex::new(Store::open(&db).unwrap()));
        let held = packages.lock("key", "s", "warden update").unwrap();
        std::fs::write(dirs[0].join("node_modules/@s/pkg/dist/index.js"), "evil").unwrap();
        let waiter = {
            let (packages, store) = (packages.clone(), Arc::clone(&store));
            std::thread::spawn(move || {
                crate::packages::prepare(&packages, &store, "key", &npx("@s/pkg@2"), &[])
                    .map(|p| p.unwrap().dir)
                    .map_err(|error| error.to_string())
            })
        };
        // The configuration asks for version 2, which the holder installs and pins.
        std::thread::sleep(Duration::from_millis(200));
        let two = packages
            .install(
                &held,
                &warden_packages::parse("npx", &["-y".into(), "@s/pkg@2".into()]).unwrap(),
            )
            .unwrap();
        std::fs::write(
            PathBuf::from(&two.pin.dir).join("package-lock.json"),
            "{\"x\":1}",
        )
        .unwrap();
        Store::open(&db)
            .unwrap()
            .save_package_pin("key", &two.pin)
            .unwrap();
        drop(held);
        let error = waiter.join().unwrap().unwrap_err();
        assert!(error.contains("package-lock.json changed"), "{error}");
        assert_eq!(slow.installs.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[test]
    fn a_start_waits_for_an_install_lock_only_so_long_and_names_its_holder() {
        let root = root();
        let packages =
            warden_packages::Packages::new(root.path().join("packages"), Arc::new(FakeNpm))
                .with_lock_wait(Duration::from_millis(300));
        let store = Arc::new(Mutex::new(
            Store::open(root.path().join("state/state.db")).unwrap(),
        ));
        let held = packages.lock("key", "s", "warden update").unwrap();
        let started = std::time::Instant::now();
        let error = crate::packages::prepare(&packages, &store, "key", &npx("@s/pkg@1"), &[])
            .unwrap_err()
            .to_string();
        assert!(started.elapsed() < Duration::from_secs(5), "bounded");
        assert!(error.contains("server `s`"), "{error}");
        assert!(
            error.contains(&format!("process {} (warden update)", std::process::id())),
            "{error}"
        );
        assert!(error.contains("did not finish within 300 ms"), "{error}");
        assert!(
            store
                .lock()
                .unwrap()
                .package_pin_for("key")
                .unwrap()
                .is_none()
        );
        // Control: once the holder lets go, the same start installs and runs.
        drop(held);
        crate::packages::prepare(&packages, &store, "key", &npx("@s/pkg@1"), &[])
            .unwrap()
            .unwrap();
    }

    /// Replays `warden update` removing the install it replaced while a server still runs
    /// from it: a start holds the install it prepared, so the removal is refused (the
    /// update leaves it to a later `gc`); once the start's hold is gone, it is removed.
    #[test]
    fn an_install_a_start_prepared_is_not_removed_under_it() {
        let root = root();
        let packages =
            warden_packages::Packages::new(root.path().join("packages"), Arc::new(FakeNpm));
        let store = Arc::new(Mutex::new(
            Store::open(root.path().join("state/state.db")).unwrap(),
        ));
        let prepared = crate::packages::prepare(&packages, &store, "key", &npx("@s/pkg@1"), &[])
            .unwrap()
            .unwrap();
        let pin = store
            .lock()
            .unwrap()
            .package_pin_for("key")
            .unwrap()
            .unwrap();
        let error = packages.remove(&prepared.dir).unwrap_err().to_string();
        assert!(error.contains("in use by a running server"), "{error}");
        crate::packages::remove_install(&packages, &pin);
        assert!(prepared.dir.join("node_modules").is_dir(), "left in place");
        let dir = prepared.dir.clone();
        drop(prepared);
        crate::packages::remove_install(&packages, &pin);
        assert!(!dir.exists(), "removed once nothing runs from it");
    }

    #[test]
    fn a_bunx_server_is_refused_naming_the_npx_form() {
        let root = root();
        let launcher = launcher(root.path());
        let packages = launcher.packages.as_ref().unwrap();
        let mut request = npx("@s/pkg@1");
        request.command = "bunx".into();
        request.args = vec!["@s/pkg@1".into(), "--flag".into()];
        let error = crate::packages::prepare(packages, &launcher.store, "key", &request, &[])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("not started") && error.contains("`npx -y @s/pkg@1 --flag`"),
            "{error}"
        );
        assert!(!packages.base().exists(), "nothing was installed");
        // Control: the same package written with npx is installed and runs.
        let prepared =
            crate::packages::prepare(packages, &launcher.store, "key", &npx("@s/pkg@1"), &[])
                .unwrap()
                .unwrap();
        assert_eq!(prepared.request.command, "node");
    }

    #[test]
    fn a_changed_package_version_is_installed_anew_and_starts() {
        let root = root();
        let launcher = launcher(root.path());
        let first = start(&launcher, &npx("@s/pkg@1")).unwrap();
        assert!(
            first
                .files
                .iter()
                .any(|f| f.path.ends_with("dist/index.js"))
        );

        // The configuration now asks for version 2: `install_missing` installs it before
        // the start (and drops what it returns); the start then finds its package pinned.
        let request = npx("@s/pkg@2");
        crate::packages::prepare(
            launcher.packages.as_ref().unwrap(),
            &launcher.store,
            "key",
            &request,
            &[],
        )
        .unwrap()
        .unwrap();
        let second = start(&launcher, &request).unwrap();
        let script = &second
            .files
            .iter()
            .find(|f| f.path.ends_with("dist/index.js"))
            .unwrap()
            .path;
        assert_eq!(std::fs::read_to_string(script).unwrap(), "console.log('2')");
        let pin = launcher.lock_store().pin_for("key").unwrap().unwrap();
        assert!(pin.files.iter().any(|(path, _)| path == script), "{pin:?}");

        // The next start of the same install compares, and passes.
        start(&launcher, &request).unwrap();

        // A changed file of the install is still refused.
        std::fs::write(script, "console.log('evil')").unwrap();
        let error = start(&launcher, &request).unwrap_err();
        assert!(error.contains("index.js"), "{error}");
        assert!(error.contains("not started"), "{error}");
    }

    #[test]
    fn a_changed_interpreter_is_still_refused_when_the_package_changes() {
        let root = root();
        let launcher = launcher(root.path());
        start(&launcher, &npx("@s/pkg@1")).unwrap();
        // Replay: `node` (outside the package cache) changed since it was pinned, and the
        // configuration asks for another version at the same time.
        let mut pin = launcher.lock_store().pin_for("key").unwrap().unwrap();
        assert!(!pin.program.starts_with(root.path()), "{pin:?}");
        pin.program_sha256 = "0".repeat(64);
        launcher.lock_store().save_pin("key", &pin).unwrap();
        let error = start(&launcher, &npx("@s/pkg@2")).unwrap_err();
        assert!(
            error.contains(&format!("{} changed", pin.program.display())),
            "{error}"
        );
        assert!(error.contains("warden pin s"), "{error}");
    }

    #[test]
    fn an_install_made_before_the_start_is_not_scanned_again_by_that_start_only() {
        let root = root();
        let launcher = launcher(root.path());
        let request = npx("@s/pkg@1");
        // What `install_missing` does for the server.
        let packages = launcher.packages.as_ref().unwrap();
        let prepared = crate::packages::prepare(packages, &launcher.store, "key", &request, &[])
            .unwrap()
            .unwrap();
        let lock = prepared.dir.join("package-lock.json");
        launcher.remember_fresh("key", &request, prepared);
        // The lockfile goes away after the install: the start that follows it does not
        // hash the tree again, so it does not notice (the install had just hashed it) ...
        std::fs::remove_file(&lock).unwrap();
        start(&launcher, &request).unwrap();
        // ... but every later start verifies, and refuses.
        let error = start(&launcher, &request).unwrap_err();
        assert!(error.contains("package-lock.json is missing"), "{error}");

        // A remembered install for another request (the configuration changed meanwhile)
        // is not used: that start verifies (and installs the new spec).
        let two = npx("@s/pkg@2");
        let stale = crate::packages::prepare(packages, &launcher.store, "key", &two, &[])
            .unwrap()
            .unwrap();
        launcher.remember_fresh("key", &two, stale);
        start(&launcher, &npx("@s/pkg@3")).unwrap();
        let pin = launcher
            .lock_store()
            .package_pin_for("key")
            .unwrap()
            .unwrap();
        assert_eq!(pin.version, "3");
    }
}
