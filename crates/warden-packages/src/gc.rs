//! Removing installs nothing uses any more ([`Packages::collect`], `warden packages gc`):
//! an install directory in the package cache that no package pin references (a server's
//! pin moved to another install, was dropped with its server, or an install was
//! interrupted before its pin was recorded) is removed. Never one a pin references, never
//! one of a slot whose install lock someone holds (an install in progress, not pinned
//! yet), never anything outside the cache: symbolic links in the cache are reported and
//! left alone, not followed, and each removal goes through [`Packages::remove`] (strictly
//! inside the cache, as written and resolved).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::lock::{self, TryLock};
use crate::{PackageError, Packages};

/// Most entries counted when sizing one install for the report.
const MAX_COUNTED: usize = 500_000;

/// What a collection removed (or, in a dry run, would remove) and left.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Collected {
    /// Install directories removed (would be, in a dry run), with their size in bytes.
    pub removed: Vec<(PathBuf, u64)>,
    /// Install directories a pin references, kept.
    pub kept: Vec<PathBuf>,
    /// Entries left alone, and why (a symbolic link, an install in progress, not a
    /// directory, an error while removing).
    pub skipped: Vec<(PathBuf, String)>,
}

/// The directories in `dir`, sorted. Symbolic links are never followed: they, and any other
/// entry that is not a directory, are recorded in `out` as left alone, except the files
/// `expected` accepts.
fn directories_in(
    dir: &Path,
    out: &mut Collected,
    mut expected: impl FnMut(&Path, &std::fs::Metadata) -> bool,
) -> Result<Vec<PathBuf>, PackageError> {
    let entries = std::fs::read_dir(dir).map_err(|source| PackageError::io("list", dir, source))?;
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| PackageError::io("list", dir, source))?;
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path)
            .map_err(|source| PackageError::io("read", &path, source))?;
        if meta.file_type().is_symlink() {
            out.skipped
                .push((path, "a symbolic link: not followed, left alone".to_owned()));
        } else if meta.is_dir() {
            dirs.push(path);
        } else if !expected(&path, &meta) {
            out.skipped
                .push((path, "not an install directory: left alone".to_owned()));
        }
    }
    dirs.sort();
    Ok(dirs)
}

impl Packages {
    /// Removes every install directory of the cache that no package pin references.
    /// `referenced` lists the directories the store's package pins name; it is read again
    /// for each slot once that slot's install lock is held, so an install pinned by
    /// another process meanwhile is seen. An error reading it stops the collection before
    /// anything more is removed. With `dry_run`, nothing is removed: the report says what
    /// would be.
    pub fn collect(
        &self,
        referenced: &dyn Fn() -> Result<Vec<String>, String>,
        dry_run: bool,
    ) -> Result<Collected, PackageError> {
        let mut out = Collected::default();
        match std::fs::symlink_metadata(self.base()) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            _ => {}
        }
        // The slots' lock files sit beside them: expected, not reported.
        let is_lock = |path: &Path, meta: &std::fs::Metadata| {
            meta.is_file() && path.extension().is_some_and(|e| e == "lock")
        };
        for slot in directories_in(self.base(), &mut out, is_lock)? {
            self.collect_slot(&slot, referenced, dry_run, &mut out)?;
        }
        Ok(out)
    }

    fn collect_slot(
        &self,
        slot: &Path,
        referenced: &dyn Fn() -> Result<Vec<String>, String>,
        dry_run: bool,
        out: &mut Collected,
    ) -> Result<(), PackageError> {
        let what = if dry_run {
            "warden packages gc --dry-run"
        } else {
            "warden packages gc"
        };
        let _held = match lock::try_acquire(&crate::lock_file(slot), slot, what) {
            Ok(TryLock::Held(held)) => held,
            Ok(TryLock::Busy(holder)) => {
                out.skipped.push((
                    slot.to_path_buf(),
                    format!("an install is in progress ({holder}): left alone"),
                ));
                return Ok(());
            }
            // A lock file that is a link or not a regular file: the slot is not touched.
            Err(error) => {
                out.skipped.push((
                    slot.to_path_buf(),
                    format!("its install lock cannot be taken ({error}): left alone"),
                ));
                return Ok(());
            }
        };
        // Read under the lock: whatever another process pinned before it let go is seen.
        let pinned = referenced().map_err(|reason| PackageError::Invalid {
            package: "(package cache)".to_owned(),
            reason: format!("cannot read the package pins, so nothing is removed: {reason}"),
        })?;
        let pinned: HashSet<PathBuf> = pinned
            .iter()
            .flat_map(|dir| {
                let dir = PathBuf::from(dir);
                let canonical = std::fs::canonicalize(&dir).ok();
                std::iter::once(dir).chain(canonical)
            })
            .collect();
        let mut left = false;
        // The `.use` files beside installs (`crate::in_use`) are expected; one whose install
        // is gone is removed below.
        let mut uses = Vec::new();
        let installs = directories_in(slot, out, |path, meta| {
            let is_use = meta.is_file() && path.extension().is_some_and(|e| e == "use");
            if is_use {
                uses.push(path.to_path_buf());
            }
            is_use
        })?;
        if !dry_run {
            for use_file in uses {
                let install = use_file.with_extension("");
                if !installs.contains(&install)
                    && let Ok(Some(removing)) = crate::in_use::try_removing(&install)
                {
                    removing.finish();
                }
            }
        }
        for install in installs {
            let canonical = std::fs::canonicalize(&install).ok();
            if pinned.contains(&install) || canonical.is_some_and(|c| pinned.contains(&c)) {
                out.kept.push(install);
                left = true;
                continue;
            }
            let size = size_of(&install);
            if dry_run {
                out.removed.push((install, size));
                continue;
            }
            match self.remove(&install) {
                Ok(()) => out.removed.push((install, size)),
                Err(error) => {
                    left = true;
                    out.skipped.push((install, error.to_string()));
                }
            }
        }
        if !dry_run && !left {
            // Empty now (a server no longer pinned at all): the slot goes too; its lock file
            // stays (see `lock`). `remove_dir` removes only an empty directory.
            if let Err(error) = std::fs::remove_dir(slot)
                && error.kind() != std::io::ErrorKind::NotFound
            {
                tracing::debug!(slot = %slot.display(), %error, "slot kept");
            }
        }
        Ok(())
    }
}

/// The bytes of the regular files under `dir`, links not followed (for the report only;
/// stops counting after [`MAX_COUNTED`] entries).
fn size_of(dir: &Path) -> u64 {
    let mut total = 0u64;
    let mut counted = 0usize;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.flatten() {
            counted += 1;
            if counted > MAX_COUNTED {
                return total;
            }
            let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
                continue;
            };
            if meta.is_dir() {
                pending.push(entry.path());
            } else if meta.is_file() {
                total = total.saturating_add(meta.len());
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::Arc;

    struct NoRunner;

    impl crate::Runner for NoRunner {
        fn run(
            &self,
            _step: &crate::Step,
            _dir: &Path,
            _limit: std::time::Duration,
        ) -> Result<(), PackageError> {
            Ok(())
        }
    }

    fn install(packages: &Packages, key: &str, name: &str) -> PathBuf {
        let dir = packages.slot(key).join(name);
        std::fs::create_dir_all(dir.join("node_modules/pkg")).unwrap();
        std::fs::write(dir.join("node_modules/pkg/index.js"), "x".repeat(100)).unwrap();
        dir
    }

    #[test]
    fn only_unreferenced_installs_go_and_links_in_the_cache_are_not_followed() {
        let root = tempfile::tempdir().unwrap();
        let packages = Packages::new(root.path().join("packages"), Arc::new(NoRunner));
        let pinned = install(&packages, "a", "1-1-1");
        let old = install(&packages, "a", "1-1-0");
        let gone = install(&packages, "b", "1-2-0");
        // Outside the cache: what a planted link points to.
        let victim = root.path().join("victim");
        std::fs::create_dir_all(victim.join("inner")).unwrap();
        std::fs::write(victim.join("inner/keep"), "precious").unwrap();
        // Replays: a link in the place of a slot, and one in the place of an install.
        std::os::unix::fs::symlink(&victim, packages.base().join("0123456789abcdef")).unwrap();
        std::os::unix::fs::symlink(&victim, packages.slot("a").join("1-1-9")).unwrap();
        let referenced = {
            let pinned = pinned.to_string_lossy().into_owned();
            move || Ok(vec![pinned.clone()])
        };

        // A dry run lists and removes nothing.
        let dry = packages.collect(&referenced, true).unwrap();
        let mut expected = vec![&old, &gone];
        expected.sort();
        let listed: Vec<&PathBuf> = dry.removed.iter().map(|(p, _)| p).collect();
        assert_eq!(listed, expected);
        assert!(dry.removed.iter().all(|(_, size)| *size == 100));
        assert!(old.exists() && gone.exists());

        let done = packages.collect(&referenced, false).unwrap();
        let removed: Vec<&PathBuf> = done.removed.iter().map(|(p, _)| p).collect();
        assert_eq!(removed, expected);
        assert_eq!(done.kept, std::slice::from_ref(&pinned));
        // Control: the referenced install is whole.
        assert!(pinned.join("node_modules/pkg/index.js").is_file());
        assert!(!old.exists() && !gone.exists());
        // The emptied slot of `b` went; `a` stays (it holds the pinned install).
        assert!(!packages.slot("b").exists());
        assert!(packages.slot("a").exists());
        // Neither link was followed: what they point to is untouched, the links reported.
        assert!(victim.join("inner/keep").is_file());
        assert!(packages.base().join("0123456789abcdef").is_symlink());
        assert!(packages.slot("a").join("1-1-9").is_symlink());
        assert_eq!(
            done.skipped
                .iter()
                .filter(|(_, why)| why.contains("symbolic link"))
                .count(),
            2,
            "{:?}",
            done.skipped
        );
    }

    #[test]
    fn a_slot_being_installed_is_left_and_unreadable_pins_remove_nothing() {
        let root = tempfile::tempdir().unwrap();
        let packages = Packages::new(root.path().join("packages"), Arc::new(NoRunner));
        let fresh = install(&packages, "a", "1-1-1");
        // An install in progress holds the lock; its directory is not pinned yet.
        let held = packages.lock("a", "srv", "installing").unwrap();
        let out = packages.collect(&|| Ok(Vec::new()), false).unwrap();
        assert!(out.removed.is_empty(), "{out:?}");
        assert!(fresh.exists());
        assert!(
            out.skipped
                .iter()
                .any(|(_, why)| why.contains("an install is in progress")
                    && why.contains(&format!("process {}", std::process::id()))),
            "{out:?}"
        );
        drop(held);
        // The pins cannot be read: nothing is removed.
        let error = packages
            .collect(&|| Err("database is locked".to_owned()), false)
            .unwrap_err()
            .to_string();
        assert!(error.contains("nothing is removed"), "{error}");
        assert!(fresh.exists());
        // Control: once the lock is free and the pins say nothing references it, it goes.
        let out = packages.collect(&|| Ok(Vec::new()), false).unwrap();
        assert_eq!(out.removed.len(), 1);
        assert!(!fresh.exists());
    }

    /// Replays `warden update` (or `gc`) beside a running server: the install it runs from
    /// is held, so it is left, said so, and removed by the first collection after the
    /// server let go, with its `.use` file (the emptied slot goes too). A start that comes
    /// after the removal is told its install is gone.
    #[test]
    fn an_install_a_server_runs_from_is_left_until_it_lets_go() {
        let root = tempfile::tempdir().unwrap();
        let packages = Packages::new(root.path().join("packages"), Arc::new(NoRunner));
        let old = install(&packages, "a", "1-1-0");
        let running = packages.hold("srv", &old).unwrap();
        assert_eq!(running.dir(), old.as_path());

        let error = packages.remove(&old).unwrap_err().to_string();
        assert!(error.contains("in use by a running server"), "{error}");
        let out = packages.collect(&|| Ok(Vec::new()), false).unwrap();
        assert!(out.removed.is_empty(), "{out:?}");
        assert!(
            out.skipped
                .iter()
                .any(|(path, why)| path == &old && why.contains("in use")),
            "{out:?}"
        );
        assert!(old.join("node_modules/pkg/index.js").is_file());
        // A second server may run from it too (the hold is shared).
        let second = packages.hold("srv", &old).unwrap();

        drop((running, second));
        let out = packages.collect(&|| Ok(Vec::new()), false).unwrap();
        assert_eq!(out.removed.len(), 1, "{out:?}");
        assert!(!old.exists());
        assert!(!crate::in_use::use_file(&old).exists());
        assert!(!packages.slot("a").exists(), "the emptied slot went too");

        // A start that finds its install removed (the pin moved meanwhile) says so.
        std::fs::create_dir_all(packages.slot("a")).unwrap();
        let error = packages.hold("srv", &old).unwrap_err().to_string();
        assert!(error.contains("removed meanwhile"), "{error}");
    }

    #[test]
    fn a_link_planted_as_a_lock_file_is_not_followed_nor_written_through() {
        let root = tempfile::tempdir().unwrap();
        let packages = Packages::new(root.path().join("packages"), Arc::new(NoRunner));
        let install = install(&packages, "a", "1-1-1");
        let victim = root.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let lock = crate::lock_file(&packages.slot("a"));
        std::os::unix::fs::symlink(&victim, &lock).unwrap();
        // Replay: taking the lock would truncate and write the holder into the target.
        let error = packages
            .lock("a", "srv", "installing")
            .unwrap_err()
            .to_string();
        assert!(error.contains("open the install lock"), "{error}");
        let out = packages.collect(&|| Ok(Vec::new()), false).unwrap();
        assert!(out.removed.is_empty(), "{out:?}");
        assert!(install.exists());
        assert!(
            out.skipped
                .iter()
                .any(|(_, why)| why.contains("its install lock cannot be taken")),
            "{out:?}"
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        // A FIFO in its place is refused at once (not a regular file), without waiting.
        std::fs::remove_file(&lock).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(&lock)
            .status()
            .unwrap();
        assert!(made.success());
        let error = packages
            .lock("a", "srv", "installing")
            .unwrap_err()
            .to_string();
        assert!(error.contains("not a regular file"), "{error}");
        // Control: a regular lock file is taken, and the install then goes.
        std::fs::remove_file(&lock).unwrap();
        drop(packages.lock("a", "srv", "installing").unwrap());
        let out = packages.collect(&|| Ok(Vec::new()), false).unwrap();
        assert_eq!(out.removed.len(), 1);
        assert!(!install.exists());
    }
}
