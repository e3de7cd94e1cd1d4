//! OpenFlow for tether: a hand-written OpenFlow 1.5 codec (plus the OpenFlow 1.0 pieces the
//! no-flood port setting needs), one connection owner thread per switch socket, and the
//! flow-set backend the controllers program the bridge through.
//!
//! Layout (pure codec first, one place of I/O):
//! - [`codec`] reader/writer (big-endian, length patching, 8-byte padding);
//!   [`consts`] protocol numbers as open newtypes; [`oxm`] match fields; [`action`]
//!   actions and instructions; [`msg`] header, framing, messages and bundles; [`port`] the
//!   port description; [`flowmod`] flow mods and multipart; [`monitor`] OVS's Nicira flow
//!   monitor; [`packet`] packet-out and `NXT_PACKET_IN2` bodies. No sockets, no clocks.
//! - [`flow`] the [`Flow`] value type and cookies; [`flowset`] the desired flows per owner
//!   and the pure diff that turns a new set into flow mods.
//! - [`conn`] (with its owner thread, `conn/owner.rs`) the only code that touches a socket:
//!   `<rundir>/<bridge>.mgmt`, version negotiation, echo, batches ending in a barrier,
//!   reconnect with backoff; its timing state machines are pure, in [`liveness`].
//! - [`backend`] `OfFlows`, the flows backend's face, over its parts: `shared` (state,
//!   connections, one bundle), `commit` (group commit, a round's replacement, the one
//!   fallback for a refused bundle), `replay` (after a reconnect), `noflood` (the OF1.0
//!   port bit), `drift` (flows others change); [`dump`] reads flows back.
//!
//! Not here: which flows to install (the pipeline module builds [`Flow`] values) and
//! OVSDB (ports, bridges) — this module only sees OpenFlow port numbers.

pub mod action;
pub mod backend;
pub mod codec;
mod commit;
pub mod conn;
pub mod consts;
mod drift;
pub mod dump;
pub mod flow;
pub mod flowmod;
pub mod flowset;
pub mod liveness;
pub mod monitor;
pub mod msg;
mod noflood;
pub mod ofctl;
pub mod oxm;
pub mod packet;
pub mod port;
mod replay;
mod shared;

use std::fmt;

pub use action::{Action, Instruction};
pub use backend::{OfCounts, OfFlows, OfFlowsConfig};
pub use flow::{Category, Flow, Owner, cookie};
pub use flowset::FlowChange;
pub use oxm::{Match, MatchField};

/// A codec failure: what was being decoded and why the bytes do not fit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// Fewer bytes than the structure needs.
    Truncated {
        what: &'static str,
        need: usize,
        have: usize,
    },
    /// A length field that is impossible for its structure.
    BadLength { what: &'static str, len: usize },
    /// Bytes left over after a structure that should have ended.
    Trailing { what: &'static str, extra: usize },
    /// A value that is not allowed here.
    Invalid { what: &'static str, value: u64 },
    /// A message or body that does not exist in this protocol version.
    WrongVersion { what: &'static str, version: u8 },
    /// Too long to encode in a 16-bit OpenFlow length.
    TooLong { len: usize },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated { what, need, have } => {
                write!(f, "truncated {what}: need {need} bytes, have {have}")
            }
            WireError::BadLength { what, len } => write!(f, "bad length {len} for {what}"),
            WireError::Trailing { what, extra } => {
                write!(f, "{extra} unexpected trailing bytes after {what}")
            }
            WireError::Invalid { what, value } => write!(f, "invalid {what} {value:#x}"),
            WireError::WrongVersion { what, version } => {
                write!(f, "{what} not valid for OpenFlow version {version:#x}")
            }
            WireError::TooLong { len } => {
                write!(f, "{len} bytes do not fit a 16-bit OpenFlow length")
            }
        }
    }
}

impl std::error::Error for WireError {}

/// A runtime OpenFlow failure, as the controllers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OfError {
    /// No connection to the switch right now (it reconnects by itself).
    Disconnected { socket: String },
    /// The connection failed or was lost: socket errors, end of stream.
    Io { socket: String, error: String },
    /// The switch did not answer within the caller's deadline.
    Timeout { what: String },
    /// The bridge does not allow the OpenFlow version we need.
    Negotiation { socket: String, message: String },
    /// The switch rejected a message: its error, named, and which message it was.
    Switch {
        name: String,
        type_: u16,
        code: u16,
        failed: String,
    },
    /// The switch sent bytes we cannot accept (the connection is closed and re-opened).
    Protocol { socket: String, error: String },
    /// No such OpenFlow port on the bridge.
    PortNotFound { ofport: u32 },
    /// Two owners want a flow with the same table, priority and match.
    Conflict { flow: String, owner: String },
    /// A flow could not be encoded.
    Encode(WireError),
    /// The connection thread is gone (shut down).
    Closed,
    /// This flow backend cannot do what was asked (named); the caller does it another way.
    Unsupported(String),
}

impl fmt::Display for OfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OfError::Disconnected { socket } => write!(f, "not connected to {socket}"),
            OfError::Io { socket, error } => write!(f, "OpenFlow connection to {socket}: {error}"),
            OfError::Timeout { what } => write!(f, "timed out waiting for {what}"),
            OfError::Negotiation { socket, message } => {
                write!(
                    f,
                    "OpenFlow version negotiation with {socket} failed: {message}"
                )
            }
            OfError::Switch {
                name,
                type_,
                code,
                failed,
            } => write!(
                f,
                "switch rejected {failed}: {name} (type {type_}, code {code})"
            ),
            OfError::Protocol { socket, error } => {
                write!(f, "bad message from {socket}: {error}")
            }
            OfError::PortNotFound { ofport } => {
                write!(f, "no OpenFlow port {ofport} on the bridge")
            }
            OfError::Conflict { flow, owner } => {
                write!(f, "flow {flow} is already installed by {owner}")
            }
            OfError::Encode(e) => write!(f, "cannot encode: {e}"),
            OfError::Closed => write!(f, "OpenFlow connection is shut down"),
            OfError::Unsupported(what) => write!(f, "{what} is not supported by this flow backend"),
        }
    }
}

impl std::error::Error for OfError {}

impl From<WireError> for OfError {
    fn from(e: WireError) -> OfError {
        OfError::Encode(e)
    }
}
