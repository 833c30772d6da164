//! Fuzz target `stdio_messages`: see [`warden_fuzz::stdio_messages`] for what it decodes and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| warden_fuzz::stdio_messages::run(data));
