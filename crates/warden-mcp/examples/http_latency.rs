//! Per-call latency of Warden's Streamable HTTP client (bench/http-latency runs it).
//!
//! `http_latency URL ERA CALLS`: opens a session in ERA (`legacy` or `modern`), makes 50
//! warm-up calls of `add {a: 2, b: 3}`, then CALLS sequential calls, each timed from send to
//! parsed result, and prints one JSON line: `{"client":"warden","era":…,"median_us":…,
//! "p99_us":…,"mean_us":…,"calls":…}`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Map, json};
use warden_config::{EraPreference, HttpSettings};
use warden_mcp::http::{ClientProfile, Remote, open};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (url, era, calls) = (&args[1], &args[2], args[3].parse::<usize>().unwrap());
    let remote = Remote {
        name: "bench".into(),
        url: url.clone(),
        headers: BTreeMap::new(),
        settings: HttpSettings::default(),
        era: if era == "modern" {
            EraPreference::Modern
        } else {
            EraPreference::Legacy
        },
        max_bytes: warden_config::DEFAULT_MAX_MESSAGE_BYTES,
        connect_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(30),
        backoff: warden_mcp::http::reconnect::Backoff::system(),
        transport: None,
        oauth: None,
    };
    let (session, _info) = open(&remote, &ClientProfile::default()).await.unwrap();
    let mut params = Map::new();
    params.insert("name".into(), json!("add"));
    params.insert("arguments".into(), json!({"a": 2, "b": 3}));
    for _ in 0..50 {
        session
            .request("tools/call", params.clone(), None)
            .await
            .unwrap();
    }
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let started = Instant::now();
        let result = session
            .request("tools/call", params.clone(), None)
            .await
            .unwrap();
        samples.push(started.elapsed().as_micros() as u64);
        assert_eq!(result["structuredContent"]["result"], 5, "{result}");
    }
    session.close().await;
    samples.sort_unstable();
    let mean = samples.iter().sum::<u64>() / samples.len() as u64;
    println!(
        "{}",
        json!({"client": "warden", "era": era, "calls": calls, "median_us": samples[samples.len() / 2],
               "p99_us": samples[samples.len() * 99 / 100], "mean_us": mean})
    );
}
