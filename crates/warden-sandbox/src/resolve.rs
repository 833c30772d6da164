//! Resolving a granted path without following a symlink the server could have planted.
//!
//! Grants are resolved (symlinks, `..`) before they are bound and handed to Landlock. A
//! server with a write grant can replace a directory under it with a symlink to `~/.ssh`;
//! a read grant, a working directory or a program path that passes through that directory
//! would then, at the next start, resolve to `~/.ssh` and grant it. [`resolve_grant`]
//! resolves a path one component at a time and refuses a symlink that lies inside a
//! writable path and points out of it: such a link is the server's to change, so it never
//! takes a grant anywhere the server could not already write. A link that stays inside
//! (pnpm's `node_modules`) is followed, and so is a symlink elsewhere (one the user made,
//! `/bin -> usr/bin`).
//!
//! The walk uses `lstat`, so a link swapped in after it is checked is caught when the grant
//! is opened: the sandbox opens every resolved path and refuses one whose descriptor does
//! not name the same path (a path without symlinks opens to itself), and Landlock rules are
//! bound to those descriptors, not to names.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use crate::SandboxError;

/// Most symlinks followed while resolving one path (as the kernel's `MAXSYMLINKS`).
const MAX_SYMLINKS: usize = 40;

/// Resolves `path` (absolute) like `realpath`, except that a symlink lying inside one of
/// `writable` (resolved paths) whose target leaves that writable path is refused with
/// [`SandboxError::PlantedSymlink`]. A link that stays inside (a `pnpm` `node_modules`) is
/// followed: it can only point at what the server may already write. A missing path is
/// [`SandboxError::Path`].
pub fn resolve_grant(path: &Path, writable: &[PathBuf]) -> Result<PathBuf, SandboxError> {
    let mut followed = 0;
    resolve(path, path, writable, &mut followed)
}

/// [`resolve_grant`] of `path`, on the way to resolving `given` (named in errors), with the
/// count of symlinks followed so far.
fn resolve(
    given: &Path,
    path: &Path,
    writable: &[PathBuf],
    followed: &mut usize,
) -> Result<PathBuf, SandboxError> {
    let error = |source: std::io::Error| SandboxError::Path {
        path: given.to_path_buf(),
        source,
    };
    if !path.is_absolute() {
        return Err(error(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "paths in a sandbox profile must be absolute",
        )));
    }
    let mut pending: VecDeque<OsString> = components(path);
    let mut resolved = PathBuf::from("/");
    while let Some(part) = pending.pop_front() {
        if part == ".." {
            // `resolved` holds no symlink, so going up is exact.
            resolved.pop();
            continue;
        }
        let next = resolved.join(&part);
        let meta = std::fs::symlink_metadata(&next).map_err(error)?;
        if !meta.file_type().is_symlink() {
            resolved = next;
            continue;
        }
        *followed += 1;
        if *followed > MAX_SYMLINKS {
            return Err(error(std::io::Error::other(format!(
                "more than {MAX_SYMLINKS} symlinks on the way"
            ))));
        }
        let target = std::fs::read_link(&next).map_err(error)?;
        let target = resolved.join(target);
        if let Some(grant) = writable.iter().find(|grant| resolved.starts_with(grant)) {
            // The server's to change: followed only while it stays where the server may
            // write anyway.
            let planted = || SandboxError::PlantedSymlink {
                path: given.to_path_buf(),
                link: next.clone(),
                grant: grant.clone(),
            };
            // A link out of the grant to nowhere is still a planted link, not a missing path.
            let inside = resolve(given, &target, writable, followed).map_err(|e| match e {
                SandboxError::Path { .. } if !target.starts_with(grant) => planted(),
                other => other,
            })?;
            if !inside.starts_with(grant) {
                return Err(planted());
            }
            resolved = inside;
            continue;
        }
        resolved = PathBuf::from("/");
        for part in components(&target).into_iter().rev() {
            pending.push_front(part);
        }
    }
    Ok(resolved)
}

/// The parts of `path` to walk: names and `..`, without the root and `.`.
fn components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|part| match part {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn resolves_like_realpath_outside_writable_paths() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("real/sub")).unwrap();
        symlink(root.join("real"), root.join("abs")).unwrap();
        symlink("real/sub", root.join("rel")).unwrap();
        symlink("../../real", root.join("real/sub/up")).unwrap();
        for (given, expected) in [
            (root.join("abs/sub"), root.join("real/sub")),
            (root.join("rel"), root.join("real/sub")),
            (root.join("rel/up/sub/.."), root.join("real")),
            (root.join("real/./sub/../sub"), root.join("real/sub")),
        ] {
            assert_eq!(resolve_grant(&given, &[]).unwrap(), expected, "{given:?}");
            assert_eq!(
                resolve_grant(&given, &[]).unwrap(),
                std::fs::canonicalize(&given).unwrap()
            );
        }
        // A write grant elsewhere changes nothing.
        let elsewhere = [root.join("elsewhere")];
        assert_eq!(
            resolve_grant(&root.join("abs/sub"), &elsewhere).unwrap(),
            root.join("real/sub")
        );
        let err = resolve_grant(&root.join("missing"), &[]).unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
        assert!(resolve_grant(Path::new("relative"), &[]).is_err());
    }

    #[test]
    fn a_symlink_inside_a_writable_path_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let work = root.join("work");
        let secrets = root.join("home/.ssh");
        std::fs::create_dir_all(work.join("data")).unwrap();
        std::fs::create_dir_all(&secrets).unwrap();
        let writable = [work.clone()];
        // Before the swap: the grant is what it says.
        assert_eq!(
            resolve_grant(&work.join("data"), &writable).unwrap(),
            work.join("data")
        );
        // The server replaces `data` with a symlink to ~/.ssh.
        std::fs::remove_dir(work.join("data")).unwrap();
        symlink(&secrets, work.join("data")).unwrap();
        let err = resolve_grant(&work.join("data"), &writable).unwrap_err();
        match &err {
            SandboxError::PlantedSymlink { path, link, grant } => {
                assert_eq!(path, &work.join("data"));
                assert_eq!(link, &work.join("data"));
                assert_eq!(grant, &work);
            }
            other => panic!("{other}"),
        }
        assert!(err.to_string().contains("could have planted"), "{err}");
        // Deeper, and reached through a symlink outside the write grant.
        symlink(&work, root.join("link-to-work")).unwrap();
        for given in [work.join("data/id_rsa"), root.join("link-to-work/data")] {
            assert!(matches!(
                resolve_grant(&given, &writable),
                Err(SandboxError::PlantedSymlink { .. })
            ));
        }
        // The write grant itself may be reached through a user's symlink.
        assert_eq!(
            resolve_grant(&root.join("link-to-work"), &writable).unwrap(),
            work
        );
        // A link that stays inside the write grant (pnpm's node_modules) is followed; one
        // that leaves it through another link inside is not.
        std::fs::create_dir_all(work.join("node_modules/.pnpm/pkg@1/node_modules/pkg")).unwrap();
        symlink(
            ".pnpm/pkg@1/node_modules/pkg",
            work.join("node_modules/pkg"),
        )
        .unwrap();
        assert_eq!(
            resolve_grant(&work.join("node_modules/pkg"), &writable).unwrap(),
            work.join("node_modules/.pnpm/pkg@1/node_modules/pkg")
        );
        symlink("data", work.join("hop")).unwrap();
        assert!(matches!(
            resolve_grant(&work.join("hop"), &writable),
            Err(SandboxError::PlantedSymlink { .. })
        ));
        // A dangling link inside is refused as planted, not reported as missing.
        symlink(root.join("nowhere"), work.join("dangling")).unwrap();
        assert!(matches!(
            resolve_grant(&work.join("dangling"), &writable),
            Err(SandboxError::PlantedSymlink { .. })
        ));
    }
}
