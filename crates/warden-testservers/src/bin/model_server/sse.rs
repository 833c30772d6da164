//! Server-sent events: the framing of one event, and a response body that hands the events
//! out one by one, with an optional pause between them, or stalls after the first.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use serde_json::Value;
use tokio::time::Sleep;

/// `event: NAME\ndata: JSON\n\n` (the Anthropic framing).
pub(crate) fn named_event(name: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// `data: JSON\n\n` (the OpenAI framing).
pub(crate) fn data_event(data: &Value) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
}

/// The OpenAI end-of-stream marker.
pub(crate) fn done_event() -> Bytes {
    Bytes::from_static(b"data: [DONE]\n\n")
}

/// How a stream is paced.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Pace {
    /// Pause between two events.
    pub(crate) gap: Duration,
    /// Stop after the first event and never end the body.
    pub(crate) stall: bool,
}

/// A response body: either one whole buffer, or a paced sequence of events.
///
/// The body does its own waiting (a timer polled by the connection), so a stream needs no
/// task of its own and ends with its connection.
pub(crate) struct ReplyBody {
    chunks: VecDeque<Bytes>,
    pace: Pace,
    sent: usize,
    pause: Option<Pin<Box<Sleep>>>,
}

impl ReplyBody {
    /// A body sent in one piece.
    pub(crate) fn whole(bytes: impl Into<Bytes>) -> ReplyBody {
        ReplyBody::events(vec![bytes.into()], Pace::default())
    }

    /// A body sent as `events`, paced by `pace`.
    pub(crate) fn events(events: Vec<Bytes>, pace: Pace) -> ReplyBody {
        ReplyBody {
            chunks: events.into(),
            pace,
            sent: 0,
            pause: None,
        }
    }
}

impl Body for ReplyBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        if this.pace.stall && this.sent >= 1 {
            // Nothing will ever wake this body; the connection ends when the client gives up
            // or the server shuts down.
            return Poll::Pending;
        }
        if let Some(pause) = this.pause.as_mut() {
            if pause.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.pause = None;
        }
        let Some(chunk) = this.chunks.pop_front() else {
            return Poll::Ready(None);
        };
        this.sent += 1;
        if !this.pace.gap.is_zero() && !this.chunks.is_empty() {
            this.pause = Some(Box::pin(tokio::time::sleep(this.pace.gap)));
        }
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty() && !(self.pace.stall && self.sent >= 1)
    }

    fn size_hint(&self) -> SizeHint {
        if self.chunks.len() == 1 && self.sent == 0 && !self.pace.stall {
            let len = self.chunks.front().map_or(0, |c| c.len() as u64);
            SizeHint::with_exact(len)
        } else {
            SizeHint::default()
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;
    use serde_json::json;

    #[test]
    fn events_are_framed_like_the_providers() {
        assert_eq!(
            named_event("ping", &json!({"type": "ping"})),
            Bytes::from("event: ping\ndata: {\"type\":\"ping\"}\n\n")
        );
        assert_eq!(data_event(&json!(1)), Bytes::from("data: 1\n\n"));
    }
}
