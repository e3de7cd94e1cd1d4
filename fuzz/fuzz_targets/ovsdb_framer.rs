//! libFuzzer entry for the `ovsdb_framer` target (the body is `tether_fuzz::ovsdb_framer`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tether_fuzz::ovsdb_framer(data));
