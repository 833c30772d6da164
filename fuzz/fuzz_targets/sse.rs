//! Fuzz target `sse`: see [`warden_fuzz::sse`] for what it decodes and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| warden_fuzz::sse::run(data));
