//! OVSDB (RFC 7047) client for the `Open_vSwitch` database.
//!
//! Owns: JSON-RPC framing (`framer`), the datum notation (`datum`), transaction operations
//! and results (`ops`), message classification (`rpc`), the monitored replica (`replica`),
//! the connection's owner thread (`conn`, the only file doing I/O) and the bridge API that
//! controllers use (`bridge`). Does not own: what the ports mean (controllers decide) or
//! OpenFlow (see `openflow`).

pub mod bridgedb;
pub mod conn;
pub mod datum;
mod error;
pub mod framer;
pub mod lock;
pub mod ops;
pub mod port;
pub mod replica;
pub mod rpc;
pub mod unixctl;

pub use bridgedb::{BridgeDb, BridgeView, normalized_datapath, read_bridge};
pub use conn::{Client, ClientOptions, DbEvent, Remote};
pub use datum::{Atom, Datum, Uuid};
pub use error::OvsdbError;
pub use ops::{Condition, Mutation, Op, OpResult, Row};
pub use port::{PortData, PortKind, PortSpec};
pub use replica::Replica;

/// The database every OVS deployment uses.
pub const DB: &str = "Open_vSwitch";
