//! Giving the NIC back: exactly as it was (with what was added meanwhile), a lingering host
//! netdev removed through the datapath, an uplink already gone, and — on the kernel
//! datapath model — renamed back only once the datapath has let it go.

use super::*;

#[test]
fn delete_restores_the_nic_exactly() {
    let fx = fixture();
    let before = fx.nic_now();
    fx.take_over(ETH1_IPS);
    assert_attached(&fx);
    fx.delete_en();
    assert_pristine(&fx, &before);
    assert_eq!(fx.ctl.status().step, "waiting");
    assert!(fx.dp.calls.lock().unwrap().is_empty());
    // The bypass flows stay: they belong to the config, not to the EN.
    assert_eq!(fx.flows.of(Owner::new(Category::EXTERNAL_NODE, 0)).len(), 1);
}

#[test]
fn an_address_added_while_attached_goes_back_with_the_nic() {
    let fx = fixture();
    fx.take_over(&["192.0.2.10"]);
    let host = fx.links.link_by_name("eth1").unwrap();
    add_addr(&fx.links, host.index, "192.0.2.11", 24, Some("eth1"));
    fx.delete_en();
    let (l, addrs, _) = nic_state(&fx.links, fx.eth1);
    assert_eq!(l.name, "eth1");
    let locals: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
    assert_eq!(
        locals,
        ["192.0.2.10/24", "192.0.2.11/24", "2001:db8:1::10/64"]
    );
}

#[test]
fn a_lingering_host_netdev_is_removed_through_the_datapath() {
    let fx = fixture();
    let before = fx.nic_now();
    fx.take_over(&["192.0.2.10"]);
    fx.sim.linger.store(true, Ordering::SeqCst);
    fx.delete_en();
    assert_eq!(*fx.dp.calls.lock().unwrap(), ["eth1"]);
    assert_pristine(&fx, &before);
    // It polled the way Antrea does (every 50 ms, 2 s) before asking the datapath.
    let pauses = fx
        .links
        .calls()
        .iter()
        .filter(|c| matches!(c, Call::Pause(_)))
        .count();
    assert_eq!(pauses, 40);
}

#[test]
fn the_uplink_already_gone_only_deletes_the_ports() {
    // Antrea #5111: a NIC given back by hand (or an earlier attempt) is not restored again.
    let fx = fixture();
    fx.take_over(&["192.0.2.10"]);
    let host = fx.links.link_by_name("eth1").unwrap();
    fx.links.remove_link(host.index);
    fx.links.set_name(fx.eth1, "eth9").unwrap();
    fx.delete_en();
    assert_eq!(port_names(&fx), vec!["br-int".to_string()]);
    assert!(pair_flows(&fx).is_empty());
}

/// Kernel datapath model: the uplink is enslaved to `ovs-system` until ovs-vswitchd has
/// applied the delete. A restore (and a rollback at every takeover step) renames it back
/// only once it has no master, and the NIC ends exact. (Before: deleted without waiting,
/// renamed back while still a datapath port: the NIC kept its master.)
#[test]
fn the_nic_is_renamed_back_only_once_the_datapath_let_it_go() {
    let fx = kernel_fixture();
    let before = fx.nic_now();
    fx.take_over(ETH1_IPS);
    let up = fx.links.link_by_index(fx.eth1).unwrap();
    assert_eq!(up.name, "eth1~");
    assert_eq!(up.master, fx.sim.kernel, "attached: enslaved to ovs-system");
    fx.delete_en();
    assert_eq!(fx.links.link_by_index(fx.eth1).unwrap().master, None);
    assert_pristine(&fx, &before);

    // A datapath that keeps the port after the delete was applied: dpctl/del-if first.
    fx.sim.stuck.store(true, Ordering::SeqCst);
    fx.dp.calls.lock().unwrap().clear();
    fx.take_over(ETH1_IPS);
    fx.delete_en();
    assert_eq!(*fx.dp.calls.lock().unwrap(), ["eth1~"]);
    assert_pristine(&fx, &before);

    // One that never lets go: the NIC is not renamed back, the error names it, and the
    // record stays for the next sync, which finishes once the datapath lets go.
    fx.sim.held.store(true, Ordering::SeqCst);
    fx.take_over(ETH1_IPS);
    set_en(&fx, None);
    let err = fx.ctl.sync().unwrap_err().to_string();
    assert!(
        err.contains("eth1~ is still enslaved to ovs-system (a datapath port)"),
        "{err}"
    );
    let up = fx.links.link_by_index(fx.eth1).unwrap();
    assert_eq!(up.name, "eth1~", "not renamed while held");
    assert!(fx.sim.bridge_external_id(RECORD_KEY).unwrap().is_some());
    fx.sim.held.store(false, Ordering::SeqCst);
    fx.ctl.sync().unwrap();
    assert_pristine(&fx, &before);
}

/// The same for a rollback at every OVS step of a takeover on the kernel datapath model.
#[test]
fn a_rollback_at_every_step_renames_only_a_released_nic() {
    for step in 0..8 {
        let fx = kernel_fixture();
        fx.sim.stuck.store(step % 2 == 1, Ordering::SeqCst);
        let before = fx.nic_now();
        *fx.sim.fail_write.lock().unwrap() = Some(step / 2);
        fx.want(ETH1_IPS);
        let _ = fx.ctl.sync();
        let l = fx.links.link_by_index(fx.eth1).unwrap();
        assert_eq!(l.master, None, "step {step}: {l:?}");
        *fx.sim.fail_write.lock().unwrap() = None;
        if l.name == "eth1" {
            assert_pristine(&fx, &before);
        }
    }
}
