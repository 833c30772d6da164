//! Reading a person's answers from the terminal.

use std::io::{BufRead, Read};

/// Reads one line from stdin, at most `max` bytes, without the line end; `None` at end of
/// input or on an error.
///
/// The read runs on a plain thread, not the runtime's blocking pool: if the user
/// interrupts instead of answering, nothing waits for the read to finish.
pub async fn read_line(max: u64) -> Option<String> {
    let (answer, answered) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let mut line = Vec::new();
        let read = std::io::stdin()
            .lock()
            .take(max)
            .read_until(b'\n', &mut line);
        let _ = answer.send(read.map(|count| (count, line)));
    });
    match answered.await {
        Ok(Ok((0, _))) | Ok(Err(_)) | Err(_) => None,
        Ok(Ok((_, line))) => {
            let text = String::from_utf8_lossy(&line);
            Some(text.trim_end_matches(['\n', '\r']).to_owned())
        }
    }
}

/// The width in columns of the terminal on stderr; `None` when stderr is not a terminal.
pub fn width() -> Option<usize> {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` to the pointer given, which lives across the
    // call; on a descriptor that is not a terminal it fails and writes nothing.
    let done = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut size) };
    (done == 0 && size.ws_col > 0).then_some(usize::from(size.ws_col))
}
