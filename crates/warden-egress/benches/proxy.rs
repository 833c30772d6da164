//! What the egress proxy adds: to one HTTP request (direct to a loopback server vs. through
//! the proxy, plain HTTP and a `CONNECT` tunnel), and to a server's start (spawn to exit of
//! `/bin/true` confined with network `none` vs. network `proxy`, the listener handed over
//! and served). Medians of interleaved runs; run with
//! `cargo bench -p warden-egress --bench proxy`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark, not library code"
)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use warden_config::egress::EgressAllowlist;
use warden_egress::{EgressLimits, EgressProxy, StaticResolver, sni::client_hello_record};
use warden_sandbox::{Network, Profile, Scratch, confine};

const RUNS: usize = 300;
const START_RUNS: usize = 100;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

/// A loopback server answering each connection with a fixed HTTP response (or, for a TLS
/// record, a short reply) and closing.
fn upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                let mut got = Vec::new();
                loop {
                    let n = stream.read(&mut buf).unwrap_or(0);
                    got.extend_from_slice(&buf[..n]);
                    if n == 0 || got[0] == 22 || got.windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
                let body =
                    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
                let _ = stream.write_all(body);
            });
        }
    });
    address
}

fn request(to: SocketAddr, head: &[u8], then: Option<&[u8]>) -> Duration {
    let started = Instant::now();
    let mut stream = TcpStream::connect(to).unwrap();
    stream.set_nodelay(true).unwrap();
    stream.write_all(head).unwrap();
    if let Some(then) = then {
        // CONNECT: read the 200 first, then send the hello.
        let mut buf = [0u8; 256];
        let mut got = Vec::new();
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf).unwrap();
            assert!(n > 0);
            got.extend_from_slice(&buf[..n]);
        }
        stream.write_all(then).unwrap();
    }
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).unwrap();
    assert!(
        reply.ends_with(b"hello"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    started.elapsed()
}

fn start(profile: &Profile, proxied: Option<&tokio::runtime::Runtime>) -> Duration {
    let mut command = Command::new("/bin/true");
    let started = Instant::now();
    let confinement = confine(&mut command, profile).unwrap();
    let mut child = command
        .spawn()
        .map_err(|e| confinement.spawn_error(e))
        .unwrap();
    let task = proxied.map(|runtime| {
        let listener = confinement
            .take_proxy_listener(Duration::from_secs(5))
            .unwrap()
            .unwrap();
        let proxy = EgressProxy::new(
            "bench",
            EgressAllowlist::parse([("bench.test", false)]).unwrap(),
            EgressLimits::default(),
            Arc::new(StaticResolver::new()),
            Arc::new(|_: &warden_egress::EgressEvent| {}),
        );
        let _guard = runtime.enter();
        proxy.serve(listener).unwrap()
    });
    assert!(child.wait().unwrap().success());
    let elapsed = started.elapsed();
    drop(task);
    elapsed
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let target = upstream();
    let port = target.port();
    let allowlist = EgressAllowlist::parse([
        (format!("http://bench.test:{port}").as_str(), true),
        (format!("bench.test:{port}").as_str(), true),
    ])
    .unwrap();
    let resolver = StaticResolver::new().with("bench.test", &[target.ip()]);
    let proxy = EgressProxy::new(
        "bench",
        allowlist,
        EgressLimits::default(),
        Arc::new(resolver),
        Arc::new(|_: &warden_egress::EgressEvent| {}),
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy_at = listener.local_addr().unwrap();
    let _task = {
        let _guard = runtime.enter();
        proxy.serve(listener).unwrap()
    };

    let direct_head = format!("GET /x HTTP/1.1\r\nHost: bench.test:{port}\r\n\r\n");
    let proxied_head =
        format!("GET http://bench.test:{port}/x HTTP/1.1\r\nHost: bench.test:{port}\r\n\r\n");
    let connect_head = format!("CONNECT bench.test:{port} HTTP/1.1\r\n\r\n");
    let hello = client_hello_record(Some("bench.test"));
    let (mut direct, mut via_http, mut via_connect, mut direct_tls) =
        (vec![], vec![], vec![], vec![]);
    for _ in 0..RUNS {
        direct.push(request(target, direct_head.as_bytes(), None));
        via_http.push(request(proxy_at, proxied_head.as_bytes(), None));
        direct_tls.push(request(target, &hello, None));
        via_connect.push(request(proxy_at, connect_head.as_bytes(), Some(&hello)));
    }

    let base = tempfile::tempdir().unwrap();
    let scratch = Scratch::create(base.path(), "bench").unwrap();
    let none = Profile::default_for(Path::new("/bin/true"), scratch.path()).unwrap();
    let mut proxied = none.clone();
    proxied.network = Network::Proxy {
        port: Network::DEFAULT_PROXY_PORT,
    };
    let (mut start_none, mut start_proxy) = (vec![], vec![]);
    for _ in 0..START_RUNS {
        start_none.push(start(&none, None));
        start_proxy.push(start(&proxied, Some(&runtime)));
    }

    let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1e3);
    println!("| measurement | median |");
    println!("|---|---|");
    println!(
        "| HTTP GET, direct ({RUNS} runs) | {} |",
        ms(median(direct))
    );
    println!("| HTTP GET, through the proxy | {} |", ms(median(via_http)));
    println!(
        "| TLS first record + reply, direct | {} |",
        ms(median(direct_tls))
    );
    println!(
        "| CONNECT + SNI check + first record + reply, through the proxy | {} |",
        ms(median(via_connect))
    );
    println!(
        "| start to exit of /bin/true, network none ({START_RUNS} runs) | {} |",
        ms(median(start_none))
    );
    println!(
        "| start to exit of /bin/true, network proxy (listener handed over and served) | {} |",
        ms(median(start_proxy))
    );
}
