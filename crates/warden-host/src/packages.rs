//! Package servers at the launcher seam: a server written as `npx -y PKG` or `uvx PKG`
//! (see [`warden_packages::parse`]) is resolved to the entry point of the package Warden
//! installed for it, before its executable pin is checked and before the sandbox spawn.
//!
//! On its first start (or `warden approve`, which starts it) the package is installed
//! (confined, registry hosts only) and pinned in the store; on every later start the
//! installed tree and its lockfile must hash to the pin, else the start is refused until
//! `warden update SERVER`. The registry is never asked again at start. A changed package
//! spec in the configuration (another version, another package) is a new install: the
//! definition is the user's (and a project server's definition needs a new approval).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use warden_mcp::{LaunchError, LaunchRequest, WriteGrant};
use warden_packages::{PackageSpec, Packages};
use warden_store::Store;
use warden_store::packages::PackagePin;

/// A package server's request, rewritten to its installed entry point.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// What to launch instead of the configured launcher.
    pub request: LaunchRequest,
    /// The pinned installation's directory: an executable pin naming nothing under it was
    /// taken of another install (or of the launcher) and is recorded anew
    /// ([`pin_is_of`]).
    pub dir: PathBuf,
    /// The hold on that installation, to keep for as long as the server runs from it:
    /// `warden update` and `warden packages gc` do not remove it meanwhile.
    pub in_use: Arc<warden_packages::InUse>,
}

/// Whether the executable pin `pin` was taken of the installation in `dir`: its program or
/// one of its files lies there. A pin of an earlier install (the spec changed, the package
/// was installed by another start in this process) or of the launcher is not, and is
/// recorded again: the package pin, verified before, vouches for the new tree.
pub fn pin_is_of(pin: &warden_store::Pin, dir: &Path) -> bool {
    let canonical = std::fs::canonicalize(dir).ok();
    let under = |path: &Path| {
        path.starts_with(dir) || canonical.as_ref().is_some_and(|c| path.starts_with(c))
    };
    pin.package.is_none() && (under(&pin.program) || pin.files.iter().any(|(path, _)| under(path)))
}

/// What the executable pin `pin` holds outside the package cache `base` (the program
/// `node`, a system interpreter) that `current` runs with other bytes, one line each. A
/// pin of an earlier install is replaced when the package is installed anew; these files
/// are not part of any package pin, so they are compared as before.
pub fn changed_outside(
    pin: &warden_store::Pin,
    current: &warden_mcp::Fingerprint,
    base: &Path,
) -> Vec<String> {
    let canonical = std::fs::canonicalize(base).ok();
    let in_cache = |path: &Path| {
        path.starts_with(base) || canonical.as_ref().is_some_and(|c| path.starts_with(c))
    };
    let now = |path: &Path| {
        if current.program == path {
            return Some(current.program_sha256.as_str());
        }
        current
            .files
            .iter()
            .find(|file| file.path == path)
            .map(|file| file.sha256.as_str())
    };
    std::iter::once((&pin.program, &pin.program_sha256))
        .chain(pin.files.iter().map(|(path, hash)| (path, hash)))
        .filter(|(path, _)| !in_cache(path))
        .filter_map(|(path, hash)| match now(path) {
            Some(sha256) if sha256 != hash => Some(format!(
                "{} changed: sha256 {}… -> {}…",
                path.display(),
                hash.get(..12).unwrap_or(hash),
                sha256.get(..12).unwrap_or(sha256)
            )),
            _ => None,
        })
        .collect()
}

fn lock(store: &Arc<Mutex<Store>>) -> std::sync::MutexGuard<'_, Store> {
    match store.lock() {
        Ok(store) => store,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Whether `pin` was made for `spec` as configured now.
pub fn pin_matches(pin: &PackagePin, spec: &PackageSpec) -> bool {
    pin.ecosystem == spec.ecosystem.as_str()
        && pin.name == spec.name
        && pin.requested == spec.requested
}

/// The request that runs `request`'s package, installing and pinning it first when it has
/// no pin yet; `None` when `request` is not a package server. A pinned install that
/// changed, or that someone else could change, is refused ([`LaunchError::Refused`]).
pub fn prepare(
    packages: &Packages,
    store: &Arc<Mutex<Store>>,
    key: &str,
    request: &LaunchRequest,
    grants: &[WriteGrant],
) -> Result<Option<Prepared>, LaunchError> {
    if let Some(why) = warden_packages::spec::refused_launcher(&request.command, &request.args) {
        return Err(LaunchError::Refused(format!("not started: {why}")));
    }
    let Some(spec) = warden_packages::parse(&request.command, &request.args) else {
        return Ok(None);
    };
    let refused =
        |error: &dyn std::fmt::Display| LaunchError::Refused(format!("not started: {error}"));
    let read_pin = || {
        lock(store)
            .package_pin_for(key)
            .map_err(|error| refused(&format!("cannot read its package pin: {error}")))
    };
    let pin = match read_pin()? {
        Some(pin) if pin_matches(&pin, &spec) => {
            packages
                .verify(&request.server, &pin)
                .map_err(|error| refused(&error))?;
            pin
        }
        _ => install_locked(packages, store, key, request, &spec, &read_pin)?,
    };
    let dir = PathBuf::from(&pin.dir);
    // Held from now on, so that an update or a `gc` beside this start does not remove the
    // files the server runs from; one that removed them just now is reported.
    let in_use = packages
        .hold(&request.server, &dir)
        .map_err(|error| refused(&error))?;
    if let Some(why) = warden_mcp::exposure(&dir, grants) {
        return Err(refused(&format!(
            "its package directory {} could be changed by someone other than you: {why}",
            dir.display()
        )));
    }
    let entry = warden_packages::entry(&spec, &dir).map_err(|error| refused(&error))?;
    Ok(Some(Prepared {
        request: entry.rewrite(request, &spec),
        dir,
        in_use: Arc::new(in_use),
    }))
}

/// Installs `spec` for `request`'s server under its install lock: one process at a time
/// per server. A process that waited for the lock reads the pin again first: when the
/// holder installed what this start needs, that install is verified and used instead of
/// installing again. The pin is recorded before the lock is let go, so no other process
/// (nor `warden packages gc`) ever sees the new directory unpinned and unlocked.
fn install_locked(
    packages: &Packages,
    store: &Arc<Mutex<Store>>,
    key: &str,
    request: &LaunchRequest,
    spec: &PackageSpec,
    read_pin: &dyn Fn() -> Result<Option<PackagePin>, LaunchError>,
) -> Result<PackagePin, LaunchError> {
    let refused =
        |error: &dyn std::fmt::Display| LaunchError::Refused(format!("not started: {error}"));
    let held = packages
        .lock(
            key,
            &request.server,
            &format!("installing {}", spec.display()),
        )
        .map_err(|error| refused(&error))?;
    let earlier = read_pin()?;
    if let Some(pin) = earlier.as_ref().filter(|pin| pin_matches(pin, spec)) {
        // Another process installed it while this one waited.
        tracing::info!(
            server = %request.server,
            package = %spec.name,
            version = %pin.version,
            "using the install another process just made"
        );
        packages
            .verify(&request.server, pin)
            .map_err(|error| refused(&error))?;
        return Ok(pin.clone());
    }
    tracing::info!(
        server = %request.server,
        package = %spec.display(),
        "installing the server's package (confined, registry hosts only)"
    );
    let installed = packages
        .install(&held, spec)
        .map_err(|error| refused(&error))?;
    if let Err(error) = lock(store).save_package_pin(key, &installed.pin) {
        remove_install(packages, &installed.pin);
        return Err(refused(&format!("cannot record its package pin: {error}")));
    }
    tracing::info!(
        server = %request.server,
        package = %spec.name,
        version = %installed.pin.version,
        lock_sha256 = %installed.pin.lock_sha256,
        replaces = %earlier.as_ref().map_or_else(
            || "nothing".to_owned(),
            |e| format!("{}@{} (asked {})", e.name, e.version, e.requested)
        ),
        "package installed and pinned"
    );
    if let Some(earlier) = earlier {
        remove_install(packages, &earlier);
    }
    drop(held);
    Ok(installed.pin)
}

/// Removes an installation that is no longer pinned; refused (and logged) unless it lies
/// strictly inside the package cache ([`Packages::remove`]).
pub fn remove_install(packages: &Packages, pin: &PackagePin) {
    let dir = Path::new(&pin.dir);
    if let Err(error) = packages.remove(dir) {
        tracing::warn!(dir = %dir.display(), %error, "could not remove an earlier package install");
    }
}

/// The request a package server runs from its pinned install, without checking the install
/// (commands that describe a server: `warden probe`, `warden pin`); `request` as it is when
/// it is not a package server, or nothing is installed for its current spec.
pub fn installed_request(store: &Store, key: &str, request: &LaunchRequest) -> LaunchRequest {
    let Some(spec) = warden_packages::parse(&request.command, &request.args) else {
        return request.clone();
    };
    let Some(pin) = store
        .package_pin_for(key)
        .ok()
        .flatten()
        .filter(|pin| pin_matches(pin, &spec))
    else {
        return request.clone();
    };
    match warden_packages::entry(&spec, Path::new(&pin.dir)) {
        Ok(entry) => entry.rewrite(request, &spec),
        Err(_) => request.clone(),
    }
}
