//! Runs the real `warden-testserver` binary in the modes whose point is process behaviour
//! (exit codes, stdin EOF, signals, output volume), which unit tests cannot show.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a failed unwrap is a failed test"
)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);

struct Peer {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Peer {
    fn start(args: &[&str], env: &[(&str, &Path)]) -> Peer {
        let mut command = Command::new(env!("CARGO_BIN_EXE_warden-testserver"));
        command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Own process group, so a test can SIGKILL the server and all it left behind.
            .process_group(0);
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Peer {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, message: &Value) {
        self.send_raw(message.to_string().as_bytes());
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn line(&self) -> String {
        self.lines.recv_timeout(WAIT).unwrap()
    }

    fn message(&self) -> Value {
        serde_json::from_str(&self.line()).unwrap()
    }

    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let answer = self.message();
        assert_eq!(answer["id"], id, "{answer}");
        answer
    }

    fn initialize(&mut self) -> Value {
        self.request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
        )
    }

    fn call(&mut self, id: u64, tool: &str, arguments: Value) -> Value {
        self.request(
            id,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        )
    }

    fn assert_silent_for(&self, duration: Duration) {
        match self.lines.recv_timeout(duration) {
            Err(RecvTimeoutError::Timeout) => {}
            other => panic!("expected no output, got {other:?}"),
        }
    }

    fn close_stdin(&mut self) {
        self.stdin = None;
    }

    fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "server did not exit");
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn stderr(&mut self) -> String {
        let mut text = String::new();
        std::io::Read::read_to_string(self.child.stderr.as_mut().unwrap(), &mut text).unwrap();
        text
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        // SAFETY: plain syscall; the group id is the child's pid (process_group(0)).
        unsafe { libc::killpg(self.child.id() as libc::pid_t, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

/// A file path for one test, removed again when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let file = format!("warden-testserver-{}-{name}", std::process::id());
        let path = std::env::temp_dir().join(file);
        let _ = std::fs::remove_file(&path);
        Scratch(path)
    }

    fn read(&self) -> String {
        std::fs::read_to_string(&self.0).unwrap()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn is_alive(pid: u32) -> bool {
    // A zombie still answers kill(0); look at its state instead.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[test]
fn good_session_logs_calls_and_ends_at_eof() {
    let call_log = Scratch::new("calls.log");
    let mut peer = Peer::start(&["good"], &[("WARDEN_TEST_CALL_LOG", &call_log.0)]);
    assert_eq!(peer.initialize()["result"]["protocolVersion"], "2025-11-25");
    let answer = peer.call(2, "echo", json!({"message": "hi"}));
    assert_eq!(answer["result"]["content"][0]["text"], "echo: hi");
    peer.close_stdin();
    assert!(peer.wait().success());
    let logged = call_log.read();
    assert_eq!(logged.lines().count(), 1);
    assert_eq!(
        serde_json::from_str::<Value>(logged.trim()).unwrap()["params"]["name"],
        "echo"
    );
}

#[test]
fn garbage_and_oversized_input_get_errors_and_the_server_goes_on() {
    let mut peer = Peer::start(&[], &[]);
    peer.send_raw(b"this is not json");
    assert_eq!(peer.message()["error"]["code"], -32700);
    peer.send_raw(&vec![b'x'; 1024 * 1024 + 10]);
    assert_eq!(peer.message()["error"]["code"], -32600);
    assert_eq!(peer.request(5, "ping", Value::Null)["result"], json!({}));
}

#[test]
fn hang_on_call_never_answers_but_records_cancellation() {
    let cancel_log = Scratch::new("cancel.log");
    let mut peer = Peer::start(
        &["hang-on-call"],
        &[("WARDEN_TEST_CANCEL_LOG", &cancel_log.0)],
    );
    peer.initialize();
    peer.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "echo", "arguments": {"message": "x"}}}));
    peer.assert_silent_for(Duration::from_millis(300));
    peer.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "reason": "test"}}));
    // The ping answer proves the notification before it was handled.
    assert_eq!(peer.request(8, "ping", Value::Null)["result"], json!({}));
    assert_eq!(cancel_log.read(), "cancelled 7\n");
}

#[test]
fn crash_mid_call_exits_101_without_answering() {
    let mut peer = Peer::start(&["crash-mid-call"], &[]);
    peer.initialize();
    peer.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}));
    assert_eq!(peer.wait().code(), Some(101));
    assert!(peer.lines.recv_timeout(Duration::from_millis(200)).is_err());
    assert!(peer.stderr().contains("about to crash"));
}

#[test]
fn exit_at_start_exits_3_with_a_reason() {
    let mut peer = Peer::start(&["exit-at-start"], &[]);
    assert_eq!(peer.wait().code(), Some(3));
    assert!(peer.stderr().contains("fatal: cannot open database"));
}

#[test]
fn huge_line_is_one_valid_json_line() {
    let mut peer = Peer::start(&["huge-line", "--bytes", "3000000"], &[]);
    peer.initialize();
    peer.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"message": "x"}}}));
    let line = peer.line();
    let answer: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(answer["id"], 2);
    assert_eq!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .map(str::len),
        Some(3_000_000)
    );
}

#[test]
fn bad_json_lines_follow_the_initialize_answer() {
    let mut peer = Peer::start(&["bad-json-lines", "--count", "3"], &[]);
    peer.initialize();
    for _ in 0..3 {
        assert!(serde_json::from_str::<Value>(&peer.line()).is_err());
    }
    assert_eq!(peer.request(2, "ping", Value::Null)["result"], json!({}));
}

#[test]
fn stdout_logs_precede_each_answer() {
    let mut peer = Peer::start(&["stdout-logs"], &[]);
    peer.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
    assert_eq!(peer.line(), "INFO handling ping");
    assert_eq!(peer.message()["id"], 1);
}

#[test]
fn silent_never_writes_and_slow_start_is_slow() {
    let mut silent = Peer::start(&["silent"], &[]);
    silent.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
    silent.assert_silent_for(Duration::from_millis(300));
    silent.close_stdin();
    assert!(silent.wait().success());

    let started = Instant::now();
    let mut slow = Peer::start(&["slow-start", "--delay-ms", "400"], &[]);
    slow.request(1, "ping", Value::Null);
    assert!(started.elapsed() >= Duration::from_millis(400));
}

#[test]
fn roots_mode_reports_what_the_host_answered() {
    let mut peer = Peer::start(&["roots"], &[]);
    peer.initialize();
    peer.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    for _ in 0..2 {
        let request = peer.message();
        let result = match request["method"].as_str() {
            Some("roots/list") => json!({"roots": [{"uri": "file:///work", "name": "work"}]}),
            Some("ping") => json!({}),
            other => panic!("unexpected {other:?}"),
        };
        peer.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": result}));
    }
    let answer = peer.call(2, "echo", json!({"message": "x"}));
    assert_eq!(
        answer["result"]["content"][0]["text"],
        r#"roots: {"roots":[{"name":"work","uri":"file:///work"}]}; ping: ok"#
    );
}

#[test]
fn grandchild_survives_sigterm_and_eof_until_the_group_is_killed() {
    let pid_file = Scratch::new("pids");
    let mut peer = Peer::start(&["grandchild"], &[("WARDEN_TEST_PID_FILE", &pid_file.0)]);
    peer.initialize();
    let pids: Vec<u32> = pid_file
        .read()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2);
    assert_eq!(pids[0], peer.child.id());
    for pid in &pids {
        // SAFETY: plain syscall on a process this test started.
        unsafe { libc::kill(*pid as libc::pid_t, libc::SIGTERM) };
    }
    peer.close_stdin();
    thread::sleep(Duration::from_millis(300));
    assert!(
        pids.iter().all(|&pid| is_alive(pid)),
        "SIGTERM or EOF ended a process"
    );

    // SAFETY: plain syscall on the group this test created.
    unsafe { libc::killpg(peer.child.id() as libc::pid_t, libc::SIGKILL) };
    assert!(!peer.wait().success());
    let deadline = Instant::now() + WAIT;
    while is_alive(pids[1]) {
        assert!(Instant::now() < deadline, "grandchild outlived SIGKILL");
        thread::sleep(Duration::from_millis(20));
    }
}
