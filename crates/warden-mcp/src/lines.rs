//! Reading newline-delimited text with a cap on each line, so a peer that never sends a
//! newline cannot make Warden buffer without bound.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// What one bounded read produced.
#[derive(Debug, PartialEq, Eq)]
pub enum LineRead {
    /// A whole line is in the buffer (without its `\n` or a trailing `\r`).
    Line,
    /// The line grew past the cap. The buffer holds its first `cap` bytes; the rest of the
    /// line has been skipped when `skip_rest` was asked for, and is unread otherwise.
    TooLong,
    /// End of stream with nothing buffered.
    Eof,
}

/// Reads one line into `line` (cleared first), never holding more than `cap` bytes of it.
///
/// A final line without a newline before end of stream counts as a line.
pub async fn read_capped_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
    cap: usize,
    skip_rest: bool,
) -> std::io::Result<LineRead> {
    line.clear();
    let mut overflowed = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(if overflowed {
                LineRead::TooLong
            } else if line.is_empty() {
                LineRead::Eof
            } else {
                trim_cr(line);
                LineRead::Line
            });
        }
        let (chunk, found_newline) = match available.iter().position(|&byte| byte == b'\n') {
            Some(index) => (&available[..index], true),
            None => (available, false),
        };
        let consumed = chunk.len() + usize::from(found_newline);
        if !overflowed {
            let room = cap.saturating_sub(line.len());
            if chunk.len() > room {
                line.extend_from_slice(&chunk[..room]);
                overflowed = true;
            } else {
                line.extend_from_slice(chunk);
            }
        }
        reader.consume(consumed);
        if found_newline {
            if overflowed {
                return Ok(LineRead::TooLong);
            }
            trim_cr(line);
            return Ok(LineRead::Line);
        }
        if overflowed && !skip_rest {
            return Ok(LineRead::TooLong);
        }
    }
}

fn trim_cr(line: &mut Vec<u8>) {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::BufReader;

    async fn lines(input: &[u8], cap: usize, skip_rest: bool) -> Vec<(LineRead, String)> {
        let mut reader = BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        let mut buf = Vec::new();
        loop {
            let read = read_capped_line(&mut reader, &mut buf, cap, skip_rest)
                .await
                .unwrap();
            if read == LineRead::Eof {
                return out;
            }
            let stop = read == LineRead::TooLong && !skip_rest;
            out.push((read, String::from_utf8_lossy(&buf).into_owned()));
            if stop {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn splits_lines_and_strips_crlf() {
        let got = lines(b"one\r\ntwo\nthree", 100, false).await;
        assert_eq!(
            got,
            vec![
                (LineRead::Line, "one".into()),
                (LineRead::Line, "two".into()),
                (LineRead::Line, "three".into())
            ]
        );
    }

    #[tokio::test]
    async fn a_long_line_is_cut_at_the_cap_and_reported() {
        let got = lines(b"abcdefghij\nok\n", 5, true).await;
        assert_eq!(
            got,
            vec![
                (LineRead::TooLong, "abcde".into()),
                (LineRead::Line, "ok".into())
            ]
        );
        let got = lines(b"abcdefghij\nok\n", 5, false).await;
        assert_eq!(got, vec![(LineRead::TooLong, "abcde".into())]);
    }
}
