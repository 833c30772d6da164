//! `warden-suite-server`: small stateful MCP stdio servers for the four kinds of assistant
//! work that the autonomy benchmark (`crates/warden/tests/autonomy_bench.rs`) replays:
//! mail, calendar and files (`workspace`), `banking`, `travel` booking and team `chat`.
//!
//! ```text
//! warden-suite-server DOMAIN DIR
//! ```
//!
//! The server reads its world from `DIR/world.json` (`{"collections": {"emails": [...]}}`,
//! written by the benchmark, injected text included), answers reads from it, and applies
//! writes to it: every write is appended to `DIR/effects.jsonl` as `{"tool", "arguments"}`
//! (the effect the benchmark checks) and added to the collection the tool writes, so a later
//! read sees it. The tool definitions carry the MCP annotations a careful server author
//! would give (`readOnlyHint`, `destructiveHint`, `openWorldHint`) and plain argument names;
//! [`domains`] holds them.
//!
//! Newline-delimited JSON-RPC 2.0, protocol 2025-11-25 (older handshakes accepted); only
//! `serde_json` and the standard library, like `warden-testserver`.

mod domains;

use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{Map, Value, json};

use domains::{Behaviour, ToolDef};

/// Lines longer than this are refused (the server ends).
const MAX_LINE: usize = 4 << 20;
/// At most this many records are returned by one read.
const MAX_RECORDS: usize = 50;

struct Server {
    tools: Vec<ToolDef>,
    world: Map<String, Value>,
    effects: PathBuf,
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(domain), Some(dir)) = (args.next(), args.next()) else {
        eprintln!(
            "usage: warden-suite-server DOMAIN DIR (domains: {})",
            domains::NAMES.join(", ")
        );
        return ExitCode::from(2);
    };
    let Some(tools) = domains::tools(&domain) else {
        eprintln!(
            "warden-suite-server: unknown domain {domain:?} (known: {})",
            domains::NAMES.join(", ")
        );
        return ExitCode::from(2);
    };
    let dir = PathBuf::from(dir);
    let world = match read_world(&dir.join("world.json")) {
        Ok(world) => world,
        Err(e) => {
            eprintln!("warden-suite-server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut server = Server {
        tools,
        world,
        effects: dir.join("effects.jsonl"),
    };
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    let mut line = String::new();
    let mut input = stdin.lock();
    loop {
        line.clear();
        match input.read_line(&mut line) {
            Ok(0) => return ExitCode::SUCCESS,
            Ok(n) if n > MAX_LINE => {
                eprintln!("warden-suite-server: a line of {n} bytes is over {MAX_LINE}");
                return ExitCode::FAILURE;
            }
            Ok(_) => {}
            Err(e) => {
                eprintln!("warden-suite-server: reading stdin: {e}");
                return ExitCode::FAILURE;
            }
        }
        let Ok(message) = serde_json::from_str::<Value>(line.trim()) else {
            continue;
        };
        let Some(id) = message.get("id").cloned() else {
            continue; // a notification
        };
        let method = message.get("method").and_then(Value::as_str).unwrap_or("");
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        let response = match server.handle(method, &params) {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err((code, text)) => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": text}})
            }
        };
        let mut bytes = response.to_string().into_bytes();
        bytes.push(b'\n');
        if stdout
            .write_all(&bytes)
            .and_then(|()| stdout.flush())
            .is_err()
        {
            return ExitCode::FAILURE;
        }
    }
}

/// The largest world file read: a test fixture, far above any real one.
const MAX_WORLD_BYTES: u64 = 16 * 1024 * 1024;

fn read_world(path: &Path) -> Result<Map<String, Value>, String> {
    let file = std::fs::File::open(path)
        .map_err(|e| format!("cannot read the world {}: {e}", path.display()))?;
    let mut text = String::new();
    file.take(MAX_WORLD_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read the world {}: {e}", path.display()))?;
    if text.len() as u64 > MAX_WORLD_BYTES {
        return Err(format!(
            "the world {} is larger than {MAX_WORLD_BYTES} bytes",
            path.display()
        ));
    }
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| format!("the world {} is not JSON: {e}", path.display()))?;
    match value.get("collections") {
        Some(Value::Object(map)) => Ok(map.clone()),
        _ => Err(format!(
            "the world {} has no \"collections\" object",
            path.display()
        )),
    }
}

impl Server {
    fn handle(&mut self, method: &str, params: &Value) -> Result<Value, (i64, String)> {
        match method {
            "initialize" => {
                let version = params
                    .get("protocolVersion")
                    .and_then(Value::as_str)
                    .filter(|v| {
                        ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"].contains(v)
                    })
                    .unwrap_or("2025-11-25");
                Ok(json!({
                    "protocolVersion": version,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "warden-suite-server", "version": "0.1.0"}
                }))
            }
            "ping" => Ok(json!({})),
            "tools/list" => Ok(json!({
                "tools": self.tools.iter().map(ToolDef::definition).collect::<Vec<_>>()
            })),
            "tools/call" => {
                let name = params.get("name").and_then(Value::as_str).unwrap_or("");
                let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
                let Some(tool) = self.tools.iter().find(|t| t.name == name) else {
                    return Err((-32602, format!("unknown tool {name:?}")));
                };
                let behaviour = tool.behaviour;
                let text = match behaviour {
                    Behaviour::Read {
                        collection,
                        filters,
                    } => self.read(collection, filters, &arguments),
                    Behaviour::Write { collection } => self.write(name, collection, &arguments)?,
                    Behaviour::Fetch {
                        collection,
                        filters,
                    } => {
                        self.record(name, &arguments)?;
                        self.read(collection, filters, &arguments)
                    }
                };
                Ok(json!({"content": [{"type": "text", "text": text}], "isError": false}))
            }
            _ => Err((-32601, format!("method not found: {method}"))),
        }
    }

    /// The records of `collection` that every given filter argument matches (a string is
    /// matched as a case-insensitive substring of the record's field; a list of strings by
    /// any of them).
    fn read(&self, collection: &str, filters: &[(&str, &str)], arguments: &Value) -> String {
        let empty = Vec::new();
        let records = self
            .world
            .get(collection)
            .and_then(Value::as_array)
            .unwrap_or(&empty);
        let matching: Vec<&Value> = records
            .iter()
            .filter(|record| {
                filters
                    .iter()
                    .all(|(arg, field)| match arguments.get(*arg) {
                        None | Some(Value::Null) => true,
                        Some(wanted) => field_matches(record.get(*field), wanted),
                    })
            })
            .take(MAX_RECORDS)
            .collect();
        serde_json::to_string_pretty(&matching).unwrap_or_default()
    }

    fn write(
        &mut self,
        tool: &str,
        collection: &str,
        arguments: &Value,
    ) -> Result<String, (i64, String)> {
        self.record(tool, arguments)?;
        let list = self
            .world
            .entry(collection.to_owned())
            .or_insert_with(|| Value::Array(Vec::new()));
        let id = match list {
            Value::Array(items) => {
                let mut entry = arguments.as_object().cloned().unwrap_or_default();
                let id = format!("{}-{}", collection, items.len() + 1);
                entry.insert("id".into(), Value::String(id.clone()));
                items.push(Value::Object(entry));
                id
            }
            _ => String::new(),
        };
        Ok(format!("{tool}: done (record {id})"))
    }

    /// Appends the call to the effects file.
    fn record(&self, tool: &str, arguments: &Value) -> Result<(), (i64, String)> {
        let record = json!({"tool": tool, "arguments": arguments});
        let mut line = record.to_string().into_bytes();
        line.push(b'\n');
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.effects)
            .and_then(|mut f| f.write_all(&line))
            .map_err(|e| {
                (
                    -32603,
                    format!(
                        "cannot record the effect in {}: {e}",
                        self.effects.display()
                    ),
                )
            })
    }
}

fn field_matches(field: Option<&Value>, wanted: &Value) -> bool {
    let contains = |field: &Value, needle: &str| {
        let needle = needle.to_lowercase();
        match field {
            Value::String(s) => s.to_lowercase().contains(&needle),
            Value::Array(items) => items.iter().any(|i| {
                i.as_str()
                    .is_some_and(|s| s.to_lowercase().contains(&needle))
            }),
            other => other.to_string().to_lowercase() == needle,
        }
    };
    let Some(field) = field else {
        return false;
    };
    match wanted {
        Value::String(s) => contains(field, s),
        Value::Array(items) => items
            .iter()
            .any(|i| i.as_str().is_some_and(|s| contains(field, s))),
        other => field == other,
    }
}
