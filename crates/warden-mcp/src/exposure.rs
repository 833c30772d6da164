//! Whether someone other than the user could change a pinned file.
//!
//! A pin compares hashes at start; the interpreter opens its script by path a few
//! milliseconds later. Whoever can write the file, or rename entries in any directory on
//! its path, can put other bytes there in between (or swap the file and swap it back, so
//! the next comparison matches again). No mount trick closes that from inside the sandbox:
//! a file bound over the path is detached the moment its directory entry is replaced from
//! another mount namespace (see `docs/decisions/0019-pins-what-runs.md`). So the control is
//! here: a pinned file is *exposed* when
//!
//! - it lies inside the write grant of a confined server (any configured server, the one
//!   being started included), where that server may replace it; or
//! - it, or a directory on its path (as named, as resolved, and through each symbolic link
//!   on the way), is owned by another user than Warden's (root aside), or is writable by
//!   every user, or by a group with members other than its owner (a directory with the
//!   sticky bit is safe: nobody else may rename what they do not own in it).
//!
//! The binary refuses to start a server with an exposed pinned file and says why;
//! `warden pin --show` and `warden probe` report the same. A relay's supervisor makes the
//! same check inside its sandbox before it reports a start to the brain (decision 0030,
//! revision 2), with the sandbox's own configuration for the write grants.

use std::collections::HashSet;
use std::ffi::CStr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use warden_config::{ServerSpec, TransportSpec};

use crate::fingerprint::Fingerprint;

/// A path some server may write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteGrant {
    /// Who may write there (a server's name, or a description).
    pub holder: String,
    /// The granted path, as configured.
    pub path: PathBuf,
}

/// Most path components examined for one file.
const MAX_DEPTH: usize = 256;

/// Why `path` (a pinned file) could be changed by someone other than the user, or `None`.
pub fn exposure(path: &Path, grants: &[WriteGrant]) -> Option<String> {
    let resolved = std::fs::canonicalize(path).ok();
    for grant in grants {
        let granted = std::fs::canonicalize(&grant.path).unwrap_or_else(|_| grant.path.clone());
        let inside = path.starts_with(&grant.path)
            || path.starts_with(&granted)
            || resolved.as_deref().is_some_and(|r| r.starts_with(&granted));
        if inside {
            return Some(format!(
                "it lies inside {}, which {} may write",
                grant.path.display(),
                grant.holder
            ));
        }
    }
    // SAFETY: geteuid cannot fail and touches no memory.
    let me = unsafe { libc::geteuid() };
    let mut seen = HashSet::new();
    let mut chains = symlink_hops(path);
    chains.extend(resolved);
    for chain in &chains {
        for component in chain.ancestors().take(MAX_DEPTH) {
            if !seen.insert(component.to_path_buf()) {
                continue;
            }
            if let Some(reason) = unsafe_component(component, me) {
                return Some(reason);
            }
        }
    }
    None
}

/// Every place a configured server may write: the write grants of each confined local
/// server in `configured`, and `scratch_base`, the base of their private scratch
/// directories. The same for the host's local servers and for the servers a relay's
/// supervisor starts inside a sandbox (from the sandbox's configuration).
pub fn write_grants(configured: &[ServerSpec], scratch_base: &Path) -> Vec<WriteGrant> {
    let mut grants = vec![WriteGrant {
        holder: "every confined server (its scratch directory)".to_owned(),
        path: scratch_base.to_path_buf(),
    }];
    for spec in configured {
        if !matches!(spec.transport, TransportSpec::Stdio { .. }) || !spec.sandbox.confine {
            continue;
        }
        for path in &spec.sandbox.write {
            grants.push(WriteGrant {
                holder: format!("server `{}`", spec.name),
                path: path.clone(),
            });
        }
    }
    grants
}

/// Each pinned file of `fingerprint` that someone other than the user could change, with
/// why (`PATH: reason`); empty when none.
pub fn exposed(fingerprint: &Fingerprint, grants: &[WriteGrant]) -> Vec<String> {
    fingerprint
        .paths()
        .filter_map(|path| exposure(path, grants).map(|why| format!("{}: {why}", path.display())))
        .collect()
}

/// The refusal for exposed pinned files (the lines of [`exposed`]).
pub fn exposed_refusal(lines: &[String]) -> String {
    format!(
        "not started: what it runs can be changed by someone other than you, so its pin \
         cannot vouch for it (the file could be swapped between the check and the start):\n{}\n  \
         keep what a server runs out of every server's write grants (grant a data directory \
         instead) and out of directories other users may write",
        lines
            .iter()
            .map(|line| format!("  - {line}"))
            .collect::<Vec<_>>()
            .join("\n")
    )
}

/// Most symbolic links followed from a pinned path (the kernel's own limit is 40).
const MAX_HOPS: usize = 40;

/// `path`, then each path a symbolic link on the way names (`/usr/bin/python3` ->
/// `/etc/alternatives/python3` -> `/usr/bin/python3.11`): whoever may write the directory
/// of any hop may point it elsewhere.
fn symlink_hops(path: &Path) -> Vec<PathBuf> {
    let mut hops = vec![path.to_path_buf()];
    let mut current = path.to_path_buf();
    for _ in 0..MAX_HOPS {
        let Ok(target) = std::fs::read_link(&current) else {
            break;
        };
        current = match current.parent() {
            Some(dir) if target.is_relative() => dir.join(target),
            _ => target,
        };
        hops.push(current.clone());
    }
    hops
}

/// Why one component of a pinned file's path is writable by others, or `None`.
fn unsafe_component(component: &Path, me: libc::uid_t) -> Option<String> {
    let meta = std::fs::symlink_metadata(component).ok()?;
    if meta.file_type().is_symlink() {
        // A link cannot be written; replacing it takes its directory, checked on its own.
        return None;
    }
    let owner = meta.uid();
    if owner != me && owner != 0 {
        return Some(format!(
            "{} belongs to {}, who can replace it",
            component.display(),
            user_name(owner)
        ));
    }
    let mode = meta.mode();
    let sticky = meta.is_dir() && mode & 0o1000 != 0;
    if sticky {
        return None;
    }
    if mode & 0o002 != 0 {
        return Some(format!(
            "{} is writable by every user (mode {:o})",
            component.display(),
            mode & 0o7777
        ));
    }
    if mode & 0o020 != 0 && !private_group(meta.gid(), owner) {
        return Some(format!(
            "{} is writable by group {} (mode {:o}), whose other members can replace it",
            component.display(),
            group_name(meta.gid()),
            mode & 0o7777
        ));
    }
    None
}

/// Scratch space for the reentrant user and group database lookups.
const LOOKUP_BUFFER: usize = 16 * 1024;

/// A user's name and primary group, from the user database.
fn passwd(uid: libc::uid_t) -> Option<(String, libc::gid_t)> {
    let mut buffer = vec![0 as libc::c_char; LOOKUP_BUFFER];
    // SAFETY: a zeroed `passwd` is a valid out-parameter.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer refers to live memory of the size given.
    let ret = unsafe {
        libc::getpwuid_r(
            uid,
            &mut entry,
            buffer.as_mut_ptr(),
            buffer.len(),
            &mut found,
        )
    };
    if ret != 0 || found.is_null() || entry.pw_name.is_null() {
        return None;
    }
    // SAFETY: on success `pw_name` points to a NUL-terminated string inside `buffer`.
    let name = unsafe { CStr::from_ptr(entry.pw_name) }
        .to_string_lossy()
        .into_owned();
    Some((name, entry.pw_gid))
}

/// A group's name and whether it lists members explicitly.
fn group(gid: libc::gid_t) -> Option<(String, bool)> {
    let mut buffer = vec![0 as libc::c_char; LOOKUP_BUFFER];
    // SAFETY: a zeroed `group` is a valid out-parameter.
    let mut entry: libc::group = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::group = std::ptr::null_mut();
    // SAFETY: every pointer refers to live memory of the size given.
    let ret = unsafe {
        libc::getgrgid_r(
            gid,
            &mut entry,
            buffer.as_mut_ptr(),
            buffer.len(),
            &mut found,
        )
    };
    if ret != 0 || found.is_null() || entry.gr_name.is_null() {
        return None;
    }
    // SAFETY: on success the strings and the member array live inside `buffer`.
    let name = unsafe { CStr::from_ptr(entry.gr_name) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: `gr_mem` is a NULL-terminated array (or NULL) inside `buffer`.
    let has_members = !entry.gr_mem.is_null() && unsafe { !(*entry.gr_mem).is_null() };
    Some((name, has_members))
}

/// A user-private group: the owner's primary group, with no members listed besides.
fn private_group(gid: libc::gid_t, owner: libc::uid_t) -> bool {
    let primary = passwd(owner).is_some_and(|(_, primary)| primary == gid);
    primary && group(gid).is_some_and(|(_, has_members)| !has_members)
}

fn user_name(uid: libc::uid_t) -> String {
    passwd(uid).map_or_else(
        || format!("uid {uid}"),
        |(name, _)| format!("{name} (uid {uid})"),
    )
}

fn group_name(gid: libc::gid_t) -> String {
    group(gid).map_or_else(
        || format!("gid {gid}"),
        |(name, _)| format!("{name} (gid {gid})"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A private folder under the system temporary directory (`/tmp` is sticky).
    fn private_dir() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        chmod(dir.path(), 0o755);
        let root = std::fs::canonicalize(dir.path()).unwrap();
        (dir, root)
    }

    #[test]
    fn a_file_in_a_write_grant_is_exposed_one_beside_it_is_not() {
        let (_dir, root) = private_dir();
        std::fs::create_dir_all(root.join("app/data")).unwrap();
        let script = root.join("app/server.py");
        std::fs::write(&script, "").unwrap();
        assert_eq!(exposure(&script, &[]), None);
        let data = WriteGrant {
            holder: "server `s`".into(),
            path: root.join("app/data"),
        };
        assert_eq!(exposure(&script, std::slice::from_ref(&data)), None);
        let app = WriteGrant {
            holder: "server `other`".into(),
            path: root.join("app"),
        };
        let reason = exposure(&script, &[data, app]).unwrap();
        assert!(
            reason.contains("which server `other` may write"),
            "{reason}"
        );
        // Through a symlink: the resolved location counts.
        std::os::unix::fs::symlink(root.join("app"), root.join("link")).unwrap();
        let reason = exposure(
            &root.join("link/server.py"),
            &[WriteGrant {
                holder: "x".into(),
                path: root.join("app"),
            }],
        );
        assert!(reason.is_some());
    }

    #[test]
    fn world_or_group_writable_directories_expose_sticky_ones_do_not() {
        let (_dir, root) = private_dir();
        let dir = root.join("srv");
        std::fs::create_dir(&dir).unwrap();
        let script = dir.join("server.py");
        std::fs::write(&script, "").unwrap();
        chmod(&script, 0o644);
        assert_eq!(exposure(&script, &[]), None);
        chmod(&dir, 0o777);
        let reason = exposure(&script, &[]).unwrap();
        assert!(reason.contains("writable by every user"), "{reason}");
        chmod(&dir, 0o1777);
        assert_eq!(exposure(&script, &[]), None, "sticky");
        chmod(&dir, 0o755);
        chmod(&script, 0o646);
        assert!(exposure(&script, &[]).unwrap().contains("every user"));
        chmod(&script, 0o644);
        // Reached through a link kept in a directory others may write.
        let links = root.join("links");
        std::fs::create_dir(&links).unwrap();
        std::os::unix::fs::symlink(&script, links.join("server.py")).unwrap();
        let via = root.join("via.py");
        std::os::unix::fs::symlink(links.join("server.py"), &via).unwrap();
        assert_eq!(exposure(&via, &[]), None);
        chmod(&links, 0o777);
        let reason = exposure(&via, &[]).unwrap();
        assert!(reason.contains("links"), "{reason}");
        chmod(&links, 0o755);
        // Owned by someone else.
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&dir, Some(65534), None).unwrap();
            let reason = exposure(&script, &[]).unwrap();
            assert!(reason.contains("65534"), "{reason}");
        }
    }
}
