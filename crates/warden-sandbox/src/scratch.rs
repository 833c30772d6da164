//! The private scratch directory each confined server gets as `HOME` and `TMPDIR`.

use std::path::{Path, PathBuf};

use crate::SandboxError;
use crate::profile::safe_component;

/// A private directory for one server run, removed (with everything in it) on drop.
///
/// When Warden runs as root the directory belongs to [`crate::SANDBOX_UID`], the uid the
/// server runs as; otherwise to Warden's user. Its mode is 0700.
#[derive(Debug)]
pub struct Scratch {
    dir: tempfile::TempDir,
    path: PathBuf,
}

impl Scratch {
    /// Creates `BASE/warden-SERVER-RANDOM`, creating `base` first if needed.
    ///
    /// When Warden runs as root, every directory above the scratch directory must be
    /// searchable by others (mode `o+x`), or the unprivileged server could not reach its own
    /// home; that is checked here rather than discovered by the server.
    pub fn create(base: &Path, server: &str) -> Result<Self, SandboxError> {
        let fail = |path: &Path, reason: String| SandboxError::Scratch {
            path: path.to_path_buf(),
            reason,
        };
        if !base.is_absolute() {
            return Err(fail(base, "the base directory must be absolute".to_owned()));
        }
        let Some(name) = safe_component(server) else {
            return Err(fail(base, format!("unusable server name {server:?}")));
        };
        std::fs::create_dir_all(base).map_err(|e| fail(base, e.to_string()))?;
        let base = std::fs::canonicalize(base).map_err(|e| fail(base, e.to_string()))?;
        #[cfg(target_os = "linux")]
        if crate::running_as_root() {
            reachable_by_others(&base)?;
        }
        let mut prefix = std::ffi::OsString::from("warden-");
        prefix.push(&name);
        prefix.push("-");
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(std::fs::Permissions::from_mode(0o700));
        }
        let dir = builder
            .tempdir_in(&base)
            .map_err(|e| fail(&base, e.to_string()))?;
        let path = dir.path().to_path_buf();
        #[cfg(target_os = "linux")]
        if crate::running_as_root() {
            std::os::unix::fs::chown(&path, Some(crate::SANDBOX_UID), Some(crate::SANDBOX_GID))
                .map_err(|e| {
                    fail(
                        &path,
                        format!("handing it to uid {}: {e}", crate::SANDBOX_UID),
                    )
                })?;
        }
        Ok(Self { dir, path })
    }

    /// The directory (resolved).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the directory now, reporting failure (dropping removes it too, silently).
    pub fn remove(self) -> Result<(), SandboxError> {
        let path = self.path.clone();
        self.dir.close().map_err(|e| SandboxError::Scratch {
            path,
            reason: format!("removing it: {e}"),
        })
    }
}

/// Checks that every directory from `/` down to `dir` can be searched by others.
#[cfg(target_os = "linux")]
fn reachable_by_others(dir: &Path) -> Result<(), SandboxError> {
    use std::os::unix::fs::PermissionsExt;
    for ancestor in dir.ancestors() {
        let mode = std::fs::metadata(ancestor)
            .map_err(|e| SandboxError::Scratch {
                path: ancestor.to_path_buf(),
                reason: e.to_string(),
            })?
            .permissions()
            .mode();
        if mode & 0o001 == 0 {
            return Err(SandboxError::Scratch {
                path: dir.to_path_buf(),
                reason: format!(
                    "{} (mode {:o}) is not searchable by uid {}, so the server could not \
                     reach its scratch directory; choose a base such as /tmp or /var/lib/warden",
                    ancestor.display(),
                    mode & 0o7777,
                    crate::SANDBOX_UID
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_is_private_and_removed_on_drop() {
        let base = tempfile::tempdir().unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let open = std::fs::Permissions::from_mode(0o755);
            std::fs::set_permissions(base.path(), open).unwrap();
        }
        let scratch = Scratch::create(base.path(), "my/server").unwrap();
        let path = scratch.path().to_path_buf();
        assert!(path.is_dir());
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("warden-my_server-"), "{name}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::{MetadataExt, PermissionsExt};
            let meta = std::fs::metadata(&path).unwrap();
            assert_eq!(meta.permissions().mode() & 0o777, 0o700);
            #[cfg(target_os = "linux")]
            if crate::running_as_root() {
                assert_eq!(meta.uid(), crate::SANDBOX_UID);
            }
        }
        std::fs::write(path.join("file"), "x").unwrap();
        drop(scratch);
        assert!(!path.exists());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_base_the_sandbox_uid_cannot_reach_is_refused_when_root() {
        if !crate::running_as_root() {
            return;
        }
        use std::os::unix::fs::PermissionsExt;
        let base = tempfile::tempdir().unwrap();
        let closed = std::fs::Permissions::from_mode(0o700);
        std::fs::set_permissions(base.path(), closed).unwrap();
        let err = Scratch::create(&base.path().join("inner"), "srv").unwrap_err();
        assert!(err.to_string().contains("not searchable"), "{err}");
    }
}
