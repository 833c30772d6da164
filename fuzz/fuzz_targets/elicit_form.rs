//! Fuzz target `elicit_form`: see [`warden_fuzz::elicit_form`] for what it decodes and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| warden_fuzz::elicit_form::run(data));
