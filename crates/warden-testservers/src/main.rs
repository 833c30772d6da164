//! `warden-testserver`: a small, hand-written MCP server on stdio for Warden's integration
//! tests.
//!
//! Real MCP servers (see `tests/peers/`) show how correct peers behave. This one exists to
//! show what they never do on demand: lie on stdout, flood a line, hang, crash, leave
//! processes behind, ask the host questions. Each such behaviour is a *mode*, chosen by the
//! first argument; apart from its one deviation every mode acts like the correct `good`
//! server:
//!
//! * a 2025-11-25 server (newline-delimited JSON-RPC 2.0 on stdin/stdout) with the tools
//!   `echo`, `add` and `fail`, answering `initialize`, `ping`, `tools/list` (paged with
//!   `--page-size N`) and `tools/call`, and "method not found" to everything else, including
//!   the 2026-07-28 `server/discover`;
//! * ending cleanly at end of input.
//!
//! ```text
//! warden-testserver [MODE] [--page-size N] [--delay-ms N] [--count N] [--bytes N]
//! ```
//!
//! Modes: `good`, `modern`, `stdout-logs`, `stderr-jsonrpc`, `huge-line`, `silent`,
//! `slow-start`, `serial-start`, `slow-modern`, `hang-on-call`, `crash-mid-call`,
//! `exit-at-start`, `grandchild`, `roots`,
//! `bad-json-lines`, `list-change`, `input-required`, `hostile`, `memory-hog`, `fork-bomb`,
//! `disk-filler`, `read-proc-one`, `conformance`, `notify-flood`, `uri-claimant` (see [`modes::Mode`]). The
//! environment variables `WARDEN_TEST_CALL_LOG`, `WARDEN_TEST_CANCEL_LOG`, `WARDEN_TEST_START_LOG` and
//! `WARDEN_TEST_PID_FILE` name files where the server records
//! what reached it, and `WARDEN_TEST_PROBE_*` make it try, at start, what a confined server
//! must not be able to do (see [`records`]).
//!
//! Dependencies are kept to `serde_json` and `libc` on purpose: the server must be quick to
//! build and obviously independent of the MCP SDK that Warden itself uses.

mod claimant;
mod conformance;
mod conformance_input;
mod framing;
mod hogs;
mod hostile;
mod jsonrpc;
mod live;
mod modes;
mod process;
mod records;
mod server;
mod session;
mod tools;

use std::process::ExitCode;

fn main() -> ExitCode {
    let config = match modes::parse_args(std::env::args().skip(1)) {
        Ok(config) => config,
        Err(problem) => {
            session::diagnose(&format!("warden-testserver: {problem}\n{}", modes::usage()));
            return ExitCode::from(2);
        }
    };
    if let Err(e) = records::probe() {
        session::diagnose(&format!("warden-testserver: probe: {e}"));
    }
    match session::run(&config) {
        Ok(status) => ExitCode::from(status),
        Err(e) => {
            session::diagnose(&format!("warden-testserver: {e}"));
            ExitCode::FAILURE
        }
    }
}
