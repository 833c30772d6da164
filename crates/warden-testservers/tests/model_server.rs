//! Runs the real `warden-model-server` binary and talks to it over loopback with a tiny
//! HTTP/1.1 client, as Warden's model clients will: streamed and whole replies in both wire
//! formats, scripted errors, refusals, script exhaustion, the request log, and process life.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers: a failed unwrap is a failed test"
)]

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::channel;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);
const ANTHROPIC: &[(&str, &str)] = &[
    ("x-api-key", "test-key"),
    ("anthropic-version", "2023-06-01"),
];

/// A running server with its script, log and port.
struct ModelServer {
    child: Child,
    stdin: Option<ChildStdin>,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl ModelServer {
    fn start(script: Value) -> ModelServer {
        ModelServer::start_with(script, &[])
    }

    fn start_with(script: Value, args: &[&str]) -> ModelServer {
        let dir = tempfile::tempdir().unwrap();
        let script_path = dir.path().join("script.json");
        std::fs::write(&script_path, script.to_string()).unwrap();
        let log = dir.path().join("requests.jsonl");
        let mut child = Command::new(env!("CARGO_BIN_EXE_warden-model-server"))
            .arg("--script")
            .arg(&script_path)
            .arg("--log")
            .arg(&log)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(WAIT)
            .expect("the server announces its port");
        let port = line
            .trim_end()
            .strip_prefix("listening http://127.0.0.1:")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .parse()
            .unwrap();
        let stdin = child.stdin.take();
        ModelServer {
            child,
            stdin,
            port,
            log,
            _dir: dir,
        }
    }

    fn post(&self, path: &str, headers: &[(&str, &str)], body: &Value) -> Reply {
        self.request("POST", path, headers, body.to_string().as_bytes())
    }

    fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
        let mut stream = self.send(method, path, headers, body);
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        Reply::parse(&raw)
    }

    /// Sends a request and returns the open connection, for reading the answer by hand.
    fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> TcpStream {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n",
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body).unwrap();
        stream
    }

    fn log_lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A parsed HTTP response.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn parse(raw: &[u8]) -> Reply {
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a complete response head");
        let head = std::str::from_utf8(&raw[..split]).unwrap();
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let headers: Vec<(String, String)> = lines
            .map(|line| {
                let (name, value) = line.split_once(':').unwrap();
                (name.trim().to_ascii_lowercase(), value.trim().to_string())
            })
            .collect();
        let rest = &raw[split + 4..];
        let chunked = headers
            .iter()
            .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
        let body = if chunked {
            dechunk(rest)
        } else {
            rest.to_vec()
        };
        Reply {
            status,
            headers,
            body: String::from_utf8(body).unwrap(),
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }

    /// The server-sent events of the body: (event name, data).
    fn events(&self) -> Vec<(Option<String>, String)> {
        self.body
            .split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|event| {
                let mut name = None;
                let mut data = String::new();
                for line in event.lines() {
                    if let Some(n) = line.strip_prefix("event: ") {
                        name = Some(n.to_string());
                    } else if let Some(d) = line.strip_prefix("data: ") {
                        data.push_str(d);
                    }
                }
                (name, data)
            })
            .collect()
    }
}

fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|w| w == b"\r\n").unwrap();
        let size_text = std::str::from_utf8(&rest[..line_end]).unwrap();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
        rest = &rest[line_end + 2..];
        if size == 0 {
            return body;
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

fn anthropic_request(messages: Value, stream: bool) -> Value {
    json!({
        "model": "claude-test", "max_tokens": 1024, "stream": stream,
        "system": "You are a test.",
        "tools": [
            {"name": "read_file", "description": "reads", "input_schema": {"type": "object"}},
            {"name": "add", "description": "adds", "input_schema": {"type": "object"}},
        ],
        "messages": messages,
    })
}

fn openai_request(messages: Value, stream: bool) -> Value {
    let mut body = json!({
        "model": "gpt-test", "stream": stream,
        "tools": [
            {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}},
        ],
        "messages": messages,
    });
    if stream {
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

fn tool_turn() -> Value {
    json!({"reply": {"text": "Let me add those numbers for you.", "tool_calls": [
        {"name": "add", "arguments": {"a": 1, "b": 2, "note": "ünïcode \"quoted\""}},
        {"id": "fixed_id", "name": "read_file", "arguments": {"path": "/tmp/x"}},
    ]}})
}

#[test]
fn anthropic_stream_reassembles_to_the_scripted_turn() {
    let server = ModelServer::start(json!({"steps": [tool_turn()]}));
    let reply = server.post(
        "/v1/messages",
        ANTHROPIC,
        &anthropic_request(json!([{"role": "user", "content": "add 1 and 2"}]), true),
    );
    assert_eq!(reply.status, 200);
    assert!(
        reply
            .header("content-type")
            .unwrap()
            .starts_with("text/event-stream")
    );
    let events = reply.events();
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_deref().unwrap()).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(names.last(), Some(&"message_stop"));
    assert!(names.contains(&"ping"));
    let mut text = String::new();
    let mut blocks: Vec<(Value, String)> = Vec::new();
    let mut stop_reason = None;
    for (name, data) in &events {
        let data: Value = serde_json::from_str(data).unwrap();
        assert_eq!(
            data["type"].as_str(),
            name.as_deref(),
            "type matches the event name"
        );
        match name.as_deref().unwrap() {
            "content_block_start" => blocks.push((data["content_block"].clone(), String::new())),
            "content_block_delta" => {
                let index = data["index"].as_u64().unwrap() as usize;
                let delta = &data["delta"];
                match delta["type"].as_str().unwrap() {
                    "text_delta" => text.push_str(delta["text"].as_str().unwrap()),
                    "input_json_delta" => blocks[index]
                        .1
                        .push_str(delta["partial_json"].as_str().unwrap()),
                    other => panic!("unexpected delta {other}"),
                }
            }
            "message_delta" => {
                stop_reason = data["delta"]["stop_reason"].as_str().map(String::from)
            }
            _ => {}
        }
    }
    assert_eq!(text, "Let me add those numbers for you.");
    assert_eq!(blocks.len(), 3);
    assert_eq!(blocks[1].0["name"], "add");
    assert!(blocks[1].0["id"].as_str().unwrap().starts_with("toolu_01"));
    let input: Value = serde_json::from_str(&blocks[1].1).unwrap();
    assert_eq!(input, json!({"a": 1, "b": 2, "note": "ünïcode \"quoted\""}));
    assert_eq!(blocks[2].0["id"], "fixed_id");
    assert_eq!(
        serde_json::from_str::<Value>(&blocks[2].1).unwrap(),
        json!({"path": "/tmp/x"})
    );
    assert_eq!(stop_reason.as_deref(), Some("tool_use"));
}

#[test]
fn openai_stream_reassembles_to_the_scripted_turn() {
    let server = ModelServer::start(json!({"steps": [tool_turn()]}));
    let reply = server.post(
        "/v1/chat/completions",
        &[("authorization", "Bearer anything")],
        &openai_request(json!([{"role": "user", "content": "add 1 and 2"}]), true),
    );
    assert_eq!(reply.status, 200);
    let events = reply.events();
    assert_eq!(events.last().unwrap().1, "[DONE]");
    let mut text = String::new();
    let mut calls: Vec<(String, String, String)> = Vec::new();
    let mut finish = None;
    let mut usage = None;
    for (name, data) in &events[..events.len() - 1] {
        assert!(name.is_none());
        let chunk: Value = serde_json::from_str(data).unwrap();
        assert_eq!(chunk["object"], "chat.completion.chunk");
        if chunk["usage"].is_object() {
            usage = Some(chunk["usage"].clone());
        }
        let Some(choice) = chunk["choices"].get(0) else {
            continue;
        };
        text.push_str(choice["delta"]["content"].as_str().unwrap_or(""));
        for call in choice["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let index = call["index"].as_u64().unwrap() as usize;
            if index == calls.len() {
                calls.push((
                    call["id"].as_str().unwrap().to_string(),
                    call["function"]["name"].as_str().unwrap().to_string(),
                    String::new(),
                ));
            }
            calls[index]
                .2
                .push_str(call["function"]["arguments"].as_str().unwrap());
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            finish = Some(reason.to_string());
        }
    }
    assert_eq!(text, "Let me add those numbers for you.");
    assert_eq!(calls.len(), 2);
    assert!(calls[0].0.starts_with("call_"));
    assert_eq!(calls[0].1, "add");
    assert_eq!(
        serde_json::from_str::<Value>(&calls[0].2).unwrap(),
        json!({"a": 1, "b": 2, "note": "ünïcode \"quoted\""})
    );
    assert_eq!(calls[1].0, "fixed_id");
    assert_eq!(finish.as_deref(), Some("tool_calls"));
    assert!(usage.unwrap()["total_tokens"].as_u64().unwrap() > 0);
}

#[test]
fn whole_replies_carry_a_tool_round_trip_in_both_formats() {
    let server = ModelServer::start(json!({"steps": [
        {"reply": {"tool_calls": [{"id": "toolu_a", "name": "add", "arguments": {"a": 1}}]}},
        {"reply": {"text": "It is 3."}, "expect": {"last_tool_results_contain": ["3"], "tools_include": ["add"]}},
        {"reply": {"tool_calls": [{"id": "call_a", "name": "add", "arguments": {"a": 1}}]}},
        {"reply": {"text": "Still 3."}, "expect": {"last_tool_results_contain": ["3"], "last_user_text_contains": ["add"]}},
    ]}));
    let first = server.post(
        "/v1/messages",
        ANTHROPIC,
        &anthropic_request(json!([{"role": "user", "content": "add"}]), false),
    );
    assert_eq!(first.status, 200);
    let turn = first.json();
    assert_eq!(turn["stop_reason"], "tool_use");
    assert_eq!(turn["content"][0]["type"], "tool_use");
    let second = server.post(
        "/v1/messages",
        ANTHROPIC,
        &anthropic_request(
            json!([
                {"role": "user", "content": "add"},
                {"role": "assistant", "content": turn["content"]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "3"}]},
            ]),
            false,
        ),
    );
    assert_eq!(second.status, 200, "{}", second.body);
    assert_eq!(second.json()["content"][0]["text"], "It is 3.");
    assert_eq!(second.json()["stop_reason"], "end_turn");

    let third = server.post(
        "/chat/completions",
        &[],
        &openai_request(json!([{"role": "user", "content": "add"}]), false),
    );
    assert_eq!(third.status, 200);
    let message = third.json()["choices"][0]["message"].clone();
    assert_eq!(third.json()["choices"][0]["finish_reason"], "tool_calls");
    assert!(message["content"].is_null());
    assert_eq!(
        message["tool_calls"][0]["function"]["arguments"],
        "{\"a\":1}"
    );
    let fourth = server.post(
        "/v1/chat/completions",
        &[],
        &openai_request(
            json!([
                {"role": "user", "content": "add"},
                message,
                {"role": "tool", "tool_call_id": "call_a", "content": "3"},
            ]),
            false,
        ),
    );
    assert_eq!(fourth.status, 200, "{}", fourth.body);
    assert_eq!(
        fourth.json()["choices"][0]["message"]["content"],
        "Still 3."
    );
    assert_eq!(fourth.json()["choices"][0]["finish_reason"], "stop");
}

#[test]
fn error_steps_use_the_providers_status_and_body() {
    let server = ModelServer::start(json!({"steps": [
        {"error": {"status": 429, "retry_after": 1}},
        {"error": {"status": 529}},
        {"error": {"status": 500}},
        {"error": {"status": 429, "retry_after": 7}},
    ]}));
    let ask = || anthropic_request(json!([{"role": "user", "content": "hi"}]), true);
    let limited = server.post("/v1/messages", ANTHROPIC, &ask());
    assert_eq!(limited.status, 429);
    assert_eq!(limited.header("retry-after"), Some("1"));
    assert_eq!(limited.json()["type"], "error");
    assert_eq!(limited.json()["error"]["type"], "rate_limit_error");
    let overloaded = server.post("/v1/messages", ANTHROPIC, &ask());
    assert_eq!(overloaded.status, 529);
    assert_eq!(overloaded.json()["error"]["type"], "overloaded_error");
    let broken = server.post("/v1/messages", ANTHROPIC, &ask());
    assert_eq!(broken.status, 500);
    assert_eq!(broken.json()["error"]["type"], "api_error");
    let openai = server.post(
        "/v1/chat/completions",
        &[],
        &openai_request(json!([{"role": "user", "content": "hi"}]), false),
    );
    assert_eq!(openai.status, 429);
    assert_eq!(openai.header("retry-after"), Some("7"));
    assert_eq!(openai.json()["error"]["code"], "rate_limit_exceeded");
}

#[test]
fn invalid_requests_get_400_and_leave_the_script_alone() {
    let server = ModelServer::start(json!({"steps": [{"reply": {"text": "fine"}}]}));
    let unanswered = server.post(
        "/v1/messages",
        ANTHROPIC,
        &anthropic_request(
            json!([
                {"role": "user", "content": "add"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_x", "name": "add", "input": {}}]},
                {"role": "user", "content": "where is my result?"},
            ]),
            false,
        ),
    );
    assert_eq!(unanswered.status, 400);
    assert_eq!(unanswered.json()["error"]["type"], "invalid_request_error");
    assert!(
        unanswered.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("toolu_x")
    );

    let unanswered = server.post(
        "/v1/chat/completions",
        &[],
        &openai_request(
            json!([
                {"role": "user", "content": "add"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_x", "type": "function", "function": {"name": "add", "arguments": "{}"}}]},
                {"role": "user", "content": "where is my result?"},
            ]),
            false,
        ),
    );
    assert_eq!(unanswered.status, 400);
    assert!(
        unanswered.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("call_x")
    );

    let no_key = server.post(
        "/v1/messages",
        &[("anthropic-version", "2023-06-01")],
        &anthropic_request(json!([{"role": "user", "content": "hi"}]), false),
    );
    assert_eq!(no_key.status, 401);
    assert_eq!(no_key.json()["error"]["type"], "authentication_error");
    let no_version = server.post(
        "/v1/messages",
        &[("x-api-key", "k")],
        &anthropic_request(json!([{"role": "user", "content": "hi"}]), false),
    );
    assert_eq!(no_version.status, 400);
    let not_json = server.request("POST", "/v1/messages", ANTHROPIC, b"{not json");
    assert_eq!(not_json.status, 400);

    // None of that used the step.
    let fine = server.post(
        "/v1/messages",
        ANTHROPIC,
        &anthropic_request(json!([{"role": "user", "content": "hi"}]), false),
    );
    assert_eq!(fine.status, 200);
    let log = server.log_lines();
    assert_eq!(log.len(), 6);
    assert!(
        log[..5]
            .iter()
            .all(|line| line["step"].is_null() && line["error"].is_string())
    );
    assert_eq!(log[5]["step"], 0);
}

#[test]
fn a_failed_expectation_is_a_400_that_names_it() {
    let server = ModelServer::start(json!({"steps": [
        {"reply": {"text": "x"}, "expect": {"tools_exclude": ["read_file"]}},
        {"reply": {"text": "y"}, "expect": {"tool_count_max": 2}},
    ]}));
    let ask = || openai_request(json!([{"role": "user", "content": "hi"}]), false);
    let failed = server.post("/v1/chat/completions", &[], &ask());
    assert_eq!(failed.status, 400);
    assert!(
        failed.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("tools_exclude")
    );
    // The failed step was consumed; the next request plays the next step.
    assert_eq!(server.post("/v1/chat/completions", &[], &ask()).status, 200);
    let log = server.log_lines();
    assert_eq!(log[0]["step"], 0);
    assert!(
        log[0]["expectation_failed"]
            .as_str()
            .unwrap()
            .contains("read_file")
    );
    assert!(log[1].get("expectation_failed").is_none());
}

#[test]
fn an_exhausted_script_answers_500() {
    let server = ModelServer::start(json!({"steps": [{"reply": {"text": "only"}}]}));
    let ask = || anthropic_request(json!([{"role": "user", "content": "hi"}]), false);
    assert_eq!(server.post("/v1/messages", ANTHROPIC, &ask()).status, 200);
    let exhausted = server.post("/v1/messages", ANTHROPIC, &ask());
    assert_eq!(exhausted.status, 500);
    assert!(
        exhausted.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("script exhausted")
    );
}

#[test]
fn the_log_has_one_line_per_request_with_tools_in_order_and_no_key() {
    let server = ModelServer::start_with(
        json!({"steps": [{"reply": {"text": "a"}}, {"reply": {"text": "b"}}]}),
        &["--require-key", "sekrit-value"],
    );
    let anthropic_headers = [
        ("x-api-key", "sekrit-value"),
        ("anthropic-version", "2023-06-01"),
        ("anthropic-beta", "prompt-caching-2024-07-31"),
    ];
    let mut body = anthropic_request(json!([{"role": "user", "content": "hi"}]), true);
    body["tools"][1]["cache_control"] = json!({"type": "ephemeral"});
    assert_eq!(
        server
            .post("/v1/messages", &anthropic_headers, &body)
            .status,
        200
    );
    let ask = openai_request(json!([{"role": "user", "content": "hi"}]), false);
    assert_eq!(server.post("/v1/chat/completions", &[], &ask).status, 401);
    let wrong = [("authorization", "Bearer nope")];
    assert_eq!(
        server.post("/v1/chat/completions", &wrong, &ask).status,
        401
    );
    let right = [("authorization", "Bearer sekrit-value")];
    assert_eq!(
        server.post("/v1/chat/completions", &right, &ask).status,
        200
    );

    let log = server.log_lines();
    assert_eq!(log.len(), 4);
    assert_eq!(log[0]["format"], "anthropic");
    assert_eq!(log[0]["stream"], true);
    assert_eq!(log[0]["tools"], json!(["read_file", "add"]));
    assert_eq!(log[0]["headers"]["anthropic-version"], "2023-06-01");
    assert_eq!(
        log[0]["headers"]["anthropic-beta"],
        "prompt-caching-2024-07-31"
    );
    assert_eq!(log[0]["headers"]["x-api-key"], true);
    assert_eq!(
        log[0]["body"]["tools"][1]["cache_control"]["type"],
        "ephemeral"
    );
    assert_eq!(log[0]["status"], 200);
    assert_eq!(log[1]["status"], 401);
    assert_eq!(log[3]["format"], "openai");
    assert_eq!(log[3]["path"], "/v1/chat/completions");
    assert_eq!(log[3]["tools"], json!(["read_file", "add"]));
    assert_eq!(log[3]["step"], 1);
    let text = std::fs::read_to_string(&server.log).unwrap();
    assert!(!text.contains("sekrit-value"), "keys are never logged");
}

#[test]
fn the_log_keeps_the_request_body_as_sent() {
    let server = ModelServer::start(json!({"steps": [{"reply": {"text": "a"}}]}));
    let body = "{\n  \"model\": \"m\",\n  \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}],\n  \
                \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"zeta\", \"parameters\": \
                {\"type\": \"object\", \"properties\": {\"b\": {}, \"a\": {}}}}}]\n}\n";
    let reply = server.request("POST", "/v1/chat/completions", &[], body.as_bytes());
    assert_eq!(reply.status, 200);
    let text = std::fs::read_to_string(&server.log).unwrap();
    assert_eq!(text.lines().count(), 1);
    assert!(
        text.contains(r#""properties": {"b": {}, "a": {}}"#),
        "{text}"
    );
    let line: Value = serde_json::from_str(text.trim_end()).unwrap();
    assert_eq!(line["body"]["model"], "m");
}

#[test]
fn a_stalled_stream_sends_one_event_and_never_ends() {
    let server = ModelServer::start(
        json!({"steps": [{"reply": {"text": "never finished"}, "stall": true}]}),
    );
    let body = anthropic_request(json!([{"role": "user", "content": "hi"}]), true).to_string();
    let mut stream = server.send("POST", "/v1/messages", ANTHROPIC, body.as_bytes());
    stream
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    let started = Instant::now();
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => panic!("the stalled stream ended"),
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(e) => panic!("{e}"),
        }
        assert!(started.elapsed() < WAIT);
    }
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 200"));
    assert!(text.contains("event: message_start"));
    assert!(!text.contains("content_block_start"));
}

#[test]
fn paced_streams_are_complete() {
    let server = ModelServer::start(json!({"steps": [
        {"reply": {"text": "slow but sure"}, "delay_ms": 50, "chunk_delay_ms": 5}]}));
    let started = Instant::now();
    let reply = server.post(
        "/v1/chat/completions",
        &[],
        &openai_request(json!([{"role": "user", "content": "hi"}]), true),
    );
    assert!(started.elapsed() >= Duration::from_millis(50));
    assert_eq!(reply.events().last().unwrap().1, "[DONE]");
}

#[test]
fn health_unknown_paths_and_oversized_bodies() {
    let server = ModelServer::start(json!({"steps": []}));
    assert_eq!(server.request("GET", "/healthz", &[], b"").status, 200);
    assert_eq!(
        server.request("POST", "/v2/nothing", &[], b"{}").status,
        404
    );
    assert_eq!(
        server.request("GET", "/v1/messages", ANTHROPIC, b"").status,
        405
    );
    // Declared too large: refused before the body is read.
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream
        .write_all(
            b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: 40000000\r\nconnection: close\r\n\r\n",
        )
        .unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 413");
}

#[test]
fn the_server_exits_when_stdin_closes() {
    let mut server = ModelServer::start(json!({"steps": []}));
    drop(server.stdin.take());
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still running after stdin closed"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_bad_script_is_refused_with_its_step_named() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("bad.json");
    std::fs::write(
        &script,
        r#"{"steps": [{"reply": {}}, {"error": {"status": 200}}]}"#,
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_warden-model-server"))
        .arg("--script")
        .arg(&script)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("step 1"), "{stderr}");
}

#[test]
fn a_stalled_whole_reply_sends_headers_only() {
    let server =
        ModelServer::start(json!({"steps": [{"reply": {"text": "never"}, "stall": true}]}));
    let body = openai_request(json!([{"role": "user", "content": "hi"}]), false).to_string();
    let mut stream = server.send("POST", "/v1/chat/completions", &[], body.as_bytes());
    stream
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => panic!("the stalled reply ended"),
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(e) => panic!("{e}"),
        }
    }
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.ends_with("\r\n\r\n"), "headers only: {text:?}");
}

#[test]
fn the_server_exits_on_sigterm_even_with_a_stalled_stream() {
    let mut server =
        ModelServer::start(json!({"steps": [{"reply": {"text": "never"}, "stall": true}]}));
    let body = anthropic_request(json!([{"role": "user", "content": "hi"}]), true).to_string();
    let mut stream = server.send("POST", "/v1/messages", ANTHROPIC, body.as_bytes());
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    let pid = libc::pid_t::try_from(server.child.id()).unwrap();
    // SAFETY: sending a signal to our own child process has no memory-safety requirements.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(Instant::now() < deadline, "still running after SIGTERM");
        thread::sleep(Duration::from_millis(10));
    }
    // The stalled connection was closed, not left open.
    let mut rest = Vec::new();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    assert!(
        stream.read_to_end(&mut rest).is_ok(),
        "the connection ends with the server"
    );
}

#[test]
fn streams_can_fail_midway_or_be_cut() {
    let server = ModelServer::start(json!({"steps": [
        {"reply": {"text": "partial answer here"}, "stream_error": {"after_events": 3}},
        {"reply": {"text": "partial answer here"}, "stream_error": {"after_events": 2, "status": 500, "message": "boom"}},
        {"reply": {"text": "partial answer here"}, "cut_after_events": 4},
    ]}));
    let anthropic = server.post(
        "/v1/messages",
        ANTHROPIC,
        &anthropic_request(json!([{"role": "user", "content": "hi"}]), true),
    );
    assert_eq!(anthropic.status, 200);
    let events = anthropic.events();
    assert_eq!(events.len(), 4);
    let (name, data) = events.last().unwrap();
    assert_eq!(name.as_deref(), Some("error"));
    let data: Value = serde_json::from_str(data).unwrap();
    assert_eq!(data["type"], "error");
    assert_eq!(data["error"]["type"], "overloaded_error");

    let openai = server.post(
        "/v1/chat/completions",
        &[],
        &openai_request(json!([{"role": "user", "content": "hi"}]), true),
    );
    let events = openai.events();
    assert_eq!(events.len(), 3);
    let last: Value = serde_json::from_str(&events[2].1).unwrap();
    assert_eq!(last["error"]["message"], "boom");
    assert_eq!(last["error"]["type"], "server_error");
    assert!(last.get("choices").is_none());

    let cut = server.post(
        "/v1/messages",
        ANTHROPIC,
        &anthropic_request(json!([{"role": "user", "content": "hi"}]), true),
    );
    let names: Vec<String> = cut.events().into_iter().filter_map(|(n, _)| n).collect();
    assert_eq!(names.len(), 4);
    assert!(!names.contains(&"message_stop".to_string()));
}

#[test]
fn a_turn_can_end_at_the_token_limit_with_scripted_usage() {
    let step = json!({"reply": {"text": "cut sh", "stop": "max_tokens",
                                "usage": {"input_tokens": 1000, "output_tokens": 7}}});
    let server = ModelServer::start(json!({"steps": [step, step, step]}));
    let whole = server.post(
        "/v1/messages",
        ANTHROPIC,
        &anthropic_request(json!([{"role": "user", "content": "hi"}]), false),
    );
    assert_eq!(whole.json()["stop_reason"], "max_tokens");
    assert_eq!(
        whole.json()["usage"],
        json!({"input_tokens": 1000, "output_tokens": 7})
    );
    let streamed = server.post(
        "/v1/messages",
        ANTHROPIC,
        &anthropic_request(json!([{"role": "user", "content": "hi"}]), true),
    );
    let delta = streamed
        .events()
        .into_iter()
        .find(|(n, _)| n.as_deref() == Some("message_delta"))
        .unwrap();
    let delta: Value = serde_json::from_str(&delta.1).unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "max_tokens");
    assert_eq!(delta["usage"]["output_tokens"], 7);
    let openai = server.post(
        "/v1/chat/completions",
        &[],
        &openai_request(json!([{"role": "user", "content": "hi"}]), false),
    );
    assert_eq!(openai.json()["choices"][0]["finish_reason"], "length");
    assert_eq!(openai.json()["usage"]["total_tokens"], 1007);
}
