//! Why a TrafficControl could not be synced, and what `tether status` shows per TC.

use crate::k8s::ValidationError;
use crate::netlink::LinkError;
use crate::openflow::OfError;
use crate::ovsdb::OvsdbError;

/// Why a TrafficControl could not be synced; the message names the port or field.
#[derive(Debug, Clone, PartialEq)]
pub enum SyncError {
    Invalid(ValidationError),
    /// A port with the TC port's name exists and is not a traffic-control port.
    PortConflict {
        port: String,
        role: String,
    },
    Port {
        port: String,
        error: OvsdbError,
    },
    Flows(OfError),
    /// A `device` target (or return port) the host uses itself (see `device`).
    DeviceRefused {
        tc: String,
        device: String,
        reason: String,
    },
    /// The kernel could not be asked about a `device` target (retried).
    Link(LinkError),
    /// An `ovsInternal` port's netdev could not be brought up (retried).
    Up {
        port: String,
        error: LinkError,
    },
    /// The tunnel port would be the same tunnel to ovs-vswitchd as an existing port
    /// (`tunnel_identity`), which refuses the second ("File exists").
    TunnelClash {
        port: String,
        other: String,
        other_tcs: Vec<String>,
        identity: String,
    },
}

impl SyncError {
    /// Only a new version of the object can fix it: retrying the same spec cannot.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            SyncError::Invalid(_) | SyncError::DeviceRefused { .. } | SyncError::TunnelClash { .. }
        )
    }
}

impl std::fmt::Display for SyncError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SyncError::Invalid(e) => write!(f, "invalid spec: {e}"),
            SyncError::PortConflict { port, role } => write!(
                f,
                "port {port} exists on the bridge as a {role} port, not a traffic-control port; refusing to reuse it"
            ),
            SyncError::Port { port, error } => write!(f, "port {port}: {error}"),
            SyncError::Flows(e) => write!(f, "flows: {e}"),
            SyncError::DeviceRefused { tc, device, reason } => write!(
                f,
                "TrafficControl {tc}: refusing device {device} as a target or return port: {reason}"
            ),
            SyncError::Link(e) => write!(f, "checking a device target: {e}"),
            SyncError::TunnelClash {
                port,
                other,
                other_tcs,
                identity,
            } => write!(
                f,
                "port {port} would be the same tunnel ({identity}) as port {other}{}, and ovs-vswitchd allows only one: change the remote IP, key or port of one of them",
                if other_tcs.is_empty() {
                    String::new()
                } else {
                    format!(" of TrafficControl {}", other_tcs.join(", "))
                }
            ),
            SyncError::Up { port, error } => write!(
                f,
                "port {port}: cannot bring its netdev up (nothing sent to it would reach a capture): {error}"
            ),
        }
    }
}

impl std::error::Error for SyncError {}

/// What `tether status` shows per TC.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TcStatus {
    pub name: String,
    pub effective_pods: Vec<String>,
    pub target_port: Option<(String, u32)>,
    pub return_port: Option<(String, u32)>,
    pub flows: usize,
    pub last_error: Option<String>,
}
