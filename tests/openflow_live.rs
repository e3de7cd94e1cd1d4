//! tether's OpenFlow client against a real ovs-vswitchd in a sandbox: flows installed
//! through `OfFlows` read back exactly as expected in OVS's canonical dump, diffs and
//! removals, a rejected bundle installs nothing and names the error, no-flood shows in
//! the OF1.0 port list, a kill -9 and restart of ovs-vswitchd is healed by the replay,
//! stale rounds are deleted by cookie, and a bridge without OpenFlow15 is refused clearly.

// The shared harness re-exports more than this file uses.
#[path = "openflow/cases.rs"]
mod cases;
#[allow(unused_imports)]
mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Sandbox, privileged, wait_for};
use tether::openflow::action::Action;
use tether::openflow::conn::{Conn, ConnOptions};
use tether::openflow::consts::{Version, port};
use tether::openflow::flow::{Category, Flow, Owner, cookie};
use tether::openflow::oxm::{Match, MatchField, values};
use tether::openflow::{FlowChange, OfError, OfFlows, OfFlowsConfig};

const TC_A: Owner = Owner {
    category: Category::TRAFFIC_CONTROL,
    object: 0x2a,
};
const TC_B: Owner = Owner {
    category: Category::TRAFFIC_CONTROL,
    object: 0x2b,
};
const EN: Owner = Owner {
    category: Category::EXTERNAL_NODE,
    object: 1,
};

fn start(sb: &Sandbox, round: u16) -> OfFlows {
    let mut cfg = OfFlowsConfig::new(sb.dir().join("br-int.mgmt"), "br-int", round);
    assert_eq!(cfg.mgmt, sb.mgmt("br-int"));
    cfg.timeout = common::patience(Duration::from_secs(20));
    let of = OfFlows::start(cfg).expect("start OfFlows");
    of.wait_connected(common::patience(Duration::from_secs(10)))
        .expect("OfFlows connects");
    of
}

fn sandbox() -> Sandbox {
    let sb = Sandbox::start();
    sb.add_bridge("br-int");
    sb
}

fn add_internal_port(sb: &Sandbox, name: &str) -> u32 {
    sb.add_internal_port("br-int", name, &[]);
    sb.vsctl(&["get", "Interface", name, "ofport"])
        .trim()
        .parse()
        .expect("ofport is a number")
}

/// Output-table flows as in docs/antrea-compat.md#trafficcontrol-flows (mirror, redirect,
/// normal, miss).
fn output_flows() -> Vec<Flow> {
    let out_mark = MatchField::Reg {
        idx: 0,
        value: 0x200000,
        mask: Some(0x600000),
    };
    vec![
        Flow::new(3, 211)
            .matching(out_mark.clone())
            .matching(MatchField::Reg {
                idx: 4,
                value: 0x400000,
                mask: Some(0xc00000),
            })
            .actions([Action::output_reg(1), Action::output_reg(9)]),
        Flow::new(3, 211)
            .matching(out_mark.clone())
            .matching(MatchField::Reg {
                idx: 4,
                value: 0x800000,
                mask: Some(0xc00000),
            })
            .actions([Action::output_reg(9)]),
        Flow::new(3, 200)
            .matching(out_mark)
            .actions([Action::output_reg(1)]),
        Flow::new(3, 0).actions([Action::output(port::NORMAL)]),
    ]
}

fn en_flows() -> Vec<Flow> {
    vec![
        Flow::new(1, 200)
            .matching(MatchField::InPort(1))
            .matching(MatchField::EthType(values::ETH_TYPE_IPV4))
            .actions([
                Action::load_reg(0, 0x200000, 0x600000),
                Action::load_reg(1, 2, u32::MAX),
            ])
            .goto(2),
        Flow::new(16, 200)
            .matching(MatchField::InPort(2))
            .actions([Action::output(1)]),
        Flow::new(16, 190)
            .matching(MatchField::InPort(3))
            .actions([Action::output(port::IN_PORT), Action::resubmit(3)]),
    ]
}

const TCP_FLOW: &str = "cookie=0x101000000002a, table=2, priority=200,ct_state=+new-inv+trk,tcp,reg0=0x200006/0x60000f,reg1=0x32,in_port=5,dl_src=02:00:00:00:00:00/ff:ff:ff:00:00:00,dl_dst=02:00:00:00:00:0b,nw_src=192.0.2.0/24,nw_dst=198.51.100.7,tp_src=1024,tp_dst=443 actions=set_field:0xc8->reg9,set_field:0x800000/0xc00000->reg4,goto_table:3";
const V6_FLOW: &str = "cookie=0x101000000002a, table=4, priority=190,icmp6,ipv6_src=2001:db8::/32,ipv6_dst=2001:db8::1,icmp_type=135 actions=output:NXM_NX_REG1[],output:NXM_NX_REG9[],NORMAL,IN_PORT,output:7,resubmit(,5)";
const UDP_FLOW: &str =
    "cookie=0x101000000002a, table=1, priority=200,udp,tp_src=68,tp_dst=67 actions=NORMAL";
const ICMP_FLOW: &str =
    "cookie=0x101000000002a, table=1, priority=200,icmp,icmp_type=8 actions=goto_table:2";
const OUTPUT_FLOWS: [&str; 4] = [
    "cookie=0x101000000002b, table=3, priority=0 actions=NORMAL",
    "cookie=0x101000000002b, table=3, priority=200,reg0=0x200000/0x600000 actions=output:NXM_NX_REG1[]",
    "cookie=0x101000000002b, table=3, priority=211,reg0=0x200000/0x600000,reg4=0x400000/0xc00000 actions=output:NXM_NX_REG1[],output:NXM_NX_REG9[]",
    "cookie=0x101000000002b, table=3, priority=211,reg0=0x200000/0x600000,reg4=0x800000/0xc00000 actions=output:NXM_NX_REG9[]",
];
const EN_FLOWS: [&str; 3] = [
    "cookie=0x1080000000001, table=1, priority=200,ip,in_port=1 actions=set_field:0x200000/0x600000->reg0,set_field:0x2->reg1,goto_table:2",
    "cookie=0x1080000000001, table=16, priority=190,in_port=3 actions=IN_PORT,resubmit(,3)",
    "cookie=0x1080000000001, table=16, priority=200,in_port=2 actions=output:1",
];

fn sorted(v: impl IntoIterator<Item = impl ToString>) -> Vec<String> {
    let mut v: Vec<String> = v.into_iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

fn representative(of: &OfFlows) {
    let mut tc_a = vec![cases::tcp_flow(), cases::v6_flow()];
    tc_a.extend(cases::udp_icmp_flows());
    of.apply(TC_A, tc_a).expect("apply TC_A");
    of.apply(TC_B, output_flows()).expect("apply TC_B");
    of.apply(EN, en_flows()).expect("apply EN");
}

fn all_expected() -> Vec<String> {
    let mut want = vec![
        TCP_FLOW.to_string(),
        V6_FLOW.to_string(),
        UDP_FLOW.to_string(),
        ICMP_FLOW.to_string(),
        "priority=0 actions=NORMAL".to_string(),
    ];
    want.extend(OUTPUT_FLOWS.iter().map(|s| s.to_string()));
    want.extend(EN_FLOWS.iter().map(|s| s.to_string()));
    sorted(want)
}

#[test]
fn installs_diffs_and_removes_exactly() {
    if !privileged("installs_diffs_and_removes_exactly") {
        return;
    }
    let sb = sandbox();
    let of = start(&sb, 1);
    representative(&of);
    assert_eq!(sb.dump_flows("br-int", None), all_expected());

    // Read back through our own multipart decoder: same flows, same cookies.
    let descs = of
        .dump(cookie(1, TC_A.category, TC_A.object), u64::MAX)
        .unwrap();
    assert_eq!(descs.len(), 4);
    let mut got: Vec<(u8, u16, Match)> = descs
        .iter()
        .map(|d| {
            (
                d.table_id,
                d.priority,
                Match::new(d.match_.fields().to_vec()),
            )
        })
        .collect();
    got.sort();
    let mut want: Vec<(u8, u16, Match)> = of
        .installed(TC_A)
        .into_iter()
        .map(|f| (f.key.table, f.key.priority, f.key.match_))
        .collect();
    want.sort();
    assert_eq!(got, want);
    for d in &descs {
        let f = of
            .installed(TC_A)
            .into_iter()
            .find(|f| f.key.table == d.table_id && f.key.priority == d.priority)
            .unwrap();
        if d.table_id != 1 {
            assert_eq!(
                d.instructions, *f.value.instructions,
                "table {}",
                d.table_id
            );
        }
    }

    // A diff: keep the TCP flow, change the UDP flow's actions, drop the rest, add one.
    let changed_udp = cases::udp_icmp_flows()[0]
        .clone()
        .actions([Action::output(4)]);
    let extra = Flow::new(0, 100)
        .matching(MatchField::EthType(values::ETH_TYPE_IPV6))
        .goto(1);
    of.apply(TC_A, vec![cases::tcp_flow(), changed_udp, extra])
        .unwrap();
    let mut want = vec![
        TCP_FLOW.to_string(),
        "cookie=0x101000000002a, table=1, priority=200,udp,tp_src=68,tp_dst=67 actions=NORMAL,output:4".to_string(),
        "cookie=0x101000000002a, priority=100,ipv6 actions=goto_table:1".to_string(),
    ];
    want.extend(OUTPUT_FLOWS.iter().map(|s| s.to_string()));
    want.extend(EN_FLOWS.iter().map(|s| s.to_string()));
    want.push("priority=0 actions=NORMAL".to_string());
    assert_eq!(sb.dump_flows("br-int", None), sorted(want));

    // Applying the same set again sends nothing and changes nothing.
    let before = sb.dump_flows("br-int", None);
    let changed_udp = cases::udp_icmp_flows()[0]
        .clone()
        .actions([Action::output(4)]);
    let extra = Flow::new(0, 100)
        .matching(MatchField::EthType(values::ETH_TYPE_IPV6))
        .goto(1);
    of.apply(TC_A, vec![extra, changed_udp, cases::tcp_flow()])
        .unwrap();
    assert_eq!(sb.dump_flows("br-int", None), before);

    of.remove(TC_A).unwrap();
    of.remove(EN).unwrap();
    let mut want: Vec<String> = OUTPUT_FLOWS.iter().map(|s| s.to_string()).collect();
    want.push("priority=0 actions=NORMAL".to_string());
    assert_eq!(sb.dump_flows("br-int", None), sorted(want));
    assert!(of.installed(TC_A).is_empty());

    // A key held by one owner cannot be taken by an owner of another category.
    let err = of.apply(EN, output_flows()).unwrap_err();
    assert!(matches!(err, OfError::Conflict { .. }), "{err}");
}

#[test]
fn a_bundle_with_one_invalid_flow_installs_nothing() {
    if !privileged("a_bundle_with_one_invalid_flow_installs_nothing") {
        return;
    }
    let sb = sandbox();
    let of = start(&sb, 1);
    of.apply(TC_B, output_flows()).unwrap();
    let before = sb.dump_flows("br-int", None);
    // tcp_dst without eth_type/ip_proto: OVS rejects the prerequisite (OF1.5 §7.2.3.6).
    let bad = Flow::new(2, 200)
        .matching(MatchField::TcpDst(80))
        .actions([Action::output(1)]);
    let mut flows = en_flows();
    flows.insert(1, bad);
    let err = of.apply(EN, flows).unwrap_err();
    match &err {
        OfError::Switch { name, failed, .. } => {
            assert_eq!(name, "OFPBMC_BAD_PREREQ");
            assert!(
                failed.starts_with("flow_mod ADD table=2 priority=200"),
                "{failed}"
            );
        }
        other => panic!("expected a switch error, got {other}"),
    }
    assert_eq!(
        err.to_string(),
        "switch rejected flow_mod ADD table=2 priority=200 match=Match { fields: [TcpDst(80)] }: \
         OFPBMC_BAD_PREREQ (type 4, code 9)"
    );
    assert_eq!(sb.dump_flows("br-int", None), before);
    assert!(of.installed(EN).is_empty());
    // The connection is fine and the same owner can still install a valid set.
    of.apply(EN, en_flows()).unwrap();
    assert_eq!(
        sb.dump_flows("br-int", Some("cookie=0x1080000000001/-1")),
        sorted(EN_FLOWS)
    );
}

/// Owner `i` of 16 TCs: one flow, in_port=100+i → output:1 (distinct keys).
fn tc_flow(i: u32) -> (Owner, Flow) {
    let owner = Owner {
        category: Category::TRAFFIC_CONTROL,
        object: 0x100 + i,
    };
    let f = Flow::new(3, 200)
        .matching(MatchField::InPort(100 + i))
        .actions([Action::output(1)]);
    (owner, f)
}

/// Applies from 16 threads while a big bundle holds the switch: they queue and go
/// together as the next bundle; one of them invalid makes that bundle fail, and then each
/// goes alone, so only the invalid one fails and the switch holds exactly the others.
#[test]
fn concurrent_applies_share_one_bundle_and_isolate_a_bad_one() {
    if !privileged("concurrent_applies_share_one_bundle_and_isolate_a_bad_one") {
        return;
    }
    let sb = sandbox();
    let of = Arc::new(start(&sb, 1));
    of.reconnects()
        .recv_timeout(common::patience(Duration::from_secs(10)))
        .expect("the first connection's replay");
    // 30,000 flows keep the switch busy for a while (hundreds of ms).
    let big = Owner {
        category: Category::DEFAULT,
        object: 9,
    };
    let big_flows: Vec<Flow> = (0..30_000u32)
        .map(|i| {
            Flow::new(5, 100)
                .matching(MatchField::InPort(1000 + i))
                .actions([Action::output(1)])
        })
        .collect();
    let run = |bad: Option<u32>| {
        let before = of.counts();
        let holder = {
            let of = of.clone();
            let flows = big_flows.clone();
            std::thread::spawn(move || of.apply(big, flows))
        };
        // Until the big bundle is on its way (its planning is quick).
        std::thread::sleep(Duration::from_millis(30));
        let threads: Vec<_> = (0..16u32)
            .map(|i| {
                let of = of.clone();
                let (owner, mut f) = tc_flow(i);
                if Some(i) == bad {
                    // tcp_dst without its prerequisites: the switch refuses it.
                    f = Flow::new(3, 200)
                        .matching(MatchField::TcpDst(80))
                        .actions([Action::output(1)]);
                }
                std::thread::spawn(move || (i, of.apply(owner, vec![f])))
            })
            .collect();
        let results: Vec<(u32, bool)> = threads
            .into_iter()
            .map(|t| {
                let (i, r) = t.join().unwrap();
                (i, r.is_ok())
            })
            .collect();
        holder.join().unwrap().unwrap();
        (results, of.counts().bundles - before.bundles)
    };
    let (results, bundles) = run(None);
    assert!(results.iter().all(|(_, ok)| *ok), "{results:?}");
    assert_eq!(bundles, 2, "the big bundle, then the 16 together");
    for i in 0..16 {
        of.remove(tc_flow(i).0).unwrap();
    }
    of.remove(big).unwrap();

    let (results, bundles) = run(Some(5));
    for (i, ok) in &results {
        assert_eq!(*ok, *i != 5, "thread {i}: {results:?}");
    }
    assert_eq!(bundles, 1 + 15, "the big one, then the 15 good ones alone");
    assert!(of.installed(tc_flow(5).0).is_empty());
    let table3: Vec<String> = sb
        .dump_flows("br-int", Some("table=3"))
        .into_iter()
        .collect();
    let mut want: Vec<String> = (0..16u32)
        .filter(|i| *i != 5)
        .map(|i| {
            format!(
                "cookie=0x101{:010x}, table=3, priority=200,in_port={} actions=output:1",
                0x100 + i,
                100 + i
            )
        })
        .collect();
    want.sort();
    assert_eq!(table3, want);
}

fn no_flood_ports(sb: &Sandbox) -> Vec<String> {
    // `ovs-ofctl -O OpenFlow10 show`: " 1(tc0): addr:…" then "     config:     NO_FLOOD".
    let show = sb.ofctl(&["-O", "OpenFlow10", "show", "br-int"]);
    let mut current = String::new();
    let mut out = Vec::new();
    for line in show.lines() {
        if let Some((head, _)) = line.trim_start().split_once(": addr:") {
            current = head.to_string();
        } else if line.trim_start().starts_with("config:") && line.contains("NO_FLOOD") {
            out.push(current.clone());
        }
    }
    out.sort();
    out
}

#[test]
fn no_flood_is_set_cleared_and_checked() {
    if !privileged("no_flood_is_set_cleared_and_checked") {
        return;
    }
    let sb = sandbox();
    let tc0 = add_internal_port(&sb, "tc0");
    let tc1 = add_internal_port(&sb, "tc1");
    let of = start(&sb, 1);
    of.set_no_flood(tc0, true).unwrap();
    of.set_no_flood(tc1, true).unwrap();
    assert_eq!(
        no_flood_ports(&sb),
        vec![format!("{tc0}(tc0)"), format!("{tc1}(tc1)")]
    );
    of.set_no_flood(tc1, false).unwrap();
    assert_eq!(no_flood_ports(&sb), vec![format!("{tc0}(tc0)")]);
    assert_eq!(
        of.set_no_flood(77, true).unwrap_err(),
        OfError::PortNotFound { ofport: 77 }
    );
}

#[test]
fn kill9_of_vswitchd_is_healed_by_replay() {
    if !privileged("kill9_of_vswitchd_is_healed_by_replay") {
        return;
    }
    let sb = sandbox();
    let tc0 = add_internal_port(&sb, "tc0");
    let of = start(&sb, 1);
    representative(&of);
    of.set_no_flood(tc0, true).unwrap();
    let flows_before = sb.dump_flows("br-int", None);
    assert_eq!(flows_before, all_expected());
    let nf_before = no_flood_ports(&sb);
    assert_eq!(nf_before, vec![format!("{tc0}(tc0)")]);
    // Drain the replay signal of the first connection.
    let first = of
        .reconnects()
        .recv_timeout(common::patience(Duration::from_secs(5)))
        .unwrap();

    sb.kill9("ovs-vswitchd");
    let restarted = std::time::Instant::now();
    sb.start_vswitchd();
    let generation = of
        .reconnects()
        .recv_timeout(common::patience(Duration::from_secs(10)))
        .unwrap();
    assert!(generation > first, "generation {generation} after {first}");
    // Poll rather than assert a time: the replay and the OF1.0 reconnect race each other.
    wait_for(
        Duration::from_secs(10),
        "flows and no-flood replayed",
        || {
            (sb.dump_flows("br-int", None) == flows_before && no_flood_ports(&sb) == nf_before)
                .then_some(())
        },
    );
    // A figure for the record, not an assertion (timing depends on the machine).
    eprintln!(
        "replayed {:?} after restarting ovs-vswitchd",
        restarted.elapsed()
    );
}

#[test]
fn stale_round_is_deleted_by_cookie() {
    if !privileged("stale_round_is_deleted_by_cookie") {
        return;
    }
    let sb = sandbox();
    {
        let old = start(&sb, 1);
        old.apply(TC_B, output_flows()).unwrap();
    }
    let new = start(&sb, 2);
    new.apply(EN, en_flows()).unwrap();
    assert_eq!(
        sb.dump_flows("br-int", Some("cookie=0x1000000000000/0xffff000000000000"))
            .len(),
        4
    );
    new.delete_round(1).unwrap();
    let want: Vec<String> = EN_FLOWS
        .iter()
        .map(|s| s.replace("cookie=0x108", "cookie=0x208"))
        .collect();
    let mut want = sorted(want);
    want.push("priority=0 actions=NORMAL".to_string());
    assert_eq!(sb.dump_flows("br-int", None), sorted(want));
}

/// A run that crashed before persisting its round leaves flows under the round the next
/// run picks again. The first connection sends no bundle of its own for them (one more
/// flow-table commit costs the switch seconds at 5,000 ports): their delete heads the
/// first bundle, so they are gone the moment the first flows arrive.
#[test]
fn leftovers_of_the_same_round_go_with_the_first_bundle() {
    if !privileged("leftovers_of_the_same_round_go_with_the_first_bundle") {
        return;
    }
    let sb = sandbox();
    {
        let crashed = start(&sb, 1);
        crashed.apply(TC_B, output_flows()).unwrap();
    }
    let again = start(&sb, 1);
    // The connection's replay is done (with nothing to put back).
    again
        .reconnects()
        .recv_timeout(common::patience(Duration::from_secs(10)))
        .expect("replay after the first connection");
    assert_eq!(
        sb.dump_flows("br-int", None).len(),
        5,
        "leftovers still there"
    );
    let before = again.counts();
    again.apply(EN, en_flows()).unwrap();
    assert_eq!(again.counts().bundles - before.bundles, 1);
    let mut want = sorted(EN_FLOWS);
    want.push("priority=0 actions=NORMAL".to_string());
    assert_eq!(sb.dump_flows("br-int", None), sorted(want));
}

#[test]
fn a_bridge_without_openflow15_is_refused_clearly() {
    if !privileged("a_bridge_without_openflow15_is_refused_clearly") {
        return;
    }
    let sb = Sandbox::start();
    sb.vsctl(&[
        "add-br",
        "br-int",
        "--",
        "set",
        "bridge",
        "br-int",
        "datapath_type=netdev",
        "protocols=OpenFlow10,OpenFlow13",
    ]);
    let conn = Conn::start(
        &sb.mgmt("br-int"),
        ConnOptions::new(Version::OF15, "of15-test"),
    )
    .unwrap();
    let err = wait_for(Duration::from_secs(10), "negotiation error", || match conn
        .transact(Vec::new(), common::patience(Duration::from_secs(5)))
    {
        Err(e @ OfError::Negotiation { .. }) => Some(e),
        _ => None,
    });
    let text = err.to_string();
    assert!(
        text.ends_with(
            "the bridge does not allow OpenFlow15 (it offers OpenFlow10,OpenFlow13); add it to \
             the bridge's protocols, e.g. `ovs-vsctl set bridge <bridge> \
             protocols=OpenFlow10,OpenFlow15`"
        ),
        "{text}"
    );
    assert!(!conn.state().0);
}

#[test]
fn no_flood_is_reapplied_to_a_port_that_comes_back_late() {
    if !privileged("no_flood_is_reapplied_to_a_port_that_comes_back_late") {
        return;
    }
    let sb = sandbox();
    let tc0 = add_internal_port(&sb, "tc0");
    let of = start(&sb, 1);
    of.set_no_flood(tc0, true).unwrap();
    assert_eq!(no_flood_ports(&sb), vec![format!("{tc0}(tc0)")]);
    // The port is gone while ovs-vswitchd is down (--no-wait: nobody applies the change),
    // so after the restart the replay finds no port and must keep trying.
    sb.kill9("ovs-vswitchd");
    sb.vsctl(&["--no-wait", "del-port", "br-int", "tc0"]);
    sb.start_vswitchd();
    of.reconnects()
        .recv_timeout(common::patience(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(no_flood_ports(&sb), Vec::<String>::new());
    let request = format!("ofport_request={tc0}");
    sb.vsctl(&[
        "add-port",
        "br-int",
        "tc0",
        "--",
        "set",
        "Interface",
        "tc0",
        "type=internal",
        &request,
    ]);
    wait_for(
        Duration::from_secs(10),
        "no-flood on the returning port",
        || (no_flood_ports(&sb) == vec![format!("{tc0}(tc0)")]).then_some(()),
    );
    // Clearing the bit of a port that is gone again is not an error: nothing to clear.
    sb.vsctl(&["del-port", "br-int", "tc0"]);
    of.set_no_flood(tc0, false).unwrap();
}

#[test]
fn apply_many_installs_every_owner_and_isolates_a_bad_one() {
    if !privileged("apply_many_installs_every_owner_and_isolates_a_bad_one") {
        return;
    }
    let sb = sandbox();
    let of = start(&sb, 1);
    let mut tc_a = vec![cases::tcp_flow(), cases::v6_flow()];
    tc_a.extend(cases::udp_icmp_flows());
    // Three owners, one bundle: exactly what three applies install.
    let failed = of.apply_many(vec![
        (TC_A, tc_a.clone()),
        (TC_B, output_flows()),
        (EN, en_flows()),
    ]);
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(sb.dump_flows("br-int", None), all_expected());
    let a_before = of.installed(TC_A);

    // TC_A now asks for a flow the switch rejects, EN for a key TC_B holds (a conflict
    // found before sending), TC_B for one flow less: only TC_B changes, and the errors
    // name their owners.
    let bad = Flow::new(2, 200)
        .matching(MatchField::TcpDst(80))
        .actions([Action::output(1)]);
    let mut b_less = output_flows();
    b_less.pop();
    let failed = of.apply_many(vec![
        (TC_A, vec![bad]),
        (TC_B, b_less),
        (EN, vec![output_flows()[0].clone()]),
    ]);
    let names: Vec<(Owner, String)> = failed
        .iter()
        .map(|(o, e)| {
            let kind = match e {
                OfError::Switch { name, .. } => name.clone(),
                OfError::Conflict { .. } => "conflict".into(),
                other => other.to_string(),
            };
            (*o, kind)
        })
        .collect();
    assert_eq!(
        names,
        vec![
            (EN, "conflict".to_string()),
            (TC_A, "OFPBMC_BAD_PREREQ".to_string())
        ]
    );
    let mut want: Vec<String> = all_expected()
        .into_iter()
        .filter(|l| l != "cookie=0x101000000002b, table=3, priority=0 actions=NORMAL")
        .collect();
    want.sort();
    assert_eq!(sb.dump_flows("br-int", None), want);
    // The set still mirrors the switch: TC_A kept its flows, re-applying them is a no-op.
    assert_eq!(of.installed(TC_A), a_before);
    of.apply(TC_A, tc_a).unwrap();
    assert_eq!(sb.dump_flows("br-int", None), want);
}

/// A patch changes only the flows it names on a real switch, in the bundle it shares with
/// other owners' changes; a refused patch leaves the switch and the set as they were.
#[test]
fn a_patch_changes_only_its_flows_on_the_switch() {
    if !privileged("a_patch_changes_only_its_flows_on_the_switch") {
        return;
    }
    let sb = sandbox();
    let of = start(&sb, 1);
    // The replay after the first connect counts its flow mods too: wait for it (CI, under
    // load, saw it land between the two counts).
    of.reconnects()
        .recv_timeout(common::patience(Duration::from_secs(10)))
        .expect("the first replay");
    let port = |p: u32, out: u32| {
        Flow::new(2, 200)
            .matching(MatchField::InPort(p))
            .actions([Action::output(out)])
    };
    let many: Vec<Flow> = (1..=200).map(|p| port(p, 1000)).collect();
    of.apply(TC_A, many.clone()).unwrap();
    let before = of.counts().flow_mods;
    // 201 added, 7 changed, 9 removed; TC_B replaced in the same bundle.
    let failed = of.change_many(vec![
        (
            TC_A,
            FlowChange::Patch {
                add: vec![port(201, 1000), port(7, 1007)],
                remove: vec![port(9, 1000).key],
            },
        ),
        (TC_B, FlowChange::Replace(vec![port(300, 1300)])),
    ]);
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(of.counts().flow_mods - before, 4, "one mod per change");
    let mut want: Vec<Flow> = many
        .iter()
        .filter(|f| **f != port(9, 1000) && **f != port(7, 1000))
        .cloned()
        .chain([port(201, 1000), port(7, 1007)])
        .collect();
    want.sort();
    assert_eq!(of.installed(TC_A), want);
    let on_switch = sb.dump_flows("br-int", None);
    assert!(
        on_switch
            .iter()
            .any(|l| l.ends_with("priority=200,in_port=7 actions=output:1007")),
        "{on_switch:?}"
    );
    assert!(
        !on_switch.iter().any(|l| l.contains("in_port=9 ")),
        "{on_switch:?}"
    );
    assert!(
        on_switch
            .iter()
            .any(|l| l.ends_with("priority=200,in_port=201 actions=output:1000"))
    );
    assert!(
        on_switch
            .iter()
            .any(|l| l.ends_with("priority=200,in_port=300 actions=output:1300"))
    );
    // TC_A's 200 flows and TC_B's one, besides the table-miss flow.
    assert_eq!(on_switch.len(), 202, "{on_switch:?}");
    // The whole list applied again is nothing to do: the set mirrors the switch.
    let before = of.counts().flow_mods;
    of.apply(TC_A, want.clone()).unwrap();
    assert_eq!(of.counts().flow_mods, before);

    // A patch the switch refuses (tcp_dst without its prerequisites): nothing changes.
    let bad = Flow::new(2, 200)
        .matching(MatchField::TcpDst(80))
        .actions([Action::output(1)]);
    let failed = of.change_many(vec![(
        TC_A,
        FlowChange::Patch {
            add: vec![bad],
            remove: vec![port(1, 1000).key],
        },
    )]);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(of.installed(TC_A), want);
    assert_eq!(sb.dump_flows("br-int", None), on_switch);
}

/// Only the daemon watches for flows others change: a tool that opens the bridge with the
/// daemon's round (`tether reset`, `check`, a second backend) leaves the daemon's flows
/// alone, and the daemon's watcher, told of the tool's change, puts its own back.
#[test]
fn a_tool_with_the_daemons_round_leaves_its_flows_alone() {
    if !privileged("a_tool_with_the_daemons_round_leaves_its_flows_alone") {
        return;
    }
    let sb = sandbox();
    let mut cfg = OfFlowsConfig::new(sb.dir().join("br-int.mgmt"), "br-int", 7);
    cfg.watch_drift = true;
    let daemon = OfFlows::start(cfg).unwrap();
    daemon
        .wait_connected(common::patience(Duration::from_secs(10)))
        .unwrap();
    daemon.apply(TC_A, output_flows()).unwrap();
    let before = sb.dump_flows("br-int", None);
    let tool = start(&sb, 7);
    // Well past the watcher's settle time, several times over.
    std::thread::sleep(common::patience(Duration::from_millis(1500)));
    assert_eq!(sb.dump_flows("br-int", None), before);
    assert_eq!(tool.counts().drift_repairs, 0);
    assert_eq!(daemon.counts().drift_repairs, 0);
    // The tool deletes one of the daemon's flows (as reset does, by cookie): the daemon's
    // watcher notices and installs it again.
    tool.bundle(vec![tether::openflow::flowmod::FlowMod::delete_by_cookie(
        cookie(7, TC_A.category, TC_A.object),
        u64::MAX,
    )])
    .unwrap();
    // Counted once the repair's bundle is committed, so the count is waited for too.
    wait_for(Duration::from_secs(5), "the daemon's flows back", || {
        (daemon.counts().drift_repairs == 1 && sb.dump_flows("br-int", None) == before)
            .then_some(())
    });
    assert_eq!(daemon.counts().drift_repairs, 1);
}
