//! `NetworkPolicy` of `controlplane.antrea.io/v1beta2` as the controller sends it to an
//! agent (`pkg/apis/controlplane/v1beta2/types.go`): the
//! typed form and its decoder.
//!
//! Owns the policy's shape: rules, peers, services, priorities, source reference. Not what
//! the policy means for the VM (which groups it waits for, which flows it becomes): that
//! is `state` and the planner after it.
//!
//! Fields the VM cannot enforce yet (FQDNs, `toServices`, label identities, L7 protocols,
//! named ports) are kept, not dropped: an egress rule whose only peer is an FQDN would
//! otherwise read as "to anyone".

use serde_json::Value;

use super::GroupKind;
use super::ip::{IpNet, ipnet_value};
use super::json::{
    Budget, Obj, PathError, as_object, boolean, expected, field, fit, float, int, int_as,
    int_value, list, object, required, string, strings,
};

/// The internal NetworkPolicy (named by its source policy's UID).
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkPolicy {
    pub name: String,
    pub uid: String,
    /// `metadata.generation`: what a `NetworkPolicyStatus` reports; 0 when absent.
    pub generation: i64,
    pub rules: Vec<Rule>,
    /// Policy-level appliedTo; empty when every rule has its own.
    pub applied_to_groups: Vec<String>,
    /// Policy priority within its tier, lower first (a float: ACNP allows `1.5`). `None`
    /// only for a Kubernetes NetworkPolicy, which cannot select a VM.
    pub priority: Option<f64>,
    /// The tier's priority (application = 250, baseline = 253).
    pub tier_priority: Option<i32>,
    pub source_ref: Option<SourceRef>,
}

impl NetworkPolicy {
    /// Every group this policy names, repeats included: its appliedTo groups (the policy's
    /// and its rules'), then its rules' address groups.
    pub fn groups(&self) -> impl Iterator<Item = (GroupKind, &str)> {
        let applied_to = self
            .applied_to_groups
            .iter()
            .chain(self.rules.iter().flat_map(|r| &r.applied_to_groups))
            .map(|g| (GroupKind::AppliedTo, g.as_str()));
        let address = self
            .rules
            .iter()
            .flat_map(|r| r.from.address_groups.iter().chain(&r.to.address_groups))
            .map(|g| (GroupKind::Address, g.as_str()));
        applied_to.chain(address)
    }
}

/// `NetworkPolicyReference`: the user's policy this one was made from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SourceRef {
    /// `AntreaNetworkPolicy`, `AntreaClusterNetworkPolicy`, `K8sNetworkPolicy`, … kept as
    /// sent (status and stats reports name it back).
    pub policy_type: String,
    /// Empty for a cluster-scoped policy.
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    In,
    Out,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RuleAction {
    Allow,
    Drop,
    Pass,
    Reject,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub direction: Direction,
    pub from: Peer,
    pub to: Peer,
    /// Empty: any traffic.
    pub services: Vec<Service>,
    /// Order within the policy; 0 when omitted (Go omitempty).
    pub priority: i32,
    /// Absent means Allow (the Go type's comment: only K8s NetworkPolicy rules omit it).
    pub action: RuleAction,
    pub enable_logging: bool,
    /// Rule-level appliedTo (ACNP per-rule `appliedTo`), instead of the policy's.
    pub applied_to_groups: Vec<String>,
    /// Unique within the policy (the webhook fills it in); status and stats name rules by it.
    pub name: String,
    pub log_label: String,
    /// The rule carries `l7Protocols` (L7 enforcement, not available on a VM).
    pub l7: bool,
}

/// `NetworkPolicyPeer`. Empty on the side a rule does not use (`"to":{}` on an ingress
/// rule, `"from":{}` on an egress one).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Peer {
    pub address_groups: Vec<String>,
    pub ip_blocks: Vec<IpBlock>,
    pub fqdns: Vec<String>,
    pub to_services: Vec<ServiceRef>,
    pub label_identities: Vec<u32>,
}

impl Peer {
    /// No peer of any kind.
    pub fn is_empty(&self) -> bool {
        self.address_groups.is_empty()
            && self.ip_blocks.is_empty()
            && self.fqdns.is_empty()
            && self.to_services.is_empty()
            && self.label_identities.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpBlock {
    pub cidr: IpNet,
    pub except: Vec<IpNet>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServiceRef {
    pub namespace: String,
    pub name: String,
}

/// A `Protocol` value. Open: a value this tether does not know decodes (and says so later,
/// per rule) instead of failing the whole policy.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Protocol {
    #[default]
    Tcp,
    Udp,
    Sctp,
    Icmp,
    Igmp,
    Other(String),
}

impl Protocol {
    pub fn parse(s: &str) -> Protocol {
        match s {
            "TCP" => Protocol::Tcp,
            "UDP" => Protocol::Udp,
            "SCTP" => Protocol::Sctp,
            "ICMP" => Protocol::Icmp,
            "IGMP" => Protocol::Igmp,
            other => Protocol::Other(other.to_string()),
        }
    }

    /// As Antrea spells it.
    pub fn as_str(&self) -> &str {
        match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
            Protocol::Sctp => "SCTP",
            Protocol::Icmp => "ICMP",
            Protocol::Igmp => "IGMP",
            Protocol::Other(s) => s,
        }
    }
}

/// `port`, an `intstr.IntOrString`: a JSON string is a named port even when it is digits
/// (intstr decodes by JSON type).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Port {
    /// 0 means any port.
    Number(u16),
    /// Resolved against the peer's named ports; an ExternalEntity has none
    /// (`spec.ports` is never set for a VM), so on a VM it matches nothing.
    Named(String),
}

/// `Service`: what traffic a rule matches besides its peers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Service {
    /// TCP when absent (the Go type: "If not specified, this field defaults to TCP").
    pub protocol: Protocol,
    pub port: Option<Port>,
    /// The last port of a `port..=end_port` range.
    pub end_port: Option<u16>,
    pub icmp_type: Option<u8>,
    /// Sent as 0 when the user gave a type without a code (a non-nil pointer).
    pub icmp_code: Option<u8>,
    pub igmp_type: Option<u8>,
    pub group_address: String,
    pub src_port: Option<u16>,
    pub src_end_port: Option<u16>,
}

/// The fields of one `NetworkPolicy` object (its `metadata` included).
pub(super) fn policy_value(
    m: &Obj,
    name: String,
    b: &mut Budget,
) -> Result<NetworkPolicy, PathError> {
    let meta = object(m, "metadata")?;
    let (uid, generation) = match meta {
        Some(md) => (
            string(md, "uid").map_err(|e| e.key("metadata"))?,
            int(md, "generation", i64::MIN, i64::MAX)
                .map_err(|e| e.key("metadata"))?
                .unwrap_or(0),
        ),
        None => (String::new(), 0),
    };
    Ok(NetworkPolicy {
        name,
        uid,
        generation,
        rules: list(m, "rules", b, |v, b| rule(as_object(v)?, b))?,
        applied_to_groups: strings(m, "appliedToGroups", b)?,
        priority: float(m, "priority")?,
        tier_priority: int_as(m, "tierPriority", i32::MIN.into(), i32::MAX.into())?,
        source_ref: source_ref(m)?,
    })
}

/// `sourceRef`, on full objects and on DELETED.
pub(super) fn source_ref(m: &Obj) -> Result<Option<SourceRef>, PathError> {
    let Some(r) = object(m, "sourceRef")? else {
        return Ok(None);
    };
    let f = |k| string(r, k).map_err(|e| e.key("sourceRef"));
    Ok(Some(SourceRef {
        policy_type: f("type")?,
        namespace: f("namespace")?,
        name: f("name")?,
        uid: f("uid")?,
    }))
}

fn rule(m: &Obj, b: &mut Budget) -> Result<Rule, PathError> {
    let direction = match required(m, "direction")?.as_str() {
        "In" => Direction::In,
        "Out" => Direction::Out,
        other => {
            return Err(PathError::new(format!("{other:?} is not In or Out")).key("direction"));
        }
    };
    let action = match string(m, "action")?.as_str() {
        "" | "Allow" => RuleAction::Allow,
        "Drop" => RuleAction::Drop,
        "Pass" => RuleAction::Pass,
        "Reject" => RuleAction::Reject,
        other => {
            return Err(
                PathError::new(format!("{other:?} is not Allow, Drop, Pass or Reject"))
                    .key("action"),
            );
        }
    };
    Ok(Rule {
        direction,
        from: peer(m, "from", b)?,
        to: peer(m, "to", b)?,
        services: list(m, "services", b, |v, _| service(as_object(v)?))?,
        priority: int_as(m, "priority", i32::MIN.into(), i32::MAX.into())?.unwrap_or(0),
        action,
        enable_logging: boolean(m, "enableLogging")?,
        applied_to_groups: strings(m, "appliedToGroups", b)?,
        name: string(m, "name")?,
        log_label: string(m, "logLabel")?,
        l7: match field(m, "l7Protocols") {
            None => false,
            Some(Value::Array(a)) => !a.is_empty(),
            Some(v) => return Err(expected("an array", v).key("l7Protocols")),
        },
    })
}

fn peer(m: &Obj, k: &str, b: &mut Budget) -> Result<Peer, PathError> {
    let Some(p) = object(m, k)? else {
        return Ok(Peer::default());
    };
    let inner = |b: &mut Budget| -> Result<Peer, PathError> {
        Ok(Peer {
            address_groups: strings(p, "addressGroups", b)?,
            ip_blocks: list(p, "ipBlocks", b, |v, b| ip_block(as_object(v)?, b))?,
            fqdns: strings(p, "fqdns", b)?,
            to_services: list(p, "toServices", b, |v, _| {
                let s = as_object(v)?;
                Ok(ServiceRef {
                    namespace: string(s, "namespace")?,
                    name: string(s, "name")?,
                })
            })?,
            label_identities: list(p, "labelIdentities", b, |v, _| {
                fit(int_value(v, 0, u32::MAX.into())?)
            })?,
        })
    };
    inner(b).map_err(|e| e.key(k))
}

fn ip_block(m: &Obj, b: &mut Budget) -> Result<IpBlock, PathError> {
    let cidr = match field(m, "cidr") {
        Some(v) => ipnet_value(v).map_err(|e| e.key("cidr"))?,
        None => return Err(PathError::new("required").key("cidr")),
    };
    Ok(IpBlock {
        cidr,
        except: list(m, "except", b, |v, _| ipnet_value(v))?,
    })
}

fn service(m: &Obj) -> Result<Service, PathError> {
    let port16 = |k| int_as::<u16>(m, k, 0, 65535);
    let byte = |k| int_as::<u8>(m, k, 0, 255);
    let port = match field(m, "port") {
        None => None,
        Some(Value::String(s)) => Some(Port::Named(s.clone())),
        Some(v @ Value::Number(_)) => Some(Port::Number(
            int_value(v, 0, 65535)
                .and_then(fit)
                .map_err(|e| e.key("port"))?,
        )),
        Some(v) => return Err(expected("an integer or a string", v).key("port")),
    };
    Ok(Service {
        protocol: match field(m, "protocol") {
            None => Protocol::Tcp,
            Some(Value::String(s)) => Protocol::parse(s),
            Some(v) => return Err(expected("a string", v).key("protocol")),
        },
        port,
        end_port: port16("endPort")?,
        icmp_type: byte("icmpType")?,
        icmp_code: byte("icmpCode")?,
        igmp_type: byte("igmpType")?,
        group_address: string(m, "groupAddress")?,
        src_port: port16("srcPort")?,
        src_end_port: port16("srcEndPort")?,
    })
}
