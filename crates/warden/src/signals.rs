//! What happens when Warden is interrupted or panics: no server process may outlive it.

use std::sync::OnceLock;

use tokio::sync::watch;

/// Kills every server process group on a panic, then runs the default hook.
pub fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        warden_mcp::launcher::kill_all_live_groups();
        default(info);
    }));
}

/// The stop signals received so far.
#[derive(Debug, Clone, Copy, Default)]
struct Stops {
    /// Ctrl-C (SIGINT) presses.
    interrupts: u64,
    /// SIGTERM or SIGHUP arrived: Warden must stop.
    terminated: bool,
}

/// The signals seen so far, from the first [`watch`] on.
static STOP_REQUESTED: OnceLock<watch::Sender<Stops>> = OnceLock::new();

/// Starts watching the stop signals, if not yet done. Call it before starting servers: from
/// then on a signal is remembered for [`interrupted`] instead of killing Warden outright,
/// which would leave the servers behind.
pub fn watch() {
    STOP_REQUESTED.get_or_init(watch_signals);
}

/// Completes when the user asks Warden to stop (Ctrl-C, SIGTERM, SIGHUP), at once if they
/// already did.
///
/// One background task watches the signals from the first call on. A listener per wait
/// would lose a signal that arrives between two waits (after connecting, before the call
/// starts): the handler is installed, so the process does not die either, and Warden would
/// ignore the user until the call timed out.
pub async fn interrupted() {
    interrupted_since(0).await;
}

/// Ctrl-C presses so far (for [`interrupted_since`]).
pub fn interrupts() -> u64 {
    STOP_REQUESTED
        .get_or_init(watch_signals)
        .borrow()
        .interrupts
}

/// True once SIGTERM or SIGHUP arrived: nothing may carry on.
pub fn terminated() -> bool {
    STOP_REQUESTED
        .get_or_init(watch_signals)
        .borrow()
        .terminated
}

/// Completes at the next Ctrl-C after `seen` presses, or at SIGTERM or SIGHUP: `warden chat`
/// cancels one turn on Ctrl-C and goes on.
pub async fn interrupted_since(seen: u64) {
    let mut stop = STOP_REQUESTED.get_or_init(watch_signals).subscribe();
    if stop
        .wait_for(|stops| stops.interrupts > seen || stops.terminated)
        .await
        .is_err()
    {
        // Unreachable: the sender lives in a static. Never report a stop that did not happen.
        std::future::pending::<()>().await;
    }
}

fn watch_signals() -> watch::Sender<Stops> {
    use tokio::signal::unix::{SignalKind, signal};
    let stop = watch::Sender::new(Stops::default());
    // Registered now, before anything is started, so no signal can slip through.
    let mut interrupt = signal(SignalKind::interrupt()).ok();
    let terminate = signal(SignalKind::terminate()).ok();
    let hangup = signal(SignalKind::hangup()).ok();
    let notify = stop.clone();
    tokio::spawn(async move {
        let ending = async {
            tokio::select! {
                () = wait_for(terminate) => {}
                () = wait_for(hangup) => {}
            }
        };
        tokio::pin!(ending);
        loop {
            tokio::select! {
                () = &mut ending => {
                    notify.send_modify(|stops| stops.terminated = true);
                    return;
                }
                () = next(&mut interrupt) => {
                    notify.send_modify(|stops| stops.interrupts += 1);
                }
            }
        }
    });
    stop
}

/// The next delivery of `stream`'s signal (never, if it could not be registered).
async fn next(stream: &mut Option<tokio::signal::unix::Signal>) {
    match stream {
        Some(stream) => {
            if stream.recv().await.is_none() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending().await,
    }
}

async fn wait_for(stream: Option<tokio::signal::unix::Signal>) {
    match stream {
        Some(mut stream) => {
            stream.recv().await;
        }
        None => std::future::pending().await,
    }
}
