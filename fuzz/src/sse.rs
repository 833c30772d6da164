//! The SSE decoder (`warden_net::SseDecoder`). Two properties:
//!
//! - chunking does not matter: the stream decoded in one push and decoded in pieces cut
//!   at input-chosen places gives the same events and the same first error;
//! - round trip: an event written by a spec-following encoder decodes to itself.
//!
//! Input: byte 0 picks the cut points, bytes 1-2 the event cap; the rest is the stream.
//! The same rest is also read as an event to encode (fields split at NUL bytes).

use warden_net::{NetError, SseDecoder, SseEvent};

fn decode(chunks: &[&[u8]], cap: usize) -> (Vec<SseEvent>, Option<String>) {
    let mut decoder = SseDecoder::new(cap);
    let mut events = Vec::new();
    for chunk in chunks {
        match decoder.push(chunk) {
            Ok(more) => events.extend(more),
            Err(error) => return (events, Some(kind(&error))),
        }
    }
    events.extend(decoder.finish());
    for event in &events {
        assert!(event.data.len() <= cap, "event data over the cap");
    }
    (events, None)
}

fn kind(error: &NetError) -> String {
    format!("{error}")
}

/// Writes `event` as the HTML standard's `text/event-stream` format.
pub fn encode(event: &SseEvent) -> String {
    let mut out = String::new();
    if let Some(name) = &event.event {
        out.push_str(&format!("event: {name}\n"));
    }
    if let Some(id) = &event.id {
        out.push_str(&format!("id: {id}\n"));
    }
    if let Some(retry) = event.retry {
        out.push_str(&format!("retry: {retry}\n"));
    }
    for line in event.data.split('\n') {
        out.push_str(&format!("data: {line}\n"));
    }
    out.push('\n');
    out
}

/// Decodes one input and checks both properties.
pub fn run(data: &[u8]) {
    if data.len() < 3 {
        return;
    }
    let seed = usize::from(data[0]);
    let cap = usize::from(u16::from_le_bytes([data[1], data[2]])) + 1;
    let stream = &data[3..];

    let whole = decode(&[stream], cap);
    let mut chunks = Vec::new();
    let mut rest = stream;
    let mut turn = 0;
    while !rest.is_empty() {
        turn += 1;
        let n = (1 + (seed * turn) % 5).min(rest.len());
        chunks.push(&rest[..n]);
        rest = &rest[n..];
    }
    let pieces = decode(&chunks, cap);
    if whole.1.is_some() || pieces.1.is_some() {
        // An event over the cap fails the stream. Events completed in the same push as the
        // failure are not returned (the push returns only the error), so with an error the
        // property is: the same error, and the whole stream's events are a prefix of the
        // chunked stream's.
        assert_eq!(whole.1, pieces.1, "chunking changed the error");
        assert!(
            pieces.0.starts_with(&whole.0),
            "chunking changed the events before the error"
        );
    } else {
        assert_eq!(whole, pieces, "chunking changed the decoding");
    }

    // Round trip of an event made from the input.
    let text = String::from_utf8_lossy(stream);
    let mut fields = text.split('\0');
    let clean = |s: &str| !s.contains(['\n', '\r']);
    let event = SseEvent {
        event: fields.next().filter(|s| clean(s)).map(str::to_owned),
        data: fields.next().unwrap_or("").replace('\r', ""),
        id: fields.next().filter(|s| clean(s)).map(str::to_owned),
        retry: fields.next().and_then(|s| s.parse().ok()),
    };
    let encoded = encode(&event);
    let (events, error) = decode(&[encoded.as_bytes()], encoded.len() + 1);
    assert_eq!(
        error, None,
        "an encoded event failed to decode: {encoded:?}"
    );
    assert_eq!(events, vec![event], "round trip of {encoded:?}");
}
