//! Fuzz target `www_authenticate`: see [`warden_fuzz::www_authenticate`] for what it reads and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| warden_fuzz::www_authenticate::run(data));
