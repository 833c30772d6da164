//! The server's root directory: an empty tmpfs holding only the granted paths.
//!
//! Landlock refuses to open anything outside the grants, but it does not mediate
//! `connect(2)` to a UNIX socket named by a path (an ssh-agent, tmux or Docker socket is
//! reachable whenever file permissions allow), nor `stat`, `chmod` or `utime`. So the server
//! also gets a mount namespace whose root contains nothing but the granted paths, bound at
//! their own (resolved) locations, read-only unless they are writable grants, plus the
//! host's top-level symlinks (`/bin -> usr/bin` and the like), a fresh `/proc` and a
//! minimal `/dev`. What is not granted does not exist for the server.
//!
//! This module plans the layout in the parent; `super::server_setup` builds it in the child
//! from the prepared strings.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::SandboxError;

/// Most paths bound into one sandbox (the child keeps their descriptors on its stack).
pub(crate) const MAX_BINDS: usize = 64;

/// One granted path, bound into the new root at the same location.
#[derive(Debug)]
pub(crate) struct Bind {
    pub path: CString,
    pub writable: bool,
}

/// What the child creates in its new root.
#[derive(Debug, Default)]
pub(crate) struct Layout {
    /// Directories to create in the tmpfs, parents first.
    pub dirs: Vec<CString>,
    /// Empty files to create as mount points for granted files.
    pub files: Vec<CString>,
    /// The host's top-level symlinks: (target, link).
    pub links: Vec<(CString, CString)>,
    /// Granted paths, shallowest first.
    pub binds: Vec<Bind>,
    /// The paths of `binds`, for error messages.
    pub bind_paths: Vec<PathBuf>,
    /// The working directory, entered once the root is built.
    pub cwd: CString,
}

pub(crate) fn c_path(path: &Path) -> Result<CString, SandboxError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| SandboxError::Path {
        path: path.to_path_buf(),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the path contains a NUL byte",
        ),
    })
}

/// Plans the root from resolved grants.
///
/// A path inside an already-bound path with the same writability is not bound again; a
/// writable path inside a read-only one is bound on top of it. `scratch` gets a directory
/// in the skeleton (unless a bind already shows its place) for its own tmpfs.
pub(crate) fn plan(
    read: &[PathBuf],
    write: &[PathBuf],
    exec: &[PathBuf],
    cwd: &Path,
    scratch: &Path,
) -> Result<Layout, SandboxError> {
    let mut all: Vec<&PathBuf> = read.iter().chain(write).chain(exec).collect();
    all.sort_by(|a, b| {
        (a.components().count(), a.as_os_str()).cmp(&(b.components().count(), b.as_os_str()))
    });
    all.dedup();
    let writable = |p: &Path| write.iter().any(|w| p.starts_with(w));

    let mut selected: Vec<(PathBuf, bool)> = Vec::new();
    for path in all {
        if path.parent().is_none() {
            return Err(SandboxError::InvalidProfile {
                reason: "granting / would expose the whole filesystem".to_owned(),
            });
        }
        if path.starts_with("/proc") || path.starts_with("/dev") {
            return Err(SandboxError::InvalidProfile {
                reason: format!(
                    "{} cannot be granted: the sandbox mounts its own /proc and /dev",
                    path.display()
                ),
            });
        }
        let rw = writable(path);
        if selected
            .iter()
            .any(|(b, brw)| path.starts_with(b) && *brw == rw)
        {
            continue;
        }
        selected.push((path.clone(), rw));
    }
    if selected.len() > MAX_BINDS {
        return Err(SandboxError::InvalidProfile {
            reason: format!(
                "{} separate granted paths; at most {MAX_BINDS} are supported (grant a common \
                 parent instead)",
                selected.len()
            ),
        });
    }

    let mut layout = Layout::default();
    let mut dirs: Vec<PathBuf> = Vec::new();
    for (index, (path, rw)) in selected.iter().enumerate() {
        let inside_earlier = |p: &Path| selected[..index].iter().any(|(b, _)| p.starts_with(b));
        let mut ancestors: Vec<&Path> = path
            .ancestors()
            .skip(1)
            .filter(|a| a.parent().is_some())
            .collect();
        ancestors.reverse();
        for ancestor in ancestors {
            if inside_earlier(ancestor) {
                break;
            }
            if !dirs.iter().any(|d| d == ancestor) {
                dirs.push(ancestor.to_path_buf());
            }
        }
        if !inside_earlier(path) {
            if path.is_dir() {
                if !dirs.iter().any(|d| d == path) {
                    dirs.push(path.clone());
                }
            } else {
                layout.files.push(c_path(path)?);
            }
        }
        layout.binds.push(Bind {
            path: c_path(path)?,
            writable: *rw,
        });
        layout.bind_paths.push(path.clone());
    }
    // The scratch mount point, when no bind shows it: its directories in the skeleton.
    if scratch.parent().is_none() {
        return Err(SandboxError::InvalidProfile {
            reason: "the scratch directory cannot be /".to_owned(),
        });
    }
    if !selected.iter().any(|(b, _)| scratch.starts_with(b)) {
        let mut ancestors: Vec<&Path> = scratch
            .ancestors()
            .filter(|a| a.parent().is_some())
            .collect();
        ancestors.reverse();
        for ancestor in ancestors {
            if !dirs.iter().any(|d| d == ancestor) {
                dirs.push(ancestor.to_path_buf());
            }
        }
    }
    for dir in &dirs {
        layout.dirs.push(c_path(dir)?);
    }

    // Top-level symlinks (`/bin -> usr/bin` on merged-/usr systems): ELF interpreters and
    // shebangs name them. Resolved grants never pass through them, so they cannot clash.
    if let Ok(entries) = std::fs::read_dir("/") {
        for entry in entries.flatten() {
            let is_link = entry.file_type().map(|t| t.is_symlink()).unwrap_or(false);
            if !is_link {
                continue;
            }
            let link = Path::new("/").join(entry.file_name());
            if let Ok(target) = std::fs::read_link(&link) {
                layout.links.push((c_path(&target)?, c_path(&link)?));
            }
        }
    }
    layout.cwd = c_path(cwd)?;
    Ok(layout)
}

/// Recreates the symlink `link` -> `target` in the new root, with the directories above it
/// (for a program named through a symlink whose directory is not granted: the target is).
pub(crate) fn add_link(
    layout: &mut Layout,
    target: &Path,
    link: &Path,
) -> Result<(), SandboxError> {
    let mut ancestors: Vec<&Path> = link
        .ancestors()
        .skip(1)
        .filter(|a| a.parent().is_some())
        .collect();
    ancestors.reverse();
    for dir in ancestors {
        let dir = c_path(dir)?;
        if !layout.dirs.contains(&dir) {
            layout.dirs.push(dir);
        }
    }
    layout.links.push((c_path(target)?, c_path(link)?));
    Ok(())
}

/// Refuses a program path the new root cannot show: one that passes through a symlinked
/// directory below the top level (the resolved directory is what gets bound).
pub(crate) fn check_reachable(given: &Path) -> Result<(), SandboxError> {
    for ancestor in given.ancestors().skip(1) {
        let Some(parent) = ancestor.parent() else {
            break;
        };
        if parent.parent().is_none() {
            // A top-level symlink is recreated in the new root.
            break;
        }
        let is_link = std::fs::symlink_metadata(ancestor)
            .map(|m| m.file_type().is_symlink())
            .unwrap_or(false);
        if is_link {
            return Err(SandboxError::InvalidProfile {
                reason: format!(
                    "the program path {} goes through the symlink {}, which does not exist \
                     inside the sandbox; give the resolved path",
                    given.display(),
                    ancestor.display()
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    fn strings(list: &[CString]) -> Vec<&str> {
        list.iter().map(|c| c.to_str().unwrap()).collect()
    }

    #[test]
    fn nested_grants_bind_once_unless_writability_differs() {
        let work = tempfile::tempdir().unwrap();
        let work = std::fs::canonicalize(work.path()).unwrap();
        let out = work.join("out");
        std::fs::create_dir(&out).unwrap();
        std::fs::create_dir(work.join("src")).unwrap();
        let read = [p("/usr"), p("/usr/lib"), work.clone(), work.join("src")];
        let write = [out.clone()];
        let exec = [p("/usr")];
        let layout = plan(&read, &write, &exec, &work, &work.join("scratch")).unwrap();
        let binds: Vec<(&str, bool)> = layout
            .binds
            .iter()
            .map(|b| (b.path.to_str().unwrap(), b.writable))
            .collect();
        assert_eq!(
            binds,
            [
                ("/usr", false),
                (work.to_str().unwrap(), false),
                (out.to_str().unwrap(), true)
            ]
        );
        // Directories down to each bind, parents first; nothing inside a bind.
        let dirs = strings(&layout.dirs);
        assert_eq!(dirs[0], "/usr");
        assert!(dirs.contains(&work.to_str().unwrap()));
        assert!(!dirs.contains(&out.to_str().unwrap()));
        for (i, dir) in dirs.iter().enumerate() {
            let parent = Path::new(dir).parent().unwrap();
            assert!(
                parent == Path::new("/") || dirs[..i].contains(&parent.to_str().unwrap()),
                "{dir} before its parent"
            );
        }
    }

    #[test]
    fn granted_files_get_a_file_mount_point() {
        let dir = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(dir.path()).unwrap();
        let file = dir.join("resolv.conf");
        std::fs::write(&file, "").unwrap();
        let layout = plan(
            std::slice::from_ref(&file),
            &[],
            &[],
            Path::new("/"),
            &dir.join("s"),
        )
        .unwrap();
        assert_eq!(strings(&layout.files), [file.to_str().unwrap()]);
        assert!(!strings(&layout.dirs).contains(&file.to_str().unwrap()));
    }

    #[test]
    fn root_proc_and_dev_cannot_be_granted() {
        for bad in ["/", "/proc", "/dev/shm"] {
            let err = plan(&[p(bad)], &[], &[], Path::new("/"), Path::new("/s")).unwrap_err();
            assert!(
                matches!(err, SandboxError::InvalidProfile { .. }),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn a_program_behind_a_deep_symlink_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        let err = check_reachable(&dir.path().join("link/server")).unwrap_err();
        assert!(err.to_string().contains("symlink"), "{err}");
        check_reachable(&real.join("server")).unwrap();
        check_reachable(Path::new("/bin/sh")).unwrap();
    }
}
