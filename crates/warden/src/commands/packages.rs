//! `warden packages gc`: removes what the package cache holds for nothing (decision 0040).
//!
//! 1. Package pins of servers this configuration no longer defines are dropped: a pin whose
//!    key names a file this configuration reads, and a server that file no longer defines
//!    (or no longer writes as `npx`/`uvx`). Pins of files not read now (another project's
//!    `warden.toml`, another `--config`) are kept: nothing here says whether they are used.
//! 2. Every install directory of the cache that no remaining package pin references is
//!    removed ([`warden_packages::Packages::collect`]): never one a pin references, never
//!    one being installed (its install lock is held), never anything outside the cache.
//!
//! `--dry-run` lists both and changes nothing.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use warden_packages::Packages;

use crate::cli::{GlobalArgs, PackagesGcArgs};
use crate::exit::{Code, Failure};
use crate::untrusted::{Shape, inert};
use warden_host::pins;

/// Runs `warden packages gc`.
pub fn gc(global: &GlobalArgs, args: &PackagesGcArgs) -> Result<Code, Failure> {
    let (config, env) = super::load_config(global)?;
    let store = Arc::new(Mutex::new(super::open_store(&env)?));
    let unavailable = |error: warden_store::StoreError| Failure {
        code: Code::Unavailable,
        error: error.into(),
    };

    // The keys a file read now still defines as a package server (and hidden definitions
    // of the same name, which come back when the winner goes: kept).
    let defined: BTreeSet<String> = config
        .servers
        .iter()
        .filter(|spec| {
            warden_mcp::LaunchRequest::for_spec(spec).is_some_and(|request| {
                warden_packages::parse(&request.command, &request.args).is_some()
            })
        })
        .map(pins::key_for)
        .chain(
            config
                .shadowed
                .iter()
                .map(|shadowed| pins::key_in(&shadowed.name, &shadowed.hidden)),
        )
        .collect();
    let read_now: Vec<String> = config
        .files
        .iter()
        .map(|origin| pins::key_in("", origin))
        .collect();
    let stale: Vec<(String, warden_store::packages::PackagePin)> = lock(&store)
        .package_pins()
        .map_err(unavailable)?
        .into_iter()
        .filter(|(key, _)| {
            read_now
                .iter()
                .any(|prefix| key.starts_with(prefix.as_str()))
                && !defined.contains(key)
        })
        .collect();
    let verb = if args.dry_run {
        "would drop"
    } else {
        "dropped"
    };
    for (key, pin) in &stale {
        if !args.dry_run {
            lock(&store).remove_package_pin(key).map_err(unavailable)?;
        }
        println!(
            "{verb} the package pin of {} ({}@{}): no longer configured",
            inert(key, Shape::Line),
            inert(&pin.name, Shape::Line),
            inert(&pin.version, Shape::Line)
        );
    }
    // In a dry run the dropped pins still stand in the store: their installs are listed
    // as going all the same.
    let dropped: BTreeSet<String> = stale.iter().map(|(_, pin)| pin.dir.clone()).collect();

    // No runner: a collection installs nothing.
    let packages = Packages::new(
        warden_packages::packages_dir(&env.state_home),
        Arc::new(NoInstalls),
    );
    let referenced = {
        let store = Arc::clone(&store);
        move || -> Result<Vec<String>, String> {
            Ok(lock(&store)
                .package_pins()
                .map_err(|error| error.to_string())?
                .into_iter()
                .map(|(_, pin)| pin.dir)
                .filter(|dir| !dropped.contains(dir))
                .collect())
        }
    };
    let collected = packages
        .collect(&referenced, args.dry_run)
        .map_err(|error| Failure {
            code: Code::Unavailable,
            error: anyhow::anyhow!("{error}"),
        })?;
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    let mut bytes = 0u64;
    for (dir, size) in &collected.removed {
        bytes = bytes.saturating_add(*size);
        println!(
            "{verb} {} ({})",
            inert(&dir.display().to_string(), Shape::Line),
            megabytes(*size)
        );
    }
    for (path, why) in &collected.skipped {
        println!(
            "left {}: {}",
            inert(&path.display().to_string(), Shape::Line),
            inert(why, Shape::Line)
        );
    }
    println!(
        "{}: {verb} {} install(s), {}; {} pinned install(s) kept{}",
        packages.base().display(),
        collected.removed.len(),
        megabytes(bytes),
        collected.kept.len(),
        if args.dry_run {
            " (dry run: nothing changed)"
        } else {
            ""
        }
    );
    Ok(Code::Ok)
}

fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1_000_000.0)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A runner for a cache that never installs.
struct NoInstalls;

impl warden_packages::Runner for NoInstalls {
    fn run(
        &self,
        step: &warden_packages::Step,
        _dir: &std::path::Path,
        _limit: std::time::Duration,
    ) -> Result<(), warden_packages::PackageError> {
        Err(warden_packages::PackageError::Install {
            step: step.what.clone(),
            detail: "`warden packages gc` installs nothing".to_owned(),
        })
    }
}
