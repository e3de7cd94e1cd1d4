//! libFuzzer entry for the `openflow_msg` target (the body is `tether_fuzz::openflow_msg`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tether_fuzz::openflow_msg(data));
