//! tether: Antrea's ExternalNode and TrafficControl controllers for a plain Linux VM.
//!
//! The library holds everything; `main.rs` only hands its arguments to `commands`, where
//! every command has its home and one signature. The protocol modules (`ovsdb`,
//! `openflow`, `k8s`, `netlink`) keep their codecs and state machines pure (encode/decode
//! pairs, plans as data) and do their I/O in the few files that own a socket or a file
//! (`ovsdb`: `conn`, `bridgedb`, `lock`; `openflow`: `conn` with its owner thread; `k8s`:
//! `http`, `kubeconfig`, `manifests`; `netlink`: `rtnl`, `sysctl`; and `unixctl`, the
//! control socket); `netlink` is the only user of neli. `controller` is the reconcile
//! core, reaching all of them through its own traits; `daemon` wires the parts together
//! for `tether run`, and `wiring` builds what it shares with the other commands. The
//! README's module map says what each module owns. `controlplane` (antrea-controller's
//! NetworkPolicy API: its objects and the state of its three watches) is pure so far; no
//! command uses it yet.

pub mod commands;
pub mod config;
pub mod controller;
pub mod controlplane;
pub mod daemon;
pub mod files;
pub mod heartbeat;
pub mod hostnet;
pub mod k8s;
pub mod logging;
pub mod mac;
pub mod metrics;
pub mod netlink;
pub mod notify;
pub mod openflow;
pub mod ovsdb;
pub mod pipeline;
pub mod status;
pub mod sys;
#[cfg(any(test, feature = "test-hooks"))]
pub mod testing;
pub mod unixctl;
pub mod wiring;
