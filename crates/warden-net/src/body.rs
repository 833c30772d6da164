//! Reading response bodies within a cap.

use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};

use crate::{NetError, SseDecoder, SseEvent};

/// Reads the whole body of `response`, failing as soon as it passes `cap` bytes (also when
/// `Content-Length` announces more), so a hostile server cannot make Warden buffer without
/// bound.
pub async fn read_capped(response: reqwest::Response, cap: usize) -> Result<Bytes, NetError> {
    if let Some(length) = response.content_length()
        && length > cap as u64
    {
        return Err(NetError::BodyTooLarge { cap });
    }
    let mut body = BytesMut::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(NetError::from_reqwest)?;
        if body.len() + chunk.len() > cap {
            return Err(NetError::BodyTooLarge { cap });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// The events of a `text/event-stream` response, each at most `max_event` bytes. The
/// stream ends after the last complete event; a read error or an oversized event ends it
/// with that error.
pub fn sse_events(
    response: reqwest::Response,
    max_event: usize,
) -> impl Stream<Item = Result<SseEvent, NetError>> + Send + 'static {
    let chunks = response.bytes_stream();
    futures::stream::unfold(
        (
            chunks,
            SseDecoder::new(max_event),
            std::collections::VecDeque::new(),
            false,
        ),
        |(mut chunks, mut decoder, mut ready, mut done)| async move {
            loop {
                if let Some(event) = ready.pop_front() {
                    return Some((Ok(event), (chunks, decoder, ready, done)));
                }
                if done {
                    return None;
                }
                match chunks.next().await {
                    Some(Ok(chunk)) => match decoder.push(&chunk) {
                        Ok(events) => ready.extend(events),
                        Err(error) => {
                            done = true;
                            return Some((Err(error), (chunks, decoder, ready, done)));
                        }
                    },
                    Some(Err(error)) => {
                        done = true;
                        return Some((
                            Err(NetError::from_reqwest(error)),
                            (chunks, decoder, ready, done),
                        ));
                    }
                    None => {
                        done = true;
                        ready.extend(decoder.finish());
                    }
                }
            }
        },
    )
}

/// Longest excerpt of a peer's text that [`excerpt`] quotes.
pub const EXCERPT_CHARS: usize = 200;

/// The first [`EXCERPT_CHARS`] characters of `bytes` (a peer's error body, header or URL),
/// every control character made a space, for quoting in a message without letting the peer
/// forge log lines or escape sequences; `…` marks a cut.
pub fn excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(EXCERPT_CHARS)
        .collect();
    if text.chars().count() > EXCERPT_CHARS {
        out.push('…');
    }
    out.trim().to_owned()
}
