//! The egress proxy in front of a real confined process (`/usr/bin/python3` in a sandbox
//! with network `proxy`): the allowed host works end to end through `HTTP_PROXY`, and each
//! way out that the allowlist does not grant is refused and reported: a host not listed,
//! the metadata address, a private address, a name that resolves to loopback, an IP
//! literal, a `CONNECT` whose SNI differs from its host, and a raw socket that ignores the
//! proxy. Destinations are servers this test runs on loopback addresses; names are mapped
//! by a resolver the test controls, so nothing leaves the machine.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use warden_config::egress::EgressAllowlist;
use warden_egress::{
    Decision, EgressEvent, EgressLimits, EgressProxy, StaticResolver, sni::client_hello_record,
};
use warden_sandbox::{Network, Profile, Scratch, confine, scrubbed_env};

const PYTHON: &str = "/usr/bin/python3";

/// A destination: answers HTTP with its name and the `Host` it saw, or a TLS-looking
/// first record with how many bytes it got; counts its connections.
struct Upstream {
    address: SocketAddr,
    connections: Arc<AtomicUsize>,
}

async fn upstream(ip: &str, name: &'static str) -> Upstream {
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let address = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&connections);
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                let mut got = 0;
                loop {
                    let Ok(n) = stream.read(&mut buf[got..]).await else {
                        return;
                    };
                    got += n;
                    if n == 0 || buf[0] == 22 || buf[..got].windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
                let reply = if got > 0 && buf[0] == 22 {
                    format!("tls-upstream {name} got {got} bytes")
                } else {
                    let head = String::from_utf8_lossy(&buf[..got]).to_string();
                    let host = head
                        .lines()
                        .find_map(|l| l.strip_prefix("Host: "))
                        .unwrap_or("")
                        .to_owned();
                    let body = format!("hello from {name}; Host: {host}");
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                };
                let _ = stream.write_all(reply.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    Upstream {
        address,
        connections,
    }
}

/// What the confined client does, one line of output per step: `NAME: RESULT`.
const CLIENT: &str = r#"
import json, os, socket, sys, urllib.request
cfg = json.loads(sys.argv[1])
proxy = ("127.0.0.1", cfg["proxy_port"])

def out(name, text):
    print(name + ": " + str(text).replace("\n", " | "), flush=True)

def via_env(name, url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            out(name, "status %d body %s" % (r.status, r.read().decode()))
    except urllib.error.HTTPError as e:
        out(name, "status %d body %s" % (e.code, e.read().decode()))
    except Exception as e:
        out(name, "error " + repr(e))

def connect(name, host, port, hello_hex):
    s = socket.create_connection(proxy, timeout=10)
    s.sendall(("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host, port, host, port)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            break
        head += chunk
    status = head.split(b"\r\n")[0].decode()
    if " 200 " not in status:
        out(name, "refused " + status)
        return
    s.sendall(bytes.fromhex(hello_hex))
    data = b""
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except Exception as e:
        data += repr(e).encode()
    out(name, "tunnel " + (data.decode() or "closed"))

def raw(name, host, port):
    try:
        s = socket.create_connection((host, port), timeout=5)
        out(name, "CONNECTED")
    except Exception as e:
        out(name, "error " + repr(e))

out("env", os.environ.get("HTTP_PROXY"))
via_env("allowed", cfg["allowed"])
via_env("unlisted", cfg["unlisted"])
via_env("metadata_ip", "http://169.254.169.254/latest/meta-data/")
via_env("metadata_name", cfg["metadata_name"])
via_env("private", cfg["private"])
via_env("rebind", cfg["rebind"])
via_env("ip_literal", cfg["ip_literal"])
connect("sni_ok", "tls.test", cfg["tls_port"], cfg["hello_ok"])
connect("sni_other", "tls.test", cfg["tls_port"], cfg["hello_other"])
connect("sni_none", "tls.test", cfg["tls_port"], cfg["hello_none"])
raw("raw_upstream", cfg["allowed_ip"], cfg["allowed_port"])
raw("raw_lan", "10.0.0.1", 80)
raw("raw_metadata", "169.254.169.254", 80)
"#;

fn open_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_allowlist_is_reachable_and_every_attempt_is_reported() {
    assert!(
        Path::new(PYTHON).exists(),
        "{PYTHON} is needed by this test (Debian: python3)"
    );
    let allowed = upstream("127.0.0.2", "allowed").await;
    let other = upstream("127.0.0.3", "other").await;
    let tls = upstream("127.0.0.4", "tls").await;
    let (ap, op, tp) = (
        allowed.address.port(),
        other.address.port(),
        tls.address.port(),
    );
    let ip = |text: &str| -> IpAddr { text.parse().unwrap() };
    let resolver = StaticResolver::new()
        .with("allowed.test", &[ip("127.0.0.2")])
        .with("other.test", &[ip("127.0.0.3")])
        .with("tls.test", &[ip("127.0.0.4")])
        .with("rebind.test", &[ip("127.0.0.2")])
        .with("lan.test", &[ip("10.0.0.7")])
        .with("metadata.test", &[ip("169.254.169.254")]);
    let allow = [
        (format!("http://allowed.test:{ap}"), true),
        (format!("tls.test:{tp}"), true),
        // Allowed by name, but without `private = true` the loopback address it resolves
        // to is refused: a DNS rebinding into the machine.
        (format!("http://rebind.test:{ap}"), false),
        ("http://lan.test".to_owned(), false),
        ("http://metadata.test".to_owned(), false),
    ];
    let allowlist = EgressAllowlist::parse(
        allow
            .iter()
            .map(|(text, private)| (text.as_str(), *private)),
    )
    .unwrap();

    let base = open_dir();
    let scratch = Scratch::create(base.path(), "egress").unwrap();
    let mut profile = Profile::default_for(Path::new(PYTHON), scratch.path()).unwrap();
    profile.set_env(scrubbed_env(std::env::vars(), &BTreeMap::new()));
    let port = Network::DEFAULT_PROXY_PORT;
    profile.network = Network::Proxy { port };

    let cfg = serde_json_like(&[
        ("proxy_port", port.to_string()),
        ("allowed", format!("\"http://allowed.test:{ap}/x\"")),
        ("unlisted", format!("\"http://other.test:{op}/\"")),
        (
            "metadata_name",
            "\"http://metadata.test/latest/\"".to_owned(),
        ),
        ("private", "\"http://lan.test/\"".to_owned()),
        ("rebind", format!("\"http://rebind.test:{ap}/\"")),
        ("ip_literal", format!("\"http://127.0.0.2:{ap}/\"")),
        ("tls_port", tp.to_string()),
        (
            "hello_ok",
            format!("\"{}\"", hex(&client_hello_record(Some("tls.test")))),
        ),
        (
            "hello_other",
            format!("\"{}\"", hex(&client_hello_record(Some("other.test")))),
        ),
        (
            "hello_none",
            format!("\"{}\"", hex(&client_hello_record(None))),
        ),
        ("allowed_ip", "\"127.0.0.2\"".to_owned()),
        ("allowed_port", ap.to_string()),
    ]);

    let mut command = Command::new(PYTHON);
    command
        .args(["-c", CLIENT, &cfg])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let confinement = confine(&mut command, &profile).unwrap();
    let mut child = command
        .spawn()
        .map_err(|e| confinement.spawn_error(e))
        .unwrap();
    let listener = confinement
        .take_proxy_listener(Duration::from_secs(5))
        .unwrap()
        .expect("a proxy listener");
    let events: Arc<Mutex<Vec<EgressEvent>>> = Arc::default();
    let sink_events = Arc::clone(&events);
    let proxy = EgressProxy::new(
        "fetch",
        allowlist,
        EgressLimits::default(),
        Arc::new(resolver),
        Arc::new(move |event: &EgressEvent| sink_events.lock().unwrap().push(event.clone())),
    );
    let task = proxy.serve(listener).unwrap();

    let output = tokio::task::spawn_blocking(move || {
        let mut stdout = String::new();
        let mut stderr = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "the client did not finish");
            std::thread::sleep(Duration::from_millis(10));
        }
        (stdout, stderr)
    })
    .await
    .unwrap();
    let (stdout, stderr) = output;
    let results: BTreeMap<&str, &str> = stdout
        .lines()
        .filter_map(|line| line.split_once(": "))
        .collect();
    let result = |name: &str| -> &str {
        results
            .get(name)
            .unwrap_or_else(|| panic!("no {name} in:\n{stdout}\nstderr:\n{stderr}"))
    };

    // The proxy variables are set, and the positive controls work end to end.
    assert_eq!(result("env"), format!("http://127.0.0.1:{port}"));
    assert_eq!(
        result("allowed"),
        format!("status 200 body hello from allowed; Host: allowed.test:{ap}")
    );
    assert!(
        result("sni_ok").starts_with("tunnel tls-upstream tls got"),
        "{}",
        result("sni_ok")
    );
    // Refused, each with the proxy's reason.
    for (name, says) in [
        ("unlisted", "not in the egress allowlist"),
        ("metadata_ip", "IP literal"),
        (
            "metadata_name",
            "169.254.169.254 (link-local, cloud metadata",
        ),
        ("private", "10.0.0.7 (private"),
        ("rebind", "127.0.0.2 (loopback"),
        ("ip_literal", "IP literal"),
    ] {
        let got = result(name);
        assert!(got.starts_with("status 403"), "{name}: {got}");
        assert!(got.contains(says), "{name}: {got}");
    }
    for name in ["sni_other", "sni_none"] {
        assert_eq!(result(name), "tunnel closed", "{name}");
    }
    // The raw sockets reach nothing: not the host's loopback, not the LAN, not metadata.
    for name in ["raw_upstream", "raw_lan", "raw_metadata"] {
        let got = result(name);
        assert!(got.starts_with("error "), "{name}: {got}");
    }
    // Nothing but the two allowed requests reached a destination.
    assert_eq!(allowed.connections.load(Ordering::SeqCst), 1);
    assert_eq!(other.connections.load(Ordering::SeqCst), 0);
    assert_eq!(tls.connections.load(Ordering::SeqCst), 1);

    // Every attempt through the proxy was reported, allowed or refused.
    let deadline = Instant::now() + Duration::from_secs(5);
    while events.lock().unwrap().len() < 10 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(task);
    let events = events.lock().unwrap().clone();
    let find = |host: &str, method: &str| -> Vec<&EgressEvent> {
        events
            .iter()
            .filter(|e| e.host == host && e.method == method)
            .collect()
    };
    let allowed_events = find("allowed.test", "GET");
    assert_eq!(allowed_events.len(), 1, "{events:#?}");
    let event = allowed_events[0];
    assert_eq!(event.decision, Decision::Allowed);
    assert_eq!(event.error, None);
    assert_eq!(event.server.as_ref(), "fetch");
    assert_eq!(event.address, Some(allowed.address));
    assert!(event.bytes_up > 0 && event.bytes_down > 0, "{event:?}");
    for (host, method) in [
        ("other.test", "GET"),
        ("169.254.169.254", "GET"),
        ("metadata.test", "GET"),
        ("lan.test", "GET"),
        ("rebind.test", "GET"),
        ("127.0.0.2", "GET"),
    ] {
        let found = find(host, method);
        assert_eq!(found.len(), 1, "{host}: {events:#?}");
        assert_eq!(found[0].decision, Decision::Refused, "{host}");
        assert!(found[0].error.is_some(), "{host}");
        assert_eq!(found[0].bytes_up + found[0].bytes_down, 0, "{host}");
    }
    let tunnels = find("tls.test", "CONNECT");
    assert_eq!(tunnels.len(), 3, "{events:#?}");
    assert_eq!(
        tunnels
            .iter()
            .filter(|e| e.decision == Decision::Allowed)
            .count(),
        1
    );
    let refused: Vec<&str> = tunnels.iter().filter_map(|e| e.error.as_deref()).collect();
    assert!(
        refused
            .iter()
            .any(|e| e.contains("SNI \"other.test\" differs")),
        "{refused:?}"
    );
    assert!(
        refused.iter().any(|e| e.contains("names no server")),
        "{refused:?}"
    );
    // The raw sockets never reached the proxy at all.
    assert_eq!(events.len(), 10, "{events:#?}");
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A JSON object from already-encoded values (no serde_json in this crate's tests).
fn serde_json_like(fields: &[(&str, String)]) -> String {
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("\"{k}\": {v}"))
        .collect();
    format!("{{{}}}", body.join(", "))
}

/// A real TLS client (Python's `ssl`, through `HTTPS_PROXY`) reaches a real TLS server
/// (`openssl s_server`) through a `CONNECT` tunnel: the SNI check passes a ClientHello as
/// OpenSSL writes it, and the certificate is verified end to end (Warden sees no plain text).
/// The control: the same client asking for a name the list does not hold is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_tls_client_reaches_an_allowed_tls_server_through_the_tunnel() {
    const OPENSSL: &str = "/usr/bin/openssl";
    assert!(
        Path::new(PYTHON).exists(),
        "{PYTHON} is needed by this test"
    );
    assert!(
        Path::new(OPENSSL).exists(),
        "{OPENSSL} is needed by this test"
    );
    let dir = open_dir();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let made = Command::new(OPENSSL)
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args([
            "-subj",
            "/CN=tls.test",
            "-addext",
            "subjectAltName=DNS:tls.test",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(made.success());
    std::fs::set_permissions(&cert, std::fs::Permissions::from_mode(0o644)).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.6:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = Command::new(OPENSSL)
        .args(["s_server", "-www", "-quiet", "-accept"])
        .arg(format!("127.0.0.6:{port}"))
        .arg("-cert")
        .arg(&cert)
        .arg("-key")
        .arg(&key)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.6", port)).is_err() {
        assert!(Instant::now() < deadline, "openssl s_server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }

    let resolver = StaticResolver::new()
        .with("tls.test", &["127.0.0.6".parse().unwrap()])
        .with("other.test", &["127.0.0.6".parse().unwrap()]);
    let allowlist = EgressAllowlist::parse([(format!("tls.test:{port}").as_str(), true)]).unwrap();
    let base = open_dir();
    let scratch = Scratch::create(base.path(), "tls").unwrap();
    let mut profile = Profile::default_for(Path::new(PYTHON), scratch.path()).unwrap();
    profile.set_env(scrubbed_env(std::env::vars(), &BTreeMap::new()));
    profile.read.push(dir.path().to_path_buf());
    profile.network = Network::Proxy {
        port: Network::DEFAULT_PROXY_PORT,
    };
    let client = format!(
        r#"
import ssl, urllib.request
ctx = ssl.create_default_context(cafile={cafile:?})
for name in ["tls.test", "other.test"]:
    try:
        with urllib.request.urlopen("https://%s:{port}/" % name, context=ctx, timeout=10) as r:
            body = r.read().decode(errors="replace")
            print(name, "status", r.status, "s_server" in body or "OpenSSL" in body, flush=True)
    except Exception as e:
        print(name, "error", repr(e), flush=True)
"#,
        cafile = cert.display().to_string()
    );
    let mut command = Command::new(PYTHON);
    command
        .args(["-c", &client])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let confinement = confine(&mut command, &profile).unwrap();
    let mut child = command
        .spawn()
        .map_err(|e| confinement.spawn_error(e))
        .unwrap();
    let listener = confinement
        .take_proxy_listener(Duration::from_secs(5))
        .unwrap()
        .unwrap();
    let events: Arc<Mutex<Vec<EgressEvent>>> = Arc::default();
    let sink_events = Arc::clone(&events);
    let proxy = EgressProxy::new(
        "tls",
        allowlist,
        EgressLimits::default(),
        Arc::new(resolver),
        Arc::new(move |event: &EgressEvent| sink_events.lock().unwrap().push(event.clone())),
    );
    let _task = proxy.serve(listener).unwrap();
    let (stdout, stderr) = tokio::task::spawn_blocking(move || {
        let mut stdout = String::new();
        let mut stderr = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        child.wait().unwrap();
        (stdout, stderr)
    })
    .await
    .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.first(),
        Some(&"tls.test status 200 True"),
        "{stdout}\n{stderr}"
    );
    assert!(
        lines
            .get(1)
            .is_some_and(|l| l.starts_with("other.test error")),
        "{stdout}\n{stderr}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while events.lock().unwrap().len() < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let events = events.lock().unwrap().clone();
    let ok = events.iter().find(|e| e.host == "tls.test").unwrap();
    assert_eq!(ok.decision, Decision::Allowed, "{ok:?}");
    assert!(ok.bytes_down > 1000, "{ok:?}");
    let refused = events.iter().find(|e| e.host == "other.test").unwrap();
    assert_eq!(refused.decision, Decision::Refused, "{refused:?}");
}
