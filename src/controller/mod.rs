//! Controllers and the machinery they share (work queue, interface store, the OVSDB
//! trait); they never see a socket.

pub mod bridge;
pub mod deferred;
pub mod externalnode;
#[cfg(test)]
pub mod fake;
pub mod interfaces;
pub mod queue;
pub mod trafficcontrol;
