//! tether: Antrea's ExternalNode and TrafficControl controllers for a plain Linux VM.
//!
//! The library holds everything; `main.rs` only parses arguments and calls in. Protocol
//! modules (`ovsdb`, `openflow`, `k8s`) keep their codecs and state machines free of
//! sockets, with exactly one file per module doing I/O; `netlink` is the only user of neli.

pub mod config;
pub mod controller;
pub mod daemon;
pub mod files;
pub mod heartbeat;
pub mod hostnet;
pub mod k8s;
pub mod logging;
pub mod mac;
pub mod netlink;
pub mod notify;
pub mod openflow;
pub mod ovsdb;
pub mod pipeline;
pub mod status;
pub mod sys;
#[cfg(any(test, feature = "test-hooks"))]
pub mod testing;
