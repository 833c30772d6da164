//! The catalogue cache: what each server offered when it last started (its self-description
//! and the names and definition hashes of the tools it was allowed to offer), so that
//! `warden tools`, the search and the gateway's `tools/list` can answer without starting
//! it.
//!
//! A row is keyed by the server's pin key ([`crate::server_key`]) and carries the
//! `identity` it was recorded under: the caller's hash of the server's approved definition
//! and executable pin. A reader passes the identity it computes now; a row recorded under
//! another identity is not returned (the server's definition or what it runs changed since).
//! The tools are stored by name and definition hash only: the definitions themselves are
//! read from the pinned definitions ([`Store::tool_pins`]), so a row can never make a
//! definition appear that is not pinned. Each write is one transaction: a reader sees the
//! old row or the new one, never half of either.

use rusqlite::params;

use crate::{Store, StoreError};

/// The most tools one cached row may hold (as many as a server may list).
pub const MAX_CACHED_TOOLS: usize = 4096;

/// One server's cached catalogue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedCatalogue {
    /// The identity it was recorded under (the caller's hash of what the server is).
    pub identity: String,
    /// What the server said about itself (JSON, the caller's format).
    pub info: String,
    /// The tools it offered, in its order: raw name and sha256 of the pinned definition.
    pub tools: Vec<(String, String)>,
    /// When it was read from the server, in milliseconds since the Unix epoch.
    pub fetched_ms: i64,
    /// When it stops being fresh (milliseconds since the Unix epoch), for a list whose
    /// server gave it a lifetime; `None`: fresh for as long as the identity holds.
    pub expires_ms: Option<i64>,
}

impl Store {
    /// The cached catalogue of the server stored under `server_key`, if one was recorded
    /// under `identity` (a row recorded under another identity is stale and not returned).
    pub fn cached_catalogue(
        &self,
        server_key: &str,
        identity: &str,
    ) -> Result<Option<CachedCatalogue>, StoreError> {
        let row = self.row_for(
            "SELECT identity, info, tools, fetched_ms, expires_ms FROM catalogue_cache
             WHERE server_key = ?1",
            server_key,
            |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, i64>(3)?,
                    row.get::<_, Option<i64>>(4)?,
                ))
            },
        )?;
        let Some((stored, info, tools, fetched_ms, expires_ms)) = row else {
            return Ok(None);
        };
        if stored != identity {
            return Ok(None);
        }
        let tools: Vec<(String, String)> =
            serde_json::from_str(&tools).map_err(|error| StoreError::Corrupt {
                path: self.path.clone(),
                key: server_key.to_owned(),
                reason: format!("catalogue_cache.tools: {error}"),
            })?;
        Ok(Some(CachedCatalogue {
            identity: stored,
            info,
            tools,
            fetched_ms,
            expires_ms,
        }))
    }

    /// Records `entries` (server key and catalogue), each replacing the server's earlier
    /// row, and deletes the rows of the servers in `forget`, all in one transaction. A row
    /// with more than [`MAX_CACHED_TOOLS`] tools is refused, and then nothing is written.
    pub fn save_cached_catalogues(
        &mut self,
        entries: &[(String, CachedCatalogue)],
        forget: &[String],
    ) -> Result<(), StoreError> {
        let mut rows = Vec::with_capacity(entries.len());
        for (key, entry) in entries {
            if entry.tools.len() > MAX_CACHED_TOOLS {
                return Err(StoreError::Corrupt {
                    path: self.path.clone(),
                    key: key.clone(),
                    reason: format!(
                        "{} tools to cache, over the limit of {MAX_CACHED_TOOLS}",
                        entry.tools.len()
                    ),
                });
            }
            let tools =
                serde_json::to_string(&entry.tools).map_err(|error| StoreError::Corrupt {
                    path: self.path.clone(),
                    key: key.clone(),
                    reason: format!("catalogue_cache.tools: {error}"),
                })?;
            rows.push((key, entry, tools));
        }
        let path = self.path.clone();
        let sqlite = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(sqlite)?;
        for (key, entry, tools) in rows {
            tx.execute(
                "INSERT INTO catalogue_cache
                     (server_key, identity, info, tools, fetched_ms, expires_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT(server_key) DO UPDATE SET identity = excluded.identity,
                     info = excluded.info, tools = excluded.tools,
                     fetched_ms = excluded.fetched_ms, expires_ms = excluded.expires_ms",
                params![
                    key,
                    entry.identity,
                    entry.info,
                    tools,
                    entry.fetched_ms,
                    entry.expires_ms
                ],
            )
            .map_err(sqlite)?;
        }
        for key in forget {
            tx.execute(
                "DELETE FROM catalogue_cache WHERE server_key = ?1",
                params![key],
            )
            .map_err(sqlite)?;
        }
        tx.commit().map_err(sqlite)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn entry(identity: &str, tools: &[(&str, &str)]) -> CachedCatalogue {
        CachedCatalogue {
            identity: identity.into(),
            info: "{}".into(),
            tools: tools
                .iter()
                .map(|(name, sha)| ((*name).to_owned(), (*sha).to_owned()))
                .collect(),
            fetched_ms: 1_000,
            expires_ms: None,
        }
    }

    #[test]
    fn a_row_is_returned_only_under_the_identity_it_was_recorded_under() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path().join("state.db")).unwrap();
        assert_eq!(store.cached_catalogue("k", "id1").unwrap(), None);
        let first = entry("id1", &[("echo", "aa"), ("add", "bb")]);
        store
            .save_cached_catalogues(&[("k".into(), first.clone())], &[])
            .unwrap();
        assert_eq!(store.cached_catalogue("k", "id1").unwrap(), Some(first));
        // The server's definition changed: the row is stale.
        assert_eq!(store.cached_catalogue("k", "id2").unwrap(), None);
        // A new start replaces it.
        let second = entry("id2", &[("echo", "cc")]);
        store
            .save_cached_catalogues(&[("k".into(), second.clone())], &[])
            .unwrap();
        assert_eq!(store.cached_catalogue("k", "id2").unwrap(), Some(second));
        assert_eq!(store.cached_catalogue("k", "id1").unwrap(), None);
        // A server that held something back loses its row.
        store.save_cached_catalogues(&[], &["k".into()]).unwrap();
        assert_eq!(store.cached_catalogue("k", "id2").unwrap(), None);
    }

    /// A row's lifetime is kept as written and replaced with the row: a remote list's
    /// expiry, then a row without one.
    #[test]
    fn a_rows_expiry_is_kept_and_replaced_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path().join("state.db")).unwrap();
        let remote = CachedCatalogue {
            expires_ms: Some(61_000),
            ..entry("id", &[("echo", "aa")])
        };
        store
            .save_cached_catalogues(&[("k".into(), remote.clone())], &[])
            .unwrap();
        assert_eq!(store.cached_catalogue("k", "id").unwrap(), Some(remote));
        let local = entry("id", &[("echo", "aa")]);
        store
            .save_cached_catalogues(&[("k".into(), local.clone())], &[])
            .unwrap();
        assert_eq!(
            store
                .cached_catalogue("k", "id")
                .unwrap()
                .unwrap()
                .expires_ms,
            None
        );
    }

    /// A batch with one row over the limit writes nothing: no half-written state.
    #[test]
    fn a_refused_batch_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path().join("state.db")).unwrap();
        let many: Vec<(String, String)> = (0..=MAX_CACHED_TOOLS)
            .map(|i| (format!("t{i}"), "aa".to_owned()))
            .collect();
        let big = CachedCatalogue {
            tools: many,
            ..entry("id", &[])
        };
        let error = store
            .save_cached_catalogues(
                &[("a".into(), entry("id", &[("x", "y")])), ("b".into(), big)],
                &[],
            )
            .unwrap_err();
        assert!(error.to_string().contains("over the limit"), "{error}");
        assert_eq!(store.cached_catalogue("a", "id").unwrap(), None);
    }
}
