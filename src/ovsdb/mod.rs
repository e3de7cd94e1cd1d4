//! OVSDB (RFC 7047) client for the `Open_vSwitch` database.
//!
//! Pure (no I/O): JSON-RPC framing (`framer`), the datum notation (`datum`), transaction
//! operations and results (`ops`), message classification (`rpc`), the monitored replica
//! (`replica`), the Port and Interface rows and their ops (`port`), the error type
//! (`error`). I/O: `conn`, whose owner and reader threads alone touch the OVSDB socket;
//! `bridgedb` (the bridge API controllers use, [`BridgeDb`]) and `lock` (the bridge's OVSDB
//! lock), which send their requests through `conn`'s [`Client`] and wait for the reply
//! (`bridgedb` also reads `/dev/urandom` for a datapath ID). Does not own: what the ports
//! mean (controllers decide), OpenFlow (see `openflow`) or ovs-vswitchd's control socket
//! (`crate::unixctl`, which borrows `framer`).

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

pub use bridgedb::{BridgeDb, BridgeView, normalized_datapath, read_bridge};
pub use conn::{Client, ClientOptions, DbEvent, Remote};
pub use datum::{Atom, Datum, Uuid};
pub use error::OvsdbError;
pub use ops::{Condition, Mutation, Op, OpResult, Row};
pub use port::{PortData, PortKind, PortSpec};
pub use replica::Replica;

/// The database every OVS deployment uses.
pub const DB: &str = "Open_vSwitch";
