//! The stdio transport: newline-delimited JSON-RPC over a child's pipes, with limits.
//!
//! A reader task owns the child's stdout. Each line is capped at
//! [`StdioLimits::max_message_bytes`]; a longer one fails the connection at once with a
//! reason that says so (dropping it would lose a response and leave a caller waiting).
//! A line that is not a JSON-RPC message is a protocol fault: logged, counted, and once
//! more than [`StdioLimits::max_protocol_faults`] have been seen the connection fails.
//! Parsed messages go through a bounded channel, so a fast server is slowed to Warden's
//! pace rather than buffered without limit.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::RoleClient;
use rmcp::model::JsonRpcMessage;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch};

use crate::lines::{LineRead, read_capped_line};
use crate::probe::is_probe;

/// Messages parsed ahead of the consumer before the reader waits.
const INBOUND_QUEUE: usize = 64;
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
    inbound: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
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
    /// Starts the reader task over `stdout` and wraps `stdin`.
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
        let (sender, inbound) = mpsc::channel(INBOUND_QUEUE);
        tokio::spawn(read_messages(
            server,
            BufReader::with_capacity(64 * 1024, stdout),
            sender,
            limits,
            health.clone(),
        ));
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
        self.inbound.recv().await
    }
}

async fn read_messages<R: AsyncRead + Unpin>(
    server: String,
    mut reader: BufReader<R>,
    sender: mpsc::Sender<RxJsonRpcMessage<RoleClient>>,
    limits: StdioLimits,
    health: TransportHealth,
) {
    let mut line = Vec::new();
    loop {
        let read = read_capped_line(&mut reader, &mut line, limits.max_message_bytes, false).await;
        match read {
            Ok(LineRead::Eof) => return,
            Err(error) => {
                health.fail(format!("reading from server `{server}` failed: {error}"));
                return;
            }
            Ok(LineRead::TooLong) => {
                health.fail(format!(
                    "server `{server}` sent a message over the {} byte limit \
                     (max_message_bytes); the connection was closed",
                    limits.max_message_bytes
                ));
                return;
            }
            Ok(LineRead::Line) => {}
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(&line) {
            Ok(message) => {
                if sender.send(message).await.is_err() {
                    return;
                }
            }
            Err(error) => {
                let count = health.faults.fetch_add(1, Ordering::Relaxed) + 1;
                let what = if serde_json::from_slice::<serde::de::IgnoredAny>(&line).is_ok() {
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
                        excerpt(&line)
                    );
                } else {
                    tracing::debug!(
                        server = %server,
                        "protocol fault {count}: {what} on stdout ({error}): {}",
                        excerpt(&line)
                    );
                }
                if count > limits.max_protocol_faults {
                    health.fail(format!(
                        "server `{server}` wrote {count} lines on stdout that are not MCP \
                         messages (limit {}); stdout must carry only JSON-RPC, logs belong \
                         on stderr",
                        limits.max_protocol_faults
                    ));
                    return;
                }
            }
        }
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
            let message = self.inbound.recv().await?;
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
        self.inbound.close();
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
