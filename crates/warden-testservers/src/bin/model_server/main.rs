//! `warden-model-server`: a scripted stand-in for the Anthropic Messages API and the OpenAI
//! Chat Completions API, for end-to-end tests of Warden's agent loop.
//!
//! Warden's model clients talk to it exactly as to the real APIs, over loopback. It speaks
//! both wire formats at once (the path decides), checks requests the way the real APIs do,
//! and answers each model request with the next step of a JSON script: an assistant turn
//! (text and tool calls, streamed or whole) or a provider error. Every request is logged as
//! one JSON line, so a test can assert what the host sent.
//!
//! ```text
//! warden-model-server --script PATH [--log PATH] [--require-key KEY] [--port-file PATH]
//! ```
//!
//! It listens on 127.0.0.1 on a free port, prints `listening http://127.0.0.1:PORT` once
//! ready, and exits at end of stdin, on SIGTERM or on SIGINT. The script and log formats are
//! described in `MODEL_SERVER.md` next to this crate's `Cargo.toml`.

mod anthropic;
mod conversation;
mod log;
mod openai;
mod script;
mod service;
mod sse;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};
use tokio::task::JoinSet;

use crate::conversation::Ids;
use crate::log::RequestLog;
use crate::script::{Player, Script};
use crate::service::Server;

/// At most this many connections are served at once; more wait in the listen backlog.
const MAX_CONNECTIONS: usize = 64;

/// The command line.
struct Options {
    script: PathBuf,
    log: Option<PathBuf>,
    require_key: Option<String>,
    port_file: Option<PathBuf>,
}

fn usage() -> &'static str {
    "usage: warden-model-server --script PATH [--log PATH] [--require-key KEY] [--port-file PATH]\n\
     \n\
     Serves POST /v1/messages (Anthropic), POST /v1/chat/completions and /chat/completions\n\
     (OpenAI) and GET /healthz on 127.0.0.1, answering model requests with the script's steps\n\
     in order. Prints `listening http://127.0.0.1:PORT` when ready; exits at end of stdin or on\n\
     SIGTERM. See MODEL_SERVER.md for the script and log formats."
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut script = None;
    let mut log = None;
    let mut require_key = None;
    let mut port_file = None;
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--script" => script = Some(PathBuf::from(value("--script")?)),
            "--log" => log = Some(PathBuf::from(value("--log")?)),
            "--require-key" => require_key = Some(value("--require-key")?),
            "--port-file" => port_file = Some(PathBuf::from(value("--port-file")?)),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Options {
        script: script.ok_or("--script PATH is required")?,
        log,
        require_key,
        port_file,
    })
}

fn main() -> ExitCode {
    let options = match parse_args(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(problem) if problem.is_empty() => {
            println!("{}", usage());
            return ExitCode::SUCCESS;
        }
        Err(problem) => {
            eprintln!("warden-model-server: {problem}\n{}", usage());
            return ExitCode::from(2);
        }
    };
    match run(options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(problem) => {
            eprintln!("warden-model-server: {problem}");
            ExitCode::FAILURE
        }
    }
}

fn run(options: Options) -> Result<(), String> {
    let script = Script::load(&options.script)?;
    let log = RequestLog::open(options.log.as_deref()).map_err(|e| {
        format!(
            "cannot open the log {}: {e}",
            options.log.as_deref().unwrap_or(Path::new("")).display()
        )
    })?;
    let server = Arc::new(Server {
        player: Player::new(script),
        log,
        require_key: options.require_key,
        ids: Ids::default(),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(serve(server, options.port_file))
}

async fn serve(server: Arc<Server>, port_file: Option<PathBuf>) -> Result<(), String> {
    let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1: {e}"))?;
    let port = listener
        .local_addr()
        .map_err(|e| format!("cannot read the listening address: {e}"))?
        .port();
    if let Some(path) = &port_file {
        write_port_file(path, port)
            .map_err(|e| format!("cannot write the port file {}: {e}", path.display()))?;
    }
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening http://127.0.0.1:{port}")
        .and_then(|()| stdout.flush())
        .map_err(|e| format!("cannot write to stdout: {e}"))?;
    drop(stdout);

    let mut stdin_closed = watch_stdin();
    let mut terminate =
        signal(SignalKind::terminate()).map_err(|e| format!("cannot watch SIGTERM: {e}"))?;
    let mut interrupt =
        signal(SignalKind::interrupt()).map_err(|e| format!("cannot watch SIGINT: {e}"))?;
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stdin_closed => break,
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = accept(&listener, &permits) => match accepted {
                Ok((stream, permit)) => {
                    let server = Arc::clone(&server);
                    connections.spawn(connection(server, stream, permit));
                }
                Err(e) => eprintln!("warden-model-server: accept: {e}"),
            },
        }
    }
    // Every connection (and so every stream, stalled or not) ends here.
    connections.shutdown().await;
    Ok(())
}

/// Waits for a free connection slot, then for a connection.
async fn accept(
    listener: &TcpListener,
    permits: &Arc<Semaphore>,
) -> std::io::Result<(TcpStream, OwnedSemaphorePermit)> {
    let permit = Arc::clone(permits)
        .acquire_owned()
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let (stream, _) = listener.accept().await?;
    Ok((stream, permit))
}

async fn connection(server: Arc<Server>, stream: TcpStream, permit: OwnedSemaphorePermit) {
    let service = service_fn(move |request| service::handle(Arc::clone(&server), request));
    let result = http1::Builder::new()
        .timer(TokioTimer::new())
        .serve_connection(TokioIo::new(stream), service)
        .await;
    if let Err(e) = result
        && !e.is_incomplete_message()
    {
        eprintln!("warden-model-server: connection: {e}");
    }
    drop(permit);
}

/// Resolves when stdin reaches end of file (or fails). A plain thread does the blocking
/// read; it dies with the process.
fn watch_stdin() -> oneshot::Receiver<()> {
    let (tx, rx) = oneshot::channel();
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin();
        let mut buffer = [0u8; 1024];
        loop {
            match stdin.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        let _ = tx.send(());
    });
    rx
}

/// Writes the port to `path` through a temporary file and a rename, so a reader never sees
/// a half-written number.
fn write_port_file(path: &Path, port: u16) -> std::io::Result<()> {
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    std::fs::write(&temporary, format!("{port}\n"))?;
    std::fs::rename(&temporary, path)
}
