//! The OVSDB client's error type: one enum, variants for what a caller acts on.

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum OvsdbError {
    /// Connecting to or talking over the socket failed.
    Io { remote: String, error: String },
    /// The connection is down (request not sent, or lost before its reply).
    Disconnected,
    /// No reply within the request's timeout.
    Timeout { method: String, ms: u64 },
    /// The server sent something that is not RFC 7047 JSON-RPC.
    Protocol(String),
    /// A message grew past the framer's size cap.
    Oversize { limit: usize },
    /// The server answered a request with a JSON-RPC error (e.g. unknown method).
    Rpc { method: String, error: String },
    /// A transaction failed: the index of the failing op (or ops.len() for a commit
    /// failure), the RFC 7047 `error` string and its `details`.
    TxnFailed {
        op: usize,
        error: String,
        details: String,
    },
    /// A value did not have the type the schema promises.
    Datum(String),
    /// A named row was not found (bridge, port, interface).
    NotFound { table: String, name: String },
    /// OVS could not open the interface: ofport -1 with the Interface `error` column.
    PortFailed { name: String, error: String },
    /// An existing bridge has another datapath type than the configured one (tether
    /// never changes it: ovs-vswitchd would rebuild the bridge and drop the host port).
    DatapathMismatch {
        bridge: String,
        existing: String,
        configured: String,
    },
    /// The client was shut down.
    Shutdown,
}

impl fmt::Display for OvsdbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OvsdbError::Io { remote, error } => write!(f, "ovsdb {remote}: {error}"),
            OvsdbError::Disconnected => write!(f, "ovsdb connection is down"),
            OvsdbError::Timeout { method, ms } => {
                write!(f, "ovsdb {method}: no reply within {ms} ms")
            }
            OvsdbError::Protocol(m) => write!(f, "ovsdb protocol error: {m}"),
            OvsdbError::Oversize { limit } => {
                write!(f, "ovsdb message larger than the {limit}-byte limit")
            }
            OvsdbError::Rpc { method, error } => write!(f, "ovsdb {method} failed: {error}"),
            OvsdbError::TxnFailed { op, error, details } => {
                write!(f, "ovsdb transaction failed at op {op}: {error}")?;
                if !details.is_empty() {
                    write!(f, " ({details})")?;
                }
                Ok(())
            }
            OvsdbError::Datum(m) => write!(f, "ovsdb datum: {m}"),
            OvsdbError::NotFound { table, name } => write!(f, "ovsdb: no {table} named {name:?}"),
            OvsdbError::PortFailed { name, error } => {
                write!(
                    f,
                    "ovs could not add interface {name:?} (ofport -1): {error}"
                )
            }
            OvsdbError::DatapathMismatch {
                bridge,
                existing,
                configured,
            } => write!(
                f,
                "bridge {bridge} has datapath_type {existing} but datapathType is {configured}; \
                 tether never changes an existing bridge's datapath type (ovs-vswitchd would \
                 rebuild the bridge and drop the VM's host port). Fix: set datapathType: \
                 {existing} (or --datapath-type {existing}), or delete the bridge \
                 (ovs-vsctl del-br {bridge}) while no NIC is attached to it"
            ),
            OvsdbError::Shutdown => write!(f, "ovsdb client shut down"),
        }
    }
}

impl std::error::Error for OvsdbError {}
