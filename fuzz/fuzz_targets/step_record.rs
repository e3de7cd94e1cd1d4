//! libFuzzer entry for the `step_record` target (the body is `tether_fuzz::step_record`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tether_fuzz::step_record(data));
