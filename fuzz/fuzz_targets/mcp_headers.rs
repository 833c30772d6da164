//! Fuzz target `mcp_headers`: see [`warden_fuzz::mcp_headers`] for what it decodes and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| warden_fuzz::mcp_headers::run(data));
