//! The stdio line framing (`warden_mcp::lines::read_capped_line`): bytes arrive in
//! arbitrary chunks through a small buffer; every line read must match a model of
//! newline splitting with the cap applied, and the buffer must never exceed the cap.
//!
//! Input: byte 0 picks the cap (0..=63), byte 1 the buffer size and the chunk sizes of
//! the reader; the rest is the stream.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, BufReader, ReadBuf};
use warden_mcp::lines::{LineRead, read_capped_line};

/// A reader returning the stream in chunks of varying size.
struct Chunked {
    data: Vec<u8>,
    at: usize,
    step: usize,
    turn: usize,
}

impl AsyncRead for Chunked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        this.turn += 1;
        let want = 1 + (this.step * this.turn) % 7;
        let n = want.min(buf.remaining()).min(this.data.len() - this.at);
        buf.put_slice(&this.data[this.at..this.at + n]);
        this.at += n;
        Poll::Ready(Ok(()))
    }
}

/// What the model says one read of a line of raw bytes (its `\n` removed) yields.
fn expected(segment: &[u8], cap: usize) -> (LineRead, Vec<u8>) {
    if segment.len() > cap {
        (LineRead::TooLong, segment[..cap].to_vec())
    } else {
        let mut line = segment.to_vec();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        (LineRead::Line, line)
    }
}

/// Decodes one input and checks it against the model.
pub fn run(data: &[u8]) {
    if data.len() < 2 {
        return;
    }
    let cap = usize::from(data[0] % 64);
    let step = usize::from(data[1]);
    let stream = data[2..].to_vec();
    let mut segments: Vec<&[u8]> = stream.split(|&b| b == b'\n').collect();
    if segments.last().is_some_and(|s| s.is_empty()) {
        segments.pop();
    }
    for skip_rest in [true, false] {
        let reader = Chunked {
            data: stream.clone(),
            at: 0,
            step,
            turn: 0,
        };
        let mut reader = BufReader::with_capacity(1 + step % 16, reader);
        let mut line = Vec::new();
        let mut index = 0;
        let mut reads = 0;
        loop {
            reads += 1;
            assert!(reads <= stream.len() + 2, "no progress");
            let read =
                crate::block_on(read_capped_line(&mut reader, &mut line, cap, skip_rest)).unwrap();
            assert!(
                line.len() <= cap,
                "line of {} bytes over cap {cap}",
                line.len()
            );
            assert!(!line.contains(&b'\n'));
            if read == LineRead::Eof {
                break;
            }
            if skip_rest {
                let (want, bytes) = expected(segments[index], cap);
                assert_eq!(read, want, "line {index}");
                assert_eq!(line, bytes, "line {index}");
                index += 1;
            } else if read == LineRead::TooLong {
                // The rest of the line is left unread: the stdio transport fails the
                // connection at this point, so there is nothing more to model.
                break;
            }
        }
        if skip_rest {
            assert_eq!(index, segments.len(), "lines lost");
        }
    }
}
