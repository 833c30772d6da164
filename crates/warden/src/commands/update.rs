//! `warden update SERVER`: installs an `npx`/`uvx` server's package again (confined, the
//! registry's hosts only), shows how it differs from the pinned install (the version, the
//! lockfile, every installed file by sha256), and moves the pin to it once the user
//! accepts on the terminal or passed `--yes`. Without either it reports and changes
//! nothing. It is also how an install that was changed on disk is replaced (decision 0037).

use std::sync::Arc;

use warden_mcp::{ConfinedLauncher, LaunchRequest};
use warden_packages::{ConfinedRunner, Manifest, Packages};
use warden_store::packages::PackagePin;

use crate::cli::{GlobalArgs, UpdateArgs};
use crate::exit::{Code, Failure};
use crate::untrusted::{Shape, inert};
use warden_host::pins;

/// Most changed files listed.
const MAX_LISTED: usize = 200;

/// Runs `warden update`.
pub async fn run(global: &GlobalArgs, args: UpdateArgs) -> Result<Code, Failure> {
    let (config, env) = super::load_config(global)?;
    let spec = super::configured_server(&config, &args.server)?.clone();
    let name = inert(&args.server, Shape::Line);
    let request = LaunchRequest::for_spec(&spec);
    let package = request
        .as_ref()
        .and_then(|request| warden_packages::parse(&request.command, &request.args));
    if let Some(why) = request.as_ref().and_then(|request| {
        warden_packages::spec::refused_launcher(&request.command, &request.args)
    }) {
        return Err(Failure::usage(anyhow::anyhow!("server `{name}`: {why}")));
    }
    let (Some(request), Some(package)) = (request, package) else {
        return Err(Failure::usage(anyhow::anyhow!(
            "server `{name}` is not written as `npx -y PACKAGE` or `uvx PACKAGE`; nothing to \
             update (`warden pin {name}` accepts a changed executable)"
        )));
    };
    let key = pins::key_for(&spec);
    let store = super::open_store(&env)?;
    let old = store.package_pin_for(&key).map_err(unavailable)?;
    drop(store);
    let launcher = ConfinedLauncher::from_env(super::scratch_dir(&env));
    let packages = Packages::new(
        warden_packages::packages_dir(&env.state_home),
        Arc::new(ConfinedRunner::new(launcher.clone())),
    );
    println!(
        "{name}: installing {} again (confined; network to {} only)",
        inert(&package.display(), Shape::Line),
        package.ecosystem.registry_hosts().join(", ")
    );
    let fresh = {
        let packages = packages.clone();
        let key = key.clone();
        let package = package.clone();
        let server = args.server.clone();
        // One install of a server at a time, across processes (a start beside this
        // update waits, then finds the pin it needs or installs on its own).
        tokio::task::spawn_blocking(move || {
            let held = packages.lock(&key, &server, "warden update")?;
            packages.install(&held, &package)
        })
        .await
        .map_err(|error| Failure {
            code: Code::Unavailable,
            error: anyhow::anyhow!("the install did not finish: {error}"),
        })?
        .map_err(|error| Failure {
            code: Code::Unavailable,
            error: anyhow::anyhow!("server `{name}`: {error}"),
        })?
    };
    // From here on, every way out before the pins move removes the new install.
    let staged = Staged::new(&packages, &fresh.pin);
    let same = match &old {
        None => {
            println!(
                "{name}: not installed before; now {}@{}",
                inert(&fresh.pin.name, Shape::Line),
                inert(&fresh.pin.version, Shape::Line)
            );
            false
        }
        Some(old) => {
            let same = old.tree_sha256 == fresh.pin.tree_sha256
                && old.lock_sha256 == fresh.pin.lock_sha256
                && warden_host::packages::pin_matches(old, &package);
            if old.version == fresh.pin.version {
                println!(
                    "{name}: {} {} (unchanged version)",
                    inert(&fresh.pin.name, Shape::Line),
                    inert(&fresh.pin.version, Shape::Line)
                );
            } else {
                println!(
                    "{name}: {} {} -> {}",
                    inert(&fresh.pin.name, Shape::Line),
                    inert(&old.version, Shape::Line),
                    inert(&fresh.pin.version, Shape::Line)
                );
            }
            if old.lock_sha256 != fresh.pin.lock_sha256 {
                println!(
                    "  lockfile sha256 {}… -> {}…",
                    old.lock_sha256.get(..12).unwrap_or(""),
                    fresh.pin.lock_sha256.get(..12).unwrap_or("")
                );
            }
            let lines = warden_packages::tree::diff(
                &Manifest::from_json(&old.manifest),
                &fresh.manifest,
                MAX_LISTED,
            );
            if lines.is_empty() {
                println!("  no installed file changed");
            } else {
                println!("  installed files that changed:");
                for line in &lines {
                    println!("    {}", inert(line, Shape::Line));
                }
            }
            same
        }
    };
    if !same {
        let question = format!(
            "Pin `{name}` to {}@{}?",
            inert(&fresh.pin.name, Shape::Line),
            inert(&fresh.pin.version, Shape::Line)
        );
        if let Err(refusal) = crate::terminal::confirm(args.yes, &question) {
            return Err(Failure {
                code: Code::Denied,
                error: match refusal {
                    crate::terminal::Refusal::NoTerminal => anyhow::anyhow!(
                        "nothing updated: there is no terminal to ask on (use --yes after \
                         reviewing)"
                    ),
                    crate::terminal::Refusal::Declined => anyhow::anyhow!("nothing updated"),
                },
            });
        }
    }
    // The entry point of the new install, pinned as what the server executes.
    let entry = warden_packages::entry(&package, std::path::Path::new(&fresh.pin.dir)).map_err(
        |error| Failure {
            code: Code::Unavailable,
            error: anyhow::anyhow!("server `{name}`: {error}"),
        },
    )?;
    let rewritten = entry.rewrite(&request, &package);
    let fingerprint = launcher.fingerprint(&rewritten).map_err(|error| Failure {
        code: Code::Unavailable,
        error: anyhow::anyhow!("server `{name}`: {error}"),
    })?;
    // The pins move under the server's install lock, and only if nobody moved them while
    // the question was open (a start that installed, another update) and the new install
    // is still what was shown (nothing removed or changed it meanwhile).
    let held = {
        let packages = packages.clone();
        let key = key.clone();
        let server = args.server.clone();
        tokio::task::spawn_blocking(move || packages.lock(&key, &server, "warden update"))
            .await
            .map_err(|error| Failure {
                code: Code::Unavailable,
                error: anyhow::anyhow!("the install lock was not taken: {error}"),
            })?
            .map_err(|error| Failure {
                code: Code::Unavailable,
                error: anyhow::anyhow!("{error}"),
            })?
    };
    let mut store = super::open_store(&env)?;
    move_pins(
        &mut store,
        &packages,
        &key,
        &args.server,
        old.as_ref(),
        &fresh.pin,
        &pins::to_pin(&fingerprint),
    )?;
    drop(store);
    staged.keep();
    if let Some(old) = &old {
        warden_host::packages::remove_install(&packages, old);
    }
    drop(held);
    if same {
        println!("{name}: the install on disk was replaced by a fresh one matching its pin");
    } else {
        println!(
            "{name}: pinned to {}@{}",
            inert(&fresh.pin.name, Shape::Line),
            inert(&fresh.pin.version, Shape::Line)
        );
    }
    Ok(Code::Ok)
}

/// Moves the package pin and the executable pin of `key` (server `server`) to the new
/// install `fresh`, in one transaction, while the caller holds the server's install lock:
/// only if the package pin is still `old` (nobody pinned another install while the
/// question was open: a start that installed, another update) and `fresh` still verifies
/// (nothing removed or changed it meanwhile).
fn move_pins(
    store: &mut warden_store::Store,
    packages: &Packages,
    key: &str,
    server: &str,
    old: Option<&PackagePin>,
    fresh: &PackagePin,
    executable: &warden_store::Pin,
) -> Result<(), Failure> {
    let name = inert(server, Shape::Line);
    if store.package_pin_for(key).map_err(unavailable)?.as_ref() != old {
        return Err(Failure {
            code: Code::Unavailable,
            error: anyhow::anyhow!(
                "server `{name}`: its package was pinned again by another Warden process \
                 while this update waited; nothing updated (run `warden update {name}` again)"
            ),
        });
    }
    packages.verify(server, fresh).map_err(|error| Failure {
        code: Code::Unavailable,
        error: anyhow::anyhow!("server `{name}`: the new install changed: {error}"),
    })?;
    // Both pins move in one transaction: never a package pin of the new install with the
    // executable pin of the old one.
    store
        .save_package_and_executable_pins(key, fresh, executable)
        .map_err(unavailable)
}

/// A new install not pinned yet: removed when dropped unless [`keep`](Staged::keep) was
/// called, so every way out of `warden update` before the pins move (an error, the user's
/// refusal, a panic) leaves no half-made state behind.
struct Staged<'a> {
    packages: &'a Packages,
    pin: Option<PackagePin>,
}

impl<'a> Staged<'a> {
    fn new(packages: &'a Packages, pin: &PackagePin) -> Self {
        Self {
            packages,
            pin: Some(pin.clone()),
        }
    }

    /// The install is pinned now: kept.
    fn keep(mut self) {
        self.pin = None;
    }
}

impl Drop for Staged<'_> {
    fn drop(&mut self) {
        if let Some(pin) = self.pin.take() {
            warden_host::packages::remove_install(self.packages, &pin);
        }
    }
}

fn unavailable(error: warden_store::StoreError) -> Failure {
    Failure {
        code: Code::Unavailable,
        error: error.into(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    struct NoRunner;

    impl warden_packages::Runner for NoRunner {
        fn run(
            &self,
            _step: &warden_packages::Step,
            _dir: &std::path::Path,
            _limit: std::time::Duration,
        ) -> Result<(), warden_packages::PackageError> {
            Ok(())
        }
    }

    fn staged_install(packages: &Packages, name: &str) -> PackagePin {
        let dir = packages.base().join("abc").join(name);
        std::fs::create_dir_all(dir.join("node_modules")).unwrap();
        PackagePin {
            ecosystem: "npm".into(),
            name: "pkg".into(),
            requested: "latest".into(),
            version: "1.0.0".into(),
            dir: dir.to_string_lossy().into_owned(),
            lock_sha256: String::new(),
            tree_sha256: String::new(),
            manifest: String::new(),
        }
    }

    /// Plays npm: writes `pkg` at the version the step asks for.
    struct FakeNpm;

    impl warden_packages::Runner for FakeNpm {
        fn run(
            &self,
            step: &warden_packages::Step,
            dir: &std::path::Path,
            _limit: std::time::Duration,
        ) -> Result<(), warden_packages::PackageError> {
            let version = step.args.last().unwrap().rsplit('@').next().unwrap();
            let package = dir.join("node_modules/pkg");
            std::fs::create_dir_all(&package).unwrap();
            std::fs::write(
                package.join("package.json"),
                format!(r#"{{"name":"pkg","version":"{version}","bin":"index.js"}}"#),
            )
            .unwrap();
            std::fs::write(package.join("index.js"), version).unwrap();
            std::fs::write(dir.join("package-lock.json"), version).unwrap();
            Ok(())
        }
    }

    fn exe(program: &str) -> warden_store::Pin {
        warden_store::Pin {
            rule: warden_store::PIN_RULE_EXECUTED,
            program: program.into(),
            program_sha256: "0".repeat(64),
            files: Vec::new(),
            package: None,
        }
    }

    #[test]
    fn the_pins_move_only_if_nobody_moved_them_and_the_new_install_is_intact() {
        let root = tempfile::tempdir().unwrap();
        let packages = Packages::new(root.path().join("packages"), Arc::new(FakeNpm));
        let mut store = warden_store::Store::open(root.path().join("state.db")).unwrap();
        let install = |version: &str| {
            let held = packages.lock("key", "s", "test").unwrap();
            let spec = warden_packages::parse("npx", &["-y".to_owned(), format!("pkg@{version}")])
                .unwrap();
            packages.install(&held, &spec).unwrap().pin
        };
        let old = install("1.0.0");
        store.save_package_pin("key", &old).unwrap();
        let fresh = install("2.0.0");

        // Replay: while the question was open, another process pinned another install.
        let other = install("1.5.0");
        store.save_package_pin("key", &other).unwrap();
        let error = move_pins(
            &mut store,
            &packages,
            "key",
            "s",
            Some(&old),
            &fresh,
            &exe("/a"),
        )
        .unwrap_err()
        .error
        .to_string();
        assert!(
            error.contains("pinned again by another Warden process"),
            "{error}"
        );
        assert_eq!(store.package_pin_for("key").unwrap().unwrap(), other);
        assert!(
            store.pin_for("key").unwrap().is_none(),
            "no executable pin moved"
        );
        store.save_package_pin("key", &old).unwrap();

        // Replay: the new install was changed (or removed) while the question was open.
        let script = std::path::Path::new(&fresh.dir).join("node_modules/pkg/index.js");
        std::fs::write(&script, "evil").unwrap();
        let error = move_pins(
            &mut store,
            &packages,
            "key",
            "s",
            Some(&old),
            &fresh,
            &exe("/a"),
        )
        .unwrap_err()
        .error
        .to_string();
        assert!(error.contains("the new install changed"), "{error}");
        assert_eq!(store.package_pin_for("key").unwrap().unwrap(), old);
        std::fs::write(&script, "2.0.0").unwrap();

        // Control: nobody moved anything: both pins move.
        move_pins(
            &mut store,
            &packages,
            "key",
            "s",
            Some(&old),
            &fresh,
            &exe("/a"),
        )
        .unwrap();
        assert_eq!(store.package_pin_for("key").unwrap().unwrap(), fresh);
        assert_eq!(
            store.pin_for("key").unwrap().unwrap().program,
            std::path::Path::new("/a")
        );
    }

    #[test]
    fn a_staged_install_is_removed_on_every_way_out_but_acceptance() {
        let root = tempfile::tempdir().unwrap();
        let packages = Packages::new(root.path().join("packages"), Arc::new(NoRunner));
        // An early return (an error, a refusal) drops it: removed.
        let failed = staged_install(&packages, "failed");
        fn fails(packages: &Packages, pin: &PackagePin) -> Result<(), &'static str> {
            let _staged = Staged::new(packages, pin);
            Err("the store could not be written")
        }
        let outcome = fails(&packages, &failed);
        assert!(outcome.is_err());
        assert!(!std::path::Path::new(&failed.dir).exists());
        // A panic unwinds through it: removed too.
        let panicked = staged_install(&packages, "panicked");
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _staged = Staged::new(&packages, &panicked);
            panic!("interrupted");
        }));
        assert!(caught.is_err());
        assert!(!std::path::Path::new(&panicked.dir).exists());
        // Control: once pinned it is kept.
        let pinned = staged_install(&packages, "pinned");
        Staged::new(&packages, &pinned).keep();
        assert!(std::path::Path::new(&pinned.dir).exists());
    }
}
