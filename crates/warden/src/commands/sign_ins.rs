//! Signing in from a session with a person at a terminal (`warden chat`, `warden run`):
//! at the start, each remote server that did not connect only because it needs a sign-in
//! is offered one; during a chat, `/login NAME` signs in again to a server whose sign-in
//! lapsed (decision 0040, and its revision). Both use `warden login`'s flow
//! ([`super::login::sign_in`]) and then start the server in the running host, so its tools
//! join the catalogue. Without a terminal nothing is asked: the server is reported and the
//! session goes on without it.

use std::io::Write as _;

use warden_config::{Environment, RemoteTransport, ServerSpec, TransportSpec};
use warden_host::{Host, ServerEntry, ServerStatus};

use crate::untrusted::{Shape, inert};

/// Longest line read while a sign-in waits (a pasted address).
const MAX_LINE_BYTES: u64 = 1 << 20;
/// Longest answer read to the question.
const MAX_ANSWER_BYTES: u64 = 1024;

/// Whether `spec` is a server Warden's OAuth client signs in to: Streamable HTTP (the
/// deprecated HTTP+SSE transport carries no token) without a configured `Authorization`
/// header (the user's own credential keeps OAuth out).
pub fn signs_in(spec: &ServerSpec) -> bool {
    matches!(
        &spec.transport,
        TransportSpec::Http { settings, .. } if settings.transport == RemoteTransport::Http
    ) && !spec.transport.sets_authorization()
}

/// Whether `entry` did not connect only because it needs a sign-in Warden's OAuth client
/// can make ("needs sign-in": no usable token, and the server's discovery documents allow
/// one).
pub fn needs_sign_in(entry: &ServerEntry) -> bool {
    signs_in(&entry.spec)
        && matches!(
            &entry.status,
            ServerStatus::Failed { reason, .. }
                if reason.starts_with("needs authorization") && reason.contains("needs sign-in")
        )
}

/// For each server that needs a sign-in, asks the person whether to sign in now, and on
/// yes signs in and connects it ([`sign_in_and_start`]). On no, an interruption or a
/// failure, the session goes on without it. Called only with a terminal.
pub async fn offer(host: &mut Host, env: &Environment) {
    let waiting: Vec<ServerSpec> = host
        .servers()
        .iter()
        .filter(|entry| needs_sign_in(entry))
        .map(|entry| entry.spec.clone())
        .collect();
    for spec in waiting {
        let name = inert(&spec.name, Shape::Line);
        eprint!(
            "\n{name} needs you to sign in (OAuth) before its tools can be used.\n\
             Sign in to {name} now? [y]es, [b]rowser (yes, and open the address in your \
             browser), [N]o: "
        );
        let _ = std::io::stderr().flush();
        let seen = crate::signals::interrupts();
        let answer = tokio::select! {
            line = crate::terminal::read_line(MAX_ANSWER_BYTES) => line,
            () = crate::signals::interrupted_since(seen) => None,
        };
        let open_browser = match answer.as_deref().map(|a| a.trim().to_ascii_lowercase()) {
            Some(a) if a == "y" || a == "yes" => false,
            Some(a) if a == "b" || a == "browser" => true,
            _ => {
                eprintln!("Going on without {name} (`warden login {name}` signs in to it later).");
                continue;
            }
        };
        sign_in_and_start(host, env, &spec, open_browser).await;
    }
}

/// Signs in to `spec` as `warden login` does (the address shown, the browser opened only
/// when `open_browser`, the loopback redirect or a pasted address awaited within the
/// consent limit; Ctrl-C abandons it), then starts the server anew in `host`: a running
/// connection still holds the token that lapsed, so it is stopped first. Says how it went
/// on stderr; the session goes on either way.
pub async fn sign_in_and_start(
    host: &mut Host,
    env: &Environment,
    spec: &ServerSpec,
    open_browser: bool,
) {
    let name = inert(&spec.name, Shape::Line);
    // Lines typed while the sign-in waits: a pasted address. The reader stops with the
    // sign-in; a line it was waiting for goes to the session's prompt instead.
    let (send, pasted) = tokio::sync::mpsc::channel::<String>(4);
    let reader = tokio::spawn(async move {
        while let Some(line) = crate::terminal::read_line(MAX_LINE_BYTES).await {
            if send.send(line).await.is_err() {
                break;
            }
        }
    });
    let how = super::login::SignIn {
        open_browser,
        pasted,
        url_on_stdout: false,
    };
    let seen = crate::signals::interrupts();
    let signed = tokio::select! {
        signed = super::login::sign_in(env, spec, how) => Some(signed),
        () = crate::signals::interrupted_since(seen) => None,
    };
    reader.abort();
    match signed {
        Some(Ok(_)) => match host.restart(&spec.name).await {
            Ok(()) => eprintln!("{name}: connected; its tools are offered in this session."),
            Err(error) => eprintln!(
                "warden: {name} did not connect after the sign-in: {}; going on without it",
                inert(&error.to_string(), Shape::Line)
            ),
        },
        Some(Err(failure)) => eprintln!(
            "warden: signing in to {name} failed: {}; going on without it",
            inert(&failure.error.to_string(), Shape::Line)
        ),
        None => eprintln!("warden: signing in to {name} was interrupted; going on without it"),
    }
}

/// Says on stderr which servers did not connect and why, for a session with nobody to
/// ask (`warden run` without a terminal): it goes on without them.
pub fn report_unconnected(host: &Host) {
    for entry in host.servers() {
        if let ServerStatus::Failed { reason, .. } = &entry.status {
            // A server that needs a sign-in says so, naming `warden login`.
            eprintln!(
                "warden: {} is not connected: {}; going on without it",
                inert(&entry.spec.name, Shape::Line),
                inert(reason, Shape::Line)
            );
        }
    }
}
