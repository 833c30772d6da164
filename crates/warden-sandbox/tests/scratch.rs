//! The scratch base as another local user would attack it (issue 10, section 1): a base they
//! created first, a base that is their symlink, and symlinks swapped in while Warden creates
//! and removes scratch directories. Each is refused or has no effect, and a canary file and
//! directory outside the base keep their owner, mode and contents.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use warden_sandbox::Scratch;

/// Another local user (the attacker).
const OTHER_UID: u32 = 1000;

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A root-owned 0600 file and a 0755 directory outside the base, standing in for
/// `/etc/shadow` and `/etc`.
struct Canary {
    _dir: tempfile::TempDir,
    file: PathBuf,
    dir: PathBuf,
}

impl Canary {
    fn new() -> Self {
        let holder = tempfile::tempdir().unwrap();
        let file = holder.path().join("shadow");
        std::fs::write(&file, "secret\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let dir = holder.path().join("etc");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self {
            _dir: holder,
            file,
            dir,
        }
    }

    /// Nothing outside the base changed owner, mode or contents.
    fn assert_untouched(&self) {
        // SAFETY: geteuid cannot fail.
        let me = unsafe { libc::geteuid() };
        let file = std::fs::symlink_metadata(&self.file).unwrap();
        assert_eq!(
            (file.uid(), file.mode() & 0o7777),
            (me, 0o600),
            "canary file"
        );
        assert_eq!(std::fs::read_to_string(&self.file).unwrap(), "secret\n");
        let dir = std::fs::symlink_metadata(&self.dir).unwrap();
        assert_eq!((dir.uid(), dir.mode() & 0o7777), (me, 0o755), "canary dir");
        let entries: Vec<_> = std::fs::read_dir(&self.dir).unwrap().flatten().collect();
        assert!(entries.is_empty(), "created in the canary dir: {entries:?}");
    }
}

#[test]
fn a_base_another_user_created_first_is_refused() {
    let canary = Canary::new();
    let parent = tempfile::tempdir().unwrap();
    let base = parent.path().join("warden-scratch");
    std::fs::create_dir(&base).unwrap();
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700)).unwrap();
    if is_root() {
        std::os::unix::fs::chown(&base, Some(OTHER_UID), Some(OTHER_UID)).unwrap();
        let err = Scratch::create(&base, "srv").unwrap_err().to_string();
        assert!(err.contains(&format!("owned by uid {OTHER_UID}")), "{err}");
        assert!(
            err.contains(base.to_str().unwrap()),
            "names the base: {err}"
        );
    } else {
        // Not root: a base owned by root is another user's.
        let err = Scratch::create(Path::new("/usr"), "srv")
            .unwrap_err()
            .to_string();
        assert!(err.contains("owned by uid 0"), "{err}");
    }
    // The same base, world-writable like the old /var/tmp/warden-scratch could be made:
    std::os::unix::fs::chown(&base, Some(0), Some(0)).ok();
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = Scratch::create(&base, "srv").unwrap_err().to_string();
    assert!(err.contains("writable by group or others"), "{err}");
    // Positive control: the base made private again is used.
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700)).unwrap();
    let scratch = Scratch::create(&base, "srv").unwrap();
    assert!(
        scratch
            .path()
            .starts_with(std::fs::canonicalize(&base).unwrap())
    );
    canary.assert_untouched();
}

#[test]
fn a_symlinked_base_is_refused() {
    let canary = Canary::new();
    let parent = tempfile::tempdir().unwrap();
    let base = parent.path().join("warden-scratch");
    std::os::unix::fs::symlink(&canary.dir, &base).unwrap();
    let err = Scratch::create(&base, "srv").unwrap_err().to_string();
    assert!(err.contains("is a symlink"), "{err}");
    // A symlink owned by another user on the way to the base is not followed either.
    if is_root() {
        let hop = parent.path().join("hop");
        std::os::unix::fs::symlink(&canary.dir, &hop).unwrap();
        std::os::unix::fs::lchown(&hop, Some(OTHER_UID), Some(OTHER_UID)).unwrap();
        let err = Scratch::create(&hop.join("scratch"), "srv")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("symlink owned by uid {OTHER_UID}")),
            "{err}"
        );
    }
    canary.assert_untouched();
}

/// Runs `attack` in a loop on another thread while `body` runs.
fn racing(attack: impl Fn() + Send + 'static, body: impl FnOnce()) {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let thread = std::thread::spawn(move || {
        while !flag.load(Ordering::Relaxed) {
            attack();
        }
    });
    body();
    stop.store(true, Ordering::Relaxed);
    thread.join().unwrap();
}

#[test]
fn a_base_swapped_for_a_symlink_during_creation_is_refused_or_harmless() {
    let canary = Canary::new();
    let parent = tempfile::tempdir().unwrap();
    let base = parent.path().join("base");
    let aside = parent.path().join("aside");
    std::fs::create_dir(&base).unwrap();
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700)).unwrap();
    let (b, a, target) = (base.clone(), aside.clone(), canary.dir.clone());
    let mut refused = 0;
    let mut created = 0;
    racing(
        // The base flips between the real directory and a symlink to the canary dir.
        move || {
            if std::fs::rename(&b, &a).is_ok() {
                let _ = std::os::unix::fs::symlink(&target, &b);
                std::thread::yield_now();
                let _ = std::fs::remove_file(&b);
                let _ = std::fs::rename(&a, &b);
            }
        },
        || {
            let deadline = Instant::now() + Duration::from_secs(3);
            while Instant::now() < deadline {
                match Scratch::create(&base, "srv") {
                    Ok(scratch) => {
                        created += 1;
                        // Wherever the base was renamed to, the scratch is in the real one.
                        let real = std::fs::canonicalize(parent.path()).unwrap();
                        assert!(scratch.path().starts_with(&real), "{:?}", scratch.path());
                        drop(scratch);
                    }
                    Err(_) => refused += 1,
                }
                canary.assert_untouched();
            }
        },
    );
    assert!(refused + created > 0);
    canary.assert_untouched();
}

#[test]
fn a_scratch_directory_swapped_for_a_symlink_mid_creation_is_refused_and_left_alone() {
    let canary = Canary::new();
    let base = tempfile::tempdir().unwrap();
    let base_path = base.path().to_path_buf();
    let target = canary.dir.clone();
    let swaps = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counted = Arc::clone(&swaps);
    let mut refused = 0;
    racing(
        // Every new scratch directory is replaced by a symlink to the canary directory as
        // soon as it appears (the old attack: root then chowned the link's target).
        move || {
            let Ok(entries) = std::fs::read_dir(&base_path) else {
                return;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                if is_dir && std::fs::remove_dir(&path).is_ok() {
                    let _ = std::os::unix::fs::symlink(&target, &path);
                    counted.fetch_add(1, Ordering::Relaxed);
                }
            }
        },
        || {
            let deadline = Instant::now() + Duration::from_secs(3);
            while Instant::now() < deadline {
                match Scratch::create(base.path(), "srv") {
                    Ok(scratch) => drop(scratch),
                    Err(error) => {
                        let text = error.to_string();
                        assert!(text.contains("replaced while being created"), "{text}");
                        refused += 1;
                    }
                }
            }
        },
    );
    assert!(
        swaps.load(Ordering::Relaxed) > 0,
        "the attack never managed a swap, so this test proved nothing"
    );
    // The symlinks the attacker left are theirs; what they point at is untouched.
    canary.assert_untouched();
    eprintln!("refused {refused} creations");
}

#[test]
fn removal_never_follows_what_a_server_left_in_its_scratch() {
    let canary = Canary::new();
    let base = tempfile::tempdir().unwrap();
    let scratch = Scratch::create(base.path(), "srv").unwrap();
    let dir = scratch.path().to_path_buf();
    std::os::unix::fs::symlink(&canary.dir, dir.join("etc")).unwrap();
    std::os::unix::fs::symlink(&canary.file, dir.join("shadow")).unwrap();
    std::fs::create_dir_all(dir.join("deep/er")).unwrap();
    std::os::unix::fs::symlink(&canary.dir, dir.join("deep/er/link")).unwrap();
    scratch.remove().unwrap();
    assert!(!dir.exists());
    canary.assert_untouched();
}
