//! The NetworkPolicy pieces of the codec against a real ovs-vswitchd in a sandbox: flows
//! using every new action (`ct` with commit/zone/zone-from-register/table/exec,
//! `conjunction`, `CONTROLLER:<max_len>`, `controller(...)` with userdata/pause/max_len/id)
//! and every new field (`conj_id`, `ct_zone`, `ct_mark`, `ct_label`, masked TCP/UDP/SCTP
//! ports, SCTP ports, ICMP codes) go to the switch in one bundle; `ovs-ofctl dump-flows`
//! must print exactly the expected text, our decoder must read back what the switch dumps
//! (same match, same instructions), and `tether flows`' formatter must print each dumped
//! flow as ovs-ofctl does. A packet-out through a `controller(userdata=…)` flow comes
//! back as an `NXT_PACKET_IN2` our decoder reads (userdata, table, registers, packet). The
//! shapes are Antrea's (docs in
//! /work/shared/reference/antrea-networkpolicy.md Part B §2.2–2.4).

#[path = "openflow/cases.rs"]
mod cases;
#[allow(unused_imports)]
mod common;

use std::time::Duration;

use common::{Sandbox, privileged};
use tether::openflow::action::{Action, ControllerProp, Ct, CtZone};
use tether::openflow::conn::{Conn, ConnOptions};
use tether::openflow::consts::{
    CT_RECIRC_NONE, FlowModCommand, PacketInReason, Version, ct_state, port,
};
use tether::openflow::flow::{Category, Flow, Owner, cookie};
use tether::openflow::msg::Body;
use tether::openflow::ofctl::format_flow;
use tether::openflow::oxm::{Be128, Match, MatchField, values};
use tether::openflow::packet::{
    NXPIF_NXT_PACKET_IN2, PacketIn2, PacketInProp, PacketOut, set_packet_in_format,
};
use tether::openflow::{OfFlows, OfFlowsConfig};

const NP: Owner = Owner {
    category: Category(2),
    object: 7,
};
const ZONE: u16 = 65520;

fn ip() -> MatchField {
    MatchField::EthType(values::ETH_TYPE_IPV4)
}

fn proto(p: u8) -> [MatchField; 2] {
    [ip(), MatchField::IpProto(p)]
}

/// `set_field:<v>/<m>->ct_label`.
fn label(v: u128, m: u128) -> Action {
    Action::SetField(MatchField::CtLabel {
        value: Be128::from(v),
        mask: Some(Be128::from(m)),
    })
}

fn np_flows() -> Vec<Flow> {
    let reg1_low16 = CtZone::Field {
        src: 0x0001_0204,
        ofs_nbits: 15,
    };
    vec![
        Flow::new(1, 200)
            .matching(ip())
            .actions([Action::Ct(Ct::track(ZONE, 2))]),
        Flow::new(1, 190)
            .matching(MatchField::EthType(values::ETH_TYPE_IPV6))
            .actions([Action::Ct(Ct {
                zone: reg1_low16,
                ..Ct::track(0, 2)
            })]),
        Flow::new(2, 210)
            .matching(ip())
            .matching(MatchField::CtState {
                value: ct_state::INV | ct_state::TRK,
                mask: Some(ct_state::INV | ct_state::TRK),
            }),
        Flow::new(10, 14600)
            .matching(ip())
            .matching(MatchField::Ipv4Src(
                std::net::Ipv4Addr::new(10, 10, 0, 26),
                None,
            ))
            .actions([Action::conjunction(6, 1, 3)]),
        Flow::new(10, 14600)
            .matching(MatchField::Reg {
                idx: 1,
                value: 0x25,
                mask: None,
            })
            .actions([Action::conjunction(6, 2, 3), Action::conjunction(7, 1, 2)]),
        Flow::new(10, 14600)
            .matches(proto(values::IP_PROTO_TCP))
            .matching(MatchField::TcpDstMasked(0x1000, 0xf000))
            .actions([Action::conjunction(6, 3, 3)]),
        Flow::new(10, 14600)
            .matches(proto(values::IP_PROTO_UDP))
            .matching(MatchField::UdpSrcMasked(0x8000, 0x8000))
            .matching(MatchField::UdpDstMasked(0x50, 0xfff0))
            .actions([Action::conjunction(7, 2, 2)]),
        Flow::new(10, 14600)
            .matching(ip())
            .matching(MatchField::ConjId(6))
            .actions([
                Action::load_reg(6, 6, u32::MAX),
                Action::ct_commit(ZONE, 13, vec![label(6, 0xffff_ffff)]),
            ]),
        Flow::new(10, 14601)
            .matching(ip())
            .matching(MatchField::ConjId(7))
            .actions([Action::ct_commit(
                ZONE,
                CT_RECIRC_NONE,
                vec![
                    label(7 << 32, 0xffff_ffff << 32),
                    Action::SetField(MatchField::CtMark {
                        value: 1,
                        mask: None,
                    }),
                ],
            )]),
        Flow::new(10, 14500)
            .matches(proto(values::IP_PROTO_SCTP))
            .matching(MatchField::SctpSrc(5000, None))
            .matching(MatchField::SctpDst(0x400, Some(0xfc00)))
            .actions([Action::to_controller(128)]),
        Flow::new(10, 14499)
            .matches(proto(values::IP_PROTO_TCP))
            .matching(MatchField::TcpSrcMasked(0x400, 0xff00))
            .matching(MatchField::TcpDst(80))
            .actions([Action::controller(&[2], true)]),
        Flow::new(13, 200)
            .matching(ip())
            .matching(MatchField::CtState {
                value: ct_state::TRK,
                mask: Some(ct_state::NEW | ct_state::TRK),
            })
            .matching(MatchField::CtLabel {
                value: Be128::from(6),
                mask: Some(Be128::from(0xffff_ffff)),
            })
            .goto(14),
        Flow::new(13, 199)
            .matching(MatchField::CtZone(ZONE))
            .matching(MatchField::CtMark {
                value: 1,
                mask: Some(3),
            })
            .matching(MatchField::CtLabel {
                value: Be128::from(0x1_0000_0000_0000_0000_0000_0000_0000),
                mask: None,
            })
            .goto(14),
        Flow::new(15, 200)
            .matches(proto(values::IP_PROTO_ICMP))
            .matching(MatchField::Icmpv4Type(3))
            .matching(MatchField::Icmpv4Code(10))
            .actions([Action::controller(&[1, 3], false)]),
        Flow::new(15, 199)
            .matching(MatchField::EthType(values::ETH_TYPE_IPV6))
            .matching(MatchField::IpProto(values::IP_PROTO_ICMPV6))
            .matching(MatchField::Icmpv6Type(1))
            .matching(MatchField::Icmpv6Code(4))
            .actions([Action::Controller2(vec![
                ControllerProp::MaxLen(128),
                ControllerProp::ControllerId(3),
                ControllerProp::Reason(PacketInReason::NO_MATCH),
                ControllerProp::Userdata(vec![1, 0x7f]),
            ])]),
    ]
}

/// What `ovs-ofctl -O OpenFlow15 --no-stats --no-names dump-flows` prints, sorted: read
/// off OVS 3.1's dump, never written by hand (the table-miss flow is the bridge's own).
const WANT: [&str; 16] = [
    "cookie=0x1020000000007, table=1, priority=190,ipv6 actions=ct(table=2,zone=NXM_NX_REG1[0..15])",
    "cookie=0x1020000000007, table=1, priority=200,ip actions=ct(table=2,zone=65520)",
    "cookie=0x1020000000007, table=10, priority=14499,tcp,tp_src=0x400/0xff00,tp_dst=80 actions=controller(userdata=02,pause)",
    "cookie=0x1020000000007, table=10, priority=14500,sctp,tp_src=5000,tp_dst=0x400/0xfc00 actions=CONTROLLER:128",
    "cookie=0x1020000000007, table=10, priority=14600,conj_id=6,ip actions=set_field:0x6->reg6,ct(commit,table=13,zone=65520,exec(set_field:0x6/0xffffffff->ct_label))",
    "cookie=0x1020000000007, table=10, priority=14600,ip,nw_src=10.10.0.26 actions=conjunction(6,1/3)",
    "cookie=0x1020000000007, table=10, priority=14600,reg1=0x25 actions=conjunction(6,2/3),conjunction(7,1/2)",
    "cookie=0x1020000000007, table=10, priority=14600,tcp,tp_dst=0x1000/0xf000 actions=conjunction(6,3/3)",
    "cookie=0x1020000000007, table=10, priority=14600,udp,tp_src=0x8000/0x8000,tp_dst=0x50/0xfff0 actions=conjunction(7,2/2)",
    "cookie=0x1020000000007, table=10, priority=14601,conj_id=7,ip actions=ct(commit,zone=65520,exec(set_field:0x700000000/0xffffffff00000000->ct_label,set_field:0x1->ct_mark))",
    "cookie=0x1020000000007, table=13, priority=199,ct_zone=65520,ct_mark=0x1/0x3,ct_label=0x10000000000000000000000000000 actions=goto_table:14",
    "cookie=0x1020000000007, table=13, priority=200,ct_state=-new+trk,ct_label=0x6/0xffffffff,ip actions=goto_table:14",
    "cookie=0x1020000000007, table=15, priority=199,icmp6,icmp_type=1,icmp_code=4 actions=controller(reason=no_match,max_len=128,id=3,userdata=01.7f)",
    "cookie=0x1020000000007, table=15, priority=200,icmp,icmp_type=3,icmp_code=10 actions=controller(userdata=01.03)",
    "cookie=0x1020000000007, table=2, priority=210,ct_state=+inv+trk,ip actions=drop",
    "priority=0 actions=NORMAL",
];

#[test]
fn np_flows_install_and_dump_exactly() {
    if !privileged("np_flows_install_and_dump_exactly") {
        return;
    }
    let sb = Sandbox::start();
    sb.add_bridge("br-int");
    let mut cfg = OfFlowsConfig::new(sb.dir().join("br-int.mgmt"), "br-int", 1);
    cfg.timeout = common::patience(Duration::from_secs(20));
    let of = OfFlows::start(cfg).expect("start OfFlows");
    of.wait_connected(common::patience(Duration::from_secs(10)))
        .expect("OfFlows connects");
    of.apply(NP, np_flows())
        .expect("apply NP flows in one bundle");

    let dumped = sb.dump_flows("br-int", None);
    assert_eq!(dumped, WANT);

    // Our decoder reads back what the switch dumps, and prints it as ovs-ofctl does.
    let descs = of
        .dump(cookie(1, NP.category, NP.object), u64::MAX)
        .unwrap();
    let installed = of.installed(NP);
    assert_eq!(descs.len(), installed.len());
    let mut ours: Vec<String> = descs.iter().map(|d| format_flow(d, false)).collect();
    ours.sort();
    for d in &descs {
        let m = Match::new(d.match_.fields().to_vec());
        let f = installed
            .iter()
            .find(|f| {
                f.key.table == d.table_id && f.key.priority == d.priority && f.key.match_ == m
            })
            .unwrap_or_else(|| panic!("dumped flow not installed: {d:?}"));
        assert_eq!(
            d.instructions,
            *f.value.instructions,
            "{}",
            format_flow(d, false)
        );
    }
    let mut want_lines: Vec<String> = dumped
        .iter()
        .filter(|l| l.starts_with("cookie="))
        .cloned()
        .collect();
    want_lines.sort();
    assert_eq!(ours, want_lines);
}

#[test]
fn packet_out_to_a_controller_flow_comes_back_as_packet_in2() {
    if !privileged("packet_out_to_a_controller_flow_comes_back_as_packet_in2") {
        return;
    }
    let sb = Sandbox::start();
    sb.add_bridge("br-int");
    let conn = Conn::start(
        &sb.mgmt("br-int"),
        ConnOptions::new(Version::OF15, "np-packet-in"),
    )
    .expect("connect");
    conn.wait_connected(common::patience(Duration::from_secs(10)))
        .expect("connected");
    let ck = cookie(1, NP.category, NP.object);
    let flow = Flow::new(15, 200).matching(ip()).actions([
        Action::load_reg(3, 6, u32::MAX),
        Action::controller(&[1, 3], false),
    ]);
    let po = PacketOut::new(
        port::CONTROLLER,
        vec![Action::resubmit(15)],
        cases::rst_packet(),
    );
    let reply = conn
        .transact(
            vec![
                set_packet_in_format(NXPIF_NXT_PACKET_IN2),
                // OFPT_SET_CONFIG, miss_send_len 0xffff: a service connection gets
                // asynchronous messages only after this (ovs-ofctl(8), `monitor`).
                Body::Other {
                    type_: 9,
                    body: vec![0, 0, 0xff, 0xff],
                },
                Body::FlowMod(flow.to_flow_mod(FlowModCommand::ADD, ck)),
                po.to_body().expect("encodes"),
            ],
            common::patience(Duration::from_secs(10)),
        )
        .expect("transact");
    assert!(reply.errors.is_empty(), "{:?}", reply.errors);
    let deadline = std::time::Instant::now() + common::patience(Duration::from_secs(10));
    let pin = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let msg = conn
            .unsolicited()
            .recv_timeout(left)
            .expect("a packet-in before the deadline");
        if let Some(p) = PacketIn2::from_body(&msg.body).expect("decodes") {
            break (p, msg.body);
        }
    };
    let (pin, raw) = pin;
    assert_eq!(pin.userdata(), Some(&[1u8, 3][..]));
    assert_eq!(pin.table_id(), Some(15));
    assert_eq!(pin.reg(3), 6);
    assert_eq!(pin.packet(), Some(&cases::rst_packet()[..]));
    assert!(pin.props.contains(&PacketInProp::Cookie(ck)), "{pin:?}");
    // Re-encoding what the switch sent gives its bytes back.
    assert_eq!(pin.to_body().expect("encodes"), raw);
}
