//! Reading a person's answers from the terminal.

use std::io::{BufRead, Read};
use std::sync::OnceLock;
use std::sync::mpsc;

use tokio::sync::oneshot;

/// Reads one line from stdin, at most `max` bytes, without the line end; `None` at end of
/// input or on an error.
///
/// One plain thread reads stdin for the whole process (not the runtime's blocking pool: if
/// the user interrupts instead of answering, nothing waits for the read to finish). A line
/// read for a caller that stopped waiting (a prompt given up when a turn timed out) is kept
/// for the next caller, so nothing the person typed is lost.
pub async fn read_line(max: u64) -> Option<String> {
    let (reply, answered) = oneshot::channel();
    READER
        .get_or_init(start_reader)
        .send(Request { max, reply })
        .ok()?;
    answered.await.ok().flatten()
}

/// A line wanted by [`read_line`].
struct Request {
    max: u64,
    reply: oneshot::Sender<Option<String>>,
}

static READER: OnceLock<mpsc::Sender<Request>> = OnceLock::new();

fn start_reader() -> mpsc::Sender<Request> {
    let (sender, requests) = mpsc::channel::<Request>();
    std::thread::spawn(move || {
        let mut kept: Option<Option<String>> = None;
        for request in requests {
            if request.reply.is_closed() && kept.is_none() {
                continue;
            }
            let line = kept.take().unwrap_or_else(|| read_one(request.max));
            if let Err(line) = request.reply.send(line) {
                kept = Some(line);
            }
        }
    });
    sender
}

fn read_one(max: u64) -> Option<String> {
    let mut line = Vec::new();
    match std::io::stdin()
        .lock()
        .take(max)
        .read_until(b'\n', &mut line)
    {
        Ok(0) | Err(_) => None,
        Ok(_) => {
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

/// Longest answer read for a yes/no question of a command (`warden pin`, `warden approve`).
const MAX_CONFIRM_BYTES: u64 = 64;

/// Why [`confirm`] did not say yes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// There is no terminal to ask on (stdin or stderr is not one).
    NoTerminal,
    /// The person answered something other than yes.
    Declined,
}

/// Asks `question` with `[y/N]` on the terminal of a command that records something the
/// person must have looked at first; `yes` (the command's `--yes`) answers it without
/// asking. Without a terminal the answer is no, never a silent yes.
pub fn confirm(yes: bool, question: &str) -> Result<(), Refusal> {
    use std::io::{IsTerminal, Write};
    if yes {
        return Ok(());
    }
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Err(Refusal::NoTerminal);
    }
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut line = Vec::new();
    let _ = std::io::stdin()
        .lock()
        .take(MAX_CONFIRM_BYTES)
        .read_until(b'\n', &mut line);
    let answer = String::from_utf8_lossy(&line).trim().to_ascii_lowercase();
    if matches!(answer.as_str(), "y" | "yes") {
        Ok(())
    } else {
        Err(Refusal::Declined)
    }
}
