//! The brain's side of a channel against a stand-in supervisor (a short Python script that
//! speaks the framing): a brain that keeps executable pins refuses a supervisor that does
//! not report them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use warden_relay::channel::{Channel, Deadlines, StreamPins};
use warden_relay::pins::Report;

/// Answers the brain's Hello with a Ready of the version in argv[1] ("0": none, as before
/// version 2), then reads frames until the channel ends.
const SUPERVISOR: &str = r#"
import json, struct, sys
def read_frame():
    head = sys.stdin.buffer.read(4)
    if len(head) < 4:
        sys.exit(0)
    (n,) = struct.unpack(">I", head)
    return sys.stdin.buffer.read(n)
def write_frame(kind, payload):
    body = bytes([kind, 0]) + b"\0\0\0\0" + payload
    sys.stdout.buffer.write(struct.pack(">I", len(body)) + body)
    sys.stdout.buffer.flush()
read_frame()
ready = {"servers": ["s"]}
if sys.argv[1] != "0":
    ready["version"] = int(sys.argv[1])
write_frame(2, json.dumps(ready).encode())
while True:
    read_frame()
"#;

fn channel(version: u32) -> Channel {
    let spec = warden_config::RelayChannel {
        command: vec![
            "python3".into(),
            "-c".into(),
            SUPERVISOR.into(),
            version.to_string(),
        ],
        secrets: BTreeMap::new(),
        reconnect: warden_config::ReconnectSpec::default(),
    };
    Channel::new("box", spec, 1 << 20)
}

fn pins() -> StreamPins {
    Arc::new(|_: &Report| Ok(()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_brain_keeping_pins_refuses_a_supervisor_that_does_not_report_them() {
    let limit = Duration::from_secs(10);
    // A supervisor from before pins (no version in its Ready) could start anything: a
    // stream that asks for pins is refused, naming the server and what to do.
    let old = channel(0);
    let error = old
        .open("s", Arc::new(Deadlines::default()), limit, Some(pins()))
        .await
        .err()
        .expect("a stream asking for pins was opened on a supervisor that cannot pin");
    let error = error.to_string();
    assert!(
        error.contains("does not report what `s` runs") && error.contains("update Warden"),
        "{error}"
    );
    // Control: the same supervisor still serves a brain that keeps no pins (no store).
    old.open("s", Arc::new(Deadlines::default()), limit, None)
        .await
        .unwrap();
    // Control: a supervisor that reports pins serves a stream that asks for them.
    let current = channel(warden_relay::hello::PINS_VERSION);
    current
        .open("s", Arc::new(Deadlines::default()), limit, Some(pins()))
        .await
        .unwrap();
    old.release().await;
    current.release().await;
}
