//! The TrafficControl controller (Antrea `pkg/agent/controller/trafficcontrol`, with the
//! fixes of docs/design.md#where-tether-differs-from-antrea-and-why): `ports` (names and
//! OVSDB rows), `select` (selection and the effective rule), `plan` (what a sync must do,
//! as data), `controller` (sync per TC through the `Bridge` and `Flows` traits), `device`
//! (which `device` targets the host needs itself).

mod controller;
pub mod device;
mod error;
pub mod plan;
pub mod ports;
pub mod select;

pub use controller::{TcController, object_id};
pub use error::{SyncError, TcStatus};

#[cfg(test)]
mod tests;
