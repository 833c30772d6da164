//! `ConfinedLauncher::launch_pinned`: what was hashed is what runs. The script of a server
//! is replaced between the fingerprint and the spawn (the hook an attacker who may write
//! the script's directory gets when it sees Warden read the file): the start is refused
//! and the replacement never runs, confined or not; unchanged, the pinned script runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tokio::io::AsyncReadExt;
use warden_mcp::launcher::StopGrace;
use warden_mcp::{ConfinedLauncher, LaunchError, LaunchRequest};

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    script: PathBuf,
    marker: PathBuf,
    launcher: ConfinedLauncher,
}

/// `root/app/server.sh` printing `pinned`; `root/out` (writable by anyone) for the marker
/// the replacement would leave; `root/scratch` as the scratch base.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let mode = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    mode(&root, 0o755);
    for (sub, m) in [("app", 0o755), ("out", 0o777), ("scratch", 0o755)] {
        std::fs::create_dir(root.join(sub)).unwrap();
        mode(&root.join(sub), m);
    }
    let script = root.join("app/server.sh");
    std::fs::write(&script, "echo pinned\n").unwrap();
    mode(&script, 0o644);
    let launcher = ConfinedLauncher::from_env(root.join("scratch"));
    Fixture {
        marker: root.join("out/replacement-ran"),
        script,
        launcher,
        root,
        _dir: dir,
    }
}

fn request(f: &Fixture, confine: bool) -> LaunchRequest {
    let mut sandbox = warden_config::SandboxSpec {
        confine,
        ..Default::default()
    };
    sandbox.write.push(f.root.join("out"));
    LaunchRequest {
        server: "pinned".into(),
        command: "/bin/sh".into(),
        args: vec![f.script.display().to_string()],
        env: BTreeMap::new(),
        cwd: None,
        sandbox,
    }
}

/// Renames a script over the pinned one that would leave the marker.
fn swap(f: &Fixture) {
    let staged = f.root.join("app/staged.sh");
    std::fs::write(
        &staged,
        format!("touch {}\necho replaced\n", f.marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::rename(&staged, &f.script).unwrap();
}

async fn output(f: &Fixture, request: &LaunchRequest) -> Result<String, LaunchError> {
    let fingerprint = f.launcher.fingerprint(request).unwrap();
    output_of(f, request, &fingerprint).await
}

async fn output_of(
    f: &Fixture,
    request: &LaunchRequest,
    fingerprint: &warden_mcp::Fingerprint,
) -> Result<String, LaunchError> {
    let mut launched = f.launcher.launch_pinned(request, fingerprint)?;
    drop(launched.stdin);
    let mut out = String::new();
    launched.stdout.read_to_string(&mut out).await.unwrap();
    launched.group.stop(StopGrace::default()).await;
    Ok(out)
}

fn is_changed(error: &LaunchError, script: &Path) -> bool {
    match error {
        LaunchError::PinnedFileChanged { path } => path == script,
        LaunchError::Confinement {
            source: warden_sandbox::SandboxError::PinnedFileChanged { path },
            ..
        } => path == script,
        _ => false,
    }
}

#[tokio::test]
async fn a_script_swapped_after_hashing_is_refused_confined_or_not() {
    for confine in [true, false] {
        let f = fixture();
        let request = request(&f, confine);
        // Control: nothing changes, the pinned script runs.
        assert_eq!(output(&f, &request).await.unwrap(), "pinned\n");

        let fingerprint = f.launcher.fingerprint(&request).unwrap();
        let script = fingerprint
            .files
            .iter()
            .find(|file| file.path == f.script)
            .expect("the script is pinned");
        assert_eq!(script.role, warden_mcp::Role::Script);
        swap(&f);
        let error = output_of(&f, &request, &fingerprint).await.unwrap_err();
        assert!(
            is_changed(&error, &f.script),
            "confine = {confine}: {error}"
        );
        assert!(error.to_string().contains("nothing was run"), "{error}");
        assert!(
            !f.marker.exists(),
            "confine = {confine}: the replacement ran"
        );
    }
}

#[tokio::test]
async fn a_script_written_in_place_after_hashing_is_refused() {
    for confine in [true, false] {
        let f = fixture();
        let request = request(&f, confine);
        let fingerprint = f.launcher.fingerprint(&request).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&f.script, format!("touch {}\n", f.marker.display())).unwrap();
        let error = output_of(&f, &request, &fingerprint).await.unwrap_err();
        assert!(
            is_changed(&error, &f.script),
            "confine = {confine}: {error}"
        );
        assert!(!f.marker.exists(), "confine = {confine}");
    }
}

#[tokio::test]
async fn the_program_that_runs_is_the_one_hashed() {
    let f = fixture();
    // The program is a copy of `sh` in a folder of its own; replaced after hashing.
    let bin = f.root.join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let program = bin.join("sh");
    std::fs::copy("/bin/sh", &program).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut request = request(&f, true);
    request.command = program.display().to_string();
    assert_eq!(output(&f, &request).await.unwrap(), "pinned\n");
    let fingerprint = f.launcher.fingerprint(&request).unwrap();
    let staged = bin.join("staged");
    std::fs::copy("/bin/sh", &staged).unwrap();
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&staged, &program).unwrap();
    let error = output_of(&f, &request, &fingerprint).await.unwrap_err();
    assert!(is_changed(&error, &program), "{error}");
}
