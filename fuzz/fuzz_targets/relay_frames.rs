//! Fuzz target `relay_frames`: see [`warden_fuzz::relay_frames`] for what it decodes and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| warden_fuzz::relay_frames::run(data));
