//! The baseline without a gateway: a client that starts its own stdio server and speaks
//! newline-delimited JSON-RPC to it, one call at a time.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

pub struct DirectSession {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl DirectSession {
    /// Starts the server and completes the 2025-11-25 handshake.
    pub fn open(command: &[String]) -> Result<Self, String> {
        let (program, args) = command.split_first().ok_or("empty command")?;
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("start {program}: {e}"))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{program}: no pipes"));
        };
        let mut session = DirectSession {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            next_id: 1,
        };
        super::Session::request(
            &mut session,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "0"}}),
        )?;
        session.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(session)
    }

    fn send(&mut self, message: &Value) -> Result<(), String> {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .map_err(|e| format!("write: {e}"))
    }
}

impl super::Session for DirectSession {
    fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let mut line = String::new();
        loop {
            line.clear();
            // A line longer than any answer of the bench is cut and fails to parse.
            if (&mut self.stdout)
                .take(1 << 20)
                .read_line(&mut line)
                .map_err(|e| format!("read: {e}"))?
                == 0
            {
                return Err("server closed its stdout".into());
            }
            let message: Value =
                serde_json::from_str(&line).map_err(|e| format!("not JSON: {e}"))?;
            if message["id"] == json!(id) {
                return Ok(message);
            }
        }
    }
}

impl Drop for DirectSession {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
