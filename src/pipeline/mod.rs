//! The bridge's flow pipeline as data (docs/pipeline.md): the tables, Antrea's registers
//! and marks (docs/antrea-compat.md#registers-and-marks), and pure functions that build
//! every flow tether installs. Controllers decide *which* flows; this module decides *what
//! they look like*.
//!
//! ```text
//!  0 Classifier ─► 10 ConntrackZone ─► 20 ConntrackState ─► 30 EgressSecurity ─► 40 EgressRule ─► 50 EgressBaseline
//!   │ return port                                               │ bypass            ─► 60 EgressMetric ─┐
//!   └──────────────────────────────► 70 L2ForwardingCalc ◄──────┴─────────────────────────────────────┘
//!   70 ─► 80 TrafficControl ─► 90 IngressSecurity ─► 100 IngressRule ─► 110 IngressBaseline ─► 120 IngressMetric
//!          │ returned pkts        │ bypass ─────────────────────────────────────────────► 130 ConntrackCommit ─► 140 Output
//!          └───────────────────────────────────────────────────────────────────────────────────────────────────►
//! ```
//! The conntrack and policy tables hold flows only for the ExternalNode's pair and only
//! when NetworkPolicy is on (docs/networkpolicy.md); everything else passes them by miss.
//! Output's miss is `NORMAL`, so unknown and broadcast destinations still flow (TC ports
//! are kept out of flooding by no-flood), and so does everything while a table is empty.

use crate::k8s::{TcAction, TcDirection};
use crate::openflow::consts::port;
use crate::openflow::oxm::Mac;
use crate::openflow::{Action, Flow, MatchField};

pub mod externalnode;
pub mod policy;

#[cfg(test)]
mod tests;

/// Table ids, in pipeline order. Sparse, so a table added later does not renumber the
/// others (docs/pipeline.md#tables); `goto_table` only ever jumps forward.
pub mod table {
    pub const CLASSIFIER: u8 = 0;
    /// The VM's pair only: `ct(zone)` for IP from the host port or the uplink.
    pub const CONNTRACK_ZONE: u8 = 10;
    /// `+inv` drop.
    pub const CONNTRACK_STATE: u8 = 20;
    pub const EGRESS_SECURITY: u8 = 30;
    /// Antrea-native policy rules, egress (tiers before the baseline).
    pub const EGRESS_RULE: u8 = 40;
    /// Baseline-tier egress rules; `Pass` jumps here.
    pub const EGRESS_BASELINE: u8 = 50;
    /// Per-rule counters; where Drop and Reject happen.
    pub const EGRESS_METRIC: u8 = 60;
    pub const L2_FORWARDING: u8 = 70;
    pub const TRAFFIC_CONTROL: u8 = 80;
    pub const INGRESS_SECURITY: u8 = 90;
    pub const INGRESS_RULE: u8 = 100;
    pub const INGRESS_BASELINE: u8 = 110;
    pub const INGRESS_METRIC: u8 = 120;
    /// Commits new connections of the VM's pair.
    pub const CONNTRACK_COMMIT: u8 = 130;
    pub const OUTPUT: u8 = 140;
}

/// One table: its id, Antrea's name for it, and where a miss goes (`None`: NORMAL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Table {
    pub id: u8,
    pub name: &'static str,
    pub miss_goto: Option<u8>,
}

const fn tab(id: u8, name: &'static str, miss_goto: Option<u8>) -> Table {
    Table {
        id,
        name,
        miss_goto,
    }
}

pub const TABLES: &[Table] = {
    use table::*;
    &[
        tab(CLASSIFIER, "Classifier", Some(CONNTRACK_ZONE)),
        tab(CONNTRACK_ZONE, "ConntrackZone", Some(CONNTRACK_STATE)),
        tab(CONNTRACK_STATE, "ConntrackState", Some(EGRESS_SECURITY)),
        tab(
            EGRESS_SECURITY,
            "EgressSecurityClassifier",
            Some(EGRESS_RULE),
        ),
        tab(EGRESS_RULE, "AntreaPolicyEgressRule", Some(EGRESS_BASELINE)),
        tab(EGRESS_BASELINE, "EgressBaselineRule", Some(EGRESS_METRIC)),
        tab(EGRESS_METRIC, "EgressMetric", Some(L2_FORWARDING)),
        tab(L2_FORWARDING, "L2ForwardingCalc", Some(TRAFFIC_CONTROL)),
        tab(TRAFFIC_CONTROL, "TrafficControl", Some(INGRESS_SECURITY)),
        tab(
            INGRESS_SECURITY,
            "IngressSecurityClassifier",
            Some(INGRESS_RULE),
        ),
        tab(
            INGRESS_RULE,
            "AntreaPolicyIngressRule",
            Some(INGRESS_BASELINE),
        ),
        tab(
            INGRESS_BASELINE,
            "IngressBaselineRule",
            Some(INGRESS_METRIC),
        ),
        tab(INGRESS_METRIC, "IngressMetric", Some(CONNTRACK_COMMIT)),
        tab(CONNTRACK_COMMIT, "ConntrackCommit", Some(OUTPUT)),
        tab(OUTPUT, "Output", None),
    ]
};

/// Priorities (Antrea `pipeline.go`).
pub mod priority {
    pub const MIRROR_REDIRECT_OUTPUT: u16 = 211;
    pub const HIGH: u16 = 210;
    pub const NORMAL: u16 = 200;
    pub const LOW: u16 = 190;
    pub const MISS: u16 = 0;
}

/// Register marks (docs/antrea-compat.md#registers-and-marks), as (register, value, mask).
pub mod reg {
    /// `reg0[0..3]` packet source: 6 = came back through a TC return port.
    pub const FROM_TC_RETURN: (u8, u32, u32) = (0, 0x6, 0xf);
    /// `reg0[21..22]` = 1: output to the port in reg1.
    pub const OUTPUT_TO_PORT: (u8, u32, u32) = (0, 0x20_0000, 0x60_0000);
    /// `reg4[22..23]` TC action: 01 mirror, 10 redirect.
    pub const TC_MIRROR: (u8, u32, u32) = (4, 0x40_0000, 0xc0_0000);
    pub const TC_REDIRECT: (u8, u32, u32) = (4, 0x80_0000, 0xc0_0000);
    /// reg1: the output ofport; reg9: the TC target ofport.
    pub const OUTPUT_PORT: u8 = 1;
    pub const TC_TARGET_PORT: u8 = 9;
}

/// Load a register mark `(register, value, mask)`.
pub(crate) fn load((idx, value, mask): (u8, u32, u32)) -> Action {
    Action::load_reg(idx, value, mask)
}

/// Match a register mark `(register, value, mask)`.
pub(crate) fn match_reg((idx, value, mask): (u8, u32, u32)) -> MatchField {
    MatchField::Reg {
        idx,
        value,
        mask: Some(mask),
    }
}

/// The flows every bridge has: one miss per table, and Output's three register flows.
pub fn base_flows() -> Vec<Flow> {
    let mut flows: Vec<Flow> = TABLES
        .iter()
        .map(|t| {
            let f = Flow::new(t.id, priority::MISS);
            match t.miss_goto {
                Some(next) => f.goto(next),
                None => f.actions([Action::output(port::NORMAL)]),
            }
        })
        .collect();
    // Returned packets skip the mark flows and ingress security, so they cannot loop
    // (Antrea's `trafficControlCommonFlows` #3).
    let (i0, v0, m0) = reg::OUTPUT_TO_PORT;
    let (_, v6, m6) = reg::FROM_TC_RETURN;
    flows.push(
        Flow::new(table::TRAFFIC_CONTROL, priority::HIGH)
            .matching(MatchField::Reg {
                idx: i0,
                value: v0 | v6,
                mask: Some(m0 | m6),
            })
            .goto(table::OUTPUT),
    );
    // Mirror: the original and a copy; redirect: only the target; else the output port.
    flows.push(
        Flow::new(table::OUTPUT, priority::MIRROR_REDIRECT_OUTPUT)
            .matching(match_reg(reg::OUTPUT_TO_PORT))
            .matching(match_reg(reg::TC_MIRROR))
            .actions([
                Action::output_reg(reg::OUTPUT_PORT),
                Action::output_reg(reg::TC_TARGET_PORT),
            ]),
    );
    flows.push(
        Flow::new(table::OUTPUT, priority::MIRROR_REDIRECT_OUTPUT)
            .matching(match_reg(reg::OUTPUT_TO_PORT))
            .matching(match_reg(reg::TC_REDIRECT))
            .actions([Action::output_reg(reg::TC_TARGET_PORT)]),
    );
    flows.push(
        Flow::new(table::OUTPUT, priority::NORMAL)
            .matching(match_reg(reg::OUTPUT_TO_PORT))
            .actions([Action::output_reg(reg::OUTPUT_PORT)]),
    );
    flows
}

/// L2ForwardingCalc for a local port with a known MAC (a Pod): packets to that MAC leave
/// through that port.
pub fn l2_port_flow(mac: Mac, ofport: u32) -> Flow {
    Flow::new(table::L2_FORWARDING, priority::NORMAL)
        .matching(MatchField::EthDst(mac, None))
        .actions([
            Action::load_reg(reg::OUTPUT_PORT, ofport, u32::MAX),
            load(reg::OUTPUT_TO_PORT),
        ])
        .goto(table::TRAFFIC_CONTROL)
}

/// A TrafficControl's mark flows (Antrea `InstallTrafficControlMarkFlows`): for each Pod
/// port, Ingress matches `reg1=<port>` (to the Pod), Egress `in_port=<port>` (from it);
/// both load the target port into reg9 and the action mark into reg4.
pub fn tc_mark_flows(
    pod_ofports: &[u32],
    target: u32,
    direction: TcDirection,
    action: TcAction,
) -> Vec<Flow> {
    let mark = match action {
        TcAction::Mirror => reg::TC_MIRROR,
        TcAction::Redirect => reg::TC_REDIRECT,
    };
    let actions = || {
        [
            Action::load_reg(reg::TC_TARGET_PORT, target, u32::MAX),
            load(mark),
        ]
    };
    let mut flows = Vec::new();
    for &p in pod_ofports {
        if matches!(direction, TcDirection::Ingress | TcDirection::Both) {
            flows.push(
                Flow::new(table::TRAFFIC_CONTROL, priority::NORMAL)
                    .matching(MatchField::Reg {
                        idx: reg::OUTPUT_PORT,
                        value: p,
                        mask: None,
                    })
                    .actions(actions())
                    .goto(table::INGRESS_SECURITY),
            );
        }
        if matches!(direction, TcDirection::Egress | TcDirection::Both) {
            flows.push(
                Flow::new(table::TRAFFIC_CONTROL, priority::NORMAL)
                    .matching(MatchField::InPort(p))
                    .actions(actions())
                    .goto(table::INGRESS_SECURITY),
            );
        }
    }
    flows
}

/// Classifier for a TC target port: drop what comes in on it. A target is where copies
/// (or redirected packets) go; what its far side sends back has no place on the bridge, and
/// through `NORMAL` it would reach the Pods and the uplink (Antrea's Classifier drops every
/// port it does not know). Seen on the kernel datapath: a tunnel device answers a mirrored
/// packet too large for its underlay with an ICMP "fragmentation needed" that claims to come
/// from the packet's destination, and the Pod that sent it lowers its path MTU to that Pod
/// (docs/datapath.md#6-mtu). A port that is also a return port keeps its return flow,
/// above this one.
pub fn tc_target_flow(ofport: u32) -> Flow {
    Flow::new(table::CLASSIFIER, priority::LOW).matching(MatchField::InPort(ofport))
}

/// Classifier for a TC return port (Antrea `InstallTrafficControlReturnPortFlow`): mark the
/// packet as returned and forward it by destination again, past egress security.
pub fn tc_return_flow(ofport: u32) -> Flow {
    Flow::new(table::CLASSIFIER, priority::NORMAL)
        .matching(MatchField::InPort(ofport))
        .actions([load(reg::FROM_TC_RETURN)])
        .goto(table::L2_FORWARDING)
}
