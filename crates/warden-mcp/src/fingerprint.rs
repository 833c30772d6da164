//! What a server start is made of, hashed: the resolved executable, the files its
//! arguments name, and the package an `npx`/`uvx` launch fetches. The binary compares a
//! [`Fingerprint`] with the pin it stored on the first start and refuses a server whose
//! bytes changed (see `docs/security.md`, "Pinned executables").
//!
//! Pure apart from reading the files: no state, no decisions.

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::LaunchError;
use crate::launcher::{LaunchRequest, resolve_program};

/// Largest file hashed; a bigger program or script argument is refused rather than read.
pub const MAX_HASHED_BYTES: u64 = 256 * 1024 * 1024;

/// The hashes of one server start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    /// The program, resolved exactly as the launcher resolves it.
    pub program: PathBuf,
    /// sha256 of the program, lowercase hex.
    pub program_sha256: String,
    /// Every argument that names an existing regular file (absolute, or relative to the
    /// configured `cwd`), with its sha256, in argument order.
    pub files: Vec<(PathBuf, String)>,
    /// For a program named `npx` or `uvx`: the package spec, the first argument that is not
    /// a flag (`pkg@1.2.3`).
    pub package: Option<String>,
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

/// Resolves `request`'s program through `search_path` (as the launchers do) and hashes it,
/// every file argument, and notes an `npx`/`uvx` package spec.
pub fn fingerprint(
    request: &LaunchRequest,
    search_path: &OsStr,
) -> Result<Fingerprint, FingerprintError> {
    let program = resolve_program(&request.command, search_path)?;
    let program_sha256 = sha256_file(&program)?;
    let mut files = Vec::new();
    for arg in &request.args {
        let path = Path::new(arg);
        let path = if path.is_absolute() {
            path.to_path_buf()
        } else if let Some(cwd) = &request.cwd
            && !arg.starts_with('-')
        {
            cwd.join(path)
        } else {
            continue;
        };
        if path.is_file() && !files.iter().any(|(seen, _)| seen == &path) {
            let hash = sha256_file(&path)?;
            files.push((path, hash));
        }
    }
    let launcher_name = program.file_name().and_then(OsStr::to_str);
    let package = match launcher_name {
        Some("npx" | "uvx") => request.args.iter().find(|a| !a.starts_with('-')).cloned(),
        _ => None,
    };
    Ok(Fingerprint {
        program,
        program_sha256,
        files,
        package,
    })
}

/// The sha256 of a file's bytes, lowercase hex, streamed (at most [`MAX_HASHED_BYTES`]).
pub fn sha256_file(path: &Path) -> Result<String, FingerprintError> {
    let failed = |source| FingerprintError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(failed)?;
    // Several servers usually share one interpreter (`node` is ~100 MB): within one Warden
    // process a file whose identity and change time are unchanged is hashed once. The
    // change time (ctime) moves on every write and cannot be set back by a user.
    let identity = file.metadata().ok().map(|meta| FileIdentity::of(&meta));
    if let Some(known) = identity.as_ref().and_then(recall) {
        return Ok(known);
    }
    let digest = sha256_reader(file, path)?;
    if let Some(identity) = identity {
        remember(identity, digest.clone());
    }
    Ok(digest)
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
    fn program_files_and_package_are_fingerprinted() {
        let dir = tempfile::tempdir().unwrap();
        let npx = dir.path().join("npx");
        std::fs::write(&npx, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&npx, std::fs::Permissions::from_mode(0o755)).unwrap();
        let script = dir.path().join("server.js");
        std::fs::write(&script, "").unwrap();
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
        // sha256 of the empty string.
        let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(got.files, vec![(script, empty.to_owned())]);
        let other = fingerprint(&request(&npx, &[], None), OsStr::new("")).unwrap();
        assert_eq!(other.program_sha256, got.program_sha256);
        assert!(other.files.is_empty());
    }

    #[test]
    fn a_bare_name_resolves_like_the_launcher() {
        let got = fingerprint(&request(Path::new("sh"), &[], None), OsStr::new("/bin"));
        assert_eq!(got.unwrap().program, PathBuf::from("/bin/sh"));
        let missing = fingerprint(&request(Path::new("./x"), &[], None), OsStr::new("/bin"));
        assert!(matches!(missing, Err(FingerprintError::Resolve(_))));
    }
}
