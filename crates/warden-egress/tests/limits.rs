//! The proxy's per-server limits, against a listener on the host (no sandbox needed to
//! reach it): concurrent connections beyond the limit are refused with `503` and reported;
//! a connection is cut at its byte limit, when idle and at its time limit, and reported with
//! what it carried.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use warden_config::egress::EgressAllowlist;
use warden_egress::{Decision, EgressEvent, EgressLimits, EgressProxy, ProxyTask, StaticResolver};

/// A destination that sends `size` bytes after the request head, then holds the connection
/// open without sending more.
async fn destination(size: usize) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.5:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    let n = stream.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    got.extend_from_slice(&buf[..n]);
                }
                let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\n");
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(&vec![b'x'; size]).await;
                tokio::time::sleep(Duration::from_secs(30)).await;
            });
        }
    });
    address
}

type Events = Arc<Mutex<Vec<EgressEvent>>>;

fn proxy(target: SocketAddr, limits: EgressLimits) -> (SocketAddr, ProxyTask, Events) {
    let port = target.port();
    let allowlist =
        EgressAllowlist::parse([(format!("http://dest.test:{port}").as_str(), true)]).unwrap();
    let events: Events = Arc::default();
    let sink = Arc::clone(&events);
    let proxy = EgressProxy::new(
        "limited",
        allowlist,
        limits,
        Arc::new(StaticResolver::new().with("dest.test", &[target.ip()])),
        Arc::new(move |event: &EgressEvent| sink.lock().unwrap().push(event.clone())),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = listener.local_addr().unwrap();
    (at, proxy.serve(listener).unwrap(), events)
}

async fn get(proxy: SocketAddr, port: u16) -> (TcpStream, Vec<u8>) {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    let head = format!("GET http://dest.test:{port}/ HTTP/1.1\r\nHost: dest.test\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut got = vec![0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut got))
        .await
        .unwrap()
        .unwrap();
    got.truncate(n);
    (stream, got)
}

async fn wait_for(events: &Events, count: usize) -> Vec<EgressEvent> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = events.lock().unwrap().clone();
        if now.len() >= count || Instant::now() > deadline {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn connections_beyond_the_limit_are_refused_and_reported() {
    let target = destination(10).await;
    let limits = EgressLimits {
        max_connections: 1,
        ..EgressLimits::default()
    };
    let (at, _task, events) = proxy(target, limits);
    // The first holds the only slot (its destination keeps it open).
    let (_first, got) = get(at, target.port()).await;
    assert!(
        got.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    // The second is refused at once.
    let mut second = TcpStream::connect(at).await.unwrap();
    let mut reply = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), second.read_to_end(&mut reply))
        .await
        .unwrap()
        .unwrap();
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.starts_with("HTTP/1.1 503"), "{reply}");
    let events = wait_for(&events, 1).await;
    let busy: Vec<&EgressEvent> = events
        .iter()
        .filter(|e| {
            e.error
                .as_deref()
                .is_some_and(|e| e.contains("more than 1 open"))
        })
        .collect();
    assert_eq!(busy.len(), 1, "{events:#?}");
    assert_eq!(busy[0].decision, Decision::Refused);
}

#[tokio::test]
async fn a_connection_is_cut_at_its_byte_time_and_idle_limits() {
    // Byte limit: the destination sends 64 KiB; the limit is 8 KiB both ways together.
    let target = destination(64 * 1024).await;
    let limits = EgressLimits {
        max_bytes: 8 * 1024,
        ..EgressLimits::default()
    };
    let (at, _task, events) = proxy(target, limits);
    let (mut stream, _) = get(at, target.port()).await;
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut rest))
        .await
        .unwrap()
        .unwrap();
    let events = wait_for(&events, 1).await;
    assert_eq!(events.len(), 1, "{events:#?}");
    let event = &events[0];
    assert_eq!(event.decision, Decision::Allowed);
    assert!(
        event
            .error
            .as_deref()
            .unwrap()
            .contains("byte limit of 8192"),
        "{event:?}"
    );
    assert!(event.bytes_up + event.bytes_down <= 8 * 1024, "{event:?}");
    assert!(event.bytes_down > 0, "{event:?}");

    // Idle: the destination goes quiet after its first bytes.
    let target = destination(10).await;
    let limits = EgressLimits {
        idle_timeout: Duration::from_millis(300),
        ..EgressLimits::default()
    };
    let (at, _task, events) = proxy(target, limits);
    let started = Instant::now();
    let (mut stream, _) = get(at, target.port()).await;
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut rest))
        .await
        .unwrap()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    let events = wait_for(&events, 1).await;
    assert!(
        events[0].error.as_deref().unwrap().contains("idle for"),
        "{events:#?}"
    );

    // Lifetime: the same quiet destination, cut by the time limit this time.
    let limits = EgressLimits {
        max_duration: Duration::from_millis(300),
        ..EgressLimits::default()
    };
    let (at, _task, events) = proxy(target, limits);
    let (mut stream, _) = get(at, target.port()).await;
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut rest))
        .await
        .unwrap()
        .unwrap();
    let events = wait_for(&events, 1).await;
    assert!(
        events[0].error.as_deref().unwrap().contains("time limit"),
        "{events:#?}"
    );
    assert!(events[0].bytes_down > 0, "{events:#?}");
}

/// A server looping on refused requests cannot flood the audit log: at most
/// `MAX_REFUSALS_REPORTED_PER_SECOND` are reported one by one each second, and the next
/// report carries the count of the others.
#[tokio::test]
async fn a_flood_of_refused_requests_is_folded_not_reported_one_by_one() {
    let target = destination(10).await;
    let (at, _task, events) = proxy(target, EgressLimits::default());
    let flood = warden_egress::MAX_REFUSALS_REPORTED_PER_SECOND as usize * 3;
    let started = Instant::now();
    for _ in 0..flood {
        let mut stream = TcpStream::connect(at).await.unwrap();
        stream
            .write_all(b"GET http://elsewhere.test/ HTTP/1.1\r\n\r\n")
            .await
            .unwrap();
        let mut reply = Vec::new();
        stream.read_to_end(&mut reply).await.unwrap();
        assert!(reply.starts_with(b"HTTP/1.1 403"));
    }
    let elapsed = started.elapsed();
    let reported = wait_for(&events, 1).await.len();
    // At most the per-second allowance in each second the flood spanned.
    let max = warden_egress::MAX_REFUSALS_REPORTED_PER_SECOND as u64;
    assert!(
        reported as u64 <= max * (elapsed.as_secs() + 1),
        "{reported} of {flood} reported in {elapsed:?}"
    );
    assert!(
        reported < flood,
        "{reported} of {flood} reported in {elapsed:?}"
    );
    // A second later, the next refusal is reported with the count folded into it.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mut stream = TcpStream::connect(at).await.unwrap();
    stream
        .write_all(b"GET http://elsewhere.test/ HTTP/1.1\r\n\r\n")
        .await
        .unwrap();
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).await.unwrap();
    let events = wait_for(&events, reported + 1).await;
    let last = events.last().unwrap();
    assert_eq!(last.decision, Decision::Refused);
    assert!(
        last.error
            .as_deref()
            .unwrap()
            .contains("were not reported one by one"),
        "{last:?}"
    );
}
