//! Fuzz target `policy_args`: see [`warden_fuzz::policy_args`] for what it decodes and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| warden_fuzz::policy_args::run(data));
