//! How grants are resolved (issue 10, sections 5 and 6), with real confined processes:
//!
//! - a server with a write grant that swaps a directory under it for a symlink to `~/.ssh`
//!   cannot make a read grant, its working directory or its program path follow that
//!   symlink at the next start: the start is refused, naming the path and the symlink;
//! - a program granted alone (a `cargo install` binary, a `uv tool` entry point named
//!   through `~/.local/bin`) runs, while the rest of its directory stays out of reach.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use warden_sandbox::{Profile, SandboxError, Scratch, confine};

/// A directory the sandbox uid can traverse, canonical.
fn open_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = std::fs::canonicalize(dir.path()).unwrap();
    (dir, path)
}

fn mkdir(path: &Path) -> PathBuf {
    std::fs::create_dir_all(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.to_path_buf()
}

fn write(path: &Path, text: &str) -> PathBuf {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
    path.to_path_buf()
}

/// Runs `program args` confined by `profile` (in `cwd` when given); stdout, or the error
/// `confine` returned.
fn run(
    profile: &Profile,
    program: &Path,
    args: &[&str],
    cwd: Option<&Path>,
) -> Result<(bool, String), SandboxError> {
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    let confinement = confine(&mut command, profile)?;
    let mut child = command
        .spawn()
        .map_err(|e| confinement.spawn_error(e))
        .unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    Ok((status.success(), format!("{out}{err}")))
}

fn sh_profile(scratch: &Scratch) -> Profile {
    Profile::default_for(Path::new("/bin/sh"), scratch.path()).unwrap()
}

#[test]
fn a_grant_through_a_symlink_planted_in_a_write_grant_is_refused() {
    let (_base, base) = open_dir();
    let scratch = Scratch::create(&base, "planted").unwrap();
    let work = mkdir(&base.join("work"));
    let data = mkdir(&work.join("data"));
    write(&data.join("notes.txt"), "honest notes");
    let ssh = mkdir(&base.join("home/.ssh"));
    write(&ssh.join("id_rsa"), "-----FAKE KEY-----");

    let mut profile = sh_profile(&scratch);
    profile.write.push(work.clone());
    profile.read.push(data.clone());
    let sh = Path::new("/bin/sh");
    // The positive control: before the swap, the read grant and the working directory work.
    let (ok, out) = run(&profile, sh, &["-c", "cat notes.txt"], Some(&data)).unwrap();
    assert!(ok && out.contains("honest notes"), "{out}");

    // The server replaces `data` with a symlink to ~/.ssh, for its next start.
    std::fs::remove_dir_all(&data).unwrap();
    symlink(&ssh, &data).unwrap();
    // What the server would do next: read the key through its link.
    let steal = format!("cat {}/id_rsa", data.display());
    for cwd in [None, Some(data.as_path())] {
        let err = run(&profile, sh, &["-c", &steal], cwd).unwrap_err();
        match &err {
            SandboxError::PlantedSymlink { path, link, grant } => {
                assert_eq!(path, &data);
                assert_eq!(link, &data);
                assert_eq!(grant, &work);
            }
            other => panic!("expected PlantedSymlink, got {other}"),
        }
        let message = err.to_string();
        assert!(message.contains(&data.display().to_string()), "{message}");
        assert!(message.contains("could have planted"), "{message}");
    }
    // The working directory alone (no read grant naming it) is refused the same way.
    profile.read.retain(|p| p != &data);
    let err = run(&profile, sh, &["-c", &steal], Some(&data)).unwrap_err();
    assert!(matches!(err, SandboxError::PlantedSymlink { .. }), "{err}");

    // A program path through a planted symlink: the server swapped its own `bin`.
    let bin = mkdir(&base.join("tools/bin"));
    std::fs::copy("/bin/sh", bin.join("tool")).unwrap();
    symlink(&bin, work.join("bin")).unwrap();
    profile.exec.push(bin.clone());
    profile.read.push(bin.clone());
    let err = run(&profile, &work.join("bin/tool"), &["-c", "true"], None).unwrap_err();
    assert!(matches!(err, SandboxError::PlantedSymlink { .. }), "{err}");
    // The same program by its own path runs.
    let (ok, out) = run(&profile, &bin.join("tool"), &["-c", "echo ran"], None).unwrap();
    assert!(ok && out.contains("ran"), "{out}");
}

#[test]
fn a_symlink_outside_the_write_grants_is_followed_as_before() {
    let (_base, base) = open_dir();
    let scratch = Scratch::create(&base, "followed").unwrap();
    let real = mkdir(&base.join("real"));
    write(&real.join("file.txt"), "through a user's link");
    symlink(&real, base.join("link")).unwrap();
    let mut profile = sh_profile(&scratch);
    profile.write.push(mkdir(&base.join("work")));
    profile.read.push(base.join("link"));
    let (ok, out) = run(
        &profile,
        Path::new("/bin/sh"),
        &["-c", "cat file.txt"],
        Some(&base.join("link")),
    )
    .unwrap();
    assert!(ok && out.contains("through a user's link"), "{out}");

    // Inside a write grant, a link that stays inside it (pnpm's node_modules, a `current`
    // release link) is followed too: it can only point where the server may write anyway.
    let work = base.join("work");
    let release = mkdir(&work.join("releases/v2"));
    write(&release.join("VERSION"), "v2");
    symlink("releases/v2", work.join("current")).unwrap();
    profile.read.push(work.join("current"));
    let (ok, out) = run(
        &profile,
        Path::new("/bin/sh"),
        &["-c", "cat VERSION"],
        Some(&work.join("current")),
    )
    .unwrap();
    assert!(ok && out.contains("v2"), "{out}");

    // A program that is itself a link out of the write grant (a virtualenv's `bin/python`
    // in a project the server may write) runs: it only runs what it points to.
    let venv_bin = mkdir(&work.join(".venv/bin"));
    symlink("/bin/sh", venv_bin.join("python")).unwrap();
    let (ok, out) = run(
        &profile,
        &venv_bin.join("python"),
        &["-c", "echo venv"],
        None,
    )
    .unwrap();
    assert!(ok && out.contains("venv"), "{out}");
}

#[test]
fn a_program_granted_alone_runs_and_its_directory_stays_hidden() {
    let (_base, base) = open_dir();
    let scratch = Scratch::create(&base, "alone").unwrap();
    // `cargo install`: ~/.cargo/bin/NAME, next to credentials the server must not see.
    let cargo_bin = mkdir(&base.join(".cargo/bin"));
    let tool = cargo_bin.join("mcp-tool");
    std::fs::copy("/bin/sh", &tool).unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    write(&cargo_bin.join("other-tool"), "another program");
    write(&base.join(".cargo/credentials.toml"), "token = \"secret\"");
    let mut profile = sh_profile(&scratch);
    profile.read.push(tool.clone());
    profile.exec.push(tool.clone());
    // The tool runs; nothing else of ~/.cargo exists for it (a stat sees no file), and its
    // directory cannot even be listed.
    let script = format!(
        "echo started; test -e {} || echo no-other-tool; cat {} || echo no-credentials; \
         ls {} || echo no-listing",
        cargo_bin.join("other-tool").display(),
        base.join(".cargo/credentials.toml").display(),
        cargo_bin.display(),
    );
    let (ok, out) = run(&profile, &tool, &["-c", &script], None).unwrap();
    assert!(ok, "{out}");
    assert!(out.contains("started"), "{out}");
    assert!(out.contains("no-other-tool"), "{out}");
    assert!(!out.contains("secret"), "{out}");
    assert!(out.contains("no-credentials"), "{out}");
    assert!(out.contains("no-listing"), "{out}");

    // `uv tool`: ~/.local/bin/NAME is a symlink into the tool's own venv; only the venv
    // is granted, and the link is recreated so the program runs by the name it was given.
    let venv = mkdir(&base.join(".local/share/uv/tools/mcp-x"));
    let venv_bin = mkdir(&venv.join("bin"));
    let entry = venv_bin.join("mcp-x");
    std::fs::copy("/bin/sh", &entry).unwrap();
    std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o755)).unwrap();
    let local_bin = mkdir(&base.join(".local/bin"));
    symlink(&entry, local_bin.join("mcp-x")).unwrap();
    write(&local_bin.join("unrelated"), "another program");
    let history = mkdir(&base.join(".local/share/fish"));
    write(&history.join("fish_history"), "- cmd: export TOKEN=secret");
    let mut profile = sh_profile(&scratch);
    profile.read.push(venv.clone());
    profile.exec.push(venv.clone());
    let script = format!(
        "echo \"$0\"; test -e {} || echo no-unrelated; cat {} || echo no-history",
        local_bin.join("unrelated").display(),
        history.join("fish_history").display()
    );
    let (ok, out) = run(&profile, &local_bin.join("mcp-x"), &["-c", &script], None).unwrap();
    assert!(ok, "{out}");
    assert!(
        out.contains(&local_bin.join("mcp-x").display().to_string()),
        "{out}"
    );
    assert!(out.contains("no-unrelated"), "{out}");
    assert!(!out.contains("secret"), "{out}");
    assert!(out.contains("no-history"), "{out}");
}
