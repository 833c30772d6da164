//! The relay's framing: many per-server streams over one byte stream.
//!
//! The channel into a sandbox is whatever byte stream the orchestrator offers (`ip netns
//! exec`, `docker exec -i`, `ssh` with a forced command), so Warden frames it itself. Each
//! frame is length-prefixed and every size is capped before anything is allocated:
//!
//! ```text
//! u32 BE  length of what follows (at most MAX_HEADER + the payload cap)
//! u8      kind
//! u8      length of the server name (0 for channel-wide frames), at most 64
//! bytes   the server name (ASCII, validated like a configured name)
//! u32 BE  deadline: milliseconds the request may take from now (0: none)
//! bytes   payload: one JSON-RPC message, one log line, or a JSON control object
//! ```

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Bytes of a frame besides its payload: kind, name length, name, deadline.
pub const MAX_HEADER: usize = 1 + 1 + MAX_NAME + 4;
/// Longest server name in a frame (the same bound as a configured name).
pub const MAX_NAME: usize = 64;
/// Default cap on one payload (the default cap on one server message).
pub const DEFAULT_MAX_PAYLOAD: usize = warden_config::DEFAULT_MAX_MESSAGE_BYTES;

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Brain to supervisor, first frame: the session's secrets (JSON, see `Hello`).
    Hello = 1,
    /// Supervisor to brain: the servers defined inside (JSON list of names).
    Ready = 2,
    /// Either way: one JSON-RPC message of the named server's stream.
    Data = 3,
    /// Supervisor to brain: one line the named server wrote to stderr.
    Log = 4,
    /// Brain to supervisor: start the named server's stream afresh (a new session of it).
    Open = 5,
    /// Supervisor to brain: the named server's stream ended (payload: why, in words).
    Closed = 6,
    /// Brain to supervisor: the session ends; every child is stopped.
    Bye = 7,
    /// Supervisor to brain: what a start of the named server would execute (a
    /// [`crate::pins::Report`]); the start waits for the brain's verdict.
    Pin = 8,
    /// Brain to supervisor: whether that start may run (a [`crate::pins::Verdict`]).
    Verdict = 9,
}

impl Kind {
    fn from_byte(byte: u8) -> Option<Self> {
        Some(match byte {
            1 => Self::Hello,
            2 => Self::Ready,
            3 => Self::Data,
            4 => Self::Log,
            5 => Self::Open,
            6 => Self::Closed,
            7 => Self::Bye,
            8 => Self::Pin,
            9 => Self::Verdict,
            _ => return None,
        })
    }
}

/// One frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// What it carries.
    pub kind: Kind,
    /// The server whose stream it belongs to (empty for channel-wide frames).
    pub server: String,
    /// For a request: milliseconds it may take from when the frame is read (0: none).
    pub deadline_ms: u32,
    /// The bytes carried.
    pub payload: Vec<u8>,
}

impl Frame {
    /// A frame of `kind` for `server` with `payload` and no deadline.
    pub fn new(kind: Kind, server: &str, payload: Vec<u8>) -> Self {
        Self {
            kind,
            server: server.to_owned(),
            deadline_ms: 0,
            payload,
        }
    }
}

/// Why a frame could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The stream failed.
    #[error("the channel failed: {0}")]
    Io(#[from] std::io::Error),
    /// The stream ended between frames.
    #[error("the channel closed")]
    Closed,
    /// A length beyond the cap.
    #[error("a frame of {length} bytes exceeds the cap of {limit} bytes")]
    TooLarge {
        /// The announced length.
        length: usize,
        /// The cap.
        limit: usize,
    },
    /// A frame that does not follow the layout.
    #[error("a malformed frame: {0}")]
    Malformed(&'static str),
}

/// Writes one frame (not flushed).
pub async fn write_frame<W: AsyncWrite + Unpin>(
    writer: &mut W,
    frame: &Frame,
    max_payload: usize,
) -> Result<(), FrameError> {
    let name = frame.server.as_bytes();
    if name.len() > MAX_NAME {
        return Err(FrameError::Malformed("a server name longer than 64 bytes"));
    }
    if frame.payload.len() > max_payload {
        return Err(FrameError::TooLarge {
            length: frame.payload.len(),
            limit: max_payload,
        });
    }
    let length = 1 + 1 + name.len() + 4 + frame.payload.len();
    let mut header = Vec::with_capacity(4 + 6 + name.len());
    header.extend_from_slice(&u32::try_from(length).unwrap_or(u32::MAX).to_be_bytes());
    header.push(frame.kind as u8);
    header.push(u8::try_from(name.len()).unwrap_or(u8::MAX));
    header.extend_from_slice(name);
    header.extend_from_slice(&frame.deadline_ms.to_be_bytes());
    writer.write_all(&header).await?;
    writer.write_all(&frame.payload).await?;
    Ok(())
}

/// Reads one frame; [`FrameError::Closed`] at a clean end of stream between frames.
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    max_payload: usize,
) -> Result<Frame, FrameError> {
    // The first byte alone: the stream ending there is a clean close between frames; it
    // ending inside the length (or later) is a frame cut short, an I/O error.
    let mut length = [0u8; 4];
    if reader.read(&mut length[..1]).await? == 0 {
        return Err(FrameError::Closed);
    }
    reader.read_exact(&mut length[1..]).await?;
    let length = usize::try_from(u32::from_be_bytes(length)).unwrap_or(usize::MAX);
    let limit = max_payload.saturating_add(MAX_HEADER);
    if length > limit {
        return Err(FrameError::TooLarge { length, limit });
    }
    if length < 6 {
        return Err(FrameError::Malformed("shorter than its header"));
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).await?;
    decode_body(body, max_payload)
}

fn decode_body(mut body: Vec<u8>, max_payload: usize) -> Result<Frame, FrameError> {
    let kind = Kind::from_byte(body[0]).ok_or(FrameError::Malformed("an unknown kind"))?;
    let name_len = usize::from(body[1]);
    if name_len > MAX_NAME {
        return Err(FrameError::Malformed("a server name longer than 64 bytes"));
    }
    if body.len() < 2 + name_len + 4 {
        return Err(FrameError::Malformed("shorter than its header"));
    }
    let name = &body[2..2 + name_len];
    if !name
        .iter()
        .all(|byte| byte.is_ascii_alphanumeric() || *byte == b'_' || *byte == b'-')
    {
        return Err(FrameError::Malformed(
            "a server name with characters names cannot have",
        ));
    }
    let server = String::from_utf8_lossy(name).into_owned();
    let at = 2 + name_len;
    let deadline_ms = u32::from_be_bytes([body[at], body[at + 1], body[at + 2], body[at + 3]]);
    // The length's cap counts a full-length name; with a shorter one the payload could
    // pass its own cap by the difference (found by the `relay_frames` fuzz target).
    if body.len() - (at + 4) > max_payload {
        return Err(FrameError::TooLarge {
            length: body.len() - (at + 4),
            limit: max_payload,
        });
    }
    let payload = body.split_off(at + 4);
    Ok(Frame {
        kind,
        server,
        deadline_ms,
        payload,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip() {
        let frames = vec![
            Frame::new(Kind::Hello, "", b"{}".to_vec()),
            Frame {
                kind: Kind::Data,
                server: "git-1".into(),
                deadline_ms: 1500,
                payload: br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.to_vec(),
            },
            Frame::new(Kind::Log, "everything", b"a line".to_vec()),
            Frame::new(Kind::Bye, "", Vec::new()),
        ];
        let mut bytes = Vec::new();
        for frame in &frames {
            write_frame(&mut bytes, frame, 1024).await.unwrap();
        }
        let mut reader = bytes.as_slice();
        for frame in &frames {
            assert_eq!(&read_frame(&mut reader, 1024).await.unwrap(), frame);
        }
        assert!(matches!(
            read_frame(&mut reader, 1024).await,
            Err(FrameError::Closed)
        ));
    }

    #[tokio::test]
    async fn an_announced_length_over_the_cap_is_refused_before_reading_it() {
        // 4 GiB announced, nothing behind it: refused on the length alone.
        let bytes = [0xff, 0xff, 0xff, 0xff];
        let error = read_frame(&mut bytes.as_slice(), 1024).await.unwrap_err();
        assert!(
            matches!(error, FrameError::TooLarge { limit, .. } if limit == 1024 + MAX_HEADER),
            "{error}"
        );
        // Writing refuses an oversized payload too.
        let frame = Frame::new(Kind::Data, "a", vec![b'x'; 1025]);
        assert!(matches!(
            write_frame(&mut Vec::new(), &frame, 1024).await,
            Err(FrameError::TooLarge { .. })
        ));
    }

    #[tokio::test]
    async fn malformed_frames_are_refused_with_a_reason() {
        for (body, why) in [
            (vec![99u8, 0, 0, 0, 0, 0], "an unknown kind"),
            (
                vec![3u8, 200, 0, 0, 0, 0],
                "a server name longer than 64 bytes",
            ),
            (vec![3u8, 3, b'a', 0, 0, 0], "shorter than its header"),
            (
                vec![3u8, 1, b'/', 0, 0, 0, 0],
                "a server name with characters",
            ),
        ] {
            let mut bytes = u32::try_from(body.len()).unwrap().to_be_bytes().to_vec();
            bytes.extend_from_slice(&body);
            let error = read_frame(&mut bytes.as_slice(), 1024).await.unwrap_err();
            assert!(error.to_string().contains(why), "{error} / {why}");
        }
        // A truncated frame is an I/O error (end of stream inside a frame), not a clean close.
        let bytes = [0u8, 0, 0, 10, 3, 0];
        assert!(matches!(
            read_frame(&mut bytes.as_slice(), 1024).await,
            Err(FrameError::Io(_))
        ));
    }

    /// Found by the `relay_frames` fuzz target: a frame whose name was shorter than 64
    /// bytes could carry a payload over the cap by the difference (the length's cap counts
    /// a full-length name), which the writer on the other side would then refuse to send.
    #[tokio::test]
    async fn a_payload_is_capped_whatever_the_length_of_the_name() {
        let cap = 16;
        for (name, size) in [("", cap + 1), ("a", cap + 63), ("abc", cap + 1)] {
            let mut body = vec![3u8, u8::try_from(name.len()).unwrap()];
            body.extend_from_slice(name.as_bytes());
            body.extend_from_slice(&[0, 0, 0, 0]);
            body.extend(std::iter::repeat_n(b'x', size));
            let mut bytes = u32::try_from(body.len()).unwrap().to_be_bytes().to_vec();
            bytes.extend_from_slice(&body);
            let error = read_frame(&mut bytes.as_slice(), cap).await.unwrap_err();
            assert!(
                matches!(error, FrameError::TooLarge { length, limit } if length == size && limit == cap),
                "{name:?} with {size} bytes: {error}"
            );
        }
        // The control: a payload at the cap is read, with any name.
        for name in ["", "a", &"n".repeat(MAX_NAME)] {
            let frame = Frame::new(Kind::Data, name, vec![b'x'; cap]);
            let mut bytes = Vec::new();
            write_frame(&mut bytes, &frame, cap).await.unwrap();
            assert_eq!(read_frame(&mut bytes.as_slice(), cap).await.unwrap(), frame);
        }
    }

    /// Found by the `relay_frames` fuzz target in its first second: a stream ending after
    /// one to three bytes of a frame's length was read as a clean close between frames
    /// (the channel logged "the channel closed", as for a supervisor that said goodbye).
    #[tokio::test]
    async fn a_stream_ending_inside_a_length_is_a_frame_cut_short() {
        for cut in 1..4 {
            let bytes = [0u8, 0, 0, 6];
            let error = read_frame(&mut &bytes[..cut], 1024).await.unwrap_err();
            assert!(
                matches!(&error, FrameError::Io(e) if e.kind() == std::io::ErrorKind::UnexpectedEof),
                "{cut} bytes: {error}"
            );
        }
        // The control: nothing at all is a clean close.
        assert!(matches!(
            read_frame(&mut &[][..], 1024).await,
            Err(FrameError::Closed)
        ));
    }
}
