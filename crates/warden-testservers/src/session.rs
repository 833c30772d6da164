//! One stdio session: reads messages, lets [`Server`] answer them, and applies the selected
//! mode's deviation at the points where it differs from a correct server.

use std::io::{self, BufRead, Write};
use std::thread;
use std::time::Duration;

use serde_json::{Value, json};

use crate::framing::{Line, LineReader, LineWriter, MAX_LINE_BYTES};
use crate::jsonrpc::{self, INVALID_REQUEST, Incoming};
use crate::modes::{Config, Mode};
use crate::server::Server;
use crate::{hogs, process, records};

/// How the process should end.
pub(crate) type ExitStatus = u8;

/// Exit code of `crash-mid-call` (what a Rust panic exits with).
const CRASH_EXIT: i32 = 101;
/// Exit code of `exit-at-start`.
const EXIT_AT_START: ExitStatus = 3;

/// Writes a diagnostic to stderr; a closed stderr is not worth failing for.
pub(crate) fn diagnose(text: &str) {
    let _ = writeln!(io::stderr().lock(), "{text}");
}

/// Runs the whole life of the server on stdin/stdout; returns the exit status.
pub(crate) fn run(config: &Config) -> io::Result<ExitStatus> {
    records::record_start()?;
    match config.mode {
        Mode::ExitAtStart => {
            diagnose("fatal: cannot open database /nonexistent");
            return Ok(EXIT_AT_START);
        }
        Mode::SlowStart | Mode::SlowModern => thread::sleep(Duration::from_millis(config.delay_ms)),
        Mode::SerialStart => records::serial_start(Duration::from_millis(config.delay_ms))?,
        Mode::Grandchild => {
            process::ignore_termination_signals()?;
            let grandchild = process::fork_sleeper()?;
            records::record_pids(&[std::process::id(), grandchild])?;
        }
        _ => {}
    }
    let mut session = Session {
        config,
        server: Server::new(config.settings()),
        out: LineWriter::new(io::stdout().lock()),
        deferred: None,
        asking: None,
        asked: 0,
        listen: None,
    };
    session.serve(LineReader::new(io::stdin().lock(), MAX_LINE_BYTES))?;
    if config.mode == Mode::Grandchild {
        // Models a server that does not take stdin EOF as a request to stop.
        thread::sleep(process::LINGER);
    }
    Ok(0)
}

struct Session<'a, W: Write> {
    config: &'a Config,
    server: Server,
    out: LineWriter<W>,
    /// In `roots` mode, a `tools/call` (id, params) held back until the client has answered
    /// both requests this server sent: the client answers them concurrently with its own
    /// requests, so the call may arrive first.
    deferred: Option<(Value, Value)>,
    /// In `conformance` mode over 2025-11-25: a `tools/call` waiting for the client's
    /// answer to the question this server sent it (the tool asked the 2026-07-28 way; here
    /// the question goes as a request of its own, and the tool is called again with the
    /// answer).
    asking: Option<Asking>,
    /// Questions sent so far (their ids).
    asked: u64,
    /// In `modern-list-change` mode: the id of the open `subscriptions/listen`, if any.
    listen: Option<Value>,
}

/// A call waiting for the client's answer to a question.
struct Asking {
    /// The call's id and parameters.
    id: Value,
    params: Value,
    /// The key the tool gave its question, and the id of the request that carries it.
    key: String,
    request: String,
    /// The tool's state, echoed back to it with the answer.
    state: Option<Value>,
}

impl<W: Write> Session<'_, W> {
    fn mode(&self) -> Mode {
        self.config.mode
    }

    /// Handles lines until end of input.
    fn serve<R: BufRead>(&mut self, mut input: LineReader<R>) -> io::Result<()> {
        while let Some(line) = input.next_line()? {
            if self.mode() == Mode::Silent {
                continue;
            }
            match line {
                Line::TooLong => {
                    let message = format!("line longer than {MAX_LINE_BYTES} bytes");
                    self.reply(
                        "invalid input",
                        &jsonrpc::error_response(&Value::Null, INVALID_REQUEST, &message),
                    )?;
                }
                Line::Text(raw) => self.handle_line(&raw)?,
            }
        }
        Ok(())
    }

    fn handle_line(&mut self, raw: &[u8]) -> io::Result<()> {
        match jsonrpc::parse(raw) {
            Err(rejection) => self.reply("invalid input", &rejection.to_response()),
            Ok(Incoming::Notification { method, params }) => {
                if method == "notifications/cancelled" {
                    records::record_cancel(&params)?;
                }
                for message in self.server.handle_notification(&method) {
                    self.out.send(&message)?;
                }
                Ok(())
            }
            Ok(Incoming::Response { id, outcome }) => {
                if let Some(asking) = self.asking.take() {
                    if id.as_str() == Some(asking.request.as_str()) {
                        return self.answered(asking, outcome);
                    }
                    self.asking = Some(asking);
                }
                self.server.handle_response(&id, outcome);
                if self.server.client_answered()
                    && let Some((id, params)) = self.deferred.take()
                {
                    let response = self.server.handle_request(&id, "tools/call", &params);
                    self.reply("tools/call", &response)?;
                }
                Ok(())
            }
            Ok(Incoming::Request { id, method, params }) => {
                self.handle_request(raw, &id, &method, &params)
            }
        }
    }

    fn handle_request(
        &mut self,
        raw: &[u8],
        id: &Value,
        method: &str,
        params: &Value,
    ) -> io::Result<()> {
        if self.mode() == Mode::StderrJsonrpc {
            let fake = json!({
                "jsonrpc": "2.0",
                "id": id,
                "result": {
                    "protocolVersion": "1999-01-01",
                    "content": [{"type": "text", "text": "this answer came from stderr"}]
                }
            });
            diagnose(&fake.to_string());
        }
        if method == "tools/call" {
            records::record_call(raw)?;
            match self.mode() {
                Mode::HangOnCall => return Ok(()),
                Mode::CrashMidCall => {
                    diagnose("about to crash");
                    std::process::exit(CRASH_EXIT);
                }
                Mode::HugeLine => return self.send_huge_result(id),
                Mode::Hostile if params.get("name") == Some(&json!("crash")) => {
                    for line in crate::hostile::stderr_lines() {
                        diagnose(&line);
                    }
                    std::process::exit(CRASH_EXIT);
                }
                Mode::MemoryHog | Mode::ForkBomb | Mode::DiskFiller => {
                    let outcome = match self.mode() {
                        Mode::MemoryHog => hogs::memory(self.config.bytes),
                        Mode::ForkBomb => hogs::fork(self.config.count),
                        _ => hogs::disk(self.config.bytes),
                    };
                    match outcome {
                        Ok(text) => {
                            let result = crate::tools::text_result(&text, false);
                            return self.reply(method, &jsonrpc::result_response(id, result));
                        }
                        Err(problem) => {
                            diagnose(&problem);
                            std::process::exit(hogs::HOG_EXIT);
                        }
                    }
                }
                Mode::ReadProcOne => {
                    let result = crate::tools::text_result(&hogs::proc_one(), false);
                    return self.reply(method, &jsonrpc::result_response(id, result));
                }
                Mode::Roots if !self.server.client_answered() => {
                    self.deferred = Some((id.clone(), params.clone()));
                    return Ok(());
                }
                _ => {}
            }
        }
        if method == "subscriptions/listen" && self.mode() == Mode::ModernListChange {
            // Acknowledged (everything asked for is honoured) and kept open.
            self.listen = Some(id.clone());
            let acknowledged = crate::conformance::listen_acknowledgement(id, params);
            return self.out.send(&acknowledged);
        }
        if method == "subscriptions/listen" && self.mode() == Mode::Conformance {
            let acknowledged = crate::conformance::listen_acknowledgement(id, params);
            return self.out.send(&acknowledged);
        }
        if method == "tools/call" && self.mode() == Mode::Conformance {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            for (pause, message) in crate::conformance::notifications(name, params) {
                thread::sleep(pause);
                self.out.send(&message)?;
            }
        }
        let response = self.server.handle_request(id, method, params);
        if method == "tools/call"
            && self.mode() == Mode::Conformance
            && !self.server.is_modern()
            && response.pointer("/result/resultType") == Some(&json!("input_required"))
        {
            return self.ask(id, params, &response);
        }
        if method == "tools/call" && self.mode() == Mode::NotifyFlood {
            for n in 0..self.config.count {
                self.out.send(&json!({
                    "jsonrpc": "2.0",
                    "method": "notifications/message",
                    "params": {"level": "info", "data": format!("flood {n}")},
                }))?;
            }
        }
        if method == "tools/call" {
            // Said before the answer, as a server does whose call changed its tools; a
            // 2026-07-28 `modern-list-change` server says it only on its open listen.
            for mut message in self.server.after_call() {
                if self.mode() == Mode::ModernListChange && self.server.is_modern() {
                    let Some(listen) = &self.listen else {
                        continue;
                    };
                    message["params"] =
                        json!({"_meta": {"io.modelcontextprotocol/subscriptionId": listen}});
                }
                self.out.send(&message)?;
            }
        }
        self.reply(method, &response)?;
        if method == "initialize" && self.mode() == Mode::BadJsonLines {
            for n in 0..self.config.count {
                self.out
                    .send_text(&format!("garbage {n}: this is not JSON-RPC"))?;
            }
        }
        Ok(())
    }

    /// Sends a tool's first question (of its `InputRequiredResult`) to the client as a
    /// request of its own, and keeps the call waiting for the answer.
    fn ask(&mut self, id: &Value, params: &Value, response: &Value) -> io::Result<()> {
        let result = response.get("result").unwrap_or(&Value::Null);
        let Some((key, question)) = result
            .get("inputRequests")
            .and_then(Value::as_object)
            .and_then(|requests| requests.iter().next())
        else {
            return self.reply("tools/call", response);
        };
        self.asked += 1;
        let request = format!("ask-{}", self.asked);
        self.out.send(&json!({
            "jsonrpc": "2.0", "id": request,
            "method": question.get("method").cloned().unwrap_or(Value::Null),
            "params": question.get("params").cloned().unwrap_or(json!({})),
        }))?;
        self.asking = Some(Asking {
            id: id.clone(),
            params: params.clone(),
            key: key.clone(),
            request,
            state: result.get("requestState").cloned(),
        });
        Ok(())
    }

    /// Calls the waiting tool again with the client's answer (an error answer counts as a
    /// cancel), and answers the call or asks again.
    fn answered(&mut self, asking: Asking, outcome: Result<Value, Value>) -> io::Result<()> {
        let answer = outcome.unwrap_or_else(|_| json!({"action": "cancel"}));
        let mut params = asking.params;
        params["inputResponses"] = json!({asking.key: answer});
        match asking.state {
            Some(state) => params["requestState"] = state,
            None => {
                if let Some(fields) = params.as_object_mut() {
                    fields.remove("requestState");
                }
            }
        }
        let response = self
            .server
            .handle_request(&asking.id, "tools/call", &params);
        if response.pointer("/result/resultType") == Some(&json!("input_required")) {
            return self.ask(&asking.id, &params, &response);
        }
        self.reply("tools/call", &response)
    }

    /// Sends a response, preceded by a stray log line in `stdout-logs` mode.
    fn reply(&mut self, what: &str, response: &Value) -> io::Result<()> {
        if self.mode() == Mode::StdoutLogs {
            self.out.send_text(&format!("INFO handling {what}"))?;
        }
        self.out.send(response)
    }

    /// A valid `tools/call` response whose single text block is `config.bytes` of `x`,
    /// streamed in chunks.
    fn send_huge_result(&mut self, id: &Value) -> io::Result<()> {
        let prefix = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":""#
        );
        let era = if self.server.is_modern() {
            r#","resultType":"complete""#
        } else {
            ""
        };
        let suffix = format!(r#""}}],"isError":false{era}}}}}"#);
        self.out
            .send_filled(&prefix, b'x', self.config.bytes, &suffix)
    }
}
