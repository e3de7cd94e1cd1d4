//! One message of every type tether encodes or decodes, shared by the codec tests (round
//! trip, truncation) and the `ovs-ofctl ofp-print` cross-check. Each case's bytes are
//! stored in `tests/openflow/<name>.hex` and OVS's reading of them in `<name>.txt`.

// Each test crate that includes this uses a different part of it; fixtures may unwrap
// (a failure is a broken fixture, and clippy.toml's test allowance only covers #[test]).
#![allow(dead_code, clippy::unwrap_used)]

use std::net::{Ipv4Addr, Ipv6Addr};

use tether::openflow::action::{Action, ControllerProp, Ct, CtZone};
use tether::openflow::consts::{
    BundleCtrlType, ErrorType, FlowModCommand, MultipartType, NX_EXPERIMENTER, PacketInReason,
    Version, bundle_flags, ct_state, port,
};
use tether::openflow::flow::{Category, Flow, cookie};
use tether::openflow::flowmod::{
    FlowDesc, FlowDescRequest, FlowMod, MultipartReply, MultipartReplyBody, MultipartRequest,
    MultipartRequestBody,
};
use tether::openflow::msg::{
    Body, BundleAdd, BundleControl, ErrorMsg, FeaturesReply, FeaturesReply10, Hello, Msg,
    PhyPort10, Port, PortMod10, PortStatus, port_name_field,
};
use tether::openflow::oxm::{Be128, MatchField, values};
use tether::openflow::packet::{
    NXPIF_NXT_PACKET_IN2, PacketIn2, PacketInProp, PacketOut, set_packet_in_format,
};

const MAC_A: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0a];
const MAC_B: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0b];

/// The TC mark flow of docs/antrea-compat.md#trafficcontrol-flows plus a spread of match
/// fields.
pub fn tcp_flow() -> Flow {
    Flow::new(2, 200)
        .matching(MatchField::InPort(5))
        .matching(MatchField::EthType(values::ETH_TYPE_IPV4))
        .matching(MatchField::EthSrc(MAC_A, Some([0xff, 0xff, 0xff, 0, 0, 0])))
        .matching(MatchField::EthDst(MAC_B, None))
        .matching(MatchField::IpProto(values::IP_PROTO_TCP))
        .matching(MatchField::Ipv4Src(
            Ipv4Addr::new(192, 0, 2, 0),
            Some(Ipv4Addr::new(255, 255, 255, 0)),
        ))
        .matching(MatchField::Ipv4Dst(Ipv4Addr::new(198, 51, 100, 7), None))
        .matching(MatchField::TcpSrc(1024))
        .matching(MatchField::TcpDst(443))
        .matching(MatchField::Reg {
            idx: 1,
            value: 0x32,
            mask: None,
        })
        .matching(MatchField::Reg {
            idx: 0,
            value: 0x200006,
            mask: Some(0x60000f),
        })
        .matching(MatchField::CtState {
            value: ct_state::NEW | ct_state::TRK,
            mask: Some(ct_state::NEW | ct_state::TRK | ct_state::INV),
        })
        .actions([
            Action::load_reg(9, 0xc8, u32::MAX),
            Action::load_reg(4, 0x800000, 0xc00000),
        ])
        .goto(3)
}

pub fn v6_flow() -> Flow {
    Flow::new(4, 190)
        .matching(MatchField::EthType(values::ETH_TYPE_IPV6))
        .matching(MatchField::IpProto(values::IP_PROTO_ICMPV6))
        .matching(MatchField::Ipv6Src(
            "2001:db8::".parse::<Ipv6Addr>().unwrap(),
            Some("ffff:ffff::".parse().unwrap()),
        ))
        .matching(MatchField::Ipv6Dst("2001:db8::1".parse().unwrap(), None))
        .matching(MatchField::Icmpv6Type(135))
        .actions([
            Action::output_reg(1),
            Action::output_reg(9),
            Action::output(port::NORMAL),
            Action::output(port::IN_PORT),
            Action::output(7),
            Action::resubmit(5),
        ])
}

pub fn udp_icmp_flows() -> Vec<Flow> {
    vec![
        Flow::new(1, 200)
            .matching(MatchField::EthType(values::ETH_TYPE_IPV4))
            .matching(MatchField::IpProto(values::IP_PROTO_UDP))
            .matching(MatchField::UdpSrc(68))
            .matching(MatchField::UdpDst(67))
            .actions([Action::output(port::NORMAL)]),
        Flow::new(1, 200)
            .matching(MatchField::EthType(values::ETH_TYPE_IPV4))
            .matching(MatchField::IpProto(values::IP_PROTO_ICMP))
            .matching(MatchField::Icmpv4Type(8))
            .goto(2),
    ]
}

fn m15(xid: u32, body: Body) -> Msg {
    Msg::new(Version::OF15, xid, body)
}

fn m10(xid: u32, body: Body) -> Msg {
    Msg::new(Version::OF10, xid, body)
}

fn bundle_ctrl(xid: u32, t: BundleCtrlType) -> Msg {
    m15(
        xid,
        Body::BundleControl(BundleControl::new(
            7,
            t,
            bundle_flags::ATOMIC | bundle_flags::ORDERED,
        )),
    )
}

fn ofport(no: u32, name: &str, mac: [u8; 6]) -> Port {
    // One OFPPDPT_ETHERNET property (OF1.5 §7.2.1.1): curr/advertised/supported/peer,
    // curr_speed, max_speed, 32 bytes.
    let mut props = vec![0x00, 0x00, 0x00, 0x20, 0, 0, 0, 0];
    props.extend_from_slice(&0x0000_0840u32.to_be_bytes()); // curr: 10GB_FD | COPPER
    props.extend_from_slice(&[0; 12]);
    props.extend_from_slice(&10_000_000u32.to_be_bytes()); // curr_speed (kbps)
    props.extend_from_slice(&0u32.to_be_bytes());
    Port {
        port_no: no,
        hw_addr: mac,
        name: port_name_field(name),
        config: 0,
        state: 4, // OFPPS_LIVE
        properties: props,
    }
}

fn phy10(no: u16, name: &str, mac: [u8; 6], config: u32) -> PhyPort10 {
    PhyPort10 {
        port_no: no,
        hw_addr: mac,
        name: port_name_field(name),
        config,
        state: 0,
        curr: 0x840,
        advertised: 0,
        supported: 0,
        peer: 0,
    }
}

/// (name, message). Names are file stems under tests/openflow/.
/// NetworkPolicy shapes (Antrea's, reference Part B §2.2–2.4): a commit flow matching the
/// conntrack fields and port ranges, with a register zone, exec, and both controller forms.
pub fn np_ct_flow() -> Flow {
    Flow::new(10, 14600)
        .matching(MatchField::EthType(values::ETH_TYPE_IPV4))
        .matching(MatchField::IpProto(values::IP_PROTO_TCP))
        .matching(MatchField::ConjId(6))
        .matching(MatchField::CtState {
            value: ct_state::NEW | ct_state::TRK,
            mask: Some(ct_state::NEW | ct_state::TRK),
        })
        .matching(MatchField::CtZone(65520))
        .matching(MatchField::CtMark {
            value: 0x10,
            mask: Some(0xf0),
        })
        .matching(MatchField::CtLabel {
            value: Be128::from(6 << 32),
            mask: Some(Be128::from(0xffff_ffff << 32)),
        })
        .matching(MatchField::TcpSrcMasked(0x400, 0xfc00))
        .matching(MatchField::TcpDstMasked(0x1000, 0xf000))
        .actions([
            Action::load_reg(6, 6, u32::MAX),
            Action::Ct(Ct {
                zone: CtZone::Field {
                    src: 0x0001_0204,
                    ofs_nbits: 15,
                },
                ..Ct::track(0, 13)
            }),
            Action::ct_commit(
                65520,
                13,
                vec![
                    Action::SetField(MatchField::CtLabel {
                        value: Be128::from(6),
                        mask: Some(Be128::from(0xffff_ffff)),
                    }),
                    Action::SetField(MatchField::CtMark {
                        value: 1,
                        mask: None,
                    }),
                ],
            ),
            Action::controller(&[1, 3], true),
            Action::to_controller(128),
        ])
}

/// A conjunction clause flow over SCTP ports (exact source, masked destination).
pub fn np_conj_flow() -> Flow {
    Flow::new(10, 14600)
        .matching(MatchField::EthType(values::ETH_TYPE_IPV4))
        .matching(MatchField::IpProto(values::IP_PROTO_SCTP))
        .matching(MatchField::SctpSrc(5000, None))
        .matching(MatchField::SctpDst(0x400, Some(0xfc00)))
        .actions([Action::conjunction(6, 2, 3), Action::conjunction(7, 1, 2)])
}

/// ICMPv6 type and code, and a `controller(...)` with every property OVS writes.
pub fn np_icmp6_flow() -> Flow {
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
            ControllerProp::MeterId(2),
        ])])
}

/// ICMPv4 type and code.
pub fn np_icmp_flow() -> Flow {
    Flow::new(15, 200)
        .matching(MatchField::EthType(values::ETH_TYPE_IPV4))
        .matching(MatchField::IpProto(values::IP_PROTO_ICMP))
        .matching(MatchField::Icmpv4Type(3))
        .matching(MatchField::Icmpv4Code(10))
        .actions([Action::controller(&[1, 1], false)])
}

/// A TCP RST|ACK from 10.0.0.2:80 to 10.0.0.1:40000, as Antrea's Reject sends back (checksums
/// zero: OVS prints them, it does not check them).
pub fn rst_packet() -> Vec<u8> {
    let mut p = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    p.extend([
        0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1,
    ]);
    p.extend([
        0, 80, 0x9c, 0x40, 0, 0, 0, 0, 0, 0, 0x10, 0x01, 0x50, 0x14, 0, 0, 0, 0, 0, 0,
    ]);
    p
}

pub fn packet_out() -> PacketOut {
    PacketOut::new(5, vec![Action::output(3)], rst_packet())
}

/// What OVS sends for `controller(userdata=01.03)` in table 15 (reference Part B §2.4).
pub fn packet_in2() -> PacketIn2 {
    PacketIn2 {
        props: vec![
            PacketInProp::Packet(rst_packet()),
            PacketInProp::TableId(15),
            PacketInProp::Cookie(cookie(1, Category(2), 7)),
            PacketInProp::Reason(PacketInReason::ACTION),
            PacketInProp::Metadata(vec![
                MatchField::InPort(5),
                MatchField::Reg {
                    idx: 3,
                    value: 6,
                    mask: None,
                },
            ]),
            PacketInProp::Userdata(vec![1, 3]),
        ],
    }
}

pub fn cases() -> Vec<(&'static str, Msg)> {
    let ck = cookie(1, Category::TRAFFIC_CONTROL, 0x2a);
    let add = tcp_flow().to_flow_mod(FlowModCommand::ADD, ck);
    let mut add_timeouts = v6_flow().to_flow_mod(FlowModCommand::ADD, ck);
    add_timeouts.idle_timeout = 30;
    add_timeouts.hard_timeout = 300;
    add_timeouts.flags = 1 << 2; // reset_counts
    let modify = udp_icmp_flows()[0].to_flow_mod(FlowModCommand::MODIFY_STRICT, ck);
    let delete_strict = udp_icmp_flows()[1].to_flow_mod(FlowModCommand::DELETE_STRICT, ck);
    let delete_round = FlowMod::delete_by_cookie(1 << 48, 0xffff << 48);
    let failed = add.clone();
    let failed_bytes = m15(0x99, Body::FlowMod(failed)).to_bytes().unwrap();
    let desc = |f: &Flow, stats: bool| {
        let fm = f.to_flow_mod(FlowModCommand::ADD, ck);
        let mut s = Vec::new();
        if stats {
            // OXS (OF1.5 §7.2.6): duration 1.5 s, 3 packets, 294 bytes.
            s.extend_from_slice(&0x8002_0008u32.to_be_bytes());
            s.extend_from_slice(&1u32.to_be_bytes());
            s.extend_from_slice(&500_000_000u32.to_be_bytes());
            s.extend_from_slice(&0x8002_0808u32.to_be_bytes());
            s.extend_from_slice(&3u64.to_be_bytes());
            s.extend_from_slice(&0x8002_0a08u32.to_be_bytes());
            s.extend_from_slice(&294u64.to_be_bytes());
        }
        FlowDesc {
            table_id: fm.table_id,
            priority: fm.priority,
            idle_timeout: 0,
            hard_timeout: 0,
            flags: 0,
            importance: 0,
            cookie: fm.cookie,
            match_: fm.match_,
            stats: s,
            instructions: fm.instructions.to_vec(),
        }
    };
    vec![
        (
            "hello15",
            m15(1, Body::Hello(Hello::offering(&[Version::OF15]))),
        ),
        (
            "hello_bitmap",
            m15(
                2,
                Body::Hello(Hello::offering(&[Version::OF10, Version::OF15])),
            ),
        ),
        ("hello10", m10(3, Body::Hello(Hello::default()))),
        (
            "echo_request",
            m15(4, Body::EchoRequest(b"tether".to_vec())),
        ),
        ("echo_reply", m15(4, Body::EchoReply(b"tether".to_vec()))),
        ("features_request", m15(5, Body::FeaturesRequest)),
        (
            "features_reply",
            m15(
                5,
                Body::FeaturesReply(FeaturesReply {
                    datapath_id: 0x0000_0200_0000_000a,
                    n_buffers: 0,
                    n_tables: 254,
                    auxiliary_id: 0,
                    capabilities: 0x4f,
                    reserved: 0,
                }),
            ),
        ),
        ("features_request10", m10(6, Body::FeaturesRequest)),
        (
            "features_reply10",
            m10(
                6,
                Body::FeaturesReply10(FeaturesReply10 {
                    datapath_id: 0x0000_0200_0000_000a,
                    n_buffers: 0,
                    n_tables: 254,
                    capabilities: 0xc7,
                    actions: 0xfff,
                    ports: vec![
                        phy10(1, "tc0", MAC_A, 0),
                        phy10(0xfffe, "br-int", MAC_B, 0x10),
                    ],
                }),
            ),
        ),
        (
            "port_mod10_no_flood",
            m10(
                7,
                Body::PortMod10(PortMod10 {
                    port_no: 1,
                    hw_addr: MAC_A,
                    config: 0x10,
                    mask: 0x10,
                    advertise: 0,
                }),
            ),
        ),
        (
            "port_mod10_flood",
            m10(
                8,
                Body::PortMod10(PortMod10 {
                    port_no: 1,
                    hw_addr: MAC_A,
                    config: 0,
                    mask: 0x10,
                    advertise: 0,
                }),
            ),
        ),
        ("barrier_request", m15(9, Body::BarrierRequest)),
        ("barrier_reply", m15(9, Body::BarrierReply)),
        ("barrier_request10", m10(10, Body::BarrierRequest)),
        ("barrier_reply10", m10(10, Body::BarrierReply)),
        (
            "error_bad_prereq",
            m15(
                0x99,
                Body::Error(ErrorMsg {
                    type_: ErrorType::BAD_MATCH,
                    code: 9,
                    experimenter: None,
                    data: failed_bytes[..64].to_vec(),
                }),
            ),
        ),
        (
            "error_nicira",
            m15(
                0x9a,
                Body::Error(ErrorMsg {
                    type_: ErrorType::EXPERIMENTER,
                    // NXBRC_NXM_INVALID: OVS lib/ofp-errors.h "NX1.2+(2)".
                    code: 2,
                    experimenter: Some(NX_EXPERIMENTER),
                    data: failed_bytes[..16].to_vec(),
                }),
            ),
        ),
        ("flow_mod_add", m15(11, Body::FlowMod(add.clone()))),
        ("packet_out", m15(44, packet_out().to_body().unwrap())),
        ("packet_in2", m15(45, packet_in2().to_body().unwrap())),
        (
            "set_packet_in_format",
            m15(46, set_packet_in_format(NXPIF_NXT_PACKET_IN2)),
        ),
        (
            "flow_mod_np_ct",
            m15(
                40,
                Body::FlowMod(np_ct_flow().to_flow_mod(FlowModCommand::ADD, ck)),
            ),
        ),
        (
            "flow_mod_np_conj",
            m15(
                41,
                Body::FlowMod(np_conj_flow().to_flow_mod(FlowModCommand::ADD, ck)),
            ),
        ),
        (
            "flow_mod_np_icmp6",
            m15(
                42,
                Body::FlowMod(np_icmp6_flow().to_flow_mod(FlowModCommand::ADD, ck)),
            ),
        ),
        (
            "flow_mod_np_icmp",
            m15(
                43,
                Body::FlowMod(np_icmp_flow().to_flow_mod(FlowModCommand::ADD, ck)),
            ),
        ),
        ("flow_mod_add_v6", m15(12, Body::FlowMod(add_timeouts))),
        ("flow_mod_modify_strict", m15(13, Body::FlowMod(modify))),
        (
            "flow_mod_delete_strict",
            m15(14, Body::FlowMod(delete_strict)),
        ),
        (
            "flow_mod_delete_round",
            m15(15, Body::FlowMod(delete_round)),
        ),
        ("bundle_open", bundle_ctrl(16, BundleCtrlType::OPEN_REQUEST)),
        (
            "bundle_open_reply",
            bundle_ctrl(16, BundleCtrlType::OPEN_REPLY),
        ),
        (
            "bundle_close",
            bundle_ctrl(17, BundleCtrlType::CLOSE_REQUEST),
        ),
        (
            "bundle_commit",
            bundle_ctrl(18, BundleCtrlType::COMMIT_REQUEST),
        ),
        (
            "bundle_commit_reply",
            bundle_ctrl(18, BundleCtrlType::COMMIT_REPLY),
        ),
        (
            "bundle_discard",
            bundle_ctrl(19, BundleCtrlType::DISCARD_REQUEST),
        ),
        (
            "bundle_add",
            m15(
                20,
                Body::BundleAdd(BundleAdd {
                    bundle_id: 7,
                    flags: bundle_flags::ATOMIC | bundle_flags::ORDERED,
                    msg: Box::new(m15(20, Body::FlowMod(add))),
                    properties: Vec::new(),
                }),
            ),
        ),
        (
            "flow_desc_request",
            m15(
                21,
                Body::MultipartRequest(MultipartRequest {
                    flags: 0,
                    body: MultipartRequestBody::FlowDesc(FlowDescRequest::by_cookie(ck, u64::MAX)),
                }),
            ),
        ),
        (
            "flow_desc_reply",
            m15(
                21,
                Body::MultipartReply(MultipartReply {
                    flags: 0,
                    body: MultipartReplyBody::FlowDesc(vec![
                        desc(&tcp_flow(), true),
                        desc(&udp_icmp_flows()[1], false),
                    ]),
                }),
            ),
        ),
        (
            "port_desc_request",
            m15(
                22,
                Body::MultipartRequest(MultipartRequest {
                    flags: 0,
                    body: MultipartRequestBody::PortDesc { port_no: port::ANY },
                }),
            ),
        ),
        (
            "port_desc_reply",
            m15(
                22,
                Body::MultipartReply(MultipartReply {
                    flags: 0,
                    body: MultipartReplyBody::PortDesc(vec![
                        ofport(1, "tc0", MAC_A),
                        ofport(port::LOCAL, "br-int", MAC_B),
                    ]),
                }),
            ),
        ),
        (
            "port_status",
            m15(
                0,
                Body::PortStatus(PortStatus {
                    reason: 0,
                    port: ofport(3, "p3", MAC_B),
                }),
            ),
        ),
        (
            "multipart_other",
            m15(
                23,
                Body::MultipartRequest(MultipartRequest {
                    flags: 0,
                    body: MultipartRequestBody::Other {
                        type_: MultipartType::DESC,
                        body: Vec::new(),
                    },
                }),
            ),
        ),
    ]
}

/// Lowercase hex, 16 bytes a line, as stored in the `.hex` files.
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::new();
    for (i, chunk) in bytes.chunks(16).enumerate() {
        if i > 0 {
            s.push('\n');
        }
        let line: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        s.push_str(&line.join(" "));
    }
    s.push('\n');
    s
}

pub fn unhex(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).expect("hex byte"))
        .collect()
}
