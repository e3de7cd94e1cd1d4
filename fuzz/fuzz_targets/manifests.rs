//! libFuzzer entry for the `manifests` target (the body is `tether_fuzz::manifests`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tether_fuzz::manifests(data));
