//! libFuzzer entry for the `watch_event` target (the body is `tether_fuzz::watch_event`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tether_fuzz::watch_event(data));
