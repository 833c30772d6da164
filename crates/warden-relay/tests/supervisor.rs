//! The supervisor driven frame by frame over in-memory pipes, with a small Python server as
//! the child (started unconfined through `DirectLauncher`: confinement is covered end to
//! end in `crates/warden/tests/relay.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, DuplexStream};
use warden_mcp::{DirectLauncher, Launcher};
use warden_relay::frame::{Frame, Kind, read_frame, write_frame};
use warden_relay::pins::{Executables, Report, Verdict};
use warden_relay::supervisor::codes;
use warden_relay::{RestartPolicy, Supervisor};

const SERVER: &str = r#"
import json, os, sys, time
initialized = False
for line in sys.stdin:
    msg = json.loads(line)
    method, id = msg.get("method"), msg.get("id")
    if id is None:
        continue
    if method == "initialize":
        initialized = True
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "fake", "version": "1"}}
        out = {"jsonrpc": "2.0", "id": id, "result": result}
    elif method == "tools/call":
        name = msg["params"]["name"]
        if not initialized:
            out = {"jsonrpc": "2.0", "id": id, "error": {"code": -32600, "message": "not initialized"}}
        elif name == "crash":
            sys.stderr.write("crashing now\n"); sys.stderr.flush()
            os._exit(7)
        elif name == "hang":
            time.sleep(30)
            continue
        elif name in ("notify", "flood"):
            token = msg["params"].get("_meta", {}).get("progressToken")
            notes = [{"method": "notifications/progress",
                      "params": {"progressToken": token, "progress": 1, "total": 2}},
                     {"method": "notifications/message",
                      "params": {"level": "info", "data": "halfway"}},
                     {"method": "notifications/resources/updated", "params": {"uri": "file:///x"}},
                     {"method": "notifications/other", "params": {}}]
            if name == "flood":
                notes = [{"method": "notifications/message",
                          "params": {"level": "info", "data": "flood %d" % n}} for n in range(3000)]
            for note in notes:
                note["jsonrpc"] = "2.0"
                sys.stdout.write(json.dumps(note) + "\n")
            out = {"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": name}]}}
        else:
            text = {"pid": str(os.getpid()), "env": os.environ.get("SECRET_X", "none"),
                    "mode": os.environ.get("MODE", "none"),
                    "id": str(id)}.get(name, "?")
            out = {"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}}
    else:
        out = {"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
"#;

/// The supervisor's hashing and starting (a `ConfinedLauncher`), counting its
/// fingerprints: each one reads every file a start runs that the process has not hashed
/// before.
struct Counting {
    inner: warden_mcp::ConfinedLauncher,
    hashes: Arc<AtomicUsize>,
}

impl Executables for Counting {
    fn fingerprint(
        &self,
        request: &warden_mcp::LaunchRequest,
    ) -> Result<warden_mcp::Fingerprint, warden_mcp::FingerprintError> {
        self.hashes.fetch_add(1, Ordering::SeqCst);
        self.inner.fingerprint(request)
    }

    fn launch_pinned(
        &self,
        request: &warden_mcp::LaunchRequest,
        fingerprint: &warden_mcp::Fingerprint,
    ) -> Result<warden_mcp::Launched, warden_mcp::LaunchError> {
        self.inner.launch_pinned(request, fingerprint)
    }

    fn exposed(
        &self,
        fingerprint: &warden_mcp::Fingerprint,
        configured: &[warden_config::ServerSpec],
    ) -> Vec<String> {
        Executables::exposed(&self.inner, fingerprint, configured)
    }
}

struct Harness {
    /// Fingerprints taken by the supervisor (with pins).
    hashes: Arc<AtomicUsize>,
    toml: std::path::PathBuf,
    script: std::path::PathBuf,
    input: DuplexStream,
    output: DuplexStream,
    session: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

async fn start(restart: RestartPolicy) -> Harness {
    start_with(restart, false).await
}

/// With `pins`, the stream asks for executable pins and the server runs unconfined
/// through a `ConfinedLauncher` (which hashes and starts exactly what it hashed).
async fn start_with(restart: RestartPolicy, pins: bool) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("server.py");
    std::fs::write(&script, SERVER).unwrap();
    let toml = dir.path().join("inner.toml");
    std::fs::write(
        &toml,
        format!(
            "[servers.fake]\ncommand = \"python3\"\nargs = [\"-u\", {:?}]\n{}",
            script.display().to_string(),
            if pins { "confine = false\n" } else { "" }
        ),
    )
    .unwrap();
    let env = warden_config::Environment::from_process().unwrap();
    let config = warden_config::load_file(&toml, &env).unwrap();
    let servers: BTreeMap<_, _> = config
        .servers
        .into_iter()
        .map(|spec| (spec.name.clone(), spec))
        .collect();
    let launcher: Arc<dyn Launcher> = Arc::new(DirectLauncher::from_env());
    let reload: warden_relay::supervisor::Reload = {
        let toml = toml.clone();
        Arc::new(move || {
            let env = warden_config::Environment::from_process().map_err(|e| e.to_string())?;
            let config = warden_config::load_file(&toml, &env).map_err(|e| e.to_string())?;
            Ok(Some(
                config
                    .servers
                    .into_iter()
                    .map(|spec| (spec.name.clone(), spec))
                    .collect(),
            ))
        })
    };
    let hashes = Arc::new(AtomicUsize::new(0));
    let executables: Option<Arc<dyn Executables>> = pins.then(|| {
        Arc::new(Counting {
            inner: warden_mcp::ConfinedLauncher::from_env(dir.path().join("scratch")),
            hashes: Arc::clone(&hashes),
        }) as Arc<dyn Executables>
    });
    let supervisor = Supervisor {
        servers,
        reload: Some(reload),
        launcher,
        executables,
        restart,
        max_payload: 1 << 20,
    };
    let (input, their_input) = tokio::io::duplex(1 << 16);
    let (their_output, output) = tokio::io::duplex(1 << 16);
    let session = tokio::spawn(async move {
        supervisor.run(their_input, their_output).await.unwrap();
    });
    let mut harness = Harness {
        hashes,
        toml,
        script,
        input,
        output,
        session,
        _dir: dir,
    };
    let hello = json!({"version": 1, "secrets": {"fake": {"SECRET_X": "per-session"}}});
    harness
        .send(Frame::new(Kind::Hello, "", hello.to_string().into_bytes()))
        .await;
    let ready = harness.next().await;
    assert_eq!(ready.kind, Kind::Ready);
    let open = if pins {
        br#"{"pins":true}"#.to_vec()
    } else {
        Vec::new()
    };
    harness.send(Frame::new(Kind::Open, "fake", open)).await;
    harness
}

impl Harness {
    async fn send(&mut self, frame: Frame) {
        write_frame(&mut self.input, &frame, 1 << 20).await.unwrap();
        self.input.flush().await.unwrap();
    }

    async fn request(&mut self, id: u64, method: &str, params: Value, deadline_ms: u32) {
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut frame = Frame::new(Kind::Data, "fake", message.to_string().into_bytes());
        frame.deadline_ms = deadline_ms;
        self.send(frame).await;
    }

    async fn call(&mut self, id: u64, tool: &str) -> Value {
        self.request(id, "tools/call", json!({"name": tool}), 0)
            .await;
        self.answer().await
    }

    /// The next frame that is not a log line.
    async fn next(&mut self) -> Frame {
        loop {
            let frame = tokio::time::timeout(
                Duration::from_secs(10),
                read_frame(&mut self.output, 1 << 20),
            )
            .await
            .expect("no frame within 10 s")
            .unwrap();
            if frame.kind != Kind::Log {
                return frame;
            }
        }
    }

    /// The next answer (notifications are skipped).
    async fn answer(&mut self) -> Value {
        loop {
            let frame = self.next().await;
            assert_eq!(frame.kind, Kind::Data, "{frame:?}");
            let message: Value = serde_json::from_slice(&frame.payload).unwrap();
            if message.get("id").is_some() {
                return message;
            }
        }
    }

    async fn initialize(&mut self) {
        self.request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-11-25"}),
            5000,
        )
        .await;
        let answer = self.answer().await;
        assert_eq!(answer["id"], 1);
        initialized(self).await;
    }
}

fn text(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(") ").map(|(_, rest)| rest.to_owned()))
        .is_some_and(|rest| !rest.starts_with('Z') && !rest.starts_with('X'))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_child_is_replaced_with_the_handshake_replayed_until_the_burst_limit() {
    let mut harness = start(RestartPolicy {
        delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(50),
        burst: 3,
        window: Duration::from_secs(60),
        ..RestartPolicy::default()
    })
    .await;
    harness.initialize().await;
    // The session's secret reached the child's environment.
    assert_eq!(text(&harness.call(2, "env").await), "per-session");
    // The brain's ids come back as they were sent.
    let answer = harness.call(77, "id").await;
    assert_eq!(answer["id"], 77);
    assert_ne!(
        text(&answer),
        "77",
        "the child saw the supervisor's id, not the brain's"
    );
    let first = text(&harness.call(3, "pid").await);

    // A crash mid-call answers the pending request with an error at once...
    let crashed = harness.call(4, "crash").await;
    assert_eq!(crashed["id"], 4);
    assert_eq!(crashed["error"]["code"], codes::SERVER_EXITED);
    // ...and the next request is served by a new child that got the brain's handshake
    // again (the fake refuses calls before `initialize`).
    let second = harness.call(5, "pid").await;
    assert!(second.get("error").is_none(), "{second}");
    assert_ne!(text(&second), first, "a new process");

    // Third start, third crash: the burst limit (3 starts a minute) is reached.
    let crashed = harness.call(6, "crash").await;
    assert_eq!(crashed["error"]["code"], codes::SERVER_EXITED);
    assert!(harness.call(7, "pid").await["result"].is_object());
    let crashed = harness.call(8, "crash").await;
    assert_eq!(crashed["error"]["code"], codes::SERVER_EXITED);
    harness
        .request(9, "tools/call", json!({"name": "pid"}), 0)
        .await;
    let closed = harness.next().await;
    assert_eq!(closed.kind, Kind::Closed, "{closed:?}");
    assert!(String::from_utf8_lossy(&closed.payload).contains("not started again"));
    let refused = harness.answer().await;
    assert_eq!(refused["error"]["code"], codes::SERVER_EXITED);
    drop(harness.input);
    harness.session.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_past_its_deadline_is_cancelled_and_answered_before_the_brains_own() {
    let mut harness = start(RestartPolicy::default()).await;
    harness.initialize().await;
    let started = Instant::now();
    harness
        .request(2, "tools/call", json!({"name": "hang"}), 600)
        .await;
    let answer = harness.answer().await;
    let took = started.elapsed();
    assert_eq!(answer["id"], 2);
    assert_eq!(answer["error"]["code"], codes::TIMEOUT);
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("the supervisor's deadline"), "{message}");
    // The brain allowed 600 ms; the supervisor answered within it, less its margin.
    assert!(took < Duration::from_millis(600), "took {took:?}");
    assert!(took >= Duration::from_millis(400), "took {took:?}");
    drop(harness.input);
    harness.session.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_end_of_the_channel_stops_every_child() {
    let mut harness = start(RestartPolicy::default()).await;
    harness.initialize().await;
    let pid: i32 = text(&harness.call(2, "pid").await).parse().unwrap();
    assert!(alive(pid));
    // The brain goes away without a word: end of stream.
    drop(harness.input);
    tokio::time::timeout(Duration::from_secs(10), harness.session)
        .await
        .expect("the supervisor did not end with its channel")
        .unwrap();
    assert!(!alive(pid), "the child {pid} outlived the session");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_not_defined_inside_is_closed_with_a_reason() {
    let mut harness = start(RestartPolicy::default()).await;
    harness
        .send(Frame::new(Kind::Open, "nope", Vec::new()))
        .await;
    let closed = harness.next().await;
    assert_eq!(closed.kind, Kind::Closed);
    assert_eq!(closed.server, "nope");
    assert!(String::from_utf8_lossy(&closed.payload).contains("no server `nope`"));
    harness.send(Frame::new(Kind::Bye, "", Vec::new())).await;
    harness.session.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_definition_applies_at_the_next_call_and_the_session_goes_on() {
    let mut harness = start(RestartPolicy::default()).await;
    harness.initialize().await;
    assert_eq!(text(&harness.call(2, "mode").await), "none");
    let first: i32 = text(&harness.call(3, "pid").await).parse().unwrap();
    // The sandbox's configuration changes between two calls of one session...
    std::fs::write(
        &harness.toml,
        format!(
            "[servers.fake]\ncommand = \"python3\"\nargs = [\"-u\", {:?}]\nenv = {{ MODE = \"b\" }}\n",
            harness.script.display().to_string()
        ),
    )
    .unwrap();
    // ...and without a word from the brain, the idle server's old child is stopped and
    // the brain told that its list may have changed (its next turn reads it again)...
    // (its tools, resources and prompts alike)...
    for list in ["tools", "resources", "prompts"] {
        let note = harness.next().await;
        assert_eq!(note.kind, Kind::Data, "{note:?}");
        let note: Value = serde_json::from_slice(&note.payload).unwrap();
        assert_eq!(
            note["method"],
            format!("notifications/{list}/list_changed"),
            "{note}"
        );
    }
    assert!(!alive(first), "the child of the old definition is stopped");
    // ...and the next call runs under the new definition, in a new child that was given
    // the brain's handshake (the server answers "not initialized" otherwise); the brain
    // neither reopened the stream nor initialised again.
    assert_eq!(text(&harness.call(4, "mode").await), "b");
    let second: i32 = text(&harness.call(5, "pid").await).parse().unwrap();
    assert_ne!(first, second);
    // An unchanged file restarts nothing.
    assert_eq!(text(&harness.call(6, "pid").await), second.to_string());
    drop(harness.input);
    harness.session.await.unwrap();
    assert!(!alive(second));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_removed_from_the_configuration_is_stopped_and_its_stream_closed() {
    let mut harness = start(RestartPolicy::default()).await;
    harness.initialize().await;
    let pid: i32 = text(&harness.call(2, "pid").await).parse().unwrap();
    std::fs::write(
        &harness.toml,
        format!(
            "[servers.other]\ncommand = \"python3\"\nargs = [\"-u\", {:?}]\n",
            harness.script.display().to_string()
        ),
    )
    .unwrap();
    // Closed without a word from the brain, at the supervisor's next look at the file.
    let closed = harness.next().await;
    assert_eq!(closed.kind, Kind::Closed, "{closed:?}");
    assert_eq!(closed.server, "fake");
    assert!(
        String::from_utf8_lossy(&closed.payload).contains("no longer defined"),
        "{closed:?}"
    );
    assert!(!alive(pid), "the removed server's child is stopped");
    // A request on the closed stream is refused, naming it.
    harness
        .request(3, "tools/call", json!({"name": "pid"}), 0)
        .await;
    let closed = harness.next().await;
    assert_eq!(closed.kind, Kind::Closed, "{closed:?}");
    assert!(
        String::from_utf8_lossy(&closed.payload).contains("not open"),
        "{closed:?}"
    );
    drop(harness.input);
    harness.session.await.unwrap();
}

/// The brain's side of a reported start: the next frame is the report; answers it.
async fn verdict(harness: &mut Harness, allow: bool, reason: &str) -> Report {
    let frame = harness.next().await;
    assert_eq!(frame.kind, Kind::Pin, "{frame:?}");
    assert_eq!(frame.server, "fake");
    let report: Report = serde_json::from_slice(&frame.payload).unwrap();
    let verdict = Verdict {
        start: report.start,
        allow,
        reason: reason.into(),
    };
    harness
        .send(Frame::new(
            Kind::Verdict,
            "fake",
            serde_json::to_vec(&verdict).unwrap(),
        ))
        .await;
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_runs_only_on_the_brains_verdict_and_a_refused_one_never_runs() {
    let mut harness = start_with(
        RestartPolicy {
            delay: Duration::from_millis(10),
            ..RestartPolicy::default()
        },
        true,
    )
    .await;
    let marker = harness.script.with_file_name("swapped-ran");
    // The first start is reported before anything runs: the script is among what it
    // hashed, with the hash of its bytes.
    harness
        .request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-11-25"}),
            5000,
        )
        .await;
    let first = verdict(&mut harness, true, "").await;
    let script = first
        .files
        .iter()
        .find(|file| file.path == harness.script)
        .unwrap_or_else(|| panic!("the script is not in the report: {first:?}"));
    assert_eq!(script.role, "script");
    assert_eq!(
        script.sha256,
        warden_mcp::fingerprint::sha256_file(&harness.script).unwrap()
    );
    assert_eq!(harness.answer().await["id"], 1);
    initialized(&mut harness).await;
    assert!(harness.call(2, "pid").await["result"].is_object());

    // The script is swapped inside the sandbox (by a task, say), and the child exits.
    std::fs::write(
        &harness.script,
        format!(
            "open({:?}, 'w').write('ran')\n{SERVER}",
            marker.display().to_string()
        ),
    )
    .unwrap();
    assert_eq!(
        harness.call(3, "crash").await["error"]["code"],
        codes::SERVER_EXITED
    );
    // The next start reports the new hash; the brain refuses it: the request fails with
    // the brain's reason, and the swapped script never ran.
    harness
        .request(4, "tools/call", json!({"name": "pid"}), 0)
        .await;
    let second = verdict(&mut harness, false, "drift: server.py changed").await;
    assert_ne!(second.files, first.files, "the report shows the change");
    assert_eq!(second.program_sha256, first.program_sha256);
    let refused = harness.answer().await;
    assert_eq!(refused["id"], 4);
    assert_eq!(refused["error"]["code"], codes::REFUSED, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("drift: server.py changed"),
        "{refused}"
    );
    assert!(!marker.exists(), "the refused script ran");

    // A verdict for another start (stale, or forged) allows nothing: the start waits for
    // its own, and the refusal of that one stands.
    harness
        .request(5, "tools/call", json!({"name": "pid"}), 0)
        .await;
    let frame = harness.next().await;
    assert_eq!(frame.kind, Kind::Pin);
    let third: Report = serde_json::from_slice(&frame.payload).unwrap();
    for start in [second.start, third.start + 1] {
        let stale = Verdict {
            start,
            allow: true,
            reason: String::new(),
        };
        harness
            .send(Frame::new(
                Kind::Verdict,
                "fake",
                serde_json::to_vec(&stale).unwrap(),
            ))
            .await;
    }
    let own = Verdict {
        start: third.start,
        allow: false,
        reason: "still refused".into(),
    };
    harness
        .send(Frame::new(
            Kind::Verdict,
            "fake",
            serde_json::to_vec(&own).unwrap(),
        ))
        .await;
    let refused = harness.answer().await;
    assert_eq!(refused["error"]["code"], codes::REFUSED, "{refused}");
    assert!(!marker.exists(), "the refused script ran");

    // Once the brain accepts the new state (the user pinned it), the same start runs.
    harness
        .request(6, "tools/call", json!({"name": "pid"}), 0)
        .await;
    let accepted = verdict(&mut harness, true, "").await;
    assert_eq!(accepted.files, second.files);
    let answer = harness.answer().await;
    assert_eq!(answer["id"], 6);
    assert!(answer["result"].is_object(), "{answer}");
    assert!(marker.exists(), "control: the accepted script runs");
    drop(harness.input);
    harness.session.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_log_messages_and_resource_updates_reach_the_brain_within_a_budget() {
    let mut harness = start(RestartPolicy::default()).await;
    harness.initialize().await;
    harness
        .request(
            2,
            "tools/call",
            json!({"name": "notify", "_meta": {"progressToken": "brain-token-7"}}),
            0,
        )
        .await;
    // Everything the child said before its answer, in order.
    let mut notes = Vec::new();
    let answer = loop {
        let frame = harness.next().await;
        assert_eq!(frame.kind, Kind::Data, "{frame:?}");
        let message: Value = serde_json::from_slice(&frame.payload).unwrap();
        if message.get("id").is_some() {
            break message;
        }
        notes.push(message);
    };
    assert_eq!(answer["id"], 2);
    let methods: Vec<&str> = notes
        .iter()
        .map(|note| note["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        methods,
        [
            "notifications/progress",
            "notifications/message",
            "notifications/resources/updated"
        ],
        "passed on, and only these: {notes:?}"
    );
    // The progress token is the brain's own, so the brain can match it to its request.
    assert_eq!(notes[0]["params"]["progressToken"], "brain-token-7");
    assert_eq!(notes[1]["params"]["data"], "halfway");

    // A flood: 3000 log messages before the answer. The answer comes, and at most the
    // budget's burst (and what it refills meanwhile) of the messages with it.
    let started = Instant::now();
    harness
        .request(3, "tools/call", json!({"name": "flood"}), 0)
        .await;
    let mut passed = 0;
    let answer = loop {
        let frame = harness.next().await;
        let message: Value = serde_json::from_slice(&frame.payload).unwrap();
        if message.get("id").is_some() {
            break message;
        }
        passed += 1;
    };
    assert_eq!(text(&answer), "flood");
    assert!(passed >= 32, "the burst passes: {passed}");
    let allowed = 64.0 + 32.0 * started.elapsed().as_secs_f64() + 1.0;
    assert!(
        f64::from(passed) <= allowed,
        "{passed} passed, budget {allowed}"
    );
    drop(harness.input);
    harness.session.await.unwrap();
}

/// The next frame is the answer to request `id`, sent without a report to the brain (a
/// start refused inside); returns its error message.
async fn refused_inside(harness: &mut Harness, id: u64) -> String {
    let frame = harness.next().await;
    assert_eq!(frame.kind, Kind::Data, "reported to the brain: {frame:?}");
    let answer: Value = serde_json::from_slice(&frame.payload).unwrap();
    assert_eq!(answer["id"], id, "{answer}");
    assert_eq!(answer["error"]["code"], codes::REFUSED, "{answer}");
    answer["error"]["message"].as_str().unwrap().to_owned()
}

async fn initialized(harness: &mut Harness) {
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    harness
        .send(Frame::new(
            Kind::Data,
            "fake",
            note.to_string().into_bytes(),
        ))
        .await;
}

/// Replays a brain that keeps calling a server whose start it refused, and a task inside
/// the sandbox that keeps rewriting what that server runs: the supervisor hashes what the
/// start runs once, not once per request. Control: a pin the user accepted meanwhile is
/// honoured at the very next request (the brain is asked each time), without hashing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_start_is_not_hashed_again_per_request_and_an_accepted_pin_runs_at_once() {
    let mut harness = start_with(
        RestartPolicy {
            delay: Duration::from_millis(10),
            rehash: Duration::from_secs(120),
            ..RestartPolicy::default()
        },
        true,
    )
    .await;
    let hashes = Arc::clone(&harness.hashes);
    let initialize = json!({"protocolVersion": "2025-11-25"});
    harness
        .request(1, "initialize", initialize.clone(), 5000)
        .await;
    let first = verdict(&mut harness, false, "drift: refused by the brain").await;
    assert_eq!(harness.answer().await["error"]["code"], codes::REFUSED);
    assert_eq!(hashes.load(Ordering::SeqCst), 1);
    // Nothing changed inside: each request reports the same state again without reading a
    // file, and the brain is asked each time.
    for id in 2..=21 {
        harness
            .request(id, "initialize", initialize.clone(), 5000)
            .await;
        let again = verdict(&mut harness, false, "drift: refused by the brain").await;
        assert!(again.start > first.start);
        assert_eq!(
            (&again.program_sha256, &again.files),
            (&first.program_sha256, &first.files)
        );
        let answer = harness.answer().await;
        assert_eq!(answer["id"], id);
        assert_eq!(answer["error"]["code"], codes::REFUSED, "{answer}");
    }
    assert_eq!(
        hashes.load(Ordering::SeqCst),
        1,
        "20 requests to a refused server hashed it again"
    );
    // The user accepted the state on the brain's side: the next request starts it.
    harness
        .request(22, "initialize", initialize.clone(), 5000)
        .await;
    verdict(&mut harness, true, "").await;
    let answer = harness.answer().await;
    assert!(answer["result"].is_object(), "{answer}");
    initialized(&mut harness).await;
    assert!(harness.call(23, "pid").await["result"].is_object());
    assert_eq!(hashes.load(Ordering::SeqCst), 1);

    // A task inside rewrites the script, and the child exits: the next start hashes the
    // new state once, and the brain refuses it ...
    let marker = harness.script.with_file_name("rewritten-ran");
    let script = harness.script.clone();
    let rewrite = |n: u32| {
        std::fs::write(
            &script,
            format!(
                "open({:?}, 'w').write('ran')\n{SERVER}\n# {n}\n",
                marker.display().to_string()
            ),
        )
        .unwrap();
    };
    rewrite(0);
    assert_eq!(
        harness.call(24, "crash").await["error"]["code"],
        codes::SERVER_EXITED
    );
    harness
        .request(25, "tools/call", json!({"name": "pid"}), 0)
        .await;
    verdict(&mut harness, false, "drift: the script changed").await;
    assert_eq!(harness.answer().await["error"]["code"], codes::REFUSED);
    assert_eq!(hashes.load(Ordering::SeqCst), 2);
    // ... and while it keeps changing, every further request is refused at once with the
    // refusal in force and when it is looked at again: nothing hashed, nothing reported.
    for id in 26..=45 {
        rewrite(u32::try_from(id).unwrap());
        harness
            .request(id, "tools/call", json!({"name": "pid"}), 0)
            .await;
        let why = refused_inside(&mut harness, id).await;
        assert!(
            why.contains("drift: the script changed") && why.contains("hashed again in"),
            "{why}"
        );
    }
    assert_eq!(
        hashes.load(Ordering::SeqCst),
        2,
        "a file rewritten before each request was hashed per request"
    );
    assert!(!marker.exists(), "the refused script ran");
    drop(harness.input);
    harness.session.await.unwrap();
}

/// Replays a pinned file that someone other than the supervisor's user can change inside
/// the sandbox (in a directory every user may write; owned by another user): the start is
/// refused before it is reported, naming the file and why. Controls: once fixed, the same
/// start is reported and runs; a file changed after a refusal is hashed again once the
/// re-hash interval has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_whose_files_others_can_change_is_refused_before_it_is_reported() {
    use std::os::unix::fs::PermissionsExt;
    let rehash = Duration::from_millis(300);
    let mut harness = start_with(
        RestartPolicy {
            delay: Duration::from_millis(10),
            rehash,
            ..RestartPolicy::default()
        },
        true,
    )
    .await;
    let hashes = Arc::clone(&harness.hashes);
    let dir = harness.script.parent().unwrap().to_path_buf();
    let chmod = |mode: u32| {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    let initialize = json!({"protocolVersion": "2025-11-25"});
    chmod(0o777);
    harness
        .request(1, "initialize", initialize.clone(), 5000)
        .await;
    let why = refused_inside(&mut harness, 1).await;
    for part in [
        "`fake` is not started",
        &format!(
            "{}: {} is writable by every user",
            harness.script.display(),
            dir.display()
        ),
    ] {
        assert!(why.contains(part), "{part}: {why}");
    }
    // Control: the directory is made private again; the same start is reported and runs
    // (its files did not change: not hashed again).
    chmod(0o700);
    harness
        .request(2, "initialize", initialize.clone(), 5000)
        .await;
    verdict(&mut harness, true, "").await;
    assert!(harness.answer().await["result"].is_object());
    initialized(&mut harness).await;
    assert_eq!(hashes.load(Ordering::SeqCst), 1);

    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        drop(harness.input);
        harness.session.await.unwrap();
        return;
    }
    // The script now belongs to another user; the child exits and its next start is
    // refused, naming the owner.
    std::os::unix::fs::chown(&harness.script, Some(65534), None).unwrap();
    assert_eq!(
        harness.call(3, "crash").await["error"]["code"],
        codes::SERVER_EXITED
    );
    harness
        .request(4, "tools/call", json!({"name": "pid"}), 0)
        .await;
    let why = refused_inside(&mut harness, 4).await;
    assert!(
        why.contains(&format!("{} belongs to", harness.script.display())) && why.contains("65534"),
        "{why}"
    );
    assert_eq!(hashes.load(Ordering::SeqCst), 2);
    // Given back (which changes the file's identity): refused at once until the interval
    // has passed, then hashed again, reported and started.
    std::os::unix::fs::chown(&harness.script, Some(0), None).unwrap();
    harness
        .request(5, "tools/call", json!({"name": "pid"}), 0)
        .await;
    assert!(
        refused_inside(&mut harness, 5)
            .await
            .contains("hashed again in")
    );
    assert_eq!(hashes.load(Ordering::SeqCst), 2);
    tokio::time::sleep(rehash + Duration::from_millis(100)).await;
    harness
        .request(6, "tools/call", json!({"name": "pid"}), 0)
        .await;
    verdict(&mut harness, true, "").await;
    let answer = harness.answer().await;
    assert!(answer["result"].is_object(), "{answer}");
    assert_eq!(hashes.load(Ordering::SeqCst), 3);
    drop(harness.input);
    harness.session.await.unwrap();
}
