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

/// Set once a stop signal has arrived; never reset.
static STOP_REQUESTED: OnceLock<watch::Sender<bool>> = OnceLock::new();

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
    let mut stop = STOP_REQUESTED.get_or_init(watch_signals).subscribe();
    if stop.wait_for(|stop| *stop).await.is_err() {
        // Unreachable: the sender lives in a static. Never report a stop that did not happen.
        std::future::pending::<()>().await;
    }
}

fn watch_signals() -> watch::Sender<bool> {
    use tokio::signal::unix::{SignalKind, signal};
    let stop = watch::Sender::new(false);
    // Registered now, before anything is started, so no signal can slip through.
    let interrupt = signal(SignalKind::interrupt()).ok();
    let terminate = signal(SignalKind::terminate()).ok();
    let hangup = signal(SignalKind::hangup()).ok();
    let notify = stop.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = wait_for(interrupt) => {}
            () = wait_for(terminate) => {}
            () = wait_for(hangup) => {}
        }
        notify.send_replace(true);
    });
    stop
}

async fn wait_for(stream: Option<tokio::signal::unix::Signal>) {
    match stream {
        Some(mut stream) => {
            stream.recv().await;
        }
        None => std::future::pending().await,
    }
}
