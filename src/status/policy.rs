//! The NetworkPolicy part of `tether status` and the metrics: the controlplane watches,
//! each policy with its rules (realized or why not) and each rule's counters, read from
//! the metric tables' flow statistics (packets and bytes of a rule's metric flows;
//! sessions are the packets of its `+new` flow, or of its deny flow, where every packet
//! is a refused session). Pure: the probe gathers, this shapes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::controller::policy::PolicyStatus;
use crate::openflow::Category;
use crate::openflow::consts::ct_state;
use crate::openflow::flow::tether_cookie;
use crate::openflow::flowmod::FlowDesc;
use crate::openflow::ofctl::FlowStats;
use crate::openflow::{Match, MatchField};
use crate::pipeline::table;

/// One controlplane watch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NpWatch {
    pub kind: String,
    pub synced: bool,
    pub errors: u64,
    pub reconnects: u64,
    pub last_error: Option<String>,
}

pub use crate::controller::policy::{Counters, PolicyView as NpPolicy, RuleView as NpRule};

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NpStatus {
    /// All three watches have had their first bookmark.
    pub synced: bool,
    pub watches: Vec<NpWatch>,
    /// The VM's pair the flows are built for: (host, uplink) ofports.
    pub ports: Option<(u32, u32)>,
    pub flows: usize,
    pub syncs: u64,
    pub last_error: Option<String>,
    pub policies: Vec<NpPolicy>,
    /// What the packet-in thread did: Reject answers and audit lines.
    #[serde(default)]
    pub packet_ins: PacketIns,
}

/// The packet-in thread's counts (`controller::policy::packetin::Counts`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketIns {
    pub rejects: u64,
    pub answered: u64,
    pub rate_limited: u64,
    pub not_answered: u64,
    pub logged: u64,
    pub log_rate_limited: u64,
}

impl From<&crate::controller::policy::packetin::Counts> for PacketIns {
    fn from(c: &crate::controller::policy::packetin::Counts) -> PacketIns {
        PacketIns {
            rejects: c.rejects,
            answered: c.tcp_resets + c.icmp + c.icmpv6,
            rate_limited: c.rate_limited,
            not_answered: c.not_answerable + c.no_ports + c.send_errors,
            logged: c.logged,
            log_rate_limited: c.log_rate_limited,
        }
    }
}

/// Counters per conjunction id from the policy flows' descriptions (with statistics).
pub fn counters(descs: &[FlowDesc]) -> BTreeMap<u32, Counters> {
    let mut out: BTreeMap<u32, Counters> = BTreeMap::new();
    for d in descs {
        if d.table_id != table::EGRESS_METRIC && d.table_id != table::INGRESS_METRIC {
            continue;
        }
        let Some((_, Category::NETWORK_POLICY, object)) = tether_cookie(d.cookie) else {
            continue;
        };
        if object == 0 {
            continue;
        }
        let st = FlowStats::decode(&d.stats);
        let packets = st.packets.unwrap_or(0);
        let c = out.entry(object).or_default();
        c.packets += packets;
        c.bytes += st.bytes.unwrap_or(0);
        // The switch reports the registers tether wrote as 64-bit xregs: brought back to
        // tether's 32-bit form by `Match::new`.
        let m = Match::new(d.match_.fields().to_vec());
        let new = m
            .fields()
            .iter()
            .any(|f| matches!(f, MatchField::CtState { value, .. } if value & ct_state::NEW != 0));
        let deny = m
            .fields()
            .iter()
            .any(|f| matches!(f, MatchField::Reg { idx: 3, .. }));
        if new || deny {
            c.sessions += packets;
        }
    }
    out
}

/// The status: the controller's view, the watches, and the counters.
pub fn np_status(
    st: PolicyStatus,
    watches: Vec<NpWatch>,
    counters: &BTreeMap<u32, Counters>,
    packet_ins: PacketIns,
) -> NpStatus {
    let mut policies = st.policies;
    for r in policies.iter_mut().flat_map(|p| p.rules.iter_mut()) {
        r.counters = counters.get(&r.conj_id).copied().unwrap_or_default();
    }
    NpStatus {
        packet_ins,
        synced: st.synced,
        watches,
        ports: st.ports.map(|p| (p.host, p.uplink)),
        flows: st.flows,
        syncs: st.syncs_total,
        last_error: st.last_error,
        policies,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::consts::ct_state;
    use crate::openflow::{Match, cookie};

    /// OXS packet and byte counts, as OVS sends them in a flow description.
    fn stats(packets: u64, bytes: u64) -> Vec<u8> {
        let mut v = Vec::new();
        for (field, n) in [(4u8, packets), (5, bytes)] {
            v.extend_from_slice(&[0x80, 0x02, field << 1, 8]);
            v.extend_from_slice(&n.to_be_bytes());
        }
        v
    }

    fn desc(table: u8, object: u32, fields: Vec<MatchField>, st: (u64, u64)) -> FlowDesc {
        FlowDesc {
            table_id: table,
            cookie: cookie(3, Category::NETWORK_POLICY, object),
            match_: Match::new(fields),
            stats: stats(st.0, st.1),
            ..FlowDesc::default()
        }
    }

    #[test]
    fn counters_from_the_metric_flows() {
        let new = MatchField::CtState {
            value: ct_state::NEW | ct_state::TRK,
            mask: Some(ct_state::NEW | ct_state::TRK),
        };
        let old = MatchField::CtState {
            value: ct_state::TRK,
            mask: Some(ct_state::NEW | ct_state::TRK),
        };
        let deny = MatchField::Reg {
            idx: 3,
            value: 7,
            mask: None,
        };
        let descs = vec![
            // An Allow rule (2): sessions are its +new packets.
            desc(table::INGRESS_METRIC, 2, vec![new], (3, 300)),
            desc(table::INGRESS_METRIC, 2, vec![old], (40, 4000)),
            // A Drop rule (7): every packet a refused session.
            desc(table::EGRESS_METRIC, 7, vec![deny], (5, 500)),
            // Another (8) as the switch reports it: reg3 inside xreg1 (the e2e test found
            // these counted no sessions).
            FlowDesc {
                match_: switch_match(&[
                    0x80, 0x01, 0x03, 0x10, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0xff, 0xff, 0xff,
                    0xff,
                ]),
                ..desc(table::EGRESS_METRIC, 8, vec![], (2, 200))
            },
            // Not metric flows, the pipeline's own, another category: not counted.
            desc(table::INGRESS_RULE, 2, vec![], (99, 9900)),
            desc(table::INGRESS_METRIC, 0, vec![], (99, 9900)),
            FlowDesc {
                table_id: table::INGRESS_METRIC,
                cookie: cookie(3, Category::TRAFFIC_CONTROL, 2),
                stats: stats(99, 9900),
                ..FlowDesc::default()
            },
        ];
        let c = counters(&descs);
        assert_eq!(
            c.into_iter().collect::<Vec<_>>(),
            vec![
                (
                    2,
                    Counters {
                        packets: 43,
                        bytes: 4300,
                        sessions: 3
                    }
                ),
                (
                    7,
                    Counters {
                        packets: 5,
                        bytes: 500,
                        sessions: 5
                    }
                ),
                (
                    8,
                    Counters {
                        packets: 2,
                        bytes: 200,
                        sessions: 2
                    }
                ),
            ]
        );
    }

    /// An OXM match of these field bytes, decoded as from the wire (not made canonical).
    fn switch_match(fields: &[u8]) -> Match {
        let len = 4 + fields.len();
        let mut b = vec![0, 1, 0, u8::try_from(len).unwrap()];
        b.extend_from_slice(fields);
        b.resize(len.div_ceil(8) * 8, 0);
        Match::decode(&mut crate::openflow::codec::Reader::new(&b)).unwrap()
    }
}
