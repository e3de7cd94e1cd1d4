//! libFuzzer entry for the `cp_applied_to_group_event` target (the body is `tether_fuzz::cp_applied_to_group_event`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tether_fuzz::cp_applied_to_group_event(data));
