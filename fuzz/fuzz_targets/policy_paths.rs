//! Fuzz target `policy_paths`: see [`warden_fuzz::policy_paths`] for what it decodes and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| warden_fuzz::policy_paths::run(data));
