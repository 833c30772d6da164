//! A minimal blocking HTTP/1.1 client for one keep-alive connection: `POST` a JSON-RPC
//! message, read the answer whether it comes as `application/json` or as a
//! `text/event-stream` (chunked or sized), keep the `Mcp-Session-Id`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{Value, json};

/// No answer in the bench is larger than this; a larger one is an error, not a read.
const MAX_BODY: usize = 1 << 20;
/// More header lines than this is an error, not a read.
const MAX_HEADERS: usize = 100;
/// A stalled gateway fails the call instead of hanging the run.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

pub struct HttpSession {
    host: String,
    path: String,
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    session_id: Option<String>,
    next_id: u64,
}

struct Response {
    status: u16,
    session_id: Option<String>,
    body: Vec<u8>,
}

impl HttpSession {
    /// Connects and opens a 2025-11-25 session.
    pub fn open(url: &str) -> Result<Self, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("only http:// URLs: {url}"))?;
        let (host, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let stream = TcpStream::connect(host).map_err(|e| format!("connect {host}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        stream
            .set_read_timeout(Some(READ_TIMEOUT))
            .map_err(|e| e.to_string())?;
        let writer = stream.try_clone().map_err(|e| e.to_string())?;
        let mut session = HttpSession {
            host: host.into(),
            path: path.into(),
            reader: BufReader::with_capacity(64 * 1024, stream),
            writer,
            session_id: None,
            next_id: 1,
        };
        super::Session::request(
            &mut session,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "0"}}),
        )?;
        let done =
            session.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        if !(200..300).contains(&done.status) {
            return Err(format!("notifications/initialized: HTTP {}", done.status));
        }
        Ok(session)
    }

    fn post(&mut self, message: &Value) -> Result<Response, String> {
        let body = message.to_string();
        let mut head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
            self.path,
            self.host,
            body.len()
        );
        if let Some(id) = &self.session_id {
            head.push_str(&format!(
                "Mcp-Session-Id: {id}\r\nMCP-Protocol-Version: 2025-11-25\r\n"
            ));
        }
        head.push_str("\r\n");
        head.push_str(&body);
        self.writer
            .write_all(head.as_bytes())
            .map_err(|e| format!("write: {e}"))?;
        let response = read_response(&mut self.reader)?;
        if response.session_id.is_some() {
            self.session_id.clone_from(&response.session_id);
        }
        Ok(response)
    }
}

impl super::Session for HttpSession {
    fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        let response = self.post(&json!({"jsonrpc": "2.0", "id": id, "method": method,
                                         "params": params}))?;
        if response.status != 200 {
            let text = String::from_utf8_lossy(&response.body[..response.body.len().min(200)])
                .into_owned();
            return Err(format!("{method}: HTTP {}: {text}", response.status));
        }
        message_of(&response.body)
    }
}

/// The last `data:` line of an event stream, or the whole body when it is plain JSON.
fn message_of(body: &[u8]) -> Result<Value, String> {
    let text = std::str::from_utf8(body).map_err(|e| format!("body not UTF-8: {e}"))?;
    let data = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(str::trim_start)
        .rfind(|d| !d.is_empty());
    serde_json::from_str(data.unwrap_or(text)).map_err(|e| format!("answer not JSON: {e}"))
}

fn read_line(reader: &mut impl BufRead) -> Result<String, String> {
    let mut line = String::new();
    let n = reader
        .take(16 * 1024)
        .read_line(&mut line)
        .map_err(|e| format!("read: {e}"))?;
    if n == 0 {
        return Err("connection closed".into());
    }
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}

fn read_response(reader: &mut BufReader<TcpStream>) -> Result<Response, String> {
    let status_line = read_line(reader)?;
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line: {status_line}"))?;
    let (mut length, mut chunked, mut session_id) = (None, false, None);
    for headers in 0.. {
        if headers == MAX_HEADERS {
            return Err(format!("more than {MAX_HEADERS} header lines"));
        }
        let line = read_line(reader)?;
        if line.is_empty() {
            break;
        }
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = value.parse::<usize>().ok();
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.eq_ignore_ascii_case("chunked");
        } else if name.eq_ignore_ascii_case("mcp-session-id") {
            session_id = Some(value.to_string());
        }
    }
    let body = if chunked {
        read_chunked(reader)?
    } else {
        let length = length.unwrap_or(0);
        if length > MAX_BODY {
            return Err(format!("body of {length} bytes"));
        }
        let mut body = vec![0; length];
        reader
            .read_exact(&mut body)
            .map_err(|e| format!("read body: {e}"))?;
        body
    };
    Ok(Response {
        status,
        session_id,
        body,
    })
}

fn read_chunked(reader: &mut BufReader<TcpStream>) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let size_line = read_line(reader)?;
        let size_text = size_line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("bad chunk size: {size_line}"))?;
        if size == 0 {
            // Trailers, then the empty line.
            while !read_line(reader)?.is_empty() {}
            return Ok(body);
        }
        if body.len() + size > MAX_BODY {
            return Err("chunked body over 1 MiB".into());
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader
            .read_exact(&mut body[start..])
            .map_err(|e| format!("read chunk: {e}"))?;
        let mut crlf = [0; 2];
        reader
            .read_exact(&mut crlf)
            .map_err(|e| format!("read chunk end: {e}"))?;
    }
}
