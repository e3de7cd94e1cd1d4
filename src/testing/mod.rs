//! Test doubles of the controllers' traits and of the kernel's links, compiled only into
//! test builds (`cfg(test)`, or the `test-hooks` feature the tests, examples and benches
//! enable through the crate's self dev-dependency); the shipped binary has none of them.

pub mod ovs;

pub use crate::netlink::{Call, FakeLinks};
pub use ovs::{FakeBridge, FakeFlows};

/// Bytes from hex digits, whitespace ignored (wire vectors written as `ovs-ofctl` or
/// tcpdump print them). Panics on a bad digit: test input.
pub fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digits"))
        .collect()
}
