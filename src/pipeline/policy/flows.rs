//! NetworkPolicy flows as pure builders (reference Part B §2.1–2.2; docs/pipeline.md):
//! the policy pipeline's own flows for the VM's pair ([`base_flows`]), one rule's
//! conjunction, action and metric flows ([`rule_flows`]), the registers and marks they
//! use, and the Reject and logging packet-ins' userdata ([`reject_userdata`],
//! [`log_userdata`]).
//!
//! Not which rules exist, what their peers resolve to, or their conjunction ids and
//! priorities (`compile`, `conj`, `priority`); no I/O.
//!
//! One rule with conjunction id C at priority P in its rule table T (ingress numbering;
//! egress swaps dimensions 1 and 2 and matches `ip_dst` instead of `ip_src`):
//! ```text
//! T  P  ip,nw_src=<peer> | ipv6,ipv6_src=<peer> | ip + ipv6 (any)   conjunction(C,1/n)
//! T  P  reg1=<host port>          (egress: in_port=<host port>)     conjunction(C,2/n)
//! T  P  tcp,tp_dst=V/M + tcp6,…  | icmp,… + icmp6,…   (n = 3 only)  conjunction(C,3/n)
//! T  P  conj_id=C,ip + conj_id=C,ipv6  Allow: [log] ct(commit,table=M,zone=65520,exec(label))
//! T  P  conj_id=C                      Drop/Reject: [log] reg3=C, reg0[10], goto M;
//!                                      Pass: [log] goto B
//! M 200 ct_state=±new+trk,ct_label=…  → next   reg0[10],reg3=C → drop | controller(…)
//! ```
//! [log]: `controller(userdata=02.<dir>.<C>)`, when the rule has `enableLogging`.
//! T/B/M are the rule, baseline and metric tables of the rule's direction ([`RuleTables`]).

use std::net::IpAddr;

use super::ranges::PortMask;
use super::rule::{L4, PeerMatch, ServiceMatch, Services};
use crate::controlplane::{Direction, IpNet, RuleAction};
use crate::openflow::action::Ct;
use crate::openflow::consts::ct_state;
use crate::openflow::flow::FlowKey;
use crate::openflow::oxm::values::{
    ETH_TYPE_IPV4, ETH_TYPE_IPV6, IP_PROTO_ICMP, IP_PROTO_ICMPV6, IP_PROTO_SCTP, IP_PROTO_TCP,
    IP_PROTO_UDP,
};
use crate::openflow::{Action, Category, Flow, MatchField, Owner};
use crate::pipeline::{priority, reg, table};

/// The conntrack zone of the VM's pair (Antrea's `CtZone`, 0xfff0).
pub const CT_ZONE: u16 = 65520;

/// `reg0[9]`: skip policy. tether's own mark, set on ICMPv6 neighbour discovery and MLD
/// so that they pass the ingress rule table too. Antrea has no such mark (its VM pipeline
/// sends IPv6 to NonIP, past policy); the bit is its `RewriteMACRegMark`, which nothing
/// in tether's pipeline sets.
pub const SKIP_POLICY: (u8, u32, u32) = (0, 0x200, 0x200);

/// `reg0[10]`: denied by an Antrea-native rule (Antrea's `APDenyRegMark`); the metric
/// table drops (or rejects) what carries it.
pub const DENY: (u8, u32, u32) = (0, 0x400, 0x400);

/// reg3: the conjunction id of the rule that denied the packet (Antrea's `APConjIDField`).
pub const CONJ_ID_REG: u8 = 3;

/// Established and related packets skip the rule tables at this priority (Antrea's
/// 64990: a new Drop does not cut existing connections). Above every rule:
/// [`super::priority::POLICY_RANGE`] stops below it.
pub const ESTABLISHED_PRIORITY: u16 = 64990;
/// ND/MLD marked [`SKIP_POLICY`] pass the ingress rules.
pub const SKIP_PRIORITY: u16 = 64991;

// The skip flows must win over every rule, whatever priority it is given.
const _: () = assert!(
    SKIP_PRIORITY > ESTABLISHED_PRIORITY
        && ESTABLISHED_PRIORITY > super::priority::POLICY_RANGE.top
);

/// ICMPv6 types that never enter conntrack (Linux conntrack marks them invalid) nor
/// policy: MLD query/report/done (130–132), router solicitation/advertisement (133,
/// 134), neighbour solicitation/advertisement (135, 136), MLDv2 report (143). Without
/// them a VM with IPv6 loses its neighbours as soon as policy is on.
pub const ND_MLD_TYPES: [u8; 8] = [130, 131, 132, 133, 134, 135, 136, 143];

/// The owner of [`base_flows`]: object 0 of the NetworkPolicy category; every rule is
/// the object of its conjunction id, which is never 0.
pub const BASE_OWNER: Owner = Owner {
    category: Category::NETWORK_POLICY,
    object: 0,
};

/// The VM's pair of ports: the host's internal port and the uplink (the NIC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VmPorts {
    pub host: u32,
    pub uplink: u32,
}

use crate::pipeline::{load, match_reg};

/// `ct_state` with the bits of `plus` set and those of `minus` clear.
fn ct(plus: u32, minus: u32) -> MatchField {
    MatchField::CtState {
        value: plus,
        mask: Some(plus | minus),
    }
}

/// The flows the policy pipeline needs for the VM's pair whatever the rules (owner
/// [`BASE_OWNER`]): conntrack for IP from either port, ND/MLD past conntrack and policy,
/// `+inv` drop, established/related past the rules, and the commit of new connections.
pub fn base_flows(ports: VmPorts) -> Vec<Flow> {
    let mut flows = Vec::new();
    let pair = [ports.host, ports.uplink];
    for p in pair {
        for eth in [ETH_TYPE_IPV4, ETH_TYPE_IPV6] {
            flows.push(
                Flow::new(table::CONNTRACK_ZONE, priority::NORMAL)
                    .matches([MatchField::EthType(eth), MatchField::InPort(p)])
                    .actions([Action::Ct(Ct::track(CT_ZONE, table::CONNTRACK_STATE))]),
            );
        }
    }
    // Past the egress rules to L2ForwardingCalc; the mark takes them past the ingress
    // rules (and their established flows, which an untracked packet would miss anyway).
    for p in pair {
        for t in ND_MLD_TYPES {
            flows.push(
                Flow::new(table::CONNTRACK_ZONE, priority::HIGH)
                    .matches([
                        MatchField::EthType(ETH_TYPE_IPV6),
                        MatchField::IpProto(IP_PROTO_ICMPV6),
                        MatchField::InPort(p),
                        MatchField::Icmpv6Type(t),
                    ])
                    .actions([load(SKIP_POLICY)])
                    .goto(table::L2_FORWARDING),
            );
        }
    }
    flows.push(
        Flow::new(table::CONNTRACK_STATE, priority::HIGH)
            .matching(ct(ct_state::INV | ct_state::TRK, 0)),
    );
    let established = [
        ct(ct_state::EST, ct_state::NEW),
        ct(ct_state::REL, ct_state::NEW),
    ];
    for m in established.clone() {
        flows.push(
            Flow::new(table::EGRESS_RULE, ESTABLISHED_PRIORITY)
                .matching(m)
                .goto(table::EGRESS_METRIC),
        );
    }
    flows.push(
        Flow::new(table::INGRESS_RULE, SKIP_PRIORITY)
            .matching(match_reg(SKIP_POLICY))
            .goto(table::CONNTRACK_COMMIT),
    );
    for m in established {
        flows.push(
            Flow::new(table::INGRESS_RULE, ESTABLISHED_PRIORITY)
                .matching(m)
                .goto(table::INGRESS_METRIC),
        );
    }
    for eth in [ETH_TYPE_IPV4, ETH_TYPE_IPV6] {
        flows.push(
            Flow::new(table::CONNTRACK_COMMIT, priority::NORMAL)
                .matches([
                    ct(ct_state::NEW | ct_state::TRK, 0),
                    MatchField::EthType(eth),
                ])
                .actions([Action::ct_commit(CT_ZONE, table::OUTPUT, Vec::new())]),
        );
    }
    flows
}

/// The tables a rule's flows use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuleTables {
    /// Where its match and action flows go.
    pub rule: u8,
    /// Where `Pass` goes: the direction's baseline table, or the metric table for a
    /// rule that is in the baseline table already.
    pub pass: u8,
    pub metric: u8,
    /// Where the metric table sends allowed packets on.
    pub next: u8,
}

/// The tables of a rule of `direction`, in a baseline-tier policy or not.
pub fn rule_tables(direction: Direction, baseline_tier: bool) -> RuleTables {
    let (rule, baseline, metric, next) = match direction {
        Direction::Out => (
            table::EGRESS_RULE,
            table::EGRESS_BASELINE,
            table::EGRESS_METRIC,
            table::L2_FORWARDING,
        ),
        Direction::In => (
            table::INGRESS_RULE,
            table::INGRESS_BASELINE,
            table::INGRESS_METRIC,
            table::CONNTRACK_COMMIT,
        ),
    };
    if baseline_tier {
        RuleTables {
            rule: baseline,
            pass: metric,
            metric,
            next,
        }
    } else {
        RuleTables {
            rule,
            pass: baseline,
            metric,
            next,
        }
    }
}

/// The peer side of a rule: any address, or these (at least one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Addresses {
    Any,
    Only(PeerMatch),
}

/// Everything [`rule_flows`] needs of one rule.
#[derive(Clone, Debug)]
pub struct RuleSpec<'a> {
    pub direction: Direction,
    pub action: RuleAction,
    pub conj_id: u32,
    pub tables: RuleTables,
    pub priority: u16,
    /// The remote side: `from` of an ingress rule, `to` of an egress one.
    pub peer: &'a Addresses,
    /// `Any`: two dimensions. `Matches` must not be empty: that matches nothing, and the
    /// caller emits no flows for such a rule.
    pub services: &'a Services,
    pub ports: VmPorts,
    /// `enableLogging`: the `conj_id` flows send each packet they take to tether first
    /// ([`log_userdata`]), for the audit log; the packet goes on.
    pub log: bool,
}

/// The ct_label bits holding a rule's conjunction id (Antrea `fields.go`: ingress in bits
/// 0..31, egress in 32..63), as (value, mask).
pub fn ct_label(direction: Direction, conj_id: u32) -> (u128, u128) {
    let shift = match direction {
        Direction::In => 0,
        Direction::Out => 32,
    };
    (u128::from(conj_id) << shift, u128::from(u32::MAX) << shift)
}

/// The first byte of a Reject packet-in's userdata (Antrea's `PacketInCategoryNP`).
const USERDATA_NP: u8 = 0x01;
/// The first byte of a logged rule's packet-in (tether's own).
const USERDATA_LOG: u8 = 0x02;

fn userdata(category: u8, direction: Direction, conj_id: u32) -> [u8; 6] {
    let d = match direction {
        Direction::In => 0,
        Direction::Out => 1,
    };
    let id = conj_id.to_be_bytes();
    [category, d, id[0], id[1], id[2], id[3]]
}

fn decode_userdata(category: u8, userdata: &[u8]) -> Option<(Direction, u32)> {
    let [c, d, id @ ..] = *<&[u8; 6]>::try_from(userdata).ok()?;
    if c != category {
        return None;
    }
    let direction = match d {
        0 => Direction::In,
        1 => Direction::Out,
        _ => return None,
    };
    Some((direction, u32::from_be_bytes(id)))
}

/// The userdata of a Reject rule's packet-in: `[0x01, direction (0 ingress, 1 egress),
/// conjunction id as 4 bytes big-endian]`. tether's own layout: Antrea reads the
/// direction and id from registers in the packet-in's metadata instead.
pub fn reject_userdata(direction: Direction, conj_id: u32) -> [u8; 6] {
    userdata(USERDATA_NP, direction, conj_id)
}

/// The direction and conjunction id of a [`reject_userdata`]; `None` for anything else.
pub fn decode_reject_userdata(userdata: &[u8]) -> Option<(Direction, u32)> {
    decode_userdata(USERDATA_NP, userdata)
}

/// The userdata of a logged rule's packet-in: as [`reject_userdata`], first byte 0x02.
pub fn log_userdata(direction: Direction, conj_id: u32) -> [u8; 6] {
    userdata(USERDATA_LOG, direction, conj_id)
}

/// The direction and conjunction id of a [`log_userdata`]; `None` for anything else.
pub fn decode_log_userdata(userdata: &[u8]) -> Option<(Direction, u32)> {
    decode_userdata(USERDATA_LOG, userdata)
}

/// One rule's flows, in a fixed order: the conjunction clauses by dimension (peers and
/// services in their input order), the `conj_id` flows, then the metric flows. Flows
/// with the same match (a service given twice) appear once.
pub fn rule_flows(r: &RuleSpec<'_>) -> Vec<Flow> {
    let ingress = r.direction == Direction::In;
    let peers = match r.peer {
        Addresses::Any => {
            let any = [ETH_TYPE_IPV4, ETH_TYPE_IPV6].map(|e| vec![MatchField::EthType(e)]);
            clause_flows(r, peer_clause(r.direction), any.into_iter())
        }
        Addresses::Only(m) => peer_flows(r, m.v4.iter().chain(&m.v6)),
    };
    let mut flows = Vec::with_capacity(peers.len() + 8);
    let to_vm = if ingress {
        // To the VM: L2ForwardingCalc has put the host port into reg1.
        MatchField::Reg {
            idx: reg::OUTPUT_PORT,
            value: r.ports.host,
            mask: None,
        }
    } else {
        MatchField::InPort(r.ports.host)
    };
    let vm = clause_flows(
        r,
        3 - peer_clause(r.direction),
        std::iter::once(vec![to_vm]),
    );
    if ingress {
        flows.extend(peers);
        flows.extend(vm);
    } else {
        flows.extend(vm);
        flows.extend(peers);
    }
    // Only these can repeat (a service given twice, or two that match alike); each peer
    // address is given once and the other flows are one each.
    let mut rest = Vec::new();
    if let Services::Matches(services) = r.services {
        rest.extend(clause_flows(r, 3, services.iter().flat_map(service)));
    }
    rest.extend(action_flows(r));
    rest.extend(metric_flows(r));
    let mut seen: Vec<&FlowKey> = Vec::with_capacity(rest.len());
    let keep: Vec<bool> = rest
        .iter()
        .map(|f| {
            let new = !seen.contains(&&f.key);
            seen.push(&f.key);
            new
        })
        .collect();
    flows.extend(
        rest.into_iter()
            .zip(keep)
            .filter_map(|(f, k)| k.then_some(f)),
    );
    flows
}

/// The peer-clause flows of `nets` (an ingress rule's sources, an egress rule's
/// destinations): a rule's flows for those peer addresses and no others, so a change of
/// a peer group's members is these flows added and removed.
pub fn peer_flows<'n>(r: &RuleSpec<'_>, nets: impl Iterator<Item = &'n IpNet>) -> Vec<Flow> {
    let ingress = r.direction == Direction::In;
    clause_flows(
        r,
        peer_clause(r.direction),
        nets.map(|n| address(*n, ingress)),
    )
}

/// The dimension of the peer clause: 1 for ingress (`from`), 2 for egress (`to`); the
/// VM's own port is the other one.
fn peer_clause(direction: Direction) -> u8 {
    match direction {
        Direction::In => 1,
        Direction::Out => 2,
    }
}

/// `conjunction(C, k/n)` flows of one clause, one per match; they share one instruction
/// list (a 10,000-address clause builds it once).
fn clause_flows(
    r: &RuleSpec<'_>,
    k: u8,
    matches: impl Iterator<Item = Vec<MatchField>>,
) -> Vec<Flow> {
    let n = match r.services {
        Services::Any => 2,
        Services::Matches(_) => 3,
    };
    let (t, p) = (r.tables.rule, r.priority);
    let conj = Flow::new(t, p)
        .actions([Action::conjunction(r.conj_id, k, n)])
        .value;
    matches
        .map(|m| {
            let mut f = Flow::new(t, p).matches(m);
            f.value = conj.clone();
            f
        })
        .collect()
}

/// `ip,nw_src=N` (or `nw_dst`, `ipv6_src`, `ipv6_dst`). A /0 is just `ip` (`ipv6`):
/// OVS drops an all-wildcard field, and the flow it keeps must be the flow we compare.
fn address(net: IpNet, source: bool) -> Vec<MatchField> {
    if net.prefix == 0 {
        let eth = if net.addr.is_ipv4() {
            ETH_TYPE_IPV4
        } else {
            ETH_TYPE_IPV6
        };
        return vec![MatchField::EthType(eth)];
    }
    match net.addr {
        IpAddr::V4(a) => {
            let mask = u32::MAX
                .checked_shl(32 - u32::from(net.prefix))
                .unwrap_or(0);
            let m = Some(std::net::Ipv4Addr::from(mask));
            vec![
                MatchField::EthType(ETH_TYPE_IPV4),
                if source {
                    MatchField::Ipv4Src(a, m)
                } else {
                    MatchField::Ipv4Dst(a, m)
                },
            ]
        }
        IpAddr::V6(a) => {
            let mask = u128::MAX
                .checked_shl(128 - u32::from(net.prefix))
                .unwrap_or(0);
            let m = Some(std::net::Ipv6Addr::from(mask));
            vec![
                MatchField::EthType(ETH_TYPE_IPV6),
                if source {
                    MatchField::Ipv6Src(a, m)
                } else {
                    MatchField::Ipv6Dst(a, m)
                },
            ]
        }
    }
}

/// One service's matches, IPv4 then IPv6. ICMP's type and code are used as given for
/// both `icmp` and `icmp6`, as Antrea does (its `ProtocolICMP` becomes ICMPv6 for IPv6
/// peers with the same numbers), though the numbers mean different messages in the two
/// (IPv4 echo request is 8, IPv6's is 128).
fn service(s: &ServiceMatch) -> Vec<Vec<MatchField>> {
    let mut out = Vec::new();
    for (eth, icmp) in [
        (ETH_TYPE_IPV4, IP_PROTO_ICMP),
        (ETH_TYPE_IPV6, IP_PROTO_ICMPV6),
    ] {
        match s {
            ServiceMatch::Ports { protocol, dst } => {
                let proto = match protocol {
                    L4::Tcp => IP_PROTO_TCP,
                    L4::Udp => IP_PROTO_UDP,
                    L4::Sctp => IP_PROTO_SCTP,
                };
                let l4 = vec![MatchField::EthType(eth), MatchField::IpProto(proto)];
                for &pm in dst {
                    let mut m = l4.clone();
                    // A zero mask is any port: no field, as OVS would store it.
                    if pm.mask != 0 {
                        m.push(port(*protocol, pm));
                    }
                    out.push(m);
                }
                if dst.is_empty() {
                    out.push(l4);
                }
            }
            ServiceMatch::Icmp {
                icmp_type,
                icmp_code,
            } => {
                let v6 = eth == ETH_TYPE_IPV6;
                let mut m = vec![MatchField::EthType(eth), MatchField::IpProto(icmp)];
                m.extend(icmp_type.map(|t| {
                    if v6 {
                        MatchField::Icmpv6Type(t)
                    } else {
                        MatchField::Icmpv4Type(t)
                    }
                }));
                m.extend(icmp_code.map(|c| {
                    if v6 {
                        MatchField::Icmpv6Code(c)
                    } else {
                        MatchField::Icmpv4Code(c)
                    }
                }));
                out.push(m);
            }
        }
    }
    out
}

/// `tp_dst=V[/M]` of the protocol (a full mask becomes the exact form in `Match::new`).
fn port(protocol: L4, pm: PortMask) -> MatchField {
    match protocol {
        L4::Tcp => MatchField::TcpDstMasked(pm.value, pm.mask),
        L4::Udp => MatchField::UdpDstMasked(pm.value, pm.mask),
        L4::Sctp => MatchField::SctpDst(pm.value, Some(pm.mask)),
    }
}

/// The `conj_id=C` flows: what the rule does with a packet all its clauses match (after
/// sending it to tether for the audit log, when the rule logs).
fn action_flows(r: &RuleSpec<'_>) -> Vec<Flow> {
    let (t, p, c) = (r.tables.rule, r.priority, r.conj_id);
    let mut matched = Flow::new(t, p).matching(MatchField::ConjId(c));
    if r.log {
        matched = matched.actions([Action::controller(&log_userdata(r.direction, c), false)]);
    }
    match r.action {
        // `ct` needs an IP match, hence one flow per family.
        RuleAction::Allow => {
            let (value, mask) = ct_label(r.direction, c);
            let label = Action::SetField(MatchField::CtLabel {
                value: value.into(),
                mask: Some(mask.into()),
            });
            [ETH_TYPE_IPV4, ETH_TYPE_IPV6]
                .into_iter()
                .map(|eth| {
                    matched
                        .clone()
                        .matching(MatchField::EthType(eth))
                        .actions([Action::ct_commit(
                            CT_ZONE,
                            r.tables.metric,
                            vec![label.clone()],
                        )])
                })
                .collect()
        }
        RuleAction::Drop | RuleAction::Reject => vec![
            matched
                .actions([Action::load_reg(CONJ_ID_REG, c, u32::MAX), load(DENY)])
                .goto(r.tables.metric),
        ],
        RuleAction::Pass => vec![matched.goto(r.tables.pass)],
    }
}

/// The rule's flows in its metric table: Allow counts new and established packets by the
/// ct_label (sessions are the `+new` flow's packets); Drop drops, Reject sends the packet
/// to the controller (which answers it and drops it); Pass has none.
fn metric_flows(r: &RuleSpec<'_>) -> Vec<Flow> {
    let (t, c) = (r.tables.metric, r.conj_id);
    let denied = || {
        Flow::new(t, priority::NORMAL).matches([
            match_reg(DENY),
            MatchField::Reg {
                idx: CONJ_ID_REG,
                value: c,
                mask: None,
            },
        ])
    };
    match r.action {
        RuleAction::Allow => {
            let (value, mask) = ct_label(r.direction, c);
            let label = MatchField::CtLabel {
                value: value.into(),
                mask: Some(mask.into()),
            };
            [
                ct(ct_state::NEW | ct_state::TRK, 0),
                ct(ct_state::TRK, ct_state::NEW),
            ]
            .into_iter()
            .map(|state| {
                Flow::new(t, priority::NORMAL)
                    .matches([state, label.clone()])
                    .goto(r.tables.next)
            })
            .collect()
        }
        RuleAction::Drop => vec![denied()],
        RuleAction::Reject => {
            vec![denied().actions([Action::controller(&reject_userdata(r.direction, c), false)])]
        }
        RuleAction::Pass => Vec::new(),
    }
}

#[cfg(test)]
mod tests;
