//! Warden's state store: one SQLite file (`$XDG_STATE_HOME/warden/state.db`, the path is
//! the caller's choice) holding what Warden must remember between runs. Today: the pins of
//! server executables ([`Pin`]), approvals of project servers' definitions, the pinned
//! definitions of each server's tools ([`ToolPin`]), the audit log of tool calls
//! ([`AuditEntry`], arguments redacted by [`redact`]), and the agent's sessions
//! ([`SessionSummary`], [`SessionMessage`]: the conversation history, stored as given),
//! and the catalogue cache ([`catalogue::CachedCatalogue`]: what each server offered when it
//! last started, so its tools can be listed without starting it).
//!
//! Rules this crate keeps:
//! - the schema is an ordered list of migrations ([`MIGRATIONS`]); the number applied is
//!   the database's `PRAGMA user_version`; each migration runs in its own transaction, and
//!   a database written by a newer Warden (a higher version than this code knows) is
//!   refused rather than guessed at;
//! - WAL journal and a busy timeout, so two Warden processes can share the file;
//! - every write is one transaction;
//! - `synchronous = FULL`: with WAL, every commit syncs the log before it returns, so a
//!   committed pin, approval or grant survives a crash of Warden *and* of the machine;
//! - except audit rows (decision 0050): committed before they return (kept if Warden
//!   crashes or is killed), synced to disk by [`wal_sync`] within
//!   [`wal_sync::SYNC_WINDOW`], so a tool call does not wait for the disk.

pub mod catalogue;
pub mod packages;
pub mod redact;
pub mod wal_sync;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};

/// The schema, one migration per entry, in order. Never edit an entry once released: add
/// a new one.
pub const MIGRATIONS: &[&str] = &[
    // 1: pins of server executables.
    "CREATE TABLE pins (
        server_key      TEXT PRIMARY KEY NOT NULL,
        program         TEXT NOT NULL,
        program_sha256  TEXT NOT NULL,
        files           TEXT NOT NULL,
        package         TEXT,
        pinned_at       INTEGER NOT NULL
    ) STRICT;",
    // 2: approvals of server definitions, and pinned tool definitions.
    "CREATE TABLE approvals (
        definition_sha256   TEXT PRIMARY KEY NOT NULL,
        server_key          TEXT NOT NULL,
        approved_at         INTEGER NOT NULL
    ) STRICT;
    CREATE TABLE tool_pin_sets (
        server_key      TEXT PRIMARY KEY NOT NULL,
        pinned_at       INTEGER NOT NULL
    ) STRICT;
    CREATE TABLE tool_pins (
        server_key      TEXT NOT NULL REFERENCES tool_pin_sets(server_key) ON DELETE CASCADE,
        tool            TEXT NOT NULL,
        sha256          TEXT NOT NULL,
        definition      TEXT NOT NULL,
        approved_at     INTEGER NOT NULL,
        PRIMARY KEY (server_key, tool)
    ) STRICT;",
    // 3: the audit log: one row per attempted tool call.
    "CREATE TABLE audit (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,
        time_ms         INTEGER NOT NULL,
        front_end       TEXT NOT NULL,
        server          TEXT NOT NULL,
        tool            TEXT NOT NULL,
        arguments       TEXT NOT NULL,
        decision        TEXT,
        reasons         TEXT NOT NULL,
        approved_by     TEXT,
        executed        INTEGER NOT NULL,
        outcome         TEXT NOT NULL,
        error           TEXT,
        latency_ms      INTEGER,
        result_bytes    INTEGER
    ) STRICT;
    CREATE INDEX audit_by_time ON audit (time_ms);
    CREATE INDEX audit_by_server ON audit (server, time_ms);",
    // 4: agent sessions and their messages (the conversation history).
    "CREATE TABLE sessions (
        id              TEXT PRIMARY KEY NOT NULL,
        started_ms      INTEGER NOT NULL,
        front_end       TEXT NOT NULL,
        model           TEXT NOT NULL,
        title           TEXT
    ) STRICT;
    CREATE INDEX sessions_by_start ON sessions (started_ms);
    CREATE TABLE session_messages (
        session_id      TEXT NOT NULL REFERENCES sessions(id),
        seq             INTEGER NOT NULL,
        time_ms         INTEGER NOT NULL,
        role            TEXT NOT NULL,
        content         TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) STRICT;",
    // 5: which rule a pin was recorded under (see [`Pin::rule`]); pins made before it
    // were recorded under rule 1.
    "ALTER TABLE pins ADD COLUMN rule INTEGER NOT NULL DEFAULT 1;",
    // 6: which client of a front end made an audited call (a gateway's client; `NULL` for
    // the command line and the agent loop, which have one user).
    "ALTER TABLE audit ADD COLUMN client TEXT;",
    // 7: the catalogue cache: what each server offered when it last started, keyed by the
    // identity of its approved definition (see [`catalogue`]).
    "CREATE TABLE catalogue_cache (
        server_key      TEXT PRIMARY KEY NOT NULL,
        identity        TEXT NOT NULL,
        info            TEXT NOT NULL,
        tools           TEXT NOT NULL,
        fetched_ms      INTEGER NOT NULL
    ) STRICT;",
    // 8: packages Warden installed for `npx`/`uvx` servers (see [`packages`]): what was
    // resolved, where it lies, and the hashes it is checked against at every start.
    packages::MIGRATION,
    // 9: when a cached catalogue stops being fresh: a remote server's list lives as long
    // as the server's `ttlMs` said (`NULL`: as long as its identity holds).
    "ALTER TABLE catalogue_cache ADD COLUMN expires_ms INTEGER;",
];

/// The most rows [`Store::audit`] returns.
pub const MAX_AUDIT_ROWS: usize = 10_000;

/// The most sessions [`Store::list_sessions`] returns.
pub const MAX_SESSION_ROWS: usize = 10_000;

/// The largest content of one session message, as stored (compact JSON), in bytes.
pub const MAX_SESSION_CONTENT_BYTES: usize = 16 * 1024 * 1024;

/// One message of a session, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionMessage {
    /// Its place in the session: messages are returned by increasing `seq`.
    pub seq: i64,
    /// When it was written: milliseconds since the Unix epoch, UTC.
    pub time_ms: i64,
    /// Who wrote it: `user`, `assistant`, `tool`, ... (the agent's roles, kept as strings).
    pub role: String,
    /// The message as the agent keeps it (JSON).
    pub content: serde_json::Value,
}

/// One session, as [`Store::list_sessions`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    /// The session's id.
    pub id: String,
    /// When it started: milliseconds since the Unix epoch, UTC.
    pub started_ms: i64,
    /// Which front end ran it (`chat`, `run`).
    pub front_end: String,
    /// The model it talked to.
    pub model: String,
    /// Its title, once one is set.
    pub title: Option<String>,
    /// How many messages it holds.
    pub messages: i64,
    /// When its latest message was written, if it has any.
    pub last_message_ms: Option<i64>,
}

/// One attempted tool call, as the audit log keeps it.
///
/// Strings rather than enums: the log outlives the code that wrote it, and a reader must
/// show a value a newer Warden wrote. The values used today are listed on each field.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    /// When the attempt was made: milliseconds since the Unix epoch, UTC.
    pub time_ms: i64,
    /// Which front end made it: `cli` (`warden call`), `run` or `chat` (the agent loop),
    /// `serve` (the gateway).
    pub front_end: String,
    /// Which client of the front end made it (a gateway's client); `None` when the front
    /// end has only its one user (`warden call`, `run`, `chat`).
    pub client: Option<String>,
    /// The tool's server.
    pub server: String,
    /// The tool's qualified name (`server__tool`).
    pub tool: String,
    /// The arguments; [`Store::record_audit`] stores them redacted ([`redact::redact`]).
    pub arguments: serde_json::Value,
    /// `allow`, `ask` or `deny`; `None` when the call was refused before it was decided
    /// (its arguments did not match the tool's schema).
    pub decision: Option<String>,
    /// The decision's reasons: a JSON array of `{"kind", "text"}` objects (redacted too).
    pub reasons: serde_json::Value,
    /// Who let the call run: `policy` (allowed), `user` (answered the prompt), `--yes`;
    /// `None` when it did not run.
    pub approved_by: Option<String>,
    /// Whether the call was sent to the server.
    pub executed: bool,
    /// `ok`, `tool_error`, `failed`, `denied`, `not_approved` or `invalid_arguments`
    /// (`warden_host::audit::Outcome`); older rows may say
    /// `background` (moved to the background by the agent loop; now recorded when it ends).
    pub outcome: String,
    /// What went wrong, if anything (redacted by pattern).
    pub error: Option<String>,
    /// How long the server took, when the call was sent.
    pub latency_ms: Option<i64>,
    /// The size of the result's JSON, when there was one.
    pub result_bytes: Option<i64>,
}

/// An audit row as the file keeps it: the arguments, reasons and error redacted and the
/// JSON columns serialised. Built by [`EncodedAudit::new`] on the writer's own thread,
/// before it takes the store, so that a commit holding the store's lock runs only SQL
/// (decision 0042).
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedAudit {
    time_ms: i64,
    front_end: String,
    client: Option<String>,
    server: String,
    tool: String,
    arguments: String,
    decision: Option<String>,
    reasons: String,
    approved_by: Option<String>,
    executed: bool,
    outcome: String,
    error: Option<String>,
    latency_ms: Option<i64>,
    result_bytes: Option<i64>,
}

impl EncodedAudit {
    /// `entry` redacted ([`redact::redact`], [`redact::redact_text`]) and serialised: the
    /// raw values never reach the file. Fails only if a JSON column cannot be serialised
    /// (the error names the row's tool).
    pub fn new(entry: &AuditEntry) -> Result<EncodedAudit, StoreError> {
        let encode = |column: &'static str, value: &serde_json::Value| {
            serde_json::to_string(&redact::redact(value)).map_err(|error| StoreError::Encode {
                tool: entry.tool.clone(),
                reason: format!("{column} column: {error}"),
            })
        };
        Ok(EncodedAudit {
            time_ms: entry.time_ms,
            front_end: entry.front_end.clone(),
            client: entry.client.clone(),
            server: entry.server.clone(),
            tool: entry.tool.clone(),
            arguments: encode("arguments", &entry.arguments)?,
            decision: entry.decision.clone(),
            reasons: encode("reasons", &entry.reasons)?,
            approved_by: entry.approved_by.clone(),
            executed: entry.executed,
            outcome: entry.outcome.clone(),
            error: entry.error.as_deref().map(redact::redact_text),
            latency_ms: entry.latency_ms,
            result_bytes: entry.result_bytes,
        })
    }

    /// The row's tool (`server__tool`, or what a read or fetch asked for).
    pub fn tool(&self) -> &str {
        &self.tool
    }
}

/// A stored audit row: its id (increasing in the order rows were written) and entry.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRow {
    /// The row's id.
    pub id: i64,
    /// What was recorded.
    pub entry: AuditEntry,
}

/// Which audit rows to return.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only this server's calls.
    pub server: Option<String>,
    /// Only calls made at or after this time (milliseconds since the epoch, UTC).
    pub since_ms: Option<i64>,
}

/// How long a write waits for another process holding the database.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// What a server's start was pinned to: the resolved executable, the files it executes,
/// and for package launchers the package spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    /// Which rule chose [`files`](Pin::files): [`PIN_RULE_ARGUMENTS`] (every file named in
    /// the arguments, data files included; pins recorded before the rule was stored) or
    /// [`PIN_RULE_EXECUTED`] (only what is executed: interpreter, script, module, preloads,
    /// lockfile).
    pub rule: i64,
    /// The resolved absolute program.
    pub program: PathBuf,
    /// sha256 of the program's bytes, lowercase hex.
    pub program_sha256: String,
    /// The files pinned besides the program (see [`rule`](Pin::rule)), with their sha256.
    pub files: Vec<(PathBuf, String)>,
    /// The package spec of a package launcher (`npx pkg@1.2.3` pins `pkg@1.2.3`).
    pub package: Option<String>,
}

/// [`Pin::rule`] of pins that hashed every file named in the arguments.
pub const PIN_RULE_ARGUMENTS: i64 = 1;
/// [`Pin::rule`] of pins that hash only what the start executes.
pub const PIN_RULE_EXECUTED: i64 = 2;

/// The key a server's pin is stored under: its name **and** where it was defined (scope and
/// configuration file), so a project file cannot inherit a user-scope pin by reusing the
/// server's name. Format: `SCOPE:CONFIG_PATH#NAME`, e.g.
/// `user:/home/me/.config/warden/warden.toml#time`.
pub fn server_key(name: &str, scope: &str, config_path: &Path) -> String {
    format!("{scope}:{}#{name}", config_path.display())
}

/// One tool's approved definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolPin {
    /// The tool's raw name, as its server lists it.
    pub tool: String,
    /// sha256 of [`definition`](ToolPin::definition), lowercase hex.
    pub sha256: String,
    /// The canonical JSON of the definition, kept to show what changed.
    pub definition: String,
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// A state store failure; every one names the database file.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A write of several rows in one transaction failed (the reason is the first row's
    /// error, reported with that row).
    #[error("state store: the transaction holding this row failed: {reason}")]
    Batch {
        /// What failed the transaction.
        reason: String,
    },
    /// SQLite reported an error.
    #[error("state store {}: {source}", path.display())]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// The database's directory could not be created.
    #[error("state store {}: cannot create its directory: {source}", path.display())]
    Directory {
        /// The database file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The database was written by a newer Warden.
    #[error(
        "state store {}: schema version {found} is newer than this Warden knows ({known}); \
         use a newer Warden",
        path.display()
    )]
    NewerSchema {
        /// The database file.
        path: PathBuf,
        /// The version found in the file.
        found: i64,
        /// The newest version this code knows.
        known: i64,
    },
    /// A session message larger than [`MAX_SESSION_CONTENT_BYTES`].
    #[error(
        "state store {}: message {seq} of session `{session}` is {size} bytes, over the \
         {limit}-byte limit for one stored message",
        path.display()
    )]
    MessageTooLarge {
        /// The database file.
        path: PathBuf,
        /// The session.
        session: String,
        /// The message's sequence number.
        seq: i64,
        /// Its size as JSON, in bytes.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A message was appended to a session that was never created.
    #[error("state store {}: there is no session `{session}`", path.display())]
    NoSuchSession {
        /// The database file.
        path: PathBuf,
        /// The session asked for.
        session: String,
    },
    /// An audit row's JSON column could not be serialised (nothing was written).
    #[error("audit row of `{tool}`: cannot be encoded: {reason}")]
    Encode {
        /// The row's tool.
        tool: String,
        /// Which column, and why.
        reason: String,
    },
    /// A stored row could not be read back.
    #[error("state store {}: corrupt row for `{key}`: {reason}", path.display())]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// The row's key.
        key: String,
        /// What was wrong.
        reason: String,
    },
}

/// An open state store.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// Started at the first audit commit: most commands never write one.
    audit_sync: Option<wal_sync::WalSyncer>,
}

impl Store {
    /// Opens (creating if needed) the database at `path` and brings its schema up to date.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let path = path.into();
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            create_private_dir(dir).map_err(|source| StoreError::Directory {
                path: path.clone(),
                source,
            })?;
        }
        let sqlite = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let conn = Connection::open(&path).map_err(sqlite)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(sqlite)?;
        // `journal_mode` answers with the mode set, so it is read as a query.
        let _mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))
            .map_err(sqlite)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(sqlite)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(sqlite)?;
        let mut store = Self {
            conn,
            path,
            audit_sync: None,
        };
        store.migrate()?;
        Ok(store)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        self.conn
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(|source| self.sqlite(source))
    }

    fn sqlite(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// Runs `work` in one transaction, committed when it succeeds (rolled back when it
    /// fails); an SQLite error names the store's file.
    pub(crate) fn write<T>(
        &mut self,
        work: impl FnOnce(&rusqlite::Transaction<'_>) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let path = self.path.clone();
        let sqlite = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(sqlite)?;
        let out = work(&tx).map_err(sqlite)?;
        tx.commit().map_err(sqlite)?;
        Ok(out)
    }

    /// Runs `work` inside one read transaction: every query it makes sees the same
    /// snapshot of the store, and the store's lock is taken once rather than once per
    /// query (a listing of a hundred cached servers makes several hundred reads). The
    /// transaction is rolled back at the end: `work` only reads.
    pub fn read<T>(&self, work: impl FnOnce(&Store) -> T) -> Result<T, StoreError> {
        let snapshot = self
            .conn
            .unchecked_transaction()
            .map_err(|source| self.sqlite(source))?;
        let out = work(self);
        snapshot.rollback().map_err(|source| self.sqlite(source))?;
        Ok(out)
    }

    fn migrate(&mut self) -> Result<(), StoreError> {
        let known = i64::try_from(MIGRATIONS.len()).unwrap_or(i64::MAX);
        let found = self.schema_version()?;
        if found > known {
            return Err(StoreError::NewerSchema {
                path: self.path.clone(),
                found,
                known,
            });
        }
        for (index, sql) in MIGRATIONS
            .iter()
            .enumerate()
            .skip(usize::try_from(found).unwrap_or(0))
        {
            let path = self.path.clone();
            let sqlite = |source| StoreError::Sqlite {
                path: path.clone(),
                source,
            };
            let tx = self.conn.transaction().map_err(sqlite)?;
            // Re-read inside the transaction: another process may have migrated meanwhile.
            let now: i64 = tx
                .query_row("PRAGMA user_version", [], |row| row.get(0))
                .map_err(sqlite)?;
            if now > i64::try_from(index).unwrap_or(i64::MAX) {
                continue;
            }
            tx.execute_batch(sql).map_err(sqlite)?;
            tx.pragma_update(
                None,
                "user_version",
                i64::try_from(index + 1).unwrap_or(i64::MAX),
            )
            .map_err(sqlite)?;
            tx.commit().map_err(sqlite)?;
        }
        Ok(())
    }

    /// The row `sql` selects for `server_key` (its one parameter), read by `map`, if any;
    /// the statement is prepared once per connection and reused.
    pub(crate) fn row_for<T>(
        &self,
        sql: &str,
        server_key: &str,
        map: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Option<T>, StoreError> {
        self.conn
            .prepare_cached(sql)
            .and_then(|mut statement| statement.query_row(params![server_key], map).optional())
            .map_err(|source| self.sqlite(source))
    }

    /// The pin stored for `server_key` (see [`server_key`]), if any.
    pub fn pin_for(&self, server_key: &str) -> Result<Option<Pin>, StoreError> {
        let row = self.row_for(
            "SELECT program, program_sha256, files, package, rule FROM pins
             WHERE server_key = ?1",
            server_key,
            |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, Option<String>>(3)?,
                    row.get::<_, i64>(4)?,
                ))
            },
        )?;
        let Some((program, program_sha256, files, package, rule)) = row else {
            return Ok(None);
        };
        let files: Vec<(String, String)> =
            serde_json::from_str(&files).map_err(|error| StoreError::Corrupt {
                path: self.path.clone(),
                key: server_key.to_owned(),
                reason: format!("files column: {error}"),
            })?;
        Ok(Some(Pin {
            rule,
            program: PathBuf::from(program),
            program_sha256,
            files: files
                .into_iter()
                .map(|(path, hash)| (PathBuf::from(path), hash))
                .collect(),
            package,
        }))
    }

    /// Records `pin` for `server_key`, replacing any earlier pin, in one transaction.
    pub fn save_pin(&mut self, server_key: &str, pin: &Pin) -> Result<(), StoreError> {
        let files = self.pin_files(server_key, pin)?;
        let now = now_secs();
        self.write(|tx| insert_pin(tx, server_key, pin, &files, now))?;
        Ok(())
    }

    /// The `files` column of `pin`.
    pub(crate) fn pin_files(&self, server_key: &str, pin: &Pin) -> Result<String, StoreError> {
        let files: Vec<(String, &str)> = pin
            .files
            .iter()
            .map(|(path, hash)| (path.to_string_lossy().into_owned(), hash.as_str()))
            .collect();
        serde_json::to_string(&files).map_err(|error| StoreError::Corrupt {
            path: self.path.clone(),
            key: server_key.to_owned(),
            reason: format!("files column: {error}"),
        })
    }

    /// Whether the server definition hashed to `definition_sha256` was approved.
    pub fn is_approved(&self, definition_sha256: &str) -> Result<bool, StoreError> {
        self.conn
            .query_row(
                "SELECT 1 FROM approvals WHERE definition_sha256 = ?1",
                params![definition_sha256],
                |_| Ok(()),
            )
            .optional()
            .map(|row| row.is_some())
            .map_err(|source| self.sqlite(source))
    }

    /// Records the approval of the definition hashed to `definition_sha256`, made for the
    /// server stored under `server_key`, in one transaction.
    pub fn save_approval(
        &mut self,
        definition_sha256: &str,
        server_key: &str,
    ) -> Result<(), StoreError> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO approvals (definition_sha256, server_key, approved_at)
                 VALUES (?1, ?2, ?3)
                 ON CONFLICT(definition_sha256) DO UPDATE SET server_key = excluded.server_key,
                     approved_at = excluded.approved_at",
                params![definition_sha256, server_key, now_secs()],
            )
        })?;
        Ok(())
    }

    /// The pinned tool definitions of the server stored under `server_key`, by tool name;
    /// `None` when its tools were never pinned (an empty list is a pinned empty set).
    pub fn tool_pins(&self, server_key: &str) -> Result<Option<Vec<ToolPin>>, StoreError> {
        let pinned = self.row_for(
            "SELECT 1 FROM tool_pin_sets WHERE server_key = ?1",
            server_key,
            |_| Ok(()),
        )?;
        if pinned.is_none() {
            return Ok(None);
        }
        let mut statement = self
            .conn
            .prepare_cached(
                "SELECT tool, sha256, definition FROM tool_pins WHERE server_key = ?1
                 ORDER BY tool",
            )
            .map_err(|source| self.sqlite(source))?;
        let rows = statement
            .query_map(params![server_key], |row| {
                Ok(ToolPin {
                    tool: row.get(0)?,
                    sha256: row.get(1)?,
                    definition: row.get(2)?,
                })
            })
            .map_err(|source| self.sqlite(source))?;
        let mut pins = Vec::new();
        for row in rows {
            pins.push(row.map_err(|source| self.sqlite(source))?);
        }
        Ok(Some(pins))
    }

    /// Replaces every pinned tool definition of the server stored under `server_key` with
    /// `pins`, in one transaction.
    pub fn replace_tool_pins(
        &mut self,
        server_key: &str,
        pins: &[ToolPin],
    ) -> Result<(), StoreError> {
        let now = now_secs();
        self.write(|tx| {
            tx.execute(
                "DELETE FROM tool_pins WHERE server_key = ?1",
                params![server_key],
            )?;
            tx.execute(
                "INSERT INTO tool_pin_sets (server_key, pinned_at) VALUES (?1, ?2)
                 ON CONFLICT(server_key) DO UPDATE SET pinned_at = excluded.pinned_at",
                params![server_key, now],
            )?;
            for pin in pins {
                tx.execute(
                    "INSERT INTO tool_pins (server_key, tool, sha256, definition, approved_at)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![server_key, pin.tool, pin.sha256, pin.definition, now],
                )?;
            }
            Ok(())
        })
    }
}

impl Store {
    /// Appends `entry` to the audit log in one transaction, committed before this returns
    /// and synced to disk within [`wal_sync::SYNC_WINDOW`] (decision 0050). Arguments, reasons and the error
    /// are redacted first: the raw values never reach the file.
    pub fn record_audit(&mut self, entry: &AuditEntry) -> Result<i64, StoreError> {
        let row = EncodedAudit::new(entry)?;
        let mut ids = self.record_audits(&[&row])?;
        ids.pop().ok_or_else(|| StoreError::Batch {
            reason: "the transaction wrote no row".into(),
        })
    }

    /// Writes several encoded audit rows ([`EncodedAudit`], built before the caller takes
    /// the store, so that whoever holds it only runs SQL) in **one** transaction, the group
    /// commit of concurrent calls' rows, committed before this returns (readable by every
    /// connection, kept if Warden crashes). The disk sync that also keeps them through a
    /// crash of the machine follows within [`wal_sync::SYNC_WINDOW`], off the caller's
    /// path (decision 0050). `Ok`: every row's id, in order. `Err`: nothing was written
    /// (the first failure ends the transaction, so a busy database costs one busy timeout,
    /// not one per row).
    pub fn record_audits(&mut self, rows: &[&EncodedAudit]) -> Result<Vec<i64>, StoreError> {
        let path = self.path.clone();
        let sqlite = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        if self.audit_sync.is_none() {
            self.audit_sync = wal_sync::WalSyncer::start(&self.path)
                .map_err(|error| StoreError::Batch {
                    reason: format!("starting the audit log's disk sync: {error}"),
                })
                .map(Some)?;
        }
        // This transaction only: the connection's other writes keep their sync at commit.
        // Both switches are cached statements: they run at every call's commit.
        set_synchronous(&self.conn, false).map_err(sqlite)?;
        let written = (|| {
            let tx = self.conn.transaction().map_err(sqlite)?;
            let ids = rows
                .iter()
                .map(|row| insert_audit(&tx, row).map_err(sqlite))
                .collect::<Result<Vec<i64>, StoreError>>()?;
            tx.commit().map_err(sqlite)?;
            Ok(ids)
        })();
        let restored = set_synchronous(&self.conn, true);
        if let Some(syncer) = &self.audit_sync
            && written.is_ok()
        {
            syncer.committed();
        }
        let ids = written?;
        restored.map_err(sqlite)?;
        Ok(ids)
    }

    /// [`record_audits`](Store::record_audits) without waiting for another connection's
    /// write lock: `Ok(None)` when the database is busy (nothing was written; the caller
    /// may wait elsewhere and try again with `record_audits`). For a writer that must not
    /// block where it runs (an async worker) unless the commit can be made at once.
    pub fn try_record_audits(
        &mut self,
        rows: &[&EncodedAudit],
    ) -> Result<Option<Vec<i64>>, StoreError> {
        self.conn
            .busy_timeout(Duration::ZERO)
            .map_err(|source| self.sqlite(source))?;
        let written = self.record_audits(rows);
        let restored = self.conn.busy_timeout(BUSY_TIMEOUT);
        let written = match written {
            Err(StoreError::Sqlite {
                source: rusqlite::Error::SqliteFailure(failure, _),
                ..
            }) if matches!(
                failure.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ) =>
            {
                Ok(None)
            }
            other => other.map(Some),
        };
        if let Err(error) = restored {
            // The rows' fate is what `written` says; later writes would fail fast on a
            // busy database instead of waiting.
            tracing::warn!("state store: restoring the busy timeout failed: {error}");
        }
        written
    }

    /// Disk syncs made for audit commits so far (for tests and measurement).
    pub fn audit_syncs(&self) -> u64 {
        self.audit_sync
            .as_ref()
            .map_or(0, wal_sync::WalSyncer::syncs)
    }

    /// The latest `limit` audit rows (at most [`MAX_AUDIT_ROWS`]) that pass `filter`,
    /// oldest first.
    pub fn audit(&self, filter: &AuditFilter, limit: usize) -> Result<Vec<AuditRow>, StoreError> {
        let limit = i64::try_from(limit.min(MAX_AUDIT_ROWS)).unwrap_or(0);
        let mut statement = self
            .conn
            .prepare(
                "SELECT id, time_ms, front_end, server, tool, arguments, decision, reasons,
                     approved_by, executed, outcome, error, latency_ms, result_bytes, client
                 FROM audit
                 WHERE (?1 IS NULL OR server = ?1) AND (?2 IS NULL OR time_ms >= ?2)
                 ORDER BY id DESC LIMIT ?3",
            )
            .map_err(|source| self.sqlite(source))?;
        let rows = statement
            .query_map(params![filter.server, filter.since_ms, limit], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, String>(5)?,
                    row.get::<_, String>(7)?,
                    AuditEntry {
                        time_ms: row.get(1)?,
                        front_end: row.get(2)?,
                        client: row.get(14)?,
                        server: row.get(3)?,
                        tool: row.get(4)?,
                        arguments: serde_json::Value::Null,
                        decision: row.get(6)?,
                        reasons: serde_json::Value::Null,
                        approved_by: row.get(8)?,
                        executed: row.get(9)?,
                        outcome: row.get(10)?,
                        error: row.get(11)?,
                        latency_ms: row.get(12)?,
                        result_bytes: row.get(13)?,
                    },
                ))
            })
            .map_err(|source| self.sqlite(source))?;
        let mut out = Vec::new();
        for row in rows {
            let (id, arguments, reasons, mut entry) = row.map_err(|source| self.sqlite(source))?;
            let parse = |column: &str, text: &str| {
                serde_json::from_str(text).map_err(|error| StoreError::Corrupt {
                    path: self.path.clone(),
                    key: format!("audit row {id}"),
                    reason: format!("{column} column: {error}"),
                })
            };
            entry.arguments = parse("arguments", &arguments)?;
            entry.reasons = parse("reasons", &reasons)?;
            out.push(AuditRow { id, entry });
        }
        out.reverse();
        Ok(out)
    }
}

/// Agent sessions: the conversation history, one row per message.
///
/// The history is the user's own conversation and is stored as given, not redacted; a caller
/// that wants secrets out of stored tool-call arguments runs [`redact::redact`] over them
/// before appending (the audit log, by contrast, always redacts).
impl Store {
    /// Records a new session, in one transaction. An id used before is an error (SQLite's
    /// constraint failure).
    pub fn create_session(
        &mut self,
        id: &str,
        front_end: &str,
        model: &str,
        started_ms: i64,
    ) -> Result<(), StoreError> {
        let path = self.path.clone();
        let sqlite = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(sqlite)?;
        tx.execute(
            "INSERT INTO sessions (id, started_ms, front_end, model, title)
             VALUES (?1, ?2, ?3, ?4, NULL)",
            params![id, started_ms, front_end, model],
        )
        .map_err(sqlite)?;
        tx.commit().map_err(sqlite)
    }

    /// Sets (or, with `None`, clears) the title of session `id`, in one transaction.
    pub fn set_session_title(&mut self, id: &str, title: Option<&str>) -> Result<(), StoreError> {
        let path = self.path.clone();
        let sqlite = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(sqlite)?;
        let changed = tx
            .execute(
                "UPDATE sessions SET title = ?2 WHERE id = ?1",
                params![id, title],
            )
            .map_err(sqlite)?;
        if changed == 0 {
            return Err(StoreError::NoSuchSession {
                path: self.path.clone(),
                session: id.to_owned(),
            });
        }
        tx.commit().map_err(sqlite)
    }

    /// Appends message `seq` to session `id`, in one transaction. `content` is stored as
    /// compact JSON of at most [`MAX_SESSION_CONTENT_BYTES`]; a larger one is refused
    /// ([`StoreError::MessageTooLarge`]) and nothing is written. The session must exist
    /// ([`StoreError::NoSuchSession`]); a `seq` already used in it is an error.
    pub fn append_session_message(
        &mut self,
        id: &str,
        seq: i64,
        time_ms: i64,
        role: &str,
        content: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let content = serde_json::to_string(content).map_err(|error| StoreError::Corrupt {
            path: self.path.clone(),
            key: format!("session {id} message {seq}"),
            reason: format!("content: {error}"),
        })?;
        if content.len() > MAX_SESSION_CONTENT_BYTES {
            return Err(StoreError::MessageTooLarge {
                path: self.path.clone(),
                session: id.to_owned(),
                seq,
                size: content.len(),
                limit: MAX_SESSION_CONTENT_BYTES,
            });
        }
        let path = self.path.clone();
        let sqlite = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(sqlite)?;
        let exists = tx
            .query_row("SELECT 1 FROM sessions WHERE id = ?1", params![id], |_| {
                Ok(())
            })
            .optional()
            .map_err(sqlite)?
            .is_some();
        if !exists {
            return Err(StoreError::NoSuchSession {
                path: self.path.clone(),
                session: id.to_owned(),
            });
        }
        tx.execute(
            "INSERT INTO session_messages (session_id, seq, time_ms, role, content)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![id, seq, time_ms, role, content],
        )
        .map_err(sqlite)?;
        tx.commit().map_err(sqlite)
    }

    /// Every message of session `id`, by increasing `seq` (empty for an unknown session).
    pub fn session_messages(&self, id: &str) -> Result<Vec<SessionMessage>, StoreError> {
        let mut statement = self
            .conn
            .prepare(
                "SELECT seq, time_ms, role, content FROM session_messages
                 WHERE session_id = ?1 ORDER BY seq",
            )
            .map_err(|source| self.sqlite(source))?;
        let rows = statement
            .query_map(params![id], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, i64>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, String>(3)?,
                ))
            })
            .map_err(|source| self.sqlite(source))?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, time_ms, role, content) = row.map_err(|source| self.sqlite(source))?;
            let content = serde_json::from_str(&content).map_err(|error| StoreError::Corrupt {
                path: self.path.clone(),
                key: format!("session {id} message {seq}"),
                reason: format!("content column: {error}"),
            })?;
            out.push(SessionMessage {
                seq,
                time_ms,
                role,
                content,
            });
        }
        Ok(out)
    }

    /// The latest `limit` sessions (at most [`MAX_SESSION_ROWS`]), newest first by start
    /// time (then by creation order).
    pub fn list_sessions(&self, limit: usize) -> Result<Vec<SessionSummary>, StoreError> {
        let limit = i64::try_from(limit.min(MAX_SESSION_ROWS)).unwrap_or(0);
        let mut statement = self
            .conn
            .prepare(
                "SELECT s.id, s.started_ms, s.front_end, s.model, s.title,
                     (SELECT count(*) FROM session_messages m WHERE m.session_id = s.id),
                     (SELECT max(time_ms) FROM session_messages m WHERE m.session_id = s.id)
                 FROM sessions s
                 ORDER BY s.started_ms DESC, s.rowid DESC LIMIT ?1",
            )
            .map_err(|source| self.sqlite(source))?;
        let rows = statement
            .query_map(params![limit], |row| {
                Ok(SessionSummary {
                    id: row.get(0)?,
                    started_ms: row.get(1)?,
                    front_end: row.get(2)?,
                    model: row.get(3)?,
                    title: row.get(4)?,
                    messages: row.get(5)?,
                    last_message_ms: row.get(6)?,
                })
            })
            .map_err(|source| self.sqlite(source))?;
        let mut out = Vec::new();
        for row in rows {
            out.push(row.map_err(|source| self.sqlite(source))?);
        }
        Ok(out)
    }
}

/// Creates `dir` (and its parents) with mode 700 where it is new.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Writes `pin` (with its `files` column already serialised) for `server_key` in `tx`.
pub(crate) fn insert_pin(
    tx: &rusqlite::Transaction<'_>,
    server_key: &str,
    pin: &Pin,
    files: &str,
    now: i64,
) -> rusqlite::Result<usize> {
    tx.execute(
        "INSERT INTO pins (server_key, program, program_sha256, files, package, pinned_at,
             rule)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT(server_key) DO UPDATE SET program = excluded.program,
             program_sha256 = excluded.program_sha256, files = excluded.files,
             package = excluded.package, pinned_at = excluded.pinned_at,
             rule = excluded.rule",
        params![
            server_key,
            pin.program.to_string_lossy(),
            pin.program_sha256,
            files,
            pin.package,
            now,
            pin.rule
        ],
    )
}

/// Sets the connection's `synchronous` to `FULL` (a commit syncs the WAL) or `NORMAL`
/// (it does not), through a cached statement.
fn set_synchronous(conn: &Connection, full: bool) -> rusqlite::Result<()> {
    let sql = if full {
        "PRAGMA synchronous = FULL"
    } else {
        "PRAGMA synchronous = NORMAL"
    };
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}

/// One encoded audit row inserted in `tx` (not committed).
fn insert_audit(tx: &rusqlite::Transaction<'_>, row: &EncodedAudit) -> rusqlite::Result<i64> {
    // Cached: preparing it for every row was 4.7 % of `warden serve`'s CPU (decision 0050).
    tx.prepare_cached(
        "INSERT INTO audit (time_ms, front_end, server, tool, arguments, decision, reasons,
             approved_by, executed, outcome, error, latency_ms, result_bytes, client)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    )?
    .execute(params![
        row.time_ms,
        row.front_end,
        row.server,
        row.tool,
        row.arguments,
        row.decision,
        row.reasons,
        row.approved_by,
        row.executed,
        row.outcome,
        row.error,
        row.latency_ms,
        row.result_bytes,
        row.client,
    ])?;
    Ok(tx.last_insert_rowid())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn pin() -> Pin {
        Pin {
            rule: PIN_RULE_EXECUTED,
            program: PathBuf::from("/usr/bin/node"),
            program_sha256: "ab".repeat(32),
            files: vec![(PathBuf::from("/srv/server.js"), "cd".repeat(32))],
            package: Some("pkg@1.2.3".into()),
        }
    }

    #[test]
    fn an_empty_file_is_migrated_to_the_newest_schema() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/warden/state.db");
        let store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as i64);
        let mode: String = store
            .conn
            .query_row("PRAGMA journal_mode", [], |row| row.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
    }

    #[test]
    fn a_read_sees_one_snapshot_and_later_reads_see_writes_made_meanwhile() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let reader = Store::open(&path).unwrap();
        let mut writer = Store::open(&path).unwrap();
        let during = reader
            .read(|store| {
                let before = store.pin_for("server").unwrap();
                writer.save_pin("server", &pin()).unwrap();
                (before, store.pin_for("server").unwrap())
            })
            .unwrap();
        assert_eq!(
            during,
            (None, None),
            "a write made during a read is not seen by it"
        );
        assert_eq!(reader.pin_for("server").unwrap(), Some(pin()));
        // The read changed nothing and left no transaction open: the reader can write.
        let mut reader = reader;
        reader.save_pin("other", &pin()).unwrap();
        assert_eq!(writer.pin_for("other").unwrap(), Some(pin()));
    }

    #[test]
    fn pins_are_saved_replaced_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let key = server_key(
            "time",
            "user",
            Path::new("/home/me/.config/warden/warden.toml"),
        );
        {
            let mut store = Store::open(&path).unwrap();
            assert_eq!(store.pin_for(&key).unwrap(), None);
            store.save_pin(&key, &pin()).unwrap();
            assert_eq!(store.pin_for(&key).unwrap(), Some(pin()));
            let mut changed = pin();
            changed.program_sha256 = "ef".repeat(32);
            changed.files.clear();
            changed.package = None;
            store.save_pin(&key, &changed).unwrap();
            assert_eq!(store.pin_for(&key).unwrap(), Some(changed));
        }
        let store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as i64);
        assert_eq!(
            store.pin_for(&key).unwrap().unwrap().program_sha256,
            "ef".repeat(32)
        );
        let other = server_key("time", "project", Path::new("/repo/.mcp.json"));
        assert_eq!(store.pin_for(&other).unwrap(), None);
    }

    /// A database as an older Warden left it: only the first `version` migrations applied.
    fn database_at_version(path: &Path, version: usize) -> Connection {
        let conn = Connection::open(path).unwrap();
        for migration in &MIGRATIONS[..version] {
            conn.execute_batch(migration).unwrap();
        }
        conn.pragma_update(None, "user_version", version as i64)
            .unwrap();
        conn
    }

    #[test]
    fn a_version_1_database_keeps_its_pins_when_migrated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let key = server_key("time", "user", Path::new("/home/me/warden.toml"));
        {
            // What Warden with only the first migration wrote.
            let conn = database_at_version(&path, 1);
            conn.execute(
                "INSERT INTO pins VALUES (?1, '/usr/bin/node', ?2, '[]', NULL, 0)",
                params![key, "ab".repeat(32)],
            )
            .unwrap();
        }
        let store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as i64);
        let pin = store.pin_for(&key).unwrap().unwrap();
        assert_eq!(pin.program_sha256, "ab".repeat(32));
        assert_eq!(pin.rule, PIN_RULE_ARGUMENTS, "recorded by the older rule");
        assert_eq!(store.tool_pins(&key).unwrap(), None);
    }

    #[test]
    fn approvals_and_tool_pins_are_kept_per_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let key = server_key("s", "project", Path::new("/repo/warden.toml"));
        let pin = |tool: &str, hash: &str| ToolPin {
            tool: tool.into(),
            sha256: hash.repeat(64),
            definition: format!("{{\"name\":\"{tool}\"}}"),
        };
        {
            let mut store = Store::open(&path).unwrap();
            assert!(!store.is_approved(&"a".repeat(64)).unwrap());
            store.save_approval(&"a".repeat(64), &key).unwrap();
            assert!(store.is_approved(&"a".repeat(64)).unwrap());
            assert!(!store.is_approved(&"b".repeat(64)).unwrap());

            assert_eq!(store.tool_pins(&key).unwrap(), None);
            store.replace_tool_pins(&key, &[]).unwrap();
            assert_eq!(store.tool_pins(&key).unwrap(), Some(Vec::new()));
            store
                .replace_tool_pins(&key, &[pin("echo", "c"), pin("add", "d")])
                .unwrap();
            store.replace_tool_pins(&key, &[pin("echo", "e")]).unwrap();
        }
        let store = Store::open(&path).unwrap();
        assert!(store.is_approved(&"a".repeat(64)).unwrap());
        assert_eq!(store.tool_pins(&key).unwrap(), Some(vec![pin("echo", "e")]));
        let other = server_key("s", "user", Path::new("/home/me/warden.toml"));
        assert_eq!(store.tool_pins(&other).unwrap(), None);
    }

    fn entry(server: &str, time_ms: i64) -> AuditEntry {
        AuditEntry {
            time_ms,
            front_end: "cli".into(),
            client: None,
            server: server.into(),
            tool: format!("{server}__echo"),
            arguments: serde_json::json!({"message": "Bearer abcdef.ghi", "api_key": "k1"}),
            decision: Some("ask".into()),
            reasons: serde_json::json!([{"kind": "default", "text": "asking by default"}]),
            approved_by: Some("--yes".into()),
            executed: true,
            outcome: "ok".into(),
            error: Some("server said sk-abcdefghijklmnop".into()),
            latency_ms: Some(12),
            result_bytes: Some(345),
        }
    }

    #[test]
    fn an_audit_row_is_readable_on_return_and_synced_to_disk_after_it_with_others() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let mut store = Store::open(&path).unwrap();
        assert_eq!(store.audit_syncs(), 0, "no audit commit yet");
        let first = store.record_audit(&entry("a", 1_000)).unwrap();
        // Committed on return: another connection (another process) reads it.
        let other = Connection::open(&path).unwrap();
        let count: i64 = other
            .query_row("SELECT count(*) FROM audit WHERE id = ?1", [first], |row| {
                row.get(0)
            })
            .unwrap();
        assert_eq!(count, 1);
        // The connection's other writes still sync at their commit.
        let synchronous: i64 = store
            .conn
            .query_row("PRAGMA synchronous", [], |row| row.get(0))
            .unwrap();
        assert_eq!(synchronous, 2, "FULL again after the audit commit");
        // Fifty commits back to back share the syncs of their windows.
        for i in 0..50 {
            store.record_audit(&entry("b", 2_000 + i)).unwrap();
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while store.audit_syncs() == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let syncs = store.audit_syncs();
        assert!(syncs >= 1, "the commits were synced");
        assert!(syncs < 25, "{syncs} syncs for 51 commits: not shared");
    }

    #[test]
    fn a_busy_database_is_not_waited_for_by_try_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let mut store = Store::open(&path).unwrap();
        let row = EncodedAudit::new(&entry("a", 1_000)).unwrap();
        // Another process holds the write lock.
        let other = Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let started = std::time::Instant::now();
        assert_eq!(store.try_record_audits(&[&row]).unwrap(), None);
        assert!(
            started.elapsed() < BUSY_TIMEOUT / 2,
            "did not wait for the lock ({:?})",
            started.elapsed()
        );
        other.execute_batch("ROLLBACK").unwrap();
        let count = |store: &Store| -> i64 {
            store
                .conn
                .query_row("SELECT count(*) FROM audit", [], |row| row.get(0))
                .unwrap()
        };
        assert_eq!(count(&store), 0, "nothing written while busy");
        // The connection waits for a busy database again, as before.
        let timeout: i64 = store
            .conn
            .query_row("PRAGMA busy_timeout", [], |row| row.get(0))
            .unwrap();
        assert_eq!(timeout, i64::try_from(BUSY_TIMEOUT.as_millis()).unwrap());
        // Free: written at once, once.
        assert_eq!(
            store
                .try_record_audits(&[&row])
                .unwrap()
                .map(|ids| ids.len()),
            Some(1)
        );
        assert_eq!(count(&store), 1);
    }

    #[test]
    fn audit_rows_are_recorded_redacted_and_queried_by_server_and_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        {
            let mut store = Store::open(&path).unwrap();
            let synchronous: i64 = store
                .conn
                .query_row("PRAGMA synchronous", [], |row| row.get(0))
                .unwrap();
            assert_eq!(synchronous, 2, "FULL");
            store.record_audit(&entry("a", 1_000)).unwrap();
            store.record_audit(&entry("b", 2_000)).unwrap();
            let mut denied = entry("a", 3_000);
            denied.decision = Some("deny".into());
            denied.approved_by = None;
            denied.executed = false;
            denied.outcome = "denied".into();
            denied.error = None;
            denied.latency_ms = None;
            denied.result_bytes = None;
            store.record_audit(&denied).unwrap();
        }
        // Everything survives a reopen (each row was committed when recorded).
        let store = Store::open(&path).unwrap();
        let all = store.audit(&AuditFilter::default(), 100).unwrap();
        let times: Vec<i64> = all.iter().map(|row| row.entry.time_ms).collect();
        assert_eq!(times, [1_000, 2_000, 3_000]);
        assert!(all.windows(2).all(|pair| pair[0].id < pair[1].id));
        let first = &all[0].entry;
        assert_eq!(
            first.arguments,
            serde_json::json!({"message": "Bearer <redacted>", "api_key": "<redacted>"})
        );
        assert_eq!(first.error.as_deref(), Some("server said <redacted>"));
        assert_eq!(first.approved_by.as_deref(), Some("--yes"));
        assert_eq!(
            (first.latency_ms, first.result_bytes),
            (Some(12), Some(345))
        );
        assert_eq!(all[2].entry.outcome, "denied");
        assert!(!all[2].entry.executed);
        assert_eq!(all[2].entry.latency_ms, None);

        let only_a = AuditFilter {
            server: Some("a".into()),
            since_ms: None,
        };
        let rows = store.audit(&only_a, 100).unwrap();
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|row| row.entry.server == "a"));
        let since = AuditFilter {
            server: None,
            since_ms: Some(2_000),
        };
        assert_eq!(store.audit(&since, 100).unwrap().len(), 2);
        // The limit keeps the latest rows, still oldest first.
        let latest = store.audit(&AuditFilter::default(), 2).unwrap();
        let times: Vec<i64> = latest.iter().map(|row| row.entry.time_ms).collect();
        assert_eq!(times, [2_000, 3_000]);
        let raw: String = store
            .conn
            .query_row(
                "SELECT group_concat(arguments || error, ' ') FROM audit",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert!(!raw.contains("abcdef") && !raw.contains("k1") && !raw.contains("sk-"));
    }

    #[test]
    fn a_version_2_database_keeps_its_data_when_migrated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let key = server_key("s", "user", Path::new("/home/me/warden.toml"));
        {
            // What Warden with the first two migrations wrote.
            let conn = database_at_version(&path, 2);
            conn.execute(
                "INSERT INTO pins VALUES (?1, '/usr/bin/node', ?2, '[]', NULL, 0)",
                params![key, "ab".repeat(32)],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO approvals VALUES (?1, ?2, 0)",
                params!["a".repeat(64), key],
            )
            .unwrap();
        }
        let mut store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as i64);
        assert!(store.pin_for(&key).unwrap().is_some());
        assert!(store.is_approved(&"a".repeat(64)).unwrap());
        assert!(store.audit(&AuditFilter::default(), 10).unwrap().is_empty());
        store.record_audit(&entry("s", 5)).unwrap();
        assert_eq!(store.audit(&AuditFilter::default(), 10).unwrap().len(), 1);
    }

    #[test]
    fn a_database_from_a_newer_warden_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        drop(Store::open(&path).unwrap());
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", MIGRATIONS.len() as i64 + 1)
            .unwrap();
        drop(conn);
        let error = Store::open(&path).unwrap_err();
        assert!(matches!(error, StoreError::NewerSchema { .. }), "{error}");
        assert!(error.to_string().contains(&path.display().to_string()));
    }

    #[test]
    fn sessions_and_their_messages_round_trip_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let mut store = Store::open(&path).unwrap();
        store
            .create_session("s1", "cli", "claude-sonnet-4-5", 1_000)
            .unwrap();
        store.create_session("s2", "tui", "gpt-x", 3_000).unwrap();
        store.create_session("s3", "cli", "m", 2_000).unwrap();
        let messages = [
            (0, "user", serde_json::json!({"text": "what time is it?"})),
            (
                1,
                "assistant",
                serde_json::json!({"tool_calls": [{"name": "time__now", "arguments": {}}]}),
            ),
            (
                2,
                "tool",
                serde_json::json!({"result": "12:00", "ok": true}),
            ),
        ];
        // Appended out of order: read back by `seq`.
        for index in [2, 0, 1] {
            let (seq, role, content) = &messages[index];
            store
                .append_session_message("s1", *seq, 1_000 + seq, role, content)
                .unwrap();
        }
        store.set_session_title("s1", Some("the time")).unwrap();
        drop(store);

        let mut store = Store::open(&path).unwrap();
        let read = store.session_messages("s1").unwrap();
        assert_eq!(
            read,
            messages
                .iter()
                .map(|(seq, role, content)| SessionMessage {
                    seq: *seq,
                    time_ms: 1_000 + seq,
                    role: (*role).to_owned(),
                    content: content.clone(),
                })
                .collect::<Vec<_>>()
        );
        assert!(store.session_messages("s2").unwrap().is_empty());
        assert!(store.session_messages("nope").unwrap().is_empty());

        // Newest first, with counts.
        let list = store.list_sessions(10).unwrap();
        let ids: Vec<&str> = list.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["s2", "s3", "s1"]);
        assert_eq!(
            list[2],
            SessionSummary {
                id: "s1".into(),
                started_ms: 1_000,
                front_end: "cli".into(),
                model: "claude-sonnet-4-5".into(),
                title: Some("the time".into()),
                messages: 3,
                last_message_ms: Some(1_002),
            }
        );
        assert_eq!(list[0].messages, 0);
        assert_eq!(list[0].last_message_ms, None);
        assert_eq!(store.list_sessions(1).unwrap()[0].id, "s2");

        // A repeated seq, a repeated id and an unknown session are errors, and write nothing.
        let content = serde_json::json!("again");
        assert!(
            store
                .append_session_message("s1", 1, 9, "user", &content)
                .is_err()
        );
        assert!(store.create_session("s1", "cli", "m", 0).is_err());
        let error = store
            .append_session_message("ghost", 0, 9, "user", &content)
            .unwrap_err();
        assert!(matches!(error, StoreError::NoSuchSession { .. }), "{error}");
        assert!(matches!(
            store.set_session_title("ghost", None),
            Err(StoreError::NoSuchSession { .. })
        ));
        assert_eq!(store.session_messages("s1").unwrap().len(), 3);
    }

    #[test]
    fn a_message_over_the_size_cap_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let mut store = Store::open(&path).unwrap();
        store.create_session("s", "cli", "m", 0).unwrap();
        // The quotes make the JSON two bytes longer than the string.
        let fits = serde_json::json!("x".repeat(MAX_SESSION_CONTENT_BYTES - 2));
        store
            .append_session_message("s", 0, 0, "tool", &fits)
            .unwrap();
        let over = serde_json::json!("x".repeat(MAX_SESSION_CONTENT_BYTES - 1));
        let error = store
            .append_session_message("s", 1, 0, "tool", &over)
            .unwrap_err();
        assert!(
            matches!(
                error,
                StoreError::MessageTooLarge {
                    seq: 1,
                    size,
                    limit: MAX_SESSION_CONTENT_BYTES,
                    ..
                } if size == MAX_SESSION_CONTENT_BYTES + 1
            ),
            "{error}"
        );
        let message = error.to_string();
        assert!(
            message.contains("message 1 of session `s`") && message.contains("16777216-byte limit"),
            "{message}"
        );
        assert_eq!(store.session_messages("s").unwrap().len(), 1);
    }

    #[test]
    fn a_version_3_database_keeps_its_data_and_gains_sessions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        {
            // What Warden with the first three migrations wrote.
            let conn = database_at_version(&path, 3);
            conn.execute(
                "INSERT INTO audit (time_ms, front_end, server, tool, arguments, reasons,
                     executed, outcome)
                 VALUES (7, 'cli', 's', 's__t', '{}', '[]', 1, 'ok')",
                [],
            )
            .unwrap();
        }
        let mut store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as i64);
        assert_eq!(store.audit(&AuditFilter::default(), 10).unwrap().len(), 1);
        assert!(store.list_sessions(10).unwrap().is_empty());
        store.create_session("s", "cli", "m", 1).unwrap();
        store
            .append_session_message("s", 0, 2, "user", &serde_json::json!("hi"))
            .unwrap();
        assert_eq!(store.list_sessions(10).unwrap()[0].messages, 1);
    }
}
