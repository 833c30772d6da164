//! The catalogue cache, host side: what a server offered when it last started, kept in the
//! user's state store beside the pins, so that listing and searching tools need not start
//! every server (decision 0036).
//!
//! - **Keyed by what the server is.** A row is recorded under the server's pin key and an
//!   [`identity`]: the sha256 of its approved definition ([`approved_definition`]: command,
//!   arguments, environment by hash, sandbox, origin) and of its executable pin (program,
//!   executed files, package), and the version of the description scan that reviewed it.
//!   When any changes, the row is stale and the server is started to list its tools again.
//! - **Only ever a view of what was reviewed.** A row holds the offered tools' names and
//!   definition hashes; the definitions are read from the pinned ones, and a row naming a
//!   tool whose pin differs (or is gone) is stale as a whole. Quarantined and drifted tools
//!   were never offered, so they are not in it. A server started later is reviewed live,
//!   exactly as without a cache: a definition that differs from its pin is drift, held
//!   back, and a call decided on the cached definition is refused at send.
//! - **The user's, not the project's.** The cache lives in the state store
//!   (`$XDG_STATE_HOME/warden/state.db`); nothing in a repository can seed it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use warden_config::ServerSpec;
use warden_mcp::{CacheScope, Era, ListFreshness, ServerInfo, ToolDef};
use warden_store::catalogue::CachedCatalogue;
use warden_store::{Store, StoreError};

use crate::approvals::{approved_definition, canonical, sha256_hex, tool_pin};
use crate::pins::key_for;

/// A server's catalogue as cached.
#[derive(Debug, Clone)]
pub struct Cached {
    /// What the server said about itself when it last started.
    pub info: ServerInfo,
    /// The tools it offered then (their pinned definitions), in its order.
    pub tools: Vec<ToolDef>,
    /// When they were read from the server.
    pub fetched: SystemTime,
}

/// Whether `spec`'s catalogue may be cached: a local (stdio) server's always; a remote
/// one's when its server gave the list a lifetime ([`lifetime`]); never a relayed server's
/// (its start is its relay's, inside the sandbox).
pub fn cacheable(spec: &ServerSpec) -> bool {
    matches!(
        spec.transport,
        warden_config::TransportSpec::Stdio { .. } | warden_config::TransportSpec::Http { .. }
    )
}

/// The longest a remote server's list is kept, whatever its `ttlMs` says: a day.
pub const MAX_REMOTE_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// How long a list of `spec` read with the hints `freshness` may be shown without asking
/// the server: `Some(None)` as long as what the server is stays the same (a local server:
/// its row is keyed by what runs, decision 0036), `Some(Some(ttl))` for that long (a
/// remote server's `ttlMs`, at most [`MAX_REMOTE_TTL`]), `None` not at all.
///
/// A remote list is kept only when the server said it may be reused (`ttlMs` above zero,
/// 2026-07-28) and by whom: a `public` list whoever is signed in; a `private` one only
/// when the authorization it was read under is part of the server's definition (a
/// configured `Authorization` header, which keeps OAuth out and is in the row's key by
/// hash). Any other `private` list may change with a sign-in or sign-out that leaves the
/// definition as it is, so it is read from the server every time.
pub fn lifetime(spec: &ServerSpec, freshness: Option<ListFreshness>) -> Option<Option<Duration>> {
    match &spec.transport {
        warden_config::TransportSpec::Stdio { .. } => Some(None),
        warden_config::TransportSpec::Http { .. } => {
            let freshness = freshness?;
            let reusable =
                freshness.scope == CacheScope::Public || spec.transport.sets_authorization();
            (reusable && !freshness.ttl.is_zero())
                .then_some(Some(freshness.ttl.min(MAX_REMOTE_TTL)))
        }
        warden_config::TransportSpec::Relay { .. } => None,
    }
}

/// What a cache row of `spec` is keyed by: the sha256 of its approved definition, of its
/// executable pin as stored now (none before its first start, or for a remote server), and
/// of the on-disk identity of every pinned file now (device, inode, size, change time: a
/// `stat` each, no hashing), so that an executable replaced or written since the row was
/// recorded makes it stale, and the server is started, where its pin is checked.
pub fn identity(store: &Store, spec: &ServerSpec) -> Result<String, StoreError> {
    identity_scanned(store, spec, &scan_version())
}

/// [`identity`] under the description scan `scan` ([`scan_version`]).
fn identity_scanned(store: &Store, spec: &ServerSpec, scan: &Value) -> Result<String, StoreError> {
    let pin = store.pin_for(&key_for(spec))?;
    let pin = pin.map(|pin| {
        let on_disk: Vec<Value> = std::iter::once(&pin.program)
            .chain(pin.files.iter().map(|(path, _)| path))
            .map(|path| file_identity(path))
            .collect();
        json!({
            "rule": pin.rule,
            "program": pin.program,
            "program_sha256": pin.program_sha256,
            "files": pin.files,
            "package": pin.package,
            "on_disk": on_disk,
        })
    });
    let value = json!({
        "definition": approved_definition(spec, None),
        "pin": pin,
        "scan": scan,
    });
    Ok(sha256_hex(canonical(&value).as_bytes()))
}

/// Bumped whenever what the review decides changes in a way [`scan_version`] cannot see
/// (a rule's grammar or wording, the quarantine's conditions, the built-in model's weights
/// under an unchanged threshold). 2: the override grammars and the fourth-round model
/// (decision 0027, revision 3). 3: a sign-in tool's short description of its own secret
/// field reads as naming its own field. 4: tags glued to words, a secret field the tool has
/// no use for, the fifth-round model (decision 0027, revision 4). 5: the server's own tools
/// resolved in its text, other tools named by kind, the sixth-round model (revision 5).
/// 6: `length.overlong` only for unread text, deprecation notes about the tool itself, the
/// seventh-round model (revision 6). 7: four structural rules (`request.sensitive`,
/// `instruction.shadowing`, `instruction.preference`, `exfil.destination`; revision 7).
const SCAN_RULES: u32 = 7;

/// What the description scan that reviewed a cached list was: [`SCAN_RULES`], Warden's
/// version, the scanner's rule ids and its model's threshold. A row recorded under another
/// scan is stale, so that an upgraded scanner reviews every server again (a list cached as
/// clean was only clean to the scanner of its day).
pub(crate) fn scan_version() -> Value {
    let threshold = warden_policy::scan::model::Model::builtin()
        .ok()
        .map(|model| model.threshold().to_bits());
    json!({
        "rules": SCAN_RULES,
        "warden": env!("CARGO_PKG_VERSION"),
        "flags": warden_policy::scan::FLAG_IDS,
        "threshold": threshold,
    })
}

/// `path`'s device, inode, size and change time, or `null` when it cannot be read.
fn file_identity(path: &std::path::Path) -> Value {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(path) {
        Ok(meta) => json!([
            meta.dev(),
            meta.ino(),
            meta.size(),
            meta.ctime(),
            meta.ctime_nsec()
        ]),
        Err(_) => Value::Null,
    }
}

/// `spec`'s cached catalogue, if there is one for what the server is now and every tool in
/// it is still pinned with the same definition; `None` means the server must be started to
/// know its tools.
pub fn load(store: &Store, spec: &ServerSpec) -> Result<Option<Cached>, StoreError> {
    load_scanned(store, spec, &scan_version())
}

/// [`load`] for a host whose description scan is `scan` ([`scan_version`]).
pub(crate) fn load_scanned(
    store: &Store,
    spec: &ServerSpec,
    scan: &Value,
) -> Result<Option<Cached>, StoreError> {
    let key = key_for(spec);
    let Some(row) = store.cached_catalogue(&key, &identity_scanned(store, spec, scan)?)? else {
        return Ok(None);
    };
    if row
        .expires_ms
        .is_some_and(|expires| crate::audit::now_ms() >= expires)
    {
        // Past its server's lifetime: the server is asked again.
        return Ok(None);
    }
    let Some(pins) = store.tool_pins(&key)? else {
        return Ok(None);
    };
    let mut tools = Vec::with_capacity(row.tools.len());
    for (name, sha256) in &row.tools {
        let Some(pin) = pins
            .iter()
            .find(|pin| &pin.tool == name && &pin.sha256 == sha256)
        else {
            // Approved again since, or forgotten: the row is not what is pinned now.
            return Ok(None);
        };
        let Some(def) = serde_json::from_str(&pin.definition)
            .ok()
            .and_then(|value| tool_from_pin(&value))
        else {
            return Ok(None);
        };
        tools.push(def);
    }
    let Some(info) = serde_json::from_str(&row.info)
        .ok()
        .and_then(|value| info_from_json(&value))
    else {
        return Ok(None);
    };
    let fetched = UNIX_EPOCH + Duration::from_millis(u64::try_from(row.fetched_ms).unwrap_or(0));
    Ok(Some(Cached {
        info,
        tools,
        fetched,
    }))
}

/// The cache row of `spec`, which offered `offered` after the review and said `info`,
/// fresh for `ttl` (`None`: as long as its identity holds).
pub fn row(
    store: &Store,
    spec: &ServerSpec,
    info: &ServerInfo,
    offered: &[ToolDef],
    ttl: Option<Duration>,
) -> Result<(String, CachedCatalogue), StoreError> {
    let fetched_ms = crate::audit::now_ms();
    let expires_ms = ttl
        .map(|ttl| fetched_ms.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)));
    let tools = offered
        .iter()
        .map(|def| (def.name.clone(), tool_pin(def).sha256))
        .collect();
    Ok((
        key_for(spec),
        CachedCatalogue {
            identity: identity(store, spec)?,
            info: info_to_json(info).to_string(),
            tools,
            fetched_ms,
            expires_ms,
        },
    ))
}

/// One server's reviewed list, as the cache is told it.
#[derive(Clone, Copy)]
pub struct Reviewed<'a> {
    /// The server.
    pub spec: &'a ServerSpec,
    /// What it said about itself.
    pub info: &'a ServerInfo,
    /// The tools the review let it offer.
    pub offered: &'a [ToolDef],
    /// Whether the review held anything back.
    pub held: bool,
    /// The list hints its connection read with the list ([`lifetime`]).
    pub freshness: Option<ListFreshness>,
}

/// Records the catalogues of `servers`, in one transaction; a failure is logged (the cache
/// only saves time). A server whose review held something back (drift, quarantine) gets no
/// row, and loses the one it had: every listing starts it, so what is held back, and why, is
/// shown each time until it is approved. So does a remote server whose list may no longer
/// be reused ([`lifetime`]).
pub fn save(store: &mut Store, servers: &[Reviewed<'_>]) {
    let mut rows = Vec::with_capacity(servers.len());
    let mut forget = Vec::new();
    for server in servers {
        let spec = server.spec;
        if !cacheable(spec) {
            continue;
        }
        let Some(ttl) = lifetime(spec, server.freshness).filter(|_| !server.held) else {
            forget.push(key_for(spec));
            continue;
        };
        match row(store, spec, server.info, server.offered, ttl) {
            Ok(row) => rows.push(row),
            Err(error) => {
                tracing::warn!(server = %spec.name, "the catalogue cache is not updated: {error}");
            }
        }
    }
    if rows.is_empty() && forget.is_empty() {
        return;
    }
    if let Err(error) = store.save_cached_catalogues(&rows, &forget) {
        tracing::warn!("the catalogue cache is not updated: {error}");
    }
}

/// A tool definition from its pinned form ([`crate::approvals::tool_definition`]).
fn tool_from_pin(value: &Value) -> Option<ToolDef> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    let some = |key: &str| value.get(key).filter(|v| !v.is_null()).cloned();
    Some(ToolDef {
        name: text("name")?,
        title: text("title"),
        description: text("description"),
        input_schema: value.get("inputSchema")?.clone(),
        output_schema: some("outputSchema"),
        annotations: some("annotations"),
    })
}

fn info_to_json(info: &ServerInfo) -> Value {
    json!({
        "era": info.era,
        "protocol_version": info.protocol_version,
        "name": info.name,
        "version": info.version,
        "title": info.title,
        "capabilities": info.capabilities,
        "instructions": info.instructions,
        "program": info.program,
    })
}

fn info_from_json(value: &Value) -> Option<ServerInfo> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    let era = match value.get("era")?.as_str()? {
        "modern" => Era::Modern,
        "legacy" => Era::Legacy,
        _ => return None,
    };
    Some(ServerInfo {
        era,
        protocol_version: text("protocol_version")?,
        name: text("name"),
        version: text("version"),
        title: text("title"),
        capabilities: value.get("capabilities").cloned().unwrap_or(Value::Null),
        instructions: text("instructions"),
        program: text("program").map(Into::into),
        connect_attempts: 0,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::approvals::tool_pins;

    fn spec(command: &str) -> ServerSpec {
        crate::test_support::stdio_spec("s", command)
    }

    fn reviewed<'a>(
        spec: &'a ServerSpec,
        info: &'a ServerInfo,
        offered: &'a [ToolDef],
        held: bool,
    ) -> Reviewed<'a> {
        Reviewed {
            spec,
            info,
            offered,
            held,
            freshness: None,
        }
    }

    fn tool(name: &str, description: &str) -> ToolDef {
        ToolDef {
            name: name.into(),
            title: None,
            description: Some(description.into()),
            input_schema: json!({"type": "object"}),
            output_schema: None,
            annotations: Some(json!({"readOnlyHint": true})),
        }
    }

    fn info() -> ServerInfo {
        ServerInfo {
            era: Era::Legacy,
            protocol_version: "2025-11-25".into(),
            name: Some("s".into()),
            version: None,
            title: None,
            capabilities: json!({"tools": {}}),
            instructions: Some("Use echo.".into()),
            program: None,
            connect_attempts: 1,
        }
    }

    #[test]
    fn a_cached_catalogue_is_what_was_pinned_for_what_the_server_is() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path().join("state.db")).unwrap();
        let s = spec("/bin/one");
        let tools = vec![tool("echo", "Echoes."), tool("add", "Adds.")];
        store
            .replace_tool_pins(&key_for(&s), &tool_pins(&tools))
            .unwrap();
        assert!(load(&store, &s).unwrap().is_none());
        save(&mut store, &[reviewed(&s, &info(), &tools, false)]);
        let cached = load(&store, &s).unwrap().unwrap();
        assert_eq!(cached.tools, tools);
        assert_eq!(cached.info.instructions.as_deref(), Some("Use echo."));
        assert!(
            SystemTime::now().duration_since(cached.fetched).unwrap() < Duration::from_secs(60)
        );

        // Another command under the same name: another server, nothing cached for it.
        assert!(load(&store, &spec("/bin/two")).unwrap().is_none());

        // A review that held something back removes the row: the server is started (and
        // what it holds back shown) until that is approved.
        save(&mut store, &[reviewed(&s, &info(), &tools, true)]);
        assert!(load(&store, &s).unwrap().is_none());
        save(&mut store, &[reviewed(&s, &info(), &tools, false)]);
        // A tool approved again with another definition: the row no longer shows what is
        // pinned, and is not used.
        let redefined = vec![tool("echo", "Echoes, and more."), tool("add", "Adds.")];
        store
            .replace_tool_pins(&key_for(&s), &tool_pins(&redefined))
            .unwrap();
        assert!(load(&store, &s).unwrap().is_none());
    }

    /// The description scan is part of the identity: a row recorded under one scan (rules,
    /// Warden's version, rule ids, model threshold) is stale to a host whose scan differs
    /// in any of them, so an upgraded scanner reviews every server again. The control: the
    /// same scan reads the row.
    #[test]
    fn a_row_recorded_under_another_description_scan_is_stale() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path().join("state.db")).unwrap();
        let s = spec("/bin/one");
        let tools = vec![tool("echo", "Echoes.")];
        store
            .replace_tool_pins(&key_for(&s), &tool_pins(&tools))
            .unwrap();
        save(&mut store, &[reviewed(&s, &info(), &tools, false)]);
        let now = scan_version();
        assert!(load_scanned(&store, &s, &now).unwrap().is_some());
        for (field, other) in [
            ("rules", json!(SCAN_RULES + 1)),
            ("warden", json!("0.0.0-other")),
            ("flags", json!(["name.confusable"])),
            ("threshold", json!(0)),
        ] {
            let mut scan = now.clone();
            assert_ne!(scan[field], other, "{field}");
            scan[field] = other;
            assert!(
                load_scanned(&store, &s, &scan).unwrap().is_none(),
                "a row read under another scan's {field}"
            );
        }
    }

    /// The executable pin is part of the identity: a server whose program was pinned anew
    /// (`warden pin` after an update) is started to list its tools again.
    #[test]
    fn a_new_executable_pin_makes_the_row_stale() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path().join("state.db")).unwrap();
        let s = spec("/bin/one");
        let tools = vec![tool("echo", "Echoes.")];
        store
            .replace_tool_pins(&key_for(&s), &tool_pins(&tools))
            .unwrap();
        let pin = |sha: &str| warden_store::Pin {
            rule: warden_store::PIN_RULE_EXECUTED,
            program: "/bin/one".into(),
            program_sha256: sha.into(),
            files: Vec::new(),
            package: None,
        };
        store.save_pin(&key_for(&s), &pin("aa")).unwrap();
        save(&mut store, &[reviewed(&s, &info(), &tools, false)]);
        assert!(load(&store, &s).unwrap().is_some());
        store.save_pin(&key_for(&s), &pin("bb")).unwrap();
        assert!(load(&store, &s).unwrap().is_none());
    }

    /// A pinned file written since the row was recorded (same pin in the store) makes the
    /// row stale: the server is started, and its pin check refuses the changed file.
    #[test]
    fn a_pinned_file_changed_on_disk_makes_the_row_stale() {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("server");
        std::fs::write(&program, b"one").unwrap();
        let mut store = Store::open(dir.path().join("state.db")).unwrap();
        let s = spec(program.to_str().unwrap());
        let tools = vec![tool("echo", "Echoes.")];
        store
            .replace_tool_pins(&key_for(&s), &tool_pins(&tools))
            .unwrap();
        let pin = warden_store::Pin {
            rule: warden_store::PIN_RULE_EXECUTED,
            program: program.clone(),
            program_sha256: "aa".into(),
            files: Vec::new(),
            package: None,
        };
        store.save_pin(&key_for(&s), &pin).unwrap();
        save(&mut store, &[reviewed(&s, &info(), &tools, false)]);
        assert!(load(&store, &s).unwrap().is_some());
        std::fs::write(&program, b"two, longer").unwrap();
        assert!(load(&store, &s).unwrap().is_none());
    }

    fn remote(headers: &[(&str, &str)]) -> ServerSpec {
        ServerSpec {
            transport: warden_config::TransportSpec::Http {
                url: "https://mcp.example.com/mcp".into(),
                headers: headers
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
                settings: Default::default(),
            },
            ..spec("/unused")
        }
    }

    fn hints(ttl_ms: u64, scope: CacheScope) -> Option<ListFreshness> {
        Some(ListFreshness {
            ttl: Duration::from_millis(ttl_ms),
            scope,
        })
    }

    /// A remote server's list is kept only as long and for whom its server said: a public
    /// list with a lifetime is read from the cache until that lifetime ends; a private one
    /// only when the authorization is the configured header (part of the key); without a
    /// lifetime, or private under a sign-in the definition does not show, it is not kept,
    /// and a row it had is removed. A relayed server is never kept.
    #[test]
    fn a_remote_list_is_kept_as_long_and_for_whom_its_server_said() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path().join("state.db")).unwrap();
        let tools = vec![tool("echo", "Echoes.")];
        let save_with = |store: &mut Store, s: &ServerSpec, freshness| {
            store
                .replace_tool_pins(&key_for(s), &tool_pins(&tools))
                .unwrap();
            save(
                store,
                &[Reviewed {
                    freshness,
                    ..reviewed(s, &info(), &tools, false)
                }],
            );
        };

        let public = remote(&[]);
        save_with(&mut store, &public, hints(60_000, CacheScope::Public));
        let cached = load(&store, &public).unwrap().unwrap();
        assert_eq!(cached.tools, tools);

        // A lifetime that has run out: asked again.
        save_with(&mut store, &public, hints(1, CacheScope::Public));
        std::thread::sleep(Duration::from_millis(20));
        assert!(load(&store, &public).unwrap().is_none());

        // No lifetime (absent or zero): not kept, and the row it had is gone.
        save_with(&mut store, &public, hints(60_000, CacheScope::Public));
        assert!(load(&store, &public).unwrap().is_some());
        save_with(&mut store, &public, hints(0, CacheScope::Public));
        assert!(load(&store, &public).unwrap().is_none());
        save_with(&mut store, &public, hints(60_000, CacheScope::Public));
        save_with(&mut store, &public, None);
        assert!(load(&store, &public).unwrap().is_none());

        // Private, under whatever sign-in: not kept.
        save_with(&mut store, &public, hints(60_000, CacheScope::Private));
        assert!(load(&store, &public).unwrap().is_none());

        // Private under the configured header: kept, and only for that header.
        let own = remote(&[("Authorization", "Bearer one")]);
        save_with(&mut store, &own, hints(60_000, CacheScope::Private));
        assert!(load(&store, &own).unwrap().is_some());
        let other = remote(&[("Authorization", "Bearer two")]);
        assert!(load(&store, &other).unwrap().is_none());

        // A lifetime past a day is held to a day.
        assert_eq!(
            lifetime(&public, hints(u64::MAX, CacheScope::Public)),
            Some(Some(MAX_REMOTE_TTL))
        );
        // A local server's list lives as long as what runs; a relayed one is never kept.
        assert_eq!(lifetime(&spec("/bin/one"), None), Some(None));
        let relayed = ServerSpec {
            transport: warden_config::TransportSpec::Relay {
                relay: "box".into(),
                channel: warden_config::RelayChannel {
                    command: vec!["true".into()],
                    secrets: Default::default(),
                    reconnect: Default::default(),
                },
            },
            ..spec("/unused")
        };
        assert!(!cacheable(&relayed));
        assert_eq!(lifetime(&relayed, hints(60_000, CacheScope::Public)), None);
    }
}
