//! End-to-end tests against real MCP servers written by other people: the npm reference
//! servers (TypeScript SDK, 2025-11-25 only) and servers on the Python SDK (both eras).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;
use support::{Scratch, json, peers_dir, server_toml, stderr, stdout};

const LIMIT: Duration = Duration::from_secs(60);

/// The six peers of the foundation issue, configured for a scratch folder.
fn six_peers(scratch: &Scratch) -> String {
    support::peer_entries(scratch)
        .into_iter()
        .map(|(_, toml)| toml)
        .collect()
}

fn servers_by_name(listing: &Value) -> BTreeMap<String, Value> {
    listing["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|server| (server["name"].as_str().unwrap().to_owned(), server.clone()))
        .collect()
}

fn tool_names(server: &Value) -> Vec<String> {
    server["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn all_six_peers_connect_in_their_own_era_with_valid_qualified_names() {
    let scratch = Scratch::new();
    let config = scratch.config(&six_peers(&scratch));
    let output = scratch.run(
        &["--config", config.to_str().unwrap(), "tools", "--json"],
        LIMIT,
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let servers = servers_by_name(&json(&output));
    let expected = [
        ("everything", "legacy", "2025-11-25", "echo"),
        ("filesystem", "legacy", "2025-11-25", "list_directory"),
        ("memory", "legacy", "2025-11-25", "read_graph"),
        ("time", "modern", "2026-07-28", "get_current_time"),
        ("git", "modern", "2026-07-28", "git_status"),
        ("pysdk", "modern", "2026-07-28", "add"),
    ];
    assert_eq!(servers.len(), expected.len());
    let mut qualified = std::collections::HashSet::new();
    for (name, era, version, a_tool) in expected {
        let server = &servers[name];
        assert_eq!(server["state"], "connected", "{name}: {server}");
        assert_eq!(server["confined"], true, "{name} must run confined");
        assert_eq!(server["era"], era, "{name}");
        assert_eq!(server["protocol_version"], version, "{name}");
        assert!(
            tool_names(server).contains(&a_tool.to_owned()),
            "{name} lacks {a_tool}"
        );
        for tool in server["tools"].as_array().unwrap() {
            let q = tool["qualified_name"].as_str().unwrap();
            assert!(q.len() <= 64, "{q}");
            assert!(
                q.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
                "{q}"
            );
            assert!(q.starts_with(&format!("{name}__")), "{q}");
            assert!(
                qualified.insert(q.to_owned()),
                "duplicate qualified name {q}"
            );
        }
    }
    assert_eq!(
        tool_names(&servers["time"]),
        vec!["get_current_time", "convert_time"]
    );
    assert_eq!(tool_names(&servers["memory"]).len(), 9);
    assert_eq!(
        servers["everything"]["server_info"]["name"],
        "mcp-servers/everything"
    );
    scratch.assert_no_leftovers();
}

#[test]
fn a_broken_server_is_reported_and_the_others_still_connect() {
    let scratch = Scratch::new();
    let mut toml = six_peers(&scratch);
    toml.push_str(&server_toml(
        "broken",
        "/nonexistent/mcp-server".as_ref(),
        &[],
        "",
    ));
    let config = scratch.config(&toml);
    let output = scratch.run(
        &["--config", config.to_str().unwrap(), "tools", "--json"],
        LIMIT,
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let servers = servers_by_name(&json(&output));
    assert_eq!(servers["broken"]["state"], "failed");
    let reason = servers["broken"]["reason"].as_str().unwrap();
    assert!(reason.contains("/nonexistent/mcp-server"), "{reason}");
    let connected = servers
        .values()
        .filter(|s| s["state"] == "connected")
        .count();
    assert_eq!(connected, 6);

    // The text view says the same to a person.
    let output = scratch.run(
        &["--config", config.to_str().unwrap(), "tools", "--refresh"],
        LIMIT,
    );
    let text = stdout(&output);
    assert!(text.contains("broken: FAILED: "), "{text}");
    assert!(
        text.contains("time: connected, modern era (2026-07-28)"),
        "{text}"
    );
    scratch.assert_no_leftovers();
}

/// Runs `warden call` and returns (exit code, stdout, stderr).
fn call(scratch: &Scratch, config: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let mut full = vec!["--config", config.to_str().unwrap(), "call"];
    full.extend_from_slice(args);
    let output = scratch.run(&full, LIMIT);
    (
        output.status.code().unwrap_or(-1),
        stdout(&output),
        stderr(&output),
    )
}

#[test]
fn a_call_round_trips_on_every_peer() {
    let scratch = Scratch::new();
    let config = scratch.config(&six_peers(&scratch));
    let files = scratch.path().join("files");

    let (code, out, err) = call(
        &scratch,
        &config,
        &[
            "--yes",
            "everything/echo",
            "--args",
            r#"{"message":"hi there"}"#,
        ],
    );
    assert_eq!((code, out.trim()), (0, "Echo: hi there"), "{err}");

    let (code, out, err) = call(
        &scratch,
        &config,
        &[
            "--yes",
            "filesystem__list_directory",
            "--args",
            &format!(r#"{{"path":{:?}}}"#, files.display().to_string()),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("[FILE] a.txt"), "{out}");

    let entity =
        r#"{"entities":[{"name":"warden","entityType":"project","observations":["an MCP host"]}]}"#;
    let (code, _, err) = call(
        &scratch,
        &config,
        &["--yes", "memory/create_entities", "--args", entity],
    );
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = call(&scratch, &config, &["--yes", "memory/read_graph", "--json"]);
    assert_eq!(code, 0, "{err}");
    let graph: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        graph["structuredContent"]["entities"][0]["name"], "warden",
        "{out}"
    );

    let (code, out, err) = call(
        &scratch,
        &config,
        &[
            "--yes",
            "time/get_current_time",
            "--args",
            r#"{"timezone":"Asia/Tokyo"}"#,
            "--json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let result: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        result["structuredContent"]["timezone"], "Asia/Tokyo",
        "{out}"
    );

    let repo = scratch.path().join("repo");
    let (code, out, err) = call(
        &scratch,
        &config,
        &[
            "--yes",
            "git/git_status",
            "--args",
            &format!(r#"{{"repo_path":{:?}}}"#, repo.display().to_string()),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Repository status"), "{out}");

    let (code, out, err) = call(
        &scratch,
        &config,
        &[
            "--yes",
            "pysdk__add",
            "--args",
            r#"{"a":2,"b":3}"#,
            "--json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let result: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(result["structuredContent"]["result"], 5, "{out}");
    assert_eq!(result["content"][0]["text"], "5");
    scratch.assert_no_leftovers();
}

#[test]
fn arguments_that_break_a_peers_schema_fail_locally_with_exit_2() {
    let scratch = Scratch::new();
    let config = scratch.config(&six_peers(&scratch));
    let (code, out, err) = call(
        &scratch,
        &config,
        &["pysdk/add", "--args", r#"{"a":2,"b":"three"}"#],
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("nothing was sent"), "{err}");
    assert!(
        err.contains("at /b:") && err.contains("rule `type`"),
        "{err}"
    );

    let (code, _, err) = call(&scratch, &config, &["everything/echo", "--args", "{}"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("\"message\" is a required property") && err.contains("rule `required`"),
        "{err}"
    );
    scratch.assert_no_leftovers();
}

#[test]
fn an_era_pin_is_obeyed_without_fallback() {
    let scratch = Scratch::new();
    let peers = peers_dir();
    let everything = peers
        .join("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
        .display()
        .to_string();
    let toml = [
        server_toml(
            "legacytime",
            &peers.join("venv/bin/mcp-server-time"),
            &[],
            "era = \"legacy\"",
        ),
        server_toml(
            "moderneverything",
            "node".as_ref(),
            &[&everything, "stdio"],
            "era = \"modern\"",
        ),
    ]
    .concat();
    let config = scratch.config(&toml);
    let output = scratch.run(
        &["--config", config.to_str().unwrap(), "tools", "--json"],
        LIMIT,
    );
    let servers = servers_by_name(&json(&output));
    assert_eq!(servers["legacytime"]["state"], "connected");
    assert_eq!(servers["legacytime"]["era"], "legacy");
    assert_eq!(servers["legacytime"]["protocol_version"], "2025-11-25");
    assert_eq!(servers["moderneverything"]["state"], "failed");
    let reason = servers["moderneverything"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("does not speak the 2026-07-28 revision"),
        "{reason}"
    );
    assert!(reason.contains("no fallback"), "{reason}");
    scratch.assert_no_leftovers();
}

/// Precision of the description scan: the real peers' ordinary definitions are not flagged,
/// so nothing is quarantined.
#[test]
fn the_six_peers_scan_clean() {
    let scratch = Scratch::new();
    let config = scratch.config(&six_peers(&scratch));
    let output = scratch.run(
        &["--config", config.to_str().unwrap(), "scan", "--json"],
        LIMIT,
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let listing = json(&output);
    let servers = listing["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 6, "{listing}");
    for server in servers {
        assert_eq!(server["state"], "connected", "{server}");
        assert_eq!(server["flagged"], 0, "{server:#}");
        for tool in server["tools"].as_array().unwrap() {
            assert_eq!(tool["flags"], serde_json::json!([]), "{tool}");
            assert_eq!(tool["quarantined"], false, "{tool}");
        }
        assert!(server["clean"].as_u64().unwrap() > 0, "{server}");
    }
    scratch.assert_no_leftovers();
}

/// The PyPI `mcp-server-sqlite`, whose `--db-path` argument names the database it writes:
/// under pins it starts again and again while the database changes (a data file is not
/// pinned), and its console script and interpreter are what is pinned.
#[test]
fn mcp_server_sqlite_starts_again_and_again_while_its_database_changes() {
    let scratch = Scratch::new();
    let program = peers_dir().join("venv-sqlite/bin/mcp-server-sqlite");
    assert!(program.exists(), "{} is missing", program.display());
    let data = support::server_writable_dir(&scratch.path().join("data"));
    let db = data.join("shop.db");
    let config = scratch.config(&server_toml(
        "sqlite",
        &program,
        &["--db-path", db.to_str().unwrap()],
        &support::write_grant(&[&data]),
    ));
    let queries = [
        ("create_table", "CREATE TABLE items (name TEXT)"),
        ("write_query", "INSERT INTO items VALUES ('apple')"),
        ("write_query", "INSERT INTO items VALUES ('pear')"),
    ];
    let mut sizes = Vec::new();
    for (round, (tool, query)) in queries.iter().enumerate() {
        let output = scratch.run(
            &[
                "--config",
                config.to_str().unwrap(),
                "tools",
                "--refresh",
                "--json",
            ],
            LIMIT,
        );
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let server = &json(&output)["servers"][0];
        assert_eq!(server["state"], "connected", "start {round}: {server}");
        assert_eq!(server["confined"], true);
        let args = serde_json::json!({ "query": query }).to_string();
        let (code, out, err) = call(
            &scratch,
            &config,
            &["--yes", &format!("sqlite/{tool}"), "--args", &args],
        );
        assert_eq!(code, 0, "round {round} {tool}: {out}{err}");
        sizes.push(std::fs::metadata(&db).unwrap().len());
    }
    let args = serde_json::json!({ "query": "SELECT name FROM items ORDER BY name" }).to_string();
    let (code, out, err) = call(
        &scratch,
        &config,
        &["--yes", "sqlite/read_query", "--args", &args],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("apple") && out.contains("pear"), "{out}");

    // What the pin holds: the console script and its interpreter, not the database.
    let output = scratch.run(
        &[
            "--config",
            config.to_str().unwrap(),
            "pin",
            "sqlite",
            "--show",
        ],
        LIMIT,
    );
    let shown = stdout(&output);
    assert!(shown.contains("matches its pin"), "{shown}");
    assert!(
        shown.contains(&format!("program {}", program.display())),
        "{shown}"
    );
    assert!(shown.contains("interpreter "), "{shown}");
    assert!(!shown.contains("shop.db"), "{shown}");
    scratch.assert_no_leftovers();
}
