//! Takeover, traffic, update, move and exact restore of the NIC, and a NIC name of the
//! kernel's maximum length end to end.

use super::*;

/// Takeover → v4/v6 ping and TCP through OVS (flow counters) → add an IP → kill -9
/// ovs-vswitchd and replay → move to eth2 (eth1 restored exactly) → delete (eth2
/// restored exactly).
#[test]
fn takeover_traffic_update_move_and_exact_restore() {
    if !privileged("takeover_traffic_update_move_and_exact_restore") {
        return;
    }
    let (sb, peer) = setup();
    let vm = sb.ns();
    let eth1_before = snapshot(vm, "eth1");
    let eth2_before = snapshot(vm, "eth2");
    assert_clean_ping(&peer, "192.0.2.10");

    let mut agent = Agent::start_and_sync(&sb, Some("en - 192.0.2.10,2001:db8:1::10"));
    neutralise_uplink(vm, "eth1~", true);

    // OVSDB: the two ports as Antrea writes them, and no step left in flight.
    assert_eq!(
        port_ids(&sb, "eth1~"),
        json!(["map", [["antrea-type", "uplink"]]])
    );
    assert_eq!(
        port_ids(&sb, "eth1"),
        host_ids(&sb, "eth1~", "192.0.2.10,2001:db8:1::10")
    );
    let iface = sb.vsctl_json("Interface", Some("eth1"), "type,mac_in_use,mtu");
    assert_eq!(
        iface["data"][0],
        json!(["internal", "02:00:00:00:01:10", 1450])
    );
    assert_eq!(bridge_record(&sb), None);
    let (host, uplink) = (ofport(&sb, "eth1"), ofport(&sb, "eth1~"));
    assert_eq!(en_flows(&sb), expected_en_flows(host, uplink));
    // The kernel: the NIC is the uplink, bare; the internal port carries the config.
    let up = snapshot(vm, "eth1~");
    assert_eq!(up["route4"], json!([]));
    let host_addrs: Vec<String> = snapshot(vm, "eth1")["addr"][0]["addr_info"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["scope"] == "global")
        .map(|a| format!("{}/{}", a["local"].as_str().unwrap(), a["prefixlen"]))
        .collect();
    assert_eq!(host_addrs, ["192.0.2.10/24", "2001:db8:1::10/64"]);

    // Traffic through OVS, both ways, proven by the pair flows' counters.
    let before = pair_packets(&sb);
    assert_clean_ping(&peer, "192.0.2.10");
    assert_clean_ping(&peer, "2001:db8:1::10");
    tcp_transfer(vm, &peer, "192.0.2.10");
    tcp_transfer(vm, &peer, "2001:db8:1::10");
    // Flow counters lag (docs/datapath.md#8-test-harness): poll until both directions
    // counted ≥ 6 pings.
    wait_for(Duration::from_secs(5), "pair flow counters", || {
        let now = pair_packets(&sb);
        let grew =
            |p: u32| now.get(&p).copied().unwrap_or(0) >= before.get(&p).copied().unwrap_or(0) + 6;
        (grew(host) && grew(uplink)).then_some(())
    });
    let st = agent.cmd("status");
    assert!(
        st.contains("step: \"attached\"") && st.contains("nic: Some(\"eth1\")"),
        "{st}"
    );

    // An IP added on the VM and to the ExternalNode: external_ids follow.
    vm.ip(&["addr", "add", "192.0.2.11/24", "dev", "eth1"]);
    agent.cmd("en - 192.0.2.10,2001:db8:1::10,192.0.2.11");
    agent.cmd("sync");
    assert_eq!(
        port_ids(&sb, "eth1"),
        host_ids(&sb, "eth1~", "192.0.2.10,192.0.2.11,2001:db8:1::10")
    );
    vm.ip(&["addr", "del", "192.0.2.11/24", "dev", "eth1"]);
    agent.cmd("en - 192.0.2.10,2001:db8:1::10");
    agent.cmd("sync");
    assert_eq!(
        port_ids(&sb, "eth1"),
        host_ids(&sb, "eth1~", "192.0.2.10,2001:db8:1::10")
    );

    // kill -9 ovs-vswitchd: its flows are gone; after the OpenFlow reconnect the daemon
    // calls replay() and the uplink flows are back with fresh ofports.
    sb.kill9("ovs-vswitchd");
    sb.start_vswitchd();
    let t = Instant::now();
    wait_for(
        Duration::from_secs(10),
        "replay after vswitchd restart",
        || agent.try_cmd("replay").ok(),
    );
    let (host, uplink) = (ofport(&sb, "eth1"), ofport(&sb, "eth1~"));
    assert_eq!(en_flows(&sb), expected_en_flows(host, uplink));
    eprintln!("uplink flows back {:?} after vswitchd restart", t.elapsed());
    assert_clean_ping(&peer, "192.0.2.10");
    assert_clean_ping(&peer, "2001:db8:1::10");

    // The EN's IP moves to eth2: eth2 is taken over, then eth1 restored exactly.
    neutralise_uplink(vm, "eth1~", false);
    agent.cmd("en - 198.51.100.10");
    agent.cmd("sync");
    // PROMISC is the one difference, and it is ovs-vswitchd's: the killed instance turned
    // it on, the restarted one found it on and "restores" it to on when it lets go of
    // the netdev. eth2 (attached after the restart) is compared with PROMISC included.
    let mut now = snapshot(vm, "eth1");
    for k in ["link", "addr"] {
        let flags = now[k][0]["flags"].as_array_mut().unwrap();
        flags.retain(|f| f != "PROMISC");
    }
    assert_eq!(now, eth1_before);
    assert_eq!(
        port_ids(&sb, "eth2"),
        host_ids(&sb, "eth2~", "198.51.100.10")
    );
    assert!(sb.try_vsctl(&["get", "Port", "eth1~", "name"]).is_err());
    let out = ping(&peer, "198.51.100.10");
    assert!(out.contains("3 received"), "{out}");

    // Delete: eth2 restored exactly, nothing of ours left on the bridge.
    agent.cmd("absent");
    agent.cmd("sync");
    assert_restored(vm, "eth2", &eth2_before);
    assert_eq!(sb.vsctl(&["list-ports", "br-int"]).trim(), "");
    assert_eq!(
        en_flows(&sb),
        vec![
            "table=30, priority=200,icmp6,ipv6_dst=2001:db8:2::/48 actions=goto_table:70",
            "table=90, priority=200,tcp,nw_src=203.0.113.0/24,tp_dst=22 actions=goto_table:130"
        ]
    );
    assert_eq!(bridge_record(&sb), None);
    assert_clean_ping(&peer, "192.0.2.10");
    assert_clean_ping(&peer, "2001:db8:1::10");
}

/// A 15-byte NIC name (the kernel's maximum): `<nic>~` would not fit, so the uplink gets
/// the short form `<8 bytes>~<6 hex of sha1>`; the internal port keeps the full name.
#[test]
fn a_15_byte_nic_name_end_to_end() {
    if !privileged("a_15_byte_nic_name_end_to_end") {
        return;
    }
    const NIC: &str = "enp0s31f6abcdef";
    let uplink = tether::netlink::uplink_name(NIC);
    assert_eq!(uplink.len(), 15);
    let sb = Sandbox::start();
    sb.add_bridge("br-int");
    let peer = common::Netns::new("peer");
    let vm = sb.ns();
    for ns in [vm, &peer] {
        ns.sh("sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0");
    }
    vm.veth_to(NIC, &peer, "eth0");
    vm.ip(&["addr", "add", "203.0.113.10/24", "dev", NIC]);
    peer.ip(&["addr", "add", "203.0.113.1/24", "dev", "eth0"]);
    let before = snapshot(vm, NIC);

    let mut agent = Agent::start_and_sync(&sb, Some("en - 203.0.113.10"));
    assert_eq!(
        json_of(&vm.ip(&["-j", "link", "show", "dev", &uplink]))[0]["ifname"],
        json!(uplink)
    );
    let iface = sb.vsctl_json("Interface", Some(NIC), "name,type,ofport");
    assert_eq!(iface["data"][0][0], json!(NIC));
    assert_eq!(iface["data"][0][1], json!("internal"));
    assert!(iface["data"][0][2].as_i64().unwrap() > 0);
    neutralise_uplink(vm, &uplink, true);
    assert_clean_ping(&peer, "203.0.113.10");
    neutralise_uplink(vm, &uplink, false);
    agent.cmd("absent");
    agent.cmd("sync");
    assert_restored(vm, NIC, &before);
}
