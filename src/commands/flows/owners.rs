//! Who owns a flow on the bridge, read back from its cookie (`round(16) | category(8) |
//! reserved(8) | object(32)`, docs/design.md#flow-cookies) and, for names, from what the
//! bridge's ports and the running daemon say. Pure.

use std::collections::BTreeMap;
use std::fmt;

use crate::controller::externalnode::nic_owner;
use crate::controller::trafficcontrol::object_id;
use crate::openflow::Category;
use crate::openflow::flow::tether_cookie;
use crate::openflow::oxm::MatchField;
use crate::ovsdb::PortData;

/// What owns a flow.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum OwnerKind {
    /// The pipeline's table-miss and output flows.
    Pipeline,
    /// The L2 forwarding of one Pod (`namespace/name` when its port says so).
    L2 { pod: Option<String> },
    /// The ExternalNode's uplink pair for one NIC.
    ExternalNode { nic: Option<String> },
    /// An ExternalNode policy-bypass rule.
    PolicyBypass,
    /// A TrafficControl's mark flows; the name when the daemon (or `--tc`) told us.
    TrafficControl { name: Option<String>, object: u32 },
    /// A TrafficControl return port's Classifier flow.
    ReturnPort { port: Option<String>, object: u32 },
    /// A TrafficControl target port's Classifier flow (what comes in on it is dropped).
    TargetPort { port: String, object: u32 },
    /// NetworkPolicy's own flows (conntrack, the established skip, ND).
    PolicyPipeline,
    /// One NetworkPolicy rule (its conjunction id); `policy rule` when the daemon said.
    PolicyRule { name: Option<String>, conj_id: u32 },
    /// tether's cookie layout, but a round that is no longer the bridge's.
    Stale { round: u16 },
    /// Not a cookie tether writes: another controller's, a manual `ovs-ofctl add-flow`,
    /// the bridge's default `NORMAL` flow.
    Unclaimed,
}

impl OwnerKind {
    /// Flows no current owner claims (what `--unowned` shows).
    pub fn is_unowned(&self) -> bool {
        matches!(self, OwnerKind::Stale { .. } | OwnerKind::Unclaimed)
    }

    /// A short word for JSON.
    pub fn kind(&self) -> &'static str {
        match self {
            OwnerKind::Pipeline => "pipeline",
            OwnerKind::L2 { .. } => "l2",
            OwnerKind::ExternalNode { .. } => "externalnode",
            OwnerKind::PolicyBypass => "policy-bypass",
            OwnerKind::TrafficControl { .. } => "trafficcontrol",
            OwnerKind::ReturnPort { .. } => "return-port",
            OwnerKind::TargetPort { .. } => "target-port",
            OwnerKind::PolicyPipeline => "networkpolicy-pipeline",
            OwnerKind::PolicyRule { .. } => "networkpolicy-rule",
            OwnerKind::Stale { .. } => "stale",
            OwnerKind::Unclaimed => "unclaimed",
        }
    }

    /// The object's name, where known.
    pub fn name(&self) -> Option<String> {
        match self {
            OwnerKind::L2 { pod } => pod.clone(),
            OwnerKind::ExternalNode { nic } => nic.clone(),
            OwnerKind::TrafficControl { name, .. } => name.clone(),
            OwnerKind::ReturnPort { port, .. } => port.clone(),
            OwnerKind::TargetPort { port, .. } => Some(port.clone()),
            OwnerKind::PolicyRule { name, .. } => name.clone(),
            _ => None,
        }
    }
}

impl fmt::Display for OwnerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unknown =
            |object: u32| format!("#{object:08x} (name unknown: the daemon is not running)");
        match self {
            OwnerKind::Pipeline => write!(f, "pipeline"),
            OwnerKind::L2 { pod: Some(p) } => write!(f, "l2 forwarding of Pod {p}"),
            OwnerKind::L2 { pod: None } => write!(f, "l2 forwarding (no Pod port has this MAC)"),
            OwnerKind::ExternalNode { nic: Some(n) } => {
                write!(f, "externalnode uplink pair of {n}")
            }
            OwnerKind::ExternalNode { nic: None } => {
                write!(f, "externalnode uplink pair (NIC unknown)")
            }
            OwnerKind::PolicyBypass => write!(f, "externalnode policy bypass"),
            OwnerKind::TrafficControl { name: Some(n), .. } => write!(f, "trafficcontrol {n}"),
            OwnerKind::TrafficControl { name: None, object } => {
                write!(f, "trafficcontrol {}", unknown(*object))
            }
            OwnerKind::ReturnPort { port: Some(p), .. } => {
                write!(f, "trafficcontrol return port {p}")
            }
            OwnerKind::ReturnPort { port: None, object } => {
                write!(f, "trafficcontrol return port #{object:08x}")
            }
            OwnerKind::TargetPort { port, .. } => {
                write!(f, "trafficcontrol target port {port} (drops what comes in)")
            }
            OwnerKind::PolicyPipeline => write!(f, "networkpolicy pipeline"),
            OwnerKind::PolicyRule {
                name: Some(n),
                conj_id,
            } => write!(f, "networkpolicy rule {n} (conjunction {conj_id})"),
            OwnerKind::PolicyRule {
                name: None,
                conj_id,
            } => write!(
                f,
                "networkpolicy rule (conjunction {conj_id}; name unknown: the daemon is not running)"
            ),
            OwnerKind::Stale { round } => write!(f, "stale: round {round}, not the bridge's"),
            OwnerKind::Unclaimed => write!(f, "unclaimed: not a tether cookie"),
        }
    }
}

/// What names the owners: built from the bridge's ports, its `roundNum`, and the names the
/// running daemon (or the operator) gave.
#[derive(Clone, Debug, Default)]
pub struct Names {
    /// The bridge's `external_ids:roundNum`: this round and the next are live (the next is
    /// the one a starting daemon installs before it records it).
    pub round: Option<u16>,
    tcs: BTreeMap<u32, String>,
    return_ports: BTreeMap<u32, String>,
    target_ports: BTreeMap<u32, String>,
    nics: BTreeMap<u32, String>,
    pods_by_mac: BTreeMap<String, String>,
    rules: BTreeMap<u32, String>,
}

impl Names {
    pub fn new(round: Option<u16>, ports: &[PortData]) -> Names {
        let mut n = Names {
            round,
            ..Names::default()
        };
        for p in ports {
            let ids = &p.external_ids;
            match ids.get("antrea-type").map(String::as_str) {
                Some("traffic-control") => {
                    n.return_ports
                        .insert(object_id(&format!("port:{}", p.name)), p.name.clone());
                    n.target_ports
                        .insert(object_id(&format!("target:{}", p.name)), p.name.clone());
                }
                Some("host" | "uplink") => {
                    // The host port keeps the NIC's name; the uplink is `<nic>~`.
                    let nic = p.name.trim_end_matches('~');
                    n.add_nic(nic);
                }
                _ => {}
            }
            if let (Some(ns), Some(name)) = (ids.get("pod-namespace"), ids.get("pod-name")) {
                let mac = ids.get("attached-mac").or(p.mac_in_use.as_ref());
                if let Some(mac) = mac {
                    n.pods_by_mac
                        .insert(mac.to_ascii_lowercase(), format!("{ns}/{name}"));
                }
            }
        }
        n
    }

    /// A TrafficControl name (from the daemon's status, or `--tc`).
    pub fn add_tc(&mut self, name: &str) {
        self.tcs.insert(object_id(name), name.to_string());
    }

    /// A NetworkPolicy rule's name (`<policy> <rule>`, from the daemon's status) by its
    /// conjunction id.
    pub fn add_rule(&mut self, conj_id: u32, name: &str) {
        self.rules.insert(conj_id, name.to_string());
    }

    pub fn add_nic(&mut self, nic: &str) {
        self.nics.insert(nic_owner(nic).object, nic.to_string());
    }

    fn live(&self, round: u16, newest: u16) -> bool {
        match self.round {
            Some(r) => round == r || round == r.wrapping_add(1),
            None => round == newest,
        }
    }

    /// The owner of a flow with `cookie` and `fields`. `newest` is the highest round among
    /// the bridge's tether-shaped cookies (used when the bridge records no round).
    pub fn owner(&self, cookie: u64, fields: &[MatchField], newest: u16) -> OwnerKind {
        let Some((round, category, object)) = tether_cookie(cookie) else {
            return OwnerKind::Unclaimed;
        };
        if !self.live(round, newest) {
            return OwnerKind::Stale { round };
        }
        match (category, object) {
            (Category::DEFAULT, 0) => OwnerKind::Pipeline,
            (Category::DEFAULT, 1) => {
                let mac = fields.iter().find_map(|f| match f {
                    MatchField::EthDst(m, None) => Some(crate::mac::format(m)),
                    _ => None,
                });
                OwnerKind::L2 {
                    pod: mac.and_then(|m| self.pods_by_mac.get(&m).cloned()),
                }
            }
            (Category::TRAFFIC_CONTROL, o) => {
                if let Some(n) = self.tcs.get(&o) {
                    OwnerKind::TrafficControl {
                        name: Some(n.clone()),
                        object: o,
                    }
                } else if let Some(p) = self.return_ports.get(&o) {
                    OwnerKind::ReturnPort {
                        port: Some(p.clone()),
                        object: o,
                    }
                } else if let Some(p) = self.target_ports.get(&o) {
                    OwnerKind::TargetPort {
                        port: p.clone(),
                        object: o,
                    }
                } else {
                    OwnerKind::TrafficControl {
                        name: None,
                        object: o,
                    }
                }
            }
            (Category::NETWORK_POLICY, 0) => OwnerKind::PolicyPipeline,
            (Category::NETWORK_POLICY, o) => OwnerKind::PolicyRule {
                name: self.rules.get(&o).cloned(),
                conj_id: o,
            },
            (Category::EXTERNAL_NODE, 0) => OwnerKind::PolicyBypass,
            (Category::EXTERNAL_NODE, o) if o & 0x8000_0000 != 0 => OwnerKind::ExternalNode {
                nic: self.nics.get(&o).cloned(),
            },
            _ => OwnerKind::Unclaimed,
        }
    }
}

#[cfg(test)]
mod tests;
