//! Redirect TrafficControls: through a middlebox and back, a target shared with a Mirror
//! and a changed return port, and OVS internal ports bridged by a middlebox.

use super::*;

#[test]
fn redirect_through_a_middlebox_and_back() {
    if !privileged("redirect_through_a_middlebox_and_back") {
        return;
    }
    let bed = bed_with_pods();
    // The middlebox: a hub (bridge without learning) between the target and return ports.
    let mb = bed.add_collector(&["tgt0", "ret0"]);
    mb.ip(&["link", "add", "hub", "type", "bridge", "ageing_time", "0"]);
    for dev in ["eth0", "eth1", "hub"] {
        if dev != "hub" {
            mb.ip(&["link", "set", dev, "master", "hub"]);
        }
        mb.ip(&["link", "set", dev, "up"]);
    }
    let _t = start(&bed, "tether.log");
    bed.write(
        "tc.yaml",
        &tc_yaml(
            "redir",
            "Both",
            "Redirect",
            "device: {name: tgt0}",
            Some("device: {name: ret0}"),
        ),
    );
    let ret = bed.wait_flows("return-port flow", |f| {
        f.iter().any(|l| l.contains("set_field:0x6/0xf->reg0"))
    });
    let r = bed.ofport("ret0");
    assert!(
        ret.iter().any(|l| l.ends_with(&format!(
            "priority=200,in_port={r} actions=set_field:0x6/0xf->reg0,goto_table:70"
        ))),
        "{ret:#?}"
    );
    let to_target = Capture::start(
        &mb,
        "eth0",
        "icmp and host 203.0.113.1",
        bed.sb.path("t.txt"),
    );
    let back = Capture::start(
        &mb,
        "eth1",
        "icmp and host 203.0.113.1",
        bed.sb.path("r.txt"),
    );
    let to_pb = Capture::start(
        &bed.pods[1].ns,
        "eth0",
        "icmp[icmptype] == icmp-echo",
        bed.sb.path("b.txt"),
    );
    assert_eq!(
        bed.ping(0, 1, 5),
        5,
        "redirected traffic comes back and is delivered"
    );
    let (t, r, b) = (to_target.count(), back.count(), to_pb.count());
    assert_eq!(
        (t, r, b),
        (10, 10, 5),
        "target and return see requests and replies; pb gets each request once"
    );
    // Both TC ports are kept out of flooding.
    for p in ["tgt0", "ret0"] {
        assert!(bed.no_flood(p), "{p}: {:?}", bed.of10_port_block(p));
    }
}

#[test]
fn shared_target_and_return_port_change() {
    if !privileged("shared_target_and_return_port_change") {
        return;
    }
    let bed = bed_with_pods();
    let _c = bed.add_collector(&["shared0", "r1", "r2"]);
    let _t = start(&bed, "tether.log");
    let two = format!(
        "{}---\n{}",
        tc_yaml("one", "Egress", "Mirror", "device: {name: shared0}", None),
        tc_yaml(
            "two",
            "Ingress",
            "Redirect",
            "device: {name: shared0}",
            Some("device: {name: r1}")
        )
    );
    bed.write("tcs.yaml", &two);
    bed.wait_flows("return flow of r1", |f| {
        f.iter().any(|l| l.contains("0x6/0xf"))
    });
    assert_eq!(
        port_names(&bed),
        vec!["r1", "shared0", "veth-pa", "veth-pb"]
    );
    // two's return port moves to r2: r1 (and its Classifier flow) must go.
    bed.write(
        "tcs.yaml",
        &format!(
            "{}---\n{}",
            tc_yaml("one", "Egress", "Mirror", "device: {name: shared0}", None),
            tc_yaml(
                "two",
                "Ingress",
                "Redirect",
                "device: {name: shared0}",
                Some("device: {name: r2}")
            )
        ),
    );
    let f = bed.wait_flows("return flow moved to r2", |f| {
        let r2 = bed
            .sb
            .try_vsctl(&["get", "Interface", "r2", "ofport"])
            .unwrap_or_default();
        let r2 = r2.trim();
        f.iter().filter(|l| l.contains("0x6/0xf")).count() == 1
            && f.iter()
                .any(|l| l.contains(&format!("in_port={r2} actions=set_field:0x6/0xf")))
    });
    common::wait_for(Duration::from_secs(10), "r1 deleted", || {
        (!port_names(&bed).contains(&"r1".to_string())).then_some(())
    });
    // Deleting "one" keeps the shared target: "two" still uses it.
    bed.write(
        "tcs.yaml",
        &tc_yaml(
            "two",
            "Ingress",
            "Redirect",
            "device: {name: shared0}",
            Some("device: {name: r2}"),
        ),
    );
    bed.wait_flows("one's flows gone", |f| {
        f.iter()
            .filter(|l| l.contains("table=80, priority=200"))
            .count()
            == 1
    });
    assert!(port_names(&bed).contains(&"shared0".to_string()), "{f:#?}");
    bed.remove("tcs.yaml");
    common::wait_for(
        Duration::from_secs(10),
        "last user gone → ports deleted",
        || (port_names(&bed) == vec!["veth-pa", "veth-pb"]).then_some(()),
    );
    assert!(bed.tc_flows().is_empty());
}

/// A Redirect TC whose target and return ports are both `ovsInternal`, with a middlebox
/// bridging them as the IDS cookbook's Suricata does (here a Linux bridge between the two
/// netdevs in the OVS namespace): ping works through it, and every packet went through
/// the middlebox.
#[test]
fn redirect_through_ovs_internal_ports_and_a_middlebox() {
    if !privileged("redirect_through_ovs_internal_ports_and_a_middlebox") {
        return;
    }
    let bed = bed_with_pods();
    let _t = start(&bed, "tether.log");
    bed.write(
        "tc.yaml",
        &tc_yaml(
            "redirect-to-local",
            "Both",
            "Redirect",
            "ovsInternal: {name: tap-in}",
            Some("ovsInternal: {name: tap-out}"),
        ),
    );
    bed.wait_flows("return-port flow", |f| {
        f.iter().any(|l| l.contains("set_field:0x6/0xf->reg0"))
    });
    for dev in ["tap-in", "tap-out"] {
        common::wait_for(Duration::from_secs(10), &format!("{dev} up"), || {
            link_up(&bed, dev).then_some(())
        });
    }
    let vm = bed.sb.ns();
    vm.ip(&["link", "add", "mb", "type", "bridge", "ageing_time", "0"]);
    vm.ip(&["link", "set", "tap-in", "master", "mb"]);
    vm.ip(&["link", "set", "tap-out", "master", "mb"]);
    vm.ip(&["link", "set", "mb", "up"]);
    let through = Capture::start(
        vm,
        "tap-in",
        "icmp and host 203.0.113.1",
        bed.sb.path("m.txt"),
    );
    assert_eq!(
        bed.ping(0, 1, 5),
        5,
        "redirected traffic comes back through the middlebox"
    );
    assert_eq!(
        through.count(),
        10,
        "requests and replies went through the middlebox"
    );
}
