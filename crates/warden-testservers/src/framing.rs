//! Newline-delimited framing of the stdio transport: bounded line reading from stdin and
//! line writing to stdout.
//!
//! MCP over stdio sends one JSON-RPC message per line, UTF-8, no embedded newlines. The
//! reader never buffers more than [`MAX_LINE_BYTES`] of one line, so a peer that sends an
//! endless line cannot make this server allocate without bound.

use std::io::{self, BufRead, Write};

/// The longest line accepted from the client (1 MiB), newline excluded.
pub(crate) const MAX_LINE_BYTES: usize = 1024 * 1024;

/// One unit read from the input.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A complete line, without its `\n` (and without a trailing `\r`). Never empty.
    Text(Vec<u8>),
    /// A line longer than the limit; its bytes were read and discarded up to its newline.
    TooLong,
}

/// Reads lines of at most `max` bytes; blank lines are skipped.
pub(crate) struct LineReader<R> {
    input: R,
    max: usize,
}

impl<R: BufRead> LineReader<R> {
    /// A reader with the given per-line limit.
    pub(crate) fn new(input: R, max: usize) -> Self {
        Self { input, max }
    }

    /// The next non-blank line, or `None` at end of input. A final line without a newline
    /// still counts as a line.
    pub(crate) fn next_line(&mut self) -> io::Result<Option<Line>> {
        loop {
            let mut line = Vec::new();
            let mut overflow = false;
            let mut saw_any = false;
            loop {
                let chunk = match self.input.fill_buf() {
                    Ok(chunk) => chunk,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                if chunk.is_empty() {
                    if !saw_any {
                        return Ok(None);
                    }
                    break;
                }
                saw_any = true;
                let (body, used, ended) = match chunk.iter().position(|&b| b == b'\n') {
                    Some(pos) => (&chunk[..pos], pos + 1, true),
                    None => (chunk, chunk.len(), false),
                };
                if !overflow {
                    if line.len() + body.len() > self.max + 1 {
                        // +1 leaves room for a `\r` that is stripped below.
                        overflow = true;
                        line = Vec::new();
                    } else {
                        line.extend_from_slice(body);
                    }
                }
                self.input.consume(used);
                if ended {
                    break;
                }
            }
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if overflow || line.len() > self.max {
                return Ok(Some(Line::TooLong));
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return Ok(Some(Line::Text(line)));
        }
    }
}

/// Writes whole lines to stdout, flushing after each so the client sees them at once.
pub(crate) struct LineWriter<W> {
    output: W,
}

impl<W: Write> LineWriter<W> {
    /// A writer on the given output.
    pub(crate) fn new(output: W) -> Self {
        Self { output }
    }

    /// Writes one JSON message as one line.
    pub(crate) fn send(&mut self, message: &serde_json::Value) -> io::Result<()> {
        serde_json::to_writer(&mut self.output, message)?;
        self.output.write_all(b"\n")?;
        self.output.flush()
    }

    /// Writes one line of arbitrary text (for the modes that break the protocol on purpose).
    pub(crate) fn send_text(&mut self, text: &str) -> io::Result<()> {
        self.output.write_all(text.as_bytes())?;
        self.output.write_all(b"\n")?;
        self.output.flush()
    }

    /// Writes one line made of `prefix`, `fill` repeated `count` bytes' worth, then `suffix`,
    /// without ever holding the whole line in memory.
    pub(crate) fn send_filled(
        &mut self,
        prefix: &str,
        fill: u8,
        count: usize,
        suffix: &str,
    ) -> io::Result<()> {
        const CHUNK: usize = 1024 * 1024;
        let block = vec![fill; CHUNK.min(count)];
        self.output.write_all(prefix.as_bytes())?;
        let mut left = count;
        while left > 0 {
            let n = left.min(block.len());
            self.output.write_all(&block[..n])?;
            left -= n;
        }
        self.output.write_all(suffix.as_bytes())?;
        self.output.write_all(b"\n")?;
        self.output.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufReader, Cursor};

    fn read_all(input: &[u8], max: usize, buf: usize) -> Vec<Line> {
        let mut reader = LineReader::new(BufReader::with_capacity(buf, Cursor::new(input)), max);
        let mut lines = Vec::new();
        while let Some(line) = reader.next_line().unwrap() {
            lines.push(line);
        }
        lines
    }

    fn text(s: &str) -> Line {
        Line::Text(s.as_bytes().to_vec())
    }

    #[test]
    fn splits_lines_strips_cr_and_skips_blank_ones() {
        let lines = read_all(b"{\"a\":1}\r\n\n   \n{\"b\":2}\nlast", 100, 3);
        assert_eq!(
            lines,
            vec![text("{\"a\":1}"), text("{\"b\":2}"), text("last")]
        );
    }

    #[test]
    fn a_long_line_is_reported_once_and_reading_goes_on() {
        let mut input = vec![b'x'; 50];
        input.extend_from_slice(b"\nok\n");
        // Small buffer: the long line arrives in many pieces.
        let lines = read_all(&input, 10, 4);
        assert_eq!(lines, vec![Line::TooLong, text("ok")]);
    }

    #[test]
    fn the_limit_is_inclusive() {
        let lines = read_all(b"0123456789\n0123456789\r\n01234567890\n", 10, 4);
        assert_eq!(
            lines,
            vec![text("0123456789"), text("0123456789"), Line::TooLong]
        );
    }

    #[test]
    fn filled_line_has_exact_length() {
        let mut out = Vec::new();
        LineWriter::new(&mut out)
            .send_filled("[\"", b'x', 3_000_000, "\"]")
            .unwrap();
        assert_eq!(out.len(), 2 + 3_000_000 + 2 + 1);
        let value: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(value[0].as_str().map(str::len), Some(3_000_000));
    }
}
