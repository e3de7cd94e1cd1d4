//! What outlives a restart: tether's state rebuilt from OVSDB, flows replayed after
//! ovs-vswitchd restarts, ports that outlived a reboot replaced, and a host port re-created
//! by a module reload given the held configuration back.

use super::*;

#[test]
fn replay_reinstalls_flows_with_fresh_ofports() {
    let fx = fixture();
    fx.take_over(&["192.0.2.10"]);
    // ovs-vswitchd restarted: no flows, ports renumbered.
    fx.flows.owners.lock().unwrap().clear();
    for p in fx.sim.bridge.ports.lock().unwrap().iter_mut() {
        p.ofport += 10;
    }
    fx.ctl.replay().unwrap();
    assert_attached(&fx);
    let host_of = fx.sim.bridge.port("eth1").unwrap().ofport;
    assert!(host_of > 10);
    assert_eq!(fx.flows.of(Owner::new(Category::EXTERNAL_NODE, 0)).len(), 1);
}

#[test]
fn restart_rebuilds_state_from_ovsdb() {
    let fx = fixture();
    set_en(
        &fx,
        Some(en("vm1", "ens192", &["192.0.2.10", "2001:db8:1::10"])),
    );
    fx.ctl.sync().unwrap();
    fx.sim.bridge.take_log();
    fx.flows.owners.lock().unwrap().clear();
    // A new process: only OVSDB, the kernel and the store remain.
    let ctl = controller(&fx);
    ctl.recover().unwrap();
    let st = ctl.status();
    assert_eq!(st.step, "attached");
    assert_eq!(st.nic.as_deref(), Some("eth1"));
    assert_eq!(st.entity_name.as_deref(), Some("vm1-e8be5"));
    assert_eq!(st.addresses, ["192.0.2.10", "2001:db8:1::10"]);
    assert_eq!(fx.flows.of(Owner::new(Category::EXTERNAL_NODE, 0)).len(), 1);
    ctl.sync().unwrap();
    assert_eq!(fx.sim.bridge.take_log(), Vec::<String>::new());
    assert_attached(&fx);
}

#[test]
fn ports_that_outlived_a_reboot_are_replaced() {
    // Antrea #4122: after a reboot OVS still has eth1~ and eth1, the kernel has a plain
    // eth1 with its addresses and no eth1~.
    let fx = fixture();
    fx.take_over(ETH1_IPS);
    let host = fx.links.link_by_name("eth1").unwrap();
    fx.links.remove_link(host.index);
    fx.links.set_name(fx.eth1, "eth1").unwrap();
    add_addr(&fx.links, fx.eth1, "192.0.2.10", 24, Some("eth1"));
    add_addr(&fx.links, fx.eth1, "2001:db8:1::10", 64, None);
    add_gw(&fx.links, fx.eth1, "192.0.2.1", 100);
    fx.sim.bridge.take_log();
    fx.sim.internal.lock().unwrap().clear();
    let ctl = controller(&fx);
    ctl.recover().unwrap();
    ctl.sync().unwrap();
    assert_eq!(
        fx.sim.bridge.take_log(),
        [
            "delete eth1~,eth1",
            "create eth1~ system",
            "create eth1 internal"
        ]
    );
    let (l, addrs, _) = nic_state(&fx.links, fx.eth1);
    assert_eq!(l.name, "eth1~");
    assert!(addrs.is_empty());
    assert_eq!(pair_flows(&fx).len(), 1);
}

fn held(fx: &Fx, nic: &str) -> Option<String> {
    fx.sim
        .bridge
        .bridge_ids
        .lock()
        .unwrap()
        .get(&format!("tether-held:{nic}"))
        .cloned()
}

/// A link's addresses and routes as they would be on any device (indexes left out).
fn config_of(links: &FakeLinks, index: u32) -> (Vec<String>, Vec<String>) {
    let (_, addrs, routes) = nic_state(links, index);
    (
        addrs
            .iter()
            .map(|a| format!("{}/{}", a.local, a.prefix_len))
            .collect(),
        routes
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r.oif = 0;
                r.to_string()
            })
            .collect(),
    )
}

/// The openvswitch module reloaded (`ovs-ctl force-reload-kmod`): the host port is a new
/// device with nothing on it, not even the NIC's MTU or sysctls, and no link holds the
/// ExternalNode's IPs. The held configuration, recorded at the takeover and kept in
/// OVSDB, goes back on it, and stays what it must carry for a while: what a restore
/// script flushes after that comes back at the next look, which the controller asks
/// for. A restore gives the NIC back and forgets it.
#[test]
fn a_recreated_host_port_gets_the_held_configuration_back() {
    let fx = fixture_ipv6_on();
    fx.links
        .put_sysctl(fx.eth1, DevSysctl::Ipv4ArpAnnounce, "2");
    fx.links.set_default_sysctl(DevSysctl::Ipv4ArpAnnounce, "0");
    let before = fx.nic_now();
    fx.take_over(ETH1_IPS);
    assert_attached(&fx);
    let host = fx.links.link_by_name("eth1").unwrap();
    let attached = config_of(&fx.links, host.index);
    assert_eq!(attached.0, ["192.0.2.10/24", "2001:db8:1::10/64"]);
    let raw = held(&fx, "eth1").expect("held after the takeover");
    assert!(raw.contains("\"192.0.2.10\""), "{raw}");
    assert_eq!(fx.ctl.recheck_after(), None);

    // The module reloads: a new, empty device of the same name, with default settings and
    // a new index (the kernel never hands an index out twice in a namespace; the fake
    // reuses the highest, hence the link in between).
    fx.links.remove_link(host.index);
    fx.links
        .add_link("spacer", [2, 0, 0, 0, 0, 0x99], 1500, false);
    let new = fx.links.add_link("eth1", MAC1, 1500, true);
    assert_ne!(new, host.index);
    assert!(fx.links.link_holding(ip("192.0.2.10")).unwrap().is_none());
    fx.ctl.sync().unwrap();
    assert_eq!(config_of(&fx.links, new), attached);
    let now = fx.links.link_by_index(new).unwrap();
    assert_eq!(now.mtu, 1450);
    let sysctl = |k| fx.links.sysctl("eth1", k).unwrap().unwrap();
    assert_eq!(sysctl(DevSysctl::Ipv4ArpAnnounce), "2");
    assert_eq!(
        fx.ctl.recheck_after(),
        Some(std::time::Duration::from_secs(2))
    );

    // A restore script then flushes the routes and re-adds only part of them: the next
    // look (within the window) puts the rest back, rather than recording the loss.
    for r in nic_state(&fx.links, new).2 {
        if r.gateway.is_some_and(|g| g.is_ipv6()) {
            fx.links.del_route(&r).unwrap();
        }
    }
    fx.ctl.sync().unwrap();
    assert_eq!(config_of(&fx.links, new), attached);
    assert!(
        held(&fx, "eth1")
            .unwrap()
            .contains(&format!("\"ifindex\":{new}"))
    );

    // The ExternalNode deleted: the NIC gets everything back, and nothing stays held.
    fx.delete_en();
    assert_pristine(&fx, &before);
    assert_eq!(held(&fx, "eth1"), None);
}
