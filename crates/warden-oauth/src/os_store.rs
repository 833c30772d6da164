//! The operating system's credential store, through the `keyring` crate: the Secret Service
//! (D-Bus) on Linux and the other Unix desktops, the Keychain on macOS, the Credential
//! Manager on Windows.
//!
//! One entry per configured server (service [`SERVICE`], account the server's name). It holds
//! that server's [`ServerRecord`] as JSON: the grants keyed by issuer and resource, the
//! registrations keyed by issuer, exactly as [`FileStore`] keeps them, so a grant is still
//! only ever used for its own resource and a registration only with its own issuer.
//!
//! Every call to the credential store runs on its own thread under a time limit
//! ([`DEFAULT_LIMIT`], or longer where a person may be answering an unlock prompt; the
//! probe always [`DEFAULT_LIMIT`]): a session bus that accepts the connection but never answers, or a
//! collection that waits for a password prompt nobody will see, makes that call fail with
//! the limit named instead of hanging Warden. After one such timeout the store counts as
//! unreachable for the rest of the process, so later calls fail at once.
//!
//! Migration: a store built [`OsStore::with_file`] moves a server's record found in the old
//! 0600 token file (and not yet in the credential store) into the credential store on first
//! load, then removes it from the file. A file that fails [`FileStore`]'s checks is not read
//! (said in a warning); the credential store is used regardless.

use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use crate::error::OAuthError;
use crate::store::{FileStore, ServerRecord, Store};

/// The service name of every entry Warden keeps.
pub const SERVICE: &str = "warden-oauth";

/// The longest one call to the credential store may take.
pub const DEFAULT_LIMIT: Duration = Duration::from_secs(5);

/// Largest record accepted from the credential store.
const MAX_RECORD: usize = 4 * 1024 * 1024;

/// Records in the operating system's credential store.
#[derive(Debug)]
pub struct OsStore {
    service: String,
    limit: Duration,
    /// Why the store is unusable, once a call timed out.
    broken: Arc<Mutex<Option<String>>>,
    /// The old token file, read once per server to move its record over.
    file: Option<Arc<FileStore>>,
}

/// What one call to the credential store returned.
enum Answer {
    Found(String),
    Missing,
    Done,
}

impl OsStore {
    /// The credential store, entries under [`SERVICE`], each call limited to
    /// [`DEFAULT_LIMIT`].
    pub fn new() -> OsStore {
        OsStore::with_service(SERVICE, DEFAULT_LIMIT)
    }

    /// Entries under `service`, each call limited to `limit`.
    pub fn with_service(service: impl Into<String>, limit: Duration) -> OsStore {
        OsStore {
            service: service.into(),
            limit,
            broken: Arc::new(Mutex::new(None)),
            file: None,
        }
    }

    /// Also moves records found in `file` (the 0600 token file of earlier versions) into the
    /// credential store when they are first loaded.
    pub fn with_file(mut self, file: Arc<FileStore>) -> OsStore {
        self.file = Some(file);
        self
    }

    /// Whether a credential store answers: reads an entry that need not exist. `Err` says
    /// why not (no session bus, no Secret Service on it, a timeout, no store on this
    /// platform).
    /// It waits at most [`DEFAULT_LIMIT`] whatever the store's limit: looking for an entry
    /// that is not there needs no unlock prompt.
    pub fn probe(&self) -> Result<(), OAuthError> {
        self.call_within("probe", Op::Get, self.limit.min(DEFAULT_LIMIT))
            .map(|_| ())
    }

    fn call(&self, account: &str, op: Op) -> Result<Answer, OAuthError> {
        self.call_within(account, op, self.limit)
    }

    fn call_within(&self, account: &str, op: Op, limit: Duration) -> Result<Answer, OAuthError> {
        if let Some(reason) = lock(&self.broken).clone() {
            return Err(OAuthError::Store(reason));
        }
        let (send, receive) = mpsc::channel();
        let service = self.service.clone();
        let account_owned = account.to_owned();
        let spawned = std::thread::Builder::new()
            .name("warden-keyring".into())
            .spawn(move || {
                let _ = send.send(platform::run(&service, &account_owned, op));
            });
        if let Err(error) = spawned {
            return Err(OAuthError::Store(format!(
                "the operating system's credential store: cannot start a thread: {error}"
            )));
        }
        match receive.recv_timeout(limit) {
            Ok(answer) => answer.map_err(|reason| {
                OAuthError::Store(format!(
                    "the operating system's credential store ({}): {reason}",
                    platform::NAME
                ))
            }),
            Err(_) => {
                // The thread is left to finish or hang on its own; nothing waits for it.
                let reason = format!(
                    "the operating system's credential store ({}) did not answer within {} s",
                    platform::NAME,
                    limit.as_secs_f32()
                );
                *lock(&self.broken) = Some(reason.clone());
                Err(OAuthError::Store(reason))
            }
        }
    }

    fn load_here(&self, server: &str) -> Result<Option<ServerRecord>, OAuthError> {
        match self.call(server, Op::Get)? {
            Answer::Found(text) => {
                if text.len() > MAX_RECORD {
                    return Err(OAuthError::Store(format!(
                        "the credential store's entry for {server} is larger than {MAX_RECORD} bytes"
                    )));
                }
                serde_json::from_str(&text).map(Some).map_err(|error| {
                    OAuthError::Store(format!(
                        "the credential store's entry for {server} is not valid: {error}"
                    ))
                })
            }
            Answer::Missing | Answer::Done => Ok(None),
        }
    }

    /// Moves `server`'s record from the old token file, if it has one.
    fn migrate(&self, server: &str) -> Result<ServerRecord, OAuthError> {
        let Some(file) = &self.file else {
            return Ok(ServerRecord::default());
        };
        if !file.path().exists() {
            return Ok(ServerRecord::default());
        }
        let record = match file.load(server) {
            Ok(record) => record,
            Err(error) => {
                tracing::warn!(server = %server, "the old token file is not used: {error}");
                return Ok(ServerRecord::default());
            }
        };
        if record == ServerRecord::default() {
            return Ok(record);
        }
        self.save(server, &record)?;
        match file.remove(server) {
            Ok(_) => tracing::warn!(
                server = %server,
                "OAuth tokens moved from {} to the operating system's credential store",
                file.path().display()
            ),
            Err(error) => tracing::warn!(
                server = %server,
                "OAuth tokens copied to the operating system's credential store, but not removed from {}: {error}",
                file.path().display()
            ),
        }
        Ok(record)
    }
}

impl Default for OsStore {
    fn default() -> OsStore {
        OsStore::new()
    }
}

impl Store for OsStore {
    fn load(&self, server: &str) -> Result<ServerRecord, OAuthError> {
        match self.load_here(server)? {
            Some(record) => Ok(record),
            None => self.migrate(server),
        }
    }

    fn save(&self, server: &str, record: &ServerRecord) -> Result<(), OAuthError> {
        let text = serde_json::to_string(record)
            .map_err(|error| OAuthError::Store(format!("{server}: {error}")))?;
        self.call(server, Op::Set(text)).map(|_| ())
    }

    fn remove(&self, server: &str) -> Result<bool, OAuthError> {
        Ok(matches!(self.call(server, Op::Delete)?, Answer::Done))
    }

    fn describe(&self) -> String {
        format!(
            "the operating system's credential store ({}, service {:?})",
            platform::NAME,
            self.service
        )
    }
}

/// One operation on one entry.
enum Op {
    Get,
    Set(String),
    Delete,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(any(
    target_os = "linux",
    target_os = "freebsd",
    target_os = "openbsd",
    target_os = "macos",
    target_os = "ios",
    windows
))]
mod platform {
    //! The `keyring` crate, with the backend the build enabled for this target.

    use super::{Answer, Op};

    #[cfg(any(target_os = "macos", target_os = "ios"))]
    pub const NAME: &str = "Keychain";
    #[cfg(windows)]
    pub const NAME: &str = "Credential Manager";
    #[cfg(any(target_os = "linux", target_os = "freebsd", target_os = "openbsd"))]
    pub const NAME: &str = "Secret Service on the D-Bus session bus";

    pub fn run(service: &str, account: &str, op: Op) -> Result<Answer, String> {
        let entry = keyring::Entry::new(service, account).map_err(|error| error.to_string())?;
        let result = match op {
            Op::Get => entry.get_password().map(Answer::Found),
            Op::Set(text) => entry.set_password(&text).map(|()| Answer::Done),
            Op::Delete => entry.delete_credential().map(|()| Answer::Done),
        };
        match result {
            Ok(answer) => Ok(answer),
            Err(keyring::Error::NoEntry) => Ok(Answer::Missing),
            // The crate's errors name their cause (a D-Bus error says what was missing) and
            // hold no secret.
            Err(error) => Err(error.to_string()),
        }
    }
}

#[cfg(not(any(
    target_os = "linux",
    target_os = "freebsd",
    target_os = "openbsd",
    target_os = "macos",
    target_os = "ios",
    windows
)))]
mod platform {
    //! No credential store on this platform.

    use super::{Answer, Op};

    pub const NAME: &str = "none on this platform";

    pub fn run(_service: &str, _account: &str, _op: Op) -> Result<Answer, String> {
        Err("Warden has no credential store for this platform".into())
    }
}
