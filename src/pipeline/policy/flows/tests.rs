//! The flows as `ovs-ofctl -O OpenFlow15 --no-stats dump-flows` prints them. Each
//! expected line was also fed to `ovs-ofctl -O OpenFlow15 parse-flow`, which printed it
//! back unchanged (so these are flows OVS accepts, in its own spelling).

use super::*;
use crate::controlplane::IpNet;
use crate::openflow::ofctl::format_flow;

const PORTS: VmPorts = VmPorts { host: 3, uplink: 2 };

fn text(flows: &[Flow]) -> Vec<String> {
    flows
        .iter()
        .map(|f| format_flow(&f.to_desc(), false))
        .collect()
}

fn net(s: &str) -> IpNet {
    let (a, p) = s.split_once('/').unwrap();
    IpNet::new(a.parse().unwrap(), p.parse().unwrap()).unwrap()
}

#[test]
fn base_flows_exact() {
    let mut want = vec![
        "table=10, priority=200,ip,in_port=3 actions=ct(table=20,zone=65520)".to_string(),
        "table=10, priority=200,ipv6,in_port=3 actions=ct(table=20,zone=65520)".into(),
        "table=10, priority=200,ip,in_port=2 actions=ct(table=20,zone=65520)".into(),
        "table=10, priority=200,ipv6,in_port=2 actions=ct(table=20,zone=65520)".into(),
    ];
    for port in [3, 2] {
        for t in [130, 131, 132, 133, 134, 135, 136, 143] {
            want.push(format!(
                "table=10, priority=210,icmp6,in_port={port},icmp_type={t} \
                 actions=set_field:0x200/0x200->reg0,goto_table:70"
            ));
        }
    }
    want.extend(
        [
            "table=20, priority=210,ct_state=+inv+trk actions=drop",
            "table=40, priority=64990,ct_state=-new+est actions=goto_table:60",
            "table=40, priority=64990,ct_state=-new+rel actions=goto_table:60",
            "table=100, priority=64991,reg0=0x200/0x200 actions=goto_table:130",
            "table=100, priority=64990,ct_state=-new+est actions=goto_table:120",
            "table=100, priority=64990,ct_state=-new+rel actions=goto_table:120",
            "table=130, priority=200,ct_state=+new+trk,ip actions=ct(commit,table=140,zone=65520)",
            "table=130, priority=200,ct_state=+new+trk,ipv6 actions=ct(commit,table=140,zone=65520)",
        ]
        .map(String::from),
    );
    assert_eq!(text(&base_flows(PORTS)), want);
}

fn spec<'a>(
    direction: Direction,
    action: RuleAction,
    baseline: bool,
    peer: &'a Addresses,
    services: &'a Services,
) -> RuleSpec<'a> {
    RuleSpec {
        direction,
        action,
        conj_id: 7,
        tables: rule_tables(direction, baseline),
        priority: 1000,
        peer,
        services,
        ports: PORTS,
        log: false,
    }
}

#[test]
fn egress_reject_sctp_ranges_and_both_families() {
    let peer = Addresses::Only(PeerMatch {
        v4: vec![net("192.0.2.0/24")],
        v6: vec![net("2001:db8::/32")],
    });
    let services = Services::Matches(vec![ServiceMatch::Ports {
        protocol: L4::Sctp,
        dst: vec![
            PortMask {
                value: 80,
                mask: 0xfff8,
            },
            PortMask {
                value: 88,
                mask: 0xffff,
            },
        ],
    }]);
    let got = rule_flows(&spec(
        Direction::Out,
        RuleAction::Reject,
        false,
        &peer,
        &services,
    ));
    assert_eq!(
        text(&got),
        [
            "table=40, priority=1000,in_port=3 actions=conjunction(7,1/3)",
            "table=40, priority=1000,ip,nw_dst=192.0.2.0/24 actions=conjunction(7,2/3)",
            "table=40, priority=1000,ipv6,ipv6_dst=2001:db8::/32 actions=conjunction(7,2/3)",
            "table=40, priority=1000,sctp,tp_dst=0x50/0xfff8 actions=conjunction(7,3/3)",
            "table=40, priority=1000,sctp,tp_dst=88 actions=conjunction(7,3/3)",
            "table=40, priority=1000,sctp6,tp_dst=0x50/0xfff8 actions=conjunction(7,3/3)",
            "table=40, priority=1000,sctp6,tp_dst=88 actions=conjunction(7,3/3)",
            "table=40, priority=1000,conj_id=7 actions=set_field:0x7->reg3,set_field:0x400/0x400->reg0,goto_table:60",
            "table=60, priority=200,reg0=0x400/0x400,reg3=0x7 actions=controller(userdata=01.01.00.00.00.07)",
        ]
    );
}

#[test]
fn pass_goes_to_the_baseline_or_from_there_to_the_metric_table() {
    let any = Services::Any;
    for (direction, baseline, want) in [
        (
            Direction::In,
            false,
            "table=100, priority=1000,conj_id=7 actions=goto_table:110",
        ),
        (
            Direction::Out,
            false,
            "table=40, priority=1000,conj_id=7 actions=goto_table:50",
        ),
        (
            Direction::In,
            true,
            "table=110, priority=1000,conj_id=7 actions=goto_table:120",
        ),
        (
            Direction::Out,
            true,
            "table=50, priority=1000,conj_id=7 actions=goto_table:60",
        ),
    ] {
        let got = text(&rule_flows(&spec(
            direction,
            RuleAction::Pass,
            baseline,
            &Addresses::Any,
            &any,
        )));
        // Three clause flows (two "any" addresses and the VM's port), the action, no
        // metric flows.
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(got[3], want);
    }
}

/// The second ICMP and the UDP port 0/0 (any port: OVS drops a zero-mask field) are
/// matches already made.
#[test]
fn icmp_any_and_repeated_services_appear_once() {
    let services = Services::Matches(vec![
        ServiceMatch::Icmp {
            icmp_type: None,
            icmp_code: None,
        },
        ServiceMatch::Ports {
            protocol: L4::Udp,
            dst: vec![],
        },
        ServiceMatch::Icmp {
            icmp_type: None,
            icmp_code: None,
        },
        ServiceMatch::Ports {
            protocol: L4::Udp,
            dst: vec![PortMask { value: 0, mask: 0 }],
        },
    ]);
    let got = rule_flows(&spec(
        Direction::In,
        RuleAction::Drop,
        false,
        &Addresses::Any,
        &services,
    ));
    assert_eq!(
        text(&got),
        [
            "table=100, priority=1000,ip actions=conjunction(7,1/3)",
            "table=100, priority=1000,ipv6 actions=conjunction(7,1/3)",
            "table=100, priority=1000,reg1=0x3 actions=conjunction(7,2/3)",
            "table=100, priority=1000,icmp actions=conjunction(7,3/3)",
            "table=100, priority=1000,icmp6 actions=conjunction(7,3/3)",
            "table=100, priority=1000,udp actions=conjunction(7,3/3)",
            "table=100, priority=1000,udp6 actions=conjunction(7,3/3)",
            "table=100, priority=1000,conj_id=7 actions=set_field:0x7->reg3,set_field:0x400/0x400->reg0,goto_table:120",
            "table=120, priority=200,reg0=0x400/0x400,reg3=0x7 actions=drop",
        ]
    );
}

#[test]
fn a_slash_zero_peer_is_the_bare_family() {
    let peer = Addresses::Only(PeerMatch {
        v4: vec![net("0.0.0.0/0"), net("10.0.0.0/8")],
        v6: vec![net("::/0")],
    });
    let got = rule_flows(&spec(
        Direction::Out,
        RuleAction::Allow,
        false,
        &peer,
        &Services::Any,
    ));
    assert_eq!(
        text(&got[..4]),
        [
            "table=40, priority=1000,in_port=3 actions=conjunction(7,1/2)",
            "table=40, priority=1000,ip actions=conjunction(7,2/2)",
            "table=40, priority=1000,ip,nw_dst=10.0.0.0/8 actions=conjunction(7,2/2)",
            "table=40, priority=1000,ipv6 actions=conjunction(7,2/2)",
        ]
    );
}

#[test]
fn ct_labels_split_by_direction() {
    assert_eq!(ct_label(Direction::In, 5), (0x5, 0xffff_ffff));
    assert_eq!(
        ct_label(Direction::Out, 5),
        (0x5_0000_0000, 0xffff_ffff_0000_0000)
    );
    assert_eq!(
        ct_label(Direction::Out, u32::MAX),
        (0xffff_ffff_0000_0000, 0xffff_ffff_0000_0000)
    );
}

#[test]
fn reject_userdata_round_trips_and_refuses_anything_else() {
    for (d, id) in [
        (Direction::In, 2),
        (Direction::Out, 0x0102_0304),
        (Direction::In, u32::MAX),
    ] {
        let u = reject_userdata(d, id);
        assert_eq!(decode_reject_userdata(&u), Some((d, id)));
    }
    assert_eq!(
        reject_userdata(Direction::Out, 0x0102_0304),
        [1, 1, 1, 2, 3, 4]
    );
    let good = reject_userdata(Direction::In, 9);
    for bad in [
        &good[..5],
        &[good.as_slice(), &[0]].concat(),
        &[2, 0, 0, 0, 0, 9],
        &[1, 2, 0, 0, 0, 9],
        &[],
    ] {
        assert_eq!(decode_reject_userdata(bad), None, "{bad:?}");
    }
}

#[test]
fn a_logged_rule_sends_its_packets_to_tether_first() {
    let any = Addresses::Any;
    let services = Services::Any;
    let conj_flows = |direction, action| {
        let mut s = spec(direction, action, false, &any, &services);
        s.log = true;
        text(&rule_flows(&s))
            .into_iter()
            .filter(|f| f.contains("conj_id="))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        conj_flows(Direction::In, RuleAction::Allow),
        [
            "table=100, priority=1000,conj_id=7,ip actions=controller(userdata=02.00.00.00.00.07),ct(commit,table=120,zone=65520,exec(set_field:0x7/0xffffffff->ct_label))",
            "table=100, priority=1000,conj_id=7,ipv6 actions=controller(userdata=02.00.00.00.00.07),ct(commit,table=120,zone=65520,exec(set_field:0x7/0xffffffff->ct_label))",
        ]
    );
    assert_eq!(
        conj_flows(Direction::Out, RuleAction::Drop),
        [
            "table=40, priority=1000,conj_id=7 actions=controller(userdata=02.01.00.00.00.07),set_field:0x7->reg3,set_field:0x400/0x400->reg0,goto_table:60"
        ]
    );
    assert_eq!(
        conj_flows(Direction::In, RuleAction::Pass),
        [
            "table=100, priority=1000,conj_id=7 actions=controller(userdata=02.00.00.00.00.07),goto_table:110"
        ]
    );
}

#[test]
fn log_userdata_round_trips_and_is_not_a_reject() {
    let u = log_userdata(Direction::Out, 0x0102_0304);
    assert_eq!(u, [2, 1, 1, 2, 3, 4]);
    assert_eq!(decode_log_userdata(&u), Some((Direction::Out, 0x0102_0304)));
    assert_eq!(decode_reject_userdata(&u), None);
    assert_eq!(
        decode_log_userdata(&reject_userdata(Direction::In, 1)),
        None
    );
}
