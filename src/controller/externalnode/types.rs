//! The ExternalNode controller's vocabulary: configuration, the datapath hook, errors,
//! status, and the two pure naming rules Antrea fixes (ExternalEntity name, host port
//! external_ids).

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;

use sha1::{Digest, Sha1};

use super::record::RECORD_KEY;
use crate::netlink::{ApplyError, LinkError, StepError};
use crate::openflow::OfError;
use crate::ovsdb::{OvsdbError, Uuid};
use crate::pipeline::externalnode::PolicyBypassRule;

/// Test-only crash point: when this variable is `<phase>-<step>` (e.g. `takeover-ports`,
/// `restore-rename`), the process aborts right after doing that step, before recording the
/// next one — what a `kill -9` at that moment leaves behind. Binary-level tests use it; it
/// exists only in builds with the `test-hooks` feature (every `cargo test` build).
pub const CRASH_ENV: &str = "TETHER_CRASH_AT";

#[derive(Clone, Debug)]
pub struct EnConfig {
    pub node_name: String,
    /// The OVS bridge (`--bridge`): its own internal port is never taken over.
    pub bridge: String,
    /// `externalNode.externalNodeNamespace`.
    pub namespace: String,
    pub bypass_rules: Vec<PolicyBypassRule>,
    /// Where `ovs-vswitchd.pid` and its control socket live (`--ovs-rundir`).
    pub ovs_rundir: PathBuf,
    /// The bridge's datapath type (`--datapath-type`): picks the datapath for `dpctl/*`.
    pub datapath_type: String,
    /// Where the held configuration of an attached NIC is also kept, outside OVS
    /// (`--state-dir`; `None`: in OVSDB only).
    pub state_dir: Option<PathBuf>,
}

impl Default for EnConfig {
    fn default() -> EnConfig {
        EnConfig {
            node_name: String::new(),
            bridge: "br-int".into(),
            namespace: "default".into(),
            bypass_rules: Vec::new(),
            ovs_rundir: PathBuf::from("/var/run/openvswitch"),
            datapath_type: "system".into(),
            state_dir: None,
        }
    }
}

/// Why a sync, recovery or replay failed; each names the NIC, port or step.
#[derive(Clone, Debug, PartialEq)]
pub enum EnError {
    /// The ExternalNode's spec failed validation, or has no interface.
    Invalid {
        en: String,
        detail: String,
    },
    /// None of the IPs is on any link.
    NicNotFound {
        ips: Vec<IpAddr>,
    },
    /// The IPs are on different links.
    NicAmbiguous {
        links: Vec<(IpAddr, String)>,
    },
    /// The NIC has no Ethernet MAC to give the host port.
    NoMac {
        nic: String,
    },
    /// The link holding the IPs must not be taken over (loopback, the bridge, another OVS
    /// port, a bond slave, a tunnel …); checked before any link is touched.
    Refused {
        en: String,
        detail: String,
    },
    /// The NIC has routes that cannot be re-created exactly on the host port; each is
    /// named. Retried with backoff: changing those routes fixes it.
    Unmovable {
        nic: String,
        routes: Vec<String>,
    },
    Link {
        op: String,
        error: LinkError,
    },
    Move {
        nic: String,
        error: ApplyError,
    },
    Restore {
        nic: String,
        errors: Vec<StepError>,
    },
    Ovsdb {
        op: String,
        error: OvsdbError,
    },
    Flows {
        op: String,
        error: OfError,
    },
    Datapath {
        nic: String,
        error: String,
    },
    /// The NIC is still a port of the datapath (it has a master) after its OVS port was
    /// deleted and `dpctl/del-if` was tried: renamed back now, it would keep the VM's
    /// addresses while OVS takes its frames. Not renamed; retried.
    Held {
        nic: String,
        master: String,
    },
    /// After the takeover the host port is not the NIC's stand-in (`identity`); rolled
    /// back.
    Identity {
        nic: String,
        mismatches: Vec<String>,
    },
    /// Host state that no recorded step explains; left alone for an operator.
    Inconsistent {
        nic: String,
        detail: String,
    },
    /// The state directory (`--state-dir`): a held configuration not written or removed.
    State {
        op: String,
        detail: String,
    },
    /// The step record in OVSDB cannot be read; left in place for an operator.
    Record {
        detail: String,
    },
    /// A takeover step failed and was rolled back; `rollback` lists undo failures.
    RolledBack {
        nic: String,
        error: Box<EnError>,
        rollback: Vec<EnError>,
    },
    /// Several independent failures (e.g. restoring two NICs).
    Many(Vec<EnError>),
}

impl EnError {
    /// Only a new version of the ExternalNode can fix it: retrying the same spec cannot.
    pub fn is_permanent(&self) -> bool {
        matches!(self, EnError::Invalid { .. } | EnError::Refused { .. })
    }
}

impl fmt::Display for EnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnError::Invalid { en, detail } => write!(f, "ExternalNode {en}: {detail}"),
            EnError::Identity { nic, mismatches } => write!(
                f,
                "host port {nic} is not the NIC's stand-in after the takeover: {}",
                mismatches.join("; ")
            ),
            EnError::Held { nic, master } => write!(
                f,
                "{nic} is still enslaved to {master} (a datapath port) after its OVS port was \
                 deleted; not renaming it back until ovs-vswitchd releases it"
            ),
            EnError::NicNotFound { ips } => {
                let ips: Vec<String> = ips.iter().map(IpAddr::to_string).collect();
                write!(f, "cannot find interface via IPs {}", ips.join(","))
            }
            EnError::NicAmbiguous { links } => {
                let l: Vec<String> = links.iter().map(|(ip, n)| format!("{ip} on {n}")).collect();
                write!(f, "the IPs are on different interfaces: {}", l.join(", "))
            }
            EnError::NoMac { nic } => write!(f, "interface {nic} has no Ethernet MAC"),
            EnError::Refused { en, detail } => {
                write!(f, "ExternalNode {en}: refusing to take over: {detail}")
            }
            EnError::Unmovable { nic, routes } => write!(
                f,
                "refusing to take over {nic}: {} route(s) through it cannot be moved to the host port exactly and would be lost: {}",
                routes.len(),
                routes.join("; ")
            ),
            EnError::Link { op, error } => write!(f, "{op}: {error}"),
            EnError::Move { nic, error } => {
                write!(f, "moving {nic}'s addresses and routes: {error}")
            }
            EnError::Restore { nic, errors } => {
                write!(f, "restoring {nic}'s addresses and routes:")?;
                for e in errors {
                    write!(f, " {e};")?;
                }
                Ok(())
            }
            EnError::Ovsdb { op, error } => write!(f, "{op}: {error}"),
            EnError::State { op, detail } => write!(f, "{op}: {detail}"),
            EnError::Flows { op, error } => write!(f, "{op}: {error}"),
            EnError::Datapath { nic, error } => {
                write!(f, "removing datapath port {nic} via ovs-vswitchd: {error}")
            }
            EnError::Inconsistent { nic, detail } => {
                write!(f, "refusing to take over {nic}: {detail}")
            }
            EnError::Record { detail } => write!(
                f,
                "Bridge external_ids:{RECORD_KEY} is unreadable ({detail}); fix or remove it by hand"
            ),
            EnError::RolledBack {
                nic,
                error,
                rollback,
            } => {
                write!(f, "taking over {nic} failed: {error}; rolled back")?;
                for e in rollback {
                    write!(f, "; rollback: {e}")?;
                }
                Ok(())
            }
            EnError::Many(errors) => {
                let s: Vec<String> = errors.iter().map(ToString::to_string).collect();
                write!(f, "{}", s.join("; "))
            }
        }
    }
}

impl std::error::Error for EnError {}

/// What `tether status` shows for the ExternalNode.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnStatus {
    /// `waiting`, `attached`, or the step in flight (`takeover:ports`, `restore:move` …).
    pub step: String,
    pub nic: Option<String>,
    pub uplink: Option<String>,
    pub host_ofport: Option<u32>,
    pub uplink_ofport: Option<u32>,
    pub entity_name: Option<String>,
    /// The host port's `ip-address` entries.
    pub addresses: Vec<String>,
    pub bypass_flows: usize,
    /// Attached: "verified" or the identity mismatches (`identity`).
    pub identity: Option<String>,
    pub last_error: Option<String>,
    /// Repairs of what others did to the NIC's ports in OVS (a NIC given back from its
    /// held configuration, a missing uplink port rebuilt), and the last one.
    pub repairs: u64,
    pub last_repair: Option<String>,
    /// Attached, but the VM cannot be reached as things are now (a port gone or without
    /// an ofport): why. Read live from OVSDB's replica when status is asked, not at the
    /// last sync.
    pub cut_off: Option<String>,
    /// Attached, and the kernel stack on the uplink still takes traffic for the VM past
    /// OVS (`uplink::side_door`): why, naming the sysctls. As of the last sync.
    pub side_door: Option<String>,
}

/// The ExternalEntity name exactly as Antrea derives it (`GenExternalEntityName`,
/// docs/antrea-compat.md#externalentity-name): the EN name when the interface has no name, else
/// `<en>-<first 5 hex digits of sha1(interface name)>`.
pub fn external_entity_name(en_name: &str, if_name: &str) -> String {
    if if_name.is_empty() {
        return en_name.to_string();
    }
    let digest = Sha1::digest(if_name.as_bytes());
    let hex: String = digest.iter().take(3).map(|b| format!("{b:02x}")).collect();
    format!("{en_name}-{}", &hex[..5])
}

/// The host port's external_ids (docs/antrea-compat.md#port-external-ids, Antrea `GetOVSAttachInfo`):
/// empty values are left out; IPs comma-joined in the order given.
pub fn host_external_ids(
    uplink: &str,
    uplink_port: &Uuid,
    entity_name: &str,
    entity_namespace: &str,
    ips: &[IpAddr],
) -> BTreeMap<String, String> {
    let ips: Vec<String> = ips.iter().map(IpAddr::to_string).collect();
    [
        ("antrea-type", "host".to_string()),
        ("uplink-name", uplink.to_string()),
        ("uplink-port", uplink_port.0.clone()),
        ("entity-name", entity_name.to_string()),
        ("entity-namespace", entity_namespace.to_string()),
        ("ip-address", ips.join(",")),
    ]
    .into_iter()
    .filter(|(_, v)| !v.is_empty())
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}
