//! The relay channel's framing (`warden_relay::frame::read_frame`): what a sandbox's
//! supervisor sends the brain, and what the brain sends the supervisor, over one byte
//! stream. Frames are read one after another until the stream fails or ends. Properties:
//!
//! - every frame read is within the caps (payload at most the cap, name at most
//!   [`MAX_NAME`] bytes of a configured name's characters) and `write_frame` re-encodes
//!   it to exactly the bytes it was read from (the round trip);
//! - the stream's end is classified by the bytes left: a clean close only with nothing
//!   left, "too large" only for an announced length over the cap (never allocated), and
//!   a frame cut short is a failure, not a clean close;
//! - how the stream is cut into reads does not matter: the same frames and the same end;
//! - each frame's control payload is read as its receiver reads it (`Ready`, a pin
//!   `Report` with its limits, a `Verdict`, `OpenOptions`, `Hello`), and what parses
//!   serialises back to itself.
//!
//! Input: byte 0 picks the read sizes, bytes 1-2 the payload cap; the rest is the stream.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};
use warden_relay::frame::{Frame, FrameError, Kind, MAX_HEADER, MAX_NAME, read_frame, write_frame};
use warden_relay::hello::{Hello, Ready};
use warden_relay::pins::{
    MAX_REPORT_BYTES, OpenOptions, Report, Verdict, over_limits, parse_report,
};

/// A reader that hands out its bytes in pieces of 1-7 bytes chosen by `seed`, the way a
/// pipe may deliver them.
struct Pieces<'a> {
    rest: &'a [u8],
    seed: usize,
    turn: usize,
}

impl AsyncRead for Pieces<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        self.turn += 1;
        let n = (1 + (self.seed * self.turn) % 7)
            .min(self.rest.len())
            .min(buf.remaining());
        let (now, later) = self.rest.split_at(n);
        buf.put_slice(now);
        self.rest = later;
        Poll::Ready(Ok(()))
    }
}

/// How a stream of frames ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    Closed,
    TooLarge {
        length: usize,
        limit: usize,
    },
    Malformed(&'static str),
    /// End of stream inside a frame (or any other I/O error).
    Io(std::io::ErrorKind),
}

impl From<FrameError> for End {
    fn from(error: FrameError) -> Self {
        match error {
            FrameError::Closed => End::Closed,
            FrameError::TooLarge { length, limit } => End::TooLarge { length, limit },
            FrameError::Malformed(why) => End::Malformed(why),
            FrameError::Io(error) => End::Io(error.kind()),
        }
    }
}

/// At most this many frames a stream (every frame takes at least 10 bytes, so the input
/// size bounds it anyway).
const MAX_FRAMES: usize = 4096;

fn read_all<R: AsyncRead + Unpin>(mut reader: R, cap: usize) -> (Vec<Frame>, End) {
    crate::block_on(async move {
        let mut frames = Vec::new();
        loop {
            match read_frame(&mut reader, cap).await {
                Ok(frame) => frames.push(frame),
                Err(error) => return (frames, End::from(error)),
            }
            assert!(frames.len() <= MAX_FRAMES, "more frames than bytes allow");
        }
    })
}

fn encode(frame: &Frame, cap: usize) -> Vec<u8> {
    crate::block_on(async {
        let mut bytes = Vec::new();
        write_frame(&mut bytes, frame, cap)
            .await
            .unwrap_or_else(|error| panic!("a frame read could not be written: {error}"));
        bytes
    })
}

/// The control payload of `frame`, read as its receiver reads it.
fn read_payload(frame: &Frame) {
    let payload = &frame.payload;
    match frame.kind {
        // The brain reads the supervisor's `Ready` leniently (a default when it does not
        // parse); what parses round-trips.
        Kind::Ready => {
            if let Ok(ready) = serde_json::from_slice::<Ready>(payload) {
                let again: Ready = serde_json::from_slice(&serde_json::to_vec(&ready).unwrap())
                    .expect("a Ready re-encoded parses");
                assert_eq!(
                    (again.servers, again.version),
                    (ready.servers, ready.version)
                );
            }
        }
        // A start the supervisor reports: refused over the byte cap before parsing;
        // what parses round-trips, and the file limit is a pure function of the count.
        Kind::Pin => match parse_report(payload) {
            Ok(report) => {
                assert!(payload.len() <= MAX_REPORT_BYTES);
                let again: Report = serde_json::from_slice(&serde_json::to_vec(&report).unwrap())
                    .expect("a Report re-encoded parses");
                assert_eq!(again, report);
                let refused = over_limits(&frame.server, &report);
                assert_eq!(
                    refused.is_some(),
                    report.files.len() > warden_relay::pins::MAX_REPORT_FILES
                );
            }
            Err(why) => assert!(!why.is_empty()),
        },
        Kind::Verdict => {
            if let Ok(verdict) = serde_json::from_slice::<Verdict>(payload) {
                let again: Verdict = serde_json::from_slice(&serde_json::to_vec(&verdict).unwrap())
                    .expect("a Verdict re-encoded parses");
                assert_eq!(again, verdict);
            }
        }
        Kind::Open => {
            let _ = serde_json::from_slice::<OpenOptions>(payload);
        }
        Kind::Hello => {
            if let Ok(mut hello) = serde_json::from_slice::<Hello>(payload) {
                // Its Debug form is what may reach a log: it shows names only, so it does
                // not change when every value is blanked.
                let shown = format!("{hello:?}");
                for vars in hello.secrets.values_mut() {
                    for value in vars.values_mut() {
                        value.clear();
                    }
                }
                assert_eq!(format!("{hello:?}"), shown, "a secret's value in {shown}");
            }
        }
        Kind::Data | Kind::Log | Kind::Closed | Kind::Bye => {}
    }
}

/// Decodes one input and checks every property.
pub fn run(data: &[u8]) {
    if data.len() < 3 {
        return;
    }
    let seed = usize::from(data[0]);
    let cap = usize::from(u16::from_le_bytes([data[1], data[2]])) + 1;
    let stream = &data[3..];

    let (frames, end) = read_all(stream, cap);

    // Each frame within the caps, and written back to exactly its bytes.
    let mut at = 0;
    for frame in &frames {
        assert!(
            frame.payload.len() <= cap,
            "a payload over the cap of {cap}"
        );
        assert!(
            frame.server.len() <= MAX_NAME,
            "a name over {MAX_NAME} bytes"
        );
        assert!(
            frame
                .server
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
            "a name with characters names cannot have: {:?}",
            frame.server
        );
        let bytes = encode(frame, cap);
        assert_eq!(
            stream.get(at..at + bytes.len()),
            Some(bytes.as_slice()),
            "frame {frame:?} re-encoded differs from what was read"
        );
        at += bytes.len();
        read_payload(frame);
    }

    // The end, from the bytes left after the last frame.
    let rest = &stream[at..];
    let limit = cap + MAX_HEADER;
    match &end {
        End::Closed => assert!(
            rest.is_empty(),
            "a clean close with {} bytes left",
            rest.len()
        ),
        // Too large: the announced length over the frame's cap (refused before anything
        // is read or allocated), or the payload over its own cap once the name's length
        // is known.
        End::TooLarge {
            length,
            limit: told,
        } => {
            let announced = rest
                .get(..4)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
                .expect("too large without a length");
            if *told == limit {
                assert!(*length > limit && announced == *length);
            } else {
                assert_eq!(*told, cap);
                let name = usize::from(rest[5]);
                assert!(*length > cap && announced == 2 + name + 4 + *length);
            }
        }
        End::Malformed(_) => {
            let announced = rest
                .get(..4)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
                .expect("malformed without a length");
            assert!(
                announced <= limit,
                "malformed, not too large: {announced} > {limit}"
            );
        }
        End::Io(kind) => {
            assert_eq!(*kind, std::io::ErrorKind::UnexpectedEof);
            assert!(!rest.is_empty(), "a failure with nothing left");
            let whole = rest
                .get(..4)
                .map(|b| 4 + u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize);
            assert!(
                whole.is_none_or(|whole| whole > rest.len()),
                "a frame cut short though all its bytes were there"
            );
        }
    }

    // Reads of other sizes: the same frames, the same end.
    let pieces = Pieces {
        rest: stream,
        seed,
        turn: 0,
    };
    let (frames_again, end_again) = read_all(pieces, cap);
    assert_eq!(frames_again, frames, "the read sizes changed the frames");
    assert_eq!(end_again, end, "the read sizes changed the end");
}
