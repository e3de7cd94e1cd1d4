//! libFuzzer entry for the `ovsdb_datum` target (the body is `tether_fuzz::ovsdb_datum`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tether_fuzz::ovsdb_datum(data));
