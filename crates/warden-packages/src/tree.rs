//! The manifest of an installed tree: every file (its sha256 and whether it is executable)
//! and every symlink (its target), by path relative to the installation directory. Its
//! hash is what a package pin records; comparing two manifests names the files that
//! changed (`warden update`).
//!
//! Scanning also refuses a tree someone else could change: every directory, file and
//! symlink must be owned by Warden's user (or root), and no directory or file may be
//! writable by its group or by others. Installs are normalised to that
//! ([`normalise`]) before they are scanned the first time.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::PackageError;

/// Most entries (files, symlinks, directories) in one installed tree.
pub const MAX_ENTRIES: usize = 200_000;
/// Most bytes of files in one installed tree.
pub const MAX_BYTES: u64 = 4 * 1024 * 1024 * 1024;
/// Deepest directory nesting followed.
const MAX_DEPTH: usize = 128;

/// One entry of a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Item {
    /// A regular file: its sha256 and whether any execute bit is set.
    File {
        /// sha256, lowercase hex.
        sha256: String,
        /// Whether it is executable.
        exec: bool,
    },
    /// A symbolic link and its target, as written.
    Link {
        /// The link's target.
        target: String,
    },
}

/// Every file and symlink under an installation directory, by relative path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Relative path (UTF-8, lossily) to what is there.
    pub items: BTreeMap<String, Item>,
}

impl Manifest {
    /// sha256 of the manifest's canonical JSON.
    pub fn sha256(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        hex(&Sha256::digest(&json))
    }

    /// The manifest as stored.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A stored manifest; an unreadable one reads as empty (every file then shows as new).
    pub fn from_json(text: &str) -> Manifest {
        serde_json::from_str(text).unwrap_or_default()
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// sha256 of the regular file at `path`, lowercase hex
/// ([`warden_mcp::fingerprint::sha256_regular_file`]): a symlink is not followed and a
/// FIFO or device is refused at once (opening a FIFO to read would wait for a writer).
pub fn file_sha256(path: &Path) -> Result<String, PackageError> {
    use warden_mcp::FingerprintError;
    warden_mcp::fingerprint::sha256_regular_file(path).map_err(|error| match error {
        FingerprintError::Read { source, .. } => PackageError::io("hash", path, source),
        FingerprintError::TooLarge { .. } => PackageError::TooLarge {
            path: path.to_path_buf(),
            limit: format!(
                "a file larger than {} MiB",
                warden_mcp::fingerprint::MAX_HASHED_BYTES >> 20
            ),
        },
        other => PackageError::Invalid {
            package: path.display().to_string(),
            reason: other.to_string(),
        },
    })
}

fn me() -> u32 {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

/// Why `meta` (of `path`) could be changed by someone other than Warden's user, or `None`.
pub fn unsafe_entry(path: &Path, meta: &std::fs::Metadata) -> Option<String> {
    let me = me();
    if meta.uid() != me && meta.uid() != 0 {
        return Some(format!(
            "{} is owned by uid {}, not by you (uid {me})",
            path.display(),
            meta.uid()
        ));
    }
    let mode = meta.permissions().mode();
    if !meta.file_type().is_symlink() && mode & 0o022 != 0 {
        return Some(format!(
            "{} is writable by its group or by others (mode {:o})",
            path.display(),
            mode & 0o7777
        ));
    }
    None
}

/// Why the symlink at `path` (`relative` to the installation `root`, pointing to `target`)
/// is refused, or `None`: a link must stay inside the installation, both as written (its
/// `..` cannot climb above `root`) and as the file system resolves it now, since whatever
/// it points to outside is not part of the manifest and could change unseen (a link to
/// `/etc/passwd` or `~/.ssh` would also hand a server that reads it a file the user never
/// meant to share). The one exception is a venv's `bin/python*`, which points to the system
/// interpreter the venv was made with (itself pinned by the executable pin).
fn link_leaves(root: &Path, relative: &str, path: &Path, target: &Path) -> Option<String> {
    let outside = || {
        format!(
            "the symlink {} points outside the installation (to {})",
            path.display(),
            target.display()
        )
    };
    let resolved = std::fs::canonicalize(path).ok();
    let canonical_root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    if is_venv_python(relative) {
        // Its final target must be an interpreter: a regular file named python*.
        return match &resolved {
            Some(file)
                if file.is_file()
                    && file
                        .file_name()
                        .is_some_and(|name| name.to_string_lossy().starts_with("python")) =>
            {
                None
            }
            _ => Some(format!(
                "the symlink {} does not lead to a Python interpreter (it points to {})",
                path.display(),
                target.display()
            )),
        };
    }
    // As written: from the link's directory, without climbing above the root.
    if target.is_absolute() {
        return Some(outside());
    }
    let mut depth: usize = Path::new(relative)
        .parent()
        .map_or(0, |parent| parent.components().count());
    for component in target.components() {
        match component {
            std::path::Component::ParentDir => match depth.checked_sub(1) {
                Some(up) => depth = up,
                None => return Some(outside()),
            },
            std::path::Component::Normal(_) => depth += 1,
            _ => {}
        }
    }
    // As resolved now (a `..` after a linked directory resolves from the link's target).
    match resolved {
        Some(file) if !file.starts_with(&canonical_root) => Some(outside()),
        _ => None,
    }
}

/// Whether `relative` is a venv's interpreter link: `venv/bin/python`, `python3`, `python3.12`.
fn is_venv_python(relative: &str) -> bool {
    relative
        .strip_prefix("venv/bin/python")
        .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// Scans the tree under `root`: its manifest, refusing ([`PackageError::Unsafe`]) a tree
/// that someone other than Warden's user could change.
pub fn scan(root: &Path) -> Result<Manifest, PackageError> {
    let meta =
        std::fs::symlink_metadata(root).map_err(|source| PackageError::io("read", root, source))?;
    if !meta.is_dir() {
        return Err(PackageError::Unsafe {
            path: root.to_path_buf(),
            reason: "it is not a directory".to_owned(),
        });
    }
    if let Some(reason) = unsafe_entry(root, &meta) {
        return Err(PackageError::Unsafe {
            path: root.to_path_buf(),
            reason,
        });
    }
    let mut manifest = Manifest::default();
    let mut bytes = 0u64;
    let mut count = 0usize;
    let mut stack: Vec<(PathBuf, usize)> = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = stack.pop() {
        if depth > MAX_DEPTH {
            return Err(PackageError::TooLarge {
                path: root.to_path_buf(),
                limit: format!("more than {MAX_DEPTH} nested directories"),
            });
        }
        let entries =
            std::fs::read_dir(&dir).map_err(|source| PackageError::io("list", &dir, source))?;
        for entry in entries {
            let entry = entry.map_err(|source| PackageError::io("list", &dir, source))?;
            let path = entry.path();
            count += 1;
            if count > MAX_ENTRIES {
                return Err(PackageError::TooLarge {
                    path: root.to_path_buf(),
                    limit: format!("more than {MAX_ENTRIES} entries"),
                });
            }
            let meta = std::fs::symlink_metadata(&path)
                .map_err(|source| PackageError::io("read", &path, source))?;
            if let Some(reason) = unsafe_entry(&path, &meta) {
                return Err(PackageError::Unsafe {
                    path: root.to_path_buf(),
                    reason,
                });
            }
            let relative = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            let kind = meta.file_type();
            if kind.is_dir() {
                stack.push((path, depth + 1));
            } else if kind.is_symlink() {
                let target = std::fs::read_link(&path)
                    .map_err(|source| PackageError::io("read", &path, source))?;
                if let Some(reason) = link_leaves(root, &relative, &path, &target) {
                    return Err(PackageError::Unsafe {
                        path: root.to_path_buf(),
                        reason,
                    });
                }
                manifest.items.insert(
                    relative,
                    Item::Link {
                        target: target.to_string_lossy().into_owned(),
                    },
                );
            } else if kind.is_file() {
                bytes += meta.len();
                if bytes > MAX_BYTES {
                    return Err(PackageError::TooLarge {
                        path: root.to_path_buf(),
                        limit: format!("more than {MAX_BYTES} bytes of files"),
                    });
                }
                let sha256 = file_sha256(&path)?;
                let exec = meta.permissions().mode() & 0o111 != 0;
                manifest.items.insert(relative, Item::File { sha256, exec });
            } else {
                return Err(PackageError::Unsafe {
                    path: root.to_path_buf(),
                    reason: format!(
                        "{} is neither a file, a directory nor a symlink",
                        path.display()
                    ),
                });
            }
        }
    }
    Ok(manifest)
}

/// Gives every entry under `root` (and `root`) to Warden's user and group (when Warden runs
/// as root: an install confined as uid 65534 wrote them) and fixed modes: directories
/// `0755`, executable files `0755`, other files `0644`. Symlinks are not followed.
pub fn normalise(root: &Path) -> Result<(), PackageError> {
    let mut stack = vec![root.to_path_buf()];
    let mut count = 0usize;
    // SAFETY: getegid cannot fail and touches no memory.
    let (uid, gid) = (me(), unsafe { libc::getegid() });
    while let Some(path) = stack.pop() {
        count += 1;
        if count > MAX_ENTRIES {
            return Err(PackageError::TooLarge {
                path: root.to_path_buf(),
                limit: format!("more than {MAX_ENTRIES} entries"),
            });
        }
        let meta = std::fs::symlink_metadata(&path)
            .map_err(|source| PackageError::io("read", &path, source))?;
        if uid == 0 && (meta.uid() != uid || meta.gid() != gid) {
            std::os::unix::fs::lchown(&path, Some(uid), Some(gid))
                .map_err(|source| PackageError::io("change the owner of", &path, source))?;
        }
        let kind = meta.file_type();
        if kind.is_symlink() {
            continue;
        }
        let mode = if kind.is_dir() || meta.permissions().mode() & 0o111 != 0 {
            0o755
        } else {
            0o644
        };
        if meta.permissions().mode() & 0o7777 != mode {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
                .map_err(|source| PackageError::io("change the mode of", &path, source))?;
        }
        if kind.is_dir() {
            let entries = std::fs::read_dir(&path)
                .map_err(|source| PackageError::io("list", &path, source))?;
            for entry in entries {
                let entry = entry.map_err(|source| PackageError::io("list", &path, source))?;
                stack.push(entry.path());
            }
        }
    }
    Ok(())
}

/// The differences from `old` to `new`, one line each (`changed`, `added`, `removed`,
/// with short hashes), at most `limit` lines plus one saying how many more.
pub fn diff(old: &Manifest, new: &Manifest, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    let short = |item: &Item| match item {
        Item::File { sha256, exec } => format!(
            "sha256 {}…{}",
            sha256.get(..12).unwrap_or(sha256),
            if *exec { " (executable)" } else { "" }
        ),
        Item::Link { target } => format!("-> {target}"),
    };
    for (path, item) in &old.items {
        match new.items.get(path) {
            None => out.push(format!("removed  {path}  ({})", short(item))),
            Some(now) if now != item => {
                out.push(format!(
                    "changed  {path}  ({} -> {})",
                    short(item),
                    short(now)
                ));
            }
            Some(_) => {}
        }
    }
    for (path, item) in &new.items {
        if !old.items.contains_key(path) {
            out.push(format!("added    {path}  ({})", short(item)));
        }
    }
    out.sort_by(|a, b| a[9..].cmp(&b[9..]));
    if out.len() > limit {
        let more = out.len() - limit;
        out.truncate(limit);
        out.push(format!("… and {more} more"));
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_tree_is_scanned_compared_and_refused_when_others_may_write() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("pkg");
        std::fs::create_dir_all(root.join("lib")).unwrap();
        std::fs::write(root.join("lib/a.js"), "a").unwrap();
        std::fs::write(root.join("run"), "#!/bin/sh").unwrap();
        std::fs::set_permissions(root.join("run"), std::fs::Permissions::from_mode(0o775)).unwrap();
        std::os::unix::fs::symlink("lib/a.js", root.join("link")).unwrap();
        normalise(&root).unwrap();
        let first = scan(&root).unwrap();
        assert_eq!(first.items.len(), 3);
        assert!(matches!(first.items["run"], Item::File { exec: true, .. }));
        assert_eq!(first.sha256(), scan(&root).unwrap().sha256());

        std::fs::write(root.join("lib/a.js"), "b").unwrap();
        std::fs::write(root.join("lib/new.js"), "n").unwrap();
        std::fs::remove_file(root.join("link")).unwrap();
        let second = scan(&root).unwrap();
        assert_ne!(first.sha256(), second.sha256());
        let lines = diff(&first, &second, 10);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].starts_with("changed  lib/a.js"), "{lines:?}");
        assert!(lines[1].starts_with("added    lib/new.js"), "{lines:?}");
        assert!(lines[2].starts_with("removed  link"), "{lines:?}");
        assert_eq!(diff(&first, &second, 1).len(), 2);

        // A file or directory others may write is refused, naming it.
        std::fs::set_permissions(root.join("lib"), std::fs::Permissions::from_mode(0o777)).unwrap();
        let error = scan(&root).unwrap_err().to_string();
        assert!(
            error.contains("lib is writable by its group or by others"),
            "{error}"
        );
        normalise(&root).unwrap();
        scan(&root).unwrap();
        std::fs::set_permissions(root.join("run"), std::fs::Permissions::from_mode(0o757)).unwrap();
        assert!(scan(&root).is_err());
        let stored = Manifest::from_json(&second.to_json());
        assert_eq!(stored, second);
    }

    /// A tree in a fresh temporary directory, normalised.
    fn tree(files: &[&str]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("pkg");
        for file in files {
            let path = root.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "x").unwrap();
        }
        std::fs::create_dir_all(&root).unwrap();
        (dir, root)
    }

    #[test]
    fn a_symlink_leaving_the_installation_is_refused_naming_it() {
        let home = std::env::var("HOME").unwrap_or_else(|_| "/root".to_owned());
        let attacks: [(&str, String); 5] = [
            ("node_modules/evil/data.json", "/etc/passwd".to_owned()),
            ("node_modules/evil/keys", format!("{home}/.ssh")),
            ("node_modules/evil/up", "../../../../etc/passwd".to_owned()),
            // Only the venv's interpreter may leave, and only to an interpreter.
            ("venv/bin/python3", "/etc/passwd".to_owned()),
            ("venv/lib/python3/site.py", "/usr/bin/python3".to_owned()),
        ];
        for (link, target) in attacks {
            let (_dir, root) = tree(&["node_modules/evil/index.js", "venv/lib/python3/a.py"]);
            std::fs::create_dir_all(root.join(link).parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(&target, root.join(link)).unwrap();
            normalise(&root).unwrap();
            let error = scan(&root).unwrap_err().to_string();
            assert!(
                error.contains(&format!("symlink {}", root.join(link).display())),
                "{link} -> {target}: {error}"
            );
        }
        // A `..` through a linked directory is judged where it resolves.
        let (_dir, root) = tree(&["a/b/c.js"]);
        std::os::unix::fs::symlink("..", root.join("a/b/up")).unwrap();
        // Lexically `a/b/up/../../..` is `.`; resolved, `up` is `a`, so it is the root's parent.
        std::os::unix::fs::symlink("up/../../..", root.join("a/b/top")).unwrap();
        let error = scan(&root).unwrap_err().to_string();
        assert!(error.contains("points outside the installation"), "{error}");

        // Control: links that stay inside (npm's `.bin`, a venv's `lib64`) pass.
        let (_dir, root) = tree(&["node_modules/pkg/dist/index.js", "venv/lib/x.py"]);
        std::fs::create_dir_all(root.join("node_modules/.bin")).unwrap();
        std::os::unix::fs::symlink("../pkg/dist/index.js", root.join("node_modules/.bin/pkg"))
            .unwrap();
        std::os::unix::fs::symlink("lib", root.join("venv/lib64")).unwrap();
        normalise(&root).unwrap();
        assert_eq!(scan(&root).unwrap().items.len(), 4);
    }

    /// `f()` on another thread, failing (instead of hanging) after 20 s.
    fn within<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (send, receive) = std::sync::mpsc::channel();
        std::thread::spawn(move || send.send(f()));
        receive
            .recv_timeout(std::time::Duration::from_secs(20))
            .unwrap() // a timeout: it waited on the FIFO
    }

    #[test]
    fn a_fifo_or_a_link_is_never_opened_to_be_hashed() {
        let (_dir, root) = tree(&["lib/a.js"]);
        let fifo = root.join("lib/pipe");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        normalise(&root).unwrap();
        // Replays: a FIFO where a file (the lockfile, a wheel) is hashed; a FIFO in the tree.
        let path = fifo.clone();
        let error = within(move || file_sha256(&path)).unwrap_err().to_string();
        assert!(
            error.contains("pipe") && error.contains("not a regular file"),
            "{error}"
        );
        let scanned = root.clone();
        let error = within(move || scan(&scanned)).unwrap_err().to_string();
        assert!(
            error.contains("pipe is neither a file, a directory nor a symlink"),
            "{error}"
        );
        // A symlink where a file is hashed is not followed.
        let link = root.join("lib/passwd");
        std::os::unix::fs::symlink("/etc/passwd", &link).unwrap();
        assert!(file_sha256(&link).is_err());
        // Control: a regular file hashes as sha256 does.
        assert_eq!(
            file_sha256(&root.join("lib/a.js")).unwrap(),
            hex(&Sha256::digest(b"x"))
        );
    }

    #[test]
    fn a_real_venv_with_its_interpreter_links_passes() {
        let dir = tempfile::tempdir().unwrap();
        let venv = dir.path().join("pkg/venv");
        let python = if Path::new("/usr/bin/python3").exists() {
            "/usr/bin/python3"
        } else {
            "python3"
        };
        let status = std::process::Command::new(python)
            .args(["-m", "venv", "--without-pip"])
            .arg(&venv)
            .status()
            .unwrap();
        assert!(status.success());
        let root = dir.path().join("pkg");
        normalise(&root).unwrap();
        let manifest = scan(&root).unwrap();
        assert!(
            matches!(
                manifest.items.get("venv/bin/python"),
                Some(Item::Link { .. })
            ),
            "{manifest:?}"
        );
    }
}
