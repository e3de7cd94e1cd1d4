//! The TrafficControl controller (Antrea `pkg/agent/controller/trafficcontrol`, with the
//! fixes of docs/design.md#where-tether-differs-from-antrea-and-why): `ports` (names and OVSDB rows), `select` (selection and the
//! effective rule), `controller` (sync per TC through the `Bridge` and `Flows` traits).

mod controller;
pub mod device;
pub mod ports;
pub mod select;

pub use controller::{SyncError, TcController, TcStatus};

#[cfg(test)]
mod tests;
