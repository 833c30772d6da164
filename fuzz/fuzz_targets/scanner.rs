//! Fuzz target `scanner`: see [`warden_fuzz::scanner`] for what it decodes and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| warden_fuzz::scanner::run(data));
