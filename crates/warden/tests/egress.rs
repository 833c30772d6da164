//! Egress allowlists end to end (issue 14, decision 0029): a Python MCP server (on the
//! official SDK, from the peers) whose `fetch` tool uses `urllib` (which honours
//! `HTTP_PROXY`), configured with `network = { allow = [...] }` naming one HTTP server this
//! test runs on a loopback address. Through `warden call` the allowed server answers; a
//! second server the list does not name is refused by the proxy, and a raw socket that
//! ignores the proxy reaches nothing; every attempt through the proxy is a row of `warden
//! audit`, and `warden probe` shows the allowlist and finds the unlisted server unreachable.
//! (IP literal entries: the binary resolves names with the system's resolver, so the tests of
//! name mapping live in `warden-egress`'s own tests, with a resolver they control.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use serde_json::Value;
use support::{Scratch, assert_exit, describe, json, peers_dir, server_toml, stdout};

const LIMIT: Duration = Duration::from_secs(60);

const SERVER: &str = r#"
import socket, urllib.error, urllib.request
from mcp.server.mcpserver import MCPServer

server = MCPServer("egress-peer", version="0.1.0")


@server.tool()
def fetch(url: str) -> str:
    """Fetch a URL (urllib: through HTTP_PROXY when it is set)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return "status %d body %s" % (r.status, r.read().decode())
    except urllib.error.HTTPError as e:
        return "status %d body %s" % (e.code, e.read().decode())
    except Exception as e:
        return "error " + repr(e)


@server.tool()
def raw(host: str, port: int) -> str:
    """Open a TCP connection directly, ignoring the proxy."""
    try:
        socket.create_connection((host, port), timeout=5).close()
        return "CONNECTED"
    except Exception as e:
        return "error " + repr(e)


server.run("stdio")
"#;

/// An HTTP server on `ip` answering every request with `name`, in a thread.
fn http_server(ip: &str, name: &'static str) -> u16 {
    let listener = TcpListener::bind((ip, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            let body = format!("hello from {name}");
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

fn call(scratch: &Scratch, config: &str, tool: &str, args: &str) -> String {
    let output = scratch.run(
        &["--config", config, "call", tool, "--args", args, "--yes"],
        LIMIT,
    );
    assert_exit(&output, 0);
    stdout(&output)
}

#[test]
fn a_server_reaches_its_allowlist_only_and_every_attempt_is_audited() {
    let allowed = http_server("127.0.0.2", "allowed");
    let other = http_server("127.0.0.3", "other");
    let scratch = Scratch::new();
    let dir = scratch.path().join("srv");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = dir.join("egress_server.py");
    std::fs::write(&script, SERVER).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    let python = peers_dir().join("venv/bin/python");
    let config = scratch.config(&server_toml(
        "egress",
        &python,
        &[script.to_str().unwrap()],
        &format!("sandbox = {{ network = {{ allow = [\"http://127.0.0.2:{allowed}\"] }} }}"),
    ));
    let config = config.to_str().unwrap();

    // Positive control: the allowed server answers through the proxy.
    let out = call(
        &scratch,
        config,
        "egress/fetch",
        &format!(r#"{{"url":"http://127.0.0.2:{allowed}/x"}}"#),
    );
    assert!(out.contains("status 200 body hello from allowed"), "{out}");
    // Not listed: refused by the proxy, with its reason.
    let out = call(
        &scratch,
        config,
        "egress/fetch",
        &format!(r#"{{"url":"http://127.0.0.3:{other}/"}}"#),
    );
    assert!(out.contains("status 403"), "{out}");
    assert!(
        out.contains("not in the egress allowlist of server `egress`"),
        "{out}"
    );
    // A raw socket ignoring the proxy reaches nothing, not even the allowed server.
    let out = call(
        &scratch,
        config,
        "egress/raw",
        &format!(r#"{{"host":"127.0.0.2","port":{allowed}}}"#),
    );
    assert!(out.contains("error") && !out.contains("CONNECTED"), "{out}");

    // Both proxy attempts are audit rows beside the tool calls.
    let output = scratch.run(&["audit", "--json", "--server", "egress"], LIMIT);
    assert_exit(&output, 0);
    let rows = json(&output);
    let egress: Vec<&Value> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["front_end"] == "egress")
        .collect();
    assert_eq!(egress.len(), 2, "{}", describe(&output));
    let row = |tool: String| -> &Value {
        egress
            .iter()
            .find(|row| row["tool"] == tool.as_str())
            .unwrap_or_else(|| panic!("no row {tool} in {egress:#?}"))
    };
    let ok = row(format!("egress GET 127.0.0.2:{allowed}"));
    assert_eq!(ok["decision"], "allow");
    assert_eq!(ok["outcome"], "ok");
    assert_eq!(ok["server"], "egress");
    assert_eq!(
        ok["arguments"]["rule"],
        format!("http://127.0.0.2:{allowed}")
    );
    assert!(ok["arguments"]["bytes_down"].as_u64().unwrap() > 0, "{ok}");
    let refused = row(format!("egress GET 127.0.0.3:{other}"));
    assert_eq!(refused["decision"], "deny");
    assert_eq!(refused["outcome"], "denied");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("not in the egress allowlist"),
        "{refused}"
    );
    // The text view names them too.
    let output = scratch.run(&["audit", "--server", "egress"], LIMIT);
    assert!(
        stdout(&output).contains(&format!("egress GET 127.0.0.3:{other}")),
        "{}",
        describe(&output)
    );

    // The probe reports the allowlist, and the unlisted server as unreachable.
    let output = scratch.run(
        &[
            "--config",
            config,
            "probe",
            "egress",
            "--connect",
            &format!("127.0.0.3:{other}"),
        ],
        LIMIT,
    );
    assert_exit(&output, 0);
    let text = stdout(&output);
    assert!(
        text.contains(&format!(
            "only through Warden's egress proxy (HTTPS_PROXY), to: http://127.0.0.2:{allowed} [http]"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("127.0.0.3:{other}  not reachable")),
        "{text}"
    );
    scratch.assert_no_leftovers();
}
