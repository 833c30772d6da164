//! What happens when Warden is interrupted or panics: no server process may outlive it.

/// Kills every server process group on a panic, then runs the default hook.
pub fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        warden_mcp::launcher::kill_all_live_groups();
        default(info);
    }));
}

/// Completes when the user asks Warden to stop (Ctrl-C, SIGTERM, SIGHUP).
pub async fn interrupted() {
    use tokio::signal::unix::{SignalKind, signal};
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = wait_for(signal(SignalKind::terminate()).ok()) => {}
        () = wait_for(signal(SignalKind::hangup()).ok()) => {}
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
