//! One HTTP request: route it, read and check it, take the next script step, log it, and
//! answer in the format its path asks for.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::Incoming;
use serde_json::{Value, json};

use crate::conversation::{Ids, ParsedRequest, Rejection};
use crate::log::{RequestLog, selected_headers};
use crate::script::{Action, Player, Reply, Step};
use crate::sse::{Pace, ReplyBody};
use crate::{anthropic, openai};

/// The largest request body accepted (413 beyond).
pub(crate) const MAX_BODY: usize = 32 * 1024 * 1024;
/// How much of a body that is not JSON goes into the log.
const LOGGED_TEXT: usize = 4096;

/// Everything requests share.
pub(crate) struct Server {
    pub(crate) player: Player,
    pub(crate) log: RequestLog,
    pub(crate) require_key: Option<String>,
    pub(crate) ids: Ids,
}

/// The wire format a path asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Format {
    Anthropic,
    OpenAi,
}

impl Format {
    fn for_path(path: &str) -> Option<Format> {
        match path {
            "/v1/messages" => Some(Format::Anthropic),
            "/v1/chat/completions" | "/chat/completions" => Some(Format::OpenAi),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Format::Anthropic => "anthropic",
            Format::OpenAi => "openai",
        }
    }

    fn check_headers(self, headers: &HeaderMap, key: Option<&str>) -> Result<(), Rejection> {
        match self {
            Format::Anthropic => anthropic::check_headers(headers, key),
            Format::OpenAi => openai::check_headers(headers, key),
        }
    }

    fn parse(self, body: &Value) -> Result<ParsedRequest, Rejection> {
        match self {
            Format::Anthropic => anthropic::parse(body),
            Format::OpenAi => openai::parse(body),
        }
    }

    fn error_body(self, status: u16, message: &str) -> Value {
        match self {
            Format::Anthropic => anthropic::error_body(status, message),
            Format::OpenAi => openai::error_body(status, message),
        }
    }

    fn default_error_message(self, status: u16) -> &'static str {
        match self {
            Format::Anthropic => anthropic::default_error_message(status),
            Format::OpenAi => openai::default_error_message(status),
        }
    }

    fn reply_body(self, reply: &Reply, request: &ParsedRequest, ids: &Ids) -> Value {
        match self {
            Format::Anthropic => anthropic::reply_body(reply, request, ids),
            Format::OpenAi => openai::reply_body(reply, request, ids),
        }
    }

    fn stream_error_event(self, status: u16, message: &str) -> Bytes {
        match self {
            Format::Anthropic => anthropic::stream_error_event(status, message),
            Format::OpenAi => openai::stream_error_event(status, message),
        }
    }

    fn reply_events(self, reply: &Reply, request: &ParsedRequest, ids: &Ids) -> Vec<Bytes> {
        match self {
            Format::Anthropic => anthropic::reply_events(reply, request, ids),
            Format::OpenAi => openai::reply_events(reply, request, ids),
        }
    }

    /// Tool names as sent, read leniently, so even a refused request logs them.
    fn tool_names(self, body: &Value) -> Vec<String> {
        let Some(tools) = body.get("tools").and_then(Value::as_array) else {
            return Vec::new();
        };
        tools
            .iter()
            .filter_map(|tool| match self {
                Format::Anthropic => tool.get("name"),
                Format::OpenAi => tool.get("function").and_then(|f| f.get("name")),
            })
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    }
}

/// What the log line for one model request says.
struct Entry {
    step: Option<usize>,
    path: String,
    format: Option<Format>,
    stream: bool,
    tools: Vec<String>,
    /// The body when it is not JSON (a truncated string), else `Null`.
    body: Value,
    /// The body when it is JSON, exactly as sent.
    raw_json: Option<Bytes>,
    headers: Value,
    error: Option<String>,
    expectation_failed: Option<String>,
}

impl Entry {
    /// The log line: JSON with the request body spliced in as sent, so key order and
    /// number spelling survive (newlines between tokens become spaces; inside JSON strings
    /// there are none).
    fn line(&self, status: u16) -> String {
        let mut line = json!({
            "step": self.step,
            "path": self.path,
            "format": self.format.map(Format::name),
            "stream": self.stream,
            "tools": self.tools,
            "headers": self.headers,
            "status": status,
        });
        if let Some(error) = &self.error {
            line["error"] = json!(error);
        }
        if let Some(failed) = &self.expectation_failed {
            line["expectation_failed"] = json!(failed);
        }
        let Some(raw) = &self.raw_json else {
            line["body"] = self.body.clone();
            return line.to_string();
        };
        let mut text = line.to_string();
        text.pop(); // the closing brace of a non-empty object
        text.push_str(",\"body\":");
        text.extend(
            String::from_utf8_lossy(raw)
                .trim()
                .chars()
                .map(|c| if c == '\n' || c == '\r' { ' ' } else { c }),
        );
        text.push('}');
        text
    }
}

/// Answers one request; never fails (every problem is an HTTP answer).
pub(crate) async fn handle(
    server: Arc<Server>,
    request: Request<Incoming>,
) -> Result<Response<ReplyBody>, Infallible> {
    let path = request.uri().path().to_string();
    if path == "/healthz" && request.method() == Method::GET {
        return Ok(plain(StatusCode::OK, "ok\n"));
    }
    let format = Format::for_path(&path);
    let mut entry = Entry {
        step: None,
        path,
        format,
        stream: false,
        tools: Vec::new(),
        body: Value::Null,
        raw_json: None,
        headers: selected_headers(request.headers()),
        error: None,
        expectation_failed: None,
    };
    let Some(format) = format else {
        let message = format!("no such endpoint: {} {}", request.method(), entry.path);
        return Ok(finish(&server, entry, refusal(None, 404, message)));
    };
    if request.method() != Method::POST {
        let message = format!("{} takes POST, not {}", entry.path, request.method());
        return Ok(finish(&server, entry, refusal(Some(format), 405, message)));
    }
    let answer = model_request(&server, format, request, &mut entry).await;
    Ok(finish(&server, entry, answer))
}

/// Logs the request with the answer's status and passes the answer on.
fn finish(server: &Server, entry: Entry, answer: Response<ReplyBody>) -> Response<ReplyBody> {
    server.log.write(&entry.line(answer.status().as_u16()));
    answer
}

async fn model_request(
    server: &Server,
    format: Format,
    request: Request<Incoming>,
    entry: &mut Entry,
) -> Response<ReplyBody> {
    let (parts, body) = request.into_parts();
    let bytes = match read_body(&parts.headers, body).await {
        Ok(bytes) => bytes,
        Err(rejection) => return reject(format, entry, rejection),
    };
    // Credentials are checked before the body, as the real APIs do; the body is read first
    // only so that the log has it either way.
    let body = serde_json::from_slice::<Value>(&bytes);
    match &body {
        Ok(json) => {
            entry.tools = format.tool_names(json);
            entry.stream = json.get("stream").and_then(Value::as_bool).unwrap_or(false);
            entry.raw_json = Some(bytes.clone());
        }
        Err(_) => {
            let text = String::from_utf8_lossy(&bytes);
            entry.body = json!(text.chars().take(LOGGED_TEXT).collect::<String>());
        }
    }
    if let Err(rejection) = format.check_headers(&parts.headers, server.require_key.as_deref()) {
        return reject(format, entry, rejection);
    }
    let body = match body {
        Ok(body) => body,
        Err(e) => {
            let rejection = Rejection::invalid(format!("request body is not valid JSON: {e}"));
            return reject(format, entry, rejection);
        }
    };
    let parsed = match format.parse(&body) {
        Ok(parsed) => parsed,
        Err(rejection) => return reject(format, entry, rejection),
    };
    let (index, step) = match server.player.take() {
        Ok(taken) => taken,
        Err(len) => {
            let message = format!(
                "script exhausted: all {len} steps have been used; this request has no step"
            );
            return reject(
                format,
                entry,
                Rejection {
                    status: 500,
                    message,
                },
            );
        }
    };
    entry.step = Some(index);
    if let Some(expect) = &step.expect
        && let Err(failed) = expect.check(&parsed.view)
    {
        entry.expectation_failed = Some(failed.clone());
        let message = format!("expectation failed (step {index}): {failed}");
        return refusal(Some(format), 400, message);
    }
    if step.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(step.delay_ms)).await;
    }
    answer_step(server, format, &parsed, &step)
}

async fn read_body(headers: &HeaderMap, body: Incoming) -> Result<Bytes, Rejection> {
    let too_large = || Rejection {
        status: 413,
        message: format!("request body exceeds {MAX_BODY} bytes"),
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > MAX_BODY as u64) {
        return Err(too_large());
    }
    match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<LengthLimitError>() => Err(too_large()),
        Err(e) => Err(Rejection::invalid(format!(
            "cannot read the request body: {e}"
        ))),
    }
}

/// Records the refusal in the log entry and builds the provider's error answer.
fn reject(format: Format, entry: &mut Entry, rejection: Rejection) -> Response<ReplyBody> {
    entry.error = Some(rejection.message.clone());
    refusal(Some(format), rejection.status, rejection.message)
}

/// An error answer in the provider's format (or a neutral one when no format applies).
fn refusal(format: Option<Format>, status: u16, message: String) -> Response<ReplyBody> {
    let body = match format {
        Some(format) => format.error_body(status, &message),
        None => json!({"error": {"message": message}}),
    };
    json_response(status, &body)
}

fn answer_step(
    server: &Server,
    format: Format,
    request: &ParsedRequest,
    step: &Step,
) -> Response<ReplyBody> {
    let pace = Pace {
        gap: Duration::from_millis(step.chunk_delay_ms),
        stall: step.stall,
    };
    match step.action() {
        Action::Error(error) => {
            let message = error
                .message
                .unwrap_or_else(|| format.default_error_message(error.status).to_string());
            let mut response =
                json_response(error.status, &format.error_body(error.status, &message));
            if let Some(seconds) = error.retry_after {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
            }
            response
        }
        Action::Reply(reply) if request.stream => {
            let mut events = format.reply_events(&reply, request, &server.ids);
            if let Some(cut) = step.cut_after_events {
                events.truncate(cut);
            }
            if let Some(error) = &step.stream_error {
                events.truncate(error.after_events);
                let message = error
                    .message
                    .clone()
                    .unwrap_or_else(|| format.default_error_message(error.status).to_string());
                events.push(format.stream_error_event(error.status, &message));
            }
            let mut response = Response::new(ReplyBody::events(events, pace));
            let headers = response.headers_mut();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream; charset=utf-8"),
            );
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            response
        }
        Action::Reply(reply) => {
            let body = format.reply_body(&reply, request, &server.ids);
            if pace.stall {
                // Headers now, the body never.
                let mut response = Response::new(ReplyBody::events(
                    vec![Bytes::new(), body.to_string().into()],
                    pace,
                ));
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                return response;
            }
            json_response(200, &body)
        }
    }
}

fn json_response(status: u16, body: &Value) -> Response<ReplyBody> {
    let mut response = Response::new(ReplyBody::whole(body.to_string()));
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn plain(status: StatusCode, text: &'static str) -> Response<ReplyBody> {
    let mut response = Response::new(ReplyBody::whole(text));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn the_log_line_keeps_the_body_as_sent_on_one_line() {
        let entry = Entry {
            step: Some(0),
            path: "/v1/messages".into(),
            format: Some(Format::Anthropic),
            stream: false,
            tools: vec!["b".into(), "a".into()],
            body: Value::Null,
            raw_json: Some(Bytes::from("{\n  \"z\": 1,\r\n  \"a\": \"x\\ny\"\n}\n")),
            headers: json!({}),
            error: None,
            expectation_failed: None,
        };
        let line = entry.line(200);
        assert!(!line.contains('\n'));
        assert!(
            line.ends_with(r#""body":{   "z": 1,    "a": "x\ny" }}"#),
            "{line}"
        );
        let parsed: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(parsed["body"]["a"], "x\ny");
        assert_eq!(parsed["tools"], json!(["b", "a"]));
        assert_eq!(parsed["status"], 200);
    }
}
