//! A bounded decoder of server-sent events (the `text/event-stream` format of the HTML
//! standard): `event:`, `data:`, `id:` and `retry:` fields, `:` comments, events ended by a
//! blank line, lines ended by CRLF, LF or CR.

use crate::NetError;

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
        }
    }

    /// Feeds bytes; returns the events they complete.
    pub fn push(&mut self, mut bytes: &[u8]) -> Result<Vec<SseEvent>, NetError> {
        if !self.started {
            // A leading byte-order mark is ignored.
            let bom = [0xEF, 0xBB, 0xBF];
            let take = bytes.len().min(3);
            if bytes[..take] == bom[..take] && take == 3 {
                bytes = &bytes[3..];
            }
            self.started = !bytes.is_empty();
        }
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
}
