//! The compiler on controlplane states fed through the watch events, as the source feeds
//! them: every rule shape as exact `ovs-ofctl` text, statuses, and what stays put across
//! calls (ids, priorities, flows).

use serde_json::{Value, json};

use super::*;
use crate::controlplane::event::{decode_group_event, decode_policy_event};
use crate::openflow::ofctl::format_flow;

mod world;
use world::*;

/// The single rule of a fresh compile: id 2 (the first after the reserved one), priority
/// in the middle of its range (64990 - 64891/2, or 181 - 172/2 in a baseline table).
const P: u16 = 32545;
const P_BASELINE: u16 = 95;

fn compile_one(w: &World) -> CompiledRule {
    let c = Compiler::new().compile(&w.state(), PORTS).unwrap();
    assert_eq!(c.rules.len(), 1, "{:?}", c.rules);
    c.rules.into_iter().next().unwrap()
}

fn text(flows: &[Flow]) -> Vec<String> {
    flows
        .iter()
        .map(|f| format_flow(&f.to_desc(), false))
        .collect()
}

fn realized(r: &CompiledRule) -> Vec<String> {
    assert_eq!(r.status, RuleStatus::Realizable, "{}", r.rule_name);
    text(&r.flows)
}

#[test]
fn the_worked_example_annp1_rejects_ssh_from_vm2_and_a_cidr() {
    // The controller's own lines (src/controlplane/fixtures.rs): Reject TCP 22 from the
    // AddressGroup of vm2 (172.16.100.4) and ipBlock 172.16.100.5/32.
    let mut s = State::new();
    for line in [NP_ADDED, NP_BOOKMARK] {
        s.on_policy_event(decode_policy_event(line.as_bytes()).unwrap());
    }
    for (kind, lines) in [
        (GroupKind::AppliedTo, [ATG_ADDED, ATG_BOOKMARK]),
        (GroupKind::Address, [AG_ADDED, AG_BOOKMARK]),
    ] {
        for line in lines {
            s.on_group_event(kind, decode_group_event(kind, line.as_bytes()).unwrap());
        }
    }
    assert!(s.synced());
    let c = Compiler::new().compile(&s, PORTS).unwrap();
    assert_eq!(c.base, base_flows(PORTS));
    let [r] = c.rules.as_slice() else {
        panic!("{:?}", c.rules)
    };
    let uid = "5c1a6a2e-0000-4000-8000-00000000a001";
    assert_eq!(
        (r.key.clone(), r.policy.as_str(), r.rule_name.as_str()),
        (
            RuleKey {
                policy_uid: uid.into(),
                index: 0
            },
            uid,
            "RULE"
        )
    );
    assert_eq!(
        (r.direction, r.action, r.conj_id, r.table, r.priority),
        (Direction::In, RuleAction::Reject, 2, 100, P)
    );
    assert_eq!(r.owner, Owner::new(Category::NETWORK_POLICY, 2));
    assert_eq!(
        realized(r),
        [
            "table=100, priority=32545,ip,nw_src=172.16.100.4 actions=conjunction(2,1/3)",
            "table=100, priority=32545,ip,nw_src=172.16.100.5 actions=conjunction(2,1/3)",
            "table=100, priority=32545,reg1=0x3 actions=conjunction(2,2/3)",
            "table=100, priority=32545,tcp,tp_dst=22 actions=conjunction(2,3/3)",
            "table=100, priority=32545,tcp6,tp_dst=22 actions=conjunction(2,3/3)",
            "table=100, priority=32545,conj_id=2 actions=set_field:0x2->reg3,set_field:0x400/0x400->reg0,goto_table:120",
            "table=120, priority=200,reg0=0x400/0x400,reg3=0x2 actions=controller(userdata=01.00.00.00.00.02)",
        ]
    );
}

#[test]
fn ingress_allow_from_an_address_group_to_tcp_80() {
    let w = World::new().ag("ag-web", &["10.0.0.5"]).policy(policy(
        "p1",
        250,
        1.0,
        vec![ingress(
            "Allow",
            json!({"addressGroups": ["ag-web"]}),
            json!([{"protocol": "TCP", "port": 80}]),
        )],
    ));
    assert_eq!(
        realized(&compile_one(&w)),
        [
            "table=100, priority=32545,ip,nw_src=10.0.0.5 actions=conjunction(2,1/3)",
            "table=100, priority=32545,reg1=0x3 actions=conjunction(2,2/3)",
            "table=100, priority=32545,tcp,tp_dst=80 actions=conjunction(2,3/3)",
            "table=100, priority=32545,tcp6,tp_dst=80 actions=conjunction(2,3/3)",
            "table=100, priority=32545,conj_id=2,ip actions=ct(commit,table=120,zone=65520,exec(set_field:0x2/0xffffffff->ct_label))",
            "table=100, priority=32545,conj_id=2,ipv6 actions=ct(commit,table=120,zone=65520,exec(set_field:0x2/0xffffffff->ct_label))",
            "table=120, priority=200,ct_state=+new+trk,ct_label=0x2/0xffffffff actions=goto_table:130",
            "table=120, priority=200,ct_state=-new+trk,ct_label=0x2/0xffffffff actions=goto_table:130",
        ]
    );
}

#[test]
fn egress_drop_to_an_ip_block_with_except() {
    // 10.0.0.0/8 except 10.1.0.0/16 is eight CIDRs (the reference's example).
    let w = World::new().policy(policy(
        "p1",
        250,
        1.0,
        vec![egress(
            "Drop",
            json!({"ipBlocks": [{"cidr": cidr("10.0.0.0/8"), "except": [cidr("10.1.0.0/16")]}]}),
            json!([]),
        )],
    ));
    let r = compile_one(&w);
    assert_eq!((r.table, r.priority), (40, P));
    assert_eq!(
        realized(&r),
        [
            "table=40, priority=32545,in_port=3 actions=conjunction(2,1/2)",
            "table=40, priority=32545,ip,nw_dst=10.0.0.0/16 actions=conjunction(2,2/2)",
            "table=40, priority=32545,ip,nw_dst=10.2.0.0/15 actions=conjunction(2,2/2)",
            "table=40, priority=32545,ip,nw_dst=10.4.0.0/14 actions=conjunction(2,2/2)",
            "table=40, priority=32545,ip,nw_dst=10.8.0.0/13 actions=conjunction(2,2/2)",
            "table=40, priority=32545,ip,nw_dst=10.16.0.0/12 actions=conjunction(2,2/2)",
            "table=40, priority=32545,ip,nw_dst=10.32.0.0/11 actions=conjunction(2,2/2)",
            "table=40, priority=32545,ip,nw_dst=10.64.0.0/10 actions=conjunction(2,2/2)",
            "table=40, priority=32545,ip,nw_dst=10.128.0.0/9 actions=conjunction(2,2/2)",
            "table=40, priority=32545,conj_id=2 actions=set_field:0x2->reg3,set_field:0x400/0x400->reg0,goto_table:60",
            "table=60, priority=200,reg0=0x400/0x400,reg3=0x2 actions=drop",
        ]
    );
}

#[test]
fn ingress_reject_udp() {
    let w = World::new().policy(policy(
        "p1",
        250,
        1.0,
        vec![ingress(
            "Reject",
            json!({"ipBlocks": [{"cidr": cidr("192.0.2.0/24")}]}),
            json!([{"protocol": "UDP", "port": 53}]),
        )],
    ));
    assert_eq!(
        realized(&compile_one(&w)),
        [
            "table=100, priority=32545,ip,nw_src=192.0.2.0/24 actions=conjunction(2,1/3)",
            "table=100, priority=32545,reg1=0x3 actions=conjunction(2,2/3)",
            "table=100, priority=32545,udp,tp_dst=53 actions=conjunction(2,3/3)",
            "table=100, priority=32545,udp6,tp_dst=53 actions=conjunction(2,3/3)",
            "table=100, priority=32545,conj_id=2 actions=set_field:0x2->reg3,set_field:0x400/0x400->reg0,goto_table:120",
            "table=120, priority=200,reg0=0x400/0x400,reg3=0x2 actions=controller(userdata=01.00.00.00.00.02)",
        ]
    );
}

#[test]
fn an_empty_peer_is_any_address_and_no_services_is_any_traffic() {
    let w = World::new().policy(policy(
        "p1",
        250,
        1.0,
        vec![ingress("Allow", json!({}), json!([]))],
    ));
    assert_eq!(
        realized(&compile_one(&w)),
        [
            "table=100, priority=32545,ip actions=conjunction(2,1/2)",
            "table=100, priority=32545,ipv6 actions=conjunction(2,1/2)",
            "table=100, priority=32545,reg1=0x3 actions=conjunction(2,2/2)",
            "table=100, priority=32545,conj_id=2,ip actions=ct(commit,table=120,zone=65520,exec(set_field:0x2/0xffffffff->ct_label))",
            "table=100, priority=32545,conj_id=2,ipv6 actions=ct(commit,table=120,zone=65520,exec(set_field:0x2/0xffffffff->ct_label))",
            "table=120, priority=200,ct_state=+new+trk,ct_label=0x2/0xffffffff actions=goto_table:130",
            "table=120, priority=200,ct_state=-new+trk,ct_label=0x2/0xffffffff actions=goto_table:130",
        ]
    );
}

#[test]
fn egress_allow_icmp_type_8_code_0() {
    // Echo request; the same numbers go into the icmp6 match (see `flows::service`).
    let w = World::new().policy(policy(
        "p1",
        250,
        1.0,
        vec![egress(
            "Allow",
            json!({"ipBlocks": [{"cidr": cidr("198.51.100.7/32")}]}),
            json!([{"protocol": "ICMP", "icmpType": 8, "icmpCode": 0}]),
        )],
    ));
    assert_eq!(
        realized(&compile_one(&w)),
        [
            "table=40, priority=32545,in_port=3 actions=conjunction(2,1/3)",
            "table=40, priority=32545,ip,nw_dst=198.51.100.7 actions=conjunction(2,2/3)",
            "table=40, priority=32545,icmp,icmp_type=8,icmp_code=0 actions=conjunction(2,3/3)",
            "table=40, priority=32545,icmp6,icmp_type=8,icmp_code=0 actions=conjunction(2,3/3)",
            "table=40, priority=32545,conj_id=2,ip actions=ct(commit,table=60,zone=65520,exec(set_field:0x200000000/0xffffffff00000000->ct_label))",
            "table=40, priority=32545,conj_id=2,ipv6 actions=ct(commit,table=60,zone=65520,exec(set_field:0x200000000/0xffffffff00000000->ct_label))",
            "table=60, priority=200,ct_state=+new+trk,ct_label=0x200000000/0xffffffff00000000 actions=goto_table:70",
            "table=60, priority=200,ct_state=-new+trk,ct_label=0x200000000/0xffffffff00000000 actions=goto_table:70",
        ]
    );
}

#[test]
fn ipv6_peers_from_a_group_and_a_block() {
    let w = World::new()
        .ag("ag-v6", &["fd00::5", "10.0.0.9"])
        .policy(policy(
            "p1",
            250,
            1.0,
            vec![ingress(
                "Drop",
                json!({"addressGroups": ["ag-v6"], "ipBlocks": [{"cidr": cidr("2001:db8::/32")}]}),
                json!([]),
            )],
        ));
    assert_eq!(
        realized(&compile_one(&w)),
        [
            "table=100, priority=32545,ip,nw_src=10.0.0.9 actions=conjunction(2,1/2)",
            "table=100, priority=32545,ipv6,ipv6_src=2001:db8::/32 actions=conjunction(2,1/2)",
            "table=100, priority=32545,ipv6,ipv6_src=fd00::5 actions=conjunction(2,1/2)",
            "table=100, priority=32545,reg1=0x3 actions=conjunction(2,2/2)",
            "table=100, priority=32545,conj_id=2 actions=set_field:0x2->reg3,set_field:0x400/0x400->reg0,goto_table:120",
            "table=120, priority=200,reg0=0x400/0x400,reg3=0x2 actions=drop",
        ]
    );
}

#[test]
fn a_port_range_is_value_mask_pairs() {
    // 8000-8080: 8000-8063, 8064-8079, 8080.
    let w = World::new().policy(policy(
        "p1",
        250,
        1.0,
        vec![ingress(
            "Allow",
            json!({}),
            json!([{"protocol": "TCP", "port": 8000, "endPort": 8080}]),
        )],
    ));
    let got = realized(&compile_one(&w));
    assert_eq!(
        &got[3..9],
        [
            "table=100, priority=32545,tcp,tp_dst=0x1f40/0xffc0 actions=conjunction(2,3/3)",
            "table=100, priority=32545,tcp,tp_dst=0x1f80/0xfff0 actions=conjunction(2,3/3)",
            "table=100, priority=32545,tcp,tp_dst=8080 actions=conjunction(2,3/3)",
            "table=100, priority=32545,tcp6,tp_dst=0x1f40/0xffc0 actions=conjunction(2,3/3)",
            "table=100, priority=32545,tcp6,tp_dst=0x1f80/0xfff0 actions=conjunction(2,3/3)",
            "table=100, priority=32545,tcp6,tp_dst=8080 actions=conjunction(2,3/3)",
        ]
    );
    assert_eq!(got.len(), 13);
}

#[test]
fn baseline_tier_rules_land_in_the_baseline_tables() {
    let w = World::new().policy(policy(
        "base",
        253,
        1.0,
        vec![
            ingress("Drop", json!({}), json!([])),
            egress("Allow", json!({}), json!([])),
        ],
    ));
    let c = Compiler::new().compile(&w.state(), PORTS).unwrap();
    let [i, e] = c.rules.as_slice() else {
        panic!("{:?}", c.rules)
    };
    assert_eq!(
        (i.table, i.priority, e.table, e.priority),
        (110, P_BASELINE, 50, P_BASELINE)
    );
    assert_eq!(
        realized(i),
        [
            "table=110, priority=95,ip actions=conjunction(2,1/2)",
            "table=110, priority=95,ipv6 actions=conjunction(2,1/2)",
            "table=110, priority=95,reg1=0x3 actions=conjunction(2,2/2)",
            "table=110, priority=95,conj_id=2 actions=set_field:0x2->reg3,set_field:0x400/0x400->reg0,goto_table:120",
            "table=120, priority=200,reg0=0x400/0x400,reg3=0x2 actions=drop",
        ]
    );
    assert_eq!(
        realized(e),
        [
            "table=50, priority=95,in_port=3 actions=conjunction(3,1/2)",
            "table=50, priority=95,ip actions=conjunction(3,2/2)",
            "table=50, priority=95,ipv6 actions=conjunction(3,2/2)",
            "table=50, priority=95,conj_id=3,ip actions=ct(commit,table=60,zone=65520,exec(set_field:0x300000000/0xffffffff00000000->ct_label))",
            "table=50, priority=95,conj_id=3,ipv6 actions=ct(commit,table=60,zone=65520,exec(set_field:0x300000000/0xffffffff00000000->ct_label))",
            "table=60, priority=200,ct_state=+new+trk,ct_label=0x300000000/0xffffffff00000000 actions=goto_table:70",
            "table=60, priority=200,ct_state=-new+trk,ct_label=0x300000000/0xffffffff00000000 actions=goto_table:70",
        ]
    );
}

#[test]
fn pass_goes_to_the_baseline_table() {
    let w = World::new().policy(policy(
        "p1",
        100,
        1.0,
        vec![
            ingress("Pass", json!({}), json!([{"protocol": "TCP", "port": 22}])),
            egress("Pass", json!({}), json!([])),
        ],
    ));
    let c = Compiler::new().compile(&w.state(), PORTS).unwrap();
    let [i, e] = c.rules.as_slice() else {
        panic!("{:?}", c.rules)
    };
    assert_eq!(
        realized(i),
        [
            "table=100, priority=32545,ip actions=conjunction(2,1/3)",
            "table=100, priority=32545,ipv6 actions=conjunction(2,1/3)",
            "table=100, priority=32545,reg1=0x3 actions=conjunction(2,2/3)",
            "table=100, priority=32545,tcp,tp_dst=22 actions=conjunction(2,3/3)",
            "table=100, priority=32545,tcp6,tp_dst=22 actions=conjunction(2,3/3)",
            "table=100, priority=32545,conj_id=2 actions=goto_table:110",
        ]
    );
    assert_eq!(
        realized(e).last().unwrap(),
        "table=40, priority=32545,conj_id=3 actions=goto_table:50"
    );
}

#[test]
fn unrealizable_rules_have_no_flows_and_say_why() {
    let cases = [
        (
            ingress(
                "Allow",
                json!({}),
                json!([{"protocol": "TCP", "port": "http"}]),
            ),
            "service 0: named port \"http\": named ports cannot be resolved on a VM",
        ),
        (
            ingress("Allow", json!({"addressGroups": ["ag-empty"]}), json!([])),
            "from: no address to match (from.addressGroups: ag-empty has no addresses)",
        ),
        (
            egress("Drop", json!({"fqdns": ["*.example.com"]}), json!([])),
            "to: no address to match (to.fqdns: FQDN peers are not supported on a VM yet)",
        ),
        (
            egress(
                "Allow",
                json!({"addressGroups": ["ag-unknown"], "ipBlocks": [
                    {"cidr": cidr("10.0.0.0/24"), "except": [cidr("10.0.0.0/24")]}
                ]}),
                json!([]),
            ),
            "to: no address to match (to.addressGroups: ag-unknown is not known yet; \
             to.ipBlocks: every CIDR is excepted)",
        ),
        (
            ingress("Drop", json!({}), json!([{"protocol": "IGMP"}])),
            "service 0: protocol IGMP is not supported",
        ),
        (
            {
                let mut r = ingress("Allow", json!({}), json!([]));
                r["l7Protocols"] = json!([{"http": {}}]);
                r
            },
            "l7Protocols: L7 rules cannot be enforced on a VM",
        ),
        (
            // Every reason, not only the first.
            ingress(
                "Allow",
                json!({"addressGroups": ["ag-empty"]}),
                json!([{"protocol": "UDP", "port": 53, "srcPort": 1024}]),
            ),
            "service 0: source ports are not matched yet; \
             from: no address to match (from.addressGroups: ag-empty has no addresses)",
        ),
    ];
    for (rule, why) in cases {
        let w = World::new()
            .ag("ag-empty", &[])
            .policy(policy("p1", 250, 1.0, vec![rule]));
        let r = compile_one(&w);
        assert_eq!(r.status, RuleStatus::NotRealizable(why.into()));
        assert!(r.flows.is_empty());
        // It still holds an id and a priority, ready for when it can be realized.
        assert_eq!((r.conj_id, r.priority), (2, P));
    }
}

#[test]
fn partly_realizable_rules_say_what_is_left_out() {
    let w = World::new().ag("ag-a", &["10.0.0.1"]).policy(policy(
        "p1",
        250,
        1.0,
        vec![egress(
            "Allow",
            json!({"addressGroups": ["ag-a", "ag-late"], "fqdns": ["db.example.com"]}),
            json!([
                {"protocol": "TCP", "port": "https"},
                {"protocol": "TCP", "port": 443},
                {"protocol": "UDP", "port": 53, "srcPort": 53}
            ]),
        )],
    ));
    let r = compile_one(&w);
    assert_eq!(
        r.status,
        RuleStatus::Partial(
            "service 0: named port \"https\": named ports cannot be resolved on a VM; \
             service 2: source ports are not matched yet; \
             to.fqdns: FQDN peers are not supported on a VM yet; \
             to.addressGroups: ag-late is not known yet"
                .into()
        )
    );
    assert_eq!(
        text(&r.flows[..4]),
        [
            "table=40, priority=32545,in_port=3 actions=conjunction(2,1/3)",
            "table=40, priority=32545,ip,nw_dst=10.0.0.1 actions=conjunction(2,2/3)",
            "table=40, priority=32545,tcp,tp_dst=443 actions=conjunction(2,3/3)",
            "table=40, priority=32545,tcp6,tp_dst=443 actions=conjunction(2,3/3)",
        ]
    );
}

#[test]
fn which_rules_apply() {
    let per_rule = |atg: &str| {
        let mut r = ingress("Allow", json!({}), json!([]));
        r["appliedToGroups"] = json!([atg]);
        r
    };
    let mut p = policy(
        "p1",
        250,
        1.0,
        vec![
            per_rule(VM_ATG),
            per_rule("atg-empty"),
            per_rule("atg-unknown"),
            // No appliedTo of its own in a policy without one: applies to nothing.
            ingress("Allow", json!({}), json!([])),
        ],
    );
    p["appliedToGroups"] = json!([]);
    let mut gone = policy("p2", 250, 1.0, vec![ingress("Allow", json!({}), json!([]))]);
    gone["appliedToGroups"] = json!(["atg-empty"]);
    let w = World::new().atg("atg-empty", 0).policy(p).policy(gone);
    let c = Compiler::new().compile(&w.state(), PORTS).unwrap();
    let keys: Vec<(&str, usize)> = c
        .rules
        .iter()
        .map(|r| (r.key.policy_uid.as_str(), r.index))
        .collect();
    assert_eq!(keys, [("p1", 0)]);
}

#[test]
fn tiers_then_policy_priorities_order_the_rules() {
    // Fresh numbering of three rules in table 100: 64990 - k·64891/4.
    let w = World::new()
        .policy(policy(
            "app",
            250,
            1.0,
            vec![ingress("Allow", json!({}), json!([]))],
        ))
        .policy(policy(
            "secops",
            100,
            5.0,
            vec![ingress("Drop", json!({}), json!([]))],
        ))
        .policy(policy(
            "app-first",
            250,
            0.5,
            vec![ingress("Drop", json!({}), json!([]))],
        ));
    let c = Compiler::new().compile(&w.state(), PORTS).unwrap();
    let prios: Vec<(&str, u16)> = c
        .rules
        .iter()
        .map(|r| (r.policy.as_str(), r.priority))
        .collect();
    assert_eq!(
        prios,
        [("app", 16322), ("app-first", 32545), ("secops", 48768)]
    );
}

fn numbered(n: usize) -> World {
    (0..n).fold(World::new(), |w, i| {
        w.policy(policy(
            &format!("p{i:03}"),
            250,
            10.0 * i as f64,
            vec![ingress(
                "Drop",
                json!({"ipBlocks": [{"cidr": cidr(&format!("10.0.{i}.0/24"))}]}),
                json!([{"protocol": "TCP", "port": 22}]),
            )],
        ))
    })
}

#[test]
fn adding_a_policy_leaves_every_other_rule_as_it_was() {
    let mut compiler = Compiler::new();
    let before = compiler.compile(&numbered(100).state(), PORTS).unwrap();
    // Between p041 (410) and p042 (420), and its uid sorts first.
    let w = numbered(100).policy(policy(
        "a-new",
        250,
        415.0,
        vec![egress("Allow", json!({}), json!([]))],
    ));
    let w = w.policy(policy(
        "a-new-in",
        250,
        415.0,
        vec![ingress("Allow", json!({}), json!([]))],
    ));
    let after = compiler.compile(&w.state(), PORTS).unwrap();
    assert_eq!(after.base, before.base);
    let old: BTreeMap<&RuleKey, &CompiledRule> = before.rules.iter().map(|r| (&r.key, r)).collect();
    let mut new = Vec::new();
    for r in &after.rules {
        match old.get(&r.key) {
            Some(o) => assert_eq!(*o, r, "{} changed", r.policy),
            None => new.push(r),
        }
    }
    let [eg, ing] = new.as_slice() else {
        panic!("{new:?}")
    };
    // New ids (the next ones), and priorities inside their neighbours' gap.
    assert_eq!((eg.conj_id, ing.conj_id), (102, 103));
    assert_eq!((eg.table, eg.priority), (40, P), "alone in table 40");
    let prio = |uid: &str| {
        old[&RuleKey {
            policy_uid: uid.into(),
            index: 0,
        }]
            .priority
    };
    assert!(prio("p041") > ing.priority && ing.priority > prio("p042"));
    // Recompiling the same state changes nothing.
    assert_eq!(compiler.compile(&w.state(), PORTS).unwrap(), after);
}

#[test]
fn conjunction_ids_are_stable_and_freed_with_their_rules() {
    let mut compiler = Compiler::new();
    let ids = |c: &Compiled| -> Vec<(String, u32)> {
        c.rules
            .iter()
            .map(|r| (r.key.policy_uid.clone(), r.conj_id))
            .collect()
    };
    let one = |uid: &str| policy(uid, 250, 1.0, vec![ingress("Allow", json!({}), json!([]))]);
    let abc = World::new()
        .policy(one("b"))
        .policy(one("c"))
        .policy(one("a"));
    let first = compiler.compile(&abc.state(), PORTS).unwrap();
    assert_eq!(
        ids(&first),
        [("a".into(), 2), ("b".into(), 3), ("c".into(), 4)]
    );
    // A policy sorting before the others gets the next id; the others keep theirs.
    let with_0 = World::new()
        .policy(one("0"))
        .policy(one("a"))
        .policy(one("b"))
        .policy(one("c"));
    let second = compiler.compile(&with_0.state(), PORTS).unwrap();
    assert_eq!(
        ids(&second),
        [
            ("0".into(), 5),
            ("a".into(), 2),
            ("b".into(), 3),
            ("c".into(), 4)
        ]
    );
    // b goes: its id is free and the next new rule takes it; its owner is no longer listed.
    let no_b = World::new()
        .policy(one("0"))
        .policy(one("a"))
        .policy(one("c"));
    let third = compiler.compile(&no_b.state(), PORTS).unwrap();
    assert_eq!(
        ids(&third),
        [("0".into(), 5), ("a".into(), 2), ("c".into(), 4)]
    );
    let objects: Vec<u32> = owners_of(&third).iter().map(|(o, _)| o.object).collect();
    assert_eq!(objects, [0, 2, 4, 5]);
    let d = no_b.policy(one("d"));
    let fourth = compiler.compile(&d.state(), PORTS).unwrap();
    assert_eq!(ids(&fourth).last(), Some(&("d".into(), 3)));
}

#[test]
fn owners_list_the_base_then_each_rule_by_id() {
    let w = World::new()
        .policy(policy(
            "b",
            250,
            1.0,
            vec![ingress("Drop", json!({}), json!([]))],
        ))
        .policy(policy(
            "a",
            250,
            2.0,
            vec![ingress("Allow", json!({"fqdns": ["x.example"]}), json!([]))],
        ));
    let c = Compiler::new().compile(&w.state(), PORTS).unwrap();
    let owners = owners_of(&c);
    assert_eq!(owners.len(), 3);
    assert_eq!(owners[0], (BASE_OWNER, c.base.clone()));
    // a (id 2) cannot be realized, and is listed with no flows so stale ones go.
    assert_eq!(owners[1], (Owner::new(Category::NETWORK_POLICY, 2), vec![]));
    assert_eq!(owners[2].0, Owner::new(Category::NETWORK_POLICY, 3));
    assert_eq!(owners[2].1.len(), 5);
}

#[test]
fn a_table_out_of_priorities_leaves_its_last_rules_unrealized() {
    // 172 baseline ingress rules for 171 priorities.
    let rules: Vec<Value> = (0..172)
        .map(|_| ingress("Drop", json!({}), json!([])))
        .collect();
    let w = World::new().policy(policy("big", 253, 1.0, rules));
    let c = Compiler::new().compile(&w.state(), PORTS).unwrap();
    assert_eq!(c.rules.len(), 172);
    assert_eq!((c.rules[0].priority, c.rules[170].priority), (180, 10));
    let last = &c.rules[171];
    assert_eq!((last.index, last.priority), (171, 0));
    assert!(last.flows.is_empty());
    assert_eq!(
        last.status,
        RuleStatus::NotRealizable(
            "table 110 holds 172 rules but has 171 priorities (10..=180); this rule is \
             among the last in order"
                .into()
        )
    );
}

mod update;
