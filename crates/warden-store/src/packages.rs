//! Pins of installed packages: for a server written as `npx -y PKG` or `uvx PKG`, Warden
//! installs the package itself (crate `warden-packages`) and records here what it resolved
//! and installed, keyed like executable pins ([`crate::server_key`]). A start runs the
//! installed entry point only while the lockfile and the installed tree still hash to
//! what is recorded; `warden update` replaces the row once the user accepts.
//!
//! Kept in its own table (migration 7) beside [`crate::Pin`]: a store written before it
//! simply has no package pins, and the executable pin of the same server stays as it was.

use rusqlite::{OptionalExtension, params};

use crate::{Pin, Store, StoreError};

/// Migration 7.
pub(crate) const MIGRATION: &str = "CREATE TABLE package_pins (
        server_key      TEXT PRIMARY KEY NOT NULL,
        ecosystem       TEXT NOT NULL,
        name            TEXT NOT NULL,
        requested       TEXT NOT NULL,
        version         TEXT NOT NULL,
        dir             TEXT NOT NULL,
        lock_sha256     TEXT NOT NULL,
        tree_sha256     TEXT NOT NULL,
        manifest        TEXT NOT NULL,
        pinned_at       INTEGER NOT NULL
    ) STRICT;";

/// What was installed for one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackagePin {
    /// `npm` or `pypi`.
    pub ecosystem: String,
    /// The package's name as written in the server's command.
    pub name: String,
    /// The version requested as written (`1.2.3`, `latest`, `==1.2.3`, empty for none).
    pub requested: String,
    /// The version resolved and installed.
    pub version: String,
    /// The installation directory (absolute).
    pub dir: String,
    /// sha256 of the lockfile (`package-lock.json`, `requirements.lock`), lowercase hex.
    pub lock_sha256: String,
    /// sha256 of the installed tree's manifest.
    pub tree_sha256: String,
    /// The manifest itself (every installed file and its hash), as its owner serialises it:
    /// what `warden update` compares a new install with.
    pub manifest: String,
}

impl Store {
    /// The package pin stored for `server_key`, if any.
    pub fn package_pin_for(&self, server_key: &str) -> Result<Option<PackagePin>, StoreError> {
        self.conn
            .query_row(
                "SELECT ecosystem, name, requested, version, dir, lock_sha256, tree_sha256,
                     manifest
                 FROM package_pins WHERE server_key = ?1",
                params![server_key],
                |row| {
                    Ok(PackagePin {
                        ecosystem: row.get(0)?,
                        name: row.get(1)?,
                        requested: row.get(2)?,
                        version: row.get(3)?,
                        dir: row.get(4)?,
                        lock_sha256: row.get(5)?,
                        tree_sha256: row.get(6)?,
                        manifest: row.get(7)?,
                    })
                },
            )
            .optional()
            .map_err(|source| self.sqlite(source))
    }

    /// Every package pin, with its server key, sorted by key (`warden packages gc`).
    pub fn package_pins(&self) -> Result<Vec<(String, PackagePin)>, StoreError> {
        let mut statement = self
            .conn
            .prepare(
                "SELECT server_key, ecosystem, name, requested, version, dir, lock_sha256,
                     tree_sha256, manifest
                 FROM package_pins ORDER BY server_key",
            )
            .map_err(|source| self.sqlite(source))?;
        let rows = statement
            .query_map([], |row| {
                Ok((
                    row.get(0)?,
                    PackagePin {
                        ecosystem: row.get(1)?,
                        name: row.get(2)?,
                        requested: row.get(3)?,
                        version: row.get(4)?,
                        dir: row.get(5)?,
                        lock_sha256: row.get(6)?,
                        tree_sha256: row.get(7)?,
                        manifest: row.get(8)?,
                    },
                ))
            })
            .map_err(|source| self.sqlite(source))?;
        rows.collect::<Result<Vec<_>, _>>()
            .map_err(|source| self.sqlite(source))
    }

    /// Drops the package pin of `server_key`; whether there was one. Its executable pin
    /// stays (decision 0019's).
    pub fn remove_package_pin(&mut self, server_key: &str) -> Result<bool, StoreError> {
        let removed = self.write(|tx| {
            tx.execute(
                "DELETE FROM package_pins WHERE server_key = ?1",
                params![server_key],
            )
        })?;
        Ok(removed > 0)
    }

    /// Records `pin` for `server_key`, replacing any earlier one, in one transaction.
    pub fn save_package_pin(
        &mut self,
        server_key: &str,
        pin: &PackagePin,
    ) -> Result<(), StoreError> {
        let now = crate::now_secs();
        self.write(|tx| insert_package_pin(tx, server_key, pin, now))?;
        Ok(())
    }

    /// Records the package pin `package` and the executable pin `executable` of
    /// `server_key` together, in one transaction: both move to a new install, or neither
    /// does (`warden update`).
    pub fn save_package_and_executable_pins(
        &mut self,
        server_key: &str,
        package: &PackagePin,
        executable: &Pin,
    ) -> Result<(), StoreError> {
        let files = self.pin_files(server_key, executable)?;
        let now = crate::now_secs();
        self.write(|tx| {
            insert_package_pin(tx, server_key, package, now)?;
            crate::insert_pin(tx, server_key, executable, &files, now)
        })?;
        Ok(())
    }
}

fn insert_package_pin(
    tx: &rusqlite::Transaction<'_>,
    server_key: &str,
    pin: &PackagePin,
    now: i64,
) -> rusqlite::Result<usize> {
    tx.execute(
        "INSERT INTO package_pins (server_key, ecosystem, name, requested, version, dir,
             lock_sha256, tree_sha256, manifest, pinned_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
         ON CONFLICT(server_key) DO UPDATE SET ecosystem = excluded.ecosystem,
             name = excluded.name, requested = excluded.requested,
             version = excluded.version, dir = excluded.dir,
             lock_sha256 = excluded.lock_sha256, tree_sha256 = excluded.tree_sha256,
             manifest = excluded.manifest, pinned_at = excluded.pinned_at",
        params![
            server_key,
            pin.ecosystem,
            pin.name,
            pin.requested,
            pin.version,
            pin.dir,
            pin.lock_sha256,
            pin.tree_sha256,
            pin.manifest,
            now
        ],
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn pin(version: &str) -> PackagePin {
        PackagePin {
            ecosystem: "npm".into(),
            name: "@scope/pkg".into(),
            requested: "latest".into(),
            version: version.into(),
            dir: "/state/warden/packages/abc/1".into(),
            lock_sha256: "ab".repeat(32),
            tree_sha256: "cd".repeat(32),
            manifest: "[]".into(),
        }
    }

    #[test]
    fn package_pins_are_listed_and_dropped_one_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path().join("state.db")).unwrap();
        store.save_package_pin("b", &pin("2")).unwrap();
        store.save_package_pin("a", &pin("1")).unwrap();
        let listed = store.package_pins().unwrap();
        assert_eq!(
            listed
                .iter()
                .map(|(k, p)| (k.as_str(), p.version.as_str()))
                .collect::<Vec<_>>(),
            [("a", "1"), ("b", "2")]
        );
        assert!(store.remove_package_pin("a").unwrap());
        assert!(!store.remove_package_pin("a").unwrap());
        assert_eq!(store.package_pins().unwrap().len(), 1);
        assert!(store.package_pin_for("b").unwrap().is_some());
    }

    #[test]
    fn a_package_pin_is_saved_replaced_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path().join("state.db")).unwrap();
        assert_eq!(store.package_pin_for("k").unwrap(), None);
        store.save_package_pin("k", &pin("1.0.0")).unwrap();
        assert_eq!(store.package_pin_for("k").unwrap(), Some(pin("1.0.0")));
        store.save_package_pin("k", &pin("1.1.0")).unwrap();
        assert_eq!(store.package_pin_for("k").unwrap(), Some(pin("1.1.0")));
        assert_eq!(store.package_pin_for("other").unwrap(), None);
    }

    fn exe(program: &str) -> Pin {
        Pin {
            rule: crate::PIN_RULE_EXECUTED,
            program: program.into(),
            program_sha256: "ef".repeat(32),
            files: vec![("/state/x/index.js".into(), "01".repeat(32))],
            package: None,
        }
    }

    #[test]
    fn both_pins_move_together_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path().join("state.db")).unwrap();
        store
            .save_package_and_executable_pins("k", &pin("1.0.0"), &exe("/usr/bin/node"))
            .unwrap();
        assert_eq!(store.package_pin_for("k").unwrap(), Some(pin("1.0.0")));
        assert_eq!(store.pin_for("k").unwrap(), Some(exe("/usr/bin/node")));
        // Replay a failure between the two writes: the executable pin cannot be written.
        store
            .conn
            .execute_batch(
                "CREATE TRIGGER refuse BEFORE UPDATE ON pins BEGIN
                     SELECT RAISE(ABORT, 'refused by the test');
                 END;",
            )
            .unwrap();
        let error = store
            .save_package_and_executable_pins("k", &pin("2.0.0"), &exe("/opt/node"))
            .unwrap_err();
        assert!(error.to_string().contains("refused by the test"), "{error}");
        // The package pin did not move alone.
        assert_eq!(store.package_pin_for("k").unwrap(), Some(pin("1.0.0")));
        assert_eq!(store.pin_for("k").unwrap(), Some(exe("/usr/bin/node")));
    }

    #[test]
    fn a_store_of_the_previous_schema_keeps_its_pins_and_gains_the_table() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        {
            let conn = rusqlite::Connection::open(&path).unwrap();
            for migration in &crate::MIGRATIONS[..6] {
                conn.execute_batch(migration).unwrap();
            }
            conn.pragma_update(None, "user_version", 6).unwrap();
            conn.execute(
                "INSERT INTO pins (server_key, program, program_sha256, files, package,
                     pinned_at) VALUES ('k', '/usr/bin/npx', 'ab', '[]', 'pkg', 1)",
                [],
            )
            .unwrap();
        }
        let mut store = Store::open(&path).unwrap();
        assert_eq!(
            store.pin_for("k").unwrap().unwrap().package.as_deref(),
            Some("pkg")
        );
        assert_eq!(store.package_pin_for("k").unwrap(), None);
        store.save_package_pin("k", &pin("2.0.0")).unwrap();
        assert_eq!(
            store.package_pin_for("k").unwrap().unwrap().version,
            "2.0.0"
        );
    }
}
