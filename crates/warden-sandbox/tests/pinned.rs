//! `Profile::pinned`: a file whose identity was recorded when it was hashed is checked
//! again inside the sandbox, right before the program is executed; a replaced or rewritten
//! file stops the start with `SandboxError::PinnedFileChanged` and runs nothing.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use warden_sandbox::{PinnedFile, Profile, SandboxError, Scratch, confine};

/// A folder the sandbox's uid may enter, with a script in it.
struct Fixture {
    dir: tempfile::TempDir,
    _base: tempfile::TempDir,
    scratch: Scratch,
    script: PathBuf,
}

fn fixture(text: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let base = tempfile::tempdir().unwrap();
    std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let scratch = Scratch::create(base.path(), "pinned").unwrap();
    let script = dir.path().join("server.sh");
    write(&script, text);
    Fixture {
        dir,
        _base: base,
        scratch,
        script,
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
}

/// The identity `path` has now, as the caller records it when hashing.
fn pinned(paths: &[&Path], search: bool) -> PinnedFile {
    let meta = paths
        .iter()
        .find_map(|p| std::fs::metadata(p).ok())
        .unwrap();
    PinnedFile {
        paths: paths.iter().map(|p| p.to_path_buf()).collect(),
        search,
        dev: meta.dev(),
        ino: meta.ino(),
        size: meta.size(),
        ctime: meta.ctime(),
        ctime_nsec: meta.ctime_nsec(),
    }
}

/// Runs `/bin/sh SCRIPT` confined with `pins`: its stdout, or the sandbox's error.
fn run(fixture: &Fixture, pins: Vec<PinnedFile>) -> Result<String, SandboxError> {
    let mut profile = Profile::default_for(Path::new("/bin/sh"), fixture.scratch.path()).unwrap();
    profile.read.push(fixture.dir.path().to_path_buf());
    profile.pinned = pins;
    let mut command = Command::new("/bin/sh");
    command
        .arg(&fixture.script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let confinement = confine(&mut command, &profile).unwrap();
    let mut child = command.spawn().map_err(|e| confinement.spawn_error(e))?;
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    Ok(out)
}

#[test]
fn the_hashed_file_runs_a_replaced_one_does_not() {
    let f = fixture("echo pinned\n");
    let recorded = pinned(&[&f.script], false);
    // Control: unchanged, it runs (and so do the program's own checks).
    let sh = pinned(&[Path::new("/bin/sh")], false);
    assert_eq!(run(&f, vec![sh, recorded.clone()]).unwrap(), "pinned\n");

    // Replaced by a rename after its identity was recorded (the swap of an attacker who
    // may write the directory): refused, nothing ran.
    let staged = f.dir.path().join("staged.sh");
    write(&staged, "echo swapped\n");
    std::fs::rename(&staged, &f.script).unwrap();
    match run(&f, vec![recorded]) {
        Err(SandboxError::PinnedFileChanged { path }) => assert_eq!(path, f.script),
        other => panic!("the swapped file was not caught: {other:?}"),
    }
}

#[test]
fn a_file_written_in_place_is_refused() {
    let f = fixture("echo pinned\n");
    let recorded = pinned(&[&f.script], false);
    std::thread::sleep(std::time::Duration::from_millis(20));
    // Same inode, same size: only the change time tells.
    std::fs::write(&f.script, "echo writtn\n").unwrap();
    let error = run(&f, vec![recorded]).unwrap_err();
    assert!(
        matches!(&error, SandboxError::PinnedFileChanged { path } if path == &f.script),
        "{error}"
    );
    assert!(error.to_string().contains("nothing was run"), "{error}");
}

#[test]
fn a_path_search_checks_the_first_executable_candidate() {
    let f = fixture("echo pinned\n");
    // A `PATH` search: the first candidate does not exist, the second is `/bin/sh`.
    let missing = f.dir.path().join("no-such-dir/sh");
    let search = pinned(&[&missing, Path::new("/bin/sh")], true);
    assert_eq!(run(&f, vec![search]).unwrap(), "pinned\n");
    // A different program first in the search order: it is what `env` would run.
    let other = f.dir.path().join("sh");
    std::fs::copy("/bin/sh", &other).unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o755)).unwrap();
    let search = pinned(&[Path::new("/bin/sh")], true);
    let search = PinnedFile {
        paths: vec![other.clone(), PathBuf::from("/bin/sh")],
        ..search
    };
    match run(&f, vec![search]) {
        Err(SandboxError::PinnedFileChanged { path }) => assert_eq!(path, other),
        other => panic!("{other:?}"),
    }
    // Not executable: a search skips it, as `env` does.
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o644)).unwrap();
    let search = pinned(&[Path::new("/bin/sh")], true);
    let search = PinnedFile {
        paths: vec![other, PathBuf::from("/bin/sh")],
        ..search
    };
    assert_eq!(run(&f, vec![search]).unwrap(), "pinned\n");
}
