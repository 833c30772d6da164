//! Fuzz target `stdio_lines`: see [`warden_fuzz::stdio_lines`] for what it decodes and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| warden_fuzz::stdio_lines::run(data));
