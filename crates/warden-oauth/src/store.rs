//! What a sign-in leaves behind, and where it is kept.
//!
//! Per server (by its name in the configuration): the grants (access and refresh tokens),
//! each keyed by the issuer that issued it and the resource it is for, and the client
//! registrations, each keyed by the issuer it was made with. A grant is only ever used
//! for its own resource, and a registration only with its own issuer.
//!
//! Two stores: [`MemoryStore`] (for one process: the conformance client, tests, a machine
//! with no credential store where the user did not opt in to a file) and [`FileStore`] (a
//! JSON file of mode 0600 in a directory of mode 0700, only after an explicit opt-in).
//! Secrets are wrapped in [`Secret`], whose `Debug` never shows them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::error::OAuthError;

/// A token or client secret: shown as `Secret(..)` by `Debug`, never logged.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps `text`.
    pub fn new(text: impl Into<String>) -> Secret {
        Secret(text.into())
    }

    /// The secret itself, for the one header or form field it goes into.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// How the client authenticates at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthMethod {
    /// A public client: `client_id` in the form, no secret.
    None,
    /// HTTP Basic with the client id and secret.
    ClientSecretBasic,
    /// `client_id` and `client_secret` in the form.
    ClientSecretPost,
}

impl AuthMethod {
    /// The RFC 7591 name.
    pub fn name(self) -> &'static str {
        match self {
            AuthMethod::None => "none",
            AuthMethod::ClientSecretBasic => "client_secret_basic",
            AuthMethod::ClientSecretPost => "client_secret_post",
        }
    }

    /// The method an RFC 7591 name stands for, if Warden supports it.
    pub fn from_name(name: &str) -> Option<AuthMethod> {
        match name {
            "none" => Some(AuthMethod::None),
            "client_secret_basic" => Some(AuthMethod::ClientSecretBasic),
            "client_secret_post" => Some(AuthMethod::ClientSecretPost),
            _ => None,
        }
    }
}

/// Warden's identity at one authorization server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registration {
    /// The issuer it is valid with (and only with).
    pub issuer: String,
    /// The `client_id` (an https URL for a Client ID Metadata Document).
    pub client_id: String,
    /// The client secret, if the server issued one.
    pub client_secret: Option<Secret>,
    /// How to authenticate at the token endpoint.
    pub auth_method: AuthMethod,
    /// How it was obtained: `cimd`, `dynamic`, `configured`.
    pub source: String,
}

/// Tokens for one resource from one issuer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// The issuer that issued them.
    pub issuer: String,
    /// The resource they are for (the `resource` of the protected-resource metadata).
    pub resource: String,
    /// The access token.
    pub access_token: Secret,
    /// The refresh token, if one was issued.
    pub refresh_token: Option<Secret>,
    /// When the access token expires (seconds since the Unix epoch), if the server said.
    pub expires_at: Option<u64>,
    /// The scopes requested (or granted, when the server said).
    pub scopes: Vec<String>,
}

/// Everything kept for one server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerRecord {
    /// Grants, at most one per (issuer, resource).
    #[serde(default)]
    pub grants: Vec<Grant>,
    /// Registrations, at most one per issuer.
    #[serde(default)]
    pub registrations: Vec<Registration>,
}

impl ServerRecord {
    /// Replaces the grant for the same issuer and resource.
    pub fn put_grant(&mut self, grant: Grant) {
        self.grants
            .retain(|g| !(g.issuer == grant.issuer && g.resource == grant.resource));
        self.grants.push(grant);
    }

    /// Replaces the registration with the same issuer.
    pub fn put_registration(&mut self, registration: Registration) {
        self.registrations
            .retain(|r| r.issuer != registration.issuer);
        self.registrations.push(registration);
    }

    /// The registration made with `issuer`, if any.
    pub fn registration(&self, issuer: &str) -> Option<&Registration> {
        self.registrations.iter().find(|r| r.issuer == issuer)
    }
}

/// Where records are kept.
pub trait Store: Send + Sync {
    /// The record of `server` (empty when there is none).
    fn load(&self, server: &str) -> Result<ServerRecord, OAuthError>;
    /// Replaces the record of `server`.
    fn save(&self, server: &str, record: &ServerRecord) -> Result<(), OAuthError>;
    /// Forgets `server` (logout). True when there was something to forget.
    fn remove(&self, server: &str) -> Result<bool, OAuthError>;
    /// Where the store keeps things, for messages.
    fn describe(&self) -> String;
}

/// Records in memory, for the life of the process.
#[derive(Debug, Default)]
pub struct MemoryStore {
    records: Mutex<BTreeMap<String, ServerRecord>>,
}

impl Store for MemoryStore {
    fn load(&self, server: &str) -> Result<ServerRecord, OAuthError> {
        Ok(lock(&self.records).get(server).cloned().unwrap_or_default())
    }

    fn save(&self, server: &str, record: &ServerRecord) -> Result<(), OAuthError> {
        lock(&self.records).insert(server.to_owned(), record.clone());
        Ok(())
    }

    fn remove(&self, server: &str) -> Result<bool, OAuthError> {
        Ok(lock(&self.records).remove(server).is_some())
    }

    fn describe(&self) -> String {
        "memory (forgotten when Warden exits)".into()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(unix)]
fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Largest token file read.
const MAX_FILE: u64 = 4 * 1024 * 1024;

/// Records in one JSON file, mode 0600, in a directory of mode 0700. Used only when the
/// user opted in (`[oauth] token_store = "file"`): tokens in a file are readable by anything
/// running as the same user.
#[derive(Debug)]
pub struct FileStore {
    path: PathBuf,
    lock: Mutex<()>,
}

impl FileStore {
    /// A store at `path` (created on first save).
    pub fn new(path: impl Into<PathBuf>) -> FileStore {
        FileStore {
            path: path.into(),
            lock: Mutex::new(()),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read_all(&self) -> Result<BTreeMap<String, ServerRecord>, OAuthError> {
        let fail = |what: String| OAuthError::Store(format!("{}: {what}", self.path.display()));
        match std::fs::symlink_metadata(&self.path) {
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(BTreeMap::new());
            }
            Err(error) => return Err(fail(error.to_string())),
        }
        self.check_dir()?;
        // Opened without following a symbolic link, then judged by what was opened (no
        // window between the check and the read).
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.custom_flags(libc::O_NOFOLLOW);
        }
        let file = options
            .open(&self.path)
            .map_err(|error| fail(format!("{error} (a symbolic link is not accepted here)")))?;
        let metadata = file.metadata().map_err(|error| fail(error.to_string()))?;
        if !metadata.file_type().is_file() {
            return Err(fail("not a regular file".into()));
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt as _;
            if metadata.uid() != euid() {
                return Err(fail(format!(
                    "owned by uid {}, not by you (uid {}): another user could have written \
                     or read it (delete it and sign in again)",
                    metadata.uid(),
                    euid()
                )));
            }
            if metadata.mode() & 0o077 != 0 {
                return Err(fail(format!(
                    "mode {:o} lets other users read it; expected 0600 (chmod 600 it, or \
                     delete it and sign in again)",
                    metadata.mode() & 0o777
                )));
            }
        }
        if metadata.len() > MAX_FILE {
            return Err(fail(format!("larger than {MAX_FILE} bytes")));
        }
        // Read what was checked, never more than the cap (the file may have grown since).
        let mut text = Vec::new();
        {
            use std::io::Read as _;
            file.take(MAX_FILE + 1)
                .read_to_end(&mut text)
                .map_err(|error| fail(error.to_string()))?;
        }
        if text.len() as u64 > MAX_FILE {
            return Err(fail(format!("larger than {MAX_FILE} bytes")));
        }
        serde_json::from_slice(&text).map_err(|error| fail(format!("not valid: {error}")))
    }

    /// The file's directory, if it exists, must be a real directory of this user that
    /// nobody else can write to (someone who can would swap the file); one that others can
    /// only read is tightened to 0700.
    fn check_dir(&self) -> Result<(), OAuthError> {
        let Some(dir) = self.path.parent() else {
            return Err(OAuthError::Store(format!(
                "{}: has no parent directory",
                self.path.display()
            )));
        };
        let fail = |what: String| OAuthError::Store(format!("{}: {what}", dir.display()));
        let metadata = match std::fs::symlink_metadata(dir) {
            Ok(metadata) => metadata,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(error) => return Err(fail(error.to_string())),
        };
        if !metadata.file_type().is_dir() {
            return Err(fail(
                "not a directory (a symbolic link is not accepted for the token file's directory)"
                    .into(),
            ));
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
            if metadata.uid() != euid() {
                return Err(fail(format!(
                    "owned by uid {}, not by you (uid {}): Warden keeps no tokens in another \
                     user's directory",
                    metadata.uid(),
                    euid()
                )));
            }
            if metadata.mode() & 0o022 != 0 {
                return Err(fail(format!(
                    "mode {:o} lets other users replace files in it; expected 0700 (chmod 700 it)",
                    metadata.mode() & 0o777
                )));
            }
            if metadata.mode() & 0o077 != 0 {
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                    .map_err(|error| fail(format!("cannot make it 0700: {error}")))?;
            }
        }
        Ok(())
    }

    fn write_all(&self, records: &BTreeMap<String, ServerRecord>) -> Result<(), OAuthError> {
        let fail = |what: String| OAuthError::Store(format!("{}: {what}", self.path.display()));
        let dir = self
            .path
            .parent()
            .ok_or_else(|| fail("has no parent directory".into()))?;
        {
            let mut builder = std::fs::DirBuilder::new();
            builder.recursive(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::DirBuilderExt as _;
                builder.mode(0o700);
            }
            builder
                .create(dir)
                .map_err(|error| fail(error.to_string()))?;
        }
        self.check_dir()?;
        let text = serde_json::to_vec_pretty(records).map_err(|error| fail(error.to_string()))?;
        let temp = self.path.with_extension("tmp");
        let _ = std::fs::remove_file(&temp);
        {
            use std::io::Write as _;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt as _;
                options.mode(0o600);
            }
            let mut file = options
                .open(&temp)
                .map_err(|error| fail(error.to_string()))?;
            file.write_all(&text)
                .and_then(|()| file.sync_all())
                .map_err(|error| fail(error.to_string()))?;
        }
        std::fs::rename(&temp, &self.path).map_err(|error| fail(error.to_string()))
    }
}

impl Store for FileStore {
    fn load(&self, server: &str) -> Result<ServerRecord, OAuthError> {
        let _guard = lock(&self.lock);
        Ok(self.read_all()?.remove(server).unwrap_or_default())
    }

    fn save(&self, server: &str, record: &ServerRecord) -> Result<(), OAuthError> {
        let _guard = lock(&self.lock);
        let mut all = self.read_all()?;
        all.insert(server.to_owned(), record.clone());
        self.write_all(&all)
    }

    fn remove(&self, server: &str) -> Result<bool, OAuthError> {
        let _guard = lock(&self.lock);
        let mut all = self.read_all()?;
        let had = all.remove(server).is_some();
        if had {
            self.write_all(&all)?;
        }
        Ok(had)
    }

    fn describe(&self) -> String {
        format!("the file {} (mode 0600)", self.path.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(issuer: &str, token: &str) -> Grant {
        Grant {
            issuer: issuer.into(),
            resource: "https://mcp.example/mcp".into(),
            access_token: Secret::new(token),
            refresh_token: Some(Secret::new("refresh-secret")),
            expires_at: Some(1),
            scopes: vec!["a".into()],
        }
    }

    #[test]
    fn secrets_never_show_in_debug_output() {
        let record = ServerRecord {
            grants: vec![grant("https://as.example", "access-secret")],
            registrations: vec![Registration {
                issuer: "https://as.example".into(),
                client_id: "id".into(),
                client_secret: Some(Secret::new("client-secret")),
                auth_method: AuthMethod::ClientSecretBasic,
                source: "dynamic".into(),
            }],
        };
        let shown = format!("{record:?}");
        for secret in ["access-secret", "refresh-secret", "client-secret"] {
            assert!(!shown.contains(secret), "{shown}");
        }
    }

    #[test]
    fn a_grant_replaces_only_its_own_issuer_and_resource() {
        let mut record = ServerRecord::default();
        record.put_grant(grant("https://a.example", "one"));
        record.put_grant(grant("https://b.example", "two"));
        record.put_grant(grant("https://a.example", "three"));
        assert_eq!(record.grants.len(), 2);
        assert!(
            record
                .grants
                .iter()
                .any(|g| g.access_token.expose() == "three")
        );
        assert!(
            !record
                .grants
                .iter()
                .any(|g| g.access_token.expose() == "one")
        );
    }

    #[test]
    #[cfg(unix)]
    fn the_file_store_writes_0600_and_refuses_a_readable_file() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/oauth-tokens.json");
        let store = FileStore::new(&path);
        assert_eq!(store.load("docs").unwrap(), ServerRecord::default());
        let mut record = ServerRecord::default();
        record.put_grant(grant("https://as.example", "tok"));
        store.save("docs", &record).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dir_mode = std::fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(dir_mode, 0o700);
        assert_eq!(store.load("docs").unwrap(), record);
        assert!(store.remove("docs").unwrap());
        assert!(!store.remove("docs").unwrap());
        store.save("docs", &record).unwrap();
        // Someone loosened the mode: refused, with the fix named.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = store.load("docs").unwrap_err().to_string();
        assert!(error.contains("0600"), "{error}");
    }

    /// A store in a fresh 0700 directory, with one record saved (the honest setup).
    #[cfg(unix)]
    fn saved() -> (tempfile::TempDir, FileStore, ServerRecord) {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::new(dir.path().join("state/oauth-tokens.json"));
        let mut record = ServerRecord::default();
        record.put_grant(grant("https://as.example", "tok"));
        store.save("docs", &record).unwrap();
        assert_eq!(store.load("docs").unwrap(), record);
        (dir, store, record)
    }

    #[test]
    #[cfg(unix)]
    fn a_token_file_of_another_user_is_refused() {
        // The other-local-user adversary plants a file where Warden keeps its tokens (as
        // root can here, chown it to nobody): it is neither read nor written over.
        let (_dir, store, record) = saved();
        std::os::unix::fs::chown(store.path(), Some(65534), Some(65534)).unwrap();
        let error = store.load("docs").unwrap_err().to_string();
        assert!(error.contains("owned by uid 65534"), "{error}");
        let error = store.save("docs", &record).unwrap_err().to_string();
        assert!(error.contains("owned by uid 65534"), "{error}");
    }

    #[test]
    #[cfg(unix)]
    fn a_token_directory_of_another_user_or_writable_by_others_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let (_dir, store, record) = saved();
        let parent = store.path().parent().unwrap().to_owned();
        // Writable by others: someone could swap the file.
        std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o777)).unwrap();
        let error = store.load("docs").unwrap_err().to_string();
        assert!(error.contains("lets other users replace"), "{error}");
        let error = store.save("docs", &record).unwrap_err().to_string();
        assert!(error.contains("lets other users replace"), "{error}");
        // Owned by another user, even with a strict mode.
        std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(&parent, Some(65534), Some(65534)).unwrap();
        let error = store.load("docs").unwrap_err().to_string();
        assert!(error.contains("owned by uid 65534"), "{error}");
        let error = store.save("docs", &record).unwrap_err().to_string();
        assert!(error.contains("owned by uid 65534"), "{error}");
        // Control: given back, with only read access for others, it works again and is
        // tightened to 0700.
        std::os::unix::fs::chown(&parent, Some(euid()), None).unwrap();
        std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(store.load("docs").unwrap(), record);
        let mode = std::fs::metadata(&parent).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    #[cfg(unix)]
    fn a_token_file_that_is_a_symbolic_link_is_refused() {
        let (dir, store, record) = saved();
        // The link points at a real 0600 file with valid content: still refused, since the
        // link could be changed to point anywhere between a check and a read.
        let elsewhere = dir.path().join("elsewhere.json");
        std::fs::rename(store.path(), &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, store.path()).unwrap();
        let error = store.load("docs").unwrap_err().to_string();
        assert!(error.contains("symbolic link"), "{error}");
        let error = store.save("docs", &record).unwrap_err().to_string();
        assert!(error.contains("symbolic link"), "{error}");
    }
}
