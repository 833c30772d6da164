//! Fuzz target `gateway_jsonrpc`: see [`warden_fuzz::gateway_jsonrpc`] for what it decodes and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| warden_fuzz::gateway_jsonrpc::run(data));
