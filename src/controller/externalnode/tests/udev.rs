//! What udev does to the devices of a takeover: a host port whose MAC it rewrote rolls back,
//! and a late altname neither blocks the host port nor the rename back.

use super::*;

/// A host port whose kernel MAC is not the NIC's (udev rewrote it): the takeover rolls
/// back, the error names the field, the NIC is as it was. On the kernel datapath model an
/// attached NIC's status says "verified" (uplink enslaved to ovs-system).
#[test]
fn a_host_port_that_is_not_the_nics_stand_in_rolls_back() {
    let fx0 = fixture();
    let sim = Arc::new(Sim {
        links: fx0.links.clone(),
        udev_mac: Some([2, 0, 0, 0, 0, 0x99]),
        ..Sim::default()
    });
    sim.bridge.add_port("br-int", &[], None);
    let dp = Arc::new(FakeDatapath {
        sim: sim.clone(),
        calls: Mutex::new(Vec::new()),
    });
    let ctl = new_controller(&sim, &fx0.flows, &dp, &fx0.stores, &fx0.links);
    let before = nic_state(&fx0.links, fx0.eth1);
    set_en(&fx0, Some(en("vm1", "", &["192.0.2.10"])));
    let err = ctl.sync().unwrap_err().to_string();
    assert!(
        err.contains(
            "host port eth1 is not the NIC's stand-in after the takeover: host port MAC (kernel) is 02:00:00:00:00:99 (want 02:00:00:00:01:10)"
        ),
        "{err}"
    );
    assert_eq!(nic_state(&fx0.links, fx0.eth1), before);
    assert!(fx0.links.link_by_name("eth1~").is_err());

    let fx = kernel_fixture();
    fx.take_over(&["192.0.2.10"]);
    assert_eq!(fx.ctl.status().identity.as_deref(), Some("verified"));
}

/// systemd-udevd gives the renamed NIC its old predictable name as an altname on the
/// rename's "move" event, a moment later: after the rename step has looked (and removed one
/// already there), before OVS makes the host port's device, which the kernel then refuses
/// ("File exists", ofport -1). Seen in the kernel tier's reboot scenario, where it left the
/// VM cut off: the rollback could not rename the NIC back onto its own altname either. Now
/// the takeover removes the altname and has the host port made again; and a rollback
/// renames onto the NIC's own altname by removing it first.
#[test]
fn a_late_udev_altname_neither_blocks_the_host_port_nor_the_rename_back() {
    let fx = fixture();
    let before = fx.nic_now();
    fx.sim.udev_late_altname.store(true, Ordering::SeqCst);
    fx.take_over(ETH1_IPS);
    assert_attached(&fx);
    let uplink = fx.links.link_by_index(fx.eth1).unwrap();
    assert_eq!(uplink.altnames, Vec::<String>::new());
    let host = fx.links.link_by_name("eth1").unwrap();
    assert_ne!(host.index, fx.eth1);
    assert!(
        fx.links
            .calls()
            .contains(&Call::DelAltname(fx.eth1, "eth1".into())),
        "{:?}",
        fx.links.calls()
    );
    fx.delete_en();
    assert_pristine(&fx, &before);

    // The altname cannot be removed then (the takeover fails with it in place): the
    // rollback's rename back must not stall on it.
    let fx = fixture();
    let before = fx.nic_now();
    fx.sim.udev_late_altname.store(true, Ordering::SeqCst);
    fx.links.fail_call(
        // the rename's three changes (down, name, up), then the altname's removal
        3,
        LinkError::Permission {
            what: "injected".into(),
            errno: 1,
        },
    );
    fx.want(ETH1_IPS);
    let e = fx.ctl.sync().unwrap_err();
    assert!(
        matches!(&e, EnError::RolledBack { error, rollback, .. }
            if rollback.is_empty() && error.to_string().contains("remove altname eth1 of eth1~")),
        "{e}"
    );
    for a in fx.links.addrs(Some(fx.eth1)).unwrap() {
        if a.label.as_deref() == Some("eth1~") {
            fx.links.del_addr(&a).unwrap();
            let mut b = a.clone();
            b.label = Some("eth1".into());
            fx.links.add_addr(&b).unwrap();
        }
    }
    assert_pristine(&fx, &before);
}

/// A link renamed onto its own altname: the altname goes first (the kernel refuses the
/// rename otherwise, as onto any name in use).
#[test]
fn a_rename_onto_the_links_own_altname_removes_it_first() {
    let fx = fixture();
    fx.links.add_altname(fx.eth1, "lan0");
    let l = fx.links.rename(fx.eth1, "lan0").unwrap();
    assert_eq!((l.name.as_str(), l.altnames.len()), ("lan0", 0));
}
