//! Test doubles of the controllers' traits and of the kernel's links, compiled only into
//! test builds (`cfg(test)`, or the `test-hooks` feature the tests, examples and benches
//! enable through the crate's self dev-dependency); the shipped binary has none of them.

pub mod ovs;

pub use crate::netlink::{Call, FakeLinks};
pub use ovs::{FakeBridge, FakeFlows};
