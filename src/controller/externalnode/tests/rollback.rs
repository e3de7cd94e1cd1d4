//! A takeover that fails at any kernel call, OVS step, record write or flow install is
//! rolled back: the NIC is exactly as before, and the next attempt succeeds.

use super::*;

/// How many changing kernel calls a successful takeover makes.
fn takeover_link_calls() -> usize {
    let fx = fixture_ipv6_on();
    fx.take_over(ETH1_IPS);
    fx.links
        .calls()
        .iter()
        .filter(|c| !matches!(c, Call::Pause(_)))
        .count()
}

#[test]
fn a_kernel_failure_at_every_takeover_call_rolls_back() {
    let n = takeover_link_calls();
    assert!(n >= 10, "{n}");
    for k in 0..n {
        let fx = fixture_ipv6_on();
        let before = fx.nic_now();
        let sysctls = crate::netlink::read_sysctls(fx.links.as_ref(), "eth1").unwrap();
        fx.want(ETH1_IPS);
        fx.links.fail_call(
            k,
            LinkError::Permission {
                what: format!("injected failure {k}"),
                errno: 1,
            },
        );
        let e = fx.ctl.sync().unwrap_err();
        assert!(
            matches!(&e, EnError::RolledBack { rollback, .. } if rollback.is_empty()),
            "call {k}: {e}"
        );
        // The kernel renames an address's label with its link (inetdev_changename, seen
        // in tests/netlink_kernel.rs); the fake does not, so undo that here.
        for a in fx.links.addrs(Some(fx.eth1)).unwrap() {
            if a.label.as_deref() == Some("eth1~") {
                fx.links.del_addr(&a).unwrap();
                let mut b = a.clone();
                b.label = Some("eth1".into());
                fx.links.add_addr(&b).unwrap();
            }
        }
        assert_pristine(&fx, &before);
        assert_eq!(
            crate::netlink::read_sysctls(fx.links.as_ref(), "eth1").unwrap(),
            sysctls,
            "call {k}: the NIC's sysctls (the uplink's IPv6 among them)"
        );
        // And the next attempt succeeds.
        fx.ctl.sync().unwrap();
        assert_attached(&fx);
    }
}

#[test]
fn an_ovs_failure_at_every_takeover_step_rolls_back() {
    // Uplink port refused, host port refused (ofport -1), flows refused.
    for case in ["uplink", "host", "flows"] {
        let fx = fixture();
        let before = fx.nic_now();
        fx.want(ETH1_IPS);
        match case {
            "uplink" => {
                fx.sim.bridge.refuse.lock().unwrap().insert(
                    "eth1~".into(),
                    "could not open network device eth1~ (No such device)".into(),
                );
            }
            "host" => {
                fx.sim.bridge.refuse.lock().unwrap().insert(
                    "eth1".into(),
                    "could not open network device eth1 (Invalid argument)".into(),
                );
            }
            _ => *fx.flows.fail_owner.lock().unwrap() = Some(|o| o.object != 0),
        }
        let e = fx.ctl.sync().unwrap_err();
        assert!(matches!(&e, EnError::RolledBack { .. }), "{case}: {e}");
        assert_pristine(&fx, &before);
    }
    // A record write failing at each step (OVSDB gone mid-way).
    for k in 0..4 {
        let fx = fixture();
        let before = fx.nic_now();
        fx.want(ETH1_IPS);
        *fx.sim.fail_write.lock().unwrap() = Some(k);
        let e = fx.ctl.sync().unwrap_err();
        assert!(e.to_string().contains("record step"), "write {k}: {e}");
        assert_pristine(&fx, &before);
    }
}

#[test]
fn flows_failure_after_the_move_gives_the_addresses_back() {
    // Antrea F8: its rollback left the VM without addresses.
    let fx = fixture();
    let before = fx.nic_now();
    fx.want(ETH1_IPS);
    *fx.flows.fail_owner.lock().unwrap() = Some(|o| o.object != 0);
    let e = fx.ctl.sync().unwrap_err();
    assert!(
        e.to_string()
            .starts_with("taking over eth1 failed: uplink flows eth1<->eth1~"),
        "{e}"
    );
    assert_pristine(&fx, &before);
    *fx.flows.fail_owner.lock().unwrap() = None;
    fx.ctl.sync().unwrap();
    assert_attached(&fx);
}
