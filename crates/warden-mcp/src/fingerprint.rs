//! What a server start executes, hashed: the resolved program, the interpreter of its `#!`
//! line, the script or module an interpreter runs, and the package a package launcher
//! fetches ([`crate::executed`] decides which files those are; data files named in the
//! arguments are not among them). The binary compares a [`Fingerprint`] with the pin it
//! stored on the first start and refuses a server whose bytes changed (see
//! `docs/security.md`, "Pinned executables").
//!
//! Each file is opened once (`O_NOFOLLOW` on its resolved path) and hashed from that
//! descriptor; the descriptor's identity (device, inode, size, change time) is kept in the
//! fingerprint, so the launcher can check, right before the server is executed, that the
//! file the server will run is still the one that was hashed
//! ([`Fingerprint::pinned_files`]).
//!
//! Pure apart from reading the files: no state, no decisions.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::LaunchError;
use crate::executed::{self, Role};
use crate::launcher::LaunchRequest;

/// Largest file hashed; a bigger program or script is refused rather than read.
pub const MAX_HASHED_BYTES: u64 = 256 * 1024 * 1024;

/// The hashes of one server start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    /// The program, resolved exactly as the launcher resolves it.
    pub program: PathBuf,
    /// sha256 of the program, lowercase hex.
    pub program_sha256: String,
    /// The other files the start executes (interpreter, script, module, preloads,
    /// lockfile), with their sha256, in the order they were found.
    pub files: Vec<HashedFile>,
    /// For a package launcher (`npx`, `uvx`, ...): the package spec as written.
    pub package: Option<String>,
    /// What could not be pinned and why, for display.
    pub notes: Vec<String>,
    /// What the rule before this one pinned, to compare pins it recorded: every argument
    /// naming an existing file ...
    pub legacy_files: Vec<PathBuf>,
    /// ... and for `npx`/`uvx` the first argument not starting with `-`.
    pub legacy_package: Option<String>,
    program_identity: FileIdentity,
}

/// One hashed file of a [`Fingerprint`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashedFile {
    /// The file as the server names it (absolute).
    pub path: PathBuf,
    /// What it is to the start.
    pub role: Role,
    /// How it was found (`#! of /usr/bin/npx`, `module mcp_server_time`).
    pub origin: String,
    /// sha256 of its bytes, lowercase hex.
    pub sha256: String,
    search: Vec<PathBuf>,
    identity: FileIdentity,
}

impl Fingerprint {
    /// Every hashed file with the identity it had when hashed, for the launcher to check
    /// right before the server is executed ([`warden_sandbox::Profile::pinned`]).
    pub fn pinned_files(&self) -> Vec<warden_sandbox::PinnedFile> {
        let mut out = vec![
            self.program_identity
                .pinned(vec![self.program.clone()], false),
        ];
        for file in &self.files {
            out.push(if file.search.is_empty() {
                file.identity.pinned(vec![file.path.clone()], false)
            } else {
                file.identity.pinned(file.search.clone(), true)
            });
        }
        out
    }

    /// The program and every hashed file, by the path the server uses.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        std::iter::once(self.program.as_path()).chain(self.files.iter().map(|f| f.path.as_path()))
    }
}

/// Checks, in this process, that each pinned file is still the one that was hashed (the
/// same check the sandbox makes inside a confined server's root; this one is for servers
/// started unconfined). Returns the first path that differs.
pub fn check_unchanged(pinned: &[warden_sandbox::PinnedFile]) -> Result<(), PathBuf> {
    use std::os::unix::fs::MetadataExt;
    for pin in pinned {
        for path in &pin.paths {
            let Ok(meta) = std::fs::metadata(path) else {
                continue;
            };
            if !meta.is_file() || (pin.search && meta.mode() & 0o111 == 0) {
                continue;
            }
            let same = meta.dev() == pin.dev
                && meta.ino() == pin.ino
                && meta.size() == pin.size
                && meta.ctime() == pin.ctime
                && meta.ctime_nsec() == pin.ctime_nsec;
            if !same {
                return Err(path.clone());
            }
            break;
        }
    }
    Ok(())
}

/// Hashing a server's files failed.
#[derive(Debug, thiserror::Error)]
pub enum FingerprintError {
    /// The program could not be resolved.
    #[error(transparent)]
    Resolve(#[from] LaunchError),
    /// A file could not be read.
    #[error("cannot hash `{}`: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A file is larger than [`MAX_HASHED_BYTES`].
    #[error("cannot hash `{}`: larger than {} MiB", path.display(), MAX_HASHED_BYTES >> 20)]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
}

/// Resolves `request`'s program through `search_path` (as the launchers do), finds what the
/// command line executes ([`executed::plan`]) and hashes each file.
pub fn fingerprint(
    request: &LaunchRequest,
    search_path: &OsStr,
) -> Result<Fingerprint, FingerprintError> {
    let plan = executed::plan(request, search_path)?;
    let (program_sha256, program_identity) = hash_file(&plan.program)?;
    let mut files = Vec::with_capacity(plan.files.len());
    for planned in plan.files {
        let (sha256, identity) = hash_file(&planned.path)?;
        files.push(HashedFile {
            path: planned.path,
            role: planned.role,
            origin: planned.origin,
            sha256,
            search: planned.search,
            identity,
        });
    }
    Ok(Fingerprint {
        legacy_files: executed::legacy_argument_files(request),
        legacy_package: executed::legacy_package(request, &plan.program),
        program: plan.program,
        program_sha256,
        files,
        package: plan.package,
        notes: plan.notes,
        program_identity,
    })
}

/// The sha256 of a file's bytes, lowercase hex, streamed (at most [`MAX_HASHED_BYTES`]).
pub fn sha256_file(path: &Path) -> Result<String, FingerprintError> {
    hash_file(path).map(|(hash, _)| hash)
}

/// The sha256 of the regular file at `path` itself, lowercase hex, streamed (at most
/// [`MAX_HASHED_BYTES`]): unlike [`sha256_file`] a symlink as its last component is refused
/// rather than followed, a FIFO or device is refused without waiting for a writer, and
/// nothing is memoised (for trees of thousands of files, such as installed packages).
pub fn sha256_regular_file(path: &Path) -> Result<String, FingerprintError> {
    let (file, _) = open_regular(path, false).map_err(|source| FingerprintError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    sha256_reader(file, path)
}

/// Opens `path` for reading if it is a regular file, and never waits doing so: a FIFO or a
/// device that a repository or a server placed where a script is expected would otherwise
/// block the open (and Warden's start) forever. `follow = false` refuses a symlink as the
/// last component (`O_NOFOLLOW`). Returns the file and its metadata, taken from the opened
/// descriptor.
pub fn open_regular(
    path: &Path,
    follow: bool,
) -> std::io::Result<(std::fs::File, std::fs::Metadata)> {
    let mut flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
    if !follow {
        flags |= libc::O_NOFOLLOW;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    // O_NONBLOCK has no effect on reads of a regular file.
    Ok((file, meta))
}

/// Opens `path` once (its resolved location, `O_NOFOLLOW`, close-on-exec), and hashes the
/// bytes read from that descriptor; returns the hash and the descriptor's identity.
fn hash_file(path: &Path) -> Result<(String, FileIdentity), FingerprintError> {
    let failed = |source| FingerprintError::Read {
        path: path.to_path_buf(),
        source,
    };
    let resolved = std::fs::canonicalize(path).map_err(failed)?;
    let (file, meta) = open_regular(&resolved, false).map_err(failed)?;
    // Several servers usually share one interpreter (`node` is ~100 MB): within one Warden
    // process a file whose identity and change time are unchanged is hashed once. The
    // change time (ctime) moves on every write and cannot be set back by a user.
    let identity = FileIdentity::of(&meta);
    if let Some(known) = recall(&identity) {
        return Ok((known, identity));
    }
    let digest = sha256_reader(file, path)?;
    remember(identity.clone(), digest.clone());
    Ok((digest, identity))
}

/// What makes a file the same file, unchanged, for the in-process hash memo.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct FileIdentity {
    dev: u64,
    ino: u64,
    size: u64,
    ctime: i64,
    ctime_nsec: i64,
}

impl FileIdentity {
    fn pinned(&self, paths: Vec<PathBuf>, search: bool) -> warden_sandbox::PinnedFile {
        warden_sandbox::PinnedFile {
            paths,
            search,
            dev: self.dev,
            ino: self.ino,
            size: self.size,
            ctime: self.ctime,
            ctime_nsec: self.ctime_nsec,
        }
    }

    fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            ctime: meta.ctime(),
            ctime_nsec: meta.ctime_nsec(),
        }
    }
}

/// Files remembered at most; the memo is cleared when full.
const MEMO_LIMIT: usize = 256;

static MEMO: std::sync::Mutex<Option<std::collections::HashMap<FileIdentity, String>>> =
    std::sync::Mutex::new(None);

fn recall(identity: &FileIdentity) -> Option<String> {
    let memo = MEMO
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    memo.as_ref().and_then(|map| map.get(identity).cloned())
}

fn remember(identity: FileIdentity, digest: String) {
    let mut memo = MEMO
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let map = memo.get_or_insert_with(std::collections::HashMap::new);
    if map.len() >= MEMO_LIMIT {
        map.clear();
    }
    map.insert(identity, digest);
}

fn sha256_reader(file: std::fs::File, path: &Path) -> Result<String, FingerprintError> {
    let failed = |source| FingerprintError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut reader = file.take(MAX_HASHED_BYTES + 1);
    let mut hasher = Sha256::new();
    let mut buffer = vec![0_u8; 256 * 1024];
    let mut total: u64 = 0;
    loop {
        let read = reader.read(&mut buffer).map_err(failed)?;
        if read == 0 {
            break;
        }
        total += read as u64;
        if total > MAX_HASHED_BYTES {
            return Err(FingerprintError::TooLarge {
                path: path.to_path_buf(),
            });
        }
        hasher.update(&buffer[..read]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_memo_never_hides_a_change_to_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.js");
        std::fs::write(&path, "console.log(1)").unwrap();
        let first = sha256_file(&path).unwrap();
        assert_eq!(sha256_file(&path).unwrap(), first, "remembered");
        // Same size, same inode, written in place: the change time moves.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&path, "console.log(2)").unwrap();
        assert_ne!(sha256_file(&path).unwrap(), first);
    }

    fn request(command: &Path, args: &[&str], cwd: Option<&Path>) -> LaunchRequest {
        LaunchRequest {
            server: "s".into(),
            command: command.display().to_string(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: BTreeMap::new(),
            cwd: cwd.map(Path::to_path_buf),
            sandbox: warden_config::SandboxSpec::default(),
        }
    }

    #[test]
    fn program_interpreter_and_package_are_fingerprinted_data_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let npx = dir.path().join("npx");
        std::fs::write(&npx, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&npx, std::fs::Permissions::from_mode(0o755)).unwrap();
        let data = dir.path().join("server.js");
        std::fs::write(&data, "").unwrap();
        let got = fingerprint(
            &request(
                &npx,
                &["-y", "pkg@1.2.3", "server.js", "--flag"],
                Some(dir.path()),
            ),
            OsStr::new(""),
        )
        .unwrap();
        assert_eq!(got.program, npx);
        assert_eq!(got.package.as_deref(), Some("pkg@1.2.3"));
        assert_eq!(got.legacy_package.as_deref(), Some("pkg@1.2.3"));
        // The `#!` interpreter is pinned; `server.js` is npx's argument, not a script.
        let files: Vec<(&Path, Role)> = got
            .files
            .iter()
            .map(|f| (f.path.as_path(), f.role))
            .collect();
        assert_eq!(files, [(Path::new("/bin/sh"), Role::Interpreter)]);
        assert_eq!(
            got.files[0].sha256,
            sha256_file(Path::new("/bin/sh")).unwrap()
        );
        assert_eq!(got.legacy_files, [data]);
        let pinned = got.pinned_files();
        assert_eq!(pinned.len(), 2);
        assert_eq!(pinned[0].paths, std::slice::from_ref(&npx));
        let other = fingerprint(&request(&npx, &[], None), OsStr::new("")).unwrap();
        assert_eq!(other.program_sha256, got.program_sha256);
        assert!(other.legacy_files.is_empty());
    }

    #[test]
    fn a_symlink_is_hashed_as_the_file_it_names() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("python3.11");
        std::fs::write(&real, "interpreter").unwrap();
        let link = dir.path().join("python");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert_eq!(sha256_file(&link).unwrap(), sha256_file(&real).unwrap());
        assert!(
            sha256_file(dir.path()).is_err(),
            "a directory is not hashed"
        );
    }

    #[test]
    fn a_bare_name_resolves_like_the_launcher() {
        let got = fingerprint(&request(Path::new("sh"), &[], None), OsStr::new("/bin"));
        assert_eq!(got.unwrap().program, PathBuf::from("/bin/sh"));
        let missing = fingerprint(&request(Path::new("./x"), &[], None), OsStr::new("/bin"));
        assert!(matches!(missing, Err(FingerprintError::Resolve(_))));
    }
}
