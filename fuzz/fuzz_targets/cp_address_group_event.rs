//! libFuzzer entry for the `cp_address_group_event` target (the body is `tether_fuzz::cp_address_group_event`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tether_fuzz::cp_address_group_event(data));
