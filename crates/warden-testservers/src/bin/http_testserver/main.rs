//! `warden-http-testserver MODE`: a hostile Streamable HTTP MCP server for Warden's tests.
//!
//! It listens on a free loopback port, prints `http://127.0.0.1:PORT/mcp` on its first
//! stdout line, and logs one line per request on stderr (`POST tools/call session=s1`,
//! `GET last-event-id=3`, `DELETE session=s2`), so a test can check what reached it.
//!
//! Apart from its one deviation every mode is a plain 2025-11-25 server: `initialize`
//! (issuing `Mcp-Session-Id` `s1`, `s2`, ...), `tools/list` with the tool `echo`,
//! `tools/call`, 202 for notifications, `DELETE` of a session, and a 400 "not
//! initialized" to the 2026-07-28 `server/discover`, as a legacy server answers it.
//!
//! Modes (see [`mcp::Mode`]): `good`, `redirect`, `content-type`, `big-body`, `big-event`,
//! `stall`, `expire`, `flap`, `mismatch`, `unauthorized`, `resume`, `drop`, `modern`
//! (a strict 2026-07-28 server instead of a legacy one), `modern-broken`, `modern-stall`,
//! `sse-foreign` (a deprecated HTTP+SSE server naming an endpoint on another origin).

mod mcp;
mod modern;

use std::convert::Infallible;
use std::sync::Arc;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::io::Write as _;

fn main() {
    let arg = std::env::args().nth(1).unwrap_or_else(|| "good".into());
    let Some(mode) = mcp::Mode::parse(&arg) else {
        eprintln!(
            "unknown mode {arg:?}; modes: {}",
            mcp::Mode::NAMES.join(", ")
        );
        std::process::exit(2);
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("no runtime: {error}");
            std::process::exit(1);
        }
    };
    if let Err(error) = runtime.block_on(serve(mode)) {
        eprintln!("warden-http-testserver: {error}");
        std::process::exit(1);
    }
}

async fn serve(mode: mcp::Mode) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "http://{address}/mcp")?;
        stdout.flush()?;
    }
    let state = Arc::new(mcp::State::new(mode));
    loop {
        let (stream, _) = listener.accept().await?;
        let state = state.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(mcp::handle(request, &state).await) }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
