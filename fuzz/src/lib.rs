//! Warden's fuzz targets: one module per decoder of untrusted bytes, each with a `run`
//! function that decodes one input and asserts the decoder's properties (no panic, its
//! caps respected, and a round trip where an encoder exists).
//!
//! The binaries in `fuzz_targets/` hand libFuzzer's inputs to these functions; the test
//! in `tests/replay.rs` runs the checked-in corpus through the same functions under plain
//! `cargo test`, so every finding stays a regression test without the fuzzing engine.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod config;
pub mod elicit_form;
pub mod gateway_jsonrpc;
pub mod mcp_headers;
pub mod policy_args;
pub mod policy_paths;
pub mod relay_frames;
pub mod scanner;
pub mod sse;
pub mod stdio_lines;
pub mod stdio_messages;
pub mod www_authenticate;

// The terminal modules of the `warden` binary that `elicit_form` compiles in: `untrusted`
// as it is, and stand-ins for the two helpers `elicit.rs` reaches for (reading the real
// terminal, and pretty-printing for the confirmation screen).
#[allow(dead_code, missing_docs, clippy::all)]
#[path = "../../crates/warden/src/untrusted.rs"]
mod untrusted;

mod terminal {
    pub async fn read_line(_max: u64) -> Option<String> {
        None
    }
}

mod render {
    pub fn pretty(value: &serde_json::Value) -> String {
        serde_json::to_string_pretty(value).unwrap_or_default()
    }

    pub fn indent(text: &str) -> String {
        text.lines().map(|line| format!("    {line}\n")).collect()
    }
}

/// Every target by name, for the corpus replay.
pub const TARGETS: &[(&str, fn(&[u8]))] = &[
    ("config", config::run),
    ("elicit_form", elicit_form::run),
    ("gateway_jsonrpc", gateway_jsonrpc::run),
    ("mcp_headers", mcp_headers::run),
    ("policy_args", policy_args::run),
    ("policy_paths", policy_paths::run),
    ("relay_frames", relay_frames::run),
    ("scanner", scanner::run),
    ("sse", sse::run),
    ("stdio_lines", stdio_lines::run),
    ("stdio_messages", stdio_messages::run),
    ("www_authenticate", www_authenticate::run),
];

/// Splits `data` at its first NUL byte (the second part empty when there is none): how
/// targets that take two inputs read them, so seeds stay readable text.
pub fn split2(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[]),
    }
}

/// A small single-threaded runtime, made once per thread (making one per input would
/// dominate the executions per second).
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    thread_local! {
        static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a current-thread runtime");
    }
    RUNTIME.with(|rt| rt.block_on(future))
}
