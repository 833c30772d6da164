//! The stdio transport: newline-delimited JSON-RPC over a child's pipes, with limits.
//!
//! The transport reads the child's stdout itself, when its consumer (rmcp's service loop)
//! asks for the next message: no reader task of its own, so a server's answer wakes the
//! loop directly rather than a task that hands it on (decision 0053). Each line is capped
//! at [`StdioLimits::max_message_bytes`]; a longer one fails the connection at once with a
//! reason that says so (dropping it would lose a response and leave a caller waiting).
//! A line that is not a JSON-RPC message is a protocol fault: logged, counted, and once
//! more than [`StdioLimits::max_protocol_faults`] have been seen the connection fails.
//! Nothing is read ahead of the consumer beyond the read buffer, so a fast server is
//! slowed to Warden's pace (by the pipe) rather than buffered without limit.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::RoleClient;
use rmcp::model::JsonRpcMessage;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::watch;

use crate::lines::LineRead;
use crate::probe::is_probe;

/// The read buffer over the server's stdout.
const READ_BUFFER: usize = 64 * 1024;
/// Longest excerpt of a faulty line put into a log record.
const EXCERPT_BYTES: usize = 160;

/// Limits on what a server may send over stdio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StdioLimits {
    /// The largest single message (one line), in bytes.
    pub max_message_bytes: usize,
    /// How many non-JSON-RPC lines are tolerated before the server is failed.
    pub max_protocol_faults: u64,
}

impl Default for StdioLimits {
    fn default() -> Self {
        Self {
            max_message_bytes: warden_config::DEFAULT_MAX_MESSAGE_BYTES,
            max_protocol_faults: 64,
        }
    }
}

/// What the transport has seen go wrong, shared with the connection that reports it.
#[derive(Debug, Clone, Default)]
pub struct TransportHealth {
    faults: Arc<AtomicU64>,
    fatal: Arc<Mutex<Option<String>>>,
}

impl TransportHealth {
    /// Non-JSON-RPC lines seen on stdout so far.
    pub fn protocol_faults(&self) -> u64 {
        self.faults.load(Ordering::Relaxed)
    }

    /// Why the transport gave up on the server, if it did.
    pub fn fatal(&self) -> Option<String> {
        match self.fatal.lock() {
            Ok(fatal) => fatal.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn fail(&self, reason: String) {
        tracing::warn!("{reason}");
        match self.fatal.lock() {
            Ok(mut fatal) => *fatal = Some(reason),
            Err(poisoned) => *poisoned.into_inner() = Some(reason),
        }
    }
}

/// An rmcp transport over a child's stdin and stdout.
pub struct StdioTransport<W> {
    stdin: Arc<Stdin<W>>,
    inbound: Inbound,
}

/// The server's stdout, read a line at a time as messages are asked for.
///
/// Every read is cancel-safe (rmcp's loop drops an unfinished `receive` whenever
/// something else happens first): a line read in part stays in `line` until the rest
/// arrives, and bytes leave the read buffer only once they are copied there.
struct Inbound {
    server: String,
    /// Only ever reached through `get_mut` (never locked): the mutex makes the transport
    /// `Sync` over a reader that need not be.
    reader: Mutex<BufReader<Box<dyn AsyncRead + Send + Unpin>>>,
    /// The line read so far (without its newline), at most the cap.
    line: Vec<u8>,
    /// The line being read grew past the cap.
    overflowed: bool,
    limits: StdioLimits,
    health: TransportHealth,
    /// End of stream, a read error, or a fatal fault: nothing more is read.
    ended: bool,
}

/// A handle that closes the child's stdin, usable after the transport has moved into rmcp.
#[derive(Clone)]
pub struct StdinCloser<W> {
    stdin: Arc<Stdin<W>>,
}

impl<W: AsyncWrite + Unpin + Send> StdinCloser<W> {
    /// Closes stdin (idempotent): the server's signal to exit.
    pub async fn close(&self) {
        let _ = self.stdin.close().await;
    }
}

/// The child's stdin, shared by the transport's writes and the closer.
struct Stdin<W> {
    writer: tokio::sync::Mutex<Option<W>>,
    /// Set once closing starts: a write still in progress gives up.
    closing: watch::Sender<bool>,
}

impl<W: AsyncWrite + Unpin> Stdin<W> {
    fn new(writer: W) -> Self {
        Self {
            writer: tokio::sync::Mutex::new(Some(writer)),
            closing: watch::Sender::new(false),
        }
    }

    /// Writes `bytes` and a newline. A server that stops reading leaves the write pending
    /// once the pipe is full; [`Stdin::close`] then abandons it, so stdin can still be
    /// closed and the stop sequence can run.
    async fn write_line(&self, mut bytes: Vec<u8>) -> std::io::Result<()> {
        bytes.push(b'\n');
        let mut closing = self.closing.subscribe();
        let write = async {
            let mut guard = self.writer.lock().await;
            let Some(stdin) = guard.as_mut() else {
                return Err(stdin_closed());
            };
            stdin.write_all(&bytes).await?;
            stdin.flush().await
        };
        tokio::select! {
            result = write => result,
            _ = closing.wait_for(|closing| *closing) => Err(stdin_closed()),
        }
    }

    /// Abandons any write in progress and closes stdin (idempotent).
    async fn close(&self) -> std::io::Result<()> {
        self.closing.send_replace(true);
        match self.writer.lock().await.take() {
            Some(mut writer) => writer.shutdown().await,
            None => Ok(()),
        }
    }
}

fn stdin_closed() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::BrokenPipe,
        "the server's stdin is closed",
    )
}

impl<W> StdioTransport<W>
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// Wraps the server's `stdin` and `stdout`.
    pub fn new<R>(
        server: String,
        stdin: W,
        stdout: R,
        limits: StdioLimits,
    ) -> (Self, StdinCloser<W>, TransportHealth)
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let health = TransportHealth::default();
        let stdout: Box<dyn AsyncRead + Send + Unpin> = Box::new(stdout);
        let inbound = Inbound {
            server,
            reader: Mutex::new(BufReader::with_capacity(READ_BUFFER, stdout)),
            line: Vec::new(),
            overflowed: false,
            limits,
            health: health.clone(),
            ended: false,
        };
        let stdin = Arc::new(Stdin::new(stdin));
        let closer = StdinCloser {
            stdin: stdin.clone(),
        };
        (Self { stdin, inbound }, closer, health)
    }
}

impl<W> StdioTransport<W>
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// Writes one JSON value as a line, before the transport is handed to rmcp.
    pub(crate) async fn send_value(&self, value: &serde_json::Value) -> std::io::Result<()> {
        let bytes = serde_json::to_vec(value).map_err(std::io::Error::other)?;
        self.stdin.write_line(bytes).await
    }

    /// The next parsed message, before the transport is handed to rmcp.
    pub(crate) async fn next_message(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        self.inbound.next().await
    }
}

impl Inbound {
    /// The next message the server sent; `None` once its stdout ended or the connection
    /// failed (the reason is in the transport's health).
    async fn next(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            if self.ended {
                return None;
            }
            let read = self.read_line().await;
            match read {
                Ok(LineRead::Eof) => {
                    self.ended = true;
                    return None;
                }
                Err(error) => {
                    self.ended = true;
                    self.health.fail(format!(
                        "reading from server `{}` failed: {error}",
                        self.server
                    ));
                    return None;
                }
                Ok(LineRead::TooLong) => {
                    self.ended = true;
                    self.health.fail(format!(
                        "server `{}` sent a message over the {} byte limit \
                         (max_message_bytes); the connection was closed",
                        self.server, self.limits.max_message_bytes
                    ));
                    return None;
                }
                Ok(LineRead::Line) => {}
            }
            let line = std::mem::take(&mut self.line);
            let parsed = self.parse(&line);
            // The buffer is kept for the next line.
            self.line = line;
            self.line.clear();
            if let Some(message) = parsed {
                return Some(message);
            }
        }
    }

    /// One line's message, or `None` for a blank line or a fault (counted, and fatal
    /// past the limit, which ends the stream).
    fn parse(&mut self, line: &[u8]) -> Option<RxJsonRpcMessage<RoleClient>> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        let error = match serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(line) {
            Ok(message) => return Some(message),
            Err(error) => error,
        };
        let server = &self.server;
        let count = self.health.faults.fetch_add(1, Ordering::Relaxed) + 1;
        let what = if serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok() {
            "a JSON value that is not an MCP message"
        } else {
            "a line that is not JSON"
        };
        // The first fault is worth a warning; the rest would drown it.
        if count == 1 {
            tracing::warn!(
                server = %server,
                "protocol fault: {what} on stdout ({error}): {} (further faults are \
                 logged at debug level)",
                excerpt(line)
            );
        } else {
            tracing::debug!(
                server = %server,
                "protocol fault {count}: {what} on stdout ({error}): {}",
                excerpt(line)
            );
        }
        if count > self.limits.max_protocol_faults {
            self.health.fail(format!(
                "server `{server}` wrote {count} lines on stdout that are not MCP \
                 messages (limit {}); stdout must carry only JSON-RPC, logs belong \
                 on stderr",
                self.limits.max_protocol_faults
            ));
            self.ended = true;
        }
        None
    }

    /// Reads until `line` holds a whole line (without its newline or a trailing `\r`), at
    /// most the cap: as [`crate::lines::read_capped_line`] without skipping, but keeping
    /// its progress in `self` so that a read dropped midway loses nothing.
    async fn read_line(&mut self) -> std::io::Result<LineRead> {
        let cap = self.limits.max_message_bytes;
        let reader = self
            .reader
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        loop {
            let available = reader.fill_buf().await?;
            if available.is_empty() {
                return Ok(if self.overflowed {
                    LineRead::TooLong
                } else if self.line.is_empty() {
                    LineRead::Eof
                } else {
                    trim_cr(&mut self.line);
                    LineRead::Line
                });
            }
            let (chunk, found_newline) = match available.iter().position(|&byte| byte == b'\n') {
                Some(index) => (&available[..index], true),
                None => (available, false),
            };
            let consumed = chunk.len() + usize::from(found_newline);
            let room = cap.saturating_sub(self.line.len());
            if chunk.len() > room {
                self.line.extend_from_slice(&chunk[..room]);
                self.overflowed = true;
            } else {
                self.line.extend_from_slice(chunk);
            }
            reader.consume(consumed);
            if self.overflowed {
                return Ok(LineRead::TooLong);
            }
            if found_newline {
                trim_cr(&mut self.line);
                return Ok(LineRead::Line);
            }
        }
    }
}

fn trim_cr(line: &mut Vec<u8>) {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
}

fn excerpt(line: &[u8]) -> String {
    let cut = line.len().min(EXCERPT_BYTES);
    let mut text = String::from_utf8_lossy(&line[..cut]).into_owned();
    if cut < line.len() {
        text.push('…');
    }
    text
}

impl<W> Transport<RoleClient> for StdioTransport<W>
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let stdin = self.stdin.clone();
        async move {
            let bytes = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            stdin.write_line(bytes).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let message = self.inbound.next().await?;
            // A late answer to the era probe belongs to no request rmcp made.
            let late_probe_answer = match &message {
                JsonRpcMessage::Response(response) => is_probe(&response.id),
                JsonRpcMessage::Error(error) => error.id.as_ref().is_some_and(is_probe),
                _ => false,
            };
            if late_probe_answer {
                tracing::debug!("dropped a late answer to the era probe");
                continue;
            }
            return Some(message);
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let closed = self.stdin.close().await;
        self.inbound.ended = true;
        closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_message_bytes: usize, max_protocol_faults: u64) -> StdioLimits {
        StdioLimits {
            max_message_bytes,
            max_protocol_faults,
        }
    }

    #[tokio::test]
    async fn messages_pass_and_garbage_is_counted() {
        let input = b"hello, I am a log line\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n".to_vec();
        let (mut transport, _closer, health) = StdioTransport::new(
            "demo".into(),
            tokio::io::sink(),
            std::io::Cursor::new(input),
            limits(1024, 10),
        );
        assert!(transport.receive().await.is_some());
        assert!(transport.receive().await.is_none());
        assert_eq!(health.protocol_faults(), 1);
        assert_eq!(health.fatal(), None);
    }

    /// rmcp drops an unfinished `receive` whenever something else happens first: a
    /// message that arrives in parts across such drops is still read whole, once.
    #[tokio::test]
    async fn a_read_dropped_midway_loses_nothing() {
        let (mut server, stdout) = tokio::io::duplex(1024);
        let (mut transport, _closer, health) =
            StdioTransport::new("slow".into(), tokio::io::sink(), stdout, limits(1024, 2));
        let message = b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n";
        let (first, rest) = message.split_at(20);
        for part in [&first[..10], &first[10..], rest] {
            let quiet =
                tokio::time::timeout(std::time::Duration::from_millis(20), transport.receive())
                    .await;
            assert!(quiet.is_err(), "a message before it was whole");
            server.write_all(part).await.unwrap();
        }
        let whole = transport.receive().await.unwrap();
        assert!(
            matches!(whole, JsonRpcMessage::Notification(_)),
            "{whole:?}"
        );
        drop(server);
        assert!(transport.receive().await.is_none());
        assert_eq!(health.protocol_faults(), 0);
    }

    #[tokio::test]
    async fn too_many_faults_fail_the_server_with_a_reason() {
        let input = b"a\nb\nc\nd\n".to_vec();
        let (mut transport, _closer, health) = StdioTransport::new(
            "noisy".into(),
            tokio::io::sink(),
            std::io::Cursor::new(input),
            limits(1024, 2),
        );
        assert!(transport.receive().await.is_none());
        let reason = health.fatal().unwrap();
        assert!(
            reason.contains("`noisy`") && reason.contains("limit 2"),
            "{reason}"
        );
    }

    #[tokio::test]
    async fn an_oversized_message_fails_the_server() {
        let mut input = vec![b'x'; 5000];
        input.push(b'\n');
        let (mut transport, _closer, health) = StdioTransport::new(
            "big".into(),
            tokio::io::sink(),
            std::io::Cursor::new(input),
            limits(1000, 2),
        );
        assert!(transport.receive().await.is_none());
        assert!(health.fatal().unwrap().contains("over the 1000 byte limit"));
    }

    #[tokio::test]
    async fn closing_abandons_a_write_the_server_never_reads() {
        // The server's end of stdin stays open but is never read, so the pipe fills up.
        let (stdin, _unread) = tokio::io::duplex(1024);
        let (transport, closer, _health) =
            StdioTransport::new("deaf".into(), stdin, tokio::io::empty(), limits(1024, 2));
        let blob = serde_json::json!({"blob": "x".repeat(64 * 1024)});
        let write = tokio::spawn(async move { transport.send_value(&blob).await });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!write.is_finished(), "the write should be stuck");
        tokio::time::timeout(std::time::Duration::from_secs(1), closer.close())
            .await
            .expect("closing stdin waited for a write that cannot finish");
        let error = write.await.unwrap().unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe);
    }
}
