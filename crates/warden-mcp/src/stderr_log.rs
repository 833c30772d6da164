//! A server's stderr, kept where a person can find it.
//!
//! The MCP specification lets a stdio server write anything to stderr, so Warden never
//! treats it as an error signal. It does keep it: the last lines in a bounded in-memory ring
//! (shown with any error about that server) and everything in a per-server file, which is
//! rotated once it reaches a size cap.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncWriteExt, BufReader};

use crate::lines::{LineRead, read_capped_line};

/// Lines kept in memory per server.
pub const RING_LINES: usize = 200;
/// Longest stderr line kept; the rest of a longer line is dropped.
pub const MAX_LINE_BYTES: usize = 8 * 1024;
/// Size at which a server's log file is rotated (to `NAME.log.1`).
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;

/// The retained stderr of one server. Cheap to clone; all clones share the ring.
#[derive(Debug, Clone)]
pub struct StderrLog {
    ring: Arc<Mutex<VecDeque<String>>>,
    closed: tokio::sync::watch::Receiver<bool>,
}

impl StderrLog {
    /// Starts draining `stderr` in a background task. Lines go to the ring and, when
    /// `file` is given, are appended to it. The task ends at end of stream.
    pub fn drain<R>(stderr: R, server: String, file: Option<PathBuf>) -> Self
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let (closed_sender, closed) = tokio::sync::watch::channel(false);
        let log = Self {
            ring: Arc::default(),
            closed,
        };
        let ring = log.ring.clone();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stderr);
            let mut sink = match file {
                Some(path) => FileSink::open(path).await,
                None => None,
            };
            let mut line = Vec::new();
            loop {
                match read_capped_line(&mut reader, &mut line, MAX_LINE_BYTES, true).await {
                    Ok(LineRead::Eof) | Err(_) => break,
                    Ok(read) => {
                        let mut text = String::from_utf8_lossy(&line).into_owned();
                        if read == LineRead::TooLong {
                            text.push_str(" [line cut]");
                        }
                        tracing::debug!(server = %server, "stderr: {text}");
                        if let Some(sink) = sink.as_mut() {
                            sink.write_line(&text).await;
                        }
                        push_bounded(&ring, text);
                    }
                }
            }
            let _ = closed_sender.send(true);
        });
        log
    }

    /// Waits up to `limit` for the stream to end, so that an error can show a dead server's
    /// last words. A grandchild holding stderr open only costs the limit.
    pub async fn wait_closed(&self, limit: std::time::Duration) {
        let mut closed = self.closed.clone();
        let _ = tokio::time::timeout(limit, closed.wait_for(|closed| *closed)).await;
    }

    /// The last `count` lines, oldest first.
    pub fn tail(&self, count: usize) -> Vec<String> {
        let ring = match self.ring.lock() {
            Ok(ring) => ring,
            Err(poisoned) => poisoned.into_inner(),
        };
        let skip = ring.len().saturating_sub(count);
        ring.iter().skip(skip).cloned().collect()
    }
}

fn push_bounded(ring: &Mutex<VecDeque<String>>, line: String) {
    let mut ring = match ring.lock() {
        Ok(ring) => ring,
        Err(poisoned) => poisoned.into_inner(),
    };
    if ring.len() == RING_LINES {
        ring.pop_front();
    }
    ring.push_back(line);
}

struct FileSink {
    path: PathBuf,
    file: tokio::fs::File,
    written: u64,
}

impl FileSink {
    async fn open(path: PathBuf) -> Option<Self> {
        if let Some(parent) = path.parent() {
            let _ = tokio::fs::create_dir_all(parent).await;
        }
        match tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .await
        {
            Ok(file) => {
                let written = file.metadata().await.map(|meta| meta.len()).unwrap_or(0);
                Some(Self {
                    path,
                    file,
                    written,
                })
            }
            Err(error) => {
                tracing::warn!("cannot open server log {}: {error}", path.display());
                None
            }
        }
    }

    async fn write_line(&mut self, text: &str) {
        if self.written >= MAX_FILE_BYTES {
            let rotated = self.path.with_extension("log.1");
            let _ = tokio::fs::rename(&self.path, &rotated).await;
            match tokio::fs::File::create(&self.path).await {
                Ok(file) => {
                    self.file = file;
                    self.written = 0;
                }
                Err(_) => return,
            }
        }
        let mut bytes = Vec::with_capacity(text.len() + 1);
        bytes.extend_from_slice(text.as_bytes());
        bytes.push(b'\n');
        if self.file.write_all(&bytes).await.is_ok() {
            self.written += bytes.len() as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keeps_the_last_lines_and_writes_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/demo.log");
        let mut input = String::new();
        for index in 0..(RING_LINES + 5) {
            input.push_str(&format!("line {index}\n"));
        }
        let log = StderrLog::drain(
            std::io::Cursor::new(input.into_bytes()),
            "demo".into(),
            Some(path.clone()),
        );
        log.wait_closed(std::time::Duration::from_secs(5)).await;
        assert_eq!(log.tail(2), vec!["line 203", "line 204"]);
        assert_eq!(log.tail(usize::MAX).len(), RING_LINES);
        assert_eq!(log.tail(usize::MAX)[0], "line 5");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let written = std::fs::read_to_string(&path).unwrap();
        assert!(written.starts_with("line 0\n"));
        assert!(written.ends_with("line 204\n"));
    }
}
