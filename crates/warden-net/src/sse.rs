//! A bounded decoder of server-sent events (the `text/event-stream` format of the HTML
//! standard): `event:`, `data:`, `id:` and `retry:` fields, `:` comments, events ended by a
//! blank line, lines ended by CRLF, LF or CR.

use crate::NetError;

/// The UTF-8 byte-order mark a stream may start with.
const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field; `None` means the default type, "message".
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The `id:` field, when the event carried one.
    pub id: Option<String>,
    /// The `retry:` field in milliseconds, when the event carried one.
    pub retry: Option<u64>,
}

/// Decodes a byte stream into events, refusing any single event (or unterminated line)
/// larger than its cap.
#[derive(Debug)]
pub struct SseDecoder {
    max_event: usize,
    line: Vec<u8>,
    pending: SseEvent,
    has_field: bool,
    data_lines: usize,
    event_bytes: usize,
    after_cr: bool,
    started: bool,
    /// Bytes of a leading byte-order mark seen so far (held back until it is whole or
    /// turns out not to be one).
    bom: usize,
}

impl SseDecoder {
    /// A decoder refusing events over `max_event` bytes.
    pub fn new(max_event: usize) -> SseDecoder {
        SseDecoder {
            max_event,
            line: Vec::new(),
            pending: SseEvent::default(),
            has_field: false,
            data_lines: 0,
            event_bytes: 0,
            after_cr: false,
            started: false,
            bom: 0,
        }
    }

    /// Feeds bytes; returns the events they complete. How the stream is cut into pushes
    /// never changes the events (a byte-order mark split across pushes included).
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, NetError> {
        if self.started {
            return self.feed(bytes);
        }
        // A leading byte-order mark is ignored, even when it arrives a byte at a time.
        let mut matched = 0;
        while self.bom < BOM.len() && matched < bytes.len() && bytes[matched] == BOM[self.bom] {
            self.bom += 1;
            matched += 1;
        }
        if self.bom == BOM.len() {
            self.started = true;
            return self.feed(&bytes[matched..]);
        }
        if matched == bytes.len() {
            // Still the beginning of a mark: wait for more.
            return Ok(Vec::new());
        }
        // Not a mark after all: the bytes held back are the stream's first.
        self.started = true;
        let mut events = self.feed(&BOM[..self.bom])?;
        events.extend(self.feed(&bytes[matched..])?);
        Ok(events)
    }

    fn feed(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, NetError> {
        let mut events = Vec::new();
        for &byte in bytes {
            if self.after_cr {
                self.after_cr = false;
                if byte == b'\n' {
                    continue;
                }
            }
            match byte {
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.line);
                    if let Some(event) = self.end_line(&line)? {
                        events.push(event);
                    }
                }
                _ => {
                    self.line.push(byte);
                    if self.event_bytes + self.line.len() > self.max_event {
                        return Err(NetError::EventTooLarge {
                            cap: self.max_event,
                        });
                    }
                }
            }
        }
        Ok(events)
    }

    /// Ends the stream: an event not closed by a blank line is dropped, as the standard
    /// says, unless it is complete but for the final blank line.
    pub fn finish(&mut self) -> Option<SseEvent> {
        if !self.started && self.bom > 0 {
            // The start of a mark the stream never finished: those bytes were data.
            self.started = true;
            if self.feed(&BOM[..self.bom]).is_err() {
                return None;
            }
        }
        let line = std::mem::take(&mut self.line);
        if !line.is_empty() {
            let _ = self.end_line(&line);
        }
        self.dispatch()
    }

    fn end_line(&mut self, line: &[u8]) -> Result<Option<SseEvent>, NetError> {
        if line.is_empty() {
            return Ok(self.dispatch());
        }
        self.event_bytes += line.len() + 1;
        if self.event_bytes > self.max_event {
            return Err(NetError::EventTooLarge {
                cap: self.max_event,
            });
        }
        if line[0] == b':' {
            return Ok(None);
        }
        let line = std::str::from_utf8(line).map_err(|_| NetError::NotUtf8)?;
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => {
                self.pending.event = Some(value.to_owned());
                self.has_field = true;
            }
            "data" => {
                if self.has_data() {
                    self.pending.data.push('\n');
                }
                self.pending.data.push_str(value);
                self.data_lines += 1;
                self.has_field = true;
            }
            "id" if !value.contains('\0') => {
                self.pending.id = Some(value.to_owned());
                self.has_field = true;
            }
            "retry" => {
                if let Ok(millis) = value.parse::<u64>() {
                    self.pending.retry = Some(millis);
                    self.has_field = true;
                }
            }
            _ => {}
        }
        Ok(None)
    }

    fn has_data(&self) -> bool {
        self.data_lines > 0
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let had = std::mem::take(&mut self.has_field);
        self.event_bytes = 0;
        self.data_lines = 0;
        let event = std::mem::take(&mut self.pending);
        had.then_some(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(chunks: &[&[u8]], cap: usize) -> Result<Vec<SseEvent>, NetError> {
        let mut decoder = SseDecoder::new(cap);
        let mut events = Vec::new();
        for chunk in chunks {
            events.extend(decoder.push(chunk)?);
        }
        events.extend(decoder.finish());
        Ok(events)
    }

    #[test]
    fn fields_lines_and_line_endings() {
        let events = decode(
            &[
                b"\xEF\xBB\xBFevent: message_start\r\ndata: {\"a\":",
                b"1}\r\n\r\n: comment\n",
                b"id: 7\nretry: 1500\ndata: one\ndata:two\r\rdata: tail",
            ],
            1024,
        )
        .unwrap();
        assert_eq!(events.len(), 3);
        assert_eq!(events[0].event.as_deref(), Some("message_start"));
        assert_eq!(events[0].data, "{\"a\":1}");
        assert_eq!(events[1].id.as_deref(), Some("7"));
        assert_eq!(events[1].retry, Some(1500));
        assert_eq!(events[1].data, "one\ntwo");
        assert_eq!(events[2].data, "tail");
    }

    #[test]
    fn an_event_split_byte_by_byte_decodes_the_same() {
        let whole = b"event: x\r\ndata: hello\r\n\r\n";
        let pieces: Vec<&[u8]> = whole.chunks(1).collect();
        let events = decode(&pieces, 1024).unwrap();
        assert_eq!(
            events,
            vec![SseEvent {
                event: Some("x".into()),
                data: "hello".into(),
                ..SseEvent::default()
            }]
        );
    }

    #[test]
    fn an_oversized_event_is_refused_even_without_a_line_end() {
        let big = vec![b'a'; 5000];
        let mut line = b"data: ".to_vec();
        line.extend_from_slice(&big);
        assert!(matches!(
            decode(&[&line], 4096),
            Err(NetError::EventTooLarge { cap: 4096 })
        ));
        let mut lines = Vec::new();
        for _ in 0..100 {
            lines.extend_from_slice(b"data: 0123456789012345678901234567890123456789\n");
        }
        assert!(matches!(
            decode(&[&lines], 4096),
            Err(NetError::EventTooLarge { .. })
        ));
        // The cap is per event: many small events are fine.
        let mut many = Vec::new();
        for _ in 0..1000 {
            many.extend_from_slice(b"data: 0123456789\n\n");
        }
        assert_eq!(decode(&[&many], 64).unwrap().len(), 1000);
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        assert!(matches!(
            decode(&[b"data: \xff\xfe\n\n"], 1024),
            Err(NetError::NotUtf8)
        ));
    }

    /// Fuzzing finding (fuzz/corpus/sse/finding-split-bom): a byte-order mark arriving in
    /// pieces was taken as data, so the first event was lost (its field name began with
    /// U+FEFF) or counted three bytes against the cap.
    #[test]
    fn a_byte_order_mark_split_across_pushes_is_still_ignored() {
        let whole: &[u8] = b"\xEF\xBB\xBFdata: x\n\n";
        let want = decode(&[whole], 1024).unwrap();
        assert_eq!(want.len(), 1);
        for cut in 1..4 {
            let (a, b) = whole.split_at(cut);
            assert_eq!(decode(&[a, b], 1024).unwrap(), want, "cut at {cut}");
            assert_eq!(decode(&[&a[..1], &a[1..], b], 1024).unwrap(), want);
        }
        // At the cap exactly: no error however the mark arrives.
        let tight: &[u8] = b"\xEF\xBB\xBFli\0\0\0";
        assert!(decode(&[tight], 5).is_ok());
        assert!(decode(&[&tight[..1], &tight[1..]], 5).is_ok());
        // A second mark is data, not skipped again.
        let twice = decode(&[b"\xEF\xBB\xBF", b"\xEF\xBB\xBFdata: x\n\n"], 1024).unwrap();
        assert!(twice.is_empty(), "{twice:?}");
    }

    #[test]
    fn bytes_that_only_begin_like_a_mark_are_data() {
        // Control: held back, then decoded as the stream's first bytes.
        let split = decode(&[b"\xEF", b"\xBBdata: x\n\n"], 1024);
        let whole = decode(&[b"\xEF\xBBdata: x\n\n"], 1024);
        assert!(matches!(split, Err(NetError::NotUtf8)));
        assert!(matches!(whole, Err(NetError::NotUtf8)));
        // A stream that ends inside the mark is a stream of those bytes.
        let mut decoder = SseDecoder::new(1024);
        assert_eq!(decoder.push(b"\xEF\xBB").unwrap(), vec![]);
        assert_eq!(decoder.finish(), None);
        assert_eq!(
            decode(&[b"da", b"ta: y\n\n"], 1024).unwrap()[0].data,
            "y",
            "an ordinary start is untouched"
        );
    }
}
